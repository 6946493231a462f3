"""Every parameter site of the model, declared once: its name, dimensions and role.

The joint model (:mod:`~bayes_dualeval.model.joint`) samples these sites; the rest of the
package reads what it needs of them from here rather than keeping lists of its own:

* the posterior's dimension names (:data:`SITE_DIMS`, read by
  :mod:`bayes_dualeval.posterior.idata`);
* the sites the likelihood reads (:data:`LIKELIHOOD_SITES`: the pointwise log likelihood
  of :mod:`bayes_dualeval.posterior.loglik` keeps only these of each draw);
* the sites the arena term reads beyond the items' parameters (:data:`ARENA_SITES`:
  MAP's item likelihood, :mod:`bayes_dualeval.inference.item_integral`, passes them on);
* the sites the static labels read beyond the items' parameters (:data:`STATIC_SITES`:
  the graders' severities, :mod:`bayes_dualeval.model.graders`, and the items' DIF
  shifts, :mod:`bayes_dualeval.model.dif`);
* the facets' values (:data:`FACET_VALUES`, :mod:`bayes_dualeval.model.facets`).

A site the model samples and this table lacks is an error where the posterior is built
(:func:`dims_of`), and ``tests/test_parameters.py`` traces the model under every kind of
specification to show the table complete. What the model reads of its *data* is declared
on the fields of :class:`~bayes_dualeval.model.inputs.ModelInputs` in the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

#: What a site is: an ability, an item parameter, a hyperparameter of either, a parameter
#: of the arena term, a facet of the arena (judges, family biases, style), a parameter of
#: the static labels beyond the items' (the graders' severities, DIF), or a raw coordinate
#: that a deterministic site transforms.
ROLES = ("ability", "item", "hyper", "arena", "facet", "static", "raw")


@dataclass(frozen=True)
class Parameter:
    """One site of the model.

    Attributes
    ----------
    name : str
    dims : tuple of str
        Its dimensions after (chain, draw) in the posterior; ``item`` for every item,
        ``static_item`` for the items with static labels only.
    role : str
        One of :data:`ROLES`.
    read : bool
        Whether the likelihood reads it (directly, not through another site).
    """

    name: str
    dims: tuple[str, ...]
    role: str
    read: bool = False


def _p(name, dims=(), role="hyper", read=False) -> Parameter:
    return Parameter(name, tuple(dims), role, read)


_ABILITY_AND_ITEM_SITES = (
    # abilities
    _p("theta_mean", (), "hyper"),
    _p("theta_contrast", ("contrast",), "raw"),
    _p("theta", ("model",), "ability", read=True),
    _p("theta_centred", ("model",), "ability"),
    _p("theta_domain", ("model", "domain"), "ability", read=True),
    _p("delta_raw", ("contrast", "domain"), "raw"),
    _p("tau_domain", ("domain",), "hyper"),
    _p("theta_dims", ("model", "dimension"), "ability", read=True),
    _p("loading", ("item", "dimension"), "item", read=True),
    _p("loading_raw", ("item", "loading_contrast"), "raw"),
    _p("mu_loading", ("loading_group", "loading_contrast"), "hyper"),
    _p("sigma_loading", (), "hyper"),
    # items
    _p("b", ("item",), "item", read=True),
    _p("a", ("item",), "item", read=True),
    _p("c", ("item",), "item", read=True),
    _p("d", ("item",), "item", read=True),
    _p("b_raw", ("item",), "raw"),
    _p("b_rel", ("item",), "raw"),
    _p("log_a_raw", ("item",), "raw"),
    _p("log_a", ("item",), "raw"),
    _p("c_raw", ("static_item",), "raw"),
    _p("d_raw", ("static_item",), "raw"),
    _p("c_static", ("static_item",), "raw"),
    _p("d_static", ("static_item",), "raw"),
    _p("mu_b_raw", ("group",), "raw"),
    _p("mu_b", ("group",), "hyper"),
    _p("sigma_b", ("group",), "hyper"),
    _p("mu_log_a", ("group",), "hyper"),
    _p("sigma_log_a", ("group",), "hyper"),
    _p("mu_c", ("group",), "hyper"),
    _p("mu_d", ("group",), "hyper"),
    _p("beta_b", ("feature",), "hyper"),
    _p("beta_b_raw", ("feature",), "raw"),
    _p("tau_beta_b", (), "hyper"),
    _p("beta_log_a", ("feature",), "hyper"),
    _p("beta_log_a_raw", ("feature",), "raw"),
    _p("tau_beta_log_a", (), "hyper"),
    # the arena term
    _p("gamma", (), "arena", read=True),
    _p("sigma", (), "arena", read=True),
    _p("level_u", ("arena_source",), "raw"),
    _p("level_c", ("arena_source",), "arena", read=True),
    # the graders of static labels (bayes_dualeval.model.graders)
    _p("grader_severity_raw", ("grader_contrast",), "raw"),
    _p("grader_severity", ("grader",), "static", read=True),
    # differential item functioning across groups of models (bayes_dualeval.model.dif)
    _p("dif_tau", (), "hyper"),
    _p("dif_slab", (), "hyper"),
    _p("dif_lambda", ("static_item", "dif_contrast"), "hyper"),
    _p("dif_z", ("static_item", "dif_contrast"), "raw"),
    _p("dif_shift", ("item", "dif_group"), "static", read=True),
)
#: The arena's facets, in the order the model samples them.
_FACET_SITES = (
    _p("gamma_judge_raw", ("judge_contrast",), "raw"),
    _p("gamma_judge", ("judge",), "facet", read=True),
    _p("severity_raw", ("judge_contrast",), "raw"),
    _p("severity", ("judge",), "facet", read=True),
    _p("level_slope", ("judge",), "raw"),
    _p("level_scale", ("judge",), "facet", read=True),
    _p("bias_raw", ("judge_contrast", "family_contrast"), "raw"),
    _p("judge_bias", ("judge", "family"), "facet", read=True),
    _p("style_coef", ("covariate", "judge"), "facet", read=True),
)
#: Every site, grouped by what it belongs to.
PARAMETERS = _ABILITY_AND_ITEM_SITES + _FACET_SITES
BY_NAME = {p.name: p for p in PARAMETERS}

#: Site name -> dimension names after (chain, draw).
SITE_DIMS = {p.name: p.dims for p in PARAMETERS}
#: The sites the likelihood reads.
LIKELIHOOD_SITES = tuple(p.name for p in PARAMETERS if p.read)
#: The sites the arena term reads beyond the items' parameters and the abilities.
ARENA_SITES = tuple(p.name for p in PARAMETERS if p.read and p.role in ("arena", "facet"))
#: The sites the static labels read beyond the items' parameters and the abilities.
STATIC_SITES = tuple(p.name for p in PARAMETERS if p.read and p.role == "static")
#: The facet values the likelihood reads.
FACET_VALUES = tuple(p.name for p in PARAMETERS if p.read and p.role == "facet")
#: Every facet site, raw coordinates and scales included.
FACET_SITES = tuple(p.name for p in _FACET_SITES)


def dims_of(name: str) -> tuple[str, ...]:
    """The dimensions of site ``name`` after (chain, draw).

    Raises
    ------
    KeyError
        When the site is not declared here: a new site needs its line in
        :data:`PARAMETERS`.
    """
    try:
        return BY_NAME[name].dims
    except KeyError:
        raise KeyError(
            f"site {name!r} is not declared in bayes_dualeval.model.parameters.PARAMETERS"
        ) from None
