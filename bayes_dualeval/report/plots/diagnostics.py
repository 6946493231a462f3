"""Figures of the sampler's diagnostics: R-hat and ESS histograms, rank plots, SVI loss."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FormatStrFormatter

from bayes_dualeval.posterior.convergence import LIMITS
from bayes_dualeval.report.plots.base import BAD, POINT, figure, group_colour, short, tidy


def rhat_ess(
    table: pd.DataFrame,
    *,
    rhat_max: float = LIMITS.rhat_max,
    ess_min: float = LIMITS.ess_min,
) -> Figure:
    """Histograms of R-hat and effective sample sizes over every checked parameter.

    Parameters
    ----------
    table : pandas.DataFrame
        One row per parameter: ``rhat``, ``ess_bulk``, ``ess_tail``.
    rhat_max, ess_min : float, optional
        Thresholds, drawn as red lines; default those of
        :data:`~bayes_dualeval.posterior.convergence.LIMITS`.

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig = figure(10.5, 3.4)
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
        tidy(ax)
    return fig


def rank_plots(draws: dict, *, bins: int = 20) -> Figure:
    """Rank plots (:func:`arviz.plot_rank`): per-chain histograms of the ranks of all draws.

    All draws of a parameter are ranked together and each chain's ranks are histogrammed,
    one row of bars per chain. With well-mixed chains every row is flat around its dashed
    line; a chain stuck high or low leans to one side.

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
    import arviz as az

    k = max(1, len(draws))
    ncol = min(3, k)
    nrow = int(np.ceil(k / ncol))
    fig = figure(4.0 * ncol, 2.6 * nrow + 0.3)
    axes = fig.subplots(nrow, ncol, squeeze=False).ravel()
    n_chain = np.asarray(next(iter(draws.values()))).shape[0] if draws else 0
    colours = [group_colour(c) for c in range(n_chain)]
    if draws:
        values = {f"v{k}": np.asarray(v, float) for k, v in enumerate(draws.values())}
        az.plot_rank(
            values,
            ax=axes[: len(draws)],
            kind="bars",
            bins=bins,
            colors=colours,
            labels=False,
            ref_line_kwargs={"color": "#444444", "lw": 0.9},
        )
    for ax, name in zip(axes, draws, strict=False):
        ax.set_title(short(name, 40), fontsize=9.5, loc="left")
        ax.set_xticks([])
        ax.set_xlabel("rank of draw (all chains)", fontsize=8)
        tidy(ax, grid=None, sides=("top", "right", "left"))
    for ax in axes[len(draws) :]:
        ax.set_visible(False)
    if colours:
        fig.legend(
            [Line2D([], [], color=c, lw=6) for c in colours],
            [f"chain {c}" for c in range(n_chain)],
            loc="outside lower center",
            ncol=min(8, n_chain),
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
    fig = figure(7.0, 3.2)
    ax = fig.add_subplot()
    ax.plot(data[:, 0], data[:, 1], color=POINT, lw=1.2)
    if len(data) and np.all(data[:, 1] > 0) and data[:, 1].max() / data[:, 1].min() > 10:
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
        ax.yaxis.set_minor_formatter(FormatStrFormatter("%g"))
    ax.set_xlabel("step")
    ax.set_ylabel("loss (negative ELBO)")
    tidy(ax, grid="both")
    return fig
