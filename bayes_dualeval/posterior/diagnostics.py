"""Convergence diagnostics: R-hat, effective sample sizes, divergences, E-BFMI, and what to do.

Thresholds follow Vehtari et al. (2021): R-hat at most 1.01 and bulk and tail ESS of at
least 400 on every parameter, and no divergent transitions. Every figure is taken over every
variable in the posterior: the sampled sites (raw, non-centred coordinates and the
hyperparameters included) and the deterministic ones users read (``theta``, ``a``, ``b``).
Energy diagnostics (E-BFMI, Betancourt 2016) and the share of transitions that hit the tree
depth cap say whether the sampler could explore at all.

The limits are held once, in :data:`~bayes_dualeval.posterior.convergence.LIMITS`;
:func:`convergence` returns a :class:`~bayes_dualeval.posterior.convergence.Convergence`,
whose ``to_dict`` is the ``convergence`` entry of ``diagnostics.json``.
"""

from __future__ import annotations

from dataclasses import dataclass

import arviz as az
import numpy as np
import pandas as pd

from bayes_dualeval.core.fields import setting
from bayes_dualeval.posterior.convergence import (
    LIMITS,
    Convergence,
    ConvergenceLimits,
    ParameterCheck,
)
from bayes_dualeval.posterior.idata import with_derived
from bayes_dualeval.posterior.rank_normal import diagnose_each

_COLUMNS = ("rhat", "ess_bulk", "ess_tail")


def per_parameter(idata) -> pd.DataFrame:
    """R-hat and bulk and tail ESS of every scalar in the posterior.

    Parameters
    ----------
    idata : arviz.InferenceData
        With a ``posterior`` group of shape ``(chain, draw, ...)``.

    Returns
    -------
    pandas.DataFrame
        Indexed by ``parameter`` (``name[label]`` for vector sites), columns ``rhat``
        (NaN with a single chain or constant draws), ``ess_bulk`` and ``ess_tail``: the
        estimators of ``arviz.rhat`` and ``arviz.ess``, computed for all scalars at once
        (:mod:`bayes_dualeval.posterior.rank_normal`); a variable whose draws were judged
        before reads those figures (:func:`~bayes_dualeval.posterior.rank_normal.diagnose_each`).
    """
    post = idata.posterior
    n_chain, n_draw = post.sizes["chain"], post.sizes["draw"]
    names, blocks = [], []
    for name, da in post.data_vars.items():
        values = np.asarray(da.transpose("chain", "draw", ...).values, dtype=float)
        names += _labels(name, da)
        blocks.append(values.reshape(n_chain, n_draw, -1).transpose(2, 0, 1))
    stats = {}
    if names:
        each = diagnose_each(blocks)
        stats = {k: np.concatenate([part[k] for part in each]) for k in _COLUMNS}
    return pd.DataFrame(
        {k: pd.Series(stats.get(k, []), index=names, dtype=float) for k in _COLUMNS}
    ).rename_axis("parameter")


def _labels(name: str, da, lead: int = 2) -> list[str]:
    """``name[label]`` for each element of a variable (``name`` for a scalar).

    ``lead`` is the number of leading dimensions that are not the variable's own
    (``chain`` and ``draw`` in a posterior, none in a table of statistics). A vector is
    labelled by its coordinate, an array by its indices.
    """
    shape = da.shape[lead:]
    if not shape:
        return [name]
    if len(shape) == 1:
        return [f"{name}[{x}]" for x in da[da.dims[lead]].values]
    return [f"{name}[{','.join(map(str, idx))}]" for idx in np.ndindex(shape)]


def _flatten(ds) -> dict:
    """Map ``name[label]`` to value for every element of an xarray Dataset of statistics."""
    out = {}
    for name, da in ds.data_vars.items():
        values = np.asarray(da.values, dtype=float).ravel()
        out.update(zip(_labels(name, da, lead=0), values.tolist(), strict=True))
    return out


def energy_stats(idata, max_tree_depth: int | None) -> dict:
    """E-BFMI per chain and the share of transitions that hit the tree depth cap.

    Returns
    -------
    dict
        ``ebfmi`` (list per chain, or None without energies), ``ebfmi_min`` and
        ``treedepth_hit_share`` (None without step counts or a known cap).
    """
    out = {"ebfmi": None, "ebfmi_min": None, "treedepth_hit_share": None}
    if "sample_stats" not in idata.groups():
        return out
    stats = idata.sample_stats
    if "energy" in stats and stats.sizes["draw"] > 2:
        ebfmi = np.atleast_1d(az.bfmi(idata))
        out["ebfmi"] = [round(float(x), 4) for x in ebfmi]
        out["ebfmi_min"] = round(float(np.min(ebfmi)), 4)
    if "n_steps" in stats and max_tree_depth:
        steps = np.asarray(stats["n_steps"].values)
        out["treedepth_hit_share"] = round(float(np.mean(steps >= 2**max_tree_depth - 1)), 4)
    return out


def divergence_site(idata) -> dict | None:
    """The parameter on which the divergent draws lie furthest from the posterior mean.

    For every scalar of the posterior, the mean of the draws flagged divergent minus the
    mean of all draws, in posterior standard deviations; the largest in absolute value
    says where the sampler met the curvature it could not follow (a heavy tail of that
    parameter, typically). A hint for the reader, not a test: with few divergences it is
    noisy.

    Returns
    -------
    dict or None
        ``parameter`` (``name[label]`` as in :func:`per_parameter`) and ``sd`` (signed
        shift), or None without divergent draws.
    """
    if "sample_stats" not in idata.groups() or "diverging" not in idata.sample_stats:
        return None
    div = idata.sample_stats["diverging"].astype(bool)
    if not bool(div.any()):
        return None
    post, dims = idata.posterior, ("chain", "draw")
    sd = post.std(dims)
    shift = _flatten((post.where(div).mean(dims) - post.mean(dims)) / sd.where(sd > 0))
    shift = {k: v for k, v in shift.items() if np.isfinite(v)}
    if not shift:
        return None
    name = max(shift, key=lambda k: abs(shift[k]))
    return {"parameter": name, "sd": round(shift[name], 2)}


def convergence(
    idata,
    sampler: str,
    max_tree_depth: int | None = None,
    *,
    table: pd.DataFrame | None = None,
    target_accept: float | None = None,
    limits: ConvergenceLimits = LIMITS,
) -> Convergence:
    """Summarise convergence of a run over every posterior variable.

    Parameters
    ----------
    idata : arviz.InferenceData
    sampler : {"nuts", "svi", "map"}
    max_tree_depth : int, optional
        The NUTS tree depth cap, for ``treedepth_hit_share``.
    table : pandas.DataFrame, optional
        :func:`per_parameter` of ``idata`` when the caller has it already (it is the
        expensive part).
    target_accept : float, optional
        The target acceptance the draws were made at, for the advice on divergences.
    limits : ConvergenceLimits, optional
        Default :data:`LIMITS`.

    Returns
    -------
    Convergence
        Its defaults (``converged`` None) unless ``sampler`` is ``"nuts"`` with at least 4
        draws per chain.
    """
    post = idata.posterior
    n_chain, n_draw = post.sizes["chain"], post.sizes["draw"]
    if sampler != "nuts" or n_draw < 4:
        return Convergence()
    table = per_parameter(idata) if table is None else table
    energy = energy_stats(idata, max_tree_depth)
    rhat = table["rhat"].dropna()  # constant draws (a site pinned exactly) give NaN
    bulk, tail = table["ess_bulk"].dropna(), table["ess_tail"].dropna()
    divergences = int(np.asarray(idata.sample_stats["diverging"]).sum())
    bad_rhat = rhat[rhat > limits.rhat_max].sort_values(ascending=False)
    low_ess = np.minimum(table["ess_bulk"], table["ess_tail"])
    bad_ess = low_ess[low_ess < limits.ess_min].sort_values()
    worst = list(dict.fromkeys([*bad_rhat.index[:5], *bad_ess.index[:5]]))
    site = divergence_site(idata) if divergences else None
    problems = _problems(
        n_chain * n_draw,
        n_chain,
        bad_rhat,
        bad_ess,
        divergences,
        energy["ebfmi_min"],
        site,
        target_accept,
        limits,
    )
    notes = []
    share = energy["treedepth_hit_share"]
    if share is not None and share > limits.treedepth_share_max:
        notes.append(
            f"{share:.0%} of transitions hit the tree depth cap: trajectories are cut "
            f"short, which costs effective draws; {setting('max_tree_depth')} raises the cap"
        )
    return Convergence(
        max_rhat=round(float(rhat.max()), 4) if len(rhat) else None,
        min_ess_bulk=round(float(bulk.min()), 1) if len(bulk) else None,
        min_ess_tail=round(float(tail.min()), 1) if len(tail) else None,
        divergences=divergences,
        ebfmi=None if energy["ebfmi"] is None else tuple(energy["ebfmi"]),
        ebfmi_min=energy["ebfmi_min"],
        treedepth_hit_share=share,
        n_parameters=len(table),
        worst=tuple(
            ParameterCheck(
                k,
                _round(table.at[k, "rhat"], 4),
                _round(table.at[k, "ess_bulk"], 1),
                _round(table.at[k, "ess_tail"], 1),
            )
            for k in worst
        ),
        converged=not problems,
        problems=tuple(problems),
        notes=tuple(notes),
        divergent_site=site,
    )


@dataclass(frozen=True)
class Verdict:
    """Whether draws pass the convergence check, and what a near miss still needs.

    True in a boolean context when they pass. ``more`` is the number of further draws per
    chain that continuing the chains should need to pass (:func:`draws_needed`), or None
    when the draws cannot tell (they pass, diverge, or fail for another reason).
    """

    converged: bool
    more: int | None = None

    def __bool__(self) -> bool:
        return self.converged


#: Continuing aims this far inside the limits (R-hat - 1 and ESS), so that the estimate's
#: own noise rarely leaves a third round to run.
NEED_MARGIN = 0.8
#: Beyond this R-hat the chains disagree too much for the rule of :func:`draws_needed`.
RHAT_FAR = 1.05


def draws_needed(
    n_draws: int,
    max_rhat: float | None,
    min_ess: float | None,
    limits: ConvergenceLimits = LIMITS,
) -> int | None:
    """Further draws per chain after which continued chains should pass R-hat and ESS.

    Both figures improve about in proportion to the draws once the chains have mixed:
    ESS grows with them, and the excess of R-hat over 1 shrinks as ``1 / n`` (its spread
    between chains is sampling noise). Continuing ``n`` draws to ``n f`` is estimated to
    bring the worst R-hat to ``1 + (R - 1) / f`` and the lowest ESS to ``f`` times
    itself; ``f`` is chosen to land :data:`NEED_MARGIN` inside both limits.

    Parameters
    ----------
    n_draws : int
        Draws per chain so far.
    max_rhat, min_ess : float or None
        Worst R-hat and lowest bulk or tail ESS over every site.
    limits : ConvergenceLimits, optional
        Default :data:`LIMITS`.

    Returns
    -------
    int or None
        None when R-hat is missing or above :data:`RHAT_FAR` (chains that disagree that
        much are not a matter of more draws of the same length), else at least 1.
    """
    if max_rhat is None or min_ess is None or not np.isfinite(max_rhat) or max_rhat > RHAT_FAR:
        return None
    factor = max(
        1.0,
        (max_rhat - 1.0) / (NEED_MARGIN * (limits.rhat_max - 1.0)),
        limits.ess_min / (NEED_MARGIN * max(min_ess, 1.0)),
    )
    return max(1, int(np.ceil(n_draws * (factor - 1.0))))


def draws_verdict(
    samples: dict,
    stats: dict,
    max_tree_depth: int | None = None,
    limits: ConvergenceLimits = LIMITS,
) -> Verdict:
    """Whether raw draws pass :func:`convergence` (the test behind drawing more).

    Parameters
    ----------
    samples : dict of str to numpy.ndarray
        Each site's draws, shape ``(chain, draw, ...)``; the derived quantities of the
        posterior (:func:`~bayes_dualeval.posterior.idata.with_derived`) are added, so the
        check covers the variables of the final verdict.
    stats : dict of str to numpy.ndarray
        Sampler statistics shaped ``(chain, draw)``, with ``diverging`` and ``energy``.
    max_tree_depth : int, optional
    limits : ConvergenceLimits, optional
        Default :data:`LIMITS`.

    Returns
    -------
    Verdict
        With ``more`` set when only R-hat or ESS failed (no divergences, E-BFMI fine).
    """
    idata = az.from_dict(posterior=with_derived(samples), sample_stats=stats)
    conv = convergence(idata, "nuts", max_tree_depth, limits=limits)
    if conv.converged:
        return Verdict(True)
    ebfmi = conv.ebfmi_min
    if conv.divergences or (ebfmi is not None and ebfmi < limits.ebfmi_min):
        return Verdict(False)
    n_draws = idata.posterior.sizes["draw"]
    return Verdict(False, draws_needed(n_draws, conv.max_rhat, conv.min_ess, limits))


def draws_converged(samples: dict, stats: dict, max_tree_depth: int | None = None) -> bool:
    """Whether raw draws pass :func:`convergence` (:func:`draws_verdict` as a bool)."""
    return bool(draws_verdict(samples, stats, max_tree_depth))


def _round(value, digits: int):
    return round(float(value), digits) if np.isfinite(value) else None


def _problems(
    n_total: int,
    n_chain: int,
    bad_rhat: pd.Series,
    bad_ess: pd.Series,
    divergences: int,
    ebfmi_min: float | None,
    site: dict | None,
    target_accept: float | None,
    limits: ConvergenceLimits,
) -> list[str]:
    """What failed and what to try, one sentence per failed limit."""
    problems = []
    if n_chain < 2:
        problems.append(f"only one chain: R-hat cannot be computed; run {setting('chains', 4)}")
    if len(bad_rhat):
        problems.append(
            f"{len(bad_rhat)} parameter(s) have R-hat > {limits.rhat_max} (worst "
            f"{bad_rhat.index[0]} at {bad_rhat.iloc[0]:.3f}): chains disagree; run longer "
            f"({setting('draws', 2000)}, {setting('warmup', 2000)}), or check the data for "
            "models or items with no signal"
        )
    if len(bad_ess):
        problems.append(
            f"{len(bad_ess)} parameter(s) have bulk or tail ESS < {limits.ess_min} (lowest "
            f"{bad_ess.index[0]} at {bad_ess.iloc[0]:.0f}): draw more ({setting('draws', 2000)})"
        )
    if divergences > limits.divergences_max:
        at = "" if target_accept is None else f" at target acceptance {target_accept:g}"
        near = f", near {site['parameter']} ({site['sd']:+.1f} posterior sd)" if site else ""
        if target_accept is None or target_accept < 0.99:
            advice = f"raise the target acceptance: {setting('target_accept', 0.99)}"
        else:
            advice = (
                "steps this small did not remove them, so the tail is in the posterior "
                f"itself; consider {setting('item_prior', 'independent')} or a simpler "
                f"{setting('irt', '1pl')}"
            )
        where = "there" if site else "where the sampler met curvature it could not follow"
        problems.append(
            f"{divergences} divergent transition{'s' if divergences > 1 else ''} in "
            f"{n_total:,} draws{at}{near}; estimates may be biased {where}; {advice}"
        )
    if ebfmi_min is not None and ebfmi_min < limits.ebfmi_min:
        problems.append(
            f"E-BFMI {ebfmi_min:.2f} < {limits.ebfmi_min} in at least one chain: the sampler "
            "cannot move through the posterior's energy levels (heavy tails or a funnel)"
        )
    return problems
