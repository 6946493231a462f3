r"""The left-out ability of a model x benchmark block, on a grid: one ability or per domain.

The model x benchmark audit (:mod:`~bayes_dualeval.checks.benchmark_audit`) predicts a
block of a model's cells from the ability the block's items read, with the block left out.
With one ability per model that is the model's ability ``theta_i`` given its other cells;
a model strong in one domain (several benchmarks of code, say) is then predicted from its
average ability on every code benchmark, and flagged like a model that saw one benchmark's
questions.

With abilities per item domain (``abilities = "domain"``,
:func:`~bayes_dualeval.model.ability_priors.domain_abilities`) an item of domain ``d``
reads ``theta_{i,d} = theta_i + delta_{i,d}``, ``delta_{i,d} ~ Normal(0, tau_d)`` (sum to
zero over models: marginal sd ``tau_d sqrt(1 - 1/M)``). A block of domain ``d`` is then
predicted from the posterior of ``theta_{i,d}`` given

* the model's other cells in domain ``d`` (other benchmarks of the domain): their
  likelihood, read directly as a function of ``theta_{i,d}``;
* its cells in the other domains, through ``theta_i``: each other domain ``d'`` gives
  ``theta_i`` the likelihood :math:`\int L_{d'}(\theta_i + \delta)\,
  N(\delta; 0, \tau_{d'}) \, d\delta` (a convolution on the grid), items without a domain
  read ``theta_i`` itself, and the prior is ``theta_i ~ Normal(0, theta_scale)``; the
  resulting posterior of ``theta_i`` is carried to ``theta_{i,d}`` by the domain's
  deviation prior (a second convolution, with ``tau_d``).

So a model's strength in a domain is part of the prediction when the domain has other
benchmarks, and a leak is excess over the domain's ability specific to one benchmark. Where
the model has no other cells in the block's domain the domain ability comes from the other
domains and ``tau_d`` alone: a specialist and a leak cannot be told apart there (the
audit's ``design`` column says so). Without domain abilities every block reads ``theta_i``
(one column), and this is the left-out posterior the audit always computed.

Everything is per posterior draw (``tau_d`` of the draw), exact on the grid; the
sum-to-zero coupling between models' deviations is left out beyond the marginal sd.
"""

from __future__ import annotations

import numpy as np

from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.model.spec import DualEvalModel

#: ``design`` of ``contamination.csv``'s left-out rows: one ability per model (a
#: specialist is flagged like a leak), the block's domain ability informed by the model's
#: other benchmarks in the domain, or the domain ability from the other domains only (the
#: model has no other benchmark in the block's domain: a specialist and a leak are not
#: separable there).
ONE_ABILITY, DOMAIN, DOMAIN_ONE_BENCHMARK = "left_out", "left_out_domain", "left_out_domain_only"


def item_columns(dataset: Dataset, model: DualEvalModel) -> tuple[np.ndarray, np.ndarray]:
    """Each item's ability column and the domain its blocks are labelled with.

    With domain abilities the item's domain (``len(domains)`` for an item without one, which
    reads the overall ability) and its name; otherwise column 0 for every item (the one
    ability) and an empty name, so a benchmark is one block whatever its items' domains.
    """
    if model.domain_abilities:
        return dataset.domain_index.astype(np.int64), np.asarray(dataset.item_domain, str)
    return np.zeros(dataset.n_items, np.int64), np.full(dataset.n_items, "", dtype=object)


def n_columns(dataset: Dataset, model: DualEvalModel) -> int:
    """Ability columns of the audit: each domain and the overall ability, or the one."""
    return len(dataset.domains) + 1 if model.domain_abilities else 1


def kernels(grid: np.ndarray, sd: np.ndarray) -> np.ndarray:
    """Gaussian transition matrices ``W[c, t, s]`` of ``t - s ~ Normal(0, sd[c])`` on the grid.

    Each column ``s`` sums to one over ``t`` (a density on the grid, edges renormalised),
    so a function of ``t`` that is 0 everywhere convolves to 0 in log space.
    """
    diff = grid[:, None] - grid[None, :]
    sd = np.maximum(np.asarray(sd, np.float64), 1e-9)
    w = np.exp(-0.5 * (diff[None] / sd[:, None, None]) ** 2)
    return w / w.sum(axis=1, keepdims=True)


def _log_matmul(log_x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``log(exp(log_x) @ w)`` over the last axis of ``log_x``, stably (rows shifted)."""
    top = log_x.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    return np.log(np.maximum(np.exp(log_x - top) @ w, 1e-300)) + top


def left_out_log_posterior(
    log_prior: np.ndarray,
    column_ll: np.ndarray,
    owner: np.ndarray,
    column: np.ndarray,
    block_ll: np.ndarray,
    w: np.ndarray | None = None,
) -> np.ndarray:
    """Log posterior (unnormalised) on the grid of each block's ability, the block left out.

    Parameters
    ----------
    log_prior : numpy.ndarray, shape (M, G) or (G,)
        The overall ability's log prior on each model's grid (with domain abilities one
        grid, shared by every model and column: the kernels are on it).
    column_ll : numpy.ndarray, shape (M, C, G)
        Per model and ability column (each domain, then the overall ability: ``C - 1``), the
        log likelihood of all its cells that read the column, as a function of that
        column's ability.
    owner, column : numpy.ndarray of int, shape (B,)
        Each block's model and column.
    block_ll : numpy.ndarray, shape (B, G)
        Each block's own log likelihood (in its column's ability).
    w : numpy.ndarray, shape (C - 1, G, G), optional
        Each domain's deviation kernel (:func:`kernels` with the draw's marginal sd of the
        deviations); needed when ``C > 1``.

    Returns
    -------
    numpy.ndarray, shape (B, G)
        In the block's column's ability: its own column's other cells plus what the model's
        other columns say about it.
    """
    overall = column_ll.shape[1] - 1
    base = log_prior + column_ll[:, overall]  # (M, G): theta_i's log posterior, so far
    if overall == 0:
        return base[owner] - block_ll
    # each domain's likelihood of theta_i: its cells' likelihood of theta_{i,d}, convolved
    conv = np.stack(
        [_log_matmul(column_ll[:, d], w[d]) for d in range(overall)], axis=1
    )  # (M, D, G)
    base = base + conv.sum(axis=1)
    out = base[owner] - block_ll  # blocks of items without a domain read theta_i
    for d in range(overall):
        rows = np.flatnonzero(column == d)
        if not len(rows):
            continue
        i = owner[rows]
        theta_i = base[i] - conv[i, d]  # theta_i from everything but domain d
        carried = _log_matmul(theta_i, w[d].T)  # to theta_{i,d} through delta_{i,d}
        out[rows] = column_ll[i, d] - block_ll[rows] + carried
    return out


def designs(owner: np.ndarray, column: np.ndarray, n_blocks_in: np.ndarray, overall: int):
    """The ``design`` of each block: see :data:`ONE_ABILITY`, :data:`DOMAIN`.

    Parameters
    ----------
    owner, column : numpy.ndarray of int, shape (B,)
    n_blocks_in : numpy.ndarray of int, shape (M, C)
        Blocks of each model in each column.
    overall : int
        The overall ability's column (0 without domain abilities).
    """
    other = n_blocks_in[owner, column] > 1
    return np.where(
        column == overall, ONE_ABILITY, np.where(other, DOMAIN, DOMAIN_ONE_BENCHMARK)
    ).astype(object)
