"""What measurements write: score, calibration and adaptive-testing folders, tables.

:func:`write_scores` writes ``scores.csv``, ``accuracy.csv``, ``summary.json`` (the
settings, counts and warnings), ``report.html`` and ``report.md`` (with its figures) into
a staging folder and moves it into place
(:func:`bayes_dualeval.core.atomic.staged_folder`): a failure leaves no partial folder.
:func:`write_calibration` does the same for a calibration (``items.csv``, ``drift.csv``,
``summary.json``) and :func:`write_adaptive` for an adaptive test; :func:`write_table`
writes a short form.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from bayes_dualeval import __version__
from bayes_dualeval.core import atomic
from bayes_dualeval.core.errors import InputError
from bayes_dualeval.measure.precision import adaptive_benchmarks
from bayes_dualeval.measure.score import ScoreResult
from bayes_dualeval.report.markup import FIGURES_DIR, Markup, num
from bayes_dualeval.report.plots.base import (
    figure,
    label_size,
    row_height,
    short,
    tidy,
    to_png,
)

#: Colour of the new models in the report's figure (bank models are grey).
NEW_COLOUR = "#c2410c"


def write_scores(result: ScoreResult, out: str | Path) -> Path:
    """Write the score folder ``out`` (must not exist, or be empty) and return it."""
    with atomic.staged_folder(out) as staging:
        atomic.write_text(staging / "scores.csv", result.scores.to_csv(index=False))
        atomic.write_text(staging / "accuracy.csv", result.accuracy.to_csv(index=False))
        summary = {**result.summary, "warnings": result.warnings, "version": __version__}
        atomic.write_text(staging / "summary.json", json.dumps(summary, indent=1) + "\n")
        doc = report(result)
        atomic.write_text(staging / "report.html", doc.page("bayes-dualeval score"))
        atomic.write_text(staging / "report.md", doc.markdown())
        for name, png in doc.figures.items():
            atomic.write_bytes(staging / FIGURES_DIR / f"{name}.png", png)
    return Path(out)


def write_calibration(result, out: str | Path) -> Path:
    """Write the calibration folder ``out`` (must not exist, or be empty) and return it.

    Parameters
    ----------
    result : CalibrationResult
        From :func:`~bayes_dualeval.measure.calibrate.calibrate`.
    out : str or Path
    """
    with atomic.staged_folder(out) as staging:
        atomic.write_text(
            staging / "items.csv", result.items.to_csv(index=False, float_format="%.6g")
        )
        atomic.write_text(
            staging / "drift.csv", result.drift.to_csv(index=False, float_format="%.6g")
        )
        summary = {**result.summary, "warnings": result.warnings, "version": __version__}
        atomic.write_text(staging / "summary.json", json.dumps(summary, indent=1) + "\n")
    return Path(out)


def report(result: ScoreResult) -> Markup:
    """The score report: the bank's leaderboard with the new models marked, then accuracy."""
    doc = Markup()
    s = result.summary
    doc.title(
        "New models on the bank's scale",
        f"bank {s['bank']} ({s['bank_model']}), {s['new_models']} new model(s), "
        f"{s['ci']:.0%} intervals",
        {"board": "Leaderboard", "accuracy": "Predicted accuracy"},
    )
    if result.warnings:
        doc.banner("warn", "Read with care", result.warnings)
    doc.heading("board", "Leaderboard")
    doc.para(
        "Bank models at their posterior, new models (marked) scored against the bank's "
        "item draws without a refit; abilities centred on the bank models' mean."
    )
    doc.figure("scores", forest(result), "Ability and interval of every model; new in colour.")
    table = result.scores
    rows = [
        [
            r.model + (" (new)" if r.new else ""), num(r.theta_mean), num(r.theta_lo),
            num(r.theta_hi), f"{r.rank_lo:.0f}-{r.rank_hi:.0f}",
            "" if not np.isfinite(r.fit_p) else num(r.fit_p, ".3f"),
        ]
        for r in table.itertuples()
    ]  # fmt: skip
    columns = ["model", "theta", "lo", "hi", "rank", "fit_p"]
    doc.table(pd.DataFrame(rows, columns=columns), names=("model",))
    doc.heading("accuracy", "Predicted accuracy")
    if len(result.accuracy):
        doc.para(
            "Accuracy on all the bank's questions of each benchmark: answered ones as "
            "answered, the others predicted from the model's ability."
        )
        acc = [
            [r.model, r.dataset, f"{r.n_answered}/{r.n_bank_items}",
             num(r.observed_accuracy, ".3f"), num(r.predicted_accuracy, ".3f"),
             f"{r.predicted_lo:.3f}-{r.predicted_hi:.3f}"]
            for r in result.accuracy.itertuples()
        ]  # fmt: skip
        columns = ["model", "benchmark", "answered", "observed", "predicted", "interval"]
        doc.table(pd.DataFrame(acc, columns=columns), text=("benchmark",), names=("model",))
    else:
        doc.note("No static labels of the new models on bank questions: nothing to predict.")
    return doc


def forest(result: ScoreResult):
    """Forest plot of every model's ability interval, the new models in colour."""
    table = result.scores
    n = len(table)
    fig = figure(7.5, row_height(n))
    ax = fig.add_subplot()
    y = np.arange(n)[::-1].astype(float)
    colour = np.where(table["new"].to_numpy(bool), NEW_COLOUR, "#555555")
    ax.hlines(y, table["theta_lo"], table["theta_hi"], colors=colour, lw=1.6)
    ax.scatter(table["theta_mean"], y, c=colour, s=22, zorder=3)
    marks = np.where(table["new"].to_numpy(bool), " *", "")
    labels = [short(m) + mark for m, mark in zip(table["model"], marks, strict=True)]
    ax.set_yticks(y, labels, fontsize=label_size(n))
    ax.set_ylim(-0.7, n - 0.3)
    ax.set_xlabel("ability \u03b8 (centred on the bank models' mean); * new")
    tidy(ax, grid="x")
    return fig


def read_items(path: str | Path) -> list[str]:
    """The ``item`` column of a short-form CSV (:func:`write_table`).

    Raises
    ------
    InputError
        If the file cannot be read as CSV or has no ``item`` column.
    """
    try:
        table = pd.read_csv(path, dtype={"item": str})
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: cannot read the items ({exc})") from None
    if "item" not in table.columns:
        raise InputError(f"{path}: no 'item' column (a short form from compress has one)")
    return table["item"].dropna().tolist()


def write_table(table: pd.DataFrame, path: str | Path) -> Path:
    """Write one table as CSV, atomically (the short form of :func:`compress`)."""
    return atomic.write_text(path, table.to_csv(index=False, float_format="%.6g"))


def write_adaptive(result, baseline, out: str | Path, *, select: str) -> Path:
    """Write an adaptive-testing folder: ``adaptive.csv``, ``trace.csv``, the figure.

    ``benchmarks.csv`` says how well each rule measured
    (:func:`~bayes_dualeval.measure.precision.adaptive_benchmarks`).

    Parameters
    ----------
    result : AdaptiveResult
        The run of the chosen selection rule.
    baseline : AdaptiveResult or None
        The same models asked in a random order (``random_adaptive.csv``,
        ``random_trace.csv``), drawn beside ``result`` in ``sd_by_items.png``.
    out : str or Path
        Folder to write (must not exist or be empty).
    select : str
        The rule of ``result``, for the figure's legend.
    """
    with atomic.staged_folder(out) as staging:
        atomic.write_text(staging / "adaptive.csv", result.summary.to_csv(index=False))
        atomic.write_text(staging / "trace.csv", result.trace.to_csv(index=False))
        runs = {select: result}
        if baseline is not None:
            atomic.write_text(
                staging / "random_adaptive.csv", baseline.summary.to_csv(index=False)
            )
            atomic.write_text(staging / "random_trace.csv", baseline.trace.to_csv(index=False))
            runs["random"] = baseline
        atomic.write_bytes(staging / "sd_by_items.png", to_png(sd_by_items(runs)))
        measured = adaptive_benchmarks(runs)
        atomic.write_text(staging / "benchmarks.csv", measured.to_csv(index=False))
    return Path(out)


def sd_by_items(runs: dict):
    """Mean posterior sd against the number of items asked, one line per rule."""
    fig = figure(6.0, 3.6)
    ax = fig.add_subplot()
    for name, res in runs.items():
        trace = res.trace
        if not len(trace):
            continue
        # a model that stopped keeps its last sd, so every step averages every model
        wide = trace.pivot(index="step", columns="model", values="theta_sd").ffill()
        ax.plot(wide.index, wide.mean(axis=1), lw=1.8, label=name)
    ax.set_xlabel("items asked (questions and prompts)")
    ax.set_ylabel("posterior sd of \u03b8 (mean over models)")
    ax.legend(frameon=False)
    tidy(ax)
    return fig
