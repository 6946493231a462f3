"""From canonical long tables to the arrays of a :class:`~bayes_dualeval.data.dataset.Dataset`.

A canonical table has one row per answer (or per aggregated cell): columns ``model, item,
source, domain`` and ``correct`` (static labels) or ``reward`` (arena rewards), and
optionally ``n`` (the answers a row stands for, ``correct`` then counting the correct ones)
and ``sample`` (the id of a repeated answer). This module turns input frames into such
tables (:func:`frames_to_tables`), cleans them (duplicates, arena prompts answered by one
model), combines the answers of each (model, item, judge) cell
(:mod:`bayes_dualeval.data.cells`), checks that they can be fitted, indexes them on shared
model and item axes and z-normalises the rewards (:func:`dataset_fields`).

A cell is a (model, item, judge): rows scored by different judges are different cells.
Rows of one cell are repeated answers when their ``sample`` differs: a static cell counts
them all (``k`` correct of ``n``, a binomial count with the density of ``n`` Bernoulli
labels), an arena cell takes their mean reward and mean style covariates (with their
count). Rows equal in model, item, judge and sample are duplicates: the last one is kept
and the others counted as skipped, except aggregated rows (``n_correct``, ``n_samples``)
that disagree, which are an error.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd

from bayes_dualeval.core.errors import InputError
from bayes_dualeval.data.cells import arena_cells, row_key, static_cells
from bayes_dualeval.data.readers import ReadReport, plain_answers
from bayes_dualeval.data.rows import STYLE_PREFIX, parse_rows, table_columns

REWARD_NORMS = ("source", "judge", "global")
#: The name of the judge of rows that name none.
NO_JUDGE = ""
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

    # families first: a model given two families is an error whatever rows are dropped
    families = _families(static, arena)
    static, static_n, dropped_s = static_cells(static)
    arena, arena_n, dropped_a = arena_cells(arena)
    skipped.update(dropped_s)
    skipped.update(dropped_a)
    # Arena prompts answered by one model (for one judge) carry no comparison.
    unit = row_key(arena, ("item", "judge") if "judge" in arena else ("item",))
    counts = pd.Series(unit).map(pd.Series(unit).value_counts()).to_numpy()
    lonely = counts < 2
    keep_arena = ~lonely
    if lonely.any():
        alone = _single_model_judges(arena)  # a judge that scored one model compares nothing
        if alone:
            names = ", ".join(repr(j) for j in alone[:3]) + (" ..." if len(alone) > 3 else "")
            single = arena["judge"].isin(alone).to_numpy()
            skipped[f"rows of arena judges that scored one model ({names})"] += int(single.sum())
            lonely &= ~single
        if lonely.any():
            skipped["arena prompt answered by one model"] += len(np.unique(unit[lonely]))
        arena = arena.loc[keep_arena]
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
    judges, static_judge, arena_judge = _judges(static, arena)
    reward = arena["reward"].to_numpy(dtype=np.float64)
    unit = arena["source"].to_numpy(dtype=str)
    if reward_norm == "judge":  # each judge's rewards on a scale of their own, per source
        unit = np.char.add(np.char.add(unit, "\x1f"), judges[arena_judge].astype(str))
    z = normalise_rewards(reward, unit, "global" if reward_norm == "global" else "source")
    style = [c for c in arena.columns if str(c).startswith(STYLE_PREFIX)]
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
        "static_y": frozen(static["correct"].to_numpy(), np.int32),
        "static_n": frozen(static_n, np.int32),
        "arena_model": frozen(_positions(model_index, arena["model"]), np.int32),
        "arena_item": frozen(_positions(item_index, arena["item"]), np.int32),
        "arena_reward": frozen(reward),
        "arena_n": frozen(arena_n[keep_arena], np.int32),
        "arena_z": frozen(z),
        "judges": frozen(judges),
        "static_judge": frozen(static_judge, np.int32),
        "arena_judge": frozen(arena_judge, np.int32),
        "model_family": frozen(families.reindex(models.astype(str)).fillna("").to_numpy(), str),
        "style": tuple(c[len(STYLE_PREFIX) :] for c in style),
        "arena_style": frozen(arena[style].to_numpy(np.float64).reshape(len(arena), len(style))),
        "reward_norm": reward_norm,
        "skipped": {name: n for name, n in skipped.items() if n},
        "files": tuple(report.files),
    }


def _single_model_judges(arena: pd.DataFrame) -> list[str]:
    """The named judges of ``arena`` that scored a single model (sorted)."""
    if "judge" not in arena:
        return []
    models = arena.dropna(subset=["judge"]).groupby("judge", observed=True)["model"].nunique()
    return sorted(str(j) for j in models.index[models.to_numpy() == 1])


def _judges(static: pd.DataFrame, arena: pd.DataFrame):
    """The judges (names, sorted; :data:`NO_JUDGE` for rows without one) and each cell's."""
    columns = [t["judge"] for t in (static, arena) if "judge" in t]
    if not columns:
        return np.array([NO_JUDGE]), np.zeros(len(static), int), np.zeros(len(arena), int)

    def names(table):
        if "judge" not in table:
            return np.full(len(table), NO_JUDGE, dtype=object)
        return table["judge"].astype(object).where(table["judge"].notna(), NO_JUDGE).to_numpy()

    s_names, a_names = names(static), names(arena)
    judges = np.array(sorted(set(s_names.tolist()) | set(a_names.tolist())), dtype=str)
    index = pd.Index(judges)
    return judges, index.get_indexer(s_names.astype(str)), index.get_indexer(a_names.astype(str))


def _families(static: pd.DataFrame, arena: pd.DataFrame) -> pd.Series:
    """Each model's family from the rows' ``family`` field (models without one left out).

    Raises
    ------
    InputError
        When a model's rows name two families.
    """
    parts = [t[["model", "family"]] for t in (static, arena) if "family" in t]
    if not parts:
        return pd.Series(dtype=object)
    pairs = pd.concat(parts).dropna().astype(str).drop_duplicates()
    clash = pairs["model"].duplicated(keep=False)
    if clash.any():
        model = pairs.loc[clash, "model"].iloc[0]
        both = sorted(pairs.loc[pairs["model"] == model, "family"])
        raise InputError(f"model {model!r} is given two families: {both[0]!r} and {both[1]!r}")
    return pairs.set_index("model")["family"]


def frames_to_tables(
    static: pd.DataFrame | None,
    arena: pd.DataFrame | None,
    *,
    source: str,
    skip_invalid: bool,
    style=(),
) -> tuple[pd.DataFrame | None, pd.DataFrame | None, ReadReport]:
    """Canonical tables from DataFrames in the input formats, row by row as files are read.

    ``style`` names the arena rows' style covariates
    (:func:`~bayes_dualeval.data.rows.parse_rows`).

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
                style=style,
            )
            if got is not None and got != kind:
                raise InputError(f"the {kind} frame holds {got} rows")
            records.extend(recs)
        columns = table_columns(kind, style)
        tables[kind] = plain_answers(pd.DataFrame.from_records(records, columns=columns))
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
