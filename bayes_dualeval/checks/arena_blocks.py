r"""Model x source audit of arena rewards: does a model beat its predicted reward level.

The arena analogue of the static blocks of
:func:`~bayes_dualeval.checks.benchmarks.contamination_table`: for every model ``i`` and
arena source ``s``, the mean normalised reward of the model's cells on the source's prompts
is compared with the reward the fit predicts for it. The prediction is the one the arena
cell checks use (:func:`~bayes_dualeval.checks.reward.reward_stats`): in draw ``d``, a cell
``(i, q)`` has mean ``mu = zbar_q + gamma_d (p_iqd - pbar_qd)`` (the prompt's mean reward,
plus the model's success probability relative to the prompt's mean, on the reward scale
``gamma``), which is also what the pairs likelihood implies, since it models
``z_i - z_j`` by ``gamma (p_i - p_j)``. Residual sd: ``sigma_d sqrt(1 - 1/n_q)`` under the
reward likelihood; under the pairs likelihood, which has no ``sigma``, the pooled
method-of-moments value ``s^2 = sum (z - E[mu])^2 / sum (1 - 1/n_q)`` over all arena cells
(a planted block inflates it, which makes every p-value more conservative).

A block's cells lie on distinct prompts, so in each draw its mean reward is
``Normal(E_d, V_d)`` with ``E_d`` the mean of ``mu`` and ``V_d`` the sum of the residual
variances over ``n^2``; ``p_value = mean_d Phi((E_d - O) / sqrt(V_d))``, one-sided (a
reward above the prediction). The block is not left out: its own cells pull the model's
ability up, which with static data (or other sources) anchoring the ability costs little,
and otherwise makes the p-value conservative.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import sparse, special

from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.model import links
from bayes_dualeval.model.spec import DualEvalModel
from bayes_dualeval.posterior.summaries import draws_of

#: Most draws used, and (draw x cell) evaluations held in memory at once.
MAX_DRAWS, CHUNK_ELEMENTS = 200, 4_000_000


def arena_blocks(idata, dataset: Dataset, *, ci: float = 0.95) -> pd.DataFrame:
    """One row per (model, arena source): observed and predicted mean normalised reward.

    Parameters
    ----------
    idata : arviz.InferenceData
        The run's posterior.
    dataset : Dataset
        The data the run was fitted to.
    ci : float
        Level of the interval of the expected mean reward.

    Returns
    -------
    pandas.DataFrame
        Columns ``model, source, dataset`` (empty), ``n`` (prompts), ``observed`` and
        ``expected`` mean normalised reward with ``expected_lo``, ``expected_hi``,
        ``excess`` and a one-sided ``p_value``; empty for runs without arena rewards or
        without item parameters (Bradley-Terry).
    """
    model = DualEvalModel.from_idata(idata)
    config = model.config
    z = dataset.arena_z.astype(np.float64)
    if not len(z) or config.mode not in ("both", "arena") or "b" not in model.item_sites:
        return pd.DataFrame()
    cell_model, cell_item = dataset.arena_model, dataset.arena_item
    k = dataset.n_items
    n_q = np.bincount(cell_item, minlength=k).astype(np.float64)
    zbar = np.bincount(cell_item, weights=z, minlength=k) / np.maximum(n_q, 1.0)
    shrink = 1.0 - 1.0 / np.maximum(n_q[cell_item], 1.0)
    key = pd.MultiIndex.from_arrays([dataset.models[cell_model], dataset.item_source[cell_item]])
    codes, blocks = pd.factorize(key)
    n_cells = len(z)
    to_block = sparse.csr_array(
        (np.ones(n_cells), (codes, np.arange(n_cells))), shape=(len(blocks), n_cells)
    )
    to_item = sparse.csr_array(
        (np.ones(n_cells), (cell_item, np.arange(n_cells))), shape=(k, n_cells)
    )
    n = to_block @ np.ones(n_cells)
    observed = (to_block @ z) / n

    theta = np.asarray(draws_of(idata, "theta"), np.float64)
    rows = np.unique(np.linspace(0, len(theta) - 1, min(MAX_DRAWS, len(theta))).astype(int))
    names = [s for s in ("b", "a") if s in model.item_sites] + ["gamma"]
    item = {s: np.asarray(draws_of(idata, s), np.float64)[rows] for s in names}
    sigma = np.asarray(draws_of(idata, "sigma"), np.float64)[rows] if (
        config.arena_likelihood == "reward" and "sigma" in idata.posterior) else None  # fmt: skip
    theta = theta[rows]
    means = np.empty((len(blocks), len(rows)))
    step = max(1, CHUNK_ELEMENTS // n_cells)
    mu_mean = np.zeros(n_cells)
    for start in range(0, len(rows), step):
        d = slice(start, start + step)
        a = item["a"][d][:, cell_item] if "a" in item else None
        p = links.probability(links.eta(theta[d][:, cell_model], item["b"][d][:, cell_item], a))
        pbar = (to_item @ p.T).T / np.maximum(n_q, 1.0)
        mu = zbar[cell_item] + item["gamma"][d][:, None] * (p - pbar[:, cell_item])
        means[:, d] = (to_block @ mu.T) / n[:, None]
        mu_mean += mu.sum(axis=0) / len(rows)
    if sigma is not None:
        var = (sigma[None, :] ** 2) * ((to_block @ shrink) / n**2)[:, None]
    else:
        s2 = np.sum((z - mu_mean) ** 2) / max(np.sum(shrink), 1e-12)
        var = np.broadcast_to((s2 * (to_block @ shrink) / n**2)[:, None], means.shape)
    sd = np.sqrt(np.maximum(var, 1e-12))
    p_value = special.ndtr((means - observed[:, None]) / sd).mean(axis=1)
    alpha = (1.0 - ci) / 2.0
    lo, hi = np.quantile(means, [alpha, 1.0 - alpha], axis=1)
    expected = means.mean(axis=1)
    return pd.DataFrame(
        {
            "model": blocks.get_level_values(0),
            "source": blocks.get_level_values(1),
            "dataset": "",
            "n": n.astype(int),
            "observed": observed,
            "expected": expected,
            "expected_lo": lo,
            "expected_hi": hi,
            "excess": observed - expected,
            "p_value": np.clip(p_value, 0.0, 1.0),
        }
    )
