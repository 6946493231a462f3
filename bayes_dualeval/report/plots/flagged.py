"""The flagged items' figure: each model's outcome on the item against its ability."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from bayes_dualeval.report.plots.base import BAD, POINT, panel_row, short, tidy

#: Ability bins of the empirical accuracy line (equal counts of models).
BINS = 4


def item_patterns(panels: list[dict], *, ylabel: str = "label (0/1)") -> Figure:
    """One panel per item: each model's outcome against its ability, binned accuracy, fit.

    Parameters
    ----------
    panels : list of dict
        One per item: ``title``, ``ability`` and ``outcome`` (arrays over the models that
        answered it: posterior mean ability and the label, or the normalised reward), and
        optionally ``grid`` and ``fitted`` (the fitted success curve over ``grid``).
    ylabel : str
        Label of the outcome axis of the first panel.

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig, axes = panel_row(len(panels), 3.6, 3.4, sharey=False)
    for ax, panel in zip(axes, panels, strict=False):
        x = np.asarray(panel["ability"], dtype=float)
        y = np.asarray(panel["outcome"], dtype=float)
        order = np.argsort(x, kind="stable")
        # a fixed, alternating vertical offset (no random jitter: the figure is reproducible)
        offset = np.where(np.arange(len(x)) % 2 == 0, -0.025, 0.025)
        binary = np.isin(y, (0.0, 1.0)).all()
        ax.plot(x[order], y[order] + (offset if binary else 0.0), "o", color=POINT, ms=4,
                alpha=0.7, label="models")  # fmt: skip
        edges = np.array_split(order, min(BINS, max(1, len(x))))
        centres = [x[e].mean() for e in edges if len(e)]
        means = [y[e].mean() for e in edges if len(e)]
        ax.plot(centres, means, "-s", color=BAD, lw=1.6, ms=4, label="observed, binned")
        if panel.get("fitted") is not None:
            ax.plot(panel["grid"], panel["fitted"], color="#777777", lw=1.2, ls="--",
                    label="fitted curve")  # fmt: skip
        ax.set_title(short(panel["title"], 44), fontsize=9, loc="left")
        ax.set_xlabel("ability \u03b8 (centred)")
        if binary:
            ax.set_ylim(-0.1, 1.1)
        tidy(ax)
    axes[0].set_ylabel(ylabel)
    axes[0].legend(fontsize=7, loc="best", frameon=False)
    return fig
