"""Where a function evaluated on a coarse grid lives: the span a finer grid should cover.

Three grids are refined this way: the ability of a block left out in the model x benchmark
audit (``checks/ability_grid.py``), a new model's ability against a bank
(``measure/grid.py``) and a new question's parameters (``measure/item_grid.py``). Each
evaluates a log density on a coarse, equally spaced grid, marks the points near its
maximum, and places a finer grid from the first marked point to the last, ``pad`` steps
beyond each: for a log-concave density every point within the marking's threshold of the
true maximum lies inside (the true boundary is less than a step beyond a marked point).
"""

from __future__ import annotations

import numpy as np


def covered_span(points: np.ndarray, covered: np.ndarray, pad: int = 1):
    """Per row of ``covered``, from its first marked point to its last, ``pad`` steps out.

    Parameters
    ----------
    points : numpy.ndarray, shape (G,)
        The coarse grid, equally spaced.
    covered : numpy.ndarray of bool, shape (N, G)
        The points near each row's maximum (at least one per row).
    pad : int
        Steps added beyond the first and the last marked point.

    Returns
    -------
    lo, hi : numpy.ndarray, shape (N,)
    """
    step = points[1] - points[0]
    first = np.argmax(covered, axis=1)
    last = len(points) - 1 - np.argmax(covered[:, ::-1], axis=1)
    return points[first] - pad * step, points[last] + pad * step
