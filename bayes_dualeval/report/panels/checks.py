"""Panels of the posterior predictive checks: replicated against observed, and anomalies."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayes_dualeval.checks import FLAG_Q
from bayes_dualeval.report import plots
from bayes_dualeval.report.context import ReportContext
from bayes_dualeval.report.markup import Markup, num, pct

#: Rows of the anomalies table shown in the report.
TOP_ANOMALIES = 20


def predictive(doc: Markup, ctx: ReportContext) -> None:
    """Summary of the checks, per-model and per-item replicates, calibration."""
    ppc = ctx.ppc
    level = f"{ctx.ci:.0%}"
    if ctx.point:
        doc.note(
            "MAP fit: data are replicated at the point estimate (a plug-in check), so the "
            "intervals show sampling noise only and are narrower than a full posterior's."
        )
    doc.para(
        f"Data sets replicated from the fitted model are compared with the observed data. "
        f"Each point is a model or an item; its line is the {level} interval of the replicated "
        "statistic. Points off the dashed diagonal, and red points outside their interval, "
        "are what the model fails to reproduce."
    )
    sm = ppc.summary
    doc.facts(
        {
            "models outside (static / arena)": (
                f"{pct(sm.get('share_models_outside_static'))} / "
                f"{pct(sm.get('share_models_outside_arena'))}"
            ),
            "static items outside": pct(sm.get("share_items_outside")),
            "calibration error (static / arena)": (
                f"{num(sm.get('calibration_error_static'), '.3f')} / "
                f"{num(sm.get('calibration_error_arena'), '.3f')}"
            ),
            "arena dispersion": num(sm.get("arena_dispersion"), ".3f"),
            "replicated data sets": f"{sm.get('replicates')} from {sm.get('draws')} draws",
        }
    )
    panels = _model_panels(ppc.models, sm.get("arena_statistic"))
    if panels:
        doc.figure(
            "ppc_models",
            plots.observed_vs_replicated(panels),
            "Per model: observed statistic (x) against the replicated mean (y) and its "
            f"{level} interval. The arena win share counts a model's soft wins over its "
            "decisive pairs.",
        )
    if len(ppc.items):
        item_panel = _replicated(ppc.items, "", "item", "Static accuracy per item")
        doc.figure(
            "ppc_items",
            plots.observed_vs_replicated([{**item_panel, "axis": "share of models correct"}]),
            "Per static item: the share of models that answered correctly, observed (x) "
            f"against replicated (y, with {level} interval).",
        )
    _calibration(doc, ppc)


def _replicated(table: pd.DataFrame, prefix: str, label: str, title: str) -> dict:
    """A panel of :func:`plots.observed_vs_replicated` from the columns ``<prefix>...``."""
    return {
        "table": table,
        "observed": f"{prefix}observed",
        "mean": f"{prefix}rep_mean",
        "lo": f"{prefix}rep_lo",
        "hi": f"{prefix}rep_hi",
        "label": label,
        "title": title,
    }


def _model_panels(models: pd.DataFrame, arena_statistic) -> list:
    panels = []
    if (models["n_static"] > 0).any():
        panel = _replicated(models, "static_", "model", "Static accuracy per model")
        panels.append({**panel, "axis": "accuracy"})
    if (models["n_arena"] > 0).any():
        name = (
            "mean normalised reward" if arena_statistic == "mean_reward_z" else "arena win share"
        )
        panel = _replicated(models, "arena_", "model", f"{name[0].upper()}{name[1:]} per model")
        panels.append({**panel, "axis": name})
    return panels


def _calibration(doc: Markup, ppc) -> None:
    cal = {}
    for title, table, xlabel, ylabel in (
        (
            "Static labels",
            ppc.calibration_static,
            "predicted P(correct)",
            "observed share correct",
        ),
        (
            "Arena pairs",
            ppc.calibration_arena,
            "predicted P(first model wins)",
            "mean soft target",
        ),
    ):
        t = table[table["n"] > 0]
        if len(t):
            cal[f"{title} ({int(t['n'].sum())})"] = {
                "table": t,
                "predicted": "mean_predicted",
                "observed": "observed_frequency",
                "n": "n",
                "xlabel": xlabel,
                "ylabel": ylabel,
            }
    if cal:
        doc.figure(
            "calibration",
            plots.calibration(cal),
            "Calibration: cells (static) or decisive pairs (arena) binned by predicted "
            "probability; each point is a bin's mean prediction against what was observed, "
            "sized by the number in the bin. A calibrated model follows the diagonal; an "
            "S-shape around it means predictions too timid, a flattened curve too confident.",
        )


def anomalies(doc: Markup, ctx: ReportContext) -> None:
    """The most surprising model-item cells."""
    cells = ctx.ppc.anomalies
    if not len(cells):
        doc.note("No cells to check.")
        return
    flagged = int((cells["q_value"] < FLAG_Q).sum())
    top = cells.head(TOP_ANOMALIES)
    doc.para(
        f"The {len(top)} most surprising of {len(cells)} model-item cells: smallest "
        "one-sided p-value first, the probability under the fitted model of an outcome at "
        "least as good as the observed one (the direction of contamination). Static: "
        "observed label against the predicted probability of success (a failure has p = 1); "
        "arena: the model's soft wins on the prompt against the predicted wins. residual = "
        "(observed \u2212 expected) / predictive sd; q is the Benjamini-Yekutieli adjusted "
        f"p-value, valid however the cells depend on each other. {flagged} cell(s) have "
        f"q < {FLAG_Q:g}"
        + (
            ": only these are more surprising than chance among this many cells."
            if flagged
            else "; the rows below are within what chance produces among this many cells."
        )
    )
    frame = pd.DataFrame(
        {
            "model": top["model"],
            "item": top["item"],
            "kind": top["kind"],
            "observed": [num(x, ".3g") for x in top["observed"]],
            "expected": [num(x, ".3g") for x in top["expected"]],
            "residual": [num(x, "+.2f") for x in top["residual"]],
            "p": [num(x, ".2g") for x in top["p_value"]],
            "q": [num(x, ".2g") for x in top["q_value"]],
        }
    )
    doc.table(frame, text=("kind",), names=("model", "item"), cell_class=_flag_q(top))


#: Rows of contamination.csv shown in the report (every flagged row is shown as well).
TOP_BLOCKS = 10


def _design_sentence(table: pd.DataFrame) -> str:
    """What the rows' ability can tell apart: a specialist from a leak, or not."""
    design = set(table["design"]) if "design" in table else set()
    if "left_out_domain" in design or "left_out_domain_only" in design:
        text = (
            "Each block is predicted from the model's ability in the block's domain, so a "
            "model strong in a whole domain is not flagged for it; a flag is an excess "
            "specific to one benchmark."
        )
        if "left_out_domain_only" in design:
            text += (
                " Where a model has no other benchmark in the block's domain "
                "(design left_out_domain_only) a specialist cannot be told from a leak."
            )
        return text
    return (
        "Each block is predicted from the model's one overall ability: a model genuinely "
        "strong in a domain is flagged like one that saw a benchmark's test set (fit with "
        "abilities per domain to tell them apart)."
    )


def contamination(doc: Markup, ctx: ReportContext) -> None:
    """The model x benchmark (and model x arena source) audit: contamination.csv's top."""
    table = ctx.result.tables.get("contamination")
    if table is None or not len(table):
        doc.note("No static benchmarks or arena rewards to audit per model.")
        return
    flagged = table["q_value"].to_numpy(float) < FLAG_Q
    top = table[flagged | (np.arange(len(table)) < TOP_BLOCKS)]
    doc.para(
        f"Did a model do better on a benchmark (or get more reward from an arena source) "
        f"than its ability predicts? Each of the {len(table)} model x benchmark blocks is "
        "predicted with the block left out (the model's ability from its other data only), "
        "so a leak cannot hide by raising the ability. Static: accuracy; arena: mean "
        "normalised reward. p is one-sided (better than predicted); q is the "
        f"Benjamini-Yekutieli adjusted p-value over all blocks. {int(flagged.sum())} "
        f"block(s) have q < {FLAG_Q:g}"
        + (
            ": read them as candidates for contamination, and check the benchmark's provenance."
            if flagged.any()
            else "; no model beats its prediction on any benchmark by more than chance."
        )
        + " "
        + _design_sentence(table)
        + " The full table is contamination.csv."
    )
    frame = pd.DataFrame(
        {
            "model": top["model"],
            "kind": top["kind"],
            "benchmark": [
                f"{s}/{d}" if d else str(s)
                for s, d in zip(top["source"], top["dataset"], strict=True)
            ],
            "n": top["n"].astype(int).astype(str),
            "observed": [num(x, ".3g") for x in top["observed"]],
            "expected": [num(x, ".3g") for x in top["expected"]],
            "excess": [num(x, "+.3f") for x in top["excess"]],
            "p": [num(x, ".2g") for x in top["p_value"]],
            "q": [num(x, ".2g") for x in top["q_value"]],
        }
    )
    doc.table(frame, text=("kind",), names=("model", "benchmark"), cell_class=_flag_q(top))


def _flag_q(rows: pd.DataFrame):
    """``cell_class`` for a table of ``rows``: its ``q`` cells red below :data:`FLAG_Q`."""
    q = rows["q_value"].to_numpy(float)

    def cell_class(k, col):
        return "bad" if col == "q" and q[k] < FLAG_Q else ""

    return cell_class
