"""New models' responses read from evaluation files and aligned with a bank's items.

:func:`responses` reads new evaluation files with the data layer's readers into the
bank's item ids (:class:`~bayes_dualeval.measure.bank.Bank`), keeps what the bank's
specification fits, normalises arena rewards with the bank's normalisation, and where the
bank's arena has judges, families or style covariates reads them too
(:mod:`bayes_dualeval.measure.judged`).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from bayes_dualeval.core.errors import DataWarning, InputError
from bayes_dualeval.core.fields import setting
from bayes_dualeval.data.cells import arena_cells, static_cells
from bayes_dualeval.data.readers import read_paths
from bayes_dualeval.measure.bank import Bank, norm_unit
from bayes_dualeval.measure.judged import ResponseFacets, align, static_graders


@dataclass(frozen=True, eq=False)
class Responses:
    """New models' responses on bank items, as bank indices.

    Attributes
    ----------
    models : numpy.ndarray of str
        The new models, sorted.
    static_model, static_item : numpy.ndarray of int
        New-model index and bank item index of each static cell; ``static_y`` its correct
        answers and ``static_n`` its answers (repeated samples; 1 and the label for one).
    arena_model, arena_item : numpy.ndarray of int
        The same for each arena reward; ``arena_z`` the reward normalised with the bank's
        normalisation.
    n_skipped : int
        Rows on items the bank does not hold (counted and left out).
    facets : ResponseFacets or None
        The arena cells' judges, style covariates and the models' families, where the
        bank has facets (:mod:`bayes_dualeval.measure.judged`).
    static_grader : numpy.ndarray of int or None
        Each static cell's grader (an index into the bank's graders), where the bank's
        labels were graded by several judges; None otherwise.
    """

    models: np.ndarray
    static_model: np.ndarray
    static_item: np.ndarray
    static_y: np.ndarray
    static_n: np.ndarray
    arena_model: np.ndarray
    arena_item: np.ndarray
    arena_z: np.ndarray
    n_skipped: int
    facets: ResponseFacets | None = None
    static_grader: np.ndarray | None = None

    @property
    def static_share(self) -> np.ndarray:
        """Each static cell's share of correct answers (its label with one answer)."""
        return self.static_y / np.maximum(self.static_n, 1)

    @property
    def n_models(self) -> int:
        """Number of new models."""
        return len(self.models)


def responses(paths, bank: Bank, *, rescore: bool = False, items=None) -> Responses:
    """Read evaluation files of new models and align them with the bank's items.

    Item ids are built as for a fit (``<source>::...`` with the file's parent folder as
    source), so the new files must sit in folders named like the bank's sources.

    Parameters
    ----------
    paths : str, Path or list of them
        Files or folders, as :func:`bayes_dualeval.load` takes.
    bank : Bank
    rescore : bool
        Allow models that are already in the bank (scored again as new).
    items : iterable of str, optional
        Keep only responses on these bank items (a short form from
        :func:`~bayes_dualeval.measure.compress.compress`); the others are left out
        without a warning.

    Raises
    ------
    InputError
        When nothing can be read, no row is on a bank item, a model is already in the
        bank (without ``rescore``), or a static label's grader is not one of the bank's.

    Warns
    -----
    DataWarning
        When rows on items outside the bank were left out.
    """
    if isinstance(paths, (str, bytes)) or hasattr(paths, "__fspath__"):
        paths = [paths]
    static, arena, _ = read_paths(list(paths), style=tuple(bank.dataset.style))
    static, static_n, _ = static_cells(static)
    arena = arena_cells(arena)[0]
    static = static.assign(n=static_n)
    index = pd.Index(bank.dataset.items)
    kind = np.asarray(bank.dataset.item_kind, dtype=str)
    use_static, use_arena = bank.model.kinds(bank.dataset, strict=False)
    keep = None if items is None else set(map(str, items))
    parts, skipped = {}, 0
    for name, table, fitted in (("static", static, use_static), ("arena", arena, use_arena)):
        if keep is not None:
            table = table[table["item"].astype(str).isin(keep)]
        item = index.get_indexer(table["item"].to_numpy(dtype=str))
        ok = (item >= 0) & fitted
        ok &= kind[np.where(item >= 0, item, 0)] == name
        skipped += int((~ok).sum())
        parts[name] = (table.loc[ok].reset_index(drop=True), item[ok])
    models = sorted({str(m) for part in parts.values() for m in part[0]["model"]})
    if not models:
        raise InputError(
            f"no row of the data is on an item of bank {bank.run_dir} "
            f"({skipped} rows on other items): are the files in folders named like the "
            "bank's sources?"
        )
    known = sorted(str(m) for m in set(models) & set(bank.models))
    if known and not rescore:
        raise InputError(
            f"model {known[0]!r} is already in bank {bank.run_dir}"
            + (f" (and {len(known) - 1} more)" if len(known) > 1 else "")
            + f"; {setting('rescore', True)} scores it again"
        )
    if skipped:
        warnings.warn(
            f"{skipped} rows are on items the bank does not hold (or of a kind its "
            "specification does not fit) and were left out",
            DataWarning,
            stacklevel=2,
        )
    model_index = pd.Index(models)
    s_table, s_item = parts["static"]
    a_table, a_item = parts["arena"]
    reward = a_table["reward"].to_numpy(dtype=np.float64)
    source = np.asarray(bank.dataset.item_source)[a_item] if len(a_item) else np.zeros(0, str)
    facets = None
    if bank.facets is not None and len(a_item):
        facets = align(bank.facets, bank.dataset.style, a_table, models)
    graded = len(bank.graders) > 1
    grader = static_graders(bank.graders, s_table) if graded else None
    judge = bank.facets.judges[facets.judge] if facets is not None else _judges(bank, a_table)
    source = norm_unit(bank.dataset, source, judge)
    centre = np.array([bank.reward_centre.get(s, np.nan) for s in source])
    scale = np.array([bank.reward_scale.get(s, np.nan) for s in source])
    with np.errstate(invalid="ignore", divide="ignore"):
        z = np.where(scale > 0, (reward - centre) / np.where(scale > 0, scale, 1.0), 0.0)
    return Responses(
        models=np.asarray(models, dtype=str),
        static_model=model_index.get_indexer(s_table["model"]).astype(np.int64),
        static_item=s_item.astype(np.int64),
        static_y=s_table["correct"].to_numpy(dtype=np.float64),
        static_n=s_table["n"].to_numpy(dtype=np.float64),
        arena_model=model_index.get_indexer(a_table["model"]).astype(np.int64),
        arena_item=a_item.astype(np.int64),
        arena_z=z,
        n_skipped=skipped,
        facets=facets,
        static_grader=grader,
    )


def _judges(bank: Bank, table: pd.DataFrame) -> np.ndarray:
    """The bank's one judge for every new arena row (a bank without judge facets)."""
    return np.full(len(table), str(bank.dataset.judges[0]) if len(bank.dataset.judges) else "")
