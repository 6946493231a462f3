r"""Model x benchmark audit: does a model beat its predicted accuracy on a benchmark.

Real contamination is rarely a random cell: a model that saw a benchmark's questions does
better on that benchmark than its ability and the questions' difficulties predict. For
every block of static cells sharing a model ``i`` and a benchmark ``(source, dataset)``,
the observed number of correct answers ``O`` is compared with its predictive distribution
*with the block left out*: the ability that predicts the block must not have been pulled up
by the block itself.

Arena rewards get the same audit per (model, arena source)
(:class:`~bayes_dualeval.checks.arena_blocks.ArenaCells`): a model rewarded more on one
source than its ability predicts.

With abilities per item domain the block is predicted from the model's ability in the
block's domain, informed by its other benchmarks there and, through the domain deviations'
prior, by its other domains (:mod:`~bayes_dualeval.checks.domain_grid`): a model strong in
a whole domain is not a leak.

Leaving a block out without refitting: a block is often a third of a model's data, which
moves its ability too far for importance sampling over the joint draws (Pareto k above 1
in trials). The ability is one-dimensional, though, so for each posterior draw of the item
parameters the ability's posterior given the model's *other* cells, static and arena (and
its prior ``Normal(0, theta_scale)``), is computed exactly on a grid: with one ability per
model a grid per model and draw, placed and spaced to resolve every block's left-out
posterior (:mod:`~bayes_dualeval.checks.ability_grid`). Given an ability, the
number correct in a static block is a sum of independent Bernoulli cells with mean
``sum p`` and variance ``sum p (1 - p)``; its one-sided mid-p-value ``P(Y > O) + P(Y = O) /
2`` comes from the normal approximation with continuity correction. An arena block's mean
reward is normal given the ability (see :mod:`~bayes_dualeval.checks.arena_blocks`). Both
are averaged over the grid and the draws. The item parameters keep their full-data
posterior (one block barely moves them). Integrating over the left-out ability makes the
p-value account for what the model's other data leave uncertain about it, which a point
fit (MAP, one draw) could not do otherwise. Under the model the p-values are close to
uniform (tests check it for static and arena blocks), so ``q_value`` (Benjamini-Yekutieli,
valid under any dependence between blocks) controls the false discovery rate of flagging
``q_value < alpha``.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd
from scipy import special, stats

from bayes_dualeval.checks import ability_grid, budget
from bayes_dualeval.checks.arena_blocks import ArenaCells
from bayes_dualeval.checks.domain_grid import (
    designs,
    item_columns,
    kernels,
    left_out_log_posterior,
    n_columns,
)
from bayes_dualeval.core.grouping import group_matrix
from bayes_dualeval.core.item_ids import benchmark_of
from bayes_dualeval.core.thinning import evenly_spaced
from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.model import links
from bayes_dualeval.model.facets import arena_facets
from bayes_dualeval.model.spec import DualEvalModel
from bayes_dualeval.posterior.summaries import draws_of

#: Largest number of (draw, cell, grid point) evaluations; beyond it fewer, evenly spaced
#: draws are used.
MAX_ELEMENTS = 200_000_000
#: Fewest draws kept when thinning, as long as :data:`MOST_ELEMENTS` allows them.
MIN_DRAWS = 20
#: Hard ceiling on the (draw, cell, grid point) evaluations, above ``MIN_DRAWS``: at ten
#: million cells a single draw's 1.2e9 evaluations take about 40 s on two cores, so very
#: large data get one to a few draws (their item parameters are then known closely, and
#: the ability, which moves most when a block is left out, is still integrated exactly).
MOST_ELEMENTS = 1_500_000_000
#: Most draws used (the p-values average over draws; more add little).
MAX_DRAWS = 200
#: (cell, grid point) evaluations held in memory at once.
CHUNK_ELEMENTS = 4_000_000
#: The one fixed grid of domain abilities: its points, over the coarse grid's half-width
#: in units of the ability prior's sd.
FIXED_GRID, GRID_HALF_WIDTH = 121, ability_grid.HALF_WIDTH
#: Most evaluations of a cell per draw: with one ability the coarse and the refined grid
#: together (:mod:`~bayes_dualeval.checks.ability_grid`).
GRID = max(FIXED_GRID, ability_grid.COARSE + ability_grid.MOST)

COLUMNS = [
    "model", "kind", "source", "dataset", "domain", "n", "observed", "expected",
    "expected_lo", "expected_hi", "excess", "p_value", "q_value", "design",
]  # fmt: skip


def benchmark_audit(idata, dataset: Dataset, *, ci: float = 0.95) -> pd.DataFrame:
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
        accuracy (arena: mean normalised reward) with ``expected_lo``, ``expected_hi``
        (the ``ci`` interval over draws of the left-out expectation), ``excess``
        (observed minus expected), ``p_value`` (one-sided: a larger accuracy or reward
        than predicted), ``q_value`` (Benjamini-Yekutieli over every row, static and
        arena together), ``domain`` (with domain abilities the block's items' domain, by
        which blocks are split too; else empty) and ``design`` (which ability predicts
        the block: :data:`~bayes_dualeval.checks.domain_grid.ONE_ABILITY`,
        :data:`~bayes_dualeval.checks.domain_grid.DOMAIN` or
        :data:`~bayes_dualeval.checks.domain_grid.DOMAIN_ONE_BENCHMARK`). Empty without
        static cells or arena rewards.
    """
    model = DualEvalModel.from_idata(idata)
    use_static, use_arena = model.item_kinds(dataset)
    if not (use_static or use_arena):
        return pd.DataFrame(columns=COLUMNS)
    n_cells = (len(dataset.static_y) if use_static else 0) + (
        len(dataset.arena_z) if use_arena else 0
    )
    draws = _draws(idata, model, n_cells * GRID, arena=use_arena)
    kinds = []
    if use_static:
        kinds.append(StaticCells(dataset, model, draws))
    if use_arena and not arena_facets(dataset, True).present:
        # with several judges or style a model's rewards on a source are not one ability's
        # prediction on one reward scale (the blocks' normal approximation); not audited
        kinds.append(ArenaCells(dataset, model, draws))
    kinds = [k for k in kinds if len(k)]
    if not kinds:  # e.g. arena prompts each answered by a single model
        return pd.DataFrame(columns=COLUMNS)
    table = _left_out(kinds, dataset, model, draws, ci)
    table["q_value"] = stats.false_discovery_control(
        table["p_value"].to_numpy(float), method="by"
    ) if len(table) else []  # fmt: skip
    return table.sort_values(["p_value", "excess"], ascending=[True, False], kind="stable")[
        COLUMNS
    ].reset_index(drop=True)


class StaticCells:
    """A run's static cells, grouped into (model, source, benchmark) blocks, on a grid."""

    kind = "static"

    def __init__(self, dataset: Dataset, model: DualEvalModel, draws: dict):
        self.cell_model, self.cell_item = dataset.static_model, dataset.static_item
        self.y = dataset.static_share  # a cell's share of its answers that are correct
        self.answers = dataset.static_n.astype(np.float64)
        bench = benchmark_of(dataset.items)
        columns, domain = item_columns(dataset, model)
        key = pd.MultiIndex.from_arrays(
            [
                dataset.models[self.cell_model],
                dataset.item_source[self.cell_item],
                bench[self.cell_item],
                domain[self.cell_item],
            ]
        )
        self.cell_block, blocks = pd.factorize(key)
        self.labels = pd.DataFrame(
            {
                "model": blocks.get_level_values(0),
                "kind": self.kind,
                "source": blocks.get_level_values(1),
                "dataset": blocks.get_level_values(2),
                "domain": blocks.get_level_values(3),
            }
        )
        self.block_column = np.zeros(len(blocks), np.int64)
        self.block_column[self.cell_block] = columns[self.cell_item]
        self.n = np.bincount(self.cell_block, weights=self.answers, minlength=len(blocks))
        self.observed = np.bincount(
            self.cell_block, weights=dataset.static_y.astype(np.float64), minlength=len(blocks)
        )
        self.draws = {name: draws[name] for name in model.item_sites}

    def __len__(self) -> int:
        return len(self.y)

    def terms(self, k: int, rows: slice, ability: np.ndarray):
        """Per cell of ``rows`` and grid point, in draw ``k``: log likelihood, mean, variance.

        Of the cell's correct answers: ``n`` Bernoulli answers, ``n p`` and ``n p (1 - p)``,
        at the abilities ``ability`` (cells x grid points: each cell's model's grid).
        """
        item = {name: v[k][self.cell_item[rows], None] for name, v in self.draws.items()}
        eta = links.eta(ability, item["b"], item.get("a"))
        p = links.probability(eta, item.get("c"), item.get("d"))
        ll = links.bernoulli_loglik(self.y[rows, None], eta, item.get("c"), item.get("d"))
        n = self.answers[rows, None]
        return n * ll, n * p, n * p * (1.0 - p)

    def tail(self, mu: np.ndarray, var: np.ndarray) -> np.ndarray:
        """Mid-p ``P(Y > O) + P(Y = O) / 2`` per block and grid point (continuity-corrected)."""
        sd = np.sqrt(np.maximum(var, 1e-12))
        upper = special.ndtr((mu - self.observed[:, None] - 0.5) / sd)  # P(Y >= O + 1)
        at_least = special.ndtr((mu - self.observed[:, None] + 0.5) / sd)  # P(Y >= O)
        return 0.5 * (upper + at_least)

    def rate(self, mu: np.ndarray) -> np.ndarray:
        """Accuracy of each block from its expected number correct."""
        return mu / self.n[:, None]


def _left_out(kinds: list, dataset: Dataset, model: DualEvalModel, draws: dict, ci: float):
    """Rows of :func:`benchmark_audit` without ``q_value``, unsorted.

    Every block of every cell kind, each with the ability's posterior given the model's
    other cells (of every kind). With one ability per model each draw is evaluated on the
    coarse grid, which locates every block's posterior, then on a grid per model that
    resolves them (:mod:`~bayes_dualeval.checks.ability_grid`); with domain abilities on
    the one fixed grid their deviations' convolutions need.
    """
    scale = model.config.theta_scale
    n_draws = len(draws["theta"])
    chunk = max(1, CHUNK_ELEMENTS // GRID)
    n_col = n_columns(dataset, model)
    n_models = dataset.n_models
    fixed = None
    if n_col > 1:
        fixed = np.linspace(-GRID_HALF_WIDTH, GRID_HALF_WIDTH, FIXED_GRID) * scale
    points = ability_grid.coarse(scale)
    first = np.broadcast_to(points, (n_models, len(points)))
    block_model, chunks, p_values, rates = [], [], [], []
    n_blocks_in = np.zeros((n_models, n_col), np.int64)
    for kind in kinds:
        n_blocks = len(kind.labels)
        owner = np.zeros(n_blocks, np.int64)
        owner[kind.cell_block] = kind.cell_model
        block_model.append(owner)
        np.add.at(n_blocks_in, (owner, kind.block_column), 1)
        # the chunks of cells and their (block x cell) indicators, built once for all draws
        rows = [slice(start, start + chunk) for start in range(0, len(kind), chunk)]
        chunks.append([(r, group_matrix(kind.cell_block[r], n_blocks)) for r in rows])
        p_values.append(np.zeros(n_blocks))
        rates.append(np.empty((n_blocks, n_draws)))
    owners = np.concatenate(block_model)

    def left_out(grid, column_ll, parts, kernel=None):
        """Each kind's blocks' left-out log posteriors on ``grid`` (models x points)."""
        log_prior = -0.5 * (grid / scale) ** 2
        return [
            left_out_log_posterior(
                log_prior, column_ll, owner, kind.block_column, block_ll, kernel
            )
            for kind, owner, (block_ll, _, _) in zip(kinds, block_model, parts, strict=True)
        ]

    with ThreadPoolExecutor(max_workers=budget.THREADS) as pool:
        for k in range(n_draws):
            if fixed is None:
                parts, column_ll = _block_sums(kinds, block_model, chunks, pool, k, first, n_col)
                grid = ability_grid.refine(
                    points,
                    np.concatenate(left_out(first, column_ll, parts)),
                    np.concatenate([part[0] for part in parts]),
                    owners,
                    n_models,
                )
                kernel = None
            else:
                grid = np.broadcast_to(fixed, (n_models, FIXED_GRID))
                kernel = kernels(fixed, draws["deviation_sd"][k])
            parts, column_ll = _block_sums(kinds, block_model, chunks, pool, k, grid, n_col)
            log_posts = left_out(grid, column_ll, parts, kernel)
            for j, (kind, log_post, (_, mu, var)) in enumerate(
                zip(kinds, log_posts, parts, strict=True)
            ):
                w = np.exp(log_post - log_post.max(axis=1, keepdims=True))
                w /= w.sum(axis=1, keepdims=True)
                p_values[j] += np.sum(w * kind.tail(mu, var), axis=1) / n_draws
                rates[j][:, k] = np.sum(w * kind.rate(mu), axis=1)
    alpha = (1.0 - ci) / 2.0
    frames = []
    for kind, owner, p_value, rate in zip(kinds, block_model, p_values, rates, strict=True):
        lo, hi = np.quantile(rate, [alpha, 1.0 - alpha], axis=1)
        expected = rate.mean(axis=1)
        observed = kind.observed / kind.n
        frames.append(
            kind.labels.assign(
                n=kind.n.astype(int),
                observed=observed,
                expected=expected,
                expected_lo=lo,
                expected_hi=hi,
                excess=observed - expected,
                p_value=np.clip(p_value, 0.0, 1.0),
                design=designs(owner, kind.block_column, n_blocks_in, n_col - 1),
            )
        )
    return pd.concat(frames, ignore_index=True)


def _block_sums(kinds, block_model, chunks, pool, k, grid, n_col):
    """Per kind, per block and grid point in draw ``k``: log likelihood, mean and variance.

    ``grid`` holds each model's points (models x points); a cell is evaluated on its
    model's. Returns the three ``(blocks, points)`` sums per kind and ``column_ll``, each
    model's log likelihood per ability column (``n_col`` of them). Sums over chunks of
    cells (bounded memory; several chunks on threads, added in order, so the sums do not
    depend on the thread count; a single chunk in this thread: handing it to another cost
    the bundled example's audit 1.2 of its 3.7 s).
    """
    n_models, points = grid.shape
    parts, column_ll = [], np.zeros((n_models, n_col, points))
    for kind, owner, pieces in zip(kinds, block_model, chunks, strict=True):
        block_ll, mu, var = (np.zeros((len(kind.labels), points)) for _ in range(3))

        def piece(chunk, kind=kind):
            rows, to_block = chunk
            ll, m, v = kind.terms(k, rows, grid[kind.cell_model[rows]])
            return to_block @ ll, to_block @ m, to_block @ v

        done = pool.map(piece, pieces) if len(pieces) > 1 else [piece(pieces[0])]
        for ll, m, v in done:
            block_ll += ll
            mu += m
            var += v
        np.add.at(column_ll, (owner, kind.block_column), block_ll)
        parts.append((block_ll, mu, var))
    return parts, column_ll


def _draws(idata, model: DualEvalModel, n_cells: int, *, arena: bool = False) -> dict:
    """Ability and item draws (chains pooled, float64), thinned to fit the memory budget.

    With ``arena``, also ``gamma``.
    """
    theta = np.asarray(draws_of(idata, "theta"), np.float64)
    n_cells = max(n_cells, 1)
    keep = min(
        MAX_DRAWS, max(MIN_DRAWS, MAX_ELEMENTS // n_cells), max(1, MOST_ELEMENTS // n_cells)
    )
    rows = evenly_spaced(len(theta), keep)
    out = {"theta": theta[rows]}
    names = list(model.item_sites)
    if arena:
        names += [s for s in ("gamma",) if s in idata.posterior]
    for name in names:
        out[name] = np.asarray(draws_of(idata, name), np.float64)[rows]
    if model.domain_abilities:
        # the domain abilities (cells' abilities) and the marginal sd of each domain's
        # deviations, whose sum over models is zero (domain_grid)
        m = theta.shape[-1]
        out["theta_domain"] = np.asarray(draws_of(idata, "theta_domain"), np.float64)[rows]
        tau = np.asarray(draws_of(idata, "tau_domain"), np.float64)[rows]
        out["deviation_sd"] = tau * np.sqrt(1.0 - 1.0 / m)
    return out
