"""Figures of the items: Wright map, item curves, difficulty against discrimination."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import FormatStrFormatter

from bayes_dualeval.report.plots.base import (
    BAND,
    KIND_COLOURS,
    POINT,
    figure,
    finite,
    group_colour,
    label_size,
    panel_row,
    short,
    shown,
    subset,
    tidy,
)


def wright_map(
    models: pd.DataFrame, items: pd.DataFrame, *, ci: float | None = None, bins: int = 30
) -> Figure:
    """Wright map: model abilities and item difficulties on one shared latent axis.

    The top panel shows each model's ability (mean and interval, best at the top); below
    it, one histogram per item group (kind and source) of the items' posterior mean
    difficulties, on the same horizontal axis. The shaded band in each item panel is the
    range of the models' abilities: items far outside it separate no models.

    Parameters
    ----------
    models : pandas.DataFrame
        ``model``, ``theta_mean``, ``theta_lo``, ``theta_hi``, best first (centred scale).
    items : pandas.DataFrame
        ``group``, ``kind`` and ``b_mean`` per item, on the same (centred) scale.
    ci : float, optional
        Interval level, for the title.
    bins : int
        Histogram bins over the common range.

    Returns
    -------
    matplotlib.figure.Figure
    """
    n = len(models)
    groups = list(pd.unique(items["group"]))
    top = max(1.6, 0.2 * n + 0.5)
    per_group = 1.15
    fig = figure(8.5, top + per_group * len(groups) + 0.9)
    grid = fig.add_gridspec(1 + len(groups), 1, height_ratios=[top] + [per_group] * len(groups))
    ax = fig.add_subplot(grid[0])
    mean = models["theta_mean"].to_numpy(float)
    lo, hi = models["theta_lo"].to_numpy(float), models["theta_hi"].to_numpy(float)
    has_interval = finite(lo) and finite(hi)
    y = np.arange(n)[::-1].astype(float)
    if has_interval:
        ax.hlines(y, lo, hi, color=POINT, lw=1.4)
    ax.plot(mean, y, "o", color=POINT, ms=4)
    ax.set_yticks(y, [short(m, 32) for m in models["model"]], fontsize=label_size(n) - 0.5)
    ax.set_ylim(-0.7, n - 0.3)
    what = f"mean and {ci:.0%} interval" if has_interval and ci is not None else "point estimate"
    ax.set_title(f"Wright map: models ({what}) against item difficulties", loc="left", fontsize=11)
    b = items["b_mean"].to_numpy(float)
    values = np.concatenate([mean, b] + ([lo, hi] if has_interval else []))
    values = values[np.isfinite(values)]
    left, right = (values.min(), values.max()) if len(values) else (-1.0, 1.0)
    pad = 0.04 * max(right - left, 1e-6)
    left, right = left - pad, right + pad
    edges = np.linspace(left, right, bins + 1)
    ax.set_xlim(left, right)
    tidy(ax, grid="x", colour="#e3e3e3")
    ax.tick_params(labelbottom=False)
    axes = [ax]
    for k, group in enumerate(groups):
        sub = items[items["group"] == group]
        g_ax = fig.add_subplot(grid[k + 1], sharex=ax)
        colour = KIND_COLOURS.get(str(sub["kind"].iloc[0]), group_colour(k))
        g_ax.axvspan(np.nanmin(mean), np.nanmax(mean), color=BAND, zorder=0, lw=0)
        _difficulty_histogram(g_ax, sub["b_mean"].to_numpy(float), edges, colour)
        g_ax.text(
            0.005,
            0.93,
            f"{short(group, 60)}  ({len(sub)} items)",
            transform=g_ax.transAxes,
            va="top",
            ha="left",
            fontsize=8.5,
            bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 1},
        )
        tidy(g_ax, grid=None)
        if k < len(groups) - 1:
            g_ax.tick_params(labelbottom=False)
        axes.append(g_ax)
    axes[-1].set_xlabel("latent scale, centred (\u03b8: ability; b: difficulty, where P = 0.5)")
    return fig


def _difficulty_histogram(ax, b: np.ndarray, edges: np.ndarray, colour: str) -> None:
    """One item group's histogram of difficulties, with a tick per item when few."""
    ax.hist(b, bins=edges, color=colour, alpha=0.85, edgecolor="white", lw=0.4, zorder=2)
    top_y = 1.3 * ax.get_ylim()[1]  # headroom for the group's label
    bottom = 0.0
    if len(b) <= 300:
        ax.plot(
            b, np.full(len(b), -0.06 * top_y), "|", color=colour, ms=6, alpha=0.7, clip_on=False
        )
        bottom = -0.12 * top_y
    ax.set_ylim(bottom, top_y)
    ax.yaxis.get_major_locator().set_params(integer=True, nbins=3)
    ax.set_ylabel("items", fontsize=8)
    ax.tick_params(labelsize=8)


def item_curves(
    grid: np.ndarray,
    panels: dict,
    *,
    abilities: np.ndarray | None = None,
    ci: float | None = None,
    ylabel: str = "P(success) = \u03c3(a(\u03b8 \u2212 b))",
) -> Figure:
    """Item characteristic curves: ``P(success)`` against ability, with posterior bands.

    Parameters
    ----------
    grid : numpy.ndarray
        Abilities (centred scale) the curves are evaluated at.
    panels : dict
        Panel title to a list of curves; each curve a dict with ``label``, ``mean`` and
        optionally ``lo`` and ``hi`` (arrays over ``grid``).
    abilities : numpy.ndarray, optional
        The models' abilities, drawn as ticks along the bottom.
    ci : float, optional
        Interval level of the bands, for the caption line.
    ylabel : str
        Label of the probability axis (the item response function).

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig, axes = panel_row(len(panels), 5.6, 4.8, sharey=True)
    for ax, (title, curves) in zip(axes, panels.items(), strict=False):
        for c, curve in enumerate(curves):
            colour = group_colour(c)
            ax.plot(grid, curve["mean"], color=colour, lw=1.8, label=short(curve["label"], 80))
            if curve.get("lo") is not None and finite(curve["lo"]):
                ax.fill_between(grid, curve["lo"], curve["hi"], color=colour, alpha=0.12, lw=0)
                for edge in (curve["lo"], curve["hi"]):
                    ax.plot(grid, edge, color=colour, lw=0.6, alpha=0.5)
        if abilities is not None and len(abilities):
            ax.plot(
                abilities,
                np.full(len(abilities), -0.03),
                "|",
                color="#444444",
                ms=8,
                clip_on=False,
            )
        ax.set_ylim(-0.05, 1.02)
        ax.set_xlim(grid[0], grid[-1])
        ax.set_title(title, fontsize=10.5, loc="left")
        ax.set_xlabel("ability \u03b8 (centred)")
        ax.legend(
            fontsize=7.5, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=1, frameon=False
        )
        tidy(ax)
    axes[0].set_ylabel(ylabel)
    if ci is not None:
        fig.suptitle(
            f"bands: {ci:.0%} posterior intervals; ticks: the models' abilities",
            fontsize=8.5,
            x=0.01,
            ha="left",
            color="#555555",
        )
    return fig


def difficulty_discrimination(items: pd.DataFrame) -> Figure:
    """Difficulty against discrimination, one panel per item group.

    Parameters
    ----------
    items : pandas.DataFrame
        ``group``, ``b_mean`` and ``a_mean`` per item.

    Returns
    -------
    matplotlib.figure.Figure
    """
    groups = list(pd.unique(items["group"]))
    ncol = min(3, max(1, len(groups)))
    nrow = int(np.ceil(len(groups) / ncol))
    fig = figure(4.2 * ncol + 0.6, 3.6 * nrow + 0.4)
    axes = fig.subplots(nrow, ncol, sharex=True, sharey=True, squeeze=False).ravel()
    a_all = items["a_mean"].to_numpy(float)
    a_all = a_all[np.isfinite(a_all) & (a_all > 0)]
    for k, group in enumerate(groups):
        ax = axes[k]
        sub = items[items["group"] == group]
        drawn = sub.iloc[subset(len(sub))]
        ax.scatter(
            drawn["b_mean"],
            drawn["a_mean"],
            s=14,
            color=group_colour(k),
            alpha=0.8,
            edgecolor="white",
            lw=0.3,
            zorder=3,
        )
        ax.set_title(
            f"{short(group, 40)} ({len(sub)} items{shown(len(sub), len(drawn))})",
            fontsize=10,
            loc="left",
        )
        ax.axhline(1.0, color="#999999", lw=0.7, ls=":")
        tidy(ax)
    log = len(a_all) > 0 and a_all.max() / a_all.min() > 4
    if log:
        axes[0].set_yscale("log")
        for ax in axes[: len(groups)]:
            ax.yaxis.set_major_formatter(FormatStrFormatter("%.3g"))
            ax.yaxis.set_minor_formatter(FormatStrFormatter("%.3g"))
            ax.tick_params(axis="y", which="both", labelsize=8.5)
    for ax in axes[len(groups) :]:
        ax.set_visible(False)
    fig.supxlabel("difficulty b (posterior mean, centred scale)", fontsize=10)
    fig.supylabel(
        "discrimination a (posterior mean" + (", log scale)" if log else ")"), fontsize=10
    )
    return fig
