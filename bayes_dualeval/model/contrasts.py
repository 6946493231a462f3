"""Sum-to-zero coordinates: the Helmert basis the model samples centred effects in.

Effects that sum to zero over ``m`` levels (the abilities around their mean, the judges'
severities and log discriminations, the judge x family biases) are drawn as ``H u``, with
``H`` an orthonormal basis of the vectors that sum to zero and ``u`` ``m - 1`` free
coordinates. For independent normal ``u`` of scale ``s``, ``H u`` has exactly the
distribution of ``r - mean(r)`` for ``m`` independent normals ``r`` of scale ``s``, without
the redundant direction (the mean of ``r``) that nothing in the likelihood reads.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import helmert


def helmert_basis(m: int) -> np.ndarray:
    """Orthonormal basis (m, m - 1) of the vectors that sum to zero (Helmert contrasts)."""
    return helmert(m).T.astype(np.float32)
