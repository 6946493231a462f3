"""How NUTS lays out the static labels: a list of cells, or a models x items matrix.

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

from bayes_dualeval.model.inputs import ModelInputs

#: Least share of the models x static items matrix with a label for NUTS to read the
#: static labels as a matrix (the 60 x 1,000 simulation above is slower at 0.5).
MATRIX_COVERAGE = 0.6


def static_layout(inputs: ModelInputs) -> str:
    """``"matrix"`` or ``"cells"``: how NUTS reads these static labels ("none" without any).

    The matrix where at least :data:`MATRIX_COVERAGE` of it is observed, and the likelihood
    is not estimated from random batches of cells.
    """
    if not inputs.has_static:
        return "none"
    if inputs.static_batch or static_coverage(inputs) < MATRIX_COVERAGE:
        return "cells"
    return "matrix"


def laid_out(inputs: ModelInputs) -> ModelInputs:
    """``inputs`` with the static labels as a matrix where :func:`static_layout` says so."""
    if static_layout(inputs) == "matrix":
        return with_static_matrix(inputs)
    return inputs


def static_coverage(inputs: ModelInputs) -> float:
    """Share of the models x static items matrix that has a label (0 without one).

    Padded cells (:attr:`~bayes_dualeval.model.inputs.ModelInputs.static_mask` 0) do not
    count.
    """
    size = inputs.n_models * inputs.n_static_items
    return int(np.count_nonzero(np.asarray(inputs.static_mask))) / size if size else 0.0


def with_static_matrix(inputs: ModelInputs) -> ModelInputs:
    """``inputs`` with the static labels also laid out as ``static_counts``.

    Correct answers and answers per model and static item
    (:attr:`~bayes_dualeval.model.inputs.ModelInputs.static_counts`), from the cells that
    count (a padded cell adds nothing); a model that answered an item more than once counts
    every answer.
    """
    column = np.full(inputs.n_items, -1, np.int64)
    column[np.asarray(inputs.static_items)] = np.arange(inputs.n_static_items)
    weight = np.asarray(inputs.static_mask, np.float32)
    where = (np.asarray(inputs.static_model), column[np.asarray(inputs.static_item)])
    counts = np.zeros((2, inputs.n_models, inputs.n_static_items), np.float32)
    np.add.at(counts[0], where, weight * np.asarray(inputs.static_y, np.float32))
    np.add.at(counts[1], where, weight)
    return dataclasses.replace(inputs, static_counts=jnp.asarray(counts))
