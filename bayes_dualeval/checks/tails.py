r"""The far upper tail of the arena pairs cells, estimated from the cells themselves.

The pairs cell check (:mod:`~bayes_dualeval.checks.arena`) takes each cell's tail
probability from a normal approximation of its soft wins. The soft wins are a sum of
bounded soft targets that move together with the cell's own reward (one reward shock
enters all its pairs), so their distribution is that of the reward noise, bent by the
sigmoid: not normal, and skewed wherever the rewards are. The normal tail is right in the
body (measured: 9.3% of clean cells at ``p <= 0.1``) but not at the 1e-6 level
Benjamini-Yekutieli needs: with skewed (centred exponential) reward noise the cells with
``p <= 1e-4`` were 40 times too many and every simulated null data set had false flags
(docs/auditing.md, "Arena tails").

So the far tail is taken from the cells. Each cell's p-value is turned into its normal
score ``z = Phi^{-1}(1 - p)``; per arena source, the scores above their 90th percentile
``u`` are fitted by a generalized Pareto distribution (peaks over threshold: the limit law
of exceedances of any distribution with a tail, Pickands 1975; maximum likelihood,
``scipy.stats.genpareto``), and a cell above ``u`` gets the larger of its normal p-value
and the fitted tail, ``P(Z > u) (1 - G(z - u))``. The tail is estimated with every cell,
planted ones included, which makes it heavier and the p-values more conservative, never
less; within a source the order of the cells is unchanged (both tails fall with ``z``).
Sources with fewer than :data:`MIN_EXCEEDANCES` scores above ``u`` keep the normal tail.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy import special, stats

#: Share of a source's cells whose scores make the tail fit (those above the quantile).
TAIL_SHARE = 0.1
#: Fewest exceedances for a tail fit; below, the normal tail stands.
MIN_EXCEEDANCES = 30


def calibrated_upper(p_value: np.ndarray, group: np.ndarray, used: np.ndarray) -> np.ndarray:
    """Upper-tail p-values whose far tail is the cells' own (see the module).

    Parameters
    ----------
    p_value : numpy.ndarray, shape (cells,)
        One-sided p-values from the normal approximation.
    group : numpy.ndarray of int, shape (cells,)
        Each cell's arena source.
    used : numpy.ndarray of bool, shape (cells,)
        The cells with a test (others are returned unchanged).

    Returns
    -------
    numpy.ndarray, shape (cells,)
        ``max(p_value, P(Z > u) (1 - G(z - u)))`` above each source's threshold,
        ``p_value`` elsewhere.
    """
    p = np.asarray(p_value, np.float64)
    out = p.copy()
    score = -special.ndtri(np.clip(p, 1e-300, 1.0))
    for g in np.unique(group[used]):
        cells = np.flatnonzero(used & (group == g))
        z = score[cells]
        u = np.quantile(z, 1.0 - TAIL_SHARE)
        over = z > u
        if over.sum() < MIN_EXCEEDANCES or not np.isfinite(u):
            continue
        excess = z[over] - u
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            shape, _, scale = stats.genpareto.fit(excess, floc=0.0)
        if not (np.isfinite(shape) and np.isfinite(scale) and scale > 0):
            continue
        tail = over.mean() * stats.genpareto.sf(excess, shape, loc=0.0, scale=scale)
        out[cells[over]] = np.maximum(p[cells[over]], tail)
    return out
