"""Can the spread of ``log a`` be read from the data before sampling? Simulations and real sets.

NUTS samples an item's ``log a`` centred when its pilot information times 0.3 squared
(``pilot.PRIOR_SD_LOG_A``, the prior's median spread) is at least 1. On ChemBench the fitted
``sigma_log_a`` is 0.62, every ``log a`` is non-centred and every default fit fails its
E-BFMI check (docs/performance.md, "ChemBench's energy"). This script holds the estimate
that was tried and reverted: an empirical-Bayes fit of ``log a ~ Normal(m, s)`` on the
pilot's proxy abilities (standardised logits of the models' accuracies), each item's
likelihood of ``log a`` on a grid with its intercept integrated out by Laplace's method,
for groups of at least 100 items from at least 20 models. It prints the estimate on
simulated static matrices of known spread (``simulate(..., log_a_sd=s)``) and on the
shared real sets, with the share of ``log a`` centred under 0.3 and under the estimate.

Usage::

    python scripts/studies/spread_check.py [--seeds 3]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit, logsumexp

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


#: The grid of ``log a`` (proxy scale) and the smallest group the estimate is made for.
GRID = np.linspace(-2.5, 2.5, 41)
MIN_ITEMS, MIN_MODELS = 100, 20


def estimate(ds: Dataset) -> float | None:
    """The spread ``s`` of the static items' ``log a`` (one group), or None if too small."""
    item, model = ds.static_item, ds.static_model
    if np.unique(item).size < MIN_ITEMS or np.unique(model).size < MIN_MODELS:
        return None
    n, y = ds.static_n.astype(float), ds.static_share
    k = np.bincount(model, weights=ds.static_y, minlength=ds.n_models)
    acc = (k + 0.5) / (np.bincount(model, weights=n, minlength=ds.n_models) + 1.0)
    theta = np.log(acc / (1 - acc))
    x = ((theta - theta.mean()) / theta.std())[model]
    q = ds.n_items
    loglik, alpha = np.empty((len(GRID), q)), np.zeros(q)
    for g, log_a in enumerate(GRID):  # the intercept by Newton, prior Normal(0, 3)
        for _ in range(12 if g == 0 else 4):
            p = expit(alpha[item] + np.exp(log_a) * x)
            grad = np.bincount(item, weights=n * (y - p), minlength=q) - alpha / 9
            alpha += grad / (np.bincount(item, weights=n * p * (1 - p), minlength=q) + 1 / 9)
        p = np.clip(expit(alpha[item] + np.exp(log_a) * x), 1e-12, 1 - 1e-12)
        hess = np.bincount(item, weights=n * p * (1 - p), minlength=q) + 1 / 9
        cells = n * (y * np.log(p) + (1 - y) * np.log1p(-p))
        loglik[g] = np.bincount(item, weights=cells, minlength=q) - alpha**2 / 18
        loglik[g] -= 0.5 * np.log(hess * 9)
    loglik = loglik[:, np.unique(item)]

    def minus(v):
        w = -0.5 * ((GRID[:, None] - v[0]) / np.exp(v[1])) ** 2 - v[1]
        return -float(np.sum(logsumexp(loglik + w, axis=0)))

    bounds = [(GRID[0], GRID[-1]), (np.log(0.05), np.log(2.0))]
    res = minimize(minus, (0.0, np.log(0.3)), method="L-BFGS-B", bounds=bounds)
    return float(np.exp(res.x[1]))


def row(ds: Dataset) -> tuple[str, float, float, float]:
    start = time.perf_counter()
    spread = estimate(ds)
    seconds = time.perf_counter() - start
    static = np.asarray(ds.item_kind == "static")
    _, info = pilot.item_information(ds, True)
    now = float(np.mean(info[static] * pilot.PRIOR_SD_LOG_A**2 >= 1))
    if spread is None:
        return "too small", now, now, seconds
    wider = float(np.mean(info[static] * max(spread, pilot.PRIOR_SD_LOG_A) ** 2 >= 1))
    return f"{spread:.3f}", now, wider, seconds


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args(argv)
    print(
        "| data | true spread | seed | read | centred under 0.3 | under the estimate | seconds |"
    )
    print("|---|---|---|---|---|---|---|")
    for models, questions, sd in DESIGNS:
        for seed in range(args.seeds):
            static, _, _ = simulate(models, questions, 0, log_a_sd=sd, seed=seed)
            read, now, wider, seconds = row(Dataset.from_frames(static=static))
            print(
                f"| simulated {models} x {questions} | {sd} | {seed} | {read} | "
                f"{now:.2f} | {wider:.2f} | {seconds:.2f} |",
                flush=True,
            )
    for name in REAL_SETS:
        if not (REAL / name).exists():
            print(f"| {name} | - | - | absent | - | - | - |")
            continue
        read, now, wider, seconds = row(load(REAL / name))
        print(f"| {name} | unknown | - | {read} | {now:.2f} | {wider:.2f} | {seconds:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
