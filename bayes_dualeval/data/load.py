"""Input files (and a families file) into a :class:`~bayes_dualeval.data.dataset.Dataset`."""

from __future__ import annotations

import warnings
from collections.abc import Mapping

import numpy as np
import pandas as pd

from bayes_dualeval.core.errors import DataWarning, InputError
from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.data.readers import read_paths
from bayes_dualeval.data.tables import check_reward_norm

__all__ = ["load", "read_families", "read_model_metadata"]


def load(
    paths,
    *,
    reward_norm: str = "source",
    skip_invalid: bool = False,
    style=(),
    families=None,
    report_to: list | None = None,
) -> Dataset:
    """Load static and arena files into a :class:`Dataset`.

    Parameters
    ----------
    paths : str, Path or iterable of them
        Files, or directories searched recursively for ``*.jsonl``, ``*.csv`` and
        ``*.parquet``.
    reward_norm : {"source", "judge", "global"}
        ``source`` (default) z-normalises rewards within each source folder (every judge of
        a source on one scale); ``judge`` within each source and judge; ``global`` uses one
        z-score over all rewards, as DualEval does.
    skip_invalid : bool
        Count rows with invalid values as skipped instead of raising.
    style : sequence of str
        Numeric fields of the arena rows to keep as style covariates (``length``...).
    families : str, Path or mapping, optional
        Model families: a CSV with columns ``model_label`` and ``family``, or a mapping
        from model to family; they replace the rows' ``family`` fields. The CSV may carry
        further per-model columns (``open``, ``released_after``...), kept as the
        dataset's ``model_meta`` (:func:`read_model_metadata`).
    report_to : list, optional
        The reading's :class:`~bayes_dualeval.data.readers.ReadReport` (files, skips, what
        each evaluation harness gave) is appended to it.

    Returns
    -------
    Dataset

    Raises
    ------
    InputError
        For unreadable or unfittable input; the message names the file and line.

    Warns
    -----
    DataWarning
        When rows were skipped (missing fields, duplicates, single-model prompts), or the
        families name models the data do not hold.

    Examples
    --------
    >>> from bayes_dualeval import load
    >>> ds = load("data/")  # doctest: +SKIP
    >>> print(ds.summary())  # doctest: +SKIP
    """
    if isinstance(paths, (str, bytes)) or hasattr(paths, "__fspath__"):
        paths = [paths]
    paths = list(paths)
    check_reward_norm(reward_norm)
    style = tuple(style)
    static, arena, report = read_paths(paths, skip_invalid=skip_invalid, style=style)
    if style and len(arena) == 0:
        raise InputError(f"style covariates {', '.join(style)} name arena fields, and the data "
                         "hold no arena rows")  # fmt: skip
    ds = Dataset.from_tables(static, arena, reward_norm=reward_norm, report=report)
    if report_to is not None:  # the reading's counts (per harness), for `check`
        report_to.append(report)
    if families is None:
        return ds
    if isinstance(families, Mapping):
        mapping, columns = families, {}
    else:
        mapping, columns = read_model_metadata(families)
    ds = ds.with_families(mapping)[0].with_model_meta(columns)
    named = set(mapping).union(*(set(c) for c in columns.values()))
    unknown = sorted(named - set(np.asarray(ds.models, str)))
    if unknown:
        warnings.warn(
            f"the families file names {len(unknown)} models the data do not hold "
            f"(first: {unknown[0]!r}); they are ignored",
            DataWarning,
            stacklevel=2,
        )
    return ds


def read_families(path) -> dict:
    """``{model: family}`` from a CSV with columns ``model_label`` and ``family``.

    Raises
    ------
    InputError
        When the file cannot be read, lacks a column, or gives a model two families.
    """
    frame = _read_csv(path)
    for column in ("model_label", "family"):
        if column not in frame:
            raise InputError(
                f"{path}: the families file needs the columns model_label and family "
                f"(found: {', '.join(frame.columns)})"
            )
    frame = frame[["model_label", "family"]].apply(lambda c: c.str.strip())
    frame = frame[(frame["model_label"] != "") & (frame["family"] != "")].drop_duplicates()
    twice = frame["model_label"].duplicated(keep=False)
    if twice.any():
        model = frame.loc[twice, "model_label"].iloc[0]
        raise InputError(f"{path}: model {model!r} is given two families")
    return dict(zip(frame["model_label"], frame["family"], strict=True))


def read_model_metadata(path) -> tuple[dict, dict]:
    """A families file's families and its further per-model columns.

    A CSV with a column ``model_label`` and at least one more: ``family`` (optional) and
    any others (``open``, ``released_after``...), one label per model.

    Returns
    -------
    families : dict
        ``{model: family}`` (empty without a ``family`` column).
    columns : dict
        ``{column: {model: label}}`` for every other column (empty labels left out).

    Raises
    ------
    InputError
        When the file cannot be read, lacks ``model_label`` or any other column, or gives
        a model two labels in one column.
    """
    frame = _read_csv(path)
    others = [c for c in frame.columns if c != "model_label"]
    if "model_label" not in frame or not others:
        raise InputError(
            f"{path}: the families file needs a column model_label and a column family or "
            f"another per-model column (found: {', '.join(frame.columns)})"
        )
    families = read_families(path) if "family" in frame else {}
    columns = {}
    for column in others:
        if column == "family":
            continue
        part = frame[["model_label", column]].apply(lambda c: c.str.strip())
        part = part[(part["model_label"] != "") & (part[column] != "")].drop_duplicates()
        twice = part["model_label"].duplicated(keep=False)
        if twice.any():
            model = part.loc[twice, "model_label"].iloc[0]
            raise InputError(f"{path}: model {model!r} is given two values of {column}")
        columns[column] = dict(zip(part["model_label"], part[column], strict=True))
    return families, columns


def _read_csv(path) -> pd.DataFrame:
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise InputError(f"{path}: cannot read the families file ({exc})") from None
    frame.columns = [str(c).strip() for c in frame.columns]
    return frame
