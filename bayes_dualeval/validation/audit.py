"""Validation of the cell audit: ranking metrics, the anomaly table's order, planted faults.

A planted-fault study knows which cells are faulty (``positive``) and asks how well a
score ranks them: :func:`auroc` (the chance that a planted cell outranks a clean one),
:func:`auprc` (average precision: what a reader working down the list meets) and
:func:`precision_at_k`. :func:`table_score` turns the order of an anomaly table (or of
``anomalies.csv``, which may hold only its first rows) into such a score;
:func:`plant_arena` applies DualEval's arena contamination protocol (2.0 added to the
z-score of a few low-reward cells); :func:`empirical_baseline` and :func:`twoway_residual`
are the simple scores a model must beat. Used by ``tests/test_cells.py`` and
``scripts/studies/cell_audit_study.py``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from bayes_dualeval.data.dataset import Dataset


def auroc(score, positive) -> float:
    """Area under the ROC curve of ``score`` for ``positive`` cells (ties count half).

    Parameters
    ----------
    score : array_like of float
        Higher means more suspicious.
    positive : array_like of bool
        True for the cells that should score high.

    Returns
    -------
    float
        The Mann-Whitney probability that a positive cell outscores a negative one (NaN
        without both kinds).

    Examples
    --------
    >>> auroc([3, 2, 1, 0], [True, False, True, False])
    0.75
    """
    score = np.asarray(score, dtype=np.float64)
    positive = np.asarray(positive, dtype=bool)
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = stats.rankdata(score)
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def auprc(score, positive) -> float:
    """Average precision of ``score`` for ``positive`` cells (area under precision-recall).

    ``sum_t (R_t - R_{t-1}) P_t`` over the distinct score thresholds ``t`` from the top,
    with ``P_t`` and ``R_t`` the precision and recall of the cells scoring at least ``t``
    (tied cells enter together). A random score gives about the share of positives.

    Parameters
    ----------
    score : array_like of float
        Higher means more suspicious.
    positive : array_like of bool

    Returns
    -------
    float
        In [0, 1]; NaN without positives.

    Examples
    --------
    >>> auprc([3, 2, 1, 0], [True, False, True, False])
    0.8333333333333333
    """
    score = np.asarray(score, dtype=np.float64)
    positive = np.asarray(positive, dtype=bool)
    n_pos = int(positive.sum())
    if n_pos == 0:
        return float("nan")
    order = np.argsort(-score, kind="stable")
    ordered, hits = score[order], positive[order].astype(np.float64)
    last = np.r_[ordered[1:] != ordered[:-1], True]  # last cell of each tie group
    tp = np.cumsum(hits)[last]
    taken = (np.flatnonzero(last) + 1).astype(np.float64)
    recall = tp / n_pos
    return float(np.sum(np.diff(np.r_[0.0, recall]) * tp / taken))


def precision_at_k(score, positive, k: int) -> float:
    """Share of positives among the ``k`` highest scores (ties: the first in input order).

    Examples
    --------
    >>> precision_at_k([3, 2, 1, 0], [True, False, True, False], 2)
    0.5
    """
    score = np.asarray(score, dtype=np.float64)
    positive = np.asarray(positive, dtype=bool)
    k = int(min(max(k, 1), len(score)))
    top = np.argsort(-score, kind="stable")[:k]
    return float(positive[top].mean())


def ranking_metrics(score, positive, k: int | None = None) -> dict:
    """``auroc``, ``auprc`` and ``precision_at_k`` (``k`` default: the number of positives)."""
    positive = np.asarray(positive, dtype=bool)
    k = int(positive.sum()) if k is None else k
    return {
        "auroc": auroc(score, positive),
        "auprc": auprc(score, positive),
        "precision_at_k": precision_at_k(score, positive, k),
    }


def table_score(table: pd.DataFrame, key: pd.MultiIndex) -> np.ndarray:
    """A score from the order of an anomaly table: high for its first rows.

    Parameters
    ----------
    table : pandas.DataFrame
        Rows most surprising first, with ``model`` and ``item`` columns (the cell table, or
        ``anomalies.csv`` read back, which may hold only the first rows).
    key : pandas.MultiIndex
        (model, item) of the cells to score.

    Returns
    -------
    numpy.ndarray of float64
        ``len(table) - row`` for a cell in the table, 0 for one it leaves out (such cells
        tie at the bottom).
    """
    index = pd.MultiIndex.from_arrays([table["model"].astype(str), table["item"].astype(str)])
    row = index.get_indexer(key)
    return np.where(row >= 0, len(table) - row, 0).astype(np.float64)


def static_key(dataset: Dataset) -> pd.MultiIndex:
    """(model, item) labels of the dataset's static cells, in its order."""
    return pd.MultiIndex.from_arrays(
        [dataset.models[dataset.static_model], dataset.items[dataset.static_item]]
    )


def arena_key(dataset: Dataset) -> pd.MultiIndex:
    """(model, item) labels of the dataset's arena cells, in its order."""
    return pd.MultiIndex.from_arrays(
        [dataset.models[dataset.arena_model], dataset.items[dataset.arena_item]]
    )


def empirical_baseline(dataset: Dataset) -> np.ndarray:
    """Per static cell: ``y (1 - acc_model * acc_item)`` from empirical accuracies.

    ``y`` is the cell's share of correct answers (its label with one answer); accuracies
    count every answer.
    """
    m, q = dataset.static_model, dataset.static_item
    y, k, n = dataset.static_share, dataset.static_y, dataset.static_n
    acc_m = np.bincount(m, weights=k, minlength=dataset.n_models) / np.maximum(
        np.bincount(m, weights=n, minlength=dataset.n_models), 1
    )
    acc_q = np.bincount(q, weights=k, minlength=dataset.n_items) / np.maximum(
        np.bincount(q, weights=n, minlength=dataset.n_items), 1
    )
    return y * (1.0 - acc_m[m] * acc_q[q])


def twoway_residual(dataset: Dataset) -> np.ndarray:
    """Per arena cell: ``z - mean_model(z) - mean_prompt(z) + mean(z)``, the additive baseline."""
    m, q, z = dataset.arena_model, dataset.arena_item, dataset.arena_z.astype(np.float64)
    if not len(z):
        return np.zeros(0)
    by_m = np.bincount(m, z, dataset.n_models) / np.maximum(
        np.bincount(m, None, dataset.n_models), 1
    )
    by_q = np.bincount(q, z, dataset.n_items) / np.maximum(
        np.bincount(q, None, dataset.n_items), 1
    )
    return z - by_m[m] - by_q[q] + z.mean()


def plant_arena(
    dataset: Dataset,
    *,
    share: float = 0.03,
    low: float = 1.0 / 3.0,
    shift: float = 2.0,
    seed: int = 0,
) -> tuple[Dataset, np.ndarray]:
    """DualEval's arena contamination: add ``shift`` to the z-score of low-reward cells.

    The shift is made on the raw reward (``shift`` standard deviations of the cell's
    normalisation group: its source, or all rewards under ``reward_norm="global"``) and the
    dataset is built again, so the z-scores are those the loader would compute from the
    planted rewards: a planted cell moves by slightly less than ``shift`` (the plant also
    raises its group's mean and spread), and fitting restricted to one kind of data, which
    normalises again, keeps the plant.

    Parameters
    ----------
    dataset : Dataset
        Data with arena rewards.
    share : float
        Cells planted, as a share of all arena cells (DualEval uses 1-5%).
    low : float
        Candidates are the cells whose z-score is below this quantile of all z-scores.
    shift : float
        Added to the candidates' z-scores (DualEval: 2.0).
    seed : int
        Seed of the choice of cells.

    Returns
    -------
    dataset : Dataset
        The planted data (static labels unchanged).
    planted : numpy.ndarray of bool
        True on the planted arena cells, in the returned dataset's order.
    """
    z = dataset.arena_z.astype(np.float64)
    candidates = np.flatnonzero(z < np.quantile(z, low))
    n = min(len(candidates), int(round(share * len(z))))
    chosen = np.zeros(len(z), dtype=bool)
    chosen[np.random.default_rng(seed).choice(candidates, size=n, replace=False)] = True
    reward = dataset.arena_reward.astype(np.float64)
    group = np.zeros(len(z), dtype=np.int64)
    if dataset.reward_norm == "source":
        _, group = np.unique(dataset.item_source[dataset.arena_item], return_inverse=True)
    n_group = np.bincount(group).astype(np.float64)
    mean = np.bincount(group, reward) / n_group
    sd = np.sqrt(np.bincount(group, (reward - mean[group]) ** 2) / n_group)
    arena = dataset.arena_frame().drop(columns="z")
    arena["reward"] = reward + shift * sd[group] * chosen
    static = dataset.static_frame() if len(dataset.static_y) else None
    planted_dataset = Dataset.from_tables(static, arena, reward_norm=dataset.reward_norm)
    planted = arena_key(planted_dataset).isin(arena_key(dataset)[chosen])
    return planted_dataset, np.asarray(planted, dtype=bool)


def plant_static(
    dataset: Dataset,
    reference_p,
    *,
    share: float = 0.02,
    max_p: float = 0.2,
    seed: int = 0,
) -> tuple[Dataset, np.ndarray]:
    """Turn failures that should stay failures into successes, as leaked answers would.

    Parameters
    ----------
    dataset : Dataset
        Data with static labels.
    reference_p : array_like of float
        Per static cell (the dataset's order), the success probability that decides which
        cells "the model should fail": the true one of a simulation, or a clean fit's.
    share : float
        Cells planted, as a share of all static cells (fewer if too few candidates).
    max_p : float
        Candidates are failures with ``reference_p`` below this.
    seed : int
        Seed of the choice of cells.

    Returns
    -------
    dataset : Dataset
        The planted data (arena rewards unchanged).
    planted : numpy.ndarray of bool
        True on the planted static cells, in the returned dataset's order.
    """
    y = dataset.static_y
    candidates = np.flatnonzero((np.asarray(reference_p) < max_p) & (y == 0))
    n = min(len(candidates), int(round(share * len(y))))
    chosen = np.zeros(len(y), dtype=bool)
    chosen[np.random.default_rng(seed).choice(candidates, size=n, replace=False)] = True
    static = dataset.static_frame()
    static["correct"] = np.where(chosen, 1, y)
    arena = dataset.arena_frame().drop(columns="z") if len(dataset.arena_z) else None
    planted_dataset = Dataset.from_tables(static, arena, reward_norm=dataset.reward_norm)
    planted = static_key(planted_dataset).isin(static_key(dataset)[chosen])
    return planted_dataset, np.asarray(planted, dtype=bool)


def reverse_keys(static: pd.DataFrame, share: float, rng) -> set[str]:
    """Reverse the answer key of ``share`` of the questions of ``static``, in place.

    Parameters
    ----------
    static : pandas.DataFrame
        Static rows (``dataset``, ``sample_index``, ``correct``), as the simulator draws them.
    share : float
        Share of the distinct questions whose labels are flipped (``correct -> 1 - correct``).
    rng : numpy.random.Generator

    Returns
    -------
    set of str
        The ids (``<dataset>_<sample_index>``) of the questions reversed.
    """
    ids = static["dataset"] + "_" + static["sample_index"].astype(str)
    unique = ids.unique()
    chosen = set(rng.choice(unique, int(round(share * len(unique))), replace=False))
    flip = ids.isin(chosen)
    static.loc[flip, "correct"] = 1 - static.loc[flip, "correct"]
    return chosen
