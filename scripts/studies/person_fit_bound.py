"""How often can any test flag a shifted harness? The most powerful test, with the truth known.

`score`'s person-fit p-value (``fit_p``, an ``l_z`` statistic against the bank) is asked to
flag a model whose static answers were flipped with probability ``--flip`` (a changed
harness) while keeping clean models' false-alarm rate low. This script bounds what any
statistic can do on the same kind of pool: it knows each model's true ability and the
items' true parameters (no bank uncertainty, no ability to estimate) and the alternative
itself (the flip rate), so by the Neyman-Pearson lemma its likelihood-ratio test

    log LR = sum_q log P(y_q | theta, flip) - log P(y_q | theta),
    P(1 | theta, flip) = flip + (1 - 2 flip) p_q(theta),

is the most powerful at its level. Reported at level ``--level`` (the threshold is the
clean models' ``1 - level`` quantile, by simulation): the power of that oracle and of
``l_z`` at the true ability, both with the truth known, for the pools of
`scripts/studies/score_study.py` (``static``: 200 questions; ``joint``: 300) and longer ones.
Then with the ability estimated from the labels (its posterior mode; the items still
known), the shares of clean and of flipped models that ``l_z`` and Snijders' ``l_z*``
flag against the normal reference at the same level: the false-alarm rate and the power
`score`'s statistic can have before the bank's own uncertainty is added.
No fit is run: this is arithmetic on the simulator's truth.

Usage::

    python scripts/studies/person_fit_bound.py --out /tmp/person_fit_bound.json
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from measure_common import finish


def _pool(n_items: int, n_models: int, seed: int):
    """Success probabilities (M, Q) of a simulated pool and its items' ``(b, a)``."""
    from bayes_dualeval.model.simulate import simulate

    static, _, truth = simulate(n_models=n_models, n_static=n_items, n_arena=0, seed=seed)
    items = [v for k, v in truth["items"].items() if k.startswith("bench")]
    b = np.array([v["b"] for v in items])
    a = np.array([v["a"] for v in items])
    theta = np.array(list(truth["theta"].values()))
    return _success(theta, b, a), (b, a)


def _success(theta, b, a):
    return 1.0 / (1.0 + np.exp(-a * (np.asarray(theta)[..., None] - b)))


def _estimated(y: np.ndarray, b: np.ndarray, a: np.ndarray, level: float) -> dict:
    """Shares of label sets ``y`` (R, M, Q) flagged by l_z and l_z* at the ability's mode.

    The mode of the posterior under the ability prior N(0, 1) on a grid; flagged when
    ``Phi(statistic) < level`` (the normal reference, as `score` uses it).
    """
    from scipy.special import ndtr

    grid = np.linspace(-5, 5, 401)
    pg = _success(grid, b, a)  # (G, Q)
    log_post = y @ np.log(pg).T + (1 - y) @ np.log1p(-pg).T - 0.5 * grid**2
    p = _success(grid[log_post.argmax(axis=-1)], b, a)  # (R, M, Q)
    w = np.log(p / (1 - p))
    slope = a * p * (1 - p)
    r = slope / (p * (1 - p))
    c = (slope * w).sum(-1) / (slope * r).sum(-1)
    v = w - c[..., None] * r
    out = {}
    for name, weight in (("l_z", w), ("l_z_star", v)):
        z = ((y - p) * weight).sum(-1) / np.sqrt((p * (1 - p) * weight**2).sum(-1))
        out[name] = round(float((ndtr(z) < level).mean()), 3)
    return out


def _statistics(y: np.ndarray, p: np.ndarray, flip: float):
    """Oracle log likelihood ratio and l_z of labels ``y`` (R, M, Q) at ``p`` (M, Q)."""
    q = flip + (1 - 2 * flip) * p
    llr = (y * np.log(q / p) + (1 - y) * np.log((1 - q) / (1 - p))).sum(axis=-1)
    ell = (y * np.log(p) + (1 - y) * np.log(1 - p)).sum(axis=-1)
    mean = (p * np.log(p) + (1 - p) * np.log(1 - p)).sum(axis=-1)
    var = (p * (1 - p) * np.log(p / (1 - p)) ** 2).sum(axis=-1)
    return llr, -(ell - mean) / np.sqrt(var)  # both large when the labels misfit


def bound(n_items: int, flip: float, level: float, n_models: int, reps: int, seed: int):
    """Power at ``level`` of the oracle test and of l_z, on one simulated pool."""
    rng = np.random.default_rng(seed)
    p, (b, a) = _pool(n_items, n_models, seed)
    clean = (rng.random((reps,) + p.shape) < p).astype(float)
    flips = rng.random(clean.shape) < flip
    shifted = np.where(flips, 1 - clean, clean)
    out = {"items": n_items, "flip": flip, "level": level}
    for name, k in (("oracle_lr", 0), ("l_z_true_theta", 1)):
        null = _statistics(clean, p, flip)[k]
        alt = _statistics(shifted, p, flip)[k]
        # per model: its own clean distribution sets its threshold (the truth is known)
        threshold = np.quantile(null, 1 - level, axis=0)
        out[f"power_{name}"] = round(float((alt > threshold).mean()), 3)
    # the ability estimated from the labels (the items still known): what `score` faces
    for case, y in (("clean", clean), ("flipped", shifted)):
        for name, share in _estimated(y, b, a, level).items():
            out[f"flagged_{case}_{name}_estimated_theta"] = share
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--flip", type=float, default=0.15)
    parser.add_argument("--level", type=float, default=0.05)
    parser.add_argument("--models", type=int, default=100)
    parser.add_argument("--reps", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    rows = [bound(n, args.flip, args.level, args.models, args.reps, args.seed)
            for n in (100, 200, 300, 500, 1000)]  # fmt: skip
    finish({"pools": rows}, args.out)


if __name__ == "__main__":
    main()
