"""Which cells ``anomalies.csv`` keeps: every cell, or the most surprising ones.

Light on purpose (NumPy, pandas): the command line reads :data:`ANOMALY_TOP` and
:func:`anomaly_rows` to build and check its ``--anomalies`` option without importing the
checks.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayes_dualeval.core.errors import ConfigError

#: ``anomalies.csv`` keeps this many of the most surprising cells by default (and every
#: cell flagged by its q-value).
ANOMALY_TOP = 500
#: The ``--anomalies`` value that keeps every cell.
ALL = "all"


def anomaly_rows(value) -> int | str:
    """Check an ``--anomalies`` setting: :data:`ALL`, or a number of rows at least 0.

    Parameters
    ----------
    value : int or str
        ``"all"`` (any case), or a whole number (an ``int`` or its decimal text).

    Returns
    -------
    int or str
        :data:`ALL` or the number.

    Raises
    ------
    ConfigError
        For anything else (a negative number, a fraction, another word).

    Examples
    --------
    >>> anomaly_rows("ALL"), anomaly_rows("20"), anomaly_rows(0)
    ('all', 20, 0)
    """
    if isinstance(value, str):
        text = value.strip().lower()
        if text == ALL:
            return ALL
        if text.isdigit():
            return int(text)
    elif isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= 0:
        return int(value)
    raise ConfigError(
        f"anomalies must be {ALL!r} or a whole number of rows (0 or more), got {value!r}"
    )


def select_anomalies(cells: pd.DataFrame, keep, level: float) -> pd.DataFrame:
    """The rows of ``anomalies.csv``: every cell, or the top ``keep`` and those with q < level.

    Parameters
    ----------
    cells : pandas.DataFrame
        The cell table, most surprising first, with a ``q_value`` column
        (:func:`bayes_dualeval.checks.anomalies`).
    keep : int or str
        :data:`ALL`, or how many of the first rows to keep (see :func:`anomaly_rows`).
    level : float
        Rows with ``q_value`` below it are kept too (the FDR level of the flags).

    Returns
    -------
    pandas.DataFrame
        The kept rows in their order, with a fresh index.
    """
    keep = anomaly_rows(keep)
    if keep != ALL:
        chosen = (cells["q_value"].to_numpy(dtype=np.float64) < level) | (
            np.arange(len(cells)) < keep
        )
        cells = cells.loc[chosen]
    # the labels as plain text again (the checks keep them as categories of every label)
    labels = {
        c: cells[c].astype(object)
        for c in cells
        if isinstance(cells[c].dtype, pd.CategoricalDtype)
    }
    return cells.assign(**labels).reset_index(drop=True)
