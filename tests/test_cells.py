"""The cell audit: one-sided p-values valid under the null, BY q-values, planted faults found.

Null checks use data simulated from known parameters, scored with those parameters as the
posterior (exact) and with a MAP fit (in-sample, conservative). Planted faults: 2% of the
static cells turned into successes where the true model predicts failure, fitted through
the command line with ``--anomalies all``; and DualEval's arena protocol, 2.0 added to the
z-score of 3% of the low-reward cells. Each test is seeded; tolerances are stated where
they are set, with the measured values.
"""

import json
import shutil
import warnings

import arviz as az
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from bayes_dualeval.checks import FLAG_Q, anomalies, by_qvalues
from bayes_dualeval.cli.commands import cli
from bayes_dualeval.core.errors import ConfigError
from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.data.load import load
from bayes_dualeval.inference.settings import SamplerSettings
from bayes_dualeval.model.config import load_spec
from bayes_dualeval.model.simulate import STATIC_SOURCE, simulate, write
from bayes_dualeval.model.spec import DualEvalModel
from bayes_dualeval.runs import load as run_load
from bayes_dualeval.runs import output
from bayes_dualeval.runs.fit import fit
from bayes_dualeval.runs.selection import ALL, ANOMALY_TOP, anomaly_rows, select_anomalies
from bayes_dualeval.validation.audit import (
    arena_key,
    auprc,
    auroc,
    empirical_baseline,
    plant_arena,
    precision_at_k,
    static_key,
    table_score,
    twoway_residual,
)
from bayes_dualeval.validation.contamination import contaminate, true_probability

ALPHAS = (0.01, 0.05, 0.1, 0.2)
MAP = SamplerSettings(sampler="map", seed=0, progress=False)


def _quiet_frames(static=None, arena=None) -> Dataset:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Dataset.from_frames(static=static, arena=arena)


def _truth_posterior(ds: Dataset, truth: dict, config, draws: int = 2):
    """A posterior whose every draw is the simulation's true theta, a and b."""
    theta = np.array([truth["theta"][m] for m in ds.models])
    par = [truth["items"][q] for q in ds.items]
    a, b = (np.array([v[k] for v in par]) for k in ("a", "b"))
    post = {
        name: np.broadcast_to(values, (1, draws, len(values))).astype(np.float32)
        for name, values in (("theta", theta), ("a", a), ("b", b))
    }
    idata = az.from_dict(
        posterior=post,
        coords={"model": ds.models, "item": ds.items},
        dims={"theta": ["model"], "a": ["item"], "b": ["item"]},
    )
    idata.posterior.attrs.update(DualEvalModel(config).to_attrs())
    return idata


# ----------------------------------------------------------------------------- FDR
def test_by_qvalues_hand_computed():
    # m = 4, c(4) = 1 + 1/2 + 1/3 + 1/4 = 25/12; sorted 0.01 0.03 0.04 0.2 (k = 1..4)
    # c m p / k: 0.0833 0.125 0.1111 0.4167 -> running minimum from the right:
    # 0.0833 0.1111 0.1111 0.4167
    c = 25 / 12
    expected = [c * 0.04, c * 4 * 0.04 / 3, c * 4 * 0.04 / 3, c * 0.2, np.nan]
    p = [0.01, 0.04, 0.03, 0.2, np.nan]
    np.testing.assert_allclose(by_qvalues(p), expected, rtol=1e-12, equal_nan=True)
    assert by_qvalues([]).shape == (0,)


# ----------------------------------------------------------------------------- null
@pytest.mark.parametrize("seed", [0, 1])
def test_static_p_values_are_conservative_under_the_true_model(seed):
    """Labels drawn from known 2PL parameters, scored with those parameters as draws.

    Then ``p_value`` is the true ``p`` of a success and 1 of a failure, so
    ``P(p_value <= alpha) = mean(p 1[p <= alpha]) <= alpha``. Checked: the share of cells
    with ``p_value <= alpha`` is within 4 binomial sd of that expectation and not above
    ``alpha`` (measured: at most 0.02 at alpha = 0.2, 40 x 400 cells). ``p_lower``, the
    mirrored direction, is checked the same way.
    """
    static, _, truth = simulate(n_models=40, n_static=400, n_arena=0, seed=seed)
    static["source"] = STATIC_SOURCE
    ds = _quiet_frames(static)
    config = load_spec("dualeval-2pl").replace(mode="static")
    cells = anomalies(_truth_posterior(ds, truth, config), ds)
    key = cells.set_index(["model", "item"]).index
    p_true = true_probability(truth, key.get_level_values(0), key.get_level_values(1))
    y = cells["observed"].to_numpy()
    np.testing.assert_allclose(cells["p_value"], np.where(y > 0, p_true, 1.0), atol=1e-6)
    for column, prob in (("p_value", p_true), ("p_lower", 1.0 - p_true)):
        p = cells[column].to_numpy()
        for alpha in ALPHAS:
            share = (p <= alpha).mean()
            hit = prob <= alpha
            mean = (prob * hit).mean()
            sd = np.sqrt((prob * (1 - prob) * hit).sum()) / len(p)
            assert abs(share - mean) <= 4 * sd + 1e-12, (column, alpha, share, mean)
            assert share <= alpha, (column, alpha, share)


@pytest.fixture(scope="module")
def reward_run():
    """20 models x 150 items (2PL labels) and 40 prompts with noisy rewards (noise 1.0);
    DualEval's arena protocol planted (+2.0 on the z-score of 3% of the lowest-third
    cells); MAP fit with the reward likelihood. Static labels are null data."""
    static, arena, _ = simulate(n_models=20, n_static=150, n_arena=40, reward_noise=1.0, seed=4)
    clean = _quiet_frames(static, arena)
    ds, planted = plant_arena(clean, share=0.03, shift=2.0, seed=4)
    result = fit(ds, load_spec("dualeval-reward"), MAP)
    return clean, ds, planted, anomalies(result.idata, result.dataset)


@pytest.mark.study
def test_fitted_null_p_values_are_uniform_or_conservative(reward_run):
    """Static cells (null data) and the clean arena cells of a MAP fit.

    In-sample, a static success is predicted a little too well, so its p-value is
    conservative (measured share with p <= 0.2: about 0.01); clean arena cells are about
    uniform (measured 0.19 at 0.2 and 0.047 at 0.05 on 1,800 null cells). Tolerance:
    ``alpha`` plus 3 binomial sd.
    """
    _, ds, planted, cells = reward_run
    arena = cells[cells["kind"] == "arena"].set_index(["model", "item"])
    clean_arena = arena.reindex(arena_key(ds)[~planted])["p_value"].to_numpy()
    static_p = cells.loc[cells["kind"] == "static", "p_value"].to_numpy()
    for kind, p in (("static", static_p), ("arena", clean_arena)):
        for alpha in ALPHAS:
            tol = 3 * np.sqrt(alpha * (1 - alpha) / len(p))
            assert (p <= alpha).mean() <= alpha + tol, (kind, alpha, (p <= alpha).mean())
    assert (static_p <= 0.2).mean() < 0.1  # one-sided and discrete: conservative


@pytest.mark.study
def test_arena_p_values_hold_per_source_when_reward_models_differ_in_noise():
    """Two arena sources, one with extra reward noise (N(0, 2) added before normalising).

    The pairs dispersion is estimated per source, so the clean cells of each source are
    about uniform. Pooled over sources (the old estimate), the noisy source had 9.6% and
    the quiet one 1.2% of cells with ``p_value <= 0.05`` (1,200 cells each). Tolerance:
    0.05 plus or minus 3 binomial sd per source (cells of a prompt are negatively
    dependent, which narrows the spread); measured 0.041 and 0.044 on seed 1.
    """
    static, arena, _ = simulate(n_models=20, n_static=100, n_arena=120, reward_noise=0.5, seed=1)
    noisy = arena["item_id"].isin(arena["item_id"].unique()[::2]).to_numpy()
    arena["source"] = np.where(noisy, "noisy", "quiet")
    rng = np.random.default_rng(1)
    arena.loc[noisy, "reward"] += 2.0 * rng.standard_normal(noisy.sum())
    result = fit(_quiet_frames(static, arena), load_spec("dualeval-2pl"), MAP)
    cells = anomalies(result.idata, result.dataset)
    cells = cells[cells["kind"] == "arena"]
    index = pd.Index(result.dataset.items).get_indexer(cells["item"])
    source = result.dataset.item_source[index]
    for name in ("noisy", "quiet"):
        p = cells.loc[source == name, "p_value"].to_numpy()
        tol = 3 * np.sqrt(0.05 * 0.95 / len(p))
        assert abs((p <= 0.05).mean() - 0.05) <= tol, (name, (p <= 0.05).mean())


@pytest.mark.study
def test_arena_plants_are_found(reward_run):
    """DualEval's protocol: +2.0 on the z-score of 3% of the lowest-third cells.

    Measured AUROC of the cell table's order 0.96-0.99 (16 x 40 prompts, two seeds), about
    the two-way residual baseline's; the wrong tail would give about 0.3. Thresholds: AUROC
    above 0.85, AUPRC above 0.3 (base rate 0.03).
    """
    clean, ds, planted, cells = reward_run
    assert planted.sum() == round(0.03 * len(ds.arena_z))
    was_low = clean.arena_z < np.quantile(clean.arena_z, 1 / 3)
    assert ds.arena_z[planted].mean() - clean.arena_z[was_low].mean() > 1.5
    np.testing.assert_array_equal(ds.static_y, clean.static_y)
    score = table_score(cells[cells["kind"] == "arena"], arena_key(ds))
    assert auroc(score, planted) > 0.85
    assert auprc(score, planted) > 0.3
    assert auroc(twoway_residual(ds), planted) > 0.85


# ----------------------------------------------------------------------------- planted
@pytest.fixture(scope="module")
def planted_run(tmp_path_factory):
    """30 models x 200 items (2PL); 2% of cells flipped to successes where true p < 0.2.

    Written as input files and fitted by ``fit --sampler map --anomalies all``.
    """
    root = tmp_path_factory.mktemp("planted")
    static, arena, truth = simulate(n_models=30, n_static=200, n_arena=0, seed=7)
    static, injected = contaminate(static, truth, share=0.02, max_p=0.2, seed=8)
    planted_ids = (
        static["model_label"] + "|" + STATIC_SOURCE + "::" + static["dataset"] + "_"
        + static["sample_index"].astype(str)
    )[injected]  # fmt: skip
    write(root / "data", static.drop(columns="source"), arena, truth)
    run = root / "run"
    result = CliRunner().invoke(
        cli,
        ["fit", str(root / "data"), "--sampler", "map", "--mode", "static", "--anomalies",
         "all", "--out", str(run), "-q", "--no-report"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    ds = load([str(root / "data")])
    key = static_key(ds)
    planted = np.asarray(
        (key.get_level_values(0) + "|" + key.get_level_values(1)).isin(planted_ids)
    )
    assert planted.sum() == 120
    return run, ds, key, planted


def test_planted_successes_rank_high_in_anomalies_csv(planted_run):
    """AUROC of the file's order at least the empirical baseline's, less 0.01.

    Measured (seed 7): 0.976 for the file, 0.974 for ``y (1 - acc_model acc_item)``; on
    data from the model's own family the two are close (docs/auditing.md). The default
    file (500 rows) scores 0.925, a file of the old 50 most surprising rows 0.602.
    """
    run, ds, key, planted = planted_run
    table = pd.read_csv(run / "anomalies.csv")
    ours = auroc(table_score(table, key), planted)
    baseline = auroc(empirical_baseline(ds), planted)
    assert ours > 0.93
    assert ours >= baseline - 0.01, (ours, baseline)
    assert auprc(table_score(table, key), planted) > 5 * planted.mean()


def test_anomalies_all_writes_every_cell_most_surprising_first(planted_run):
    run, ds, key, _ = planted_run
    table = pd.read_csv(run / "anomalies.csv")
    assert len(table) == len(ds.static_y)
    assert list(table.columns) == [
        "model", "item", "kind", "observed", "expected", "residual", "p_value", "p_lower",
        "q_value", "ci",
    ]  # fmt: skip
    assert set(zip(table["model"], table["item"], strict=True)) == set(key)
    p = table["p_value"].to_numpy()
    assert np.all(np.diff(p) >= 0)
    assert (table.loc[table["observed"] == 0, "p_value"] == 1).all()
    # Benjamini-Yekutieli over the cells that could reach FLAG_Q (Tarone): a single label's
    # smallest attainable p_value is its predicted success probability, the `expected` column
    family = table["expected"].to_numpy() <= FLAG_Q
    assert 0 < family.sum() < len(table)
    np.testing.assert_allclose(table["q_value"][family], by_qvalues(p[family]), rtol=1e-4)
    assert (table["q_value"][~family] == 1).all()
    diagnostics = json.loads((run / "diagnostics.json").read_text())
    assert diagnostics["anomalies"] == ALL


def test_report_rebuild_keeps_the_recorded_anomalies_setting(planted_run, tmp_path):
    run, ds, _, _ = planted_run
    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    result = run_load.load_result(copy)
    output.tabulate(result, ci=result.diagnostics["ci"])  # no setting given: the run's
    assert len(result.tables["anomalies"]) == len(ds.static_y)
    tables = result.tables
    # the same level and setting again: the tables are kept, not computed a second time
    assert output.tabulate(result, ci=result.diagnostics["ci"], anomalies=ALL).tables is tables
    output.tabulate(result, ci=0.95, anomalies=10)
    assert result.tables is not tables
    kept = result.tables["anomalies"]
    assert 10 <= len(kept) < len(ds.static_y) and result.diagnostics["anomalies"] == 10


# ----------------------------------------------------------------------------- settings
def test_anomaly_rows_setting_is_checked():
    assert anomaly_rows("ALL") == ALL and anomaly_rows(" 20 ") == 20 and anomaly_rows(0) == 0
    for bad in (-1, 2.5, True, "x", "-3", "1e3", None):
        with pytest.raises(ConfigError, match="anomalies"):
            anomaly_rows(bad)


def test_default_selection_is_the_top_rows_and_every_flagged_cell():
    n = ANOMALY_TOP + 300
    q = np.ones(n)
    q[[3, ANOMALY_TOP + 5, ANOMALY_TOP + 200]] = 0.01  # flagged, two beyond the top rows
    q[ANOMALY_TOP + 6] = FLAG_Q  # not below the level
    cells = pd.DataFrame({"model": np.arange(n).astype(str), "q_value": q})
    kept = select_anomalies(cells, ANOMALY_TOP, FLAG_Q)
    assert kept["model"].tolist() == [
        *map(str, range(ANOMALY_TOP)),
        str(ANOMALY_TOP + 5),
        str(ANOMALY_TOP + 200),
    ]
    assert len(select_anomalies(cells, ALL, FLAG_Q)) == n


@pytest.mark.parametrize("value", ["-1", "some", "2.5"])
def test_fit_rejects_a_bad_anomalies_value(tmp_path, value):
    result = CliRunner().invoke(
        cli, ["fit", str(tmp_path), "--anomalies", value, "--out", str(tmp_path / "r")]
    )
    assert result.exit_code == 2 and "--anomalies" in result.output
    assert "Traceback" not in result.output and not (tmp_path / "r").exists()


def test_ranking_metrics_hand_computed():
    score, positive = [4, 3, 3, 1, 0], [True, True, False, False, True]
    assert auroc(score, positive) == pytest.approx((2 + 1.5 + 0) / 6)
    # thresholds 4: P 1 R 1/3; 3: P 2/3 R 2/3; 1: P 1/2; 0: P 3/5 R 1
    assert auprc(score, positive) == pytest.approx(1 / 3 + (1 / 3) * (2 / 3) + (1 / 3) * 0.6)
    assert precision_at_k(score, positive, 2) == 1.0
    assert precision_at_k(score, positive, 3) == pytest.approx(2 / 3)


def test_report_rejects_a_bad_anomalies_value(planted_run):
    run, _, _, _ = planted_run
    result = CliRunner().invoke(cli, ["report", str(run), "--anomalies", "many"])
    assert result.exit_code == 2 and "--anomalies" in result.output
    assert "--anomalies" in CliRunner().invoke(cli, ["report", "--help"]).output
