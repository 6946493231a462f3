"""Panel of ability dimensions: loadings by domain and the models' two-dimensional map."""

from __future__ import annotations

import json

from bayes_dualeval.core.fields import setting
from bayes_dualeval.posterior.dimension_tables import (
    dimension_labels,
    loading_by_domain,
    support_warning,
)
from bayes_dualeval.posterior.idata import DIMENSIONS_ATTR
from bayes_dualeval.report import plots
from bayes_dualeval.report.context import ReportContext
from bayes_dualeval.report.markup import Markup

ONE = (
    f"Skipped: this run fits one ability dimension (fit with {setting('dims', 2)} or more "
    "for abilities in several dimensions and each item's loadings on them)."
)


def ability_dimensions(doc: Markup, ctx: ReportContext) -> None:
    """The loading-by-domain heat map, the two-dimensional map and how labels were aligned."""
    abilities = ctx.result.tables.get("abilities")
    if abilities is None:
        doc.note(ONE)
        return
    idata = ctx.result.idata
    labels = dimension_labels(idata)
    k = abilities["dimension"].nunique()
    doc.para(
        f"Each model has {k} abilities and each item a discrimination vector a_q w_q, its "
        "size a_q split over the dimensions by its loadings w_q (non-negative, summing to "
        "one): the item sees \u03b8_i \u00b7 w_q. The leaderboard ranks by the ability on "
        "the average fitted item. Dimensions are numbered by their mean loading, largest "
        "first, and named after the domain that loads on them most (a description: the "
        "model does not use domains). abilities.csv and loadings.csv have every number."
    )
    support = ctx.diagnostics.get("dimensions")
    if support:
        shares = ", ".join(
            f"{m:.0%} [{lo:.0%}, {hi:.0%}]"
            for m, lo, hi in zip(
                support["share_mean"], support["share_lo"], support["share_hi"], strict=True
            )
        )
        doc.para(
            f"Support: the models x items matrix of predictors a_q \u03b8_i \u00b7 w_q varies "
            f"along {k} independent directions, with shares {shares} of its variation "
            "(posterior mean and 90% interval): a dimension the data need carries a clear "
            "share."
        )
        unsupported = support_warning(support)
        if unsupported:
            doc.banner("warn", "Dimensions the data do not support", [unsupported + "."])
    alignment = idata.posterior.attrs.get(DIMENSIONS_ATTR)
    if alignment:
        info = json.loads(alignment)
        doc.para(
            "The dimensions' labels are exchangeable, so chains can number them differently: "
            f"{info['chains_relabelled']} chain(s) were relabelled to match the first (whole "
            "chains, values unchanged) before any summary or convergence check."
        )
    doc.figure(
        "loading_heatmap",
        plots.loading_heatmap(loading_by_domain(idata), labels),
        "Mean posterior loading of each domain's items on each dimension: a domain whose "
        "row is concentrated on one dimension needs mostly that ability.",
    )
    doc.figure(
        "ability_map",
        plots.ability_map(abilities, labels, ci=None if ctx.point else ctx.ci),
        "Each model's abilities on the first two dimensions (centred). Models off the "
        "diagonal are stronger on one dimension than the other.",
    )
