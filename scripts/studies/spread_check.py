"""How well does the centring pilot read the spread of ``log a``? Simulations and real sets.

``bayes_dualeval.model.pilot.spread_log_a`` estimates each item group's spread of
discriminations before sampling, to decide which items' ``log a`` NUTS samples centred.
This prints its estimate on simulated static matrices of known spread (``simulate(...,
log_a_sd=s)``; several shapes and seeds) and on the shared real sets, with the share of
``log a`` it centres and the seconds it took. Where the group is too small for an estimate
(fewer than ``SPREAD_MIN_ITEMS`` items or ``SPREAD_MIN_MODELS`` models) the prior's median
stands, and the row says so.

Usage::

    python scripts/studies/spread_check.py [--seeds 3]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.data.load import load
from bayes_dualeval.model import pilot
from bayes_dualeval.model.simulate import simulate

REAL = Path(__file__).resolve().parents[3] / "shared" / "data" / "real"
#: (models, static questions, true spread of log a)
DESIGNS = [
    (12, 300, 0.3),
    (18, 300, 0.3),
    (22, 2854, 0.3),
    (22, 2854, 0.6),
    (40, 1000, 0.5),
    (80, 1000, 0.7),
    (153, 1140, 0.7),
]
REAL_SETS = ["chembench", "bigcodebench", "helm_airbench/static.jsonl"]


def row(ds: Dataset) -> tuple[str, float, float]:
    start = time.perf_counter()
    spread = pilot.spread_log_a(ds)
    seconds = time.perf_counter() - start
    static = np.asarray(ds.item_kind == "static")
    value = float(np.max(spread[static])) if static.any() else pilot.PRIOR_SD_LOG_A
    read = f"{value:.3f}" if value > pilot.PRIOR_SD_LOG_A else "prior (0.3)"
    centred = float(pilot.centring(ds, True)[1][static].mean())
    return read, centred, seconds


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args(argv)
    print("| data | true spread | seed | read | log a centred | seconds |")
    print("|---|---|---|---|---|---|")
    for models, questions, sd in DESIGNS:
        for seed in range(args.seeds):
            static, _, _ = simulate(models, questions, 0, log_a_sd=sd, seed=seed)
            read, centred, seconds = row(Dataset.from_frames(static=static))
            print(
                f"| simulated {models} x {questions} | {sd} | {seed} | {read} | "
                f"{centred:.2f} | {seconds:.2f} |",
                flush=True,
            )
    for name in REAL_SETS:
        if not (REAL / name).exists():
            print(f"| {name} | - | - | absent | - | - |")
            continue
        read, centred, seconds = row(load(REAL / name))
        print(f"| {name} | unknown | - | {read} | {centred:.2f} | {seconds:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
