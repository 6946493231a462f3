"""Panels of the psychometric audits: benchmarks, item fit, model fit, local dependence."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayes_dualeval.report import plots
from bayes_dualeval.report.context import ReportContext
from bayes_dualeval.report.markup import Markup, num

#: Rows of the item fit table, and items drawn in its figure.
ITEM_ROWS, ITEM_PLOTS = 10, 4


def benchmarks(doc: Markup, ctx: ReportContext) -> None:
    """``benchmarks.csv``: where each benchmark measures, and whether it separates the top."""
    table = ctx.result.tables.get("benchmarks")
    if table is None or not len(table):
        doc.note("No static benchmark with item parameters in this run.")
        return
    doc.para(
        "Test information is the sum of a benchmark's question information; its inverse "
        "square root is the standard error of an ability measured by that benchmark "
        "alone. A benchmark whose information has fallen away at the top models' "
        "abilities (red lines) can no longer tell them apart, however many models it ranks."
    )
    frame = pd.DataFrame(
        {
            "benchmark": table["source"],
            "items": table["items"].astype(str),
            "models": table["models"].astype(str),
            "reliability": [num(x) for x in table["reliability"]],
            "info at top": [num(x, ".1f") for x in table["info_at_top"]],
            "top pairs separated": [
                f"{s} of {max(t - 1, 0)}"
                for s, t in zip(table["top_separated"], table["top_models"], strict=True)
            ],
            "ceiling share": [num(x) for x in table["ceiling_share"]],
            "verdict": table["verdict"],
        }
    )
    doc.table(frame, text=("benchmark", "verdict"))
    curves = table.attrs.get("curves")
    if curves is not None:
        doc.figure(
            "test_information",
            plots.test_information(curves.grid, curves.sources, curves.info, curves.top),
            "Test information of each benchmark (dashed: all static questions) against "
            "ability, posterior mean; red lines: the top models' abilities.",
        )


def item_fit(doc: Markup, ctx: ReportContext) -> None:
    """The static questions that fit worst (``fit_ppp``), with their empirical curves."""
    items = ctx.items
    if "fit_ppp" not in items or items["fit_ppp"].isna().all():
        doc.note("No static questions with item parameters in this run.")
        return
    worst = items[items["fit_ppp"].notna()].sort_values("fit_ppp", kind="stable")
    shown = worst.head(ITEM_ROWS)
    flagged = int((items["fit_q"] < 0.05).sum())
    doc.para(
        "Infit and outfit are mean squares of the standardised residuals (1 when the "
        "labels follow the model; outfit weighs surprises far from the question's "
        "difficulty). fit_ppp is the share of replicated label sets with a larger outfit; "
        f"fit_q its Benjamini-Yekutieli q-value. {flagged} question(s) have fit_q < 0.05."
    )
    frame = pd.DataFrame(
        {
            "item": shown["item"],
            "infit": [num(x) for x in shown["infit_mean"]],
            "outfit": [num(x) for x in shown["outfit_mean"]],
            "fit_ppp": [num(x, ".3f") for x in shown["fit_ppp"]],
            "fit_q": [num(x, ".3f") for x in shown["fit_q"]],
            "b": [num(x) for x in shown["b_mean"]],
            "a": [num(x) for x in shown["a_mean"]],
        }
    )
    doc.table(frame, names=("item",))
    _curves(doc, ctx, shown.head(ITEM_PLOTS))


def _curves(doc: Markup, ctx: ReportContext, shown: pd.DataFrame) -> None:
    ds = ctx.dataset
    ability = ctx.board.set_index("model")["theta_mean"].reindex(ds.models).to_numpy(float)
    finite = ability[np.isfinite(ability)]
    if not len(shown) or not len(finite):
        return
    grid = np.linspace(finite.min() - 1.0, finite.max() + 1.0, 81)
    draws = ctx.thin(200)
    panels = []
    for k, row in zip(pd.Index(ds.items).get_indexer(shown["item"]), shown.itertuples(),
                      strict=True):  # fmt: skip
        cells = ds.static_item == k
        panels.append(
            {
                "title": f"{row.item} (fit_ppp {row.fit_ppp:.3f})",
                "ability": ability[ds.static_model[cells]],
                "outcome": ds.static_share[cells],
                "grid": grid,
                "fitted": ctx.success_curve(k, grid, draws).mean(axis=0),
            }
        )
    doc.figure(
        "item_fit",
        plots.item_patterns(panels, ylabel="share correct"),
        "The worst-fitting questions: each model's share correct against its posterior "
        "mean ability, the empirical curve in four ability bins (red) and the model's "
        "curve (dashed). Where they part, the question does not follow the run's link.",
    )


def model_fit(doc: Markup, ctx: ReportContext) -> None:
    """Models whose labels do not fit, and models below a benchmark's chance level."""
    board = ctx.board
    if "fit_p" not in board:
        doc.note("No static labels with item parameters in this run.")
        return
    from bayes_dualeval.checks.fdr import by_qvalues
    from bayes_dualeval.checks.model_fit import MISFIT_Q

    q = by_qvalues(board["fit_p"].to_numpy(float))
    misfit = board[q < MISFIT_Q]
    below = board[board["below_chance"].fillna("").astype(str) != ""]
    doc.para(
        "fit_p is the person-fit p-value of each model's static labels (l_z* with "
        "Snijders' correction): small when the labels are less likely than the run "
        "predicts at the model's ability, as for an inverted answer key or a broken "
        "harness. Such a model's rank says little about its ability."
    )
    lines = [f"{m}: fit_p = {num(p, '.2g')}" for m, p in zip(misfit["model"], misfit["fit_p"],
                                                             strict=True)]  # fmt: skip
    lines += [f"{m}: below chance on {s}" for m, s in zip(below["model"], below["below_chance"],
                                                         strict=True)]  # fmt: skip
    if lines:
        doc.banner("warn", "Models that do not fit (named, not ranked quietly)", lines)
    else:
        doc.para(f"No model has a fit_p q-value below {MISFIT_Q} or scores below chance.")
    worst = board.sort_values("fit_p", kind="stable").head(5)
    doc.table(
        pd.DataFrame(
            {
                "model": worst["model"],
                "infit": [num(x) for x in worst["infit"]],
                "outfit": [num(x) for x in worst["outfit"]],
                "fit_p": [num(x, ".3g") for x in worst["fit_p"]],
            }
        ),
        names=("model",),
    )


def dependence(doc: Markup, ctx: ReportContext) -> None:
    """Clusters of locally dependent questions (Yen's Q3)."""
    table = ctx.result.tables.get("dependence")
    if table is None:
        doc.note("No static questions with item parameters in this run.")
        return
    from bayes_dualeval.checks.dependence import clusters

    found = clusters(table)
    doc.para(
        "Q3 is the correlation across models of two questions' residuals. Questions that "
        "share a stem or a template answer together beyond what ability explains, and "
        "the model counts them as more evidence than there is."
    )
    if found:
        doc.banner(
            "warn",
            f"{len(found)} cluster(s) of locally dependent questions",
            [f"{name}: {', '.join(items)}" for name, items in found.items()],
        )
    else:
        doc.para("No cluster of locally dependent questions was found.")
    skipped = table.attrs.get("skipped") or []
    if skipped:
        doc.note(f"Not checked (too many questions): {', '.join(skipped)}.")
