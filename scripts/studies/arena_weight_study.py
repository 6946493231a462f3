"""The arena pairs' weight, fixed against calibrated from the data, on simulated rewards.

Each repetition simulates 8 models, 40 static questions and 30 arena prompts with known
abilities (``bayes_dualeval.model.simulate``, rewards ``5 + 4 p_iq + N(0, 0.5)``, the
scenario of docs/validation.md 1.1), turns the rewards into one of three shapes, and fits
arena-only and joint data through ``fit`` (the path users run) twice: with the weight
``lambda_arena = 1`` (``arena_weight = "fixed"``, today's default) and with the sandwich
weight (``arena_weight = "calibrated"``). Reward shapes:

* ``gaussian``: the simulated rewards;
* ``three``: cut at their tertiles into 0, 0.5 and 1 (HELM-like 3-valued scores);
* ``skewed``: ``sigmoid(2 (r - q80))``, win probabilities piled near zero (AlpacaEval-like).

Printed per cell: theta 90% (and 50%) coverage of the centred abilities, the pairwise-order
ECE (5 bins, as in ``coverage_study.py``), the mean calibrated factor, the fits and seeds,
and the fits failing the convergence check (counted, not dropped).

Usage::

    python scripts/studies/arena_weight_study.py --reps 4 --first-rep 100 --sampler nuts
    python scripts/studies/arena_weight_study.py --reps 3 --sampler map   # factors only
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from collections import defaultdict

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

SHAPES = ("gaussian", "three", "skewed")
KINDS = ("arena", "joint")
WEIGHTS = ("fixed", "calibrated")
SIZES = {"models": 8, "static": 40, "arena": 30}


def shaped(reward: np.ndarray, shape: str) -> np.ndarray:
    """The simulated rewards in one of :data:`SHAPES`."""
    if shape == "three":
        cuts = np.quantile(reward, [1 / 3, 2 / 3])
        return np.digitize(reward, cuts) / 2.0
    if shape == "skewed":
        return 1.0 / (1.0 + np.exp(-2.0 * (reward - np.quantile(reward, 0.8))))
    return reward


def simulate_case(kind: str, shape: str, rep: int):
    """One dataset (arena-only or joint), its truth."""
    from bayes_dualeval.data.dataset import Dataset
    from bayes_dualeval.model.simulate import simulate

    static, arena, truth = simulate(
        SIZES["models"], SIZES["static"], SIZES["arena"], seed=20_000 + rep,
        prompt_offset_sd=0.0, reward_noise=0.5,
    )  # fmt: skip
    arena = arena.assign(reward=shaped(arena["reward"].to_numpy(), shape))
    static["source"], arena["source"] = "bench", "arena"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = Dataset.from_frames(static=static if kind == "joint" else None, arena=arena)
    return ds, truth


def run(args) -> dict:
    """Fit every cell and seed; the pooled metrics per cell."""
    import numpyro

    numpyro.set_host_device_count(args.chains)
    from coverage_study import metrics

    from bayes_dualeval.inference.settings import SamplerSettings
    from bayes_dualeval.model.config import ModelConfig
    from bayes_dualeval.runs.fit import fit

    results = defaultdict(lambda: {"parts": [], "failed": 0, "fits": 0, "factors": []})
    for rep in range(args.first_rep, args.first_rep + args.reps):
        for kind in args.kinds.split(","):
            for shape in args.shapes.split(","):
                ds, truth = simulate_case(kind, shape, rep)
                for weight in WEIGHTS:
                    config = ModelConfig(mode="arena" if kind == "arena" else "both",
                                         arena_weight=weight)  # fmt: skip
                    settings = SamplerSettings(
                        sampler=args.sampler, chains=args.chains, warmup=args.warmup,
                        draws=args.draws, seed=rep,
                    )  # fmt: skip
                    start = time.perf_counter()
                    result = fit(ds, config, settings)
                    cell = results[f"{kind}/{shape}/{weight}"]
                    cell["fits"] += 1
                    cell["failed"] += not result.converged
                    record = result.diagnostics.get("arena_weight") or {}
                    cell["factors"].append(record.get("factor", 1.0))
                    part = {}
                    if args.sampler != "map":
                        post = result.idata.posterior
                        samples = {k: post[k].values for k in post.data_vars}
                        part = metrics(samples, result.dataset, truth)
                        cell["parts"].append(part)
                    if args.log:  # one line per fit, written as it ends
                        with open(args.log, "a", encoding="utf-8") as fh:
                            line = {
                                "cell": f"{kind}/{shape}/{weight}",
                                "rep": rep,
                                "converged": bool(result.converged),
                                "factor": record.get("factor", 1.0),
                                "metrics": part,
                            }
                            fh.write(json.dumps(line) + "\n")  # fmt: skip
                    print(
                        f"rep {rep} {kind}/{shape}/{weight}: factor "
                        f"{record.get('factor', 1.0):.3f}, {time.perf_counter() - start:.0f}s, "
                        f"{'converged' if result.converged else 'NOT converged'}",
                        file=sys.stderr, flush=True,
                    )  # fmt: skip
    return results


def combine(paths: list[str]) -> dict:
    """The per-fit lines of ``--log`` files, pooled per cell as :func:`run` pools them."""
    results = defaultdict(lambda: {"parts": [], "failed": 0, "fits": 0, "factors": []})
    for path in paths:
        with open(path, encoding="utf-8") as fh:
            for text in fh:
                line = json.loads(text)
                cell = results[line["cell"]]
                cell["fits"] += 1
                cell["failed"] += not line["converged"]
                cell["factors"].append(line["factor"])
                if line["metrics"]:
                    cell["parts"].append(line["metrics"])
    return results


def table(results: dict) -> list[dict]:
    """One row per cell: coverage, ECE, factor, fits and failures."""
    rows = []
    for name, cell in results.items():
        pooled = defaultdict(list)
        for part in cell["parts"]:
            for key, values in part.items():
                pooled[key] += values
        row = {"cell": name, "fits": cell["fits"], "failed": cell["failed"],
               "factor": float(np.mean(cell["factors"]))}  # fmt: skip
        for level in (0.5, 0.9):
            values = np.asarray(pooled.get(f"theta@{level}", []), float)
            row[f"theta{int(level * 100)}"] = float(values.mean()) if len(values) else None
            row["n_theta"] = len(values)
        prob = np.asarray(pooled.get("pair_prob", []))
        true = np.asarray(pooled.get("pair_true", []))
        if len(prob):
            bins = np.clip((prob * 5).astype(int), 0, 4)
            row["ece"] = float(
                sum(abs(prob[bins == k].mean() - true[bins == k].mean()) * (bins == k).mean()
                    for k in range(5) if (bins == k).any())
            )  # fmt: skip
        rows.append(row)
    return rows


def print_rows(rows: list[dict], header: str) -> None:
    print(header)
    print(
        "| data / rewards / weight | theta 90% | theta 50% | pairwise ECE | mean factor | fits "
        "| failed check |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        t90 = "" if r.get("theta90") is None else f"{r['theta90']:.3f} (n {r['n_theta']})"
        t50 = "" if r.get("theta50") is None else f"{r['theta50']:.3f}"
        ece = "" if "ece" not in r else f"{r['ece']:.3f}"
        factor, fits, failed = r["factor"], r["fits"], r["failed"]
        print(f"| {r['cell']} | {t90} | {t50} | {ece} | {factor:.2f} | {fits} | {failed} |")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=4)
    parser.add_argument("--first-rep", type=int, default=0)
    parser.add_argument("--sampler", default="nuts")
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--draws", type=int, default=500)
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--json", default=None)
    parser.add_argument("--log", default=None, help="append one JSON line per fit here")
    parser.add_argument("--combine", nargs="+", metavar="LOG", help="fit nothing: pool logs")
    args = parser.parse_args(argv)
    if args.combine:
        print_rows(table(combine(args.combine)), f"pooled from {', '.join(args.combine)}")
        return 0
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    start = time.time()
    rows = table(run(args))
    seeds = f"{args.first_rep}-{args.first_rep + args.reps - 1}"
    print_rows(rows, f"\nseeds {seeds}, {SIZES}, {args.sampler} {args.chains}x"
                     f"({args.warmup}+{args.draws}); {time.time() - start:.0f}s")  # fmt: skip
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"rows": rows, "seeds": seeds, "args": vars(args)}, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
