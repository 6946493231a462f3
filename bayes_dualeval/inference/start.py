"""Where NUTS and SVI start.

Every site starts uniformly within ``(-RADIUS, RADIUS)`` in NumPyro's unconstrained space,
with two exceptions:

* under 3PL and 4PL, the sites on the unit interval (the levels ``mu_c``, ``mu_d`` of the
  floors and ceilings, or the floors ``c_static`` and ceilings ``d_static`` themselves
  under the independent prior) start at their prior median. A uniform start puts floors
  and ceilings alike near 0.5, so on some item the ceiling can fall below the floor,
  where the likelihood is undefined;
* with the arena level term, ``gamma`` and ``level_c`` (or ``level_u``, its anchored
  coordinate) start where every prompt's mean
  reward is attainable (:func:`level_start`): a prompt's mean ``c_s + gamma (pbar_q -
  1/2)`` can only lie between ``c_s - gamma / 2`` and ``c_s + gamma / 2``, and a start far
  outside puts every anchored difficulty at the edge of the scale
  (:mod:`bayes_dualeval.model.anchoring`).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
from numpyro.distributions import constraints
from numpyro.infer import init_to_median, init_to_uniform

from bayes_dualeval.model import anchoring
from bayes_dualeval.model.arena_term import reward_score
from bayes_dualeval.model.config import ModelConfig
from bayes_dualeval.model.inputs import ModelInputs
from bayes_dualeval.model.priors import uses_level
from bayes_dualeval.model.spec import DualEvalModel

#: Half-width of the uniform start in the unconstrained space.
RADIUS = 0.5
#: Share of the range of prompt means left free below the lowest and above the highest.
LEVEL_MARGIN = 0.15


def level_start(inputs: ModelInputs) -> tuple[jax.Array, jax.Array]:
    """Starting ``gamma`` and ``level_c`` (one per arena source) for the level term.

    Each source's prompt means ``zbar_q`` (per unit: a prompt as one judge scored it)
    span ``[lo_s, hi_s]``; ``gamma`` starts at the largest ``(1 + 2 m) (hi_s - lo_s)``
    (``m`` = :data:`LEVEL_MARGIN`) and the intercept, the level at a success probability
    of one half (:func:`~bayes_dualeval.model.arena_term.reward_score`), where every
    prompt's target ``pbar_q`` lies within ``[m / (1 + 2 m), (1 + m) / (1 + 2 m)]``: at
    ``lo_s - m (hi_s - lo_s) + gamma / 2``, for the widest source the middle of its
    means. Written in JAX, so that the start is a function of the inputs inside a compiled
    program (their values are not constants of it;
    :func:`bayes_dualeval.inference.nuts.data_as_argument`).
    """
    used = inputs.unit_n > 0
    zbar = inputs.prompt_zbar
    k = inputs.n_level_groups
    lo = jax.ops.segment_min(jnp.where(used, zbar, jnp.inf), inputs.level_group, k)
    hi = jax.ops.segment_max(jnp.where(used, zbar, -jnp.inf), inputs.level_group, k)
    span = jnp.maximum(hi - lo, 0.5)
    gamma = jnp.max((1.0 + 2.0 * LEVEL_MARGIN) * span)
    return gamma, (lo - LEVEL_MARGIN * span - reward_score(0.0, gamma)).astype(jnp.float32)


def init_strategy(config: ModelConfig, inputs: ModelInputs | None = None):
    """The NumPyro init strategy for the model of ``config`` on ``inputs``.

    Returns
    -------
    functools.partial
        ``init_to_uniform(radius=RADIUS)`` (NumPyro draws it without tracing the model),
        with unit-interval sites at their prior median under 3PL/4PL and the level term's
        globals at :func:`level_start` when ``inputs`` use it.
    """
    bounded = DualEvalModel(config).asymptotes
    values = {}
    if inputs is not None and inputs.has_arena and uses_level(inputs, config):
        gamma, level_c = level_start(inputs)
        site = anchoring.level_sites(inputs)["level_c"]  # level_u: in units of gamma
        unit = 1.0 if site == "level_c" else anchoring.level_unit(gamma)
        values = {"gamma": gamma, site: level_c / unit}
    if not bounded and not values:
        return init_to_uniform(radius=RADIUS)
    return partial(_site_start, values=values, bounded=bounded, radius=RADIUS)


def _site_start(site=None, values=None, bounded=False, radius=RADIUS):
    """One site's start: a given value, a unit-interval site's prior median, or uniform."""
    if site is None:
        return partial(_site_start, values=values, bounded=bounded, radius=radius)
    if site["type"] == "sample" and not site["is_observed"]:
        if site["name"] in values:
            value = jnp.asarray(values[site["name"]], jnp.float32)
            return jnp.broadcast_to(value, site["fn"].shape())
        if bounded and site["fn"].support is constraints.unit_interval:
            return init_to_median(site)
    return init_to_uniform(site, radius=radius)
