"""The flagged items panel: every item items.csv flags, most serious first, with evidence."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayes_dualeval.report import plots
from bayes_dualeval.report.context import ReportContext
from bayes_dualeval.report.markup import Markup, num

#: Flags in order of seriousness (an item is ranked by its most serious flag).
SERIOUSNESS = ("miskeyed", "misfit", "low_discrimination", "no_signal", "not_identified")
#: Rows of the table, and items drawn in the figure.
MAX_ROWS, MAX_PLOTS = 25, 4
#: What each flag says, for the paragraph above the table.
READING = {
    "miskeyed": "the labels fit a reversed key better (key_q: Bayesian false discovery "
    "rate; key_evidence: log Bayes factor of a reversed key)",
    "misfit": "item-fit ppp below 0.05 or above 0.95",
    "low_discrimination": "the upper interval bound of a is below 0.5",
    "no_signal": "every model scored the same",
    "not_identified": "an arena prompt whose level the specification does not identify",
}


def serious_order(items: pd.DataFrame) -> pd.DataFrame:
    """Flagged items, most serious first.

    Ranked by the most serious flag (:data:`SERIOUSNESS`), then by its evidence:
    ``key_q`` (then ``key_evidence``) for miskeyed items, the item-fit tail
    ``min(ppp, 1 - ppp)`` for the others, then the table order.
    """
    flags = items["flags"].fillna("").astype(str)
    rank = np.full(len(items), len(SERIOUSNESS))
    for k, name in reversed(list(enumerate(SERIOUSNESS))):
        rank = np.where(flags.str.split(";").apply(lambda f, n=name: n in f), k, rank)
    ppp = items["ppp"].to_numpy(float)
    keyed = pd.DataFrame(
        {
            "rank": rank,
            "key_q": items.get("key_q", pd.Series(np.nan, index=items.index)).fillna(2.0),
            "evidence": -items.get("key_evidence", pd.Series(0.0, index=items.index)).fillna(0),
            "tail": np.nan_to_num(np.minimum(ppp, 1.0 - ppp), nan=1.0),
            "at": np.arange(len(items)),
        },
        index=items.index,
    )
    keyed = keyed[flags != ""].sort_values(["rank", "key_q", "evidence", "tail", "at"])
    return items.loc[keyed.index]


def flagged(doc: Markup, ctx: ReportContext) -> None:
    """Table of the flagged items and the outcomes of the most serious ones by ability."""
    items = ctx.items
    shown = serious_order(items)
    if shown.empty:
        doc.para(f"No item is flagged (of {len(items)}).")
        return
    names = shown["flags"].str.split(";").explode()
    counts = names.value_counts()
    doc.para(
        f"Flagged items (of {len(items)}): "
        + "; ".join(
            f"{int(counts[f])} {f.replace('_', ' ')} ({READING[f]})" for f in SERIOUSNESS
            if f in counts
        )
        + f". Most serious first (the first {min(MAX_ROWS, len(shown))} of {len(shown)}; "
        "items.csv has them all)."
    )  # fmt: skip
    top = shown.head(MAX_ROWS)
    frame = pd.DataFrame(
        {
            "item": top["item"],
            "kind": top["kind"],
            "flags": [x.replace(";", ", ") for x in top["flags"]],
            "key_q": [num(x, ".2g") for x in top.get("key_q", [np.nan] * len(top))],
            "key_evidence": [num(x, ".1f") for x in top.get("key_evidence", [np.nan] * len(top))],
            "key_r": [num(x) for x in top["key_correlation"]],
            "ppp": [num(x, ".2g") for x in top["ppp"]],
            "a": [num(x) for x in top["a_mean"]],
            "b": [num(x) for x in top["b_mean"]],
            "observed": [num(x, ".3g") for x in top["observed"]],
        }
    )
    doc.table(frame, text=("kind", "flags"), names=("item",))
    _patterns(doc, ctx, shown)


def _patterns(doc: Markup, ctx: ReportContext, shown: pd.DataFrame) -> None:
    """The figure: the most serious flagged static items that have signal."""
    ds = ctx.dataset
    has_signal = ~shown["flags"].str.contains("no_signal")
    chosen = shown[has_signal & (shown["kind"] == "static")].head(MAX_PLOTS)
    if chosen.empty:
        return
    board = ctx.board.set_index("model")["theta_mean"]
    ability = board.reindex(ds.models).to_numpy(float)
    index = pd.Index(ds.items).get_indexer(chosen["item"])
    theta = ability[np.isfinite(ability)]
    grid = np.linspace(theta.min() - 1.0, theta.max() + 1.0, 81)
    draws = ctx.thin(200)
    panels = []
    for k, (_, row) in zip(index, chosen.iterrows(), strict=True):
        cells = ds.static_item == k
        fitted = ctx.success_curve(k, grid, draws).mean(axis=0) if ctx.has_items else None
        panels.append(
            {
                "title": f"{row['item']} ({row['flags'].replace(';', ', ')})",
                "ability": ability[ds.static_model[cells]],
                "outcome": ds.static_share[cells],
                "grid": grid,
                "fitted": fitted,
            }
        )
    doc.figure(
        "flagged_items",
        plots.item_patterns(panels),
        "Each model's label on the most serious flagged questions against its posterior "
        "mean ability (points, offset slightly up and down to separate them), the share "
        "correct in four ability bins of equal size (red) and the fitted success curve "
        "(dashed). A correct key rises from left to right; a reversed key falls: strong "
        "models fail and weak models pass, while the fitted curve, whose discrimination "
        "is positive by its prior, stays flat.",
    )
