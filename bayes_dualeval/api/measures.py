"""Measuring with a fitted run: score, calibrate, compress, adaptive, predict and route.

Each verb takes a :class:`~bayes_dualeval.api.run.Run` (its frozen posterior is the
*bank*) and returns a small result object holding its tables; ``save`` writes what the
command of the same name writes. The commands call these functions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from bayes_dualeval.api.run import DEFAULT_CI


def _bank(run, draws: int | None = None, allow_approximate: bool = False):
    from bayes_dualeval.api.devices import start
    from bayes_dualeval.measure.bank import BANK_DRAWS, Bank

    start("auto", 1)
    return Bank.from_run(
        run.bank_folder(), max_draws=draws or BANK_DRAWS, allow_approximate=allow_approximate
    )


def _where(run) -> str:
    return str(run.folder) if run.folder is not None else "(the run in memory)"


def _caveat(approximate: str) -> list[str]:
    """The warning line every output of an approximate bank carries (none otherwise)."""
    return [f"APPROXIMATE BANK, {approximate}: {APPROXIMATE_NOTE}"] if approximate else []


#: What an output of an approximate bank says after the reason.
APPROXIMATE_NOTE = "intervals and ranks may overstate what is known"


def _mark(table: pd.DataFrame, approximate: str) -> pd.DataFrame:
    """``table`` with the column ``approximate_bank`` (the reason) when the bank is approximate."""
    if approximate:
        table["approximate_bank"] = approximate
    return table


@dataclass
class Scores:
    """New models placed on a run's scale (:func:`score`).

    Attributes
    ----------
    scores : pandas.DataFrame
        ``scores.csv``: every model (bank and new) with ability, ranks and person fit.
    accuracy : pandas.DataFrame
        ``accuracy.csv``: predicted accuracy of each new model on each bank benchmark.
    warnings : list of str
        What a reader must know (misfitting models, a bank that did not converge).
    result : ScoreResult
        Everything :func:`bayes_dualeval.measure.score.score` computed.
    """

    scores: pd.DataFrame
    accuracy: pd.DataFrame
    warnings: list
    result: object = field(repr=False)

    def save(self, out: str | Path) -> Path:
        """Write the score folder (``scores.csv``, ``accuracy.csv``, summary, report)."""
        from bayes_dualeval.measure.output import write_scores

        return write_scores(self.result, out)

    def _repr_html_(self) -> str:
        return self.scores.head(20).to_html(index=False)


def score(run, data, *, ci: float = DEFAULT_CI, seed: int = 0, draws: int | None = None,
          rescore: bool = False, items=None,
          allow_approximate: bool = False) -> Scores:  # fmt: skip
    """Score the models of ``data`` against ``run`` (its items stay fixed), without a refit.

    Parameters
    ----------
    run : Run
        A NUTS or SVI run (a MAP run has no posterior draws to score against).
    data : str, Path or list of them
        Evaluation files or folders of the models to score (item ids as in a fit).
    ci : float
        Interval level.
    seed : int
        Seed of the ability draws.
    draws : int, optional
        Posterior draws of the bank used (evenly spaced); default 200.
    rescore : bool
        Score models that are already in the bank.
    items : list of str, str or Path, optional
        Use only these bank items (a short form), or the ``item`` column of a CSV.
    allow_approximate : bool
        Score against a bank that is not a converged NUTS posterior (SVI, or NUTS that
        failed its convergence check), which is refused otherwise; every output then says
        so (``summary.json``'s ``approximate_bank``, a ``scores.csv`` column, a warning).

    Returns
    -------
    Scores

    Raises
    ------
    InputError
        A bank that is not a converged NUTS posterior, without ``allow_approximate``.

    Examples
    --------
    >>> scored = run.score("new_models/")  # doctest: +SKIP
    >>> scored.scores[scored.scores["new"]]  # doctest: +SKIP
    """
    from bayes_dualeval.measure.output import read_items
    from bayes_dualeval.measure.score import score as score_models

    if isinstance(items, (str, Path)):
        items = read_items(items)
    paths = [data] if isinstance(data, (str, Path)) else list(data)
    bank = _bank(run, draws, allow_approximate)
    result = score_models(bank, paths, ci=ci, seed=seed, rescore=rescore, items=items)
    result.warnings = list(result.warnings) + _caveat(bank.approximate)
    result.summary["approximate_bank"] = bank.approximate or None
    _mark(result.scores, bank.approximate)
    return Scores(result.scores, result.accuracy, result.warnings, result)


@dataclass
class ItemCalibration:
    """New questions placed on a run's scale, common ones checked for drift (:func:`calibrate`).

    Attributes
    ----------
    items : pandas.DataFrame
        ``items.csv``: one row per new question (``b``, ``a`` with intervals, ``linked_by``).
    drift : pandas.DataFrame
        ``drift.csv``: one row per common question (shift, ``p_drift``, ``flagged``).
    warnings : list of str
    result : CalibrationResult
        Everything :func:`bayes_dualeval.measure.calibrate.calibrate` computed.
    """

    items: pd.DataFrame
    drift: pd.DataFrame
    warnings: list
    result: object = field(repr=False)

    def save(self, out: str | Path) -> Path:
        """Write the calibration folder (``items.csv``, ``drift.csv``, ``summary.json``)."""
        from bayes_dualeval.measure.output import write_calibration

        return write_calibration(self.result, out)


def calibrate(run, data, *, ci: float = DEFAULT_CI, drift_threshold: float = 0.5, fdr: float = 0.1,
              seed: int = 0, draws: int | None = None,
              allow_approximate: bool = False) -> ItemCalibration:  # fmt: skip
    """Calibrate the static questions of ``data`` on ``run``'s scale (its models stay fixed).

    The dual of :func:`score`: see :mod:`bayes_dualeval.measure.calibrate`.

    Parameters
    ----------
    run : Run
        A NUTS run (or SVI with ``allow_approximate``) with static questions, 1PL or 2PL.
    data : str, Path or list of them
        Evaluation files or folders with the run's models' answers on new questions (and
        on questions of the run: common ones, checked for drift).
    ci : float
        Interval level.
    drift_threshold : float
        A common question drifted when its ``b`` moved by more than this (logits).
    fdr : float
        False discovery level of the drift flag.
    seed : int
        Seed of the parameter draws.
    draws : int, optional
        Posterior draws of the bank used (evenly spaced).
    allow_approximate : bool
        Calibrate against a bank that is not a converged NUTS posterior (refused
        otherwise); every output then says so.

    Returns
    -------
    ItemCalibration

    Examples
    --------
    >>> cal = run.calibrate("benchmark_v2/")  # doctest: +SKIP
    >>> cal.drift[cal.drift["flagged"]]  # doctest: +SKIP
    """
    from bayes_dualeval.measure.calibrate import calibrate as calibrate_items

    paths = [data] if isinstance(data, (str, Path)) else list(data)
    bank = _bank(run, draws, allow_approximate)
    result = calibrate_items(
        bank, paths, ci=ci, drift_threshold=drift_threshold, fdr=fdr, seed=seed
    )
    result.warnings = list(result.warnings) + _caveat(bank.approximate)
    result.summary["approximate_bank"] = bank.approximate or None
    _mark(result.items, bank.approximate)
    _mark(result.drift, bank.approximate)
    return ItemCalibration(result.items, result.drift, result.warnings, result)


@dataclass
class ShortForm:
    """A short form of a run's items (:func:`compress`).

    Attributes
    ----------
    items : pandas.DataFrame
        ``item, source, kind, b_mean, a_mean, information``: one row per item kept.
    warnings : list of str
        A NOT CONVERGED line when the bank did not converge.
    benchmarks : pandas.DataFrame or None
        How the short form measures beside the whole bank (reliability, information at
        the top models, separation, ceiling, verdict; column ``form``:
        :func:`~bayes_dualeval.measure.compress.short_form_benchmarks`); None without
        static questions.
    """

    items: pd.DataFrame
    warnings: list = field(default_factory=list)
    benchmarks: pd.DataFrame | None = None

    def save(self, path: str | Path) -> Path:
        """Write the table as CSV (``score(items=path)`` reads it back).

        The :attr:`benchmarks` table goes beside it, as ``<stem>_benchmarks.csv``.
        """
        from bayes_dualeval.measure.output import write_table

        if self.benchmarks is not None:
            path = Path(path)
            write_table(self.benchmarks, self.benchmarks_path(path))
        return write_table(self.items, path)

    @staticmethod
    def benchmarks_path(path: str | Path) -> Path:
        """Where :meth:`save` writes the benchmarks table of a short form saved at ``path``."""
        path = Path(path)
        return path.with_name(f"{path.stem}_benchmarks.csv")


def compress(run, n: int, *, for_: str = "ranking", per_source: bool = False,
             seed: int = 0, allow_approximate: bool = False) -> ShortForm:  # fmt: skip
    """Choose ``n`` items of ``run`` for a short form, covering its sources.

    Parameters
    ----------
    run : Run
    n : int
        Items to keep in all (with ``per_source``, in each source).
    for_ : {"ranking", "accuracy"}
        ``ranking``: the most informative items; ``accuracy``: representative items, each
        standing for a cluster of items the bank models get right alike.
    per_source : bool
        Keep ``n`` items in each source.
    seed : int
        Breaks ties (ranking) and starts the clustering (accuracy).
    allow_approximate : bool
        Use a bank that is not a converged NUTS posterior (refused otherwise); the table
        then has the column ``approximate_bank``.

    Returns
    -------
    ShortForm

    Examples
    --------
    >>> short = run.compress(40)  # doctest: +SKIP
    >>> run.score("new_models/", items=short.items["item"].tolist())  # doctest: +SKIP
    """
    from bayes_dualeval.measure.compress import compress as compress_bank
    from bayes_dualeval.measure.compress import short_form_benchmarks

    bank = _bank(run, allow_approximate=allow_approximate)
    table = compress_bank(bank, n, per_source=per_source, seed=seed, purpose=for_)
    measured = short_form_benchmarks(bank, table, ci=DEFAULT_CI)
    if measured is not None:
        measured = _mark(measured, bank.approximate)
    return ShortForm(_mark(table, bank.approximate), _caveat(bank.approximate), measured)


@dataclass
class AdaptiveTest:
    """Simulated adaptive tests (:func:`adaptive`).

    Attributes
    ----------
    summary : pandas.DataFrame
        ``adaptive.csv``: one row per model (items asked, ability, why it stopped).
    trace : pandas.DataFrame
        ``trace.csv``: one row per item asked.
    baseline : AdaptiveResult or None
        The same models asked in a random order (unless ``select="random"``).
    select : str
        The selection rule.
    warnings : list of str
        A NOT CONVERGED line when the bank did not converge.
    """

    summary: pd.DataFrame
    trace: pd.DataFrame
    baseline: object
    select: str
    result: object = field(repr=False)
    warnings: list = field(default_factory=list)

    def save(self, out: str | Path) -> Path:
        """Write the folder ``bayes-dualeval adaptive`` writes."""
        from bayes_dualeval.measure.output import write_adaptive

        return write_adaptive(self.result, self.baseline, out, select=self.select)


def adaptive(run, oracle_data, *, select: str = "fisher", target_se: float = 0.3,
             max_items: int = 50, exposure: int = 1, seed: int = 0,
             allow_approximate: bool = False) -> AdaptiveTest:  # fmt: skip
    """Ask each model of ``oracle_data`` the run's items one at a time until its sd is small.

    Parameters
    ----------
    run : Run
    oracle_data : str, Path or list of them
        Evaluation files whose answers act as the oracle.
    select : {"fisher", "kl", "random"}
        Next item: most information, most expected variance reduction, or random.
    target_se : float
        Stop when the posterior sd falls below this.
    max_items : int
        Stop after this many items.
    exposure : int
        Choose at random among the ``exposure`` best items.
    seed : int
        Seed of random choices.
    allow_approximate : bool
        Use a bank that is not a converged NUTS posterior (refused otherwise); the tables
        then have the column ``approximate_bank``.

    Returns
    -------
    AdaptiveTest
    """
    from bayes_dualeval.measure.adaptive import adaptive as run_adaptive
    from bayes_dualeval.measure.responses import responses

    bank = _bank(run, allow_approximate=allow_approximate)
    paths = [oracle_data] if isinstance(oracle_data, (str, Path)) else list(oracle_data)
    oracle = responses(paths, bank, rescore=True)
    options = {"target_se": target_se, "max_items": max_items, "seed": seed}
    result = run_adaptive(bank, oracle, select=select, exposure=exposure, **options)
    baseline = None
    if select != "random":
        baseline = run_adaptive(bank, oracle, select="random", **options)
        _mark(baseline.summary, bank.approximate)
    _mark(result.summary, bank.approximate)
    return AdaptiveTest(
        result.summary, result.trace, baseline, select, result, _caveat(bank.approximate)
    )


@dataclass
class Predictions:
    """Predicted success of model-item pairs (:func:`predict`) or a routing (:func:`route`).

    Attributes
    ----------
    table : pandas.DataFrame
        ``predictions.csv`` (or ``routing.csv``).
    summary : dict
        With :func:`route`: mean success routed, of the best single model and the oracle.
    warnings : list of str
        A NOT CONVERGED line when the run did not converge.
    """

    table: pd.DataFrame
    summary: dict = field(default_factory=dict)
    warnings: list = field(default_factory=list)

    def save(self, path: str | Path) -> Path:
        """Write the table as CSV, atomically."""
        from bayes_dualeval.core.atomic import write_text

        return write_text(path, self.table.to_csv(index=False))


def predict(run, models=None, items=None, *, cells: pd.DataFrame | None = None,
            ci: float = DEFAULT_CI, allow_approximate: bool = False) -> Predictions:  # fmt: skip
    """Predict model-item pairs of ``run``, answered or not, with intervals.

    Parameters
    ----------
    run : Run
    models, items : list of str, optional
        Every pair of these (default every model, every item).
    cells : pandas.DataFrame, optional
        Instead: the cells, columns ``model, item`` (and ``opponent`` for arena prompts).
    ci : float
        Interval level.
    allow_approximate : bool
        Predict from a run that is not a converged NUTS posterior (refused otherwise); the
        table then has the column ``approximate_bank``.

    Returns
    -------
    Predictions
        Columns ``model, opponent, item, kind, p_mean, p_lo, p_hi, observed, ci``.

    Examples
    --------
    >>> run.predict(["gpt-4o"], ["bench::math_bench_3"]).table  # doctest: +SKIP
    """
    from bayes_dualeval.core.errors import InputError
    from bayes_dualeval.measure.approximate import check_posterior
    from bayes_dualeval.runs import predict as pr

    if cells is not None and (models is not None or items is not None):
        raise InputError("give either cells or models/items, not both")
    approximate = check_posterior(_where(run), run.result.diagnostics, allow_approximate)
    fitted = pr.fitted_run(run.result)
    if cells is None:
        ds = fitted.dataset
        models = list(ds.models) if models is None else list(models)
        items = list(ds.items) if items is None else list(items)
        cells = pd.DataFrame(
            {"model": np.repeat(models, len(items)), "item": np.tile(items, len(models))}
        )
    table = _mark(pr.predict(fitted, cells, ci=ci), approximate)
    return Predictions(table, warnings=_caveat(approximate))


def route(run, models=None, items=None, *, cost=None, cost_weight: float = 1.0,
          ci: float = DEFAULT_CI, allow_approximate: bool = False) -> Predictions:  # fmt: skip
    """For each item, the model most likely to succeed (net of cost) and P(it is the best).

    Parameters
    ----------
    run : Run
    models, items : list of str, optional
        Candidate models and items to route (default all).
    cost : sequence of float, optional
        A cost per candidate model, in the order of ``models``.
    cost_weight : float
        Success probability one unit of cost is worth.
    ci : float
        Interval level.
    allow_approximate : bool
        Route with a run that is not a converged NUTS posterior (refused otherwise); the
        table then has the column ``approximate_bank``.

    Returns
    -------
    Predictions
        ``routing.csv`` and the summary (``routed``, ``best_single``, ``oracle``...).
    """
    from bayes_dualeval.measure.approximate import check_posterior
    from bayes_dualeval.runs import predict as pr

    approximate = check_posterior(_where(run), run.result.diagnostics, allow_approximate)
    fitted = pr.fitted_run(run.result)
    ds = fitted.dataset
    m = pr.indices(list(ds.models) if models is None else list(models), ds.models, "model")
    q = pr.indices(list(ds.items) if items is None else list(items), ds.items, "item")
    costs = None if cost is None else np.asarray(cost, float)
    table, summary = pr.route(fitted, m, q, cost=costs, cost_weight=cost_weight, ci=ci)
    summary["approximate_bank"] = approximate or None
    return Predictions(_mark(table, approximate), summary, _caveat(approximate))
