"""Sums by group with a sparse matrix: per model, per item, per benchmark."""

from __future__ import annotations

import numpy as np
from scipy import sparse


def group_matrix(groups: np.ndarray, n_groups: int, weights=None) -> sparse.csr_array:
    """Sparse (n_groups, len(groups)) matrix with ``weights`` (default 1) at ``(groups[k], k)``.

    ``matrix @ values`` sums the rows of a (len(groups), k) array by group.
    """
    n = len(groups)
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    return sparse.csr_array((w, (groups, np.arange(n))), shape=(n_groups, n))
