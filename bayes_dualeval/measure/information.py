r"""Fisher information about a new model's ability: of a static label, of an arena prompt.

A static question's label is Bernoulli with :math:`p = c + (d - c)\,\sigma(a(\theta - b))`,
so its information is :math:`I(\theta) = p'(\theta)^2 / (p (1 - p))` (:math:`a^2 p (1 - p)`
under 1PL and 2PL).

An arena prompt speaks through the new model's pairs with the bank models that answered
it (or through its reward). Its information is the expected curvature of those likelihood
terms in :math:`\theta`: the curvatures of :mod:`bayes_dualeval.model.arena_term`'s terms
in the logit (``pair_curvature``, ``both_bad_curvature``, ``gaussian_curvature``) times the
square of the score's slope in :math:`\theta`. With
:math:`p = \sigma(a(\theta - b))` the new model's success probability on the prompt,
:math:`p_j` bank model :math:`j`'s, :math:`x_j = \gamma (p - p_j)` and :math:`w` the fit's
pair weight on a prompt with one model more:

.. math::

    I_{\text{pairs}} &= \lambda_{\text{arena}}\, w\, \pi_{\text{dec}}\,
        \gamma^2 p'^2 \sum_j \sigma(x_j)(1 - \sigma(x_j))
        + \lambda_{bb}\, w\, \pi_{bb}\, n\, a^2 p (1 - p), \\
    I_{\text{bt}} &= \lambda_{\text{arena}}\, w\, \pi_{\text{dec}}
        \sum_j \sigma(\theta - \theta_j)(1 - \sigma(\theta - \theta_j)), \\
    I_{\text{reward}} &= \lambda_{\text{arena}}\, \gamma^2 p'^2 / \sigma^2,

with :math:`p' = a p (1 - p)`, :math:`n` the prompt's bank models, and
:math:`\pi_{\text{dec}}`, :math:`\pi_{bb}` the shares of the bank's own pairs on the prompt
that are decisive and both-bad. Which of the new model's pairs will be decisive depends on
its reward, unknown before it is asked; the bank's shares stand in for that. A soft target
:math:`t` enters the curvature only through a term whose expectation is zero, so the
information is that of a Bernoulli comparison with probability :math:`\sigma(x_j)`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bayes_dualeval.measure.grid import pair_kinds
from bayes_dualeval.measure.kernels import padded_rows
from bayes_dualeval.model import arena_term, links
from bayes_dualeval.model.inputs import contrast_weight


def fisher_information(theta, b, a=None, c=None, d=None):
    """Fisher information of one Bernoulli label about ``theta``, elementwise.

    Parameters
    ----------
    theta, b : array_like
        Ability and difficulty (broadcast together).
    a, c, d : array_like, optional
        Discrimination, floor and ceiling; 1, 0 and 1 when None.

    Returns
    -------
    numpy.ndarray
        ``a^2 p'^2 / (p (1 - p))`` with ``p'`` the derivative in ``eta``.
    """
    eta = links.eta(theta, b, a)
    _, info_eta = links.bernoulli_score(0.0, eta, c, d)
    return info_eta if a is None else a * a * info_eta


@dataclass(frozen=True)
class Prompts:
    """The bank models on each arena prompt, padded, and the shares of their pairs.

    Attributes
    ----------
    other, mask : numpy.ndarray, shape (Q, M_max)
        Bank model indices on each bank item (rows of static items are empty) and 1 where
        a model is present.
    weight : numpy.ndarray, shape (Q,)
        The fit's pair weight on the prompt with one new model added.
    decisive, both_bad : numpy.ndarray, shape (Q,)
        Shares of the bank models' pairs on the prompt that enter the fit as decisive and as
        both-bad pairs (ties are neither; under Bradley-Terry both-bad pairs are dropped).
    """

    other: np.ndarray
    mask: np.ndarray
    weight: np.ndarray
    decisive: np.ndarray
    both_bad: np.ndarray


def prompts(bank) -> Prompts:
    """The :class:`Prompts` table of ``bank``'s arena data."""
    ds = bank.dataset
    n_items = len(bank.items)
    index, mask = padded_rows(ds.arena_item, n_items)
    if len(ds.arena_item):
        other = np.asarray(ds.arena_model)[index]
        z = np.asarray(ds.arena_z, dtype=np.float64)[index]
        judge = np.asarray(ds.arena_judge, dtype=np.int64)[index]
    else:
        other, z, judge = np.zeros_like(index), np.zeros(index.shape), np.zeros_like(index)
    # every pair of the prompt's bank models once, as one judge scored both: (Q, R, R)
    both = (mask[:, :, None] * mask[:, None, :]) * np.triu(np.ones(mask.shape[1:] * 2), 1)
    both = both * (judge[:, :, None] == judge[:, None, :])
    kept, bad = pair_kinds(bank, z[:, :, None], z[:, None, :], judge[:, :, None])
    n_pairs = np.maximum(both.sum(axis=(1, 2)), 1.0)
    bt = bank.model.arena.kind == "bt"
    decisive = (both * (kept & ~bad)).sum(axis=(1, 2)) / n_pairs
    both_bad = np.zeros(n_items) if bt else (both * (kept & bad)).sum(axis=(1, 2)) / n_pairs
    n_models = mask.sum(axis=1)
    weight = contrast_weight(n_models + 1, bank.model.config.arena_likelihood)
    return Prompts(other=other, mask=mask, weight=weight.astype(np.float64),
                   decisive=decisive, both_bad=both_bad)  # fmt: skip


def arena_information(bank, table: Prompts, theta, items, rows) -> np.ndarray:
    r"""Expected information of each arena prompt about a new model's raw ability.

    Parameters
    ----------
    bank : Bank
    table : Prompts
        From :func:`prompts`.
    theta : numpy.ndarray, shape (len(rows),)
        The new model's raw ability at each draw.
    items : numpy.ndarray of int
        Bank indices of arena prompts.
    rows : numpy.ndarray of int
        Bank draws.

    Returns
    -------
    numpy.ndarray, shape (len(rows), len(items))
        The module's :math:`I_{\text{pairs}}`, :math:`I_{\text{bt}}` or
        :math:`I_{\text{reward}}`, by the bank's arena likelihood.
    """
    arena = bank.model.arena
    items, rows = np.asarray(items, dtype=int), np.asarray(rows, dtype=int)
    theta = np.asarray(theta, dtype=np.float64)[:, None]  # (D, 1)
    mask = table.mask[items][None]  # (1, C, M)
    theta_j = bank.draws["theta"][rows][:, table.other[items]]  # (D, C, M)
    lam = arena.weight
    if arena.kind == "bt":
        comparisons = arena_term.pair_curvature(theta[..., None] - theta_j, mask).sum(axis=2)
        return lam * (table.weight * table.decisive)[items] * comparisons
    par = bank.parameters(rows, items)
    b, a = par["b"], par["a"]
    p = links.probability(links.eta(theta, b, a))  # (D, C)
    slope = 1.0 if a is None else a
    dp = slope * p * (1 - p)
    gamma = bank.draws["gamma"][rows][:, None]
    # d score / d theta of the new model's cell
    dscore = arena.score_difference(dp, gamma)
    if arena.kind == "reward":
        sigma = bank.draws["sigma"][rows][:, None]
        return lam * arena_term.gaussian_curvature(sigma) * dscore**2
    a_j = None if a is None else a[..., None]
    p_j = links.probability(links.eta(theta_j, b[..., None], a_j))
    x = arena.score(p[..., None], gamma[..., None]) - arena.score(p_j, gamma[..., None])
    soft = lam * (table.weight * table.decisive)[items] * dscore**2
    soft = soft * arena_term.pair_curvature(x, mask).sum(axis=2)
    n = table.mask[items].sum(axis=1)
    bb = arena.both_bad_weight * (table.weight * table.both_bad)[items] * n
    eta = links.eta(theta, b, a)
    return soft + bb * slope**2 * arena_term.both_bad_curvature(eta, 1.0)
