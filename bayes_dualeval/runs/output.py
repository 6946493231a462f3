"""Everything ``fit`` writes into a run folder, and the table shown in the terminal."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from bayes_dualeval.runs import atomic
from bayes_dualeval.checks.ppc import PPC, item_table, posterior_predictive
from bayes_dualeval.data.distill import DEFAULT_BB_RATIO, DEFAULT_TIE_RATIO
from bayes_dualeval.errors import ReportWarning
from bayes_dualeval.runs.fit import FitResult, write_run
from bayes_dualeval.posterior.summaries import leaderboard, pairwise

#: ``anomalies.csv`` keeps every cell with a q-value below this ...
ANOMALY_Q = 0.2
#: ... and at least this many cells (the most surprising ones).
ANOMALY_TOP = 50
#: Posterior draws (a seeded random subset) behind the checks of a run's tables: enough for
#: p-values to about +-0.02, and half the time of 1,000 at paper scale.
CHECK_DRAWS = 500


def write_tables(
    folder: str | Path,
    idata,
    dataset,
    *,
    ci: float,
    pairs=None,
    bb_ratio: float = DEFAULT_BB_RATIO,
    tie_ratio: float = DEFAULT_TIE_RATIO,
    seed: int = 0,
    ppc: PPC | None = None,
    max_draws: int = CHECK_DRAWS,
    converged: bool | None = None,
) -> dict:
    """Write the CSV tables of a run into ``folder``; return them as DataFrames by name.

    Tables: ``leaderboard``, ``pairwise``, ``items`` (:func:`checks.item_table`) and
    ``anomalies`` (the cells of :func:`checks.anomalies` with ``q_value`` below
    :data:`ANOMALY_Q`, and at least the :data:`ANOMALY_TOP` most surprising ones, with the
    ``ci`` level as a column). ``pairs``, ``bb_ratio`` and ``tie_ratio`` describe the run's
    arena pairs (recomputed from the ratios when ``pairs`` is None); ``ppc``, when given,
    supplies the cell table instead of computing it again. ``converged`` (the run's
    convergence verdict; None for MAP and SVI) becomes the leaderboard's ``converged``
    column, so a table copied out of the run folder still says when its intervals cannot
    be trusted.
    """
    folder = Path(folder)
    kw = {
        "pairs": pairs,
        "bb_ratio": bb_ratio,
        "tie_ratio": tie_ratio,
        "seed": seed,
        "max_draws": max_draws,
    }
    if ppc is None:
        ppc = posterior_predictive(idata, dataset, ci=ci, **kw)
    cells = ppc.anomalies
    keep = (cells["q_value"] < ANOMALY_Q).to_numpy() | (np.arange(len(cells)) < ANOMALY_TOP)
    flagged = cells.loc[keep].reset_index(drop=True)
    flagged["ci"] = ci
    board = leaderboard(idata, dataset, ci=ci)
    board["converged"] = pd.array([converged] * len(board), dtype="boolean")
    tables = {
        "leaderboard": board,
        "pairwise": pairwise(idata),
        "items": item_table(idata, dataset, ci=ci, ppc=ppc, **kw),
        "anomalies": flagged,
    }
    for name, table in tables.items():
        index = name == "pairwise"
        atomic.write_text(folder / f"{name}.csv", table.to_csv(index=index, float_format="%.6g"))
    return tables


def write(result: FitResult, out: str | Path, *, ci: float = 0.95, report: bool = True) -> Path:
    """Write a complete run folder (posterior, diagnostics, tables and report).

    The posterior, diagnostics and tables are staged and moved into place together, so a
    failure leaves no partial run; the report comes after and can be rebuilt with
    ``bayes-dualeval report RUN_DIR``.
    """

    def extra(staging, result):
        kw = {"pairs": result.pairs, "bb_ratio": result.config.bb_ratio,
              "tie_ratio": result.config.tie_ratio, "seed": result.settings.seed,
              "max_draws": CHECK_DRAWS}  # fmt: skip
        ppc = posterior_predictive(result.idata, result.dataset, ci=ci, **kw)
        tables = write_tables(
            staging, result.idata, result.dataset, ci=ci, ppc=ppc, converged=result.converged,
            **kw,
        )  # fmt: skip
        result.diagnostics["ci"] = ci
        result.diagnostics["ppc"] = ppc.summary
        computed.update(ppc=ppc, items=tables["items"])

    computed = {}
    run_dir = write_run(result, out, extra=extra)
    if report:
        write_report_safely(run_dir, result, ci=ci, **computed)
    return run_dir


def rewrite_tables(run_dir: str | Path, idata, diagnostics: dict, dataset, *, ci: float):
    """Write a run's CSV tables again from its posterior (as ``bayes-dualeval report`` does).

    The arena pairs are recomputed with the run's distillation quantiles and the checks use
    the run's seed, so the tables match those written by the fit at the same ``ci``.
    ``diagnostics`` is updated in memory (``ci`` and the ``ppc`` summary); writing it back
    is left to the caller.

    Returns
    -------
    tuple
        ``(ppc, paths)``: the :class:`~bayes_dualeval.checks.ppc.PPC` computed on the way (for
        the report) and the CSV files written.
    """
    config = diagnostics.get("config", {})
    kw = {
        "pairs": None,
        "bb_ratio": float(config.get("bb_ratio", DEFAULT_BB_RATIO)),
        "tie_ratio": float(config.get("tie_ratio", DEFAULT_TIE_RATIO)),
        "seed": int(diagnostics.get("sampler", {}).get("seed", 0)),
        "max_draws": CHECK_DRAWS,
    }
    ppc = posterior_predictive(idata, dataset, ci=ci, **kw)
    converged = diagnostics.get("convergence", {}).get("converged")
    tables = write_tables(run_dir, idata, dataset, ci=ci, ppc=ppc, converged=converged, **kw)
    diagnostics["ci"] = ci
    diagnostics["ppc"] = ppc.summary
    return ppc, [Path(run_dir) / f"{name}.csv" for name in tables]


def write_report_safely(
    run_dir: Path, result: FitResult, *, ci: float, ppc=None, items=None
) -> list[Path]:
    """Write the report of a finished run; on failure warn instead of raising.

    The run folder is complete before the report starts, so a report that cannot be
    written (a bug, a full disk) costs only the report: a
    :class:`~bayes_dualeval.errors.ReportWarning` says how to rebuild it. ``ppc`` and
    ``items`` (the item table) are the run's checks, when already computed.
    """
    from bayes_dualeval.report.document import write_report

    try:
        return write_report(
            run_dir,
            result.idata,
            result.diagnostics,
            result.dataset,
            ci=ci,
            pairs=result.pairs,
            ppc=ppc,
            items=items,
        )
    except Exception as exc:  # noqa: BLE001 - the run is safe; the report is optional
        warnings.warn(
            f"the report could not be written ({type(exc).__name__}: {exc}); the run is "
            f"complete: rebuild the report with `bayes-dualeval report {run_dir}`",
            ReportWarning,
            stacklevel=2,
        )
        return []


def _fmt(x, spec=".2f") -> str:
    return "-" if x is None or (isinstance(x, float) and np.isnan(x)) else format(x, spec)


def terminal_summary(result: FitResult, *, ci: float = 0.95, top: int = 30) -> str:
    """The leaderboard as fixed-width text, with tier markers between separable models."""
    table = leaderboard(result.idata, result.dataset, ci=ci)
    text = format_leaderboard(table, ci=ci, top=top)
    if result.converged is False:
        text += (
            "\nNOT CONVERGED: the chains disagree or are too short (see the warnings below);"
            " do not publish these intervals"
        )
    return text


def format_leaderboard(table: pd.DataFrame, *, ci: float = 0.95, top: int = 30) -> str:
    """Fixed-width text of a leaderboard table (see :func:`summaries.leaderboard`)."""
    width = max(8, min(40, int(table["model"].str.len().max())))
    point = table["ci"].isna().all()
    pct = f"{100 * ci:g}%"
    head = f"{'rank':>4}  {'model':<{width}}  {'theta':>6}  " + (
        f"{pct + ' interval':>17}  {'rank range':>10}  {'P(>next)':>8}" if not point else ""
    )
    lines = [head, "-" * len(head)]
    shown = table.head(top)
    for k, row in enumerate(shown.itertuples(index=False)):
        if k > 0 and row.tier == shown.iloc[k - 1]["tier"] and not point:
            marker = "="  # cannot be told apart from the model above
        else:
            marker = " "
        name = row.model if len(row.model) <= width else row.model[: width - 1] + "~"
        line = f"{row.rank:>4}{marker} {name:<{width}}  {_fmt(row.theta_mean):>6}"
        if not point:
            line += (
                f"  [{_fmt(row.theta_lo):>6}, {_fmt(row.theta_hi):>6}]"
                f"  {int(row.rank_lo):>4}-{int(row.rank_hi):<5}  {_fmt(row.p_beats_next):>8}"
            )
        lines.append(line)
    if len(table) > top:
        lines.append(f"... {len(table) - top} more in leaderboard.csv")
    if point:
        lines.append("(MAP point estimates: no intervals)")
    else:
        lines.append(
            f"'=' marks a model that cannot be told apart from the one above at {pct} "
            "(P(>next) below the level)"
        )
    return "\n".join(lines)
