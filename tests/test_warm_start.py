"""Warm starts: a run's adaptation kept, mapped by label onto a fit with one more model.

One tiny cold fit without one model (module fixture), then the warm-started fit of every
model: its kernel must start from the stored step size and from the stored metric and means
mapped by site name and label (an added model shifts the positions of the models after it).
A forced failure of the convergence check falls back to the full warm-up; a run that cannot
warm-start a fit is one clear error.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace

import numpy as np
import pytest
from click.testing import CliRunner

from bayes_dualeval.core.errors import InputError
from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.inference import nuts
from bayes_dualeval.inference.settings import SamplerSettings
from bayes_dualeval.inference.warm import Axis, map_site, site_map
from bayes_dualeval.model.config import load_spec
from bayes_dualeval.model.contrasts import helmert_basis
from bayes_dualeval.model.simulate import simulate
from bayes_dualeval.posterior import diagnostics
from bayes_dualeval.runs import warm_start
from bayes_dualeval.runs.fit import fit, write_run

SETTINGS = SamplerSettings(chains=2, warmup=40, draws=30, extend=0, seed=3)


@pytest.fixture(scope="module")
def data():
    static, arena, _ = simulate(5, 10, 6, seed=2)
    models = sorted(static.model_label.unique())
    held = models[1]  # not the last: the models after it move up one position
    less = Dataset.from_frames(
        static=static[static.model_label != held], arena=arena[arena.model_label != held]
    )
    return less, Dataset.from_frames(static=static, arena=arena), held


@pytest.fixture(scope="module")
def base_run(data, tmp_path_factory):
    less, _, _ = data
    result = fit(less, load_spec("dualeval-2pl"), SETTINGS)
    return write_run(result, tmp_path_factory.mktemp("warm") / "base"), result


@pytest.fixture(scope="module")
def warm_fit(data, base_run, tmp_path_factory):
    _, full, _ = data
    seen = {}
    patch = pytest.MonkeyPatch()
    made = nuts.make_mcmc

    def spy(inputs, config, settings, metric=None, **kw):
        seen.setdefault("calls", []).append({"metric": metric, "settings": settings, **kw})
        return made(inputs, config, settings, metric, **kw)

    patch.setattr(nuts, "make_mcmc", spy)
    # judged converged whatever 30 draws show: this fixture is about where the kernel starts
    patch.setattr(diagnostics, "convergence", _judged(converged=True))
    try:
        result = fit(full, load_spec("dualeval-2pl"), SETTINGS, warm_start=base_run[0])
    finally:
        patch.undo()
    return result, seen


def _judged(converged: bool):
    """The convergence check, its verdict replaced (recorded in ``calls``)."""
    real = diagnostics.convergence

    def judged(*args, **kwargs):
        conv = real(*args, **kwargs)
        problems = () if converged else ("forced by the test",)
        return replace(conv, converged=converged, problems=problems)

    return judged


def test_contrast_axis_maps_abilities_by_label():
    old, new = ["a", "b", "c", "d"], ["a", "x", "b", "c", "d"]
    theta = np.array([0.5, -1.0, 2.0, -1.5])  # sums to zero
    u = helmert_basis(4).T.astype(np.float64) @ theta
    var = np.array([0.1, 0.2, 0.3])
    axes = [Axis("contrast", old, new)]
    mean, variance, added = map_site(u, var, axes)
    back = helmert_basis(5).astype(np.float64) @ mean
    np.testing.assert_allclose(back[[0, 2, 3, 4]], theta, atol=1e-6)
    assert abs(back[1]) < 1e-6  # the new model starts at the average
    assert variance.shape == (4,) and (variance > 0).all() and not added.any()
    lin = site_map((3,), axes)
    np.testing.assert_allclose(lin @ u, mean, atol=1e-6)


def test_a_site_of_two_axes_maps_each_by_its_labels():
    """A (contrast of models) x (domains) site: a model and a domain added, one dropped."""
    rng = np.random.default_rng(0)
    models, domains = ["m1", "m2", "m3"], ["math", "code"]
    u = rng.normal(size=(2, 2))
    axes = [
        Axis("contrast", models, ["m0", "m1", "m3", "m2"]),
        Axis("labels", domains, ["code", "law", "math"], None),
    ]
    mean, var, added = map_site(u, np.full((2, 2), 0.5), axes)
    old = helmert_basis(3).astype(np.float64) @ u  # models x domains
    new = helmert_basis(4).astype(np.float64) @ mean
    np.testing.assert_allclose(new[[1, 3, 2]][:, [2, 0]], old, atol=1e-6)
    np.testing.assert_allclose(new[0][[0, 2]], 0.0, atol=1e-6)
    assert added[:, 1].all() and not added[:, [0, 2]].any()  # the new domain: new entries
    assert var.shape == (3, 3) and (var > 0).all()


def test_label_axis_maps_by_label_and_fills_new_entries():
    axes = [Axis("labels", ["p", "q", "r"], ["r", "s", "p"], None)]
    mean, var, added = map_site(np.array([1.0, 2.0, 3.0]), np.array([0.1, 0.2, 0.6]), axes)
    np.testing.assert_allclose(mean, [3.0, 2.0, 1.0])  # "s" at the site's mean
    np.testing.assert_allclose(var, [0.6, 0.3, 0.1])  # "s" at the site's mean entry
    assert added.tolist() == [False, True, False]
    with pytest.raises(InputError):
        map_site(np.zeros(3), np.ones(3), [Axis("fixed", 3, 4)])


def test_a_nuts_run_keeps_its_adaptation_by_site(base_run):
    folder, result = base_run
    stored = warm_start.load(folder)
    assert float(stored["step_size"]) == pytest.approx(result.adaptation["step_size"])
    for name, var in result.adaptation["var"].items():
        np.testing.assert_allclose(stored[f"var/{name}"], var)
        assert stored[f"mean/{name}"].shape == np.shape(var)
    assert stored["coord/model"].tolist() == list(result.dataset.models)


def test_warm_fit_starts_from_the_stored_metric_mapped_by_label(data, base_run, warm_fit):
    _, full, held = data
    stored = warm_start.load(base_run[0])
    result, seen = warm_fit
    first = seen["calls"][0]
    assert first["step_size"] == pytest.approx(float(stored["step_size"]))
    assert first["adapt_metric"] is False
    assert first["settings"].warmup == result.diagnostics["warm_start"]["warmup"]
    metric = first["metric"]
    (dense_key,) = [k for k, v in metric.items() if np.ndim(v) == 2]
    (rest_key,) = [k for k, v in metric.items() if np.ndim(v) == 1]
    assert "gamma" in dense_key and "b_raw" in rest_key
    warm, inputs = warm_start.prepare(base_run[0], full, _inputs(full), result.config, SETTINGS)
    sizes = {name: int(np.size(value)) for name, value in warm.init.items()}
    # each item's entry of b_raw is the stored one of the same label (its centring kept)
    at = sum(sizes[n] for n in rest_key[: rest_key.index("b_raw")])
    got = np.asarray(metric[rest_key])[at : at + sizes["b_raw"]]
    old_items = stored["coord/item"].tolist()
    labels = {"item": [str(i) for i in full.items]}
    keep = warm_start._same_centring(stored, {"item": old_items}, inputs, labels)
    # every item of the run keeps the run's layout, though the new model moved the weights
    assert keep.sum() == len(set(old_items) & set(labels["item"]))
    fresh = warm_start._same_centring(stored, {"item": old_items}, _inputs(full), labels)
    assert fresh.sum() < keep.sum()
    for j, item in enumerate(labels["item"]):
        if keep[j]:
            want = stored["var/b_raw"][old_items.index(item)]
            assert got[j] == pytest.approx(want, rel=1e-5)
    # gamma, in the dense block of both fits, keeps its stored variance
    old_dense = list(stored["dense_sites"])
    i = sum(int(np.size(stored[f"var/{n}"])) for n in old_dense[: old_dense.index("gamma")])
    j = sum(sizes[n] for n in dense_key[: list(dense_key).index("gamma")])
    assert metric[dense_key][j, j] == pytest.approx(stored["dense"][i, i], rel=1e-5)
    assert result.diagnostics["warm_start"]["new_models"] == [held]
    assert result.diagnostics["warm_start"]["used"] is True
    assert result.diagnostics["sampler_info"]["start_metric"] == "warm"
    assert result.adaptation is not None  # a warm-started run can warm-start the next


def _inputs(dataset):
    from bayes_dualeval.model.inputs import build_inputs

    return build_inputs(dataset, load_spec("dualeval-2pl"), centred="auto")[0]


def test_the_warm_start_starts_old_models_where_the_run_ended(base_run, warm_fit):
    stored = warm_start.load(base_run[0])
    result, seen = warm_fit
    old = stored["coord/model"].tolist()
    new = list(result.dataset.models)
    theta_old = helmert_basis(len(old)).astype(np.float64) @ stored["mean/theta_contrast"]
    warm, _ = warm_start.prepare(
        base_run[0], result.dataset, _inputs(result.dataset), result.config, SETTINGS
    )
    theta_new = helmert_basis(len(new)).astype(np.float64) @ warm.init["theta_contrast"]
    for k, label in enumerate(old):
        assert theta_new[new.index(label)] == pytest.approx(theta_old[k], abs=1e-5)


def test_a_failed_warm_start_falls_back_to_the_full_warmup(data, base_run, monkeypatch):
    """The warm draws judged not converged: the fit is run again, cold, and says so."""
    from types import SimpleNamespace

    from bayes_dualeval.runs import fit as fit_module

    _, full, _ = data
    again = []

    def cold(**kwargs):  # the refit (its sampling is the cold fit's, tested elsewhere)
        again.append(kwargs)
        return SimpleNamespace(diagnostics={})

    monkeypatch.setattr(diagnostics, "convergence", _judged(converged=False))
    monkeypatch.setattr(fit_module, "fit", cold)
    result = fit(full, load_spec("dualeval-2pl"), SETTINGS, warm_start=base_run[0])
    assert len(again) == 1 and "warm_start" not in again[0]
    assert again[0]["dataset"] is full and again[0]["settings"] == SETTINGS
    record = result.diagnostics["warm_start"]
    assert record["used"] is False and "forced by the test" in record["fell_back"]
    assert "not used" in warm_start.describe(record)


def test_runs_that_cannot_warm_start_are_one_line(data, base_run, tmp_path):
    less, _, _ = data
    config = load_spec("dualeval-2pl")
    with pytest.raises(InputError, match="not a run folder"):
        fit(less, config, SETTINGS, warm_start=tmp_path / "missing")
    svi = tmp_path / "svi"
    svi.mkdir()
    (svi / "diagnostics.json").write_text(json.dumps({"sampler": {"sampler": "svi"}}))
    with pytest.raises(InputError, match="fitted with svi"):
        fit(less, config, SETTINGS, warm_start=svi)
    other = tmp_path / "other"
    shutil.copytree(base_run[0], other)
    with np.load(other / warm_start.ADAPTATION_FILE) as npz:
        arrays = dict(npz)
    spec = json.loads(str(arrays["config"]))
    arrays["config"] = np.asarray(json.dumps({**spec, "theta_scale": 2.5}))
    np.savez(other / warm_start.ADAPTATION_FILE, **arrays)
    with pytest.raises(InputError, match="another specification") as err:
        fit(less, config, SETTINGS, warm_start=other)
    assert "\n" not in str(err.value)
    # a run of the plain level sites, as versions before the level in units of gamma wrote
    older = tmp_path / "older"
    shutil.copytree(base_run[0], older)
    with np.load(older / warm_start.ADAPTATION_FILE) as npz:
        arrays = dict(npz)
    assert "mean/level_u" in arrays  # the premise: this fit samples the anchored unit
    for part in ("mean", "var", "dims"):
        arrays[f"{part}/level_c"] = arrays.pop(f"{part}/level_u")
    np.savez(older / warm_start.ADAPTATION_FILE, **arrays)
    with pytest.raises(InputError, match="not in the run: level_u") as err:
        fit(less, config, SETTINGS, warm_start=older)
    assert "only in the run: level_c" in str(err.value) and "\n" not in str(err.value)


def test_the_command_line_says_a_bad_run_in_one_line(base_run, tmp_path):
    from bayes_dualeval.cli.commands import cli

    folder = base_run[0]
    data = tmp_path / "d"
    out = CliRunner().invoke(
        cli, ["simulate", str(data), "--models", "3", "--static-items", "4", "--seed", "1"]
    )
    assert out.exit_code == 0, out.output
    out = CliRunner().invoke(
        cli, ["fit", str(data), "--out", str(tmp_path / "r"), "--warm-start", str(tmp_path / "no")]
    )
    assert out.exit_code != 0 and "Error: warm start" in out.output
    assert "Traceback" not in out.output and not (tmp_path / "r").exists()
    assert folder.exists()
