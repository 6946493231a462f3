r"""The arena's decisive pairs as a prompts x model-pairs matrix: the same density, no scatter.

The joint model reads the arena as lists: arena cells (a model's answer to a prompt) and
decisive pairs of cells. Each pair gathers its two cells' success probabilities, and the
gradient scatters back into the cells with one addition per pair side, which is slow on
a CPU. Where most pairs of models meet on most prompts, the same terms cost less laid out
densely (:class:`ArenaMatrix`, built by
:func:`bayes_dualeval.inference.layout.with_arena_matrix` for NUTS; on the bundled example
the potential's value and gradient fell from about 160 to 110 us, with the anchoring solve
of :mod:`bayes_dualeval.model.anchoring` reading the matrix too):

* the success probabilities of every model on every arena prompt, ``P`` (prompts x
  models), by broadcasting, as the static matrix does;
* every pair's logit at once, ``X = gamma P E``, where the incidence matrix ``E``
  (models x model pairs) has ``+1`` and ``-1`` in the column of each pair ``i < j`` of
  models: a matrix product, whose gradient is a matrix product too;
* the pair term's nonlinear part
  (:func:`~bayes_dualeval.model.arena_term.pair_nonlinear`) ``sum W log sigmoid(X)``,
  with ``W`` the summed weight of the decisive pairs in each slot (0 where a pair is not
  decisive or not observed).

A pair stored as ``(j, i)`` with ``j > i`` contributes ``w log sigmoid(-x) = w [log
sigmoid(x) - x]`` in its slot's orientation; the ``-w x`` part is linear in ``P`` and joins
the soft targets' linear part (``pair_linear``, :mod:`bayes_dualeval.model.inputs`) in one
coefficient matrix. The both-bad weights and the cells of each prompt (for the mean
success probability of the level term and of the anchoring solve) become matrices too.
Only the pairs likelihoods (``pairs``, ``pairs-full``) are laid out so; the ``reward``
likelihood and DualEval's ``bt`` baseline keep their lists.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayes_dualeval.model import arena_term, links
from bayes_dualeval.model.ability_map import ability_at

#: Rows of :attr:`ArenaMatrix.weights`.
CELLS, BOTH_BAD, LINEAR = 0, 1, 2


class ArenaMatrix(NamedTuple):
    """The arena's cells and decisive pairs laid out by prompt (a JAX pytree).

    Attributes
    ----------
    prompts : array of int32, shape (Qa,)
        The item index of each arena prompt (a row of the matrices below).
    weights : array of float32, shape (3, Qa, M)
        Per prompt and model: the number of arena cells (row :data:`CELLS`, 1 or 0), the
        weighted number of both-bad pairs the cell is in (:data:`BOTH_BAD`), and the
        coefficient of its success probability in the linear part of the pair term
        (:data:`LINEAR`, multiplied by ``-gamma``).
    slots : array of float32, shape (Qa, M (M - 1) / 2)
        Summed weight of the decisive pairs of each prompt and pair of models ``i < j``, in
        the order of ``numpy.triu_indices(M, 1)``.
    """

    prompts: jax.Array
    weights: jax.Array
    slots: jax.Array


def incidence(n_models: int) -> np.ndarray:
    """``E`` (models x model pairs): column ``k`` is ``e_i - e_j``, the ``k``-th pair ``i < j``."""
    first, second = np.triu_indices(n_models, 1)
    out = np.zeros((n_models, len(first)), np.float32)
    out[first, np.arange(len(first))] = 1.0
    out[second, np.arange(len(first))] = -1.0
    return out


def prompt_eta(theta, a, b, matrix: ArenaMatrix, n_models: int):
    """Linear predictor of every model on every arena prompt, shape (Qa, M).

    ``theta`` is the abilities (M,) or an ability map
    (:class:`~bayes_dualeval.model.ability_map.AbilityMap`).
    """
    prompts = matrix.prompts
    ability = prompt_ability(theta, matrix, n_models)
    return links.eta(ability, b[prompts][:, None], None if a is None else a[prompts][:, None])


def prompt_ability(theta, matrix: ArenaMatrix, n_models: int):
    """The ability every model brings to every arena prompt, shape (Qa, M)."""
    return ability_at(theta, jnp.arange(n_models)[None, :], matrix.prompts[:, None])


def prompt_sums(values, matrix: ArenaMatrix):
    """Sum of ``values`` (Qa, M) over each prompt's cells, shape (Qa,)."""
    return jnp.sum(matrix.weights[CELLS] * values, axis=1)


def per_item(values, matrix: ArenaMatrix, n_items: int):
    """:func:`prompt_sums` as an array over all items (Q,) (:func:`to_items`)."""
    return to_items(prompt_sums(values, matrix), matrix, n_items)


def to_items(values, matrix: ArenaMatrix, n_items: int):
    """Per-prompt ``values`` (Qa,) as an array over all items (Q,), 0 for the other items."""
    return jnp.zeros(n_items, values.dtype).at[matrix.prompts].set(values)


def pair_total(scores, matrix: ArenaMatrix):
    """Every decisive pair's :func:`~bayes_dualeval.model.arena_term.pair`, summed.

    ``scores`` are the cells' scores (Qa, M) (``gamma (p - 1/2)``). The logits of every pair slot
    come from one matrix product, which runs at full float32 precision on every device (a
    GPU's default TF32 would blur the differences of probabilities); the linear parts are
    one weighted sum of the scores.
    """
    e = jnp.asarray(incidence(scores.shape[1]))
    x = jnp.matmul(scores, e, precision=jax.lax.Precision.HIGHEST)
    nonlinear = jnp.sum(arena_term.pair_nonlinear(x, matrix.slots))
    return nonlinear - jnp.sum(matrix.weights[LINEAR] * scores)


def both_bad_total(eta, matrix: ArenaMatrix):
    """:func:`~bayes_dualeval.model.arena_term.both_bad` summed over both-bad pairs' cells.

    ``eta`` has shape (Qa, M).
    """
    return jnp.sum(arena_term.both_bad(eta, matrix.weights[BOTH_BAD]))
