"""Parquet input: the long formats' columns, or a wide 0/1 matrix, a column at a time.

A ``.parquet`` file holds what a JSONL or CSV file holds, under the same column names:
static labels (``model_label, dataset, sample_index, correct``, or ``n_correct,
n_samples`` for an aggregated cell), arena rewards (``model_label, item_id, reward``), either
with an optional ``domain`` or ``category`` and ``sample`` (``epoch``, ``repeat``, ``seed``), or a
wide matrix (``model_label`` or ``model`` first, then one column per question, as
:mod:`bayes_dualeval.data.wide`). The long readers' rules
(:func:`bayes_dualeval.data.rows.parse_rows`) apply unchanged, but to whole columns:
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
from bayes_dualeval.data import values, wide
from bayes_dualeval.data.columns import Checked, check_column, numbers


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


def read_parquet(
    path: Path, *, source: str, folder_domain: str, skip_invalid: bool, report, style=()
):
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
    style : tuple of str
        Numeric columns of arena rows kept as style covariates.

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
    from bayes_dualeval.data import rows as row_rules

    wanted = set(
        row_rules.STATIC_FIELDS + row_rules.COUNT_FIELDS + row_rules.ARENA_FIELDS
        + row_rules.DOMAIN_FIELDS + row_rules.SAMPLE_FIELDS + FACETS + tuple(style)
    )  # fmt: skip
    columns = [n for n in names if n.strip() in wanted]
    text = {
        "model_label", "dataset", "item_id", *row_rules.DOMAIN_FIELDS, *row_rules.SAMPLE_FIELDS,
        *FACETS,
    }  # fmt: skip
    # text columns as Arrow dictionaries: each distinct label stored (and checked) once
    table = pq.read_table(
        path, columns=columns, read_dictionary=[n for n in columns if n.strip() in text]
    )
    n_rows = table.num_rows
    by_name = {n.strip(): table.column(n) for n in columns}
    del table  # the columns are released as they are checked (``_long`` pops them)
    return _long(path, by_name, n_rows, source, folder_domain, skip_invalid, report, style)


#: Optional label columns of any row: who scored it, and the model's family.
FACETS = ("judge", "family")


def _long(path, by_name, n_rows, source, folder_domain, skip_invalid, report, style=()):
    """The long formats' rules (``rows.parse_rows``), column by column."""
    from bayes_dualeval.data import rows as row_rules

    rules = {
        "model_label": lambda v: values.text_field(v, "model_label"),
        "dataset": lambda v: values.text_field(v, "dataset"),
        "item_id": lambda v: values.text_field(v, "item_id"),
        "sample_index": values.index_field,
        "correct": values.correct_field,
        "n_correct": lambda v: values.count_field(v, "n_correct"),
        "n_samples": lambda v: values.count_field(v, "n_samples"),
        **dict.fromkeys(row_rules.SAMPLE_FIELDS, values.sample_field),
        **{name: (lambda field: lambda v: values.text_field(v, field))(name) for name in FACETS},
    }
    checked = {n: check_column(by_name.pop(n), rules[n]) for n in list(by_name) if n in rules}
    if "reward" in by_name:
        checked["reward"] = numbers(by_name.pop("reward"))
    covariates = {name: numbers(by_name.pop(name)) for name in style if name in by_name}
    present = {name: ~c.absent for name, c in checked.items()}
    none = np.zeros(n_rows, bool)

    def any_of(fields):
        out = none.copy()
        for f in fields:
            out |= present.get(f, none)
        return out

    static = any_of(("dataset", "sample_index", "correct", *row_rules.COUNT_FIELDS))
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
    required = row_rules.STATIC_FIELDS if kind == "static" else row_rules.ARENA_FIELDS
    complete = (static & ~arena) if kind == "static" else (arena & ~static)
    # a static row gives ``correct``, or its cell's counts (rows._absent, per row)
    counted = ~present.get("correct", none) & any_of(row_rules.COUNT_FIELDS)
    if kind != "static":
        counted = none
    every = ~none
    wants = {name: ~counted if name == "correct" else every for name in required}
    wants |= {name: counted for name in row_rules.COUNT_FIELDS}
    first_gone = "correct or reward" if (~has_kind).any() else None
    for name, rows in wants.items():
        gone = complete & rows & ~present.get(name, none)
        _count(report.missing, name, gone)
        first_gone = first_gone or (name if gone.any() else None)
        complete &= ~gone
    failed = np.zeros(n_rows, bool)
    if kind == "static":
        problems += _count_problems(checked, complete, counted, present, none, skip_invalid,
                                    report, failed)  # fmt: skip
    for name in wants if kind else ():
        if name not in checked:  # no such column: every row already counted as missing it
            continue
        bad = complete & wants[name] & ~failed & checked[name].invalid
        if bad.any():
            if skip_invalid:
                _count(report.invalid, name, bad)
            else:
                row = int(np.flatnonzero(bad)[0])
                problems.append((row, checked[name].message(row)))
        failed |= bad
    if kind == "arena":
        for name in style:  # every arena row has a finite number in each covariate
            got = covariates.get(name)
            bad = complete & ~failed & (np.ones(n_rows, bool) if got is None else got.codes < 0)
            if bad.any():
                if skip_invalid:
                    _count(report.invalid, "style", bad)
                else:
                    row = int(np.flatnonzero(bad)[0])
                    problems.append((row, _style_message(got, name, row)))
            failed |= bad
    if problems:
        row, text = min(problems, key=lambda p: p[0])
        raise InputError(f"{path}:row {row + 1}: {text}")
    if kind is None or not (complete & ~failed).any():
        if n_rows:  # rows, none of which can be read (a misnamed column, say)
            missing = (
                None if first_gone is None else (first_gone, sorted(names_of(by_name, checked)))
            )
            row_rules.unreadable(f"{path}", n_rows, missing, int(failed.sum()))
        return None, pd.DataFrame()
    keep = np.flatnonzero(complete & ~failed)
    report.rows += len(keep)
    table = _table(path, kind, keep, checked, by_name, source, folder_domain, counted)
    if kind == "arena":
        for name in style:
            table[row_rules.STYLE_PREFIX + name] = covariates[name].at(keep, np.nan, np.float64)
    return kind, table


def _style_message(checked, name: str, row: int) -> str:
    """The long readers' message for a style covariate's missing or invalid value."""
    if checked is None or checked.codes[row] == Checked.ABSENT:
        return f"style covariate {name!r} is missing"
    return checked.message(row).replace("reward", f"style covariate {name!r}", 1)


def _count_problems(checked, complete, counted, present, none, skip_invalid, report, failed):
    """Aggregated cells whose counts disagree (``values.counts_fields``), or rows with both forms.

    Marks them in ``failed`` (counted as invalid under ``skip_invalid``) and returns the
    ``(row, message)`` problems to raise otherwise.
    """
    problems = []
    both = (
        complete
        & present.get("correct", none)
        & (present.get("n_correct", none) | present.get("n_samples", none))
    )
    rows = {"correct and n_correct/n_samples: give one or the other": both}
    if "n_correct" in checked and "n_samples" in checked:
        k = checked["n_correct"].at(slice(None), 0, np.int64)
        n = checked["n_samples"].at(slice(None), 1, np.int64)
        usable = complete & counted & ~checked["n_correct"].invalid & ~checked["n_samples"].invalid
        rows["n_samples must be at least 1"] = usable & (n < 1)
        rows["n_correct must be at most n_samples"] = usable & (n >= 1) & (k > n)
    for text, bad in rows.items():
        bad = bad & ~failed
        if bad.any():
            if skip_invalid:
                _count(report.invalid, text.split(" ", 1)[0], bad)
            else:
                problems.append((int(np.flatnonzero(bad)[0]), text))
        failed |= bad
    return problems


def names_of(by_name, checked) -> set:
    """The file's columns that were read (checked or kept for later)."""
    return set(by_name) | set(checked)


def _count(counter, name: str, rows: np.ndarray) -> None:
    """Add the rows of ``rows`` to ``counter[name]``, leaving names without rows out."""
    n = int(rows.sum())
    if n:
        counter[name] += n


def _table(path, kind, keep, checked, by_name, source, folder_domain, counted) -> pd.DataFrame:
    """The canonical table of the rows ``keep``, labels as categoricals.

    With ``n`` and ``sample`` columns where some row is an aggregated cell (``counted``)
    or names a repeated answer, as the long readers' tables have them.
    """
    model = _labels(checked["model_label"], keep)
    if kind == "static":
        dataset = _labels(checked["dataset"], keep)
        index = checked["sample_index"].at(keep, 0, np.int64)
        item = _static_items(source, dataset, index)
        value_col = "correct"
        value = checked["correct"].at(keep, 0, np.int8) if "correct" in checked else None
        if counted[keep].any():
            value = np.where(
                counted[keep],
                checked["n_correct"].at(keep, 0, np.int64),
                0 if value is None else value,
            ).astype(np.int32)
    else:
        names = _labels(checked["item_id"], keep)
        item = pd.Categorical.from_codes(
            names.codes,
            [item_ids.arena_id(source, label) for label in names.categories],
        )
        value_col = "reward"
        value = checked["reward"].at(keep, np.nan, np.float64)
    domain = _domains(by_name, keep, folder_domain)

    def constant(text):
        return pd.Categorical.from_codes(np.zeros(len(keep), np.int8), [text])

    out = {
        "model": model,
        "item": item,
        "source": constant(source),
        "domain": domain,
        "line": (keep + 1).astype(np.int64),
        value_col: value,
        "file": constant(str(path)),
    }
    if kind == "static" and counted[keep].any():
        out["n"] = np.where(counted[keep], checked["n_samples"].at(keep, 1, np.int64), 1)
    from bayes_dualeval.data import rows as row_rules

    for name, field in (("sample", row_rules.SAMPLE_FIELDS), *((f, (f,)) for f in FACETS)):
        values_ = _first_text(checked, field, keep)
        if values_ is not None:
            out[name] = values_
    return pd.DataFrame(out)


def _first_text(checked: dict, names, keep: np.ndarray):
    """Per row of ``keep``, the first of the text fields ``names`` present, or None for none."""
    fields = [checked[f] for f in names if f in checked]
    if not fields:
        return None
    out = np.full(len(keep), None, dtype=object)
    for field in fields:
        codes = field.codes[keep]
        fill = (out == None) & (codes >= 0)  # noqa: E711 (elementwise)
        out[fill] = np.asarray(field.array("", object), dtype=object)[codes[fill]]
    return None if (out == None).all() else out  # noqa: E711


def _labels(checked: Checked, keep: np.ndarray) -> pd.Categorical:
    """The checked text labels of rows ``keep`` (distinct raw values that strip alike merge)."""
    names, inverse = np.unique(checked.array("", str), return_inverse=True)
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
    from bayes_dualeval.data import rows as row_rules

    def usable(value):
        if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value).strip():
            return str(value).strip()
        raise ValueError("not a domain")

    chosen = np.full(len(keep), -1, np.int64)
    names: list[str] = []
    for field in row_rules.DOMAIN_FIELDS:
        if field not in by_name:
            continue
        checked = check_column(by_name[field], usable)
        codes = checked.codes[keep]
        fill = (chosen < 0) & (codes >= 0)
        chosen[fill] = len(names) + codes[fill]
        names.extend(checked.array("", str))
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
    labels = models.at(slice(None), "", str)
    codes = np.full((table.num_rows, len(names) - 1), wide.MISSING, np.int8)
    for k in range(1, len(names)):
        checked = check_column(table.column(k), wide_label)
        codes[:, k - 1] = checked.at(slice(None), wide.MISSING, np.int8)
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
