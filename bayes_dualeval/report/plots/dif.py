"""The DIF figure: items' shifts for a group of models, with intervals, flagged ones marked."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from bayes_dualeval.report.plots.base import (
    BAD,
    POINT,
    figure,
    label_size,
    row_height,
    short,
    tidy,
)


def dif_shifts(rows: pd.DataFrame) -> Figure:
    """One line per (item, group): the shift's mean and interval, flagged rows in red.

    Parameters
    ----------
    rows : pandas.DataFrame
        Rows of ``dif.csv`` (``item, group, shift_mean, shift_lo, shift_hi, flagged``),
        in the order to draw them, top first.

    Returns
    -------
    matplotlib.figure.Figure
    """
    n = len(rows)
    fig = figure(7.0, row_height(n))
    ax = fig.add_subplot(1, 1, 1)
    y = np.arange(n)[::-1]
    flagged = rows["flagged"].to_numpy(bool)
    colour = np.where(flagged, BAD, POINT)
    mean = rows["shift_mean"].to_numpy(float)
    ax.hlines(y, rows["shift_lo"].to_numpy(float), rows["shift_hi"].to_numpy(float),
              colors=colour, lw=1.4)  # fmt: skip
    ax.scatter(mean, y, c=colour, s=14, zorder=3)
    ax.axvline(0.0, color="#888888", lw=0.8)
    labels = [short(f"{i} ({g})") for i, g in zip(rows["item"], rows["group"], strict=True)]
    ax.set_yticks(y, labels, fontsize=label_size(n))
    ax.set_xlabel("shift of the log-odds against the other groups (positive: harder)")
    tidy(ax, grid="x")
    return fig
