"""Compiled programs: few per fit, and released before a process runs out of memory maps."""

import contextlib
import io
import logging
import mmap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayes_dualeval.inference import compiled
from bayes_dualeval.inference import draws as _draws


def test_programs_are_released_only_when_the_maps_are_crowded(monkeypatch):
    cleared = []
    monkeypatch.setattr(jax, "clear_caches", lambda: cleared.append(1))
    monkeypatch.setattr(compiled, "memory_maps", lambda: (200, 1000))
    assert compiled.release_if_crowded(0.25) is False and not cleared
    monkeypatch.setattr(compiled, "memory_maps", lambda: (300, 1000))
    assert compiled.release_if_crowded(0.25) is True and cleared == [1]
    # where the count cannot be read, the caller chooses
    monkeypatch.setattr(compiled, "memory_maps", lambda: None)
    assert compiled.release_if_crowded() is False and cleared == [1]
    assert compiled.release_if_crowded(unknown=True) is True and cleared == [1, 1]


PROC_MAPS = "/proc/self/maps"
MAX_MAP_COUNT = "/proc/sys/vm/max_map_count"


def _proc(files: dict):
    """An ``open`` that serves ``files`` (path -> bytes) and finds nothing else."""

    def opener(path, mode="r", *args, **kwargs):
        if str(path) not in files:
            raise FileNotFoundError(2, "No such file or directory", str(path))
        data = files[str(path)]
        return io.BytesIO(data) if "b" in mode else io.StringIO(data.decode())

    return opener


def _readable(path: str) -> bool:
    try:
        with open(path, "rb") as fh:
            fh.read(1)
    except OSError:
        return False
    return True


def test_memory_maps_reads_this_process(tmp_path, monkeypatch):
    # how the files are read, on every platform (memory_maps opens them by name)
    maps = b"00400000-00452000 r-xp 0 08:02 1 /bin/x\n" * 3 + b"7ff0-7ff1 rw-p 0 0 0\n"
    monkeypatch.setattr(
        compiled, "open", _proc({PROC_MAPS: maps, MAX_MAP_COUNT: b"65530\n"}), raising=False
    )
    assert compiled.memory_maps() == (4, 65530)
    # the documented fallback, None, where either file is missing or the limit unreadable
    for files in ({MAX_MAP_COUNT: b"65530\n"}, {PROC_MAPS: maps}, {}):
        monkeypatch.setattr(compiled, "open", _proc(files), raising=False)
        assert compiled.memory_maps() is None, sorted(files)
    monkeypatch.setattr(
        compiled, "open", _proc({PROC_MAPS: maps, MAX_MAP_COUNT: b"unlimited\n"}), raising=False
    )
    assert compiled.memory_maps() is None
    monkeypatch.delattr(compiled, "open")

    maps_now = compiled.memory_maps()
    if not (_readable(PROC_MAPS) and _readable(MAX_MAP_COUNT)):  # not Linux: the fallback
        assert maps_now is None
        return
    # Linux: this process's count, below the kernel's limit, and it follows new maps
    used, limit = maps_now
    assert type(used) is int and type(limit) is int
    with open(MAX_MAP_COUNT) as fh:
        assert limit == int(fh.read())
    assert 0 < used < limit
    n = 16  # separate files: their maps cannot merge into one
    handles, views = [], []
    try:
        for k in range(n):
            path = tmp_path / f"page{k}"
            path.write_bytes(b"x" * mmap.PAGESIZE)
            handles.append(open(path, "r+b"))  # closed below
            views.append(mmap.mmap(handles[-1].fileno(), mmap.PAGESIZE))
        mapped, _ = compiled.memory_maps()
    finally:
        for view in views:
            view.close()
        for fh in handles:
            fh.close()
    released, _ = compiled.memory_maps()
    # other threads may map or unmap a little meanwhile: half of the new maps must show
    assert mapped >= used + n // 2
    assert released <= mapped - n // 2


def _lowered_during(run):
    """Programs JAX lowers while ``run()`` runs, and what it returns."""
    lowered = []

    def listen(event, duration, **kwargs):
        if event == "/jax/core/compile/jaxpr_to_mlir_module_duration":
            lowered.append(duration)

    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        out = run()
    finally:
        lowered.append(None)  # a marker: what comes after the run is not counted
        stop = getattr(jax.monitoring, "unregister_event_duration_listener", None)
        if stop is not None:
            stop(listen)
    return lowered[: lowered.index(None)], out


def _small_inputs(n_models, n_items, n_prompts):
    import warnings

    from bayes_dualeval.data.dataset import Dataset
    from bayes_dualeval.model.config import load_spec
    from bayes_dualeval.model.inputs import build_inputs
    from bayes_dualeval.model.simulate import simulate

    static, arena, _ = simulate(n_models, n_items, n_prompts, seed=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = Dataset.from_frames(static=static, arena=arena)
    config = load_spec("dualeval-2pl")
    inputs, _ = build_inputs(ds, config)
    return inputs, config


def test_svi_initialises_in_a_few_compiled_programs():
    """NumPyro's SVI initialisation run eagerly lowers one program per primitive of the
    model (353 on AlpacaEval, 16 of the 21 s of an SVI fit at paper scale); run_svi
    compiles it, and the draws from the guide, as one program each, and lists the sites to
    draw by an abstract trace."""
    from bayes_dualeval.inference.settings import SamplerSettings
    from bayes_dualeval.inference.svi import run_svi

    inputs, config = _small_inputs(7, 23, 11)  # shapes no other test uses
    settings = SamplerSettings(sampler="svi", svi_steps=20, draws=10, seed=0, progress=False)
    lowered, draws = _lowered_during(lambda: run_svi(inputs, config, settings))
    assert draws.samples["theta"].shape == (1, 10, 7)
    assert len(lowered) <= 40, f"{len(lowered)} programs lowered"  # eagerly: 427 (12 now)


def test_a_single_nuts_chain_initialises_in_a_few_compiled_programs():
    """Outside pmap, NumPyro initialises NUTS (and shapes its collection of draws by
    post-processing the start) primitive by primitive: 441 programs and 18 s of a 27 s
    single-chain fit of the bundled data; CompiledInitNUTS compiles each as one."""
    from bayes_dualeval.inference.nuts import run_nuts
    from bayes_dualeval.inference.settings import SamplerSettings

    inputs, config = _small_inputs(6, 19, 9)  # shapes no other test uses
    settings = SamplerSettings(chains=1, warmup=20, draws=10, seed=0, extend=0)
    lowered, draws = _lowered_during(lambda: run_nuts(inputs, config, settings))
    assert draws.samples["theta"].shape == (1, 10, 6)
    assert np.isfinite(draws.samples["theta"]).all()
    # eagerly over 400; compiled, 65 when the test runs alone and 61 after other tests
    # compiled some of the same small programs (2026-12-06): the count depends on the
    # order, so the bound leaves room for it and still fails on an eager start
    assert len(lowered) <= 100, f"{len(lowered)} programs lowered"


def test_vectorised_nuts_chains_initialise_in_a_few_compiled_programs():
    """Several chains on one device (a GPU, or the library on a CPU without host devices)
    are vectorised; their initialisation is compiled too, and gives each chain its own
    start."""
    from numpyro.infer import MCMC

    from bayes_dualeval.inference.chains import CompiledInitNUTS
    from bayes_dualeval.model.joint import dualeval_model

    inputs, config = _small_inputs(5, 17, 8)  # shapes no other test uses
    mcmc = MCMC(
        CompiledInitNUTS(dualeval_model, max_tree_depth=4),
        num_warmup=10,
        num_samples=5,
        num_chains=2,
        chain_method="vectorized",
        progress_bar=False,
    )

    def run():
        mcmc.run(jax.random.PRNGKey(0), inputs, config)
        return mcmc.get_samples(group_by_chain=True)

    lowered, samples = _lowered_during(run)
    theta = np.asarray(samples["theta"])
    assert theta.shape == (2, 5, 5) and np.isfinite(theta).all()
    assert not np.allclose(theta[0], theta[1])
    assert len(lowered) <= 60, f"{len(lowered)} programs lowered"  # eagerly: over 300


def test_vectorised_chains_on_a_cpu_warn_how_to_run_them_in_parallel():
    """More chains than CPU devices run vectorised (slowly); the warning names the fix."""

    from bayes_dualeval.core.errors import PerformanceWarning
    from bayes_dualeval.inference.nuts import make_mcmc
    from bayes_dualeval.inference.settings import SamplerSettings

    inputs, config = _small_inputs(5, 17, 8)
    n_dev = jax.local_device_count()
    with pytest.warns(PerformanceWarning, match=rf"configure\(chains={n_dev + 1}\)"):
        mcmc = make_mcmc(inputs, config, SamplerSettings(chains=n_dev + 1))
    assert mcmc.chain_method == "vectorized"
    import warnings

    from bayes_dualeval.inference.chains import data_as_argument

    with warnings.catch_warnings():
        warnings.simplefilter("error", PerformanceWarning)
        parallel = make_mcmc(inputs, config, SamplerSettings(chains=n_dev))
        assert parallel.chain_method is data_as_argument


class _CacheKeys(logging.Handler):
    """The persistent-cache keys of the programs a fit compiles or reads from the cache.

    JAX logs each lookup of its persistent compilation cache with the program's key, a
    digest of the lowered program and its compile options (so data compiled in as
    constants give another key); lookups while a fit's compile clock runs are the ones its
    ``cache_hits`` and ``cache_misses`` count. Dropping JAX's in-memory caches first makes
    the fit look up every program it runs, so its keys say what it needs whether the
    suite's cache holds them already (a warm run) or not (a clean clone).
    """

    _LOOKUPS = ("Persistent compilation cache hit", "PERSISTENT COMPILATION CACHE MISS")

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.keys = set()

    def emit(self, record):
        if _draws._CLOCK.active and record.msg.startswith(self._LOOKUPS):
            self.keys.add(record.args[1])

    @contextlib.contextmanager
    def listening(self):
        log = logging.getLogger("jax._src.compiler")
        level, propagate = log.level, log.propagate
        jax.clear_caches()
        log.addHandler(self)
        log.setLevel(logging.DEBUG)
        log.propagate = False
        try:
            yield self.keys
        finally:
            log.removeHandler(self)
            log.setLevel(level)
            log.propagate = propagate


def _simulated_inputs(config, prompts: int, seed: int, **build):
    """Model inputs of 6 simulated models, 13 questions and ``prompts`` prompts."""
    from conftest import frames_dataset

    from bayes_dualeval.model.inputs import build_inputs
    from bayes_dualeval.model.simulate import simulate

    static, arena, _ = simulate(6, 13, prompts, seed=seed)
    return build_inputs(frames_dataset(static, arena), config, **build)[0]


@pytest.mark.parametrize("chains", [2, 1], ids=["parallel", "one-chain"])
def test_chains_compile_once_for_data_of_the_same_shapes(chains, monkeypatch):
    """The data are arguments of the compiled sampler, not constants of it: a second data
    set of the same shapes (here: same design, other seed) needs no program the first did
    not (the same cache keys), so it reads every one from the persistent compilation
    cache, and its draws are its own. NumPyro's own parallel
    method compiles the data into the program, so such a fit compiled everything again.
    Warm-up here starts from the curvature of each data set (as on real data), whose
    metric and start are arguments too: as constants, every data set compiled its sampler
    (parallel chains) or its initialisation and curvature pilot (one chain) again.
    A round that continues the chains runs in chunks of one length, so continuations of
    other lengths (here 100 draws, then 150) are the same program too; parallel chains
    trace it once per round, not once per chunk."""
    from bayes_dualeval.inference import chains as chains_module
    from bayes_dualeval.inference import metric
    from bayes_dualeval.inference.nuts import run_nuts
    from bayes_dualeval.inference.settings import SamplerSettings
    from bayes_dualeval.model.config import load_spec
    from bayes_dualeval.posterior.diagnostics import Verdict

    monkeypatch.setattr(metric, "MIN_TERMS", 0)  # the curvature start, on tiny data
    mapped = []  # programs mapped over the chains (traced), per fit
    real_pmap = chains_module.jax.pmap
    monkeypatch.setattr(
        chains_module.jax, "pmap", lambda *a, **k: mapped.append(1) or real_pmap(*a, **k)
    )
    config = load_spec("dualeval-2pl")
    runs, traced, keys = [], [], []
    for seed, more in ((1, 100), (2, 150)):
        inputs = _simulated_inputs(config, 7, seed, centred="auto")
        assert inputs.n_anchored > 0  # anchored prompts: the level term's start
        # at the last target acceptance of the divergence ladder a round always continues
        settings = SamplerSettings(
            chains=chains, warmup=20, draws=200, seed=0, extend=1, target_accept=0.99
        )
        verdicts = iter([Verdict(False, more), Verdict(True)])
        mapped.clear()
        until = lambda draws, verdicts=verdicts: next(verdicts)  # noqa: E731
        with _CacheKeys().listening() as looked_up:
            runs.append((inputs, run_nuts(inputs, config, settings, until=until)))
        traced.append(len(mapped))
        keys.append(looked_up)
    (first_in, first), (second_in, second) = runs
    assert first_in.pair_i.shape == second_in.pair_i.shape  # the premise: same shapes
    assert first.info["start_metric"] == second.info["start_metric"] == "curvature"
    # complete static data: the labels as a matrix, whose shape the label count leaves alone
    assert first.info["static_layout"] == second.info["static_layout"] == "matrix"
    # the arena matrix's shape depends on the prompts and models, not on the decisive pairs
    assert first.info["arena_layout"] == second.info["arena_layout"] == "matrix"
    assert first.info["rounds"] == second.info["rounds"] == 2
    assert first.samples["theta"].shape[1] == 300 and second.samples["theta"].shape[1] == 350
    assert np.isfinite(first.samples["theta"]).all() and np.isfinite(second.samples["theta"]).all()
    assert first.info["chain_method"] == "parallel"
    # parallel chains: one traced program for round 1 and one for the continuation's chunks
    assert traced == ([2, 2] if chains > 1 else [0, 0])
    assert keys[0] and keys[1] <= keys[0], keys[1] - keys[0]
    assert second.timings["cache_misses"] == 0, second.timings
    assert second.timings["compile_cache"] in ("hit", "off"), second.timings
    assert not np.allclose(first.samples["theta"][:, :300], second.samples["theta"][:, :300])


@pytest.mark.parametrize("sampler", ["svi", "map"])
def test_svi_and_map_compile_once_for_data_of_similar_sizes(sampler):
    """Static cells and decisive pairs are padded to size buckets for SVI and MAP too: a
    second data set of the same design whose counts of decisive pairs differ (ties and
    both-bad pairs vary with the rewards) needs no program the first did not, and reads
    every one from the cache."""
    from bayes_dualeval.inference.sampling import sample
    from bayes_dualeval.inference.settings import SamplerSettings
    from bayes_dualeval.model.config import load_spec

    config = load_spec("dualeval-2pl")
    settings = SamplerSettings(sampler=sampler, svi_steps=100, draws=10, seed=0, map_steps=1)
    runs, keys = [], []
    for seed in (1, 2):  # 102 and 104 decisive pairs
        inputs = _simulated_inputs(config, 9, seed)
        with _CacheKeys().listening() as looked_up:
            runs.append((inputs, sample(inputs, config, settings)))
        keys.append(looked_up)
    (first_in, first), (second_in, second) = runs
    assert first_in.pair_i.shape != second_in.pair_i.shape  # the premise: other sizes
    assert keys[0] and keys[1] <= keys[0], keys[1] - keys[0]
    assert second.timings["cache_misses"] == 0, second.timings
    assert not np.allclose(first.samples["theta"], second.samples["theta"])


def test_maps_objective_compiles_with_the_options_for_few_calls(monkeypatch):
    """MAP's objective, evaluated some fifty times a fit, is compiled with XLA's options for
    programs whose compilation is their cost (inference/xla_options.py). The options reach
    the compiler: an option XLA does not know fails the objective's compilation. And a jaxlib
    that does not know the option gets XLA's defaults, not an error."""
    from importlib.metadata import version

    from bayes_dualeval.inference import mode, xla_options
    from bayes_dualeval.inference.settings import SamplerSettings
    from bayes_dualeval.model.config import load_spec

    if version("jaxlib").startswith("0.10."):  # where the option is known to exist
        assert xla_options.few_calls() == xla_options.CPU_FEW_CALLS
    config = load_spec("dualeval-2pl")
    inputs = _simulated_inputs(config, 9, 1)
    unknown = {"xla_cpu_no_such_option": False}
    monkeypatch.setattr(mode, "few_calls", lambda: unknown)
    monkeypatch.setattr(mode, "value_and_grad", mode.value_and_grad.__wrapped__)
    with pytest.raises(Exception, match="xla_cpu_no_such_option"):
        mode.run_map(inputs, config, SamplerSettings(sampler="map", map_steps=1))

    monkeypatch.setattr(xla_options, "CPU_FEW_CALLS", unknown)
    xla_options.few_calls.cache_clear()
    try:
        assert xla_options.few_calls() == {}
    finally:
        xla_options.few_calls.cache_clear()


def test_specifications_differing_only_in_their_description_share_compiled_programs():
    """The configuration is a static argument of every compiled program, so it keys JAX's
    in-memory cache of traced programs; its description is a label, not part of the model,
    and a specification that differs only in it reuses what another traced."""
    from bayes_dualeval.model import inputs  # noqa: F401 (registers ModelConfig as static)
    from bayes_dualeval.model.config import ModelConfig, load_spec

    plain, named = ModelConfig(), load_spec("dualeval-2pl")
    assert plain.description == "" and named.description
    assert plain == named and hash(plain) == hash(named)
    assert plain != ModelConfig(lambda_arena=0.5)
    traced = []

    @jax.jit
    def scaled(x, config):
        traced.append(config)
        return x * config.theta_scale

    scaled(jnp.ones(3), plain)
    scaled(jnp.ones(3), named)
    assert len(traced) == 1
    scaled(jnp.ones(3), ModelConfig(theta_scale=2.0))
    assert len(traced) == 2


def test_the_compile_cache_is_pruned_to_its_bound_oldest_first(tmp_path):
    import os

    from bayes_dualeval.inference.device import prune_cache

    for k in range(5):
        f = tmp_path / f"program{k}"
        f.write_bytes(b"x" * 100)
        os.utime(f, (1_000_000 + k, 1_000_000 + k))  # program0 least recently used
    assert prune_cache(tmp_path, 250) == 300
    assert sorted(p.name for p in tmp_path.iterdir()) == ["program3", "program4"]
    assert prune_cache(tmp_path, 250) == 0


def _svi_draws_digest() -> tuple[str, int]:
    """A tiny SVI fit: a digest of its draws and losses, and its cache misses."""
    import hashlib

    from bayes_dualeval.inference.settings import SamplerSettings
    from bayes_dualeval.inference.svi import run_svi

    inputs, config = _small_inputs(5, 11, 6)  # shapes no other test uses
    settings = SamplerSettings(sampler="svi", svi_steps=20, draws=10, seed=0, progress=False)
    draws = run_svi(inputs, config, settings)
    digest = hashlib.sha256()
    for name in sorted(draws.samples):
        digest.update(np.ascontiguousarray(draws.samples[name]).tobytes())
    digest.update(np.asarray(draws.info["losses"]).tobytes())
    return digest.hexdigest(), draws.timings["cache_misses"]


def test_svi_compiles_the_same_programs_and_draws_in_every_interpreter():
    """Python salts string hashes per interpreter; NumPyro's Trace_ELBO summed its sites
    in the order of a set of their names, so each process built other SVI programs: the
    persistent cache never hit (3 to 9 s of compilation in every SVI fit) and one seed did
    not give bit-identical draws twice. Two fresh interpreters with different hash salts,
    sharing the suite's cache: the second reads every program the first wrote (or read),
    and draws the same values. (Fresh interpreters, not this one: a test worker's memory
    may hold programs compiled while another test had the cache elsewhere.)"""
    import json
    import os
    import subprocess
    import sys

    code = "import json, test_compiled; print(json.dumps(test_compiled._svi_draws_digest()))"
    runs = []
    for salt in ("1", "2"):
        env = dict(
            os.environ,
            PYTHONHASHSEED=salt,
            JAX_PLATFORMS="cpu",
            JAX_COMPILATION_CACHE_DIR=jax.config.jax_compilation_cache_dir,
            JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
            JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0",
            PYTHONPATH=os.pathsep.join([os.path.dirname(__file__), *sys.path]),
        )
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
        )
        assert out.returncode == 0, out.stderr[-2000:]
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    (first, _), (second, misses) = runs
    assert misses == 0
    assert second == first
