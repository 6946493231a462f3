"""Benchmark: the answer-key audit's per-item solves, on threads against one solve each.

Simulates a static matrix (``--labels`` labels over ``--items`` items and 1,000 models,
2PL), then times, in one process, the two hypotheses of the audit
(:func:`bayes_dualeval.checks.keys.item_mode` on the labels and on their reverse) as one
solve each, and :func:`~bayes_dualeval.checks.keys.both_modes` on one thread and on
``checks.budget.THREADS`` threads, checking that every result is identical. Run it on an
otherwise idle machine::

    python scripts/benchmarks/keys_benchmark.py                     # 4,000,000 labels, 4,000 items
    python scripts/benchmarks/keys_benchmark.py --labels 10000000 --items 20000
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from bayes_dualeval.checks import budget, keys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--labels", type=int, default=4_000_000)
    parser.add_argument("--items", type=int, default=4_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    n, k, models = args.labels, args.items, 1_000
    item = rng.integers(0, k, n)
    theta = rng.normal(size=models)[rng.integers(0, models, n)]
    a, b = np.exp(rng.normal(0.0, 0.3, k)), rng.normal(size=k)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-a[item] * (theta - b[item])))).astype(float)
    prior = (0.0, 0.3, 0.0, 1.0)

    start = time.perf_counter()
    whole = [keys.item_mode(theta, item, labels, k, prior) for labels in (y, 1.0 - y)]
    base = time.perf_counter() - start
    rows = [("one solve per hypothesis", base, True)]
    threads = budget.THREADS
    for count in sorted({1, threads}):
        budget.THREADS = count
        start = time.perf_counter()
        got = keys.both_modes(theta, item, y, k, prior)
        seconds = time.perf_counter() - start
        same = all(
            np.array_equal(u, v) for one, two in zip(whole, got, strict=True)
            for u, v in zip(one, two, strict=True)
        )  # fmt: skip
        rows.append((f"both_modes on {count} thread(s)", seconds, same))
    budget.THREADS = threads
    print(f"{n:,} labels, {k:,} items, both hypotheses")
    print("\n| run | seconds | vs one solve each | identical |")
    print("|---|---|---|---|")
    for label, seconds, same in rows:
        print(f"| {label} | {seconds:.2f} | {seconds / base:.2f}x | {same} |")
    return 0 if all(same for *_, same in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
