r"""``dif.csv``: which static items function differently for a group of models.

One row per static item and group (:mod:`bayes_dualeval.model.dif`):

* ``shift_mean``, ``shift_lo``, ``shift_hi``: the group's shift of the item's log-odds
  against the mean of the other groups (with two groups, the gap between them; positive:
  the item is harder for this group at the same ability), its posterior mean and
  equal-tailed interval;
* ``p_shift``: the posterior probability that the shift exceeds :data:`MIN_SHIFT` logits
  in size, ``P(|shift| > 0.5)``;
* ``flagged``: the rule below.

A single draw (MAP) has no posterior probability: ``p_shift`` is NaN and nothing is
flagged.

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
    if len(draws) < 2:  # a point estimate (MAP) has no posterior probability to flag by
        p = np.full(p.shape, np.nan)
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
    if len(p) == 0 or np.isnan(p).any():
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


#: The ``design`` of ``contamination.csv``'s rows: the model x benchmark audit with the
#: block left out (:mod:`bayes_dualeval.checks.benchmark_audit`), or the DIF contrast of
#: models released after the benchmark against those before (:func:`release_contrast`).
LEFT_OUT, RELEASE_DIF = "left_out", "released_after_dif"
#: The DIF column whose groups make the release contrast.
RELEASE_COLUMN = "released_after"


def release_contrast(idata, dataset: Dataset) -> pd.DataFrame | None:
    """``contamination.csv`` rows of the before/after design, or None without it.

    With DIF by :data:`RELEASE_COLUMN`, one row per group and benchmark (``model`` is the
    group's label): ``excess`` the posterior mean of the group's mean log-odds *gain* over
    the benchmark's questions against the other groups (minus the mean shift: positive
    where the group does better than its ability predicts, as models that saw the
    questions would), ``p_value`` the posterior probability that the gain is at most 0,
    ``n`` the questions; ``observed`` and ``expected`` are NaN. ``q_value`` is filled by
    the caller over every row of its design.
    """
    from bayes_dualeval.core.item_ids import benchmark_of
    from bayes_dualeval.model.spec import DualEvalModel

    if dif.SITE not in idata.posterior:
        return None
    if DualEvalModel.from_idata(idata).config.dif != RELEASE_COLUMN:
        return None
    static = np.asarray(dataset.static_items)
    draws = dif.against_rest(draws_of(idata, dif.SITE)[:, static, :].astype(np.float64))
    groups = np.asarray(idata.posterior["dif_group"].values).astype(str)
    keys = pd.MultiIndex.from_arrays(
        [np.asarray(dataset.item_source)[static], benchmark_of(dataset.items)[static]]
    )
    block, blocks = pd.factorize(keys)
    rows = []
    for k in range(len(blocks)):
        gain = -draws[:, block == k, :].mean(axis=1)  # (D, G)
        for g, name in enumerate(groups):
            rows.append(
                {
                    "model": name,
                    "kind": "static",
                    "source": blocks[k][0],
                    "dataset": blocks[k][1],
                    "domain": "",
                    "n": int((block == k).sum()),
                    "observed": np.nan,
                    "expected": np.nan,
                    "expected_lo": np.nan,
                    "expected_hi": np.nan,
                    "excess": float(gain[:, g].mean()),
                    "p_value": float((gain[:, g] <= 0).mean()),
                }
            )
    return pd.DataFrame(rows)


def with_release_contrast(audit: pd.DataFrame, idata, dataset: Dataset) -> pd.DataFrame:
    """``contamination.csv``: the left-out audit's rows, and the release contrast's if any.

    A ``design`` column says which design each row comes from (the audit's own, one of
    :mod:`bayes_dualeval.checks.domain_grid`'s, else :data:`LEFT_OUT`;
    :data:`RELEASE_DIF`); ``q_value`` of the release rows is Benjamini-Yekutieli over them
    (their ``p_value`` is a posterior tail probability, not a p-value).
    """
    from scipy import stats

    if "design" not in audit:
        audit = audit.assign(design=LEFT_OUT)
    extra = release_contrast(idata, dataset)
    if extra is None or not len(extra):
        return audit
    extra["q_value"] = stats.false_discovery_control(extra["p_value"].to_numpy(), method="by")
    extra["design"] = RELEASE_DIF
    return pd.concat([audit, extra[audit.columns]], ignore_index=True)
