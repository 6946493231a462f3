"""Scoring new models against a frozen bank (bayes_dualeval.measure: bank, grid, score).

One small bank is fitted once (NUTS, 10 simulated models x 120 questions + 30 prompts) and
shared; the new models are simulated with it, so their true abilities are known.
"""

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from bayes_dualeval import load
from bayes_dualeval.cli.commands import cli
from bayes_dualeval.core.errors import DataWarning, InputError
from bayes_dualeval.inference.settings import SamplerSettings
from bayes_dualeval.measure.bank import BANK_DRAWS, Bank
from bayes_dualeval.measure.grid import GRID, arena_pairs, loglik, posterior
from bayes_dualeval.measure.output import write_scores
from bayes_dualeval.measure.responses import responses
from bayes_dualeval.measure.score import MISFIT_P, score
from bayes_dualeval.model import arena_term
from bayes_dualeval.model.simulate import simulate, write
from bayes_dualeval.runs.fit import fit, write_run

N_BANK = 10
#: Bank draws the tests keep (of 600): enough for intervals, fast to score.
DRAWS = 300


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("score")
    static, arena, truth = simulate(n_models=16, n_static=120, n_arena=30, seed=11)
    names = sorted(static["model_label"].unique())
    bank_models, new_models = names[:N_BANK], names[N_BANK:]

    def part(models):
        return (
            static[static["model_label"].isin(models)],
            arena[arena["model_label"].isin(models)],
        )

    write(root / "bank_data", *part(bank_models), truth)
    write(root / "new_data", *part(new_models), truth)
    settings = SamplerSettings(sampler="nuts", chains=2, warmup=300, draws=300, seed=3, extend=0)
    result = fit(load(root / "bank_data"), settings=settings)
    write_run(result, root / "bank")
    bank = Bank.from_run(root / "bank", max_draws=DRAWS, allow_approximate=True)
    return root, bank, result, truth, bank_models, new_models


def _theta(table, model, new=True):
    return table[(table["model"] == model) & (table["new"] == new)].iloc[0]


def test_bank_records_the_fit(setup):
    _, bank, result, *_ = setup
    assert bank.model.config == result.config
    post = result.idata.posterior
    assert post.sizes["chain"] * post.sizes["draw"] == 600 and bank.n_draws == DRAWS
    # the short test bank did not pass the convergence check: refused unless allowed
    with pytest.raises(InputError, match="not a converged NUTS posterior"):
        Bank.from_run(setup[0] / "bank")
    full = Bank.from_run(setup[0] / "bank", allow_approximate=True)
    assert full.n_draws == min(BANK_DRAWS, 600) and "convergence check" in full.approximate
    assert bank.draws["b"].shape == (bank.n_draws, result.dataset.n_items)
    # the normalisation the fit applied: rebuilding z from raw rewards gives the stored z
    ds = bank.dataset
    src = np.asarray(ds.item_source)[ds.arena_item]
    centre = np.array([bank.reward_centre[s] for s in src])
    scale = np.array([bank.reward_scale[s] for s in src])
    np.testing.assert_allclose((ds.arena_reward - centre) / scale, ds.arena_z, atol=1e-9)


def test_new_models_cover_their_truth_on_the_bank_scale(setup):
    root, bank, _, truth, bank_models, new_models = setup
    out = score(bank, root / "new_data", ci=0.9)
    table = out.scores
    assert len(table) == N_BANK + len(new_models) and table["new"].sum() == len(new_models)
    shift = np.mean([truth["theta"][m] for m in bank_models])
    inside = [
        _theta(table, m).theta_lo <= truth["theta"][m] - shift <= _theta(table, m).theta_hi
        for m in new_models
    ]
    # 6 models at 90%: at least 4 inside (P(<= 3 of 6) is 1.6% for calibrated intervals)
    assert sum(inside) >= 4, inside
    est = [_theta(table, m).theta_mean for m in new_models]
    true = [truth["theta"][m] for m in new_models]
    # linear, not rank, agreement: three of the six true abilities lie within 0.3 of each
    # other (-0.10, -0.14, -0.38), about one posterior sd (90% intervals 0.7-0.8 wide), so
    # their order is a coin flip and one swap takes Spearman's rho to 0.77 (it did when the
    # bank's draws changed); a scorer that ignores the data, or flips the scale, fails this
    assert pd.Series(est).corr(pd.Series(true)) >= 0.8
    # ranks count every model; new ones carry person fit, bank ones do not
    assert table["rank_hi"].max() <= len(table) and table["rank_lo"].min() >= 1
    assert table.loc[table["new"], "fit_p"].notna().all()
    assert table.loc[~table["new"], "fit_p"].isna().all()


def test_rescoring_a_bank_model_matches_its_joint_posterior(setup):
    """The cut posterior from a model's own responses is close to its joint posterior."""
    root, bank, *_ = setup
    with pytest.raises(InputError, match="already in bank"):
        score(bank, root / "bank_data")
    out = score(bank, root / "bank_data", rescore=True)
    table = out.scores
    for model in bank.models:
        joint, cut = _theta(table, model, new=False), _theta(table, model, new=True)
        # the same data through the grid: means within half a posterior sd, sds within 35%
        assert abs(joint.theta_mean - cut.theta_mean) <= 0.5 * joint.theta_sd, model
        assert 0.65 <= cut.theta_sd / joint.theta_sd <= 1.35, model


def test_grid_covers_the_posterior(setup):
    root, bank, *_ = setup
    resp = responses(root / "new_data", bank)
    post = posterior(bank, resp, arena_pairs(bank, resp))
    assert post.grids.shape == (resp.n_models, GRID)
    np.testing.assert_allclose(post.weights.sum(axis=2), 1.0, atol=1e-9)
    # no mass left at the edges: the grid spans the posterior of every draw
    assert post.weights[:, :, [0, -1]].max() < 1e-5


def _reference_loglik(bank, resp, pairs, grids, d):
    """The grid log likelihood at bank draw ``d``, term by term in float64 NumPy.

    Static labels written out; the arena pairs from the arena term's definition.
    """
    from scipy.special import expit, log_expit

    config = bank.model.config
    centre = bank.draws["theta"][d].mean()
    b, a = bank.draws["b"][d].astype(float), bank.draws["a"][d].astype(float)
    gamma = float(bank.draws["gamma"][d])
    out = np.zeros(grids.shape)
    for k in range(resp.n_models):
        theta = grids[k] + centre  # (G,)
        mine = resp.static_model == k
        q, y, n = resp.static_item[mine], resp.static_y[mine], resp.static_n[mine]
        eta = a[q][:, None] * (theta[None] - b[q][:, None])
        # k correct of n answers: the sum of the n answers' Bernoulli terms
        out[k] += (y[:, None] * log_expit(eta) + (n - y)[:, None] * log_expit(-eta)).sum(0)
        sel = pairs.model == k
        q, j = pairs.item[sel], pairs.other[sel]
        w, t, bad = pairs.weight[sel], pairs.target[sel], pairs.both_bad[sel]
        eta_mine = a[q][:, None] * (theta[None] - b[q][:, None])
        p_mine = expit(eta_mine)
        p_other = expit(a[q] * (bank.draws["theta"][d][j] - b[q]))[:, None]
        # the arena term's one definition (bayes_dualeval.model.arena_term)
        x = gamma * (p_mine - p_other)
        soft = arena_term.pair(x, t[:, None], 1.0)
        ll = np.where(
            bad[:, None],
            config.lambda_bb * arena_term.both_bad(eta_mine, 1.0),
            bank.model.arena.weight * soft,
        )
        out[k] += (w[:, None] * ll).sum(0)
    return out


def test_grid_loglik_equals_the_terms_summed_one_by_one(setup):
    """The compiled kernels against a term-by-term sum; tolerance float32 rounding."""
    root, bank, *_ = setup
    resp = responses(root / "new_data", bank)
    pairs = arena_pairs(bank, resp)
    assert len(pairs) and resp.static_y.size
    grids = np.linspace(-3, 3, 9)[None, :] + np.linspace(-0.5, 0.5, resp.n_models)[:, None]
    rows = np.array([0, 7, bank.n_draws - 1])
    got = loglik(bank, resp, pairs, grids, rows)
    for i, d in enumerate(rows):
        want = _reference_loglik(bank, resp, pairs, grids, d)
        np.testing.assert_allclose(got[:, i], want, rtol=2e-5, atol=1e-3)


def _repeated_answers(root, truth, tmp_path, samples):
    """The new models' static answers drawn ``samples`` times from the truth (seeded)."""
    from scipy.special import expit

    frame = pd.read_json(root / "new_data" / "bench" / "static.jsonl", lines=True)
    ids = "bench::" + frame["dataset"] + "_" + frame["sample_index"].astype(str)
    a = ids.map(lambda q: truth["items"][q]["a"]).to_numpy()
    b = ids.map(lambda q: truth["items"][q]["b"]).to_numpy()
    theta = frame["model_label"].map(truth["theta"]).to_numpy()
    p = expit(a * (theta - b))
    rng = np.random.default_rng(17)
    parts = [
        frame.assign(correct=(rng.random(len(p)) < p).astype(int), sample=k)
        for k in range(samples)
    ]
    folder = tmp_path / f"x{samples}"
    (folder / "bench").mkdir(parents=True)
    pd.concat(parts).to_json(folder / "bench" / "static.jsonl", orient="records", lines=True)
    return folder


def test_repeated_answers_count_in_the_grid_and_narrow_the_interval(setup, tmp_path):
    """Three answers per question: the kernels sum every answer, and the intervals shrink."""
    root, bank, _, truth, *_ = setup
    three, one = (_repeated_answers(root, truth, tmp_path, n) for n in (3, 1))
    resp = responses(three, bank)
    assert set(resp.static_n.tolist()) == {3.0} and resp.static_y.max() == 3
    grids = np.linspace(-3, 3, 9)[None, :] + np.zeros((resp.n_models, 1))
    rows = np.array([0, bank.n_draws - 1])
    pairs = arena_pairs(bank, resp)
    got = loglik(bank, resp, pairs, grids, rows)
    for i, d in enumerate(rows):
        want = _reference_loglik(bank, resp, pairs, grids, d)
        np.testing.assert_allclose(got[:, i], want, rtol=2e-5, atol=1e-3)
    sd = {
        n: score(bank, folder, ci=0.9).scores.query("new").set_index("model")["theta_sd"]
        for n, folder in ((3, three), (1, one))
    }
    ratio = (sd[3] / sd[1].reindex(sd[3].index)).to_numpy()
    # static-only scoring: about 1 / sqrt(3) = 0.58 in expectation; 0.8 leaves room for
    # the bank's own uncertainty (shared by both) and for the grid
    assert ratio.mean() < 0.8 and (ratio < 1).all(), ratio


def test_flipped_answers_misfit_the_bank(setup, tmp_path):
    """A tiny bank (10 models) knows its items roughly: the test is paired, not absolute.

    The calibrated false-alarm rate and power on larger banks are measured by
    scripts/studies/score_study.py (docs/measurement.md).
    """
    root, bank, *_ = setup
    frame = pd.read_json(root / "new_data" / "bench" / "static.jsonl", lines=True)
    rng = np.random.default_rng(5)
    flipped = frame.copy()
    flip = rng.random(len(flipped)) < 0.3
    flipped.loc[flip, "correct"] = 1 - flipped.loc[flip, "correct"]
    flipped["model_label"] = flipped["model_label"] + "-flipped"
    (tmp_path / "bench").mkdir()
    pd.concat([frame, flipped]).to_json(
        tmp_path / "bench" / "static.jsonl", orient="records", lines=True
    )
    out = score(bank, tmp_path)
    fit_p = out.scores.set_index("model")["fit_p"]
    clean = fit_p[[m for m in fit_p.index if m + "-flipped" in fit_p.index]]
    bad = fit_p[clean.index + "-flipped"].to_numpy()
    # 30% of the answers flipped: lower fit_p than the clean twin for at least 5 of 6,
    # and clean models are not flagged (at most one of six below MISFIT_P)
    assert (bad < clean.to_numpy()).sum() >= 5, (clean, bad)
    assert (clean < MISFIT_P).sum() <= 1, clean
    assert bad.mean() < 0.5 * clean.mean()
    flagged = fit_p[fit_p < MISFIT_P].index
    if len(flagged):
        assert out.warnings and all(m in out.warnings[0] for m in flagged)


def test_predicted_accuracy_on_unanswered_questions(setup, tmp_path):
    root, bank, _, truth, *_ = setup
    frame = pd.read_json(root / "new_data" / "bench" / "static.jsonl", lines=True)
    (tmp_path / "bench").mkdir()
    frame.to_json(tmp_path / "bench" / "static.jsonl", orient="records", lines=True)
    full = score(bank, tmp_path).accuracy.set_index(["model", "dataset"])
    # every question answered: the prediction is the observed accuracy, exactly
    np.testing.assert_allclose(full["predicted_accuracy"], full["observed_accuracy"])
    np.testing.assert_allclose(full["predicted_lo"], full["observed_accuracy"])
    half = frame[frame["sample_index"] % 2 == 0]
    shutil.rmtree(tmp_path / "bench")
    (tmp_path / "bench").mkdir()
    half.to_json(tmp_path / "bench" / "static.jsonl", orient="records", lines=True)
    part = score(bank, tmp_path).accuracy.set_index(["model", "dataset"])
    assert (part["n_answered"] < part["n_bank_items"]).all()
    error = (part["predicted_accuracy"] - full["observed_accuracy"]).abs()
    # 60 of 120 questions answered: the full-benchmark accuracy within 0.06 on average
    assert error.mean() < 0.06, error
    assert ((part["predicted_lo"] <= part["predicted_accuracy"])
            & (part["predicted_accuracy"] <= part["predicted_hi"])).all()  # fmt: skip


def test_items_outside_the_bank_are_counted_and_skipped(setup, tmp_data):
    _, bank, *_ = setup
    rows = [{"model_label": "newbie", "dataset": "math_bench", "sample_index": k,
             "correct": k % 2} for k in range(5)]  # fmt: skip
    rows += [{"model_label": "newbie", "dataset": "unknown", "sample_index": k, "correct": 1}
             for k in range(3)]  # fmt: skip
    tmp_data.jsonl("bench/s.jsonl", rows)
    with pytest.warns(DataWarning, match="3 rows"):
        resp = responses(tmp_data.root, bank)
    assert resp.n_skipped == 3 and len(resp.static_y) == 5
    tmp_data.jsonl("elsewhere/s.jsonl", rows)  # another source: no bank item at all
    with pytest.raises(InputError, match="no row of the data is on an item"):
        responses(tmp_data.root / "elsewhere", bank)


def test_all_correct_model_gets_an_honest_interval(setup, tmp_data):
    _, bank, *_ = setup
    rows = [{"model_label": "perfect", "dataset": "math_bench", "sample_index": k,
             "correct": 1} for k in range(40)]  # fmt: skip
    tmp_data.jsonl("bench/s.jsonl", rows)
    row = _theta(score(bank, tmp_data.root).scores, "perfect")
    best_bank = bank.draws["theta_centred"].mean(axis=0).max()
    # above the bank's best, but finite and bounded by the prior, not running away
    assert best_bank < row.theta_mean < 6 * bank.model.config.theta_scale
    assert np.isfinite(row.theta_hi) and row.theta_sd > 0.2


def test_bad_banks_are_refused_in_one_line(setup, tmp_path):
    root, bank, result, *_ = setup
    with pytest.raises(InputError, match="does not exist"):
        Bank.from_run(tmp_path / "missing")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError, match="not a run folder"):
        Bank.from_run(empty)
    truncated = tmp_path / "truncated"
    shutil.copytree(root / "bank", truncated)
    data = (truncated / "posterior.nc").read_bytes()
    (truncated / "posterior.nc").write_bytes(data[: len(data) // 3])
    with pytest.raises(InputError, match="cannot read the run"):
        Bank.from_run(truncated)
    other = tmp_path / "other_version"
    shutil.copytree(root / "bank", other)
    diag = json.loads((other / "diagnostics.json").read_text())
    diag["versions"]["bayes_dualeval"] = "0.0.1"
    (other / "diagnostics.json").write_text(json.dumps(diag))
    # another version's bank is read when it stores what this version reads ...
    older = Bank.from_run(other, max_draws=DRAWS, allow_approximate=True)
    assert older.version == "0.0.1"
    np.testing.assert_array_equal(older.draws["b"], bank.draws["b"])
    # ... and refused, naming the version and the field, when it does not
    del diag["data"]["reward_norm"]
    (other / "diagnostics.json").write_text(json.dumps(diag))
    with pytest.raises(InputError, match="reward normalisation.*written by bayes-dualeval 0.0.1"):
        Bank.from_run(other, allow_approximate=True)
    point = tmp_path / "point"
    shutil.copytree(root / "bank", point)
    one = result.idata.isel(chain=[0], draw=[0])
    from bayes_dualeval.runs.fit import write_netcdf

    (point / "posterior.nc").unlink()
    write_netcdf(one, point / "posterior.nc")
    with pytest.raises(InputError, match="not posterior draws"):
        Bank.from_run(point)
    with pytest.raises(InputError, match="ci must be"):
        score(bank, root / "new_data", ci=1.5)


def test_score_command_writes_its_folder_or_nothing(setup, tmp_path):
    root, bank, *_ = setup
    out = tmp_path / "scored"
    runner = CliRunner()
    args = ["--bank", str(root / "bank"), "--draws", str(DRAWS), "--allow-approximate"]
    res = runner.invoke(cli, ["score", str(root / "new_data"), *args, "--out", str(out)])
    assert res.exit_code == 0, res.output
    names = {p.name for p in out.iterdir()}
    assert {"scores.csv", "accuracy.csv", "summary.json", "report.html", "report.md"} <= names
    scores = pd.read_csv(out / "scores.csv")
    assert list(scores.columns[:4]) == ["model", "theta_mean", "theta_sd", "theta_lo"]
    assert "new model" not in res.output and "rank" in res.output
    again = runner.invoke(cli, ["score", str(root / "new_data"), *args, "--out", str(out)])
    assert again.exit_code == 1 and "choose another --out" in again.output
    bad_out = ["--out", str(tmp_path / "x")]
    bad = runner.invoke(cli, ["score", str(root / "bank_data"), *args, *bad_out])
    assert bad.exit_code == 1 and "--rescore" in bad.output
    assert "Traceback" not in bad.output and not (tmp_path / "x").exists()
    # a failure while writing leaves no folder behind
    result = score(bank, root / "new_data")  # the fixture's bank keeps DRAWS draws
    result.scores = None
    with pytest.raises(AttributeError):
        write_scores(result, tmp_path / "partial")
    assert not Path(tmp_path / "partial").exists()
    assert not any(p.name.startswith(".partial") for p in tmp_path.iterdir())


def test_compress_and_adaptive_commands(setup, tmp_path):
    root, *_ = setup
    runner = CliRunner()
    bank_dir = str(root / "bank")
    short = tmp_path / "short.csv"
    res = runner.invoke(cli, ["compress", bank_dir, "--items", "20", "--allow-approximate",
                              "--out", str(short)])  # fmt: skip
    assert res.exit_code == 0, res.output
    table = pd.read_csv(short)
    assert len(table) == 20 and list(table.columns) == [
        "item", "source", "kind", "b_mean", "a_mean", "information", "approximate_bank",
    ]  # fmt: skip
    # scoring on the short form: only its items are used, accuracy still over all questions
    out = tmp_path / "scored"
    res = runner.invoke(cli, ["score", str(root / "new_data"), "--bank", bank_dir, "--draws",
                              str(DRAWS), "--items", str(short), "--allow-approximate",
                              "--out", str(out)])  # fmt: skip
    assert res.exit_code == 0, res.output
    acc = pd.read_csv(out / "accuracy.csv")
    n_static = int((table["kind"] == "static").sum())
    assert (acc.loc[acc["dataset"] == "all", "n_answered"] <= n_static).all()
    assert (acc.loc[acc["dataset"] == "all", "n_bank_items"] == 120).all()
    cat = tmp_path / "cat"
    res = runner.invoke(cli, ["adaptive", "--bank", bank_dir, "--data", str(root / "new_data"),
                              "--allow-approximate", "--target-se", "0.4",
                              "--out", str(cat)])  # fmt: skip
    assert res.exit_code == 0, res.output
    names = {p.name for p in cat.iterdir()}
    assert {"adaptive.csv", "trace.csv", "random_adaptive.csv", "sd_by_items.png",
            "benchmarks.csv"} <= names  # fmt: skip
    summary = pd.read_csv(cat / "adaptive.csv")
    assert len(summary) == 6 and set(summary["stopped_by"]) <= {"se", "max_items", "pool"}
    # how well each rule measured: its reliability from the final posteriors
    measured = pd.read_csv(cat / "benchmarks.csv").set_index("rule")
    assert set(measured.index) == {"fisher", "random"} and (measured["models"] == 6).all()
    sd2 = (summary["theta_sd"] ** 2).mean()
    spread = summary["theta_mean"].var(ddof=0)
    assert measured.loc["fisher", "reliability"] == pytest.approx(spread / (spread + sd2))
    assert measured.loc["fisher", "items"] == pytest.approx(summary["n_items"].mean())
    # bad settings: one Error line, nothing written
    for args, text in (
        (["adaptive", "--bank", bank_dir, "--data", str(root / "new_data"), "--target-se", "0",
          "--allow-approximate", "--out", str(tmp_path / "bad")], "target_se"),
        (["compress", bank_dir, "--items", "100000", "--allow-approximate"], "n_items"),
    ):  # fmt: skip
        res = runner.invoke(cli, args)
        assert res.exit_code == 1 and res.output.count("Error:") == 1, res.output
        assert text in res.output and "Traceback" not in res.output
    assert not (tmp_path / "bad").exists()


def test_sbc_command_calibrates_score_against_the_bank(setup, tmp_path):
    """``sbc --bank``: the measure stage's folder, its tables, and a refused bank in one line."""
    root = setup[0]
    runner = CliRunner()
    out = tmp_path / "msbc"
    args = ["sbc", "--bank", str(root / "bank"), "--sims", "40", "--bank-draws", "50",
            "--items", "30", "--seed", "1"]  # fmt: skip
    res = runner.invoke(cli, [*args, "--allow-approximate", "--out", str(out)])
    assert res.exit_code == 0, res.output
    names = {p.name for p in out.iterdir()}
    assert names == {"sbc.csv", "coverage.csv", "ranks.csv", "sbc.png", "sbc.json"}
    summary = pd.read_csv(out / "sbc.csv")
    assert list(summary.columns) == ["quantity", "sims", "ecdf_max_dev", "p_value", "within_band"]
    assert set(summary["quantity"]) == {"theta_equal", "theta_weighted", "fit_p"}
    info = json.loads((out / "sbc.json").read_text())
    assert info["items"] == 30 and info["bank_draws"] == 50 and info["sims"] == 40
    # the short test bank failed its convergence check: refused without the flag
    res = runner.invoke(cli, [*args, "--out", str(tmp_path / "refused")])
    assert res.exit_code == 1 and res.output.count("Error:") == 1, res.output
    assert "--allow-approximate" in res.output and not (tmp_path / "refused").exists()
