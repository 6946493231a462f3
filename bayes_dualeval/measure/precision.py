r"""How well an adaptive test measured its models: reliability and separation of the top.

The adaptive counterpart of a run's ``benchmarks.csv``
(:mod:`~bayes_dualeval.checks.saturation`). An adaptive test asks each model its own
items, so there is no one test information curve; what it measured is read from each
model's final posterior (mean :math:`m_i`, sd :math:`s_i`, on the leaderboard's scale):

* ``reliability``: the empirical marginal reliability
  :math:`\operatorname{var}(m) / (\operatorname{var}(m) + \overline{s^2})`, the share of
  the spread of the tested models' abilities that is not measurement error;
* ``info_at_top``: the mean posterior precision :math:`1 / s_i^2` of the top models (by
  :math:`m`; it includes the prior's precision, :math:`1 / \text{theta\_scale}^2`);
* ``top_separated``: how many adjacent pairs of the top models differ by more than
  :math:`z \sqrt{s_i^2 + s_j^2}` at level ``ci``, as in ``benchmarks.csv``;
* ``items``: the mean number of items asked.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import special

from bayes_dualeval.checks.saturation import TOP_MODELS

#: Columns of :func:`adaptive_benchmarks`.
COLUMNS = ("rule", "items", "models", "reliability", "info_at_top", "top_models",
           "top_separated", "verdict", "ci")  # fmt: skip


def adaptive_benchmarks(runs: dict, *, ci: float = 0.95) -> pd.DataFrame:
    """One row per selection rule of ``runs`` (name -> ``AdaptiveResult``): see the module."""
    z = special.ndtri(0.5 + ci / 2.0)
    rows = []
    for rule, result in runs.items():
        table = result.summary.sort_values("theta_mean", ascending=False, kind="stable")
        mean = table["theta_mean"].to_numpy(np.float64)
        sd = table["theta_sd"].to_numpy(np.float64)
        top = slice(0, min(TOP_MODELS, len(table)))
        error = float(np.mean(sd**2)) if len(sd) else np.nan
        spread = float(np.var(mean)) if len(mean) > 1 else np.nan
        reliability = spread / (spread + error) if len(mean) > 1 else np.nan
        gap = mean[top][:-1] - mean[top][1:]
        separated = int((gap > z * np.hypot(sd[top][:-1], sd[top][1:])).sum())
        n_top = len(mean[top])
        items = float(table["n_items"].mean()) if len(table) else 0.0
        verdict = (
            f"after {items:.1f} items a model on average, {reliability:.0%} of the tested "
            f"models' spread is ability; it separates {separated} of the top {n_top} "
            f"models' {max(n_top - 1, 0)} adjacent pairs"
            if len(mean) > 1
            else "one model tested: no spread to measure"
        )
        rows.append((rule, items, len(table), reliability,
                     float(np.mean(1.0 / sd[top] ** 2)) if n_top else np.nan, n_top,
                     separated, verdict, ci))  # fmt: skip
    return pd.DataFrame(rows, columns=list(COLUMNS))
