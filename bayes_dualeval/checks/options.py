"""The options every posterior predictive check of a run shares."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CheckOptions:
    """How the checks of a run draw and replicate (one value for every table).

    :func:`~bayes_dualeval.checks.posterior_predictive`,
    :func:`~bayes_dualeval.checks.anomalies` and :func:`~bayes_dualeval.checks.item_table`
    take one, and checks computed with equal options are shared between them.

    Parameters
    ----------
    seed : int
        Seed of the generators that pick the draws used and replicate the data.
    max_draws : int
        Largest number of posterior draws used (fewer when the data are large: at most
        :data:`~bayes_dualeval.checks.budget.CHECK_ELEMENTS` cell or pair evaluations per
        kind of data); at least :data:`~bayes_dualeval.checks.budget.MIN_REPLICATES`
        replicated data sets are drawn (several per draw for short runs; for MAP it is a
        plug-in check at the point estimate).
    bb_ratio, tie_ratio : float, optional
        Distillation quantiles when the arena pairs are recomputed (default: those of the
        run's recorded specification).
    dispersion : float, optional
        Dispersion ``phi`` of replicated arena wins relative to hard win/loss outcomes;
        estimated from the arena cells when not given (1 = binomial).
    """

    seed: int = 0
    max_draws: int = 1000
    bb_ratio: float | None = None
    tie_ratio: float | None = None
    dispersion: float | None = None
