"""The metric a round of NUTS draws has shown, for the rounds that continue it.

Warm-up estimates the mass matrix from its last window: about 200 iterations of each chain,
on its own, while the chains may still be settling. A round of draws that fails the
convergence check has many more draws of the same posterior, from every chain: their
covariance, in the blocks warm-up adapted (dense over the global sites, diagonal
elsewhere), is a better metric for the draws still to come where warm-up's misfits them
(:func:`misfit`). Measured with ``scripts/studies/metric_oracle.py`` (the least effective
sample size per leapfrog step of a round sampled with it, against the same kernel continued;
docs/performance.md, session 65): a median 1.16x over five seeds of the bundled example,
whose warm-up metric fits (a ratio of about 2.7), and 0.90-1.61x over three at paper scale.
On AlpacaEval, whose continuation rounds are the longest, the warm-up's dense block allowed
a fifth of the variance of the posterior's widest direction (a ratio of 44;
docs/performance.md, "Paper scale, MAP and AlpacaEval under code M").
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import eigh

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


def misfit(adapted: dict, estimated: dict) -> float:
    """How far the adapted metric's dense blocks are from the draws' covariance.

    The ratio of the largest to the smallest generalised eigenvalue of (``estimated``,
    ``adapted``) over each dense block, the largest over blocks: 1 where the metric has the
    draws' shape, and NUTS's trajectories lengthen with its square root where it has not.
    Diagonal blocks are left out: over hundreds of coordinates the ratios of two variance
    estimates spread by their noise alone (on AlpacaEval's 56 x 805 posterior, 0.82-1.31
    from the 1st to the 99th percentile of its diagonal sites, while its dense block's ratio
    was 44). 1.0 without a dense block.

    Parameters
    ----------
    adapted, estimated : dict
        Metrics in NumPyro's block form with the same keys.
    """
    worst = 1.0
    for key, block in estimated.items():
        if np.ndim(block) != 2:
            continue
        values = eigh(np.asarray(block, np.float64), np.asarray(adapted[key], np.float64),
                      eigvals_only=True)  # fmt: skip
        worst = max(worst, float(values.max() / values.min()))
    return worst
