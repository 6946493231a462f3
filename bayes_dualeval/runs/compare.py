"""Compare run folders by PSIS-LOO: the Python API behind ``bayes-dualeval compare``.

Each run's ``posterior.nc`` is read (:func:`bayes_dualeval.runs.load.load_run`) and its
stored pointwise log likelihood compared with
:func:`bayes_dualeval.posterior.loo.compare`; the sampler and convergence recorded in
``diagnostics.json`` add warnings (draws from an SVI guide are not posterior draws; an
unconverged NUTS run's elpd is not to be trusted).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from bayes_dualeval.core.errors import InputError


def sampler_notes(diagnostics: dict, n_draws: int | None = None) -> list[str]:
    """Warnings from a run's ``diagnostics.json`` about the draws behind its PSIS-LOO.

    Raises
    ------
    InputError
        For a point fit (``map``): it has no posterior draws.
    """
    from bayes_dualeval.posterior.convergence import LIMITS, Convergence

    sampler = diagnostics.get("sampler", {}).get("sampler")
    if sampler == "map":
        raise InputError("a point fit (map) has no posterior draws for PSIS-LOO")
    notes = []
    if sampler == "svi":
        notes.append("draws from the SVI guide, not the posterior (Pareto k judges the guide)")
    conv = Convergence.from_dict(diagnostics.get("convergence", {}))
    if conv.converged is False:
        shown = []
        if conv.max_rhat:
            shown.append(f"max R-hat {conv.max_rhat:.2f}")
        if conv.min_ess is not None and conv.min_ess < LIMITS.ess_min:
            shown.append(f"min ESS {conv.min_ess:.0f}")
        if (conv.divergences or 0) > LIMITS.divergences_max:
            shown.append(f"{conv.divergences} divergences")
        if conv.ebfmi_min is not None and conv.ebfmi_min < LIMITS.ebfmi_min:
            shown.append(f"E-BFMI {conv.ebfmi_min:.2f}")
        shown = ", ".join(shown) or "see diagnostics.json"
        notes.append(f"not converged ({shown}): its elpd is not to be trusted")
    if n_draws is not None:
        notes.append(f"log likelihood on {n_draws} thinned draws")
    return notes


def compare_runs(run_dirs: Sequence[str | Path]) -> pd.DataFrame:
    """Compare run folders fitted to the same data by PSIS-LOO.

    Parameters
    ----------
    run_dirs : sequence of str or Path
        Run folders (each with ``posterior.nc`` and ``diagnostics.json``); each row of the
        result is named by its folder as given.

    Returns
    -------
    pandas.DataFrame
        :data:`bayes_dualeval.posterior.loo.COLUMNS`, best first (see
        :func:`bayes_dualeval.posterior.loo.compare`).

    Raises
    ------
    InputError
        When a folder is not a readable run, is a point fit, has no pointwise log
        likelihood, or the runs were fitted to different data or store different units.

    Examples
    --------
    >>> from bayes_dualeval.runs.compare import compare_runs
    >>> compare_runs(["runs/rasch", "runs/2pl"])  # doctest: +SKIP
    """
    from bayes_dualeval.posterior.loo import compare
    from bayes_dualeval.runs.load import load_run

    names = [str(d) for d in run_dirs]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise InputError(f"{', '.join(twice)}: a run is given twice")
    posteriors, notes = {}, {}
    for name in names:
        idata, diagnostics = load_run(name)
        thinned = None
        if "log_likelihood" in idata.groups():
            ll = idata.log_likelihood
            if ll.sizes["draw"] < idata.posterior.sizes["draw"]:
                thinned = ll.sizes["chain"] * ll.sizes["draw"]
        try:
            notes[name] = sampler_notes(diagnostics, thinned)
        except InputError as exc:
            raise InputError(f"{name}: {exc}") from None
        posteriors[name] = idata
    return compare(posteriors, notes)
