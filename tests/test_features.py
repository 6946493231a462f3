"""Item features: reading and checking the file, the design, items known only by features."""

import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import frames_dataset, invoke, one_error

from bayes_dualeval import Dataset, load
from bayes_dualeval.core.errors import ConfigError, DataWarning, InputError
from bayes_dualeval.data.features import check_features, design, read_features
from bayes_dualeval.inference.settings import SamplerSettings
from bayes_dualeval.model.config import ModelConfig
from bayes_dualeval.model.inputs import build_inputs
from bayes_dualeval.model.simulate import simulate, write
from bayes_dualeval.runs.fit import fit


@pytest.fixture(scope="module")
def sim():
    """A simulation whose 6 features carry 90% of the difficulty's variance."""
    static, arena, truth = simulate(
        8, 120, 16, missing=0.1, item_features=6, feature_share=0.9, seed=5
    )
    return static, arena, truth


# --------------------------------------------------------------------------- the file
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("id,x\na,1\n", "no 'item' column"),
        ("item,x\na,1\nb,two\n", "column 'x', row 2: 'two' is not a finite number"),
        ("item,x\na,1\nb,\n", "column 'x', row 2: missing value"),
        ("item,x\na,1\na,2\n", "row 2: item 'a' appears twice"),
        ("item,domain\na,math\n", "no numeric feature column"),
        ("item,kind,x\na,quiz,1\n", "column 'kind', row 1: 'quiz'"),
        ("item,x\na,inf\n", "column 'x', row 1"),
    ],
)
def test_a_bad_feature_file_is_one_line_naming_column_and_row(tmp_path, text, expected):
    path = tmp_path / "f.csv"
    path.write_text(text)
    with pytest.raises(InputError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        read_features(path)


def test_feature_file_types(tmp_path):
    with pytest.raises(InputError, match="no such feature file"):
        read_features(tmp_path / "missing.csv")
    (tmp_path / "f.txt").write_text("item,x\na,1\n")
    with pytest.raises(InputError, match="expected .csv or .parquet"):
        read_features(tmp_path / "f.txt")


def test_reading_a_folder_skips_feature_files(sim, tmp_path):
    static, arena, truth = sim
    write(tmp_path, static, arena, truth)
    assert (tmp_path / "items.features.csv").is_file()
    ds = load(tmp_path)  # would fail on the feature file's rows if it were read
    assert len(ds.static_y) == len(static)


# --------------------------------------------------------------------------- the design
def test_design_whitens_and_reports(sim):
    static, arena, truth = sim
    ds = frames_dataset(static, arena)
    frame = check_features(truth["features"])
    frame["constant"] = 3.0
    with pytest.warns(DataWarning, match="constant column"):
        _, d = design(frame, ds)
    assert "constant" not in d.columns and d.report["dropped_constant"] == ["constant"]
    x = d.matrix.astype(np.float64)
    assert np.allclose(x.mean(axis=0), 0, atol=1e-5)
    assert np.allclose(x.T @ x / len(x), np.eye(d.n_components), atol=1e-4)  # whitened
    assert d.report["variance_share"] >= 0.9 and d.report["components"] <= 6
    # mean, sd and rotation reproduce the matrix
    assert np.allclose(d.transform(frame), x, atol=1e-4)


def test_more_columns_than_items_are_reduced_and_said(sim):
    static, arena, truth = sim
    ds = frames_dataset(static, arena)
    rng = np.random.default_rng(0)
    wide = pd.DataFrame(rng.normal(size=(ds.n_items, 300)), columns=[f"e{k}" for k in range(300)])
    wide.insert(0, "item", ds.items)
    with pytest.warns(DataWarning, match="principal components"):
        _, d = design(check_features(wide), ds)
    assert d.n_components == ds.n_items // 4
    assert d.report["variance_share"] < 0.9


def test_new_unknown_and_missing_items(sim):
    static, arena, truth = sim
    ds = frames_dataset(static, arena)
    frame = truth["features"].copy()
    gone = frame["item"].str.startswith("bench::math")  # drop some response items' rows
    n_gone = int(gone.sum())
    frame = frame.loc[~gone]
    extra = frame.iloc[:3].copy()
    extra["item"] = ["bench::new_0", "arena::new_prompt", "elsewhere::q"]
    frame = pd.concat([frame, extra], ignore_index=True)
    with pytest.warns(DataWarning) as caught:
        out, d = design(check_features(frame), ds)
    said = " ".join(str(w.message) for w in caught)
    assert "1 item id(s)" in said and f"{n_gone} item(s) of the data have no row" in said
    assert d.report["unknown_ids"] == 1 and d.report["items_without_responses"] == 2
    assert out.n_items == ds.n_items + 2
    kinds = dict(zip(out.items, out.item_kind, strict=True))
    assert kinds["bench::new_0"] == "static" and kinds["arena::new_prompt"] == "arena"
    # the items stay ordered static first; every cell still names its own item and model
    assert (np.diff((out.item_kind == "arena").astype(int)) >= 0).all()
    pd.testing.assert_frame_equal(out.static_frame(), ds.static_frame())
    pd.testing.assert_frame_equal(out.arena_frame(), ds.arena_frame())
    # zero regressors for the items without a row
    aligned = d.aligned(out.items)
    missing = np.isin(out.items, frame["item"].to_numpy(), invert=True)
    assert missing.sum() == n_gone and not aligned[missing].any()
    assert aligned[~missing].any(axis=1).all()


def test_features_need_item_parameters(sim):
    static, arena, truth = sim
    ds = frames_dataset(static, arena)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)
        _, d = design(check_features(truth["features"]), ds)
    with pytest.raises(ConfigError, match="mode 'bt'"):
        build_inputs(ds, ModelConfig(mode="bt"), features=d)
    with pytest.raises(ConfigError, match="hierarchical"):
        build_inputs(ds, ModelConfig(item_prior="independent"), features=d)
    inputs, _ = build_inputs(ds, ModelConfig(), features=d)
    assert inputs.item_features.shape == (ds.n_items, d.n_components)


# --------------------------------------------------------------------------- the fit
def held_out_fit(sim, features):
    """MAP fit without the last 30 static questions' responses; their features stay."""
    static, arena, truth = sim
    held = static["sample_index"] >= 30  # the last 10 of each benchmark's 40 questions
    result = fit(
        frames_dataset(static.loc[~held], arena),
        settings=SamplerSettings(sampler="map", seed=0),
        features=features,
    )
    return result, static.loc[held]


def held_out_cells(result, cells):
    """Model and item indices of ``cells`` (static rows) in the fitted run."""
    from bayes_dualeval.runs.predict import indices

    ids = "bench::" + cells["dataset"] + "_" + cells["sample_index"].astype(str)
    m = indices(cells["model_label"], result.dataset.models, "model")
    return m, indices(ids, result.dataset.items, "item")


def held_out_auc(result, cells):
    from bayes_dualeval.checks.holdout import auc
    from bayes_dualeval.runs.predict import fitted_run, success_probability

    p = success_probability(fitted_run(result), *held_out_cells(result, cells)).mean(axis=0)
    return auc(p, cells["correct"].to_numpy() == 1)


def held_out_b_correlation(result, cells, truth):
    q = np.unique(held_out_cells(result, cells)[1])
    b = result.idata.posterior["b"].values.reshape(-1, result.dataset.n_items)[:, q].mean(axis=0)
    true = [truth["items"][i]["b"] for i in result.dataset.items[q]]
    return np.corrcoef(b, true)[0, 1]


@pytest.mark.study
def test_items_known_only_by_features_are_predicted_and_permuting_them_loses_it(sim):
    static, arena, truth = sim
    features = check_features(truth["features"])
    result, cells = held_out_fit(sim, features)
    new = result.diagnostics["features"]["items_without_responses"]
    assert new == 30
    shuffled = features.copy()
    shuffled["item"] = np.random.default_rng(1).permutation(shuffled["item"].to_numpy())
    permuted = held_out_fit(sim, shuffled)[0]
    # features carry 90% of b's variance, the permuted file none: seen at 0.93 and 0.02,
    # and a held-out AUC of 0.733 and 0.629 (0.742 with the true parameters)
    assert held_out_b_correlation(result, cells, truth) > 0.8
    assert abs(held_out_b_correlation(permuted, cells, truth)) < 0.4
    with_features, without = held_out_auc(result, cells), held_out_auc(permuted, cells)
    assert with_features - without > 0.05, (with_features, without)


def test_fit_command_with_features_calibrates_items_without_responses(sim, tmp_path):
    static, arena, truth = sim
    held = static["sample_index"] >= 30
    write(tmp_path / "data", static.loc[~held], arena, truth)
    features = tmp_path / "data" / "items.features.csv"
    out = tmp_path / "run"
    r = invoke(
        "fit", tmp_path / "data", "--sampler", "svi", "--svi-steps", "2000", "--draws", "300",
        "--item-features", features, "--out", out, "--no-report",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "30 of them calibrated from features alone" in r.output
    items = pd.read_csv(out / "items.csv")
    alone = items[items["n_models"] == 0]
    assert len(alone) == 30 and (alone["kind"] == "static").all()
    answered = items[(items["n_models"] > 0) & (items["kind"] == "static")]
    width = lambda t: (t["b_hi"] - t["b_lo"]).median()  # noqa: E731
    assert width(alone) > 1.1 * width(answered)  # seen: 2.95 against 2.38
    q = alone["item"].iloc[0]
    r = invoke(
        "predict", "--allow-approximate", out, "--items", q, "--models", "atlas-70b,borealis-8b"
    )
    assert r.exit_code == 0, r.output
    table = pd.read_csv(out / "predictions.csv")
    assert len(table) == 2 and table["observed"].isna().all()
    # the run keeps the mapping: new rows map as the fit mapped its own
    import arviz as az

    const = az.from_netcdf(out / "posterior.nc").constant_data
    rows = pd.read_csv(features)
    rows = rows.set_index("item").loc[const["item"].values].reset_index()
    z = rows[list(const["feature_column"].values)].to_numpy() - const["feature_mean"].values
    mapped = z / const["feature_sd"].values @ const["feature_rotation"].values
    assert np.allclose(mapped / const["feature_root"].values, const["item_features"].values,
                       atol=1e-3)  # fmt: skip


def test_fit_command_says_what_is_wrong_with_a_feature_file(sim, tmp_path):
    static, arena, truth = sim
    write(tmp_path / "data", static, arena, truth)
    bad = tmp_path / "bad.csv"
    bad.write_text("item,x\nbench::math_bench_0,1\nbench::math_bench_1,n/a\n")
    r = invoke("fit", tmp_path / "data", "--sampler", "map", "--item-features", bad)
    one_error(r, "column 'x', row 2")
    r = invoke("fit", tmp_path / "data", "--sampler", "map", "--mode", "bt",
               "--item-features", tmp_path / "data" / "items.features.csv")  # fmt: skip
    one_error(r, "mode 'bt'")


def test_a_source_with_both_kinds_needs_the_kind_column(sim):
    static, arena, _ = sim
    ds = frames_dataset(static, arena)
    both = Dataset.from_frames(static.assign(source="mix"), arena.assign(source="mix"))
    rows = pd.DataFrame({"item": ["mix::q1", "mix::q2", "mix::q3"], "kind": ["", "arena", ""]})
    rows["x"] = [1.0, 2.0, 3.0]
    from bayes_dualeval.data.features import new_items

    new, unknown = new_items(check_features(rows), both)
    assert new["item"].tolist() == ["mix::q2"] and new["kind"].tolist() == ["arena"]
    assert unknown == 2
    new, unknown = new_items(check_features(rows), ds)  # no source 'mix' there
    assert len(new) == 0 and unknown == 3


def test_report_says_what_the_features_explain():
    import xarray as xr

    from bayes_dualeval.report.panels.run import features_text

    report = {
        "file": "f.csv", "columns": 64, "components": 13, "variance_share": 0.9013,
        "items_with_features": 400, "items_without_responses": 80,
    }  # fmt: skip
    tau = np.linspace(0.4, 1.0, 1000).reshape(4, 250)
    posterior = xr.Dataset({"tau_beta_b": (("chain", "draw"), tau)})
    text = features_text(report, posterior)
    assert text.startswith("f.csv: 64 column(s), 13 principal component(s) kept (90% ")
    assert "80 of them calibrated from features alone" in text
    assert "standard deviation of 0.70 [0.43, 0.97]" in text
