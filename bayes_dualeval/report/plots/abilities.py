"""Figures of the models' abilities: the forest plot and the rank-probability heat map."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.colors import PowerNorm
from matplotlib.figure import Figure

from bayes_dualeval.report.plots.base import (
    BAND,
    POINT,
    figure,
    finite,
    label_size,
    row_height,
    short,
    tidy,
)


def _tier_bands(ax, y: np.ndarray, tiers: np.ndarray) -> None:
    """Shade every other tier behind its rows."""
    for k, tier in enumerate(pd.unique(tiers)):
        if k % 2:
            rows = y[tiers == tier]
            ax.axhspan(rows.min() - 0.5, rows.max() + 0.5, color=BAND, zorder=0, lw=0)


def forest(table: pd.DataFrame, *, ci: float | None = None) -> Figure:
    """Forest plot of abilities: posterior mean and interval per model, best at the top.

    Parameters
    ----------
    table : pandas.DataFrame
        A leaderboard (:func:`bayes_dualeval.posterior.summaries.leaderboard`): ``model``,
        ``theta_mean``, ``theta_lo``, ``theta_hi`` and ``tier``, best first.
    ci : float, optional
        Interval level, for the title (intervals are not drawn when NaN).

    Returns
    -------
    matplotlib.figure.Figure
    """
    n = len(table)
    fig = figure(7.5, row_height(n))
    ax = fig.add_subplot()
    y = np.arange(n)[::-1].astype(float)
    mean = table["theta_mean"].to_numpy(float)
    lo, hi = table["theta_lo"].to_numpy(float), table["theta_hi"].to_numpy(float)
    has_interval = finite(lo) and finite(hi) and n > 0
    if has_interval:  # tiers need intervals (a point estimate makes every model its own)
        _tier_bands(ax, y, table["tier"].to_numpy())
        ax.hlines(y, lo, hi, color=POINT, lw=1.6, zorder=2)
    ax.plot(mean, y, "o", color=POINT, ms=5, zorder=3)
    ax.axvline(0.0, color="#999999", lw=0.8, ls=":", zorder=1)
    ax.set_yticks(y, [short(m) for m in table["model"]], fontsize=label_size(n))
    ax.set_ylim(-0.7, n - 0.3)
    ax.set_xlabel("ability \u03b8 (centred: mean over models = 0)")
    if has_interval and ci is not None:
        title = f"Abilities: posterior mean and {ci:.0%} interval"
    else:
        title = "Abilities: point estimates (no intervals)"
    ax.set_title(title, fontsize=11, loc="left")
    tidy(ax, grid="x", colour="#e3e3e3")
    return fig


def rank_heatmap(probs: pd.DataFrame) -> Figure:
    """Heat map of rank probabilities: ``P(model has rank k)``.

    Parameters
    ----------
    probs : pandas.DataFrame
        Models (rows, best first) by ranks (columns ``1..M``); each row sums to one.

    Returns
    -------
    matplotlib.figure.Figure
    """
    n, k = probs.shape
    width = min(11.0, max(6.5, 3.2 + 0.24 * k))
    fig = figure(width, row_height(n, base=1.6))
    ax = fig.add_subplot()
    values = probs.to_numpy(float)
    # a square-root colour scale keeps the small probabilities of a long list visible
    image = ax.imshow(
        values,
        cmap="Blues",
        norm=PowerNorm(0.5, vmin=0.0, vmax=1.0),
        aspect="auto",
        interpolation="nearest",
    )
    size = label_size(max(n, k))
    ax.set_yticks(np.arange(n), [short(m) for m in probs.index], fontsize=size)
    step = 1 if k <= 30 else 5 if k <= 150 else 10
    ticks = np.arange(0, k, step)
    ax.set_xticks(ticks, [str(probs.columns[t]) for t in ticks], fontsize=size)
    ax.set_xlabel("rank (1 = best)")
    ax.xaxis.set_label_position("top")
    ax.xaxis.tick_top()
    if n <= 20 and k <= 20:
        for (i, j), v in np.ndenumerate(values):
            if v >= 0.005:
                ax.text(
                    j,
                    i,
                    f"{v:.2f}".lstrip("0"),
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="white" if v > 0.35 else "#1a1a1a",
                )
    # cell borders as two line collections (minor ticks would cost a tick object each)
    lw = 0.6 if max(n, k) <= 40 else 0.2
    ax.hlines(np.arange(0.5, n - 1), -0.5, k - 0.5, color="white", lw=lw)
    ax.vlines(np.arange(0.5, k - 1), -0.5, n - 0.5, color="white", lw=lw)
    ax.set_xlim(-0.5, k - 0.5)
    ax.set_ylim(n - 0.5, -0.5)
    bar = fig.colorbar(image, ax=ax, shrink=min(1.0, 6.0 / max(fig.get_figheight(), 1)), pad=0.02)
    bar.set_label("posterior probability of the rank (square-root scale)")
    bar.set_ticks([0.0, 0.05, 0.2, 0.5, 1.0])
    return fig
