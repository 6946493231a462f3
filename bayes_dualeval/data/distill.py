"""Distil arena rewards into soft pairwise targets, vectorised.

For every prompt and every pair of models that both answered it (as one judge scored
them: pairs never join two judges' rewards), DualEval's soft target is
``t = sigmoid(z_i - z_j)`` on the normalised rewards. Two kinds of pair are set apart:

* a **tie** when ``|z_i - z_j|`` is at or below the ``tie_ratio`` quantile of its judge's
  pairwise ``|dz|``: it carries no likelihood and is dropped (only counted);
* a **both-bad** pair when ``max(z_i, z_j)`` is at or below the ``bb_ratio`` quantile of its
  judge's pairwise maxima (and it is not a tie): it anchors both models' success
  probabilities down instead of ranking them.

The cut-offs are each judge's own (one pair of cut-offs with one judge), so every judge
loses the same share of its own pairs: pooled over judges on one scale, a strict judge's
pairs fell below the both-bad cut-off more often than a lenient one's. (On the judge
study's arena-heavy style design this did not change how many null judge x family
biases exclude 0: 3 of 9 either way; docs/validation.md §11.)

Rewards that take a few values (a judge's win / draw / loss, HELM's 0 / 0.5 / 1) put
atoms in these distributions: on AlpacaEval's judges 73% of the pairs have ``|dz| = 0`` and
every pair's maximum is at most the top value, so a plain quantile would make every pair a
tie or both-bad and leave none decisive. Each cut-off is therefore placed on whichever side
of an atom leaves the share of pairs it takes closer to the ratio asked for
(:func:`cutoff`); where a quantile falls between distinct values it is kept as it is.

The remaining pairs are *decisive*. There is no Python loop over prompts or pairs: pairs
are enumerated with ``np.repeat`` arithmetic on prompt-sorted rows, so time and memory grow
with the number of pairs, not with models x models x prompts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bayes_dualeval.core.errors import InputError

DEFAULT_BB_RATIO = 0.15
DEFAULT_TIE_RATIO = 0.10


@dataclass(frozen=True, eq=False)
class Pairs:
    """Kept (non-tie) model pairs of arena prompts.

    Attributes
    ----------
    item : numpy.ndarray of int32, shape (n_pairs,)
        Dataset item index of the prompt.
    i, j : numpy.ndarray of int32, shape (n_pairs,)
        Model indices of the pair (``i`` listed first).
    row_i, row_j : numpy.ndarray of int32, shape (n_pairs,)
        Index of each side's reward in the dataset's ``arena_*`` arrays.
    target : numpy.ndarray of float32, shape (n_pairs,)
        Soft target ``sigmoid(z_i - z_j)``: how much ``i`` beat ``j``.
    both_bad : numpy.ndarray of bool, shape (n_pairs,)
        True for both-bad pairs; False for decisive pairs.
    prompt_models : numpy.ndarray of int32, shape (n_items,)
        Number of arena cells of each item (its models, over every judge; 0 for static
        items).
    unit_models : numpy.ndarray of int32, shape (n_pairs,)
        Number of models in the pair's unit: its prompt as its judge scored it (the
        prompt's models with one judge).
    judge : numpy.ndarray of int32, shape (n_pairs,)
        The judge of both rewards of the pair (index into ``Dataset.judges``).
    n_total, n_tie : int
        Number of pairs before dropping ties, and of ties dropped.
    tie_threshold, bb_threshold : numpy.ndarray of float64, shape (n_judges,)
        Each judge's ``|dz|`` and ``max(z)`` cut-offs (index ``Dataset.judges``; ``-inf``
        when disabled, or for a judge without pairs).
    tie_ratio, bb_ratio : float
        The quantile levels used.
    """

    item: np.ndarray
    i: np.ndarray
    j: np.ndarray
    row_i: np.ndarray
    row_j: np.ndarray
    target: np.ndarray
    both_bad: np.ndarray
    prompt_models: np.ndarray
    unit_models: np.ndarray
    judge: np.ndarray
    n_total: int
    n_tie: int
    tie_threshold: np.ndarray
    bb_threshold: np.ndarray
    tie_ratio: float
    bb_ratio: float

    @property
    def n_pairs(self) -> int:
        """Number of kept pairs (decisive plus both-bad)."""
        return len(self.item)

    @property
    def n_both_bad(self) -> int:
        """Number of both-bad pairs."""
        return int(self.both_bad.sum())

    @property
    def n_decisive(self) -> int:
        """Number of decisive pairs."""
        return self.n_pairs - self.n_both_bad

    def summary_dict(self) -> dict:
        """Counts and thresholds as a plain dict (a threshold per judge with several)."""
        return {
            "pairs_total": int(self.n_total),
            "pairs_decisive": self.n_decisive,
            "pairs_both_bad": self.n_both_bad,
            "pairs_tie": int(self.n_tie),
            "tie_ratio": self.tie_ratio,
            "bb_ratio": self.bb_ratio,
            "tie_threshold": _plain(self.tie_threshold),
            "bb_threshold": _plain(self.bb_threshold),
        }


def _plain(thresholds: np.ndarray):
    """One judge's cut-off as a float; several judges' as a list."""
    values = [float(v) for v in np.ravel(thresholds)]
    return values[0] if len(values) == 1 else values


def enumerate_pairs(item: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """All within-group pairs of rows, for rows grouped by ``item``.

    Parameters
    ----------
    item : numpy.ndarray of int, shape (n_rows,)
        Group label of each row; rows must already be sorted by it.

    Returns
    -------
    first, second : numpy.ndarray of int32 (int64 for more than 2**31 pairs)
        Row indices with ``first < second`` and ``item[first] == item[second]``, every
        unordered within-group pair exactly once, grouped by item.
    """
    n_rows = len(item)
    if n_rows == 0:
        empty = np.zeros(0, dtype=np.int32)
        return empty, empty
    starts = np.flatnonzero(np.r_[True, item[1:] != item[:-1]])
    sizes = np.diff(np.r_[starts, n_rows])
    group_start = np.repeat(starts, sizes)
    pos = np.arange(n_rows) - group_start
    partners = np.repeat(sizes, sizes) - 1 - pos  # rows after this one in its group
    total = int(partners.sum())
    dtype = np.int32 if total < 2**31 - 1 and n_rows < 2**31 - 1 else np.int64
    first = np.repeat(np.arange(n_rows, dtype=dtype), partners)
    # offset of each pair within its first row's run, plus one
    run_start = np.cumsum(partners) - partners
    second = np.arange(total, dtype=dtype)
    second -= np.repeat(run_start.astype(dtype), partners)
    second += first + 1
    return first, second


def cutoff(values: np.ndarray, ratio: float) -> float:
    """The cut-off ``c`` of ``values <= c``: the ``ratio`` quantile, moved below an atom.

    Where the quantile falls on a value that many pairs share (discrete rewards), ``<= c``
    may take far more than ``ratio`` of them; ``c`` then moves to the largest value below
    the atom (``-inf`` if none) when that leaves the share taken closer to ``ratio`` by
    more than one value's worth (``1 / n``). Where the quantile falls between distinct
    values it is the cut-off as it is.
    """
    values = np.asarray(values)
    q = np.float32(np.quantile(values, ratio))
    at_most = float(np.mean(values <= q))
    below = values[values < q]
    if abs(len(below) / len(values) - ratio) + 1.0 / len(values) < abs(at_most - ratio):
        return float(below.max()) if len(below) else float("-inf")
    return float(q)


def judge_cutoffs(values: np.ndarray, judge: np.ndarray, n_judges: int, ratio: float):
    """Each judge's :func:`cutoff` of its pairs' ``values``, shape (n_judges,).

    ``judge`` (index per pair) picks each judge's values; a judge without pairs gets
    ``-inf``.
    """
    out = np.full(n_judges, -np.inf)
    if n_judges == 1:
        out[0] = cutoff(values, ratio)
        return out
    order = np.argsort(judge, kind="stable")
    bounds = np.searchsorted(judge[order], np.arange(n_judges + 1))
    for k in range(n_judges):  # a few judges: one quantile each
        if bounds[k + 1] > bounds[k]:
            out[k] = cutoff(values[order[bounds[k] : bounds[k + 1]]], ratio)
    return out


def distill(
    dataset,
    *,
    bb_ratio: float = DEFAULT_BB_RATIO,
    tie_ratio: float = DEFAULT_TIE_RATIO,
) -> Pairs:
    """Turn a dataset's arena rewards into soft pairwise targets.

    Parameters
    ----------
    dataset : Dataset
        The dataset; its normalised rewards ``arena_z`` are used.
    bb_ratio : float
        Quantile of a judge's pairwise ``max(z_i, z_j)`` at or below which its pair is
        both-bad; 0 disables both-bad pairs.
    tie_ratio : float
        Quantile of a judge's pairwise ``|z_i - z_j|`` at or below which its pair is a tie;
        0 disables ties.

    Returns
    -------
    Pairs

    Examples
    --------
    >>> from bayes_dualeval import distill, load
    >>> pairs = distill(load("data/"))  # doctest: +SKIP
    """
    for name, value in (("bb_ratio", bb_ratio), ("tie_ratio", tie_ratio)):
        if not 0.0 <= value < 1.0:
            raise InputError(f"{name} must be in [0, 1), got {value}")
    # pairs within a unit: a prompt as one judge scored it (the prompt, with one judge)
    unit = dataset.arena_item.astype(np.int64) + dataset.n_items * dataset.arena_judge
    order = np.lexsort((dataset.arena_model, unit))
    item_sorted = dataset.arena_item[order]
    unit_sorted = unit[order]
    z = dataset.arena_z[order].astype(np.float32)
    model = dataset.arena_model[order]
    first, second = enumerate_pairs(unit_sorted)
    prompt_models = np.bincount(dataset.arena_item, minlength=dataset.n_items).astype(np.int32)
    _, unit_index, unit_size = np.unique(unit_sorted, return_inverse=True, return_counts=True)
    unit_size = unit_size[unit_index.ravel()]

    dz = z[first] - z[second]
    n_total = len(dz)
    judge = np.asarray(dataset.arena_judge)[order][first]
    n_judges = max(len(dataset.judges), 1)
    keep = None
    if tie_ratio > 0 and n_total:
        adz = np.abs(dz)
        tie_thr = judge_cutoffs(adz, judge, n_judges, tie_ratio)
        keep = adz > tie_thr[judge].astype(np.float32)
        del adz
    else:
        tie_thr = np.full(n_judges, -np.inf)
    both_bad = np.zeros(n_total, dtype=bool)
    if bb_ratio > 0 and n_total:
        top = np.maximum(z[first], z[second])
        bb_thr = judge_cutoffs(top, judge, n_judges, bb_ratio)
        both_bad = top <= bb_thr[judge].astype(np.float32)
        del top
    else:
        bb_thr = np.full(n_judges, -np.inf)
    if keep is not None:
        first, second, dz, both_bad = first[keep], second[keep], dz[keep], both_bad[keep]
        judge = judge[keep]
    target = 0.5 * (1.0 + np.tanh(0.5 * dz))  # sigmoid(dz) without overflow
    return Pairs(
        item=item_sorted[first].astype(np.int32),
        i=model[first].astype(np.int32),
        j=model[second].astype(np.int32),
        row_i=order[first].astype(np.int32),
        row_j=order[second].astype(np.int32),
        target=target.astype(np.float32),
        both_bad=both_bad,
        prompt_models=prompt_models,
        unit_models=unit_size[first].astype(np.int32),
        judge=judge.astype(np.int32),
        n_total=n_total,
        n_tie=n_total - len(first),
        tie_threshold=tie_thr,
        bb_threshold=bb_thr,
        tie_ratio=float(tie_ratio),
        bb_ratio=float(bb_ratio),
    )
