"""Package sampler draws as an :class:`arviz.InferenceData` with real labels.

Groups: ``posterior`` (``theta`` with dim ``model``; ``a``, ``b`` with dim ``item``; ``gamma``;
group-level hyperparameters with dim ``group``; ``theta_centred``, abilities centred to
mean zero across models), ``sample_stats``, ``observed_data`` (``static_y`` per static
cell, ``arena_z`` per arena cell, with model and item labels as coordinates: their text, or
above :data:`CELL_TEXT_MAX` cells their positions, see :func:`cell_labels`),
``log_likelihood`` (the data's pointwise log likelihood,
:mod:`bayes_dualeval.posterior.loglik`) and ``constant_data`` (item metadata). Every item
coordinate carries its kind, source and domain, so ``az.summary`` and ``az.plot_forest``
read well.
"""

from __future__ import annotations

import json

import arviz as az
import numpy as np
import pandas as pd

from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.inference.sampling import Draws
from bayes_dualeval.model import dif, facets, graders, parameters
from bayes_dualeval.model.config import ModelConfig
from bayes_dualeval.model.inputs import ModelInputs
from bayes_dualeval.model.spec import DualEvalModel
from bayes_dualeval.posterior.dimensions import align
from bayes_dualeval.posterior.loglik import add_log_likelihood

#: Site name -> dimension names after (chain, draw) (declared in
#: :mod:`bayes_dualeval.model.parameters`).
SITE_DIMS = parameters.SITE_DIMS
#: Sites that gain a last axis ``dimension`` with ability dimensions (``dims > 1``).
PER_DIMENSION = ("theta_contrast",)
#: Item labels kept as constant data; the first three also label the posterior's items.
ITEM_LABELS = ("item_kind", "item_source", "item_domain", "item_group")
#: Dimensions of one entry per observed cell: labelled by model and item, not by an index
#: (ArviZ's default 0..n-1 coordinate would add two integers per cell to the file).
CELL_DIMS = ("static_cell", "arena_cell")
#: Prefix of the constant data holding the models' further metadata columns
#: (:attr:`~bayes_dualeval.data.dataset.Dataset.model_meta`), one per column.
META_PREFIX = "model_meta_"
#: Observed cells (static and arena together) above which each cell's model and item are
#: stored as their positions in the ``model`` and ``item`` coordinates (int32, 8 bytes a
#: cell) instead of their text (about 120 bytes a cell at 10 M cells, most of posterior.nc).
CELL_TEXT_MAX = 1_000_000
#: ``observed_data`` attribute: ``"text"`` or ``"positions"`` (what the cell coordinates hold).
CELL_LABELS_ATTR = "cell_labels"
#: Attribute of ``idata.posterior``: JSON of how the ability dimensions were relabelled
#: (:func:`~bayes_dualeval.posterior.dimensions.align`); absent with one dimension.
DIMENSIONS_ATTR = "dimension_alignment"


def _site_dims(name: str, ndim: int) -> list | None:
    """Dimension names of a site with ``ndim`` axes (chain and draw first), if known."""
    labels = parameters.dims_of(name)
    if name in PER_DIMENSION and ndim == 3 + len(labels):
        return [*labels, "dimension"]
    return list(labels) if ndim == 2 + len(labels) else None


def _coords(dataset: Dataset, samples: dict) -> dict:
    extra = {"domain": dataset.domains} if "theta_domain" in samples else {}
    if any(name in samples for name in facets.SITES):  # the arena's judges, families, style
        facet = facets.arena_facets(dataset, True)
        extra["judge"] = facet.judges
        extra["family"] = facet.families
        extra["covariate"] = list(dataset.style)
        # the judges' and families' sum-to-zero coordinates (Helmert contrasts)
        extra["judge_contrast"] = np.arange(max(len(facet.judges) - 1, 0))
        extra["family_contrast"] = np.arange(max(len(facet.families) - 1, 0))
    if graders.SITE in samples:  # the judges of the static labels
        names, _ = graders.graders(dataset)
        extra["grader"] = names
        extra["grader_contrast"] = np.arange(len(names) - 1)
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


def _dif_coords(dataset: Dataset, config: ModelConfig, samples: dict) -> dict:
    """The DIF groups and their sum-to-zero coordinates (empty without DIF)."""
    if dif.SITE not in samples:
        return {}
    names, _ = dif.model_groups(dataset, config.dif)
    return {"dif_group": names, "dif_contrast": np.arange(len(names) - 1)}


def coords_of(dataset: Dataset, names, inputs: ModelInputs | None = None, features=None) -> dict:
    """The labels of every dimension of the sites ``names``, as the posterior will hold them.

    What :func:`to_inference_data` labels the draws with, known before sampling (the
    warm start of a fit maps a previous run's sites onto them by label).
    """
    coords = _coords(dataset, dict.fromkeys(names))
    if inputs is not None:
        coords.update(feature_data(inputs, features)[2])
    return coords


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
    # each model's family (constant data), where the data name families
    family_var = (
        {"model_family": dataset.model_family} if (dataset.model_family != "").any() else {}
    )
    # the models' further metadata columns (a families file's open, released_after...)
    family_var.update({META_PREFIX + k: v for k, v in dataset.model_meta.items()})
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
            **family_var,
        },
        coords={
            **_coords(dataset, samples),
            **feature_coords,
            **({"style_covariate": list(dataset.style)} if dataset.style else {}),
            **_dif_coords(dataset, config, samples),
        },
        dims={
            **dims,
            **observed_dims,
            **feature_dims,
            **dict.fromkeys(ITEM_LABELS, ["item"]),
            **dict.fromkeys(family_var, ["model"]),
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
    add_log_likelihood(idata, samples, dataset, inputs, config)
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
        repeated = bool((dataset.static_n > 1).any())
        # one answer per cell: labels as before (int8); repeated samples: the counts, and
        # the answers per cell as ``static_n`` (a run without it has one answer per cell)
        observed["static_y"] = dataset.static_y.astype(np.int32 if repeated else np.int8)
        dims["static_y"] = ["static_cell"]
        if repeated:
            observed["static_n"] = dataset.static_n.astype(np.int32)
            dims["static_n"] = ["static_cell"]
        if dataset.has_judges:
            observed["static_judge"] = dataset.judges[dataset.static_judge]
            dims["static_judge"] = ["static_cell"]
        labels["static_model"] = ("static_cell", label(dataset.models, dataset.static_model))
        labels["static_item"] = ("static_cell", label(dataset.items, dataset.static_item))
    if inputs.has_arena:
        observed["arena_z"] = dataset.arena_z
        observed["arena_reward"] = dataset.arena_reward
        dims["arena_z"] = dims["arena_reward"] = ["arena_cell"]
        if (dataset.arena_n > 1).any():  # rewards averaged per cell (repeated samples)
            observed["arena_n"] = dataset.arena_n.astype(np.int32)
            dims["arena_n"] = ["arena_cell"]
        if dataset.has_judges:
            observed["arena_judge"] = dataset.judges[dataset.arena_judge]
            dims["arena_judge"] = ["arena_cell"]
        if dataset.style:  # raw covariates; the fit standardises them over the cells
            observed["arena_style"] = dataset.arena_style
            dims["arena_style"] = ["arena_cell", "style_covariate"]
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
