r"""Arena cells of the model x source audit: rewards on an ability grid.

The arena analogue of the static blocks of
:func:`~bayes_dualeval.checks.benchmark_audit.benchmark_audit`: for every model ``i`` and
arena source ``s``, the mean normalised reward of the model's cells on the source's prompts
is compared with the reward predicted for it *with the block left out*.

The prediction is the one the arena cell checks use
(:func:`~bayes_dualeval.checks.reward.reward_stats`): the normalised reward of cell
``(i, q)`` is ``zbar_q + gamma (p_iq - pbar_q) + e``
(:func:`~bayes_dualeval.model.arena_term.reward_mean`; the prompt's mean reward plus the
model's success probability relative to the prompt's mean, on the reward scale ``gamma``;
also what the pairs likelihood implies, since it models ``z_i - z_j`` by
``gamma (p_i - p_j)``). Written for the model's own ability ``t``, with the other models'
mean probability ``pbar_{-i,q}`` held at the draw:

``mu_iq(t) = zbar_q + k_s gamma (1 - 1/n_q) (p(t; a_q, b_q) - pbar_{-i,q})``,
``var = s_s^2 (1 - 1/n_q)``.

The model has one ``gamma``, but rewards are normalised per source, so each source's
rewards follow ability on a slightly different scale (its standard deviation differs),
and a model strong or weak enough would look "over-rewarded" on the source whose scale is
steeper: with the run's one ``gamma``, 1-3 clean blocks in 80 reached ``q_value < 0.05``
on simulated data with four sources, and true parameters gave 4.5-5.5% of clean p-values
below 0.01. So each source ``s`` gets its own scale factor ``k_s`` (least squares of
``z - zbar`` on ``gamma (p - pbar)`` at the posterior mean, over the source's cells) and
its own noise ``s_s^2 = sum (z - zbar - k_s x)^2 / sum (1 - 1/n_q)`` (method of moments;
a planted block inflates it, which makes every p-value more conservative). On the
ability grid these cells give a Gaussian log likelihood of the
model's ability (its arena information, for leaving any block out) and, for the block,
the mean and variance of its mean reward. Prompts answered by a single model carry no
information on anything and are left out.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import special

from bayes_dualeval.checks.domain_grid import item_columns
from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.model import links
from bayes_dualeval.model.arena_term import reward_mean
from bayes_dualeval.model.spec import DualEvalModel


class ArenaCells:
    """A run's arena cells, grouped into (model, source) blocks, on an ability grid.

    Parameters
    ----------
    dataset : Dataset
    model : DualEvalModel
        The run's specification (for the signature shared with the static cells; the
        noise is the method-of-moments value per source under every arena likelihood).
    draws : dict
        Thinned posterior draws (float64, draws first): ``theta``, ``b``, ``a`` (when the
        link has it) and ``gamma``.
    """

    kind = "arena"

    def __init__(self, dataset: Dataset, model: DualEvalModel, draws: dict):
        n_q_all = np.bincount(dataset.arena_item, minlength=dataset.n_items)
        keep = n_q_all[dataset.arena_item] > 1
        self.cell_model = dataset.arena_model[keep]
        self.cell_item = dataset.arena_item[keep]
        self.z = dataset.arena_z[keep].astype(np.float64)
        k = dataset.n_items
        self.n_q = np.bincount(self.cell_item, minlength=k).astype(np.float64)
        self.zbar = np.bincount(self.cell_item, weights=self.z, minlength=k) / np.maximum(
            self.n_q, 1.0
        )
        self.shrink = 1.0 - 1.0 / np.maximum(self.n_q[self.cell_item], 1.0)
        columns, domain = item_columns(dataset, model)
        key = pd.MultiIndex.from_arrays(
            [
                dataset.models[self.cell_model],
                dataset.item_source[self.cell_item],
                domain[self.cell_item],
            ]
        )
        self.cell_block, blocks = pd.factorize(key)
        self.block_column = np.zeros(len(blocks), np.int64)
        self.block_column[self.cell_block] = columns[self.cell_item]
        self.cell_source, sources = pd.factorize(dataset.item_source[self.cell_item])
        self.labels = pd.DataFrame(
            {
                "model": blocks.get_level_values(0),
                "kind": self.kind,
                "source": blocks.get_level_values(1),
                "dataset": "",
                "domain": blocks.get_level_values(2),
            }
        )
        self.n = np.bincount(self.cell_block, minlength=len(blocks)).astype(np.float64)
        self.observed = np.bincount(self.cell_block, weights=self.z, minlength=len(blocks))
        self.draws = draws
        self._gamma = np.asarray(draws["gamma"], np.float64).reshape(len(draws["theta"]), -1)[:, 0]
        # the other models' probabilities on each prompt, per draw (each cell's ability:
        # its domain's, with domain abilities)
        if "theta_domain" in draws:
            table = np.concatenate([draws["theta_domain"], draws["theta"][..., None]], axis=-1)
            ability = table[:, self.cell_model, columns[self.cell_item]]
        else:
            ability = draws["theta"][:, self.cell_model]
        self._p = self._probability(np.arange(len(self.z)), ability)
        self._sum_p = np.stack(
            [np.bincount(self.cell_item, weights=row, minlength=k) for row in self._p]
        )
        # each source's own reward scale and noise (rewards are normalised per source)
        pbar = self._sum_p[:, self.cell_item] / self.n_q[self.cell_item]
        x = reward_mean(self._p, pbar, self._gamma[:, None]).mean(axis=0)
        r = self.z - self.zbar[self.cell_item]
        src = self.cell_source
        n_src = len(sources)
        sxx = np.bincount(src, weights=x * x, minlength=n_src)
        sxr = np.bincount(src, weights=x * r, minlength=n_src)
        self.slope = np.where(sxx > 1e-12, sxr / np.maximum(sxx, 1e-12), 1.0)
        resid = r - self.slope[src] * x
        self.s2 = np.bincount(src, weights=resid**2, minlength=n_src) / np.maximum(
            np.bincount(src, weights=self.shrink, minlength=n_src), 1e-12
        )

    def __len__(self) -> int:
        return len(self.z)

    def _probability(self, rows, theta):
        item = self.cell_item[rows]
        a = self.draws["a"][:, item] if "a" in self.draws else None
        return links.probability(links.eta(theta, self.draws["b"][:, item], a))

    def terms(self, k: int, rows: slice, ability: np.ndarray):
        """Per cell of ``rows`` and grid point, in draw ``k``: log likelihood, mean, variance.

        At the model's abilities ``ability`` (cells x grid points: each cell's model's grid).

        Returns
        -------
        ll, mu, var : numpy.ndarray, shape (cells, grid)
        """
        item = self.cell_item[rows]
        n_q = self.n_q[item]
        a = self.draws["a"][k, item, None] if "a" in self.draws else None
        p = links.probability(links.eta(ability, self.draws["b"][k, item, None], a))
        others = (self._sum_p[k, item] - self._p[k, rows]) / np.maximum(n_q - 1.0, 1.0)
        src = self.cell_source[rows]
        scale = self.slope[src] * self._gamma[k] * (1.0 - 1.0 / n_q)
        mu = reward_mean(p, others[:, None], scale[:, None], self.zbar[item, None])
        var = np.broadcast_to((self.s2[src] * self.shrink[rows])[:, None], mu.shape)
        ll = -0.5 * (self.z[rows, None] - mu) ** 2 / np.maximum(var, 1e-12)
        return ll, mu, var

    def tail(self, mu: np.ndarray, var: np.ndarray) -> np.ndarray:
        """P(mean reward >= observed) per block and grid point, from its sum's moments."""
        n = self.n[:, None]
        sd = np.sqrt(np.maximum(var, 1e-12)) / n
        return special.ndtr((mu / n - self.observed[:, None] / n) / sd)

    def rate(self, mu: np.ndarray) -> np.ndarray:
        """Mean reward of each block from the sum of its cells' means."""
        return mu / self.n[:, None]
