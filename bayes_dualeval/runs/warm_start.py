"""Warm starts from a run folder: ``adaptation.npz`` written, read and mapped by label.

A NUTS run writes what its chains adapted (:func:`bayes_dualeval.inference.warm.adaptation`)
to ``adaptation.npz`` (:func:`save`): per latent site its unconstrained posterior mean,
the diagonal of the inverse mass matrix and its dimension names, the dense block of the
global sites, the step size, each dimension's labels (models, items, groups, judges...),
the items' centring and the specification. :func:`prepare` reads it back for a fit of the
same specification on data that may add models or items, and maps every site onto the new
fit by site name and by label (:func:`bayes_dualeval.inference.warm.map_site`): a new model
or item takes the site's mean metric entry and starts at the site's mean; the run's items
keep its centring weights (one whose anchoring changed counts as new). A run that cannot be
mapped is one
:class:`~bayes_dualeval.core.errors.InputError`.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import jax.numpy as jnp
import numpy as np

from bayes_dualeval.core import atomic
from bayes_dualeval.core.errors import InputError
from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.inference.settings import SamplerSettings
from bayes_dualeval.inference.sites import model_sites
from bayes_dualeval.inference.warm import (
    CONTRAST_OF,
    WARMUP,
    Axis,
    WarmStart,
    block_metric,
    map_site,
    site_map,
)
from bayes_dualeval.model import parameters
from bayes_dualeval.model.config import ModelConfig
from bayes_dualeval.model.inputs import ModelInputs
from bayes_dualeval.model.joint import global_sites

ADAPTATION_FILE = "adaptation.npz"
#: Version of the file's layout.
FORMAT = 1
#: Settings of a specification that the data decide, not the user (left out of the match).
FROM_DATA = ("arena_weight_factor",)


def save(folder: str | Path, result) -> Path | None:
    """Write ``adaptation.npz`` into ``folder`` for a NUTS fit of one ability dimension.

    Parameters
    ----------
    folder : str or Path
        The (staging) run folder.
    result : FitResult
        With ``adaptation`` (:func:`bayes_dualeval.inference.warm.adaptation`).

    Returns
    -------
    Path or None
        The file, or None when the fit has nothing to keep (not NUTS, interrupted, or
        several ability dimensions, whose labels are aligned only after sampling).
    """
    adapted = getattr(result, "adaptation", None)
    if adapted is None or result.config.dims > 1:
        return None
    posterior = result.idata.posterior
    arrays = {
        "format": np.asarray(FORMAT),
        "config": np.asarray(json.dumps(result.config.to_dict(), sort_keys=True)),
        "step_size": np.asarray(adapted["step_size"]),
        "dense_sites": np.asarray(list(adapted["dense_sites"]), dtype=str),
        "dense": np.asarray(adapted["dense"], np.float64),
        "centring": np.asarray(adapted["centring"], np.float32),
    }
    dims_used = set()
    for name, mean in adapted["mean"].items():
        dims = list(posterior[name].dims[2:]) if name in posterior else []
        if len(dims) != np.ndim(mean):
            dims = [f"{name}_axis{k}" for k in range(np.ndim(mean))]
        arrays[f"mean/{name}"] = np.asarray(mean, np.float64)
        arrays[f"var/{name}"] = np.asarray(adapted["var"][name], np.float64)
        arrays[f"dims/{name}"] = np.asarray(dims, dtype=str)
        dims_used.update(dims)
    dims_used |= {CONTRAST_OF[d] for d in dims_used if d in CONTRAST_OF} | {"model", "item"}
    for dim in sorted(dims_used):
        if dim in posterior.coords:
            arrays[f"coord/{dim}"] = np.asarray(posterior.coords[dim].values).astype(str)
    path = Path(folder) / ADAPTATION_FILE
    with atomic.atomic_path(path) as tmp, open(tmp, "wb") as handle:
        np.savez(handle, **arrays)
    return path


def load(run: str | Path) -> dict:
    """Read a run's ``adaptation.npz``, or say in one line why it cannot warm-start a fit.

    Raises
    ------
    InputError
        No such folder, not a run folder, a run of SVI or MAP, or a run without the file.
    """
    run = Path(run)
    diagnostics = run / "diagnostics.json"
    if not run.is_dir() or not diagnostics.is_file():
        raise InputError(f"warm start: {run} is not a run folder (no diagnostics.json)")
    path = run / ADAPTATION_FILE
    if not path.is_file():
        try:
            sampler = json.loads(diagnostics.read_text())["sampler"]["sampler"]
        except (ValueError, KeyError, TypeError):
            sampler = "nuts"
        if sampler != "nuts":
            raise InputError(
                f"warm start: {run} was fitted with {sampler}; a warm start needs a NUTS run"
            )
        raise InputError(
            f"warm start: {run} holds no {ADAPTATION_FILE} (NUTS runs of one ability "
            "dimension write it)"
        )
    try:
        with np.load(path, allow_pickle=False) as data:
            stored = {key: data[key] for key in data.files}
    except (OSError, ValueError) as err:
        raise InputError(f"warm start: cannot read {path}: {err}") from None
    if int(stored.get("format", -1)) != FORMAT:
        raise InputError(f"warm start: {path} has another layout than this version reads")
    stored["run"] = str(run)
    return stored


def _sites(stored: dict, prefix: str) -> dict:
    n = len(prefix) + 1
    return {key[n:]: value for key, value in stored.items() if key.startswith(f"{prefix}/")}


def check_same_spec(stored: dict, config: ModelConfig) -> None:
    """Refuse a run of another specification (settings decided by the data left aside)."""
    old = {k: v for k, v in json.loads(str(stored["config"])).items() if k not in FROM_DATA}
    new = {k: v for k, v in json.loads(json.dumps(config.to_dict())).items() if k not in FROM_DATA}
    differ = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
    if differ:
        said = ", ".join(f"{k}: {old.get(k)!r} there, {new.get(k)!r} here" for k in differ[:3])
        more = f" and {len(differ) - 3} more" if len(differ) > 3 else ""
        raise InputError(
            f"warm start: {stored['run']} was fitted with another specification ({said}{more}); "
            "a warm start needs the same one"
        )


def _axes(name, dims_old, dims_new, shape_old, shape_new, labels_old, labels_new, keep):
    """The :class:`~bayes_dualeval.inference.warm.Axis` of each dimension of one site."""
    if len(dims_old) != len(dims_new) or list(dims_old) != list(dims_new):
        raise InputError(f"warm start: parameter {name} has other dimensions in the run")
    axes = []
    for k, dim in enumerate(dims_new):
        base = CONTRAST_OF.get(dim)
        if base is not None and base in labels_old and base in labels_new:
            axes.append(Axis("contrast", labels_old[base], labels_new[base]))
        elif base is None and dim in labels_old and dim in labels_new:
            axes.append(Axis("labels", labels_old[dim], labels_new[dim], keep.get(dim)))
        else:
            axes.append(Axis("fixed", shape_old[k], shape_new[k]))
    return axes


def prepare(
    run: str | Path,
    dataset: Dataset,
    inputs: ModelInputs,
    config: ModelConfig,
    settings: SamplerSettings,
    features=None,
) -> WarmStart:
    """The warm start of a NUTS fit of ``dataset`` from run folder ``run``, mapped by label.

    Parameters
    ----------
    run : str or Path
        A NUTS run folder of the same specification (:func:`load`).
    dataset : Dataset
        The data being fitted (their labels).
    inputs : ModelInputs
        The model's arrays for them.
    config : ModelConfig
    settings : SamplerSettings
        Only NUTS can start warm.
    features : FeatureDesign, optional
        The item features' mapping (their dimension's coordinates).

    Returns
    -------
    WarmStart
    ModelInputs
        ``inputs`` with the run's centring weights for the items it had
        (:func:`_carried_centring`).

    Raises
    ------
    InputError
        See :func:`load`; another specification; parameters that differ (other kinds of
        data) or a dimension that changed size and has no labels to map it by.
    """
    from bayes_dualeval.posterior.idata import coords_of

    if settings.sampler != "nuts":
        raise InputError(f"warm start: only NUTS starts warm, not {settings.sampler}")
    stored = load(run)
    check_same_spec(stored, config)
    if config.dims > 1:
        raise InputError("warm start: a fit of several ability dimensions cannot start warm")
    every = model_sites(inputs, config)
    sites = {k: s for k, s in every.items() if s.latent}
    means, variances, dims_old = (
        _sites(stored, "mean"),
        _sites(stored, "var"),
        _sites(stored, "dims"),
    )
    missing, extra = sorted(set(sites) - set(means)), sorted(set(means) - set(sites))
    if missing or extra:
        said = "; ".join(
            f"{what}: {', '.join(names[:4])}"
            for what, names in (("not in the run", missing), ("only in the run", extra))
            if names
        )
        raise InputError(
            f"warm start: {stored['run']} has other parameters than this fit ({said}): "
            "a warm start needs the same specification and kinds of data, fitted by a "
            "version that samples the same coordinates"
        )
    labels_old = {k: v.tolist() for k, v in _sites(stored, "coord").items()}
    labels_new = {
        k: np.asarray(v).astype(str).tolist()
        for k, v in coords_of(dataset, every, inputs, features).items()
    }
    inputs = _carried_centring(stored, labels_old, inputs, labels_new)
    keep = {"item": _same_centring(stored, labels_old, inputs, labels_new)}
    dense_old = list(np.asarray(stored["dense_sites"]).tolist())
    dense_new = global_sites(config, inputs)
    init, var, var_bare, axes_of, new_entries = {}, {}, {}, {}, 0
    for name, site in sites.items():
        shape_old = np.shape(means[name])
        axes = _axes(
            name, dims_old[name].tolist(), list(parameters.dims_of(name)), shape_old,
            site.shape, labels_old, labels_new, keep,
        )  # fmt: skip
        try:
            init[name], var[name], new = map_site(means[name], variances[name], axes)
            var_bare[name] = map_site(means[name], variances[name], axes, fill=False)[1]
        except InputError as err:
            raise InputError(f"warm start: parameter {name}: {err}") from None
        if np.shape(init[name]) != tuple(site.shape):
            raise InputError(f"warm start: parameter {name} cannot be mapped onto this fit")
        axes_of[name] = (shape_old, axes)
        new_entries += int(new.sum())
    dense = _dense(
        dense_new, dense_old, np.asarray(stored["dense"]), variances, var, var_bare, axes_of
    )
    added = {
        dim: sorted(set(labels_new.get(dim, [])) - set(labels_old.get(dim, [])))
        for dim in ("model", "item")
    }
    step_size = float(stored["step_size"])
    warmup = min(settings.warmup, WARMUP)
    record = {
        "run": stored["run"],
        "warmup": warmup,
        "adapt_metric": False,
        "step_size": step_size,
        "new_models": added["model"],
        "new_items": len(added["item"]),
        "new_entries": new_entries,
    }
    metric = block_metric(var, tuple(dense_new), dense)
    return WarmStart(metric, step_size, init, warmup, False, record), inputs


def _carried_centring(stored: dict, labels_old: dict, inputs: ModelInputs, labels_new: dict):
    """``inputs`` with each item of the run laid out as the run laid it out.

    The centring weights are read from all the data (:func:`bayes_dualeval.model.pilot.centring`),
    so a new model moves every item's weights a little; any weights give the same
    posterior, and the run's keep its adapted means and metric valid. An item whose
    anchoring differs keeps the new layout (and counts as new).
    """
    old = np.asarray(stored["centring"], np.float32)
    new = np.array(inputs.centring, np.float32)
    j, i = _matched_items(labels_old, labels_new, old.shape[1])
    same = old[2, i] == new[2, j]
    new[:2, j[same]] = old[:2, i[same]]
    return dataclasses.replace(
        inputs, centring=jnp.asarray(new), n_centred=int(np.count_nonzero(new[:2]))
    )


def _same_centring(stored: dict, labels_old: dict, inputs: ModelInputs, labels_new: dict):
    """Per new item: whether its centring is the run's (an item laid out otherwise is new)."""
    old = np.asarray(stored["centring"])
    new = np.asarray(inputs.centring)
    keep = np.zeros(len(labels_new.get("item", [])), bool)
    j, i = _matched_items(labels_old, labels_new, old.shape[1])
    keep[j] = np.all(old[:, i] == new[:, j], axis=0)
    return keep


def _matched_items(labels_old: dict, labels_new: dict, n_old: int):
    """Positions ``(j, i)`` of the items the new fit (``j``) shares with the run (``i``)."""
    where = {label: i for i, label in enumerate(labels_old.get("item", []))}
    pairs = [
        (j, where[label])
        for j, label in enumerate(labels_new.get("item", []))
        if where.get(label, n_old) < n_old
    ]
    j, i = np.array(pairs, np.int64).reshape(-1, 2).T
    return j, i


def _dense(dense_new, dense_old, block_old, variances, var, var_bare, axes_of) -> np.ndarray:
    """The dense block over ``dense_new``: ``L C Lᵀ`` plus what new entries add.

    ``C`` is the run's covariance over the same sites (its dense block where both sites were
    in it, their diagonal elsewhere), ``L`` each site's linear map
    (:func:`~bayes_dualeval.inference.warm.site_map`); the diagonal gains each entry's fill
    (the site's mean for new entries), which keeps the block positive definite.
    """
    if not dense_new:
        return np.zeros((0, 0))
    offsets, at = {}, 0
    for name in dense_old:
        offsets[name] = at
        at += int(np.size(variances[name]))
    blocks_l, sizes_old = [], []
    for name in dense_new:
        shape_old, axes = axes_of[name]
        blocks_l.append(site_map(shape_old, axes))
        sizes_old.append(int(np.prod(shape_old, dtype=np.int64)))
    total = sum(sizes_old)
    cov = np.zeros((total, total))
    starts = np.cumsum([0, *sizes_old])
    for a, s in enumerate(dense_new):
        for b, t in enumerate(dense_new):
            rows, cols = slice(starts[a], starts[a + 1]), slice(starts[b], starts[b + 1])
            if s in offsets and t in offsets:
                i, j = offsets[s], offsets[t]
                cov[rows, cols] = block_old[i : i + sizes_old[a], j : j + sizes_old[b]]
            elif s == t:
                cov[rows, cols] = np.diag(np.ravel(variances[s]))
    lin = np.zeros((sum(b.shape[0] for b in blocks_l), total))
    r = 0
    for a, block in enumerate(blocks_l):
        lin[r : r + block.shape[0], starts[a] : starts[a + 1]] = block
        r += block.shape[0]
    fill = np.concatenate([np.ravel(var[n] - var_bare[n]) for n in dense_new])
    return lin @ cov @ lin.T + np.diag(np.maximum(fill, 0.0))


def fallback(cold, warm_diagnostics: dict, conv):
    """``cold`` (the fit with the full warm-up), recording the warm start it replaced.

    ``diagnostics["warm_start"]`` keeps the warm start's record with ``used`` False, why
    (the convergence problems of the warm-started draws) and what it cost.
    """
    record = dict(warm_diagnostics["warm_start"], used=False)
    record["fell_back"] = (
        "the warm-started draws failed the convergence check ("
        + "; ".join(conv.problems[:3] or ("not converged",))
        + "): fitted again with the full warm-up"
    )
    record["warm_timings"] = warm_diagnostics.get("timings", {})
    cold.diagnostics["warm_start"] = record
    return cold


def describe(record: dict) -> str:
    """One line on a warm start (``diagnostics["warm_start"]``)."""
    added = record.get("new_models") or []
    what = f"{len(added)} new model(s), {record.get('new_items', 0)} new item(s)"
    if record.get("used"):
        return (
            f"warm start from {record['run']} ({what}): {record['warmup']} warm-up iterations "
            "from its metric and step size"
        )
    return f"warm start from {record['run']} ({what}) not used: {record.get('fell_back', '')}"
