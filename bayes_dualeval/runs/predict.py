"""Posterior predictions for any model-item pair of a fitted run, and routing by them.

:func:`predict` gives, for each requested cell, the posterior predictive probability that
the model answers a static question correctly, or that it beats another model on an arena
prompt, with an equal-tailed interval, whether or not the cell was in the data: a cell
nobody observed is predicted from the model's abilities and the item's parameters alone,
which is what a fitted bank is for. :func:`route` picks, for each item, the model most
likely to succeed (optionally net of a cost per model), with the probability that it is
the best, and compares the routed choice with the best single model and with the oracle
that always knows the best model per item.

The draws are read through :class:`~bayes_dualeval.checks.fitted.FittedRun`, so abilities
per domain or per dimension and 3PL/4PL asymptotes are used exactly as the fit used them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from bayes_dualeval.checks.fitted import FittedRun, resolve
from bayes_dualeval.core.errors import InputError
from bayes_dualeval.model import arena_term, links
from bayes_dualeval.posterior.summaries import interval

#: Columns of :func:`predict`'s table.
PREDICTION_COLUMNS = (
    "model", "opponent", "item", "kind", "p_mean", "p_lo", "p_hi", "observed", "ci",
)  # fmt: skip
#: Cells evaluated at once (draws x cells floats in memory at a time, about 16 MB).
CHUNK = 4_000_000


def fitted_run(result) -> FittedRun:
    """The :class:`FittedRun` of a :class:`~bayes_dualeval.runs.fit.FitResult`."""
    return resolve(result.idata, result.dataset, result.pairs, None, None)


def indices(names: Sequence[str], known: np.ndarray, what: str) -> np.ndarray:
    """Positions of ``names`` in ``known`` (sorted labels).

    Raises
    ------
    InputError
        Naming up to five of the names the run does not have.
    """
    names = np.asarray([str(n) for n in names], dtype=str)
    found = pd.Index(np.asarray(known, dtype=str)).get_indexer(names)
    missing = names[found < 0]
    if len(missing):
        shown = ", ".join(repr(str(m)) for m in missing[:5])
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        raise InputError(f"the run has no {what} {shown}{more} (see its leaderboard or items.csv)")
    return found.astype(np.int64)


def success_probability(run: FittedRun, model: np.ndarray, item: np.ndarray) -> np.ndarray:
    """Draws of each cell's success probability ``p_iq``, shape (draws, cells) float32.

    ``c + (d - c) sigmoid(eta)`` with the run's link and the ability the item sees
    (:meth:`FittedRun.ability`); arena prompts have no floor or ceiling.
    """
    draws = np.arange(run.n_draws)
    out = np.empty((run.n_draws, len(model)), dtype=np.float32)
    step = max(1, CHUNK // max(run.n_draws, 1))
    for start in range(0, len(model), step):
        cells = slice(start, start + step)
        m, q = model[cells], item[cells]
        eta = run.eta(draws, m, q)
        c = None if run.items.get("c") is None else run.items["c"][:, q]
        d = None if run.items.get("d") is None else run.items["d"][:, q]
        out[:, cells] = links.probability(eta, c, d)
    return out


def win_probability(run: FittedRun, model, opponent, item) -> np.ndarray:
    """Draws of ``P(model beats opponent on item)``, shape (draws, pairs) float32.

    ``sigmoid(gamma (p_iq - p_jq))`` under the pairs or reward likelihood, and
    ``sigmoid(theta_i - theta_j)`` under Bradley-Terry (which has no items). Each arena
    cell's ``p_iq`` is computed once, however many pairs it is a side of. Where the arena
    has judges, family biases or style covariates, this is the judge-adjusted
    probability: the shared ``gamma`` (the judges' geometric mean discrimination), no
    family bias, style at its mean.
    """
    if run.arena == "bt":
        return arena_term.win_probability(run.theta[:, model], run.theta[:, opponent])
    if run.gamma is None:
        raise InputError("the run fitted no arena data: it cannot predict arena pairs")
    n = run.dataset.n_items
    keys = _key(np.concatenate([model, opponent]), np.concatenate([item, item]), n)
    cells, side = np.unique(keys, return_inverse=True)
    p = success_probability(run, cells // n, cells % n)
    p_i, p_j = p[:, side[: len(model)]], p[:, side[len(model) :]]
    score = run.model.arena.score
    return arena_term.win_probability(
        score(p_i, run.gamma[:, None]), score(p_j, run.gamma[:, None])
    )


def _key(model, item, n_items: int) -> np.ndarray:
    """One integer per cell ``(model, item)``."""
    return np.asarray(model, dtype=np.int64) * max(n_items, 1) + np.asarray(item)


def _at_cells(data_model, data_item, values, n_items: int, model, item) -> np.ndarray:
    """The data's ``values`` at the cells ``(model, item)``, NaN where the data lack one.

    ``values`` belong to the data's cells ``(data_model, data_item)``; of a repeated cell
    the first value counts.
    """
    known = pd.Series(values, index=_key(data_model, data_item, n_items))
    known = known[~known.index.duplicated()]
    return known.reindex(_key(model, item, n_items)).to_numpy()


def _observed_static(run: FittedRun, model, item) -> np.ndarray:
    """The label of each static cell (its share correct of repeated answers), where known."""
    ds = run.dataset
    labels = ds.static_share
    return _at_cells(ds.static_model, ds.static_item, labels, ds.n_items, model, item)


def _observed_arena(run: FittedRun, model, opponent, item) -> np.ndarray:
    """``sigmoid(z_i - z_j)``, the soft target the fit distils, where both cells were seen."""
    ds = run.dataset
    z_i, z_j = (
        _at_cells(ds.arena_model, ds.arena_item, ds.arena_z, ds.n_items, side, item)
        for side in (model, opponent)
    )
    with np.errstate(invalid="ignore"):
        return links.sigmoid(z_i - z_j)


def predict(run: FittedRun, cells: pd.DataFrame, *, ci: float = 0.9) -> pd.DataFrame:
    """Posterior predictions for cells ``(model, item)``, or ``(model, opponent, item)``.

    Parameters
    ----------
    run : FittedRun
        The fitted run (:func:`fitted_run`).
    cells : pandas.DataFrame
        Columns ``model`` and ``item`` (labels as the run's leaderboard and items.csv
        write them); for arena prompts, an ``opponent`` column names the other model of the
        pair, and where it is missing or empty the row expands to every other model in
        ``cells["model"]`` (each model's row against each of the others).
    ci : float
        Level of the equal-tailed interval.

    Returns
    -------
    pandas.DataFrame
        :data:`PREDICTION_COLUMNS`: static rows give ``P(correct)``, arena rows
        ``P(model beats opponent)``; ``observed`` is the label (static) or the soft target
        ``sigmoid(z_model - z_opponent)`` (arena) where the data had the cell(s), else
        empty.

    Raises
    ------
    InputError
        For a model or item the run does not have.
    """
    ds = run.dataset
    model = indices(cells["model"], ds.models, "model")
    item = indices(cells["item"], ds.items, "item")
    arena = ds.item_kind[item] == "arena"
    frames = []
    static_rows = np.flatnonzero(~arena)
    if len(static_rows):
        m, q = model[static_rows], item[static_rows]
        p = success_probability(run, m, q)
        frames.append(_table(ds, p, m, None, q, _observed_static(run, m, q), ci))
    if arena.any():
        m, o, q = _arena_pairs(cells, model, item, arena, ds)
        p = win_probability(run, m, o, q)
        frames.append(_table(ds, p, m, o, q, _observed_arena(run, m, o, q), ci))
    if not frames:
        return pd.DataFrame(columns=list(PREDICTION_COLUMNS))
    return pd.concat(frames, ignore_index=True)


def _arena_pairs(cells, model, item, arena, ds):
    """Each arena row's (model, opponent, item), rows without an opponent expanded."""
    rows = np.flatnonzero(arena)
    given = cells["opponent"] if "opponent" in cells else pd.Series([""] * len(cells))
    given = given.fillna("").astype(str).to_numpy()[rows]
    named = given != ""
    m, q = model[rows][named], item[rows][named]
    o = indices(given[named], ds.models, "model")
    pool = np.unique(model)
    rest = rows[~named]
    m_all = np.repeat(model[rest], len(pool))
    o_all = np.tile(pool, len(rest))
    q_all = np.repeat(item[rest], len(pool))
    keep = m_all != o_all
    m = np.concatenate([m, m_all[keep]])
    o = np.concatenate([o, o_all[keep]])
    q = np.concatenate([q, q_all[keep]])
    if np.any(m == o):
        raise InputError("an arena prediction needs two different models (model, opponent)")
    return m, o, q


def _table(ds, p, model, opponent, item, observed, ci) -> pd.DataFrame:
    lo, hi = interval(p, ci)
    return pd.DataFrame(
        {
            "model": ds.models[model],
            "opponent": "" if opponent is None else ds.models[opponent],
            "item": ds.items[item],
            "kind": ds.item_kind[item],
            "p_mean": p.mean(axis=0, dtype=np.float64),
            "p_lo": lo,
            "p_hi": hi,
            "observed": observed,
            "ci": ci if p.shape[0] > 1 else np.nan,
        }
    )


def route(
    run: FittedRun,
    models: np.ndarray,
    items: np.ndarray,
    *,
    cost: np.ndarray | None = None,
    cost_weight: float = 1.0,
    ci: float = 0.9,
) -> tuple[pd.DataFrame, dict]:
    """For each item, the model most likely to succeed, net of ``cost_weight * cost``.

    Parameters
    ----------
    run : FittedRun
    models, items : numpy.ndarray of int
        The candidate models and the items to route (indices into the run's dataset).
    cost : numpy.ndarray of float, optional
        A cost per candidate model (same order as ``models``); the choice maximises the
        expected ``p_iq - cost_weight * cost_i``.
    cost_weight : float
        Success probability one unit of cost is worth giving up.
    ci : float
        Level of the interval of the chosen model's success probability.

    Returns
    -------
    table : pandas.DataFrame
        One row per item: ``item, kind, model, p_mean, p_lo, p_hi, p_best, runner_up,
        runner_up_p_mean`` (and ``cost``, ``utility_mean`` with costs). ``p_best`` is the
        posterior probability that the chosen model has the highest utility on the item.
    summary : dict
        Mean success probability over the items of the routed choice (``routed``), of the
        best single model (``best_single``, and its name ``best_single_model``), and of the
        oracle that picks each item's best model in every draw (``oracle``); with costs,
        the same for the mean utility (``*_utility``).
    """
    models, items = np.asarray(models), np.asarray(items)
    if len(models) < 1 or len(items) < 1:
        raise InputError("routing needs at least one model and one item")
    if run.items.get("b") is None:
        raise InputError(
            f"the run's model ({run.model.config.name}) has no item parameters, so every "
            "item would go to the same model: route with a run of an IRT model"
        )
    ds = run.dataset
    m = np.tile(models, len(items))
    q = np.repeat(items, len(models))
    # (draws, items, models)
    p = success_probability(run, m, q).reshape(run.n_draws, len(items), len(models))
    penalty = 0.0 if cost is None else cost_weight * np.asarray(cost, dtype=np.float32)
    utility = p - penalty
    mean_u = utility.mean(axis=0, dtype=np.float64)  # (items, models)
    best = mean_u.argmax(axis=1)
    winner = utility.argmax(axis=2)  # (draws, items)
    p_best = (winner == best[None, :]).mean(axis=0)
    rows = np.arange(len(items))
    chosen = p[:, rows, best]  # (draws, items)
    lo, hi = interval(chosen, ci)
    masked = np.where(np.arange(len(models))[None, :] == best[:, None], -np.inf, mean_u)
    runner = masked.argmax(axis=1) if len(models) > 1 else best
    mean_p = p.mean(axis=0, dtype=np.float64)
    table = pd.DataFrame(
        {
            "item": ds.items[items],
            "kind": ds.item_kind[items],
            "model": ds.models[models[best]],
            "p_mean": mean_p[rows, best],
            "p_lo": lo,
            "p_hi": hi,
            "p_best": p_best,
            "runner_up": ds.models[models[runner]] if len(models) > 1 else "",
            "runner_up_p_mean": mean_p[rows, runner] if len(models) > 1 else np.nan,
        }
    )
    single = mean_p.mean(axis=0)
    summary = {
        "items": int(len(items)),
        "models": int(len(models)),
        "routed": float(mean_p[rows, best].mean()),
        "best_single": float(single.max()),
        "best_single_model": str(ds.models[models[single.argmax()]]),
        "oracle": float(p.max(axis=2).mean()),
    }
    if cost is not None:
        table["cost"] = np.asarray(cost, dtype=float)[best]
        table["utility_mean"] = mean_u[rows, best]
        single_u = mean_u.mean(axis=0)
        summary |= {
            "routed_utility": float(mean_u[rows, best].mean()),
            "best_single_utility": float(single_u.max()),
            "oracle_utility": float(utility.max(axis=2).mean()),
        }
    return table, summary
