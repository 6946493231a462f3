"""What ``posterior.nc`` keeps of the draws: all of them, or an evenly thinned subset.

A run's tables, checks and report are computed in the fitting process from every draw.
The file that keeps the posterior for later commands (``report``, ``predict``, ``score``,
``compare``) is bounded: above :data:`MAX_STORED_VALUES` posterior values (draws x every
site's entries, item-level sites included: at a thousand models x twenty thousand items,
SVI's 1,000 draws are 80 million values, 320 MB) it keeps an evenly spaced subset of each
chain's draws, never fewer than :data:`MIN_STORED_DRAWS` over all chains. Draws are kept
whole (every site of a kept draw), so that what is computed from the file (predictions,
pairwise probabilities) still reads joint draws; the ``draw`` coordinate says which were
kept, and :data:`THINNED_ATTR` says how many there were.
"""

from __future__ import annotations

import json

from bayes_dualeval.core.thinning import evenly_spaced

#: Most posterior values (float32: 4 bytes each, 160 MB) ``posterior.nc`` keeps.
MAX_STORED_VALUES = 40_000_000
#: Fewest draws (all chains together) a thinned file keeps, whatever their size.
MIN_STORED_DRAWS = 200
#: Attribute of the stored ``posterior`` group: JSON of the thinning, absent when whole.
THINNED_ATTR = "draws_thinned"
#: Groups whose ``draw`` axis is the posterior's (thinned together).
DRAW_GROUPS = ("posterior", "sample_stats")


def stored_posterior(idata):
    """The InferenceData ``posterior.nc`` is written from, and how it was thinned.

    Parameters
    ----------
    idata : arviz.InferenceData
        The run's, with every draw (left unchanged).

    Returns
    -------
    arviz.InferenceData
        ``idata`` itself when its posterior holds at most :data:`MAX_STORED_VALUES`
        values; else a copy whose ``posterior`` and ``sample_stats`` keep evenly spaced
        draws of each chain (the ``log_likelihood`` group keeps its own budget's draws,
        :mod:`~bayes_dualeval.posterior.loglik`).
    dict or None
        ``draws_per_chain``, ``kept_per_chain``, ``values_per_draw`` and
        ``max_stored_values`` when thinned (also in the stored posterior's
        :data:`THINNED_ATTR`), else None.
    """
    post = idata.posterior
    chains, draws = post.sizes["chain"], post.sizes["draw"]
    per_draw = sum(var.size for var in post.data_vars.values()) // max(chains * draws, 1)
    if per_draw * chains * draws <= MAX_STORED_VALUES:
        return idata, None
    wanted = max(MAX_STORED_VALUES // max(per_draw, 1), MIN_STORED_DRAWS)
    per_chain = -(-wanted // chains)
    if per_chain >= draws:
        return idata, None
    keep = evenly_spaced(draws, per_chain)
    groups = [g for g in DRAW_GROUPS if g in idata.groups()]
    stored = idata.isel(draw=keep, groups=groups, inplace=False)
    info = {
        "draws_per_chain": int(draws),
        "kept_per_chain": len(keep),
        "values_per_draw": int(per_draw),
        "max_stored_values": MAX_STORED_VALUES,
    }
    stored.posterior.attrs[THINNED_ATTR] = json.dumps(info)
    return stored, info


def thinning_note(info: dict) -> str:
    """One sentence saying what ``posterior.nc`` keeps (``info`` from :func:`stored_posterior`)."""
    return (
        f"posterior.nc keeps {info['kept_per_chain']} evenly spaced of the "
        f"{info['draws_per_chain']} draws per chain ({info['values_per_draw']:,} values a "
        f"draw; at most {info['max_stored_values']:.0e} are stored); the tables and the "
        "report were computed from every draw"
    )
