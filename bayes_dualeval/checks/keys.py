r"""Answer-key audit: does a static question's key look reversed.

A reversed key turns the item response function around: with
:math:`P(y = 1) = \sigma(a(\theta - b))` for the correct key, the recorded labels follow
:math:`1 - \sigma(a(\theta - b)) = \sigma(-a(\theta - b))`, a negative discrimination. The
run's own ``a`` cannot show it (``a > 0`` by its prior: the fit settles on a flat item), so
each static item is fitted again, alone, under two hypotheses that share everything but
the key:

* ``H0`` (key as given): ``y_iq ~ Bernoulli(sigmoid(a (theta_i - b)))``;
* ``H1`` (key reversed): ``1 - y_iq ~ Bernoulli(sigmoid(a (theta_i - b)))``;

with the abilities at their posterior means and ``(log a, b)`` drawn from the population
of the run's static items, ``log a ~ Normal(m_a, s_a)`` and ``b ~ Normal(m_b, s_b)``
(moments of the items' posterior means plus their mean posterior variance). Under a link
with a guessing floor ``c`` or a ceiling ``d`` (3PL, 4PL) the response function is
``c + (d - c) sigmoid(a (theta - b))`` under both hypotheses, with ``c`` and ``d`` at their
means over the static items: the run's own ``c`` of a reversed item was fitted to the
reversed labels, so it is not used, just as its ``a`` and ``b`` are not. The evidence
is the log Bayes factor of ``H1`` against ``H0``, each marginal likelihood by the Laplace
approximation at the item's maximum a posteriori ``(log a, b)`` (a damped Fisher-scoring
solve, vectorised over items):
``key_evidence = f1 - f0 - (log det J1 - log det J0) / 2`` with ``f`` the log joint at
the mode and ``J`` the observed-information surrogate (expected information plus prior
precision) there.

Why this beats a correlation test: the alternative to a reversed key is not "no relation
to ability" but a discrimination like the other items'. A correlation (or a free-slope
likelihood ratio) asks whether the slope is below zero; the Bayes factor asks whether
``-a`` explains the labels better than ``+a`` with ``a`` typical, which a handful of
weak-model successes and strong-model failures can already decide.

Flags use the two-groups model across items (Efron 2008): a share ``pi`` of the items is
reversed, estimated by expectation-maximisation with the Bayes factors held fixed; each
item's posterior probability of a reversed key is
``P_q = pi BF_q / (pi BF_q + 1 - pi)``, and ``key_q``, the Bayesian false discovery rate of
flagging every item at least as suspicious, is the mean of ``1 - P`` over those items
(Newton et al. 2004; Storey's q-value in Bayesian form). Flagging ``key_q < MISKEY_Q``
keeps the expected share of false flags below ``MISKEY_Q`` when the model holds. On clean
data ``pi`` falls towards zero and nothing is flagged.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
from scipy import special

from bayes_dualeval.checks import budget
from bayes_dualeval.checks.fitted import FittedRun
from bayes_dualeval.model import item_solve, links

#: Items with ``key_q`` below this are flagged ``miskeyed``.
MISKEY_Q = 0.2
#: Fisher-scoring iterations of the per-item fits (each step is damped to at most
#: :data:`MAX_STEP` in ``log a`` and ``b``).
ITERATIONS, MAX_STEP = 40, 1.0
#: An item's scoring stops once no component of its step exceeds this (well below any
#: posterior sd; items whose reversed key has no finite mode take every iteration).
TOLERANCE = 1e-7
#: Floor of the population sd of ``log a`` and ``b`` (a 1PL run has ``a = 1`` exactly).
MIN_SCALE = 0.05
#: EM iterations for the share of reversed keys, and its floor.
EM_ITERATIONS, MIN_SHARE = 200, 1e-6
#: Labels from which the items are solved in chunks (of about equal numbers of labels,
#: :data:`~bayes_dualeval.checks.budget.THREADS` per hypothesis) on threads.
CHUNK_LABELS = 200_000


def key_evidence(fit: FittedRun) -> tuple[np.ndarray, np.ndarray]:
    """Log Bayes factor of a reversed key, and its Bayesian q-value, for each item.

    Parameters
    ----------
    fit : FittedRun
        The run's draws and data.

    Returns
    -------
    evidence : numpy.ndarray, shape (Q,)
        ``log BF`` of "key reversed" against "key as given" (natural log; positive favours
        a reversed key). NaN for arena prompts, items without variation and runs without
        item parameters (Bradley-Terry).
    q : numpy.ndarray, shape (Q,)
        Bayesian false discovery rate of flagging every item with at least this evidence;
        NaN where ``evidence`` is.
    """
    ds = fit.dataset
    k = ds.n_items
    evidence = np.full(k, np.nan)
    if fit.items["b"] is None or not len(ds.static_y):
        return evidence, np.full(k, np.nan)
    item, y = ds.static_item, ds.static_share  # a cell's share of correct answers
    answers = ds.static_n.astype(np.float64)
    centre = fit.theta.mean(dtype=np.float64)  # domain deviations sum to zero over models
    theta = fit.ability_mean(ds.static_model, item) - centre
    n = np.bincount(item, minlength=k)
    total = np.bincount(item, weights=answers, minlength=k)
    s = np.bincount(item, weights=ds.static_y, minlength=k)
    varied = (n > 1) & (s > 0) & (s < total)
    static = np.flatnonzero(n > 0)
    prior = population(fit, static)
    bounds = asymptotes(fit, static)
    (f0, logdet0), (f1, logdet1) = both_modes(theta, item, y, k, prior, bounds, answers)
    bf = f1 - f0 - 0.5 * (logdet1 - logdet0)
    evidence[varied] = bf[varied]
    return evidence, bayes_q(evidence)


def population(fit: FittedRun, static: np.ndarray) -> tuple[float, float, float, float]:
    """``(m_a, s_a, m_b, s_b)``: population moments of ``log a`` and ``b`` of ``static``.

    Mean of the items' posterior means; variance of the posterior means plus the mean
    posterior variance (the law of total variance), floored at :data:`MIN_SCALE`. ``b`` is
    centred by each draw's mean ability, as in the item table.
    """
    shift = fit.theta.mean(axis=1, dtype=np.float64)[:, None]
    b = fit.items["b"][:, static].astype(np.float64) - shift
    a = fit.items["a"]
    log_a = np.zeros_like(b) if a is None else np.log(a[:, static].astype(np.float64))

    def moments(v):
        mean = v.mean(axis=0)
        within = v.var(axis=0).mean() if len(v) > 1 else 0.0
        return float(mean.mean()), float(max(np.sqrt(mean.var() + within), MIN_SCALE))

    return (*moments(log_a), *moments(b))


def asymptotes(fit: FittedRun, static: np.ndarray) -> tuple[float, float]:
    """``(c, d)``: the mean floor and ceiling of the run's ``static`` items (0 and 1 without)."""

    def mean(name, default):
        values = fit.items.get(name)
        return default if values is None else float(values[:, static].mean(dtype=np.float64))

    return mean("c", 0.0), mean("d", 1.0)


def both_modes(theta, item, y, k: int, prior, bounds=(0.0, 1.0), n=None) -> list[tuple]:
    """:func:`item_mode` under the key as given (``y``) and reversed (``1 - y``).

    ``y`` is each cell's share of correct answers and ``n`` its answers (None: one each).

    Items are independent, so above :data:`CHUNK_LABELS` labels each hypothesis is solved
    in chunks of whole items (contiguous item ranges of about equal numbers of labels, the
    labels of an item in their order) on up to
    :data:`~bayes_dualeval.checks.budget.THREADS` threads; NumPy releases the interpreter
    lock in its array loops. Every item sees the same labels in the same order as in one
    solve, so the results do not depend on the number of chunks or threads.

    Returns
    -------
    list of tuple
        ``[(f0, logdet0), (f1, logdet1)]``, each a pair of arrays of shape (k,).
    """
    n_chunks = budget.THREADS if len(y) >= CHUNK_LABELS else 1
    order = np.argsort(item, kind="stable")  # each item's labels in their order
    cum = np.r_[0, np.cumsum(np.bincount(item, minlength=k))]  # labels before each item
    ends = np.searchsorted(cum[1:], np.arange(1, n_chunks) * len(y) / n_chunks) + 1
    edges = np.unique(np.r_[0, np.minimum(ends, k), k])
    pieces = [  # (first item, number of items, the chunk's rows)
        (lo, hi - lo, order[cum[lo] : cum[hi]])
        for lo, hi in zip(edges[:-1], edges[1:], strict=True)
    ]

    def solve(task):
        labels, (lo, width, rows) = task
        answers = None if n is None else n[rows]
        return item_mode(theta[rows], item[rows] - lo, labels[rows], width, prior, bounds, answers)

    tasks = [(labels, piece) for labels in (y, 1.0 - y) for piece in pieces]
    with ThreadPoolExecutor(max_workers=max(1, min(budget.THREADS, len(tasks)))) as pool:
        solved = list(pool.map(solve, tasks))
    halves = (solved[: len(pieces)], solved[len(pieces) :])
    return [tuple(np.concatenate(column) for column in zip(*half, strict=True)) for half in halves]


def item_mode(
    theta, item, y, k: int, prior, bounds=(0.0, 1.0), n=None
) -> tuple[np.ndarray, np.ndarray]:
    """Per-item MAP of ``(log a, b)``: log joint at the mode and ``log det`` of ``J``.

    Damped Fisher scoring on all items at once
    (:func:`~bayes_dualeval.model.item_solve.fisher_scoring`, steps clipped to
    :data:`MAX_STEP`); ``J`` is the expected information of the labels plus the prior
    precision (positive definite, so every step ascends for a small enough step, and the
    Laplace determinant is defined). ``bounds = (c, d)``: the labels follow
    ``c + (d - c) sigmoid(a (theta - b))``. ``y`` is each cell's share of correct answers
    and ``n`` its answers (None: one label each).
    """
    m_a, s_a, m_b, s_b = prior
    plain = bounds[0] == 0.0 and bounds[1] == 1.0  # the 2PL: the logistic's own expressions
    c, d = (None, None) if plain else bounds

    def predictor(x, rows=None):  # eta = exp(u) (theta - b) and its derivatives in u and b
        at, t = (item, theta) if rows is None else (item[rows], theta[rows])
        a = np.exp(x[0])[at]
        eta = a * (t - x[1][at])
        return eta, (eta, -a)

    normal = ((m_a, m_b), (s_a, s_b))
    (u, b), info = item_solve.fisher_scoring(
        predictor, y, item, k, normal, iterations=ITERATIONS, max_step=MAX_STEP, c=c, d=d,
        tol=TOLERANCE, n=n,
    )  # fmt: skip
    log_p, log_q = links.log_probabilities(predictor((u, b))[0], c, d)
    terms = y * log_p + (1.0 - y) * log_q
    loglik = np.bincount(item, weights=terms if n is None else n * terms, minlength=k)
    log_prior = -0.5 * (((u - m_a) / s_a) ** 2 + ((b - m_b) / s_b) ** 2)
    return loglik + log_prior, np.log(item_solve.block_det(info))


def bayes_q(evidence: np.ndarray) -> np.ndarray:
    """Bayesian q-values of a reversed key from log Bayes factors (two-groups model).

    The share ``pi`` of reversed keys maximises the marginal likelihood
    ``prod_q (pi BF_q + 1 - pi)`` (EM from 0.05); the q-value of item ``q`` is the mean
    posterior probability of a correct key over the items with evidence at least as
    large (ties share the larger value). NaN evidence stays NaN.
    """
    ok = np.isfinite(evidence)
    q = np.full(evidence.shape, np.nan)
    if not ok.any():
        return q
    log_bf = evidence[ok]
    pi = 0.05
    for _ in range(EM_ITERATIONS):
        prob = special.expit(log_bf + np.log(pi) - np.log1p(-pi))
        pi = float(np.clip(prob.mean(), MIN_SHARE, 1.0 - MIN_SHARE))
    prob = special.expit(log_bf + np.log(pi) - np.log1p(-pi))
    order = np.argsort(-log_bf, kind="stable")
    fdr = np.cumsum(1.0 - prob[order]) / np.arange(1, len(order) + 1)
    ranked = -log_bf[order]
    last = np.searchsorted(ranked, ranked, side="right") - 1  # ties share one q-value
    out = np.empty(len(log_bf))
    out[order] = fdr[last]
    q[ok] = out
    return q
