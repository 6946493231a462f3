"""Differential item functioning: items' shifts per group of models (issue 58, item 2).

One MAP fit of a small simulation with planted DIF is shared (the column is named
``released_after``, so the contamination table's before/after design is checked on it
too); the NUTS study on the issue's design is scripts/studies/dif_study.py.
"""

import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from bayes_dualeval.cli.commands import cli
from bayes_dualeval.data.load import load
from bayes_dualeval.inference.layout import with_static_matrix
from bayes_dualeval.model import dif
from bayes_dualeval.model.config import ModelConfig
from bayes_dualeval.model.inputs import build_inputs
from bayes_dualeval.model.likelihood import static_loglik, static_matrix_loglik
from bayes_dualeval.model.simulate import simulate, write
from bayes_dualeval.model.spec import DualEvalModel
from bayes_dualeval.posterior.dif_table import COLUMNS, RELEASE_DIF, bayes_fdr
from bayes_dualeval.runs.load import load_result


def _families(root, truth, column="released_after"):
    """A families file with the simulation's groups under ``column``, and a family each."""
    meta = truth["meta"].rename(columns={"group": column})
    meta["family"] = ["fam-" + m[-1] for m in meta["model_label"]]
    path = root / "models.families.csv"
    meta.to_csv(path, index=False)
    return path


@pytest.fixture(scope="module")
def dif_run(tmp_path_factory):
    """16 models in two groups x 40 questions, 4 of them 3 logits harder for group-b (MAP)."""
    root = tmp_path_factory.mktemp("dif")
    static, arena, truth = simulate(
        16, 40, 0, dif_groups=2, dif_items=4, dif_shift=3.0, seed=11
    )  # fmt: skip
    write(root / "data", static, arena, truth)
    families = _families(root, truth)
    out = root / "run"
    args = [
        "fit", str(root / "data"), "--families", str(families), "--dif", "released_after",
        "--sampler", "map", "--out", str(out), "-q", "--no-report",
    ]  # fmt: skip
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 0, r.output
    return root, out, truth


def test_dif_table_has_a_row_per_item_and_group(dif_run):
    _, out, truth = dif_run
    table = pd.read_csv(out / "dif.csv")
    assert tuple(table.columns) == COLUMNS
    assert len(table) == 40 * 2 and set(table["group"]) == {"group-a", "group-b"}
    wide = table.pivot(index="item", columns="group", values="shift_mean")
    # two groups: each item's shifts are mirror images (they sum to zero over groups)
    np.testing.assert_allclose(wide["group-a"], -wide["group-b"], atol=1e-5)
    planted = wide.index.isin(truth["dif"]["items"])
    # the planted items are harder for group-b than the clean ones, on average by > 1 logit
    assert wide.loc[planted, "group-b"].mean() > wide.loc[~planted, "group-b"].mean() + 1.0
    # a MAP point estimate has no posterior probability to flag by
    assert table["p_shift"].isna().all() and not table["flagged"].any()


def test_checks_and_loglik_read_each_cell_with_its_shift(dif_run):
    """FittedRun.eta and the pointwise log likelihood apply the same shift as the model."""
    from bayes_dualeval.checks.fitted import resolve

    _, out, _ = dif_run
    result = load_result(out)
    fit = resolve(result.idata, result.dataset, None, None, None)
    ds = fit.dataset
    assert fit.dif is not None
    shifts, group, names = fit.dif
    assert list(names) == ["group-a", "group-b"]
    shifted = fit.eta(np.array([0]), ds.static_model, ds.static_item)[0]
    plain = fit.__class__(**{**fit.__dict__, "dif": None}).eta(
        np.array([0]), ds.static_model, ds.static_item
    )[0]
    want = shifts[0][ds.static_item, group[ds.static_model]]
    np.testing.assert_allclose(plain - shifted, want, rtol=1e-5, atol=1e-5)
    inputs, _ = build_inputs(ds, result.config)
    post = result.idata.posterior
    draws = {name: jnp.asarray(np.asarray(post[name])[0, 0]) for name in post.data_vars}
    ll = np.asarray(fit.model.static_loglik(draws, inputs))
    y = ds.static_y / ds.static_n
    p = 1.0 / (1.0 + np.exp(-shifted.astype(np.float64)))
    np.testing.assert_allclose(ll, ds.static_n * (y * np.log(p) + (1 - y) * np.log1p(-p)),
                               rtol=1e-4, atol=1e-4)  # fmt: skip
    stored = np.asarray(result.idata.log_likelihood["static"])[0, 0]
    np.testing.assert_allclose(stored, ll, rtol=1e-4, atol=1e-4)


def test_zero_shifts_give_the_plain_models_loglik_in_both_layouts(dif_run):
    root, out, _ = dif_run
    result = load_result(out)
    ds = DualEvalModel(result.config).fitted_data(result.dataset)
    inputs, _ = build_inputs(ds, result.config)
    plain_inputs, _ = build_inputs(ds, result.config.replace(dif=""))
    assert dif.has_dif(inputs) and not dif.has_dif(plain_inputs)
    rng = np.random.default_rng(0)
    theta = jnp.asarray(rng.normal(size=ds.n_models), jnp.float32)
    b = jnp.asarray(rng.normal(size=ds.n_items), jnp.float32)
    a = jnp.asarray(np.exp(rng.normal(0, 0.3, ds.n_items)), jnp.float32)
    zero = jnp.zeros((ds.n_items, 2))
    base = static_loglik(theta, a, b, plain_inputs)
    np.testing.assert_allclose(static_loglik(theta, a, b, inputs, shifts=zero), base, atol=1e-6)
    # with shifts, the models x items matrix holds the same density as the cells
    shifts = jnp.asarray(rng.normal(size=(ds.n_items, 2)), jnp.float32)
    cells = float(jnp.sum(static_loglik(theta, a, b, inputs, shifts=shifts)))
    matrix = float(jnp.sum(static_matrix_loglik(theta, a, b, with_static_matrix(inputs),
                                                shifts=shifts)))  # fmt: skip
    assert matrix == pytest.approx(cells, rel=1e-4)
    assert cells != pytest.approx(float(jnp.sum(base)), rel=1e-3)


def test_release_groups_add_the_before_after_design_to_contamination(dif_run):
    _, out, _ = dif_run
    table = pd.read_csv(out / "contamination.csv", keep_default_na=False)
    assert set(table["design"]) == {"left_out", RELEASE_DIF}
    release = table[table["design"] == RELEASE_DIF]
    # one row per group and benchmark of the static questions
    assert len(release) == 2 * len(set(table.loc[table["design"] == "left_out", "dataset"]))
    assert set(release["model"]) == {"group-a", "group-b"}


def test_bayes_fdr_flags_the_largest_set_within_the_level():
    p = np.array([0.99, 0.97, 0.9, 0.9, 0.5, 0.1])
    # mean 1 - p: 0.01, 0.02, 0.06 (with both 0.9s, kept together), then 0.148
    np.testing.assert_array_equal(bayes_fdr(p, 0.1), [1, 1, 1, 1, 0, 0])
    np.testing.assert_array_equal(bayes_fdr(p, 0.015), [1, 0, 0, 0, 0, 0])
    assert not bayes_fdr(np.array([0.5, 0.4]), 0.1).any()


def test_simulated_groups_and_planted_items(tmp_path):
    static, arena, truth = simulate(6, 20, 0, dif_groups=3, dif_items=5, seed=2)
    assert truth["dif"]["group"] == "group-c" and len(truth["dif"]["items"]) == 5
    files = write(tmp_path, static, arena, truth)
    meta = pd.read_csv(tmp_path / "models.families.csv")
    assert tmp_path / "models.families.csv" in files
    assert list(meta["group"]) == ["group-a", "group-b", "group-c"] * 2
    # the families file beside the data is not read as responses
    ds = load(tmp_path, families=tmp_path / "models.families.csv")
    assert list(ds.model_meta["group"]) == list(meta["group"])
    # the rest of the seed's draws do not move: no DIF items, the same data as without groups
    same, _, _ = simulate(6, 20, 0, dif_groups=3, dif_items=0, seed=2)
    plain, _, _ = simulate(6, 20, 0, seed=2)
    pd.testing.assert_frame_equal(same, plain)


def _fit(args):
    return CliRunner().invoke(cli, ["fit", *args, "--sampler", "map", "-q", "--no-report"])


@pytest.fixture(scope="module")
def small_data(tmp_path_factory):
    root = tmp_path_factory.mktemp("dif-bad")
    static, arena, truth = simulate(6, 12, 0, dif_groups=2, seed=3)
    write(root / "data", static, arena, truth)
    return root, list(truth["theta"])


def test_bad_input_is_one_line(small_data):
    root, names = small_data
    data = str(root / "data")
    one = root / "one.families.csv"
    one.write_text("model_label,open\n" + "".join(f"{m},yes\n" for m in names))
    r = _fit([data, "--families", str(one), "--dif", "open", "--out", str(root / "r1")])
    assert r.exit_code != 0 and "needs two groups of models or more" in r.output
    assert len(r.output.strip().splitlines()) == 1 and r.output.startswith("Error:")
    r = _fit([data, "--families", str(one), "--dif", "closed", "--out", str(root / "r2")])
    assert r.exit_code != 0 and "--dif closed names no column" in r.output
    assert len(r.output.strip().splitlines()) == 1
    r = _fit([data, "--dif", "family", "--out", str(root / "r3")])
    assert r.exit_code != 0 and "the column holds no group" in r.output


def test_unknown_models_in_the_families_file_are_counted(small_data):
    root, names = small_data
    path = root / "extra.families.csv"
    rows = "".join(f"{m},{'ab'[k % 2]}\n" for k, m in enumerate(names, 1))
    path.write_text("model_label,open\n" + rows + "ghost-1,a\nghost-2,b\n")
    with pytest.warns(UserWarning, match="names 2 models the data do not hold"):
        ds = load(root / "data", families=path)
    assert list(ds.model_meta["open"]) == ["b", "a", "b", "a", "b", "a"]


def test_dif_without_static_items_is_refused(tmp_path):
    static, arena, truth = simulate(5, 0, 12, seed=4)
    write(tmp_path / "data", static, arena, truth)
    path = tmp_path / "g.families.csv"
    rows = "".join(f"{m},{k % 2}\n" for k, m in enumerate(truth["theta"]))
    path.write_text("model_label,open\n" + rows)
    r = _fit([str(tmp_path / "data"), "--families", str(path), "--dif", "open",
              "--out", str(tmp_path / "run")])  # fmt: skip
    assert r.exit_code != 0 and "no static labels" in r.output
    assert len(r.output.strip().splitlines()) == 1


def test_config_records_the_column():
    assert ModelConfig().dif == "" and ModelConfig(dif="open").dif == "open"


def test_report_has_the_dif_section_and_figure(dif_run):
    _, out, _ = dif_run
    r = CliRunner().invoke(cli, ["report", str(out)])
    assert r.exit_code == 0, r.output
    text = (out / "report.md").read_text()
    assert "## Differential item functioning" in text and "No item is flagged." in text
    assert (out / "figures" / "dif_shifts.png").exists()


def test_one_kind_of_the_data_keeps_the_models_columns(small_data):
    root, names = small_data
    path = root / "kinds.families.csv"
    path.write_text("model_label,open\n" + "".join(f"{m},{k % 2}\n" for k, m in enumerate(names)))
    ds = load(root / "data", families=path)
    assert list(ds.only("static").model_meta["open"]) == list(ds.model_meta["open"])
