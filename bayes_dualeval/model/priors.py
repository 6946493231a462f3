"""Priors on item parameters, floors and ceilings, and arena level intercepts.

The abilities' priors are in :mod:`bayes_dualeval.model.ability_priors`.

Each function samples its sites and returns the values the likelihood reads; the joint
model (:mod:`bayes_dualeval.model.joint`) calls them in order. The coordinates NUTS explores
are chosen for their geometry (see :func:`item_parameters`); the priors are as documented
in docs/model.md.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist

from bayes_dualeval.model import anchoring, links
from bayes_dualeval.model.config import ModelConfig
from bayes_dualeval.model.inputs import ModelInputs
from bayes_dualeval.model.spec import DualEvalModel


def item_parameters(
    inputs: ModelInputs, config: ModelConfig, theta_mean, spread=1.0, *, anchor=None
):
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
    Each item is centred by a weight in [0, 1] (``inputs.b_centred``,
    ``inputs.log_a_centred``, see :func:`bayes_dualeval.model.pilot.centring` and
    :func:`_draw`): as far as its responses pin it down, non-centred (``b_raw`` standard
    normal, scaled by ``sigma_b``) where the prior dominates. With informative data,
    non-centred coordinates tie every ``b_raw`` to ``sigma_b``, and with weak data centred
    ones make a funnel. (Coordinates relative to
    the group location as well, ``(b - theta_mean - mu_b) / rho``, were tried: the arena
    level term then mixed far worse, E-BFMI 0.1.)

    Arena prompts seen through the level term are *anchored* instead when ``anchor`` is
    given and ``inputs.b_anchored`` marks them: ``b_q`` is drawn around the
    difficulty its mean reward implies (:mod:`bayes_dualeval.model.anchoring`), same prior,
    other coordinates.

    Parameters
    ----------
    inputs : ModelInputs
    config : ModelConfig
    theta_mean, spread : jax.Array
        From :func:`abilities`.
    anchor : tuple, optional
        ``(theta, gamma, level_c, facets)`` of the arena level term (``facets`` None
        without several judges or style), which anchored prompts need.
    """
    two_pl = links.get(config.irt).slope
    g = inputs.item_group
    a = None
    if config.item_prior == "hierarchical":
        shift_b = feature_shift(inputs, "b", config.feature_scale)
        shift_la = feature_shift(inputs, "log_a", config.feature_loga_scale) if two_pl else 0.0
        with numpyro.plate("group", inputs.n_groups):
            mu_b = _group_location(inputs, config, anchor)
            sigma_b = numpyro.sample("sigma_b", dist.HalfNormal(config.b_scale_scale))
            if two_pl:
                mu_la = numpyro.sample("mu_log_a", dist.Normal(0.0, config.loga_loc_scale))
                sigma_la = numpyro.sample(
                    "sigma_log_a", dist.LogNormal(jnp.log(config.loga_scale_scale), 0.5)
                )
        with numpyro.plate("item", inputs.n_items):
            if two_pl:
                log_a = _draw(
                    "log_a_raw", mu_la[g] + shift_la, sigma_la[g],
                    _layout(inputs, inputs.log_a_centred), shift=-jnp.log(spread),
                )  # fmt: skip
                a = numpyro.deterministic("a", jnp.exp(log_a))
            # arena prompts are located relative to their group: their common level is only
            # weakly identified (rewards are normalised), and this way it is one coordinate
            relative = jnp.where(inputs.prompt_n > 0, mu_b[g], 0.0)
            loc = mu_b[g] + shift_b
            if anchor is None or inputs.n_anchored == 0:
                b_rel = _draw(
                    "b_raw", loc, sigma_b[g], _layout(inputs, inputs.b_centred), stretch=spread,
                    shift=relative,
                )  # fmt: skip
            else:
                b_rel = _anchored(inputs, a, theta_mean, loc, sigma_b[g], spread, relative, anchor)
            b = numpyro.deterministic("b", theta_mean + b_rel)
    else:
        with numpyro.plate("item", inputs.n_items):
            b_rel = _draw("b_rel", 0.0, config.b_scale, 1.0, stretch=spread)
            b = numpyro.deterministic("b", theta_mean + b_rel)
            if two_pl:
                log_a = _draw("log_a", 0.0, config.loga_scale, 1.0, shift=-jnp.log(spread))
                a = numpyro.deterministic("a", jnp.exp(log_a))
    return a, b


def feature_shift(inputs: ModelInputs, name: str, scale: float):
    r"""The part of each item's ``b`` (or ``log a``) its features explain, shape (Q,).

    With regressors ``X`` (``inputs.item_features``, ``F`` whitened principal components of
    the standardised features: unit variance over the items that have features),

    .. math:: x_q \cdot \beta, \quad \beta = \tau z / \sqrt F,\quad
              z \sim \mathrm{Normal}(0, I_F),\quad \tau \sim \mathrm{HalfNormal}(s):

    a ridge prior on the components whose one scale ``tau`` (site ``tau_beta_<name>``) is
    the standard deviation over items of the explained part, learned from the data (near 0
    when the features carry nothing). Non-centred (``beta_<name>_raw`` holds ``z``), which
    keeps that case free of a funnel. Zero, and no site, without features.

    Parameters
    ----------
    inputs : ModelInputs
    name : {"b", "log_a"}
    scale : float
        ``s``: ``feature_scale`` or ``feature_loga_scale``.
    """
    n = inputs.item_features.shape[1]
    if n == 0:
        return 0.0
    tau = numpyro.sample(f"tau_beta_{name}", dist.HalfNormal(scale))
    with numpyro.plate("feature", n):
        z = numpyro.sample(f"beta_{name}_raw", dist.Normal(0.0, 1.0))
        beta = numpyro.deterministic(f"beta_{name}", tau * z / np.sqrt(n))
    return inputs.item_features @ beta


def _anchored(inputs: ModelInputs, a, theta_mean, loc, scale, spread, relative, anchor):
    """``b - theta_mean`` with the marked arena prompts anchored (see :func:`item_parameters`).

    Unmarked items are drawn by :func:`_draw` as usual; a marked prompt's site ``b_raw`` is
    :func:`_draw`'s standard normal (location 0, scale 1, non-centred) and holds ``v_q``,
    and the factor ``b_anchor`` turns its density into the prior of ``b_q`` times the
    Jacobian ``s_q``.
    """
    theta, gamma, level_c, facets = anchor
    marked = (inputs.b_anchored > 0) & (inputs.prompt_n > 0)
    slope = jnp.ones(inputs.n_items) if a is None else anchoring.anchor_slope(a)
    b_star, w = anchoring.level_difficulty(theta, slope, gamma, level_c, inputs, facets)
    s = anchoring.anchored_scale(slope, w, gamma, scale, inputs, facets)
    centred = jnp.where(marked, 0.0, inputs.b_centred)
    raw_or_plain = _draw(
        "b_raw",
        jnp.where(marked, 0.0, loc),
        jnp.where(marked, 1.0, scale),
        centred,
        stretch=spread,
        shift=relative,
    )
    anchored = b_star - theta_mean + s * raw_or_plain
    # the other items' values are replaced before use, so no NaN reaches the gradient
    safe = jnp.where(marked, anchored, loc)
    correction = (
        dist.Normal(loc, scale).log_prob(safe)
        + jnp.log(jnp.where(marked, s, 1.0))
        - dist.Normal(0.0, 1.0).log_prob(raw_or_plain)
    )
    numpyro.factor("b_anchor", jnp.where(marked, correction, 0.0))  # one per item
    return jnp.where(marked, anchored, raw_or_plain)


def _group_location(inputs: ModelInputs, config: ModelConfig, anchor):
    """The groups' ``mu_b``: sampled as it is, or in the anchored level's units.

    With anchored prompts, an anchored group's location is held as ``mu_b_raw = mu_b /
    k`` (``k`` = :func:`~bayes_dualeval.model.anchoring.level_unit` of ``gamma``, 1 for the
    other groups), its prior transformed exactly: ``mu_b_raw ~ Normal(0, b_loc_scale /
    k)``. The arena difficulties' common location follows the level intercept, whose
    spread grows with ``gamma`` (:func:`level_parameters`).
    """
    site = anchoring.level_sites(inputs)["mu_b"]
    if anchor is None or site == "mu_b":
        return numpyro.sample("mu_b", dist.Normal(0.0, config.b_loc_scale))
    anchored = jax.ops.segment_max(inputs.b_anchored, inputs.item_group, inputs.n_groups)
    k = jnp.where(anchored > 0, anchoring.level_unit(anchor[1]), 1.0)
    raw = numpyro.sample(site, dist.Normal(0.0, config.b_loc_scale / k))
    return numpyro.deterministic("mu_b", k * raw)


def _layout(inputs: ModelInputs, mask):
    """``mask`` (a row of ``inputs.centring``), or 0.0 when no item is centred.

    With ``n_centred`` 0 (every item non-centred), :func:`_draw` then has no mask to read.
    """
    return mask if inputs.n_centred else 0.0


def _draw(name: str, loc, scale, centred, *, shift=0.0, stretch=1.0):
    """Draw ``x ~ Normal(loc, scale)`` elementwise, centred by a weight ``w`` in [0, 1].

    In the centred coordinate ``y = (x - shift) / stretch ~ Normal(m, s)`` (``m = (loc -
    shift) / stretch``, ``s = scale / stretch``) the site ``name`` holds
    ``r ~ Normal(w m, s^w)`` and ``y = m + s^(1 - w) (r - w m)``: at ``w = 1`` the site is
    ``y`` itself (centred), at ``w = 0`` the standard normal ``(x - loc) / scale``
    (non-centred), and in between a partially centred coordinate (Papaspiliopoulos, Roberts
    and Skold 2007). The density of the site is the prior of ``x`` transformed exactly, so
    the returned ``x`` has the same prior at every ``w``. ``centred`` is an array of
    weights per element, or a Python number for all of them (then the program has no
    per-element weight at all).
    """
    if isinstance(centred, (int, float)):  # one layout for every element
        if not centred:
            return loc + scale * numpyro.sample(name, dist.Normal(0.0, 1.0))
        y = numpyro.sample(name, dist.Normal((loc - shift) / stretch, scale / stretch))
        return shift + stretch * y
    w = jnp.asarray(centred)
    m, log_s = (loc - shift) / stretch, jnp.log(scale / stretch)
    raw = numpyro.sample(name, dist.Normal(w * m, jnp.exp(w * log_s)))
    return shift + stretch * (m + jnp.exp((1.0 - w) * log_s) * (raw - w * m))


def asymptotes(inputs: ModelInputs, config: ModelConfig):
    """Sample the guessing floor ``c`` (3PL, 4PL) and upper asymptote ``d`` (4PL).

    Only static questions have them. Under the hierarchical item prior the floors of each
    item group share a mean guessing level, ``mu_c[g] ~ Beta(m k, (1 - m) k)`` (``m =
    guess_mean``, ``k = guess_strength``), and each floor is logit-normal around it,
    ``logit c_q = logit mu_c[g] + s z_q`` with ``z_q ~ Normal(0, 1)`` and ``s =
    guess_spread``: one item's few responses say little about its own floor, but hundreds
    of items together pin the level down. The item sites ``c_raw`` hold ``z_q``
    (non-centred: with weak per-item data, centred floors would all move with ``mu_c``
    and mix slowly). Under the independent prior ``c_q ~ Beta(m k, (1 - m) k)`` directly
    (site ``c_static``). Ceilings likewise (``mu_d``, ``d_raw``, ``ceiling_mean``,
    ``ceiling_strength``, ``ceiling_spread``). The deterministic ``c``, ``d`` spread the
    static questions' values over every item (0 and 1 on arena prompts, which have no
    answer to guess).

    Returns
    -------
    c, d : jax.Array of shape (Q,), or None where the link has no such parameter.
    """
    link = links.get(config.irt)
    if not link.asymptotes or inputs.n_static_items == 0:
        return None, None
    group = inputs.item_group[inputs.static_items]
    out = []
    for name, on, mean, strength, spread, rest in (
        ("c", link.floor, config.guess_mean, config.guess_strength, config.guess_spread, 0.0),
        ("d", link.ceiling, config.ceiling_mean, config.ceiling_strength,
         config.ceiling_spread, 1.0),
    ):  # fmt: skip
        if not on:
            out.append(None)
            continue
        level = dist.Beta(mean * strength, (1.0 - mean) * strength)
        if config.item_prior == "hierarchical":
            with numpyro.plate("group", inputs.n_groups):
                mu = numpyro.sample(f"mu_{name}", level)
            with numpyro.plate("static_item", inputs.n_static_items):
                z = numpyro.sample(f"{name}_raw", dist.Normal(0.0, 1.0))
            value = jax.nn.sigmoid(jax.scipy.special.logit(mu)[group] + spread * z)
        else:
            with numpyro.plate("static_item", inputs.n_static_items):
                value = numpyro.sample(f"{name}_static", level)
        full = jnp.full(inputs.n_items, rest).at[inputs.static_items].set(value)
        with numpyro.plate("item", inputs.n_items):
            out.append(numpyro.deterministic(name, full))
    return tuple(out)


def uses_level(inputs: ModelInputs, config: ModelConfig) -> bool:
    """Whether the arena level term is part of the model."""
    return DualEvalModel(config).uses_level(inputs)


def level_parameters(inputs: ModelInputs, config: ModelConfig, gamma=None):
    """Sample the arena level term's intercept ``level_c`` per arena source.

    ``level_c ~ Normal(0, level_loc_scale)``. With anchored prompts
    (``inputs.n_anchored``, NUTS's layout) the site is ``level_u = level_c / k`` instead,
    ``k`` = :func:`~bayes_dualeval.model.anchoring.level_unit` of ``gamma``, with the
    prior transformed exactly (``level_u ~ Normal(0, level_loc_scale / k)``), and
    ``level_c`` is deterministic: the same model in coordinates whose spread grows less
    with ``gamma`` (:mod:`bayes_dualeval.model.anchoring`, "The level's coordinates").

    Returns an array of shape (``n_level_groups``,), or None without the term.
    """
    if not uses_level(inputs, config):
        return None
    site = anchoring.level_sites(inputs)["level_c"]
    with numpyro.plate("arena_source", inputs.n_level_groups):
        if site == "level_c":
            return numpyro.sample("level_c", dist.Normal(0.0, config.level_loc_scale))
        k = anchoring.level_unit(gamma)
        u = numpyro.sample(site, dist.Normal(0.0, config.level_loc_scale / k))
        return numpyro.deterministic("level_c", k * u)
