"""The validated, immutable evaluation dataset that every model is fitted to.

A :class:`Dataset` holds the model and item labels (with each item's kind, source and
domain), long-format index arrays for static labels and arena rewards, and the skip counts
met while loading. It is built by :func:`load` (files and directories) or
:meth:`Dataset.from_frames` (pandas DataFrames), both through the canonical tables of
:mod:`bayes_dualeval.data.tables`. NumPy and pandas only.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np
import pandas as pd

from bayes_dualeval.core.errors import DataWarning, InputError
from bayes_dualeval.data.cells import skip_hint
from bayes_dualeval.data.readers import ReadReport
from bayes_dualeval.data.rows import STYLE_PREFIX
from bayes_dualeval.data.tables import (
    KINDS,
    REWARD_NORMS,
    dataset_fields,
    frames_to_tables,
    frozen,
)

__all__ = ["KINDS", "REWARD_NORMS", "Dataset"]


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
    static_y : numpy.ndarray of int32, shape (n_static,)
        Correct answers of each static cell: the label (1 = correct) where a model
        answered an item once.
    static_n : numpy.ndarray of int32, shape (n_static,)
        Answers of each static cell (repeated samples of one model on one item; 1 for a
        single answer). The cell's labels enter the model as ``static_y`` successes in
        ``static_n`` Bernoulli trials.
    arena_model, arena_item : numpy.ndarray of int32, shape (n_arena,)
        Model and item index of each arena reward.
    arena_reward : numpy.ndarray of float64, shape (n_arena,)
        Raw rewards (the mean of a cell's repeated answers).
    arena_n : numpy.ndarray of int32, shape (n_arena,)
        Rewards averaged into each arena cell (1 for a single answer).
    arena_z : numpy.ndarray of float64, shape (n_arena,)
        Rewards z-normalised per source (``reward_norm="source"``) or over all arena rows
        (``reward_norm="global"``).
    judges : numpy.ndarray of str, shape (n_judges,)
        Who scored the rows (reward models, LLM judges, graders), sorted; one judge named
        ``""`` where no row names one.
    static_judge, arena_judge : numpy.ndarray of int32
        The judge of each static and arena cell (index into ``judges``).
    model_family : numpy.ndarray of str, shape (n_models,)
        Each model's family (``""`` where unknown): the rows' ``family`` field or a
        families file (:meth:`with_families`).
    style : tuple of str
        The style covariates of the arena cells (``length``...), empty without any.
    arena_style : numpy.ndarray of float64, shape (n_arena, len(style))
        Their raw values per arena cell (the mean over a cell's repeated answers).
    reward_norm : str
        The normalisation used: per source (``source``, every judge of a source on one
        scale, so that judges' severities show), per source and judge (``judge``), or over
        all rewards (``global``).
    skipped : Mapping[str, int]
        Rows skipped while loading, by reason.
    files : tuple of str
        Input files read (empty when built from frames).
    model_meta : Mapping[str, numpy.ndarray]
        Further per-model columns of a families file (``open``, ``released_after``...):
        each column's label per model (str, shape (n_models,), ``""`` where the file gives
        none; :meth:`with_model_meta`). Empty by default.
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
    static_n: np.ndarray
    arena_model: np.ndarray
    arena_item: np.ndarray
    arena_reward: np.ndarray
    arena_n: np.ndarray
    arena_z: np.ndarray
    judges: np.ndarray
    static_judge: np.ndarray
    arena_judge: np.ndarray
    model_family: np.ndarray
    style: tuple
    arena_style: np.ndarray
    reward_norm: str = "source"
    skipped: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))
    files: tuple = ()
    model_meta: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))

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
        reward_norm : {"source", "judge", "global"}
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
        fields = dataset_fields(
            static, arena, reward_norm=reward_norm, report=report or ReadReport()
        )
        ds = cls(**{**fields, "skipped": MappingProxyType(fields["skipped"])})
        if ds.skipped:
            detail = ", ".join(f"{n} {name}" for name, n in ds.skipped.items())
            hint = skip_hint(ds.skipped)
            detail += f" ({hint})" if hint else ""
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
        style=(),
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
        reward_norm : {"source", "judge", "global"}
            How rewards are z-normalised.
        skip_invalid : bool
            Count rows with invalid values as skipped instead of raising.
        style : sequence of str
            Numeric columns of the arena frame to keep as style covariates.

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
        static, arena, report = frames_to_tables(
            static, arena, source=source, skip_invalid=skip_invalid, style=tuple(style)
        )
        return cls.from_tables(static, arena, reward_norm=reward_norm, report=report)

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
        out = dataclasses.replace(out, skipped=self.skipped)
        if len(out.models) != len(self.models):
            missing = sorted(set(self.models) - set(out.models))
            raise InputError(f"model {missing[0]!r} has no {kind} rows")
        meta = {  # the models' further columns, by model
            name: dict(zip(self.models, labels, strict=True))
            for name, labels in self.model_meta.items()
        }
        return out.with_model_meta(meta) if meta else out

    def with_items(self, extra: pd.DataFrame) -> Dataset:
        """The same data with more items, which have no responses (e.g. known by features).

        Parameters
        ----------
        extra : pandas.DataFrame
            Columns ``item, kind, source, domain``; ids must be new.

        Returns
        -------
        Dataset
            Items still ordered static first, then arena; cell indices remapped.

        Raises
        ------
        InputError
            If an id is already an item, or a kind is not one of :data:`KINDS`.
        """
        ids = extra["item"].to_numpy(dtype=str)
        clash = np.flatnonzero(np.isin(ids, self.items))
        if len(clash):
            raise InputError(f"item {ids[clash[0]]!r} is already an item of the data")
        kinds = extra["kind"].to_numpy(dtype=str)
        if not np.isin(kinds, KINDS).all():
            raise InputError(f"item kinds must be one of {KINDS}")
        items = np.concatenate([self.items, ids])
        kind = np.concatenate([self.item_kind, kinds])
        source = np.concatenate([self.item_source, extra["source"].to_numpy(dtype=str)])
        domain = np.concatenate([self.item_domain, extra["domain"].fillna("").to_numpy(dtype=str)])
        order = np.argsort(kind != "static", kind="stable")
        position = np.empty(len(order), np.int32)
        position[order] = np.arange(len(order), dtype=np.int32)
        groups, item_group = np.unique(
            np.char.add(np.char.add(kind[order], ":"), source[order]), return_inverse=True
        )

        return dataclasses.replace(
            self,
            items=frozen(items[order]),
            item_kind=frozen(kind[order]),
            item_source=frozen(source[order]),
            item_domain=frozen(domain[order]),
            item_group=frozen(item_group, np.int32),
            groups=frozen(groups.astype(str)),
            static_item=frozen(position[self.static_item], np.int32),
            arena_item=frozen(position[self.arena_item], np.int32),
        )

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
    def domains(self) -> np.ndarray:
        """The named item domains, sorted (items without one are not counted)."""
        return np.asarray(sorted(set(self.item_domain.tolist()) - {""}), dtype=str)

    @property
    def domain_index(self) -> np.ndarray:
        """Each item's index in :attr:`domains`; ``len(domains)`` where it has none (int32)."""
        domains = self.domains
        index = np.searchsorted(domains, self.item_domain)
        known = index < len(domains)
        known[known] = domains[index[known]] == self.item_domain[known]
        return np.where(known, index, len(domains)).astype(np.int32)

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
        """Static cells as a long DataFrame (``model, item, source, domain, correct, n``)."""
        return self._cells(
            self.static_model, self.static_item, self.static_judge, correct=self.static_y,
            n=self.static_n,
        )  # fmt: skip

    def arena_frame(self) -> pd.DataFrame:
        """Arena cells as a long DataFrame (``model, item, source, domain, reward, z, n``)."""
        style = {STYLE_PREFIX + c: self.arena_style[:, k] for k, c in enumerate(self.style)}
        return self._cells(
            self.arena_model, self.arena_item, self.arena_judge, reward=self.arena_reward,
            z=self.arena_z, n=self.arena_n, **style,
        )  # fmt: skip

    @property
    def static_share(self) -> np.ndarray:
        """The share of each static cell's answers that are correct (float64)."""
        return self.static_y / np.maximum(self.static_n, 1)

    @property
    def static_answers(self) -> int:
        """Static answers (labels) in all, repeated samples counted."""
        return int(self.static_n.sum())

    def _cells(self, model: np.ndarray, item: np.ndarray, judge, **values) -> pd.DataFrame:
        """Cells as a canonical table; ``judge`` and ``family`` where the data name them."""
        facets = {}
        if self.has_judges:
            facets["judge"] = self.judges[judge]
        if (self.model_family != "").any():
            facets["family"] = np.where(
                self.model_family[model] == "", None, self.model_family[model].astype(object)
            )
        return pd.DataFrame(
            {
                "model": self.models[model],
                "item": self.items[item],
                "source": self.item_source[item],
                "domain": self.item_domain[item],
                **facets,
                **values,
            }
        )

    @property
    def has_judges(self) -> bool:
        """True when rows name their judges (one or more)."""
        return bool(len(self.judges) > 1 or self.judges[0] != "")

    @property
    def n_judges(self) -> int:
        """Number of judges (1 when no row names one)."""
        return len(self.judges)

    def with_families(self, families: Mapping[str, str]) -> tuple[Dataset, list[str]]:
        """The same data with model families set from ``families`` (model to family).

        Families given here replace those of the rows. Returns the dataset and the models
        of ``families`` that the data do not hold (to warn about).
        """
        family = pd.Series(self.model_family, index=pd.Index(self.models))
        known = {m: f for m, f in families.items() if m in family.index}
        family.loc[list(known)] = list(known.values())
        unknown = sorted(set(families) - set(known))
        return dataclasses.replace(self, model_family=frozen(family.to_numpy(), str)), unknown

    def with_model_meta(self, columns: Mapping[str, Mapping[str, str]]) -> Dataset:
        """The same data with per-model columns (column to ``{model: label}``) added.

        Models a column does not name get ``""``; models it names that the data do not
        hold are ignored (:meth:`with_families` reports them).
        """
        meta = dict(self.model_meta)
        index = pd.Index(self.models)
        for name, labels in columns.items():
            value = pd.Series(labels, dtype=object).reindex(index).fillna("")
            meta[name] = frozen(value.to_numpy(), str)
        return dataclasses.replace(self, model_meta=MappingProxyType(meta))

    def summary_dict(self) -> dict:
        """Machine-readable summary (sizes, coverage, judges, skip counts).

        See :func:`bayes_dualeval.data.summary.summary_dict`.
        """
        from bayes_dualeval.data.summary import summary_dict

        return summary_dict(self)

    def summary(self) -> str:
        """A short human-readable summary (:func:`bayes_dualeval.data.summary.summary`)."""
        from bayes_dualeval.data.summary import summary

        return summary(self)

    def __repr__(self) -> str:
        return (
            f"<Dataset: {self.n_models} models, {len(self.static_items)} static items, "
            f"{len(self.arena_items)} arena prompts>"
        )
