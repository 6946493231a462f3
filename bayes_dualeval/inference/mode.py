r"""MAP for the DualEval model: a posterior mode that keeps the latent scale.

What MAP is here
----------------
The mode of the *marginal* posterior of the global parameters: the abilities
(``theta_mean`` and the sum-to-zero contrasts), the item-group hyperparameters
(``mu_b``, ``sigma_b``, ``mu_log_a``, ``sigma_log_a``) and the arena parameters
(``gamma``, ``sigma``, ``level_c``), with every item's ``(b, log a)`` integrated out.
Given the globals the items are independent and each integral is two-dimensional (one
under 1PL), so it is computed by adaptive Gauss-Hermite quadrature: 3 x 3 nodes placed on
the item's conditional mode and scaled by its conditional curvature (a damped Newton solve
vectorised over items). This is the empirical-Bayes (type-II) estimate of the
hyperparameters, with the abilities treated like hyperparameters. The objective is
differentiated exactly (the item modes through the implicit function theorem) and
minimised with SciPy's L-BFGS-B over the few dozen global parameters.

Two choices of coordinates define *which* mode:

* positive parameters are on the log scale (NumPyro's unconstrained space, with its
  Jacobian), so a scale cannot collapse to zero;
* the ``M - 1`` ability contrasts are in polar coordinates: the objective gains
  ``(M - 2) log ||theta_contrast||``, the volume factor of their radius. The likelihood
  cannot see that radius (stretching abilities and difficulties by ``c`` and shrinking
  discriminations by ``1/c`` changes nothing), so only the priors set it, and in
  Cartesian coordinates their mode sits at radius zero while the posterior mass sits near
  ``sqrt(M - 1)``: without the factor MAP abilities come out at about half the spread of
  the posterior means. The Bradley-Terry baseline has no items and its likelihood does
  fix the scale, so there MAP is the plain mode.

Why not the joint mode over every parameter, as before: with few models an item whose
responses separate the models perfectly has a likelihood that keeps rising as its ``a``
grows, so the joint mode sends discriminations towards the limit of their prior, ties
neighbouring models together and squeezes the rest (on a 12 x 20,000 matrix:
discriminations in the thousands, 8 of 12 models within 0.03, and no point where the
gradient vanishes). A radial factor for each group of raw item sites does not cure that.
Integrating the items out does: the mode is taken over parameters that many items inform.

What MAP is not
---------------
It is not the posterior mean and carries no uncertainty: no intervals, no R-hat. Item
parameters are their conditional posterior means given the global mode (``b`` and
``log a``; ``a = exp(E[log a])``), computed with the same few nodes, so ``a`` and
``sigma_log_a`` are rougher than the abilities. Abilities keep the spread (within about
20%) and the order of the NUTS posterior means in ``scripts/map_scale_check.py``, but
they are point estimates: publish NUTS.

Convergence is reported honestly: ``converged`` is true only when the gradient norm is at
most ``GTOL * sqrt(n_obs)`` (the remaining Newton step is then of order ``GTOL``
posterior standard deviations), the last iteration changed the objective by at most
``RTOL`` relative, and every item's inner Newton solve converged. ``grad_norm`` and
``grad_tol`` are always reported.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
from numpyro.distributions.transforms import biject_to
from numpyro.handlers import seed, substitute, trace
from numpyro.infer.util import constrain_fn, potential_energy
from scipy.optimize import minimize

from bayes_dualeval.model.config import ModelConfig
from bayes_dualeval.model.inputs import ModelInputs
from bayes_dualeval.model.joint import arena_loglik, dualeval_model, static_loglik

if TYPE_CHECKING:  # inference imports this module inside run_map
    from bayes_dualeval.inference.sampling import Draws, SamplerSettings

#: Plate whose sites are integrated out.
ITEM_PLATE = "item"
#: Item sites and the item parameter each one moves (``b``, or ``log a`` through ``a``).
ITEM_TARGETS = {"b_raw": "b", "b_rel": "b", "log_a_raw": "a", "log_a": "a"}
#: Global sites the arena likelihood reads besides abilities and items.
ARENA_SITES = ("gamma", "sigma", "level_c")
#: Gauss-Hermite nodes per item dimension (``b`` alone under 1PL, ``b`` and ``log a``).
NODES = {1: 7, 2: 3}
#: Inner Newton solve: iteration cap and tolerance on the squared Newton decrement.
NEWTON_ITERS = 60
NEWTON_TOL = 1e-10
#: Converged when the gradient norm is at most ``GTOL * sqrt(n_obs)``.
GTOL = 1e-3
#: L-BFGS-B stops when the objective changes by less than this, relative.
FTOL = 1e-12
#: ... and converged needs the last iteration's relative change below this.
RTOL = 1e-6


def run_map(inputs: ModelInputs, config: ModelConfig, settings: SamplerSettings) -> Draws:
    """Marginal posterior mode (see the module docstring for what it is and is not).

    Parameters
    ----------
    inputs : ModelInputs
    config : ModelConfig
    settings : SamplerSettings
        ``seed`` (the starting point) and ``map_steps`` (at most ``250 * map_steps``
        L-BFGS-B iterations).

    Returns
    -------
    Draws
        Every site of the model with shape ``(1, 1, ...)``; ``info`` holds ``steps``
        (L-BFGS-B iterations), ``evaluations``, ``converged``, ``objective`` (negative log
        marginal posterior density, up to a constant), ``grad_norm`` and ``grad_tol``,
        ``relative_change`` (of the objective in the last iteration),
        ``newton_converged``, ``message`` (L-BFGS-B's) and ``method``.
    """
    from bayes_dualeval.inference.sampling import Draws, _timed

    timings: dict = {}
    with _timed(timings), jax.enable_x64(True):
        samples, info = _fit(inputs, config, settings)
    return Draws(samples=samples, timings=timings, info=info)


def _fit(inputs: ModelInputs, config: ModelConfig, settings):
    if hasattr(inputs, "item_centred"):  # one fixed layout for the items' affine maps
        inputs = dataclasses.replace(inputs, item_centred=jnp.zeros_like(inputs.item_centred))
    sites = _latent_sites((inputs, config))
    items = tuple(name for name, (_, plates) in sites.items() if ITEM_PLATE in plates)
    unknown = sorted(set(items) - set(ITEM_TARGETS))
    if unknown:
        raise NotImplementedError(f"MAP cannot integrate out the item sites {unknown}")
    shapes = {name: shape for name, (shape, _) in sites.items() if name not in items}
    sizes = [int(np.prod(shape)) for shape in shapes.values()]

    def unflatten(flat):
        parts = np.split(np.asarray(flat, np.float64), np.cumsum(sizes)[:-1])
        return {n: p.reshape(s) for (n, s), p in zip(shapes.items(), parts, strict=True)}

    def flatten(tree):
        return np.concatenate([np.ravel(tree[n]) for n in shapes]).astype(np.float64)

    rng = np.random.default_rng(settings.seed)
    u0 = rng.uniform(-0.5, 0.5, sum(sizes))  # in the unconstrained space, as NUTS starts
    x_start = _start(inputs, items)
    state = {"x": x_start, "evaluations": 0}
    n_obs = int(inputs.static_y.size + inputs.arena_z.size)
    grad_tol = GTOL * np.sqrt(max(n_obs, 1))
    history = []  # the objective at the start and after each iteration

    def fun(flat):
        (f, (x, _, _)), g = _value_and_grad(unflatten(flat), state["x"], inputs, config, items)
        state["evaluations"] += 1
        f = float(f)
        if not np.isfinite(f):
            return np.inf, np.zeros_like(flat)
        state["x"] = x
        if not history:  # the objective at the starting point
            history.append(f)
        return f, flatten(g)

    def record(intermediate_result):
        history.append(float(intermediate_result.fun))

    res = minimize(
        fun,
        u0,
        jac=True,
        method="L-BFGS-B",
        callback=record,
        options={
            "maxiter": 250 * settings.map_steps,
            "ftol": FTOL,
            "gtol": grad_tol / np.sqrt(u0.size),  # max |g_i|: then ||g|| <= grad_tol
            "maxcor": 20,
        },
    )
    u = unflatten(res.x)
    (f, (_, ok, item_sites)), g = _value_and_grad(u, state["x"], inputs, config, items)
    f, grad_norm, newton_ok = float(f), float(np.linalg.norm(flatten(g))), bool(ok)
    change = abs(history[-2] - f) / max(abs(f), 1.0) if len(history) > 1 else 0.0
    converged = bool(np.isfinite(f) and grad_norm <= grad_tol and change <= RTOL and newton_ok)
    values = _constrain({**u, **item_sites}, inputs, config)
    samples = {k: np.asarray(v, np.float32)[None, None] for k, v in values.items()}
    info = {
        "method": (
            "marginal mode: items integrated out, ability contrasts in polar coordinates"
            if items
            else "mode (no item parameters)"
        ),
        "steps": int(res.nit),
        "evaluations": int(state["evaluations"]),
        "converged": converged,
        "objective": f,
        "grad_norm": grad_norm,
        "grad_tol": float(grad_tol),
        "relative_change": float(change),
        "newton_converged": newton_ok,
        "message": str(res.message),
    }
    return samples, info


def _objective(u, x_start, inputs, config, items):
    if items:
        return _Problem(inputs, config, items).objective(u, x_start)
    # The Bradley-Terry baseline: nothing to integrate out, and the likelihood fixes the
    # scale of the abilities, so the plain mode (no radial factor) is the right estimate.
    value = potential_energy(dualeval_model, (inputs, config), {}, u)
    return value, (x_start, jnp.asarray(True), {})


def _start(inputs, items):
    """The first inner solves start at the items' prior means (NaN says so)."""
    dim = 2 if any(ITEM_TARGETS[s] == "a" for s in items) else 1
    return jnp.full((dim, inputs.n_items) if items else (0,), jnp.nan, dtype=jnp.float64)


# Module level, so that later fits of data of the same shapes reuse the compiled code.
_value_and_grad = jax.jit(jax.value_and_grad(_objective, has_aux=True), static_argnames=("items",))
_constrain = jax.jit(
    lambda z, inputs, config: constrain_fn(
        dualeval_model, (inputs, config), {}, z, return_deterministic=True
    )
)


def _latent_sites(args) -> dict:
    """Name -> (unconstrained shape, plate names) of every latent site, without running it.

    The model is traced abstractly (``jax.eval_shape``): nothing is compiled or computed.
    """
    found = {}

    def probe():
        tr = trace(seed(dualeval_model, 0)).get_trace(*args)
        for name, site in tr.items():
            if site["type"] == "sample" and not site["is_observed"]:
                shape = biject_to(site["fn"].support).inverse_shape(jnp.shape(site["value"]))
                plates = tuple(f.name for f in site["cond_indep_stack"])
                found[name] = (tuple(shape), plates)
        return 0

    jax.eval_shape(probe)
    return found


class _Problem:
    """The marginal objective over the global parameters (a dict, unconstrained)."""

    def __init__(self, inputs, config, items):
        self.inputs, self.config, self.items = inputs, config, items
        self.n_items = inputs.n_items
        self.two_pl = any(ITEM_TARGETS[s] == "a" for s in items)
        self.dim = 2 if self.two_pl else 1
        z, w = np.polynomial.hermite_e.hermegauss(NODES[self.dim])
        w = w / w.sum()
        if self.dim == 2:
            z = np.stack(np.meshgrid(z, z, indexing="ij"), -1).reshape(-1, 2)
            w = np.outer(w, w).ravel()
        else:
            z = z[:, None]
        self.nodes = jnp.asarray(z)  # (K, d), standard normal
        self.log_w = jnp.asarray(np.log(w) + 0.5 * np.sum(z * z, axis=1))
        self.bb_apart = config.lambda_arena != 1.0

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
        extra = {n: tr0[n]["value"] if n in tr0 else None for n in ARENA_SITES}
        prior = (jnp.stack(loc), jnp.stack(scale), jnp.stack(origin), jnp.stack(slope))
        return log_prior, tr0["theta"]["value"], extra, prior

    def item_loglik(self, x, theta, extra):
        """Weighted log likelihood of each item at item parameters ``x`` (d, Q)."""
        inputs, config = self.inputs, self.config
        b = x[0]
        a = jnp.exp(x[1]) if self.dim == 2 else None
        total = jnp.zeros(self.n_items)
        if inputs.has_static:
            cells = static_loglik(theta, a, b, inputs)
            per_item = jax.ops.segment_sum(cells, inputs.static_item, self.n_items)
            total = total + config.lambda_static * per_item
        if inputs.has_arena:
            g, s = extra["gamma"], extra["sigma"]
            level = {} if extra.get("level_c") is None else {"level": extra["level_c"]}
            full = arena_loglik(theta, a, b, g, s, inputs, config, **level)
            if self.bb_apart:  # lambda_arena weighs all but the both-bad terms
                no_bb = config.replace(lambda_bb=0.0)
                rest = arena_loglik(theta, a, b, g, s, inputs, no_bb, **level)
                full = config.lambda_arena * rest + (full - rest)
            total = total + full
        return total

    def item_logpost(self, x, theta, extra, loc, scale):
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
        stays put and tries a quarter of the step next time.
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

        ``x_start`` (d, Q) starts each item's Newton solve (NaN: at its prior mean). The
        by-products are the item modes (the next start), whether every inner solve
        converged, and the unconstrained item sites at their conditional posterior means.
        """
        log_prior, theta, extra, (loc, scale, origin, slope) = self.read(u)
        frozen = jax.lax.stop_gradient((theta, extra, loc, scale))
        x_start = jnp.where(jnp.isnan(x_start), frozen[2], x_start)
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
        total = log_prior + jnp.sum(log_int) + _polar(u)
        weights = jax.nn.softmax(values, axis=0)  # (K, Q)
        mean = jnp.sum(weights[:, None, :] * nodes, axis=0)
        raw = jax.lax.stop_gradient((mean - origin) / slope)
        sites = {self._site(t): raw[i] for i, t in enumerate(("b", "a")[: self.dim])}
        return -total, (x_hat, ok, sites)

    def _site(self, target):
        (name,) = [s for s in self.items if ITEM_TARGETS[s] == target]
        return name


def _polar(u: dict):
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
    """Solve the (d, d) systems ``h delta = g`` blockwise."""
    if h.shape[0] == 1:
        return g / h[0]
    p, r, s = h[0, 0], h[0, 1], h[1, 1]
    det = p * s - r * r
    return jnp.stack([(s * g[0] - r * g[1]) / det, (p * g[1] - r * g[0]) / det])


def _chol_inverse(h):
    """Lower Cholesky factor of each block's inverse, shape (d, d, Q)."""
    if h.shape[0] == 1:
        return 1.0 / jnp.sqrt(h)
    p, r, s = h[0, 0], h[0, 1], h[1, 1]
    det = p * s - r * r
    a11, a21, a22 = s / det, -r / det, p / det
    l11 = jnp.sqrt(a11)
    l21 = a21 / l11
    l22 = jnp.sqrt(jnp.maximum(a22 - l21 * l21, 1e-300))
    zero = jnp.zeros_like(l11)
    return jnp.stack([jnp.stack([l11, zero]), jnp.stack([l21, l22])])
