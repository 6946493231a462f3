"""Item table, anomalies and posterior-predictive checks (bayes_dualeval.checks.ppc)."""

import json
import math
import warnings

import numpy as np
import pandas as pd
import pytest

from bayes_dualeval.checks.contamination import auroc, contamination_study
from bayes_dualeval.checks import (
    FLAG_Q,
    anomalies,
    bh_qvalues,
    calibration_error,
    calibration_table,
    item_table,
    posterior_predictive,
)
from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.data.simulate import simulate
from bayes_dualeval.errors import DataWarning, InputError
from bayes_dualeval.inference.sampling import SamplerSettings
from bayes_dualeval.model.config import load_spec
from bayes_dualeval.runs import output
from bayes_dualeval.runs.fit import fit

MAP = SamplerSettings(sampler="map", seed=0)
ITEM_COLUMNS = [
    "item", "kind", "source", "domain", "b_mean", "b_lo", "b_hi", "a_mean", "a_lo", "a_hi",
    "observed", "n_models", "information", "ppp", "identified", "flags", "ci",
]  # fmt: skip
CELL_COLUMNS = [
    "model", "item", "kind", "observed", "expected", "residual", "ppp", "p_value", "q_value",
]  # fmt: skip


def _mixed_dataset() -> Dataset:
    """8 models, 40 static items, 12 prompts; static item 0 all correct, prompt 0 all equal;
    the weakest model gets the best reward on prompt 1 (a planted arena anomaly)."""
    static, arena, truth = simulate(n_models=8, n_static=40, n_arena=12, seed=3)
    first = (static["dataset"] == static["dataset"].iloc[0]) & (static["sample_index"] == 0)
    static.loc[first, "correct"] = 1
    prompts = arena["item_id"].unique()
    arena.loc[arena["item_id"] == prompts[0], "reward"] = 5.0
    weakest = min(truth["theta"], key=truth["theta"].get)
    on_1 = arena["item_id"] == prompts[1]
    arena.loc[on_1 & (arena["model_label"] == weakest), "reward"] = (
        arena.loc[on_1, "reward"].max() + 3.0
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)
        return Dataset.from_frames(static, arena)


@pytest.fixture(scope="module")
def mixed():
    ds = _mixed_dataset()
    return fit(ds, load_spec("dualeval-2pl"), MAP)


# ----------------------------------------------------------------------------- BH
def test_bh_qvalues_hand_computed():
    p = [0.01, 0.04, 0.03, 0.2, np.nan, 0.5]
    # m = 5 sorted: 0.01 0.03 0.04 0.2 0.5 -> m p / k: 0.05 0.075 0.0667 0.25 0.5
    # running minimum from the right: 0.05 0.0667 0.0667 0.25 0.5
    expected = [0.05, 0.2 / 3, 0.2 / 3, 0.25, np.nan, 0.5]
    np.testing.assert_allclose(bh_qvalues(p), expected, rtol=1e-12, equal_nan=True)


def test_bh_qvalues_properties():
    rng = np.random.default_rng(0)
    p = rng.random(500) ** 3
    q = bh_qvalues(p)
    assert np.all(q >= p - 1e-15) and np.all(q <= 1.0)
    order = np.argsort(p)
    assert np.all(np.diff(q[order]) >= -1e-15)  # monotone in p
    assert np.all(np.isnan(bh_qvalues([np.nan, np.nan])))
    assert bh_qvalues([]).shape == (0,)
    np.testing.assert_allclose(bh_qvalues([0.3]), [0.3])


def test_calibration_table_counts_and_error():
    table = calibration_table([0.05, 0.15, 0.95, 1.0], [0, 1, 1, 1], bins=10)
    assert table["n"].sum() == 4 and table["n"].iloc[-1] == 2
    assert calibration_error(table) == pytest.approx((0.05 + 0.85 + 2 * 0.025) / 4)
    assert math.isnan(calibration_error(calibration_table([], [])))


def test_auroc_hand_computed():
    assert auroc([3, 2, 1, 0], [True, True, False, False]) == 1.0
    assert auroc([1, 1, 1], [True, False, False]) == 0.5
    assert auroc([0, 2, 1], [True, False, False]) == 0.0


# ----------------------------------------------------------------------------- items
def test_item_table_columns_and_flags(mixed):
    items = item_table(mixed.idata, mixed.dataset, pairs=mixed.pairs)
    ds = mixed.dataset
    assert list(items.columns) == ITEM_COLUMNS
    assert items["item"].tolist() == ds.items.tolist()
    static0 = ds.items[ds.static_items[0]]
    prompt0 = ds.items[ds.arena_items[0]]
    flags = dict(zip(items["item"], items["flags"], strict=True))
    assert "no_signal" in flags[static0].split(";")  # every model got it right
    assert "no_signal" in flags[prompt0].split(";")  # every reward equal
    row = items.set_index("item").loc[static0]
    assert row["observed"] == 1.0 and row["n_models"] == ds.n_models
    # MAP: a point estimate, no intervals
    assert items[["b_lo", "b_hi", "a_lo", "a_hi", "ci"]].isna().all().all()
    assert items["b_mean"].notna().all() and (items["a_mean"] > 0).all()
    assert (items["information"] >= 0).all()
    static = items["kind"] == "static"
    assert items.loc[static, "ppp"].between(0, 1).all()
    assert items.loc[~static, "ppp"].dropna().between(0, 1).all()
    assert math.isnan(items.set_index("item").loc[prompt0, "ppp"])  # no decisive pair
    assert items.attrs["arena_item_overdispersion"] >= 1.0
    allowed = {"", "no_signal", "low_discrimination", "misfit"}
    assert {f for text in items["flags"] for f in text.split(";")} <= allowed
    assert items["identified"].all()  # the default specification has the arena level term


def test_arena_items_are_marked_unidentified_without_the_level_term(mixed):
    result = fit(mixed.dataset, load_spec("dualeval-offsets"), MAP)
    items = item_table(result.idata, result.dataset, pairs=result.pairs)
    arena = items["kind"] == "arena"
    assert not items.loc[arena, "identified"].any()
    assert items.loc[~arena, "identified"].all()
    assert items.loc[arena, "flags"].str.contains("not_identified").all()
    assert not items.loc[~arena, "flags"].str.contains("not_identified").any()


def test_item_table_1pl_has_unit_discrimination(mixed):
    result = fit(mixed.dataset, load_spec("dualeval-1pl"), MAP)
    items = item_table(result.idata, result.dataset, pairs=result.pairs)
    assert (items["a_mean"] == 1.0).all()
    assert not items["flags"].str.contains("low_discrimination").any()


@pytest.mark.parametrize("mode", ["static", "bt", "reward"])
def test_other_modes(mode):
    static, arena, _ = simulate(n_models=5, n_static=15, n_arena=8, seed=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)
        full = Dataset.from_frames(static, arena)
    spec = load_spec("dualeval-2pl")
    config = (
        spec.replace(arena_likelihood="reward") if mode == "reward" else spec.replace(mode=mode)
    )
    result = fit(full, config, MAP)
    # the full dataset is restricted to the kinds the run fitted
    items = item_table(result.idata, full)
    cells = anomalies(result.idata, full)
    ppc = posterior_predictive(result.idata, full)
    kinds = {"static": {"static"}, "bt": {"arena"}, "reward": {"static", "arena"}}[mode]
    assert set(items["kind"]) == kinds and set(cells["kind"]) == kinds
    assert cells["p_value"].between(0, 1).all() and cells["q_value"].between(0, 1).all()
    json.dumps(ppc.summary, allow_nan=False)
    if mode == "bt":
        assert items[["b_mean", "a_mean", "information"]].isna().all().all()
    if mode == "reward":
        arena = cells[cells["kind"] == "arena"]
        assert len(arena) == len(full.arena_z)  # every reward is a cell
        assert ppc.summary["arena_statistic"] == "mean_reward_z"
        assert ppc.calibration_arena["n"].sum() == 0


def test_wrong_dataset_is_an_error(mixed):
    static, _, _ = simulate(n_models=5, n_static=10, n_arena=0, seed=9)
    other = Dataset.from_frames(static=static)
    with pytest.raises(InputError, match="fitted to"):
        anomalies(mixed.idata, other)


# ----------------------------------------------------------------------------- cells
def test_anomalies_table(mixed):
    cells = anomalies(mixed.idata, mixed.dataset, mixed.pairs)
    ds = mixed.dataset
    assert list(cells.columns) == CELL_COLUMNS
    n_static = len(ds.static_y)
    assert (cells["kind"] == "static").sum() == n_static
    assert np.all(np.diff(cells["p_value"].to_numpy()) >= 0)  # most surprising first
    assert cells["ppp"].between(0, 1).all()
    # a continuous statistic: ppp is the smaller tail
    assert cells.loc[cells["kind"] == "arena", "ppp"].between(0, 0.5 + 1e-12).all()
    np.testing.assert_allclose(cells["p_value"], np.minimum(1, 2 * cells["ppp"]))
    assert (cells["q_value"] >= cells["p_value"] - 1e-12).all()
    st = cells[cells["kind"] == "static"]
    # static: ppp is E[p] for a success and E[1 - p] for a failure
    ppp = np.where(st["observed"] == 1, st["expected"], 1 - st["expected"])
    np.testing.assert_allclose(st["ppp"], np.minimum(ppp, 1.0), atol=1e-12)
    assert np.all(np.sign(st["residual"]) == np.sign(st["observed"] - st["expected"]))
    # arena: observed soft wins of the planted cell: the weakest model won every pair
    arena = cells[cells["kind"] == "arena"].reset_index(drop=True)
    assert 0 < cells.attrs["arena_dispersion"] < 10
    prompt1 = ds.items[ds.arena_items[1]]
    top = arena.head(3)
    assert prompt1 in top["item"].tolist()
    planted = arena[arena["item"] == prompt1].iloc[0]
    assert planted["residual"] > 2 and planted["observed"] > planted["expected"]


def test_anomalies_reproducible(mixed):
    a = anomalies(mixed.idata, mixed.dataset, mixed.pairs, seed=4)
    b = anomalies(mixed.idata, mixed.dataset, seed=4)  # pairs recomputed: same defaults
    pd.testing.assert_frame_equal(a, b)


# ----------------------------------------------------------------------------- PPC
def test_posterior_predictive(mixed):
    ppc = posterior_predictive(mixed.idata, mixed.dataset, mixed.pairs, seed=1)
    ds = mixed.dataset
    s = ppc.summary
    for key in ("share_models_outside", "share_models_outside_static",
                "share_models_outside_arena", "share_items_outside"):  # fmt: skip
        assert 0.0 <= s[key] <= 1.0
    for key in ("calibration_error_static", "calibration_error_arena"):
        assert 0.0 <= s[key] <= 1.0
    assert ppc.calibration_static["n"].sum() == len(ds.static_y)
    assert ppc.calibration_arena["n"].sum() == mixed.pairs.n_decisive
    assert s["replicates"] >= 200 and s["draws"] == 1  # MAP: plug-in replicates
    assert len(ppc.models) == ds.n_models and len(ppc.items) == len(ds.static_items)
    m = ppc.models
    assert (m["static_rep_lo"] <= m["static_rep_hi"]).all()
    assert m["static_observed"].between(0, 1).all() and m["arena_observed"].between(0, 1).all()
    assert ppc.model_misfit["n_cells"].sum() == len(ppc.anomalies)
    assert ppc.item_misfit["n_cells"].sum() == len(ppc.anomalies)
    assert s["flagged_cells"] == int((ppc.anomalies["q_value"] < FLAG_Q).sum())
    json.dumps(s, allow_nan=False)  # plain numbers for diagnostics.json
    again = posterior_predictive(mixed.idata, mixed.dataset, mixed.pairs, seed=1)
    pd.testing.assert_frame_equal(ppc.models, again.models)


def test_write_adds_tables_and_summary(mixed, tmp_path):
    run = output.write(mixed, tmp_path / "run", ci=0.9, report=False)
    items = pd.read_csv(run / "items.csv", keep_default_na=False, na_values=[""])
    cells = pd.read_csv(run / "anomalies.csv")
    diag = json.loads((run / "diagnostics.json").read_text())
    assert list(items.columns) == ITEM_COLUMNS and len(items) == mixed.dataset.n_items
    assert list(cells.columns) == [*CELL_COLUMNS, "ci"]
    assert (cells["ci"] == 0.9).all()
    assert len(cells) >= min(output.ANOMALY_TOP, len(mixed.dataset.static_y))
    assert diag["ppc"]["ci"] == 0.9 and "share_models_outside" in diag["ppc"]


# ----------------------------------------------------------------------------- contamination
def test_contamination_ranks_injected_cells_first():
    """3% of predicted failures (true p < 0.2) flipped to successes, short NUTS fit.

    Measured (seed 0): AUROC 0.958 for the residual against 0.952 for the baseline
    ``y (1 - acc_model acc_item)``. Thresholds: ours above 0.9 and not below the baseline
    by more than 0.02.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = contamination_study(n_models=20, n_static=150, seed=0)
    assert r["injected"] == 90 and r["cells"] == 3000
    assert r["auroc"] > 0.9
    assert r["auroc"] >= r["auroc_baseline"] - 0.02
