r"""The ``reward`` arena likelihood's checks: cells, prompt fit and per-model replicates.

An arena cell under the ``reward`` likelihood compares the normalised reward with
:math:`\bar z_q + \gamma(p_{iq} - \bar p_q)` (the prompt offset integrated out, as in
:func:`~bayes_dualeval.model.likelihood.reward_per_item`; computed by
:func:`~bayes_dualeval.model.arena_term.reward_mean`) and residual standard deviation
:math:`\sigma\sqrt{1 - 1/n_q}`.

The cell's surprise is one-sided, in the direction of contamination (a reward above what
the model predicts; DualEval's protocol adds 2.0 to the z-score of low-reward cells). Unit:
the normalised reward :math:`z` (the loader's z-score). Null: in each draw,
:math:`z^{rep} \sim N(\mu_d, \sigma_d^2 (1 - 1/n_q))`; ``p_value`` :math:`= P(z^{rep}
\ge z)`, the normal upper tail averaged over draws, and ``p_lower`` :math:`= 1 -`
``p_value``. Residuals of one prompt sum to zero (the prompt offset is integrated out), so
their p-values are negatively dependent: the cell table adjusts them by
Benjamini-Yekutieli.
"""

from __future__ import annotations

import numpy as np
from scipy import special

from bayes_dualeval.checks.arena import ArenaPass, prompt_ppp
from bayes_dualeval.checks.budget import chunks, replicate_index
from bayes_dualeval.checks.cells import EPS, Cells
from bayes_dualeval.checks.fitted import FittedRun
from bayes_dualeval.core.grouping import group_matrix
from bayes_dualeval.model import links
from bayes_dualeval.model.arena_term import reward_mean


def reward_stats(fit: FittedRun, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Reward likelihood: per-cell mean and residual sd in draws ``d``, (k, R) each."""
    ds = fit.dataset
    item = ds.arena_item
    to_item = group_matrix(item, ds.n_items)
    n_q = np.bincount(item, minlength=ds.n_items).astype(np.float64)
    z = ds.arena_z.astype(np.float64)
    zbar = np.bincount(item, weights=z, minlength=ds.n_items) / np.maximum(n_q, 1)
    p = links.probability(fit.eta(d, ds.arena_model, item).astype(np.float64))
    pbar = (to_item @ p.T).T / np.maximum(n_q, 1)
    mu = reward_mean(p, pbar[:, item], fit.gamma[d].astype(np.float64)[:, None], zbar[item])
    sd = fit.sigma[d].astype(np.float64)[:, None] * np.sqrt(1.0 - 1.0 / n_q[item])
    return mu, sd


def reward_pass(fit: FittedRun, draws: np.ndarray, rng) -> ArenaPass:
    """The reward likelihood's cells (normalised rewards), prompt fit and model replicates.

    Prompt discrepancy: the sum of squared within-prompt residuals over ``sigma_d^2``
    (``sd = sigma sqrt(1 - 1/n)`` is the residual's own sd), ``k = n_q - 1``.
    """
    ds = fit.dataset
    z = ds.arena_z.astype(np.float64)
    n_items, n_draw = ds.n_items, len(draws)
    to_item = group_matrix(ds.arena_item, n_items)
    to_model = group_matrix(ds.arena_model, ds.n_models)
    n_q = np.bincount(ds.arena_item, minlength=n_items).astype(np.float64)
    dof = np.maximum(n_q - 1.0, 0.0)
    s1, s2, sv, upper = (np.zeros(len(z)) for _ in range(4))
    discrepancy = np.zeros((n_items, n_draw))
    done = 0
    for d in chunks(draws, len(z)):
        mu, sd = reward_stats(fit, d)
        s1 += mu.sum(axis=0)
        s2 += (mu**2).sum(axis=0)
        sv += (sd**2).sum(axis=0)
        scaled = (z - mu) / np.maximum(sd, EPS)
        upper += special.ndtr(-scaled).sum(axis=0)
        discrepancy[:, done : done + len(d)] = (to_item @ (scaled**2).T) * (
            dof / np.maximum(n_q, 1.0)
        )[:, None]
        done += len(d)
    mean = s1 / n_draw
    var = np.clip(s2 / n_draw - mean**2, 0.0, None) + sv / n_draw
    upper /= n_draw
    cells = Cells(
        model=ds.arena_model,
        item=ds.arena_item,
        observed=z,
        expected=mean,
        residual=(z - mean) / np.sqrt(np.maximum(var, EPS)),
        p_value=np.clip(upper, 0.0, 1.0),
        p_lower=np.clip(1.0 - upper, 0.0, 1.0),
        used=np.ones(len(z), dtype=bool),
    )
    item_ppp, rho = prompt_ppp(fit, discrepancy, dof)
    rep = replicate_index(draws)
    count = np.bincount(ds.arena_model, minlength=ds.n_models).astype(np.float64)
    reps = np.zeros((len(rep), ds.n_models))
    done = 0
    for d in chunks(rep, len(z)):
        mu, sd = reward_stats(fit, d)
        sim = mu + sd * rng.standard_normal(mu.shape)
        reps[done : done + len(d)] = (to_model @ sim.T).T
        done += len(d)
    with np.errstate(invalid="ignore", divide="ignore"):
        return ArenaPass(
            cells=cells,
            phi=float("nan"),
            item_ppp=item_ppp,
            rho=rho,
            model_observed=(to_model @ z) / count,
            model_reps=reps / count,
            model_count=count,
            pair_mean=None,
            n_draws=n_draw,
        )
