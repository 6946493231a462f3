r"""Each new model's ability posterior against a frozen bank, exactly, on a grid.

A new model's ability :math:`\theta` is one number, so its posterior given the bank's item
parameters :math:`\phi_d` (posterior draw :math:`d`) is computed on a grid, not sampled:

.. math::

    \log p(\theta \mid y, \phi_d) = \ell(y \mid \theta, \phi_d)
        - \tfrac12 (\theta / s)^2 + \text{const},

with the model's ability prior :math:`\theta \sim N(0, s)` (``theta_scale``) and the
likelihood terms of the fit: Bernoulli labels under the run's link for static items, and
for arena prompts the new model's soft pairs against the bank models on the same prompt
(distilled with the bank's tie and both-bad thresholds, weighted like the fit's pairs), or
its reward under the ``reward`` likelihood. The new model's ability posterior is the
mixture over the bank's draws, :math:`p(\theta \mid y) = \frac1D \sum_d p(\theta \mid y,
\phi_d)`: the items' uncertainty is carried along, and the items are *not* updated by the
new model's responses (a "cut" of the feedback, which keeps the bank frozen and each new
model's score independent of the others scored with it). The arena level term (a prompt's
mean reward) is left out: it speaks of the prompts, not of one more model.

The grid is on the leaderboard's scale: ability relative to the bank models' mean in the
draw, :math:`\theta = \bar\theta_d + u`, so that one grid of :math:`u` fits every draw
(the raw scale's location moves from draw to draw with the bank's mean ability). It is
chosen per model in two passes: a coarse grid over :math:`\pm 6 s` at a few draws finds
where the posterior lives, then :data:`GRID` points span it. Every array is
vectorised over draws, cells and grid points, in chunks of at most :data:`CHUNK` numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from bayes_dualeval.core.grid_span import covered_span
from bayes_dualeval.core.grouping import group_matrix
from bayes_dualeval.core.thinning import evenly_spaced
from bayes_dualeval.measure import kernels
from bayes_dualeval.measure.bank import Bank, shift
from bayes_dualeval.measure.responses import Responses
from bayes_dualeval.model import arena_term, links
from bayes_dualeval.model.inputs import contrast_weight

#: Points of the fine grid of each model.
GRID = 49
#: Points and half-width (in prior sds) of the coarse grid that locates the posterior.
COARSE, COARSE_HALF_WIDTH = 61, 6.0
#: Bank draws the coarse pass uses.
COARSE_DRAWS = 50
#: Log-density drop below the mode that the fine grid still covers.
COVER = 15.0
#: Largest number of floats in one chunk of (draws x cells x grid points).
CHUNK = 4_000_000


@dataclass(frozen=True)
class ArenaPairs:
    """The new models' arena pairs against bank models (decisive and both-bad).

    Attributes
    ----------
    model : numpy.ndarray of int
        New-model index of each pair.
    item : numpy.ndarray of int
        Bank item index of the prompt.
    other : numpy.ndarray of int
        Bank model on the other side.
    target : numpy.ndarray of float
        ``sigmoid(z_new - z_other)`` on the bank's normalisation.
    weight : numpy.ndarray of float
        The fit's pair weight with the new model counted on the prompt.
    both_bad : numpy.ndarray of bool
    z, z_other : numpy.ndarray of float
        The two normalised rewards.
    judge : numpy.ndarray of int
        The judge of both rewards (index into the bank's judges; 0 without judges).
    row, other_row : numpy.ndarray of int
        The new arena cell (a row of the responses' arena arrays) and the bank's arena
        cell of each pair.
    """

    model: np.ndarray
    item: np.ndarray
    other: np.ndarray
    target: np.ndarray
    weight: np.ndarray
    both_bad: np.ndarray
    z: np.ndarray
    z_other: np.ndarray
    judge: np.ndarray
    row: np.ndarray
    other_row: np.ndarray

    def __len__(self) -> int:
        return len(self.model)


def pair_kinds(bank: Bank, z, z_other, judge) -> tuple[np.ndarray, np.ndarray]:
    """Which pairs of normalised rewards the fit keeps, and which of those are both-bad.

    A pair is a tie (not kept) when ``|z - z_other|`` is at or below its judge's tie
    threshold in the bank, and both-bad when its larger reward is at or below its judge's
    both-bad threshold; elementwise over broadcast ``z``, ``z_other`` and ``judge`` (index
    into the bank dataset's judges; a bank whose thresholds are plain numbers applies them
    to every judge).
    """
    tie, bb = (np.asarray(t) for t in (bank.tie_threshold, bank.bb_threshold))
    tie, bb = (t[judge] if t.ndim else t for t in (tie, bb))
    return np.abs(z - z_other) > tie, np.maximum(z, z_other) <= bb


def _dataset_judge(bank: Bank, judge: np.ndarray) -> np.ndarray:
    """The bank dataset's judge index of arena judges ``judge`` (index into the facets').

    Without facets the arena has one judge: its cells' judge in the dataset.
    """
    ds = bank.dataset
    if bank.facets is None:
        first = int(ds.arena_judge[0]) if len(ds.arena_judge) else 0
        return np.full(np.shape(judge), first, np.int64)
    index = np.searchsorted(np.asarray(ds.judges).astype(str), bank.facets.judges)
    return index[judge]


def arena_pairs(bank: Bank, resp: Responses) -> ArenaPairs:
    """Pair each new arena reward with the bank models' rewards on the same prompt and judge.

    Ties (``|dz|`` at or below the bank's tie threshold) are dropped; a pair whose larger
    reward is at or below the bank's both-bad threshold is both-bad (under Bradley-Terry,
    both-bad pairs are dropped, as the fit does). With several judges a reward meets only
    the bank's rewards of its own judge on the prompt (a *unit*), as in the fit.
    """
    ds = bank.dataset
    n_new, n_old = len(resp.arena_item), len(ds.arena_item)
    judge_new = resp.facets.judge if resp.facets is not None else np.zeros(n_new, np.int64)
    judge_old = bank.facets.judge if bank.facets is not None else np.zeros(n_old, np.int64)
    new = pd.DataFrame({"row": np.arange(n_new), "item": resp.arena_item, "judge": judge_new})
    old = pd.DataFrame({
        "item": ds.arena_item, "judge": judge_old, "other": ds.arena_model,
        "z_other": ds.arena_z, "other_row": np.arange(n_old),
    })  # fmt: skip
    both = new.merge(old, on=["item", "judge"], how="inner")
    both = both.sort_values(["row", "other"], kind="stable")
    row = both["row"].to_numpy()
    z, z_other = resp.arena_z[row], both["z_other"].to_numpy(dtype=np.float64)
    dz = z - z_other
    item, judge = both["item"].to_numpy(), both["judge"].to_numpy()
    keep, both_bad = pair_kinds(bank, z, z_other, _dataset_judge(bank, judge))
    if bank.model.arena_term == "bt":
        keep &= ~both_bad
    # the models of the pair's unit (its prompt as its judge scored it), the new one too
    n_judges = bank.facets.n_judges if bank.facets is not None else 1
    unit_models = np.bincount(
        judge_old * ds.n_items + ds.arena_item, minlength=ds.n_items * n_judges
    )
    n_models = unit_models[judge * ds.n_items + item] + 1
    weight = contrast_weight(n_models, bank.model.config.arena_likelihood)
    k = keep
    return ArenaPairs(
        model=resp.arena_model[row][k],
        item=item[k],
        other=both["other"].to_numpy()[k],
        target=(0.5 * (1.0 + np.tanh(0.5 * dz[k]))).astype(np.float32),
        weight=weight[k].astype(np.float32),
        both_bad=both_bad[k],
        z=z[k],
        z_other=z_other[k],
        judge=judge[k],
        row=row[k],
        other_row=both["other_row"].to_numpy()[k],
    )


def loglik(
    bank: Bank, resp: Responses, pairs: ArenaPairs, grids: np.ndarray, rows, lay=None
) -> np.ndarray:
    """Log likelihood of each new model's responses at its grid, per bank draw.

    Parameters
    ----------
    bank : Bank
    resp : Responses
    pairs : ArenaPairs
    grids : numpy.ndarray, shape (K, G)
        Abilities relative to the bank models' mean
        (:func:`~bayes_dualeval.measure.bank.shift`), per model.
    rows : numpy.ndarray of int
        Bank draws.
    lay : bayes_dualeval.measure.kernels.Layout, optional
        The responses' compiled layout (built here when None).

    Returns
    -------
    numpy.ndarray, shape (K, len(rows), G)
    """
    rows = np.asarray(rows)
    lay = kernels.layout(bank, resp, pairs) if lay is None else lay
    out = kernels.loglik(lay, grids, rows).astype(np.float64)  # (D, K, G)
    if len(resp.arena_item) and bank.model.arena_term == "reward":
        step = max(1, CHUNK // max(len(resp.arena_item) * grids.shape[1], 1))
        for start in range(0, len(rows), step):
            d = rows[start : start + step]
            out[start : start + step] += _rewards(bank, resp, grids, d)
    return out.transpose(1, 0, 2)


def sum_by_model(values: np.ndarray, model: np.ndarray, n_models: int) -> np.ndarray:
    """Sum (draws, cells, G) over the cells of each model: (draws, K, G)."""
    n_d, n_c, n_g = values.shape
    matrix = group_matrix(model, n_models)
    flat = values.transpose(1, 0, 2).reshape(n_c, n_d * n_g)
    return np.asarray(matrix @ flat).reshape(n_models, n_d, n_g).transpose(1, 0, 2)


def _raw(grids: np.ndarray, index: np.ndarray, bank: Bank, d: np.ndarray) -> np.ndarray:
    """Raw abilities (D, len(index), G) of the grid rows ``index`` at draws ``d``."""
    return grids[index][None].astype(np.float32) + shift(bank, d)[:, None, None]


def _rewards(bank: Bank, resp: Responses, grids: np.ndarray, d: np.ndarray) -> np.ndarray:
    """``z ~ Normal(zbar_q + gamma (p - pbar_q), sigma)`` with the bank's prompt means.

    :func:`~bayes_dualeval.model.arena_term.gaussian` around
    :func:`~bayes_dualeval.model.arena_term.reward_mean`, weighted by ``lambda_arena``.
    """
    ds = bank.dataset
    par = bank.parameters(d)
    b_cells, a_cells = par["b"][:, ds.arena_item], _take(par["a"], ds.arena_item)
    theta_cells = bank.draws["theta"][d][:, ds.arena_model]
    p_bank = links.probability(links.eta(theta_cells, b_cells, a_cells))
    n = np.maximum(np.bincount(ds.arena_item, minlength=ds.n_items), 1)
    pbar = np.asarray(group_matrix(ds.arena_item, ds.n_items) @ p_bank.T).T / n  # (D, Q)
    zbar = np.bincount(ds.arena_item, weights=ds.arena_z, minlength=ds.n_items) / n
    q = resp.arena_item
    mine = _raw(grids, resp.arena_model, bank, d)
    eta = links.eta(mine, par["b"][:, q, None], _col(_take(par["a"], q)))
    gamma, sigma = bank.draws["gamma"][d][:, None, None], bank.draws["sigma"][d][:, None, None]
    mu = arena_term.reward_mean(
        links.probability(eta), pbar[:, q][..., None], gamma, zbar[q][None, :, None]
    )
    ll = bank.model.arena.weight * arena_term.gaussian(resp.arena_z[None, :, None] - mu, sigma)
    return sum_by_model(ll, resp.arena_model, len(grids))


def _col(x):
    return None if x is None else x[..., None]


def _take(x, index):
    return None if x is None else x[:, index]


def log_prior(bank: Bank, grids: np.ndarray, rows) -> np.ndarray:
    """The ability prior ``Normal(0, theta_scale)`` of the raw abilities, (K, D, G)."""
    raw = grids[:, None, :] + shift(bank, rows)[None, :, None]
    return -0.5 * (raw / bank.model.config.theta_scale) ** 2


def choose_grids(bank: Bank, resp: Responses, pairs: ArenaPairs, lay=None) -> np.ndarray:
    """Per new model, :data:`GRID` points covering where its posterior lives (K, GRID)."""
    scale = bank.model.config.theta_scale
    coarse = np.linspace(-COARSE_HALF_WIDTH, COARSE_HALF_WIDTH, COARSE) * scale
    grids = np.broadcast_to(coarse, (resp.n_models, COARSE))
    rows = evenly_spaced(bank.n_draws, COARSE_DRAWS)
    lp = loglik(bank, resp, pairs, grids, rows, lay) + log_prior(bank, grids, rows)
    near = lp >= lp.max(axis=2, keepdims=True) - COVER  # (K, D, G)
    lo, hi = covered_span(coarse, near.any(axis=1), pad=2)
    return np.linspace(lo, hi, GRID, axis=1)


@dataclass(frozen=True)
class GridPosterior:
    """Each new model's ability posterior on its grid, per bank draw.

    Attributes
    ----------
    grids : numpy.ndarray, shape (K, G)
        Abilities of the grid points, relative to the bank models' mean in each draw.
    weights : numpy.ndarray, shape (K, D, G)
        ``p(theta_g | y, phi_d)``, normalised over ``g`` for every ``(k, d)``.
    log_evidence : numpy.ndarray, shape (K, D), optional
        ``log sum_g exp(log p(y | theta_g, phi_d) + log p(theta_g))``: each draw's marginal
        likelihood of the model's responses, up to a constant shared by every draw (the
        grid is one per model). Not read by the equal-weight mixture; a mixture weighted
        by it is the posterior without the cut
        (:mod:`~bayes_dualeval.calibration.measure` compares the two).
    """

    grids: np.ndarray
    weights: np.ndarray
    log_evidence: np.ndarray | None = None

    def sample(self, rng: np.random.Generator, per_draw: int = 1) -> np.ndarray:
        """Ability draws on the leaderboard's scale, (K, D, per_draw), jittered in cells."""
        n_models, n_draws, n_grid = self.weights.shape
        cdf = np.cumsum(self.weights, axis=2)
        u = rng.random((n_models, n_draws, per_draw))
        index = np.minimum((cdf[:, :, None, :] < u[..., None]).sum(axis=-1), n_grid - 1)
        values = self.grids[np.arange(n_models)[:, None, None], index]
        step = (self.grids[:, 1] - self.grids[:, 0])[:, None, None]
        return values + (rng.random(index.shape) - 0.5) * step


def posterior(bank: Bank, resp: Responses, pairs: ArenaPairs | None = None) -> GridPosterior:
    """The grid posterior of every new model at every bank draw kept."""
    pairs = arena_pairs(bank, resp) if pairs is None else pairs
    lay = kernels.layout(bank, resp, pairs)
    grids = choose_grids(bank, resp, pairs, lay)
    rows = np.arange(bank.n_draws)
    lp = loglik(bank, resp, pairs, grids, rows, lay) + log_prior(bank, grids, rows)
    top = lp.max(axis=2, keepdims=True)
    w = np.exp(lp - top)
    total = w.sum(axis=2, keepdims=True)
    w /= total
    return GridPosterior(grids=grids, weights=w, log_evidence=(top + np.log(total))[..., 0])
