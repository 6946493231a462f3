"""Parquet input: the long formats' columns, or a wide 0/1 matrix, a column at a time.

A ``.parquet`` file holds what a JSONL or CSV file holds, under the same column names:
static labels (``model_label, dataset, sample_index, correct``), arena rewards
(``model_label, item_id, reward``), either with an optional ``domain`` or ``category``, or a
wide matrix (``model_label`` or ``model`` first, then one column per question, as
:mod:`bayes_dualeval.data.wide`). The long readers' rules
(:func:`bayes_dualeval.data.readers.parse_rows`) apply unchanged, but to whole columns:
each distinct value of a column is checked once by the same scalar rule, and rows reach
the result as integer codes, never as Python objects one by one. Rows are numbered from 1
in messages and in the ``line`` column.

Reading needs the optional ``pyarrow`` package (``pip install 'bayes-dualeval[parquet]'``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from bayes_dualeval.core import item_ids
from bayes_dualeval.core.errors import InputError
from bayes_dualeval.data import wide

SUFFIX = ".parquet"
#: Codes of a checked value that is not a value: absent (null or empty) and invalid.
ABSENT, INVALID = -1, -2


def _arrow(path: Path):
    """``(pyarrow, pyarrow.compute, pyarrow.parquet)``, or a one-line error naming ``path``."""
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq
    except ImportError:
        raise InputError(
            f"{path}: reading Parquet needs the pyarrow package "
            "(pip install 'bayes-dualeval[parquet]'), or convert the file to CSV or JSONL"
        ) from None
    return pa, pc, pq


class Checked:
    """One column after its rule: a code per row into the distinct values that passed.

    Attributes
    ----------
    codes : numpy.ndarray
        Per row: an index into ``values``, :data:`ABSENT` or :data:`INVALID`.
    values : list or numpy.ndarray
        The checked value of each distinct raw value (None where it failed).
    """

    def __init__(self, codes: np.ndarray, values, message):
        self.codes = codes
        self.values = values
        self._message = message

    @property
    def absent(self) -> np.ndarray:
        """Rows without a value (null or empty)."""
        return self.codes == ABSENT

    @property
    def invalid(self) -> np.ndarray:
        """Rows whose value failed the rule."""
        return self.codes == INVALID

    def message(self, row: int) -> str:
        """The rule's message for row ``row`` (from 0), whose value failed."""
        return self._message(row)


def _decoded(pa, column):
    """``column`` as one plain (non-dictionary) Arrow array."""
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    return arr


def _encoded(pa, column):
    """``column`` as one dictionary-encoded Arrow array (as it is, when it already is one)."""
    import pyarrow.compute as pc

    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    return arr if pa.types.is_dictionary(arr.type) else pc.dictionary_encode(arr)


def check_column(column, rule) -> Checked:
    """Apply a scalar ``rule`` to each distinct value of an Arrow column.

    Parameters
    ----------
    column : pyarrow.Array or pyarrow.ChunkedArray
    rule : callable
        ``rule(value)`` returns the checked value or raises ``ValueError`` with the message
        the long readers give (:mod:`bayes_dualeval.data.readers`). Null and the empty
        string are absent, as in JSONL and CSV, and never reach it.

    Returns
    -------
    Checked
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    encoded = _encoded(pa, column)
    raw = encoded.dictionary.to_pylist()
    index = pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False).astype(np.int32)
    values, messages = [None] * len(raw), [None] * len(raw)
    # the last entry: null (index -1); codes as narrow as the distinct values allow
    code = np.empty(len(raw) + 1, np.min_scalar_type(-max(len(raw), 2)))
    code[-1] = ABSENT
    for k, value in enumerate(raw):
        if value == "":
            code[k] = ABSENT
            continue
        try:
            values[k] = rule(value)
            code[k] = k
        except ValueError as exc:
            messages[k] = str(exc)
            code[k] = INVALID
    codes = code[index]
    if not (codes == INVALID).any():
        return Checked(codes, values, None)
    return Checked(codes, values, lambda row: messages[index[row]])


def read_parquet(path: Path, *, source: str, folder_domain: str, skip_invalid: bool, report):
    """Read one Parquet file into the canonical table of its kind.

    Parameters
    ----------
    path : Path
    source : str
        Source tag of the items (the file's folder).
    folder_domain : str
        Domain of rows without a ``domain`` or ``category`` value.
    skip_invalid : bool
        Count rows (wide: cells) with invalid values as skipped instead of raising.
    report : ReadReport
        Updated with the rows kept, the skip counts and the models seen.

    Returns
    -------
    kind : {"static", "arena"} or None
    table : pandas.DataFrame
        Columns ``model, item, source, domain, line, file`` and ``correct`` or ``reward``,
        the labels categorical; ``line`` is the row number, from 1.

    Raises
    ------
    InputError
        What the long readers raise for the same values, naming the file and row; a file
        that is not Parquet; pyarrow missing.
    """
    pa, _, pq = _arrow(path)
    try:
        schema = pq.read_schema(path)
    except (OSError, pa.ArrowException) as exc:
        raise InputError(f"{path}: not a readable Parquet file ({exc})") from None
    names = list(schema.names)
    if wide.is_wide([n.strip() for n in names]):
        table = _read_wide(pa, pq, path, names, source, folder_domain, skip_invalid, report)
        return ("static" if len(table) else None), table
    from bayes_dualeval.data import readers

    wanted = set(readers.STATIC_FIELDS + readers.ARENA_FIELDS + readers.DOMAIN_FIELDS)
    columns = [n for n in names if n.strip() in wanted]
    text = {"model_label", "dataset", "item_id", *readers.DOMAIN_FIELDS}
    # text columns as Arrow dictionaries: each distinct label stored (and checked) once
    table = pq.read_table(
        path, columns=columns, read_dictionary=[n for n in columns if n.strip() in text]
    )
    n_rows = table.num_rows
    by_name = {n.strip(): table.column(n) for n in columns}
    del table  # the columns are released as they are checked (``_long`` pops them)
    return _long(path, by_name, n_rows, source, folder_domain, skip_invalid, report)


def _long(path, by_name, n_rows, source, folder_domain, skip_invalid, report):
    """The long formats' rules (``readers.parse_rows``), column by column."""
    from bayes_dualeval.data import readers

    rules = {
        "model_label": lambda v: readers.text_field(v, "model_label"),
        "dataset": lambda v: readers.text_field(v, "dataset"),
        "item_id": lambda v: readers.text_field(v, "item_id"),
        "sample_index": readers.index_field,
        "correct": readers.correct_field,
    }
    checked = {n: check_column(by_name.pop(n), rules[n]) for n in list(by_name) if n in rules}
    if "reward" in by_name:
        checked["reward"] = _rewards(by_name.pop("reward"))
    present = {name: ~c.absent for name, c in checked.items()}
    none = np.zeros(n_rows, bool)

    def any_of(fields):
        out = none.copy()
        for f in fields:
            out |= present.get(f, none)
        return out

    static = any_of(("dataset", "sample_index", "correct"))
    arena = any_of(("item_id", "reward"))
    if "model_label" in checked:
        labels = checked["model_label"]
        report.models_seen.update(v for v in labels.values if v is not None)
    problems = []  # (row, message): the first in file order is raised
    mixed = np.flatnonzero(static & arena)
    if len(mixed):
        problems.append(
            (
                mixed[0],
                "row has both static fields (dataset/sample_index/correct) "
                "and arena fields (item_id/reward)",
            )
        )
    has_kind = static | arena
    _count(report.missing, "correct or reward", ~has_kind)
    first = np.flatnonzero(has_kind & ~(static & arena))
    kind = None
    if len(first):
        kind = "static" if static[first[0]] else "arena"
        other = np.flatnonzero(arena & ~static if kind == "static" else static & ~arena)
        if len(other):
            problems.append(
                (other[0], "file mixes static and arena rows; put each kind in its own file")
            )
    required = readers.STATIC_FIELDS if kind == "static" else readers.ARENA_FIELDS
    rows = has_kind & ((static & ~arena) if kind == "static" else (arena & ~static))
    complete = rows.copy()
    for name in required:
        gone = complete & ~present.get(name, none)
        _count(report.missing, name, gone)
        complete &= ~gone
    failed = np.zeros(n_rows, bool)
    for name in required if kind else ():
        if name not in checked:  # no such column: every row already counted as missing it
            continue
        bad = complete & ~failed & checked[name].invalid
        if bad.any():
            if skip_invalid:
                _count(report.invalid, name, bad)
            else:
                row = int(np.flatnonzero(bad)[0])
                problems.append((row, checked[name].message(row)))
        failed |= bad
    if problems:
        row, text = min(problems, key=lambda p: p[0])
        raise InputError(f"{path}:row {row + 1}: {text}")
    if kind is None:
        return None, pd.DataFrame()
    keep = np.flatnonzero(complete & ~failed)
    report.rows += len(keep)
    return kind, _table(path, kind, keep, checked, by_name, source, folder_domain)


def _count(counter, name: str, rows: np.ndarray) -> None:
    """Add the rows of ``rows`` to ``counter[name]``, leaving names without rows out."""
    n = int(rows.sum())
    if n:
        counter[name] += n


def _rewards(column) -> Checked:
    """Rewards: numbers checked as arrays (their distinct values are nearly every row)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from bayes_dualeval.data import readers

    arr = _decoded(pa, column)
    if not (pa.types.is_integer(arr.type) or pa.types.is_floating(arr.type)):
        checked = check_column(arr, readers.reward_field)
        checked.values = np.array(
            [np.nan if v is None else v for v in checked.values], dtype=np.float64
        )
        return checked
    null = arr.is_null().to_numpy(zero_copy_only=False)
    value = pc.fill_null(arr.cast(pa.float64()), 0.0).to_numpy(zero_copy_only=False)
    codes = np.arange(len(value), dtype=np.int64)
    codes[~np.isfinite(value)] = INVALID
    codes[null] = ABSENT

    def message(row):
        try:
            readers.reward_field(arr[row].as_py())
        except ValueError as exc:
            return str(exc)
        return f"reward must be finite, got {arr[row].as_py()!r}"

    return Checked(codes, value, message)


def _table(path, kind, keep, checked, by_name, source, folder_domain) -> pd.DataFrame:
    """The canonical table of the rows ``keep``, labels as categoricals."""
    model = _labels(checked["model_label"], keep)
    if kind == "static":
        dataset = _labels(checked["dataset"], keep)
        index = np.array(
            [v if v is not None else 0 for v in checked["sample_index"].values], np.int64
        )[checked["sample_index"].codes[keep]]
        item = _static_items(source, dataset, index)
        value_col = "correct"
        correct = checked["correct"]
        value = np.array([v if v is not None else 0 for v in correct.values], np.int8)
        value = value[correct.codes[keep]]
    else:
        names = _labels(checked["item_id"], keep)
        item = pd.Categorical.from_codes(
            names.codes,
            [item_ids.arena_id(source, label) for label in names.categories],
        )
        value_col = "reward"
        value = np.asarray(checked["reward"].values, np.float64)[checked["reward"].codes[keep]]
    domain = _domains(by_name, keep, folder_domain)

    def constant(text):
        return pd.Categorical.from_codes(np.zeros(len(keep), np.int8), [text])

    return pd.DataFrame(
        {
            "model": model,
            "item": item,
            "source": constant(source),
            "domain": domain,
            "line": (keep + 1).astype(np.int64),
            value_col: value,
            "file": constant(str(path)),
        }
    )


def _labels(checked: Checked, keep: np.ndarray) -> pd.Categorical:
    """The checked text labels of rows ``keep`` (distinct raw values that strip alike merge)."""
    values = np.array([v if v is not None else "" for v in checked.values], dtype=object)
    names, inverse = np.unique(values.astype(str), return_inverse=True)
    return pd.Categorical.from_codes(inverse[checked.codes[keep]].astype(np.int32), names)


def _static_items(source: str, dataset: pd.Categorical, index: np.ndarray) -> pd.Categorical:
    """``<source>::<dataset>_<index>`` per row, built once per distinct question."""
    low = int(index.min()) if len(index) else 0
    span = (int(index.max()) - low + 1) if len(index) else 1
    if span * max(len(dataset.categories), 1) < 2**62:  # one integer key per question
        codes, distinct = pd.factorize(dataset.codes.astype(np.int64) * span + (index - low))
        names = np.asarray(dataset.categories)[distinct // span]
        numbers = distinct % span + low
    else:  # indices too far apart for one key
        codes, pairs = pd.MultiIndex.from_arrays([dataset.codes, index]).factorize()
        names = np.asarray(dataset.categories)[pairs.get_level_values(0)]
        numbers = pairs.get_level_values(1)
    ids = item_ids.static_ids(source, names, numbers)
    ordered, inverse = np.unique(ids, return_inverse=True)
    return pd.Categorical.from_codes(inverse[codes].astype(np.int32), ordered)


def _domains(by_name, keep, folder_domain) -> pd.Categorical:
    """Per row, the first ``domain`` or ``category`` value that is text, else the folder's."""
    from bayes_dualeval.data import readers

    def usable(value):
        if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value).strip():
            return str(value).strip()
        raise ValueError("not a domain")

    chosen = np.full(len(keep), -1, np.int64)
    names: list[str] = []
    for field in readers.DOMAIN_FIELDS:
        if field not in by_name:
            continue
        checked = check_column(by_name[field], usable)
        open_rows = chosen < 0
        codes = checked.codes[keep]
        fill = open_rows & (codes >= 0)
        mapping = np.array([len(names) + k for k in range(len(checked.values))], np.int64)
        names.extend(v if v is not None else "" for v in checked.values)
        chosen[fill] = mapping[codes[fill]]
    names.append(folder_domain)
    chosen[chosen < 0] = len(names) - 1
    distinct, inverse = np.unique(np.asarray(names, dtype=str), return_inverse=True)
    return pd.Categorical.from_codes(inverse[chosen].astype(np.int32), distinct)


def _read_wide(pa, pq, path, names, source, domain, skip_invalid, report) -> pd.DataFrame:
    """A wide matrix: each question column's distinct values checked once."""
    table = pq.read_table(path)
    models = check_column(table.column(0), _wide_model)
    unusable = np.flatnonzero(models.codes < 0)
    if len(unusable):
        raise InputError(f"{path}:row {unusable[0] + 1}: the model label is empty")
    labels = np.asarray(models.values, dtype=object)[models.codes].astype(str)
    codes = np.full((table.num_rows, len(names) - 1), wide.MISSING, np.int8)
    for k in range(1, len(names)):
        checked = check_column(table.column(k), wide_label)
        per_value = np.array([wide.INVALID if v is None else v for v in checked.values], np.int8)
        valid = checked.codes >= 0
        codes[valid, k - 1] = per_value[checked.codes[valid]]
        codes[checked.invalid, k - 1] = wide.INVALID

    def cell(row, col):
        return table.column(int(col) + 1)[int(row)].as_py()

    return wide.cells_table(
        path,
        [n.strip() for n in names],
        labels,
        np.arange(1, table.num_rows + 1, dtype=np.int32),
        codes,
        source=source,
        domain=domain,
        skip_invalid=skip_invalid,
        report=report,
        cell=cell,
        where="row ",
    )


def _wide_model(value) -> str:
    """A wide matrix's model label: text or an integer, not blank."""
    if isinstance(value, bool) or not isinstance(value, (str, int)) or not str(value).strip():
        raise ValueError("the model label is empty")
    return str(value).strip()


def wide_label(value) -> int:
    """A wide cell's code: 0 or 1 (a number, a boolean or text equal to one), or missing."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, str):
        value = value.strip()
        if value == "":
            return wide.MISSING
        try:
            value = float(value)
        except ValueError:
            raise ValueError("not a label") from None
    if isinstance(value, (int, float)) and value in (0, 1):
        return int(value)
    raise ValueError("not a label")
