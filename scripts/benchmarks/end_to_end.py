r"""Whole-process timings: DualEval's reference fit against ``bayes-dualeval fit``.

Each run is a separate process, started the way a user would start it, and timed from
launch to exit (wall clock), with its peak resident memory (``wait4``'s ``ru_maxrss``):

* ``reference``: ``scripts/references/dualeval_reference.py`` (DualEval's published recipe: a
  pandas pair loop, 2000 full-batch Adam steps in PyTorch; it needs ``torch`` and this package
  (its loader reads the data) in the interpreter given by ``--reference-python``, default
  this one); the ``vs reference`` ratios are against it;
* ``reference-1thread``: the same on one torch thread (``--threads 1``). Torch's two
  OpenMP threads cost more than they gain on small data: on 2026-12-05 the paper-scale fit
  took 3.3 s on one thread against 9.9-10.6 s on two, the bundled one 1.6 against 4.2 s
  (AlpacaEval 53.8 against 58.8 s). Read the ratios with that row beside them;
* ``nuts``, ``map``, ``svi``: ``bayes-dualeval fit DATA --sampler ...`` writing a complete
  run folder (tables, checks and report included), each with a cold JAX compilation
  cache of its own;
* ``nuts-warm``, ``map-warm``, ``svi-warm``: the same command again, with the cache the
  cold run of that sampler filled (what every later fit of these data costs);
* ``nuts-twin``, ``map-twin``, ``svi-twin``: the sampler on a twin of the data (the same
  panel re-graded: every 50th static label dropped, every reward moved by 5% of the
  rewards' sd; :func:`twin_data`), with the cache that sampler's cold run filled: what a
  second fit of similar data costs (shape buckets, data and starts as arguments);
* ``nutpie``: ``scripts/references/pymc_dualeval.py`` (the same model and priors written plainly in
  PyMC, sampled by nutpie, 1,000 + 1,000 iterations on 4 chains); it needs ``pymc`` and
  ``nutpie`` in the interpreter given by ``--nutpie-python`` (default: this one). Its
  posterior means of ``theta`` are compared with the NUTS run's (``theta vs nuts``: the
  largest difference in posterior sd), a check that both sample the same posterior. Like
  ``nuts`` it compiles cold: PyTensor's compiled code and numba's cache go to an empty
  folder of its own (``PYTENSOR_FLAGS=base_compiledir=...``), not to ``~/.pytensor``, where
  a filled cache cut nutpie's compilation from 22-25 s to 6 s on 2026-12-05;
* ``nutpie-warm`` (only when named in ``--runners``): nutpie again, with the folder its
  cold run filled;
* ``nutpie-lowrank`` (only when named): nutpie with its low-rank mass matrix adapted from
  draws and gradients (``pymc_dualeval.py --low-rank``), cold, in a folder of its own.

``--repeats N`` runs the runners N times, interleaved (every runner once, then again),
each repetition with empty caches of its own, and ends with a table of medians (and the
range) per data set and runner: the ratios are medians over the repetitions. Every run
uses seed 0 unless ``--vary-seed`` gives repetition ``r`` seed ``r``: with one seed the
repetitions measure the machine's noise only (a sampler draws the same chains every
time), with several they also measure how the sampler's luck varies.

Data: the bundled example (``data/``, 12 models, 300 static questions, 100 arena
prompts), DualEval's paper scale (18 models, 300 static questions, 300 arena prompts,
simulated with seed 7) and AlpacaEval (``../shared/data/real/alpaca_eval``; skipped when
absent). Run it on an otherwise idle machine. Every data set with every runner took 46
minutes on 2026-12-05 (2 cores), 24 of them nutpie at paper scale (151 leapfrog steps per
draw there)::

    python scripts/benchmarks/end_to_end.py                      # every data set, every runner
    python scripts/benchmarks/end_to_end.py --data paper --runners reference,map
    python scripts/benchmarks/end_to_end.py --data bundled --runners \\
        nuts,nuts-warm,nutpie,nutpie-warm \\
        --nutpie-python /path/to/venv-with-pymc/bin/python
    python scripts/benchmarks/end_to_end.py --reference-python /path/to/venv-with-torch/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

REPO = Path(__file__).resolve().parents[2]
REAL = REPO.parent / "shared" / "data" / "real"
RUNNERS = (
    "reference",
    "reference-1thread",
    "nuts",
    "nuts-warm",
    "nuts-twin",
    "map",
    "map-warm",
    "map-twin",
    "svi",
    "svi-warm",
    "svi-twin",
    "nutpie",
)
#: Runners taken only when named (nutpie twice at paper scale would take most of an hour).
OPTIONAL_RUNNERS = ("nutpie-warm", "nutpie-lowrank")


def paper_data(tmp: Path) -> Path:
    out = tmp / "paper"
    if not (out / "truth.json").exists():
        subprocess.run(
            [sys.executable, "-m", "bayes_dualeval", "simulate", str(out), "--models", "18",
             "--static-items", "300", "--arena-prompts", "300", "--domains", "3", "--seed", "7"],
            check=True, capture_output=True,
        )  # fmt: skip
    return out


def twin_data(data: Path, out: Path) -> Path:
    """A twin of ``data``: the same models, items and prompts, re-graded.

    Every 50th static label is dropped (where its item keeps a success and a failure) and
    every reward moved by a normal of 5% of the
    rewards' sd (seeded); other files are copied. The arena cells stay (they are not
    padded); the counts of static labels and decisive pairs change, as they would when a
    benchmark is re-run.
    """
    import shutil

    import numpy as np

    if out.exists():
        return out
    rng = np.random.default_rng(50)
    for path in sorted(p for p in data.rglob("*") if p.is_file()):
        target = out / path.relative_to(data)
        target.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix != ".jsonl":
            shutil.copyfile(path, target)
            continue
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        if rows and "reward" in rows[0]:
            sd = float(np.std([r["reward"] for r in rows]))
            for r in rows:
                r["reward"] = round(r["reward"] + float(rng.normal(0.0, 0.05 * sd)), 6)
        elif rows and "correct" in rows[0]:
            rows = _drop_labels(rows)
        target.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return out


def _drop_labels(rows: list[dict]) -> list[dict]:
    """The rows less every 50th label, where its item keeps a success and a failure.

    The loader sets aside items without both outcomes; a twin keeps every item.
    """

    def item(r):
        return r.get("dataset"), r.get("sample_index"), r.get("item_id")

    left: dict = {}
    for r in rows:
        counts = left.setdefault(item(r), [0, 0])
        counts[int(r["correct"])] += 1
    kept = []
    for k, r in enumerate(rows):
        counts = left[item(r)]
        if k % 50 == 49 and counts[int(r["correct"])] > 1:
            counts[int(r["correct"])] -= 1
            continue
        kept.append(r)
    return kept


def timed(cmd: list[str], env: dict, log: Path) -> tuple[float, float, int, str]:
    """Run ``cmd``; return wall seconds, peak RSS in MiB, exit status and its output tail."""
    with open(log, "wb") as fh:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return (
        seconds,
        usage.ru_maxrss / 1024,
        proc.returncode,
        log.read_text(errors="replace")[-2000:],
    )


def command(
    runner: str, data: Path, out: Path, nutpie_python: str, reference_python: str, seed: int = 0
) -> list[str]:
    seeded = ["--seed", str(seed)]
    if runner.startswith("reference"):
        threads = ["--threads", "1"] if runner == "reference-1thread" else []
        script = str(REPO / "scripts" / "references" / "dualeval_reference.py")
        return [reference_python, script, str(data), *threads, *seeded]
    if runner.startswith("nutpie"):
        script = str(REPO / "scripts" / "references" / "pymc_dualeval.py")
        low_rank = ["--low-rank"] if runner == "nutpie-lowrank" else []
        return [nutpie_python, script, str(data), "--json", str(out) + ".json", *low_rank, *seeded]
    sampler = runner.split("-")[0]
    return ["bayes-dualeval", "fit", str(data), "--sampler", sampler, "--out", str(out), "-q",
            *seeded]  # fmt: skip


def nutpie_verdict(out: Path, nuts_out: Path) -> str:
    """The nutpie run's convergence, and how far its ability means lie from the NUTS run's."""
    try:
        res = json.loads(Path(str(out) + ".json").read_text())
    except (OSError, ValueError):
        return "no result"
    word = "converged" if res["converged"] else "NOT converged"
    text = (
        f"{word}: R-hat {res['max_rhat']:.4f}, ESS {res['min_ess_bulk']:.0f}/"
        f"{res['min_ess_tail']:.0f}, {res['divergences']} div; compile {res['compile_s']:.0f} s,"
        f" sampling {res['sample_s']:.0f} s, {res['mean_steps']:.0f} steps per draw"
    )
    board = nuts_out / "leaderboard.csv"
    if board.exists() and res.get("theta_mean"):
        import pandas as pd

        ours = pd.read_csv(board).set_index("model")
        theirs = pd.Series(res["theta_mean"])
        gap = ((theirs - ours["theta_mean"].reindex(theirs.index)) / ours["theta_sd"]).abs()
        text += f"; theta vs nuts: max {gap.max():.2f} posterior sd"
    return text


def converged(out: Path) -> str:
    """One line on a NUTS run's convergence, read from its diagnostics.json."""
    try:
        diag = json.loads((out / "diagnostics.json").read_text())
    except (OSError, ValueError):
        return "no diagnostics"
    conv = diag.get("convergence", {})
    word = "converged" if conv.get("converged") else "NOT converged"
    nan = float("nan")
    rhat, bulk, tail = (conv.get(k, nan) for k in ("max_rhat", "min_ess_bulk", "min_ess_tail"))
    rounds = diag.get("sampler_info", {}).get("rounds")
    said = f", {rounds} round(s)" if rounds else ""
    return (
        f"{word}: R-hat {rhat:.4f}, ESS {bulk:.0f}/{tail:.0f}, {conv.get('divergences')} div"
        + said
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default="bundled,paper,alpaca")
    parser.add_argument(
        "--nutpie-python", default=sys.executable, help="an interpreter with pymc and nutpie"
    )
    parser.add_argument(
        "--reference-python",
        default=sys.executable,
        help="an interpreter with torch and this package (DualEval's reference fit)",
    )
    parser.add_argument(
        "--runners",
        default="",
        help="comma-separated runners (default: all on paper scale; NUTS skipped on AlpacaEval)",
    )
    parser.add_argument(
        "--repeats", type=int, default=1, help="interleaved repetitions (medians reported)"
    )
    parser.add_argument(
        "--vary-seed",
        action="store_true",
        help="repetition r runs every runner with seed r (default: seed 0 every time)",
    )
    args = parser.parse_args(argv)
    unknown = sorted(set(filter(None, args.runners.split(","))) - {*RUNNERS, *OPTIONAL_RUNNERS})
    if unknown:
        known = ", ".join(RUNNERS + OPTIONAL_RUNNERS)
        parser.error(f"unknown runner(s) {', '.join(unknown)}; choose from {known}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
        sets = {}
        if "bundled" in args.data:
            sets["bundled (12 x 300+100)"] = REPO / "data"
        if "paper" in args.data:
            sets["paper (18 x 300+300)"] = paper_data(tmp)
        if "alpaca" in args.data and (REAL / "alpaca_eval").exists():
            sets["AlpacaEval (56 x 805)"] = REAL / "alpaca_eval"
        for rep in range(args.repeats):
            for name, data in sets.items():
                rows += run_set(name, data, rep, args, env, tmp)
    print_tables(rows, args.repeats)
    return 0


def run_set(name: str, data: Path, rep: int, args, env: dict, tmp: Path) -> list:
    """Every runner once on one data set (repetition ``rep``, with caches of its own)."""
    rows, base = [], None
    short = name.split()[0]
    runners = args.runners or ",".join(
        r
        for r in RUNNERS
        if not (r.startswith(("nuts", "nutpie")) and name.startswith("AlpacaEval"))
    )
    for runner in runners.split(","):
        out = tmp / f"{short}-{runner}-{rep}"
        source = data
        if runner.endswith("-twin"):
            source = twin_data(data, tmp / f"{short}-twin-data")
        seed = rep if args.vary_seed else 0
        cmd = command(runner, source, out, args.nutpie_python, args.reference_python, seed)
        # each sampler starts from an empty compile cache of its own (the posterior and
        # checks programs would otherwise carry over from one to the next); the warm runs
        # and the twins read the one their cold run filled
        cold = runner.removesuffix("-warm").removesuffix("-twin")
        cache = tmp / f"jax-cache-{short}-{cold}-{rep}"
        run_env = dict(env, BAYES_DUALEVAL_CACHE=str(cache))
        if runner.startswith("nutpie"):  # PyTensor's and numba's compiled code
            flags = [env.get("PYTENSOR_FLAGS", ""), f"base_compiledir={cache}"]
            run_env["PYTENSOR_FLAGS"] = ",".join(filter(None, flags))
        seconds, peak, code, tail = timed(cmd, run_env, tmp / f"{out.name}.log")
        if runner == "reference":
            base = seconds if code == 0 else None
        ratio = f"{seconds / base:.2f}x" if base else "-"
        verdict = converged(out) if runner.startswith("nuts") else ""
        if runner.startswith("nutpie"):
            verdict = nutpie_verdict(out, tmp / f"{short}-nuts-{rep}")
        rows.append((name, runner, seconds, peak, code, ratio, verdict))
        print(f"{name:24s} {runner:17s} {seconds:7.1f} s  {peak:7.0f} MiB  exit {code}"
              f"  {ratio} {verdict}", flush=True)  # fmt: skip
        if code != 0:
            print(tail, file=sys.stderr)
    return rows


def print_tables(rows: list, repeats: int) -> None:
    """Every run; with repetitions, then each runner's median seconds and median ratios."""
    seconds = {}  # (data, runner) -> the wall times of its runs that succeeded
    for name, runner, wall, _, code, _, _ in rows:
        if code == 0:
            seconds.setdefault((name, runner), []).append(wall)

    def against(name: str, wall: float, ref: str) -> str:
        other = seconds.get((name, ref))
        return f"{wall / median(other):.2f}x" if other else "-"

    print("\n| data | run | wall (s) | peak RSS (MiB) | vs reference | vs nutpie | convergence |")
    print("|---|---|---|---|---|---|---|")
    for name, runner, wall, peak, code, ratio, verdict in rows:
        status = "" if code == 0 else f" (exit {code})"
        print(
            f"| {name} | {runner}{status} | {wall:.1f} | {peak:.0f} | {ratio} "
            f"| {against(name, wall, 'nutpie')} | {verdict} |"
        )
    if repeats < 2:
        return
    print(f"\nMedians of {repeats} interleaved repetitions (failed runs left out)\n")
    print(
        "| data | run | runs | median wall (s) | range | vs reference | vs nutpie "
        "| vs nutpie-lowrank |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for (name, runner), walls in seconds.items():
        mid = median(walls)
        cells = " | ".join(
            against(name, mid, ref) for ref in ("reference", "nutpie", "nutpie-lowrank")
        )
        print(
            f"| {name} | {runner} | {len(walls)} | {mid:.1f} | {min(walls):.1f}-{max(walls):.1f} "
            f"| {cells} |"
        )


if __name__ == "__main__":
    raise SystemExit(main())
