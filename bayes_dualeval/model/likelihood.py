r"""Likelihood terms: static labels, arena pairs, rewards and the arena level term.

Static labels are an observed NumPyro site, ``static_y ~ IRTBernoulli(eta, c, d, n)`` with
:math:`p = c + (d - c) \sigma(\eta)` (:mod:`bayes_dualeval.model.links`): per (model, item)
cell, ``k`` correct of ``n`` answers (repeated samples), with the density of ``n``
Bernoulli labels, so NumPyro's ``Predictive`` replicates them and ``log_likelihood`` reads
them per cell. The arena terms
are sums over pairs or prompts entered as one ``numpyro.factor`` site (``arena``); their
per-prompt values come from :func:`arena_loglik`. Both are laid out here from the
formulas of :mod:`bayes_dualeval.model.arena_term`, where the arena likelihood is written
once: decisive pairs with soft targets, both-bad pairs, the ``reward`` likelihood
:math:`z_{iq} \sim \mathcal N(c_q + \gamma p_{iq}, \sigma)` with :math:`c_q` integrated
out, and the level term :math:`\bar z_q \sim \mathcal N(c_s + \gamma (\bar p_q - 1/2), se_q)`.

With several judges or style covariates (:mod:`bayes_dualeval.model.facets`) the pair
logit is the difference of the two cells' scores :math:`s_i - s_j` (``gamma (p - 1/2)`` in
general), pairs are formed within a unit (a prompt as one judge scored it), and the level
term reads each unit's mean score and its judge's severity.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpyro.distributions as dist
from numpyro.distributions import constraints

from bayes_dualeval.model import arena_matrix, arena_term, dif, graders, links
from bayes_dualeval.model.ability_map import ability_at
from bayes_dualeval.model.arena_term import ArenaTerm
from bayes_dualeval.model.config import ModelConfig
from bayes_dualeval.model.facets import Facets, cell_scores
from bayes_dualeval.model.inputs import ModelInputs
from bayes_dualeval.model.subsample import batch


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


def static_distribution(
    theta, a, b, inputs: ModelInputs, c=None, d=None, severity=None, shifts=None
) -> IRTBernoulli:
    """The distribution of every static label, batch shape (S,), weighted by ``static_n``.

    ``severity``: the graders' severities (:mod:`bayes_dualeval.model.graders`), None with
    one grader; ``shifts``: the items' DIF shifts (:mod:`bayes_dualeval.model.dif`), None
    without.
    """
    item = inputs.static_item
    eta = cell_eta(theta, a, b, inputs.static_model, item)
    eta = graders.shift(eta, severity, inputs.static_grader)
    if shifts is not None:
        eta = dif.shift(eta, shifts, item, inputs.model_dif_group[inputs.static_model])
    c, d = (None if x is None else x[item] for x in (c, d))
    return IRTBernoulli(eta, c, d, inputs.static_n)


def static_loglik(theta, a, b, inputs: ModelInputs, c=None, d=None, severity=None, shifts=None):
    """Log likelihood of each static cell's answers, shape (S,); 0 for a padded cell."""
    law = static_distribution(theta, a, b, inputs, c, d, severity, shifts)
    return law.log_prob(inputs.static_y)


def static_matrix_loglik(theta, a, b, inputs: ModelInputs, c=None, d=None, shifts=None):
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
    if shifts is not None:  # DIF: each model's group's shift of each item
        eta = dif.shift(eta, shifts, items[None, :], inputs.model_dif_group[:, None])
    c, d = (None if x is None else x[items] for x in (c, d))
    return n * links.bernoulli_loglik(k / jnp.maximum(n, 1.0), eta, c, d)


def arena_loglik(
    theta, a, b, gamma, sigma, inputs: ModelInputs, config: ModelConfig, level=None,
    facets: Facets | None = None,
):  # fmt: skip
    """Arena log likelihood per item, shape (Q,) (zero for items that are not arena prompts).

    Decisive pairs contribute :func:`~bayes_dualeval.model.arena_term.pair` of their
    logit to their prompt and both-bad pairs ``lambda_bb`` times
    :func:`~bayes_dualeval.model.arena_term.both_bad` of each side; the ``reward``
    likelihood gives each prompt its Gaussian term; ``level`` (``level_c`` from
    :func:`bayes_dualeval.model.priors.level_parameters`) adds each prompt's mean-reward
    term. ``lambda_arena`` is not applied. ``facets``
    (:class:`~bayes_dualeval.model.facets.Facets`) where the arena has them: the scores
    are then the facets'.
    """
    term = ArenaTerm.from_config(config)
    if term.kind == "bt":
        x = theta[inputs.pair_i] - theta[inputs.pair_j]
        return _pairs_per_item(x, inputs)
    eta = cell_eta(theta, a, b, inputs.arena_model, inputs.arena_item)
    p = links.probability(eta)
    scores = term.score(p, gamma) if facets is None else cell_scores(p, facets, inputs)
    if term.kind == "reward":
        ll = reward_per_item(p, gamma, sigma, inputs)
    else:
        x = scores[inputs.pair_i] - scores[inputs.pair_j]
        bb = arena_term.both_bad(eta, inputs.bb_count)
        ll = _pairs_per_item(x, inputs) + term.both_bad_weight * jax.ops.segment_sum(
            bb, inputs.arena_item, num_segments=inputs.n_items
        )
    if level is not None:
        ll = ll + level_per_item(scores, level, inputs, facets, _level_sigma(term, sigma))
    return ll


def _level_sigma(term: ArenaTerm, sigma):
    """The rewards' noise the level term's standard error reads: the reward likelihood's."""
    return sigma if term.kind == "reward" else None


def arena_total(
    theta, a, b, gamma, sigma, inputs: ModelInputs, config: ModelConfig, level,
    facets: Facets | None = None,
):  # fmt: skip
    """The arena term summed, as the joint model adds it (weights and powers applied).

    Equal to ``lambda_arena * arena_loglik(...).sum()`` (with the both-bad part weighted by
    ``lambda_bb`` instead), computed more cheaply: the soft-target part of each pair that
    is linear in the cells' scores (:func:`~bayes_dualeval.model.arena_term.pair_linear`)
    collapses to one dot product with ``inputs.pair_linear`` (see
    :mod:`bayes_dualeval.model.inputs`).
    """
    term = ArenaTerm.from_config(config)
    if term.kind == "bt":
        return term.weight * _pair_total(theta, inputs)
    if inputs.arena_matrix is not None:
        if facets is not None:
            raise ValueError("the arena matrix does not carry the facets' scores: use the lists")
        return _arena_matrix_total(theta, a, b, gamma, inputs, term, level)
    eta = cell_eta(theta, a, b, inputs.arena_model, inputs.arena_item)
    p = links.probability(eta)
    scores = term.score(p, gamma) if facets is None else cell_scores(p, facets, inputs)
    ll_bb = 0.0
    if term.kind == "reward":
        ll = jnp.sum(reward_per_item(p, gamma, sigma, inputs))
    else:
        ll = _pair_total(scores, inputs)
        ll_bb = jnp.sum(arena_term.both_bad(eta, inputs.bb_count))
    if level is not None:
        ll = ll + jnp.sum(level_per_item(scores, level, inputs, facets, _level_sigma(term, sigma)))
    return term.weight * ll + term.both_bad_weight * ll_bb


def _arena_matrix_total(theta, a, b, gamma, inputs: ModelInputs, term: ArenaTerm, level):
    """:func:`arena_total` of a pairs likelihood, read from ``inputs.arena_matrix``."""
    matrix = inputs.arena_matrix
    eta = arena_matrix.prompt_eta(theta, a, b, matrix, inputs.n_models)
    p = links.probability(eta)
    ll = arena_matrix.pair_total(term.score(p, gamma), matrix)
    if level is not None:
        pbar = arena_matrix.per_item(p, matrix, inputs.n_items)
        mean = term.score(pbar / jnp.maximum(inputs.prompt_n, 1.0), gamma)
        ll = ll + jnp.sum(level_at_mean(mean, level, inputs))
    both_bad = arena_matrix.both_bad_total(eta, matrix)
    return term.weight * ll + term.both_bad_weight * both_bad


def _pair_total(scores, inputs: ModelInputs):
    """Every decisive pair's :func:`~bayes_dualeval.model.arena_term.pair`, summed.

    The nonlinear parts pair by pair, over a random batch of pairs weighted up to the
    whole when ``inputs.pair_batch`` is set
    (:func:`~bayes_dualeval.model.subsample.batch`; minibatch SVI); the linear parts as
    one dot product of the cells' summed coefficients (``inputs.pair_linear``) with their
    scores.
    """
    rows, weight = batch(inputs.pair_i.shape[0], inputs.pair_batch)
    i, j, w = inputs.pair_i, inputs.pair_j, inputs.pair_w
    if rows is not None:
        i, j, w = i[rows], j[rows], w[rows]
    nonlinear = jnp.sum(arena_term.pair_nonlinear(scores[i] - scores[j], w))
    return weight * nonlinear - jnp.dot(inputs.pair_linear, scores)


def _pairs_per_item(x, inputs: ModelInputs):
    terms = arena_term.pair(x, inputs.pair_t, inputs.pair_w)
    return jax.ops.segment_sum(terms, inputs.pair_item, num_segments=inputs.n_items)


def reward_per_item(p, gamma, sigma, inputs: ModelInputs):
    """Gaussian log likelihood of each prompt's rewards, prompt offset integrated out.

    :func:`~bayes_dualeval.model.arena_term.gaussian` of each reward's residual from
    :func:`~bayes_dualeval.model.arena_term.reward_mean` (the prompt's own mean reward in
    place of its offset), plus :func:`~bayes_dualeval.model.arena_term.integrated_offset`.
    """
    n = jnp.maximum(inputs.prompt_n, 1.0)
    item = inputs.arena_item
    zbar = jax.ops.segment_sum(inputs.arena_z, item, inputs.n_items) / n
    pbar = jax.ops.segment_sum(p, item, inputs.n_items) / n
    resid = inputs.arena_z - arena_term.reward_mean(p, pbar[item], gamma, zbar[item])
    ll = jax.ops.segment_sum(arena_term.gaussian(resid, sigma), item, inputs.n_items)
    ll = ll + arena_term.integrated_offset(n, sigma)
    return jnp.where(inputs.prompt_n > 0, ll, 0.0)


def level_per_item(scores, level_c, inputs: ModelInputs, facets=None, sigma=None):
    """Log density of each prompt's mean reward, shape (Q,) (zero for non-arena items).

    Per unit (a prompt as one judge scored it; :attr:`ModelInputs.unit_n`), summed over
    a prompt's judges: :func:`~bayes_dualeval.model.arena_term.level` of the mean of the
    unit's cells' ``scores`` (``gamma (pbar - 1/2)`` without facets), read through the facets'
    :meth:`~bayes_dualeval.model.facets.Facets.level_mean` where the arena has them (its
    judge's severity).

    ``zbar_q ~ Normal(c_s + gamma (pbar_q - 1/2), se_q)``: ``pbar_q`` is the mean success
    probability of the models that answered prompt ``q``, and ``se_q`` the standard error
    of a mean of ``n_q`` rewards. Under the pairs the within-prompt noise is estimated from
    the data (:func:`bayes_dualeval.model.pilot.prompt_level`) and fixed; under the reward
    likelihood (``sigma`` given) it is the model's own ``sigma``
    (:func:`~bayes_dualeval.model.arena_term.mean_se`), so the rewards and their level are
    one Gaussian density around ``c_s`` (a generative model). No spread of per-prompt
    leniency beyond that is learned: every prompt has its own ``b_q`` that could absorb its
    mean exactly, so such a spread is not identified (it trades off against the spread of
    the difficulties, and sampling it makes a funnel). Rewards whose leniency varies by
    prompt call for ``arena_level = "none"``.
    """
    units = inputs.unit_n.shape[0]
    mean = jax.ops.segment_sum(scores, inputs.arena_unit, units) / jnp.maximum(inputs.unit_n, 1.0)
    if facets is not None:
        mean = facets.level_mean(mean, jnp.arange(units) // inputs.n_items)
    return _per_item(level_at_mean(mean, level_c, inputs, sigma), inputs)


def level_at_mean(mean_score, level_c, inputs: ModelInputs, sigma=None):
    """The level term per unit from its cells' mean score, shape (U,).

    With one judge the units are the items. ``sigma``: the reward likelihood's noise, whose
    :func:`~bayes_dualeval.model.arena_term.mean_se` is the standard error (the data's
    plug-in ``inputs.prompt_se`` without it).
    """
    shift = level_c[inputs.level_group]
    se = inputs.prompt_se if sigma is None else arena_term.mean_se(inputs.unit_n, sigma)
    ll = arena_term.level(inputs.prompt_zbar, shift, mean_score, se)
    return jnp.where(inputs.unit_n > 0, ll, 0.0)


def _per_item(values, inputs: ModelInputs):
    """Values per unit (U,) summed over each prompt's judges, shape (Q,)."""
    if inputs.n_judges == 1:
        return values
    return values.reshape(inputs.n_judges, inputs.n_items).sum(axis=0)
