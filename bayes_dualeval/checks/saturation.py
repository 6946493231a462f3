r"""Can a benchmark still tell the best models apart? Test information, per benchmark.

A benchmark's test information at ability :math:`\theta` is the sum of its questions'
Fisher information (:func:`~bayes_dualeval.checks.items.information`, the run's link):
:math:`I(\theta) = \sum_q p_q'(\theta)^2 / (p_q (1 - p_q))`. Its inverse square root is the
standard error of an ability measured by that benchmark alone. Per benchmark (the static
items of one source) and over every static item, :func:`benchmark_table` reports, each a
posterior mean over draws (abilities and difficulties centred per draw, as on the
leaderboard):

* the test information curve on a grid of abilities (the table's ``attrs["curves"]``);
* ``reliability``, the marginal reliability over the run's models,
  :math:`\operatorname{var}(\theta) / (\operatorname{var}(\theta) + \overline{1 / I(\theta_i)})`;
* ``info_at_top``, the mean information at the abilities of the top models;
* ``top_separated``, how many adjacent pairs among the top models the benchmark alone
  separates at the run's interval level: their posterior mean abilities differ by more than
  ``z sqrt(se_1^2 + se_2^2)``, with ``se = I^{-1/2}`` at each model;
* ``ceiling_share``, the share of the benchmark's questions the top model passes with
  probability above :data:`CEILING_P`;
* a plain-language ``verdict``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import special

from bayes_dualeval.checks.budget import CHUNK_ELEMENTS
from bayes_dualeval.checks.fitted import FittedRun
from bayes_dualeval.checks.items import information
from bayes_dualeval.checks.options import CheckOptions
from bayes_dualeval.checks.passes import Checks
from bayes_dualeval.core.thinning import evenly_spaced
from bayes_dualeval.model import links

#: Top models whose information and separation the table reports.
TOP_MODELS = 5
#: A question is at the ceiling for the top model above this success probability.
CEILING_P = 0.95
#: Posterior draws the information is averaged over.
INFO_DRAWS = 200
#: Points of the ability grid of the test information curves.
GRID_POINTS = 81
#: The overall row's name in the ``source`` column.
OVERALL = "(all)"
#: A benchmark is saturated when its information at the top models is below this share of
#: its peak and the peak lies below them, or when ``ceiling_share`` exceeds one half.
SATURATED_SHARE = 0.25


@dataclass(frozen=True)
class Curves:
    """Test information curves of a run's benchmarks.

    Attributes
    ----------
    grid : numpy.ndarray, shape (G,)
        Abilities on the leaderboard's centred scale.
    sources : list of str
        One per row of ``info``: the benchmarks, then :data:`OVERALL`.
    info : numpy.ndarray, shape (len(sources), G)
        Posterior mean test information at each grid point.
    top : numpy.ndarray, shape (TOP_MODELS or fewer,)
        Posterior mean abilities of the top models, best first.
    """

    grid: np.ndarray
    sources: list
    info: np.ndarray
    top: np.ndarray


def _source_matrix(sources: np.ndarray) -> tuple[list, np.ndarray]:
    """The benchmarks and a (Q, S + 1) one-hot matrix of each question's (and overall)."""
    names, code = np.unique(sources.astype(str), return_inverse=True)
    onehot = np.zeros((len(sources), len(names) + 1))
    onehot[np.arange(len(sources)), code] = 1.0
    onehot[:, -1] = 1.0
    return [*names.tolist(), OVERALL], onehot


def information_sums(params: dict, sources: np.ndarray, points: np.ndarray):
    """Test information per benchmark at ``points``, and each question's success there.

    Parameters
    ----------
    params : dict
        The questions' ``b``, ``a``, ``c``, ``d`` draws, each (D, Q) or None.
    sources : numpy.ndarray of str, shape (Q,)
        Each question's benchmark.
    points : numpy.ndarray, shape (D, P)
        Abilities on the run's own (uncentred) scale, per draw.

    Returns
    -------
    info : numpy.ndarray, shape (D, P, S + 1)
        Test information of each benchmark, and of all of them (last).
    success : numpy.ndarray, shape (D, P, Q)
        Success probabilities at ``points`` (float32).
    sources : list of str
    """
    names, onehot = _source_matrix(sources)
    n_draws, n_points = points.shape
    n_items = len(sources)
    info = np.zeros((n_draws, n_points, len(names)))
    success = np.zeros((n_draws, n_points, n_items), dtype=np.float32)
    step = max(1, CHUNK_ELEMENTS // max(n_draws * n_points, 1))
    for start in range(0, n_items, step):
        cols = slice(start, start + step)
        par = {
            s: None if v is None else v[:, cols][:, None, :].astype(np.float64)
            for s, v in params.items()
        }
        a = np.ones_like(par["b"]) if par["a"] is None else par["a"]
        eta = links.eta(points[:, :, None], par["b"], a)
        # an item whose parameters are not finite in a draw adds nothing to that draw
        value = np.nan_to_num(information(eta, a, par["c"], par["d"]), nan=0.0, posinf=0.0)
        info += value @ onehot[cols]
        success[:, :, cols] = links.probability(eta, par["c"], par["d"])
    return info, success, names


def benchmarks(
    idata, dataset, *, ci: float = 0.95, pairs=None, options: CheckOptions | None = None, ppc=None
) -> pd.DataFrame | None:
    """The run's ``benchmarks.csv``: :func:`benchmark_table` of a posterior and its data.

    Parameters
    ----------
    idata : arviz.InferenceData
    dataset : Dataset
    ci : float
    pairs : Pairs, optional
    options : CheckOptions, optional
    ppc : PPC, optional
        Checks of the same run whose resolved draws are reused.

    Examples
    --------
    >>> table = benchmarks(result.idata, result.dataset)  # doctest: +SKIP
    >>> table[["source", "info_at_top", "ceiling_share", "verdict"]]  # doctest: +SKIP
    """
    previous = ppc.checks if ppc is not None else None
    checks = Checks.reuse(previous, idata, dataset, pairs, options or CheckOptions())
    return benchmark_table(checks.fit, ci=ci)


def benchmark_table(fit: FittedRun, *, ci: float) -> pd.DataFrame | None:
    """One row per benchmark and one over every static question: how well it measures.

    Parameters
    ----------
    fit : FittedRun
        A run with item parameters and one ability per model (None is returned for
        Bradley-Terry runs, runs without static questions, and runs with abilities per
        domain or dimension, whose questions see other abilities than the leaderboard's).
    ci : float
        The interval level at which top models count as separated.

    Returns
    -------
    pandas.DataFrame or None
        Columns ``source, items, models, reliability, info_peak, theta_peak, info_at_top,
        top_models, top_separated, ceiling_share, saturated_above, verdict, ci``; the
        curves in ``attrs["curves"]`` (a :class:`Curves`).
    """
    ds = fit.dataset
    if fit.items["b"] is None or fit.abilities is not None:
        return None
    draws = evenly_spaced(fit.n_draws, INFO_DRAWS)
    params = {name: None if v is None else v[draws] for name, v in fit.items.items()}
    return measurement_table(fit.theta[draws], params, ds, ci=ci)


def measurement_table(theta, params: dict, dataset, *, ci: float, questions=None):
    """:func:`benchmark_table` from draws: abilities ``theta`` and item parameters.

    Parameters
    ----------
    theta : numpy.ndarray, shape (D, M)
        The models' raw abilities per draw.
    params : dict
        Every item's ``b``, ``a``, ``c``, ``d`` draws, each (D, Q) or None.
    dataset : Dataset
        The data of the draws (item kinds and sources, which models answered what).
    ci : float
    questions : numpy.ndarray of int, optional
        The static items measured (a short form's); every static item by default.

    Returns
    -------
    pandas.DataFrame or None
        As :func:`benchmark_table`; None without static questions.
    """
    ds = dataset
    items = np.flatnonzero(ds.item_kind == "static")
    if questions is not None:
        items = np.intersect1d(items, np.asarray(questions, np.int64))
    if params["b"] is None or not len(items):
        return None
    theta = np.asarray(theta, np.float64)  # (D, M)
    shift = theta.mean(axis=1, keepdims=True)
    centred = theta - shift
    mean_theta = centred.mean(axis=0)
    order = np.argsort(-mean_theta, kind="stable")
    top = order[: min(TOP_MODELS, ds.n_models)]
    lo, hi = mean_theta.min(), mean_theta.max()
    grid = np.linspace(lo - 2.0, hi + 2.0, GRID_POINTS)
    points = np.concatenate([grid[None, :] + shift, theta], axis=1)  # (D, G + M)
    chosen = {name: None if v is None else np.asarray(v)[:, items] for name, v in params.items()}
    info, success, names = information_sums(chosen, ds.item_source[items], points)
    curves = info[:, :GRID_POINTS].mean(axis=0).T  # (S + 1, G)
    at_model = info[:, GRID_POINTS:]  # (D, M, S + 1)
    with np.errstate(divide="ignore"):
        var = centred.var(axis=1)[:, None]
        error = (1.0 / at_model).mean(axis=1)  # (D, S + 1)
        reliability = (var / (var + error)).mean(axis=0)
        se = 1.0 / np.sqrt(at_model.mean(axis=0))  # (M, S + 1)
    z = special.ndtri(0.5 + ci / 2.0) if np.isfinite(ci) else special.ndtri(0.975)
    gap = (mean_theta[top[:-1]] - mean_theta[top[1:]])[:, None]
    separated = (gap > z * np.hypot(se[top[:-1]], se[top[1:]])).sum(axis=0)
    info_at_top = at_model[:, top].mean(axis=(0, 1))
    p_top = success[:, GRID_POINTS + top[0]].mean(axis=0)  # (Q,)
    _, onehot = _source_matrix(ds.item_source[items])
    n_items = onehot.sum(axis=0)
    ceiling = ((p_top > CEILING_P) @ onehot) / n_items
    source_of = np.full(ds.n_items, -1)
    source_of[items] = np.argmax(onehot[:, :-1], axis=1)
    answered = ds.static_item[np.isin(ds.static_item, items)]
    models = ds.static_model[np.isin(ds.static_item, items)]
    n_models = [
        len(np.unique(models[source_of[answered] == k])) for k in range(len(names) - 1)
    ] + [len(np.unique(models))]
    peak = curves.argmax(axis=1)
    rows = []
    for k, name in enumerate(names):
        sat = _saturated_above(grid, curves[k])
        verdict = _verdict(
            grid, curves[k], info_at_top[k], ceiling[k], sat, mean_theta[top], separated[k]
        )
        rows.append(
            {
                "source": name,
                "items": int(n_items[k]),
                "models": n_models[k],
                "reliability": float(reliability[k]),
                "info_peak": float(curves[k, peak[k]]),
                "theta_peak": float(grid[peak[k]]),
                "info_at_top": float(info_at_top[k]),
                "top_models": len(top),
                "top_separated": int(separated[k]),
                "ceiling_share": float(ceiling[k]),
                "saturated_above": sat if verdict.startswith("saturated") else np.nan,
                "verdict": verdict,
                "ci": ci,
            }
        )
    table = pd.DataFrame(rows)
    table.attrs["curves"] = Curves(grid=grid, sources=names, info=curves, top=mean_theta[top])
    return table


def _saturated_above(grid: np.ndarray, curve: np.ndarray) -> float:
    """The lowest ability above the curve's peak where it falls below half the peak."""
    peak = int(curve.argmax())
    below = np.flatnonzero(curve[peak:] < curve[peak] / 2.0)
    return float(grid[peak + below[0]]) if len(below) else np.nan


def _verdict(grid, curve, at_top, ceiling, sat, top_theta, separated) -> str:
    """A sentence on where the benchmark measures and whether it separates the top."""
    peak = int(curve.argmax())
    share = at_top / curve[peak] if curve[peak] > 0 else 0.0
    n_top = len(top_theta)
    pairs = max(n_top - 1, 0)
    low, best = top_theta.min(), top_theta.max()
    saturated = ceiling > 0.5 or (share < SATURATED_SHARE and grid[peak] < low)
    if saturated:
        where = f"above theta = {sat:.1f}" if np.isfinite(sat) else "at the top"
        return (
            f"saturated {where}: at the top {n_top} models it has {share:.0%} of its peak "
            f"information and the best model passes {ceiling:.0%} of its questions with "
            f"p > {CEILING_P}; adding questions with b between {low:.1f} and {best:.1f} "
            f"would separate the top {n_top}"
        )
    if share < SATURATED_SHARE and grid[peak] > best:
        return (
            f"too hard: information peaks at theta = {grid[peak]:.1f}, above the best "
            f"model ({best:.1f}); it measures models that do not exist yet"
        )
    return (
        f"measures the top: {share:.0%} of its peak information at the top {n_top} models "
        f"(peak at theta = {grid[peak]:.1f}); it separates {separated} of their {pairs} "
        "adjacent pairs on its own"
    )
