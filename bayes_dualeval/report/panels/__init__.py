"""The report's panels and their order: the registry :data:`PANELS`.

A panel is a function ``draw(doc, ctx)`` that writes one section's body into a
:class:`~bayes_dualeval.report.markup.Markup` from a
:class:`~bayes_dualeval.report.context.ReportContext`; the report builder writes the
section heading, calls it, and puts a note in its place if it fails. To add a panel: write
its function in the module of its subject (or a new module here) and add one
:class:`Panel` line to :data:`PANELS`, naming every figure it may draw.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bayes_dualeval.report.panels import (
    audits,
    checks,
    diagnostics,
    dif,
    dimensions,
    domains,
    flagged,
    items,
    judges,
    rankings,
    run,
)
from bayes_dualeval.report.panels.header import header


@dataclass(frozen=True)
class Panel:
    """One section of the report.

    Attributes
    ----------
    anchor : str
        The section's HTML id (``report.html#anchor``).
    title : str
        Its heading.
    draw : callable
        ``draw(doc, ctx)`` writes the section's body.
    figures : tuple of str
        Names of the figures it may draw (``figures/<name>.png``).
    """

    anchor: str
    title: str
    draw: Callable
    figures: tuple[str, ...] = ()


PANELS = (
    Panel("leaderboard", "Leaderboard", rankings.leaderboard),
    Panel("abilities", "Abilities", rankings.abilities, ("forest",)),
    Panel("model_fit", "Model fit", audits.model_fit),
    Panel("ranks", "Rank probabilities", rankings.rank_probabilities, ("rank_heatmap",)),
    Panel("domains", "Abilities by domain", domains.abilities_by_domain,
          ("domain_heatmap", "domain_wright")),
    Panel("dimensions", "Ability dimensions", dimensions.ability_dimensions,
          ("loading_heatmap", "ability_map")),
    Panel("judges", "Judges and style", judges.judges),
    Panel("wright", "Wright map", items.wright, ("wright_map",)),
    Panel("icc", "Item characteristic curves", items.curves, ("icc",)),
    Panel("items", "Difficulty and discrimination", items.difficulty_discrimination,
          ("difficulty_discrimination",)),
    Panel("flagged", "Flagged items", flagged.flagged, ("flagged_items",)),
    Panel("benchmarks", "Benchmarks: information and saturation", audits.benchmarks,
          ("test_information",)),
    Panel("item_fit", "Item fit", audits.item_fit, ("item_fit",)),
    Panel("dependence", "Local dependence", audits.dependence),
    Panel("dif", "Differential item functioning", dif.dif, ("dif_shifts",)),
    Panel("ppc", "Posterior predictive checks", checks.predictive,
          ("ppc_models", "ppc_items", "calibration")),
    Panel("anomalies", "Anomalies", checks.anomalies),
    Panel("contamination", "Model x benchmark audit", checks.contamination),
    Panel("diagnostics", "Diagnostics", diagnostics.diagnostics,
          ("rhat_ess", "rank_plots", "loss_trace")),
    Panel("run", "Run details", run.run_details),
)  # fmt: skip
#: Section anchor -> heading, in the order they appear.
SECTIONS = {panel.anchor: panel.title for panel in PANELS}
#: Every figure the report can write (stale ones are removed on regeneration).
FIGURES = tuple(name for panel in PANELS for name in panel.figures)

__all__ = ["FIGURES", "PANELS", "SECTIONS", "Panel", "header"]
