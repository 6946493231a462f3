r"""Person fit: whether a new model's static labels fit the bank at the model's ability.

The statistic is the standardised log likelihood of the model's labels (Drasgow, Levine
and Williams 1985) with Snijders' (2001) correction for an estimated ability, written with
the bank's posterior predictive probability of success :math:`\bar p_q(u) = \frac1D \sum_d
p(\bar\theta_d + u; \phi_{d,q})` on question :math:`q` at ability :math:`u` (on the
leaderboard's scale). The log likelihood's deviation from its expectation is
:math:`\ell - E\ell = \sum_q (y_q - \bar p_q)\, w_q` with :math:`w_q =
\operatorname{logit} \bar p_q`. Part of it only says that the ability is not where it was
put: the part along the score direction :math:`r_q = \bar p_q' / (\bar p_q (1 - \bar p_q))`,
which the ability estimate absorbs. With that part removed,

.. math::

    l_z^* = \frac{\sum_q (y_q - \bar p_q)(w_q - c\, r_q)}
                 {\sqrt{\sum_q \bar p_q (1 - \bar p_q)(w_q - c\, r_q)^2}},
    \qquad c = \frac{\sum_q \bar p_q' w_q}{\sum_q \bar p_q' r_q},

is close to standard normal even when :math:`u` is estimated from the same labels (plain
:math:`l_z` at an estimated ability has a variance below 1, so its p-values are
conservative: on simulated 200-question pools with the items known, ``l_z`` flagged 3.0%
of clean models at the 5% level and :math:`l_z^*` 5.1%, and a 15% flip 70% against 76%;
``scripts/person_fit_bound.py``). ``fit_p`` is :math:`E[\Phi(l_z^*(u))]` over the model's
ability posterior: a posterior predictive p-value, small when the labels are less likely
than the bank predicts (a changed harness or prompt format, a different grader,
contamination). :math:`\bar p'` is the grid's central difference.

Why :math:`\bar p`, not :math:`p` at each draw: the new labels were produced by the true
items, which the bank knows only up to its posterior. Scored at a posterior draw
:math:`\phi_d` they are less likely than labels replicated from that same draw, by about the
draw's distance from the truth, so a per-draw reference flags clean models of small banks
(on 10 bank models x 120 questions it gave clean models ``fit_p`` down to 0.003). Under the
frozen bank each label is Bernoulli(:math:`\bar p_q`) given the ability, so
:math:`\bar p` is the reference the labels really have. Scoring against an independent
draw instead was tried and was both conservative and weaker.
"""

from __future__ import annotations

import numpy as np
from scipy import special

from bayes_dualeval.checks.person_fit import MIN_FIT_ITEMS, lz_star
from bayes_dualeval.core.thinning import evenly_spaced
from bayes_dualeval.measure import kernels
from bayes_dualeval.measure.bank import Bank
from bayes_dualeval.measure.grid import GridPosterior, sum_by_model
from bayes_dualeval.measure.responses import Responses

#: Bank draws averaged into the predictive probability :math:`\bar p`.
PREDICTIVE_DRAWS = 200
#: Ability draws the p-value averages over.
FIT_DRAWS = 200


def predictive_success(bank: Bank, resp: Responses, grids: np.ndarray) -> np.ndarray:
    """The bank's predictive success probability of each static label on its grid, (C, G).

    ``grids`` is :attr:`GridPosterior.grids` (K, G); the result is the mean over
    :data:`PREDICTIVE_DRAWS` bank draws of the label's question's success probability at
    each point of its model's grid (one compiled kernel, :mod:`~bayes_dualeval.measure.kernels`).
    """
    rows = evenly_spaced(bank.n_draws, PREDICTIVE_DRAWS)
    lay = kernels.layout(bank, resp, None)  # static labels only
    padded = kernels.mean_success(lay, grids, rows)  # (K, S_max, G)
    index, mask = kernels.padded_rows(resp.static_model, resp.n_models)
    out = np.zeros((len(resp.static_y), grids.shape[1]))
    out[index[mask > 0]] = padded[mask > 0]
    return out


def person_fit(bank: Bank, resp: Responses, post: GridPosterior, theta: np.ndarray) -> np.ndarray:
    """``fit_p`` of each new model (NaN below :data:`MIN_FIT_ITEMS` static labels).

    Parameters
    ----------
    bank : Bank
    resp : Responses
    post : GridPosterior
        The new models' grid posterior (its grids).
    theta : numpy.ndarray, shape (K, S)
        Ability draws of each new model on the leaderboard's scale.

    Returns
    -------
    numpy.ndarray, shape (K,)
    """
    k = resp.n_models
    out = np.full(k, np.nan)
    counts = np.bincount(resp.static_model, minlength=k)
    if not (counts >= MIN_FIT_ITEMS).any():
        return out
    p_bar = predictive_success(bank, resp, post.grids)
    grids = post.grids[resp.static_model]  # (C, G)
    step = grids[:, 1:2] - grids[:, :1]
    slope_bar = np.gradient(p_bar, axis=1) / step  # d p_bar / du on the grid
    u = theta[:, evenly_spaced(theta.shape[1], FIT_DRAWS)][resp.static_model]  # (C, S)
    pos = np.clip((u - grids[:, :1]) / step, 0.0, grids.shape[1] - 1.000001)
    left = np.floor(pos).astype(int)
    frac = pos - left

    def at_draws(values):  # (C, G) at the ability draws, linear between grid points: (S, C)
        return (np.take_along_axis(values, left, 1) * (1 - frac)
                + np.take_along_axis(values, left + 1, 1) * frac).T  # fmt: skip

    p = np.clip(at_draws(p_bar), 1e-12, 1 - 1e-12)
    slope = at_draws(slope_bar)
    k_obs, n = resp.static_y[None, :], resp.static_n[None, :]  # a cell's k of n answers

    def per_model(x):  # (S, C) summed over each model's labels: (S, K)
        return sum_by_model(x[..., None], resp.static_model, k)[..., 0]

    # a cell of n answers weighs n times a label in every sum (n = 1: the labels' lz*)
    lz = lz_star(k_obs, n, p, slope, resp.static_model, per_model)
    ok = counts >= MIN_FIT_ITEMS
    out[ok] = special.ndtr(lz[:, ok]).mean(axis=0)
    return out
