"""The run report: ``report.html`` (one self-contained file) and ``report.md`` with figures.

:func:`write_report` renders a fitted run from its in-memory
:class:`~bayes_dualeval.runs.fit.FitResult` (data, specification, posterior, pairs,
diagnostics, checks and tables): ``fit`` passes the result it just computed, and
``bayes-dualeval report RUN_DIR`` loads the run into the same object
(:func:`bayes_dualeval.runs.load.load_result`), so both take this one path. The HTML
embeds every figure as a base64 PNG and its CSS inline: no scripts, no network, one file to
send around. Every label that comes from the data is escaped. The Markdown file links the
same PNGs, written to ``figures/`` beside it. Every file is written atomically.

The sections are the panels of :data:`~bayes_dualeval.report.panels.PANELS`, in order.
Panels that need posterior intervals (rank probabilities, posterior-predictive intervals,
convergence diagnostics) say why they are skipped for a MAP fit; panels that need item
parameters for the Bradley-Terry mode; panels that need discriminations for a Rasch (1pl)
fit. A panel that fails is replaced by a note and a
:class:`~bayes_dualeval.core.errors.ReportWarning`, so one broken panel never costs the report.
"""

from __future__ import annotations

import warnings
from pathlib import Path

from bayes_dualeval.core import atomic
from bayes_dualeval.core.errors import ReportWarning
from bayes_dualeval.report.context import ReportContext
from bayes_dualeval.report.markup import FIGURES_DIR, Markup
from bayes_dualeval.report.panels import FIGURES, PANELS, SECTIONS, Panel, header

HTML_FILE = "report.html"
MD_FILE = "report.md"

__all__ = ["FIGURES", "FIGURES_DIR", "HTML_FILE", "MD_FILE", "SECTIONS", "build", "write_report"]


def build(result, run_name: str) -> Markup:
    """Build the report in memory (HTML parts, Markdown parts and PNG figures).

    Parameters
    ----------
    result : FitResult
        The run, with its checks and tables computed at the report's level
        (:func:`bayes_dualeval.runs.output.tabulate`).
    run_name : str
        The run folder's name (it appears in the header).

    Returns
    -------
    Markup
        With ``html`` and ``md`` lists of parts and ``figures`` (name to PNG bytes).
    """
    ctx = ReportContext(result, run_name)
    doc = Markup()
    header(doc, ctx, {panel.anchor: panel.title for panel in PANELS})
    for panel in PANELS:
        doc.heading(panel.anchor, panel.title)
        mark = doc.mark()
        try:
            panel.draw(doc, ctx)
            _check_figures(panel, set(doc.figures) - mark[2])
        except Exception as exc:  # noqa: BLE001 - one broken panel must not cost the report
            doc.rewind(mark)
            doc.note(f"This panel could not be drawn ({type(exc).__name__}: {exc}).")
            warnings.warn(
                f"report panel {panel.anchor!r} failed: {type(exc).__name__}: {exc}",
                ReportWarning,
                stacklevel=2,
            )
    return doc


def _check_figures(panel: Panel, drawn: set) -> None:
    undeclared = drawn - set(panel.figures)
    if undeclared:
        raise ValueError(f"figure(s) {sorted(undeclared)} are not declared in PANELS")


def write_report(result, run_dir) -> list[Path]:
    """Write ``report.html``, ``report.md`` and ``figures/*.png`` into a run folder.

    Parameters
    ----------
    result : FitResult
        The run, with its checks and tables computed
        (:func:`bayes_dualeval.runs.output.tabulate`); nothing is read from the folder.
    run_dir : str or Path
        The run folder.

    Returns
    -------
    list of Path
        The files written: the HTML, the Markdown and the figures.

    Warns
    -----
    ReportWarning
        When a panel cannot be drawn (the report is written without it).

    Examples
    --------
    >>> from bayes_dualeval.runs import output
    >>> from bayes_dualeval.runs.load import load_result
    >>> run = "runs/20260101-120000-nuts"
    >>> output.rewrite(load_result(run), run, ci=0.9)  # doctest: +SKIP
    """
    run_dir = Path(run_dir)
    doc = build(result, run_dir.name)
    written = []
    fig_dir = run_dir / FIGURES_DIR
    for name, png in doc.figures.items():
        written.append(atomic.write_bytes(fig_dir / f"{name}.png", png))
    for name in FIGURES:
        stale = fig_dir / f"{name}.png"
        if name not in doc.figures and stale.is_file():
            stale.unlink()
    title = f"Bayesian DualEval report: {run_dir.name}"
    written.insert(0, atomic.write_text(run_dir / MD_FILE, doc.markdown()))
    written.insert(0, atomic.write_text(run_dir / HTML_FILE, doc.page(title)))
    return written
