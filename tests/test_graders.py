"""Graders of static labels: each judge's severity on the pass rate (issue 53).

Static rows with a ``judge`` field of two judges or more are cells of (model, question,
grader), and each grader shifts the log-odds of its labels (bayes_dualeval.model.graders).
One MAP fit of a simulation with four graders is shared; the facet coordinates' effect on
NUTS is scripts/benchmarks/facet_geometry.py's.
"""

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from scipy import stats

from bayes_dualeval.cli.commands import cli
from bayes_dualeval.core.errors import InputError
from bayes_dualeval.data.load import load
from bayes_dualeval.inference.layout import static_layout
from bayes_dualeval.measure.bank import Bank
from bayes_dualeval.model import graders
from bayes_dualeval.model.config import ModelConfig
from bayes_dualeval.model.contrasts import helmert_basis
from bayes_dualeval.model.inputs import build_inputs
from bayes_dualeval.model.simulate import simulate, write
from bayes_dualeval.runs.load import load_result


@pytest.fixture(scope="module")
def graded_run(tmp_path_factory):
    """10 models x 60 questions, every answer labelled by four graders, fitted by MAP."""
    root = tmp_path_factory.mktemp("graders")
    static, arena, truth = simulate(10, 60, 0, graders=4, seed=5)
    write(root / "data", static, arena, truth)
    out = root / "run"
    args = ["fit", str(root / "data"), "--sampler", "map", "--out", str(out), "-q", "--no-report"]
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 0, r.output
    return root, out, truth


def test_every_grader_counts_and_has_a_severity(graded_run):
    root, out, truth = graded_run
    table = pd.read_csv(out / "graders.csv").set_index("judge")
    assert list(table.index) == ["grader-a", "grader-b", "grader-c", "grader-d"]
    assert (table["n_labels"] == 10 * 60).all() and (table["n_models"] == 10).all()
    want = np.array([truth["graders"][g] for g in table.index])
    want = want - want.mean()  # the model's severities sum to zero over graders
    assert table["severity_mean"].sum() == pytest.approx(0.0, abs=1e-4)
    # 600 labels a grader: each severity within 0.2 logits of the truth
    np.testing.assert_allclose(table["severity_mean"], want, atol=0.2)
    # the strictest grader passes the fewest answers
    assert table["pass_rate"].idxmin() == table["severity_mean"].idxmax()
    board = pd.read_csv(out / "leaderboard.csv")
    rho = stats.spearmanr(board["theta_mean"], board["model"].map(truth["theta"]))[0]
    assert rho >= 0.9


def test_checks_read_each_cell_with_its_graders_shift(graded_run):
    """The checks' log-odds of a static cell are the model's own, grader included."""
    import jax.numpy as jnp

    from bayes_dualeval.checks.fitted import resolve

    root, out, _ = graded_run
    result = load_result(out)
    fit = resolve(result.idata, result.dataset, None, None, None)
    ds = fit.dataset
    grader = fit.static_graders()
    assert grader is not None and sorted(set(grader)) == [0, 1, 2, 3]
    shifted = fit.eta(np.array([0]), ds.static_model, ds.static_item, grader=grader)[0]
    plain = fit.eta(np.array([0]), ds.static_model, ds.static_item)[0]
    severity = np.asarray(result.idata.posterior["grader_severity"]).reshape(-1, 4)[0]
    np.testing.assert_allclose(plain - shifted, severity[grader], rtol=1e-5, atol=1e-5)
    # the same cells' log likelihood from the model's definition
    config = result.config
    inputs, _ = build_inputs(ds, config)
    post = result.idata.posterior
    draws = {name: jnp.asarray(np.asarray(post[name])[0, 0]) for name in post.data_vars}
    ll = np.asarray(fit.model.static_loglik(draws, inputs))
    y = ds.static_y / ds.static_n
    p = 1.0 / (1.0 + np.exp(-shifted))
    want = ds.static_n * (y * np.log(p) + (1 - y) * np.log1p(-p))
    np.testing.assert_allclose(ll, want, rtol=1e-4, atol=1e-4)


def test_severities_are_centred_draws_in_helmert_coordinates():
    """``H u`` has the covariance of ``r - mean(r)``: the prior is the centred one."""
    h = helmert_basis(5).astype(np.float64)
    centring = np.eye(5) - np.full((5, 5), 0.2)
    np.testing.assert_allclose(h @ h.T, centring, atol=1e-6)
    np.testing.assert_allclose(h.sum(axis=0), 0.0, atol=1e-6)


def test_one_grader_leaves_the_model_as_it_was(tmp_data):
    rows = [
        {"model_label": m, "dataset": "b", "sample_index": q, "correct": (q + k) % 2}
        for k, m in enumerate(("x", "y", "z"))
        for q in range(6)
    ]
    ds = load(tmp_data.jsonl("one/bench/s.jsonl", [dict(r, judge="only") for r in rows]))
    names, grader = graders.graders(ds)
    assert list(names) == [""] and not grader.any()
    inputs, _ = build_inputs(ds, ModelConfig())
    assert inputs.n_graders == 1 and not graders.has_graders(inputs)
    # two graders: the labels are read as cells (the matrix holds one cell per pair)
    two = [dict(r, judge=j) for r in rows for j in ("g1", "g2")]
    ds2 = load(tmp_data.jsonl("two/bench/s.jsonl", two))
    inputs2, _ = build_inputs(ds2, ModelConfig())
    assert inputs2.n_graders == 2 and static_layout(inputs2) == "cells"
    assert static_layout(inputs) == "matrix"


@pytest.fixture(scope="module")
def graded_bank(tmp_path_factory):
    """A bank of 7 models x 40 questions labelled by three graders (SVI), and 3 new models."""
    import warnings

    from bayes_dualeval.inference.settings import SamplerSettings
    from bayes_dualeval.runs.fit import fit, write_run

    root = tmp_path_factory.mktemp("graded_bank")
    static, arena, truth = simulate(10, 40, 0, graders=3, seed=8)
    names = sorted(static["model_label"].unique())
    write(root / "bank_data", static[static["model_label"].isin(names[:7])], arena, truth)
    write(root / "new_data", static[static["model_label"].isin(names[7:])], arena, truth)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = fit(load(root / "bank_data"), ModelConfig(), SamplerSettings(
            sampler="svi", draws=200, seed=3))  # fmt: skip
    write_run(result, root / "bank")
    bank = Bank.from_run(root / "bank", max_draws=100, allow_approximate=True)
    return root, bank


def test_new_labels_are_read_with_their_graders_severity(graded_bank):
    """The measure stage's log likelihood of a label is the model's, grader included."""
    from bayes_dualeval.measure.grid import loglik
    from bayes_dualeval.measure.responses import responses
    from bayes_dualeval.model import links

    root, bank = graded_bank
    assert list(bank.graders) == ["grader-a", "grader-b", "grader-c"]
    resp = responses(root / "new_data", bank)
    assert resp.static_grader is not None and sorted(set(resp.static_grader)) == [0, 1, 2]
    assert len(resp.static_item) == 3 * 40 * 3  # every grader's label is a cell
    grids = np.linspace(-2.0, 2.0, 5)[None, :] + np.zeros((resp.n_models, 1))
    rows = np.array([0, 7, bank.n_draws - 1])
    got = loglik(bank, resp, None, grids, rows)  # (K, D, G)
    for i, d in enumerate(rows):
        draws = {k: np.asarray(v[d], np.float64) for k, v in bank.draws.items() if v is not None}
        theta = grids[resp.static_model] + draws["theta"].mean()  # (S, G)
        q = resp.static_item
        eta = links.eta(theta, draws["b"][q][:, None], draws["a"][q][:, None])
        sev = draws[graders.SITE][None, :]
        eta = graders.shift(eta.T, sev, resp.static_grader).T  # the fit's formula
        y = resp.static_share[:, None]
        cell = resp.static_n[:, None] * links.bernoulli_loglik(y, eta)
        want = np.stack([cell[resp.static_model == k].sum(0) for k in range(resp.n_models)])
        np.testing.assert_allclose(got[:, i], want, rtol=1e-4, atol=2e-3)


def test_an_adaptive_test_of_every_item_ends_where_the_score_does(graded_bank):
    """Asking all items reads every grader's label: the score's posterior, on its grid."""
    from bayes_dualeval.measure.adaptive import adaptive
    from bayes_dualeval.measure.compress import compress
    from bayes_dualeval.measure.grid import posterior as grid_posterior
    from bayes_dualeval.measure.responses import responses
    from bayes_dualeval.measure.score import score

    root, bank = graded_bank
    resp = responses(root / "new_data", bank)
    post = grid_posterior(bank, resp)  # the score's exact grid posterior per draw
    mean = np.einsum("kdg,kg->kd", post.weights, post.grids).mean(axis=1)
    second = np.einsum("kdg,kg->kd", post.weights, post.grids**2).mean(axis=1)
    tested = adaptive(bank, resp, select="random", target_se=1e-6, max_items=1000)
    tested = tested.summary.set_index("model").loc[resp.models]
    assert (tested["n_items"] == 40).all()
    np.testing.assert_allclose(tested["theta_mean"], mean, atol=0.01)
    np.testing.assert_allclose(tested["theta_sd"], np.sqrt(second - mean**2), rtol=0.03)
    assert len(score(bank, resp).scores) == 10
    # a short form of a graded bank chooses by the average grader's information
    assert len(compress(bank, 8)) == 8


def test_a_grader_the_bank_does_not_have_is_refused_in_one_line(graded_bank, tmp_path):
    from bayes_dualeval.measure.responses import responses

    root, bank = graded_bank
    files = sorted((root / "new_data").rglob("*.jsonl"))
    rows = pd.concat([pd.read_json(f, lines=True) for f in files if "arena" not in f.parts])
    rows.loc[rows.index[:2], "judge"] = "grader-x"
    folder = tmp_path / files[0].parent.name
    folder.mkdir()
    rows.to_json(folder / "new.jsonl", orient="records", lines=True)
    with pytest.raises(InputError, match="judge 'grader-x' on a static label") as err:
        responses(tmp_path, bank)
    assert "\n" not in str(err.value)
    rows.drop(columns=["judge"]).to_json(folder / "new.jsonl", orient="records", lines=True)
    with pytest.raises(InputError, match="no judge on a static label"):
        responses(tmp_path, bank)
