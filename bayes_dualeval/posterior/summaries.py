"""Posterior summaries as tables: the leaderboard and pairwise win probabilities.

Intervals are equal-tailed posterior quantiles at level ``ci``; each table records the level
in its ``ci`` column. With a single draw (MAP) interval columns are NaN and ``ci`` is NaN:
a point estimate has no interval.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayes_dualeval.data.dataset import Dataset


def draws_of(idata, name: str) -> np.ndarray:
    """A posterior variable's draws with chains pooled, shape ``(n_draws, ...)``."""
    values = np.asarray(idata.posterior[name].values)
    return values.reshape(-1, *values.shape[2:])


#: Columns sorted at once by :func:`interval` (bounds its working memory).
INTERVAL_BLOCK = 4096


def interval(draws: np.ndarray, ci: float, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Equal-tailed interval of ``draws`` along ``axis`` (NaN with fewer than 2 draws).

    The quantiles are those of :func:`numpy.quantile` (linear interpolation between order
    statistics), computed by sorting blocks of :data:`INTERVAL_BLOCK` columns at a time: a
    contiguous sort is several times faster than a strided selection, and memory stays
    bounded for wide arrays (tens of thousands of items).
    """
    draws = np.asarray(draws)
    n = draws.shape[axis]
    shape = tuple(np.delete(np.array(draws.shape, dtype=int), axis))
    if n < 2:
        nan = np.full(shape, np.nan)
        return nan, nan.copy()
    columns = np.moveaxis(draws, axis, -1).reshape(-1, n)
    lo = np.empty(len(columns))
    hi = np.empty(len(columns))
    pos = np.array([(1 - ci) / 2, (1 + ci) / 2]) * (n - 1)
    below = np.clip(np.floor(pos).astype(int), 0, n - 2)
    frac = pos - below
    dtype = draws.dtype if np.issubdtype(draws.dtype, np.floating) else np.float64
    for start in range(0, len(columns), INTERVAL_BLOCK):
        block = np.array(columns[start : start + INTERVAL_BLOCK], dtype=dtype, order="C")
        block.sort(axis=1)
        for out, k, f in ((lo, below[0], frac[0]), (hi, below[1], frac[1])):
            a, b = block[:, k].astype(np.float64), block[:, k + 1].astype(np.float64)
            out[start : start + len(block)] = a + f * (b - a)
    return lo.reshape(shape), hi.reshape(shape)


def ranks(theta: np.ndarray) -> np.ndarray:
    """Rank of each model in each draw (1 = best), shape like ``theta`` (draws, models)."""
    order = np.argsort(-theta, axis=1, kind="stable")
    out = np.empty_like(order)
    rows = np.arange(theta.shape[0])[:, None]
    out[rows, order] = np.arange(1, theta.shape[1] + 1)[None, :]
    return out


def observed_by_model(dataset: Dataset) -> pd.DataFrame:
    """Per model: static accuracy, mean normalised reward and counts of each kind."""
    m = dataset.n_models
    n_static = np.bincount(dataset.static_model, minlength=m)
    n_arena = np.bincount(dataset.arena_model, minlength=m)
    correct = np.bincount(dataset.static_model, weights=dataset.static_y, minlength=m)
    reward = np.bincount(dataset.arena_model, weights=dataset.arena_z, minlength=m)
    with np.errstate(invalid="ignore", divide="ignore"):
        return pd.DataFrame(
            {
                "static_accuracy": np.where(n_static > 0, correct / n_static, np.nan),
                "mean_reward_z": np.where(n_arena > 0, reward / n_arena, np.nan),
                "n_static": n_static,
                "n_arena": n_arena,
            },
            index=pd.Index(dataset.models, name="model"),
        )


def leaderboard(idata, dataset: Dataset, *, ci: float = 0.95) -> pd.DataFrame:
    """One row per model, best first.

    Columns: ``rank, model, theta_mean, theta_sd, theta_lo, theta_hi, rank_mean, rank_lo,
    rank_hi, p_top1, p_beats_next, static_accuracy, mean_reward_z, n_static, n_arena, tier,
    ci``. ``theta`` is centred to mean zero across models; ``rank_lo``/``rank_hi`` is the
    interval of the model's rank over draws; ``p_beats_next`` the posterior probability
    of beating the model one place below; ``tier`` groups adjacent models that cannot be
    told apart (``p_beats_next`` below ``ci``).
    """
    theta = draws_of(idata, "theta_centred")
    r = ranks(theta)
    mean = theta.mean(axis=0)
    order = np.argsort(-mean, kind="stable")
    lo, hi = interval(theta, ci)
    rlo, rhi = interval(r.astype(float), ci)
    n = theta.shape[0]
    beats_next = np.full(len(order), np.nan)
    if n > 1:
        beats_next[:-1] = np.mean(theta[:, order[:-1]] > theta[:, order[1:]], axis=0)
    obs = observed_by_model(dataset).reindex(idata.posterior["model"].values)
    table = pd.DataFrame(
        {
            "rank": np.arange(1, len(order) + 1),
            "model": np.asarray(idata.posterior["model"].values)[order],
            "theta_mean": mean[order],
            "theta_sd": theta.std(axis=0, ddof=1)[order] if n > 1 else np.nan,
            "theta_lo": lo[order],
            "theta_hi": hi[order],
            "rank_mean": r.mean(axis=0)[order],
            "rank_lo": rlo[order],
            "rank_hi": rhi[order],
            "p_top1": (r == 1).mean(axis=0)[order] if n > 1 else np.nan,
            "p_beats_next": beats_next,
            "static_accuracy": obs["static_accuracy"].to_numpy()[order],
            "mean_reward_z": obs["mean_reward_z"].to_numpy()[order],
            "n_static": obs["n_static"].to_numpy()[order],
            "n_arena": obs["n_arena"].to_numpy()[order],
        }
    )
    tier = np.ones(len(order), dtype=int)
    for pos in range(1, len(order)):
        separated = beats_next[pos - 1] >= ci if n > 1 else True
        tier[pos] = tier[pos - 1] + int(separated)
    table["tier"] = tier
    table["ci"] = ci if n > 1 else np.nan
    return table


def pairwise(idata) -> pd.DataFrame:
    """Matrix of ``P(theta_i > theta_j)`` (row model beats column model), best first.

    The diagonal is NaN. With a single draw the entries are 0 or 1.
    """
    theta = draws_of(idata, "theta_centred")
    order = np.argsort(-theta.mean(axis=0), kind="stable")
    t = theta[:, order]
    prob = (t[:, :, None] > t[:, None, :]).mean(axis=0)
    np.fill_diagonal(prob, np.nan)
    labels = np.asarray(idata.posterior["model"].values)[order]
    return pd.DataFrame(prob, index=pd.Index(labels, name="model"), columns=labels)
