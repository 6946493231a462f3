"""Reading the DualEval input formats (JSONL, CSV and Parquet) into validated tables.

Two row kinds exist:

* static labels, one row per answer of a model to a question:
  ``{"model_label": "gpt-4o", "dataset": "gsm8k", "sample_index": 0, "correct": 1}``, or
  one row per (model, question) with its answers counted:
  ``{..., "n_correct": 2, "n_samples": 3}``;
* arena rewards, one row per (model, prompt):
  ``{"model_label": "gpt-4o", "item_id": "arena_math_0042", "reward": 3.71}``.

A ``sample`` field (read also as ``epoch``, ``repeat`` or ``seed``: :data:`SAMPLE_FIELDS`)
names a repeated answer: rows of one model and item that differ in it are all kept
(:mod:`bayes_dualeval.data.tables` counts them per cell). A ``judge`` field names who
scored the row (a reward model, an LLM judge, a grader): a cell is a (model, item, judge).
A ``family`` field names the model's family (the same on every row of a model). Arena rows
may carry numeric style covariates (``length``, ``n_tokens``...), read when named
(``style``).

Each file holds one kind, recognised from its fields. Item ids are made unique per source:
the source tag is the file's parent folder name, a static item becomes
``<source>::<dataset>_<sample_index>`` and an arena prompt ``<source>::<item_id>``.

This module uses only the standard library, NumPy and pandas; Parquet files are read by
:mod:`bayes_dualeval.data.parquet` (with pyarrow, optional) under the same rules.
"""

from __future__ import annotations

import csv
import json
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from bayes_dualeval.core.errors import InputError
from bayes_dualeval.data import harness, wide
from bayes_dualeval.data.rows import STYLE_PREFIX, parse_rows, table_columns

SUFFIXES = (".jsonl", ".csv", ".parquet")
#: Files ending so hold item features (:mod:`bayes_dualeval.data.features`), not responses:
#: a folder of responses may keep them beside the data, and reading it skips them.
FEATURE_SUFFIX = ".features.csv"
#: ... and files ending so hold per-model metadata (a families file), skipped likewise.
FAMILIES_SUFFIX = ".families.csv"


@dataclass
class ReadReport:
    """Counts of rows that were read, skipped or dropped while reading.

    Attributes
    ----------
    files : list of str
        Files read, in order.
    rows : int
        Rows kept.
    missing : Counter
        Rows skipped because a required field was missing or empty, per field name.
    invalid : Counter
        Rows skipped under ``skip_invalid`` because a value was invalid, per field name.
    models_seen : set of str
        Every model label met, including on rows that were skipped.
    skipped : Counter
        Other records or files left out, per reason (a harness log of a failed eval, a
        sample without a score, an unknown verdict).
    harnesses : dict
        What was read from each evaluation harness's files, by harness name
        (:class:`~bayes_dualeval.data.harness.HarnessTally`).
    """

    files: list[str] = field(default_factory=list)
    rows: int = 0
    missing: Counter = field(default_factory=Counter)
    invalid: Counter = field(default_factory=Counter)
    models_seen: set = field(default_factory=set)
    skipped: Counter = field(default_factory=Counter)
    harnesses: dict = field(default_factory=dict)


def find_files(paths) -> list[tuple[Path, Path]]:
    """Expand files and directories into the input files they hold.

    Parameters
    ----------
    paths : iterable of str or Path
        Files, or directories searched recursively for ``*.jsonl``, ``*.csv`` and
        ``*.parquet``, and for the files of an evaluation harness
        (:mod:`bayes_dualeval.data.harness`: inspect_ai ``.eval`` logs, AlpacaEval
        ``annotations.json``, ...), recognised by content.

    Returns
    -------
    list of (Path, Path)
        ``(file, root)`` pairs, where ``root`` is the directory the file was found under
        (the file's own folder when a file was given). Sorted within each directory.

    Raises
    ------
    InputError
        If a path does not exist, or a file has an unsupported suffix.
    """
    found = []
    for p in paths:
        p = Path(p)
        if not p.exists():
            raise InputError(f"{p}: no such file or directory")
        if p.is_dir():
            files = sorted(
                f
                for f in p.rglob("*")
                if f.is_file()
                and not f.name.lower().endswith((FEATURE_SUFFIX, FAMILIES_SUFFIX))
                and not any(part.startswith(".") for part in f.relative_to(p).parts)
                and (f.suffix.lower() in SUFFIXES or harness.claim(f) is not None)
            )
            found.extend((f, p) for f in files)
        elif p.suffix.lower() in SUFFIXES or harness.claim(p) is not None:
            found.append((p, p.parent))
        else:
            raise InputError(
                f"{p}: unsupported file type (expected .jsonl, .csv or .parquet, or an "
                "evaluation harness's output)"
            )
    return found


def _rows(path: Path):
    """Yield ``(line_number, dict)`` for each non-blank row of a JSONL or CSV file."""
    try:
        if path.suffix.lower() == ".csv":
            with path.open(newline="", encoding="utf-8-sig") as fh:
                reader = csv.DictReader(fh)
                for row in reader:
                    clean = {
                        (k or "").strip(): (v.strip() if isinstance(v, str) else v)
                        for k, v in row.items()
                        if k is not None
                    }
                    if any(v not in (None, "") for v in clean.values()):
                        yield reader.line_num, clean
            return
        with path.open(encoding="utf-8-sig") as fh:
            for n, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except (ValueError, RecursionError) as exc:  # JSONDecodeError, huge ints
                    raise InputError(f"{path}:{n}: malformed JSON ({exc})") from None
                if not isinstance(row, dict):
                    raise InputError(
                        f"{path}:{n}: expected a JSON object, got {line.strip()[:60]}"
                    )
                yield n, row
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc.reason})") from None
    except csv.Error as exc:
        raise InputError(f"{path}: malformed CSV ({exc})") from None


def read_file(path: Path, root: Path, *, skip_invalid: bool = False, report: ReadReport, style=()):
    """Read one input file into a canonical table.

    A CSV whose header is a wide matrix's (:func:`bayes_dualeval.data.wide.is_wide`: a
    ``model_label`` column, then one column per question) is read by
    :func:`~bayes_dualeval.data.wide.read_wide`; a Parquet file by
    :func:`~bayes_dualeval.data.parquet.read_parquet`.

    Parameters
    ----------
    path : Path
        The JSONL, CSV or Parquet file.
    root : Path
        The directory the file was found under; its first folder level below ``root``
        gives the default domain.
    skip_invalid : bool
        Count rows with invalid values as skipped instead of raising.
    report : ReadReport
        Updated in place with the counts of this file.
    style : tuple of str
        Style covariates of arena rows (:func:`parse_rows`).

    Returns
    -------
    kind : {"static", "arena"} or None
        None when the file held no usable row.
    table : pandas.DataFrame
        Columns ``model, item, source, domain, line`` and ``correct`` (static) or
        ``reward`` (arena).

    Raises
    ------
    InputError
        Malformed JSON, a file that mixes kinds, or (without ``skip_invalid``) an invalid
        value; the message names the file, the line and the value.
    """
    # abspath: "static.jsonl", "./static.jsonl" and "../bench/static.jsonl" name one folder
    source = Path(os.path.abspath(path)).parent.name or "data"
    rel = path.relative_to(root).parts if path.is_relative_to(root) else (path.name,)
    folder_domain = rel[0] if len(rel) > 1 else ""
    rows = None
    if path.suffix.lower() in harness.SUFFIXES:
        tool = harness.claim(path)
        if tool is not None:  # a harness's items are its own, whatever the folder
            rows, source, folder_domain = harness.read(tool, path, report), tool.NAME, ""
    if rows is None and path.suffix.lower() == ".parquet":
        from bayes_dualeval.data.parquet import read_parquet

        kind, table = read_parquet(
            path,
            source=source,
            folder_domain=folder_domain,
            skip_invalid=skip_invalid,
            report=report,
            style=style,
        )
        report.files.append(str(path))
        return kind, table
    if rows is None and path.suffix.lower() == ".csv" and wide.is_wide(wide.header(path)):
        table = wide.read_wide(
            path, source=source, domain=folder_domain, skip_invalid=skip_invalid, report=report
        )
        report.files.append(str(path))
        return ("static" if len(table) else None), table
    kind, records = parse_rows(
        _rows(path) if rows is None else rows,
        source=source,
        folder_domain=folder_domain,
        where=str(path),
        skip_invalid=skip_invalid,
        report=report,
        style=style,
    )
    report.files.append(str(path))
    report.rows += len(records)
    table = pd.DataFrame.from_records(records, columns=table_columns(kind, style))
    table = plain_answers(table)
    table["file"] = str(path)
    return kind, table


def plain_answers(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` without its ``n`` and ``sample`` columns where they say nothing.

    A table whose rows are one answer each (``n`` 1) with no ``sample``, ``judge`` or
    ``family`` reads as the formats without those fields do
    (:mod:`bayes_dualeval.data.tables`).
    """
    drop = []
    if "n" in table and (table["n"] == 1).all():
        drop.append("n")
    drop += [c for c in ("sample", "judge", "family") if c in table and table[c].isna().all()]
    return table.drop(columns=drop) if drop else table


def read_paths(paths, *, skip_invalid: bool = False, style=()):
    """Read every input file under ``paths``.

    Parameters
    ----------
    paths : iterable of str or Path
        Files or directories (searched recursively).
    skip_invalid : bool
        Count rows with invalid values as skipped instead of raising.

    Returns
    -------
    static : pandas.DataFrame
        Columns ``model, item, source, domain, correct, file, line``.
    arena : pandas.DataFrame
        Columns ``model, item, source, domain, reward, file, line``.
    report : ReadReport
        Files read and rows skipped.

    Raises
    ------
    InputError
        If no input file is found, or any file cannot be read (see :func:`read_file`).
    """
    files = find_files(paths)
    if not files:
        shown = ", ".join(str(p) for p in paths)
        raise InputError(
            f"no .jsonl, .csv or .parquet input files found in {shown} (nor any evaluation "
            "harness's output)"
        )
    report = ReadReport()
    tables = {"static": [], "arena": []}
    for path, root in files:
        kind, table = read_file(path, root, skip_invalid=skip_invalid, report=report, style=style)
        if kind is not None and len(table):
            tables[kind].append(table)
    out = {}
    for kind, parts in tables.items():
        value = "correct" if kind == "static" else "reward"
        columns = ["model", "item", "source", "domain", value, "file", "line"]
        # a wide matrix's table has one answer per cell and no sample: the columns that
        # say so are left out rather than filled per cell (tables.py reads them as absent)
        optional = [
            c
            for c in ("n", "sample", "judge", "family", *(STYLE_PREFIX + x for x in style))
            if any(c in part for part in parts)
        ]
        if len(parts) == 1:  # one file (a large matrix, often): no copy
            out[kind] = parts[0][columns + optional]
        elif parts:
            for part in parts:
                for name in optional:
                    if name not in part:  # style columns: every arena file has them
                        part[name] = 1 if name == "n" else None
            out[kind] = pd.concat(parts, ignore_index=True)[columns + optional]
        else:
            out[kind] = pd.DataFrame({c: pd.Series(dtype=object) for c in columns})
    dtype = "int32" if "n" in out["static"] else "int8"
    out["static"]["correct"] = out["static"]["correct"].astype(dtype)
    out["arena"]["reward"] = out["arena"]["reward"].astype("float64")
    return out["static"], out["arena"], report
