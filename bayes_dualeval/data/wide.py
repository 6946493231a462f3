"""Wide response matrices: one row per model, one 0/1 column per question.

Most published response matrices come so (ChemBench's ``binary_matrix.csv``, the Open LLM
Leaderboard's details turned into a table, metabench): a CSV whose first column is
``model_label`` (or ``model``) and whose other columns are questions, each cell 1
(correct), 0 (incorrect) or empty (not answered). Such a file is read a row at a time, each
row's cells compared as one NumPy array, never cell by cell: the cells become static labels
with the dataset named after the file (``chembench.csv`` -> dataset ``chembench``) and the
column name as the question's index, so question ``q17`` of ``chembench.csv`` in folder
``chem`` is the item ``chem::chembench_q17``.

NumPy and pandas only.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pandas as pd

from bayes_dualeval.core import item_ids
from bayes_dualeval.core.errors import InputError

#: Names the first column of a wide matrix may have.
MODEL_COLUMNS = ("model_label", "model")
#: Fields of the long formats: a header with any of them is not a wide matrix.
LONG_FIELDS = ("dataset", "sample_index", "correct", "item_id", "reward")


def header(path: Path) -> list[str] | None:
    """The header of a CSV file, stripped (None when the file is empty)."""
    try:
        with path.open(newline="", encoding="utf-8-sig") as fh:
            first = next(csv.reader(fh), None)
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc.reason})") from None
    except csv.Error as exc:
        raise InputError(f"{path}: malformed CSV ({exc})") from None
    return None if first is None else [c.strip() for c in first]


def is_wide(columns: list[str] | None) -> bool:
    """Whether a CSV header is a wide matrix's: a model column first, no long-format field."""
    if not columns or len(columns) < 2 or columns[0] not in MODEL_COLUMNS:
        return False
    return not set(columns) & set(LONG_FIELDS)


def read_wide(path: Path, *, source: str, domain: str, skip_invalid: bool, report) -> pd.DataFrame:
    """Read a wide 0/1 matrix into the canonical static table.

    Parameters
    ----------
    path : Path
    source : str
        Source tag of the items (the file's folder).
    domain : str
        Domain of every question (the folder's, as for long files).
    skip_invalid : bool
        Count invalid cells as skipped instead of raising.
    report : ReadReport
        Updated with the models seen, the rows kept and the skip counts.

    Returns
    -------
    pandas.DataFrame
        Columns ``model, item, source, domain, line, correct, file``: one row per answered
        cell, ``line`` the file line of its model's row; the labels are categorical.

    Raises
    ------
    InputError
        One line naming the file, line and column: a repeated question column, an empty
        model label, a cell other than 0, 1 or empty (unless ``skip_invalid``).
    """
    columns = header(path) or []
    models, lines, codes = _codes(path, len(columns))
    return cells_table(
        path,
        columns,
        models,
        lines,
        codes,
        source=source,
        domain=domain,
        skip_invalid=skip_invalid,
        report=report,
        cell=lambda row, col: _cell(path, row, col + 1),
    )


def cells_table(
    path: Path,
    columns: list[str],
    models: np.ndarray,
    lines: np.ndarray,
    codes: np.ndarray,
    *,
    source: str,
    domain: str,
    skip_invalid: bool,
    report,
    cell,
    where: str = "",
) -> pd.DataFrame:
    """The canonical static table of a wide matrix read into codes (CSV or Parquet).

    Parameters
    ----------
    path : Path
    columns : list of str
        The header: the model column, then the questions.
    models, lines : numpy.ndarray
        Each row's model label and its line (CSV) or row number (Parquet).
    codes : numpy.ndarray
        (models, questions) int8: 0, 1, :data:`MISSING` or :data:`INVALID`.
    source, domain : str
    skip_invalid : bool
    report : ReadReport
    cell : callable
        ``cell(row, question)`` the raw value of an invalid cell, for the message.
    where : str
        Written before the line number in messages (``"row "`` for Parquet).

    Returns
    -------
    pandas.DataFrame
        As :func:`read_wide`.
    """
    repeated = pd.Index(columns)[pd.Index(columns).duplicated()]
    if len(repeated):
        raise InputError(f"{path}: question column {repeated[0]!r} appears twice")
    empty = np.flatnonzero(models == "")
    if len(empty):
        raise InputError(f"{path}:{where}{lines[empty[0]]}: the model label is empty")
    invalid = codes == INVALID
    if invalid.any():
        row, col = np.argwhere(invalid)[0]
        if not skip_invalid:
            raise InputError(
                f"{path}:{where}{lines[row]}: column {columns[col + 1]!r}: correct must be 0 "
                f"or 1 (or empty), got {cell(row, col)!r}"
            )
        report.invalid["correct"] += int(invalid.sum())
    del invalid
    report.models_seen.update(models.tolist())
    # question by question (items in column order), through one flat index of the answered
    # cells rather than two: this is where reading ten million labels peaks
    by_question = np.ascontiguousarray(codes.T).ravel()
    del codes
    flat = np.flatnonzero(by_question <= 1)
    label = by_question[flat]
    del by_question
    col, row = np.divmod(flat, len(models))
    del flat
    names = np.asarray(columns[1:], dtype=str)
    dataset = path.stem
    items = item_ids.static_ids(source, dataset, names)
    report.rows += len(row)
    # categorical: a code per cell, each label stored once
    model_names, model_code = np.unique(models, return_inverse=True)
    row, col = row.astype(np.int32), col.astype(np.int32)
    lines = lines[row]

    def constant(text):
        return pd.Categorical.from_codes(np.zeros(len(row), np.int8), [text])

    return pd.DataFrame(
        {
            "model": pd.Categorical.from_codes(model_code[row], model_names),
            "item": pd.Categorical.from_codes(col, items),
            "source": constant(source),
            "domain": constant(domain),
            "line": lines,
            "correct": label.astype(np.int8),
            "file": constant(str(path)),
        }
    )


#: Codes of a cell in :func:`_codes`.
MISSING, INVALID = 2, 3


def _codes(path: Path, width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The model labels, their file lines and a (models, questions) int8 matrix of codes.

    0 and 1 are the labels (``0``, ``1``, or any number equal to them, e.g. ``1.0``),
    :data:`MISSING` an empty cell, :data:`INVALID` anything else. One byte a cell: each row
    is split by the C CSV reader and compared as a NumPy array, never cell by cell.
    """
    models, lines, rows = [], [], []
    with path.open(newline="", encoding="utf-8-sig") as fh:
        reader = csv.reader(fh)
        next(reader, None)
        for fields in reader:
            if not fields or not any(f.strip() for f in fields):
                continue
            if len(fields) != width:
                raise InputError(
                    f"{path}:{reader.line_num}: {len(fields)} cells where the header has {width}"
                )
            models.append(fields[0].strip())
            lines.append(reader.line_num)
            cells = np.char.strip(np.asarray(fields[1:], dtype=str))
            code = np.full(len(cells), INVALID, np.int8)
            code[cells == ""] = MISSING
            code[cells == "0"] = 0
            code[cells == "1"] = 1
            other = np.flatnonzero(code == INVALID)
            if len(other):  # "1.0", "0.00": numbers equal to a label
                value = pd.to_numeric(pd.Series(cells[other]), errors="coerce").to_numpy()
                code[other[value == 0]] = 0
                code[other[value == 1]] = 1
            rows.append(code)
    matrix = np.stack(rows) if rows else np.zeros((0, width - 1), np.int8)
    return np.asarray(models, dtype=str), np.asarray(lines, np.int32), matrix


def _cell(path: Path, row: int, col: int) -> str:
    """The text of cell ``(row, col)`` of the data rows of a CSV file (for messages)."""
    with path.open(newline="", encoding="utf-8-sig") as fh:
        reader = csv.reader(fh)
        next(reader, None)
        kept = (f for f in reader if f and any(x.strip() for x in f))
        for k, fields in enumerate(kept):
            if k == row:
                return fields[col].strip()
    return ""
