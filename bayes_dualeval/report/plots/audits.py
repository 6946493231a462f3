"""The benchmark audit's figure: each benchmark's test information across abilities."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from bayes_dualeval.report.plots.base import BAD, figure, group_colour, short, tidy


def test_information(grid, sources, info, top) -> Figure:
    """Test information curves, one line per benchmark, the top models' abilities marked.

    Parameters
    ----------
    grid : numpy.ndarray, shape (G,)
        Abilities (centred).
    sources : list of str
        The curves' names (the overall curve last).
    info : numpy.ndarray, shape (len(sources), G)
    top : numpy.ndarray
        The top models' posterior mean abilities.

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig = figure(7.0, 3.8)
    ax = fig.add_subplot(1, 1, 1)
    for k, (name, curve) in enumerate(zip(sources, np.asarray(info), strict=True)):
        overall = k == len(sources) - 1 and len(sources) > 2
        ax.plot(grid, curve, color="#555555" if overall else group_colour(k),
                lw=1.2 if overall else 1.8, ls="--" if overall else "-",
                label=short(name, 30))  # fmt: skip
    for k, theta in enumerate(np.asarray(top, dtype=float)):
        ax.axvline(theta, color=BAD, lw=0.8, alpha=0.6, label="top models" if k == 0 else None)
    ax.set_xlabel("ability \u03b8 (centred)")
    ax.set_ylabel("test information")
    ax.set_ylim(bottom=0)
    tidy(ax)
    ax.legend(fontsize=7, frameon=False, loc="best")
    return fig
