"""From canonical long tables to the arrays of a :class:`~bayes_dualeval.data.dataset.Dataset`.

A canonical table has one row per (model, item) cell: columns ``model, item, source,
domain`` and ``correct`` (static labels) or ``reward`` (arena rewards). This module turns
input frames into such tables (:func:`frames_to_tables`), cleans them (duplicates, arena
prompts answered by one model), checks that they can be fitted, indexes them on shared
model and item axes and z-normalises the rewards (:func:`dataset_fields`).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd

from bayes_dualeval.core.errors import InputError
from bayes_dualeval.data.readers import ReadReport, parse_rows

REWARD_NORMS = ("source", "global")
KINDS = ("static", "arena")


def check_reward_norm(reward_norm: str) -> None:
    """Raise :class:`InputError` unless ``reward_norm`` is one of :data:`REWARD_NORMS`."""
    if reward_norm not in REWARD_NORMS:
        raise InputError(f"reward_norm must be one of {REWARD_NORMS}, got {reward_norm!r}")


def _distinct(column: pd.Series) -> np.ndarray:
    """The distinct values of a column; of a categorical one, from its codes (no text per row)."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        names = column.cat.categories
        used = np.bincount(column.cat.codes.to_numpy() + 1, minlength=len(names) + 1)
        return np.asarray(names)[used[1:] > 0]
    return pd.unique(column.to_numpy())


def dataset_fields(
    static: pd.DataFrame | None,
    arena: pd.DataFrame | None,
    *,
    reward_norm: str,
    report: ReadReport,
) -> dict:
    """The fields of a :class:`~bayes_dualeval.data.dataset.Dataset` (read-only arrays).

    Parameters
    ----------
    static, arena : pandas.DataFrame or None
        Canonical tables (ids already made unique).
    reward_norm : {"source", "global"}
    report : ReadReport
        Counts from reading, merged into ``skipped``.

    Returns
    -------
    dict
        Keyword arguments of :class:`~bayes_dualeval.data.dataset.Dataset`.

    Raises
    ------
    InputError
        If the data cannot be fitted (no rows, fewer than two models, a model left with
        no usable row); the message carries the skip counts.
    """
    check_reward_norm(reward_norm)
    skipped: Counter = Counter()
    for name, n in report.missing.items():
        skipped[f"missing {name}"] += n
    for name, n in report.invalid.items():
        skipped[f"invalid {name}"] += n
    skipped.update(report.skipped)
    static = _empty("correct") if static is None else static
    arena = _empty("reward") if arena is None else arena

    static, n_dup_s = dedupe(static)
    arena, n_dup_a = dedupe(arena)
    if n_dup_s + n_dup_a:
        skipped["duplicate (model, item)"] += n_dup_s + n_dup_a
    # Arena prompts answered by one model carry no comparison.
    counts = arena.groupby("item", sort=False)["model"].transform("size")
    lonely = counts < 2
    if lonely.any():
        skipped["arena prompt answered by one model"] += int(arena.loc[lonely, "item"].nunique())
        arena = arena.loc[~lonely]
    clash = set(_distinct(static["item"])) & set(_distinct(arena["item"]))
    if clash:
        raise InputError(
            f"item id {sorted(clash)[0]!r} is both a static question and an arena prompt"
        )

    why = ", ".join(f"{n} {name}" for name, n in skipped.items() if n)
    why = f" (skipped: {why})" if why else ""
    if len(static) == 0 and len(arena) == 0:
        raise InputError(f"no usable rows: nothing to fit{why}")
    models = np.array(
        sorted(set(_distinct(static["model"])) | set(_distinct(arena["model"]))), dtype=object
    )
    lost = sorted(report.models_seen - set(models))
    if lost:
        raise InputError(
            f"model {lost[0]!r} has no usable rows"
            + (f" (and {len(lost) - 1} more)" if len(lost) > 1 else "")
            + why
        )
    if len(models) < 2:
        raise InputError(f"need at least two models to rank, found {len(models)}")

    item_tables = []
    for kind, table in zip(KINDS, (static, arena), strict=True):
        meta = table.drop_duplicates("item")[["item", "source", "domain"]].copy()
        meta["kind"] = kind
        item_tables.append(meta)
    items = pd.concat(item_tables, ignore_index=True)
    item_index = pd.Index(items["item"])
    model_index = pd.Index(models)
    groups_series = items["kind"] + ":" + items["source"].astype(str)
    groups, item_group = np.unique(groups_series.to_numpy(dtype=str), return_inverse=True)
    reward = arena["reward"].to_numpy(dtype=np.float64)
    z = normalise_rewards(reward, arena["source"].to_numpy(dtype=str), reward_norm)
    return {
        "models": frozen(models.astype(str)),
        "items": frozen(items["item"].to_numpy(dtype=str)),
        "item_kind": frozen(items["kind"].to_numpy(dtype=str)),
        "item_source": frozen(items["source"].to_numpy(dtype=str)),
        "item_domain": frozen(items["domain"].fillna("").to_numpy(dtype=str)),
        "item_group": frozen(item_group, np.int32),
        "groups": frozen(groups.astype(str)),
        "static_model": frozen(_positions(model_index, static["model"]), np.int32),
        "static_item": frozen(_positions(item_index, static["item"]), np.int32),
        "static_y": frozen(static["correct"].to_numpy(), np.int8),
        "arena_model": frozen(_positions(model_index, arena["model"]), np.int32),
        "arena_item": frozen(_positions(item_index, arena["item"]), np.int32),
        "arena_reward": frozen(reward),
        "arena_z": frozen(z),
        "reward_norm": reward_norm,
        "skipped": {name: n for name, n in skipped.items() if n},
        "files": tuple(report.files),
    }


def frames_to_tables(
    static: pd.DataFrame | None,
    arena: pd.DataFrame | None,
    *,
    source: str,
    skip_invalid: bool,
) -> tuple[pd.DataFrame | None, pd.DataFrame | None, ReadReport]:
    """Canonical tables from DataFrames in the input formats, row by row as files are read.

    Returns
    -------
    static, arena : pandas.DataFrame or None
        None for a frame that is missing or empty.
    report : ReadReport
        Rows missing fields or with invalid values (when ``skip_invalid``).
    """
    report = ReadReport()
    tables = {}
    for kind, frame in zip(KINDS, (static, arena), strict=True):
        if frame is None or len(frame) == 0:
            continue
        records = []
        frame = frame.copy()
        if "source" not in frame:
            frame["source"] = source
        for src, part in frame.groupby("source", sort=False):
            rows = (
                (n + 1, {k: (None if _isna(v) else v) for k, v in row.items()})
                for n, row in enumerate(part.drop(columns="source").to_dict("records"))
            )
            got, recs = parse_rows(
                rows,
                source=str(src),
                folder_domain="",
                where=f"{kind} frame (source {src})",
                skip_invalid=skip_invalid,
                report=report,
            )
            if got is not None and got != kind:
                raise InputError(f"the {kind} frame holds {got} rows")
            records.extend(recs)
        value = "correct" if kind == "static" else "reward"
        tables[kind] = pd.DataFrame.from_records(
            records, columns=["model", "item", "source", "domain", "line", value]
        )
    return tables.get("static"), tables.get("arena"), report


def normalise_rewards(reward: np.ndarray, source: np.ndarray, how: str) -> np.ndarray:
    """Z-normalise rewards per source or globally.

    Parameters
    ----------
    reward : numpy.ndarray, shape (n,)
        Raw rewards.
    source : numpy.ndarray of str, shape (n,)
        Source tag of each reward.
    how : {"source", "global"}
        ``source`` standardises within each source (each usually has its own reward
        model); ``global`` uses one mean and standard deviation for all rewards.

    Returns
    -------
    numpy.ndarray, shape (n,)
        ``(r - mean) / sd``; a group with zero spread gets z = 0.
    """
    if len(reward) == 0:
        return reward.astype(np.float64)
    keys = np.zeros(len(reward), dtype=np.int64)
    if how == "source":
        _, keys = np.unique(source, return_inverse=True)
    n = np.bincount(keys).astype(np.float64)
    # z is scale-free: divide each group by its largest |r| so that sums and squares of huge
    # (but finite) rewards cannot overflow to inf/NaN
    scale = np.zeros(len(n))
    np.maximum.at(scale, keys, np.abs(reward))
    reward = reward / np.where(scale > 0, scale, 1.0)[keys]
    mean = np.bincount(keys, weights=reward) / n
    dev = reward - mean[keys]
    sd = np.sqrt(np.bincount(keys, weights=dev**2) / n)
    safe = np.where(sd > 0, sd, 1.0)
    return dev / safe[keys]


def _positions(index: pd.Index, labels: pd.Series) -> np.ndarray:
    """``index.get_indexer(labels)``, through the categories when ``labels`` is categorical.

    A wide matrix's table (:mod:`bayes_dualeval.data.wide`) holds its labels as categories:
    looking up each distinct label once and taking the codes keeps ten million cells from
    being turned into ten million strings.
    """
    if isinstance(labels.dtype, pd.CategoricalDtype):
        where = index.get_indexer(labels.cat.categories)
        codes = labels.cat.codes.to_numpy()
        return np.where(codes >= 0, where[codes], -1)
    return index.get_indexer(labels)


def frozen(a, dtype=None) -> np.ndarray:
    """A read-only copy of ``a`` as a NumPy array (a :class:`Dataset` field)."""
    out = np.array(a, dtype=dtype)
    out.setflags(write=False)
    return out


def _isna(v) -> bool:
    try:
        return bool(pd.isna(v))
    except (TypeError, ValueError):
        return False


def _empty(value: str) -> pd.DataFrame:
    return pd.DataFrame(
        {c: pd.Series(dtype=object) for c in ["model", "item", "source", "domain", value]}
    )


def dedupe(table: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """Keep the last row of each (model, item); return the table and how many were dropped.

    A table without duplicates is returned as it is (no copy); a wide matrix's categorical
    table is checked on one integer key per cell.
    """
    model, item = table["model"], table["item"]
    categorical = (isinstance(c.dtype, pd.CategoricalDtype) for c in (model, item))
    if all(categorical):
        key = model.cat.codes.to_numpy(np.int64) * len(item.cat.categories)
        key += item.cat.codes.to_numpy(np.int64)
        drop = pd.Series(key).duplicated(keep="last").to_numpy()
    else:
        drop = table.duplicated(["model", "item"], keep="last").to_numpy()
    n = int(drop.sum())
    if n == 0 and isinstance(table.index, pd.RangeIndex) and table.index.start == 0:
        return table, 0
    return table.loc[~drop].reset_index(drop=True), n
