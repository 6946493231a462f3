"""Fit the real public evaluation data in ../shared/data/real/ as a user would.

Runs ``bayes-dualeval fit`` on each dataset (skipping those that are absent) and prints,
per run: the sampler, wall time, convergence figures and the top of the leaderboard.
HELM AIR-Bench ships the same signal as static and arena files: they are fitted apart
(``--mode static`` on static.jsonl, ``--mode arena`` on arena.jsonl), never jointly.

Usage::

    python scripts/tools/real_data.py [--root ../shared/data/real] [--sampler nuts] \
        [--out runs/real]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

CASES = [
    ("mtbench", ["mtbench"], []),
    ("helm-static", ["helm_airbench/static.jsonl"], ["--mode", "static"]),
    ("helm-arena", ["helm_airbench/arena.jsonl"], ["--mode", "arena"]),
    ("alpaca_eval", ["alpaca_eval"], []),
]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--root", default=str(Path(__file__).resolve().parents[3] / "shared" / "data" / "real")
    )
    parser.add_argument("--sampler", default="nuts", choices=["nuts", "svi", "map"])
    parser.add_argument("--out", default="runs/real")
    parser.add_argument("--only", default=None, help="comma-separated case names")
    parser.add_argument("extra", nargs="*", help="further fit options, after --")
    args = parser.parse_args(argv)
    root = Path(args.root)
    if not root.is_dir():
        print(f"{root} not found: nothing to do", file=sys.stderr)
        return 0
    wanted = set(args.only.split(",")) if args.only else None
    for name, parts, options in CASES:
        if wanted and name not in wanted:
            continue
        paths = [root / p for p in parts]
        if not all(p.exists() for p in paths):
            print(f"skip {name}: {paths} absent", file=sys.stderr)
            continue
        out = Path(args.out) / f"{name}-{args.sampler}-{time.strftime('%H%M%S')}"
        cmd = [
            "bayes-dualeval",
            "fit",
            *map(str, paths),
            "--sampler",
            args.sampler,
            "--out",
            str(out),
            "-q",
            *options,
            *args.extra,
        ]
        start = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - start
        print(f"\n== {name} ({args.sampler}): exit {proc.returncode}, {wall:.0f}s wall")
        if proc.returncode:
            print(proc.stderr[-2000:])
            continue
        diag = json.loads((out / "diagnostics.json").read_text())
        t = diag["timings"]
        print(
            f"data {t.get('data', 0):.1f}s compile {t['compile']:.1f}s sampling "
            f"{t['sampling']:.1f}s | max R-hat {diag['max_rhat']} min ESS bulk "
            f"{diag['min_ess_bulk']} divergences {diag['divergences']}"
        )
        for problem in diag["convergence"]["problems"]:
            print("  problem:", problem)
        board = pd.read_csv(out / "leaderboard.csv")
        cols = ["rank", "model", "theta_mean", "theta_lo", "theta_hi", "rank_lo", "rank_hi"]
        print(board[cols].head(8).to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
