"""Item features: numeric descriptions of items, read, checked and turned into a design.

A feature file (CSV, or Parquet when pyarrow is installed) has one row per item: an
``item`` column holding the ids as ``items.csv`` writes them (``bench::gsm8k_12``), optional
``kind`` (``static`` or ``arena``) and ``domain`` text columns, and numeric columns (text
embeddings computed elsewhere, lengths, metadata dummies). :func:`read_features` checks it;
:func:`design` matches it to a :class:`~bayes_dualeval.data.dataset.Dataset` and turns the
columns into the regressors of the item prior
(:func:`bayes_dualeval.model.priors.item_parameters`):

1. columns are standardised over the items that have features (constant columns dropped);
2. their principal components are kept up to :data:`SHARE` of the variance (at most
   :data:`MAX_COMPONENTS`, and at most a quarter of those items: more columns than items
   are reduced, and the run says so);
3. the components are whitened (unit variance over those items), so the prior puts the
   same weight on each and one scale sets the share of the item parameter they explain.

Items in the file but in no response file become items of the fit without responses
(their kind and source read from the id, or ``kind``): the model calibrates them from their
features alone. Response items missing from the file get the features' mean (zero
regressors). Ids whose source the data do not have are counted and left out. NumPy and
pandas only.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from bayes_dualeval.core.errors import DataWarning, InputError
from bayes_dualeval.core.item_ids import SEPARATOR
from bayes_dualeval.data.dataset import Dataset

#: Share of the standardised features' variance the kept components reach.
SHARE = 0.9
#: The most components kept.
MAX_COMPONENTS = 64
#: At most one component per this many items with features.
ITEMS_PER_COMPONENT = 4
#: Text columns a feature file may have besides the numeric ones.
TEXT_COLUMNS = ("item", "kind", "domain")


def read_features(path: str | Path) -> pd.DataFrame:
    """Read and check a feature file.

    Parameters
    ----------
    path : str or Path
        ``.csv`` or ``.parquet``.

    Returns
    -------
    pandas.DataFrame
        ``item`` (str), ``kind`` and ``domain`` when present (str, ``""`` where empty), then
        the numeric columns as float64, in the file's order.

    Raises
    ------
    InputError
        One line naming the file and, for a bad value, its column and row (1-based, header
        not counted): no such file, an unsupported type, no ``item`` column, a duplicate
        or empty id, a missing or non-numeric value, no numeric column.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such feature file")
    suffix = path.suffix.lower()
    try:
        if suffix == ".csv":
            frame = pd.read_csv(path, dtype=str, keep_default_na=False)
        elif suffix == ".parquet":
            frame = _read_parquet(path)
        else:
            raise InputError(f"{path}: unsupported feature file type (expected .csv or .parquet)")
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise InputError(f"{path}: cannot read the feature file ({exc})") from None
    return check_features(frame, str(path))


def _read_parquet(path: Path) -> pd.DataFrame:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise InputError(
            f"{path}: reading Parquet needs pyarrow (pip install pyarrow), or write the "
            "features as CSV"
        ) from None
    return pd.read_parquet(path)


def check_features(frame: pd.DataFrame, where: str = "features") -> pd.DataFrame:
    """Check a feature table (see :func:`read_features`) and return it cleaned."""
    frame = frame.rename(columns=lambda c: str(c).strip())
    if "item" not in frame.columns:
        raise InputError(f"{where}: no 'item' column (the item ids, as items.csv writes them)")
    dup = pd.Index(frame.columns)[pd.Index(frame.columns).duplicated()]
    if len(dup):
        raise InputError(f"{where}: column {dup[0]!r} appears twice")
    items = frame["item"].astype(str).str.strip()
    empty = np.flatnonzero((items == "") | frame["item"].isna().to_numpy())
    if len(empty):
        raise InputError(f"{where}: row {empty[0] + 1}: the item id is empty")
    repeated = np.flatnonzero(items.duplicated().to_numpy())
    if len(repeated):
        raise InputError(
            f"{where}: row {repeated[0] + 1}: item {str(items.iloc[repeated[0]])!r} appears twice"
        )
    out = {"item": items.to_numpy(dtype=str)}
    for name in ("kind", "domain"):
        if name in frame.columns:
            out[name] = frame[name].fillna("").astype(str).str.strip().to_numpy(dtype=str)
    if "kind" in out:
        bad = np.flatnonzero(~np.isin(out["kind"], ["", "static", "arena"]))
        if len(bad):
            raise InputError(
                f"{where}: column 'kind', row {bad[0] + 1}: {str(out['kind'][bad[0]])!r} is "
                "not 'static' or 'arena'"
            )
    numeric = [c for c in frame.columns if c not in TEXT_COLUMNS]
    if not numeric:
        raise InputError(f"{where}: no numeric feature column besides {', '.join(TEXT_COLUMNS)}")
    for name in numeric:
        out[name] = _numeric(frame[name], name, where)
    return pd.DataFrame(out)


def _numeric(column: pd.Series, name: str, where: str) -> np.ndarray:
    text = column.astype(object)
    blank = column.isna().to_numpy() | (column.astype(str).str.strip() == "").to_numpy()
    if blank.any():
        row = int(np.flatnonzero(blank)[0]) + 1
        raise InputError(f"{where}: column {name!r}, row {row}: missing value")
    values = pd.to_numeric(text, errors="coerce").to_numpy(dtype=np.float64)
    bad = ~np.isfinite(values)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise InputError(
            f"{where}: column {name!r}, row {row + 1}: {column.iloc[row]!r} is not a finite number"
        )
    return values


@dataclass(frozen=True)
class FeatureDesign:
    """The regressors of the item prior, by item id, and how they were made.

    Attributes
    ----------
    items : numpy.ndarray of str, shape (n,)
        Items with features (response items and items known only by their features).
    matrix : numpy.ndarray of float32, shape (n, k)
        Whitened principal-component scores of the standardised features.
    columns : tuple of str
        The feature columns used (constant ones dropped).
    mean, sd : numpy.ndarray, shape (len(columns),)
        The standardisation.
    rotation : numpy.ndarray, shape (len(columns), k)
        Loadings of the kept components; ``matrix = ((x - mean) / sd) @ rotation / root``.
    root : numpy.ndarray, shape (k,)
        Each component's standard deviation over ``items`` (the whitening).
    report : dict
        Counts and choices, as ``diagnostics.json`` records them (``features``).
    """

    items: np.ndarray
    matrix: np.ndarray
    columns: tuple
    mean: np.ndarray
    sd: np.ndarray
    rotation: np.ndarray
    root: np.ndarray
    report: dict = field(default_factory=dict)

    @property
    def n_components(self) -> int:
        """Number of regressors ``k``."""
        return self.matrix.shape[1]

    def transform(self, frame: pd.DataFrame) -> np.ndarray:
        """The regressors of feature rows (a checked table with :attr:`columns`), (n, k).

        What a fit with this design would give items of these features: a new item placed
        on the run's features.

        Raises
        ------
        InputError
            If a column of the design is missing from ``frame``.
        """
        missing = [c for c in self.columns if c not in frame.columns]
        if missing:
            raise InputError(f"the feature rows have no column {missing[0]!r}")
        x = frame[list(self.columns)].to_numpy(dtype=np.float64)
        return _regressors((x - self.mean) / self.sd, self.rotation, self.root)

    def aligned(self, items) -> np.ndarray:
        """Regressors for ``items`` (ids), shape (len(items), k): zeros where an item has none."""
        index = pd.Index(self.items).get_indexer(np.asarray(items, dtype=str))
        out = np.zeros((len(index), self.n_components), np.float32)
        out[index >= 0] = self.matrix[index[index >= 0]]
        return out


def _regressors(z: np.ndarray, rotation: np.ndarray, root: np.ndarray) -> np.ndarray:
    """Whitened component scores of standardised features ``z``, float32 (n, k)."""
    return (z @ rotation / root).astype(np.float32)


def new_items(frame: pd.DataFrame, dataset: Dataset) -> tuple[pd.DataFrame, int]:
    """The feature rows that name items without responses, and how many ids are unknown.

    An id not among ``dataset.items`` is a new item when its source (the part before
    ``::``) is a source of the data of one kind (or of the row's ``kind``); otherwise it is
    unknown.

    Returns
    -------
    new : pandas.DataFrame
        Columns ``item, kind, source, domain`` of the new items.
    unknown : int
    """
    known = np.isin(frame["item"].to_numpy(dtype=str), dataset.items)
    rest = frame.loc[~known]
    ids = rest["item"].astype(str)
    parts = ids.str.split(SEPARATOR, n=1)
    source = parts.str[0].where(parts.str.len() == 2, "")
    pairs = pd.DataFrame({"source": dataset.item_source, "kind": dataset.item_kind})
    pairs = pairs.drop_duplicates()
    single = pairs.groupby("source")["kind"].agg(lambda k: k.iloc[0] if len(k) == 1 else "")
    wanted = rest["kind"].to_numpy(dtype=str) if "kind" in rest else np.full(len(rest), "")
    # a row's kind: the one it names, if its source has that kind; else its source's only kind
    named = pd.MultiIndex.from_arrays([source, wanted]).isin(
        pd.MultiIndex.from_frame(pairs[["source", "kind"]])
    )
    implied = source.map(single).fillna("").to_numpy(dtype=str)
    kind = np.where(wanted != "", np.where(named, wanted, ""), implied)
    ok = kind != ""
    domain = rest["domain"] if "domain" in rest else pd.Series("", index=rest.index)
    new = pd.DataFrame(
        {
            "item": ids.to_numpy()[ok],
            "kind": kind[ok],
            "source": source.to_numpy()[ok],
            "domain": domain.to_numpy()[ok],
        }
    )
    return new, int((~ok).sum())


def design(
    frame: pd.DataFrame,
    dataset: Dataset,
    *,
    share: float = SHARE,
    max_components: int = MAX_COMPONENTS,
    where: str = "features",
) -> tuple[Dataset, FeatureDesign]:
    """Match a feature table to the data and build the regressors.

    Parameters
    ----------
    frame : pandas.DataFrame
        From :func:`read_features` (or :func:`check_features`).
    dataset : Dataset
        The data as fitted.
    share : float
        Share of the standardised variance the kept components reach.
    max_components : int
    where : str
        The file, for messages.

    Returns
    -------
    dataset : Dataset
        ``dataset`` with the items known only by their features added (no responses).
    design : FeatureDesign

    Raises
    ------
    InputError
        When no item of the file is an item of the data or of one of its sources, or
        no column varies.

    Warns
    -----
    DataWarning
        Unknown ids (counted, left out), response items without features, constant columns
        dropped, columns reduced because there are more of them than the items allow.
    """
    new, unknown = new_items(frame, dataset)
    notes = []
    if unknown:
        notes.append(
            f"{unknown} item id(s) of {where} name no item or source of the data and are "
            "left out (ids are '<source>::<name>' as items.csv writes them)"
        )
    if len(new):
        dataset = dataset.with_items(new)
    used = frame.loc[np.isin(frame["item"].to_numpy(dtype=str), dataset.items)]
    if len(used) < 2:
        raise InputError(f"{where}: fewer than two of its items are items of the data")
    without = int((~np.isin(dataset.items, used["item"].to_numpy(dtype=str))).sum())
    if without:
        notes.append(
            f"{without} item(s) of the data have no row in {where}: their prior is their "
            "group's, as without features"
        )
    numeric = [c for c in used.columns if c not in TEXT_COLUMNS]
    x = used[numeric].to_numpy(dtype=np.float64)
    sd = x.std(axis=0)
    constant = [c for c, s in zip(numeric, sd, strict=True) if not s > 1e-12 * (1 + abs(x).max())]
    if constant:
        more = f" and {len(constant) - 5} more" if len(constant) > 5 else ""
        shown = ", ".join(constant[:5]) + more
        notes.append(f"constant column(s) dropped: {shown}")
    keep = [c not in constant for c in numeric]
    columns = tuple(c for c, k in zip(numeric, keep, strict=True) if k)
    if not columns:
        raise InputError(f"{where}: every feature column is constant over the items of the data")
    x, sd = x[:, keep], sd[keep]
    mean = x.mean(axis=0)
    z = (x - mean) / sd
    n, p = z.shape
    _, singular, vt = np.linalg.svd(z, full_matrices=False)
    var = singular**2 / n
    rank = int((var > 1e-10 * var[0]).sum())
    cumulative = np.cumsum(var) / var.sum()
    wanted = int(np.searchsorted(cumulative, share - 1e-12) + 1)
    cap = max(1, min(max_components, n // ITEMS_PER_COMPONENT, rank))
    k = min(wanted, cap)
    if k < wanted:
        notes.append(
            f"{p} feature column(s) over {n} items: kept {k} principal components "
            f"({100 * cumulative[k - 1]:.0f}% of the variance; at most {max_components}, "
            f"and one per {ITEMS_PER_COMPONENT} items)"
        )
    rotation = vt[:k].T
    root = np.sqrt(var[:k])
    for note in notes:
        warnings.warn(note, DataWarning, stacklevel=2)
    report = {
        "file": where,
        "columns": len(columns),
        "column_names": list(columns[:50]),
        "dropped_constant": constant,
        "components": k,
        "variance_share": round(float(cumulative[k - 1]), 4),
        "items_with_features": n,
        "items_without_responses": len(new),
        "response_items_without_features": without,
        "unknown_ids": unknown,
        "notes": notes,
    }
    out = FeatureDesign(
        items=used["item"].to_numpy(dtype=str),
        matrix=_regressors(z, rotation, root),
        columns=columns,
        mean=mean,
        sd=sd,
        rotation=rotation,
        root=root,
        report=report,
    )
    return dataset, out


def describe(report: dict) -> str:
    """One line on the item features a fit used (``diagnostics.json`` -> ``features``)."""
    line = (
        f"{report['columns']} column(s), {report['components']} principal component(s) kept "
        f"({100 * report['variance_share']:.0f}% of their variance), "
        f"{report['items_with_features']} items"
    )
    if report["items_without_responses"]:
        line += f", {report['items_without_responses']} of them calibrated from features alone"
    return line
