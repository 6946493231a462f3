"""The judges' tables of a run with arena facets (:mod:`bayes_dualeval.model.facets`).

* ``judges.csv``: one row per judge of the arena, its rows and models, its severity (the
  level shift of its rewards at the average answer the judges share, centred over judges:
  :func:`judge_levels`; NaN without the level term) and discrimination
  (``gamma_judge``) with intervals, and its ``agreement``: the Spearman correlation over
  models between its mean normalised reward per model and the other judges' consensus (the
  mean of their per-model means), over the models both saw (NaN below three);
* ``judge_bias.csv``: one row per judge and family, the judge x family bias with its
  interval, ``p_positive`` (its posterior probability of being above 0) and the judge's
  rows on that family's models;
* ``style.csv``: one row per style covariate and judge, the coefficient (per standard
  deviation of the covariate) with its interval, and the standardisation the fit applied
  (``covariate_mean``, ``covariate_sd``), so a coefficient converts to raw units;
* ``graders.csv``: one row per judge of the static labels (with two or more:
  :mod:`bayes_dualeval.model.graders`), its labels, models and items, its raw pass rate,
  and its severity on the pass rate's logit (positive: strict) with its interval.

Empty tables (with their columns) where the run has no such facet.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
from scipy import stats

from bayes_dualeval.core.thinning import evenly_spaced
from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.model import graders, links
from bayes_dualeval.model.ability_map import abilities_of
from bayes_dualeval.model.arena_term import reward_score
from bayes_dualeval.model.facets import Facets, arena_facets
from bayes_dualeval.model.likelihood import cell_eta
from bayes_dualeval.posterior.summaries import draws_of, interval

JUDGE_COLUMNS = (
    "judge", "n_rows", "n_models", "severity_mean", "severity_lo", "severity_hi",
    "discrimination_mean", "discrimination_lo", "discrimination_hi", "agreement",
)  # fmt: skip
BIAS_COLUMNS = ("judge", "family", "bias_mean", "bias_lo", "bias_hi", "p_positive", "n_rows")
STYLE_COLUMNS = (
    "covariate", "judge", "coef_mean", "coef_lo", "coef_hi", "covariate_mean", "covariate_sd",
)  # fmt: skip
GRADER_COLUMNS = (
    "judge", "n_labels", "n_models", "n_items", "pass_rate",
    "severity_mean", "severity_lo", "severity_hi",
)  # fmt: skip
#: Fewest models two judges must share for ``agreement``.
MIN_SHARED = 3
#: Most posterior draws the judges' levels are computed from (evenly spaced).
LEVEL_DRAWS = 1000
#: The sites a judge's level reads.
_LEVEL_SITES = (
    "theta", "theta_domain", "theta_dims", "loading", "a", "b",
    "gamma_judge", "severity", "level_scale",
)  # fmt: skip


def facet_tables(idata, dataset: Dataset, ci: float) -> dict[str, pd.DataFrame]:
    """``{"judges": ..., "judge_bias": ..., "style": ..., "graders": ...}`` of a run.

    Only the tables the run has a facet for (see the module): judges with two judges or
    more of the arena, biases where they were fitted, style with style covariates, graders
    with two judges or more of the static labels.
    """
    post = idata.posterior
    facet = arena_facets(dataset, len(dataset.arena_z) > 0)
    out = {}
    if facet.n_judges > 1:
        out["judges"] = judge_table(idata, dataset, ci)
    if "judge_bias" in post:
        out["judge_bias"] = bias_table(idata, dataset, ci)
    if "style_coef" in post:
        out["style"] = style_table(idata, dataset, ci)
    if graders.SITE in post:
        out["graders"] = grader_table(idata, dataset, ci)
    return out


def grader_table(idata, dataset: Dataset, ci: float) -> pd.DataFrame:
    """``graders.csv`` (see the module)."""
    names, grader = graders.graders(dataset)
    g = len(names)
    severity = _summary(draws_of(idata, graders.SITE), ci)
    n = np.asarray(dataset.static_n, np.float64)
    labels = np.bincount(grader, weights=n, minlength=g)
    correct = np.bincount(grader, weights=dataset.static_y, minlength=g)

    def distinct(axis: np.ndarray) -> list[int]:
        return [len(np.unique(axis[grader == k])) for k in range(g)]

    return pd.DataFrame(
        {
            "judge": names,
            "n_labels": labels.astype(int),
            "n_models": distinct(dataset.static_model),
            "n_items": distinct(dataset.static_item),
            "pass_rate": correct / np.maximum(labels, 1.0),
            "severity_mean": severity[0],
            "severity_lo": severity[1],
            "severity_hi": severity[2],
        },
        columns=list(GRADER_COLUMNS),
    )


def _summary(draws: np.ndarray, ci: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    lo, hi = interval(draws, ci)
    return draws.mean(axis=0), lo, hi


def judge_table(idata, dataset: Dataset, ci: float) -> pd.DataFrame:
    """``judges.csv`` (see the module)."""
    facet = arena_facets(dataset, True)
    post = idata.posterior
    k = facet.n_judges
    nan = np.full(k, np.nan)
    levels = judge_levels(idata, dataset)
    severity = _summary(levels, ci) if levels is not None else (nan,) * 3
    gamma = _summary(draws_of(idata, "gamma_judge"), ci) if "gamma_judge" in post else (nan,) * 3
    rows = np.bincount(facet.judge, weights=dataset.arena_n, minlength=k).astype(int)
    models = [len(np.unique(dataset.arena_model[facet.judge == j])) for j in range(k)]
    return pd.DataFrame(
        {
            "judge": facet.judges,
            "n_rows": rows,
            "n_models": models,
            "severity_mean": severity[0],
            "severity_lo": severity[1],
            "severity_hi": severity[2],
            "discrimination_mean": gamma[0],
            "discrimination_lo": gamma[1],
            "discrimination_hi": gamma[2],
            "agreement": agreement(dataset, facet.judge, k),
        },
        columns=list(JUDGE_COLUMNS),
    )


def judge_levels(idata, dataset: Dataset, max_draws: int = LEVEL_DRAWS) -> np.ndarray | None:
    r"""Each judge's severity as ``judges.csv`` reports it, per draw: (draws, judges).

    The mean reward the fit predicts of a judge on the answers the judges share (the
    arena cells (model, prompt) that two judges or more scored: :func:`shared_cells`),
    centred over judges: how much lower (negative) or higher a judge scores the same
    answers than the others, on the normalised rewards' scale, leaving aside its family
    biases and style payments (``judge_bias.csv``, ``style.csv``). A cell ``r`` of judge
    ``k`` in unit ``u`` (its prompt as the judge scored it) is predicted the unit's level
    plus the cell's score beyond the unit's mean:

    .. math:: \hat z_r = \delta_k + \kappa_k \gamma_k (\bar p_u - 1/2)
              + \gamma_k (p_r - \bar p_u)

    (:meth:`~bayes_dualeval.model.facets.Facets.level_mean`), averaged over the judge's
    shared cells. The model's ``severity`` (:math:`\delta_k`) is the level at a success
    probability of one half, and the level slope :math:`\kappa_k \gamma_k` reads a
    unit's mean over the models the judge scored; on AlpacaEval, whose judges saw
    different models, reading either away from the answers the judges share contradicted
    the models both judges scored (docs/validation.md §11). Where no cell is shared, every
    judge is predicted on every cell (each in its own unit): the level at the mean
    success probability of every cell; a judge that shares no answer while others do is
    NaN. None without the level term.
    """
    post = idata.posterior
    if "severity" not in post:
        return None
    facet = arena_facets(dataset, True)
    n, k = len(facet.judge), facet.n_judges
    keep = evenly_spaced(post.sizes["chain"] * post.sizes["draw"], max_draws)
    draws = {s: jnp.asarray(draws_of(idata, s)[keep]) for s in _LEVEL_SITES if s in post}
    model = jnp.asarray(dataset.arena_model[:n])
    item = np.asarray(dataset.arena_item[:n])
    key = facet.judge.astype(np.int64) * dataset.n_items + item
    _, unit = np.unique(key, return_inverse=True)
    unit = jnp.asarray(unit.ravel())
    units = int(unit.max()) + 1
    size = jax.ops.segment_sum(jnp.ones(n), unit, units)
    # which cells each judge is read on, as weights summing to one per judge (a judge
    # sharing no answer while others do has none: NaN)
    cells = shared_cells(dataset, facet.judge)
    weight = np.zeros((k, n))
    if cells.any():
        weight[facet.judge[cells], np.flatnonzero(cells)] = 1.0
    else:
        weight[:] = 1.0
    with np.errstate(invalid="ignore"):
        weight = jnp.asarray(weight / weight.sum(axis=1, keepdims=True))
    every = jnp.arange(k)

    def level(d):
        eta = cell_eta(
            abilities_of(d, dataset.domain_index), d.get("a"), d["b"], model, jnp.asarray(item)
        )
        p = links.probability(eta)
        pbar = (jax.ops.segment_sum(p, unit, units) / size)[unit]
        f = Facets(d["gamma_judge"], severity=d["severity"], level_scale=d.get("level_scale"))
        at_unit, at_cell = weight @ pbar, weight @ p
        beyond = reward_score(at_cell, f.gamma) - reward_score(at_unit, f.gamma)
        return f.level_mean(reward_score(at_unit, f.gamma), every) + beyond

    out = np.asarray(jax.lax.map(level, draws, batch_size=50), np.float64)
    return out - np.nanmean(out, axis=1, keepdims=True)


def shared_cells(dataset: Dataset, judge: np.ndarray) -> np.ndarray:
    """Which arena cells' (model, prompt) two judges or more scored: bool, shape (R,).

    ``judge`` is each arena cell's judge index
    (:class:`~bayes_dualeval.model.facets.ArenaFacets`). Every cell where every judge
    scored every answer; only the doubly judged models' cells on AlpacaEval's judges.
    """
    n = len(judge)
    key = dataset.arena_model[:n].astype(np.int64) * dataset.n_items + dataset.arena_item[:n]
    pairs = np.unique(np.stack([key, np.asarray(judge, np.int64)], axis=1), axis=0)
    seen, count = np.unique(pairs[:, 0], return_counts=True)
    return np.isin(key, seen[count > 1])


def agreement(dataset: Dataset, judge: np.ndarray, n_judges: int) -> np.ndarray:
    """Each judge's Spearman correlation with the other judges' consensus, over models."""
    m = dataset.n_models
    key = judge.astype(np.int64) * m + dataset.arena_model
    total = np.bincount(key, weights=dataset.arena_z, minlength=n_judges * m)
    count = np.bincount(key, minlength=n_judges * m)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = (total / count).reshape(n_judges, m)  # NaN where a judge saw no model
    out = np.full(n_judges, np.nan)
    for j in range(n_judges):
        others = np.delete(mean, j, axis=0)
        seen = ~np.isnan(others)
        consensus = np.where(seen, others, 0.0).sum(axis=0) / np.maximum(seen.sum(axis=0), 1)
        shared = ~np.isnan(mean[j]) & seen.any(axis=0)
        if shared.sum() >= MIN_SHARED:
            out[j] = stats.spearmanr(mean[j, shared], consensus[shared]).statistic
    return out


def bias_table(idata, dataset: Dataset, ci: float) -> pd.DataFrame:
    """``judge_bias.csv`` (see the module)."""
    facet = arena_facets(dataset, True)
    draws = draws_of(idata, "judge_bias")  # (S, J, F)
    mean, lo, hi = _summary(draws, ci)
    positive = (draws > 0).mean(axis=0)
    family = facet.family[dataset.arena_model]
    key = facet.judge.astype(np.int64) * (facet.n_families + 1) + family
    rows = np.bincount(
        key, weights=dataset.arena_n, minlength=facet.n_judges * (facet.n_families + 1)
    ).reshape(facet.n_judges, facet.n_families + 1)[:, : facet.n_families]
    j, f = np.meshgrid(np.arange(facet.n_judges), np.arange(facet.n_families), indexing="ij")
    return pd.DataFrame(
        {
            "judge": facet.judges[j.ravel()],
            "family": facet.families[f.ravel()],
            "bias_mean": mean.ravel(),
            "bias_lo": lo.ravel(),
            "bias_hi": hi.ravel(),
            "p_positive": positive.ravel(),
            "n_rows": rows.ravel().astype(int),
        },
        columns=list(BIAS_COLUMNS),
    )


def style_table(idata, dataset: Dataset, ci: float) -> pd.DataFrame:
    """``style.csv`` (see the module)."""
    facet = arena_facets(dataset, True)
    draws = draws_of(idata, "style_coef")  # (S, C, J)
    mean, lo, hi = _summary(draws, ci)
    c, j = np.meshgrid(np.arange(mean.shape[0]), np.arange(mean.shape[1]), indexing="ij")
    return pd.DataFrame(
        {
            "covariate": np.asarray(dataset.style)[c.ravel()],
            "judge": facet.judges[j.ravel()],
            "coef_mean": mean.ravel(),
            "coef_lo": lo.ravel(),
            "coef_hi": hi.ravel(),
            "covariate_mean": facet.style_mean[c.ravel()],
            "covariate_sd": facet.style_sd[c.ravel()],
        },
        columns=list(STYLE_COLUMNS),
    )
