"""What every figure shares: colours, canvas, label shortening, point subsets, PNG output.

Figures are built on :class:`matplotlib.figure.Figure` with the Agg canvas: no pyplot
state, no window, safe in threads and on machines without a display.
"""

from __future__ import annotations

import io

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

#: Colour of each item kind.
KIND_COLOURS = {"static": "#3a6ea5", "arena": "#d9822b"}
#: Colours cycled over item groups (and chains).
GROUP_COLOURS = (
    "#3a6ea5", "#d9822b", "#3b9b5b", "#b5475a", "#7b5ea7", "#8c6d46", "#c4589f", "#6b7b8c",
    "#a8a13a", "#3aa3a8",
)  # fmt: skip
POINT = "#1f3b5c"
BAD = "#c0392b"
BAND = "#eef1f5"
GRID = "#ececec"
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


def figure(width: float, height: float) -> Figure:
    """A new figure of ``width`` x ``height`` inches with constrained layout, on Agg."""
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def panel_row(n: int, width: float, height: float, *, pad: float = 0.0, sharey=False):
    """A figure of ``n`` panels side by side (at least one), each ``width`` inches wide.

    Returns
    -------
    fig : matplotlib.figure.Figure
    axes : numpy.ndarray of Axes, shape (max(n, 1),)
    """
    k = max(1, n)
    fig = figure(width * k + pad, height)
    return fig, fig.subplots(1, k, sharey=sharey, squeeze=False)[0]


def tidy(ax, *, grid: str | None = "both", colour: str = GRID, sides=("top", "right")) -> None:
    """Draw a light grid behind the data (axis ``grid``; None for none), hide ``sides``."""
    if grid is not None:
        ax.grid(axis=grid, color=colour, lw=0.6)
        ax.set_axisbelow(True)
    for side in sides:
        ax.spines[side].set_visible(False)


def row_height(n: int, per: float = 0.22, base: float = 1.4, least: float = 2.6) -> float:
    """Figure height (inches) for ``n`` labelled rows."""
    return max(least, base + per * n)


def label_size(n: int) -> float:
    """Font size of tick labels for ``n`` rows."""
    return 9.0 if n <= 30 else 8.0 if n <= 60 else 7.0 if n <= 100 else 6.0


def group_colour(k: int) -> str:
    """The ``k``-th colour of :data:`GROUP_COLOURS`, cycling."""
    return GROUP_COLOURS[k % len(GROUP_COLOURS)]


def finite(x) -> bool:
    """Whether every value of ``x`` is finite."""
    return bool(np.all(np.isfinite(np.asarray(x, dtype=float))))


def subset(n: int, first=None, limit: int = MAX_POINTS) -> np.ndarray:
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


def shown(n: int, drawn: int) -> str:
    """``"; 3,000 of 12,345 shown"`` when fewer rows are drawn than exist, else ``""``."""
    return f"; {drawn:,} of {n:,} shown" if drawn < n else ""
