r"""Model x benchmark audit: does a model beat its predicted accuracy on a benchmark.

Real contamination is rarely a random cell: a model that saw a benchmark's questions does
better on that benchmark than its ability and the questions' difficulties predict. For
every block of static cells sharing a model ``i`` and a benchmark ``(source, dataset)``,
the observed number of correct answers ``O`` is compared with its predictive distribution
*with the block left out*: the ability that predicts the block must not have been pulled up
by the block itself.

Leaving a block out without refitting: a block is often a third of a model's data, which
moves its ability too far for importance sampling over the joint draws (Pareto k above 1
in trials). The ability is one-dimensional, though, so for each posterior draw of the item
parameters the ability's posterior given the model's *other* cells (and its prior
``Normal(0, theta_scale)``) is computed exactly on a grid. Given an ability, the number
correct in the block is a sum of independent Bernoulli cells with mean ``sum p`` and
variance ``sum p (1 - p)``; its one-sided mid-p-value ``P(Y > O) + P(Y = O) / 2`` comes
from the normal approximation with continuity correction, averaged over the grid and the
draws. The item parameters keep their full-data posterior (one block barely moves them).
Under the model the p-values are close to uniform (a test checks it), so ``q_value``
(Benjamini-Yekutieli, valid under any dependence between blocks) controls the false
discovery rate of flagging ``q_value < alpha``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import sparse, special, stats

from bayes_dualeval.checks.arena_blocks import arena_blocks
from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.model import links
from bayes_dualeval.model.spec import DualEvalModel
from bayes_dualeval.posterior.summaries import draws_of

#: Largest number of (draw, cell, grid point) evaluations; beyond it fewer, evenly spaced
#: draws are used.
MAX_ELEMENTS = 200_000_000
#: Fewest draws kept when thinning.
MIN_DRAWS = 20
#: Most draws used (the p-values average over draws; more add little).
MAX_DRAWS = 200
#: (cell, grid point) evaluations held in memory at once.
CHUNK_ELEMENTS = 4_000_000
#: Ability grid: points, and half-width in units of the ability prior's sd.
GRID, GRID_HALF_WIDTH = 121, 6.0

COLUMNS = [
    "model", "kind", "source", "dataset", "n", "observed", "expected", "expected_lo",
    "expected_hi", "excess", "p_value", "q_value",
]  # fmt: skip


def benchmark_of(items: np.ndarray) -> np.ndarray:
    """The benchmark (dataset) name of static items ``<source>::<dataset>_<index>``."""
    names = pd.Series(items, dtype=str).str.split("::", n=1).str[-1]
    return names.str.rsplit("_", n=1).str[0].to_numpy()


def contamination_table(idata, dataset: Dataset, *, ci: float = 0.95) -> pd.DataFrame:
    """One row per (model, source, dataset) static block and (model, source) arena block.

    Most suspicious first.

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
        Columns: ``model``, ``kind`` (``static`` or ``arena``), ``source``, ``dataset``
        (empty for arena rows), ``n`` (cells; arena: prompts), ``observed`` and ``expected``
        accuracy (arena: mean normalised reward, see
        :func:`~bayes_dualeval.checks.arena_blocks.arena_blocks`) with ``expected_lo``,
        ``expected_hi`` (the ``ci`` interval over draws of the left-out expected accuracy),
        ``excess`` (observed minus expected), ``p_value`` (one-sided: a larger accuracy or
        reward than predicted) and ``q_value`` (Benjamini-Yekutieli over every row, static
        and arena together). Empty without static cells or arena rewards.
    """
    arena = arena_blocks(idata, dataset, ci=ci)
    if len(arena):
        arena.insert(1, "kind", "arena")
    static = _static_blocks(idata, dataset, ci=ci)
    table = pd.concat([t for t in (static, arena) if len(t)], ignore_index=True) if (
        len(static) or len(arena)) else pd.DataFrame(columns=COLUMNS)  # fmt: skip
    table["q_value"] = stats.false_discovery_control(
        table["p_value"].to_numpy(float), method="by"
    ) if len(table) else []  # fmt: skip
    return table.sort_values(["p_value", "excess"], ascending=[True, False], kind="stable")[
        COLUMNS
    ].reset_index(drop=True)


def _static_blocks(idata, dataset: Dataset, *, ci: float) -> pd.DataFrame:
    """The static rows of :func:`contamination_table`, without ``q_value``, unsorted."""
    model = DualEvalModel.from_idata(idata)
    if not len(dataset.static_y) or model.config.mode not in ("both", "static"):
        return pd.DataFrame()
    cell_model, cell_item = dataset.static_model, dataset.static_item
    y = dataset.static_y.astype(np.float64)
    bench = benchmark_of(dataset.items)
    key = pd.MultiIndex.from_arrays(
        [dataset.models[cell_model], dataset.item_source[cell_item], bench[cell_item]]
    )
    codes, blocks = pd.factorize(key)
    to_block = sparse.csr_array(
        (np.ones(len(y)), (np.arange(len(y)), codes)), shape=(len(y), len(blocks))
    )
    draws = _draws(idata, model, len(y) * GRID)
    grid = np.linspace(-GRID_HALF_WIDTH, GRID_HALF_WIDTH, GRID) * model.config.theta_scale
    log_prior = -0.5 * (grid / model.config.theta_scale) ** 2
    _, model_of_block = np.unique(blocks.get_level_values(0), return_inverse=True)
    n = np.asarray(to_block.sum(axis=0)).ravel()
    observed = to_block.T @ y
    n_draws = len(draws["theta"])
    p_value = np.zeros(len(blocks))
    rate_draws = np.empty((len(blocks), n_draws))
    chunk = max(1, CHUNK_ELEMENTS // GRID)
    for k in range(n_draws):
        # per block and ability grid point: log likelihood, and mean and variance of the
        # number correct, accumulated over chunks of cells (bounded memory)
        block_ll, mu, var = (np.zeros((len(blocks), GRID)) for _ in range(3))
        for start in range(0, len(y), chunk):
            rows = slice(start, start + chunk)
            item = {name: draws[name][k][cell_item[rows], None] for name in model.item_sites}
            eta = links.eta(grid[None, :], item["b"], item.get("a"))
            p = links.probability(eta, item.get("c"), item.get("d"))
            ll = links.bernoulli_loglik(y[rows, None], eta, item.get("c"), item.get("d"))
            part = to_block[rows].T
            block_ll += part @ ll
            mu += part @ p
            var += part @ (p * (1.0 - p))
        model_ll = np.zeros((model_of_block.max() + 1, GRID))
        np.add.at(model_ll, model_of_block, block_ll)
        log_post = log_prior + model_ll[model_of_block] - block_ll  # the block left out
        w = np.exp(log_post - log_post.max(axis=1, keepdims=True))
        w /= w.sum(axis=1, keepdims=True)
        sd = np.sqrt(np.maximum(var, 1e-12))
        upper = special.ndtr((mu - observed[:, None] - 0.5) / sd)  # P(Y >= O + 1)
        at_least = special.ndtr((mu - observed[:, None] + 0.5) / sd)  # P(Y >= O)
        p_value += np.sum(w * 0.5 * (upper + at_least), axis=1) / n_draws
        rate_draws[:, k] = np.sum(w * mu, axis=1) / n
    expected = rate_draws.mean(axis=1)
    alpha = (1.0 - ci) / 2.0
    lo, hi = np.quantile(rate_draws, [alpha, 1.0 - alpha], axis=1)
    return pd.DataFrame(
        {
            "model": blocks.get_level_values(0),
            "kind": "static",
            "source": blocks.get_level_values(1),
            "dataset": blocks.get_level_values(2),
            "n": n.astype(int),
            "observed": observed / n,
            "expected": expected,
            "expected_lo": lo,
            "expected_hi": hi,
            "excess": observed / n - expected,
            "p_value": np.clip(p_value, 0.0, 1.0),
        }
    )


def _draws(idata, model: DualEvalModel, n_cells: int) -> dict:
    """Ability and item draws (chains pooled, float64), thinned to fit the memory budget."""
    theta = np.asarray(draws_of(idata, "theta"), np.float64)
    keep = min(MAX_DRAWS, max(MIN_DRAWS, MAX_ELEMENTS // max(n_cells, 1)))
    rows = np.unique(np.linspace(0, len(theta) - 1, min(keep, len(theta))).round().astype(int))
    out = {"theta": theta[rows]}
    for name in model.item_sites:
        out[name] = np.asarray(draws_of(idata, name), np.float64)[rows]
    return out
