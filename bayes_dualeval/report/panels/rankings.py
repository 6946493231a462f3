"""Panels of the ranking: the leaderboard table, the forest plot, rank probabilities."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayes_dualeval.posterior.summaries import draws_of, ranks
from bayes_dualeval.report import plots
from bayes_dualeval.report.context import ReportContext
from bayes_dualeval.report.markup import Markup, num


def leaderboard(doc: Markup, ctx: ReportContext) -> None:
    """The leaderboard table, tiers shaded, '=' beside models tied with the one above."""
    t = ctx.board
    point = ctx.point
    pct = f"{ctx.ci:.0%}"
    rows = {"rank": [f"{r}" for r in t["rank"]]}
    if not point:  # no tiers without intervals
        rows[""] = [
            "=" if k and t["tier"].iloc[k] == t["tier"].iloc[k - 1] else "" for k in range(len(t))
        ]
    rows["model"] = list(t["model"])
    rows["\u03b8"] = [num(x) for x in t["theta_mean"]]
    if not point:
        rows[f"{pct} interval"] = [
            f"[{num(lo)}, {num(hi)}]" for lo, hi in zip(t["theta_lo"], t["theta_hi"], strict=True)
        ]
        rows["rank range"] = [
            _rank_range(lo, hi) for lo, hi in zip(t["rank_lo"], t["rank_hi"], strict=True)
        ]
        rows["P(top 1)"] = [num(x) for x in t["p_top1"]]
        rows["P(> next)"] = [num(x) for x in t["p_beats_next"]]
        rows["tier"] = [str(x) for x in t["tier"]]
    rows["static acc."] = [num(x, ".3f") for x in t["static_accuracy"]]
    rows["mean reward z"] = [num(x) for x in t["mean_reward_z"]]
    rows["n static"] = [str(int(x)) for x in t["n_static"]]
    rows["n arena"] = [str(int(x)) for x in t["n_arena"]]
    frame = pd.DataFrame(rows)
    tiers = t["tier"].to_numpy()
    order = {tier: k for k, tier in enumerate(pd.unique(tiers))}

    def row_class(k):
        if point:
            return ""
        cls = "tier-b" if order[tiers[k]] % 2 else "tier-a"
        if k and tiers[k] != tiers[k - 1]:
            cls += " tier-start"
        return cls

    def cell_class(k, col):
        return "tie" if col == "" and frame[""].iloc[k] else ""

    if point:
        doc.para(
            "Models ordered by their point estimate of ability \u03b8 (centred: the mean over "
            "models is 0). Observed static accuracy and mean normalised arena reward are "
            "shown beside it."
        )
    else:
        doc.para(
            f"Models ordered by posterior mean ability \u03b8 (centred: the mean over models "
            f"is 0), with the {pct} equal-tailed interval and the {pct} interval of the rank. "
            f"A tier groups adjacent models that cannot be told apart: '=' marks a model whose "
            f"neighbour above beats it with probability below {ctx.ci:g} (P(> next) of the "
            "row above). Rows of alternate tiers are shaded and a rule marks each new tier."
        )
    doc.table(frame, text=("",), names=("model",), row_class=row_class, cell_class=cell_class)


def _rank_range(lo: float, hi: float) -> str:
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return "\u2013"
    return f"{int(lo)}" if int(lo) == int(hi) else f"{int(lo)}\u2013{int(hi)}"


def abilities(doc: Markup, ctx: ReportContext) -> None:
    """Forest plot of the abilities."""
    fig = plots.forest(ctx.board, ci=None if ctx.point else ctx.ci)
    if ctx.point:
        caption = "Ability point estimates (MAP), best at the top."
    else:
        caption = (
            f"Posterior mean ability (dot) and {ctx.ci:.0%} interval (line) of every model, "
            "best at the top; shaded bands group models of the same tier."
        )
    doc.figure("forest", fig, caption)


def rank_probabilities(doc: Markup, ctx: ReportContext) -> None:
    """Heat map of P(model has rank k)."""
    if ctx.point:
        doc.note("Skipped: a MAP fit has a single draw, so every rank probability is 0 or 1.")
        return
    r = ranks(draws_of(ctx.idata, "theta_centred"))
    m = r.shape[1]
    probs = np.stack([(r == k).mean(axis=0) for k in range(1, m + 1)], axis=1)
    order = pd.Index(ctx.models).get_indexer(ctx.board["model"])
    frame = pd.DataFrame(probs[order], index=ctx.board["model"], columns=np.arange(1, m + 1))
    doc.figure(
        "rank_heatmap",
        plots.rank_heatmap(frame),
        "Posterior probability that each model (row, best first) holds each rank (column). "
        "A sharp diagonal means a settled order; a smeared block marks models whose order "
        "the data cannot fix.",
    )
