"""``sbc.png``: one ECDF-difference panel per quantity, inside its simultaneous band."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayes_dualeval.calibration.ecdf import Band, cumulative_counts


def ecdf_figure(ranks: pd.DataFrame, band: Band, summary: pd.DataFrame):
    """ECDF minus the uniform CDF of each quantity's ranks, with the band shaded.

    Parameters
    ----------
    ranks : pandas.DataFrame
        ``quantity`` and ``rank`` per simulation (``ranks.csv``).
    band : Band
    summary : pandas.DataFrame
        ``sbc.csv``: a panel outside its band is drawn in red.

    Returns
    -------
    matplotlib.figure.Figure
    """
    from matplotlib.figure import Figure

    names = list(summary["quantity"])
    cols = 4
    rows = int(np.ceil(len(names) / cols))
    fig = Figure(figsize=(3.0 * cols, 2.3 * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False, sharex=True)
    inside = dict(zip(summary["quantity"], summary["within_band"], strict=True))
    for ax, name in zip(axes.flat, names, strict=False):
        r = ranks.loc[ranks["quantity"] == name, "rank"].to_numpy()
        diff = cumulative_counts(r, band.draws) / band.n - band.z
        ax.fill_between(band.z, band.lower - band.z, band.upper - band.z, color="0.85", step="mid")
        ax.step(band.z, diff, where="mid", color="tab:blue" if inside[name] else "tab:red")
        ax.axhline(0, color="0.5", lw=0.6)
        ax.set_title(name, fontsize=9)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(names) :]:
        ax.set_visible(False)
    fig.suptitle(
        f"ECDF difference of {band.n} ranks among {band.draws} draws, "
        f"simultaneous 95% bands (grey)",
        fontsize=10,
    )
    return fig
