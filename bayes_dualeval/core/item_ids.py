"""Item ids, built and parsed in one place.

Static questions are ``<source>::<dataset>_<index>``, arena prompts ``<source>::<item_id>``.
The readers build them, the simulator's truth and the validation studies build them again
to match, and the model x benchmark audit reads the benchmark back out of them: all through
this module, so the format is written once.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: Between an item's source (its file's parent folder) and its name.
SEPARATOR = "::"


def static_id(source: str, dataset: str, index) -> str:
    """The id of static question ``index`` of benchmark ``dataset`` in ``source``."""
    return f"{source}{SEPARATOR}{dataset}_{index}"


def arena_id(source: str, item: str) -> str:
    """The id of arena prompt ``item`` in ``source``."""
    return f"{source}{SEPARATOR}{item}"


def static_ids(source, dataset, index) -> np.ndarray:
    """:func:`static_id` of many questions at once (each argument a scalar or array_like)."""
    parts = [
        pd.Series(np.ravel(x)).astype(str)
        for x in np.broadcast_arrays(*(np.asarray(v) for v in (source, dataset, index)))
    ]
    return (parts[0] + SEPARATOR + parts[1] + "_" + parts[2]).to_numpy(dtype=str)


def benchmark_of(items) -> np.ndarray:
    """The benchmark (dataset) name of static item ids ``<source>::<dataset>_<index>``."""
    names = pd.Series(np.asarray(items), dtype=str).str.split(SEPARATOR, n=1).str[-1]
    return names.str.rsplit("_", n=1).str[0].to_numpy()
