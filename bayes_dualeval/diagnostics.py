"""Convergence diagnostics: R-hat, effective sample sizes, divergences, and what to do.

Thresholds follow Vehtari et al. (2021): R-hat at most 1.01 and bulk ESS of at least 400
on every reported parameter, and no divergent transitions.
"""

from __future__ import annotations

import arviz as az
import numpy as np

RHAT_MAX = 1.01
ESS_MIN = 400
#: Parameters whose convergence is checked (raw, non-centred sites are 1:1 with these).
CHECKED = (
    "theta",
    "a",
    "b",
    "gamma",
    "sigma",
    "mu_b",
    "sigma_b",
    "mu_log_a",
    "sigma_log_a",
)


def _flatten(ds) -> dict:
    """Map ``name[label]`` to value for every element of an xarray Dataset of scalars."""
    out = {}
    for name, da in ds.data_vars.items():
        values = np.asarray(da.values)
        if values.ndim == 0:
            out[name] = float(values)
            continue
        dim = da.dims[0]
        labels = da[dim].values
        for label, v in zip(labels, values.ravel(), strict=True):
            out[f"{name}[{label}]"] = float(v)
    return out


def convergence(idata, sampler: str) -> dict:
    """Summarise convergence of a run.

    Parameters
    ----------
    idata : arviz.InferenceData
    sampler : {"nuts", "svi", "map"}

    Returns
    -------
    dict
        ``max_rhat``, ``min_ess_bulk``, ``min_ess_tail``, ``divergences``, ``worst`` (the
        parameters that fail, worst first), ``converged`` (bool, or None when the sampler
        gives no such diagnostics) and ``problems`` (sentences saying what failed and what
        to try).
    """
    post = idata.posterior
    names = [n for n in CHECKED if n in post.data_vars]
    out = {
        "max_rhat": None,
        "min_ess_bulk": None,
        "min_ess_tail": None,
        "divergences": None,
        "worst": [],
        "converged": None,
        "problems": [],
    }
    n_chain, n_draw = post.sizes["chain"], post.sizes["draw"]
    if sampler != "nuts" or n_draw < 4:
        return out
    sub = post[names]
    ess_bulk = _flatten(az.ess(sub, method="bulk"))
    ess_tail = _flatten(az.ess(sub, method="tail"))
    rhat = _flatten(az.rhat(sub)) if n_chain > 1 else {}
    # constant draws (e.g. a parameter pinned by its prior) give NaN: ignore those
    finite = {k: v for k, v in rhat.items() if np.isfinite(v)}
    divergences = int(np.asarray(idata.sample_stats["diverging"]).sum())
    out["divergences"] = divergences
    out["max_rhat"] = round(max(finite.values()), 4) if finite else None
    out["min_ess_bulk"] = round(min(v for v in ess_bulk.values() if np.isfinite(v)), 1)
    out["min_ess_tail"] = round(min(v for v in ess_tail.values() if np.isfinite(v)), 1)
    bad_rhat = sorted(((v, k) for k, v in finite.items() if v > RHAT_MAX), reverse=True)
    bad_ess = sorted((v, k) for k, v in ess_bulk.items() if np.isfinite(v) and v < ESS_MIN)
    worst = []
    for v, k in bad_rhat[:5]:
        worst.append({"parameter": k, "rhat": round(v, 4), "ess_bulk": round(ess_bulk[k], 1)})
    for v, k in bad_ess[:5]:
        if all(w["parameter"] != k for w in worst):
            worst.append(
                {"parameter": k, "rhat": round(rhat.get(k, np.nan), 4), "ess_bulk": round(v, 1)}
            )
    out["worst"] = worst
    problems = []
    if n_chain < 2:
        problems.append("only one chain: R-hat cannot be computed; run --chains 4")
    if bad_rhat:
        problems.append(
            f"{len(bad_rhat)} parameter(s) have R-hat > {RHAT_MAX} (worst "
            f"{bad_rhat[0][1]} at {bad_rhat[0][0]:.3f}): chains disagree; allow longer "
            "trajectories (--max-tree-depth 6) and run longer (--warmup/--draws 2000), "
            "or check the data for models or items with no signal"
        )
    if bad_ess:
        problems.append(
            f"{len(bad_ess)} parameter(s) have bulk ESS < {ESS_MIN} (lowest "
            f"{bad_ess[0][1]} at {bad_ess[0][0]:.0f}): draw more (--draws 2000) or allow "
            "longer trajectories (--max-tree-depth 6)"
        )
    if divergences:
        problems.append(
            f"{divergences} divergent transition(s): the sampler met curvature it could not "
            "follow; raise --target-accept to 0.95, and consider --item-prior or a simpler "
            "--irt 1pl"
        )
    out["problems"] = problems
    out["converged"] = not problems
    return out
