"""Where the test suite's compilation goes: every XLA compilation, by program, file and test.

The default suite is compile-bound on a clean clone (CI): each fit compiles its sampler's
programs, and each test that evaluates the model eagerly compiles every primitive on its
own. This runs the README's test command with a pytest plugin (this module, loaded with
``-p suite_compilations``) that turns on JAX's compile log and records, per pytest worker,
every compilation with its test, its program's name, its seconds and the shapes it was
compiled for, then prints where the seconds went::

    python scripts/tools/suite_compilations.py                     # the whole suite, cold
    python scripts/tools/suite_compilations.py -- tests/test_map.py  # pytest's arguments after --
    python scripts/tools/suite_compilations.py --warm              # with the suite's own cache
    python scripts/tools/suite_compilations.py --read DIR          # the tables of an earlier run

Cold (``BAYES_DUALEVAL_TEST_CACHE=off``, as CI runs it) unless ``--warm``. The records stay
in ``--out`` (a fresh temporary folder by default; its path is printed). The seconds are
XLA's backend compilation as JAX logs it ("Finished XLA compilation of NAME in S sec",
jax 0.10), not tracing or lowering; the log also slows the suite by a few per cent, so time
the suite without this script.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from bayes_dualeval.validation.compilations import read, report

ROOT = Path(__file__).resolve().parents[2]
#: Where the plugin writes, set by :func:`main` for the pytest processes it starts.
ENV = "SUITE_COMPILATIONS_DIR"

_FINISHED = re.compile(r"Finished XLA compilation of (.*) in ([0-9.e+-]+) sec")
_SHAPES = re.compile(r"Compiling (\S+) with global shapes and types (.*?)\. Argument", re.S)
_LOGGERS = ("jax._src.interpreters.pxla", "jax._src.dispatch", "jax._src.compiler")


class _Recorder(logging.Handler):
    """Writes one JSON line per compilation JAX logs, with the test running at the time."""

    def __init__(self, path: Path):
        super().__init__(logging.DEBUG)
        self.out = path.open("a", encoding="utf-8")
        self.test = None
        self.shapes = {}

    def emit(self, record):
        message = record.getMessage()
        seen = _SHAPES.match(message)
        if seen:
            self.shapes[seen.group(1)] = seen.group(2)[:400]
            return
        done = _FINISHED.match(message)
        if done:
            name = done.group(1)
            row = {
                "test": self.test,
                "program": name,
                "seconds": float(done.group(2)),
                "shapes": self.shapes.pop(name, ""),
            }
            self.out.write(json.dumps(row) + "\n")
            self.out.flush()


_RECORDER: _Recorder | None = None


def pytest_configure(config):
    """Plugin hook: record compilations when :data:`ENV` names a folder."""
    global _RECORDER
    where = os.environ.get(ENV)
    if not where:
        return
    import jax

    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    _RECORDER = _Recorder(Path(where) / f"compilations-{worker}.jsonl")
    jax.config.update("jax_log_compiles", True)
    for name in _LOGGERS:
        logger = logging.getLogger(name)
        logger.addHandler(_RECORDER)
        logger.setLevel(logging.DEBUG)
        logger.propagate = False  # the log is for the recorder, not the terminal


def pytest_runtest_logstart(nodeid, location):
    """Plugin hook: the test whose compilations follow."""
    if _RECORDER is not None:
        _RECORDER.test = nodeid


def pytest_unconfigure(config):
    """Plugin hook: close the record."""
    if _RECORDER is not None:
        _RECORDER.out.close()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="folder for the records (default: a new one)")
    parser.add_argument("--warm", action="store_true", help="use the suite's own compile cache")
    parser.add_argument("--read", type=Path, help="only print the tables of an earlier run")
    parser.add_argument("--top", type=int, default=20, help="rows per table")
    parser.add_argument("pytest_args", nargs="*", help="pytest's arguments (after --)")
    args = parser.parse_args(argv)
    if args.read is not None:
        print(report(read(args.read), args.top))
        return 0
    out = args.out or Path(tempfile.mkdtemp(prefix="suite-compilations-"))
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env[ENV] = str(out)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT / "scripts" / "tools"), *filter(None, [env.get("PYTHONPATH")])]
    )
    if not args.warm:
        env["BAYES_DUALEVAL_TEST_CACHE"] = "off"
    command = [sys.executable, "-m", "pytest", "-q", "-p", "suite_compilations"]
    status = subprocess.call([*command, *args.pytest_args], cwd=ROOT, env=env)
    print(f"\nrecords in {out} (pytest exit status {status})\n")
    print(report(read(out), args.top))
    return status


if __name__ == "__main__":
    sys.exit(main())
