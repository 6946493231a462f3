"""Where NUTS and SVI start.

Every site starts uniformly within ``(-RADIUS, RADIUS)`` in NumPyro's unconstrained space,
except, under 3PL and 4PL, the sites on the unit interval (the levels ``mu_c``, ``mu_d``
of the floors and ceilings, or the floors ``c_static`` and ceilings ``d_static``
themselves under the independent prior): those start at their prior median. A uniform
start puts floors and ceilings alike near 0.5, so on some item the ceiling can fall below
the floor, where the likelihood is undefined.
"""

from __future__ import annotations

from functools import partial

from numpyro.distributions import constraints
from numpyro.infer import init_to_median, init_to_uniform

from bayes_dualeval.model import links
from bayes_dualeval.model.config import ModelConfig

#: Half-width of the uniform start in the unconstrained space.
RADIUS = 0.5


def init_strategy(config: ModelConfig):
    """The NumPyro init strategy for the model of ``config``.

    Returns
    -------
    functools.partial
        ``init_to_uniform(radius=RADIUS)`` (NumPyro draws it without tracing the model),
        or under 3PL/4PL the same with unit-interval sites at their prior median.
    """
    if config.mode != "bt" and links.get(config.irt).asymptotes:
        return partial(_bounded_at_median, radius=RADIUS)
    return init_to_uniform(radius=RADIUS)


def _bounded_at_median(site=None, radius=RADIUS):
    if site is None:
        return partial(_bounded_at_median, radius=radius)
    if site["type"] == "sample" and site["fn"].support is constraints.unit_interval:
        return init_to_median(site)
    return init_to_uniform(site, radius=radius)
