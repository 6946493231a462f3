"""PSIS-LOO model comparison of fitted posteriors (ArviZ ``az.loo`` and ``az.compare``).

What is left out is one unit of the data, as stored in the ``log_likelihood`` group
(:func:`bayes_dualeval.posterior.loglik.loglik_unit`): **one static label**, or **one arena
prompt with its set of pairs** (its rewards under the ``reward`` likelihood, and its mean
reward when the level term is in the model). A run with both kinds gets one elpd: the
static labels and the arena prompts are concatenated into one pointwise vector, so its
standard error and the differences between runs are over both. Both-bad
pseudo-observations and the likelihood powers are not part of any value.

Two posteriors are compared only when they were fitted to the same data
(:func:`data_fingerprint`: the model and item labels, the static labels and the arena
rewards, in their stored order) and their values have the same unit (the same arena
likelihood, pair weights, distillation quantiles and level term); anything else raises
:class:`~bayes_dualeval.core.errors.InputError`. Likelihood powers other than one (a tempered
posterior) and both-bad anchoring are allowed, with a warning in the table: PSIS-LOO's
importance weights assume the untempered posterior.

Ranking and choosing differ: rank 1 has the highest ``elpd_loo``, while the ``preferred``
run is the simplest (smallest ``p_loo``) of those whose ``elpd_diff`` is within noise of
rank 1 (:func:`preferred`), so that nested models are not chosen by chance.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Mapping

import numpy as np
import pandas as pd

from bayes_dualeval.core.errors import InputError
from bayes_dualeval.core.fields import setting
from bayes_dualeval.posterior.idata import cell_labels
from bayes_dualeval.posterior.loglik import LOGLIK_OMITTED_ATTR, LOGLIK_UNIT_ATTR

#: Columns of :func:`compare` (and of ``bayes-dualeval compare --out``).
COLUMNS = ("run", "rank", "elpd_loo", "se", "elpd_diff", "dse", "dse_crossed", "p_loo", "n_bad_k",
           "preferred", "warning")  # fmt: skip
#: A run is clearly worse than rank 1 when its ``elpd_diff`` exceeds both this ...
CLEAR_DIFF = 4.0
#: ... and this many standard errors of the difference (``dse``: the choice is among
#: specifications for these models and items; ``dse_crossed`` is reported beside it).
CLEAR_DSE = 2.0
#: What a reader of ``dse`` must know (``attrs["dse_note"]`` of the table; ``compare`` prints it).
DSE_NOTE = (
    "dse treats the left-out units as independent, but they form a crossed models x items "
    "design (the units of one model share its ability, those of one item its parameters); "
    "dse_crossed sums the differences by model and by item (two-way clustered, never below "
    "dse): a difference within 2 dse_crossed may not hold for other models and items"
)
#: Pareto k above which a left-out unit's PSIS estimate is unreliable (``n_bad_k``).
BAD_K = 0.7
#: Fewest draws a posterior needs for PSIS-LOO (a point fit has one).
MIN_DRAWS = 20
#: Observed-data variables (with their cell coordinates) behind the fingerprint.
_OBSERVED = ("static_y", "static_n", "static_model", "static_item", "arena_z", "arena_reward",
             "arena_n", "arena_model", "arena_item")  # fmt: skip


def _digest(values) -> str:
    arr = np.asarray(values)
    h = hashlib.sha256(f"{arr.dtype.kind}{arr.shape}".encode())
    if arr.dtype.kind in "OUS":
        h.update("\x1f".join(map(str, arr.ravel())).encode())
    else:
        h.update(np.ascontiguousarray(arr).tobytes())
    return h.hexdigest()[:16]


def data_fingerprint(idata) -> dict:
    """Hashes of the data a posterior was fitted to, one per component.

    Components: ``models`` (the posterior's model labels, in order), ``items`` (item labels
    and kinds), and each observed-data variable and cell coordinate (``static_y``,
    ``static_n`` and ``arena_n`` where answers repeat, ``arena_z``, ``arena_reward`` and
    the model and item label of every cell). Two runs
    fitted to the same files with the same normalisation and kinds have equal fingerprints.

    Returns
    -------
    dict of str to str
    """
    groups = set(idata.groups())
    if "observed_data" not in groups:
        raise InputError("the posterior has no observed_data group: its data are unknown")
    out = {"models": _digest(idata.posterior["model"].values)}
    if "constant_data" in groups:
        const = idata.constant_data
        out["items"] = _digest([const["item"].values, const["item_kind"].values])
    obs = idata.observed_data
    for name in _OBSERVED:
        if name in obs.coords:  # a cell's model or item: its text, however it was stored
            out[name] = _digest(cell_labels(idata, name))
        elif name in obs.variables:
            out[name] = _digest(obs[name].values)
    return out


def loglik_unit(idata) -> dict:
    """The recorded unit of each pointwise log-likelihood variable (``{}`` when absent)."""
    if "log_likelihood" not in idata.groups():
        return {}
    text = idata.log_likelihood.attrs.get(LOGLIK_UNIT_ATTR)
    return json.loads(text) if text else {}


def pointwise(idata):
    """The run's pointwise log likelihood as one array, shape (chain, draw, units).

    Static labels first, then arena prompts (as the ``log_likelihood`` group stores them).

    Returns
    -------
    xarray.DataArray
        Dim ``unit`` with coordinates ``kind`` (``static`` or ``arena``) and ``label``.

    Raises
    ------
    InputError
        When the group is missing (with the reason the fit recorded), does not record its
        unit (a run written before the data's log likelihood was stored), or has too few
        draws.
    """
    import xarray as xr

    if "log_likelihood" not in idata.groups():
        why = idata.posterior.attrs.get(LOGLIK_OMITTED_ATTR)
        raise InputError(
            "no pointwise log likelihood"
            + (f" (left out at fit time: {why})" if why else " (no log_likelihood group)")
        )
    unit = loglik_unit(idata)
    if not unit:
        raise InputError(
            "the log_likelihood group does not record its unit (written before it held "
            "the data's log likelihood only): fit it again"
        )
    group = idata.log_likelihood
    parts = []
    for kind, dim in (("static", "static_cell"), ("arena", "prompt")):
        if kind not in unit:
            continue
        var = group[kind]
        n = var.sizes[dim]
        labels = var[dim].values if dim in var.coords else np.arange(n)
        var = var.drop_vars(dim, errors="ignore").rename({dim: "unit"})
        parts.append(var.assign_coords(kind=("unit", [kind] * n), label=("unit", labels)))
    ll = xr.concat(parts, dim="unit") if len(parts) > 1 else parts[0]
    n_draws = ll.sizes["chain"] * ll.sizes["draw"]
    if n_draws < MIN_DRAWS:
        raise InputError(
            f"{n_draws} draw(s): PSIS-LOO needs posterior draws (fit with "
            f"{setting('sampler', 'nuts')} or {setting('sampler', 'svi')})"
        )
    return ll.astype(np.float64)


def _reff(idata, draws) -> float:
    """Relative efficiency of the draws behind the log likelihood (ArviZ's definition)."""
    import arviz as az

    post = idata.posterior
    if post.sizes["chain"] == 1:
        return 1.0
    post = post.sel(draw=draws)
    ess = az.ess(post, method="mean")
    values = np.hstack([ess[v].values.ravel() for v in ess.data_vars])
    values = values[np.isfinite(values)]
    n = post.sizes["chain"] * post.sizes["draw"]
    return float(values.mean() / n) if len(values) else 1.0


def loo(idata):
    """PSIS-LOO of one posterior over its concatenated pointwise log likelihood.

    Returns
    -------
    arviz.ELPDData
        ``az.loo(..., pointwise=True)`` (log scale); ArviZ's own warnings are silenced,
        the Pareto k values are in ``pareto_k``.
    """
    import arviz as az
    import xarray as xr

    ll = pointwise(idata)
    data = az.InferenceData(log_likelihood=xr.Dataset({"y": ll}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return az.loo(data, pointwise=True, var_name="y", reff=_reff(idata, ll["draw"].values))


def config_notes(model) -> list[str]:
    """Warnings about a specification whose posterior PSIS-LOO only approximates.

    Parameters
    ----------
    model : DualEvalModel
        The run's model; the arena's power is the weight it applies
        (:attr:`~bayes_dualeval.model.arena_term.ArenaTerm.weight`, calibrated or fixed).
    """
    notes = []
    config = model.config
    arena = model.arena
    powers = {"lambda_static": config.lambda_static, "lambda_arena": arena.weight}
    if config.arena_weight == "calibrated" and arena.kind == "pairs":
        powers = {"lambda_static": config.lambda_static, "arena weight": arena.weight}
    tempered = [f"{k} {v:g}" for k, v in powers.items() if v != 1.0]
    if tempered:
        notes.append(f"tempered posterior ({', '.join(tempered)}): PSIS weights assume power 1")
    if config.lambda_bb > 0:
        notes.append("a left-out prompt's both-bad pseudo-observations stay in (lambda_bb > 0)")
    return notes


def _check_same(fingerprints: dict, units: dict) -> None:
    names = list(fingerprints)
    first = names[0]
    for name in names[1:]:
        if units[name] != units[first]:
            raise InputError(
                f"runs {first} and {name} store different log-likelihood units "
                f"({units[first]} vs {units[name]}): their elpd values are not comparable"
            )
        differ = sorted(
            k for k in set(fingerprints[first]) | set(fingerprints[name])
            if fingerprints[first].get(k) != fingerprints[name].get(k)
        )  # fmt: skip
        if differ:
            raise InputError(
                f"runs {first} and {name} were fitted to different data "
                f"(they differ in {', '.join(differ)}): refusing to compare them"
            )


def compare(posteriors: Mapping, notes: Mapping | None = None) -> pd.DataFrame:
    """Compare posteriors fitted to the same data by PSIS-LOO (``az.compare``).

    Parameters
    ----------
    posteriors : mapping of str to arviz.InferenceData
        Name -> fitted posterior (with a ``log_likelihood`` group that records its unit).
    notes : mapping of str to list of str, optional
        Further warnings per name (e.g. the sampler's), added to the ``warning`` column.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`COLUMNS`, best first: ``rank`` 1 is the highest ``elpd_loo``;
        ``elpd_diff`` and ``dse`` are the difference to the best run and its standard
        error as ArviZ computes it (units independent), ``dse_crossed`` its standard error
        with the units' correlation within models and within items (:func:`crossed_dse`;
        0 for rank 1); ``n_bad_k`` counts units with Pareto k above :data:`BAD_K`; ``preferred``
        marks the one run :func:`preferred` picks; ``warning`` is
        empty or the reasons, joined by ``"; "``, to trust a row less. ``attrs`` holds
        ``unit`` (what one left-out value is), ``n_static`` and ``n_arena`` (how many of
        each) and ``weight`` (stacking weights per run).

    Raises
    ------
    InputError
        When a posterior has no usable pointwise log likelihood, or two were fitted to
        different data or store different units.
    """
    import arviz as az

    from bayes_dualeval.model.spec import DualEvalModel

    if not posteriors:
        raise InputError("nothing to compare")
    notes = {name: list((notes or {}).get(name, [])) for name in posteriors}
    fingerprints, units, elpds = {}, {}, {}
    for name, idata in posteriors.items():
        try:
            fingerprints[name] = data_fingerprint(idata)
            units[name] = loglik_unit(idata)
            elpds[name] = loo(idata)
            model = DualEvalModel.from_idata(idata)
        except InputError as exc:
            raise InputError(f"{name}: {exc}") from None
        notes[name] += config_notes(model)
    _check_same(fingerprints, units)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = az.compare(elpds, ic="loo", method="stacking", scale="log")
    clusters = unit_clusters(next(iter(posteriors.values())))
    rows = []
    for name, row in table.iterrows():
        elpd = elpds[name]
        k = np.asarray(elpd["pareto_k"]).ravel()
        n_bad = int((k > BAD_K).sum())
        said = [f"{n_bad} of {len(k)} Pareto k > {BAD_K}"] if n_bad else []
        n_over = int((k > elpd["good_k"]).sum())
        if n_over > n_bad:
            said.append(
                f"{n_over} Pareto k > {elpd['good_k']:.2f} (ArviZ's limit for "
                f"{int(elpd['n_samples'])} draws)"
            )
        said += notes[name]
        best = table.index[0]
        crossed = 0.0 if name == best else crossed_dse(
            _loo_i(elpds[best]) - _loo_i(elpd), *clusters
        )  # fmt: skip
        rows.append({
            "run": name, "rank": int(row["rank"]) + 1, "elpd_loo": float(row["elpd_loo"]),
            "se": float(row["se"]), "elpd_diff": float(row["elpd_diff"]),
            "dse": float(row["dse"]), "dse_crossed": max(crossed, float(row["dse"])),
            "p_loo": float(row["p_loo"]), "n_bad_k": n_bad, "warning": "; ".join(said),
        })  # fmt: skip
    out = pd.DataFrame(rows, columns=list(COLUMNS))
    out["preferred"] = out["run"] == preferred(out)
    first = next(iter(posteriors))
    kinds = pointwise_sizes(posteriors[first])
    out.attrs.update(
        unit=units[first], weight=dict(table["weight"].astype(float)), dse_note=DSE_NOTE, **kinds
    )
    return out


def _loo_i(elpd) -> np.ndarray:
    """The pointwise elpd of an ``ELPDData``, flat (units in the stored order)."""
    return np.asarray(elpd["loo_i"], np.float64).ravel()


def unit_clusters(idata) -> tuple[np.ndarray, np.ndarray]:
    """Each left-out unit's model and item cluster (integer codes, units in stored order).

    A static label belongs to its model and its item; an arena prompt (all its models'
    rewards or pairs) to a model cluster of its own and to its prompt.
    """
    ll = pointwise(idata)
    kind = np.asarray(ll["kind"].values).astype(str)
    n = len(kind)
    model = np.arange(n).astype(object)  # singletons unless a static label's model
    item = np.asarray(ll["label"].values).astype(str).astype(object)
    static = np.flatnonzero(kind == "static")
    if len(static):
        obs = idata.observed_data
        if "static_model" in obs.coords or "static_model" in obs.variables:
            labels = cell_labels(idata, "static_model")
            if len(labels) == len(static):
                model[static] = np.char.add("m:", np.asarray(labels).astype(str))
        if "static_item" in obs.coords or "static_item" in obs.variables:
            labels = cell_labels(idata, "static_item")
            if len(labels) == len(static):
                item[static] = np.char.add("q:", np.asarray(labels).astype(str))
    arena = np.flatnonzero(kind == "arena")
    item[arena] = np.char.add("p:", item[arena].astype(str))
    return pd.factorize(pd.Series(model.astype(str)))[0], pd.factorize(pd.Series(item))[0]


def crossed_dse(diff: np.ndarray, model: np.ndarray, item: np.ndarray) -> float:
    r"""Standard error of ``sum(diff)`` in a crossed models x items design.

    The two-way cluster-robust variance (Cameron, Gelbach and Miller 2011): with
    ``e = diff - mean(diff)``,
    :math:`V = \sum_m (\sum_{u \in m} e_u)^2 + \sum_q (\sum_{u \in q} e_u)^2
    - \sum_u e_u^2`, the sums by model and by item each counting the correlation within
    their clusters and the last term the cells counted twice; floored at ArviZ's ``dse``,
    :math:`\sqrt{\sum_u e_u^2}` (the value with every unit its own cluster: the crossed
    estimate can fall below it by chance, or go negative).

    Parameters
    ----------
    diff : numpy.ndarray, shape (n,)
        Pointwise elpd differences.
    model, item : numpy.ndarray of int, shape (n,)
        Each unit's model and item cluster (:func:`unit_clusters`).
    """
    diff = np.asarray(diff, np.float64)
    if len(diff) < 2:
        return 0.0
    e = diff - diff.mean()
    cells = float(np.sum(e**2))
    by_model = float(np.sum(np.bincount(model, weights=e) ** 2))
    by_item = float(np.sum(np.bincount(item, weights=e) ** 2))
    return float(np.sqrt(max(by_model + by_item - cells, cells)))


def clearly_worse(elpd_diff, dse):
    """Whether a difference to rank 1 is beyond noise (elementwise on arrays).

    Beyond noise: above :data:`CLEAR_DIFF` and above :data:`CLEAR_DSE` standard errors.
    """
    elpd_diff, dse = np.asarray(elpd_diff, float), np.asarray(dse, float)
    return (elpd_diff > CLEAR_DIFF) & (elpd_diff > CLEAR_DSE * dse)


def preferred(table: pd.DataFrame) -> str:
    """The run to choose: the simplest of those that predict as well as the best.

    PSIS-LOO's ranking alone often picks the richer of two nested models when the
    simpler one generated the data (2 of 5 seeds of 1PL data at 12 models x 150
    questions): a hierarchical 2PL whose slopes shrink to one predicts such data as well
    as the 1PL, and which of the two comes first is noise. So among the runs not
    :func:`clearly_worse` than rank 1, the one with the fewest effective parameters
    (smallest ``p_loo``; rank breaks ties) is preferred.

    Parameters
    ----------
    table : pandas.DataFrame
        Rows with ``run``, ``rank``, ``elpd_diff``, ``dse`` and ``p_loo``.

    Returns
    -------
    str
        The ``run`` of the preferred row.
    """
    close = table[~clearly_worse(table["elpd_diff"], table["dse"])]
    return str(close.sort_values(["p_loo", "rank"]).iloc[0]["run"])


def pointwise_sizes(idata) -> dict:
    """``n_static`` and ``n_arena``: static labels and arena prompts in the log likelihood."""
    group = idata.log_likelihood
    return {
        "n_static": int(group["static"].sizes["static_cell"]) if "static" in group else 0,
        "n_arena": int(group["arena"].sizes["prompt"]) if "arena" in group else 0,
    }
