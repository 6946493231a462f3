"""Benchmark: NUTS outside ``pmap``, initialised eagerly and in one compiled program.

The compiled one is :class:`~bayes_dualeval.inference.nuts.CompiledInitNUTS`. A single
chain (``--chains 1``) and chains vectorised on one device (several chains on one GPU; the
library on a CPU with one device) initialise outside any compiled program. Each case is
run with NumPyro's ``NUTS`` kernel (the baseline) and with the package's, in the same
process, with JAX's in-memory caches cleared before every run so neither inherits the
other's programs. Prints wall time, programs lowered, XLA compile time and the ratio to
the baseline, then (in a fresh process with four host devices, as the command line runs)
the four chains in parallel. Run it on an otherwise idle machine::

    python scripts/benchmarks/nuts_init_benchmark.py                # bundled data/, 100 + 100
    python scripts/benchmarks/nuts_init_benchmark.py --data DIR --warmup 300 --draws 300
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("BAYES_DUALEVAL_CACHE", "off")  # no persistent compile cache

import jax  # noqa: E402
from numpyro.infer import NUTS  # noqa: E402

from bayes_dualeval import load  # noqa: E402
from bayes_dualeval.core.errors import PerformanceWarning  # noqa: E402
from bayes_dualeval.inference import nuts  # noqa: E402
from bayes_dualeval.inference.settings import SamplerSettings  # noqa: E402
from bayes_dualeval.model.config import load_spec  # noqa: E402
from bayes_dualeval.model.inputs import build_inputs  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def timed_fit(kernel, inputs, config, settings) -> tuple[float, int, float]:
    """Wall seconds, programs lowered and XLA compile seconds of one ``run_nuts``."""
    lowered, compiled = [], []

    def listen(event, duration, **kwargs):
        if event == "/jax/core/compile/jaxpr_to_mlir_module_duration":
            lowered.append(duration)
        elif event == "/jax/core/compile/backend_compile_duration":
            compiled.append(duration)

    jax.clear_caches()
    saved = nuts.CompiledInitNUTS
    nuts.CompiledInitNUTS = kernel
    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        start = time.perf_counter()
        draws = nuts.run_nuts(inputs, config, settings)
        jax.block_until_ready(draws.samples)
        wall = time.perf_counter() - start
    finally:
        nuts.CompiledInitNUTS = saved
        jax.monitoring.unregister_event_duration_listener(listen)
    return wall, len(lowered), sum(compiled)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(ROOT / "data"))
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--draws", type=int, default=100)
    parser.add_argument("--parallel-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    warnings.simplefilter("ignore", PerformanceWarning)  # vectorised on purpose
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dataset = load(args.data)
    config = load_spec("dualeval-2pl")
    inputs, _ = build_inputs(dataset, config, centred="auto")
    if args.parallel_only:  # the child below: four host devices
        settings = SamplerSettings(
            chains=4, warmup=args.warmup, draws=args.draws, seed=1, extend=0
        )
        wall, programs, compile_s = timed_fit(nuts.CompiledInitNUTS, inputs, config, settings)
        label, name = "4 chains, parallel", "CompiledInitNUTS"
        print(f"{label:<24}{name:<18}{wall:>8.1f}{programs:>10}{compile_s:>11.1f}{'-':>7}")
        return
    print(f"data {args.data}; {args.warmup} + {args.draws} iterations; devices: {jax.devices()}")
    print(f"{'case':<24}{'kernel':<18}{'wall s':>8}{'programs':>10}{'compile s':>11}{'ratio':>7}")
    for label, chains in (("1 chain", 1), ("4 chains, vectorised", 4)):
        settings = SamplerSettings(
            chains=chains, warmup=args.warmup, draws=args.draws, seed=1, extend=0
        )
        base = None
        for name, kernel in (("NumPyro NUTS", NUTS), ("CompiledInitNUTS", nuts.CompiledInitNUTS)):
            wall, programs, compile_s = timed_fit(kernel, inputs, config, settings)
            base = base or wall
            print(
                f"{label:<24}{name:<18}{wall:>8.1f}{programs:>10}{compile_s:>11.1f}"
                f"{wall / base:>7.2f}"
            )
    # what the command line runs: four host devices, which must be set before JAX starts,
    # so in a fresh process (its ratio column is empty: another process)
    flags = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"
    subprocess.run(
        [
            sys.executable,
            __file__,
            "--parallel-only",
            "--data",
            args.data,
            "--warmup",
            str(args.warmup),
            "--draws",
            str(args.draws),
        ],
        env={**os.environ, "XLA_FLAGS": flags.strip()},
        check=True,
    )


if __name__ == "__main__":
    main()
