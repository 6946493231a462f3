r"""Posterior-predictive checks and surprising cells of a fitted run.

Three public entry points (with :func:`~bayes_dualeval.checks.item_table`), all reading
an :class:`arviz.InferenceData` from :func:`bayes_dualeval.runs.fit.fit` (or
:func:`bayes_dualeval.runs.load.load_run`) together with the
:class:`~bayes_dualeval.data.dataset.Dataset` it was fitted to:

* :func:`anomalies`: every model-item cell with its observed and expected value, a
  standardised residual, one-sided posterior predictive p-values and a
  Benjamini-Yekutieli q-value, most surprising first;
* :func:`posterior_predictive`: replicated data compared with the observed data per model
  and per item, calibration tables and a summary of the model's fit;
* :func:`~bayes_dualeval.checks.item_table`: one row per item with its parameters, Fisher
  information, an item-fit posterior predictive p-value and flags.

Which model made the run (its IRT link, the kinds of data and the arena likelihood) is
read from the posterior's recorded specification, never guessed. How each quantity is
defined (and the thresholds used for flags) is documented in ``docs/outputs.md`` and in
the modules of the passes: :mod:`~bayes_dualeval.checks.static` (static cells),
:mod:`~bayes_dualeval.checks.arena` (arena pairs, Bradley-Terry) and
:mod:`~bayes_dualeval.checks.reward` (the reward likelihood). Tail probabilities are
Rao-Blackwellised: averaged over posterior draws of the exact (or normal) conditional tail
probability, so they have no Monte Carlo floor and the step-up can reach small q-values.
Everything is vectorised over cells and processed in chunks of draws
(:mod:`~bayes_dualeval.checks.budget`), in float32 where a value is evaluated per cell (or
pair) and draw.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from bayes_dualeval.checks.calibration import calibration_error, calibration_table
from bayes_dualeval.checks.cells import FLAG_Q, misfit_table
from bayes_dualeval.checks.items import item_table
from bayes_dualeval.checks.options import CheckOptions
from bayes_dualeval.checks.passes import Checks
from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.data.distill import Pairs

__all__ = ["FLAG_Q", "PPC", "anomalies", "item_table", "posterior_predictive"]
#: Columns of :attr:`PPC.items`.
ITEM_COLUMNS = [
    "item", "source", "domain", "observed", "rep_mean", "rep_lo", "rep_hi", "outside",
    "n_models", "ci",
]  # fmt: skip


@dataclass(frozen=True, eq=False)
class PPC:
    """Posterior-predictive checks of a run (see :func:`posterior_predictive`).

    Attributes
    ----------
    models : pandas.DataFrame
        Per model: ``model, static_observed, static_rep_mean, static_rep_lo, static_rep_hi,
        static_outside, n_static, arena_observed, arena_rep_mean, arena_rep_lo,
        arena_rep_hi, arena_outside, n_arena, ci``.
    items : pandas.DataFrame
        Per static item: ``item, source, domain, observed, rep_mean, rep_lo, rep_hi,
        outside, n_models, ci``.
    calibration_static : pandas.DataFrame
        Bins of predicted success probability: ``bin, lo, hi, n, mean_predicted,
        observed_frequency``; ``n`` sums to the number of static cells.
    calibration_arena : pandas.DataFrame
        The same for decisive arena pairs: predicted win probability of the first model
        against the mean soft target; ``n`` sums to the number of decisive pairs.
    model_misfit, item_misfit : pandas.DataFrame
        Per model (per item): ``n_cells, n_flagged`` (cells with ``q_value`` below
        :data:`FLAG_Q`), ``share_flagged, mean_abs_residual, min_p_value``; worst first.
    anomalies : pandas.DataFrame
        The full cell table of :func:`anomalies`.
    summary : dict
        Plain numbers for ``diagnostics.json`` (NaN written as None).
    checks : object
        The computed checks, reused by :func:`item_table` (``ppc=``); not part of the
        results.
    """

    models: pd.DataFrame
    items: pd.DataFrame
    calibration_static: pd.DataFrame
    calibration_arena: pd.DataFrame
    model_misfit: pd.DataFrame
    item_misfit: pd.DataFrame
    anomalies: pd.DataFrame
    summary: dict
    checks: object = field(default=None, repr=False)


def posterior_predictive(
    idata,
    dataset: Dataset,
    pairs: Pairs | None = None,
    *,
    ci: float = 0.95,
    options: CheckOptions | None = None,
) -> PPC:
    """Compare replicated data from the posterior with the observed data.

    Parameters
    ----------
    idata : arviz.InferenceData
        The run's posterior.
    dataset : Dataset
        The data the run was fitted to.
    pairs : Pairs, optional
        The run's arena pairs; recomputed with ``bb_ratio`` and ``tie_ratio`` if not given.
    ci : float
        Level of the replicated intervals.
    options : CheckOptions, optional
        Seed, draw budget, distillation ratios and arena dispersion (default
        ``CheckOptions()``).

    Returns
    -------
    PPC
        Per-model and per-item tables, calibration tables, misfit tables and ``summary``
        with ``share_models_outside`` (models with any statistic outside its replicated
        interval), ``share_models_outside_static``, ``share_models_outside_arena``,
        ``share_items_outside``, ``calibration_error_static``, ``calibration_error_arena``,
        ``arena_dispersion``, ``arena_statistic``, ``cells``, ``flagged_cells``,
        ``flag_q``, ``draws`` (the most posterior draws any check used), ``draws_static``,
        ``draws_arena``, ``replicates`` and ``ci``.

    Examples
    --------
    >>> ppc = posterior_predictive(result.idata, result.dataset, result.pairs)  # doctest: +SKIP
    >>> ppc.summary["share_models_outside"]  # doctest: +SKIP
    """
    checks = Checks(idata, dataset, pairs, options or CheckOptions())
    ds = checks.fit.dataset
    static = checks.static()
    arena = checks.arena()
    cells, (cell_model, cell_item) = checks.cells()
    models = pd.DataFrame(
        {"model": ds.models, **_static_models(ds, static, ci), **_arena_models(ds, arena, ci)}
    )
    models["ci"] = ci
    items = _static_items(ds, static, ci)
    cal_static = calibration_table([], [])
    if static is not None:
        cal_static = calibration_table(static.mean_p, ds.static_share, weights=ds.static_n)
    cal_arena = calibration_table([], [])
    if arena is not None and arena.pair_mean is not None:
        cal_arena = calibration_table(arena.pair_mean, checks.fit.decisive.t)

    has_static = models["n_static"].to_numpy() > 0
    has_arena = models["n_arena"].to_numpy() > 0
    out_static = models["static_outside"].to_numpy(bool)
    out_arena = models["arena_outside"].to_numpy(bool)

    def share(flags, mask):
        return float(flags[mask].mean()) if mask.any() else float("nan")

    draws_static = static.n_draws if static is not None else 0
    draws_arena = arena.n_draws if arena is not None else 0
    statistic = None
    if arena is not None:
        statistic = "mean_reward_z" if checks.fit.arena == "reward" else "win_share"
    summary = {
        "ci": ci,
        "draws": max(draws_static, draws_arena),
        "draws_static": draws_static,
        "draws_arena": draws_arena,
        "replicates": max(static.n_rep if static is not None else 0, len(arena.model_reps)
                          if arena is not None else 0),
        "share_models_outside": share(out_static | out_arena, has_static | has_arena),
        "share_models_outside_static": share(out_static, has_static),
        "share_models_outside_arena": share(out_arena, has_arena),
        "share_items_outside": share(items["outside"].to_numpy(bool), np.ones(len(items), bool)),
        "calibration_error_static": calibration_error(cal_static),
        "calibration_error_arena": calibration_error(cal_arena),
        "arena_dispersion": float(arena.phi if arena is not None else float("nan")),
        "arena_statistic": statistic,
        "cells": len(cells),
        "flagged_cells": int((cells["q_value"] < FLAG_Q).sum()),
        "flag_q": FLAG_Q,
    }  # fmt: skip
    summary = {k: _nan_to_none(v) for k, v in summary.items()}
    return PPC(
        models=models,
        items=items,
        calibration_static=cal_static,
        calibration_arena=cal_arena,
        model_misfit=misfit_table(cells, cell_model, {"model": ds.models}),
        item_misfit=misfit_table(
            cells, cell_item, {"item": ds.items, "kind": ds.item_kind.astype(object)}
        ),
        anomalies=cells,
        summary=summary,
        checks=checks,
    )


def _static_models(ds: Dataset, static, ci: float) -> dict:
    """Per model: observed accuracy against its replicated accuracies."""
    if static is None:
        return _model_columns("static", ds.n_models)
    n_static = np.bincount(ds.static_model, weights=ds.static_n, minlength=ds.n_models)
    with np.errstate(invalid="ignore", divide="ignore"):
        acc_obs = np.bincount(ds.static_model, weights=ds.static_y, minlength=ds.n_models)
        acc_obs = acc_obs / n_static
        acc_rep = static.model_correct / n_static
    # accuracies are discrete: an interval end is an attainable value
    return _model_columns("static", ds.n_models, acc_obs, acc_rep, n_static, ci, "inverted_cdf")


def _arena_models(ds: Dataset, arena, ci: float) -> dict:
    """Per model: observed arena statistic (win share or mean reward) against replicates."""
    if arena is None:
        return _model_columns("arena", ds.n_models)
    return _model_columns(
        "arena", ds.n_models, arena.model_observed, arena.model_reps, arena.model_count, ci
    )


def _model_columns(
    kind: str, n_models: int, observed=None, reps=None, count=None, ci=0.95, method="linear"
) -> dict:
    """``{kind}_observed, _rep_mean, _rep_lo, _rep_hi, _outside`` and ``n_{kind}`` per model.

    ``reps`` (replicates x models) None: the run has no such data (NaN, no cells).
    """
    if reps is None:
        observed = mean = lo = hi = np.full(n_models, np.nan)
        count = np.zeros(n_models)
    else:
        mean = reps.mean(axis=0)
        lo, hi = np.quantile(reps, [(1 - ci) / 2, (1 + ci) / 2], axis=0, method=method)
    return {
        f"{kind}_observed": observed,
        f"{kind}_rep_mean": mean,
        f"{kind}_rep_lo": lo,
        f"{kind}_rep_hi": hi,
        f"{kind}_outside": (observed < lo) | (observed > hi),
        f"n_{kind}": count.astype(int),
    }


def _static_items(ds: Dataset, static, ci: float) -> pd.DataFrame:
    """Per static item: observed accuracy against the replicated correct counts."""
    if static is None:
        return pd.DataFrame(columns=ITEM_COLUMNS)
    sidx = ds.static_items
    n_q = np.bincount(ds.static_item, weights=ds.static_n, minlength=ds.n_items)[sidx]
    correct = np.bincount(ds.static_item, weights=ds.static_y, minlength=ds.n_items)[sidx]
    clo, chi = _hist_interval(static.item_hist, ci)
    counts = np.arange(static.item_hist.shape[1])
    with np.errstate(invalid="ignore", divide="ignore"):
        rep_mean = (static.item_hist @ counts) / static.item_hist.sum(axis=1) / n_q
        return pd.DataFrame(
            {
                "item": ds.items[sidx],
                "source": ds.item_source[sidx],
                "domain": ds.item_domain[sidx],
                "observed": correct / n_q,
                "rep_mean": rep_mean,
                "rep_lo": clo / n_q,
                "rep_hi": chi / n_q,
                "outside": (correct < clo) | (correct > chi),
                "n_models": np.bincount(ds.static_item, minlength=ds.n_items)[sidx],
                "ci": ci,
            }
        )


def _hist_interval(hist: np.ndarray, ci: float) -> tuple[np.ndarray, np.ndarray]:
    """Equal-tailed interval (inverted CDF) of integer counts from per-row histograms."""
    total = hist.sum(axis=1, keepdims=True)
    cdf = np.cumsum(hist, axis=1) / np.maximum(total, 1)
    lo = np.argmax(cdf >= (1 - ci) / 2 - 1e-12, axis=1).astype(float)
    hi = np.argmax(cdf >= (1 + ci) / 2 - 1e-12, axis=1).astype(float)
    empty = total[:, 0] == 0
    lo[empty] = hi[empty] = np.nan
    return lo, hi


def _nan_to_none(value):
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def anomalies(
    idata,
    dataset: Dataset,
    pairs: Pairs | None = None,
    *,
    options: CheckOptions | None = None,
) -> pd.DataFrame:
    """Model-item cells ranked by how much the fitted model is surprised by them.

    Parameters
    ----------
    idata : arviz.InferenceData
        The run's posterior (:attr:`FitResult.idata`, or from :mod:`bayes_dualeval.runs.load`).
    dataset : Dataset
        The data the run was fitted to (restricted to the fitted kinds if it holds more).
    pairs : Pairs, optional
        The run's distilled arena pairs (:attr:`FitResult.pairs`); recomputed with
        ``bb_ratio`` and ``tie_ratio`` when not given.
    options : CheckOptions, optional
        Seed, draw budget, distillation ratios and arena dispersion (default
        ``CheckOptions()``; see :class:`~bayes_dualeval.checks.options.CheckOptions`).

    Returns
    -------
    pandas.DataFrame
        One row per cell, most surprising first (ascending ``p_value``, then descending
        ``residual``), with columns ``model, item, kind, observed, expected, residual,
        p_value, p_lower, q_value``. Static cells: ``observed`` is the 0/1 label,
        ``expected`` the posterior mean of ``p``; ``p_value = P(y_rep >= y)`` is ``E[p]`` for
        a success and 1 for a failure (one-sided: only a success can point to a leak),
        ``p_lower = P(y_rep <= y)`` is ``E[1 - p]`` for a failure and 1 for a success (a
        surprising failure). Arena cells (pairs likelihood): ``observed`` the model's soft
        wins on the prompt over its decisive pairs, ``expected`` the posterior mean of its
        predicted wins; reward likelihood: the normalised reward and its posterior mean
        prediction; ``p_value`` is the normal upper tail ``P(rep >= observed)`` averaged
        over draws and ``p_lower = 1 - p_value``. ``residual`` is ``(observed - expected) /
        sd`` with the posterior predictive sd. ``q_value`` is the Benjamini-Yekutieli
        adjustment of ``p_value`` over all cells of the table (valid under any dependence);
        ``p_lower`` is not adjusted. Arena cells without decisive pairs are left out.
        ``attrs["arena_dispersion"]`` holds the dispersion used (NaN without arena cells).

    Examples
    --------
    >>> table = anomalies(result.idata, result.dataset, result.pairs)  # doctest: +SKIP
    >>> table[table.q_value < 0.05]  # doctest: +SKIP
    """
    checks = Checks(idata, dataset, pairs, options or CheckOptions())
    return checks.cells()[0]
