"""Figures of abilities per item domain: a model x domain heat map, per-domain Wright maps."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from bayes_dualeval.report.plots.base import (
    BAND,
    KIND_COLOURS,
    POINT,
    figure,
    finite,
    label_size,
    row_height,
    short,
    tidy,
)

#: Domains drawn side by side in one row of the per-domain Wright map.
WRIGHT_COLUMNS = 4


def domain_heatmap(
    board: pd.DataFrame, by_domain: pd.DataFrame, *, ci: float | None = None
) -> Figure:
    """Abilities per domain: models (rows, overall order) x domains (columns).

    Each cell is coloured by the model's ability in that domain (centred, on the
    leaderboard's scale) and shows its mean, its rank within the domain and, with
    intervals, the interval; the first column is the overall ability. A model whose
    column of colours changes across a row is stronger in some domains than others.

    Parameters
    ----------
    board : pandas.DataFrame
        The leaderboard (``model``, ``theta_mean``, ``theta_lo``, ``theta_hi``, best first).
    by_domain : pandas.DataFrame
        :func:`~bayes_dualeval.posterior.summaries.leaderboard_by_domain`.
    ci : float, optional
        Interval level (None: point estimates, no intervals shown).

    Returns
    -------
    matplotlib.figure.Figure
    """
    models = list(board["model"])
    columns = ["overall", *pd.unique(by_domain["domain"])]
    cells = pd.concat([board.assign(domain="overall"), by_domain], ignore_index=True)

    def wide(value):  # models (overall order) x columns
        return (
            cells.pivot(index="model", columns="domain", values=value)
            .reindex(index=models, columns=columns)
            .to_numpy(float)
        )

    mean, rank, lo, hi = (wide(v) for v in ("theta_mean", "rank", "theta_lo", "theta_hi"))
    with_interval = ci is not None and finite(board["theta_lo"].to_numpy(float))
    text = np.vectorize(lambda m, r, a, b: _cell(m, int(r), a, b, with_interval), otypes=[object])(
        mean, rank, lo, hi
    )
    n = len(models)
    per = 0.42 if with_interval else 0.3
    fig = figure(2.2 + 1.45 * len(columns), row_height(n, per=per, base=1.3))
    ax = fig.add_subplot()
    limit = np.nanmax(np.abs(mean)) if np.isfinite(mean).any() else 1.0
    image = ax.imshow(mean, cmap="RdBu", vmin=-limit, vmax=limit, aspect="auto")
    size = max(5.5, label_size(n) - 1.5)
    for (i, j), value in np.ndenumerate(text):
        dark = np.isfinite(mean[i, j]) and abs(mean[i, j]) > 0.6 * limit
        ax.text(j, i, value, ha="center", va="center", fontsize=size,
                color="white" if dark else "#222222")  # fmt: skip
    ax.set_xticks(range(len(columns)), [short(c, 18) for c in columns], fontsize=9)
    ax.xaxis.tick_top()
    ax.set_yticks(range(n), [short(m, 32) for m in models], fontsize=label_size(n))
    ax.axvline(0.5, color="white", lw=3)
    what = f"mean, rank in the domain and {ci:.0%} interval" if with_interval else "mean and rank"
    ax.set_title(f"Ability by domain ({what})", loc="left", fontsize=11)
    fig.colorbar(image, ax=ax, shrink=0.6, label="\u03b8 (centred)")
    return fig


def _cell(mean, rank, lo, hi, with_interval: bool) -> str:
    head = f"{mean:+.2f} (#{rank})"
    return f"{head}\n[{lo:+.2f}, {hi:+.2f}]" if with_interval else head


def domain_wright(
    by_domain: pd.DataFrame, items: pd.DataFrame, *, ci: float | None = None, bins: int = 20
) -> Figure:
    """Per-domain Wright maps: each domain's model abilities over its items' difficulties.

    One column per domain (:data:`WRIGHT_COLUMNS` to a row), all on one horizontal axis: on
    top the models' abilities in that domain (best at the top, with intervals), below the
    histogram of the posterior mean difficulties of the domain's items, static questions
    and arena prompts stacked. The shaded band spans the domain's abilities.

    Parameters
    ----------
    by_domain : pandas.DataFrame
        :func:`~bayes_dualeval.posterior.summaries.leaderboard_by_domain`.
    items : pandas.DataFrame
        The item table (``domain``, ``kind``, ``b_mean`` on the centred scale), with only
        the items whose difficulty is identified.
    ci : float, optional
        Interval level (None: no intervals).
    bins : int
        Histogram bins over the common range.

    Returns
    -------
    matplotlib.figure.Figure
    """
    domains = list(pd.unique(by_domain["domain"]))
    n_models = int(by_domain.groupby("domain").size().max())
    k = len(domains)
    cols = min(k, WRIGHT_COLUMNS)
    rows = int(np.ceil(k / cols))
    top = max(1.5, 0.17 * n_models + 0.4)
    fig = figure(3.3 * cols + 0.6, rows * (top + 1.3) + 0.5)
    grid = fig.add_gridspec(2 * rows, cols, height_ratios=[top, 1.1] * rows)
    values = by_domain["theta_mean"].to_numpy(float)
    lo_all = by_domain["theta_lo"].to_numpy(float)
    hi_all = by_domain["theta_hi"].to_numpy(float)
    with_interval = ci is not None and finite(lo_all) and finite(hi_all)
    b_all = items["b_mean"].to_numpy(float)
    span = np.concatenate([values, b_all] + ([lo_all, hi_all] if with_interval else []))
    span = span[np.isfinite(span)]
    left, right = (span.min(), span.max()) if len(span) else (-1.0, 1.0)
    pad = 0.04 * max(right - left, 1e-6)
    edges = np.linspace(left - pad, right + pad, bins + 1)
    first = None
    for d, domain in enumerate(domains):
        r, c = divmod(d, cols)
        board = by_domain[by_domain["domain"] == domain]
        ax = fig.add_subplot(grid[2 * r, c], sharex=first)
        first = first or ax
        mean = board["theta_mean"].to_numpy(float)
        y = np.arange(len(board))[::-1].astype(float)
        if with_interval:
            ax.hlines(y, board["theta_lo"], board["theta_hi"], color=POINT, lw=1.2)
        ax.plot(mean, y, "o", color=POINT, ms=3.5)
        ax.set_yticks(y, [short(m, 20) for m in board["model"]],
                      fontsize=max(5.5, label_size(len(board)) - 1.5))  # fmt: skip
        ax.set_ylim(-0.7, len(board) - 0.3)
        ax.set_title(short(domain, 30), loc="left", fontsize=10)
        tidy(ax, grid="x")
        ax.tick_params(labelbottom=False)
        h_ax = fig.add_subplot(grid[2 * r + 1, c], sharex=first)
        h_ax.axvspan(np.nanmin(mean), np.nanmax(mean), color=BAND, zorder=0, lw=0)
        sub = items[items["domain"] == domain]
        kinds = [kind for kind in ("static", "arena") if (sub["kind"] == kind).any()]
        if kinds:
            h_ax.hist([sub.loc[sub["kind"] == kind, "b_mean"].to_numpy(float) for kind in kinds],
                      bins=edges, stacked=True, label=[f"{kind} ({(sub['kind'] == kind).sum()})"
                                                       for kind in kinds],
                      color=[KIND_COLOURS[kind] for kind in kinds], alpha=0.85,
                      edgecolor="white", lw=0.4, zorder=2)  # fmt: skip
            h_ax.legend(fontsize=7, frameon=False, loc="upper right")
        h_ax.set_ylabel("items", fontsize=8)
        h_ax.tick_params(labelsize=8)
        tidy(h_ax, grid=None)
        h_ax.set_xlabel("\u03b8 (ability) and b (difficulty), centred", fontsize=8)
    return fig
