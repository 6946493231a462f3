"""contamination.csv: the model x benchmark audit (checks/benchmark_audit.py).

Three things must hold: the p-values are uniform when the data come from the model (here
the true parameters stand in for the posterior), a planted leak ranks first with a small
q-value in a real multi-draw fit, and the left-out expected accuracy matches a direct
computation.
"""

import warnings

import arviz as az
import numpy as np
import pytest
from scipy import special, stats

from bayes_dualeval.checks import ability_grid
from bayes_dualeval.checks.benchmark_audit import benchmark_audit
from bayes_dualeval.core.item_ids import benchmark_of
from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.inference.settings import SamplerSettings
from bayes_dualeval.model.config import ModelConfig
from bayes_dualeval.model.simulate import simulate
from bayes_dualeval.model.spec import DualEvalModel
from bayes_dualeval.runs.fit import fit


def _static(n_models, n_benchmarks, n_items, seed, **kw):
    static, _, truth = simulate(
        n_models, n_benchmarks * n_items, 0, n_domains=n_benchmarks, seed=seed, **kw
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return static, Dataset.from_frames(static=static, source="bench"), truth


def _arena_sources(n_models, n_prompts, n_sources, seed):
    """Simulated arena rewards with the prompts dealt round-robin into arena sources; the
    truth's items keyed as the dataset names them."""
    _, arena, truth = simulate(n_models, 0, n_prompts, seed=seed)
    prompts = arena["item_id"].unique()
    arena["source"] = arena["item_id"].map(
        {p: f"src{k % n_sources}" for k, p in enumerate(prompts)}
    )
    by_prompt = {k.split("::", 1)[1]: v for k, v in truth["items"].items()}
    truth["items"] = {
        f"{source}::{p}": by_prompt[p]
        for p, source in zip(arena["item_id"], arena["source"], strict=True)
    }
    return arena, truth


def _truth_posterior(ds, truth, config, draws=1, gamma=None):
    theta = np.array([truth["theta"][m] for m in ds.models])
    post = {
        "theta": np.broadcast_to(theta, (1, draws, len(theta))),
        "b": np.broadcast_to([truth["items"][q]["b"] for q in ds.items], (1, draws, ds.n_items)),
        "a": np.broadcast_to([truth["items"][q]["a"] for q in ds.items], (1, draws, ds.n_items)),
    }
    if gamma is not None:
        post["gamma"] = np.full((1, draws), gamma)
    idata = az.from_dict(
        posterior={k: np.array(v, np.float64) for k, v in post.items()},
        coords={"model": ds.models, "item": ds.items},
        dims={"theta": ["model"], "b": ["item"], "a": ["item"]},
    )
    idata.posterior.attrs.update(DualEvalModel(config).to_attrs())
    return idata


def _dense_left_out(ds, truth, table, points):
    """Per row of ``table`` (indexed by model and benchmark): the row, the block's labels,
    the left-out posterior's weights on a ``points``-point grid over six prior sds each
    side (the true items, the prior and the model's other cells) and the block's success
    probabilities on it (points x cells)."""
    m, q, y = ds.static_model, ds.static_item, ds.static_y.astype(float)
    a = np.array([truth["items"][x]["a"] for x in ds.items])[q]
    b = np.array([truth["items"][x]["b"] for x in ds.items])[q]
    bench = benchmark_of(ds.items)[q]
    grid = np.linspace(-6, 6, points)
    for (name, data), row in table.iterrows():
        mine = ds.models[m] == name
        block, other = mine & (bench == data), mine & (bench != data)
        eta = a[other] * (grid[:, None] - b[other])
        log_post = -0.5 * grid**2 + np.sum(y[other] * eta + special.log_expit(-eta), axis=1)
        w = np.exp(log_post - log_post.max())
        yield row, y[block], w / w.sum(), special.expit(a[block] * (grid[:, None] - b[block]))


def test_benchmark_names_come_from_the_item_ids():
    items = np.array(["bench::gsm8k_0", "bench::gsm8k_12", "x::my_data_set_3"])
    assert benchmark_of(items).tolist() == [
        "gsm8k", "gsm8k", "my_data_set"
    ]  # fmt: skip


def test_p_values_are_uniform_when_the_model_is_true():
    """400 blocks of 25 cells drawn from the true 2PL: the plug-in mid-p-values are uniform."""
    _, ds, truth = _static(40, 10, 25, seed=3)
    config = ModelConfig(mode="static")
    table = benchmark_audit(_truth_posterior(ds, truth, config), ds)
    assert len(table) == 400
    p = table["p_value"].to_numpy()
    assert stats.kstest(p, "uniform").pvalue > 0.01
    assert 0.03 < np.mean(p < 0.1) < 0.17  # 10% nominal, 400 blocks: sd 1.5%
    assert (table["q_value"] < 0.05).sum() == 0


def test_arena_p_values_are_uniform_when_the_model_is_true():
    """400 (model, source) arena blocks: 40 models x 10 sources of 20 prompts, rewards from
    the simulator (normalised per source, so each source has its own reward scale), the
    true parameters standing in for the posterior: the p-values are uniform."""
    arena, truth = _arena_sources(40, 200, 10, seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = Dataset.from_frames(arena=arena, source="bench")
    config = ModelConfig(mode="arena")
    gamma = truth["gamma_reward"] / arena.groupby("source")["reward"].std(ddof=0).mean()
    table = benchmark_audit(_truth_posterior(ds, truth, config, gamma=gamma), ds)
    assert len(table) == 400 and (table["kind"] == "arena").all()
    assert (table["n"] == 20).all()
    p = table["p_value"].to_numpy()
    assert stats.kstest(p, "uniform").pvalue > 0.01
    assert 0.05 < np.mean(p < 0.1) < 0.15  # 10% nominal, 400 blocks: sd 1.5%
    assert np.mean(p < 0.01) < 0.03
    assert (table["q_value"] < 0.05).sum() == 0


def test_expected_accuracy_leaves_the_block_out():
    """Each block's expected accuracy: the mean p over the block, with the ability's
    posterior given only the model's other cells (a dense-grid integral here)."""
    _, ds, truth = _static(6, 2, 20, seed=4)
    config = ModelConfig(mode="static")
    table = benchmark_audit(_truth_posterior(ds, truth, config), ds)
    table = table.set_index(["model", "dataset"])
    for row, y_block, w, p in _dense_left_out(ds, truth, table, 2001):
        p_block = p.mean(axis=1)
        assert row["n"] == len(y_block)
        assert row["expected"] == pytest.approx(np.sum(w * p_block), abs=2e-3)
        assert row["observed"] == pytest.approx(y_block.mean(), rel=1e-9)


def test_the_refined_grid_covers_and_resolves_each_models_left_out_posteriors():
    """Normal log posteriors on the coarse grid: each model's refined grid holds every
    point within DROP of its blocks' maxima and steps at most STEP of its narrowest sd,
    unless that asks for more than MOST points; a model without blocks keeps the coarse
    range."""
    points = ability_grid.coarse(1.0)
    reach = np.sqrt(2 * ability_grid.DROP)

    def refined(centre, sd, owner, n_models):
        centre, sd, owner = np.array(centre), np.array(sd), np.array(owner)
        log_post = -0.5 * ((points[None, :] - centre[:, None]) / sd[:, None]) ** 2
        grid = ability_grid.refine(points, log_post, np.zeros_like(log_post), owner, n_models)
        assert np.allclose(np.diff(grid, axis=1), (grid[:, 1] - grid[:, 0])[:, None])
        for c, s, m in zip(centre, sd, owner, strict=True):
            assert grid[m, 0] <= max(c - reach * s, points[0])
            assert grid[m, -1] >= min(c + reach * s, points[-1])
        return grid

    grid = refined([1.234, 1.1, -0.4, 0.7], [0.03, 0.06, 0.3, 1.0], [0, 0, 1, 3], 4)
    step = grid[:, 1] - grid[:, 0]
    assert ability_grid.FEWEST <= grid.shape[1] < ability_grid.MOST
    assert step[0] <= ability_grid.STEP * 0.03 * (1 + 1e-9)  # the narrower of model 0's
    assert step[1] <= ability_grid.STEP * 0.3 and step[3] <= ability_grid.STEP * 1.0
    assert grid[2, 0] == points[0] and grid[2, -1] == points[-1]  # no blocks
    # a sd of 0.002 asks for more points than MOST: every model gets MOST
    grid = refined([1.234, -2.0], [0.03, 0.002], [0, 1], 2)
    assert grid.shape[1] == ability_grid.MOST


def test_a_narrow_left_out_posterior_is_integrated_exactly():
    """A model's ability known to about 0.04 prior sd from its other cells (a benchmark of
    2,000 questions beside one of 40): expected accuracy and p-value of every block match
    a 20,001-point integral to 1e-6 (the fixed 121-point grid before it: off by up to 2e-3)."""
    static, _, truth = simulate(4, 4000, 0, n_domains=2, seed=5)
    small = static["dataset"] == "code_bench"
    static = static[~small | (static["sample_index"] < 40)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = Dataset.from_frames(static=static, source="bench")
    table = benchmark_audit(_truth_posterior(ds, truth, ModelConfig(mode="static")), ds)
    table = table.set_index(["model", "dataset"])
    for row, y_block, w, p in _dense_left_out(ds, truth, table, 20001):
        mu, sd = p.sum(axis=1), np.sqrt(np.sum(p * (1 - p), axis=1))
        observed = y_block.sum()
        tail = 0.5 * (
            special.ndtr((mu - observed - 0.5) / sd) + special.ndtr((mu - observed + 0.5) / sd)
        )
        assert row["expected"] == pytest.approx(np.sum(w * mu) / len(y_block), abs=1e-6)
        assert row["p_value"] == pytest.approx(np.sum(w * tail), abs=1e-6)


@pytest.mark.study
def test_planted_leak_ranks_first_in_a_multi_draw_fit():
    """Half of one model's failures on one benchmark turned into successes."""
    static, _, _ = _static(20, 3, 100, seed=8)
    rng = np.random.default_rng(0)
    leaked = ("model-007", "code_bench")
    fail = static.index[
        (static["model_label"] == leaked[0]) & (static["dataset"] == leaked[1])
        & (static["correct"] == 0)
    ]  # fmt: skip
    static.loc[rng.choice(fail, len(fail) // 2, replace=False), "correct"] = 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = Dataset.from_frames(static=static, source="bench")
    settings = SamplerSettings(sampler="svi", draws=400, svi_steps=4000, seed=1)
    result = fit(ds, ModelConfig(mode="static"), settings)
    table = benchmark_audit(result.idata, result.dataset)
    top = table.iloc[0]
    assert (top["model"], top["dataset"]) == leaked
    assert top["q_value"] < 0.05 and top["excess"] > 0.1
    assert (table["q_value"].iloc[1:] < 0.05).sum() == 0


@pytest.mark.study
def test_arena_block_with_planted_rewards_ranks_first():
    """DualEval's protocol on one model and one arena source: +2.0 on 70% of its z-scores.

    12 models, 60 questions and 60 prompts in two arena sources; MAP fit of the joint
    model. The planted (model, source) row must be the first row, an arena row, with
    ``q_value < 0.05``; no clean arena row is flagged.
    """
    static, arena, _ = simulate(12, 60, 60, seed=21)
    prompts = arena["item_id"].unique()
    arena["source"] = np.where(arena["item_id"].isin(prompts[::2]), "arena_a", "arena_b")
    chosen = arena["model_label"].unique()[4]
    on = (arena["model_label"] == chosen) & (arena["source"] == "arena_a")
    rng = np.random.default_rng(21)
    hit = on & (rng.random(len(arena)) < 0.7)
    sd = arena.loc[arena["source"] == "arena_a", "reward"].std(ddof=0)
    arena.loc[hit, "reward"] += 2.0 * sd
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = Dataset.from_frames(static=static, arena=arena, source="bench")
        config = ModelConfig(mode="both")
        result = fit(ds, config, SamplerSettings(sampler="map", seed=0, progress=False))
    table = benchmark_audit(result.idata, result.dataset)
    arena_rows = table[table["kind"] == "arena"]
    assert len(arena_rows) == 24 and (arena_rows["dataset"] == "").all()
    assert (arena_rows["n"] == 30).all()
    top = table.iloc[0]
    assert (top["model"], top["kind"], top["source"]) == (chosen, "arena", "arena_a")
    assert top["q_value"] < 0.05 and top["excess"] > 0.5
    # no false discovery; the contaminated model's inflated ability moves the other
    # source's prompts, so the clean rows are not exactly null (smallest p 0.006)
    assert arena_rows["q_value"].iloc[1:].min() > 0.5
    assert arena_rows["p_value"].iloc[1:].min() > 0.002
    assert (table["kind"] == "static").sum() == 12 * 3


def test_prompts_answered_by_one_model_give_no_arena_rows():
    """A prompt with a single answer says nothing about any model: no arena row, no crash."""
    static, arena, truth = simulate(4, 20, 8, seed=1)
    arena = arena.groupby("item_id").head(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = Dataset.from_frames(static=static, arena=arena, source="bench")
    byname = {q.split("::", 1)[1]: v for q, v in truth["items"].items()}
    truth["items"] = {q: byname[q.split("::", 1)[1]] for q in ds.items}
    table = benchmark_audit(_truth_posterior(ds, truth, ModelConfig(), gamma=1.0), ds)
    assert set(table["kind"]) == {"static"} and len(table) == 4 * 3
