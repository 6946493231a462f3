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
    """Per model: static accuracy, mean normalised reward and counts of each kind.

    Counts are answers (``n_static``) and rewards (``n_arena``), repeated samples counted.
    """
    m = dataset.n_models
    n_static = np.bincount(dataset.static_model, weights=dataset.static_n, minlength=m)
    n_arena = np.bincount(dataset.arena_model, weights=dataset.arena_n, minlength=m)
    correct = np.bincount(dataset.static_model, weights=dataset.static_y, minlength=m)
    reward = np.bincount(
        dataset.arena_model, weights=dataset.arena_z * dataset.arena_n, minlength=m
    )
    n_static, n_arena = n_static.astype(np.int64), n_arena.astype(np.int64)
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


def _ranking(theta: np.ndarray, models: np.ndarray, ci: float) -> tuple[np.ndarray, dict]:
    """The order of models by posterior mean ability (best first) and the ranking columns.

    ``rank, model, theta_mean, theta_sd, theta_lo, theta_hi, rank_mean, rank_lo, rank_hi,
    p_top1``, in that order, from draws ``theta`` of shape (draws, models).
    """
    n = theta.shape[0]
    r = ranks(theta)
    mean = theta.mean(axis=0)
    order = np.argsort(-mean, kind="stable")
    lo, hi = interval(theta, ci)
    rlo, rhi = interval(r.astype(float), ci)
    return order, {
        "rank": np.arange(1, len(order) + 1),
        "model": models[order],
        "theta_mean": mean[order],
        "theta_sd": theta.std(axis=0, ddof=1)[order] if n > 1 else np.nan,
        "theta_lo": lo[order],
        "theta_hi": hi[order],
        "rank_mean": r.mean(axis=0)[order],
        "rank_lo": rlo[order],
        "rank_hi": rhi[order],
        "p_top1": (r == 1).mean(axis=0)[order] if n > 1 else np.nan,
    }


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
    order, columns = _ranking(theta, np.asarray(idata.posterior["model"].values), ci)
    n = theta.shape[0]
    beats_next = np.full(len(order), np.nan)
    if n > 1:
        beats_next[:-1] = np.mean(theta[:, order[:-1]] > theta[:, order[1:]], axis=0)
    obs = observed_by_model(dataset).reindex(idata.posterior["model"].values)
    table = pd.DataFrame(
        {
            **columns,
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


#: Comparisons :func:`pairwise` holds at once (booleans): 1,000 models x 4,000 draws would
#: otherwise take 4 GB.
PAIRWISE_BLOCK = 2**25


def pairwise(idata) -> pd.DataFrame:
    """Matrix of ``P(theta_i > theta_j)`` (row model beats column model), best first.

    The diagonal is NaN. With a single draw the entries are 0 or 1. Computed in blocks of
    rows (:data:`PAIRWISE_BLOCK` comparisons at a time).
    """
    theta = draws_of(idata, "theta_centred")
    order = np.argsort(-theta.mean(axis=0), kind="stable")
    t = theta[:, order]
    n_draws, n = t.shape
    prob = np.empty((n, n))
    # rows in blocks: draws x block x models comparisons at a time, never draws x M x M
    block = max(1, PAIRWISE_BLOCK // max(n_draws * n, 1))
    for lo in range(0, n, block):
        rows = t[:, lo : lo + block]
        prob[lo : lo + block] = (rows[:, :, None] > t[:, None, :]).mean(axis=0)
    np.fill_diagonal(prob, np.nan)
    labels = np.asarray(idata.posterior["model"].values)[order]
    return pd.DataFrame(prob, index=pd.Index(labels, name="model"), columns=labels)


def has_domain_abilities(idata) -> bool:
    """Whether a run fitted an ability per item domain (``theta_domain`` in its posterior)."""
    return "theta_domain" in idata.posterior


def _domain_draws(idata) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Domain abilities centred over models (draws, M, K), the centred overall ones, domains.

    The deviations of a domain sum to zero over models, so centring a domain's abilities
    removes the same ``theta_mean`` as centring the overall ones: both are on the
    leaderboard's scale.
    """
    theta = draws_of(idata, "theta_domain")
    mean = draws_of(idata, "theta").mean(axis=1)
    return (
        theta - mean[:, None, None],
        draws_of(idata, "theta_centred"),
        np.asarray(idata.posterior["domain"].values).astype(str),
    )


def items_by_domain(dataset: Dataset) -> pd.DataFrame:
    """Answered items per model and domain (static labels and arena rewards), models x domains."""
    domain = dataset.domain_index
    k = len(dataset.domains)
    counts = np.zeros((dataset.n_models, k + 1), dtype=np.int64)
    for model, item in (
        (dataset.static_model, dataset.static_item),
        (dataset.arena_model, dataset.arena_item),
    ):
        np.add.at(counts, (model, domain[item]), 1)
    return pd.DataFrame(
        counts[:, :k], index=pd.Index(dataset.models, name="model"), columns=dataset.domains
    )


def leaderboard_by_domain(idata, dataset: Dataset, *, ci: float = 0.95) -> pd.DataFrame:
    """One leaderboard per item domain, from the domain abilities ``theta_domain``.

    Columns: ``domain, rank, model, theta_mean, theta_sd, theta_lo, theta_hi, rank_mean,
    rank_lo, rank_hi, p_top1, overall_rank, n_items, ci``: as :func:`leaderboard`, for the
    ability in that domain (centred over models, on the leaderboard's scale) and the ranks
    within the domain; ``overall_rank`` is the model's rank on the overall leaderboard
    (by posterior mean) and ``n_items`` the domain's items the model answered. Domains in
    name order, best model first within each.
    """
    theta, overall, domains = _domain_draws(idata)
    models = np.asarray(idata.posterior["model"].values)
    overall_rank = np.empty(len(models), dtype=int)
    overall_rank[np.argsort(-overall.mean(axis=0), kind="stable")] = np.arange(1, len(models) + 1)
    answered = items_by_domain(dataset).reindex(index=models, columns=domains, fill_value=0)
    n = theta.shape[0]
    parts = []
    for k, domain in enumerate(domains):
        order, columns = _ranking(theta[:, :, k], models, ci)
        parts.append(
            pd.DataFrame(
                {
                    "domain": domain,
                    **columns,
                    "overall_rank": overall_rank[order],
                    "n_items": answered[domain].to_numpy()[order],
                }
            )
        )
    table = pd.concat(parts, ignore_index=True)
    table["ci"] = ci if n > 1 else np.nan
    return table


def domain_deviations(idata, *, ci: float = 0.95) -> pd.DataFrame:
    """How far each model's domain ability lies from its overall ability.

    Columns: ``model, domain, deviation_mean, deviation_lo, deviation_hi, p_above,
    specialist, ci``: the deviation ``theta_{i,d} - theta_i`` (posterior mean and
    equal-tailed interval), the posterior probability that it is positive, and
    ``specialist``: ``"stronger"`` or ``"weaker"`` where the interval excludes zero (the
    model is credibly better or worse in that domain than overall), else empty. Largest
    deviations first.
    """
    theta, overall, domains = _domain_draws(idata)
    dev = theta - overall[:, :, None]
    models = np.asarray(idata.posterior["model"].values)
    lo, hi = interval(dev, ci)
    mean = dev.mean(axis=0)
    label = np.where(lo > 0, "stronger", np.where(hi < 0, "weaker", ""))
    m, k = mean.shape
    table = pd.DataFrame(
        {
            "model": np.repeat(models, k),
            "domain": np.tile(domains, m),
            "deviation_mean": mean.ravel(),
            "deviation_lo": lo.ravel(),
            "deviation_hi": hi.ravel(),
            "p_above": (dev > 0).mean(axis=0).ravel(),
            "specialist": label.ravel(),
        }
    )
    table["ci"] = ci if dev.shape[0] > 1 else np.nan
    order = np.argsort(-np.abs(table["deviation_mean"].to_numpy()), kind="stable")
    return table.iloc[order].reset_index(drop=True)
