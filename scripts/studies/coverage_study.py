"""Coverage of posterior intervals on simulated data with known truth.

Fits many small simulated datasets with NUTS, through ``fit`` as the command line does
(draw-more rounds included), and reports how often the 50% and 90% equal-tailed intervals
contain the true value, for static-only, arena-only and joint data and for each arena
likelihood (``pairs``: weight 2/n per pair; ``pairs-full``: every pair at
weight 1, DualEval's loss; ``reward``: Gaussian likelihood of the normalised rewards).

Static labels are simulated from the model itself, so theta, a and b are compared on their
own scale. Arena rewards are simulated as ``r = c_q + 4 p_iq + noise`` and z-normalised,
with per-prompt offsets ``c_q ~ Normal(5, 1)`` (a reward model whose leniency varies by
prompt: scenarios ``arena`` and ``joint``) or without them (``c_q = 5``, noise sd 0.5: the
rewards carry the prompt's level; scenarios ``arena-level`` and ``joint-level``). A
scenario is ``kind:likelihood[:level]``, the level being the model's ``arena_level``
(``mean``, the default, or ``none``). No arena likelihood reproduces the simulator
exactly; compare the scale-free quantities too: the rank interval of each model, the
calibration of pairwise orders P(theta_i > theta_j), and the Spearman correlation and
spread ratio (sd of posterior means over sd of the truth) of the arena difficulties.
Abilities and difficulties are compared centred (minus the models' mean ability), the
convention of the leaderboard.

Usage::

    python scripts/studies/coverage_study.py --reps 50 --workers 2
    python scripts/studies/coverage_study.py --reps 8 --scenarios joint:pairs   # a quick look
    python scripts/studies/coverage_study.py --first-rep 20 --reps 30 ...       # seeds 20-49
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import queue as queue_module
import sys
import time
import warnings
from collections import defaultdict

import numpy as np

SCENARIOS = [
    "static",
    "arena:pairs",
    "arena:pairs:none",
    "arena:pairs-full:none",
    "arena:reward",
    "joint:pairs",
    "joint:pairs:none",
    "joint:pairs-full:none",
    "joint:reward",
    "arena-level:pairs",
    "joint-level:pairs",
    "joint-level:pairs:none",
]
SIZES = {"models": 8, "static": 40, "arena": 30}


def simulate_case(scenario: str, rep: int):
    """One simulated dataset, its configuration and truth."""
    from bayes_dualeval.data.dataset import Dataset
    from bayes_dualeval.model.config import ModelConfig
    from bayes_dualeval.model.simulate import simulate

    kind, _, rest = scenario.partition(":")
    lik, _, level = rest.partition(":")
    kind, _, flat = kind.partition("-")
    n_static = SIZES["static"] if kind in ("static", "joint") else 0
    n_arena = SIZES["arena"] if kind in ("arena", "joint") else 0
    reward = {"prompt_offset_sd": 0.0, "reward_noise": 0.5} if flat else {}
    static, arena, truth = simulate(
        SIZES["models"], n_static, n_arena, seed=10_000 + rep, **reward
    )
    static["source"], arena["source"] = "bench", "arena"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = Dataset.from_frames(
            static=static if n_static else None, arena=arena if n_arena else None
        )
    mode = {"static": "static", "arena": "arena", "joint": "both"}[kind]
    config = ModelConfig(mode=mode, arena_likelihood=lik or "pairs", arena_level=level or "mean")
    return ds, config, truth


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    rx, ry = np.argsort(np.argsort(x)), np.argsort(np.argsort(y))
    return float(np.corrcoef(rx, ry)[0, 1])


def _cover(draws: np.ndarray, truth: np.ndarray, level: float) -> np.ndarray:
    lo, hi = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2], axis=0)
    return (truth >= lo) & (truth <= hi)


def metrics(samples: dict, ds, truth: dict) -> dict:
    """Coverage indicators and pairwise-order calibration terms of one fit."""
    from bayes_dualeval.posterior.summaries import ranks

    theta = samples["theta"].reshape(-1, ds.n_models)
    mean_theta = theta.mean(axis=1, keepdims=True)
    true_theta = np.array([truth["theta"][m] for m in ds.models])
    true_c = true_theta - true_theta.mean()
    out = defaultdict(list)
    for level in (0.5, 0.9):
        out[f"theta@{level}"] += _cover(theta - mean_theta, true_c, level).tolist()
        r = ranks(theta)
        true_rank = np.argsort(np.argsort(-true_theta)) + 1
        out[f"rank@{level}"] += _cover(r, true_rank, level).tolist()
        for kind in ("static", "arena"):
            idx = np.flatnonzero(ds.item_kind == kind)
            if len(idx) == 0:
                continue
            items = ds.items[idx]
            b = samples["b"].reshape(-1, ds.n_items)[:, idx] - mean_theta
            true_b = np.array([truth["items"][q]["b"] for q in items]) - true_theta.mean()
            out[f"b_{kind}@{level}"] += _cover(b, true_b, level).tolist()
            if kind == "arena" and level == 0.9:
                est = b.mean(axis=0)
                out["b_arena_spearman"].append(_spearman(est, true_b))
                out["b_arena_spread"].append(float(est.std() / true_b.std()))
            if "a" in samples:
                a = samples["a"].reshape(-1, ds.n_items)[:, idx]
                true_a = np.array([truth["items"][q]["a"] for q in items])
                out[f"a_{kind}@{level}"] += _cover(a, true_a, level).tolist()
        if "gamma" in samples:
            g = samples["gamma"].reshape(-1)
            out[f"gamma@{level}"] += _cover(g[:, None], np.array([truth["gamma"]]), level).tolist()
    iu, ju = np.triu_indices(ds.n_models, 1)
    prob = (theta[:, iu] > theta[:, ju]).mean(axis=0)
    out["pair_prob"] += prob.tolist()
    out["pair_true"] += (true_theta[iu] > true_theta[ju]).astype(float).tolist()
    return dict(out)


def worker(tasks, settings_dict, queue):
    """Fit every task of one process through :func:`bayes_dualeval.runs.fit.fit`.

    The path users run: the sampler named in the settings, with the rounds that draw more
    while the convergence check fails.
    """
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import numpyro

    # chains in parallel over host devices, as the command line runs them (vectorised
    # chains compile and run about 2.5 times slower on this machine)
    numpyro.set_host_device_count(settings_dict["chains"])
    from bayes_dualeval.inference.settings import SamplerSettings
    from bayes_dualeval.runs.fit import fit

    for scenario, rep in tasks:
        ds, config, truth = simulate_case(scenario, rep)
        settings = SamplerSettings(**settings_dict, seed=rep)
        start = time.perf_counter()
        result = fit(ds, config, settings)
        post = result.idata.posterior
        samples = {name: post[name].values for name in post.data_vars}
        div = int(result.diagnostics["divergences"] or 0)
        queue.put(
            (
                scenario,
                rep,
                metrics(samples, result.dataset, truth),
                div,
                time.perf_counter() - start,
                bool(result.converged),
            )
        )
    queue.put(None)


def summarise(results: dict) -> list[dict]:
    """Coverage with Monte Carlo standard errors, one row per scenario and quantity."""
    rows = []
    for scenario, parts in results.items():
        pooled = defaultdict(list)
        for part in parts:
            for key, values in part.items():
                pooled[key] += values
        for key in sorted(k for k in pooled if "@" in k):
            values = np.asarray(pooled[key], dtype=float)
            name, level = key.split("@")
            p = values.mean()
            rows.append(
                {
                    "scenario": scenario,
                    "quantity": name,
                    "level": float(level),
                    "coverage": p,
                    "mcse": float(np.sqrt(p * (1 - p) / len(values))),
                    "n": len(values),
                }
            )
        for key in ("b_arena_spearman", "b_arena_spread"):
            if pooled.get(key):
                values = np.asarray(pooled[key], dtype=float)
                rows.append(
                    {
                        "scenario": scenario,
                        "quantity": key,
                        "level": np.nan,
                        "coverage": float(values.mean()),
                        "mcse": float(values.std() / np.sqrt(len(values))),
                        "n": len(values),
                    }
                )
        prob, true = np.asarray(pooled["pair_prob"]), np.asarray(pooled["pair_true"])
        bins = np.clip((prob * 5).astype(int), 0, 4)
        ece = sum(
            abs(prob[bins == k].mean() - true[bins == k].mean()) * (bins == k).mean()
            for k in range(5)
            if (bins == k).any()
        )
        rows.append(
            {
                "scenario": scenario,
                "quantity": "pairwise ECE",
                "level": np.nan,
                "coverage": float(ece),
                "mcse": np.nan,
                "n": len(prob),
            }
        )
    return rows


def print_table(rows: list[dict]) -> None:
    """The coverage rows as a Markdown table."""
    print("| scenario | quantity | 50% | 90% | n (90%) |")
    print("|---|---|---|---|---|")
    table = defaultdict(dict)
    for row in rows:
        table[(row["scenario"], row["quantity"])][row["level"]] = row
    for (scenario, quantity), cells in table.items():
        if quantity in ("pairwise ECE", "b_arena_spearman", "b_arena_spread"):
            row = next(iter(cells.values()))
            label = {"pairwise ECE": "pairwise-order ECE"}.get(quantity, quantity)
            print(
                f"| {scenario} | {label} (mean over fits) | {row['coverage']:.3f} | | {row['n']} |"
            )
            continue
        c50, c90 = cells.get(0.5), cells.get(0.9)
        print(
            f"| {scenario} | {quantity} | {c50['coverage']:.3f} ± {c50['mcse']:.3f} "
            f"| {c90['coverage']:.3f} ± {c90['mcse']:.3f} | {c90['n']} |"
        )


def combine(paths: list[str]) -> list[dict]:
    """Pool the rows of several ``--json`` files (e.g. seeds 0-19 and 20-49).

    Coverage, Spearman and spread are averaged weighted by their counts, and the Monte
    Carlo errors of coverage recomputed from the pooled count; the pairwise-order ECE is
    the count-weighted mean of the parts' ECEs (the exact pooled ECE needs the pairs).
    """
    pooled: dict = {}
    for path in paths:
        with open(path, encoding="utf-8") as fh:
            for row in json.load(fh)["rows"]:
                key = (row["scenario"], row["quantity"], str(row["level"]))
                total = pooled.setdefault(key, dict(row, coverage=0.0, n=0))
                total["coverage"] += row["coverage"] * row["n"]
                total["n"] += row["n"]
    rows = []
    for row in pooled.values():
        p = row["coverage"] / row["n"]
        level = row["level"]
        mcse = np.sqrt(p * (1 - p) / row["n"]) if level == level else np.nan
        rows.append(dict(row, coverage=p, mcse=float(mcse)))
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument(
        "--first-rep", type=int, default=0,
        help="seed of the first repetition (split a long study: --first-rep 20 --reps 30)",
    )  # fmt: skip
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--draws", type=int, default=500)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--json", default=None, help="also write the rows as JSON here")
    parser.add_argument(
        "--combine", nargs="+", metavar="JSON",
        help="fit nothing: pool the --json files of earlier runs and print their table",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.combine:
        print_table(combine(args.combine))
        totals = {"divergences": defaultdict(int), "converged": defaultdict(int)}
        for path in args.combine:
            with open(path, encoding="utf-8") as fh:
                part = json.load(fh)
            for name, counts in totals.items():
                for scenario, value in part.get(name, {}).items():
                    counts[scenario] += int(value)
        print("\ndivergent transitions per scenario:", dict(totals["divergences"]))
        print("fits that passed the convergence check, per scenario:", dict(totals["converged"]))
        return 0
    scenarios = args.scenarios.split(",")
    reps = range(args.first_rep, args.first_rep + args.reps)
    tasks = [(s, r) for s in scenarios for r in reps]
    settings = {"chains": args.chains, "warmup": args.warmup, "draws": args.draws}
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [
        ctx.Process(target=worker, args=(tasks[k :: args.workers], settings, queue))
        for k in range(args.workers)
    ]
    for p in procs:
        p.start()
    results, divergences, done, start = defaultdict(list), defaultdict(int), 0, time.time()
    converged = defaultdict(int)
    finished = 0
    crashed = set()
    while finished < len(procs):
        try:
            item = queue.get(timeout=10)
        except queue_module.Empty:
            # a worker killed inside XLA sends no end marker: count it, say so, go on
            for k, p in enumerate(procs):
                if k not in crashed and p.exitcode not in (None, 0):
                    crashed.add(k)
                    finished += 1
                    print(f"worker {k} died (exit {p.exitcode}); its remaining fits are lost",
                          file=sys.stderr, flush=True)  # fmt: skip
            continue
        if item is None:
            finished += 1
            continue
        scenario, rep, result, div, seconds, ok = item
        results[scenario].append(result)
        divergences[scenario] += div
        converged[scenario] += ok
        done += 1
        verdict = "converged" if ok else "NOT converged"
        print(
            f"[{done}/{len(tasks)}] {scenario} rep {rep}: {seconds:.1f}s, {div} divergences, "
            f"{verdict}",
            file=sys.stderr,
            flush=True,
        )
    for p in procs:
        p.join()
    rows = summarise(results)
    print(
        f"\n{args.reps} datasets per scenario ({SIZES}), NUTS {args.chains}x"
        f"({args.warmup}+{args.draws}); {time.time() - start:.0f}s in all\n"
    )
    print_table(rows)
    print("\ndivergent transitions per scenario:", dict(divergences))
    print("fits that passed the convergence check, per scenario:", dict(converged))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(
                {
                    "rows": rows,
                    "divergences": divergences,
                    "converged": converged,
                    "sizes": SIZES,
                    "settings": settings,
                    "reps": args.reps,
                    "first_rep": args.first_rep,
                },
                fh,
                indent=1,
                default=float,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
