"""The report's figures: one function per figure, each returning a matplotlib Figure.

Every function takes plain tables or arrays (never an ``InferenceData``), so a figure can
be redrawn from the CSV tables of a run. Heights grow with the number of rows, so a
leaderboard of 100 models stays readable; long labels are shortened with an ellipsis
(the tables keep the full names). Modules by subject: :mod:`.abilities`, :mod:`.items`,
:mod:`.checks`, :mod:`.diagnostics`, :mod:`.dimensions`, :mod:`.domains`,
:mod:`.flagged`, :mod:`.audits`, :mod:`.dif`; :mod:`.base` holds what they share.
"""

from bayes_dualeval.report.plots.abilities import forest, rank_heatmap
from bayes_dualeval.report.plots.audits import test_information
from bayes_dualeval.report.plots.base import LABEL_CHARS, MAX_POINTS, short, subset, to_png
from bayes_dualeval.report.plots.checks import calibration, observed_vs_replicated
from bayes_dualeval.report.plots.diagnostics import loss_trace, rank_plots, rhat_ess
from bayes_dualeval.report.plots.dif import dif_shifts
from bayes_dualeval.report.plots.dimensions import ability_map, loading_heatmap
from bayes_dualeval.report.plots.domains import domain_heatmap, domain_wright
from bayes_dualeval.report.plots.flagged import item_patterns
from bayes_dualeval.report.plots.items import difficulty_discrimination, item_curves, wright_map

__all__ = [
    "LABEL_CHARS",
    "MAX_POINTS",
    "ability_map",
    "calibration",
    "dif_shifts",
    "difficulty_discrimination",
    "domain_heatmap",
    "domain_wright",
    "forest",
    "item_curves",
    "item_patterns",
    "loading_heatmap",
    "loss_trace",
    "observed_vs_replicated",
    "rank_heatmap",
    "rank_plots",
    "rhat_ess",
    "short",
    "subset",
    "test_information",
    "to_png",
    "wright_map",
]
