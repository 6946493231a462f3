"""How NUTS lays out the data: lists of cells and pairs, or matrices where they are dense.

Static labels (below) and the arena's decisive pairs (:func:`arena_layout`,
:mod:`bayes_dualeval.model.arena_matrix`) are chosen apart, each by its own coverage.

The joint model reads the static labels as a list of cells: each cell gathers its model's
ability and its item's parameters, and the gradient scatters back to abilities and items
with one addition per cell. Where most models answered most items, the same density is
cheaper as a models x items matrix of counts
(:func:`with_static_matrix`): every model meets
every item by broadcasting, and the gradient is a sum over rows and columns, with no
scatter. The matrix costs one evaluation per entry, observed or not, so
it pays only above a share of observed entries.

What it buys, measured in the sampler (bundled example, 4 chains x 400 + 1,000, seeds
0-23 each run both ways; docs/performance.md): sampling 17.9 s against 21.4 s on average,
0.79x the time per leapfrog step. The potential's value and gradient timed alone, in one
process, is noisier than the difference on the bundled data; the rough figures that set
the threshold (a chain's state after warm-up, cells and matrix alternating twice):

======================================  ========  ===========  ===========
data                                    coverage  cells (us)   matrix (us)
======================================  ========  ===========  ===========
simulated 12 x 300 + 100                  0.30      85,  81      79,  78
simulated 60 x 1,000 + 100                1.00    1829, 1610   1339, 1341
simulated 60 x 1,000 + 100                0.60     936,  972    856,  879
simulated 60 x 1,000 + 100                0.50     849,  766    878,  925
simulated 60 x 1,000 + 100                0.30     549,  557    586,  628
ChemBench (22 x 2,854)                    1.00     662,  665    412,  432
LSAT7 (1,000 x 5)                         1.00     294,  332    230,  227
======================================  ========  ===========  ===========

Hence :data:`MATRIX_COVERAGE`. MAP integrates the items out with a likelihood of its own,
and SVI may read random batches of cells: both keep the cells.
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np

from bayes_dualeval.model.arena_matrix import BOTH_BAD, CELLS, LINEAR, ArenaMatrix
from bayes_dualeval.model.config import ModelConfig
from bayes_dualeval.model.facets import has_facets
from bayes_dualeval.model.graders import has_graders
from bayes_dualeval.model.inputs import ModelInputs
from bayes_dualeval.model.spec import DualEvalModel

#: Least share of the models x static items matrix with a label for NUTS to read the
#: static labels as a matrix (the 60 x 1,000 simulation above is slower at 0.5).
MATRIX_COVERAGE = 0.6
#: Least share of the prompts x model-pairs slots holding a decisive pair for NUTS to read
#: the arena as a matrix, with few models (the pair term alone, 12 models on 100 prompts:
#: 21 us as a matrix at any coverage, against 5 us for 1,045 pairs at 0.16, 15 us for
#: 3,329 at 0.50 and 110-130 us from 4,297 pairs at 0.65 up) ...
PAIR_COVERAGE = 0.25
#: ... and per model: the matrix product costs a multiply-add per slot and model, so the
#: least coverage grows with the models, ``models / 50`` (the potential's value and
#: gradient, lists against matrix: 12 models at 0.65 0.69x, 18 at 0.77 0.77x, 20 at 0.78
#: 0.59x, 30 at 0.39 1.12x, 34 at 0.59 1.02x; docs/performance.md). From 50 models on,
#: never.
PAIR_COVERAGE_PER_MODEL = 0.02


def static_layout(inputs: ModelInputs) -> str:
    """``"matrix"`` or ``"cells"``: how NUTS reads these static labels ("none" without any).

    The matrix where at least :data:`MATRIX_COVERAGE` of it is observed, the likelihood
    is not estimated from random batches of cells, and one grader gave every label (the
    matrix holds one cell per model and item; graders' severities shift cells apart).
    """
    if not inputs.has_static:
        return "none"
    if inputs.static_batch or has_graders(inputs) or static_coverage(inputs) < MATRIX_COVERAGE:
        return "cells"
    return "matrix"


def laid_out(inputs: ModelInputs, config: ModelConfig) -> ModelInputs:
    """``inputs`` laid out as :func:`static_layout` and :func:`arena_layout` say."""
    if static_layout(inputs) == "matrix":
        inputs = with_static_matrix(inputs)
    if arena_layout(inputs, config) == "matrix":
        inputs = with_arena_matrix(inputs)
    return inputs


def layouts_read(inputs: ModelInputs) -> dict[str, str]:
    """How inputs that :func:`laid_out` returned are read, as ``diagnostics.json`` says it.

    ``static_layout`` and ``arena_layout``: ``"matrix"`` where the matrix is set,
    ``"cells"`` where the lists are read, ``"none"`` without such data.
    """

    def kind(present: bool, matrix) -> str:
        return "none" if not present else "cells" if matrix is None else "matrix"

    return {
        "static_layout": kind(inputs.has_static, inputs.static_counts),
        "arena_layout": kind(inputs.has_arena, inputs.arena_matrix),
    }


def arena_layout(inputs: ModelInputs, config: ModelConfig) -> str:
    """``"matrix"`` or ``"cells"``: how NUTS reads the arena ("none" without it).

    The matrix (:mod:`bayes_dualeval.model.arena_matrix`) for the pairs likelihoods, where
    the decisive pairs fill at least :func:`least_pair_coverage` of the prompts x
    model-pairs slots, each model answering a prompt at most once, and every pair read
    (not random batches); not where the arena has facets (several judges, style
    covariates), whose scores the matrix does not carry.
    """
    if not inputs.has_arena:
        return "none"
    if (
        DualEvalModel(config).arena.kind != "pairs"
        or has_facets(inputs)
        or inputs.pair_batch
        or pair_coverage(inputs) < least_pair_coverage(inputs.n_models)
    ):
        return "cells"
    return "matrix"


def least_pair_coverage(n_models: int) -> float:
    """The pair coverage from which the arena matrix pays for ``n_models`` (>= 1: never)."""
    return max(PAIR_COVERAGE, PAIR_COVERAGE_PER_MODEL * n_models)


def pair_coverage(inputs: ModelInputs) -> float:
    """Decisive pairs per slot of the prompts x model-pairs matrix (0 when it cannot hold them).

    A slot is a pair of models on an arena prompt; the pairs of the data (padding left
    out) fill at most one each. 0 where a model answered a prompt twice or a pair joins a
    model to itself, which the matrix cannot hold.
    """
    models = np.asarray(inputs.arena_model)
    cells = np.stack([models, np.asarray(inputs.arena_item)], axis=1)
    real = np.asarray(inputs.pair_w) > 0
    first, second = np.asarray(inputs.pair_i)[real], np.asarray(inputs.pair_j)[real]
    if len(np.unique(cells, axis=0)) < len(cells) or np.any(models[first] == models[second]):
        return 0.0
    slots = len(np.unique(cells[:, 1])) * inputs.n_models * (inputs.n_models - 1) // 2
    return int(np.count_nonzero(real)) / slots if slots else 0.0


def with_arena_matrix(inputs: ModelInputs) -> ModelInputs:
    """``inputs`` with the arena also laid out by prompt (:class:`ArenaMatrix`).

    Each arena cell's count, both-bad weight and linear coefficient (``pair_linear``) go
    to its prompt's row and its model's column; each decisive pair's weight goes to the
    slot of its two models, ``i < j``. A pair stored the other way round adds ``w`` to
    the smaller model's linear coefficient and takes ``w`` from the larger's
    (:mod:`bayes_dualeval.model.arena_matrix`). Padded pairs (weight 0) add nothing.
    """
    models, items = np.asarray(inputs.arena_model), np.asarray(inputs.arena_item)
    prompts = np.unique(items)
    row = np.full(inputs.n_items, -1, np.int64)
    row[prompts] = np.arange(len(prompts))
    m = inputs.n_models
    weights = np.zeros((3, len(prompts), m), np.float64)
    np.add.at(weights[CELLS], (row[items], models), 1.0)
    np.add.at(weights[BOTH_BAD], (row[items], models), np.asarray(inputs.bb_count))
    np.add.at(weights[LINEAR], (row[items], models), np.asarray(inputs.pair_linear))
    w = np.asarray(inputs.pair_w, np.float64)
    real = w > 0
    w = w[real]
    first = np.asarray(inputs.pair_i)[real]
    second = np.asarray(inputs.pair_j)[real]
    r = row[items[first]]
    lo = np.minimum(models[first], models[second])
    hi = np.maximum(models[first], models[second])
    flipped = models[first] > models[second]
    # w log s(-x) = w [log s(x) - x], x = gamma (p_lo - p_hi): -gamma (w p_lo - w p_hi)
    np.add.at(weights[LINEAR], (r[flipped], lo[flipped]), w[flipped])
    np.add.at(weights[LINEAR], (r[flipped], hi[flipped]), -w[flipped])
    slot = np.zeros((m, m), np.int64)
    slot[np.triu_indices(m, 1)] = np.arange(m * (m - 1) // 2)
    slots = np.zeros((len(prompts), m * (m - 1) // 2), np.float64)
    np.add.at(slots, (r, slot[lo, hi]), w)
    matrix = ArenaMatrix(
        jnp.asarray(prompts, jnp.int32),
        jnp.asarray(weights, jnp.float32),
        jnp.asarray(slots, jnp.float32),
    )
    return dataclasses.replace(inputs, arena_matrix=matrix)


def static_coverage(inputs: ModelInputs) -> float:
    """Share of the models x static items matrix that has a label (0 without one).

    Padded cells (:attr:`~bayes_dualeval.model.inputs.ModelInputs.static_n` 0) do not
    count.
    """
    size = inputs.n_models * inputs.n_static_items
    return int(np.count_nonzero(np.asarray(inputs.static_n))) / size if size else 0.0


def with_static_matrix(inputs: ModelInputs) -> ModelInputs:
    """``inputs`` with the static labels also laid out as ``static_counts``.

    Correct answers and answers per model and static item
    (:attr:`~bayes_dualeval.model.inputs.ModelInputs.static_counts`), from the cells that
    count (a padded cell adds nothing); a model that answered an item more than once counts
    every answer.
    """
    column = np.full(inputs.n_items, -1, np.int64)
    column[np.asarray(inputs.static_items)] = np.arange(inputs.n_static_items)
    weight = np.asarray(inputs.static_n, np.float32)
    where = (np.asarray(inputs.static_model), column[np.asarray(inputs.static_item)])
    counts = np.zeros((2, inputs.n_models, inputs.n_static_items), np.float32)
    np.add.at(counts[0], where, weight * np.asarray(inputs.static_y, np.float32))
    np.add.at(counts[1], where, weight)
    return dataclasses.replace(inputs, static_counts=jnp.asarray(counts))
