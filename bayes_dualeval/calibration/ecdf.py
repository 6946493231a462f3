r"""Uniformity of ranks: ECDF differences with simultaneous bands (Säilynoja et al. 2022).

With ``L`` thinned posterior draws, the rank of the truth among them is uniform on
``0, ..., L`` when the fits are calibrated (Talts et al. 2018). For ``N`` ranks, the ECDF at
``r = 0, ..., L - 1`` is compared with the uniform's :math:`z_r = (r + 1) / (L + 1)`: under
uniformity :math:`N F(r) \sim \mathrm{Binomial}(N, z_r)` pointwise. A band that holds the
whole ECDF with probability :math:`1 - \alpha` uses a smaller pointwise level
:math:`\gamma` (the *adjusted gamma*), found here by simulation: for each of ``B`` samples
of ``N`` uniform ranks, the smallest two-sided binomial tail probability over ``r``;
:math:`\gamma` is their :math:`\alpha` quantile, and the band at ``r`` is the binomial's
central :math:`1 - \gamma` interval. The same samples give each quantity's p-value: the
share of uniform samples whose smallest tail probability is as small as the one observed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

#: Uniform samples the band and the p-values are simulated from.
BAND_SAMPLES = 4000


@dataclass(frozen=True)
class Band:
    """The simultaneous band of ``N`` ranks on ``0, ..., L``.

    Attributes
    ----------
    z : numpy.ndarray, shape (L,)
        The uniform's CDF at ``r = 0, ..., L - 1``.
    lower, upper : numpy.ndarray, shape (L,)
        The band of the ECDF at each ``r`` (shares of ``N``).
    gamma : float
        The adjusted pointwise level.
    null : numpy.ndarray, shape (BAND_SAMPLES,)
        The smallest tail probability of each simulated uniform sample.
    n, draws : int
        ``N`` and ``L``.
    """

    z: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    gamma: float
    null: np.ndarray
    n: int
    draws: int


def tail_probability(counts: np.ndarray, n: int, z: np.ndarray) -> np.ndarray:
    """Smallest two-sided binomial tail probability over the grid, per sample.

    Parameters
    ----------
    counts : numpy.ndarray, shape (..., L)
        ``N F(r)``: ranks at or below each ``r``.
    n : int
    z : numpy.ndarray, shape (L,)

    Returns
    -------
    numpy.ndarray, shape (...)
    """
    below = stats.binom.cdf(counts, n, z)
    above = stats.binom.sf(counts - 1, n, z)
    return np.minimum(1.0, 2.0 * np.minimum(below, above)).min(axis=-1)


def band(n: int, draws: int, alpha: float = 0.05, seed: int = 0) -> Band:
    """The simultaneous ``1 - alpha`` band of ``n`` ranks among ``draws`` draws.

    Parameters
    ----------
    n : int
        Ranks (simulations).
    draws : int
        ``L``: ranks take the values ``0, ..., L``.
    alpha : float
    seed : int
        Of the simulated uniform samples.
    """
    rng = np.random.default_rng(seed)
    z = np.arange(1, draws + 1) / (draws + 1)
    ranks = rng.integers(0, draws + 1, size=(BAND_SAMPLES, n))
    null = tail_probability(cumulative_counts(ranks, draws), n, z)
    gamma = float(np.quantile(null, alpha))
    lower = stats.binom.ppf(gamma / 2, n, z) / n
    upper = stats.binom.ppf(1 - gamma / 2, n, z) / n
    return Band(z, lower, upper, gamma, null, n, draws)


def cumulative_counts(ranks: np.ndarray, draws: int) -> np.ndarray:
    """Ranks at or below ``r = 0, ..., L - 1``, shape ``ranks.shape[:-1] + (L,)``."""
    ranks = np.asarray(ranks, dtype=np.int64)
    lead, n = ranks.shape[:-1], ranks.shape[-1]
    rows = int(np.prod(lead, dtype=np.int64))
    # one histogram per sample (a bincount, not an (..., N, L) comparison: N may be 10^4)
    offset = np.arange(rows)[:, None] * (draws + 1)
    counts = np.bincount((ranks.reshape(rows, n) + offset).ravel(), minlength=rows * (draws + 1))
    return counts.reshape(rows, draws + 1).cumsum(axis=1)[:, :draws].reshape(*lead, draws)


def test(ranks: np.ndarray, b: Band) -> dict:
    """How far the ECDF of ``ranks`` is from uniform, against the band ``b``.

    Returns
    -------
    dict
        ``ecdf_max_dev`` (largest ``|F(r) - z_r|``), ``p_value`` (share of uniform samples
        at least as extreme) and ``within_band`` (the whole ECDF inside the band).
    """
    counts = cumulative_counts(ranks, b.draws)
    f = counts / b.n
    observed = tail_probability(counts, b.n, b.z)
    return {
        "ecdf_max_dev": float(np.abs(f - b.z).max()),
        "p_value": float(np.mean(b.null <= observed)),
        "within_band": bool(np.all((f >= b.lower - 1e-12) & (f <= b.upper + 1e-12))),
    }
