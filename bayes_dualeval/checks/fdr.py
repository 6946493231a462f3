"""False discovery rate: Benjamini-Hochberg q-values of the cell p-values."""

from __future__ import annotations

import numpy as np
from scipy import stats


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
    p = np.asarray(p_values, dtype=np.float64)
    q = np.full(p.shape, np.nan)
    ok = ~np.isnan(p)
    if ok.any():
        q[ok] = stats.false_discovery_control(p[ok], method="bh")
    return q
