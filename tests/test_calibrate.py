"""Calibrating new questions against a frozen bank (bayes_dualeval.measure.calibrate).

One small bank is fitted once (NUTS, 2 short chains: 40 simulated models x 60 questions of
v1, :func:`~bayes_dualeval.validation.versions.linked_versions`) and shared; v2 holds 30 of
v1's questions (2 of them moved by about 3 logits through the middle of the abilities,
where 40 models measure them) and 30 new ones, answered afresh by the bank's
models and by 2 models the bank does not hold. The truth is known, so the tolerances below
can fail; the recovery study with default NUTS banks is scripts/studies/calibrate_study.py.
"""

import json
import shutil

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import bayes_dualeval as bd
from bayes_dualeval.cli.commands import cli
from bayes_dualeval.core.errors import InputError
from bayes_dualeval.inference.settings import SamplerSettings
from bayes_dualeval.measure.bank import Bank
from bayes_dualeval.measure.calibrate import ITEM_COLUMNS, LINKED_BY, calibrate, item_prior
from bayes_dualeval.measure.drift import DRIFT_COLUMNS, drift_p_values
from bayes_dualeval.measure.item_grid import ItemPrior, item_posterior
from bayes_dualeval.model import links
from bayes_dualeval.model.simulate import simulate, write
from bayes_dualeval.runs.fit import fit, write_run
from bayes_dualeval.validation.versions import linked_versions, truth_table

#: Bank draws the tests keep (of 400).
DRAWS = 200


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("calibrate")
    truth = linked_versions(
        root, n_models=40, n_items=90, n_v1=60, n_drift=2, shift=3.0, extra_models=2,
        toward_centre=True, seed=5,
    )  # fmt: skip
    settings = SamplerSettings(sampler="nuts", chains=2, warmup=200, draws=200, seed=3, extend=0)
    write_run(fit(bd.load(root / "v1"), settings=settings), root / "bank")
    bank = Bank.from_run(root / "bank", max_draws=DRAWS, allow_approximate=True)
    return root, bank, truth, calibrate(bank, root / "v2", ci=0.9, seed=1)


def test_new_questions_recover_their_truth_on_the_bank_scale(setup):
    _, bank, truth, result = setup
    items = result.items.set_index("item")
    assert list(result.items.columns) == ITEM_COLUMNS
    assert sorted(items.index) == sorted(truth["new"])  # 30 new, each answered by 40
    assert (items["n_models"] == 40).all() and (items["linked_by"] == LINKED_BY).all()
    assert (items["prior"] == "source").all()
    true = truth_table(truth, items.index)
    # 40 models give b a posterior sd near 0.45: the ranks agree, the intervals cover
    assert items["b_mean"].corr(true["b"], method="spearman") >= 0.8
    inside = ((items["b_lo"] <= true["b"]) & (true["b"] <= items["b_hi"])).mean()
    assert 0.75 <= inside <= 1.0
    assert ((items["a_lo"] <= true["a"]) & (true["a"] <= items["a_hi"])).mean() >= 0.7
    assert (items["b_lo"] < items["b_mean"]).all() and (items["b_mean"] < items["b_hi"]).all()
    # observed is the bank models' share correct, and a hard question has a large b
    assert items["observed"].corr(items["b_mean"], method="spearman") < -0.9


def test_drifted_common_questions_are_flagged_and_the_others_are_not(setup):
    _, bank, truth, result = setup
    drift = result.drift
    assert list(drift.columns) == DRIFT_COLUMNS
    assert sorted(drift["item"]) == sorted(truth["common"])
    flagged = set(drift.loc[drift["flagged"], "item"])
    assert flagged == set(truth["drifted"])
    rows = drift.set_index("item").loc[truth["drifted"]]
    signs = np.sign([truth["drift"][q] for q in rows.index])
    assert (np.sign(rows["shift_mean"]) == signs).all() and (rows["p_drift"] > 0.95).all()
    # the unflagged common questions did not move as a whole: the link holds. These data
    # put the shift at -0.16 to -0.18 with a 90% interval whose upper end sits at 0 within
    # the bank's Monte Carlo noise (bank seeds 0-5: it covered 0 at 2-3 of 6, with the items
    # centred either way), so 0 is asked to lie within 2.5 sd (the 90% interval's half
    # width over 1.645): a 99% check that a moved link would fail
    s = result.summary
    sd = (s["common_shift_hi"] - s["common_shift_lo"]) / (2 * 1.645)
    assert abs(s["common_shift_mean"]) < 2.5 * sd
    assert abs(s["common_shift_mean"]) < 0.25
    # the bank's own mean b of a common question is what drift.csv compares with
    q = rows.index[0]
    index = list(bank.dataset.items).index(q)
    assert rows.loc[q, "b_bank_mean"] == pytest.approx(bank.draws["b"][:, index].mean())


def test_rows_of_other_models_are_left_out_and_said(setup):
    _, _, truth, result = setup
    counts = result.responses.counts
    assert counts["new_models"] == truth["extra_models"] and counts["new_model_rows"] == 2 * 60
    assert any("not in the bank were left out" in w for w in result.warnings)
    assert result.responses.answers.shape[1] == 40


def test_the_grid_posterior_matches_quadrature():
    """One question, one draw: the draws' mean against a dense numerical integral."""
    rng = np.random.default_rng(0)
    theta = rng.normal(0.0, 1.0, 40)
    theta -= theta.mean()
    y = (rng.random(40) < links.sigmoid(1.3 * (theta - 0.4))).astype(float)
    prior = ItemPrior(*(np.full((1, 1), v) for v in (0.2, 1.1, 0.1, 0.4)))
    post = item_posterior(theta[None], prior, y[None], np.ones((1, 40)), per_draw=20000)
    u, v = np.meshgrid(np.linspace(-6, 6, 601), np.linspace(-3, 3, 301), indexing="ij")
    eta = np.exp(v)[..., None] * (theta - u[..., None])
    lp = links.bernoulli_loglik(y, eta).sum(axis=-1)
    lp += -0.5 * ((u - 0.2) / 1.1) ** 2 - 0.5 * ((v - 0.1) / 0.4) ** 2
    w = np.exp(lp - lp.max())
    w /= w.sum()
    assert post.u.mean() == pytest.approx((w * u).sum(), abs=0.03)
    assert post.log_a.mean() == pytest.approx((w * v).sum(), abs=0.03)
    assert post.u.std() == pytest.approx(np.sqrt((w * (u - (w * u).sum()) ** 2).sum()), rel=0.05)


def test_one_parameter_and_a_fixed_slope_are_grids_of_b_alone():
    """Under the 1PL link (and with ``a`` held, as for common questions) only ``u`` moves."""
    rng = np.random.default_rng(2)
    theta = rng.normal(0.0, 1.0, (3, 30))
    theta -= theta.mean(axis=1, keepdims=True)
    y = (rng.random((2, 30)) < links.sigmoid(theta[0] + 0.5)).astype(float)
    one_pl = ItemPrior(np.zeros((3, 2)), np.full((3, 2), 1.5))
    post = item_posterior(theta, one_pl, y, np.ones((2, 30)), per_draw=4000)
    assert post.log_a is None and post.u.shape == (2, 3, 4000)
    u = np.linspace(-8, 8, 3201)
    for d in range(3):  # each draw's posterior, against a dense quadrature
        lp = links.bernoulli_loglik(y[0], theta[d] - u[:, None]).sum(axis=1)
        w = np.exp(lp - lp.max() - 0.5 * (u / 1.5) ** 2)
        assert post.u[0, d].mean() == pytest.approx((w * u).sum() / w.sum(), abs=0.04)
    full = ItemPrior(*(np.full((3, 2), v) for v in (0.0, 1.5, 0.0, 0.3)))
    held = item_posterior(theta, full, y, np.ones((2, 30)), per_draw=4000,
                          fixed_log_a=np.zeros((3, 2)))  # fmt: skip
    assert held.log_a is None
    np.testing.assert_allclose(held.u.mean(axis=2), post.u.mean(axis=2), atol=0.04)


def test_the_prior_is_the_source_s_or_pooled_for_a_new_source(setup):
    _, bank, _, _ = setup
    prior, kind = item_prior(bank, np.array(["bench", "elsewhere"]))
    assert kind.tolist() == ["source", "pooled"]
    group = list(bank.dataset.groups).index("static:bench")
    np.testing.assert_allclose(prior.mu_b[:, 0], bank.draws["mu_b"][:, group], rtol=1e-6)
    np.testing.assert_allclose(prior.sigma_log_a[:, 0], bank.draws["sigma_log_a"][:, group])
    # one static source: its spread about the sources' mean is its own
    np.testing.assert_allclose(prior.sigma_b[:, 1], prior.sigma_b[:, 0], rtol=1e-6)


def test_drift_p_values_are_those_of_the_threshold():
    rng = np.random.default_rng(1)
    moved = rng.normal([0.0, 0.5, 3.0, -3.0], 0.5, (20000, 4))
    p = drift_p_values(moved, 0.5)
    assert p[0] > 0.8 and p[1] == pytest.approx(0.5, abs=0.03)
    assert p[2] == pytest.approx(p[3], rel=0.3) and p[2] < 1e-5


def test_command_writes_the_folder_and_a_one_screen_summary(setup, tmp_path):
    root, *_ = setup
    out = tmp_path / "cal"
    args = ["calibrate", str(root / "v2"), "--bank", str(root / "bank"), "--out", str(out),
            "--draws", "100", "--allow-approximate"]  # fmt: skip
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines[0].startswith("30 new and 30 common question(s)") and len(lines) < 40
    assert "drift (|shift| > 0.5)" in res.output and "FLAGGED" in res.output
    assert "APPROXIMATE BANK" in res.output and lines[-1] == f"wrote {out}"
    assert sorted(p.name for p in out.iterdir()) == ["drift.csv", "items.csv", "summary.json"]
    items = pd.read_csv(out / "items.csv")
    assert list(items.columns) == [*ITEM_COLUMNS, "approximate_bank"] and len(items) == 30
    summary = json.loads((out / "summary.json").read_text())
    assert summary["linked_by"] == LINKED_BY and summary["ci"] == 0.95
    assert summary["new_model_rows"] == 120 and summary["prior"] == {"bench": "source"}


def _one_error(args, out):
    res = CliRunner().invoke(cli, [str(a) for a in args])
    assert res.exit_code == 1, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error:"), res.output
    assert not out.exists()
    return lines[0]


def test_bad_input_is_refused_in_one_line_and_writes_nothing(setup, tmp_path):
    root, *_ = setup
    out = tmp_path / "out"
    bank = ("--bank", root / "bank", "--out", out, "--allow-approximate")
    # the short test bank did not converge
    line = _one_error(["calibrate", root / "v2", "--bank", root / "bank", "--out", out], out)
    assert "not a converged NUTS posterior" in line and "--allow-approximate" in line
    static, arena, truth = simulate(n_models=4, n_static=5, n_arena=5, seed=1)
    write(tmp_path / "arena_only", static.iloc[:0], arena, truth)
    assert "no static answers" in _one_error(["calibrate", tmp_path / "arena_only", *bank], out)
    write(tmp_path / "others", static, arena.iloc[:0], truth)
    assert "no row of the data is from a model of bank" in _one_error(
        ["calibrate", tmp_path / "others", *bank], out
    )
    frame = pd.read_json(root / "v2" / "bench" / "static.jsonl", lines=True)
    lone = frame.groupby("sample_index").head(1)  # every question answered by one model
    write(tmp_path / "lone", lone, arena.iloc[:0], {})
    line = _one_error(["calibrate", tmp_path / "lone", *bank], out)
    assert "no new or common static question that at least 2" in line
    with pytest.raises(InputError, match="`drift_threshold` must be positive"):
        calibrate(setup[1], root / "v2", drift_threshold=0.0)


def test_questions_few_bank_models_answered_are_skipped_with_a_warning(setup, tmp_path):
    root, bank, truth, _ = setup
    frame = pd.read_json(root / "v2" / "bench" / "static.jsonl", lines=True)
    new = frame["sample_index"] >= 80  # the last 10 new questions: one bank model each
    keep = ~new | ~frame.duplicated("sample_index")
    write(tmp_path / "few", frame[keep], pd.DataFrame(), {})
    result = calibrate(bank.thin(50), tmp_path / "few")
    assert result.responses.counts["few_models_items"] == 10
    assert len(result.items) == 20
    assert any("fewer than 2 bank models were skipped" in w for w in result.warnings)


def test_run_calibrate_and_a_bank_of_an_older_version(setup, tmp_path):
    root, *_ = setup
    older = tmp_path / "older"
    shutil.copytree(root / "bank", older)
    diag = json.loads((older / "diagnostics.json").read_text())
    diag["versions"]["bayes_dualeval"] = "0.0.1"
    (older / "diagnostics.json").write_text(json.dumps(diag))
    run = bd.open(older)
    with pytest.raises(InputError, match="not a converged NUTS posterior"):
        run.calibrate(root / "v2")
    cal = run.calibrate(root / "v2", draws=50, allow_approximate=True)
    assert cal.result.summary["bank_version"] == "0.0.1"
    assert cal.items["approximate_bank"].notna().all() and len(cal.drift) == 30
    cal.save(tmp_path / "saved")
    assert (tmp_path / "saved" / "drift.csv").is_file()
