"""One row of the DualEval formats to a canonical record: kinds, required fields, values.

The JSONL and CSV readers (:mod:`bayes_dualeval.data.readers`), data frames
(:mod:`bayes_dualeval.data.tables`) and the Parquet reader's column rules
(:mod:`bayes_dualeval.data.parquet`) share these: which fields make a static or an arena
row (:data:`STATIC_FIELDS`, :data:`COUNT_FIELDS`, :data:`ARENA_FIELDS`), the optional ones
(domain, sample, judge, family, style covariates), and :func:`parse_rows`, which checks a
file's rows and turns them into records, or says in one line why none could be read
(:func:`unreadable`).
"""

from __future__ import annotations

from bayes_dualeval.core import item_ids
from bayes_dualeval.core.errors import InputError
from bayes_dualeval.data.values import (
    correct_field,
    counts_fields,
    index_field,
    reward_field,
    sample_field,
    style_field,
    text_field,
)

STATIC_FIELDS = ("model_label", "dataset", "sample_index", "correct")
#: The aggregated form of a static cell: correct answers and answers, instead of ``correct``.
COUNT_FIELDS = ("n_correct", "n_samples")
ARENA_FIELDS = ("model_label", "item_id", "reward")
_STATIC_ONLY = {"dataset", "sample_index", "correct", *COUNT_FIELDS}
_ARENA_ONLY = {"item_id", "reward"}
#: Extra fields kept per item as metadata (the first one present gives the item's domain).
DOMAIN_FIELDS = ("domain", "category")
#: The id of a repeated answer (harnesses call it so); the first one present is read.
SAMPLE_FIELDS = ("sample", "epoch", "repeat", "seed")
#: Columns of a canonical table besides its value (``correct`` or ``reward``).
TABLE_COLUMNS = ("model", "item", "source", "domain", "line", "n", "sample", "judge", "family")
#: The prefix of a style covariate's column in a canonical table (``style:length``).
STYLE_PREFIX = "style:"


def _row_kind(row: dict) -> str | None:
    keys = {k for k, v in row.items() if v is not None and v != ""}
    static, arena = bool(keys & _STATIC_ONLY), bool(keys & _ARENA_ONLY)
    if static and arena:
        return "mixed"
    if static:
        return "static"
    if arena:
        return "arena"
    return None


def parse_rows(rows, *, source, folder_domain, where, skip_invalid, report, style=()):
    """Validate raw rows of one file (or frame) and turn them into canonical records.

    Parameters
    ----------
    rows : iterable of (int, dict)
        Line (or row) number and the raw fields of each row.
    source : str
        Source tag used to make item ids unique (``<source>::...``).
    folder_domain : str
        Domain used when a row has no ``domain`` or ``category`` field.
    where : str
        The file name (or a description) used in error messages.
    skip_invalid : bool
        Count rows with invalid values as skipped instead of raising.
    report : ReadReport
        Updated in place with skip counts and the models seen.
    style : tuple of str
        Numeric fields of arena rows to keep as style covariates (every arena row must
        have a finite number in each).

    Returns
    -------
    kind : {"static", "arena"} or None
        The kind of every row (None when no usable row was found).
    records : list of tuple
        ``(model, item, source, domain, line, n, sample, judge, family, value)`` and, for
        arena rows, one value per ``style`` field before ``value``: ``n`` the answers the
        row stands for (1, or its ``n_samples``), ``sample`` the id of a repeated answer,
        ``judge`` and ``family`` their names (None where absent), ``value`` the correct
        answers (static) or the reward.

    Raises
    ------
    InputError
        A row mixing kinds, a file mixing kinds, an invalid value (without
        ``skip_invalid``), or rows of which none could be read (:func:`unreadable`).
    """
    kind = None
    records = []
    seen = skipped = 0
    first_missing = None
    for line, row in rows:
        seen += 1
        row_kind = _row_kind(row)
        if row_kind == "mixed":
            raise InputError(
                f"{where}:{line}: row has both static fields (dataset/sample_index/correct) and "
                "arena fields (item_id/reward)"
            )
        if isinstance(row.get("model_label"), str) and row["model_label"].strip():
            report.models_seen.add(row["model_label"].strip())
        if row_kind is None:
            report.missing["correct or reward"] += 1
            first_missing = first_missing or ("correct or reward", sorted(row))
            continue
        if kind is None:
            kind = row_kind
        elif row_kind != kind:
            raise InputError(
                f"{where}:{line}: file mixes static and arena rows; put each kind in its own file"
            )
        absent = _absent(row, kind)
        if absent:
            report.missing[absent] += 1
            first_missing = first_missing or (absent, sorted(row))
            continue
        try:
            record = _record(row, kind, source)
            covariates = (
                tuple(style_field(row.get(c), c) for c in style) if kind == "arena" else ()
            )
        except ValueError as exc:
            if skip_invalid:
                report.invalid[str(exc).split(" ", 1)[0]] += 1
                skipped += 1
                continue
            raise InputError(f"{where}:{line}: {exc}") from None
        domain = folder_domain
        for name in DOMAIN_FIELDS:
            val = row.get(name)
            if isinstance(val, (str, int)) and not isinstance(val, bool) and str(val).strip():
                domain = str(val).strip()
                break
        model, item, n, sample, value = record
        judge, family = (_optional_text(row, f) for f in ("judge", "family"))
        records.append(
            (model, item, source, domain, line, n, sample, judge, family, *covariates, value)
        )
    if seen and not records:
        unreadable(where, seen, first_missing, skipped)
    return kind, records


def unreadable(where: str, rows: int, missing, invalid: int = 0):
    """Raise the :class:`InputError` of a file of ``rows`` rows none of which could be read.

    A header typo (``corect``) would otherwise drop a whole benchmark as skipped rows while
    the rest of a folder loads; ``missing`` is the first row's missing field and the fields
    it had, ``invalid`` the rows skipped for invalid values.
    """
    if missing is not None:
        name, present = missing
        shown = ", ".join(present[:8]) + (", ..." if len(present) > 8 else "")
        raise InputError(
            f"{where}: none of its {rows} rows can be read: they miss the field {name!r} "
            f"(fields present: {shown or 'none'}; a static row needs "
            f"{', '.join(STATIC_FIELDS)}, an arena row {', '.join(ARENA_FIELDS)})"
        )
    raise InputError(f"{where}: none of its {rows} rows can be read ({invalid} invalid)")


def _optional_text(row: dict, name: str) -> str | None:
    """An optional label field (``judge``, ``family``): its text, or None when absent."""
    return text_field(row[name], name) if _present(row, name) else None


def table_columns(kind: str, style=()) -> list[str]:
    """The columns of a reader's records of ``kind`` (see :func:`parse_rows`)."""
    extra = [STYLE_PREFIX + c for c in style] if kind == "arena" else []
    return [*TABLE_COLUMNS, *extra, "correct" if kind == "static" else "reward"]


def _present(row: dict, name: str) -> bool:
    value = row.get(name)
    return value is not None and value != ""


def _absent(row: dict, kind: str) -> str | None:
    """The first required field of a ``kind`` row that is missing or empty, or None."""
    if kind == "arena":
        required = ARENA_FIELDS
    elif _present(row, "correct") or not any(_present(row, f) for f in COUNT_FIELDS):
        required = STATIC_FIELDS
    else:  # the aggregated form
        required = STATIC_FIELDS[:3] + COUNT_FIELDS
    return next((f for f in required if not _present(row, f)), None)


def _record(row: dict, kind: str, source: str):
    """``(model, item, n, sample, value)`` of a row with its fields; ``ValueError`` if invalid."""
    model = text_field(row["model_label"], "model_label")
    sample = None
    for name in SAMPLE_FIELDS:
        if _present(row, name):
            sample = sample_field(row[name])
            break
    if kind == "arena":
        item = item_ids.arena_id(source, text_field(row["item_id"], "item_id"))
        return model, item, 1, sample, reward_field(row["reward"])
    dataset = text_field(row["dataset"], "dataset")
    item = item_ids.static_id(source, dataset, index_field(row["sample_index"]))
    if _present(row, "correct"):
        if any(_present(row, f) for f in COUNT_FIELDS):
            raise ValueError("correct and n_correct/n_samples: give one or the other")
        return model, item, 1, sample, correct_field(row["correct"])
    k, n = counts_fields(row["n_correct"], row["n_samples"])
    return model, item, n, sample, k
