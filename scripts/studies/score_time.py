"""Time the whole `bayes-dualeval score` process against the bank's own NUTS fit.

The issue's target: scoring new models takes at most a tenth of fitting the bank. One
run, same machine, nothing else running: the bank is fitted in this process (NUTS, 4
chains, the timing of ``fit``), then ``bayes-dualeval score`` runs as a user would run
it, a fresh process (imports, bank read, grid posterior, tables, report), twice: with an
empty compile cache (cold) and again (warm, its kernels cached).

Case: ``joint`` of scripts/studies/score_study.py (20 bank + 40 new models, 300 questions + 100
prompts, seed 1); ``--case static`` (30 + 40, 200 questions).

Usage::

    python scripts/studies/score_time.py --case joint
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from measure_common import fit_quietly, progress

CASES = {"joint": (20, 40, 300, 100), "static": (30, 40, 200, 0)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--case", default="joint", choices=sorted(CASES))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--draws", type=int, default=500, help="NUTS warm-up and draws")
    parser.add_argument("--keep", type=Path, help="keep the bank and the data in this folder")
    args = parser.parse_args()

    from bayes_dualeval.inference.device import configure

    configure("cpu", 4, compile_cache=False)  # the bank's fit compiles cold, as a first fit

    from bayes_dualeval.inference.settings import SamplerSettings
    from bayes_dualeval.model.simulate import simulate, write
    from bayes_dualeval.runs.fit import write_run

    n_bank, n_new, n_static, n_arena = CASES[args.case]
    root = args.keep or Path(tempfile.mkdtemp(prefix="score-time-"))
    root.mkdir(parents=True, exist_ok=True)
    static, arena, _ = simulate(
        n_models=n_bank + n_new, n_static=n_static, n_arena=n_arena, seed=args.seed
    )
    names = sorted(static["model_label"].unique())
    rng = np.random.default_rng(args.seed)
    new = sorted(rng.choice(names, n_new, replace=False))
    for name, models in (("bank_data", [m for m in names if m not in new]), ("new_data", new)):
        part = arena[arena["model_label"].isin(models)] if len(arena) else arena
        write(root / name, static[static["model_label"].isin(models)], part, {})
    settings = SamplerSettings(
        sampler="nuts", chains=4, warmup=args.draws, draws=args.draws, seed=args.seed
    )
    start = time.perf_counter()
    bank = fit_quietly(root / "bank_data", settings)
    fit_seconds = time.perf_counter() - start
    write_run(bank, root / "bank")
    progress(f"bank fitted in {fit_seconds:.1f} s (converged: {bank.converged})")
    env = {**os.environ, "BAYES_DUALEVAL_CACHE": str(root / "cache")}
    command = [
        sys.executable, "-c", "from bayes_dualeval.cli.commands import main; main()",
        "score", str(root / "new_data"), "--bank", str(root / "bank"),
    ]  # fmt: skip
    for label in ("cold", "warm"):
        start = time.perf_counter()
        subprocess.run(
            command + ["--out", str(root / f"scored-{label}")], check=True, env=env,
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        seconds = time.perf_counter() - start
        print(
            f"{args.case}: score process {label} {seconds:.1f} s, bank fit {fit_seconds:.1f} s, "
            f"ratio {seconds / fit_seconds:.3f}"
        )
    if args.keep is None:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
