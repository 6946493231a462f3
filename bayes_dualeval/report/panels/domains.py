"""Panels of abilities per item domain: the heat map, per-domain Wright maps, specialists."""

from __future__ import annotations

import pandas as pd

from bayes_dualeval.core.fields import setting
from bayes_dualeval.report import plots
from bayes_dualeval.report.context import ReportContext
from bayes_dualeval.report.markup import Markup, num

#: Rows of the specialists table (the largest credible deviations).
MAX_SPECIALISTS = 30
SINGLE = (
    "Skipped: this run fits one ability per model (fit with "
    f"{setting('abilities', 'domain')} for an ability per item domain)."
)

DIMENSIONS = (
    "Skipped: this run fits {dims} ability dimensions per model, not an ability per item "
    "domain (see Ability dimensions)."
)


def abilities_by_domain(doc: Markup, ctx: ReportContext) -> None:
    """Heat map of abilities per domain, the per-domain Wright maps and the specialists."""
    by_domain = ctx.result.tables.get("leaderboard_by_domain")
    if by_domain is None:
        dims = ctx.result.config.dims
        doc.note(SINGLE if dims == 1 else DIMENSIONS.format(dims=dims))
        return
    ci = None if ctx.point else ctx.ci
    doc.para(
        "Each model has an overall ability \u03b8 and, in each item domain, an ability "
        "\u03b8 + \u03b4 whose deviation \u03b4 is shrunk towards zero by a spread learned "
        "per domain: a domain with few items borrows from the overall ability. Domain "
        "abilities are centred like the overall ones; leaderboard_by_domain.csv has every "
        "number, domain_deviations.csv every deviation."
    )
    doc.figure(
        "domain_heatmap",
        plots.domain_heatmap(ctx.board, by_domain, ci=ci),
        "Ability of each model (rows, in overall order) in each domain (columns; the first "
        "is the overall ability): colour and number are the posterior mean, #k the rank in "
        "that domain.",
    )
    items = ctx.items[ctx.items["identified"]] if "identified" in ctx.items else ctx.items
    doc.figure(
        "domain_wright",
        plots.domain_wright(by_domain, items, ci=ci),
        "Per-domain Wright maps: each domain's model abilities (top) over the difficulties "
        "of its items (below, static questions and arena prompts stacked), on one axis.",
    )
    _specialists(doc, ctx)


def _specialists(doc: Markup, ctx: ReportContext) -> None:
    """Models whose ability in a domain differs credibly from their overall ability."""
    table = ctx.result.tables["domain_deviations"]
    if ctx.point:
        doc.note("A point estimate has no intervals: no deviation can be called credible.")
        return
    credible = table[table["specialist"] != ""].head(MAX_SPECIALISTS)
    pct = f"{ctx.ci:.0%}"
    if credible.empty:
        doc.para(
            f"Specialists: no model's ability in any domain differs from its overall ability "
            f"at {pct} (every deviation's interval contains zero)."
        )
        return
    doc.para(
        f"Specialists: models whose ability in a domain differs from their overall ability "
        f"(the {pct} interval of the deviation excludes zero), largest first."
    )
    frame = pd.DataFrame(
        {
            "model": credible["model"],
            "domain": credible["domain"],
            "stronger or weaker": credible["specialist"],
            "deviation \u03b4": [num(x) for x in credible["deviation_mean"]],
            f"{pct} interval": [
                f"[{num(lo)}, {num(hi)}]"
                for lo, hi in zip(credible["deviation_lo"], credible["deviation_hi"], strict=True)
            ],
            "P(\u03b4 > 0)": [num(x) for x in credible["p_above"]],
        }
    )
    doc.table(frame, text=("domain", "stronger or weaker"), names=("model",))
