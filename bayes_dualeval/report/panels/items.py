"""Panels of the items: Wright map, item curves, difficulty and discrimination."""

from __future__ import annotations

import numpy as np

from bayes_dualeval.posterior.summaries import interval
from bayes_dualeval.report import plots
from bayes_dualeval.report.context import ReportContext
from bayes_dualeval.report.markup import Markup

#: Draws used for the bands of the item curves (thinned evenly beyond this).
MAX_DRAWS = 1000
#: The item response function of each link, as the curves' axis label.
RESPONSE = {
    "1pl": "P(success) = \u03c3(\u03b8 \u2212 b)",
    "2pl": "P(success) = \u03c3(a(\u03b8 \u2212 b))",
    "3pl": "P(success) = c + (1 \u2212 c) \u03c3(a(\u03b8 \u2212 b))",
    "4pl": "P(success) = c + (d \u2212 c) \u03c3(a(\u03b8 \u2212 b))",
}
NO_ITEMS = "Skipped: the Bradley-Terry mode (bt) has no item parameters."


def wright(doc: Markup, ctx: ReportContext) -> None:
    """Wright map: abilities and item difficulties on one axis."""
    if not ctx.has_items:
        doc.note(NO_ITEMS)
        return
    models = ctx.board[["model", "theta_mean", "theta_lo", "theta_hi"]]
    items = ctx.items
    left_out = ""
    if not items["identified"].all():
        n_out = int((~items["identified"]).sum())
        items = items[items["identified"]]
        left_out = (
            f" {n_out} arena prompts are left out: this specification has no arena level "
            "term, so their difficulties are not identified (items.csv marks them)."
        )
    if items.empty:
        doc.note("Skipped: no item has an identified difficulty." + left_out)
        return
    fig = plots.wright_map(models, items, ci=None if ctx.point else ctx.ci)
    doc.figure(
        "wright_map",
        fig,
        "Model abilities (top) and the distribution of item difficulties b per item group "
        "(below) on the same centred latent scale. A model at \u03b8 = b succeeds on that "
        "item with probability 0.5; the shaded band spans the models' abilities. Items far "
        "outside the band are too easy or too hard to separate these models." + left_out,
    )


def _spread(order: np.ndarray, b: np.ndarray, n: int = 4, gap: float = 0.35) -> list:
    """The first ``n`` items of ``order`` whose difficulties differ by ``gap`` or more.

    Near-identical items (often weakly identified prompts) would draw one curve on top of
    another; skipping them shows different parts of the scale instead.
    """
    chosen: list = []
    for k in order:
        if all(abs(b[k] - b[c]) >= gap for c in chosen):
            chosen.append(k)
            if len(chosen) == n:
                break
    return chosen


def curves(doc: Markup, ctx: ReportContext) -> None:
    """Item characteristic curves of the most and least discriminating items."""
    if not ctx.has_items:
        doc.note(NO_ITEMS)
        return
    if not ctx.has_a:
        doc.note(
            "Skipped: a Rasch (1pl) fit gives every item the same discrimination a = 1, so "
            "all curves have one shape and differ only in location (see the Wright map)."
        )
        return
    items = ctx.items
    order = np.argsort(-items["a_mean"].to_numpy(), kind="stable")
    b = items["b_mean"].to_numpy(float)
    theta = ctx.board["theta_mean"].to_numpy(float)
    grid = np.linspace(np.nanmin(theta) - 2.5, np.nanmax(theta) + 2.5, 121)
    draws = ctx.thin(MAX_DRAWS)
    shown = [s for s in ("a", "b", "c", "d") if s in ctx.model.item_sites]
    panels = {}
    for title, chosen in (
        ("Most discriminating items", _spread(order, b)),
        ("Least discriminating items", _spread(order[::-1], b)),
    ):
        panels[title] = []
        for k in chosen:
            row = items.iloc[k]
            p = ctx.success_curve(k, grid, draws)
            lo, hi = interval(p, ctx.ci)
            values = ", ".join(f"{s}={row[f'{s}_mean']:.2f}" for s in shown)
            panels[title].append(
                {
                    "label": f"{plots.short(row['item'], 36)} ({row['kind']}; {values})",
                    "mean": p.mean(axis=0),
                    "lo": None if ctx.point else lo,
                    "hi": None if ctx.point else hi,
                }
            )
    doc.figure(
        "icc",
        plots.item_curves(
            grid,
            panels,
            abilities=theta,
            ci=None if ctx.point else ctx.ci,
            ylabel=RESPONSE[ctx.model.link.name],
        ),
        "Probability of success against ability for the items with the largest and smallest "
        "posterior mean discrimination a (items with nearly the same difficulty as one "
        "already shown are skipped). Steep curves separate models near their difficulty b; "
        "flat curves carry little information about anyone.",
    )


def difficulty_discrimination(doc: Markup, ctx: ReportContext) -> None:
    """Scatter of difficulty against discrimination, then the flagged items."""
    if not ctx.has_items:
        doc.note(NO_ITEMS)
        return
    if not ctx.has_a:
        doc.note("Skipped: a Rasch (1pl) fit has no discrimination parameters.")
    else:
        doc.figure(
            "difficulty_discrimination",
            plots.difficulty_discrimination(ctx.items),
            "Posterior mean difficulty b against discrimination a of every item, one "
            "panel per item group. The dotted line is a = 1. Useful items have a well above "
            "zero and b within the models' range.",
        )
    doc.para("The items that items.csv flags are listed in the next section, Flagged items.")
