"""The cells of a canonical table: repeated answers and judges combined, duplicates dropped.

A cell is a (model, item), and a (model, item, judge) where rows name judges. Rows of one
cell are repeated answers when their ``sample`` differs: a static cell counts them all
(``k`` correct of ``n``), an arena cell takes their mean reward and mean style covariates
(with their count). Rows equal in model, item, judge and sample are duplicates: the last
one is kept and the others counted as skipped, except aggregated rows (``n_correct``,
``n_samples``) that disagree, which are an error.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd

from bayes_dualeval.core.errors import InputError
from bayes_dualeval.data.rows import STYLE_PREFIX

#: The skip reason of rows repeating a (model, item) without a ``sample`` to tell them apart
#: (:func:`skip_hint` says how to keep them) ...
DUPLICATE = "duplicate (model, item)"
#: ... and of rows repeating a (model, item, sample).
DUPLICATE_SAMPLE = "duplicate (model, item, sample)"


def skip_hint(skipped) -> str:
    """What to do about the skips in ``skipped`` (reason to count), or ``""``.

    Rows that repeat a model and item without a ``sample`` field are dropped as
    duplicates; when they are repeated answers, a ``sample`` field keeps them all.
    """
    if skipped.get(DUPLICATE):
        return (
            "rows repeating a model and item are duplicates unless a 'sample' field "
            "(or epoch, repeat, seed) tells repeated answers apart"
        )
    return ""


def static_cells(table: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray, Counter]:
    """One row per (model, item): the correct answers in ``correct``, and the answers.

    Parameters
    ----------
    table : pandas.DataFrame
        A canonical static table (optional columns ``n`` and ``sample``).

    Returns
    -------
    table : pandas.DataFrame
        One row per cell, in the order of each cell's first row; ``correct`` holds the
        correct answers of the cell.
    n : numpy.ndarray of int
        The cell's answers.
    skipped : collections.Counter
        Duplicates dropped, by reason.

    Raises
    ------
    InputError
        When aggregated rows (``n_samples`` above 1) of one cell and sample disagree.
    """
    table, skipped = _without_duplicates(table, "correct")
    if "n" not in table and "sample" not in table:  # one answer per row and cell
        return table, np.ones(len(table), np.int32), skipped
    n = table["n"].to_numpy(np.int64) if "n" in table else np.ones(len(table), np.int64)
    first, cell = _cells(table)
    if len(first) == len(table):
        return _plain(table), n.astype(np.int32), skipped
    correct = np.bincount(cell, weights=table["correct"].to_numpy(np.float64))
    out = _plain(table.iloc[first]).reset_index(drop=True)
    out["correct"] = np.rint(correct).astype(np.int64)
    return out, np.bincount(cell, weights=n).astype(np.int32), skipped


def arena_cells(table: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray, Counter]:
    """One row per (model, item): the mean ``reward`` of its repeated answers, and their number.

    See :func:`static_cells`; a row stands for ``n`` rewards (1 without an ``n`` column),
    and a cell's reward is the mean of its rows weighted so.
    """
    table, skipped = _without_duplicates(table, "reward")
    n = table["n"].to_numpy(np.int64) if "n" in table else np.ones(len(table), np.int64)
    if "sample" not in table:
        return _plain(table), n.astype(np.int32), skipped
    first, cell = _cells(table)
    if len(first) == len(table):
        return _plain(table), n.astype(np.int32), skipped
    answers = np.bincount(cell, weights=n)
    out = _plain(table.iloc[first]).reset_index(drop=True)
    averaged = ["reward", *(c for c in table.columns if str(c).startswith(STYLE_PREFIX))]
    for name in averaged:  # the reward and the style covariates: means over the answers
        total = np.bincount(cell, weights=table[name].to_numpy(np.float64) * n)
        out[name] = total / answers
    return out, answers.astype(np.int32), skipped


def _plain(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` without the answer columns (``n``, ``sample``) once cells are combined."""
    extra = [c for c in ("n", "sample") if c in table]
    return table.drop(columns=extra) if extra else table


def _cells(table: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The first row of each cell, and each row's cell (numbered in that order).

    A cell is a (model, item), and a (model, item, judge) where rows name judges.
    """
    key = row_key(table, cell_columns(table))
    _, first, cell = np.unique(key, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")  # cells numbered by their first row
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    return first[order], rank[cell.ravel()]


def cell_columns(table: pd.DataFrame) -> tuple[str, ...]:
    """The columns that tell cells apart."""
    return ("model", "item", "judge") if "judge" in table else ("model", "item")


def row_key(table: pd.DataFrame, columns) -> np.ndarray:
    """One integer per row, equal for rows equal in ``columns`` (categories read as codes)."""
    key = np.zeros(len(table), np.int64)
    for name in columns:
        column = table[name]
        if isinstance(column.dtype, pd.CategoricalDtype):
            codes, size = column.cat.codes.to_numpy(np.int64), len(column.cat.categories) + 1
            codes = codes + 1  # missing values (-1) are a value of their own
        else:
            values = column.astype(object).where(column.notna(), "\0none")
            codes, uniques = pd.factorize(values.astype(str), sort=False)
            size = len(uniques) + 1
        key = key * size + codes
    return key


def _without_duplicates(table: pd.DataFrame, value: str) -> tuple[pd.DataFrame, Counter]:
    """Drop rows repeating a (model, item, sample); keep the last of each (see the module)."""
    skipped: Counter = Counter()
    cell = cell_columns(table)
    if "sample" not in table or not table["sample"].notna().any():
        if "n" in table:
            _check_aggregates(table, cell, value)
        out, n = dedupe(table, cell)
        if n:
            skipped[DUPLICATE] += n
        return (out.drop(columns="sample") if "sample" in out else out), skipped
    columns = (*cell, "sample")
    if "n" in table:
        _check_aggregates(table, columns, value)
    drop = pd.Series(row_key(table, columns)).duplicated(keep="last").to_numpy()
    if drop.any():
        tagged = table["sample"].notna().to_numpy()
        skipped[DUPLICATE_SAMPLE] += int((drop & tagged).sum())
        skipped[DUPLICATE] += int((drop & ~tagged).sum())
        table = table.loc[~drop].reset_index(drop=True)
    return table, +skipped


def _check_aggregates(table: pd.DataFrame, columns, value: str) -> None:
    """Raise :class:`InputError` when aggregated rows of one key give different counts."""
    aggregated = table["n"].to_numpy() > 1
    if not aggregated.any():
        return
    key = row_key(table, columns)
    repeated = pd.Series(key).duplicated(keep=False).to_numpy()
    suspects = np.isin(key, key[repeated & aggregated])
    if not suspects.any():
        return
    rows = table.loc[suspects, [*columns, value, "n"]].assign(_key=key[suspects])
    distinct = rows.drop_duplicates(["_key", value, "n"])
    clash = distinct["_key"].duplicated(keep=False).to_numpy()
    if clash.any():
        first = distinct.loc[clash].iloc[0]
        where = table.loc[suspects].loc[key[suspects] == first["_key"]]
        places = [
            f"{r.get('file', 'frame')}:{r.get('line', '?')} ({r[value]} of {r['n']})"
            for _, r in where.head(2).iterrows()
        ]
        raise InputError(
            f"model {first['model']!r}, item {first['item']!r}: aggregated rows disagree, "
            + " and ".join(places)
            + "; give each cell's counts once"
        )


def dedupe(table: pd.DataFrame, columns=("model", "item")) -> tuple[pd.DataFrame, int]:
    """Keep the last row of each cell; return the table and how many were dropped.

    A cell is a (model, item), or the values of ``columns``.

    A table without duplicates is returned as it is (no copy); a wide matrix's categorical
    table is checked on one integer key per cell.
    """
    model, item = table["model"], table["item"]
    categorical = (isinstance(c.dtype, pd.CategoricalDtype) for c in (model, item))
    if tuple(columns) == ("model", "item") and all(categorical):
        key = model.cat.codes.to_numpy(np.int64) * len(item.cat.categories)
        key += item.cat.codes.to_numpy(np.int64)
        drop = pd.Series(key).duplicated(keep="last").to_numpy()
    else:
        drop = pd.Series(row_key(table, columns)).duplicated(keep="last").to_numpy()
    n = int(drop.sum())
    if n == 0 and isinstance(table.index, pd.RangeIndex) and table.index.start == 0:
        return table, 0
    return table.loc[~drop].reset_index(drop=True), n
