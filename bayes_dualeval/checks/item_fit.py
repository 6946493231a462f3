"""The items table's fit columns: infit and outfit with intervals, their ppp and q-value.

The statistics come from one pass over the static cells
(:mod:`~bayes_dualeval.checks.residuals`, shared through
:meth:`~bayes_dualeval.checks.passes.Checks.residuals`). ``fit_q`` adjusts ``fit_ppp``
over the run's static questions by Benjamini-Yekutieli, which holds under any dependence
(the items' residuals share the models' abilities).
"""

from __future__ import annotations

import numpy as np

from bayes_dualeval.checks.fdr import by_qvalues
from bayes_dualeval.checks.passes import Checks
from bayes_dualeval.posterior.summaries import interval

#: The item fit columns, in table order.
COLUMNS = (
    "infit_mean", "infit_lo", "infit_hi", "outfit_mean", "outfit_lo", "outfit_hi",
    "fit_ppp", "fit_q",
)  # fmt: skip


def item_fit_columns(checks: Checks, ci: float) -> dict:
    """The columns :data:`COLUMNS` of every item (NaN for arena prompts and MAP intervals).

    Parameters
    ----------
    checks : Checks
    ci : float
        Level of the intervals.
    """
    n_items = checks.fit.dataset.n_items
    columns = {name: np.full(n_items, np.nan) for name in COLUMNS}
    res = checks.residuals()
    if res is None:
        return columns
    for name, values in (("infit", res.item_infit), ("outfit", res.item_outfit)):
        columns[f"{name}_mean"] = values.mean(axis=0)
        if len(values) > 1:
            lo, hi = interval(values, ci)
            columns[f"{name}_lo"], columns[f"{name}_hi"] = lo, hi
    columns["fit_ppp"] = res.item_ppp
    columns["fit_q"] = by_qvalues(res.item_ppp)
    return columns
