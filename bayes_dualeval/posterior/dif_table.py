r"""``dif.csv``: which static items function differently for a group of models.

One row per static item and group (:mod:`bayes_dualeval.model.dif`):

* ``shift_mean``, ``shift_lo``, ``shift_hi``: the group's shift of the item's log-odds
  against the mean of the other groups (with two groups, the gap between them; positive:
  the item is harder for this group at the same ability), its posterior mean and
  equal-tailed interval;
* ``p_shift``: the posterior probability that the shift exceeds :data:`MIN_SHIFT` logits
  in size, ``P(|shift| > 0.5)``;
* ``flagged``: the rule below.

The flag controls the Bayesian false discovery rate (Newton et al. 2004; Müller,
Parmigiani and Rice 2006): over every row, flag those with ``p_shift >= c`` for the
lowest ``c`` such that the flagged rows' mean ``1 - p_shift`` (the posterior expected
share of flagged rows whose shift is below :data:`MIN_SHIFT`) is at most
:data:`FDR_LEVEL`. The threshold keeps rows of equal ``p_shift`` together (with two
groups an item's two rows are mirror images), and the expected share is a statement about
the whole flagged set, whatever the number of items tested. :data:`MIN_SHIFT` lies
between ETS's moderate and large DIF (Mantel-Haenszel log odds ratios of 0.43 and 0.64).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.model import dif
from bayes_dualeval.posterior.summaries import draws_of, interval

COLUMNS = ("item", "group", "shift_mean", "shift_lo", "shift_hi", "p_shift", "flagged")
#: The least shift that counts as DIF, in logits of the pass rate.
MIN_SHIFT = 0.5
#: The posterior expected share of false flags the flagged set may hold.
FDR_LEVEL = 0.10


def dif_table(idata, dataset: Dataset, ci: float) -> pd.DataFrame | None:
    """``dif.csv`` of a run (see the module), or None where the run has no DIF."""
    post = idata.posterior
    if dif.SITE not in post:
        return None
    static = np.asarray(dataset.static_items)
    draws = dif.against_rest(draws_of(idata, dif.SITE)[:, static, :].astype(np.float64))
    groups = np.asarray(post["dif_group"].values).astype(str)
    lo, hi = interval(draws, ci)
    p = (np.abs(draws) > MIN_SHIFT).mean(axis=0)
    q, g = len(static), len(groups)
    table = pd.DataFrame(
        {
            "item": np.repeat(np.asarray(dataset.items)[static], g),
            "group": np.tile(groups, q),
            "shift_mean": draws.mean(axis=0).ravel(),
            "shift_lo": lo.ravel(),
            "shift_hi": hi.ravel(),
            "p_shift": p.ravel(),
        }
    )
    table["flagged"] = bayes_fdr(table["p_shift"].to_numpy(), FDR_LEVEL)
    return table.loc[:, list(COLUMNS)]


def bayes_fdr(p: np.ndarray, level: float) -> np.ndarray:
    """Flags ``p >= c`` for the lowest ``c`` whose flagged mean ``1 - p`` is at most ``level``.

    ``p``: posterior probabilities of an effect. Returns a boolean array (none flagged when
    even the most probable row's ``1 - p`` exceeds ``level``).
    """
    p = np.asarray(p, np.float64)
    flags = np.zeros(len(p), bool)
    if len(p) == 0:
        return flags
    levels = np.unique(p)[::-1]  # candidate thresholds, highest first
    best = None
    for c in levels:
        chosen = p >= c
        if np.mean(1.0 - p[chosen]) <= level:
            best = c
        else:
            break
    if best is not None:
        flags = p >= best
    return flags


def flagged_items(table: pd.DataFrame) -> list[str]:
    """The items with a flagged row, in the table's order."""
    return list(dict.fromkeys(table.loc[table["flagged"], "item"]))
