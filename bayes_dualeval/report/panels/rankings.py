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


#: Models the ranking figures show when there are more: the best by posterior mean (the
#: leaderboard table above them and leaderboard.csv hold every model).
FIGURE_MODELS = 80


def _shown(ctx: ReportContext) -> tuple[pd.DataFrame, str]:
    """The leaderboard rows a ranking figure shows, and what its caption adds about the rest."""
    board = ctx.board
    if len(board) <= FIGURE_MODELS:
        return board, ""
    return board.head(FIGURE_MODELS), (
        f" The figure shows the {FIGURE_MODELS} best of {len(board):,} models by posterior "
        "mean; the leaderboard above and leaderboard.csv hold every one."
    )


def abilities(doc: Markup, ctx: ReportContext) -> None:
    """Forest plot of the abilities (of the best :data:`FIGURE_MODELS` models)."""
    board, rest = _shown(ctx)
    fig = plots.forest(board, ci=None if ctx.point else ctx.ci)
    if ctx.point:
        caption = "Ability point estimates (MAP), best at the top."
    else:
        caption = (
            f"Posterior mean ability (dot) and {ctx.ci:.0%} interval (line) of every model, "
            "best at the top; shaded bands group models of the same tier."
        )
    doc.figure("forest", fig, caption + rest)


def rank_probabilities(doc: Markup, ctx: ReportContext) -> None:
    """Heat map of P(model has rank k), ranks past the models shown pooled in one column."""
    if ctx.point:
        doc.note("Skipped: a MAP fit has a single draw, so every rank probability is 0 or 1.")
        return
    r = ranks(draws_of(ctx.idata, "theta_centred"))
    board, rest = _shown(ctx)
    probs = rank_probabilities_of(r, pd.Index(ctx.models).get_indexer(board["model"]))
    m, k = r.shape[1], len(board)
    columns = [*range(1, k + 1)] + ([f">{k}"] if k < m else [])
    frame = pd.DataFrame(probs[:, : len(columns)], index=board["model"], columns=columns)
    pooled = f" The last column pools the ranks below {k}." if k < m else ""
    doc.figure(
        "rank_heatmap",
        plots.rank_heatmap(frame),
        "Posterior probability that each model (row, best first) holds each rank (column). "
        "A sharp diagonal means a settled order; a smeared block marks models whose order "
        "the data cannot fix." + rest + pooled,
    )


def rank_probabilities_of(r: np.ndarray, models: np.ndarray) -> np.ndarray:
    """``P(rank = j)`` of ``models`` (columns of ``r``) for ranks 1..len(models), then the rest.

    Parameters
    ----------
    r : numpy.ndarray
        Ranks (1 = best), draws x models.
    models : numpy.ndarray
        The columns of ``r`` to tabulate.

    Returns
    -------
    numpy.ndarray
        len(models) x (len(models) + 1): each row sums to one, the last column holding
        every rank past len(models). One count over all draws, no pass per rank.
    """
    k = len(models)
    rank = np.minimum(r[:, models], k + 1) - 1  # 0..k, the last the pooled ranks
    flat = (np.arange(k) * (k + 1))[None, :] + rank
    counts = np.bincount(flat.ravel(), minlength=k * (k + 1)).reshape(k, k + 1)
    return counts / r.shape[0]
