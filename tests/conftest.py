"""Shared fixtures: small input files written under a temporary directory."""

import atexit
import os
import shutil
import tempfile
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
# The suite is compile-bound on a clean clone (CI), and XLA's CPU fusion emitters (jaxlib
# 0.10's default) compile slowly: the bundled model's potential and gradient compiles in
# 1.3 s without them against 2.0 s with them, and the cold suite ran 751 s against 906 s
# (2026-12-07, docs/performance.md), every test passing either way. So the tests compile
# without them where that flag is known to exist (XLA aborts on a flag it does not know);
# the command line keeps XLA's defaults. Setting XLA_FLAGS yourself (even to nothing) runs
# the suite with yours instead.
if "XLA_FLAGS" not in os.environ:
    from importlib.metadata import version

    if version("jaxlib").startswith("0.10."):
        os.environ["XLA_FLAGS"] = "--xla_cpu_use_fusion_emitters=false"
# Chains run in parallel over host devices, as the command line runs them
# (inference/device.py): vectorised chains compile and run several times slower.
import numpyro  # noqa: E402

numpyro.set_host_device_count(4)
# The command line keeps compiled programs in JAX's persistent compilation cache
# (inference/device.py). Tests leave the user's cache alone: they keep one of their own in
# the checkout, .cache/jax-tests (ignored by git, at most 1 GiB), so that fits of the same
# shapes skip XLA's compilation, both within a run (the same model compiled again by another
# test, the second run of a determinism check) and in the next run of the suite. The suite
# is compile-bound: a second run after a change outside the model reads most programs.
# BAYES_DUALEVAL_TEST_CACHE=off runs cold (a fresh folder, removed afterwards), as a clean
# clone does; BAYES_DUALEVAL_TEST_CACHE=DIR keeps the programs elsewhere.
_WHERE = os.environ.get("BAYES_DUALEVAL_TEST_CACHE", "")
if _WHERE.lower() == "off":
    _CACHE = tempfile.mkdtemp(prefix="bayes-dualeval-tests-jax-")
    atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)
else:
    _CACHE = _WHERE or os.path.join(os.path.dirname(__file__), os.pardir, ".cache", "jax-tests")
    _CACHE = os.path.abspath(_CACHE)
    os.makedirs(_CACHE, exist_ok=True)
    if "PYTEST_XDIST_WORKER" not in os.environ:  # once per run, by the controller
        from bayes_dualeval.inference.device import CACHE_MAX_BYTES, prune_cache

        prune_cache(Path(_CACHE), CACHE_MAX_BYTES)
os.environ["BAYES_DUALEVAL_CACHE"] = _CACHE

import csv  # noqa: E402
import json  # noqa: E402

import jax  # noqa: E402
import pytest  # noqa: E402

jax.config.update("jax_compilation_cache_dir", os.environ["BAYES_DUALEVAL_CACHE"])
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


class DataDir:
    """Write JSONL, CSV or raw text files below one root directory."""

    def __init__(self, root: Path):
        self.root = root

    def path(self, rel: str) -> Path:
        p = self.root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        return p

    def jsonl(self, rel: str, rows) -> Path:
        """One JSON object per line; a ``str`` row is written verbatim."""
        lines = [r if isinstance(r, str) else json.dumps(r) for r in rows]
        p = self.path(rel)
        p.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        return p

    def csv(self, rel: str, rows, fields=None) -> Path:
        """A CSV with a header; ``fields`` defaults to the keys of the first row."""
        fields = fields or list(rows[0])
        p = self.path(rel)
        with p.open("w", newline="", encoding="utf-8") as fh:
            w = csv.DictWriter(fh, fieldnames=fields)
            w.writeheader()
            w.writerows(rows)
        return p

    def text(self, rel: str, text: str) -> Path:
        p = self.path(rel)
        p.write_text(text, encoding="utf-8")
        return p


@pytest.fixture
def tmp_data(tmp_path) -> DataDir:
    """A :class:`DataDir` rooted at a fresh temporary directory."""
    return DataDir(tmp_path)


def static_rows(models, dataset="qa", n=3, correct=None):
    """Full static grid: every model answers sample_index 0..n-1 of ``dataset``."""
    rows = []
    for mi, m in enumerate(models):
        for k in range(n):
            c = correct(mi, k) if correct else (mi + k) % 2
            rows.append({"model_label": m, "dataset": dataset, "sample_index": k, "correct": c})
    return rows


def arena_rows(models, prompts=("p0", "p1"), reward=None):
    """Full arena grid: every model answers every prompt."""
    rows = []
    for mi, m in enumerate(models):
        for pi, p in enumerate(prompts):
            r = reward(mi, pi) if reward else float(mi + 2 * pi)
            rows.append({"model_label": m, "item_id": p, "reward": r})
    return rows


def frames_dataset(static, arena):
    """A Dataset of simulated frames, static rows from source ``bench``, arena from ``arena``.

    Imported by tests (``from conftest import frames_dataset``); the loader's warnings (for
    example about the simulator's extra columns) are silenced.
    """
    import warnings

    from bayes_dualeval.data.dataset import Dataset

    static, arena = static.copy(), arena.copy()
    static["source"], arena["source"] = "bench", "arena"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Dataset.from_frames(static=static, arena=arena)


def invoke(*args):
    """Run the command line in-process; assert it raised nothing but ``SystemExit``.

    Imported by tests (``from conftest import invoke``).
    """
    from click.testing import CliRunner

    from bayes_dualeval.cli.commands import cli

    result = CliRunner().invoke(cli, [str(a) for a in args])
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result


def one_error(result, *expected):
    """Assert a command failed with exit code 1 and one ``Error:`` line holding ``expected``."""
    assert result.exit_code == 1, result.output
    lines = [ln for ln in result.output.splitlines() if ln.startswith("Error:")]
    assert len(lines) == 1, result.output
    for text in expected:
        assert text in lines[0], result.output


@pytest.fixture
def rows():
    """The row builders, for tests that need them (``rows.static``, ``rows.arena``)."""

    class _Rows:
        static = staticmethod(static_rows)
        arena = staticmethod(arena_rows)

    return _Rows


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """Drop JAX's compiled programs after a test module when they fill the memory maps.

    One pytest process compiles thousands of programs, and XLA keeps every one mapped in
    memory. Late in the suite, compiling one more crashed the interpreter inside XLA (a
    segmentation fault and an abort, three runs in a row at the same test): the process
    had run out of memory maps. ``fit`` releases them itself when crowded
    (:mod:`bayes_dualeval.inference.compiled`); tests that compile without ``fit`` are
    covered here, after each module. Where the count cannot be read (not Linux), they are
    released after every module.
    """
    yield
    from bayes_dualeval.inference.compiled import release_if_crowded

    release_if_crowded(unknown=True)


def compiled_trace(model, *args, seed=0, data=None):
    """One seeded run of ``model(*args)``, its sites evaluated in one compiled program.

    Imported by tests (``from conftest import compiled_trace``). NumPyro's ``trace`` run
    eagerly executes the model primitive by primitive, and JAX compiles each primitive
    for each new shape on its own: hundreds of small programs, 5-15 s a test. Here the
    trace runs inside ``jax.jit``.

    Parameters
    ----------
    model : callable
    *args
        The model's arguments (pytrees: ``ModelInputs``, ``ModelConfig``).
    seed : int
        Seed of ``numpyro.handlers.seed``.
    data : dict, optional
        Values substituted for sites (``numpyro.handlers.substitute``).

    Returns
    -------
    dict
        Site name to a dict with ``"value"``, ``"type"``, ``"is_observed"``, ``"scale"``
        and, for sample sites, ``"log_prob"``: the summed log probability of the value (a
        factor's log factor).
    """
    from numpyro import handlers

    facts = {}

    def run(key, args, data):
        m = handlers.seed(model, key)
        if data:
            m = handlers.substitute(m, data=data)
        tr = handlers.trace(m).get_trace(*args)
        out = {}
        for name, site in tr.items():
            if site["type"] not in ("sample", "deterministic"):
                continue
            facts[name] = {
                "type": site["type"],
                "is_observed": site.get("is_observed", False),
                "scale": site.get("scale"),
            }
            out[name] = {"value": site["value"]}
            if site["type"] == "sample":
                out[name]["log_prob"] = jax.numpy.sum(site["fn"].log_prob(site["value"]))
        return out

    values = jax.jit(run)(jax.random.PRNGKey(seed), args, data or {})
    return {name: {**facts[name], **values[name]} for name in values}
