r"""The Bayesian DualEval model as plain NumPyro functions.

Static labels follow a two-parameter IRT model,

.. math:: y_{iq} \sim \mathrm{Bernoulli}(p_{iq}),\quad p_{iq} = \sigma(a_q(\theta_i - b_q)).

Arena prompts enter through distilled soft targets :math:`t_{ijq} = \sigma(z_i - z_j)` on
decisive pairs, with :math:`s_{ijq} = \sigma(\gamma (p_{iq} - p_{jq}))` and the soft-label
log likelihood :math:`w_q [t \log s + (1 - t) \log(1 - s)]`; both-bad pairs add
:math:`\lambda_{bb} w_q [\log(1 - p_{iq}) + \log(1 - p_{jq})]`; ties add nothing. The
``reward`` alternative models the normalised rewards directly,
:math:`z_{iq} \sim \mathcal N(c_q + \gamma p_{iq}, \sigma)`, with :math:`c_q` integrated out
under a flat prior. ``bt`` is DualEval's Bradley-Terry baseline,
:math:`P(i \succ j) = \sigma(\theta_i - \theta_j)` on the soft targets.

Every term is a sum over observations in a stable log-sigmoid / softplus form. The
functions :func:`static_loglik` and :func:`arena_loglik` give the pointwise terms used for
the ``log_likelihood`` group; :func:`dualeval_model` adds the same terms, summed more
cheaply (see :mod:`bayes_dualeval.model.inputs`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist

from bayes_dualeval.model.config import ModelConfig
from bayes_dualeval.model.inputs import ModelInputs

MAX_DENSE_MODELS = 100
_LOG_2PI = float(jnp.log(2 * jnp.pi))


@jax.custom_jvp
def log_sigmoid(x):
    """Stable ``log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|))``.

    Faster than ``jax.nn.log_sigmoid`` on CPU (one exp and one log1p, and a derivative
    ``sigmoid(-x)`` that reuses the same exp), and exact to float precision.
    """
    return jnp.minimum(x, 0.0) - jnp.log1p(jnp.exp(-jnp.abs(x)))


@log_sigmoid.defjvp
def _log_sigmoid_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    e = jnp.exp(-jnp.abs(x))
    value = jnp.minimum(x, 0.0) - jnp.log1p(e)
    slope = jnp.where(x > 0, e, 1.0) / (1.0 + e)  # sigmoid(-x)
    return value, slope * dx


def softplus(x):
    """Stable ``log(1 + exp(x)) = x - log_sigmoid(x)``."""
    return x - log_sigmoid(x)


def abilities(inputs: ModelInputs, config: ModelConfig):
    """Sample abilities ``theta`` (shape (M,)), ``theta_i ~ Normal(0, theta_scale)`` iid.

    Drawn as a mean and sum-to-zero contrasts, ``theta = theta_mean + H z`` with ``H`` an
    orthonormal basis of the sum-to-zero subspace, ``theta_mean ~ Normal(0, s / sqrt(M))``
    and ``z ~ Normal(0, s)``: exactly the iid prior, but the mean, which the likelihood
    cannot see (it only sees ``theta_i - b_q``), becomes one coordinate of its own instead
    of a direction shared by every ``theta_i`` and every item location.

    Returns
    -------
    theta : jax.Array, shape (M,)
    theta_mean : jax.Array, scalar
    spread : jax.Array, scalar
        ``sqrt((|z|^2 / s^2 + 1) / M)``, about the abilities' standard deviation in units
        of ``s`` (never below ``1 / sqrt(M)``); items are drawn in units of it (see
        :func:`item_parameters`).
    """
    m = inputs.n_models
    scale = config.theta_scale
    theta_mean = numpyro.sample("theta_mean", dist.Normal(0.0, scale / jnp.sqrt(m)))
    with numpyro.plate("contrast", m - 1):
        z = numpyro.sample("theta_contrast", dist.Normal(0.0, scale))
    with numpyro.plate("model", m):
        theta = numpyro.deterministic("theta", theta_mean + _helmert(m) @ z)
    spread = jnp.sqrt((jnp.sum(z**2) / scale**2 + 1.0) / m)
    return theta, theta_mean, spread


def _helmert(m: int) -> np.ndarray:
    """Orthonormal basis (m, m - 1) of the vectors that sum to zero (Helmert contrasts)."""
    row = np.arange(m)[:, None]
    j = np.arange(1, m)[None, :]  # column c holds contrast j = c + 1
    h = (row < j).astype(np.float64) - j * (row == j)
    h /= np.sqrt(j * (j + 1.0))
    return h.astype(np.float32)


def item_parameters(inputs: ModelInputs, config: ModelConfig, theta_mean, spread=1.0):
    """Sample item difficulties ``b`` and discriminations ``a`` (shape (Q,)).

    Difficulties are located relative to the models' mean ability ``theta_mean``: the
    likelihood is unchanged when both shift together, so tying them keeps that direction
    out of the posterior geometry. Hierarchical: per item group (kind, source) a location
    and scale, ``b - theta_mean ~ Normal(mu_b[g], sigma_b[g])`` and
    ``log a ~ Normal(mu_log_a[g], sigma_log_a[g])``. Independent: fixed
    ``b - theta_mean ~ Normal(0, b_scale)`` and ``log a ~ Normal(0, loga_scale)``. Under
    ``irt="1pl"``, ``a`` is 1 and not sampled (returned as None).

    The prior is as stated; the coordinates NUTS explores are chosen for their geometry.
    The likelihood only sees ``a (theta - b)``, which is unchanged when the abilities are
    stretched by ``k`` about their mean, ``b - theta_mean`` by ``k`` and ``a`` by ``1 / k``:
    only the priors set that scale, so the posterior is a long ridge along it. Items are
    therefore drawn in units of the abilities' ``spread`` (``rho``): a centred item holds
    ``(b - theta_mean) / rho`` and ``log a + log rho`` (the prior density transformed
    exactly), so stretching the scale moves the ability contrasts and the group
    hyperparameters only, all of them in NUTS's dense-mass block, and no item coordinate.
    Each item is centred (``inputs.item_centred``, see
    :func:`bayes_dualeval.model.inputs.centring`) when its responses pin it down, and
    non-centred (``b_raw`` standard normal, scaled by ``sigma_b``) when the prior
    dominates: with informative data, non-centred coordinates tie every ``b_raw`` to
    ``sigma_b``, and with weak data centred ones make a funnel. (Coordinates relative to
    the group location as well, ``(b - theta_mean - mu_b) / rho``, were tried: the arena
    level term then mixed far worse, E-BFMI 0.1.)
    """
    two_pl = config.irt == "2pl"
    g = inputs.item_group
    a = None
    if config.item_prior == "hierarchical":
        c = inputs.item_centred
        with numpyro.plate("group", inputs.n_groups):
            mu_b = numpyro.sample("mu_b", dist.Normal(0.0, config.b_loc_scale))
            sigma_b = numpyro.sample("sigma_b", dist.HalfNormal(config.b_scale_scale))
            if two_pl:
                mu_la = numpyro.sample("mu_log_a", dist.Normal(0.0, config.loga_loc_scale))
                sigma_la = numpyro.sample(
                    "sigma_log_a", dist.LogNormal(jnp.log(config.loga_scale_scale), 0.5)
                )
        with numpyro.plate("item", inputs.n_items):
            # arena prompts are located relative to their group: their common level is only
            # weakly identified (rewards are normalised), and this way it is one coordinate
            relative = jnp.where(inputs.prompt_n > 0, mu_b[g], 0.0)
            b_rel = _draw("b_raw", mu_b[g], sigma_b[g], c[0], stretch=spread, shift=relative)
            b = numpyro.deterministic("b", theta_mean + b_rel)
            if two_pl:
                log_a = _draw("log_a_raw", mu_la[g], sigma_la[g], c[1], shift=-jnp.log(spread))
                a = numpyro.deterministic("a", jnp.exp(log_a))
    else:
        with numpyro.plate("item", inputs.n_items):
            b_rel = _draw("b_rel", 0.0, config.b_scale, 1.0, stretch=spread)
            b = numpyro.deterministic("b", theta_mean + b_rel)
            if two_pl:
                log_a = _draw("log_a", 0.0, config.loga_scale, 1.0, shift=-jnp.log(spread))
                a = numpyro.deterministic("a", jnp.exp(log_a))
    return a, b


def _draw(name: str, loc, scale, centred, *, shift=0.0, stretch=1.0):
    """Draw ``x ~ Normal(loc, scale)`` elementwise, centred (1) or non-centred (0).

    Centred, the site ``name`` holds ``y`` with ``x = shift + stretch * y``; non-centred, it
    holds the standard normal ``(x - loc) / scale``. The density of the site is the prior
    of ``x`` transformed exactly, so the returned ``x`` has the same prior either way.
    """
    raw = numpyro.sample(
        name, dist.Normal(centred * (loc - shift) / stretch, (scale / stretch) ** centred)
    )
    return centred * (shift + stretch * raw) + (1.0 - centred) * (loc + scale * raw)


def global_sites(config: ModelConfig, inputs: ModelInputs) -> tuple[str, ...]:
    """Names of the low-dimensional sites that carry the weakly identified directions.

    These are the latent scale: abilities against item locations and discriminations.

    NUTS adapts a dense mass matrix over this block only, which is cheap (a few dozen
    dimensions) and removes most of the correlation a diagonal mass matrix cannot follow.
    With more than ``MAX_DENSE_MODELS`` models the ability contrasts stay diagonal: the
    prior then pins the scale tightly, and a dense estimate of that many dimensions from
    warm-up draws would be noise.
    """
    names = ["theta_mean"]
    if inputs.n_models <= MAX_DENSE_MODELS:
        names.append("theta_contrast")
    if config.mode != "bt":
        if config.item_prior == "hierarchical":
            names += ["mu_b", "sigma_b"]
            if config.irt == "2pl":
                names += ["mu_log_a", "sigma_log_a"]
        if inputs.has_arena:
            names.append("gamma")
            if config.arena_likelihood == "reward":
                names.append("sigma")
            if uses_level(inputs, config):
                names.append("level_c")
    return tuple(names)


def uses_level(inputs: ModelInputs, config: ModelConfig) -> bool:
    """Whether the arena level term is part of the model."""
    return config.arena_level == "mean" and config.mode != "bt" and inputs.n_level_groups > 0


def level_parameters(inputs: ModelInputs, config: ModelConfig):
    """Sample the arena level term's intercept ``level_c`` per arena source.

    Returns an array of shape (``n_level_groups``,), or None without the term.
    """
    if not uses_level(inputs, config):
        return None
    with numpyro.plate("arena_source", inputs.n_level_groups):
        return numpyro.sample("level_c", dist.Normal(0.0, config.level_loc_scale))


def _level_per_item(p, gamma, level_c, inputs: ModelInputs):
    """Log density of each prompt's mean reward, shape (Q,) (zero for non-arena items).

    ``zbar_q ~ Normal(c_s + gamma pbar_q, se_q)``: ``pbar_q`` is the mean success
    probability of the models that answered prompt ``q``, and ``se_q`` the standard error
    of a mean of ``n_q`` rewards, with the within-prompt noise estimated from the data
    (:func:`bayes_dualeval.model.inputs.prompt_level`). The noise is fixed, not learned: every
    prompt has its own ``b_q`` that could absorb its mean exactly, so a learned spread of
    per-prompt leniency is not identified (it trades off against the spread of the
    difficulties, and sampling it makes a funnel). Rewards whose leniency varies by prompt
    call for ``arena_level = "none"``.
    """
    n = jnp.maximum(inputs.prompt_n, 1.0)
    pbar = jax.ops.segment_sum(p, inputs.arena_item, inputs.n_items) / n
    se = inputs.prompt_se
    resid = (inputs.prompt_zbar - level_c[inputs.level_group] - gamma * pbar) / se
    ll = -0.5 * resid**2 - jnp.log(se) - 0.5 * _LOG_2PI
    return jnp.where(inputs.prompt_n > 0, ll, 0.0)


def _eta(theta, a, b, model, item):
    diff = theta[model] - b[item]
    return diff if a is None else a[item] * diff


def static_loglik(theta, a, b, inputs: ModelInputs):
    """Bernoulli log likelihood of each static cell, ``y eta - softplus(eta)``, shape (S,)."""
    eta = _eta(theta, a, b, inputs.static_model, inputs.static_item)
    return inputs.static_y * eta - softplus(eta)


def arena_loglik(theta, a, b, gamma, sigma, inputs: ModelInputs, config: ModelConfig, level=None):
    """Arena log likelihood per item, shape (Q,) (zero for items that are not arena prompts).

    Decisive pairs contribute ``w [t log_sigmoid(x) + (1 - t) log_sigmoid(-x)]`` to their
    prompt and both-bad pairs ``lambda_bb w [log(1 - p_i) + log(1 - p_j)]``; the ``reward``
    likelihood gives each prompt its Gaussian term; ``level`` (``level_c`` from
    :func:`level_parameters`) adds each prompt's mean-reward term. ``lambda_arena`` is not
    applied.
    """
    if config.mode == "bt":
        x = theta[inputs.pair_i] - theta[inputs.pair_j]
        return _pairs_per_item(x, inputs)
    eta = _eta(theta, a, b, inputs.arena_model, inputs.arena_item)
    p = jax.nn.sigmoid(eta)
    if config.arena_likelihood == "reward":
        ll = _reward_per_item(eta, gamma, sigma, inputs)
    else:
        x = gamma * (p[inputs.pair_i] - p[inputs.pair_j])
        bb = inputs.bb_count * log_sigmoid(-eta)
        ll = _pairs_per_item(x, inputs) + config.lambda_bb * jax.ops.segment_sum(
            bb, inputs.arena_item, num_segments=inputs.n_items
        )
    if level is not None:
        ll = ll + _level_per_item(p, gamma, level, inputs)
    return ll


def _pairs_per_item(x, inputs: ModelInputs):
    terms = inputs.pair_w * (log_sigmoid(x) - (1.0 - inputs.pair_t) * x)
    return jax.ops.segment_sum(terms, inputs.pair_item, num_segments=inputs.n_items)


def _reward_per_item(eta, gamma, sigma, inputs: ModelInputs):
    p = jax.nn.sigmoid(eta)
    n = jnp.maximum(inputs.prompt_n, 1.0)
    zbar = jax.ops.segment_sum(inputs.arena_z, inputs.arena_item, inputs.n_items) / n
    pbar = jax.ops.segment_sum(p, inputs.arena_item, inputs.n_items) / n
    item = inputs.arena_item
    resid = (inputs.arena_z - zbar[item]) - gamma * (p - pbar[item])
    sq = jax.ops.segment_sum(resid**2, item, inputs.n_items)
    dof = jnp.maximum(inputs.prompt_n - 1.0, 0.0)
    used = inputs.prompt_n > 0
    ll = -0.5 * sq / sigma**2 - dof * (jnp.log(sigma) + 0.5 * _LOG_2PI) - 0.5 * jnp.log(n)
    return jnp.where(used, ll, 0.0)


def dualeval_model(inputs: ModelInputs, config: ModelConfig):
    """Joint Bayesian DualEval model (all modes).

    Parameters
    ----------
    inputs : ModelInputs
        Precomputed arrays from :func:`bayes_dualeval.model.inputs.build_inputs`.
    config : ModelConfig
        Mode, IRT variant, priors and likelihood weights.

    Notes
    -----
    Sites: ``theta`` (plate ``model``); ``a``, ``b`` (plate ``item``, deterministic under
    the hierarchical prior, with raw sites ``b_raw``, ``log_a_raw``); group-level
    ``mu_b``, ``sigma_b``, ``mu_log_a``, ``sigma_log_a`` (plate ``group``); ``gamma`` and,
    for the reward likelihood, ``sigma``. Likelihood terms are ``numpyro.factor`` sites
    ``static`` and ``arena``.
    """
    theta, theta_mean, spread = abilities(inputs, config)
    if config.mode == "bt":
        x = theta[inputs.pair_i] - theta[inputs.pair_j]
        ll = jnp.sum(inputs.pair_w * log_sigmoid(x)) - jnp.dot(inputs.lin, theta)
        numpyro.factor("arena", config.lambda_arena * ll)
        return
    a, b = item_parameters(inputs, config, theta_mean, spread)
    if inputs.has_static:
        eta = _eta(theta, a, b, inputs.static_model, inputs.static_item)
        ll = jnp.sum(inputs.static_y * eta - softplus(eta))
        numpyro.factor("static", config.lambda_static * ll)
    if inputs.has_arena:
        gamma = numpyro.sample("gamma", dist.LogNormal(config.gamma_loc, config.gamma_scale))
        level = level_parameters(inputs, config)
        eta = _eta(theta, a, b, inputs.arena_model, inputs.arena_item)
        p = jax.nn.sigmoid(eta)
        if config.arena_likelihood == "reward":
            sigma = numpyro.sample("sigma", dist.HalfNormal(config.sigma_scale))
            ll = jnp.sum(_reward_per_item(eta, gamma, sigma, inputs))
            ll_bb = 0.0
        else:
            x = gamma * (p[inputs.pair_i] - p[inputs.pair_j])
            ll = jnp.sum(inputs.pair_w * log_sigmoid(x)) - gamma * jnp.dot(inputs.lin, p)
            ll_bb = jnp.dot(inputs.bb_count, log_sigmoid(-eta))
        if level is not None:
            ll = ll + jnp.sum(_level_per_item(p, gamma, level, inputs))
        numpyro.factor("arena", config.lambda_arena * ll + config.lambda_bb * ll_bb)
