"""NUTS's starting metric: the curvature of the log density where the chains start.

NUTS adapts its mass matrix during warm-up, but the first adaptation window only closes
after 100 iterations; until then NumPyro (like Stan) uses the identity. When some
coordinates are far tighter than one unit, the identity forces a tiny step size on every
coordinate and the early trajectories run to the cap: on the HELM AIR-Bench arena data
(65 models x 433 prompts, 400,415 decisive pairs) ``gamma``, the level intercept and the
group scales have curvatures of 300-5,500 at the start, so every one of the first ~100
iterations ran 255 leapfrog steps, and the chains took ~200 iterations to reach the
typical set.

:func:`pilot` instead starts the adaptation from the inverse of the diagonal of the
Hessian of the potential where the first chain starts, floored at one unit (a coordinate
is never given more room than the identity gives it, and a negative or zero curvature,
which a start far from the mode can show, leaves it at the identity). The Hessian diagonal
costs few Hessian-vector products: given the group-level sites, the parameters of
different items are independent under the model (an item's data, prior and anchoring
involve only that item and the global sites), so the Hessian has no entry between two
items of the same site and one product with a vector of ones over a whole item-plate site
reads off that site's diagonal; every other coordinate (abilities, hyperparameters,
``gamma``) takes one product of its own. Everything runs in
one compiled program, including the starts themselves (run eagerly, NumPyro's
initialisation compiles every primitive on its own, which takes seconds).

Only warm-up's starting metric changes: the metric is still adapted, and the posterior is
the same. The same program gives each chain's start with its potential and gradient, which
NUTS takes as they are (:class:`Pilot`): NumPyro's search for valid starts then drops out
of the chains' program, where it was a copy of the model's gradient of its own to compile.
The pilot compiles a program of its own (about 3-4 s on a 2-core CPU, then read from the
compile cache), which pays back only when a gradient is not trivially cheap:
:func:`worth_it` uses it from :data:`MIN_TERMS` likelihood terms on (it removed about a
fifth of the bundled example's sampling time under the 400-iteration warm-up, and about
half of the leapfrog steps of HELM's first 250 iterations); smaller data start from the
identity. A round restarted after divergent transitions starts instead from the metric
the chains adapted, pooled over chains (:func:`adapted_metric`).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree
from numpyro import handlers
from numpyro.distributions.transforms import biject_to
from numpyro.infer.util import ParamInfo, potential_energy

from bayes_dualeval.inference.start import init_strategy
from bayes_dualeval.model.config import ModelConfig
from bayes_dualeval.model.inputs import ModelInputs
from bayes_dualeval.model.joint import dualeval_model

#: Likelihood terms (static cells, arena cells and decisive pairs) from which the pilot
#: runs: below this the warm-up steps it saves cost less than its compilation (about 2 s,
#: kept by the compile cache). With the 400-iteration warm-up the identity's first window
#: is a large share of it: on the bundled example (8,616 terms) sampling took 16.5 s from
#: the curvature and 20.8 s from the identity, the whole cold process 32.9 s and 35.1 s.
MIN_TERMS = 5_000
#: Plates whose members are independent given the global sites (one product per site).
ITEM_PLATES = ("item", "static_item")
#: Smallest curvature the metric uses: the inverse mass never exceeds the identity's.
FLOOR = 1.0


def n_terms(inputs: ModelInputs) -> int:
    """Number of likelihood terms a gradient evaluates (cells and decisive pairs)."""
    return int(inputs.static_y.shape[0] + inputs.arena_item.shape[0] + inputs.pair_i.shape[0])


def worth_it(inputs: ModelInputs) -> bool:
    """Whether warm-up should start from the curvature (:data:`MIN_TERMS` terms or more)."""
    return n_terms(inputs) >= MIN_TERMS


def start_metric(
    inputs: ModelInputs, config: ModelConfig, dense: tuple[str, ...], seed: int = 0
) -> dict:
    """An initial inverse mass matrix of NUTS: the curvature at one start.

    :func:`pilot`'s metric without chains, as NumPyro's block dictionary.

    Parameters
    ----------
    inputs : ModelInputs
    config : ModelConfig
    dense : tuple of str
        The sites of the dense block (:func:`bayes_dualeval.model.joint.global_sites`).
    seed : int
        Seed of the start at which the curvature is taken.

    Returns
    -------
    dict
        ``{dense: (d, d) diagonal matrix, rest: (n,) vector}``, with ``rest`` the other
        sites sorted by name (NumPyro's order for the diagonal block), as float32 NumPy
        arrays.
    """
    return pilot(inputs, config, dense, seed, chains=0).metric


class Pilot(NamedTuple):
    """What the pilot gives NUTS: where warm-up's metric starts, and where the chains do.

    Attributes
    ----------
    metric : dict
        The starting inverse mass matrix, NumPyro's block dictionary (:func:`start_metric`).
    starts : numpyro.infer.util.ParamInfo or None
        Each chain's start in unconstrained coordinates with its potential energy and
        gradient, with a leading chain axis when there are several chains, to pass to
        ``MCMC.run`` as ``init_params``; None when no chains were asked for, or when some
        start's potential or gradient is not finite (NumPyro's own initialisation then
        searches the chains' starts as it always does).
    """

    metric: dict
    starts: ParamInfo | None


def pilot(
    inputs: ModelInputs,
    config: ModelConfig,
    dense: tuple[str, ...],
    seed: int = 0,
    chains: int = 0,
) -> Pilot:
    """The starting metric, and the starts of ``chains`` chains, from one compiled program.

    Each chain starts where the chains' init strategy
    (:func:`~bayes_dualeval.inference.start.init_strategy`) puts it with a key of its own
    (``PRNGKey(seed)`` split into ``chains`` keys), and with each start come its potential
    and gradient, all from one program body. The metric is ``1 / max(curvature, FLOOR)``
    at the first chain's start; with no chains, at the start drawn with ``PRNGKey(seed)``
    (:func:`start_metric`).

    Passed to NumPyro as ``init_params``, they leave NumPyro's search for valid starts out
    of the chains' compiled program (a loop that evaluates the potential and its gradient:
    a copy of the model that XLA compiles again): on the bundled example the chains'
    program compiled in 4.7-5.1 s instead of 6.5-8.1 s, the pilot in 3.4-3.7 s against
    3.3-3.7 s (docs/performance.md).

    Parameters
    ----------
    inputs : ModelInputs
    config : ModelConfig
    dense : tuple of str
        The sites of the dense block (:func:`bayes_dualeval.model.joint.global_sites`).
    seed : int
        The seed of the starts.
    chains : int
        Chains to find starts for (0: the metric only).

    Returns
    -------
    Pilot
    """
    key = jax.random.PRNGKey(seed)
    keys = key[None] if chains == 0 else jax.random.split(key, chains)
    curvature, starts, energy, gradient = _pilot(keys, inputs, config)
    inverse = {k: _inverse(np.asarray(v[0], np.float64)) for k, v in curvature.items()}

    def flat(names):
        return np.concatenate([np.ravel(inverse[k]) for k in names]).astype(np.float32)

    rest = tuple(sorted(set(inverse) - set(dense)))
    metric = {}
    if dense:
        metric[tuple(dense)] = np.diag(flat(dense))
    if rest:
        metric[rest] = flat(rest)
    found = None
    finite = [np.asarray(energy), *(np.asarray(g) for g in gradient.values())]
    if chains and all(np.isfinite(x).all() for x in finite):
        found = ParamInfo(starts, energy, gradient)
        if chains == 1:  # NumPyro takes one chain's start without the chain axis
            found = jax.tree_util.tree_map(lambda x: x[0], found)
    return Pilot(metric, found)


def _inverse(curvature: np.ndarray) -> np.ndarray:
    """The inverse mass of a curvature: ``1 / max(curvature, FLOOR)`` (NaN counts as 0)."""
    return 1.0 / np.maximum(np.nan_to_num(curvature, nan=0.0), FLOOR)


def adapted_metric(state, chains: int) -> dict:
    """The inverse mass matrix the chains adapted, pooled: its mean over chains.

    Parameters
    ----------
    state : numpyro.infer.hmc.HMCState
        ``MCMC.last_state`` after warm-up (a leading chain axis when ``chains > 1``).
    chains : int

    Returns
    -------
    dict
        NumPyro's block dictionary (site-name tuples to diagonals or dense blocks). Each
        chain's estimate is a regularised variance (or covariance) of its warm-up draws,
        so their mean is one too.
    """
    metric = state.adapt_state.inverse_mass_matrix
    return {
        k: np.asarray(v).mean(axis=0) if chains > 1 else np.asarray(v) for k, v in metric.items()
    }


def hessian_diagonal(inputs: ModelInputs, config: ModelConfig, key) -> dict:
    """Diagonal of the potential's Hessian at a start drawn by the chains' init strategy.

    Returns
    -------
    dict of str to jax.Array
        One array per latent site, in the unconstrained coordinates NUTS samples (the
        point is :func:`start_point` with the same ``key``).
    """
    curvature = _pilot(jnp.asarray(key)[None], inputs, config)[0]
    return {k: v[0] for k, v in curvature.items()}


def start_point(inputs: ModelInputs, config: ModelConfig, key) -> dict:
    """The unconstrained point :func:`hessian_diagonal` takes the curvature at."""
    return _start_only(key, inputs, config)


def _traced_start(key, inputs: ModelInputs, config: ModelConfig):
    """Latent sites at the strategy's start (unconstrained) and the names on item plates.

    The strategy is made here, from the traced inputs: made outside, its data-derived
    starts (:func:`~bayes_dualeval.inference.start.level_start`) would be constants of the
    compiled program, a new program for every data set.
    """
    strategy = init_strategy(config, inputs)

    def traced(site):
        # the strategy may give NumPy constants, which the model cannot index with the
        # traced data of this compiled program
        value = strategy(site)
        return None if value is None else jnp.asarray(value)

    model = handlers.substitute(handlers.seed(dualeval_model, key), substitute_fn=traced)
    trace = handlers.trace(model).get_trace(inputs, config)
    start, local = {}, []
    for name, site in trace.items():
        if site["type"] != "sample" or site["is_observed"]:
            continue
        start[name] = biject_to(site["fn"].support).inv(site["value"])
        if any(frame.name in ITEM_PLATES for frame in site["cond_indep_stack"]):
            local.append(name)
    return start, local


@jax.jit
def _start_only(key, inputs: ModelInputs, config: ModelConfig) -> dict:
    return _traced_start(key, inputs, config)[0]


@jax.jit
def _pilot(keys, inputs: ModelInputs, config: ModelConfig):
    """Starts, their potential and its gradient, one per key; the Hessian diagonal at the first.

    Each output has a leading axis over ``keys`` (the diagonal: zero past the first
    start). The starts are taken one after the other in one loop body, so that the program
    holds one copy of the model's derivatives; the Hessian products run at the first start
    only (their number grows with the models: a thousand on LSAT7's examinees).
    """
    start, local = _traced_start(keys[0], inputs, config)  # the layout (values unused)
    flat, unravel = ravel_pytree(start)
    # ravel_pytree flattens a dict in the order of its sorted keys
    sizes = {name: int(np.size(start[name])) for name in sorted(start)}
    spans, reads = _probes(sizes, local)
    owner = jnp.asarray(reads[:, 0])  # the product of each coordinate (row k: coordinate k)
    spans = jnp.asarray(spans)
    coordinate = jnp.arange(flat.size)

    def value_and_grad(x):
        return jax.value_and_grad(
            lambda y: potential_energy(dualeval_model, (inputs, config), {}, unravel(y))
        )(x)

    def at(point):
        # the start, its value and gradient once, then H t for the indicator t of each span
        # (forward over reverse, one product at a time: memory of a single gradient), each
        # product's entries on the diagonal kept as it comes
        key, products = point
        x = ravel_pytree(_traced_start(key, inputs, config)[0])[0]
        (energy, gradient), tangent = jax.linearize(value_and_grad, x)

        def product(r, diagonal):
            t = ((coordinate >= spans[r, 0]) & (coordinate < spans[r, 1])).astype(x.dtype)
            return jnp.where(owner == r, tangent(t)[1], diagonal)

        diagonal = jax.lax.fori_loop(0, products, product, jnp.zeros_like(x))
        return x, energy, gradient, diagonal

    products = jnp.where(jnp.arange(keys.shape[0]) == 0, spans.shape[0], 0)
    points, energy, gradient, diagonals = jax.lax.map(at, (keys, products))
    by_start = jax.vmap(unravel)
    return by_start(diagonals), by_start(points), energy, by_start(gradient)


def _probes(sizes: dict, local: list) -> tuple[np.ndarray, np.ndarray]:
    """The Hessian-vector products to evaluate, and where the diagonal is read.

    ``sizes`` maps each site to its number of coordinates, in the flattening order. A
    site in ``local`` takes one product, with the indicator of all its coordinates; every
    other coordinate one with its unit vector. Each indicator is a contiguous span of the
    flat vector, returned as ``spans[r] = (first, stop)``; ``reads[k] = (r, k)`` locates
    the diagonal entry of flat coordinate ``k``.
    """
    spans, reads, offset = [], [], 0
    for name, size in sizes.items():
        index = np.arange(offset, offset + size)
        if name in local:
            reads.append(np.c_[np.full(size, len(spans)), index])
            spans.append((offset, offset + size))
        else:
            reads.append(np.c_[len(spans) + np.arange(size), index])
            spans.extend((i, i + 1) for i in index)
        offset += size
    return np.asarray(spans, np.int32).reshape(-1, 2), np.concatenate(reads).astype(np.int64)
