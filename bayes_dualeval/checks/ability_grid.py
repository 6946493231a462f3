r"""Where the model x benchmark audit evaluates a left-out ability: a grid per model.

The audit (:mod:`~bayes_dualeval.checks.benchmark_audit`) integrates a block's prediction
over the posterior of the model's ability given its *other* cells, as a sum over grid
points. A sum over equally spaced points of a smooth integrand that vanishes at both ends
is accurate when the spacing ``h`` is at most about the integrand's scale ``s``: for a
normal density the relative error is about ``2 exp(-2 pi^2 s^2 / h^2)``, 5e-9 at ``h =
s``, 0.7% at ``h = 2 s`` and 4% at ``h = 2.5 s``. A fixed grid over the prior's range
cannot meet that for every data set: with a few thousand of a model's cells left in, its
ability's posterior sd is about 0.04 prior sd, and a 121-point grid over six prior sds
each side has a spacing of 0.1 (p-values off by up to 0.03 on a simulated 20 x 3,000 set).

So each posterior draw is evaluated twice:

1. on a coarse grid over the prior's range (:func:`coarse`: :data:`COARSE` points over
   :data:`HALF_WIDTH` prior sds each side), which locates each block's left-out posterior:
   the points within :data:`DROP` of its log maximum, widened by one step each side
   (:func:`~bayes_dualeval.core.grid_span.covered_span`: for a log-concave posterior, as
   the 2PL's is, that interval holds every point within :data:`DROP` of the true
   maximum), and its scale, from the second difference of the log
   posterior and of the block's own log likelihood at the maximum (the block's prediction
   varies on the scale of what the block alone says about the ability);
2. on a refined grid per model (:func:`refine`): equally spaced over the union of its
   blocks' intervals, with as many points as the narrowest scale of any model asks for at
   :data:`STEP` scales per step, between :data:`FEWEST` and :data:`MOST`.

Together at most ``COARSE + MOST`` = 146 evaluations per cell and draw, 1.2 times the one
fixed grid of 121 points, where the cap binds; on the bundled example about 70.
"""

from __future__ import annotations

import numpy as np

from bayes_dualeval.core.grid_span import covered_span

#: Half-width of the coarse grid, in prior standard deviations of the ability.
HALF_WIDTH = 6.0
#: Points of the coarse grid (a step of half a prior sd).
COARSE = 25
#: A block's left-out posterior is located where its log density is within ``DROP`` of
#: its maximum (mass beyond it: about ``exp(-DROP)`` relative).
DROP = 20.0
#: Largest step of the refined grid, in units of the narrowest scale it must resolve.
STEP = 0.8
#: Fewest and most points of the refined grid (at most, the one fixed grid's step: a block
#: whose own likelihood is far narrower than its left-out posterior, as where each model
#: has one benchmark and that posterior is the prior, asks for more than any cap).
FEWEST, MOST = 17, 121


def coarse(scale: float) -> np.ndarray:
    """The coarse grid, shape ``(COARSE,)``: ``HALF_WIDTH`` prior sds (``scale``) each side."""
    return np.linspace(-HALF_WIDTH, HALF_WIDTH, COARSE) * scale


def refine(
    points: np.ndarray,
    log_post: np.ndarray,
    block_ll: np.ndarray,
    owner: np.ndarray,
    n_models: int,
) -> np.ndarray:
    """A grid per model that resolves every one of its blocks' left-out posteriors.

    Parameters
    ----------
    points : numpy.ndarray, shape (G,)
        The coarse grid (equally spaced).
    log_post : numpy.ndarray, shape (B, G)
        Each block's left-out log posterior (unnormalised) on ``points``.
    block_ll : numpy.ndarray, shape (B, G)
        Each block's own log likelihood on ``points``.
    owner : numpy.ndarray of int, shape (B,)
        Each block's model.
    n_models : int

    Returns
    -------
    numpy.ndarray, shape (n_models, K)
        Each model's grid, equally spaced, ``FEWEST <= K <= MOST``; a model without blocks
        gets the coarse grid's range.
    """
    g = len(points)
    step = points[1] - points[0]
    log_post = np.where(np.isfinite(log_post), log_post, -np.inf)
    top = np.argmax(log_post, axis=1)
    inside = log_post > log_post[np.arange(len(top)), top][:, None] - DROP
    lo_b, hi_b = covered_span(points, inside)
    # the scale to resolve: the narrower of the posterior and the block's own likelihood
    # (second differences at the posterior's maximum, each a curvature over one step)
    at = np.clip(top, 1, g - 2)
    rows = np.arange(len(at))
    curvature = np.maximum(_curvature(log_post, rows, at), _curvature(block_ll, rows, at))
    scale_b = 1.0 / np.sqrt(np.maximum(curvature / step**2, 1e-12))
    lo = np.full(n_models, points[0])
    hi = np.full(n_models, points[-1])
    finest = np.full(n_models, np.inf)
    has = np.zeros(n_models, bool)
    has[owner] = True
    lo[has], hi[has] = np.inf, -np.inf
    np.minimum.at(lo, owner, lo_b)
    np.maximum.at(hi, owner, hi_b)
    np.minimum.at(finest, owner, scale_b)
    need = np.ceil((hi - lo) / (STEP * finest)) + 1
    k = int(np.clip(np.max(np.where(np.isfinite(need), need, FEWEST)), FEWEST, MOST))
    return lo[:, None] + (hi - lo)[:, None] * np.linspace(0.0, 1.0, k)


def _curvature(values: np.ndarray, rows: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Minus the second difference of ``values[rows]`` at column ``at`` (0 where not finite)."""
    second = values[rows, at - 1] + values[rows, at + 1] - 2.0 * values[rows, at]
    return np.where(np.isfinite(second), np.maximum(-second, 0.0), 0.0)
