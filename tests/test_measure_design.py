"""Short forms (compress) and adaptive tests against a bank built from a simulated truth.

The bank is built without a fit: its posterior draws are the simulator's truth plus small
noise (D = 20 draws), which is all the design functions read.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bayes_dualeval.core import item_ids
from bayes_dualeval.core.errors import InputError
from bayes_dualeval.core.thinning import evenly_spaced
from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.measure import anchors, grid, information
from bayes_dualeval.measure.adaptive import adaptive
from bayes_dualeval.measure.bank import Bank
from bayes_dualeval.measure.compress import compress, item_information
from bayes_dualeval.measure.information import fisher_information
from bayes_dualeval.measure.responses import Responses
from bayes_dualeval.model import links
from bayes_dualeval.model.config import ModelConfig
from bayes_dualeval.model.simulate import simulate
from bayes_dualeval.model.spec import DualEvalModel

N_BANK, N_NEW, N_DRAWS = 12, 6, 20


def _truth_key(item: str, kind: str) -> str:
    """The simulator's id of a dataset item (static questions all sit in source bench)."""
    name = item.split(item_ids.SEPARATOR, 1)[1]
    return f"bench{item_ids.SEPARATOR}{name}" if kind == "static" else item


def _world(seed: int = 3):
    static, arena, truth = simulate(
        n_models=N_BANK + N_NEW, n_static=240, n_arena=30, n_domains=3,
        log_a_mean=0.5, log_a_sd=0.2, seed=seed,
    )  # fmt: skip
    # two static sources of unequal size (math: bench; code and writing: quiz)
    static["source"] = np.where(static["domain"] == "math", "bench", "quiz")
    arena["source"] = "arena"
    names = list(truth["theta"])
    bank_names, new_names = names[:N_BANK], names[N_BANK:]
    ds = Dataset.from_frames(
        static[static["model_label"].isin(bank_names)],
        arena[arena["model_label"].isin(bank_names)],
    )
    kind = np.asarray(ds.item_kind, dtype=str)
    params = [truth["items"][_truth_key(q, k)] for q, k in zip(ds.items, kind, strict=True)]
    b = np.array([p["b"] for p in params])
    a = np.array([p["a"] for p in params])
    theta = np.array([truth["theta"][m] for m in ds.models])
    rng = np.random.default_rng(seed)
    theta_d = theta + rng.normal(0, 0.05, (N_DRAWS, len(theta)))
    draws = {
        "b": b + rng.normal(0, 0.05, (N_DRAWS, len(b))),
        "a": a * np.exp(rng.normal(0, 0.03, (N_DRAWS, len(a)))),
        "c": None,
        "d": None,
        "theta": theta_d,
        "theta_centred": theta_d - theta_d.mean(axis=1, keepdims=True),
        "gamma": np.ones(N_DRAWS),
        "sigma": np.ones(N_DRAWS),
    }
    bench = np.where(kind == "static", item_ids.benchmark_of(ds.items), "")
    items = pd.DataFrame(
        {"item": ds.items, "kind": kind, "source": ds.item_source, "domain": ds.item_domain,
         "dataset": bench}
    )  # fmt: skip
    bank = Bank(
        run_dir=Path("simulated"),
        model=DualEvalModel(ModelConfig().replace(irt="2pl", mode="both")),
        dataset=ds,
        items=items,
        draws=draws,
        reward_centre={},
        reward_scale={},
        tie_threshold=0.0,
        bb_threshold=-np.inf,
    )
    new = static[static["model_label"].isin(new_names)]
    new_ids = item_ids.static_ids(new["source"], new["dataset"], new["sample_index"])
    oracle = _oracle(
        bank,
        pd.Index(new_names).get_indexer(new["model_label"]),
        pd.Index(ds.items).get_indexer(new_ids),
        new["correct"].to_numpy(dtype=float),
        new_names,
    )
    return bank, oracle, {m: truth["theta"][m] for m in new_names}


def _oracle(bank, model, item, y, names) -> Responses:
    assert (item >= 0).all()
    empty = np.zeros(0, dtype=np.int64)
    return Responses(
        models=np.asarray(names, dtype=str),
        static_model=np.asarray(model, dtype=np.int64),
        static_item=np.asarray(item, dtype=np.int64),
        static_y=np.asarray(y, dtype=float),
        static_n=np.ones(len(y)),
        arena_model=empty,
        arena_item=empty,
        arena_z=np.zeros(0),
        n_skipped=0,
    )


@pytest.fixture(scope="module")
def world():
    return _world()


# ------------------------------------------------------------------------- compress
def test_compress_rows_sources_and_weights(world):
    bank = world[0]
    counts = bank.items["source"].value_counts()
    out = compress(bank, 20)
    assert len(out) == 20 and out["item"].is_unique
    assert set(out["source"]) == set(counts.index)  # bench, quiz and arena all covered
    assert set(out["kind"]) == {"static", "arena"}
    # proportional shares (largest remainders after one per source): within one item
    chosen = out["source"].value_counts()
    share = 1 + (20 - len(counts)) * (counts - 1) / (counts - 1).sum()
    assert (np.abs(chosen - share[chosen.index]) < 1.0).all()
    assert "weight" not in out  # dropped: nothing reads it (docs/validation.md 14)
    # fewer items than sources: one each from the largest sources
    assert compress(bank, 2)["source"].tolist() == counts.index[:2].sort_values().tolist()


def test_compress_per_source(world):
    bank = world[0]
    out = compress(bank, 5, per_source=True)
    assert (out["source"].value_counts() == 5).all() and out["source"].nunique() == 3
    # a source smaller than n keeps all its items (arena has 30)
    big = compress(bank, 40, per_source=True)
    assert (big["source"] == "arena").sum() == 30


def test_a_short_form_says_how_it_measures_beside_the_bank(world):
    """benchmarks.csv of a short form: fewer questions measure less, never more."""
    from bayes_dualeval.measure.compress import short_form_benchmarks

    bank = world[0]
    out = compress(bank, 20)
    table = short_form_benchmarks(bank, out, ci=0.9)
    short, full = (table[table["form"] == f].set_index("source") for f in ("short", "bank"))
    n_static = int((out["kind"] == "static").sum())
    assert short.loc["(all)", "items"] == n_static
    assert full.loc["(all)", "items"] == int((bank.items["kind"] == "static").sum())
    assert set(short.index) == set(full.index)  # every static source keeps a question
    for column in ("info_at_top", "info_peak", "reliability", "top_separated"):
        assert (short[column] <= full.loc[short.index, column] + 1e-9).all(), column
    assert 0.0 < short.loc["(all)", "reliability"] < full.loc["(all)", "reliability"] < 1.0
    assert short["verdict"].str.len().gt(0).all()


@pytest.mark.parametrize("n", [0, -1, 10_000])
def test_compress_bad_n(world, n):
    with pytest.raises(InputError, match="n_items"):
        compress(world[0], n)
    with pytest.raises(InputError, match="n_items"):
        compress(world[0], 10_000 if n > 0 else n, per_source=True)


def test_compress_beats_random_subsets(world):
    bank = world[0]
    info = item_information(bank)
    out = compress(bank, 24)
    rng = np.random.default_rng(0)
    random_means = [info[rng.choice(len(info), 24, replace=False)].mean() for _ in range(200)]
    # stratified best-per-stratum beats the average random subset by a clear margin (>20%)
    assert out["information"].mean() > 1.2 * np.mean(random_means)
    # and spreads over difficulty: in each static source, items below the lower and above
    # the upper quartile of b are chosen (the most informative items alone sit mid-range)
    for source in ("bench", "quiz"):
        chosen = out.loc[out["source"] == source, "b_mean"]
        all_b = bank.draws["b"].mean(axis=0)[bank.items["source"].to_numpy() == source]
        low, high = np.quantile(all_b, [0.25, 0.75])
        assert chosen.min() < low and chosen.max() > high


def test_kmeans_finds_separated_clusters_and_their_representatives():
    """Four well-separated blobs of unequal size: one representative each, sizes exact."""
    rng = np.random.default_rng(5)
    centres = np.array([[0.0, 0.0], [5.0, 0.0], [0.0, 5.0], [5.0, 5.0]])
    sizes = np.array([10, 20, 30, 40])
    points = np.concatenate(
        [c + rng.normal(0, 0.3, (n, 2)) for c, n in zip(centres, sizes, strict=True)]
    )
    blob = np.repeat(np.arange(4), sizes)
    labels = anchors.kmeans(points, 4, np.random.default_rng(0))
    # the partition is the blobs' (labels are a permutation of the blob ids)
    assert len({(b, lab) for b, lab in zip(blob, labels, strict=True)}) == 4
    chosen, got = anchors.representatives(points, 4, seed=0)
    assert sorted(blob[chosen]) == [0, 1, 2, 3]
    np.testing.assert_array_equal(got, sizes[blob[chosen]])
    # each representative is its blob's member nearest the blob's mean
    for i, b in zip(chosen, blob[chosen], strict=True):
        members = points[blob == b]
        assert i == np.nonzero(blob == b)[0][((members - members.mean(0)) ** 2).sum(1).argmin()]
    # k at or above n keeps every point once
    all_rows, ones = anchors.representatives(points[:3], 5, seed=0)
    assert all_rows.tolist() == [0, 1, 2] and ones.tolist() == [1, 1, 1]


def test_compress_for_accuracy_is_representative(world):
    """The chosen items are each source's cluster representatives; weighted by their
    clusters' sizes (which add up to the source's items), their mean success profile is
    close to the source's mean profile (tolerance 0.03, tighter than the informative short
    form on the same bank, weighted by n_source / n_chosen)."""
    bank = world[0]
    out = compress(bank, 24, purpose="accuracy", seed=0)
    assert len(out) == 24 and out["item"].is_unique
    ranking = compress(bank, 24)
    index = pd.Index(bank.items["item"])
    for source in ("bench", "quiz"):
        members = np.nonzero(bank.items["source"].to_numpy() == source)[0]
        profiles = anchors.success_profiles(bank, members)
        target = profiles.mean(axis=0)
        k = int((out["source"] == source).sum())
        rows, sizes = anchors.representatives(profiles, k, seed=0)
        assert sizes.sum() == len(members)
        assert set(bank.items["item"].to_numpy()[members[rows]]) == set(
            out.loc[out["source"] == source, "item"]
        )
        weight = dict(zip(bank.items["item"].to_numpy()[members[rows]], sizes, strict=True))

        n_members = len(members)

        def gap(table, source=source, target=target, weight=weight, n=n_members):
            rows = table[table["source"] == source]
            prof = anchors.success_profiles(bank, index.get_indexer(rows["item"]))
            w = rows["item"].map(weight).fillna(n / len(rows)).to_numpy()
            mean = (prof * w[:, None]).sum(0) / w.sum()
            return np.abs(mean - target).max()

        assert gap(out) < 0.03 and gap(out) < gap(ranking)
    with pytest.raises(InputError, match="purpose"):
        compress(bank, 5, purpose="speed")


def test_fisher_information_matches_definition():
    # (p')^2 / (p (1 - p)) in theta by central differences, for a 4PL item (tol 1e-6)
    theta, b, a, c, d = np.linspace(-3, 3, 13), 0.4, 1.7, 0.2, 0.9
    h = 1e-5
    prob = lambda t: links.probability(links.eta(t, b, a), c, d)  # noqa: E731
    slope = (prob(theta + h) - prob(theta - h)) / (2 * h)
    expect = slope**2 / (prob(theta) * (1 - prob(theta)))
    np.testing.assert_allclose(fisher_information(theta, b, a, c, d), expect, rtol=1e-6)
    p = links.probability(links.eta(theta, b, a))
    np.testing.assert_allclose(fisher_information(theta, b, a), a * a * p * (1 - p))


# ------------------------------------------------------------------------- adaptive
def test_adaptive_fisher_beats_random(world):
    bank, oracle, truth = world
    fisher = adaptive(bank, oracle, select="fisher", target_se=0.35, max_items=120)
    rand = adaptive(bank, oracle, select="random", target_se=0.35, max_items=120, seed=1)
    assert (fisher.summary["stopped_by"] == "se").all()
    assert (fisher.summary["theta_sd"] < 0.35).all()
    # clear margin: fisher needs at most 75% of random's questions on average
    assert fisher.summary["n_items"].mean() < 0.75 * rand.summary["n_items"].mean()
    # trace: one row per question, steps 1..n, static items, sd after the last = summary
    assert len(fisher.trace) == fisher.summary["n_items"].sum()
    last = fisher.trace.groupby("model").last()
    np.testing.assert_allclose(
        last.loc[fisher.summary["model"], "theta_sd"], fisher.summary["theta_sd"]
    )
    assert (fisher.trace["kind"] == "static").all()
    # estimates near the truth (leaderboard scale: truth minus the bank models' mean)
    centre = bank.draws["theta"].mean()
    err = fisher.summary["theta_mean"] - (fisher.summary["model"].map(truth) - centre)
    assert (np.abs(err) < 3 * 0.35 + 0.2).all()  # within 3 sd plus the bank's noise


def test_adaptive_kl_and_exposure(world):
    bank, oracle, _ = world
    one = _oracle(bank, *_first_model(oracle))
    kl = adaptive(bank, one, select="kl", target_se=0.4, max_items=40)
    assert kl.summary.loc[0, "stopped_by"] == "se"
    fisher = adaptive(bank, one, select="fisher", target_se=0.4, max_items=40)
    assert abs(kl.summary.loc[0, "n_items"] - fisher.summary.loc[0, "n_items"]) <= 4
    a = adaptive(bank, one, target_se=0.4, exposure=5, seed=0).trace["item"].tolist()
    assert a == adaptive(bank, one, target_se=0.4, exposure=5, seed=0).trace["item"].tolist()
    assert a != adaptive(bank, one, target_se=0.4, exposure=5, seed=7).trace["item"].tolist()


def _first_model(oracle):
    keep = oracle.static_model == 0
    return (
        np.zeros(keep.sum(), dtype=int),
        oracle.static_item[keep],
        oracle.static_y[keep],
        oracle.models[:1],
    )


@pytest.mark.parametrize("label", [1.0, 0.0])
def test_adaptive_all_correct_or_wrong_is_prior_bounded(world, label):
    bank, oracle, _ = world
    model, item, _, _ = _first_model(oracle)
    y = np.full(len(item), label)
    res = adaptive(bank, _oracle(bank, model, item, y, ["extreme"]), max_items=30)
    row = res.summary.iloc[0]
    assert row["stopped_by"] == "max_items" and row["n_items"] == 30
    scale, sign = bank.model.config.theta_scale, 1.0 if label else -1.0
    # an honest, prior-bounded posterior: finite sd between 0.2 and the prior's, the mean
    # well away from 0 and the interval at least one prior sd inside the grid's edge (6 sd)
    assert np.isfinite(row["theta_sd"]) and 0.2 < row["theta_sd"] < scale
    assert sign * row["theta_mean"] > 1.0
    assert max(abs(row["theta_lo"]), abs(row["theta_hi"])) < 6.0 * scale - 1.0
    # the same posterior as grid.posterior on the questions asked (tolerance 0.03)
    asked = pd.Index(bank.items["item"]).get_indexer(res.trace["item"])
    n = len(asked)
    post = grid.posterior(bank, _oracle(bank, np.zeros(n, int), asked, np.full(n, label), ["p"]))
    x = post.grids[0][None, :]  # grid.posterior's grids are on the leaderboard's scale
    w = post.weights[0] / N_DRAWS
    mean = (w * x).sum()
    sd = np.sqrt((w * x**2).sum() - mean**2)
    assert abs(mean - row["theta_mean"]) < 0.03 and abs(sd - row["theta_sd"]) < 0.03


def test_adaptive_empty_pool_and_bad_arguments(world):
    bank, oracle, _ = world
    model, item, y, _ = _first_model(oracle)
    few = _oracle(bank, model[:3], item[:3], y[:3], ["few"])
    res = adaptive(bank, few, target_se=0.01)
    assert res.summary.loc[0, "stopped_by"] == "pool" and res.summary.loc[0, "n_items"] == 3
    for kwargs in ({"target_se": 0}, {"target_se": -1}, {"max_items": 0}, {"exposure": 0},
                   {"select": "nope"}):  # fmt: skip
        with pytest.raises(InputError):
            adaptive(bank, few, **kwargs)


def test_three_pl_bank_floor_lowers_static_information(world):
    bank, oracle, _ = world
    static = (bank.items["kind"] == "static").to_numpy()
    c = np.where(static, 0.25, 0.0) * np.ones((N_DRAWS, 1))
    three = dataclasses.replace(
        bank,
        model=DualEvalModel(ModelConfig().replace(irt="3pl", mode="both")),
        draws={**bank.draws, "c": c},
    )
    info2, info3 = item_information(bank), item_information(three)
    # a guessing floor only removes information from static questions; prompts keep 2PL
    assert (info3[static] < info2[static]).all()
    np.testing.assert_allclose(info3[~static], info2[~static])
    assert len(compress(three, 15)) == 15
    res = adaptive(three, oracle, target_se=0.4, max_items=60)
    assert (res.summary["stopped_by"] == "se").all()


# ------------------------------------------------------------------ adaptive: arena
@pytest.fixture(scope="module")
def arena_oracle(world):
    """The new models' arena rewards, normalised with the bank models' mean and sd."""
    bank, oracle, _ = world
    _, arena, _ = simulate(
        n_models=N_BANK + N_NEW, n_static=240, n_arena=30, n_domains=3,
        log_a_mean=0.5, log_a_sd=0.2, seed=3,
    )  # fmt: skip
    new = arena[arena["model_label"].isin(oracle.models)]
    old = arena[~arena["model_label"].isin(oracle.models)]["reward"]
    names = [item_ids.arena_id("arena", q) for q in new["item_id"]]
    ids = pd.Index(bank.items["item"]).get_indexer(names)
    assert (ids >= 0).all()
    return dataclasses.replace(
        oracle,
        arena_model=pd.Index(oracle.models).get_indexer(new["model_label"]),
        arena_item=ids.astype(np.int64),
        arena_z=((new["reward"] - old.mean()) / old.std(ddof=0)).to_numpy(dtype=float),
    )


def test_arena_information_is_the_curvature_of_the_expected_pair_terms(world):
    bank = world[0]
    table = information.prompts(bank)
    q = int(np.nonzero(bank.items["kind"].to_numpy() == "arena")[0][0])
    rows = np.arange(3)
    theta0 = np.array([-0.7, 0.2, 1.1])
    info = information.arena_information(bank, table, theta0, [q], rows)[:, 0]
    # the pair terms of one prompt with targets at their expectation sigma(x(theta0)): minus
    # their second derivative at theta0 is the information (central differences, h = 1e-3)
    par = bank.parameters(rows, q)
    others = table.other[q][table.mask[q] > 0]
    cfg = bank.model.config

    def expected_loglik(theta, t=None):
        p = links.probability(links.eta(theta, par["b"], par["a"]))[:, None]
        p_j = links.probability(links.eta(bank.draws["theta"][rows][:, others],
                                          par["b"][:, None], par["a"][:, None]))  # fmt: skip
        x = bank.draws["gamma"][rows][:, None] * (p - p_j)
        t = links.sigmoid(x) if t is None else t
        soft = t * np.log(links.sigmoid(x)) + (1 - t) * np.log(links.sigmoid(-x))
        w = table.weight[q]
        return (cfg.lambda_arena * w * table.decisive[q] * soft.sum(axis=1)
                + cfg.lambda_bb * w * table.both_bad[q] * len(others) * np.log(1 - p[:, 0]),
                t)  # fmt: skip

    _, t0 = expected_loglik(theta0)
    h = 1e-3
    second = (expected_loglik(theta0 + h, t0)[0] - 2 * expected_loglik(theta0, t0)[0]
              + expected_loglik(theta0 - h, t0)[0]) / h**2  # fmt: skip
    # the both-bad term's expectation is its own value (no target): curvature as is
    np.testing.assert_allclose(info, -second, rtol=1e-4)
    assert table.decisive[q] > 0.9  # ties are rare: tie threshold 0 in this bank


def test_adaptive_asks_arena_prompts_with_the_score_likelihood(world, arena_oracle):
    bank, _, truth = world
    keep = arena_oracle.arena_model == 0
    prompts_only = dataclasses.replace(
        arena_oracle, models=arena_oracle.models[:1],
        static_model=np.zeros(0, np.int64), static_item=np.zeros(0, np.int64),
        static_y=np.zeros(0), static_n=np.zeros(0), arena_model=np.zeros(keep.sum(), np.int64),
        arena_item=arena_oracle.arena_item[keep], arena_z=arena_oracle.arena_z[keep],
    )  # fmt: skip
    res = adaptive(bank, prompts_only, target_se=0.05, max_items=8)
    assert (res.trace["kind"] == "arena").all() and len(res.trace) == 8
    np.testing.assert_allclose(
        res.trace["response"], pd.Series(prompts_only.arena_z, index=bank.items["item"].to_numpy()[
            prompts_only.arena_item]).loc[res.trace["item"]].to_numpy()
    )  # fmt: skip
    # the same posterior as grid.posterior (score's) on the prompts asked (tolerance 0.03)
    asked = pd.Index(bank.items["item"]).get_indexer(res.trace["item"])
    sub = dataclasses.replace(
        prompts_only, arena_model=np.zeros(len(asked), np.int64), arena_item=asked,
        arena_z=res.trace["response"].to_numpy(),
    )  # fmt: skip
    post = grid.posterior(bank, sub)
    w = post.weights[0] / N_DRAWS
    x = post.grids[0][None, :]
    mean = (w * x).sum()
    sd = np.sqrt((w * x**2).sum() - mean**2)
    row = res.summary.iloc[0]
    assert abs(mean - row["theta_mean"]) < 0.03 and abs(sd - row["theta_sd"]) < 0.03


def test_adaptive_one_pool_of_questions_and_prompts(world, arena_oracle):
    bank, _, truth = world
    # gamma sets what a prompt's comparisons say about the ability: weak at 1 (this bank),
    # strong at 8, where a prompt is worth more than the best question
    sharp = dataclasses.replace(bank, draws={**bank.draws, "gamma": np.full(N_DRAWS, 8.0)})
    for this, arena_first in ((bank, False), (sharp, True)):
        res = adaptive(this, arena_oracle, select="fisher", target_se=0.3, max_items=80)
        first = res.trace.groupby("model").head(3)
        assert ((first["kind"] == "arena").mean() > 0.5) == arena_first
    centre = bank.draws["theta"].mean()
    for select in ("fisher", "kl"):
        res = adaptive(bank, arena_oracle, select=select, target_se=0.3, max_items=80)
        assert (res.summary["stopped_by"] == "se").all()
        err = res.summary["theta_mean"] - (res.summary["model"].map(truth) - centre)
        assert (np.abs(err) < 3 * 0.3 + 0.2).all()
    rand = adaptive(bank, arena_oracle, select="random", target_se=0.3, max_items=80, seed=2)
    fisher = adaptive(bank, arena_oracle, select="fisher", target_se=0.3, max_items=80)
    assert fisher.summary["n_items"].mean() < 0.75 * rand.summary["n_items"].mean()


# ------------------------------------------------------------------ person fit
def test_person_fit_is_calibrated_and_flags_a_shifted_harness(world):
    from bayes_dualeval.measure.person_fit import person_fit

    bank = world[0]
    static = np.nonzero(bank.items["kind"].to_numpy() == "static")[0]
    par = bank.parameters(slice(None), static)
    rng = np.random.default_rng(5)
    n = 150  # models of each kind, abilities from the prior
    theta = rng.normal(0, 1, n) + bank.draws["theta"].mean()
    p = links.probability(links.eta(theta[:, None], par["b"].mean(0), par["a"].mean(0)))
    clean = (rng.random(p.shape) < p).astype(float)
    flipped = np.where(rng.random(p.shape) < 0.15, 1 - clean, clean)
    labels = np.concatenate([clean, flipped])
    model = np.repeat(np.arange(2 * n), len(static))
    resp = _oracle(bank, model, np.tile(static, 2 * n), labels.ravel(),
                   [f"m{k:03d}" for k in range(2 * n)])  # fmt: skip
    post = grid.posterior(bank, resp)
    draws = post.sample(np.random.default_rng(0), 2).reshape(2 * n, -1)
    fit_p = person_fit(bank, resp, post, draws)
    # 240 sharp questions (a near 1.65), bank near the truth: clean models flagged at about
    # the nominal 5% (binomial sd 1.8% at n = 150; plain l_z at the estimated ability
    # flagged 0.7% here, too few), a 15% flip nearly always (measured 100%)
    false_alarm, power = (fit_p[:n] < 0.05).mean(), (fit_p[n:] < 0.05).mean()
    assert 0.02 <= false_alarm <= 0.10
    assert power >= 0.9


def test_compress_weighs_prompts_by_their_pair_information(world):
    bank = world[0]
    arena = (bank.items["kind"] == "arena").to_numpy()
    sharp = dataclasses.replace(bank, draws={**bank.draws, "gamma": np.full(N_DRAWS, 8.0)})
    low, high = item_information(bank), item_information(sharp)
    # gamma scales what a prompt's comparisons say; a question's information is unchanged
    np.testing.assert_allclose(low[~arena], high[~arena])
    assert (high[arena] > 5 * low[arena]).all()
    # the same information as the adaptive tests' (at each bank model's ability)
    rows = evenly_spaced(bank.n_draws, 100)
    q = np.nonzero(arena)[0][:3]
    table = information.prompts(bank)
    theta = bank.draws["theta"]
    expect = np.mean([information.arena_information(bank, table, theta[rows, m], q, rows)
                      .mean(0) for m in range(theta.shape[1])], axis=0)  # fmt: skip
    np.testing.assert_allclose(low[q], expect, rtol=1e-10)
