"""False discovery rate: q-values of the cell p-values.

:func:`by_qvalues` (Benjamini-Yekutieli) is what the cell table reports: its control holds
under any dependence between the p-values, and the cells of a run are dependent (the
cells of one model share its ability, those of one item its parameters, and the arena
cells of one prompt compete for the same pairs, so their residuals are negatively
correlated). :func:`bh_qvalues` (Benjamini-Hochberg) is kept for independent or positively
dependent p-values; on the cell table it would only be a ranking.
"""

from __future__ import annotations

import numpy as np
from scipy import stats


def _adjust(p_values, method: str) -> np.ndarray:
    p = np.asarray(p_values, dtype=np.float64)
    q = np.full(p.shape, np.nan)
    ok = ~np.isnan(p)
    if ok.any():
        q[ok] = stats.false_discovery_control(p[ok], method=method)
    return q


def bh_qvalues(p_values) -> np.ndarray:
    """Benjamini-Hochberg q-values (step-up adjusted p-values).

    ``q_(k) = min_{l >= k} min(1, m p_(l) / l)`` over the ``m`` non-missing p-values sorted
    ascending (:func:`scipy.stats.false_discovery_control`). Flagging ``q < alpha``
    controls the false discovery rate at ``alpha`` for independent (or positively
    dependent) p-values that are uniform or conservative under the null.

    Parameters
    ----------
    p_values : array_like of float
        P-values in [0, 1]; NaN entries are ignored and get a NaN q-value.

    Returns
    -------
    numpy.ndarray of float64
        q-values, same shape as ``p_values``.

    Examples
    --------
    >>> bh_qvalues([0.01, 0.04, 0.03, 0.2]).round(4).tolist()
    [0.04, 0.0533, 0.0533, 0.2]
    """
    return _adjust(p_values, "bh")


def by_qvalues(p_values) -> np.ndarray:
    """Benjamini-Yekutieli q-values: Benjamini-Hochberg's times ``c(m) = sum_{k<=m} 1/k``.

    ``q_(k) = min_{l >= k} min(1, c(m) m p_(l) / l)`` over the ``m`` non-missing p-values
    (:func:`scipy.stats.false_discovery_control` with ``method="by"``). Flagging
    ``q < alpha`` controls the false discovery rate at ``alpha`` under *any* dependence
    between the p-values, as long as each is uniform or conservative under its null
    (``P(p <= u) <= u``). The price is the factor ``c(m)``: about 9.3 for 6,000 cells,
    15 for a million.

    Parameters
    ----------
    p_values : array_like of float
        P-values in [0, 1]; NaN entries are ignored and get a NaN q-value.

    Returns
    -------
    numpy.ndarray of float64
        q-values, same shape as ``p_values``.

    Examples
    --------
    >>> by_qvalues([0.01, 0.04, 0.03, 0.2]).round(4).tolist()
    [0.0833, 0.1111, 0.1111, 0.4167]
    """
    return _adjust(p_values, "by")
