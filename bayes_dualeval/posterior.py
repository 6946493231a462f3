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

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr

from bayes_dualeval.config import ModelConfig
from bayes_dualeval.dataset import Dataset
from bayes_dualeval.inference import Draws
from bayes_dualeval.inputs import ModelInputs
from bayes_dualeval.model import arena_loglik, static_loglik

#: Site name -> dimension names after (chain, draw).
SITE_DIMS = {
    "theta": ("model",),
    "theta_centred": ("model",),
    "theta_contrast": ("contrast",),
    "a": ("item",),
    "b": ("item",),
    "b_raw": ("item",),
    "b_rel": ("item",),
    "log_a_raw": ("item",),
    "log_a": ("item",),
    "mu_b": ("group",),
    "sigma_b": ("group",),
    "mu_log_a": ("group",),
    "sigma_log_a": ("group",),
}
#: Largest pointwise log-likelihood array kept per cell (draws x cells); above it the
#: static term is stored per item instead.
MAX_POINTWISE = 60_000_000


def _coords(dataset: Dataset) -> dict:
    return {
        "model": dataset.models,
        "item": dataset.items,
        "group": dataset.groups,
        "contrast": np.arange(max(dataset.n_models - 1, 0)),
    }


def pointwise_loglik(
    samples: dict, inputs: ModelInputs, config: ModelConfig, *, chunk: int = 256
) -> dict:
    """Pointwise log likelihood for every draw.

    Parameters
    ----------
    samples : dict
        Draws shaped ``(chain, draw, ...)``.
    inputs : ModelInputs
    config : ModelConfig
    chunk : int
        Draws evaluated at once (bounds memory).

    Returns
    -------
    dict
        ``static``: shape (chain, draw, S) (or (chain, draw, Q) summed per item when S is
        very large); ``arena``: shape (chain, draw, Q) (zero for non-arena items).
    """
    theta = samples["theta"]
    n_chain, n_draw = theta.shape[:2]
    flat = {k: np.reshape(v, (n_chain * n_draw, *v.shape[2:])) for k, v in samples.items()}
    n = n_chain * n_draw
    ones = np.ones((n,), np.float32)
    a = flat.get("a")
    per_item_static = inputs.static_y.shape[0] * n > MAX_POINTWISE

    def one(theta, a, b, gamma, sigma):
        out = {}
        if inputs.has_static:
            ll = static_loglik(theta, a, b, inputs)
            if per_item_static:
                ll = jax.ops.segment_sum(ll, inputs.static_item, inputs.n_items)
            out["static"] = ll
        if inputs.has_arena:
            out["arena"] = arena_loglik(theta, a, b, gamma, sigma, inputs, config)
        return out

    fn = jax.jit(jax.vmap(one, in_axes=(0, 0 if a is not None else None, 0, 0, 0)))
    b = flat.get("b", np.zeros((n, inputs.n_items), np.float32))
    gamma = flat.get("gamma", ones)
    sigma = flat.get("sigma", ones)
    parts = []
    for start in range(0, n, chunk):
        sl = slice(start, start + chunk)
        parts.append(
            jax.device_get(
                fn(
                    jnp.asarray(flat["theta"][sl]),
                    None if a is None else jnp.asarray(a[sl]),
                    jnp.asarray(b[sl]),
                    jnp.asarray(gamma[sl]),
                    jnp.asarray(sigma[sl]),
                )
            )
        )
    out = {}
    for key in parts[0]:
        arr = np.concatenate([p[key] for p in parts])
        out[key] = arr.reshape(n_chain, n_draw, *arr.shape[1:])
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
    ll = pointwise_loglik(samples, inputs, config)
    loglik = {}
    ll_coords = dict(base)
    if "static" in ll:
        if ll["per_item_static"]:
            loglik["static"] = (("chain", "draw", "item"), ll["static"].astype(np.float32))
            ll_coords["item"] = dataset.items
        else:
            loglik["static"] = (("chain", "draw", "static_cell"), ll["static"].astype(np.float32))
    if "arena" in ll:
        prompts = dataset.arena_items
        loglik["arena"] = (
            ("chain", "draw", "prompt"),
            ll["arena"][..., prompts].astype(np.float32),
        )
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
    return az.InferenceData(**groups)
