"""Figures of ability dimensions: loadings by domain, and the models on two dimensions."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from bayes_dualeval.report.plots.base import (
    POINT,
    figure,
    finite,
    label_size,
    row_height,
    short,
    tidy,
)

#: Models named on the two-dimensional map (the rest are drawn, unnamed).
MAX_NAMED = 40


def loading_heatmap(by_domain: pd.DataFrame, labels: dict) -> Figure:
    """Mean loading of each domain's items (rows) on each dimension (columns).

    Parameters
    ----------
    by_domain : pandas.DataFrame
        :func:`~bayes_dualeval.posterior.dimension_tables.loading_by_domain` (domains x
        dimensions, rows summing to one).
    labels : dict
        Dimension number -> name (:func:`~bayes_dualeval.posterior.dimension_tables.
        dimension_labels`).

    Returns
    -------
    matplotlib.figure.Figure
    """
    values = by_domain.to_numpy(float)
    n, k = values.shape
    fig = figure(2.6 + 1.2 * k, row_height(n, per=0.4, base=1.5))
    ax = fig.add_subplot()
    image = ax.imshow(values, cmap="Blues", vmin=0.0, vmax=1.0, aspect="auto")
    for (i, j), value in np.ndenumerate(values):
        ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=9,
                color="white" if value > 0.6 else "#222222")  # fmt: skip
    names = [f"{d}" + (f"\n{short(labels.get(d, ''), 14)}" if labels.get(d) else "")
             for d in by_domain.columns]  # fmt: skip
    ax.set_xticks(range(k), names, fontsize=9)
    ax.xaxis.tick_top()
    ax.set_yticks(range(n), [short(d, 24) for d in by_domain.index], fontsize=label_size(n))
    ax.set_title("Mean loading of each domain's items on each dimension", loc="left", fontsize=11)
    fig.colorbar(image, ax=ax, shrink=0.6, label="loading (share of a_q)")
    return fig


def ability_map(abilities: pd.DataFrame, labels: dict, *, ci: float | None = None) -> Figure:
    """The models on the first two dimensions, with their intervals as crosses.

    Parameters
    ----------
    abilities : pandas.DataFrame
        :func:`~bayes_dualeval.posterior.dimension_tables.abilities_table`.
    labels : dict
        Dimension number -> name.
    ci : float, optional
        Interval level (None: points only).

    Returns
    -------
    matplotlib.figure.Figure
    """
    dims = sorted(pd.unique(abilities["dimension"]))[:2]
    wide = {
        value: abilities.pivot(index="model", columns="dimension", values=value)[dims]
        for value in ("theta_mean", "theta_lo", "theta_hi")
    }
    models = list(pd.unique(abilities["model"]))  # leaderboard order
    x, y = (wide["theta_mean"].reindex(models)[d].to_numpy(float) for d in dims)
    fig = figure(6.4, 5.6)
    ax = fig.add_subplot()
    if ci is not None and finite(abilities["theta_lo"].to_numpy(float)):
        lo = {d: wide["theta_lo"].reindex(models)[d].to_numpy(float) for d in dims}
        hi = {d: wide["theta_hi"].reindex(models)[d].to_numpy(float) for d in dims}
        ax.errorbar(x, y, xerr=[x - lo[dims[0]], hi[dims[0]] - x],
                    yerr=[y - lo[dims[1]], hi[dims[1]] - y], fmt="none",
                    ecolor="#b0b0b0", lw=0.8, zorder=1)  # fmt: skip
    ax.scatter(x, y, s=22, color=POINT, zorder=2)
    for name, a, b in list(zip(models, x, y, strict=True))[:MAX_NAMED]:
        ax.annotate(short(name, 20), (a, b), xytext=(3, 3), textcoords="offset points",
                    fontsize=7)  # fmt: skip
    low = min(np.nanmin(x), np.nanmin(y))
    high = max(np.nanmax(x), np.nanmax(y))
    ax.plot([low, high], [low, high], color="#dddddd", lw=1, zorder=0)
    ax.set_xlabel(_axis(dims[0], labels))
    ax.set_ylabel(_axis(dims[1], labels))
    what = f", {ci:.0%} intervals" if ci is not None else ""
    ax.set_title(f"Models on the first two ability dimensions (centred{what})", loc="left",
                 fontsize=11)  # fmt: skip
    tidy(ax)
    return fig


def _axis(dim, labels: dict) -> str:
    label = labels.get(int(dim), "")
    return f"\u03b8, dimension {dim}" + (f" ({label})" if label else "")
