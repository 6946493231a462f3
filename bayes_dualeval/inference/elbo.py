"""The ELBO that SVI minimises, with its terms added in an order fixed by the model.

NumPyro's :class:`~numpyro.infer.Trace_ELBO` (0.22) subtracts the guide's log density
from the model's site by site over a Python ``set`` of site names. A set of strings
iterates in an order that changes with every interpreter (string hashing is salted), so
the compiled SVI step differs between two runs of the same fit: JAX's persistent
compilation cache never finds it again (3 to 9 s of compilation in every SVI fit, a warm
cache or not), and the sum is taken in a different order, so the same seed did not give
bit-identical answers in two processes. :class:`OrderedELBO` is the same estimator with
each density summed in the order its sites were traced.
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import random
from numpyro.handlers import replay, seed
from numpyro.infer import Trace_ELBO
from numpyro.infer.util import log_density


class OrderedELBO(Trace_ELBO):
    """One-particle :class:`~numpyro.infer.Trace_ELBO` whose program is the same in every run.

    ``log p(x, z) - log q(z)`` with ``z`` drawn from the guide: each log density is the
    sum of its sites' (scaled, masked) log probabilities in the order the model and the
    guide trace them, which does not depend on the interpreter. The guide has no mutable
    state here, and one particle is what :func:`~bayes_dualeval.inference.svi.run_svi`
    uses.
    """

    def __init__(self):
        super().__init__(num_particles=1)

    def loss_with_mutable_state(self, rng_key, param_map, model, guide, *args, **kwargs):
        """The negative ELBO of one draw from the guide (``mutable_state`` is None)."""
        model_key, guide_key = random.split(rng_key)
        log_q, guide_trace = log_density(seed(guide, guide_key), args, kwargs, param_map)
        log_p, _ = log_density(
            replay(seed(model, model_key), guide_trace), args, kwargs, param_map
        )
        return {"loss": jnp.negative(log_p - log_q), "mutable_state": None}
