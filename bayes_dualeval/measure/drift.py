"""Drift of common questions: their new ``b`` against the bank's, draw by draw.

A common question (held by the bank) calibrated afresh by
:func:`~bayes_dualeval.measure.calibrate.calibrate` has draws of ``b`` per bank draw;
:func:`shifts` subtracts the bank's ``b`` of the same draw, so the comparison holds the
bank's abilities fixed within each draw. :func:`drift_table` summarises the shifts
(``drift.csv``) with the multiplicity-honest flag of :func:`drift_p_values` and
Benjamini-Hochberg q-values, and :func:`link_check` the mean shift of the unflagged
questions (a check that the bank's scale holds for the new answers).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayes_dualeval.checks.fdr import bh_qvalues
from bayes_dualeval.measure.bank import Bank
from bayes_dualeval.measure.new_items import ItemResponses
from bayes_dualeval.posterior.summaries import interval

DRIFT_COLUMNS = [
    "item", "source", "n_models", "b_bank_mean", "b_new_mean", "shift_mean", "shift_lo",
    "shift_hi", "p_drift", "q_drift", "flagged",
]  # fmt: skip


def shifts(bank: Bank, resp: ItemResponses, b) -> np.ndarray:
    """``b_new - b_bank`` of every common question, per draw: (S, C)."""
    common = ~resp.new
    b_bank = bank.draws["b"][:, resp.bank_item[common]].astype(np.float64)  # (D, C)
    return (b[common] - b_bank.T[:, :, None]).reshape(int(common.sum()), -1).T


def drift_table(bank: Bank, resp: ItemResponses, b, ci, threshold, fdr) -> pd.DataFrame:
    """``drift.csv``: :data:`DRIFT_COLUMNS`, one row per common question, flagged first.

    Parameters
    ----------
    bank : Bank
    resp : ItemResponses
    b : numpy.ndarray, shape (J, D, R)
        Draws of every calibrated question's ``b`` (``resp``'s order).
    ci : float
        Interval level.
    threshold : float
        The drift threshold (logits).
    fdr : float
        False discovery level of ``flagged``.
    """
    common = ~resp.new
    if not common.any():
        return pd.DataFrame(columns=DRIFT_COLUMNS)
    moved = shifts(bank, resp, b)
    lo, hi = interval(moved, ci)
    q = bh_qvalues(drift_p_values(moved, threshold))
    table = pd.DataFrame(
        {
            "item": resp.items[common],
            "source": resp.source[common],
            "n_models": resp.n_models[common],
            "b_bank_mean": bank.draws["b"][:, resp.bank_item[common]].mean(axis=0),
            "b_new_mean": b[common].reshape(int(common.sum()), -1).mean(axis=1),
            "shift_mean": moved.mean(axis=0),
            "shift_lo": lo,
            "shift_hi": hi,
            "p_drift": (np.abs(moved) > threshold).mean(axis=0),
            "q_drift": q,
            "flagged": q <= fdr,
        }
    )
    order = table.sort_values(["flagged", "p_drift"], ascending=False, kind="stable").index
    return table.loc[order].reset_index(drop=True)


def drift_p_values(moved: np.ndarray, threshold: float) -> np.ndarray:
    """p-values of "moved by at most ``threshold``" from shift draws (S, C), one per column.

    The posterior tail beyond the threshold on the far side of the shift's mean,
    ``P(shift <= t)`` for a positive mean, from the normal with the draws' mean and sd
    (smooth where a few hundred draws would leave the tail empty); under a flat prior on
    the shift it is the p-value of the boundary ``|shift| = t``, so conservative for
    questions that did not move at all.
    """
    from scipy import stats

    mean, sd = moved.mean(axis=0), moved.std(axis=0, ddof=1)
    return stats.norm.sf((np.abs(mean) - threshold) / np.maximum(sd, 1e-12))


def link_check(bank: Bank, resp: ItemResponses, b, steady, ci) -> dict:
    """Mean shift of the unflagged common questions, with its interval (empty without)."""
    keep = np.isin(resp.items[~resp.new], np.asarray(steady, dtype=str))
    if not keep.any():
        return {}
    mean_shift = shifts(bank, resp, b)[:, keep].mean(axis=1)
    lo, hi = interval(mean_shift[:, None], ci)
    return {
        "common_shift_mean": float(mean_shift.mean()),
        "common_shift_lo": float(lo[0]),
        "common_shift_hi": float(hi[0]),
    }
