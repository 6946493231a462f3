"""A fitted run in memory: its tables, posterior, diagnostics, plots and measurements.

:class:`Run` wraps the :class:`~bayes_dualeval.runs.fit.FitResult` of a fit (or of a run
folder read back) and computes its tables with the functions that write the run folder's
CSV files (:mod:`bayes_dualeval.runs.output`), so a table here and the file are the same.
"""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path

import pandas as pd

from bayes_dualeval.api.summary import Diagnostics, leaderboard_html, model_name, verdict
from bayes_dualeval.core.errors import ConvergenceWarning

#: The one default interval level of the Python API and the commands.
DEFAULT_CI = 0.95


class Run:
    """A fitted run: what ``bd.fit`` returns and ``bd.open`` reads back.

    Parameters
    ----------
    result : FitResult, optional
        The fit in memory; with only ``folder``, read from there when first needed.
    folder : Path, optional
        The run folder the run was read from or saved to.

    Examples
    --------
    >>> import bayes_dualeval as bd
    >>> run = bd.fit("data/", sampler="map")
    >>> run.leaderboard().columns[:3].tolist()
    ['rank', 'model', 'theta_mean']
    """

    def __init__(self, result=None, *, folder: str | Path | None = None):
        if result is None and folder is None:
            raise ValueError("a Run needs a fit result or a run folder")
        self._result = result
        self.folder = None if folder is None else Path(folder)
        self._scratch = None  # a temporary folder holding an unsaved run for a bank

    @property
    def result(self):
        """The :class:`~bayes_dualeval.runs.fit.FitResult` (read from the folder once)."""
        if self._result is None:
            from bayes_dualeval.runs.load import load_result

            self._result = load_result(self.folder)
        return self._result

    # -- what the run is -------------------------------------------------------------
    @property
    def idata(self):
        """The posterior as ArviZ ``InferenceData`` (``az.summary(run.idata)`` works)."""
        return self.result.idata

    @property
    def dataset(self):
        """The :class:`~bayes_dualeval.data.dataset.Dataset` as fitted."""
        return self.result.dataset

    @property
    def model(self) -> str:
        """The effective model in words (specification, mode, link, abilities)."""
        return model_name(self.result.config)

    @property
    def diagnostics(self) -> Diagnostics:
        """Convergence, timings and counts, typed (:class:`~.summary.Diagnostics`)."""
        return Diagnostics.of(self.result)

    @property
    def converged(self) -> bool | None:
        """True, False, or None where the sampler has no convergence check (SVI, MAP)."""
        return self.result.converged

    @property
    def ci(self) -> float:
        """The run's interval level: the level of its tables, else :data:`DEFAULT_CI`."""
        return float(self.result.ci or self.result.diagnostics.get("ci") or DEFAULT_CI)

    def warn_if_not_converged(self, stacklevel: int = 2) -> None:
        """Warn (:class:`ConvergenceWarning`) with each problem when the run did not converge."""
        if self.converged is False:
            problems = "; ".join(self.result.convergence.problems) or "see run.diagnostics"
            warnings.warn(
                f"the run did not converge ({problems}): do not publish its intervals",
                ConvergenceWarning,
                stacklevel=stacklevel + 1,
            )

    # -- tables, as the run folder's CSV files ---------------------------------------
    def _tables(self, ci: float | None) -> dict:
        from bayes_dualeval.runs import output

        ci = self.ci if ci is None else float(ci)
        return output.tabulate(self.result, ci=ci).tables  # computed once per level

    def leaderboard(self, ci: float | None = None) -> pd.DataFrame:
        """``leaderboard.csv``: rank, model, ability mean and interval, rank range, tiers.

        Parameters
        ----------
        ci : float, optional
            Interval level; default the run's (:attr:`ci`).

        Returns
        -------
        pandas.DataFrame
            The columns of ``leaderboard.csv`` (docs/outputs.md), ``converged`` and, with
            static questions, the models' fit (``infit, outfit, fit_p, below_chance``)
            included: computed with the run's other tables.
        """
        return self._tables(ci)["leaderboard"].copy()

    def _board(self, ci: float | None = None) -> pd.DataFrame:
        """The leaderboard without computing the checks (for display and figures).

        The run's table when it is computed at level ``ci``; else the posterior's summary
        with ``converged`` (no model fit columns).
        """
        ci = self.ci if ci is None else float(ci)
        if self.result.ci == ci and "leaderboard" in self.result.tables:
            return self.result.tables["leaderboard"].copy()
        from bayes_dualeval.posterior.summaries import leaderboard

        board = leaderboard(self.idata, self.dataset, ci=ci)
        board["converged"] = pd.array([self.converged] * len(board), dtype="boolean")
        return board

    def pairwise(self) -> pd.DataFrame:
        """``pairwise.csv``: P(row model's ability > column model's), models best first."""
        from bayes_dualeval.posterior.summaries import pairwise

        return pairwise(self.idata)

    def items(self, ci: float | None = None) -> pd.DataFrame:
        """``items.csv``: each item's parameters, information and check flags."""
        return self._tables(ci)["items"].copy()

    def anomalies(self, ci: float | None = None) -> pd.DataFrame:
        """``anomalies.csv``: the most surprising cells, with p- and q-values."""
        return self._tables(ci)["anomalies"].copy()

    def table(self, name: str, ci: float | None = None) -> pd.DataFrame:
        """Any table of the run folder by its file's name (``contamination``, ``holdout``...).

        Raises
        ------
        KeyError
            If this run has no such table; the message lists the ones it has.
        """
        tables = self._tables(ci)
        if name not in tables:
            raise KeyError(f"this run has no {name!r} table; it has {', '.join(tables)}")
        return tables[name].copy()

    @property
    def plot(self):
        """The report's figures: ``run.plot.forest()``, ``.wright()``, ``.ranks()``."""
        from bayes_dualeval.api.plots import RunPlots

        return RunPlots(self)

    # -- files -----------------------------------------------------------------------
    def save(self, path: str | Path, *, ci: float | None = None, anomalies=None,
             report: bool = True) -> Path:  # fmt: skip
        """Write the run folder, exactly as ``bayes-dualeval fit --out PATH`` does.

        Parameters
        ----------
        path : str or Path
            The folder; must not exist or be empty.
        ci : float, optional
            Interval level of the tables; default the run's.
        anomalies : int or str, optional
            Rows of ``anomalies.csv`` (``"all"`` or a number).
        report : bool
            Write ``report.html``, ``report.md`` and ``figures/``.

        Returns
        -------
        Path
            The run folder.
        """
        from bayes_dualeval.runs import output

        folder = output.write(
            self.result, path, ci=self.ci if ci is None else ci, anomalies=anomalies,
            report=report,
        )  # fmt: skip
        self.folder = folder
        return folder

    def report(self, path: str | Path | None = None, *, ci: float | None = None) -> list[Path]:
        """Write ``report.html``, ``report.md`` and ``figures/`` into ``path``.

        Parameters
        ----------
        path : str or Path, optional
            A folder (made if missing); default the run's own folder.
        ci : float, optional
            Interval level; default the run's.

        Returns
        -------
        list of Path
            The files written.
        """
        from bayes_dualeval.report import document

        target = Path(path) if path is not None else self.folder
        if target is None:
            raise ValueError("give a folder: this run has not been saved")
        target.mkdir(parents=True, exist_ok=True)
        self._tables(ci)
        return document.write_report(self.result, target)

    def rewrite(self, *, ci: float | None = None, anomalies=None) -> list[Path]:
        """Write the tables, ``diagnostics.json`` and report into the run's own folder again.

        ``bayes-dualeval report RUN``: the level and ``anomalies`` setting default to those
        the run recorded.

        Returns
        -------
        list of Path
            The CSV tables, then the report's files.
        """
        from bayes_dualeval.runs import output

        if self.folder is None:
            raise ValueError("this run has no folder: save it first")
        return output.rewrite(self.result, self.folder, ci=ci, anomalies=anomalies)

    def bank_folder(self) -> Path:
        """A folder holding this run's posterior, for the measurement verbs.

        The run's own folder, or (an unsaved run) a temporary one with ``posterior.nc`` and
        ``diagnostics.json``, kept as long as this object.
        """
        if self.folder is not None:
            return self.folder
        if self._scratch is None:
            from bayes_dualeval.runs.fit import write_run

            self._scratch = tempfile.TemporaryDirectory(prefix="bayes-dualeval-run-")
            write_run(self.result, Path(self._scratch.name) / "run")
        return Path(self._scratch.name) / "run"

    # -- measurement verbs (bayes_dualeval.api.measures) ------------------------------
    def score(self, data, **options):
        """Place new models on this run's scale: ``bayes-dualeval score``.

        See :func:`bayes_dualeval.api.measures.score` for ``options``.
        """
        from bayes_dualeval.api import measures

        return measures.score(self, data, **options)

    def calibrate(self, data, **options):
        """Place new questions on this run's scale: ``bayes-dualeval calibrate``.

        See :func:`bayes_dualeval.api.measures.calibrate` for ``options``.
        """
        from bayes_dualeval.api import measures

        return measures.calibrate(self, data, **options)

    def compress(self, n: int, *, for_: str = "ranking", **options):
        """A short form of ``n`` items: ``bayes-dualeval compress``.

        See :func:`bayes_dualeval.api.measures.compress` for ``options``.
        """
        from bayes_dualeval.api import measures

        return measures.compress(self, n, for_=for_, **options)

    def adaptive(self, oracle_data, **options):
        """Simulated adaptive testing of ``oracle_data``'s models: ``bayes-dualeval adaptive``.

        See :func:`bayes_dualeval.api.measures.adaptive` for ``options``.
        """
        from bayes_dualeval.api import measures

        return measures.adaptive(self, oracle_data, **options)

    def predict(self, models=None, items=None, **options):
        """Predict model-item pairs, answered or not: ``bayes-dualeval predict``.

        See :func:`bayes_dualeval.api.measures.predict` for ``options``.
        """
        from bayes_dualeval.api import measures

        return measures.predict(self, models, items, **options)

    def route(self, models=None, items=None, **options):
        """Route each item to the model most likely to succeed: ``predict --route``.

        See :func:`bayes_dualeval.api.measures.route` for ``options``.
        """
        from bayes_dualeval.api import measures

        return measures.route(self, models, items, **options)

    # -- display ---------------------------------------------------------------------
    def _title(self) -> str:
        d = self.result.diagnostics.get("data", {})
        return (
            f"bayes-dualeval run: {self.model} with {self.result.settings.sampler}, "
            f"{d.get('models', len(self.dataset.models))} models"
        )

    def __repr__(self) -> str:
        board = self._board()
        top = board["model"].iloc[0] if len(board) else "-"
        where = f", folder {self.folder}" if self.folder is not None else ""
        return (
            f"<Run {self.model}, {self.result.settings.sampler}, {len(board)} models, "
            f"top {top!r}, {verdict(self.converged, self.result.settings.sampler)}{where}>"
        )

    def _repr_html_(self) -> str:
        return leaderboard_html(
            self._board(), title=self._title(), ci=self.ci,
            note=verdict(self.converged, self.result.settings.sampler),
        )  # fmt: skip
