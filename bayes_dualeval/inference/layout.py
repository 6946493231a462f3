"""How NUTS lays out the static labels: a list of cells, or a models x items matrix.

The joint model reads the static labels as a list of cells: each cell gathers its model's
ability and its item's parameters, and the gradient scatters back to abilities and items
with one addition per cell. Where most models answered most items, the same density is
cheaper as a models x items matrix of counts
(:meth:`~bayes_dualeval.model.inputs.ModelInputs.with_static_matrix`): every model meets
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
    if inputs.static_batch or inputs.static_coverage < MATRIX_COVERAGE:
        return "cells"
    return "matrix"


def laid_out(inputs: ModelInputs) -> ModelInputs:
    """``inputs`` with the static labels as a matrix where :func:`static_layout` says so."""
    if static_layout(inputs) == "matrix":
        return inputs.with_static_matrix()
    return inputs
