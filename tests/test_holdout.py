"""``fit --holdout F``: the split, the scores, and that they tell a better model apart."""

import json
import warnings

import arviz as az
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from bayes_dualeval.checks.holdout import auc
from bayes_dualeval.cli.commands import cli
from bayes_dualeval.core.errors import ConfigError
from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.data.holdout import MIN_KEPT, hold_out
from bayes_dualeval.model.simulate import simulate


def dataset(seed=1, **kw):
    static, arena, truth = simulate(8, 60, 20, missing=0.1, seed=seed, **kw)
    static["source"], arena["source"] = "bench", "arena"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Dataset.from_frames(static=static, arena=arena), truth


def test_the_split_is_a_seeded_partition_that_leaves_every_item_fitted():
    ds, _ = dataset()
    fitted, held = hold_out(ds, 0.3, seed=5)
    assert len(fitted.static_y) + held.n_static == len(ds.static_y)
    assert len(fitted.arena_z) + held.n_arena == len(ds.arena_z)
    # about the share asked for (binomial: within 5 sd), and no cell on both sides
    n = len(ds.static_y) + len(ds.arena_z)
    assert abs(held.n_static + held.n_arena - 0.3 * n) < 5 * np.sqrt(n * 0.21)
    fitted_cells = set(zip(fitted.static_model, fitted.static_item, strict=True))
    held_cells = set(zip(held.static_model, held.static_item, strict=True))
    assert not fitted_cells & held_cells
    for item, has in ((fitted.static_item, ds.static_item), (fitted.arena_item, ds.arena_item)):
        need = np.minimum(np.bincount(has, minlength=ds.n_items), MIN_KEPT)
        assert np.all(np.bincount(item, minlength=ds.n_items) >= need)
    # the rewards keep their normalisation, and the same seed gives the same split
    lookup = dict(zip(zip(ds.arena_model, ds.arena_item, strict=True), ds.arena_z, strict=True))
    assert all(
        lookup[(m, q)] == z
        for m, q, z in zip(held.arena_model, held.arena_item, held.arena_z, strict=True)
    )
    again = hold_out(ds, 0.3, seed=5)[1]
    np.testing.assert_array_equal(again.static_item, held.static_item)
    assert not np.array_equal(hold_out(ds, 0.3, seed=6)[1].static_item, held.static_item)
    with pytest.raises(ConfigError, match="holdout must be in"):
        hold_out(ds, 0.8)


def test_auc_counts_pairs_and_ties():
    rng = np.random.default_rng(0)
    score = rng.integers(0, 5, 200).astype(float)
    label = rng.random(200) < 0.4
    pos, neg = score[label], score[~label]
    brute = np.mean((pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :]))
    assert auc(score, label) == pytest.approx(brute, abs=1e-12)
    assert np.isnan(auc(score, np.zeros(200, bool)))


def _fit(folder, data_dir, *extra):
    result = CliRunner().invoke(
        cli,
        ["fit", str(data_dir), "--sampler", "map", "--holdout", "0.25", "--out", str(folder),
         "-q", *extra],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return json.loads((folder / "diagnostics.json").read_text())["holdout"]


@pytest.fixture(scope="module")
def specialist_data(tmp_path_factory):
    """Static and arena data whose models differ by domain (deviations of sd 1.2)."""
    root = tmp_path_factory.mktemp("holdout")
    static, arena, truth = simulate(10, 240, 60, domain_sd=1.2, seed=9, prompt_offset_sd=0.0)
    (root / "bench").mkdir()
    (root / "arena").mkdir()
    static.to_json(root / "bench" / "static.jsonl", orient="records", lines=True)
    arena.to_json(root / "arena" / "arena.jsonl", orient="records", lines=True)
    return root


def test_holdout_scores_the_cells_left_out(specialist_data, tmp_path):
    held = _fit(tmp_path / "one", specialist_data)
    assert held["share"] == 0.25 and held["static"]["cells"] > 400
    assert held["arena"]["pairs"] > 500
    table = pd.read_csv(tmp_path / "one" / "holdout.csv")
    static = table[table["kind"] == "static"]
    assert len(static) == held["static"]["cells"]
    # the summary is computed from the rows the table holds
    p, y = static["p_mean"].to_numpy(), static["observed"].to_numpy()
    score = np.mean(y * np.log(p) + (1 - y) * np.log1p(-p))
    assert score == pytest.approx(held["static"]["log_score"], rel=1e-4)
    assert held["static"]["auc"] == pytest.approx(auc(p, y > 0.5), abs=1e-9)
    # a MAP run's prediction is the 2PL at its point estimate
    post = az.from_netcdf(tmp_path / "one" / "posterior.nc").posterior
    theta = post["theta"].to_series().droplevel([0, 1])
    a = post["a"].to_series().droplevel([0, 1])
    b = post["b"].to_series().droplevel([0, 1])
    eta = a[static["item"]].to_numpy() * (
        theta[static["model"]].to_numpy() - b[static["item"]].to_numpy()
    )
    np.testing.assert_allclose(p, 1 / (1 + np.exp(-eta)), rtol=1e-4)
    # the predictions carry information: better than a coin and than shuffled labels
    assert held["static"]["auc"] > 0.7 and held["arena"]["auc"] > 0.7
    assert held["static"]["log_score"] > np.log(0.5)
    shuffled = np.random.default_rng(0).permutation(y)
    assert auc(p, shuffled > 0.5) < held["static"]["auc"] - 0.15
    printed = [line for line in result_lines(tmp_path / "one") if "held-out cells" in line]
    assert printed and f"{held['static']['cells']:,} static labels" in printed[0]
    # none of the held-out cells was fitted: the run's data lack them
    fitted = pd.read_csv(tmp_path / "one" / "items.csv")
    assert len(fitted) > 0
    with open(tmp_path / "one" / "diagnostics.json") as fh:
        data = json.load(fh)["data"]
    assert data["static_labels"] + held["static"]["cells"] == 10 * 240


@pytest.mark.study
def test_domain_abilities_predict_held_out_cells_better_when_models_differ_by_domain(
    specialist_data, tmp_path
):
    one = _fit(tmp_path / "one", specialist_data)
    domain = _fit(tmp_path / "domain", specialist_data, "--abilities", "domain")
    assert one["static"]["cells"] == domain["static"]["cells"]  # the same cells held out
    assert domain["static"]["log_score"] > one["static"]["log_score"] + 0.02
    assert domain["static"]["auc"] > one["static"]["auc"]


def result_lines(run):
    """The report's Markdown lines (the run details list the held-out scores)."""
    return (run / "report.md").read_text(encoding="utf-8").splitlines()
