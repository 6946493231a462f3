r"""Each item's parameters integrated out of the posterior, for MAP.

Given the global parameters (abilities, item-group hyperparameters, arena parameters) the
items are independent, and each item's ``(b, log a)`` (``b`` alone under 1PL) has a two-
(one-) dimensional integral. :class:`ItemIntegral` computes all of them at once by adaptive
Gauss-Hermite quadrature: :data:`NODES` nodes per dimension placed on the item's
conditional mode and scaled by its conditional curvature (a damped Newton solve vectorised
over items; its blockwise algebra is :mod:`bayes_dualeval.model.item_solve`'s). The item
likelihood is the model's own (:func:`~bayes_dualeval.model.joint.static_loglik`,
:func:`~bayes_dualeval.model.joint.arena_loglik`), read with the priors through NumPyro's
trace, so it stays the model's as the model changes. See
:mod:`bayes_dualeval.inference.mode` for the mode this objective defines.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
from numpyro.distributions.transforms import biject_to
from numpyro.handlers import substitute, trace
from numpyro.infer.util import constrain_fn

from bayes_dualeval.model import dif, facets, graders, parameters
from bayes_dualeval.model.ability_map import domain_map
from bayes_dualeval.model.item_solve import block_det, block_solve
from bayes_dualeval.model.joint import arena_loglik, dualeval_model, static_loglik
from bayes_dualeval.model.spec import DualEvalModel

#: Plate whose sites are integrated out.
ITEM_PLATE = "item"
#: Item sites and the item parameter each one moves (``b``, or ``log a`` through ``a``).
ITEM_TARGETS = {"b_raw": "b", "b_rel": "b", "log_a_raw": "a", "log_a": "a"}
#: Global sites the arena likelihood reads besides abilities and items.
ARENA_SITES = parameters.ARENA_SITES
#: ... and the static likelihood beyond them (the graders' severities, DIF shifts).
STATIC_SITES = parameters.STATIC_SITES
#: Gauss-Hermite nodes per item dimension (``b`` alone under 1PL, ``b`` and ``log a``).
NODES = {1: 7, 2: 3}
#: Inner Newton solve: iteration cap and tolerance on the squared Newton decrement.
NEWTON_ITERS = 60
NEWTON_TOL = 1e-10


def item_dimension(items) -> int:
    """Parameters per item: 2 when a site moves ``log a``, else 1 (``b`` only)."""
    return 2 if any(ITEM_TARGETS[s] == "a" for s in items) else 1


class ItemIntegral:
    """The marginal objective over the global parameters (a dict, unconstrained).

    Parameters
    ----------
    inputs : ModelInputs
    config : ModelConfig
    items : tuple of str
        The model's latent sites on the ``item`` plate (keys of :data:`ITEM_TARGETS`).
    """

    def __init__(self, inputs, config, items):
        self.inputs, self.config, self.items = inputs, config, items
        self.n_items = inputs.n_items
        self.dim = item_dimension(items)
        z, w = np.polynomial.hermite_e.hermegauss(NODES[self.dim])
        w = w / w.sum()
        if self.dim == 2:
            z = np.stack(np.meshgrid(z, z, indexing="ij"), -1).reshape(-1, 2)
            w = np.outer(w, w).ravel()
        else:
            z = z[:, None]
        self.nodes = jnp.asarray(z)  # (K, d), standard normal
        self.log_w = jnp.asarray(np.log(w) + 0.5 * np.sum(z * z, axis=1))
        # the arena weight as the model applies it (lambda_arena, or calibrated from data)
        self.arena_weight = DualEvalModel(config).arena.weight
        self.bb_apart = self.arena_weight != 1.0

    # -- the model, read through NumPyro ------------------------------------------------

    def _trace(self, params):
        return trace(substitute(dualeval_model, data=params)).get_trace(self.inputs, self.config)

    def read(self, u):
        """Global log prior (with Jacobians), abilities and each item's prior."""
        q = self.n_items
        z = {**u, **{s: jnp.zeros(q) for s in self.items}}
        params = constrain_fn(dualeval_model, (self.inputs, self.config), {}, z)
        tr0 = self._trace(params)
        tr1 = self._trace({**params, **{s: jnp.ones(q) for s in self.items}})
        log_prior = 0.0
        for name, value in u.items():
            site = tr0[name]
            t = biject_to(site["fn"].support)
            log_prior += jnp.sum(site["fn"].log_prob(site["value"]))
            log_prior += jnp.sum(t.log_abs_det_jacobian(value, site["value"]))
        loc, scale, origin, slope = [], [], [], []
        for target in ("b", "a")[: self.dim]:
            (name,) = [s for s in self.items if ITEM_TARGETS[s] == target]
            fn = tr0[name]["fn"]
            while isinstance(fn, dist.ExpandedDistribution):  # a scalar prior in a plate
                fn = fn.base_dist
            if not isinstance(fn, dist.Normal):
                raise NotImplementedError(f"MAP needs a Normal prior on {name}")
            x0, x1 = tr0[target]["value"], tr1[target]["value"]
            if target == "a":
                x0, x1 = jnp.log(x0), jnp.log(x1)
            k = x1 - x0
            loc.append(x0 + k * jnp.broadcast_to(fn.loc, (q,)))
            scale.append(jnp.abs(k) * jnp.broadcast_to(fn.scale, (q,)))
            origin.append(x0)
            slope.append(k)
        extra = {n: tr0[n]["value"] if n in tr0 else None for n in ARENA_SITES + STATIC_SITES}
        prior = (jnp.stack(loc), jnp.stack(scale), jnp.stack(origin), jnp.stack(slope))
        theta = tr0["theta"]["value"]
        if "theta_domain" in tr0:
            theta = domain_map(theta, tr0["theta_domain"]["value"], self.inputs.item_domain)
        return log_prior, theta, extra, prior

    def item_loglik(self, x, theta, extra):
        """Weighted log likelihood of each item at item parameters ``x`` (d, Q)."""
        inputs, config = self.inputs, self.config
        b = x[0]
        a = jnp.exp(x[1]) if self.dim == 2 else None
        total = jnp.zeros(self.n_items)
        if inputs.has_static:
            cells = static_loglik(
                theta, a, b, inputs, severity=extra.get(graders.SITE), shifts=extra.get(dif.SITE)
            )
            per_item = jax.ops.segment_sum(cells, inputs.static_item, self.n_items)
            total = total + config.lambda_static * per_item
        if inputs.has_arena:
            g, s = extra["gamma"], extra["sigma"]
            level = {} if extra.get("level_c") is None else {"level": extra["level_c"]}
            if facets.has_facets(inputs):
                level["facets"] = facets.Facets.from_draws(extra, g)
            full = arena_loglik(theta, a, b, g, s, inputs, config, **level)
            if self.bb_apart:  # lambda_arena weighs all but the both-bad terms
                no_bb = config.replace(lambda_bb=0.0)
                rest = arena_loglik(theta, a, b, g, s, inputs, no_bb, **level)
                full = self.arena_weight * rest + (full - rest)
            total = total + full
        return total

    def item_logpost(self, x, theta, extra, loc, scale):
        """Each item's log posterior density (Q,) at ``x`` (-inf where not finite)."""
        z = (x - loc) / scale
        log_prior = jnp.sum(-0.5 * z * z - jnp.log(scale) - 0.5 * np.log(2 * np.pi), axis=0)
        value = self.item_loglik(x, theta, extra) + log_prior
        return jnp.where(jnp.isfinite(value), value, -jnp.inf)

    # -- inner problem: each item's conditional mode and curvature -----------------------

    def _curvature(self, x, theta, extra, loc, scale):
        """Gradient (d, Q) and minus the Hessian (d, d, Q) of each item's log posterior."""
        # Items do not share parameters, so the Hessian of the sum is block diagonal and
        # a tangent moving every item's j-th parameter at once reads column j of each block.
        grad = jax.grad(lambda x: jnp.sum(self.item_logpost(x, theta, extra, loc, scale)))
        g, along = jax.linearize(grad, x)
        basis = jnp.eye(self.dim)[:, :, None] * jnp.ones_like(x)[None]
        return g, -jnp.swapaxes(jax.vmap(along)(basis), 0, 1)

    def _newton(self, x, theta, extra, loc, scale):
        """Damped Newton ascent of every item's conditional log posterior at once.

        Returns the modes (d, Q) and whether every item's squared Newton decrement fell
        below ``NEWTON_TOL``. An item whose step does not increase its log posterior
        stays put and tries a quarter of the step next time. The blockwise algebra is
        :mod:`bayes_dualeval.model.item_solve`'s; its Fisher scoring (the key audit's and
        the pilot's) is not used because this objective is the model's whole item log
        posterior (static and arena terms, weighted) with an autodiff Hessian that can be
        indefinite away from the mode, solved inside a jitted, differentiated JAX program.
        """

        def h(x):
            return self.item_logpost(x, theta, extra, loc, scale)

        def step(carry):
            x, value, length, _, it = carry
            g, hess = self._curvature(x, theta, extra, loc, scale)
            delta = _solve(_positive(hess), g)
            decrement = jnp.sum(g * delta, axis=0)
            delta = delta / jnp.maximum(1.0, jnp.max(jnp.abs(delta), axis=0) / 2.0)
            trial = x + length * delta
            trial_value = h(trial)
            better = trial_value > value
            x = jnp.where(better, trial, x)
            value = jnp.where(better, trial_value, value)
            length = jnp.where(better, 1.0, 0.25 * length)
            return x, value, length, jnp.max(decrement), it + 1

        def cond(carry):
            *_, decrement, it = carry
            return (it < NEWTON_ITERS) & (decrement > NEWTON_TOL)

        start = (x, h(x), jnp.ones(self.n_items), jnp.inf, 0)
        x, _, _, decrement, _ = jax.lax.while_loop(cond, step, start)
        return x, decrement <= NEWTON_TOL

    def objective(self, u, x_start):
        """Negative log marginal posterior density of the globals, and by-products.

        ``x_start`` (d, Q) starts each item's Newton solve (not finite: at its prior mean). The
        by-products are the item modes (the next start), whether every inner solve
        converged, and the unconstrained item sites at their conditional posterior means.
        """
        log_prior, theta, extra, (loc, scale, origin, slope) = self.read(u)
        frozen = jax.lax.stop_gradient((theta, extra, loc, scale))
        x_start = jnp.where(jnp.isfinite(x_start), x_start, frozen[2])
        x_hat, ok = self._newton(x_start, *frozen)
        x_hat = jax.lax.stop_gradient(x_hat)
        # One more Newton step, differentiable: it is zero at the mode, so the value is
        # unchanged, but it carries the derivative of the mode with respect to the
        # globals (implicit function theorem), and so does the curvature taken after it.
        g, hess = self._curvature(x_hat, theta, extra, loc, scale)
        mode = x_hat + _solve(jax.lax.stop_gradient(_positive(hess)), g)  # g = 0: exact
        _, hess = self._curvature(mode, theta, extra, loc, scale)
        chol = _chol_inverse(_positive(hess))  # (d, d, Q)
        nodes = mode[None] + jnp.einsum("ijq,kj->kiq", chol, self.nodes)  # (K, d, Q)
        values = jax.vmap(lambda x: self.item_logpost(x, theta, extra, loc, scale))(nodes)
        values = values + self.log_w[:, None]
        log_det = jnp.sum(jnp.log(jnp.diagonal(chol, axis1=0, axis2=1)), axis=-1)
        log_int = log_det + 0.5 * self.dim * np.log(2 * np.pi) + jax.nn.logsumexp(values, 0)
        total = log_prior + jnp.sum(log_int) + polar_volume(u)
        weights = jax.nn.softmax(values, axis=0)  # (K, Q)
        mean = jnp.sum(weights[:, None, :] * nodes, axis=0)
        raw = jax.lax.stop_gradient((mean - origin) / slope)
        sites = {self._site(t): raw[i] for i, t in enumerate(("b", "a")[: self.dim])}
        return -total, (x_hat, ok, sites)

    def _site(self, target):
        (name,) = [s for s in self.items if ITEM_TARGETS[s] == target]
        return name


def polar_volume(u: dict):
    """``(n - 1) log ||theta_contrast||``: the radial volume factor of the contrasts."""
    if "theta_contrast" not in u:
        return 0.0
    c = u["theta_contrast"]
    return 0.5 * (c.size - 1) * jnp.log(jnp.sum(c * c))


def _positive(h):
    """Symmetric (d, d, Q) blocks made positive definite (eigenvalues floored)."""
    if h.shape[0] == 1:
        return jnp.maximum(h, 1e-8)
    p, r, s = h[0, 0], 0.5 * (h[0, 1] + h[1, 0]), h[1, 1]
    half = 0.5 * (p + s)
    disc = jnp.sqrt(0.25 * (p - s) ** 2 + r * r)
    lo = half - disc
    hi = half + disc
    floor = 1e-8 * jnp.maximum(1.0, jnp.abs(hi))
    shift = jnp.maximum(floor - lo, 0.0)
    return jnp.stack([jnp.stack([p + shift, r]), jnp.stack([r, s + shift])])


def _solve(h, g):
    """Solve the (d, d) systems ``h delta = g`` blockwise (:func:`block_solve`), (d, Q)."""
    return jnp.stack(block_solve(h, g))


def _chol_inverse(h):
    """Lower Cholesky factor of each block's inverse, shape (d, d, Q)."""
    if h.shape[0] == 1:
        return 1.0 / jnp.sqrt(h)
    p, r, s = h[0, 0], h[0, 1], h[1, 1]
    det = block_det(h)
    a11, a21, a22 = s / det, -r / det, p / det
    l11 = jnp.sqrt(a11)
    l21 = a21 / l11
    l22 = jnp.sqrt(jnp.maximum(a22 - l21 * l21, 1e-300))
    zero = jnp.zeros_like(l11)
    return jnp.stack([jnp.stack([l11, zero]), jnp.stack([l21, l22])])
