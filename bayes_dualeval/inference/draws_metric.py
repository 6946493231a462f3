"""The metric a round of NUTS draws has shown, for the rounds that continue it.

Warm-up estimates the mass matrix from its last window: about 200 iterations of each chain,
on its own, while the chains may still be settling. A round of draws that fails the
convergence check has many more draws of the same posterior, from every chain: their
covariance, in the blocks warm-up adapted (dense over the global sites, diagonal
elsewhere), is a better metric for the draws still to come. Measured on the bundled example
(``scripts/studies/metric_oracle.py``, seeds 0-4): the least effective sample size per
1,000 leapfrog steps of a round sampled with it against the round it was estimated from, in
docs/performance.md (session 65). On AlpacaEval, whose continuation rounds are the longest,
the warm-up's dense block allowed a fifth of the variance of the posterior's widest
direction (docs/performance.md, "Paper scale, MAP and AlpacaEval under code M").
"""

from __future__ import annotations

import numpy as np

from bayes_dualeval.inference.warm import latent_transforms
from bayes_dualeval.model.config import ModelConfig
from bayes_dualeval.model.inputs import ModelInputs

#: Regularisation towards a small multiple of the identity, Stan's and NumPyro's: the
#: estimate from ``n`` draws is ``n / (n + 5)`` of their covariance plus ``1e-3 * 5 / (n + 5)``.
SHRINK, FLOOR = 5.0, 1e-3


def draws_metric(samples: dict, blocks: dict, inputs: ModelInputs, config: ModelConfig):
    """The covariance of ``samples`` in the unconstrained coordinates, in ``blocks``' form.

    Parameters
    ----------
    samples : dict
        Constrained draws by site, ``(chain, draw, ...)``: every latent site the metric
        covers (other sites are ignored).
    blocks : dict
        A metric in NumPyro's block form (tuples of site names to a diagonal or a dense
        block), e.g. :func:`~bayes_dualeval.inference.metric.adapted_metric`; only its keys
        and the sizes of its blocks are read.
    inputs : ModelInputs
    config : ModelConfig

    Returns
    -------
    dict or None
        The same keys, each block the regularised covariance (dense) or variance (diagonal)
        of the draws over every chain, float32; None where the draws do not fill the blocks
        (a site missing, or of another size), and the caller keeps the metric it had.
    """
    names = [name for key in blocks for name in key]
    if any(name not in samples for name in names):
        return None
    transforms = latent_transforms(inputs, config, names)
    out = {}
    for key, block in blocks.items():
        columns = []
        for name in key:
            x = np.asarray(transforms[name].inv(np.asarray(samples[name])), np.float64)
            columns.append(x.reshape(x.shape[0] * x.shape[1], -1))
        x = np.concatenate(columns, axis=1)
        block = np.asarray(block)
        if x.shape[1] != block.shape[-1]:
            return None
        n = x.shape[0]
        x = x - x.mean(axis=0)
        weight = n / (n + SHRINK)
        if block.ndim == 2:
            estimate = weight * (x.T @ x) / (n - 1) + FLOOR * (1 - weight) * np.eye(x.shape[1])
        else:
            estimate = weight * np.sum(x * x, axis=0) / (n - 1) + FLOOR * (1 - weight)
        out[key] = estimate.astype(np.float32)
    return out
