r"""Each question's ``(b, log a)`` posterior on a grid, per bank draw of the abilities.

The dual of :mod:`~bayes_dualeval.measure.grid`: there a new model's ability is one number
given the bank's item draws; here a question's parameters are two numbers (one under the
1PL link) given the bank models' abilities in draw :math:`d`, so its posterior is computed
on a grid, not sampled. In the coordinates the fit uses, :math:`u = b - \bar\theta_d`
(the difficulty relative to the bank models' mean ability in the draw, which one grid fits
for every draw) and :math:`v = \log a`,

.. math::

    \log p(u, v \mid y, \theta_d) = \sum_m \ell(y_{m} \mid a (\theta_{dm} - \bar\theta_d - u))
        + \log N(u \mid \mu_{b,d}, \sigma_{b,d}) + \log N(v \mid \mu_{\log a,d},
        \sigma_{\log a,d}) + \text{const},

with the run's Bernoulli likelihood (:func:`~bayes_dualeval.model.links.bernoulli_loglik`)
and the item prior of the draw (chosen by :func:`~bayes_dualeval.measure.calibrate.calibrate`).
The question's posterior is the mixture over draws: the abilities' uncertainty is carried
along, and the bank is not updated by the new answers (a cut, as for scores).

The grid is chosen per question in two passes: a coarse grid (:data:`COARSE_U` x
:data:`COARSE_V`) at :data:`COARSE_DRAWS` draws finds the box where the log density is
within :data:`COVER` of its mode in any draw, then :data:`GRID_U` x :data:`GRID_V` points
span it. Every pass is one compiled program over questions, grid points and models,
mapped over draws (:func:`jax.lax.map`); draws are taken in every draw's grid cells and
jittered uniformly within the cell. With ``log a`` held at given values per draw (a
common question's slope in the bank), the grid is of ``u`` alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from bayes_dualeval.core.grid_span import covered_span
from bayes_dualeval.core.thinning import evenly_spaced
from bayes_dualeval.model import links

#: Coarse grid of ``u = b - mean ability`` and of ``v = log a``.
COARSE_U = np.linspace(-12.0, 12.0, 97)
COARSE_V = np.linspace(-3.0, 3.0, 25)
#: Bank draws the coarse pass uses.
COARSE_DRAWS = 20
#: Log-density drop below the mode that the fine grid still covers.
COVER = 15.0
#: Fine grid points of ``u`` and of ``v`` (one ``v`` under the 1PL link).
GRID_U, GRID_V = 41, 21


@dataclass(frozen=True)
class ItemPrior:
    """The item prior of every question at every bank draw.

    Attributes
    ----------
    mu_b, sigma_b : numpy.ndarray, shape (D, J)
        Location and scale of ``b - mean ability``.
    mu_log_a, sigma_log_a : numpy.ndarray, shape (D, J), or None
        Location and scale of ``log a`` (None under the 1PL link: ``a = 1``).
    """

    mu_b: np.ndarray
    sigma_b: np.ndarray
    mu_log_a: np.ndarray | None = None
    sigma_log_a: np.ndarray | None = None


@dataclass(frozen=True)
class ItemDraws:
    """Draws of every question's parameters, ``per_draw`` per bank draw.

    Attributes
    ----------
    u : numpy.ndarray, shape (J, D, R)
        ``b - mean ability`` of the draw.
    log_a : numpy.ndarray, shape (J, D, R), or None
        None under the 1PL link.
    """

    u: np.ndarray
    log_a: np.ndarray | None


def _log_post(centred, prior, correct, answers, u, v):
    """Log posterior density at every grid point of every question, one draw: (J, Gu, Gv).

    ``centred`` (M,), ``prior`` five (J,) arrays (``mu_b, sigma_b, mu_log_a, sigma_log_a``
    and a fixed ``log a`` added to ``v``; ``sigma_log_a`` 0: no ``v`` term), ``correct``
    and ``answers`` (J, M), ``u`` (J, Gu), ``v`` (J, Gv).
    """
    mu_b, sd_b, mu_v, sd_v, fixed = prior
    a = jnp.exp(v + fixed[:, None])[:, None, :, None]  # (J, 1, Gv, 1)
    eta = links.eta(centred[None, None, None, :], u[:, :, None, None], a)  # (J, Gu, Gv, M)
    share = (correct / jnp.maximum(answers, 1.0))[:, None, None, :]
    ll = jnp.sum(answers[:, None, None, :] * links.bernoulli_loglik(share, eta), axis=-1)
    lp_u = -0.5 * ((u - mu_b[:, None]) / sd_b[:, None]) ** 2
    safe = jnp.where(sd_v > 0, sd_v, 1.0)[:, None]
    lp_v = jnp.where(sd_v[:, None] > 0, -0.5 * ((v - mu_v[:, None]) / safe) ** 2, 0.0)
    return ll + lp_u[:, :, None] + lp_v[:, None, :]


@jax.jit
def _box(centred, prior, correct, answers, u, v):
    """Per question, the grid points within :data:`COVER` of the mode in any draw."""

    def one(args):
        lp = _log_post(args[0], args[1:], correct, answers, u, v)
        return lp >= lp.max(axis=(1, 2), keepdims=True) - COVER

    near = jax.lax.map(one, (centred, *prior))  # (D, J, Gu, Gv)
    return near.any(axis=(0, 3)), near.any(axis=(0, 2))


@jax.jit
def _sample(keys, centred, prior, correct, answers, u, v, per_draw):
    """``per_draw`` grid cells per question and draw, and uniform jitters: (D, J, R) each."""

    def one(args):
        key, theta, *rest = args
        lp = _log_post(theta, rest, correct, answers, u, v)
        flat = lp.reshape(lp.shape[0], -1)
        k_cell, k_jitter = jax.random.split(key)
        cell = jax.random.categorical(k_cell, flat, axis=-1, shape=(per_draw.shape[0], len(flat)))
        jitter = jax.random.uniform(k_jitter, (2, *cell.shape), minval=-0.5, maxval=0.5)
        return cell.T, jitter.transpose(0, 2, 1)

    return jax.lax.map(one, (keys, centred, *prior))


def _priors(prior: ItemPrior, rows, fixed) -> tuple:
    """The five (len(rows), J) float32 arrays of :func:`_log_post` (``v`` terms 0 unused)."""
    zero = np.zeros_like(prior.mu_b)
    mu_v = zero if prior.mu_log_a is None or fixed is not None else prior.mu_log_a
    sd_v = zero if prior.sigma_log_a is None or fixed is not None else prior.sigma_log_a
    fixed = zero if fixed is None else fixed
    return tuple(
        jnp.asarray(x[rows], jnp.float32) for x in (prior.mu_b, prior.sigma_b, mu_v, sd_v, fixed)
    )


def _span(grid: np.ndarray, covered: np.ndarray, n: int) -> np.ndarray:
    """Per question, ``n`` points spanning the covered part of ``grid`` (one step beyond)."""
    return np.linspace(*covered_span(grid, covered), n, axis=1)


def item_posterior(
    centred: np.ndarray,
    prior: ItemPrior,
    correct: np.ndarray,
    answers: np.ndarray,
    *,
    per_draw: int = 4,
    seed: int = 0,
    fixed_log_a: np.ndarray | None = None,
) -> ItemDraws:
    """Draws of every question's ``(b - mean ability, log a)`` (see the module).

    Parameters
    ----------
    centred : numpy.ndarray, shape (D, M)
        The bank models' abilities minus their mean, per bank draw.
    prior : ItemPrior
    correct, answers : numpy.ndarray, shape (J, M)
        Correct answers and answers of each bank model on each question (0 unanswered).
    per_draw : int
        Draws per bank draw.
    seed : int
    fixed_log_a : numpy.ndarray, shape (D, J), optional
        Hold every question's ``log a`` at these values (the bank's draws of a common
        question's slope) and compute the posterior of ``u`` alone; ``log_a`` of the
        result is then None.

    Returns
    -------
    ItemDraws
    """
    slope = prior.sigma_log_a is not None and fixed_log_a is None
    n_draws = len(centred)
    theta = jnp.asarray(centred, jnp.float32)
    y = jnp.asarray(correct, jnp.float32)
    n = jnp.asarray(answers, jnp.float32)
    n_items = len(correct)
    coarse_v = COARSE_V if slope else np.zeros(1)
    rows = evenly_spaced(n_draws, COARSE_DRAWS)
    u0 = jnp.asarray(np.broadcast_to(COARSE_U, (n_items, len(COARSE_U))), jnp.float32)
    v0 = jnp.asarray(np.broadcast_to(coarse_v, (n_items, len(coarse_v))), jnp.float32)
    cover_u, cover_v = _box(theta[rows], _priors(prior, rows, fixed_log_a), y, n, u0, v0)
    u = _span(COARSE_U, np.asarray(cover_u), GRID_U)
    v = _span(COARSE_V, np.asarray(cover_v), GRID_V) if slope else np.zeros((n_items, 1))
    keys = jax.random.split(jax.random.PRNGKey(seed), n_draws)
    cell, jitter = _sample(
        keys, theta, _priors(prior, np.arange(n_draws), fixed_log_a), y, n,
        jnp.asarray(u, jnp.float32), jnp.asarray(v, jnp.float32), jnp.zeros(per_draw),
    )  # fmt: skip
    cell, jitter = np.asarray(cell), np.asarray(jitter, np.float64)  # (D, J, R), (D, 2, J, R)
    n_v = v.shape[1]
    j = np.arange(n_items)[None, :, None]
    step_u = (u[:, 1] - u[:, 0])[None, :, None]
    u_draws = u[j, cell // n_v] + jitter[:, 0] * step_u
    log_a = None
    if slope:
        step_v = (v[:, 1] - v[:, 0])[None, :, None]
        log_a = (v[j, cell % n_v] + jitter[:, 1] * step_v).transpose(1, 0, 2)
    return ItemDraws(u=u_draws.transpose(1, 0, 2), log_a=log_a)
