"""Everything ``fit`` writes into a run folder, and the table shown in the terminal.

A run's checks and tables are computed once, in memory, by :func:`tabulate`, and kept on
its :class:`~bayes_dualeval.runs.fit.FitResult`; the CSV files and the report are written
from there. :func:`write` does this for a new fit; :func:`rewrite` for a run read back by
:func:`bayes_dualeval.runs.load.load_result` (``bayes-dualeval report``).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from bayes_dualeval.checks import FLAG_Q, CheckOptions, item_table, posterior_predictive
from bayes_dualeval.checks.benchmark_audit import benchmark_audit
from bayes_dualeval.checks.dependence import dependence_table
from bayes_dualeval.checks.model_fit import model_fit_table
from bayes_dualeval.checks.saturation import benchmarks
from bayes_dualeval.core import atomic
from bayes_dualeval.core.errors import ReportWarning
from bayes_dualeval.model.spec import DualEvalModel
from bayes_dualeval.posterior.dif_table import dif_table, with_release_contrast
from bayes_dualeval.posterior.dimension_tables import (
    abilities_table,
    has_dimensions,
    loadings_table,
)
from bayes_dualeval.posterior.facet_tables import facet_tables
from bayes_dualeval.posterior.summaries import (
    domain_deviations,
    has_domain_abilities,
    leaderboard,
    leaderboard_by_domain,
    pairwise,
)
from bayes_dualeval.runs.fit import FitResult, write_diagnostics, write_run
from bayes_dualeval.runs.selection import ANOMALY_TOP, anomaly_rows, select_anomalies

#: Posterior draws (a seeded random subset) behind the checks of a run's tables: enough for
#: p-values to about +-0.02, and half the time of 1,000 at paper scale.
CHECK_DRAWS = 500
#: The level of a run's tables when none is given or recorded.
DEFAULT_CI = 0.95


def tabulate(result: FitResult, *, ci: float, anomalies=None) -> FitResult:
    """Compute a run's checks and tables at level ``ci`` and keep them on ``result``.

    The posterior predictive checks (:func:`~bayes_dualeval.checks.posterior_predictive`)
    run once, on the run's own pairs and seed, and the item table reuses them. Tables:
    ``leaderboard`` (with the run's convergence verdict as a ``converged`` column, so a
    table copied out of the run folder still says when its intervals cannot be trusted),
    ``pairwise``, with domain abilities ``leaderboard_by_domain`` and ``domain_deviations``
    (:func:`~bayes_dualeval.posterior.summaries.leaderboard_by_domain`,
    :func:`~bayes_dualeval.posterior.summaries.domain_deviations`), with ability
    dimensions ``abilities`` and ``loadings``
    (:mod:`~bayes_dualeval.posterior.dimension_tables`), with several judges or style
    covariates ``judges``, ``judge_bias`` and ``style``
    (:mod:`~bayes_dualeval.posterior.facet_tables`), with DIF groups ``dif``
    (:mod:`~bayes_dualeval.posterior.dif_table`), ``items``,
    where the run has static questions with item parameters the leaderboard's model fit
    columns ``infit, outfit, fit_p, below_chance``
    (:func:`~bayes_dualeval.checks.model_fit.model_fit_table`), ``benchmarks`` (how well
    each benchmark measures the top models: :func:`~bayes_dualeval.checks.saturation.benchmarks`)
    and ``dependence`` (locally dependent question pairs:
    :func:`~bayes_dualeval.checks.dependence.dependence_table`),
    ``anomalies`` (the cell table, most surprising first: every
    cell, or the ``anomalies`` most surprising ones and every cell with ``q_value`` below
    :data:`~bayes_dualeval.checks.FLAG_Q`, with the level as a ``ci`` column) and, with
    static data or arena rewards and one ability per model or per domain, ``contamination``
    (one row per model and benchmark, and per model and arena source:
    :func:`~bayes_dualeval.checks.benchmark_audit.benchmark_audit`). ``result.diagnostics``
    records the level, the ``anomalies`` setting and the checks' summary.

    The checks are seeded, so the tables of one level and setting are computed once: a
    result already tabulated at ``ci`` and ``anomalies`` is returned as it is (a run whose
    leaderboard was read in Python, then saved, computes its checks once, not twice).

    Parameters
    ----------
    result : FitResult
    ci : float
        Interval level of the tables.
    anomalies : int or str, optional
        Rows of ``anomalies.csv``: ``"all"`` or a number (see
        :func:`~bayes_dualeval.runs.selection.anomaly_rows`); default the run's recorded
        setting, else :data:`ANOMALY_TOP`.

    Returns
    -------
    FitResult
        ``result`` itself, with ``ci``, ``ppc`` and ``tables`` set.

    Raises
    ------
    ConfigError
        If ``anomalies`` is neither ``"all"`` nor a whole number.
    """
    if anomalies is None:
        anomalies = result.diagnostics.get("anomalies", ANOMALY_TOP)
    anomalies = anomaly_rows(anomalies)
    if _tabulated(result, ci, anomalies):
        return result
    idata, dataset = result.idata, result.dataset
    options = CheckOptions(
        seed=result.settings.seed, max_draws=CHECK_DRAWS, bb_ratio=result.config.bb_ratio,
        tie_ratio=result.config.tie_ratio,
    )  # fmt: skip
    ppc = posterior_predictive(idata, dataset, result.pairs, ci=ci, options=options)
    flagged = select_anomalies(ppc.anomalies, anomalies, FLAG_Q)
    flagged["ci"] = ci
    board = leaderboard(idata, dataset, ci=ci)
    board["converged"] = pd.array([result.converged] * len(board), dtype="boolean")
    model_fit = model_fit_table(
        idata, dataset, pairs=result.pairs, options=options, ppc=ppc,
        chance=result.diagnostics.get("chance"),
    )  # fmt: skip
    if model_fit is not None:
        columns = ["model", "infit", "outfit", "fit_p", "below_chance"]
        board = board.merge(model_fit[columns], on="model", how="left")
        board.attrs["below_chance"] = model_fit.attrs["below_chance"]
    result.ci, result.ppc = ci, ppc
    result.tables = {
        "leaderboard": board,
        "pairwise": pairwise(idata),
        "items": item_table(idata, dataset, ci=ci, pairs=result.pairs, options=options, ppc=ppc),
        "anomalies": flagged,
    }
    audits = {
        "benchmarks": benchmarks(idata, dataset, ci=ci, options=options, ppc=ppc),
        "dependence": dependence_table(idata, dataset, options=options, ppc=ppc),
    }
    result.tables.update({name: t for name, t in audits.items() if t is not None})
    if result.holdout is not None:
        result.tables["holdout"] = result.holdout
    if has_domain_abilities(idata):
        by_domain = leaderboard_by_domain(idata, dataset, ci=ci)
        by_domain["converged"] = pd.array([result.converged] * len(by_domain), dtype="boolean")
        result.tables["leaderboard_by_domain"] = by_domain
        result.tables["domain_deviations"] = domain_deviations(idata, ci=ci)
    dimensional = has_dimensions(idata)
    if dimensional:
        result.tables["abilities"] = abilities_table(idata, ci=ci)
        result.tables["loadings"] = loadings_table(idata, ci=ci)
    # the benchmark audit asks whether a model did better on a benchmark than the ability
    # its items read predicts (with domain abilities, the block's domain's: a specialist is
    # not a leak); with dimensions the loadings say which abilities a benchmark's items need
    if any(DualEvalModel(result.config).item_kinds(dataset)) and not dimensional:
        audit = benchmark_audit(idata, dataset, ci=ci)
        result.tables["contamination"] = with_release_contrast(audit, idata, dataset)
    # several judges, their family biases, style covariates: judges.csv, judge_bias.csv,
    # style.csv (bayes_dualeval.posterior.facet_tables)
    result.tables.update(facet_tables(idata, dataset, ci))
    # items that function differently across groups of models (model/dif.py): dif.csv
    shifts = dif_table(idata, dataset, ci)
    if shifts is not None:
        result.tables["dif"] = shifts
    result.diagnostics["ci"] = ci
    result.diagnostics["anomalies"] = anomalies
    result.diagnostics["ppc"] = ppc.summary
    return result


def _tabulated(result: FitResult, ci: float, anomalies) -> bool:
    """Whether :func:`tabulate` has computed ``result``'s tables at ``ci`` and ``anomalies``."""
    return (
        result.ppc is not None
        and "items" in result.tables
        and result.ci == ci
        and result.diagnostics.get("anomalies") == anomalies
    )


def write_tables(folder: str | Path, tables: dict) -> list[Path]:
    """Write each table as ``<name>.csv`` into ``folder`` (``pairwise`` with its index)."""
    return [
        atomic.write_text(
            Path(folder) / f"{name}.csv",
            table.to_csv(index=name == "pairwise", float_format="%.6g"),
        )
        for name, table in tables.items()
    ]


def write(
    result: FitResult,
    out: str | Path,
    *,
    ci: float = DEFAULT_CI,
    anomalies=None,
    report: bool = True,
) -> Path:
    """Write a complete run folder (posterior, diagnostics, tables and report).

    The posterior, diagnostics and tables are staged and moved into place together, so a
    failure leaves no partial run; the report comes after and can be rebuilt with
    ``bayes-dualeval report RUN_DIR``. Checks and tables are computed once
    (:func:`tabulate`, which takes ``ci`` and ``anomalies``: ``"all"`` writes every cell
    to ``anomalies.csv``) and kept on ``result``.
    """
    if anomalies is not None:
        anomalies = anomaly_rows(anomalies)  # a bad setting fails before anything is written

    def tables(staging, result):
        write_tables(staging, tabulate(result, ci=ci, anomalies=anomalies).tables)

    run_dir = write_run(result, out, extra=tables)
    if report:
        write_report_safely(result, run_dir)
    return run_dir


def rewrite(
    result: FitResult, run_dir: str | Path, *, ci: float | None = None, anomalies=None
) -> list[Path]:
    """Write a run's tables, ``diagnostics.json`` and report again, at level ``ci``.

    For a run read back by :func:`~bayes_dualeval.runs.load.load_result`: the checks use
    the run's pairs and seed, so the tables match those the fit wrote at the same level
    and ``anomalies`` setting.

    Parameters
    ----------
    result : FitResult
    run_dir : str or Path
        The run folder.
    ci : float, optional
        Interval level; defaults to the run's (``diagnostics["ci"]``), else 0.95.
    anomalies : int or str, optional
        Rows of ``anomalies.csv`` (``"all"`` or a number); defaults to the run's
        (``diagnostics["anomalies"]``), else :data:`ANOMALY_TOP`.

    Returns
    -------
    list of Path
        The CSV tables, then the report's files (HTML, Markdown, figures).
    """
    from bayes_dualeval.report import document

    ci = float(ci if ci is not None else result.diagnostics.get("ci") or DEFAULT_CI)
    tabulate(result, ci=ci, anomalies=anomalies)
    paths = write_tables(run_dir, result.tables)
    write_diagnostics(run_dir, result.diagnostics)
    return paths + document.write_report(result, run_dir)


def write_report_safely(result: FitResult, run_dir: Path) -> list[Path]:
    """Write the report of a finished run; on failure warn instead of raising.

    The run folder is complete before the report starts, so a report that cannot be
    written (a bug, a full disk) costs only the report: a
    :class:`~bayes_dualeval.core.errors.ReportWarning` says how to rebuild it.
    """
    from bayes_dualeval.report import document

    try:
        return document.write_report(result, run_dir)
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


def terminal_summary(result: FitResult, *, ci: float = DEFAULT_CI, top: int = 30) -> str:
    """The leaderboard as fixed-width text, with tier markers between separable models.

    The run's leaderboard table when it was computed at level ``ci``, else computed.
    """
    if result.ci == ci and "leaderboard" in result.tables:
        table = result.tables["leaderboard"]
    else:
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
