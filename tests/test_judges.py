"""Judges as a facet, their self-preference, and style control (issue 53).

A ``judge`` field makes a cell a (model, item, judge); pairs are formed within a prompt and
a judge; each judge has its own discrimination and severity; a judge x family bias and
style coefficients enter the pair logits (bayes_dualeval.model.facets). One MAP fit of a
simulation with every facet is shared; the posterior studies are
scripts/studies/judge_study.py's.
"""

import json
import warnings

import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from scipy import stats

from bayes_dualeval.cli.commands import cli
from bayes_dualeval.core.errors import ConfigError, DataWarning, InputError
from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.data.distill import distill
from bayes_dualeval.data.load import load
from bayes_dualeval.model.config import ModelConfig
from bayes_dualeval.model.facets import Facets
from bayes_dualeval.model.inputs import build_inputs
from bayes_dualeval.model.likelihood import arena_loglik, arena_total
from bayes_dualeval.model.simulate import simulate, write


def _arena(judges=("j1", "j2"), models=("a", "b", "c"), prompts=3, seed=0):
    rng = np.random.default_rng(seed)
    return [
        {"model_label": m, "item_id": f"p{q}", "reward": float(rng.normal()), "judge": j}
        for j in judges
        for m in models
        for q in range(prompts)
    ]


def test_every_judge_counts_and_pairs_never_join_two_judges(tmp_data):
    rows = _arena()
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataWarning)
        ds = load(tmp_data.jsonl("a/arena/x.jsonl", rows))
    assert list(ds.judges) == ["j1", "j2"] and len(ds.arena_z) == len(rows) == 18
    assert ds.summary_dict()["judges"]["j2"] == {"static_cells": 0, "arena_cells": 9, "models": 3}
    pairs = distill(ds, bb_ratio=0.0, tie_ratio=0.0)
    assert pairs.n_total == 2 * 3 * 3  # per judge and prompt: 3 pairs of 3 models
    assert (ds.arena_judge[pairs.row_i] == ds.arena_judge[pairs.row_j]).all()
    assert (pairs.unit_models == 3).all()
    # one judge's duplicate (same model, prompt, judge) is still a duplicate
    again = [*rows, dict(rows[0], reward=9.0)]
    with pytest.warns(DataWarning, match="1 duplicate"):
        ds2 = load(tmp_data.jsonl("b/arena/x.jsonl", again))
    assert len(ds2.arena_z) == 18 and 9.0 in ds2.arena_reward


def test_rewards_normalised_per_source_or_per_judge(tmp_data):
    rows = _arena()
    for r in rows:  # judge j2 scores on a ten times larger scale
        r["reward"] *= 10 if r["judge"] == "j2" else 1
    path = tmp_data.jsonl("arena/x.jsonl", rows)
    per_judge = load(path, reward_norm="judge")
    for k in range(2):
        z = per_judge.arena_z[per_judge.arena_judge == k]
        assert abs(z.mean()) < 1e-9 and abs(z.std() - 1) < 1e-9
    per_source = load(path)  # one scale for both judges: j2's spread stays ten times j1's
    z, judge = per_source.arena_z, per_source.arena_judge
    assert z[judge == 1].std() > 5 * z[judge == 0].std()


def test_families_from_rows_or_a_file(tmp_data):
    rows = [dict(r, family="fa" if r["model_label"] == "a" else "fb") for r in _arena()]
    ds = load(tmp_data.jsonl("a/arena/x.jsonl", rows))
    assert list(ds.model_family) == ["fa", "fb", "fb"]
    file = tmp_data.csv("fam.csv", [{"model_label": "b", "family": "fc"},
                                    {"model_label": "zz", "family": "fd"}])  # fmt: skip
    with pytest.warns(DataWarning, match="1 models the data do not hold"):
        ds = load(tmp_data.path("a"), families=file)
    assert list(ds.model_family) == ["fa", "fc", "fb"]
    clash = [*rows, dict(rows[0], family="other", item_id="p9")]
    with pytest.raises(InputError, match="model 'a' is given two families"):
        load(tmp_data.jsonl("c/arena/x.jsonl", clash))
    bad = tmp_data.csv("bad.csv", [{"model": "a", "fam": "x"}])
    r = CliRunner().invoke(cli, ["check", str(tmp_data.path("a")), "--families", str(bad)])
    assert r.exit_code == 1 and "the families file needs a column model_label" in r.output


def test_style_covariates_are_read_checked_and_averaged(tmp_data):
    rows = [dict(r, length=1.0 + k) for k, r in enumerate(_arena())]
    ds = load(tmp_data.jsonl("a/arena/x.jsonl", rows), style=["length"])
    assert ds.style == ("length",) and ds.arena_style.shape == (18, 1)
    runner = CliRunner()
    for name, change, text in (
        ("missing", {"length": None}, "style covariate 'length' is missing"),
        ("text", {"length": "long"}, "style covariate 'length' must be a finite number"),
    ):
        broken = [dict(rows[0], **change), *rows[1:]]
        path = tmp_data.jsonl(f"{name}/arena/x.jsonl", broken)
        r = runner.invoke(cli, ["check", str(path), "--style", "length"])
        assert r.exit_code == 1 and text in r.output and "x.jsonl:1" in r.output, r.output
    r = runner.invoke(cli, ["check", str(tmp_data.path("a")), "--style", "lenght"])
    assert r.exit_code == 1 and "'lenght' is missing" in r.output
    flat = [dict(r, length=2.0) for r in _arena()]
    ds = load(tmp_data.jsonl("flat/arena/x.jsonl", flat), style=["length"])
    with pytest.raises(ConfigError, match="'length' does not vary"):
        build_inputs(ds, ModelConfig())


def test_agreement_is_each_judges_rank_correlation_with_the_others(tmp_data):
    from bayes_dualeval.posterior.facet_tables import agreement

    quality = {"a": 0.0, "b": 1.0, "c": 2.0, "d": 3.0}
    rows = [
        {"model_label": m, "item_id": f"p{q}", "judge": j,
         "reward": (-1 if j == "contrarian" else 1) * v + 0.01 * q}
        for j in ("j1", "j2", "contrarian") for m, v in quality.items() for q in range(3)
    ]  # fmt: skip
    ds = load(tmp_data.jsonl("arena/x.jsonl", rows))
    got = dict(zip(ds.judges, agreement(ds, ds.arena_judge, len(ds.judges)), strict=True))
    # j1 against the mean of j2 and the contrarian (which cancel out): no order, NaN-free
    assert got["contrarian"] == pytest.approx(-1.0)
    assert np.isfinite(got["j1"]) and np.isfinite(got["j2"])


def test_facets_need_the_pairs_likelihood(tmp_data):
    ds = load(tmp_data.jsonl("a/arena/x.jsonl", _arena()))
    for config in (ModelConfig(arena_likelihood="reward"), ModelConfig(mode="bt")):
        with pytest.raises(ConfigError, match="enter the pairs likelihood"):
            build_inputs(ds, config)


def test_one_judge_through_the_facets_is_the_plain_arena_term():
    """The facet path at one judge, no bias, no style, is the model without facets."""
    _, arena, _ = simulate(6, 0, 20, seed=3)
    ds = Dataset.from_frames(arena=arena)
    config = ModelConfig(mode="arena")
    inputs, _ = build_inputs(ds, config)
    rng = np.random.default_rng(1)
    theta, b = rng.normal(size=ds.n_models), rng.normal(size=ds.n_items)
    a, level = np.exp(rng.normal(0, 0.3, ds.n_items)), jnp.array([0.2])
    plain = arena_total(theta, a, b, 2.5, None, inputs, config, level)
    facets = Facets(gamma=jnp.array([2.5]), severity=jnp.zeros(1))
    faceted = arena_total(theta, a, b, 2.5, None, inputs, config, level, facets)
    np.testing.assert_allclose(float(plain), float(faceted), rtol=1e-5)
    per_item = arena_loglik(theta, a, b, 2.5, None, inputs, config, level, facets)
    np.testing.assert_allclose(
        np.asarray(per_item), np.asarray(arena_loglik(theta, a, b, 2.5, None, inputs, config,
                                                      level)), rtol=1e-5, atol=1e-5,
    )  # fmt: skip


@pytest.fixture(scope="module")
def judged_run(tmp_path_factory):
    """A simulation with three judges, a self-preference and a length effect, fitted (MAP)."""
    root = tmp_path_factory.mktemp("judges")
    # few static questions, so that the arena (and its confound) moves the leaderboard;
    # severities far apart, so that three judges' order is a fair test
    static, arena, truth = simulate(
        12, 40, 80, judges=3, self_preference=1.5, style_effect=1.0, judge_severity_sd=1.5,
        seed=5,
    )  # fmt: skip
    write(root / "data", static, arena, truth)
    runs = {}
    for name, extra in (("style", ["--style", "length"]), ("plain", [])):
        out = root / name
        args = ["fit", str(root / "data"), "--sampler", "map", "--out", str(out), "-q"]
        r = CliRunner().invoke(cli, [*args, "--no-report", *extra])
        assert r.exit_code == 0, r.output
        runs[name] = out
    return runs, truth


@pytest.mark.study
def test_style_control_orders_models_like_the_truth(judged_run):
    runs, truth = judged_run
    rho = {}
    for name, out in runs.items():
        board = pd.read_csv(out / "leaderboard.csv")
        rho[name] = stats.spearmanr(board["theta_mean"], board["model"].map(truth["theta"]))[0]
    # the weakest third is the most verbose: the unadjusted arena term ranks them up
    assert rho["style"] >= 0.95 and rho["style"] > rho["plain"] + 0.05, rho
    style = pd.read_csv(runs["style"] / "style.csv")
    assert list(style.columns) == [
        "covariate", "judge", "coef_mean", "coef_lo", "coef_hi", "covariate_mean", "covariate_sd",
    ]  # fmt: skip
    assert len(style) == 3 and (style["coef_mean"] > 0.2).all()
    assert not (runs["plain"] / "style.csv").exists()


@pytest.mark.study
def test_judges_tables_find_the_self_preference(judged_run):
    runs, truth = judged_run
    out = runs["style"]
    judges = pd.read_csv(out / "judges.csv").set_index("judge")
    assert list(judges.index) == ["judge-a", "judge-b", "judge-c"]
    assert (judges["n_rows"] == 12 * 80).all() and (judges["n_models"] == 12).all()
    # the table's severity: each judge's level at the average answer (the simulator's level)
    want = [truth["judges"][j]["level"] for j in judges.index]
    assert stats.spearmanr(judges["severity_mean"], want)[0] == pytest.approx(1.0)
    assert judges["agreement"].between(-1, 1).all()  # a strong self-preference: low
    bias = pd.read_csv(out / "judge_bias.csv")
    own = bias[bias["family"].str[-1] == bias["judge"].str[-1]]
    others = bias.drop(own.index)
    # every judge favours its own family: the diagonal holds the largest biases
    assert own["bias_mean"].min() > others["bias_mean"].max(), bias
    assert (own["n_rows"] == 4 * 80).all()
    diagnostics = json.loads((out / "diagnostics.json").read_text())
    assert set(diagnostics["data"]["judges"]) == {"judge-a", "judge-b", "judge-c"}


def _level_posterior(ds, judges, draws, seed):
    """Random posterior draws of the sites ``judge_levels`` reads (2 chains), flattened too."""
    rng = np.random.default_rng(seed)
    m, q = ds.n_models, ds.n_items
    post = {
        "theta": rng.normal(size=(2, draws, m)),
        "b": rng.normal(size=(2, draws, q)),
        "a": np.exp(rng.normal(0, 0.3, size=(2, draws, q))),
        "gamma_judge": np.exp(rng.normal(1, 0.3, size=(2, draws, judges))),
        "severity": rng.normal(size=(2, draws, judges)),
        "level_scale": np.exp(rng.normal(0, 0.5, size=(2, draws, judges))),
    }
    flat = {k: v.reshape(2 * draws, *v.shape[2:]) for k, v in post.items()}
    return post, flat


def _hand_levels(flat, ds, read_on):
    """Each judge's predicted mean reward over the cells ``read_on[k]`` (bool (R,)), per
    draw, centred over judges: ``severity_k + level_scale_k gamma_k (pbar_u - 1/2) +
    gamma_k (p_r - pbar_u)`` per cell ``r`` of unit ``u`` (its prompt as its own judge
    scored it), ``pbar_u`` the unit's mean success probability."""
    i, j = ds.arena_model, ds.arena_item
    p = 1 / (1 + np.exp(-flat["a"][:, j] * (flat["theta"][:, i] - flat["b"][:, j])))
    unit = pd.Series(ds.arena_judge.astype(int) * ds.n_items + j)
    pbar = pd.DataFrame(p.T).groupby(unit.values).transform("mean").to_numpy().T
    gamma, slope = flat["gamma_judge"], flat["level_scale"] * flat["gamma_judge"]
    level = np.stack(
        [
            flat["severity"][:, k]
            + slope[:, k] * (pbar[:, rows].mean(axis=1) - 0.5)
            + gamma[:, k] * (p[:, rows] - pbar[:, rows]).mean(axis=1)
            for k, rows in enumerate(read_on)
        ],
        axis=1,
    )
    return level - level.mean(axis=1, keepdims=True)


def test_a_judges_severity_is_its_level_at_the_average_answer():
    """judges.csv reads each judge's predicted mean reward over the cells (every judge
    scored every cell here): the level term at the cells' mean success probability.

    Computed by hand from posterior draws (:func:`_hand_levels`), centred over judges;
    not the model's intercept ``severity_k`` (at a success probability of one half).
    """
    import arviz as az

    from bayes_dualeval.posterior.facet_tables import judge_levels

    ds = Dataset.from_frames(arena=pd.DataFrame(_arena(judges=("j1", "j2", "j3"), prompts=4)))
    post, flat = _level_posterior(ds, judges=3, draws=5, seed=1)
    got = judge_levels(az.from_dict(posterior=post), ds)
    # every judge scored every cell: each is read on every cell
    want = _hand_levels(flat, ds, [np.ones(len(ds.arena_z), bool)] * 3)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # the intercepts alone differ by each judge's slope times (pbar - 1/2)
    assert not np.allclose(got, flat["severity"] - flat["severity"].mean(axis=1, keepdims=True))


def test_judges_who_saw_different_models_are_compared_on_the_answers_they_share():
    """With judges of different models, severity is each judge's predicted mean reward
    over its cells that two judges scored (model c's here), each cell in its unit of the
    judge's own models: a level read elsewhere extrapolates along each judge's slope
    (AlpacaEval's judges)."""
    import arviz as az

    from bayes_dualeval.posterior.facet_tables import judge_levels, shared_cells

    rows = _arena(judges=("j1",), models=("a", "b", "c"), prompts=4)
    rows += _arena(judges=("j2",), models=("c", "d", "e"), prompts=4, seed=1)
    ds = Dataset.from_frames(arena=pd.DataFrame(rows))
    labels = np.asarray(ds.models)[ds.arena_model]
    facet_judge = ds.arena_judge.astype(np.int64)
    np.testing.assert_array_equal(shared_cells(ds, facet_judge), labels == "c")
    post, flat = _level_posterior(ds, judges=2, draws=4, seed=2)
    got = judge_levels(az.from_dict(posterior=post), ds)
    judge = np.asarray(ds.judges)[facet_judge]
    read_on = [(labels == "c") & (judge == name) for name in ("j1", "j2")]
    want = _hand_levels(flat, ds, read_on)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # not the level at the shared cells' mean success probability (the previous reading):
    # each judge's unit mean is over the models it scored, the rest is read on gamma_k
    i, j = ds.arena_model[labels == "c"], ds.arena_item[labels == "c"]
    pbar = (1 / (1 + np.exp(-flat["a"][:, j] * (flat["theta"][:, i] - flat["b"][:, j])))).mean(1)
    old = flat["severity"] + flat["level_scale"] * flat["gamma_judge"] * (pbar[:, None] - 0.5)
    assert not np.allclose(got, old - old.mean(axis=1, keepdims=True), atol=1e-2)


def test_a_judge_sharing_no_answer_has_no_severity_while_others_do():
    """Judges j1 and j2 share model c's answers, j3 shares none: j3's severity is NaN (it
    cannot be compared on the same answers), the others are centred between themselves."""
    import arviz as az

    from bayes_dualeval.posterior.facet_tables import judge_levels

    rows = _arena(judges=("j1",), models=("a", "b", "c"), prompts=4)
    rows += _arena(judges=("j2",), models=("c", "d", "e"), prompts=4, seed=1)
    rows += _arena(judges=("j3",), models=("f", "g"), prompts=4, seed=2)
    ds = Dataset.from_frames(arena=pd.DataFrame(rows))
    post, _ = _level_posterior(ds, judges=3, draws=4, seed=3)
    got = judge_levels(az.from_dict(posterior=post), ds)
    assert np.isnan(got[:, 2]).all() and np.isfinite(got[:, :2]).all()
    np.testing.assert_allclose(got[:, 0], -got[:, 1], atol=1e-9)
