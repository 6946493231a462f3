"""The report's figures: one function per figure, each returning a matplotlib Figure.

Every function takes plain tables or arrays (never an ``InferenceData``), so a figure can
be redrawn from the CSV tables of a run. Figures are built on
:class:`matplotlib.figure.Figure` with the Agg canvas: no pyplot state, no window, safe in
threads and on machines without a display. Heights grow with the number of rows, so a
leaderboard of 100 models stays readable; long labels are shortened with an ellipsis
(the tables keep the full names).
"""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import PowerNorm
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FormatStrFormatter

#: Colour of each item kind.
KIND_COLOURS = {"static": "#3a6ea5", "arena": "#d9822b"}
#: Colours cycled over item groups.
GROUP_COLOURS = (
    "#3a6ea5", "#d9822b", "#3b9b5b", "#b5475a", "#7b5ea7", "#8c6d46", "#c4589f", "#6b7b8c",
    "#a8a13a", "#3aa3a8",
)  # fmt: skip
POINT = "#1f3b5c"
BAD = "#c0392b"
BAND = "#eef1f5"
LABEL_CHARS = 42
#: Most points (items, models) drawn in one scatter panel; beyond it a seeded random
#: subset is drawn (points outside their interval first) and the title says how many.
MAX_POINTS = 3000


def short(label, n: int = LABEL_CHARS) -> str:
    """``label`` as text of at most ``n`` characters, cut in the middle.

    Long model names often share a prefix (an organisation, a family) and differ in
    their ending (size, version, suffix), so both ends are kept around an ellipsis.
    """
    text = str(label)
    if len(text) <= n:
        return text
    head = (n - 1) - (n - 1) // 2
    return text[:head] + "\u2026" + text[len(text) - (n - 1 - head) :]


def to_png(fig: Figure, *, dpi: int = 110) -> bytes:
    """Render ``fig`` to PNG bytes (no metadata).

    The figure's constrained layout already fits every label, legend and colour bar in
    the canvas, so the canvas is saved as it is: a tight bounding box would draw the whole
    figure twice (a third of the report's time).
    """
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None})
    return buf.getvalue()


def _figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _row_height(n: int, per: float = 0.22, base: float = 1.4, least: float = 2.6) -> float:
    return max(least, base + per * n)


def _label_size(n: int) -> float:
    return 9.0 if n <= 30 else 8.0 if n <= 60 else 7.0 if n <= 100 else 6.0


def _group_colour(k: int) -> str:
    return GROUP_COLOURS[k % len(GROUP_COLOURS)]


def _finite(x) -> bool:
    return bool(np.all(np.isfinite(np.asarray(x, dtype=float))))


def _subset(n: int, first=None, limit: int = MAX_POINTS) -> np.ndarray:
    """Rows to draw: all ``n`` when at most ``limit``, else ``limit`` of them (sorted).

    Rows in the boolean mask ``first`` are taken before the others; within each set the
    choice is a seeded random sample, so a figure is the same every time it is drawn.
    """
    if n <= limit:
        return np.arange(n)
    rng = np.random.default_rng(0)
    first = np.zeros(n, bool) if first is None else np.asarray(first, bool)
    chosen = []
    for rows in (np.flatnonzero(first), np.flatnonzero(~first)):
        take = min(len(rows), limit - sum(len(c) for c in chosen))
        chosen.append(rng.choice(rows, size=take, replace=False))
    return np.sort(np.concatenate(chosen))


def _shown(n: int, shown: int) -> str:
    return f"; {shown:,} of {n:,} shown" if shown < n else ""


# --------------------------------------------------------------------------- abilities


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
    fig = _figure(7.5, _row_height(n))
    ax = fig.add_subplot()
    y = np.arange(n)[::-1].astype(float)
    mean = table["theta_mean"].to_numpy(float)
    lo, hi = table["theta_lo"].to_numpy(float), table["theta_hi"].to_numpy(float)
    has_interval = _finite(lo) and _finite(hi) and n > 0
    if has_interval:  # tiers need intervals (a point estimate makes every model its own)
        _tier_bands(ax, y, table["tier"].to_numpy())
        ax.hlines(y, lo, hi, color=POINT, lw=1.6, zorder=2)
    ax.plot(mean, y, "o", color=POINT, ms=5, zorder=3)
    ax.axvline(0.0, color="#999999", lw=0.8, ls=":", zorder=1)
    ax.set_yticks(y, [short(m) for m in table["model"]], fontsize=_label_size(n))
    ax.set_ylim(-0.7, n - 0.3)
    ax.set_xlabel("ability \u03b8 (centred: mean over models = 0)")
    if has_interval and ci is not None:
        title = f"Abilities: posterior mean and {ci:.0%} interval"
    else:
        title = "Abilities: point estimates (no intervals)"
    ax.set_title(title, fontsize=11, loc="left")
    ax.grid(axis="x", color="#e3e3e3", lw=0.6)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
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
    fig = _figure(width, _row_height(n, base=1.6))
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
    size = _label_size(max(n, k))
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


# --------------------------------------------------------------------------- items


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
    fig = _figure(8.5, top + per_group * len(groups) + 0.9)
    grid = fig.add_gridspec(1 + len(groups), 1, height_ratios=[top] + [per_group] * len(groups))
    ax = fig.add_subplot(grid[0])
    mean = models["theta_mean"].to_numpy(float)
    lo, hi = models["theta_lo"].to_numpy(float), models["theta_hi"].to_numpy(float)
    has_interval = _finite(lo) and _finite(hi)
    y = np.arange(n)[::-1].astype(float)
    if has_interval:
        ax.hlines(y, lo, hi, color=POINT, lw=1.4)
    ax.plot(mean, y, "o", color=POINT, ms=4)
    ax.set_yticks(y, [short(m, 32) for m in models["model"]], fontsize=_label_size(n) - 0.5)
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
    ax.grid(axis="x", color="#e3e3e3", lw=0.6)
    ax.set_axisbelow(True)
    ax.tick_params(labelbottom=False)
    axes = [ax]
    for k, group in enumerate(groups):
        sub = items[items["group"] == group]
        g_ax = fig.add_subplot(grid[k + 1], sharex=ax)
        kind = str(sub["kind"].iloc[0])
        colour = KIND_COLOURS.get(kind, _group_colour(k))
        g_ax.axvspan(np.nanmin(mean), np.nanmax(mean), color=BAND, zorder=0, lw=0)
        g_ax.hist(
            sub["b_mean"].to_numpy(float),
            bins=edges,
            color=colour,
            alpha=0.85,
            edgecolor="white",
            lw=0.4,
            zorder=2,
        )
        top_y = 1.3 * g_ax.get_ylim()[1]  # headroom for the group's label
        bottom = 0.0
        if len(sub) <= 300:
            g_ax.plot(
                sub["b_mean"],
                np.full(len(sub), -0.06 * top_y),
                "|",
                color=colour,
                ms=6,
                alpha=0.7,
                clip_on=False,
            )
            bottom = -0.12 * top_y
        g_ax.set_ylim(bottom, top_y)
        g_ax.yaxis.get_major_locator().set_params(integer=True, nbins=3)
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
        g_ax.set_ylabel("items", fontsize=8)
        g_ax.tick_params(labelsize=8)
        if k < len(groups) - 1:
            g_ax.tick_params(labelbottom=False)
        axes.append(g_ax)
    axes[-1].set_xlabel("latent scale, centred (\u03b8: ability; b: difficulty, where P = 0.5)")
    for a in axes:
        for side in ("top", "right"):
            a.spines[side].set_visible(False)
    return fig


def item_curves(
    grid: np.ndarray,
    panels: dict,
    *,
    abilities: np.ndarray | None = None,
    ci: float | None = None,
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

    Returns
    -------
    matplotlib.figure.Figure
    """
    k = max(1, len(panels))
    fig = _figure(5.6 * k, 4.8)
    axes = fig.subplots(1, k, sharey=True, squeeze=False)[0]
    for ax, (title, curves) in zip(axes, panels.items(), strict=False):
        for c, curve in enumerate(curves):
            colour = _group_colour(c)
            ax.plot(grid, curve["mean"], color=colour, lw=1.8, label=short(curve["label"], 80))
            if curve.get("lo") is not None and _finite(curve["lo"]):
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
        ax.grid(color="#ececec", lw=0.6)
        ax.legend(
            fontsize=7.5, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=1, frameon=False
        )
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    axes[0].set_ylabel("P(success) = \u03c3(a(\u03b8 \u2212 b))")
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
    fig = _figure(4.2 * ncol + 0.6, 3.6 * nrow + 0.4)
    axes = fig.subplots(nrow, ncol, sharex=True, sharey=True, squeeze=False).ravel()
    a_all = items["a_mean"].to_numpy(float)
    a_all = a_all[np.isfinite(a_all) & (a_all > 0)]
    for k, group in enumerate(groups):
        ax = axes[k]
        sub = items[items["group"] == group]
        drawn = sub.iloc[_subset(len(sub))]
        colour = _group_colour(k)
        ax.scatter(
            drawn["b_mean"],
            drawn["a_mean"],
            s=14,
            color=colour,
            alpha=0.8,
            edgecolor="white",
            lw=0.3,
            zorder=3,
        )
        ax.set_title(
            f"{short(group, 40)} ({len(sub)} items{_shown(len(sub), len(drawn))})",
            fontsize=10,
            loc="left",
        )
        ax.axhline(1.0, color="#999999", lw=0.7, ls=":")
        ax.grid(color="#ececec", lw=0.6)
        ax.set_axisbelow(True)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
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


# --------------------------------------------------------------------------- checks


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
    k = max(1, len(panels))
    fig = _figure(5.0 * k + 0.3, 5.0)
    axes = fig.subplots(1, k, squeeze=False)[0]
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
        drawn[_subset(n_rows, out_all)] = True
    else:
        drawn[_subset(n_rows)] = True
    if lo is not None and hi is not None:
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
    if ok.any():
        span = np.concatenate([obs[ok], rep[ok]])
        a, b = span.min(), span.max()
        pad = 0.05 * max(b - a, 1e-6)
        ax.plot([a - pad, b + pad], [a - pad, b + pad], color="#888888", lw=0.8, ls="--", zorder=0)
    size = 22 if len(table) <= 100 else 9
    ax.scatter(
        obs[ok & ~outside & drawn],
        rep[ok & ~outside & drawn],
        s=size,
        color=POINT,
        zorder=2,
        edgecolor="white",
        lw=0.4,
    )
    if outside.any():
        ax.scatter(
            obs[outside],
            rep[outside],
            s=size + 8,
            color=BAD,
            zorder=3,
            edgecolor="white",
            lw=0.4,
            label="observed outside the interval",
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
    shown = int(drawn.sum())
    if shown < n_rows:
        title = f"{title} ({shown:,} of {n_rows:,} shown)"
    ax.set_title(title, fontsize=10.5, loc="left")
    ax.grid(color="#ececec", lw=0.6)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


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
    k = max(1, len(panels))
    fig = _figure(4.8 * k + 0.4, 4.6)
    axes = fig.subplots(1, k, squeeze=False)[0]
    for ax, (title, spec) in zip(axes, panels.items(), strict=False):
        t = spec["table"]
        x = t[spec["predicted"]].to_numpy(float)
        y = t[spec["observed"]].to_numpy(float)
        if spec.get("lo") and spec.get("hi"):
            lo, hi = t[spec["lo"]].to_numpy(float), t[spec["hi"]].to_numpy(float)
            if _finite(lo) and _finite(hi):
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
        ax.grid(color="#ececec", lw=0.6)
        ax.set_axisbelow(True)
        ax.legend(fontsize=8, frameon=False, loc="upper left")
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    return fig


# --------------------------------------------------------------------------- diagnostics


def rhat_ess(table: pd.DataFrame, *, rhat_max: float = 1.01, ess_min: float = 400) -> Figure:
    """Histograms of R-hat and effective sample sizes over every checked parameter.

    Parameters
    ----------
    table : pandas.DataFrame
        One row per parameter: ``rhat``, ``ess_bulk``, ``ess_tail``.
    rhat_max, ess_min : float
        Thresholds, drawn as red lines.

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig = _figure(10.5, 3.4)
    ax_r, ax_e = fig.subplots(1, 2)
    rhat = table["rhat"].to_numpy(float)
    rhat = rhat[np.isfinite(rhat)]
    if len(rhat):
        ax_r.hist(rhat, bins=40, color=POINT, alpha=0.85)
        ax_r.axvline(rhat_max, color=BAD, lw=1.2, label=f"limit {rhat_max}")
        ax_r.legend(fontsize=8, frameon=False)
    else:
        ax_r.text(
            0.5,
            0.5,
            "R-hat needs two or more chains",
            ha="center",
            va="center",
            transform=ax_r.transAxes,
            fontsize=9,
        )
    ax_r.set_xlabel("R-hat (rank-normalised split)")
    ax_r.set_ylabel("parameters")
    ess = {k: table[k].to_numpy(float) for k in ("ess_bulk", "ess_tail")}
    finite = np.concatenate([v[np.isfinite(v) & (v > 0)] for v in ess.values()])
    if len(finite):
        edges = np.geomspace(max(finite.min() * 0.9, 1.0), max(finite.max() * 1.1, 2.0), 40)
        for (name, values), colour in zip(ess.items(), (POINT, "#d9822b"), strict=True):
            ax_e.hist(
                values[np.isfinite(values)],
                bins=edges,
                color=colour,
                alpha=0.6,
                label=name.replace("_", " "),
            )
        ax_e.set_xscale("log")
        ax_e.axvline(ess_min, color=BAD, lw=1.2, label=f"minimum {ess_min:g}")
        ax_e.legend(fontsize=8, frameon=False)
    ax_e.set_xlabel("effective sample size")
    for ax in (ax_r, ax_e):
        ax.grid(color="#ececec", lw=0.6)
        ax.set_axisbelow(True)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    return fig


def rank_plots(draws: dict, *, bins: int = 20) -> Figure:
    """Rank plots: per-chain histograms of the ranks of pooled draws.

    With well-mixed chains every chain's ranks are uniform, so each chain's histogram
    stays close to the dashed line; a chain stuck high or low shows as a tilted or
    U-shaped histogram.

    Parameters
    ----------
    draws : dict
        Parameter label to an array of shape ``(chain, draw)``.
    bins : int
        Histogram bins over the ranks.

    Returns
    -------
    matplotlib.figure.Figure
    """
    k = max(1, len(draws))
    ncol = min(3, k)
    nrow = int(np.ceil(k / ncol))
    fig = _figure(4.0 * ncol, 2.6 * nrow + 0.3)
    axes = fig.subplots(nrow, ncol, squeeze=False).ravel()
    for ax, (name, values) in zip(axes, draws.items(), strict=False):
        values = np.asarray(values, float)
        n_chain, n_draw = values.shape
        order = values.ravel().argsort(kind="stable").argsort(kind="stable")
        ranks = order.reshape(n_chain, n_draw)
        edges = np.linspace(0, n_chain * n_draw, bins + 1)
        for c in range(n_chain):
            counts, _ = np.histogram(ranks[c], bins=edges)
            ax.stairs(counts, edges, color=_group_colour(c), lw=1.3, baseline=None)
        expected = n_draw / bins
        ax.axhline(expected, color="#444444", lw=0.9, ls="--")
        ax.set_ylim(0, max(2.0 * expected, 1.08 * ax.get_ylim()[1]))
        ax.set_title(short(name, 40), fontsize=9.5, loc="left")
        ax.set_yticks([])
        ax.set_xticks([])
        ax.set_xlabel("rank of draw", fontsize=8)
        for side in ("top", "right", "left"):
            ax.spines[side].set_visible(False)
    for ax in axes[len(draws) :]:
        ax.set_visible(False)
    handles = [
        Line2D([], [], color=_group_colour(c), lw=1.3)
        for c in range(np.asarray(next(iter(draws.values()))).shape[0] if draws else 0)
    ]
    if handles:
        fig.legend(
            handles,
            [f"chain {c}" for c in range(len(handles))],
            loc="outside lower center",
            ncol=min(8, len(handles)),
            fontsize=8,
            frameon=False,
        )
    return fig


def loss_trace(trace) -> Figure:
    """Optimisation loss against step (SVI's negative ELBO).

    Parameters
    ----------
    trace : sequence of (step, loss)

    Returns
    -------
    matplotlib.figure.Figure
    """
    data = np.asarray(trace, float).reshape(-1, 2)
    fig = _figure(7.0, 3.2)
    ax = fig.add_subplot()
    ax.plot(data[:, 0], data[:, 1], color=POINT, lw=1.2)
    if len(data) and np.all(data[:, 1] > 0) and data[:, 1].max() / data[:, 1].min() > 10:
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
        ax.yaxis.set_minor_formatter(FormatStrFormatter("%g"))
    ax.set_xlabel("step")
    ax.set_ylabel("loss (negative ELBO)")
    ax.grid(color="#ececec", lw=0.6)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return fig
