"""Evenly spaced subsets of posterior draws (or of any sequence).

Checks, tables, figures and the stored log likelihood keep fewer draws than a run holds
when memory or time asks for it; they all thin the same way, so the same budget keeps the
same draws wherever it is spent.
"""

from __future__ import annotations

import numpy as np


def evenly_spaced(total: int, n: int) -> np.ndarray:
    """Indices of at most ``n`` evenly spaced positions in ``range(total)``.

    Parameters
    ----------
    total : int
        Length of the sequence.
    n : int
        How many positions to keep; all of them when ``n >= total``.

    Returns
    -------
    numpy.ndarray of int
        Sorted, distinct indices, the first and the last included when ``n >= 2``
        (rounded to the nearest position, so that the spacing is as even as it can be).
    """
    if n >= total:
        return np.arange(total)
    if n <= 0:
        return np.empty(0, dtype=int)
    return np.unique(np.linspace(0, total - 1, n).round().astype(int))
