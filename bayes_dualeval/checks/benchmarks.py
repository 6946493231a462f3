r"""Model x benchmark audit: does a model beat its predicted accuracy on a benchmark.

Real contamination is rarely a random cell: a model that saw a benchmark's questions does
better on that benchmark than its ability and the questions' difficulties predict. For
every block of static cells sharing a model ``i`` and a benchmark ``(source, dataset)``,
the observed number of correct answers ``O`` is compared with its predictive distribution
*with the block left out*: the ability that predicts the block must not have been pulled up
by the block itself.

Leaving a block out without refitting: with posterior draws ``s`` and the block's log
likelihood ``l_s``, importance weights ``w_s ∝ exp(-l_s)``, smoothed by Pareto-smoothed
importance sampling (``arviz.psislw``), reweight the draws to the posterior given every
other cell. Its Pareto ``k`` says whether the reweighting can be trusted (above 0.7 it
cannot: the block alone moves the posterior too much; the column ``pareto_k`` reports it).
Given a draw, the number correct in the block is a sum of independent Bernoulli cells with
mean ``mu_s = sum p`` and variance ``v_s = sum p (1 - p)``; its one-sided mid-p-value
``P(Y > O) + P(Y = O) / 2`` is taken from the normal approximation with continuity
correction, and the left-out p-value is its weighted mean over draws. Under the model it
is close to uniform, so ``q_value`` (Benjamini-Yekutieli, valid under any dependence
between blocks) controls the false discovery rate of flagging ``q_value < alpha``.

With a single draw (MAP) there is nothing to reweight: the table is then the plug-in
version (``loo`` False), whose expected accuracy has absorbed part of any excess.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import sparse, special, stats

from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.model import links
from bayes_dualeval.model.spec import DualEvalModel
from bayes_dualeval.posterior.summaries import draws_of

#: Largest number of (draw, cell) evaluations; beyond it evenly spaced draws are used.
MAX_ELEMENTS = 40_000_000
#: Fewest draws kept when thinning for memory.
MIN_DRAWS = 100
#: Pareto k above which the left-out reweighting is unreliable.
K_MAX = 0.7

COLUMNS = [
    "model", "source", "dataset", "n", "observed", "expected", "expected_lo", "expected_hi",
    "excess", "p_value", "q_value", "pareto_k", "loo",
]  # fmt: skip


def benchmark_of(items: np.ndarray, sources: np.ndarray) -> np.ndarray:
    """The benchmark (dataset) name of static items ``<source>::<dataset>_<index>``."""
    names = pd.Series(items, dtype=str).str.split("::", n=1).str[-1]
    return names.str.rsplit("_", n=1).str[0].to_numpy()


def contamination_table(idata, dataset: Dataset, *, ci: float = 0.95) -> pd.DataFrame:
    """One row per (model, source, dataset) block of static cells, most suspicious first.

    Parameters
    ----------
    idata : arviz.InferenceData
        The run's posterior (its specification recorded, as every run records it).
    dataset : Dataset
        The data the run was fitted to.
    ci : float
        Level of the interval of the expected accuracy.

    Returns
    -------
    pandas.DataFrame
        Columns: ``model``, ``source``, ``dataset``, ``n`` (cells), ``observed`` and
        ``expected`` accuracy with ``expected_lo``, ``expected_hi`` (the ``ci`` interval of
        the left-out expected accuracy), ``excess`` (observed minus expected), ``p_value``
        (one-sided, larger accuracy than predicted), ``q_value`` (Benjamini-Yekutieli),
        ``pareto_k`` and ``loo`` (whether the block was left out). Empty without static
        cells.
    """
    model = DualEvalModel.from_idata(idata)
    if not len(dataset.static_y) or model.config.mode not in ("both", "static"):
        return pd.DataFrame(columns=COLUMNS)
    cell_model, cell_item = dataset.static_model, dataset.static_item
    y = dataset.static_y.astype(np.float64)
    bench = benchmark_of(dataset.items, dataset.item_source)
    key = pd.MultiIndex.from_arrays(
        [dataset.models[cell_model], dataset.item_source[cell_item], bench[cell_item]]
    )
    codes, blocks = pd.factorize(key)
    to_block = sparse.csr_array(
        (np.ones(len(y)), (np.arange(len(y)), codes)), shape=(len(y), len(blocks))
    )
    draws = _draws(idata, model, len(y))
    eta = links.eta(
        draws["theta"][:, cell_model], draws["b"][:, cell_item],
        None if draws.get("a") is None else draws["a"][:, cell_item],
    )  # fmt: skip
    c = None if draws.get("c") is None else draws["c"][:, cell_item]
    d = None if draws.get("d") is None else draws["d"][:, cell_item]
    p = links.probability(eta, c, d)
    loglik = links.bernoulli_loglik(y, eta, c, d)
    mu = (to_block.T @ p.T).T  # (D, B): expected number correct per draw
    var = (to_block.T @ (p * (1.0 - p)).T).T
    ll = (to_block.T @ loglik.T).T
    n = np.asarray(to_block.sum(axis=0)).ravel()
    observed = to_block.T @ y
    loo = ll.shape[0] > 1
    if loo:
        import arviz as az

        log_w, k = az.psislw(-ll.T)  # (B, D) normalised log weights, k per block
        w = np.exp(log_w)
    else:
        w, k = np.ones((len(blocks), 1)), np.full(len(blocks), np.nan)
    sd = np.sqrt(np.maximum(var, 1e-12)).T  # (B, D)
    upper = special.ndtr((mu.T - observed[:, None] - 0.5) / sd)  # P(Y >= O + 1)
    at_least = special.ndtr((mu.T - observed[:, None] + 0.5) / sd)  # P(Y >= O)
    p_value = np.sum(w * 0.5 * (upper + at_least), axis=1)
    rate = mu.T / n[:, None]
    expected = np.sum(w * rate, axis=1)
    alpha = (1.0 - ci) / 2.0
    lo, hi = _weighted_quantiles(rate, w, [alpha, 1.0 - alpha])
    table = pd.DataFrame(
        {
            "model": blocks.get_level_values(0),
            "source": blocks.get_level_values(1),
            "dataset": blocks.get_level_values(2),
            "n": n.astype(int),
            "observed": observed / n,
            "expected": expected,
            "expected_lo": lo,
            "expected_hi": hi,
            "excess": observed / n - expected,
            "p_value": np.clip(p_value, 0.0, 1.0),
            "q_value": stats.false_discovery_control(np.clip(p_value, 0.0, 1.0), method="by"),
            "pareto_k": k,
            "loo": loo,
        }
    )
    return table.sort_values(["p_value", "excess"], ascending=[True, False], kind="stable")[
        COLUMNS
    ].reset_index(drop=True)


def _draws(idata, model: DualEvalModel, n_cells: int) -> dict:
    """Ability and item draws (chains pooled, float64), thinned to fit the memory budget."""
    theta = np.asarray(draws_of(idata, "theta"), np.float64)
    keep = max(MIN_DRAWS, MAX_ELEMENTS // max(n_cells, 1))
    rows = np.unique(np.linspace(0, len(theta) - 1, min(keep, len(theta))).round().astype(int))
    out = {"theta": theta[rows]}
    for name in model.item_sites:
        out[name] = np.asarray(draws_of(idata, name), np.float64)[rows]
    return out


def _weighted_quantiles(values: np.ndarray, weights: np.ndarray, qs) -> list[np.ndarray]:
    """Per-row quantiles of ``values`` (B, D) under normalised ``weights`` (B, D)."""
    order = np.argsort(values, axis=1)
    v = np.take_along_axis(values, order, axis=1)
    cw = np.cumsum(np.take_along_axis(weights, order, axis=1), axis=1)
    out = []
    for q in qs:
        idx = np.minimum((cw < q).sum(axis=1), v.shape[1] - 1)
        out.append(v[np.arange(len(v)), idx])
    return out
