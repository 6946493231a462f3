r"""Per-item Newton solves given the abilities: the one implementation for every stage.

Given the abilities, items share no parameters, so each item's one or two parameters
solve a small problem of their own and all of them are solved at once, vectorised over
items: gradients are arrays of shape (d, Q) and curvatures (d, d, Q), one block per item
(``d = 1`` for ``b`` alone, ``d = 2`` for two parameters such as ``(log a, b)``).

* :func:`block_solve` and :func:`block_det`: the blockwise linear algebra (pure
  arithmetic on NumPy or JAX arrays, so JAX can trace and differentiate it).
* :func:`fisher_scoring`: damped Fisher scoring of each item's binary labels, a Bernoulli
  model in a linear predictor with two parameters per item and a Normal prior on each
  (NumPy). The pilot of the items' information
  (:func:`bayes_dualeval.model.pilot.b_information`: ``eta = alpha + beta x``, a ridge
  logistic regression) and the answer-key audit
  (:func:`bayes_dualeval.checks.keys.item_mode`: ``eta = exp(u) (theta - b)``) call it.

The MAP's inner solve (``ItemIntegral._newton`` in
:mod:`bayes_dualeval.inference.item_integral`) shares :func:`block_solve` and
:func:`block_det`, but not the iteration: it runs inside a jitted, differentiated JAX
program (a ``while_loop`` to a tolerance); its objective is the model's whole item log
posterior read through NumPyro's trace (static labels and the arena terms, weighted), not
a Bernoulli model in one linear predictor; and its curvature is that objective's
Hessian by automatic differentiation, which can be indefinite away from the mode, so it
floors eigenvalues and backtracks on the objective's value. :func:`fisher_scoring`'s
expected information plus the prior precision is positive definite at every iterate, so a
step cap suffices there.
"""

from __future__ import annotations

import numpy as np

from bayes_dualeval.model import links


def block_det(h):
    """Determinant of each (d, d) block of ``h``, shape (Q,), for ``d`` 1 or 2."""
    if h.shape[0] == 1:
        return h[0, 0]
    return h[0, 0] * h[1, 1] - h[0, 1] * h[0, 1]


def block_solve(h, g):
    """Solve ``h[:, :, q] delta[:, q] = g[:, q]`` for every item ``q`` (symmetric blocks).

    Parameters
    ----------
    h : numpy.ndarray or jax.Array, shape (d, d, Q)
        Symmetric blocks, ``d`` 1 or 2 (``h[0, 1]`` is read as the off-diagonal).
    g : numpy.ndarray or jax.Array, shape (d, Q)

    Returns
    -------
    tuple of arrays
        The ``d`` rows of ``delta``, each of shape (Q,) (stack them for a (d, Q) array).
    """
    if h.shape[0] == 1:
        return (g[0] / h[0, 0],)
    p, r, s = h[0, 0], h[0, 1], h[1, 1]
    det = block_det(h)
    return (s * g[0] - r * g[1]) / det, (p * g[1] - r * g[0]) / det


def fisher_scoring(
    predictor,
    y,
    item,
    n_items: int,
    prior,
    *,
    iterations: int,
    max_step=None,
    c=None,
    d=None,
    tol: float = 0.0,
    n=None,
):
    """Each item's two parameters at the mode of its labels' Bernoulli likelihood and prior.

    Every label ``y_k`` of item ``item[k]`` follows
    :func:`~bayes_dualeval.model.links.probability` of a linear predictor ``eta_k`` that
    depends on its item's parameters ``x[:, item[k]]``; the parameters have independent
    Normal priors. Starting at the prior means, each iteration takes the step
    ``J^{-1} g``, with ``g`` the gradient of the log joint and ``J`` the expected
    information of the labels in ``x`` (:func:`~bayes_dualeval.model.links.
    bernoulli_score`, through the predictor's Jacobian) plus the prior precision: Fisher
    scoring, which is Newton's method for a logistic regression.

    Parameters
    ----------
    predictor : callable
        ``predictor(x) -> (eta, jacobian)``: at parameters ``x`` of shape (2, Q), every
        label's linear predictor, shape (R,), and its derivatives with respect to the
        label's item's two parameters, a pair of arrays of shape (R,) (or scalars). With
        ``tol`` it is also called as ``predictor(x, rows)``, for the labels ``rows`` only.
    y : numpy.ndarray, shape (R,)
        Labels, 0.0 or 1.0, or the share of correct answers of a cell of ``n`` answers.
    item : numpy.ndarray of int, shape (R,)
        Item of each label.
    n_items : int
    prior : tuple
        ``(means, sds)``: each a pair of floats, for the two parameters.
    iterations : int
        Most scoring steps taken.
    max_step : float, optional
        Each component of a step is clipped to ``[-max_step, max_step]`` (None: undamped).
    c, d : float, optional
        Floor and ceiling of the success probability (None: 0 and 1).
    tol : float
        An item whose step has no component above ``tol`` keeps its parameters and
        information from then on, and later passes read only the labels of the items
        still moving; the solve stops when none is (0: every item takes every
        iteration). At millions of labels the passes after most items have converged
        are otherwise most of the cost.
    n : numpy.ndarray, shape (R,), optional
        Answers of each cell (repeated samples; None: one each): a cell's score and
        information are its answers' sums, ``n`` times a label's at ``y``.

    Returns
    -------
    x : numpy.ndarray, shape (2, Q)
        The parameters after the last step.
    info : numpy.ndarray, shape (2, 2, Q)
        ``J`` of the last step (at the iterate before ``x``; the same at convergence).
    """
    mean = np.asarray(prior[0], dtype=np.float64)[:, None]
    var = np.asarray(prior[1], dtype=np.float64)[:, None] ** 2
    x = np.repeat(mean, n_items, axis=1)
    info = None
    moving = np.ones(n_items, dtype=bool)
    rows, sub_item, sub_y, sub_n = None, item, y, n  # the labels read (None: all of them)
    read = n_items  # items whose labels are read

    def total(w):
        return np.bincount(sub_item, weights=w, minlength=n_items)

    for _ in range(iterations):
        eta, (e0, e1) = predictor(x) if rows is None else predictor(x, rows)
        r, w = links.bernoulli_score(sub_y, eta, c, d)
        if sub_n is not None:
            r, w = r * sub_n, w * sub_n
        g = np.stack([total(r * e0), total(r * e1)]) - (x - mean) / var
        we0 = w * e0
        h01 = total(we0 * e1)
        new = np.array(
            [[total(we0 * e0) + 1.0 / var[0], h01], [h01, total(w * e1 * e1) + 1.0 / var[1]]]
        )
        info = new if info is None else np.where(moving, new, info)
        step = np.stack(block_solve(info, g))
        if max_step is not None:
            step = np.clip(step, -max_step, max_step)
        x = x + np.where(moving, step, 0.0)
        if not tol:
            continue
        moving &= np.max(np.abs(step), axis=0) > tol
        if not moving.any():
            break
        if moving.sum() < 0.5 * read:
            # read only the labels of the items still moving (rebuilt when they halve)
            read = int(moving.sum())
            rows = np.flatnonzero(moving[item])
            sub_item, sub_y = item[rows], y[rows]
            sub_n = None if n is None else n[rows]
    return x, info
