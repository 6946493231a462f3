r"""One pass over the static cells: cell checks, replicated labels, item fit.

A static cell has expected value :math:`\bar p_{iq}` (the posterior mean of the success
probability of the run's IRT link) and two exact one-sided posterior predictive p-values,
averaged over draws (Rao-Blackwellised: no Monte Carlo floor):

* ``p_value`` :math:`= P(y^{rep} \ge y)`: :math:`\bar p_{iq}` for a success, 1 for a
  failure. A success the model did not expect (a leaked answer) has a small value; a
  failure is never evidence of contamination.
* ``p_lower`` :math:`= P(y^{rep} \le y)`: :math:`1 - \bar p_{iq}` for a failure, 1 for a
  success (the mirrored direction: a surprising failure, e.g. a wrong key).

Both are discrete and conservative when the labels follow the model: with the true
:math:`p` in place of :math:`\bar p`, :math:`P(\text{p\_value} \le u) = p\,1[p \le u]
\le u`. The same pass draws the replicated labels behind the item fit, the replicated
accuracies per model and per item.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from bayes_dualeval.checks import budget
from bayes_dualeval.checks.budget import chunks, replicate_index
from bayes_dualeval.checks.cells import EPS, Cells, segments
from bayes_dualeval.checks.counts import count_pass
from bayes_dualeval.checks.fitted import FittedRun
from bayes_dualeval.core.grouping import group_matrix
from bayes_dualeval.model import links


@dataclass(frozen=True, eq=False)
class StaticPass:
    """What one pass over the static cells gives (see :func:`static_pass`)."""

    cells: Cells
    mean_p: np.ndarray  # (S,): posterior mean of p
    n_draws: int
    n_rep: int = 0
    item_ppp: np.ndarray | None = None  # (Q,), NaN for non-static items
    item_hist: np.ndarray | None = None  # (Q_static, most cells + 1): replicated correct
    model_correct: np.ndarray | None = None  # (n_rep, M): replicated correct answers


class ModelSums:
    """Sums of a (k, S) float32 array over each model's cells, (k, M).

    A dense one-hot product (BLAS) for a few models; a sparse product for many.
    """

    def __init__(self, model: np.ndarray, n_models: int):
        if n_models <= 32:
            self.onehot = np.zeros((len(model), n_models), dtype=np.float32)
            self.onehot[np.arange(len(model)), model] = 1.0
            self.matrix = None
        else:
            self.matrix = group_matrix(model, n_models).astype(np.float32)

    def __call__(self, values: np.ndarray) -> np.ndarray:
        """Per-model sums of ``values`` (k, S), shape (k, M)."""
        if self.matrix is None:
            return values @ self.onehot
        return (self.matrix @ values.T).T


def static_pass(fit: FittedRun, draws: np.ndarray, rng: np.random.Generator | None) -> StaticPass:
    """Cell checks and, with ``rng``, replicated labels of every static cell.

    Works on ``z``, the log-odds of the observed label
    (:meth:`~bayes_dualeval.checks.fitted.FittedRun.label_logodds`), so that small tail
    probabilities keep their precision in float32. The probability of the observed label
    (``E[p]`` for a success, ``E[1 - p]`` for a failure) is the posterior mean of
    ``sigmoid(z)``: the cell's ``p_value`` for a success, its ``p_lower`` for a failure.
    Replicates (one per entry of :func:`~bayes_dualeval.checks.budget.replicate_index`)
    give the deviance item-fit ppp (mid-p: ``P(D_rep > D_obs) + P(D_rep = D_obs) / 2``
    with ``D = -2 log p(y | theta)`` summed over the item's cells; ``D_rep - D_obs`` is
    twice the sum of ``z`` over the cells where the replicate differs from the data),
    histograms of replicated correct counts per static item and replicated correct counts
    per model.

    Cells that hold repeated answers (``static_n`` above 1 anywhere) are checked as
    binomial counts by :func:`~bayes_dualeval.checks.counts.count_pass`.
    """
    ds = fit.dataset
    if (ds.static_n > 1).any():
        return StaticPass(**count_pass(fit, draws, rng))
    n_models = ds.n_models
    order, starts, seg_items = segments(ds.static_item)
    item, model = ds.static_item[order], ds.static_model[order]
    grader = fit.static_graders()
    grader = None if grader is None else grader[order]
    y = ds.static_y[order] > 0
    sign = np.where(y, 1.0, -1.0).astype(np.float32)
    n_cells, n_first = len(y), len(draws)
    runs = (seg_items, np.diff(np.r_[starts, n_cells]))
    # replicated correct counts per item range over 0..its cells (one per model, or per
    # model and grader with several graders)
    width = int(runs[1].max()) + 1 if n_cells else 1
    rep = draws if rng is None else replicate_index(draws)
    total = np.zeros(n_cells)
    greater = np.zeros(len(starts))
    equal = np.zeros(len(starts))
    hist = np.zeros(len(starts) * width, dtype=np.int64)
    model_correct = np.zeros((len(rep), n_models))
    offset = np.arange(len(starts)) * width
    correct_item = np.add.reduceat(y.astype(np.float32), starts) if n_cells else np.zeros(0)
    correct_model = np.bincount(model, weights=y, minlength=n_models)
    per_model = ModelSums(model, n_models)
    pieces = list(chunks(rep, n_cells))
    starts_of = np.r_[0, np.cumsum([len(d) for d in pieces])[:-1]].astype(int)
    # one random stream per chunk: the same replicates however the chunks are scheduled
    streams = rng.spawn(len(pieces)) if rng is not None else [None] * len(pieces)

    def chunk(k):
        d, done, stream = pieces[k], starts_of[k], streams[k]
        z = fit.label_logodds(d, model, item, sign, runs, grader)
        s = links.sigmoid(z)  # P(y_rep = y), precise in the lower tail
        first = min(len(d), max(n_first - done, 0))
        part = {"total": s[:first].sum(axis=0) if first else None}
        if stream is not None:
            differ = stream.random(z.shape, dtype=np.float32) >= s
            flip = np.multiply(differ, sign, dtype=np.float32)  # y - y_rep
            z *= differ
            change = np.add.reduceat(z, starts, axis=1)
            part["greater"] = (change > 0).sum(axis=0)
            part["equal"] = (change == 0).sum(axis=0)
            counts = np.rint(correct_item - np.add.reduceat(flip, starts, axis=1)).astype(np.int64)
            part["hist"] = np.bincount((counts + offset).ravel(), minlength=hist.size)
            part["model_correct"] = correct_model - per_model(flip)
        return part

    # chunks on threads (budget.THREADS), gathered in order: the same sums on any count
    with ThreadPoolExecutor(max_workers=max(1, min(budget.THREADS, len(pieces)))) as pool:
        for k, part in enumerate(pool.map(chunk, range(len(pieces)))):
            if part["total"] is not None:
                total += part["total"]
            if rng is not None:
                greater += part["greater"]
                equal += part["equal"]
                hist += part["hist"]
                model_correct[starts_of[k] : starts_of[k] + len(pieces[k])] = part["model_correct"]
    mean_obs = np.empty(n_cells)
    mean_obs[order] = total / n_first
    y_obs = ds.static_y.astype(np.float64)
    mean_p = np.where(y_obs > 0, mean_obs, 1.0 - mean_obs)
    sd = np.sqrt(np.clip(mean_obs * (1.0 - mean_obs), EPS, None))
    cells = Cells(
        model=ds.static_model,
        item=ds.static_item,
        observed=y_obs,
        expected=mean_p,
        residual=np.where(y_obs > 0, 1.0, -1.0) * (1.0 - mean_obs) / sd,
        p_value=np.where(y_obs > 0, np.minimum(mean_obs, 1.0), 1.0),
        p_lower=np.where(y_obs > 0, 1.0, np.minimum(mean_obs, 1.0)),
        used=np.ones(n_cells, dtype=bool),
        p_min=mean_p,  # a success's p_value: the predicted success probability
    )
    if rng is None:
        return StaticPass(cells=cells, mean_p=mean_p, n_draws=n_first)
    n_rep = len(rep)
    ppp = np.full(ds.n_items, np.nan)
    ppp[seg_items] = (greater + 0.5 * equal) / n_rep
    static_items = ds.static_items
    item_hist = np.zeros((len(static_items), width), dtype=np.int64)
    col = np.full(ds.n_items, -1)
    col[static_items] = np.arange(len(static_items))
    item_hist[col[seg_items]] = hist.reshape(len(starts), width)
    return StaticPass(
        cells=cells,
        mean_p=mean_p,
        n_draws=n_first,
        n_rep=n_rep,
        item_ppp=ppp,
        item_hist=item_hist,
        model_correct=model_correct,
    )
