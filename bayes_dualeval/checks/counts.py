r"""The pass over static cells that hold repeated answers: binomial counts.

Where a model answered an item ``n`` times (repeated samples), its cell holds ``k``
correct answers, :math:`k \sim \mathrm{Binomial}(n, p_{iq})`. This pass gives what
:func:`~bayes_dualeval.checks.static.static_pass` gives for single labels, from the
binomial distribution (scipy): the exact one-sided posterior predictive p-values averaged
over draws (``p_value`` :math:`= P(k^{rep} \ge k)`, ``p_lower`` :math:`= P(k^{rep} \le
k)`), replicated counts (:math:`k^{rep}` drawn per replicate), the deviance item fit
(mid-p over replicates of :math:`D = -2 \sum \log p(k \mid n, p)` over the item's cells),
histograms of replicated correct answers per item and replicated correct answers per
model. With one answer per cell these are the single-label pass's quantities; that pass
stays the path for such data (it works on log-odds, for speed and float32 precision).
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from bayes_dualeval.checks.budget import chunks, replicate_index
from bayes_dualeval.checks.cells import EPS, Cells
from bayes_dualeval.checks.fitted import FittedRun
from bayes_dualeval.core.grouping import group_matrix
from bayes_dualeval.model import links


def cell_probabilities(fit: FittedRun, d: np.ndarray) -> np.ndarray:
    """Success probability of every static cell under the draws ``d``, (len(d), S) float64.

    From the log-odds of a success (:meth:`FittedRun.label_logodds` with sign +1), so
    3PL/4PL floors and ceilings are the link's own.
    """
    ds = fit.dataset
    plus = np.ones(len(ds.static_y), dtype=np.float32)
    z = fit.label_logodds(d, ds.static_model, ds.static_item, plus, grader=fit.static_graders())
    return links.sigmoid(z.astype(np.float64))


def count_pass(fit: FittedRun, draws: np.ndarray, rng: np.random.Generator | None) -> dict:
    """The fields of a :class:`~bayes_dualeval.checks.static.StaticPass` of repeated answers.

    Parameters
    ----------
    fit : FittedRun
    draws : numpy.ndarray of int
        Posterior draws of the p-values (the first ``len(draws)`` of the replicates).
    rng : numpy.random.Generator or None
        Replicates are drawn with it (None: the cell checks only).
    """
    ds = fit.dataset
    k = ds.static_y.astype(np.float64)
    n = ds.static_n.astype(np.float64)
    n_cells, n_models = len(k), ds.n_models
    item_col = np.full(ds.n_items, -1)
    item_col[ds.static_items] = np.arange(len(ds.static_items))
    col = item_col[ds.static_item]
    answers_item = np.bincount(col, weights=n, minlength=len(ds.static_items)).astype(np.int64)
    width = int(answers_item.max(initial=0)) + 1
    rep = draws if rng is None else replicate_index(draws)
    n_first = len(draws)
    mean_p = np.zeros(n_cells)
    upper = np.zeros(n_cells)
    lower = np.zeros(n_cells)
    top = np.zeros(n_cells)  # P(k_rep = n): the smallest p_value a cell could attain
    greater = np.zeros(len(ds.static_items))
    equal = np.zeros(len(ds.static_items))
    hist = np.zeros((len(ds.static_items), width), dtype=np.int64)
    model_correct = np.zeros((len(rep), n_models))
    done = 0
    for piece in chunks(rep, n_cells):
        p = cell_probabilities(fit, piece)
        first = min(len(piece), max(n_first - done, 0))
        if first:
            q = p[:first]
            mean_p += q.sum(axis=0)
            upper += stats.binom.sf(k - 1, n, q).sum(axis=0)
            lower += stats.binom.cdf(k, n, q).sum(axis=0)
            top += (q**n).sum(axis=0)
        if rng is not None:
            k_rep = rng.binomial(n.astype(np.int64), p).astype(np.float64)
            d_obs = -2.0 * _item_sums(stats.binom.logpmf(k, n, p), col, len(ds.static_items))
            d_rep = -2.0 * _item_sums(stats.binom.logpmf(k_rep, n, p), col, len(ds.static_items))
            greater += (d_rep > d_obs).sum(axis=0)
            equal += (d_rep == d_obs).sum(axis=0)
            per_item = _item_sums(k_rep, col, len(ds.static_items)).astype(np.int64)
            rows = (per_item + np.arange(len(ds.static_items)) * width).ravel()
            hist += np.bincount(rows, minlength=hist.size).reshape(hist.shape)
            model_correct[done : done + len(piece)] = _item_sums(k_rep, ds.static_model, n_models)
        done += len(piece)
    mean_p /= n_first
    share = k / np.maximum(n, 1.0)
    sd = np.sqrt(np.clip(mean_p * (1.0 - mean_p) / np.maximum(n, 1.0), EPS, None))
    cells = Cells(
        model=ds.static_model,
        item=ds.static_item,
        observed=share,
        expected=mean_p,
        residual=(share - mean_p) / sd,
        p_value=np.minimum(upper / n_first, 1.0),
        p_lower=np.minimum(lower / n_first, 1.0),
        used=np.ones(n_cells, dtype=bool),
        p_min=np.minimum(top / n_first, 1.0),
    )
    if rng is None:
        return {"cells": cells, "mean_p": mean_p, "n_draws": n_first}
    ppp = np.full(ds.n_items, np.nan)
    answered = answers_item > 0
    ppp[ds.static_items[answered]] = (greater + 0.5 * equal)[answered] / len(rep)
    return {
        "cells": cells,
        "mean_p": mean_p,
        "n_draws": n_first,
        "n_rep": len(rep),
        "item_ppp": ppp,
        "item_hist": hist,
        "model_correct": model_correct,
    }


def _item_sums(values: np.ndarray, group: np.ndarray, size: int) -> np.ndarray:
    """Sums of ``values`` (draws, S) over the cells of each group, (draws, size)."""
    return np.asarray((group_matrix(group, size) @ values.T).T)
