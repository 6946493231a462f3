"""Figures of the posterior predictive checks: observed against replicated, calibration."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from bayes_dualeval.report.plots.base import BAD, POINT, finite, panel_row, short, subset, tidy


def observed_vs_replicated(panels: list) -> Figure:
    """Observed statistics against their posterior-predictive replicates, one point per row.

    Points whose observed value lies outside the replicated interval are drawn in red and
    the worst of them are labelled.

    Parameters
    ----------
    panels : list of dict
        One dict per panel with ``table`` (one row per model or item), the column names
        ``observed``, ``mean`` and optionally ``lo``, ``hi`` (replicated mean and
        interval) and ``label`` (labels of outlying points), and ``title`` and ``axis``
        (name of the statistic for the axis labels); ``annotate`` (default 6) caps the
        labelled points.

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig, axes = panel_row(len(panels), 5.0, 5.0, pad=0.3)
    for ax, spec in zip(axes, panels, strict=False):
        _observed_vs_replicated(ax, **spec)
    return fig


def _observed_vs_replicated(
    ax, *, table, observed, mean, lo=None, hi=None, label=None, title="", axis="", annotate=6
) -> None:
    obs = table[observed].to_numpy(float)
    rep = table[mean].to_numpy(float)
    ok = np.isfinite(obs) & np.isfinite(rep)
    outside = np.zeros(len(table), bool)
    n_rows = len(table)
    drawn = np.zeros(n_rows, bool)
    if lo is not None and hi is not None:
        low, high = table[lo].to_numpy(float), table[hi].to_numpy(float)
        out_all = np.isfinite(low) & np.isfinite(high) & ok & ((obs < low) | (obs > high))
        drawn[subset(n_rows, out_all)] = True
        has = np.isfinite(low) & np.isfinite(high) & ok & drawn
        if has.any():
            ax.vlines(
                obs[has],
                low[has],
                high[has],
                color="#9aa9ba",
                lw=1.0 if has.sum() <= 200 else 0.5,
                zorder=1,
            )
        outside = has & ((obs < low) | (obs > high))
    else:
        drawn[subset(n_rows)] = True
    if ok.any():
        span = np.concatenate([obs[ok], rep[ok]])
        a, b = span.min(), span.max()
        pad = 0.05 * max(b - a, 1e-6)
        ax.plot([a - pad, b + pad], [a - pad, b + pad], color="#888888", lw=0.8, ls="--", zorder=0)
    size = 22 if len(table) <= 100 else 9
    points = {"edgecolor": "white", "lw": 0.4}
    inside = ok & ~outside & drawn
    ax.scatter(obs[inside], rep[inside], s=size, color=POINT, zorder=2, **points)
    if outside.any():
        ax.scatter(
            obs[outside],
            rep[outside],
            s=size + 8,
            color=BAD,
            zorder=3,
            label="observed outside the interval",
            **points,
        )
        ax.legend(fontsize=8, loc="upper left", frameon=False)
        if label is not None:
            dist = np.abs(obs - rep)
            worst = np.flatnonzero(outside)[np.argsort(-dist[outside])][:annotate]
            for i in worst:
                ax.annotate(
                    short(table[label].iloc[i], 28),
                    (obs[i], rep[i]),
                    fontsize=7,
                    xytext=(5, -3),
                    textcoords="offset points",
                    color=BAD,
                )
    if not ok.any():
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel(f"observed {axis}")
    ax.set_ylabel(f"replicated {axis}")
    n_drawn = int(drawn.sum())
    if n_drawn < n_rows:
        title = f"{title} ({n_drawn:,} of {n_rows:,} shown)"
    ax.set_title(title, fontsize=10.5, loc="left")
    tidy(ax)


def calibration(panels: dict) -> Figure:
    """Calibration curves: observed frequency (or mean) against the predicted value per bin.

    Parameters
    ----------
    panels : dict
        Panel title to a dict with ``table`` (one row per bin), the column names
        ``predicted`` and ``observed``, optional ``lo``/``hi`` (replicated interval of the
        observed value), optional ``n`` (cells per bin, sets the marker size), ``xlabel``,
        ``ylabel`` and ``diagonal`` (draw ``y = x``; default True).

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig, axes = panel_row(len(panels), 4.8, 4.6, pad=0.4)
    for ax, (title, spec) in zip(axes, panels.items(), strict=False):
        t = spec["table"]
        x = t[spec["predicted"]].to_numpy(float)
        y = t[spec["observed"]].to_numpy(float)
        if spec.get("lo") and spec.get("hi"):
            lo, hi = t[spec["lo"]].to_numpy(float), t[spec["hi"]].to_numpy(float)
            if finite(lo) and finite(hi):
                ax.fill_between(
                    x, lo, hi, color="#c9d6e5", lw=0, step=None, label="replicated interval"
                )
        if spec.get("diagonal", True) and len(x):
            both = np.concatenate([x, y])
            both = both[np.isfinite(both)]
            if len(both):
                a, b = both.min(), both.max()
                ax.plot([a, b], [a, b], color="#888888", lw=0.8, ls="--", label="perfect")
        sizes = 24
        if spec.get("n") and spec["n"] in t:
            n = t[spec["n"]].to_numpy(float)
            sizes = 12 + 60 * np.sqrt(n / max(n.max(), 1))
        ax.plot(x, y, "-", color=POINT, lw=1.2)
        ax.scatter(
            x, y, s=sizes, color=POINT, zorder=3, edgecolor="white", lw=0.4, label="observed"
        )
        ax.set_title(title, fontsize=10.5, loc="left")
        ax.set_xlabel(spec.get("xlabel", "predicted"))
        ax.set_ylabel(spec.get("ylabel", "observed"))
        tidy(ax)
        ax.legend(fontsize=8, frameon=False, loc="upper left")
    return fig
