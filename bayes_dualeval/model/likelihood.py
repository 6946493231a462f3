r"""Likelihood terms: static labels, arena pairs, rewards and the arena level term.

Static labels are an observed NumPyro site, ``static_y ~ IRTBernoulli(eta, c, d, n)`` with
:math:`p = c + (d - c) \sigma(\eta)` (:mod:`bayes_dualeval.model.links`): per (model, item)
cell, ``k`` correct of ``n`` answers (repeated samples), with the density of ``n``
Bernoulli labels, so NumPyro's ``Predictive`` replicates them and ``log_likelihood`` reads
them per cell. The arena terms
are sums over pairs or prompts entered as one ``numpyro.factor`` site (``arena``); their
per-prompt values come from :func:`arena_loglik`, and their predictive formula from
:func:`pair_win_probability`.

Decisive pairs contribute :math:`w_q [t \log s + (1 - t) \log(1 - s)]` with
:math:`s = \sigma(\gamma (p_{iq} - p_{jq}))`; both-bad pairs
:math:`\lambda_{bb} w_q [\log(1 - p_{iq}) + \log(1 - p_{jq})]`; the ``reward`` likelihood
:math:`z_{iq} \sim \mathcal N(c_q + \gamma p_{iq}, \sigma)` with :math:`c_q` integrated
out; the level term :math:`\bar z_q \sim \mathcal N(c_s + \gamma \bar p_q, se_q)`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpyro.distributions as dist
from numpyro.distributions import constraints

from bayes_dualeval.model import arena_matrix, links
from bayes_dualeval.model.ability_map import ability_at
from bayes_dualeval.model.config import ModelConfig
from bayes_dualeval.model.inputs import ModelInputs
from bayes_dualeval.model.subsample import batch

_LOG_2PI = float(jnp.log(2 * jnp.pi))


class IRTBernoulli(dist.Distribution):
    """The answers of a cell: ``n`` labels with success probability ``c + (d - c) sigmoid(eta)``.

    The value is the share of correct answers ``k / n``; its log density
    ``n * loglik(k / n) = k log p + (n - k) log(1 - p)`` is the sum of the cell's ``n``
    Bernoulli log likelihoods (a binomial count without its coefficient, which no
    parameter moves), so one answer per cell is the Bernoulli model itself.

    Parameters
    ----------
    eta : jax.Array
        Linear predictor ``a (theta - b)``.
    c, d : jax.Array or None
        Floor and ceiling (None: 0 and 1); see :func:`bayes_dualeval.model.links.probability`.
    weight : jax.Array or None
        The answers of each cell, 0 for a padded cell
        (:attr:`~bayes_dualeval.model.inputs.ModelInputs.static_n`), multiplied into
        :meth:`log_prob`, so that every reader of the static likelihood (the model, MAP's
        item likelihood, the pointwise log likelihood) counts answers and leaves padded
        cells out alike. None: one answer each.
    """

    arg_constraints = {"eta": constraints.real}
    support = constraints.unit_interval

    def __init__(self, eta, c=None, d=None, weight=None, *, validate_args=None):
        self.eta, self.c, self.d, self.weight = eta, c, d, weight
        super().__init__(batch_shape=jnp.shape(eta), validate_args=validate_args)

    def sample(self, key, sample_shape=()):
        """Draw shares of correct answers ``k / n`` of shape ``sample_shape + batch_shape``.

        With one answer per cell (or no weight) these are labels, 0.0 or 1.0; a padded
        cell draws 0.
        """
        p = links.probability(self.eta, self.c, self.d)
        shape = sample_shape + self.batch_shape
        if self.weight is None:
            return jax.random.bernoulli(key, p, shape).astype(jnp.float32)
        n = jnp.broadcast_to(self.weight, shape)
        k = jax.random.binomial(key, n, jnp.broadcast_to(p, shape))
        return (k / jnp.maximum(n, 1.0)).astype(jnp.float32)

    def log_prob(self, value):
        """Stable log probability of ``value`` (see :func:`links.bernoulli_loglik`), weighted."""
        log_p = links.bernoulli_loglik(value, self.eta, self.c, self.d)
        return log_p if self.weight is None else log_p * self.weight

    @property
    def mean(self):
        """The success probability."""
        return links.probability(self.eta, self.c, self.d)


def cell_eta(theta, a, b, model, item):
    """Linear predictor of the cells ``(model[k], item[k])``.

    ``theta`` is the abilities (M,) or an ability map
    (:class:`~bayes_dualeval.model.ability_map.AbilityMap`).
    """
    ability = ability_at(theta, model, item)
    return links.eta(ability, b[item], None if a is None else a[item])


def static_distribution(theta, a, b, inputs: ModelInputs, c=None, d=None) -> IRTBernoulli:
    """The distribution of every static label, batch shape (S,), weighted by ``static_n``."""
    item = inputs.static_item
    eta = cell_eta(theta, a, b, inputs.static_model, item)
    c, d = (None if x is None else x[item] for x in (c, d))
    return IRTBernoulli(eta, c, d, inputs.static_n)


def static_loglik(theta, a, b, inputs: ModelInputs, c=None, d=None):
    """Log likelihood of each static cell's answers, shape (S,); 0 for a padded cell."""
    return static_distribution(theta, a, b, inputs, c, d).log_prob(inputs.static_y)


def static_matrix_loglik(theta, a, b, inputs: ModelInputs, c=None, d=None):
    """Bernoulli log likelihood of the static labels per model and item, shape (M, n_static_items).

    The same density as :func:`static_loglik` summed, read from
    :attr:`~bayes_dualeval.model.inputs.ModelInputs.static_counts` (``k`` correct of ``n``
    answers per model and item): a label's log likelihood is affine in the label, so a
    model's answers to an item add up to ``n * loglik(k / n)``, one evaluation per entry of
    the matrix (0 where ``n`` is 0). Every model meets every item by broadcasting, so the
    gradient needs no scatter back to the cells; that is what makes it cheaper where most
    of the matrix is observed.
    """
    k, n = inputs.static_counts[0], inputs.static_counts[1]
    items = inputs.static_items
    models = jnp.arange(inputs.n_models)[:, None]
    ability = ability_at(theta, models, items[None, :])
    eta = links.eta(ability, b[items], None if a is None else a[items])
    c, d = (None if x is None else x[items] for x in (c, d))
    return n * links.bernoulli_loglik(k / jnp.maximum(n, 1.0), eta, c, d)


def pair_win_probability(p_first, p_second, gamma):
    """``P(first beats second) = sigmoid(gamma (p_first - p_second))`` (NumPy or JAX)."""
    return links.sigmoid(gamma * (p_first - p_second))


def arena_loglik(theta, a, b, gamma, sigma, inputs: ModelInputs, config: ModelConfig, level=None):
    """Arena log likelihood per item, shape (Q,) (zero for items that are not arena prompts).

    Decisive pairs contribute ``w [t log_sigmoid(x) + (1 - t) log_sigmoid(-x)]`` to their
    prompt and both-bad pairs ``lambda_bb w [log(1 - p_i) + log(1 - p_j)]``; the ``reward``
    likelihood gives each prompt its Gaussian term; ``level`` (``level_c`` from
    :func:`bayes_dualeval.model.priors.level_parameters`) adds each prompt's mean-reward
    term. ``lambda_arena`` is not applied.
    """
    if config.mode == "bt":
        x = theta[inputs.pair_i] - theta[inputs.pair_j]
        return _pairs_per_item(x, inputs)
    eta = cell_eta(theta, a, b, inputs.arena_model, inputs.arena_item)
    p = links.probability(eta)
    if config.arena_likelihood == "reward":
        ll = reward_per_item(p, gamma, sigma, inputs)
    else:
        x = gamma * (p[inputs.pair_i] - p[inputs.pair_j])
        bb = inputs.bb_count * links.log_sigmoid(-eta)
        ll = _pairs_per_item(x, inputs) + config.lambda_bb * jax.ops.segment_sum(
            bb, inputs.arena_item, num_segments=inputs.n_items
        )
    if level is not None:
        ll = ll + level_per_item(p, gamma, level, inputs)
    return ll


def arena_total(theta, a, b, gamma, sigma, inputs: ModelInputs, config: ModelConfig, level):
    """The arena term summed, as the joint model adds it (weights and powers applied).

    Equal to ``lambda_arena * arena_loglik(...).sum()`` (with the both-bad part weighted by
    ``lambda_bb`` instead), computed more cheaply: the soft-target part of each pair is
    linear in the cell probabilities and collapses to one dot product with
    ``inputs.pair_linear`` (see :mod:`bayes_dualeval.model.inputs`).
    """
    if config.mode == "bt":
        ll = _pair_sum(theta, 1.0, inputs) - jnp.dot(inputs.pair_linear, theta)
        return config.lambda_arena * ll
    if inputs.arena_matrix is not None:
        return _arena_matrix_total(theta, a, b, gamma, inputs, config, level)
    eta = cell_eta(theta, a, b, inputs.arena_model, inputs.arena_item)
    p = links.probability(eta)
    ll_bb = 0.0
    if config.arena_likelihood == "reward":
        ll = jnp.sum(reward_per_item(p, gamma, sigma, inputs))
    else:
        ll = _pair_sum(p, gamma, inputs) - gamma * jnp.dot(inputs.pair_linear, p)
        ll_bb = jnp.dot(inputs.bb_count, links.log_sigmoid(-eta))
    if level is not None:
        ll = ll + jnp.sum(level_per_item(p, gamma, level, inputs))
    return config.lambda_arena * ll + config.lambda_bb * ll_bb


def _arena_matrix_total(theta, a, b, gamma, inputs: ModelInputs, config: ModelConfig, level):
    """:func:`arena_total` of a pairs likelihood, read from ``inputs.arena_matrix``."""
    matrix = inputs.arena_matrix
    eta = arena_matrix.prompt_eta(theta, a, b, matrix, inputs.n_models)
    p = links.probability(eta)
    ll = arena_matrix.pair_total(p, gamma, matrix)
    if level is not None:
        pbar = arena_matrix.per_item(p, matrix, inputs.n_items)
        ll = ll + jnp.sum(
            level_at_mean(pbar / jnp.maximum(inputs.prompt_n, 1.0), gamma, level, inputs)
        )
    both_bad = arena_matrix.both_bad_total(eta, matrix)
    return config.lambda_arena * ll + config.lambda_bb * both_bad


def _pair_sum(value, gamma, inputs: ModelInputs):
    """``sum w log_sigmoid(gamma (value_i - value_j))`` over the decisive pairs.

    Over a random batch of pairs weighted up to the whole when ``inputs.pair_batch`` is
    set (:func:`~bayes_dualeval.model.subsample.batch`; minibatch SVI).
    """
    rows, weight = batch(inputs.pair_i.shape[0], inputs.pair_batch)
    i, j, w = inputs.pair_i, inputs.pair_j, inputs.pair_w
    if rows is not None:
        i, j, w = i[rows], j[rows], w[rows]
    return weight * jnp.sum(w * links.log_sigmoid(gamma * (value[i] - value[j])))


def _pairs_per_item(x, inputs: ModelInputs):
    terms = inputs.pair_w * (links.log_sigmoid(x) - (1.0 - inputs.pair_t) * x)
    return jax.ops.segment_sum(terms, inputs.pair_item, num_segments=inputs.n_items)


def reward_mean(p, pbar, gamma, zbar=None):
    """Predicted normalised reward of arena cells: ``zbar + gamma (p - pbar)`` (NumPy or JAX).

    The prompt's mean reward ``zbar`` plus the cell's success probability ``p`` relative
    to the prompt's mean probability ``pbar``, on the reward scale ``gamma`` (arguments
    broadcast). Without ``zbar``: the prediction of the centred reward ``z - zbar``, as
    :func:`reward_per_item` uses it.
    """
    deviation = gamma * (p - pbar)
    return deviation if zbar is None else zbar + deviation


def reward_per_item(p, gamma, sigma, inputs: ModelInputs):
    """Gaussian log likelihood of each prompt's rewards, prompt offset integrated out."""
    n = jnp.maximum(inputs.prompt_n, 1.0)
    zbar = jax.ops.segment_sum(inputs.arena_z, inputs.arena_item, inputs.n_items) / n
    pbar = jax.ops.segment_sum(p, inputs.arena_item, inputs.n_items) / n
    item = inputs.arena_item
    resid = (inputs.arena_z - zbar[item]) - reward_mean(p, pbar[item], gamma)
    sq = jax.ops.segment_sum(resid**2, item, inputs.n_items)
    dof = jnp.maximum(inputs.prompt_n - 1.0, 0.0)
    used = inputs.prompt_n > 0
    ll = -0.5 * sq / sigma**2 - dof * (jnp.log(sigma) + 0.5 * _LOG_2PI) - 0.5 * jnp.log(n)
    return jnp.where(used, ll, 0.0)


def level_per_item(p, gamma, level_c, inputs: ModelInputs):
    """Log density of each prompt's mean reward, shape (Q,) (zero for non-arena items).

    ``zbar_q ~ Normal(c_s + gamma pbar_q, se_q)``: ``pbar_q`` is the mean success
    probability of the models that answered prompt ``q``, and ``se_q`` the standard error
    of a mean of ``n_q`` rewards, with the within-prompt noise estimated from the data
    (:func:`bayes_dualeval.model.pilot.prompt_level`). The noise is fixed, not learned:
    every prompt has its own ``b_q`` that could absorb its mean exactly, so a learned spread
    of per-prompt leniency is not identified (it trades off against the spread of the
    difficulties, and sampling it makes a funnel). Rewards whose leniency varies by prompt
    call for ``arena_level = "none"``.
    """
    n = jnp.maximum(inputs.prompt_n, 1.0)
    pbar = jax.ops.segment_sum(p, inputs.arena_item, inputs.n_items) / n
    return level_at_mean(pbar, gamma, level_c, inputs)


def level_at_mean(pbar, gamma, level_c, inputs: ModelInputs):
    """:func:`level_per_item` from each prompt's mean success probability ``pbar`` (Q,)."""
    se = inputs.prompt_se
    resid = (inputs.prompt_zbar - level_c[inputs.level_group] - gamma * pbar) / se
    ll = -0.5 * resid**2 - jnp.log(se) - 0.5 * _LOG_2PI
    return jnp.where(inputs.prompt_n > 0, ll, 0.0)
