"""JAX primitives of the log density, tuned for the CPU (imported only with JAX arrays)."""

from __future__ import annotations

import jax
import jax.numpy as jnp


@jax.custom_jvp
def log_sigmoid(x):
    """``log(sigmoid(x))`` with a derivative ``sigmoid(-x)`` that reuses the same ``exp``.

    Faster than ``jax.nn.log_sigmoid`` on CPU (one exp and one log1p), exact to float
    precision.
    """
    return jnp.minimum(x, 0.0) - jnp.log1p(jnp.exp(-jnp.abs(x)))


@log_sigmoid.defjvp
def _log_sigmoid_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    # exp(-|x|), written so that its own derivative is right at x = 0 too (the rule is
    # differentiated again for second derivatives: through ``abs``, whose derivative at 0
    # is +1, the curvature at 0 came out with the wrong sign)
    e = jnp.exp(jnp.where(x > 0, -x, x))
    value = jnp.minimum(x, 0.0) - jnp.log1p(e)
    slope = jnp.where(x > 0, e, 1.0) / (1.0 + e)
    return value, slope * dx
