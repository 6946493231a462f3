r"""Random batches of likelihood terms: the unbiased estimate minibatch SVI optimises.

A sum of ``n`` terms :math:`\sum_k f_k` is estimated from ``size`` indices drawn uniformly
*with replacement*, :math:`\frac{n}{\text{size}} \sum_{k \in \text{batch}} f_k`, whose
expectation is the full sum. Drawing with replacement costs ``O(size)`` per step, where a
draw without replacement (NumPyro's ``plate(..., subsample_size=...)``) shuffles all ``n``
indices, which at ten million cells costs more than the batch's gradient.

A batch is drawn only where the model runs under a random seed (SVI's ELBO): a log density
evaluated without one (NUTS, MAP, the posterior's pointwise log likelihood) uses every
term, whatever the inputs ask for.
"""

from __future__ import annotations

import warnings

import jax
import numpyro


def batch(n: int, size: int):
    """Indices of a random batch of ``size`` of ``n`` terms, and the weight of each.

    Parameters
    ----------
    n : int
        Number of terms (static shape).
    size : int
        Terms per batch; 0 (or at least ``n``) means every term.

    Returns
    -------
    rows : jax.Array of int32, shape (size,), or None
        Drawn indices (with replacement); None for every term.
    weight : float
        ``n / size``, the factor that makes the batch's sum an unbiased estimate of the
        full sum (1 for every term).
    """
    if not size or size >= n:
        return None, 1.0
    with warnings.catch_warnings():  # NumPyro warns where there is no seed; that is our cue
        warnings.simplefilter("ignore", UserWarning)
        key = numpyro.prng_key()
    if key is None:  # no seed handler: an exact density is being evaluated
        return None, 1.0
    return jax.random.randint(key, (size,), 0, n, dtype="int32"), n / size
