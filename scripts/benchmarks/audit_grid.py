"""The model x benchmark audit's grid: its precision against a dense grid, and its time.

For each saved run folder (``bayes-dualeval fit ... --out RUN``):

* **precision**: ``benchmark_audit`` as the package runs it, against the same draws on a
  refined grid of ``--reference-points`` points per model and draw; prints the largest
  and median absolute differences of the p-values and of the expected accuracies;
* **time**: the audit in a fresh process (its first call, as in a fit), ``--repeats``
  times; with ``--code DIR`` (another copy of the package, e.g. ``git worktree add DIR
  REV``) that copy is timed too, interleaved, and the ratio of medians printed.

Session 64's figures (docs/performance.md) came from this procedure::

    python scripts/benchmarks/audit_grid.py RUN_BUNDLED RUN_20x3000 --code OLD --repeats 3
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import subprocess
import sys
from pathlib import Path

TIMED = """
import sys, time, importlib
sys.path.insert(0, {code!r})
import bayes_dualeval as bd
assert bd.__file__.startswith({code!r}), bd.__file__
audit = importlib.import_module("bayes_dualeval.checks.benchmark_audit")
run = bd.open({run!r})
start = time.perf_counter()
audit.benchmark_audit(run.idata, run.dataset)
print(time.perf_counter() - start)
"""


def _time(code: str, run: str) -> float:
    out = subprocess.run(
        [sys.executable, "-c", TIMED.format(code=code, run=run)],
        capture_output=True, text=True, check=True, cwd=Path(run).parent,
    )  # fmt: skip
    return float(out.stdout.strip().splitlines()[-1])


def _precision(run: str, points: int) -> str:
    import bayes_dualeval as bd

    audit = importlib.import_module("bayes_dualeval.checks.benchmark_audit")
    grid = importlib.import_module("bayes_dualeval.checks.ability_grid")
    result = bd.open(run)
    keys = ["model", "kind", "source", "dataset", "domain"]

    def table():
        out = audit.benchmark_audit(result.idata, result.dataset)
        return out.sort_values(keys).reset_index(drop=True)

    mine = table()
    limits = (audit.GRID, audit.MAX_DRAWS, audit.MAX_ELEMENTS, audit.MOST_ELEMENTS)
    saved = (grid.MOST, grid.FEWEST, grid.STEP, *limits)
    n_cells = len(result.dataset.static_y) + len(result.dataset.arena_z)
    model = audit.DualEvalModel.from_idata(result.idata)
    kept = len(audit._draws(result.idata, model, n_cells * audit.GRID)["theta"])
    try:  # the same draws, each model's grid with ``points`` points
        grid.MOST = grid.FEWEST = points
        grid.STEP = 1e-6
        audit.GRID = grid.COARSE + points
        audit.MAX_DRAWS, audit.MAX_ELEMENTS, audit.MOST_ELEMENTS = kept, 10**15, 10**15
        reference = table()
    finally:
        grid.MOST, grid.FEWEST, grid.STEP = saved[:3]
        audit.GRID, audit.MAX_DRAWS, audit.MAX_ELEMENTS, audit.MOST_ELEMENTS = saved[3:]
    dp = (mine["p_value"] - reference["p_value"]).abs()
    de = (mine["expected"] - reference["expected"]).abs()
    return (
        f"{len(mine)} blocks, {kept} draws: p-value max {dp.max():.2g} "
        f"(median {dp.median():.2g}), expected max {de.max():.2g}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="saved run folders")
    parser.add_argument("--reference-points", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--code", default=None, help="another copy of the package to time")
    parser.add_argument("--no-precision", action="store_true")
    args = parser.parse_args()
    here = str(Path(__file__).resolve().parents[2])
    for run in map(str, (Path(r).resolve() for r in args.runs)):
        if not args.no_precision:
            print(f"{run}: {_precision(run, args.reference_points)}")
        codes = {"this": here} | ({"other": str(Path(args.code).resolve())} if args.code else {})
        times = {name: [] for name in codes}
        for _ in range(args.repeats):
            for name, code in codes.items():
                times[name].append(_time(code, run))
        line = ", ".join(
            f"{name} {statistics.median(t):.2f} s ({' '.join(f'{x:.2f}' for x in t)})"
            for name, t in times.items()
        )
        if args.code:
            ratio = statistics.median(times["this"]) / statistics.median(times["other"])
            line += f"; ratio {ratio:.2f}x"
        print(f"{run}: audit time, fresh process: {line}")


if __name__ == "__main__":
    main()
