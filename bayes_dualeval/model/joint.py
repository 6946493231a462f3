r"""The joint Bayesian DualEval model, as one plain NumPyro function.

Static labels follow an IRT model (2PL by default; :mod:`bayes_dualeval.model.links`),

.. math:: y_{iq} \sim \mathrm{Bernoulli}(p_{iq}),\quad p_{iq} = \sigma(a_q(\theta_i - b_q)).

Arena prompts enter through distilled soft targets on decisive pairs, or the rewards
themselves (:mod:`bayes_dualeval.model.likelihood`); ``bt`` is DualEval's Bradley-Terry
baseline, :math:`P(i \succ j) = \sigma(\theta_i - \theta_j)` on the soft targets. Priors are
in :mod:`bayes_dualeval.model.priors`.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist

from bayes_dualeval.model import anchoring, links
from bayes_dualeval.model.ability_priors import (
    abilities,
    dimension_abilities,
    domain_abilities,
)
from bayes_dualeval.model.config import ModelConfig
from bayes_dualeval.model.dif import dif_parameters
from bayes_dualeval.model.facets import facet_parameters
from bayes_dualeval.model.graders import grader_parameters
from bayes_dualeval.model.inputs import ModelInputs
from bayes_dualeval.model.likelihood import (
    arena_loglik,
    arena_total,
    static_distribution,
    static_loglik,
    static_matrix_loglik,
)
from bayes_dualeval.model.priors import (
    asymptotes,
    item_parameters,
    level_parameters,
    uses_level,
)
from bayes_dualeval.model.spec import DualEvalModel
from bayes_dualeval.model.subsample import batch

__all__ = ["arena_loglik", "dualeval_model", "global_sites", "static_loglik", "uses_level"]

MAX_DENSE_MODELS = 100


def dualeval_model(inputs: ModelInputs, config: ModelConfig):
    """Joint Bayesian DualEval model (all modes and links).

    Parameters
    ----------
    inputs : ModelInputs
        Precomputed arrays from :func:`bayes_dualeval.model.inputs.build_inputs`.
    config : ModelConfig
        Mode, IRT link, priors and likelihood weights.

    Notes
    -----
    Sites: ``theta`` (plate ``model``, from ``theta_mean`` and ``theta_contrast``);
    with domain abilities ``theta_domain`` (model x domain, from ``tau_domain`` and
    ``delta_raw``), which the items of each domain read instead; with ``dims > 1``
    ``theta_dims`` (model x dimension, from ``theta_mean`` and ``theta_contrast``) and the
    items' ``loading`` (item x dimension), ``theta`` then the ability on the average item;
    ``a``, ``b`` (plate ``item``, deterministic, with raw sites ``b_raw``, ``log_a_raw``
    under the hierarchical prior); ``c``, ``d`` (3PL/4PL, from ``c_raw``, ``d_raw`` on
    plate ``static_item`` and levels ``mu_c``, ``mu_d``); group-level ``mu_b``,
    ``sigma_b``, ``mu_log_a``, ``sigma_log_a`` (plate ``group``); ``gamma``, ``level_c``
    (plate ``arena_source``) and, for the reward likelihood, ``sigma``; with anchored
    prompts ``level_c`` and ``mu_b`` are deterministic, from ``level_u`` and ``mu_b_raw``
    (:data:`bayes_dualeval.model.anchoring.LEVEL_SITES`); with several
    judges or style covariates the facets' sites
    (:data:`bayes_dualeval.model.facets.SITES`). Static labels are
    the observed site ``static_y`` (plate ``static_cell``, scaled by ``lambda_static``);
    the arena term is the factor ``arena``. With ``inputs.static_counts`` set (NUTS's
    layout where most of the models x items matrix is observed,
    :mod:`bayes_dualeval.inference.layout`) the static labels enter as the factor
    ``static`` instead, the same density; with ``inputs.arena_matrix`` set (NUTS's layout
    where the decisive pairs are dense, :mod:`bayes_dualeval.model.arena_matrix`) the
    factor ``arena`` reads it, the same density too. With ``inputs.static_batch`` or
    ``inputs.pair_batch`` set (minibatch SVI) and a random seed, the static cells and the
    arena's decisive pairs are random batches weighted up to the whole
    (:mod:`bayes_dualeval.model.subsample`); ``static_cell`` then has the batch's size.
    """
    # the ability each item sees: theta, or a map of abilities per domain or dimension
    if config.dims > 1:
        theta, theta_mean, spread, ability = dimension_abilities(inputs, config)
    else:
        theta, theta_mean, spread = abilities(inputs, config)
        ability = domain_abilities(inputs, config, theta)
    a = b = gamma = sigma = level = facets = None
    term = DualEvalModel(config).arena
    if term.has_items:
        anchor = None
        if inputs.has_arena:
            # before the items: anchored arena difficulties are drawn around their level
            gamma = numpyro.sample("gamma", dist.LogNormal(config.gamma_loc, config.gamma_scale))
            level = level_parameters(inputs, config, gamma)
            # judges, their family biases and style (several judges, or style covariates)
            facets = facet_parameters(inputs, gamma, severity=level is not None)
            if level is not None:
                anchor = (ability, gamma, level, facets)
        a, b = item_parameters(inputs, config, theta_mean, spread, anchor=anchor)
        c, d = asymptotes(inputs, config)
        severity = grader_parameters(inputs) if inputs.has_static else None
        shifts = dif_parameters(inputs) if inputs.has_static else None
        if inputs.has_static and inputs.static_counts is not None:
            # the same density from the models x items matrix (NUTS, most cells observed)
            ll = jnp.sum(static_matrix_loglik(ability, a, b, inputs, c, d, shifts))
            numpyro.factor("static", config.lambda_static * ll)
        elif inputs.has_static:
            # minibatch SVI reads a random batch of cells, weighted up to the whole
            rows, weight = batch(inputs.static_y.shape[0], inputs.static_batch)
            cells = inputs.static_cells(rows)
            with (
                numpyro.handlers.scale(scale=config.lambda_static * weight),
                numpyro.plate("static_cell", cells.static_y.shape[0]),
            ):
                numpyro.sample(
                    "static_y",
                    static_distribution(ability, a, b, cells, c, d, severity, shifts),
                    obs=cells.static_y,
                )
        if not inputs.has_arena:
            return
        if term.kind == "reward":
            sigma = numpyro.sample("sigma", dist.HalfNormal(config.sigma_scale))
    numpyro.factor(
        "arena", arena_total(ability, a, b, gamma, sigma, inputs, config, level, facets)
    )


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
    if config.abilities == "domain":
        # the spreads only: with the deviations in the dense block as well (33 coordinates
        # on the bundled example) 300 warm-up iterations estimated it too poorly to mix
        # (bulk ESS 11 of 1,200 draws), while on the diagonal they mix as the items do
        names.append("tau_domain")
    term = DualEvalModel(config).arena
    located = anchoring.level_sites(inputs)  # mu_b and level_c, or their anchored units
    if term.has_items:
        if config.item_prior == "hierarchical":
            names += [located["mu_b"], "sigma_b"]
            link = links.get(config.irt)
            if link.slope:
                names += ["mu_log_a", "sigma_log_a"]
            if inputs.n_static_items:
                names += ["mu_c"] * link.floor + ["mu_d"] * link.ceiling
            names += _feature_sites(inputs, link.slope)
        if inputs.has_arena:
            names.append("gamma")
            if term.kind == "reward":
                names.append("sigma")
            if uses_level(inputs, config):
                names.append(located["level_c"])
                if inputs.n_judges > 1:
                    # the judges' severities and level slopes (with the discriminations
                    # too: 62 leapfrog steps per draw against 31 on the judge study's
                    # arena-heavy style design)
                    names += ["severity_raw", "level_slope"]
    return tuple(names)


def _feature_sites(inputs: ModelInputs, slope: bool) -> list[str]:
    """The item-feature sites of the dense block: the scales of the coefficients.

    Not the coefficients themselves: on a simulation with 13 components (64 columns) they
    mixed far worse in the dense block (ESS 126 of 4,000 draws, R-hat 1.02, 175 s) than on
    the diagonal (ESS 662, 70 s), being nearly independent given the scales.
    """
    if inputs.item_features.shape[1] == 0:
        return []
    return ["tau_beta_b"] + ["tau_beta_log_a"] * slope
