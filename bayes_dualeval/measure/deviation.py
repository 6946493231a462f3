r"""Model x benchmark deviations: a model's ability on one benchmark, off its overall ability.

Real models are not one-dimensional: a model's accuracy on one benchmark of a bank strays
from what its overall ability predicts (a code model on a maths benchmark). The predicted
accuracy of :func:`~bayes_dualeval.measure.score.accuracy_table` carries it as a
deviation :math:`\delta_{B}` of the new model's ability on the questions of benchmark
:math:`B`,

.. math::

    p_q = c_q + (d_q - c_q)\,\sigma\!\big(a_q (\theta + \delta_B - b_q)\big),
    \qquad \delta_B \sim \mathrm{Normal}(0, \tau^2),

independently per model and benchmark. A one-ability bank has no :math:`\tau`;
:func:`spread` estimates it from the bank models' own answers, and :func:`draw` draws
:math:`\delta_B` per bank draw from its grid posterior given the benchmark's answered
questions at that draw's ability (unanswered benchmarks: from the prior).

This is an approximation, stated: the ability's posterior (:mod:`~bayes_dualeval.measure.grid`)
is the one-ability model's, so it does not widen for the deviations, and a benchmark's
answers inform both the ability and that benchmark's deviation (the joint posterior would
integrate the deviations out of the ability's likelihood). With a few benchmarks of ten
or so answered questions each, the ability's sd is then too small by about a tenth (13%
in a normal approximation with four benchmarks of ten questions and tau 0.4); the
held-out coverage of docs/validation.md section 14 is measured with it as it is.

*The spread* (:func:`spread`, a moment estimator): for every bank model :math:`m` and
benchmark :math:`B` it answered, the one-step (linearised) deviation that moves its
predicted accuracy onto its observed one, :math:`x_{mB} = (O_{mB} - E_{mB}) / S_{mB}`,
with :math:`E` and :math:`S` the posterior mean of the accuracy and of its slope in
:math:`\theta` over the model's answers, and the binomial noise of :math:`O` in the same
units, :math:`v_{mB} = \sum p (1 - p) / (n S)^2`. The model's ability was fitted to the
same answers, so the deviations are residuals about their precision-weighted mean
(weights :math:`w_B = v_B^{-1} / \sum_C v_C^{-1}`): with :math:`r_{mB} = x_{mB} - \sum_C
w_C x_{mC}`, :math:`E[r_{mB}^2] = \tau^2 (1 - 2 w_B + \sum_C w_C^2) + v_B - 1/\sum_C
v_C^{-1}`, which solved for :math:`\tau^2` over all models and benchmarks (at least 0)
is the estimate. Benchmarks that measure a model to worse than :data:`MAX_NOISE` (a
saturated model) are left out of its sum. With fewer than two benchmarks there is no
deviation to estimate and the spread is 0.
"""

from __future__ import annotations

import numpy as np

from bayes_dualeval.core.thinning import evenly_spaced
from bayes_dualeval.measure.bank import Bank
from bayes_dualeval.model import links

#: Bank draws the spread's predicted accuracies average over.
SPREAD_DRAWS = 100
#: A benchmark whose noise ``v`` (variance of the linearised deviation) exceeds this
#: measures the model too poorly to count in the spread (a saturated model).
MAX_NOISE = 1.0
#: Points of a deviation's grid, spanning :data:`GRID_WIDTH` prior sds on each side.
GRID, GRID_WIDTH = 81, 5.0
#: Largest number of floats in one chunk of (draws x grid points x questions).
CHUNK = 4_000_000


def spread(bank: Bank) -> float:
    r"""The bank's model x benchmark deviation sd :math:`\tau` (the module's estimator).

    Parameters
    ----------
    bank : Bank

    Returns
    -------
    float
        :math:`\hat\tau \ge 0`; 0 when the bank has fewer than two benchmarks of static
        questions, or no model answered two of them.
    """
    static = np.flatnonzero(bank.items["kind"].to_numpy(dtype=str) == "static")
    bench = bank.items["dataset"].to_numpy(dtype=str)
    names, index = np.unique(bench[static], return_inverse=True)
    if len(names) < 2:
        return 0.0
    ds = bank.dataset
    position = np.full(len(bank.items), -1)
    position[static] = np.arange(len(static))
    rows = evenly_spaced(bank.n_draws, SPREAD_DRAWS)
    par = bank.parameters(rows, static)
    theta = bank.draws["theta"][rows]  # (D, M)
    cell_q = position[ds.static_item]
    keep = cell_q >= 0
    model, q = ds.static_model[keep], cell_q[keep]
    y, n = ds.static_y[keep].astype(float), ds.static_n[keep].astype(float)
    eta = links.eta(theta[:, model], *_cols(par, q, "b", "a"))
    c, d = _cols(par, q, "c", "d")
    p = links.probability(eta, c, d)
    a = 1.0 if par["a"] is None else par["a"][:, q]
    span = (1.0 if d is None else d) - (0.0 if c is None else c)
    s = links.sigmoid(eta)
    slope = (a * span * s * (1.0 - s)).mean(axis=0)
    p = p.mean(axis=0)
    group = model * len(names) + index[q]  # (model, benchmark) of each cell
    size = ds.n_models * len(names)
    total = np.bincount(group, weights=n, minlength=size)
    observed = np.bincount(group, weights=y, minlength=size)
    expected = np.bincount(group, weights=n * p, minlength=size)
    slopes = np.bincount(group, weights=n * slope, minlength=size)
    noise = np.bincount(group, weights=n * p * (1.0 - p), minlength=size)
    with np.errstate(divide="ignore", invalid="ignore"):
        x = (observed - expected) / slopes
        v = noise / slopes**2
    ok = (total > 0) & (slopes > 0) & np.isfinite(v) & (v < MAX_NOISE)
    x, v, ok = (z.reshape(ds.n_models, len(names)) for z in (x, v, ok))
    # per model (a row): its benchmarks' deviations around their precision-weighted mean,
    # models with fewer than two usable benchmarks left out
    ok &= ok.sum(axis=1, keepdims=True) >= 2
    x, v = np.where(ok, x, 0.0), np.where(ok, v, 1.0)
    info = np.where(ok, 1.0 / v, 0.0)
    total_info = np.maximum(info.sum(axis=1, keepdims=True), 1e-300)
    w = info / total_info
    r = x - (w * x).sum(axis=1, keepdims=True)
    numerator = float(np.where(ok, r**2 - v + 1.0 / total_info, 0.0).sum())
    denominator = float(np.where(ok, 1.0 - 2.0 * w + (w**2).sum(axis=1, keepdims=True), 0.0).sum())
    if denominator <= 0:
        return 0.0
    return float(np.sqrt(max(numerator / denominator, 0.0)))


def _cols(par: dict, q: np.ndarray, *names):
    return tuple(None if par[k] is None else par[k][:, q] for k in names)


def draw(
    theta: np.ndarray, par: dict, y: np.ndarray, n: np.ndarray, tau: float, rng
) -> np.ndarray:
    r"""One deviation :math:`\delta_B` per bank draw, from its grid posterior.

    Parameters
    ----------
    theta : numpy.ndarray, shape (D,)
        The new model's raw ability, one draw per bank draw.
    par : dict
        ``b, a, c, d`` of the benchmark's answered questions, shape (D, Q) (None where the
        link has none).
    y, n : numpy.ndarray, shape (Q,)
        Correct answers and answers per question (repeated samples counted).
    tau : float
        The deviations' prior sd (:func:`spread`).
    rng : numpy.random.Generator

    Returns
    -------
    numpy.ndarray, shape (D,)
        Zeros when ``tau`` is 0; draws from ``Normal(0, tau^2)`` without answered
        questions; otherwise, per draw, a draw from the posterior on a grid of
        :data:`GRID` points over :data:`GRID_WIDTH` prior sds, spread evenly over its
        cell: ``N(delta; 0, tau^2) prod_q p_q^{y_q} (1 - p_q)^{n_q - y_q}`` at ability
        ``theta + delta``.
    """
    n_draws = len(theta)
    if tau <= 0:
        return np.zeros(n_draws)
    if len(y) == 0:
        return rng.normal(0.0, tau, n_draws)
    grid = np.linspace(-GRID_WIDTH * tau, GRID_WIDTH * tau, GRID)
    step = grid[1] - grid[0]
    logpost = np.empty((n_draws, GRID))
    chunk = max(1, CHUNK // (GRID * len(y)))
    for start in range(0, n_draws, chunk):
        rows = slice(start, min(start + chunk, n_draws))
        ability = theta[rows, None, None] + grid[None, :, None]  # (d, G, 1)
        b, a, c, d = (None if par[k] is None else par[k][rows, None, :] for k in "bacd")
        eta = links.eta(ability, b, a)
        log_p, log_q = links.log_probabilities(eta, c, d)
        logpost[rows] = (y * log_p + (n - y) * log_q).sum(axis=-1)
    logpost += -0.5 * (grid / tau) ** 2
    logpost -= logpost.max(axis=1, keepdims=True)
    cdf = np.cumsum(np.exp(logpost), axis=1)
    u = rng.random(n_draws) * cdf[:, -1]
    pick = np.minimum((cdf < u[:, None]).sum(axis=1), GRID - 1)
    return grid[pick] + step * (rng.random(n_draws) - 0.5)
