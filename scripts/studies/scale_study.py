"""SVI at scale, whole processes: time, peak memory, ranking and interval coverage.

Simulates data with known abilities, runs ``bayes-dualeval fit --sampler svi`` on it as a
user would (a separate process under ``/usr/bin/time -v`` when that exists, for the peak
resident memory), and compares the written ``posterior.nc`` with the truth:

* ``static``: a wide 0/1 matrix (``--models`` x ``--questions``, half the cells empty), a
  2PL truth with ``theta ~ N(0, 1)``, ``b ~ N(0, 1)``, ``log a ~ N(0, 0.3)``;
* ``arena``: ``bayes-dualeval simulate`` with ``--arena-models`` x ``--prompts`` rewards and
  no static items (every model answers every prompt: ``models * (models - 1) / 2`` pairs per
  prompt before distillation).

Columns: wall seconds and peak memory of the whole ``fit`` process, the SVI steps and the
terms per step (0: every term), Spearman's rho of the posterior mean abilities against the
truth, the spread (slope of the fitted on the centred true abilities), and the share of
models whose central 90% interval covers the centred truth, as fitted and on a matched
scale (the interval divided by the slope). Run it on an idle machine.

Usage::

    python scripts/studies/scale_study.py                          # both, the sizes of issue 26
    python scripts/studies/scale_study.py --only static --models 200 --questions 5000 \
        --subsample none 65536                             # full batch against batches
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd


def write_static(folder: Path, models: int, questions: int, seed: int) -> dict:
    """A wide 2PL matrix with half the cells empty; returns the true abilities by model."""
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=models)
    b = rng.normal(size=questions)
    a = np.exp(rng.normal(0.0, 0.3, size=questions))
    path = folder / "bench" / "matrix.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    names = [f"model-{i:05d}" for i in range(models)]
    with path.open("w") as fh:
        fh.write("model_label," + ",".join(f"q{k}" for k in range(questions)) + "\n")
        for i, name in enumerate(names):  # one row at a time: the matrix is never whole
            p = 1.0 / (1.0 + np.exp(-a * (theta[i] - b)))
            y = np.where(rng.random(questions) < p, "1", "0")
            y[rng.random(questions) < 0.5] = ""
            fh.write(name + "," + ",".join(y) + "\n")
    return dict(zip(names, theta.tolist(), strict=True))


def write_arena(folder: Path, models: int, prompts: int, seed: int) -> dict:
    """``bayes-dualeval simulate`` rewards only; returns the true abilities by model."""
    subprocess.run(
        [_cli(), "simulate", str(folder), "--models", str(models), "--static-items", "0",
         "--arena-prompts", str(prompts), "--seed", str(seed)],
        check=True, capture_output=True,
    )  # fmt: skip
    return json.loads((folder / "truth.json").read_text())["theta"]


def run_fit(data: Path, out: Path, subsample: str) -> dict:
    """One ``fit --sampler svi`` process: wall seconds, peak GB (or None), and its log."""
    command = [_cli(), "fit", str(data), "--sampler", "svi", "--subsample", subsample,
               "--out", str(out)]  # fmt: skip
    timer = shutil.which("time") or ("/usr/bin/time" if Path("/usr/bin/time").exists() else None)
    if timer:
        command = [timer, "-v", *command]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode:
        sys.exit(f"fit failed ({done.returncode}):\n{done.stderr[-3000:]}")
    peak = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    return {"wall": wall, "peak_gb": int(peak.group(1)) / 1024**2 if peak else None}


def score(out: Path, truth: dict) -> dict:
    """Ranking and 90% interval coverage of the run's abilities against the truth."""
    import arviz as az

    idata = az.from_netcdf(out / "posterior.nc")
    draws = idata.posterior["theta_centred"]
    models = [str(m) for m in draws["model"].values]
    draws = draws.values.reshape(-1, len(models))
    true = np.array([truth[m] for m in models])
    true = true - true.mean()
    mean = draws.mean(axis=0)
    lo, hi = np.quantile(draws, [0.05, 0.95], axis=0)
    slope = float(np.polyfit(true, mean, 1)[0])
    info = json.loads((out / "diagnostics.json").read_text())["sampler_info"]
    return {
        "steps": info["steps"],
        "batch": f"{info.get('static_batch', 0)} / {info.get('pair_batch', 0)}",
        "rho": float(pd.Series(mean).corr(pd.Series(true), method="spearman")),
        "spread": slope,
        "cover90": float(np.mean((true >= lo) & (true <= hi))),
        "cover90_matched": float(np.mean((true >= lo / slope) & (true <= hi / slope))),
    }


def _cli() -> str:
    found = shutil.which("bayes-dualeval")
    return found or str(Path(sys.executable).with_name("bayes-dualeval"))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", choices=["static", "arena"], action="append")
    parser.add_argument("--models", type=int, default=1000)
    parser.add_argument("--questions", type=int, default=20000)
    parser.add_argument("--arena-models", type=int, default=200)
    parser.add_argument("--prompts", type=int, default=805)
    parser.add_argument("--subsample", nargs="+", default=["auto"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", type=Path, help="keep data and runs in this folder")
    args = parser.parse_args(argv)
    root = args.keep or Path(tempfile.mkdtemp(prefix="scale-study-"))
    rows = []
    try:
        for kind in args.only or ["static", "arena"]:
            data = root / f"{kind}-data"
            if kind == "static":
                truth = write_static(data, args.models, args.questions, args.seed)
                shape = f"static {args.models} x {args.questions:,} (half empty)"
            else:
                truth = write_arena(data, args.arena_models, args.prompts, args.seed)
                shape = f"arena {args.arena_models} x {args.prompts}"
            for subsample in args.subsample:
                out = root / f"{kind}-run-{subsample}"
                timing = run_fit(data, out, subsample)
                rows.append({"data": shape, "subsample": subsample, **timing, **score(out, truth)})
                print(pd.DataFrame(rows[-1:]).to_string(index=False), flush=True)
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    print()
    print(pd.DataFrame(rows).to_string(index=False, float_format="%.3f"))


if __name__ == "__main__":
    main()
