"""What comes after sampling: shared checks, draw budgets, thinned log likelihood, netCDF.

Posteriors are synthetic (random draws packaged by the real
:func:`posterior.to_inference_data`), so nothing here samples.
"""

import dataclasses
import warnings

import arviz as az
import h5py
import numpy as np
import pandas as pd
import pytest

from bayes_dualeval.checks import (
    CheckOptions,
    budget,
    item_table,
    passes,
    posterior_predictive,
)
from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.inference.sampling import Draws
from bayes_dualeval.model.config import load_spec
from bayes_dualeval.model.inputs import build_inputs
from bayes_dualeval.model.simulate import simulate
from bayes_dualeval.posterior import idata as posterior
from bayes_dualeval.posterior import loglik, summaries
from bayes_dualeval.runs import fit as run


def _dataset(n_models=6, n_static=30, n_arena=10, seed=1) -> Dataset:
    static, arena, _ = simulate(n_models, n_static, n_arena, seed=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Dataset.from_frames(static=static, arena=arena)


def _posterior(ds, *, chains=2, draws=60, seed=0):
    """Random draws around a random truth, packaged as a run's InferenceData."""
    config = load_spec("dualeval-2pl")
    inputs, pairs = build_inputs(ds, config)
    rng = np.random.default_rng(seed)
    m, q = ds.n_models, ds.n_items
    samples = {
        "theta": rng.normal(size=m) + 0.3 * rng.normal(size=(chains, draws, m)),
        "b": rng.normal(size=q) + 0.3 * rng.normal(size=(chains, draws, q)),
        "a": np.exp(0.3 * rng.normal(size=q) + 0.1 * rng.normal(size=(chains, draws, q))),
        "gamma": 4.0 + 0.2 * rng.normal(size=(chains, draws)),
        "level_c": 0.1 * rng.normal(size=(chains, draws, max(inputs.n_level_groups, 1))),
    }
    samples = {k: np.asarray(v, np.float32) for k, v in samples.items()}
    draws_ = Draws(samples, {})
    return posterior.to_inference_data(draws_, ds, inputs, config), pairs, inputs, config, draws_


@pytest.fixture(scope="module")
def run_data():
    ds = _dataset()
    idata, pairs, *_ = _posterior(ds)
    return ds, idata, pairs


def test_item_table_reuses_a_matching_ppc(run_data, monkeypatch):
    ds, idata, pairs = run_data
    options = CheckOptions(seed=3, max_draws=50)
    ppc = posterior_predictive(idata, ds, pairs, ci=0.9, options=options)
    # count the passes over the data from here on (each still runs: a spy, not a stub)
    calls = {"static": 0, "arena": 0}

    def spy(kind, original):
        def counted(*args, **kwargs):
            calls[kind] += 1
            return original(*args, **kwargs)

        return counted

    monkeypatch.setattr(passes, "static_pass", spy("static", passes.static_pass))
    monkeypatch.setattr(passes, "arena_pass", spy("arena", passes.arena_pass))

    reused = item_table(idata, ds, ci=0.8, pairs=pairs, options=options, ppc=ppc)
    assert calls == {"static": 0, "arena": 0}  # the ppc's passes, not new ones
    fresh = item_table(idata, ds, ci=0.8, pairs=pairs, options=options)
    assert calls == {"static": 1, "arena": 1}  # without ppc=, each pass runs once
    pd.testing.assert_frame_equal(reused, fresh)
    # the reused checks fill the item fit of both kinds of item
    fitted = reused.groupby("kind")["ppp"].count()
    assert fitted["static"] == ds.n_items - len(ds.arena_items) and fitted["arena"] > 0

    # another seed (or max_draws): the ppc's checks do not apply and are not used
    for change in ({"seed": 4}, {"max_draws": 40}):
        other_options = dataclasses.replace(options, **change)
        before = dict(calls)
        other = item_table(idata, ds, ci=0.8, pairs=pairs, options=other_options, ppc=ppc)
        assert calls == {k: v + 1 for k, v in before.items()}, change
        expected = item_table(idata, ds, ci=0.8, pairs=pairs, options=other_options)
        pd.testing.assert_frame_equal(other, expected)


def test_a_pass_over_budget_uses_fewer_evenly_spaced_draws(run_data, monkeypatch):
    ds, idata, pairs = run_data
    full = posterior_predictive(idata, ds, pairs, options=CheckOptions(max_draws=100))
    n_pairs = int((~pairs.both_bad).sum())
    monkeypatch.setattr(budget, "CHECK_ELEMENTS", 30 * max(n_pairs, len(ds.arena_z)))
    monkeypatch.setattr(budget, "MIN_CHECK_DRAWS", 5)
    cut = posterior_predictive(idata, ds, pairs, options=CheckOptions(max_draws=100))
    assert full.summary["draws_arena"] == 100 and cut.summary["draws_arena"] == 30
    assert cut.summary["replicates"] >= budget.MIN_REPLICATES
    # fewer draws, the same posterior: the checks agree up to Monte Carlo noise
    a = full.anomalies.set_index(["model", "item"])["expected"]
    b = cut.anomalies.set_index(["model", "item"])["expected"].reindex(a.index)
    np.testing.assert_allclose(b, a, atol=0.5)
    assert cut.summary["arena_dispersion"] == pytest.approx(
        full.summary["arena_dispersion"], rel=0.5
    )


def test_budget_keeps_all_draws_when_affordable():
    draws = np.arange(7, 500, 3)
    assert budget.budget(draws, 10) is draws
    few = budget.budget(draws, budget.CHECK_ELEMENTS // 60)
    assert len(few) == max(60, budget.MIN_CHECK_DRAWS)
    assert few[0] == draws[0] and few[-1] == draws[-1] and np.all(np.diff(few) > 0)


def test_log_likelihood_is_thinned_beyond_its_budget(monkeypatch):
    ds = _dataset(n_models=5, n_static=12, n_arena=6, seed=2)
    full, _, inputs, config, draws = _posterior(ds, chains=2, draws=40)
    assert np.array_equal(full.log_likelihood["draw"].values, np.arange(40))
    per_draw = loglik._per_draw(inputs)
    monkeypatch.setattr(loglik, "LOGLIK_ELEMENTS", per_draw * 2 * 9)
    monkeypatch.setattr(loglik, "MIN_LOGLIK_DRAWS", 18)
    thin = posterior.to_inference_data(draws, ds, inputs, config)
    kept = thin.log_likelihood["draw"].values
    assert len(kept) == 9 and kept[0] == 0 and kept[-1] == 39
    assert thin.posterior.sizes["draw"] == 40  # the posterior itself keeps every draw
    for name in thin.log_likelihood.data_vars:
        np.testing.assert_allclose(
            thin.log_likelihood[name].values,
            full.log_likelihood[name].sel(draw=kept).values,
            rtol=1e-5,
            atol=1e-5,
        )


def test_pointwise_chunks_give_the_same_values():
    ds = _dataset(n_models=5, n_static=12, n_arena=6, seed=2)
    _, _, inputs, config, draws = _posterior(ds, chains=1, draws=23)
    one = loglik.pointwise_loglik(draws.samples, inputs, config, chunk=23)
    many = loglik.pointwise_loglik(draws.samples, inputs, config, chunk=5)  # padded last
    for key in ("static", "arena"):
        np.testing.assert_allclose(many[key], one[key], rtol=1e-6, atol=1e-6)


def test_write_netcdf_round_trip(tmp_path, monkeypatch):
    ds = _dataset(n_models=5, n_static=12, n_arena=6, seed=2)
    idata, *_ = _posterior(ds, chains=2, draws=30)
    monkeypatch.setattr(run, "COMPRESS_MAX_BYTES", 1000)
    path = run.write_netcdf(idata, tmp_path / "posterior.nc")
    back = az.from_netcdf(str(path), engine="h5netcdf")
    assert set(back.groups()) == set(idata.groups())
    for group in idata.groups():
        a, b = getattr(idata, group), getattr(back, group)
        assert set(a.data_vars) == set(b.data_vars)
        for name in a.data_vars:
            np.testing.assert_array_equal(a[name].values, b[name].values)
    with h5py.File(path, "r") as f:
        assert f["posterior/b"].compression is None  # large floats: written as they are
        assert f["posterior/gamma"].compression == "gzip"  # small: compressed
        assert f["observed_data/static_y"].compression == "gzip"  # integers: compressed


def test_static_pass_on_threads_is_the_pass_on_one(run_data, monkeypatch):
    """Chunks run on threads, each with its own random stream: the same replicates."""
    from bayes_dualeval.checks.passes import Checks

    ds, idata, pairs = run_data
    monkeypatch.setattr(budget, "THREADS", 1)
    monkeypatch.setattr(budget, "CHUNK_ELEMENTS", 3 * len(ds.static_y))  # many chunks
    one = Checks(idata, ds, pairs, CheckOptions(seed=5)).static()
    monkeypatch.setattr(budget, "THREADS", 3)
    three = Checks(idata, ds, pairs, CheckOptions(seed=5)).static()
    assert one.n_rep == three.n_rep >= 200
    np.testing.assert_array_equal(one.item_ppp, three.item_ppp)
    np.testing.assert_array_equal(one.item_hist, three.item_hist)
    np.testing.assert_array_equal(one.model_correct, three.model_correct)
    np.testing.assert_array_equal(one.mean_p, three.mean_p)


def test_benchmark_audit_on_threads_is_the_audit_on_one(run_data, monkeypatch):
    import importlib

    audit = importlib.import_module("bayes_dualeval.checks.benchmark_audit")  # the module
    ds, idata, _ = run_data
    monkeypatch.setattr(audit, "CHUNK_ELEMENTS", 7 * audit.GRID)  # chunks of 7 cells
    monkeypatch.setattr(budget, "THREADS", 1)
    one = audit.benchmark_audit(idata, ds)
    monkeypatch.setattr(budget, "THREADS", 3)
    pd.testing.assert_frame_equal(audit.benchmark_audit(idata, ds), one)
    assert set(one["kind"]) == {"static", "arena"}


def test_cells_of_a_large_run_are_labelled_by_position(tmp_path, monkeypatch):
    """Above CELL_TEXT_MAX cells the cell coordinates hold positions: the same data read back."""
    from bayes_dualeval.posterior.loo import data_fingerprint
    from bayes_dualeval.runs.load import stored_dataset

    ds = _dataset(n_models=5, n_static=12, n_arena=4, seed=2)
    text, *_ = _posterior(ds)
    monkeypatch.setattr(posterior, "CELL_TEXT_MAX", 0)
    coded, *_ = _posterior(ds)
    read = {}
    for name, idata in (("text", text), ("positions", coded)):
        run.write_netcdf(idata, tmp_path / f"{name}.nc")
        read[name] = az.from_netcdf(tmp_path / f"{name}.nc")
        assert read[name].observed_data.attrs[posterior.CELL_LABELS_ATTR] == name
    coords = ("static_model", "static_item", "arena_model", "arena_item")
    assert all(read["positions"].observed_data[c].dtype == np.int32 for c in coords)
    truth = {
        "static_model": ds.static_model,
        "static_item": ds.static_item,
        "arena_model": ds.arena_model,
        "arena_item": ds.arena_item,
    }
    for coord in coords:
        for idata in read.values():
            np.testing.assert_array_equal(posterior.cell_positions(idata, coord), truth[coord])
        labels = [posterior.cell_labels(idata, coord) for idata in read.values()]
        np.testing.assert_array_equal(labels[0], labels[1])
    # compare's data fingerprint does not see how the labels were stored
    assert data_fingerprint(read["text"]) == data_fingerprint(read["positions"])
    assert data_fingerprint(text) == data_fingerprint(read["positions"])
    stored = stored_dataset(read["positions"], {"data": {"reward_norm": ds.reward_norm}})
    for coord, values in truth.items():
        np.testing.assert_array_equal(getattr(stored, coord), values)


def test_interval_matches_numpy_quantile(monkeypatch):
    monkeypatch.setattr(summaries, "INTERVAL_BLOCK", 7)
    rng = np.random.default_rng(5)
    for shape, axis in (((200, 30), 0), ((4, 300), 1), ((3, 5, 80), 2), ((50,), 0)):
        x = rng.normal(size=shape).astype(np.float32)
        lo, hi = summaries.interval(x, 0.9, axis=axis)
        ref = np.quantile(x.astype(np.float64), [0.05, 0.95], axis=axis)
        np.testing.assert_allclose(lo, ref[0], rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(hi, ref[1], rtol=1e-6, atol=1e-6)
    lo, hi = summaries.interval(np.ones((1, 4)), 0.9)
    assert np.isnan(lo).all() and np.isnan(hi).all() and lo.shape == (4,)


def test_posterior_file_keeps_whole_thinned_draws_beyond_its_bound(tmp_path, monkeypatch):
    """Above the bound posterior.nc keeps evenly spaced draws, every site of each (joint
    draws for predictions), says so, and leaves the run's own InferenceData whole."""
    import json
    from types import SimpleNamespace

    from bayes_dualeval.posterior import stored

    ds = _dataset(n_models=5, n_static=12, n_arena=6, seed=2)
    idata, *_ = _posterior(ds, chains=2, draws=60)
    same, info = stored.stored_posterior(idata)
    assert same is idata and info is None  # small: every draw
    per_draw = sum(v.size for v in idata.posterior.data_vars.values()) // 120
    monkeypatch.setattr(stored, "MAX_STORED_VALUES", per_draw * 30)  # room for 30 draws
    monkeypatch.setattr(stored, "MIN_STORED_DRAWS", 10)
    thinned, info = stored.stored_posterior(idata)
    assert info == {
        "draws_per_chain": 60,
        "kept_per_chain": 15,
        "values_per_draw": per_draw,
        "max_stored_values": per_draw * 30,
    }
    keep = thinned.posterior["draw"].values
    assert len(keep) == 15 and keep[0] == 0 and keep[-1] == 59
    assert np.all(np.diff(np.diff(keep)) <= 1)  # evenly spaced, to rounding
    for name in ("theta", "b", "gamma"):  # the same draws of every site
        np.testing.assert_array_equal(
            thinned.posterior[name].values, idata.posterior[name].values[:, keep]
        )
    assert idata.posterior.sizes["draw"] == 60  # the run keeps every draw
    assert json.loads(thinned.posterior.attrs[stored.THINNED_ATTR]) == info
    if "log_likelihood" in idata.groups():  # its own budget, untouched
        assert thinned.log_likelihood.sizes == idata.log_likelihood.sizes
    monkeypatch.setattr(stored, "MIN_STORED_DRAWS", 100)  # the floor wins over the bound
    assert stored.stored_posterior(idata)[1]["kept_per_chain"] == 50

    monkeypatch.setattr(stored, "MIN_STORED_DRAWS", 10)
    result = SimpleNamespace(idata=idata, diagnostics={"timings": {}}, adaptation=None)
    out = run.write_run(result, tmp_path / "run")
    back = az.from_netcdf(out / "posterior.nc")
    assert back.posterior.sizes["draw"] == 15
    assert json.loads(back.posterior.attrs[stored.THINNED_ATTR]) == info
    written = json.loads((out / "diagnostics.json").read_text())
    assert written["posterior_file"] == info
    assert "15 evenly spaced of the 60 draws" in stored.thinning_note(info)
