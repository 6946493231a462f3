r"""One pass over the static cells for the fit statistics of items and models.

A cell holds ``k`` correct of ``n`` answers, :math:`k \sim \mathrm{Binomial}(n, p)`. Its
squared standardised residual is :math:`z^2 = (k - n p)^2 / (n p (1 - p))`. In every
posterior draw, per item and per model (the Rasch mean squares, Wright and Masters 1982):

* ``outfit`` :math:`= \overline{z^2}`, the mean over the cells: sensitive to unexpected
  answers far from the item's difficulty (a weak model passing a hard question);
* ``infit`` :math:`= \sum (k - n p)^2 / \sum n p (1 - p)`, information-weighted: sensitive
  to unexpected answers near it.

Both are 1 in expectation when the labels follow the model. In each replicate the labels
are drawn again from the same draw's :math:`p`; an item's ``fit_ppp`` is
:math:`P(\mathrm{outfit}^{rep} \ge \mathrm{outfit})` (mid-p), small when the item's
residuals are larger than the model's own replicates give. Per model the same pass gives
:func:`~bayes_dualeval.checks.person_fit.lz_star`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bayes_dualeval.checks.budget import chunks, replicate_index
from bayes_dualeval.checks.fitted import FittedRun
from bayes_dualeval.checks.person_fit import lz_star
from bayes_dualeval.core.grouping import group_matrix
from bayes_dualeval.model import links


@dataclass(frozen=True, eq=False)
class ResidualFit:
    """Fit statistics per posterior draw (see the module).

    Attributes
    ----------
    item_infit, item_outfit : numpy.ndarray, shape (D, Q)
        NaN for items without static cells.
    model_infit, model_outfit, model_lz : numpy.ndarray, shape (D, M)
    item_ppp : numpy.ndarray, shape (Q,)
        Posterior predictive p-value of each item's outfit (NaN without static cells).
    """

    item_infit: np.ndarray
    item_outfit: np.ndarray
    model_infit: np.ndarray
    model_outfit: np.ndarray
    model_lz: np.ndarray
    item_ppp: np.ndarray


def cell_success(fit: FittedRun, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Success probability of every static cell under draws ``d`` and its slope in ability.

    Both (len(d), S) float64: ``p`` from :func:`links.probability` and
    ``dp / dtheta = a (d - c) s (1 - s)`` with ``s = sigmoid(eta)``.
    """
    ds = fit.dataset
    item = ds.static_item
    eta = fit.eta(d, ds.static_model, item, grader=fit.static_graders()).astype(np.float64)
    par = {
        name: None if v is None else v[np.ix_(d, item)].astype(np.float64)
        for name, v in fit.items.items()
    }
    p = links.probability(eta, par["c"], par["d"])
    s = links.sigmoid(eta)
    span = (1.0 if par["d"] is None else par["d"]) - (0.0 if par["c"] is None else par["c"])
    slope = (1.0 if par["a"] is None else par["a"]) * span * s * (1.0 - s)
    return p, slope


class _Sums:
    """Sums of (draws, cells) arrays over each group of cells, (draws, groups)."""

    def __init__(self, group: np.ndarray, size: int):
        self.matrix = group_matrix(group, size)

    def __call__(self, values: np.ndarray) -> np.ndarray:
        return np.asarray((self.matrix @ values.T).T)


def residual_fit(fit: FittedRun, draws: np.ndarray, rng: np.random.Generator) -> ResidualFit:
    """Infit and outfit of items and models, ``l_z^*`` of models, the items' outfit ppp.

    Parameters
    ----------
    fit : FittedRun
        A run with static cells and item parameters.
    draws : numpy.ndarray of int
        Posterior draws of the statistics (cycled to at least
        :data:`~bayes_dualeval.checks.budget.MIN_REPLICATES` replicates for the ppp).
    rng : numpy.random.Generator
    """
    ds = fit.dataset
    k = ds.static_y.astype(np.float64)
    n = ds.static_n.astype(np.float64)
    n_items, n_models = ds.n_items, ds.n_models
    by_item, by_model = _Sums(ds.static_item, n_items), _Sums(ds.static_model, n_models)
    cells_item = np.bincount(ds.static_item, minlength=n_items).astype(np.float64)
    rep = replicate_index(draws)
    n_first = len(draws)
    shape_i, shape_m = (n_first, n_items), (n_first, n_models)
    out = {
        "item_infit": np.zeros(shape_i),
        "item_outfit": np.zeros(shape_i),
        "model_infit": np.zeros(shape_m),
        "model_outfit": np.zeros(shape_m),
        "model_lz": np.zeros(shape_m),
    }
    greater = np.zeros(n_items)
    equal = np.zeros(n_items)
    unusable = np.zeros(n_items, dtype=bool)  # an item non-finite in some draw: no ppp
    done = 0
    with np.errstate(invalid="ignore", divide="ignore"):
        for piece in chunks(rep, 4 * len(k)):
            p, slope = cell_success(fit, piece)
            ok = np.isfinite(p) & np.isfinite(slope)  # a draw's non-finite item: left out
            p = np.where(ok, np.clip(p, 1e-9, 1 - 1e-9), 0.5)
            slope = np.where(ok, slope, 0.0)
            var = n * p * (1.0 - p)
            square = (k - n * p) ** 2
            broken = by_item(~ok) > 0
            unusable |= broken.any(axis=0)
            outfit = np.where(broken, np.nan, by_item(square / var) / cells_item)
            k_rep = rng.binomial(n.astype(np.int64), p).astype(np.float64)
            outfit_rep = by_item((k_rep - n * p) ** 2 / var) / cells_item
            greater += (outfit_rep > outfit).sum(axis=0)
            equal += (outfit_rep == outfit).sum(axis=0)
            first = min(len(piece), max(n_first - done, 0))
            if first:
                rows = slice(done, done + first)
                sq, vr, o, w = (
                    square[:first] * ok[:first],
                    var[:first] * ok[:first],
                    outfit[:first],
                    ok[:first],
                )
                out["item_outfit"][rows] = o
                out["item_infit"][rows] = np.where(
                    broken[:first], np.nan, by_item(sq) / by_item(vr)
                )
                out["model_outfit"][rows] = by_model(np.where(w, sq / vr, 0.0)) / by_model(w)
                out["model_infit"][rows] = by_model(sq) / by_model(vr)
                out["model_lz"][rows] = lz_star(
                    k * w, n * w, p[:first], slope[:first], ds.static_model, by_model
                )
            done += len(piece)
    has = cells_item > 0
    ppp = np.where(has & ~unusable, (greater + 0.5 * equal) / len(rep), np.nan)
    for name in ("item_infit", "item_outfit"):
        out[name][:, ~has] = np.nan
    return ResidualFit(item_ppp=ppp, **out)
