"""The judges' panel: judges side by side, their bias by model family, and style control."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayes_dualeval.report.context import ReportContext
from bayes_dualeval.report.markup import Markup, num


def _interval(mean, lo, hi, fmt: str) -> list[str]:
    """``mean [lo, hi]`` per row (the mean alone where the run has no interval)."""
    out = []
    for m, a, b in zip(mean, lo, hi, strict=True):
        bounds = f" [{num(a, fmt)}, {num(b, fmt)}]" if np.isfinite(a) and np.isfinite(b) else ""
        out.append(num(m, fmt) + bounds)
    return out


def judges(doc: Markup, ctx: ReportContext) -> None:
    """judges.csv, judge_bias.csv and style.csv as the reader meets them."""
    tables = ctx.result.tables
    table = tables.get("judges")
    style = tables.get("style")
    graders = tables.get("graders")
    if table is None and style is None and graders is None:
        doc.note(
            "One judge scored the arena, one graded the static labels, and no style "
            "covariates were given."
        )
        return
    if graders is not None:
        doc.para(
            f"{len(graders)} judges graded the static labels. Each has a severity on the "
            "pass rate's log-odds (positive: stricter than the average grader, at the same "
            "ability and item); abilities and item difficulties are grader-adjusted. The "
            "full table is graders.csv."
        )
        frame = pd.DataFrame(
            {
                "grader": graders["judge"],
                "labels": graders["n_labels"].astype(str),
                "models": graders["n_models"].astype(str),
                "pass rate": [num(x, ".2f") for x in graders["pass_rate"]],
                "severity": _interval(
                    graders["severity_mean"],
                    graders["severity_lo"],
                    graders["severity_hi"],
                    "+.2f",
                ),  # fmt: skip
            }
        )
        doc.table(frame, names=("grader",))
    if table is not None:
        doc.para(
            f"{len(table)} judges scored the arena. Each has its own discrimination (how "
            "strongly its rewards follow the models' success probabilities) and severity (how "
            "much higher or lower than the other judges it scores the answers they share, "
            "as the fit predicts them; blank for a judge that shares none); the "
            "leaderboard is judge-adjusted. Agreement is the rank correlation of a judge's "
            "mean reward per model with the other judges' consensus. The full table is "
            "judges.csv."
        )
        frame = pd.DataFrame(
            {
                "judge": table["judge"],
                "rows": table["n_rows"].astype(str),
                "models": table["n_models"].astype(str),
                "severity": _interval(
                    table["severity_mean"], table["severity_lo"], table["severity_hi"], "+.2f"
                ),
                "discrimination": _interval(
                    table["discrimination_mean"],
                    table["discrimination_lo"],
                    table["discrimination_hi"],
                    ".2f",
                ),  # fmt: skip
                "agreement": [num(x, "+.2f") for x in table["agreement"]],
            }
        )
        doc.table(frame, names=("judge",))
    bias = tables.get("judge_bias")
    if bias is not None:
        flagged = (bias["bias_lo"] > 0) | (bias["bias_hi"] < 0)
        doc.para(
            "How much more each judge favours the models of a family than the other judges "
            "do (on the pair logit: self-preference where a judge's own family is "
            f"favoured), with its {ctx.result.ci:.0%} interval; {int(flagged.sum())} of "
            f"{len(bias)} intervals exclude 0. The full table is judge_bias.csv."
        )
        cells = pd.Series(
            _interval(bias["bias_mean"], bias["bias_lo"], bias["bias_hi"], "+.2f"),
            index=pd.MultiIndex.from_frame(bias[["judge", "family"]]),
        ).unstack("family")
        doc.table(cells.reset_index(), names=("judge",))
    if style is not None:
        doc.para(
            "What each judge pays per standard deviation of a style covariate, on the pair "
            "logit (style control: the leaderboard is adjusted for it). The covariates' "
            "means and standard deviations are in style.csv."
        )
        frame = pd.DataFrame(
            {
                "covariate": style["covariate"],
                "judge": style["judge"].replace("", "(all)"),
                "coefficient": _interval(
                    style["coef_mean"], style["coef_lo"], style["coef_hi"], "+.3f"
                ),
            }
        )
        doc.table(frame, names=("covariate", "judge"))
