"""Package sampler draws as an :class:`arviz.InferenceData` with real labels.

Groups: ``posterior`` (``theta`` with dim ``model``; ``a``, ``b`` with dim ``item``; ``gamma``;
group-level hyperparameters with dim ``group``; ``theta_centred``, abilities centred to
mean zero across models), ``sample_stats``, ``observed_data`` (``static_y`` per static
cell, ``arena_z`` per arena cell, with model and item labels as coordinates),
``log_likelihood`` (``static`` per static cell, ``arena`` per arena prompt) and
``constant_data`` (item metadata). Every item coordinate carries its kind, source and
domain, so ``az.summary`` and ``az.plot_forest`` read well.
"""

from __future__ import annotations

import json

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr
from scipy import sparse

from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.inference.sampling import Draws
from bayes_dualeval.model.config import ModelConfig
from bayes_dualeval.model.inputs import ModelInputs
from bayes_dualeval.model.spec import DualEvalModel

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
}
#: Largest pointwise log-likelihood array kept per cell (draws x cells); above it the
#: static term is stored per item instead.
MAX_POINTWISE = 60_000_000
#: Largest number of evaluations (draws x (static cells + arena cells + decisive pairs))
#: spent on the pointwise log likelihood; beyond it the ``log_likelihood`` group holds an
#: evenly thinned subset of each chain's draws (its ``draw`` coordinate says which).
#: 4 NUTS chains x 1,000 draws at DualEval's paper scale stay below it; SVI on AlpacaEval
#: (a million decisive pairs) keeps about 180 of its 1,000 draws.
LOGLIK_ELEMENTS = 200_000_000
#: Evaluations per compiled call of the pointwise log likelihood (bounds its memory).
LOGLIK_CHUNK = 8_000_000
#: Sites the pointwise log likelihood reads.
LOGLIK_SITES = ("theta", "a", "b", "c", "d", "gamma", "sigma", "level_c")


def _coords(dataset: Dataset) -> dict:
    return {
        "model": dataset.models,
        "item": dataset.items,
        "group": dataset.groups,
        "contrast": np.arange(max(dataset.n_models - 1, 0)),
        "arena_source": dataset.groups[np.unique(dataset.item_group[dataset.arena_items])],
        "static_item": dataset.items[np.unique(dataset.static_item)],
    }


def _per_draw(inputs: ModelInputs) -> int:
    """Evaluations of one draw's pointwise log likelihood: static cells, arena cells, pairs."""
    return int(inputs.static_y.shape[0] + inputs.arena_item.shape[0] + inputs.pair_i.shape[0])


def loglik_draws(n_chain: int, n_draw: int, inputs: ModelInputs) -> np.ndarray | None:
    """Draws (per chain) that get a pointwise log likelihood; None for all of them.

    At most :data:`LOGLIK_ELEMENTS` evaluations in all: beyond it, evenly spaced draws of
    each chain (the first and the last included).
    """
    keep = LOGLIK_ELEMENTS // max(_per_draw(inputs) * n_chain, 1)
    if keep >= n_draw:
        return None
    return np.unique(np.linspace(0, n_draw - 1, max(keep, 2)).round().astype(int))


def pointwise_loglik(
    samples: dict, inputs: ModelInputs, config: ModelConfig, *, chunk: int | None = None
) -> dict:
    """Pointwise log likelihood for every draw.

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

    Returns
    -------
    dict
        ``static``: shape (chain, draw, S) (or (chain, draw, Q) summed per item when S is
        very large); ``arena``: shape (chain, draw, Q) (zero for non-arena items).
    """
    theta = samples["theta"]
    n_chain, n_draw = theta.shape[:2]
    n = n_chain * n_draw
    params = {k: np.reshape(v, (n, *v.shape[2:])) for k, v in samples.items() if k in LOGLIK_SITES}
    per_item_static = inputs.static_y.shape[0] * n > MAX_POINTWISE
    model = DualEvalModel(config)

    def one(draw):
        out = {}
        if inputs.has_static:
            out["static"] = model.static_loglik(draw, inputs)  # summed per item below
        if inputs.has_arena:
            out["arena"] = model.arena_loglik(draw, inputs)
        return out

    fn = jax.jit(jax.vmap(one))
    if per_item_static:
        item = np.asarray(inputs.static_item)
        to_item = sparse.csr_array(
            (np.ones(len(item), np.float32), (item, np.arange(len(item)))),
            shape=(inputs.n_items, len(item)),
        )
    if chunk is None:
        chunk = LOGLIK_CHUNK // max(_per_draw(inputs), 1)
    chunk = int(min(max(chunk, 1), n))
    out = {}
    for start in range(0, n, chunk):
        sl = np.minimum(np.arange(start, start + chunk), n - 1)  # pad with the last draw
        got = min(chunk, n - start)
        part = jax.device_get(fn({k: jnp.asarray(v[sl]) for k, v in params.items()}))
        if per_item_static:  # a sparse product: XLA's scatter-add is slow on the CPU
            part["static"] = (to_item @ part["static"][:got].T).T
        for key, value in part.items():
            if key not in out:
                out[key] = np.empty((n, *value.shape[1:]), np.float32)
            out[key][start : start + got] = value[:got]
    out = {k: v.reshape(n_chain, n_draw, *v.shape[1:]) for k, v in out.items()}
    out["per_item_static"] = per_item_static
    return out


def to_inference_data(
    draws: Draws, dataset: Dataset, inputs: ModelInputs, config: ModelConfig
) -> az.InferenceData:
    """Build the run's :class:`arviz.InferenceData`.

    Parameters
    ----------
    draws : Draws
        Output of a sampler.
    dataset : Dataset
        The data the model was fitted to (labels come from here).
    inputs : ModelInputs
        The model's arrays (for the pointwise log likelihood).
    config : ModelConfig

    Returns
    -------
    arviz.InferenceData
    """
    coords = _coords(dataset)
    samples = dict(draws.samples)
    samples["theta_centred"] = samples["theta"] - samples["theta"].mean(axis=-1, keepdims=True)
    post = {}
    for name, value in samples.items():
        dims = ("chain", "draw", *SITE_DIMS.get(name, ()))
        if value.ndim != len(dims):
            dims = ("chain", "draw", *[f"{name}_dim_{k}" for k in range(value.ndim - 2)])
        post[name] = (dims, np.asarray(value))
    n_chain, n_draw = samples["theta"].shape[:2]
    base = {"chain": np.arange(n_chain), "draw": np.arange(n_draw)}
    used = {d for dims, _ in post.values() for d in dims}
    post_coords = {**base, **{k: v for k, v in coords.items() if k in used}}
    if "item" in used:
        post_coords.update(
            item_kind=("item", dataset.item_kind),
            item_source=("item", dataset.item_source),
            item_domain=("item", dataset.item_domain),
        )
    posterior = xr.Dataset(post, coords=post_coords)
    groups = {"posterior": posterior}
    if draws.stats:
        groups["sample_stats"] = xr.Dataset(
            {k: (("chain", "draw"), np.asarray(v)) for k, v in draws.stats.items()}, coords=base
        )
    observed = {}
    obs_coords = {}
    if inputs.has_static:
        observed["static_y"] = ("static_cell", dataset.static_y.astype(np.int8))
        obs_coords["static_model"] = ("static_cell", dataset.models[dataset.static_model])
        obs_coords["static_item"] = ("static_cell", dataset.items[dataset.static_item])
    if inputs.has_arena:
        observed["arena_z"] = ("arena_cell", dataset.arena_z)
        observed["arena_reward"] = ("arena_cell", dataset.arena_reward)
        obs_coords["arena_model"] = ("arena_cell", dataset.models[dataset.arena_model])
        obs_coords["arena_item"] = ("arena_cell", dataset.items[dataset.arena_item])
    if observed:
        groups["observed_data"] = xr.Dataset(observed, coords=obs_coords)
    keep = loglik_draws(n_chain, n_draw, inputs)
    if keep is not None:
        samples = {k: samples[k][:, keep] for k in LOGLIK_SITES if k in samples}
    ll = pointwise_loglik(samples, inputs, config)
    loglik = {}
    ll_coords = {"chain": base["chain"], "draw": base["draw"] if keep is None else keep}
    if "static" in ll:
        if ll["per_item_static"]:
            loglik["static"] = (("chain", "draw", "item"), ll["static"])
            ll_coords["item"] = dataset.items
        else:
            loglik["static"] = (("chain", "draw", "static_cell"), ll["static"])
    if "arena" in ll:
        prompts = dataset.arena_items
        loglik["arena"] = (("chain", "draw", "prompt"), ll["arena"][..., prompts])
        ll_coords["prompt"] = dataset.items[prompts]
    if loglik:
        groups["log_likelihood"] = xr.Dataset(loglik, coords=ll_coords)
    groups["constant_data"] = xr.Dataset(
        {
            "item_kind": ("item", dataset.item_kind),
            "item_source": ("item", dataset.item_source),
            "item_domain": ("item", dataset.item_domain),
            "item_group": ("item", dataset.groups[dataset.item_group]),
        },
        coords={"item": dataset.items},
    )
    groups["posterior"].attrs.update(DualEvalModel(config).to_attrs())
    return az.InferenceData(**groups)


def model_config_of(idata) -> ModelConfig | None:
    """The specification recorded in a run's posterior (None for runs that predate it)."""
    text = idata.posterior.attrs.get("model_config")
    if not text:
        return None
    return ModelConfig().replace(**json.loads(text))


def arena_levels_identified(idata) -> bool:
    """Whether the run's arena difficulties and discriminations are identified.

    They are not when the specification has no arena level term (``arena_level = "none"``,
    e.g. ``dualeval-offsets``, ``dualeval-paper``): pairs only see differences within a
    prompt. Runs that predate the recorded specification count as identified.
    """
    config = model_config_of(idata)
    return config is None or config.arena_levels_identified
