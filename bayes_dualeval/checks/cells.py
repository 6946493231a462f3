"""Per-cell check results, the anomalies table built from them, and misfit counts.

A pass over one kind of data (:mod:`~bayes_dualeval.checks.static`,
:mod:`~bayes_dualeval.checks.arena`, :mod:`~bayes_dualeval.checks.reward`) gives a
:class:`Cells` aligned with the dataset's cells; :func:`cell_table` ranks the cells of all
kinds, most surprising first, with Benjamini-Yekutieli q-values over the cells that can be
discoveries at all (:func:`attainable_qvalues`).

Every cell has two one-sided posterior predictive p-values: ``p_value``, the probability of
a replicated outcome at least as good as the observed one (a surprising success: the
contamination direction, ranked and FDR-adjusted), and ``p_lower``, at most as good (a
surprising failure: a broken key or grader; reported, not adjusted). Each is conservative
under its null: ``P(p <= u) <= u`` when the data come from the fitted model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from bayes_dualeval.checks.fdr import by_qvalues

#: Cells with a q-value below this count as flagged in the misfit tables and summary.
FLAG_Q = 0.05
#: Floor of variances and standard deviations in residuals.
EPS = 1e-12
#: Columns of the cell table (:func:`bayes_dualeval.checks.anomalies`).
CELL_COLUMNS = [
    "model", "item", "kind", "observed", "expected", "residual", "p_value", "p_lower", "q_value",
]  # fmt: skip


@dataclass(frozen=True, eq=False)
class Cells:
    """Per-cell checks of one kind (arrays aligned with the dataset's cells)."""

    model: np.ndarray
    item: np.ndarray
    observed: np.ndarray
    expected: np.ndarray
    residual: np.ndarray
    p_value: np.ndarray  # P(rep >= observed): one-sided, a surprising success
    p_lower: np.ndarray  # P(rep <= observed): one-sided, a surprising failure
    used: np.ndarray  # cells that enter the table (bool)
    #: The smallest ``p_value`` the cell could attain (its most surprising outcome), None
    #: where every cell can reach any level (arena tails, from a continuous approximation)
    p_min: np.ndarray | None = None


def segments(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Stable order sorting ``keys``, start of each run of equal keys, and the run keys.

    ``np.add.reduceat(values[:, order], starts, axis=1)`` then sums values by key.
    """
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]]) if len(keys) else []
    starts = np.asarray(starts, dtype=np.intp)
    return order, starts, ordered[starts]


def cell_table(models: np.ndarray, items: np.ndarray, parts: dict) -> tuple[pd.DataFrame, tuple]:
    """The cell table, most surprising first, and its rows' (model, item) codes.

    Rows are sorted by ascending ``p_value`` (one-sided: better than predicted), then
    descending signed ``residual``; ``q_value`` is the Benjamini-Yekutieli adjustment
    (:func:`~bayes_dualeval.checks.fdr.by_qvalues`) of ``p_value`` over the rows, static
    and arena together, that could reach :data:`FLAG_Q` (:func:`attainable_qvalues`).

    Parameters
    ----------
    models, items : numpy.ndarray of str
        The dataset's labels.
    parts : dict of str to Cells
        The cells of each kind (``static``, ``arena``) that has them.

    Returns
    -------
    table : pandas.DataFrame
        Columns :data:`CELL_COLUMNS`; ``model``, ``item`` and ``kind`` are categorical.
    codes : tuple of numpy.ndarray
        The rows' model and item codes.
    """
    if not parts:
        table = pd.DataFrame({name: [] for name in CELL_COLUMNS})
        empty = np.zeros(0, dtype=np.int64)
        return table, (empty, empty)
    used = [c.used for c in parts.values()]

    def cat(name):
        return np.concatenate(
            [getattr(c, name)[k] for c, k in zip(parts.values(), used, strict=True)]
        )

    p_value = np.clip(cat("p_value"), 0.0, 1.0)
    p_min = np.concatenate(
        [
            np.zeros(int(k.sum())) if c.p_min is None else c.p_min[k]
            for c, k in zip(parts.values(), used, strict=True)
        ]
    )
    residual = cat("residual")
    order = np.lexsort((-residual, p_value))
    model, item = cat("model")[order], cat("item")[order]
    kinds = np.array(list(parts), dtype=object)
    kind = np.repeat(kinds, [int(k.sum()) for k in used])[order]
    # labels as categories: at ten million cells, strings per row would take gigabytes
    table = pd.DataFrame(
        {
            "model": pd.Categorical.from_codes(model, categories=pd.Index(models, dtype=object)),
            "item": pd.Categorical.from_codes(item, categories=pd.Index(items, dtype=object)),
            "kind": pd.Categorical(kind, categories=list(parts)),
            "observed": cat("observed")[order],
            "expected": cat("expected")[order],
            "residual": residual[order],
            "p_value": p_value[order],
            "p_lower": np.clip(cat("p_lower"), 0.0, 1.0)[order],
            "q_value": attainable_qvalues(p_value[order], p_min[order]),
        }
    )
    return table, (model, item)


def attainable_qvalues(p_value: np.ndarray, p_min: np.ndarray, level: float = FLAG_Q):
    """Benjamini-Yekutieli q-values over the cells that can reach ``level``; 1 elsewhere.

    A static cell's ``p_value`` is discrete: a failure's is 1, and a success's is the
    predicted success probability, so a cell the model expects to succeed more often than
    ``level`` cannot reach ``p_value <= level`` whatever it shows (its smallest attainable
    value, ``p_min``, is above ``level``). Such tests can never be discoveries, and counted
    in the family they only dilute it: its size ``m`` multiplies every q-value. Following
    Tarone (1990), applied to the false discovery rate as by Gilbert (2005), the family is
    the cells whose smallest attainable p-value is at most ``level`` (decided by the model's
    prediction, not by the outcome observed); the others get q-value 1. A q-value below
    ``level`` keeps its meaning (the family is smaller still at a lower level, so smaller
    thresholds are conservative).

    Parameters
    ----------
    p_value, p_min : numpy.ndarray of float
        Each cell's p-value and the smallest it could attain (0: any).
    level : float
        The level the family is chosen for (:data:`FLAG_Q`).

    Returns
    -------
    numpy.ndarray of float64
    """
    q = np.ones(len(p_value))
    family = np.asarray(p_min) <= level
    q[family] = by_qvalues(np.asarray(p_value)[family])
    return q


def misfit_table(cells: pd.DataFrame, codes: np.ndarray, labels: dict) -> pd.DataFrame:
    """Per group of cells (``codes`` of the table's rows): counts of flagged cells, worst first.

    ``labels`` maps the group columns to label arrays indexed by code. Groups are listed
    in order of their first row in the table, then sorted by the number of flagged cells
    (descending) and the smallest ``p_value`` (stable).
    """
    n_groups = max(len(v) for v in labels.values())
    flagged = (cells["q_value"].to_numpy(dtype=np.float64) < FLAG_Q).astype(np.float64)
    abs_res = np.abs(cells["residual"].to_numpy(dtype=np.float64))
    p_value = cells["p_value"].to_numpy(dtype=np.float64)
    n_cells = np.bincount(codes, minlength=n_groups)
    first = np.full(n_groups, len(codes))
    np.minimum.at(first, codes, np.arange(len(codes)))
    min_p = np.full(n_groups, np.inf)
    np.minimum.at(min_p, codes, p_value)
    present = np.flatnonzero(n_cells > 0)
    present = present[np.argsort(first[present], kind="stable")]
    with np.errstate(invalid="ignore", divide="ignore"):
        table = pd.DataFrame(
            {
                **{name: values[present] for name, values in labels.items()},
                "n_cells": n_cells[present],
                "n_flagged": np.bincount(codes, flagged, n_groups)[present].astype(int),
                "mean_abs_residual": (np.bincount(codes, abs_res, n_groups) / n_cells)[present],
                "min_p_value": min_p[present],
            }
        )
    table.insert(len(labels) + 2, "share_flagged", table["n_flagged"] / table["n_cells"])
    order = np.lexsort((table["min_p_value"].to_numpy(), -table["n_flagged"].to_numpy()))
    return table.iloc[order].reset_index(drop=True)
