"""Scores of a fit's predictions of the cells it did not see (``fit --holdout F``).

Static labels: the posterior predictive probability of success of each held-out cell,
``p = E[P(y = 1 | draw)]`` over the draws, scored by its mean log score
``mean(y log p + (1 - y) log(1 - p))`` (higher is better; ``log 0.5 = -0.693`` is a coin),
the Brier score and the AUC (the probability that a held-out success gets a higher ``p``
than a held-out failure).

Arena rewards: a held-out reward of model ``i`` on prompt ``q`` is compared with every
fitted reward of another model ``j`` on ``q``, as DualEval distils rewards into pairs: the
soft target ``t = sigmoid(z_i - z_j)`` against the posterior predictive probability ``s``
that ``i`` beats ``j`` (``sigmoid(gamma (p_iq - p_jq))`` for the pairs likelihood,
``sigmoid(theta_i - theta_j)`` for Bradley-Terry, ``Phi(gamma (p_iq - p_jq) / (sqrt 2
sigma))`` for the reward likelihood), scored by the mean soft log score
``t log s + (1 - t) log(1 - s)`` and the AUC of ``s`` for the pairs where ``i`` had the
higher reward (equal rewards left out of the AUC).

With domain abilities every cell is predicted from its domain's ability
(:meth:`~bayes_dualeval.checks.fitted.FittedRun.eta`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import rankdata

from bayes_dualeval.checks.fitted import FittedRun, resolve
from bayes_dualeval.core.thinning import evenly_spaced
from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.data.distill import Pairs
from bayes_dualeval.data.holdout import HeldOut
from bayes_dualeval.model import arena_term, links

#: Posterior draws the scores average over (evenly spaced).
HOLDOUT_DRAWS = 500
#: Draws x pairs evaluated at once (bounds memory).
CHUNK_ELEMENTS = 20_000_000
#: Columns of ``holdout.csv``.
COLUMNS = ("model", "item", "kind", "observed", "p_mean", "partners")


def holdout_scores(
    idata, dataset: Dataset, pairs: Pairs | None, held: HeldOut, *, max_draws: int = HOLDOUT_DRAWS
) -> tuple[dict, pd.DataFrame]:
    """Score a run's predictions of its held-out cells.

    Parameters
    ----------
    idata : arviz.InferenceData
        The run's posterior (its specification in ``posterior.attrs``).
    dataset : Dataset
        The data the run was fitted to (without the held-out cells).
    pairs : Pairs or None
        The run's pairs (distilled again when None and needed).
    held : HeldOut
        The cells left out (:func:`bayes_dualeval.data.holdout.hold_out`).
    max_draws : int
        Draws averaged over.

    Returns
    -------
    summary : dict
        ``share``, ``seed``, ``draws`` and, per kind held out, ``static``: ``cells``,
        ``answers``, ``log_score``, ``brier``, ``auc`` (per answer: a cell with repeated
        answers counts each); ``arena``: ``cells``, ``pairs``, ``log_score``,
        ``auc``. The ``diagnostics.json`` entry ``holdout``.
    table : pandas.DataFrame
        One row per held-out cell (``holdout.csv``): ``model, item, kind, observed,
        p_mean, partners``; for a static cell its share of correct answers (the label
        with one answer) and its predicted probability of success; for an arena cell
        the mean soft target against the prompt's fitted models and the mean predicted
        probability of beating them, and their number.
    """
    fit = resolve(idata, dataset, pairs, None, None)
    d = evenly_spaced(fit.n_draws, max_draws)
    summary: dict = {"share": held.share, "seed": held.seed, "draws": len(d)}
    parts = []
    if held.n_static and fit.use_static:
        p = _static_probability(fit, d, held)
        k, n = held.static_y.astype(np.float64), held.static_n.astype(np.float64)
        y = k / n  # per answer: each cell's answers weigh in (repeated samples)
        # every answer as a label: k successes and n - k failures at the cell's p
        answers = np.repeat(np.r_[p, p], np.r_[k, n - k].astype(np.int64))
        correct = np.repeat(
            np.r_[np.ones(len(p)), np.zeros(len(p))], np.r_[k, n - k].astype(np.int64)
        )
        summary["static"] = {
            "cells": int(held.n_static),
            "answers": int(n.sum()),
            "log_score": _mean_log_score(y, p, n),
            "brier": float(np.average((p - y) ** 2, weights=n)),
            "auc": auc(answers, correct > 0.5),
        }
        parts.append(_rows(fit, held.static_model, held.static_item, "static", y, p, 1))
    if held.n_arena and fit.arena is not None:
        observed, predicted, n, scores = _arena(fit, d, held)
        summary["arena"] = {"cells": int(held.n_arena), **scores}
        parts.append(
            _rows(fit, held.arena_model, held.arena_item, "arena", observed, predicted, n)
        )
    table = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=COLUMNS)
    return summary, table


def auc(score: np.ndarray, positive: np.ndarray) -> float:
    """Area under the ROC curve of ``score`` for the labels ``positive`` (ties count half).

    NaN when either class is empty.
    """
    score = np.asarray(score, np.float64)
    positive = np.asarray(positive, bool)
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    rank = rankdata(score)
    return float((rank[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def _mean_log_score(target: np.ndarray, p: np.ndarray, weights=None) -> float:
    """Mean log score of outcomes ``target`` (shares, soft targets) at ``p``, weighted."""
    p = np.clip(p, 1e-12, 1 - 1e-12)
    terms = target * np.log(p) + (1 - target) * np.log1p(-p)
    return float(np.average(terms, weights=weights))


def _static_probability(fit: FittedRun, d: np.ndarray, held: HeldOut) -> np.ndarray:
    """Posterior predictive probability of success of the held-out static cells."""
    grader = fit.static_graders(held.static_judge)
    eta = fit.eta(d, held.static_model, held.static_item, grader=grader).astype(np.float64)
    floor, ceiling = (
        None if fit.items[name] is None else fit.items[name][np.ix_(d, held.static_item)]
        for name in ("c", "d")
    )
    return links.probability(eta, floor, ceiling).mean(axis=0)


def _arena(fit: FittedRun, d: np.ndarray, held: HeldOut):
    """Per held-out arena cell: mean target, mean prediction, partners; and the scores."""
    ds = fit.dataset
    # every fitted cell of another model on the held-out cell's prompt is a partner
    order = np.argsort(ds.arena_item, kind="stable")
    first = np.searchsorted(ds.arena_item[order], held.arena_item, side="left")
    last = np.searchsorted(ds.arena_item[order], held.arena_item, side="right")
    count = last - first
    cell = np.repeat(np.arange(held.n_arena), count)
    offset = np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count)
    partner = order[np.repeat(first, count) + offset]
    other = ds.arena_model[partner] != held.arena_model[cell]
    cell, partner = cell[other], partner[other]
    target = 1.0 / (1.0 + np.exp(-(held.arena_z[cell] - ds.arena_z[partner])))
    s = np.empty(len(cell))
    if fit.arena == "bt":
        theta = fit.theta[d].astype(np.float64)
        first_side = theta[:, held.arena_model]
        second_side = theta[:, ds.arena_model]
    else:
        first_side = links.probability(fit.eta(d, held.arena_model, held.arena_item))
        second_side = links.probability(fit.eta(d, ds.arena_model, ds.arena_item))
    step = max(1, CHUNK_ELEMENTS // max(len(d), 1))
    for start in range(0, len(cell), step):
        c, j = cell[start : start + step], partner[start : start + step]
        gap = first_side[:, c].astype(np.float64) - second_side[:, j]
        s[start : start + step] = _win(fit, d, gap).mean(axis=0)
    n = np.bincount(cell, minlength=held.n_arena)
    with np.errstate(invalid="ignore"):
        observed = np.bincount(cell, weights=target, minlength=held.n_arena) / n
        predicted = np.bincount(cell, weights=s, minlength=held.n_arena) / n
    decided = held.arena_z[cell] != ds.arena_z[partner]
    scores = {
        "pairs": int(len(cell)),
        "log_score": _mean_log_score(target, s) if len(cell) else float("nan"),
        "auc": auc(s[decided], (held.arena_z[cell] > ds.arena_z[partner])[decided]),
    }
    return observed, predicted, n, scores


def _win(fit: FittedRun, d: np.ndarray, gap: np.ndarray) -> np.ndarray:
    """Probability that the first side wins, per draw, from the gap of its two sides."""
    if fit.arena == "bt":
        return arena_term.win_probability(gap, 0.0)
    gap = fit.model.arena.score_difference(gap, fit.gamma[d].astype(np.float64)[:, None])
    if fit.arena == "reward":
        sigma = fit.sigma[d].astype(np.float64)[:, None]
        return arena_term.reward_win_probability(gap, 0.0, sigma)
    return arena_term.win_probability(gap, 0.0)


def _rows(fit, model, item, kind, observed, predicted, partners) -> pd.DataFrame:
    ds = fit.dataset
    return pd.DataFrame(
        {
            "model": ds.models[model],
            "item": ds.items[item],
            "kind": kind,
            "observed": observed,
            "p_mean": predicted,
            "partners": partners,
        }
    )
