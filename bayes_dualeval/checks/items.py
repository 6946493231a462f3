"""The items table: each item's parameters, information, fit and flags."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from scipy import special

from bayes_dualeval.checks.budget import CHUNK_ELEMENTS
from bayes_dualeval.checks.fitted import FittedRun
from bayes_dualeval.checks.item_fit import item_fit_columns
from bayes_dualeval.checks.keys import MISKEY_Q, key_evidence
from bayes_dualeval.checks.options import CheckOptions
from bayes_dualeval.checks.passes import Checks
from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.data.distill import Pairs
from bayes_dualeval.model import links
from bayes_dualeval.posterior.summaries import interval

if TYPE_CHECKING:
    from bayes_dualeval.checks.ppc import PPC

#: Item-fit ppp below this or above one minus this flags an item ``misfit``.
MISFIT_PPP = 0.05
#: An item is ``low_discrimination`` when its upper interval bound of ``a`` (its point
#: estimate for a single draw) is below this: a one-sd ability gap then moves the success
#: log-odds by less than half a unit.
LOW_DISCRIMINATION = 0.5


def item_table(
    idata,
    dataset: Dataset,
    *,
    ci: float = 0.95,
    pairs: Pairs | None = None,
    options: CheckOptions | None = None,
    ppc: PPC | None = None,
) -> pd.DataFrame:
    """One row per item: its parameters, information, fit and flags.

    Parameters
    ----------
    idata : arviz.InferenceData
        The run's posterior.
    dataset : Dataset
        The data the run was fitted to.
    ci : float
        Level of the equal-tailed posterior intervals.
    pairs : Pairs, optional
        The run's arena pairs; recomputed with ``bb_ratio`` and ``tie_ratio`` if not given.
    options : CheckOptions, optional
        Seed, draw budget, distillation ratios and arena dispersion of the fit checks
        (default ``CheckOptions()``; the parameter summaries use every draw).
    ppc : PPC, optional
        A :func:`~bayes_dualeval.checks.posterior_predictive` result of the same ``idata``
        and ``dataset`` objects with equal ``options``: its item-fit checks are reused
        instead of computed again (ignored when any of these differ).

    Returns
    -------
    pandas.DataFrame
        Columns ``item, kind, source, domain, b_mean, b_lo, b_hi, a_mean, a_lo, a_hi``,
        then ``c_mean, c_lo, c_hi`` under 3PL and 4PL and ``d_mean, d_lo, d_hi`` under
        4PL (the guessing floor and upper asymptote; 0 and 1 on arena prompts), then
        ``observed, n_models, information, ppp``, the item fit columns (``infit_mean,
        infit_lo, infit_hi, outfit_mean, outfit_lo, outfit_hi, fit_ppp, fit_q``:
        :mod:`~bayes_dualeval.checks.item_fit`; NaN for arena prompts), ``key_correlation,
        key_evidence, key_q, identified, flags, ci``, items in dataset
        order. ``identified`` is False for arena prompts of a specification without the
        arena level term (their ``b`` and ``a`` are then set by the prior and the pairs'
        shape, not by the data; flag ``not_identified``). ``b`` is on the leaderboard's
        scale (abilities centred to mean zero in every draw). Under ``irt = "1pl"`` the
        ``a`` columns are exactly 1; in Bradley-Terry runs the parameter columns and
        ``information`` are NaN. With a single draw (MAP) the interval columns and ``ci``
        are NaN (also under 1pl). ``observed`` is the static accuracy or the prompt's mean
        normalised reward. ``information`` is the posterior mean of the item's Fisher
        information about ability at the median ability of each draw (``a^2 p (1 - p)``
        without asymptotes). ``ppp`` is the item-fit posterior predictive p-value (static:
        mid-p of the deviance across models; arena: Pearson discrepancy of the cells),
        small when the item is fitted worse than replicated data would be.
        ``key_correlation``: see :func:`key_correlation`; ``key_evidence`` (log Bayes factor
        of a reversed key) and ``key_q`` (its Bayesian q-value): see
        :func:`~bayes_dualeval.checks.keys.key_evidence`. ``flags`` joins
        ``no_signal``, ``low_discrimination``, ``misfit``, ``miskeyed`` (``key_q <
        MISKEY_Q``) and ``not_identified`` with
        ``;`` (see ``docs/outputs.md`` for the thresholds). Read the column as
        ``table["flags"]`` (``table.flags`` is a pandas attribute). ``attrs`` holds
        ``arena_dispersion`` and ``arena_item_overdispersion`` (NaN without arena data).

    Examples
    --------
    >>> items = item_table(result.idata, result.dataset, pairs=result.pairs)  # doctest: +SKIP
    >>> items[items["flags"].str.contains("misfit")]  # doctest: +SKIP
    """
    previous = ppc.checks if ppc is not None else None
    checks = Checks.reuse(previous, idata, dataset, pairs, options or CheckOptions())
    fit = checks.fit
    ds = fit.dataset
    parameters, info = parameter_columns(fit, ci)

    ppp = np.full(ds.n_items, np.nan)
    phi = rho = float("nan")
    static = checks.static()
    if static is not None:
        ppp = np.where(np.isnan(static.item_ppp), ppp, static.item_ppp)
    arena_pass = checks.arena()
    if arena_pass is not None:
        phi, rho = arena_pass.phi, arena_pass.rho
        arena = ds.item_kind == "arena"
        ppp[arena] = arena_pass.item_ppp[arena]

    n_static = np.bincount(ds.static_item, minlength=ds.n_items)
    n_arena = np.bincount(ds.arena_item, minlength=ds.n_items)
    with np.errstate(invalid="ignore", divide="ignore"):
        accuracy = np.bincount(ds.static_item, weights=ds.static_y, minlength=ds.n_items)
        answers = np.bincount(ds.static_item, weights=ds.static_n, minlength=ds.n_items)
        accuracy = accuracy / answers
        mean_z = np.bincount(ds.arena_item, weights=ds.arena_z, minlength=ds.n_items) / n_arena
    observed = np.where(ds.item_kind == "static", accuracy, mean_z)

    if fit.items["a"] is not None:
        a_bound = parameters["a_hi"] if fit.n_draws > 1 else parameters["a_mean"]
        low = a_bound < LOW_DISCRIMINATION
    else:
        low = np.zeros(ds.n_items, dtype=bool)
    misfit = (ppp < MISFIT_PPP) | (ppp > 1.0 - MISFIT_PPP)
    key_r, _ = key_correlation(fit)
    evidence, key_q = key_evidence(fit)
    miskeyed = key_q < MISKEY_Q
    identified = ~((ds.item_kind == "arena") & (not fit.model.config.arena_levels_identified))
    flags = {
        "no_signal": no_signal(fit),
        "low_discrimination": low,
        "misfit": misfit,
        "miskeyed": miskeyed,
        "not_identified": ~identified,
    }
    table = pd.DataFrame(
        {
            "item": ds.items,
            "kind": ds.item_kind,
            "source": ds.item_source,
            "domain": ds.item_domain,
            **parameters,
            "observed": observed,
            "n_models": n_static + n_arena,
            "information": info,
            "ppp": ppp,
            **item_fit_columns(checks, ci),
            "key_correlation": key_r,
            "key_evidence": evidence,
            "key_q": key_q,
            "identified": identified,
            "flags": join_flags(flags),
            "ci": ci if fit.n_draws > 1 else np.nan,
        }
    )
    table.attrs.update(arena_dispersion=phi, arena_item_overdispersion=rho)
    return table


def key_correlation(fit: FittedRun) -> tuple[np.ndarray, np.ndarray]:
    """Correlation of each static item's labels with the models' mean abilities.

    A correct key makes stronger models succeed more often (a positive correlation); a
    reversed key makes the strong fail and the weak pass. The fitted discrimination cannot
    say so (``a > 0`` by its prior), so the evidence is read from the labels directly:
    Pearson's ``r`` between ``y_iq`` and the posterior mean of ``theta_i`` over the
    models that answered ``q``, and its one-sided p-value for ``r < 0`` (Fisher's z,
    ``atanh(r) sqrt(n - 3)``). NaN for arena prompts and items without variation.
    """
    ds = fit.dataset
    q, y = ds.static_item, ds.static_share  # a cell's share of correct answers
    theta = fit.ability_mean(ds.static_model, ds.static_item)
    k = ds.n_items

    def total(w):
        return np.bincount(q, weights=w, minlength=k)

    n = total(np.ones_like(y))
    with np.errstate(invalid="ignore", divide="ignore"):
        my, mt = total(y) / n, total(theta) / n
        cov = total(y * theta) / n - my * mt
        var_y, var_t = total(y * y) / n - my**2, total(theta * theta) / n - mt**2
        r = cov / np.sqrt(var_y * var_t)
        r = np.where((var_y > 1e-12) & (var_t > 1e-12) & (n > 3), np.clip(r, -1, 1), np.nan)
        z = np.arctanh(np.clip(r, -0.999999, 0.999999)) * np.sqrt(n - 3.0)
    p = np.where(np.isnan(r), np.nan, special.ndtr(z))
    return r, p


def table_sites(fit: FittedRun) -> tuple[str, ...]:
    """Item parameters with columns in the table: ``b``, ``a`` and the link's others."""
    return tuple(dict.fromkeys(("b", "a", *links.get(fit.model.config.irt).item_sites)))


def information(eta, a, c=None, d=None):
    """Fisher information of one response about ability: ``p'(theta)^2 / (p (1 - p))``.

    ``a^2 p (1 - p)`` without asymptotes; with a floor ``c`` and ceiling ``d``,
    ``p' = a (d - c) s (1 - s)`` with ``s = sigmoid(eta)`` (zero where ``p (1 - p)`` is).
    """
    p = links.probability(eta, c, d)
    if c is None and d is None:
        return a**2 * p * (1.0 - p)
    s = links.sigmoid(eta)
    span = (1.0 if d is None else d) - (0.0 if c is None else c)
    slope = a * span * s * (1.0 - s)
    var = p * (1.0 - p)
    return np.divide(slope**2, var, out=np.zeros_like(var), where=var > 0)


def parameter_columns(fit: FittedRun, ci: float) -> tuple[dict, np.ndarray]:
    """Mean and interval columns of each item parameter, and each item's information.

    ``b`` is centred by the mean ability of its draw; ``a`` is 1 when the link has none.
    Columns are NaN where the run has no such parameter (Bradley-Terry).
    """
    n_items, n = fit.dataset.n_items, fit.n_draws
    sites = table_sites(fit)
    stats = ("mean", "lo", "hi")
    columns = {f"{s}_{stat}": np.full(n_items, np.nan) for s in sites for stat in stats}
    info = np.full(n_items, np.nan)
    if fit.items["b"] is None:
        return columns, info
    shift = fit.theta.mean(axis=1, dtype=np.float64).astype(np.float32)[:, None]
    mid = np.median(fit.theta, axis=1)[:, None]
    step = max(1, CHUNK_ELEMENTS // max(n, 1))
    for start in range(0, n_items, step):
        cols = slice(start, start + step)
        par = {s: None if v is None else v[:, cols] for s, v in fit.items.items()}
        if par["a"] is None:
            par["a"] = np.ones_like(par["b"])
        for s in sites:
            values = par[s] - shift if s == "b" else par[s]
            columns[f"{s}_mean"][cols] = values.mean(axis=0, dtype=np.float64)
            columns[f"{s}_lo"][cols], columns[f"{s}_hi"][cols] = interval(values, ci)
        eta = links.eta(mid, par["b"], par["a"])
        info[cols] = information(eta, par["a"], par["c"], par["d"]).mean(axis=0, dtype=np.float64)
    return columns, info


def join_flags(flags: dict) -> np.ndarray:
    """``;``-joined names of the flags set for each row (an empty string for none)."""
    names = list(flags)
    code = sum(np.asarray(v, dtype=np.int64) << k for k, v in enumerate(flags.values()))
    labels = np.array(
        [";".join(n for k, n in enumerate(names) if c >> k & 1) for c in range(1 << len(names))],
        dtype=object,
    )
    return labels[code]


def no_signal(fit: FittedRun) -> np.ndarray:
    """Items on which every model got the same outcome (or reward), or no decisive pair."""
    ds = fit.dataset
    q = ds.n_items
    lo = np.full(q, np.inf)
    hi = np.full(q, -np.inf)
    np.minimum.at(lo, ds.static_item, ds.static_share)
    np.maximum.at(hi, ds.static_item, ds.static_share)
    np.minimum.at(lo, ds.arena_item, ds.arena_z)
    np.maximum.at(hi, ds.arena_item, ds.arena_z)
    out = ~(hi - lo > 1e-12)
    if fit.decisive is not None:
        has_pairs = np.bincount(fit.decisive.item, minlength=q) > 0
        out |= (ds.item_kind == "arena") & ~has_pairs
    return out
