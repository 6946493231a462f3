"""The validated, immutable evaluation dataset that every model is fitted to.

A :class:`Dataset` holds the model and item labels (with each item's kind, source and
domain), long-format index arrays for static labels and arena rewards, and the skip counts
met while loading. It is built by :func:`load` (files and directories) or
:meth:`Dataset.from_frames` (pandas DataFrames). NumPy and pandas only.
"""

from __future__ import annotations

import warnings
from collections import Counter
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np
import pandas as pd

from bayes_dualeval.data.readers import ReadReport, parse_rows, read_paths
from bayes_dualeval.errors import DataWarning, InputError

REWARD_NORMS = ("source", "global")
KINDS = ("static", "arena")


def _frozen(a, dtype=None) -> np.ndarray:
    out = np.array(a, dtype=dtype)
    out.setflags(write=False)
    return out


@dataclass(frozen=True, eq=False)
class Dataset:
    """Static labels and arena rewards indexed on shared model and item axes.

    Items are ordered static first, then arena; ``item_kind[k]`` tells which. All arrays
    are read-only.

    Attributes
    ----------
    models : numpy.ndarray of str, shape (n_models,)
        Model labels, sorted.
    items : numpy.ndarray of str, shape (n_items,)
        Item ids, ``<source>::<dataset>_<sample_index>`` or ``<source>::<item_id>``.
    item_kind, item_source, item_domain : numpy.ndarray of str, shape (n_items,)
        Kind (``static`` or ``arena``), source tag and domain (``""`` when unknown).
    item_group : numpy.ndarray of int, shape (n_items,)
        Index into ``groups``: items of one kind and source share hierarchical priors.
    groups : numpy.ndarray of str, shape (n_groups,)
        Group names ``<kind>:<source>``.
    static_model, static_item : numpy.ndarray of int32, shape (n_static,)
        Model and item index of each static label.
    static_y : numpy.ndarray of int8, shape (n_static,)
        The labels (1 = correct).
    arena_model, arena_item : numpy.ndarray of int32, shape (n_arena,)
        Model and item index of each arena reward.
    arena_reward : numpy.ndarray of float64, shape (n_arena,)
        Raw rewards.
    arena_z : numpy.ndarray of float64, shape (n_arena,)
        Rewards z-normalised per source (``reward_norm="source"``) or over all arena rows
        (``reward_norm="global"``).
    reward_norm : str
        The normalisation used.
    skipped : Mapping[str, int]
        Rows skipped while loading, by reason.
    files : tuple of str
        Input files read (empty when built from frames).
    """

    models: np.ndarray
    items: np.ndarray
    item_kind: np.ndarray
    item_source: np.ndarray
    item_domain: np.ndarray
    item_group: np.ndarray
    groups: np.ndarray
    static_model: np.ndarray
    static_item: np.ndarray
    static_y: np.ndarray
    arena_model: np.ndarray
    arena_item: np.ndarray
    arena_reward: np.ndarray
    arena_z: np.ndarray
    reward_norm: str = "source"
    skipped: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))
    files: tuple = ()

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_tables(
        cls,
        static: pd.DataFrame | None,
        arena: pd.DataFrame | None,
        *,
        reward_norm: str = "source",
        report: ReadReport | None = None,
    ) -> Dataset:
        """Build a dataset from canonical tables.

        Parameters
        ----------
        static : pandas.DataFrame or None
            Columns ``model, item, source, domain, correct`` (ids already made unique).
        arena : pandas.DataFrame or None
            Columns ``model, item, source, domain, reward``.
        reward_norm : {"source", "global"}
            How rewards are z-normalised.
        report : ReadReport, optional
            Counts from reading, merged into ``skipped``.

        Returns
        -------
        Dataset

        Raises
        ------
        InputError
            If the data cannot be fitted (no rows, fewer than two models, a model left
            with no usable row).
        """
        if reward_norm not in REWARD_NORMS:
            raise InputError(f"reward_norm must be one of {REWARD_NORMS}, got {reward_norm!r}")
        report = report or ReadReport()
        skipped: Counter = Counter()
        for name, n in report.missing.items():
            skipped[f"missing {name}"] += n
        for name, n in report.invalid.items():
            skipped[f"invalid {name}"] += n
        static = _empty("correct") if static is None else static
        arena = _empty("reward") if arena is None else arena

        static, n_dup_s = _dedupe(static)
        arena, n_dup_a = _dedupe(arena)
        if n_dup_s + n_dup_a:
            skipped["duplicate (model, item)"] += n_dup_s + n_dup_a
        # Arena prompts answered by one model carry no comparison.
        counts = arena.groupby("item", sort=False)["model"].transform("size")
        lonely = counts < 2
        if lonely.any():
            skipped["arena prompt answered by one model"] += int(
                arena.loc[lonely, "item"].nunique()
            )
            arena = arena.loc[~lonely]
        clash = set(static["item"]) & set(arena["item"])
        if clash:
            raise InputError(
                f"item id {sorted(clash)[0]!r} is both a static question and an arena prompt"
            )

        # the DataWarning is only issued on success, so errors carry the skip counts
        why = ", ".join(f"{n} {name}" for name, n in skipped.items() if n)
        why = f" (skipped: {why})" if why else ""
        if len(static) == 0 and len(arena) == 0:
            raise InputError(f"no usable rows: nothing to fit{why}")
        models = np.array(sorted(set(static["model"]) | set(arena["model"])), dtype=object)
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
        for kind, table in (("static", static), ("arena", arena)):
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
        for name, n in list(skipped.items()):
            if n == 0:
                del skipped[name]
        ds = cls(
            models=_frozen(models.astype(str)),
            items=_frozen(items["item"].to_numpy(dtype=str)),
            item_kind=_frozen(items["kind"].to_numpy(dtype=str)),
            item_source=_frozen(items["source"].to_numpy(dtype=str)),
            item_domain=_frozen(items["domain"].fillna("").to_numpy(dtype=str)),
            item_group=_frozen(item_group, np.int32),
            groups=_frozen(groups.astype(str)),
            static_model=_frozen(model_index.get_indexer(static["model"]), np.int32),
            static_item=_frozen(item_index.get_indexer(static["item"]), np.int32),
            static_y=_frozen(static["correct"].to_numpy(), np.int8),
            arena_model=_frozen(model_index.get_indexer(arena["model"]), np.int32),
            arena_item=_frozen(item_index.get_indexer(arena["item"]), np.int32),
            arena_reward=_frozen(reward),
            arena_z=_frozen(z),
            reward_norm=reward_norm,
            skipped=MappingProxyType(dict(skipped)),
            files=tuple(report.files),
        )
        if ds.skipped:
            detail = ", ".join(f"{n} {name}" for name, n in ds.skipped.items())
            warnings.warn(f"skipped while loading: {detail}", DataWarning, stacklevel=3)
        return ds

    @classmethod
    def from_frames(
        cls,
        static: pd.DataFrame | None = None,
        arena: pd.DataFrame | None = None,
        *,
        source: str = "frame",
        reward_norm: str = "source",
        skip_invalid: bool = False,
    ) -> Dataset:
        """Build a dataset from DataFrames in the input formats.

        Parameters
        ----------
        static : pandas.DataFrame, optional
            Columns ``model_label, dataset, sample_index, correct``; optional ``source``
            (default ``source``) and ``domain``.
        arena : pandas.DataFrame, optional
            Columns ``model_label, item_id, reward``; optional ``source`` and ``domain``.
        source : str
            Source tag for rows without a ``source`` column.
        reward_norm : {"source", "global"}
            How rewards are z-normalised.
        skip_invalid : bool
            Count rows with invalid values as skipped instead of raising.

        Returns
        -------
        Dataset

        Examples
        --------
        >>> import pandas as pd
        >>> from bayes_dualeval import Dataset
        >>> static = pd.DataFrame({"model_label": ["m1", "m2"], "dataset": "qa",
        ...                        "sample_index": 0, "correct": [1, 0]})
        >>> Dataset.from_frames(static=static).items.tolist()
        ['frame::qa_0']
        """
        report = ReadReport()
        tables = {}
        for kind, frame in (("static", static), ("arena", arena)):
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
        return cls.from_tables(
            tables.get("static"), tables.get("arena"), reward_norm=reward_norm, report=report
        )

    def only(self, kind: str) -> Dataset:
        """The same data restricted to one kind (``static`` or ``arena``).

        Models left without rows are an error, as at loading time.
        """
        if kind not in KINDS:
            raise InputError(f"kind must be one of {KINDS}, got {kind!r}")
        report = ReadReport(files=list(self.files))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DataWarning)
            out = Dataset.from_tables(
                self.static_frame() if kind == "static" else None,
                self.arena_frame() if kind == "arena" else None,
                reward_norm=self.reward_norm,
                report=report,
            )
        object.__setattr__(out, "skipped", self.skipped)
        if len(out.models) != len(self.models):
            missing = sorted(set(self.models) - set(out.models))
            raise InputError(f"model {missing[0]!r} has no {kind} rows")
        return out

    # ------------------------------------------------------------------ sizes
    @property
    def n_models(self) -> int:
        """Number of models."""
        return len(self.models)

    @property
    def n_items(self) -> int:
        """Number of items (static questions and arena prompts)."""
        return len(self.items)

    @property
    def static_items(self) -> np.ndarray:
        """Indices of the static items."""
        return np.flatnonzero(self.item_kind == "static")

    @property
    def arena_items(self) -> np.ndarray:
        """Indices of the arena prompts."""
        return np.flatnonzero(self.item_kind == "arena")

    # ------------------------------------------------------------------ views
    def static_frame(self) -> pd.DataFrame:
        """Static labels as a long DataFrame (``model, item, source, domain, correct``)."""
        return pd.DataFrame(
            {
                "model": self.models[self.static_model],
                "item": self.items[self.static_item],
                "source": self.item_source[self.static_item],
                "domain": self.item_domain[self.static_item],
                "correct": self.static_y,
            }
        )

    def arena_frame(self) -> pd.DataFrame:
        """Arena rewards as a long DataFrame (``model, item, source, domain, reward, z``)."""
        return pd.DataFrame(
            {
                "model": self.models[self.arena_model],
                "item": self.items[self.arena_item],
                "source": self.item_source[self.arena_item],
                "domain": self.item_domain[self.arena_item],
                "reward": self.arena_reward,
                "z": self.arena_z,
            }
        )

    def item_frame(self) -> pd.DataFrame:
        """One row per item: ``item, kind, source, domain, group, n_models``."""
        n = np.bincount(self.static_item, minlength=self.n_items) + np.bincount(
            self.arena_item, minlength=self.n_items
        )
        return pd.DataFrame(
            {
                "item": self.items,
                "kind": self.item_kind,
                "source": self.item_source,
                "domain": self.item_domain,
                "group": self.groups[self.item_group],
                "n_models": n,
            }
        )

    def dense(self, kind: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Dense model x item view of one kind.

        Parameters
        ----------
        kind : {"static", "arena"}
            ``static`` gives the 0/1 labels, ``arena`` the normalised rewards z.

        Returns
        -------
        values : numpy.ndarray of float64, shape (n_models, n_kind_items)
            The values, NaN where missing.
        mask : numpy.ndarray of bool, shape (n_models, n_kind_items)
            True where observed.
        items : numpy.ndarray of int, shape (n_kind_items,)
            The item index of each column.
        """
        if kind not in KINDS:
            raise InputError(f"kind must be one of {KINDS}, got {kind!r}")
        cols = self.static_items if kind == "static" else self.arena_items
        col_of = np.full(self.n_items, -1)
        col_of[cols] = np.arange(len(cols))
        if kind == "static":
            rows, items, vals = self.static_model, self.static_item, self.static_y
        else:
            rows, items, vals = self.arena_model, self.arena_item, self.arena_z
        values = np.full((self.n_models, len(cols)), np.nan)
        values[rows, col_of[items]] = vals
        return values, ~np.isnan(values), cols

    def n_obs_per_model(self) -> pd.DataFrame:
        """Static labels and arena rewards per model (``n_static``, ``n_arena``)."""
        return pd.DataFrame(
            {
                "n_static": np.bincount(self.static_model, minlength=self.n_models),
                "n_arena": np.bincount(self.arena_model, minlength=self.n_models),
            },
            index=pd.Index(self.models, name="model"),
        )

    def summary_dict(self) -> dict:
        """Machine-readable summary (sizes, coverage, skip counts)."""
        per_source = {}
        for g, name in enumerate(self.groups):
            kind, source = name.split(":", 1)
            idx = np.flatnonzero(self.item_group == g)
            if kind == "static":
                cells = int(np.isin(self.static_item, idx).sum())
            else:
                cells = int(np.isin(self.arena_item, idx).sum())
            per_source[name] = {
                "kind": kind,
                "source": source,
                "items": len(idx),
                "cells": cells,
                "coverage": cells / (len(idx) * self.n_models) if len(idx) else 0.0,
            }
        return {
            "models": self.n_models,
            "items": self.n_items,
            "static_items": len(self.static_items),
            "arena_items": len(self.arena_items),
            "static_labels": len(self.static_y),
            "arena_rewards": len(self.arena_z),
            "domains": sorted(set(self.item_domain) - {""}),
            "reward_norm": self.reward_norm,
            "groups": per_source,
            "skipped": dict(self.skipped),
            "files": len(self.files),
        }

    def summary(self) -> str:
        """A short human-readable summary."""
        d = self.summary_dict()
        lines = [
            f"{d['models']} models, {d['items']} items "
            f"({d['static_items']} static questions, {d['arena_items']} arena prompts)",
            f"{d['static_labels']} static labels, {d['arena_rewards']} arena rewards"
            + (f" (z-normalised per {self.reward_norm})" if d["arena_rewards"] else ""),
        ]
        for g in d["groups"].values():
            lines.append(
                f"  {g['kind']:<6} source {g['source']!r}: {g['items']} items, "
                f"{g['cells']} cells, coverage {100 * g['coverage']:.0f}%"
            )
        if d["domains"]:
            lines.append("domains: " + ", ".join(d["domains"]))
        if d["skipped"]:
            lines.append("skipped: " + ", ".join(f"{n} {why}" for why, n in d["skipped"].items()))
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (
            f"<Dataset: {self.n_models} models, {len(self.static_items)} static items, "
            f"{len(self.arena_items)} arena prompts>"
        )


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


def _isna(v) -> bool:
    try:
        return bool(pd.isna(v))
    except (TypeError, ValueError):
        return False


def _empty(value: str) -> pd.DataFrame:
    return pd.DataFrame(
        {c: pd.Series(dtype=object) for c in ["model", "item", "source", "domain", value]}
    )


def _dedupe(table: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    keep = ~table.duplicated(["model", "item"], keep="last")
    return table.loc[keep].reset_index(drop=True), int((~keep).sum())


def load(paths, *, reward_norm: str = "source", skip_invalid: bool = False) -> Dataset:
    """Load static and arena files into a :class:`Dataset`.

    Parameters
    ----------
    paths : str, Path or iterable of them
        Files, or directories searched recursively for ``*.jsonl`` and ``*.csv``.
    reward_norm : {"source", "global"}
        ``source`` (default) z-normalises rewards within each source folder; ``global`` uses
        one z-score over all rewards, as DualEval does.
    skip_invalid : bool
        Count rows with invalid values as skipped instead of raising.

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
        When rows were skipped (missing fields, duplicates, single-model prompts).

    Examples
    --------
    >>> from bayes_dualeval import load
    >>> ds = load("data/")  # doctest: +SKIP
    >>> print(ds.summary())  # doctest: +SKIP
    """
    if isinstance(paths, (str, bytes)) or hasattr(paths, "__fspath__"):
        paths = [paths]
    paths = list(paths)
    if reward_norm not in REWARD_NORMS:
        raise InputError(f"reward_norm must be one of {REWARD_NORMS}, got {reward_norm!r}")
    static, arena, report = read_paths(paths, skip_invalid=skip_invalid)
    return Dataset.from_tables(static, arena, reward_norm=reward_norm, report=report)
