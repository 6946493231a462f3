"""Package sampler draws as an :class:`arviz.InferenceData` with real labels.

Groups: ``posterior`` (``theta`` with dim ``model``; ``a``, ``b`` with dim ``item``; ``gamma``;
group-level hyperparameters with dim ``group``; ``theta_centred``, abilities centred to
mean zero across models), ``sample_stats``, ``observed_data`` (``static_y`` per static
cell, ``arena_z`` per arena cell, with model and item labels as coordinates: their text, or
above :data:`CELL_TEXT_MAX` cells their positions, see :func:`cell_labels`),
``log_likelihood`` (the data's pointwise log likelihood: ``static`` per static label,
``arena`` per arena prompt, both-bad pseudo-observations and likelihood powers left out;
its ``unit`` attribute says what one value is; left out, with the reason in
``posterior.attrs``, when too large) and ``constant_data`` (item metadata). Every item
coordinate carries its kind, source and domain, so ``az.summary`` and ``az.plot_forest``
read well.
"""

from __future__ import annotations

import json
from functools import partial

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import xarray as xr

from bayes_dualeval.core.thinning import evenly_spaced
from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.inference.sampling import Draws
from bayes_dualeval.model.config import ModelConfig
from bayes_dualeval.model.inputs import ModelInputs
from bayes_dualeval.model.priors import uses_level
from bayes_dualeval.model.spec import DualEvalModel
from bayes_dualeval.posterior.dimensions import align

#: Site name -> dimension names after (chain, draw).
SITE_DIMS = {
    "theta": ("model",),
    "theta_centred": ("model",),
    "theta_contrast": ("contrast",),
    "a": ("item",),
    "b": ("item",),
    "c": ("item",),
    "d": ("item",),
    "c_static": ("static_item",),
    "c_raw": ("static_item",),
    "d_raw": ("static_item",),
    "mu_c": ("group",),
    "mu_d": ("group",),
    "d_static": ("static_item",),
    "b_raw": ("item",),
    "b_rel": ("item",),
    "log_a_raw": ("item",),
    "log_a": ("item",),
    "mu_b": ("group",),
    "sigma_b": ("group",),
    "mu_log_a": ("group",),
    "sigma_log_a": ("group",),
    "level_c": ("arena_source",),
    "theta_domain": ("model", "domain"),
    "delta_raw": ("contrast", "domain"),
    "tau_domain": ("domain",),
    "theta_dims": ("model", "dimension"),
    "loading": ("item", "dimension"),
    "loading_raw": ("item", "loading_contrast"),
    "mu_loading": ("loading_group", "loading_contrast"),
    "beta_b": ("feature",),
    "beta_b_raw": ("feature",),
    "beta_log_a": ("feature",),
    "beta_log_a_raw": ("feature",),
}
#: Sites that gain a last axis ``dimension`` with ability dimensions (``dims > 1``).
PER_DIMENSION = ("theta_contrast",)
#: Item labels kept as constant data; the first three also label the posterior's items.
ITEM_LABELS = ("item_kind", "item_source", "item_domain", "item_group")
#: Dimensions of one entry per observed cell: labelled by model and item, not by an index
#: (ArviZ's default 0..n-1 coordinate would add two integers per cell to the file).
CELL_DIMS = ("static_cell", "arena_cell")
#: Observed cells (static and arena together) above which each cell's model and item are
#: stored as their positions in the ``model`` and ``item`` coordinates (int32, 8 bytes a
#: cell) instead of their text (about 120 bytes a cell at 10 M cells, most of posterior.nc).
CELL_TEXT_MAX = 1_000_000
#: ``observed_data`` attribute: ``"text"`` or ``"positions"`` (what the cell coordinates hold).
CELL_LABELS_ATTR = "cell_labels"
#: Largest pointwise log-likelihood array stored: draws x (static cells + arena prompts),
#: float32 (240 MB). Beyond it the ``log_likelihood`` group holds fewer draws, never a
#: coarser unit.
MAX_POINTWISE = 60_000_000
#: Largest number of evaluations (draws x (static cells + arena cells + decisive pairs))
#: spent on the pointwise log likelihood; beyond it the ``log_likelihood`` group holds an
#: evenly thinned subset of each chain's draws (its ``draw`` coordinate says which).
#: 4 NUTS chains x 1,000 draws at DualEval's paper scale stay below it; SVI on AlpacaEval
#: (a million decisive pairs) keeps about 180 of its 1,000 draws.
LOGLIK_ELEMENTS = 200_000_000
#: Fewest draws (all chains together) worth a PSIS-LOO: when the two budgets above leave
#: fewer, the ``log_likelihood`` group is left out and the posterior says why.
MIN_LOGLIK_DRAWS = 100
#: Attribute of ``idata.posterior`` saying why the ``log_likelihood`` group was left out.
LOGLIK_OMITTED_ATTR = "log_likelihood_omitted"
#: Attribute of ``idata.log_likelihood``: JSON of what one pointwise value is (per variable).
LOGLIK_UNIT_ATTR = "unit"
#: Evaluations per compiled call of the pointwise log likelihood (bounds its memory).
LOGLIK_CHUNK = 8_000_000
#: Sites the pointwise log likelihood reads.
LOGLIK_SITES = (
    "theta", "theta_domain", "theta_dims", "loading", "a", "b", "c", "d", "gamma", "sigma",
    "level_c",
)  # fmt: skip
#: Attribute of ``idata.posterior``: JSON of how the ability dimensions were relabelled
#: (:func:`~bayes_dualeval.posterior.dimensions.align`); absent with one dimension.
DIMENSIONS_ATTR = "dimension_alignment"


def _site_dims(name: str, ndim: int) -> list | None:
    """Dimension names of a site with ``ndim`` axes (chain and draw first), if known."""
    labels = SITE_DIMS.get(name)
    if labels is None:
        return None
    if name in PER_DIMENSION and ndim == 3 + len(labels):
        return [*labels, "dimension"]
    return list(labels) if ndim == 2 + len(labels) else None


def _coords(dataset: Dataset, samples: dict) -> dict:
    extra = {"domain": dataset.domains} if "theta_domain" in samples else {}
    if "theta_dims" in samples:
        k = samples["theta_dims"].shape[-1]
        extra["dimension"] = np.arange(1, k + 1)
        extra["loading_contrast"] = np.arange(k - 1)
        extra["loading_group"] = [*dataset.domains, "(no domain)"]
    return {
        **extra,
        "model": dataset.models,
        "item": dataset.items,
        "group": dataset.groups,
        "contrast": np.arange(max(dataset.n_models - 1, 0)),
        "arena_source": dataset.groups[np.unique(dataset.item_group[dataset.arena_items])],
        "static_item": dataset.items[dataset.static_items],
    }


def _per_draw(inputs: ModelInputs) -> int:
    """Evaluations of one draw's pointwise log likelihood: static cells, arena cells, pairs."""
    return int(inputs.static_y.shape[0] + inputs.arena_item.shape[0] + inputs.pair_i.shape[0])


def _prompts(inputs: ModelInputs) -> np.ndarray:
    """Indices of the items with arena cells (the arena term's unit: one per prompt)."""
    return np.unique(np.asarray(inputs.arena_item))


def _stored_per_draw(inputs: ModelInputs) -> int:
    """Values stored per draw: one per static cell and one per arena prompt."""
    return int(inputs.static_y.shape[0] + len(_prompts(inputs)))


def loglik_draws(n_chain: int, n_draw: int, inputs: ModelInputs) -> np.ndarray | None:
    """Draws (per chain) that get a pointwise log likelihood; None for all of them.

    At most :data:`LOGLIK_ELEMENTS` evaluations and :data:`MAX_POINTWISE` stored values in
    all: beyond either, evenly spaced draws of each chain (the first and the last
    included). An empty array when fewer than :data:`MIN_LOGLIK_DRAWS` draws would be left.
    """
    keep = min(
        LOGLIK_ELEMENTS // max(_per_draw(inputs) * n_chain, 1),
        MAX_POINTWISE // max(_stored_per_draw(inputs) * n_chain, 1),
    )
    if keep >= n_draw:
        return None
    if keep * n_chain < MIN_LOGLIK_DRAWS or keep < 2:
        return np.empty(0, dtype=int)
    return evenly_spaced(n_draw, keep)


def loglik_unit(config: ModelConfig, inputs: ModelInputs) -> dict:
    """What one pointwise log-likelihood value is, per variable of the group.

    ``static``: one static label (its Bernoulli log probability). ``arena``: one prompt,
    either its decisive pairs (soft targets, the pair weight, and the distillation
    quantiles that decide which pairs are decisive) or its rewards (``reward``
    likelihood), plus its mean reward when the level term is in the model. Both-bad
    pseudo-observations and the likelihood powers are never part of it. Two runs whose
    units differ do not model the same data term, and are not compared.
    """
    unit = {}
    if inputs.has_static:
        unit["static"] = "label"
    if inputs.has_arena:
        if DualEvalModel(config).arena_term == "reward":
            arena = "prompt: its rewards (normal, prompt offset integrated out)"
        else:
            weight = "1" if config.arena_likelihood == "pairs-full" else "2/n_q"
            arena = (
                f"prompt: its decisive pairs (soft targets, weight {weight}; "
                f"tie_ratio {config.tie_ratio:g}, bb_ratio {config.bb_ratio:g})"
            )
        if uses_level(inputs, config):
            arena += " and its mean reward (level term)"
        unit["arena"] = arena
    return unit


def pointwise_loglik(
    samples: dict,
    inputs: ModelInputs,
    config: ModelConfig,
    *,
    chunk: int | None = None,
    prompts: np.ndarray | None = None,
) -> dict:
    """The data's pointwise log likelihood for every draw.

    One value per static label and one per arena prompt (its pairs, or its rewards, and
    its level term): both-bad pseudo-observations are left out and no likelihood power is
    applied, so the values are the log density of the observed data (the unit of
    :func:`loglik_unit`).

    Parameters
    ----------
    samples : dict
        Draws shaped ``(chain, draw, ...)``.
    inputs : ModelInputs
    config : ModelConfig
    chunk : int, optional
        Draws evaluated at once (bounds memory); by default as many as make
        :data:`LOGLIK_CHUNK` evaluations. Every call has the same shape (the last chunk
        is padded), so the function compiles once.
    prompts : numpy.ndarray, optional
        Item indices of the arena prompts kept (default: every item with arena cells).

    Returns
    -------
    dict
        ``static``: shape (chain, draw, S); ``arena``: shape (chain, draw, len(prompts)).
    """
    theta = samples["theta"]
    n_chain, n_draw = theta.shape[:2]
    n = n_chain * n_draw
    params = {k: np.reshape(v, (n, *v.shape[2:])) for k, v in samples.items() if k in LOGLIK_SITES}
    config = config.replace(lambda_bb=0.0)  # the data term only
    prompts = jnp.asarray(_prompts(inputs) if prompts is None else prompts, dtype=jnp.int32)
    if chunk is None:
        chunk = LOGLIK_CHUNK // max(_per_draw(inputs), 1)
    chunk = int(min(max(chunk, 1), n))
    out = {}
    for start in range(0, n, chunk):
        sl = np.minimum(np.arange(start, start + chunk), n - 1)  # pad with the last draw
        got = min(chunk, n - start)
        part = jax.device_get(
            _loglik_of_draws({k: v[sl] for k, v in params.items()}, inputs, prompts, config)
        )
        for key, value in part.items():
            if key not in out:
                out[key] = np.empty((n, *value.shape[1:]), np.float32)
            out[key][start : start + got] = value[:got]
    return {k: v.reshape(n_chain, n_draw, *v.shape[1:]) for k, v in out.items()}


@partial(jax.jit, static_argnames="config")
def _loglik_of_draws(params: dict, inputs: ModelInputs, prompts, config: ModelConfig) -> dict:
    """:func:`pointwise_loglik` for a chunk of draws: one compiled program per shapes.

    The data are arguments, not constants, so that data sets of the same shapes share the
    program (and the program's text does not hold the data).
    """
    model = DualEvalModel(config)

    def one(draw):
        out = {}
        if inputs.has_static:
            out["static"] = model.static_loglik(draw, inputs)
        if inputs.has_arena:
            out["arena"] = model.arena_loglik(draw, inputs)[prompts]
        return out

    return jax.vmap(one)(params)


def with_derived(samples: dict) -> dict:
    """The sampled sites as the posterior holds them, plus the quantities it adds.

    Ability dimensions get the same labels in every draw
    (:func:`~bayes_dualeval.posterior.dimensions.align`), and ``theta_centred`` is added,
    the abilities relative to their mean (what the likelihood identifies). The
    convergence check that decides whether to draw more reads the same variables as the
    run's final verdict, so it is given these too.
    """
    return _derived(align(samples)[0])


def _derived(samples: dict) -> dict:
    out = dict(samples)
    if "theta" in out:
        theta = np.asarray(out["theta"])
        out["theta_centred"] = theta - theta.mean(axis=-1, keepdims=True)
    return out


def to_inference_data(
    draws: Draws, dataset: Dataset, inputs: ModelInputs, config: ModelConfig, features=None
) -> az.InferenceData:
    """Build the run's :class:`arviz.InferenceData` (with :func:`arviz.from_dict`).

    Parameters
    ----------
    draws : Draws
        Output of a sampler.
    dataset : Dataset
        The data the model was fitted to (labels come from here).
    inputs : ModelInputs
        The model's arrays (for the pointwise log likelihood).
    config : ModelConfig
    features : FeatureDesign, optional
        The item features' mapping (:func:`bayes_dualeval.data.features.design`), kept in
        ``constant_data`` (:func:`feature_data`).

    Returns
    -------
    arviz.InferenceData
    """
    aligned, relabelled = align(draws.samples)
    samples = _derived(aligned)
    dims = {name: _site_dims(name, value.ndim) for name, value in samples.items()}
    dims = {name: labels for name, labels in dims.items() if labels}
    observed, observed_dims, labels_of_cells = _observed(dataset, inputs)
    feature_vars, feature_dims, feature_coords = feature_data(inputs, features)
    idata = az.from_dict(
        posterior=samples,
        sample_stats=draws.stats or None,
        observed_data=observed or None,
        constant_data={
            "item_kind": dataset.item_kind,
            "item_source": dataset.item_source,
            "item_domain": dataset.item_domain,
            "item_group": dataset.groups[dataset.item_group],
            **feature_vars,
        },
        coords={**_coords(dataset, samples), **feature_coords},
        dims={
            **dims,
            **observed_dims,
            **feature_dims,
            **dict.fromkeys(ITEM_LABELS, ["item"]),
        },  # fmt: skip
        posterior_attrs={
            **DualEvalModel(config).to_attrs(),
            **({DIMENSIONS_ATTR: json.dumps(relabelled)} if relabelled else {}),
        },
    )
    if "item" in idata.posterior.dims:
        labels = {name: ("item", getattr(dataset, name)) for name in ITEM_LABELS[:3]}
        idata.posterior = idata.posterior.assign_coords(labels)
    if observed:
        observed_data = idata.observed_data.drop_vars(CELL_DIMS, errors="ignore")
        idata.observed_data = observed_data.assign_coords(labels_of_cells)
        kind = next(iter(labels_of_cells.values()))[1].dtype.kind
        idata.observed_data.attrs[CELL_LABELS_ATTR] = "positions" if kind in "iu" else "text"
    n_chain, n_draw = samples["theta"].shape[:2]
    keep = loglik_draws(n_chain, n_draw, inputs)
    if keep is not None and len(keep) == 0:
        idata.posterior.attrs[LOGLIK_OMITTED_ATTR] = (
            f"{_stored_per_draw(inputs):,} pointwise values per draw (static labels and "
            f"arena prompts): the budget of {MAX_POINTWISE:.0e} stored values and "
            f"{LOGLIK_ELEMENTS:.0e} evaluations leaves fewer than {MIN_LOGLIK_DRAWS} draws"
        )
        return idata
    if keep is not None:
        samples = {k: samples[k][:, keep] for k in LOGLIK_SITES if k in samples}
    loglik = _log_likelihood(samples, dataset, inputs, config, keep)
    if loglik is not None:
        idata.add_groups(log_likelihood=loglik)
    return idata


def feature_data(inputs: ModelInputs, features=None) -> tuple[dict, dict, dict]:
    """The item features' constant data, dimensions and coordinates (empty without features).

    ``item_features`` (item x feature): the regressors each item's prior read; with the
    mapping, ``feature_mean`` and ``feature_sd`` (feature_column: the standardisation),
    ``feature_rotation`` (feature_column x feature) and ``feature_root`` (feature), so that
    new rows ``x`` map to ``((x - mean) / sd) @ rotation / root``.
    """
    matrix = np.asarray(inputs.item_features)
    if matrix.shape[1] == 0:
        return {}, {}, {}
    data = {"item_features": matrix}
    dims = {"item_features": ["item", "feature"]}
    if features is not None:
        data.update(
            feature_mean=features.mean,
            feature_sd=features.sd,
            feature_rotation=features.rotation,
            feature_root=features.root,
        )
        dims.update(
            feature_mean=["feature_column"],
            feature_sd=["feature_column"],
            feature_rotation=["feature_column", "feature"],
            feature_root=["feature"],
        )
        return data, dims, {"feature_column": list(features.columns)}
    return data, dims, {}


def _observed(dataset: Dataset, inputs: ModelInputs) -> tuple[dict, dict, dict]:
    """Observed cells, their dims, and the model and item label of each cell.

    The labels are text up to :data:`CELL_TEXT_MAX` cells, positions above it.
    """
    observed, dims, labels = {}, {}, {}
    n_cells = len(dataset.static_y) * inputs.has_static + len(dataset.arena_z) * inputs.has_arena
    text = n_cells <= CELL_TEXT_MAX

    def label(names, positions):
        return names[positions] if text else positions.astype(np.int32)

    if inputs.has_static:
        observed["static_y"] = dataset.static_y.astype(np.int8)
        dims["static_y"] = ["static_cell"]
        labels["static_model"] = ("static_cell", label(dataset.models, dataset.static_model))
        labels["static_item"] = ("static_cell", label(dataset.items, dataset.static_item))
    if inputs.has_arena:
        observed["arena_z"] = dataset.arena_z
        observed["arena_reward"] = dataset.arena_reward
        dims["arena_z"] = dims["arena_reward"] = ["arena_cell"]
        labels["arena_model"] = ("arena_cell", label(dataset.models, dataset.arena_model))
        labels["arena_item"] = ("arena_cell", label(dataset.items, dataset.arena_item))
    return observed, dims, labels


def cell_positions(idata, coord: str) -> np.ndarray:
    """Each observed cell's model (or item) as its position, from text or stored positions.

    Parameters
    ----------
    idata : arviz.InferenceData
    coord : {"static_model", "static_item", "arena_model", "arena_item"}

    Returns
    -------
    numpy.ndarray
        int32 positions in the posterior's ``model`` coordinate (``*_model``) or in
        ``constant_data``'s ``item`` (``*_item``); -1 for a label found in neither.
        Empty when the run has no such cells.
    """
    obs = idata.observed_data
    if coord not in obs.coords:
        return np.zeros(0, np.int32)
    values = np.asarray(obs[coord].values)
    if values.dtype.kind in "iu":
        return values.astype(np.int32)
    names = _names_of(idata, coord)
    return pd.Index(names).get_indexer(values.astype(str)).astype(np.int32)


def cell_labels(idata, coord: str) -> np.ndarray:
    """Each observed cell's model (or item) label, as stored text or from stored positions.

    Positions are turned into a text array of the labels, the form text labels take in
    memory and when read back from ``posterior.nc``, so that either storage gives the same
    values.
    """
    values = np.asarray(idata.observed_data[coord].values)
    if values.dtype.kind in "iu":
        return _names_of(idata, coord)[values]
    return values


def _names_of(idata, coord: str) -> np.ndarray:
    if coord.endswith("_model"):
        return np.asarray(idata.posterior["model"].values).astype(str)
    return np.asarray(idata.constant_data["item"].values).astype(str)


def _log_likelihood(samples, dataset, inputs, config, keep) -> xr.Dataset | None:
    """The ``log_likelihood`` group: draws ``keep`` (None: all) of the pointwise terms."""
    prompts = dataset.arena_items
    ll = pointwise_loglik(samples, inputs, config, prompts=prompts)
    loglik, dims = {}, {}
    coords = {"prompt": dataset.items[prompts]}
    if keep is not None:
        coords["draw"] = keep
    if "static" in ll:
        loglik["static"] = ll["static"]
        dims["static"] = ["static_cell"]
    if "arena" in ll:
        loglik["arena"] = ll["arena"]
        dims["arena"] = ["prompt"]
    if not loglik:
        return None
    group = az.from_dict(log_likelihood=loglik, coords=coords, dims=dims).log_likelihood
    group = group.drop_vars(CELL_DIMS, errors="ignore")
    group.attrs[LOGLIK_UNIT_ATTR] = json.dumps(loglik_unit(config, inputs))
    return group
