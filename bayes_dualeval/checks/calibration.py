"""Calibration tables: binned predicted probabilities against observed frequencies."""

from __future__ import annotations

import numpy as np
import pandas as pd

#: Equal-width bins of predicted probability in the calibration tables.
CALIBRATION_BINS = 10


def calibration_table(
    predicted, observed, bins: int = CALIBRATION_BINS, weights=None
) -> pd.DataFrame:
    """Equal-width bins of predicted probability with mean prediction and observed mean.

    Parameters
    ----------
    predicted : array_like of float in [0, 1]
    observed : array_like of float in [0, 1]
        Outcomes (0/1 labels or soft targets).
    bins : int
        Number of bins on [0, 1]; the last bin includes 1.
    weights : array_like of float, optional
        Observations each outcome stands for (a cell's answers, ``observed`` then the
        share correct); None: one each.

    Returns
    -------
    pandas.DataFrame
        ``bin, lo, hi, n, mean_predicted, observed_frequency`` (NaN means in empty bins).
    """
    pred = np.asarray(predicted, dtype=np.float64)
    obs = np.asarray(observed, dtype=np.float64)
    w = np.ones(len(pred)) if weights is None else np.asarray(weights, dtype=np.float64)
    which = np.clip((pred * bins).astype(np.int64), 0, bins - 1)
    n = np.bincount(which, weights=w, minlength=bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_pred = np.bincount(which, weights=w * pred, minlength=bins) / n
        mean_obs = np.bincount(which, weights=w * obs, minlength=bins) / n
    n = n.astype(np.int64)
    edges = np.linspace(0.0, 1.0, bins + 1)
    return pd.DataFrame(
        {
            "bin": np.arange(bins),
            "lo": edges[:-1],
            "hi": edges[1:],
            "n": n,
            "mean_predicted": mean_pred,
            "observed_frequency": mean_obs,
        }
    )


def calibration_error(table: pd.DataFrame) -> float:
    """Expected calibration error: ``n``-weighted mean ``|mean_predicted - observed|``."""
    n = table["n"].to_numpy(dtype=np.float64)
    if n.sum() == 0:
        return float("nan")
    gap = np.abs(table["mean_predicted"] - table["observed_frequency"]).to_numpy()
    return float(np.sum(np.where(n > 0, n * np.nan_to_num(gap), 0.0)) / n.sum())
