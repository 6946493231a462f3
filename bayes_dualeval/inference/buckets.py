"""Shape buckets: the sampler's inputs padded to a few sizes, so that compiled programs repeat.

A compiled sampler depends on the shapes of its inputs (the data themselves are arguments,
:func:`bayes_dualeval.inference.nuts.data_as_argument`). Two data sets of one design rarely
have the same number of decisive pairs or of answered static cells (ties, both-bad pairs and
missing answers vary), so each would compile its own program. Padding both to the next size
of a geometric ladder (:func:`bucket`) with entries that contribute exactly nothing makes
them share one: a pair of weight 0 adds ``0 * log sigmoid(x) = 0`` to the arena term, and a
padded static cell is masked out of the likelihood (``ModelInputs.static_n``). The
posterior is the same; the gradient does up to :data:`STEP` - 1 more work on those terms.

Every sampler pads: NUTS itself (:func:`~bayes_dualeval.inference.nuts.run_nuts`), SVI and
MAP before their data are split over devices
(:func:`~bayes_dualeval.inference.sampling.sample`); SVI draws its random batches from
the padded terms (a padded term in a batch adds nothing, so the estimate stays unbiased)
and decides whether to batch by the terms of the data (:func:`data_terms`). The draws, and
everything computed from them afterwards, see the data as they are.
"""

from __future__ import annotations

import dataclasses
import math

import jax.numpy as jnp

from bayes_dualeval.model.inputs import ModelInputs, fields_of

#: Ratio of one bucket size to the next (the most padding adds is ``STEP - 1``, 19%).
STEP = 2**0.25
#: The smallest bucket: smaller arrays are padded to it.
SMALLEST = 64
#: Bucket sizes are multiples of this.
ALIGN = 8


def bucket(n: int) -> int:
    """The bucket of an array of length ``n``: 0 stays 0, else the next ladder size >= n."""
    if n <= 0:
        return 0
    if n <= SMALLEST:
        return SMALLEST
    k = math.ceil(math.log(n / SMALLEST) / math.log(STEP) - 1e-9)
    size = SMALLEST * STEP**k
    return int(math.ceil(size / ALIGN) * ALIGN)


def _pad(x, size: int, value=0):
    n = x.shape[0]
    if n == size:
        return x
    return jnp.concatenate([x, jnp.full((size - n,), value, dtype=x.dtype)])


def padded(inputs: ModelInputs) -> ModelInputs:
    """``inputs`` with static cells and decisive pairs padded to their buckets.

    Padded pairs join arena cell (or model) 0 with itself at weight 0; padded static cells
    are model 0's answer to item 0, masked (``static_n`` 0). Arena cells, items and
    models are not padded: each is a parameter's or a prompt's support.
    """
    return padded_to(inputs, bucket(inputs.static_y.shape[0]), bucket(inputs.pair_w.shape[0]))


def padded_to(inputs: ModelInputs, bs: int, bp: int) -> ModelInputs:
    """``inputs`` with ``bs`` static cells and ``bp`` decisive pairs, padded as :func:`padded`.

    Sizes at or below the present ones leave that kind as it is.
    """
    s, p = inputs.static_y.shape[0], inputs.pair_w.shape[0]
    bs, bp = max(bs, s), max(bp, p)
    if (bs, bp) == (s, p):
        return inputs
    sizes = {"static_cell": bs, "pair": bp}
    padded = {
        name: _pad(getattr(inputs, name), size)
        for axis, size in sizes.items()
        for name in fields_of(axis)
    }
    return dataclasses.replace(inputs, **padded)


def data_terms(inputs: ModelInputs) -> tuple[int, int]:
    """Static cells and decisive pairs of the data, padding left out.

    A padded cell has mask 0 and a padded pair weight 0; every cell of the data has mask
    1 and every decisive pair a positive weight
    (:func:`~bayes_dualeval.model.inputs.pair_weights`).
    """
    return int(jnp.sum(inputs.static_n > 0)), int(jnp.sum(inputs.pair_w > 0))
