"""Data split across devices (SVI, MAP): the same answers as one device."""

import warnings

import jax
import numpy as np
import pytest
from conftest import compiled_trace, frames_dataset

from bayes_dualeval.core.errors import ConfigError
from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.inference import mode
from bayes_dualeval.inference.sampling import check_supported
from bayes_dualeval.inference.settings import SamplerSettings
from bayes_dualeval.inference.sharding import SPLIT, data_devices, shard
from bayes_dualeval.model.config import load_spec
from bayes_dualeval.model.inputs import build_inputs
from bayes_dualeval.model.joint import dualeval_model
from bayes_dualeval.model.simulate import simulate
from bayes_dualeval.runs.fit import fit


@pytest.fixture(scope="module")
def dataset():
    static, arena, _ = simulate(8, 120, 30, seed=21)
    # 959 static cells: every split pads (item 0's padded label counted by MAP's item
    # likelihood moved its b by 0.27 on two devices before the likelihood read the mask)
    static = static.iloc[1:]
    static["source"], arena["source"] = "bench", "arena"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Dataset.from_frames(static=static, arena=arena)


def test_the_suite_has_several_host_devices():
    # conftest makes 4, as XLA_FLAGS=--xla_force_host_platform_device_count=4 would
    assert len(jax.devices()) >= 4


def test_shard_splits_cells_and_pairs_and_keeps_the_density(dataset):
    config = load_spec("dualeval-2pl")
    inputs, _ = build_inputs(dataset, config, centred="none")
    point = numpyro_point(inputs, config)
    exact = potential(inputs, config, point)
    for n in (2, 4):
        split = shard(inputs, data_devices(n))
        for name in SPLIT:
            value = getattr(split, name)
            assert value.shape[0] % n == 0
            assert len(value.sharding.device_set) == n
            assert not value.sharding.is_fully_replicated, name
        assert split.item_group.sharding.is_fully_replicated
        # padded cells are masked and padded pairs weigh nothing: the same density
        assert float(potential(split, config, point)) == pytest.approx(float(exact), rel=1e-5)
    assert shard(inputs, data_devices(1)) is inputs


@pytest.mark.parametrize("sampler", ["svi", "map"])
def test_sharded_fits_give_the_answers_of_one_device(dataset, sampler, monkeypatch):
    from bayes_dualeval.runs import fit as run_fit

    # the count of MAP's programs below needs JAX's caches kept between the two fits (a
    # process holding many programs clears them before a fit: inference/compiled.py)
    monkeypatch.setattr(run_fit, "release_if_crowded", lambda: None)

    def means(shards):
        # SVI's answer after two windows: the same steps on every layout, converged or not
        settings = SamplerSettings(
            sampler=sampler, draws=100, seed=3, shards=shards, svi_steps=1000
        )
        post = fit(dataset, settings=settings).idata.posterior
        return {k: post[k].values.reshape(-1, *post[k].shape[2:]).mean(0) for k in ("theta", "b")}

    one = means(1)
    for shards in (4,) if sampler == "svi" else (2,):
        before = mode.value_and_grad()._cache_size()
        other = means(shards)
        for name in one:  # float32 sums in another order, nothing more
            np.testing.assert_allclose(other[name], one[name], atol=2e-4, err_msg=name)
        if sampler == "map":  # the inner solutions keep one layout: one program, not two
            assert mode.value_and_grad()._cache_size() == before + 1


def test_sharded_svi_steps_are_partitioned_across_the_devices(monkeypatch):
    """SVI's programs take the data as an argument: split data make a partitioned program
    (its sums over cells and pairs are all-reductions). Closed over, the data were
    constants of the program, which then ran whole on one device whatever the split."""
    from bayes_dualeval.inference import svi as svi_module

    static, arena, _ = simulate(6, 40, 9, seed=4)  # shapes no other test uses
    small = frames_dataset(static, arena)
    config = load_spec("dualeval-2pl")
    inputs, _ = build_inputs(small, config)
    programs = []
    original = svi_module._window

    def recording(svi, config, length):
        step = original(svi, config, length)

        def run(state, inputs):
            compiled = step.lower(state, inputs).compile()
            programs.append(compiled.as_text())
            return compiled(state, inputs)

        return run

    monkeypatch.setattr(svi_module, "_window", recording)
    settings = SamplerSettings(sampler="svi", svi_steps=20, draws=10, seed=0, progress=False)
    svi_module.run_svi(shard(inputs, data_devices(2)), config, settings)
    assert programs and all("all-reduce" in text for text in programs)


def test_shards_are_refused_where_they_cannot_apply():
    with pytest.raises(ConfigError, match="shards"):
        check_supported(load_spec("dualeval-2pl"), SamplerSettings(sampler="nuts", shards=2))
    with pytest.raises(ConfigError, match="host devices"):
        data_devices(len(jax.devices()) + 1)
    with pytest.raises(ConfigError, match="shards"):
        SamplerSettings(shards=0)


def numpyro_point(inputs, config):
    """A draw of the model's latent sites from its prior."""
    draw = compiled_trace(dualeval_model, inputs, config)
    return {k: v["value"] for k, v in draw.items() if not v.get("is_observed")}


@jax.jit
def potential(inputs, config, point):
    """The model's log density at ``point``, compiled (once per layout of the inputs)."""
    from numpyro.infer.util import log_density

    return log_density(dualeval_model, (inputs, config), {}, point)[0]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_processes_give_the_answers_of_one_process_with_two_devices(tmp_path):
    """``--coordinator``: two processes (as on two hosts) joined by jax.distributed, each
    holding one CPU device and half of the cells, write what one process splitting the
    data over two host devices writes. MAP: its first inner solve starts from a sentinel
    that every process must place alike (it was NaN, which the processes' check of equal
    values refused)."""
    import os
    import subprocess
    import sys

    import pandas as pd
    from conftest import invoke

    data = tmp_path / "data"
    cmd = [sys.executable, "-m", "bayes_dualeval"]
    made = invoke(
        "simulate", data, "--models", 6, "--static-items", 40, "--arena-prompts", 9, "--seed", 4
    )
    assert made.exit_code == 0, made.output
    fit_args = ["fit", data, "--sampler", "map", "--shards", "2", "--no-report", "-q"]
    one = invoke(*fit_args, "--out", tmp_path / "one")
    assert one.exit_code == 0, one.output
    join = ["--coordinator", f"127.0.0.1:{_free_port()}", "--processes", "2"]
    runs = [
        subprocess.Popen(
            [*map(str, [*cmd, *fit_args, "--out", tmp_path / "two", *join, "--process-id", k])],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "JAX_PLATFORMS": "cpu"},
        )
        for k in (1, 0)
    ]
    outputs = [run.communicate(timeout=300)[0] for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "one", "two"]
    tables = (("leaderboard", "model", "theta_mean"), ("items", "item", "b_mean"))
    for table, key, column in tables:
        a = pd.read_csv(tmp_path / "one" / f"{table}.csv").set_index(key)[column]
        b = pd.read_csv(tmp_path / "two" / f"{table}.csv").set_index(key)[column]
        np.testing.assert_allclose(b.loc[a.index], a, atol=1e-6, err_msg=table)


@pytest.mark.parametrize(
    "options, words",
    [
        (["--processes", "2", "--process-id", "0"], "need --coordinator"),
        (["--coordinator", "127.0.0.1:1", "--processes", "2"], "needs --processes and"),
        (["--coordinator", "h:1", "--processes", "2", "--process-id", "0", "--sampler", "nuts"],
         "NUTS runs its chains"),
        (["--coordinator", "h:1", "--processes", "2", "--process-id", "0", "--sampler", "svi",
          "--shards", "3"], "multiple of --processes"),
        (["--coordinator", "h", "--processes", "2", "--process-id", "0", "--sampler", "svi",
          "--shards", "2"], "host:port"),
        (["--coordinator", "h:1", "--processes", "2", "--process-id", "2", "--sampler", "svi",
          "--shards", "2"], "between 0 and 1"),
    ],
)  # fmt: skip
def test_several_process_options_are_checked_before_anything_runs(tmp_data, options, words):
    from conftest import invoke

    result = invoke("fit", tmp_data.root, *options)
    assert result.exit_code != 0
    assert words in result.output, result.output
