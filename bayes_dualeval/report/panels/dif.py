"""The DIF panel: static items that function differently for a group of models."""

from __future__ import annotations

from bayes_dualeval.report import plots
from bayes_dualeval.report.context import ReportContext
from bayes_dualeval.report.markup import Markup, num

#: Rows drawn in the figure (the most probable shifts).
DIF_ROWS = 30


def dif(doc: Markup, ctx: ReportContext) -> None:
    """``dif.csv``: the items' shifts per group, the flagged ones first."""
    table = ctx.result.tables.get("dif")
    if table is None:
        doc.note("No groups of models for differential item functioning in this run.")
        return
    from bayes_dualeval.posterior.dif_table import FDR_LEVEL, MIN_SHIFT, flagged_items

    groups = list(dict.fromkeys(table["group"]))
    # with two groups an item's rows mirror each other: show the second group's
    rows = table[table["group"] == groups[-1]] if len(groups) == 2 else table
    rows = rows.sort_values(["p_shift", "item"], ascending=[False, True], kind="stable")
    found = flagged_items(table)
    doc.para(
        f"Each static item may be harder or easier for a group of models at the same "
        f"ability ({', '.join(groups)}). A shift is the group's change of the item's "
        f"log-odds against the other groups; p_shift the posterior probability that it "
        f"exceeds {MIN_SHIFT} logits. Items are flagged so that the flagged set's "
        f"expected share of shifts below {MIN_SHIFT} is at most {FDR_LEVEL} (Bayesian FDR)."
    )
    if found:
        doc.banner("warn", f"{len(found)} item(s) function differently across groups", found)
    else:
        doc.para("No item is flagged.")
    top = rows.head(10)
    doc.table(
        top.assign(
            shift=[num(x) for x in top["shift_mean"]],
            interval=[
                f"[{num(a)}, {num(b)}]"
                for a, b in zip(top["shift_lo"], top["shift_hi"], strict=True)
            ],  # fmt: skip
            p_shift=[num(x, ".3f") for x in top["p_shift"]],
        )[["item", "group", "shift", "interval", "p_shift", "flagged"]],
        names=("item",),
    )
    doc.figure(
        "dif_shifts",
        plots.dif_shifts(rows.head(DIF_ROWS)),
        "The items with the most probable shifts: posterior mean and interval of the "
        "group's shift; flagged items in red.",
    )
