"""Priors on the abilities, as NumPyro sites: one scale, per domain, or in dimensions.

Each function samples its sites and returns the values the likelihood reads; the joint
model (:mod:`bayes_dualeval.model.joint`) calls one of them first, then the item priors
(:mod:`bayes_dualeval.model.priors`). The ability contrasts live in a Helmert basis
(:func:`helmert_basis`), so the abilities sum to ``M * theta_mean`` by construction; the
priors are as documented in docs/model.md.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist

from bayes_dualeval.model.ability_map import AbilityMap, domain_map
from bayes_dualeval.model.config import ModelConfig
from bayes_dualeval.model.contrasts import helmert_basis
from bayes_dualeval.model.inputs import ModelInputs


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
        theta = numpyro.deterministic("theta", theta_mean + helmert_basis(m) @ z)
    spread = jnp.sqrt((jnp.sum(z**2) / scale**2 + 1.0) / m)
    return theta, theta_mean, spread


def dimension_abilities(inputs: ModelInputs, config: ModelConfig):
    r"""Abilities in ``K = dims`` dimensions and each item's loadings on them.

    Used when ``dims > 1``: a compensatory multidimensional 2PL,

    .. math:: \operatorname{logit} p_{iq} = a_q (\theta_i \cdot w_q - b_q)
              = \mathbf a_q \cdot \theta_i - d_q,

    with the discrimination vector :math:`\mathbf a_q = a_q w_q` split into its size
    :math:`a_q` (the usual prior) and its loadings :math:`w_q` on the simplex
    (deterministic site ``loading``), and :math:`d_q = a_q b_q`. The loadings are
    logistic-normal around their domain's profile,
    :math:`w_q = \mathrm{softmax}(H_K (\mu_{g(q)} + \sigma z_q))` with ``H_K`` the
    Helmert basis of the sum-to-zero logits (so the prior is exchangeable over dimensions),
    a profile per item domain (items without one form one more group)
    ``mu_loading ~ Normal(0, 1.5)`` (shape (G, K - 1)),
    ``sigma_loading ~ LogNormal(log(loading_scale), 0.5)`` and ``z_q ~ Normal(0, I)``
    (site ``loading_raw``, non-centred): an item answered by a dozen models says little
    about its own loadings, while a domain's hundred items say much about theirs.
    Abilities are drawn per dimension
    as in :func:`abilities`, ``theta_{., k} = theta_mean + H z_k`` with every ``z_{jk} ~
    Normal(0, theta_scale)`` (site ``theta_contrast``, shape (M - 1, K)): independent
    ``Normal(0, theta_scale)`` abilities per dimension, sharing their mean over models.

    Identification: a shift of a dimension's abilities moves every item's
    :math:`\theta_i \cdot w_q` by an item-specific amount that its ``b_q`` absorbs, so
    the dimensions share one mean (``theta_mean``, tied to the difficulties as in
    :func:`item_parameters`); the scale is fixed by the ability prior and the loadings
    summing to one; non-negative loadings leave of the rotations only those that keep
    every item's loadings non-negative, and the prior's independence and unit scale pick
    among those softly. The dimensions are exchangeable, so their labels are not
    identified: the draws are relabelled after sampling
    (:func:`bayes_dualeval.posterior.dimensions.align`), and the run reports it.

    Returns
    -------
    theta : jax.Array, shape (M,)
        The deterministic site ``theta``: each model's ability on the average fitted item,
        :math:`\theta_i \cdot \bar w` (the leaderboard's ability).
    theta_mean, spread : jax.Array
        As :func:`abilities` returns them (``spread`` over every dimension).
    ability : AbilityMap
        The deterministic site ``theta_dims`` (M, K) and the loadings.
    """
    m, k = inputs.n_models, config.dims
    scale = config.theta_scale
    theta_mean = numpyro.sample("theta_mean", dist.Normal(0.0, scale / jnp.sqrt(m)))
    with numpyro.plate("dimension", k, dim=-1), numpyro.plate("contrast", m - 1, dim=-2):
        z = numpyro.sample("theta_contrast", dist.Normal(0.0, scale))
    theta_dims = numpyro.deterministic("theta_dims", theta_mean + helmert_basis(m) @ z)
    loading = _loadings(inputs, config, k)
    with numpyro.plate("model", m):
        theta = numpyro.deterministic("theta", theta_dims @ jnp.mean(loading, axis=0))
    spread = jnp.sqrt((jnp.sum(z**2) / (k * scale**2) + 1.0) / m)
    return theta, theta_mean, spread, AbilityMap(theta_dims, loading)


def _loadings(inputs: ModelInputs, config: ModelConfig, k: int):
    """Each item's loadings on ``k`` dimensions, shape (Q, k) (see :func:`dimension_abilities`)."""
    groups = inputs.n_domains + 1  # the last: items without a domain
    with numpyro.plate("loading_contrast", k - 1, dim=-1):
        with numpyro.plate("loading_group", groups, dim=-2):
            mu = numpyro.sample("mu_loading", dist.Normal(0.0, LOADING_LOC_SCALE))
        with numpyro.plate("item", inputs.n_items, dim=-2):
            z = numpyro.sample("loading_raw", dist.Normal(0.0, 1.0))
    sigma = numpyro.sample("sigma_loading", dist.LogNormal(jnp.log(config.loading_scale), 0.5))
    logits = (mu[inputs.item_domain] + sigma * z) @ helmert_basis(k).T  # (Q, k), sum to zero
    with numpyro.plate("item", inputs.n_items):
        return numpyro.deterministic("loading", jax.nn.softmax(logits, axis=-1))


def domain_abilities(inputs: ModelInputs, config: ModelConfig, theta):
    """Abilities per item domain: ``theta_{i,d} = theta_i + delta_{i,d}``.

    Used under ``abilities = "domain"``.

    Each domain ``d`` has a spread ``tau_d ~ LogNormal(log(domain_scale), 0.5)`` (zero-avoiding,
    like ``sigma_log_a``: with it pressed against zero the deviations and the item scales
    mixed slowly where models do not differ by domain), and its deviations
    are ``delta_{., d} = tau_d H u_d`` with ``u_d ~ Normal(0, I_{M-1})`` (site ``delta_raw``,
    shape (M - 1, K)) and ``H`` the Helmert basis of the abilities: exactly
    ``delta_{i,d} ~ Normal(0, tau_d)`` iid, restricted to sum to zero over models. That
    restriction is the identification: a shift of every model's ability in a domain is a
    shift of that domain's item difficulties, which belongs to the items; what remains,
    a model's strength in a domain relative to the others, is the deviation. ``theta_i``
    is then the centre the domain abilities shrink to: a domain with few items borrows
    from it, one with many is free to differ by as much as ``tau_d`` allows, and ``tau_d``
    is learned from how much models' domain abilities differ. The coordinates are
    non-centred (``u``), which suits few models per domain.

    Parameters
    ----------
    inputs : ModelInputs
        ``n_domains`` (0: no domain abilities) and ``item_domain``.
    config : ModelConfig
    theta : jax.Array, shape (M,)
        The overall abilities (:func:`abilities`).

    Returns
    -------
    jax.Array or AbilityMap
        ``theta`` itself without domain abilities; otherwise the map of the deterministic
        site ``theta_domain`` (M, K) and the overall ability, which items without a domain
        read (:func:`~bayes_dualeval.model.ability_map.domain_map`).
    """
    if inputs.n_domains == 0:
        return theta
    m, k = inputs.n_models, inputs.n_domains
    with numpyro.plate("domain", k):
        tau = numpyro.sample("tau_domain", dist.LogNormal(jnp.log(config.domain_scale), 0.5))
        with numpyro.plate("domain_contrast", m - 1, dim=-2):
            u = numpyro.sample("delta_raw", dist.Normal(0.0, 1.0))
    delta = (helmert_basis(m) @ u) * tau
    theta_domain = numpyro.deterministic("theta_domain", theta[:, None] + delta)
    return domain_map(theta, theta_domain, inputs.item_domain)


#: Prior sd of a domain's mean loading logits (``mu_loading``).
LOADING_LOC_SCALE = 1.5
