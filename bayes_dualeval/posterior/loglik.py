"""The data's pointwise log likelihood, the run's ``log_likelihood`` group.

One value per static label (``static``) and one per arena prompt (``arena``: its decisive
pairs or its rewards, and its level term), both-bad pseudo-observations and likelihood
powers left out; the group's ``unit`` attribute says what one value is
(:func:`loglik_unit`), so that PSIS-LOO (:mod:`bayes_dualeval.posterior.loo`) compares only
runs of the same data term. Beyond a budget of stored values and evaluations the group holds
evenly thinned draws, or is left out with the reason in ``posterior.attrs``.
"""

from __future__ import annotations

import json
from functools import partial

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr

from bayes_dualeval.core.thinning import evenly_spaced
from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.model import parameters
from bayes_dualeval.model.config import ModelConfig
from bayes_dualeval.model.inputs import ModelInputs
from bayes_dualeval.model.priors import uses_level
from bayes_dualeval.model.spec import DualEvalModel

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
#: Sites the pointwise log likelihood reads (declared in :mod:`bayes_dualeval.model.parameters`).
LOGLIK_SITES = parameters.LIKELIHOOD_SITES


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


def add_log_likelihood(
    idata, samples: dict, dataset: Dataset, inputs: ModelInputs, config: ModelConfig
) -> None:
    """Add the ``log_likelihood`` group to ``idata`` (in place), thinned within the budget.

    Left out, with the reason in ``idata.posterior.attrs[LOGLIK_OMITTED_ATTR]``, when the
    budget leaves fewer than :data:`MIN_LOGLIK_DRAWS` draws.
    """
    n_chain, n_draw = samples["theta"].shape[:2]
    keep = loglik_draws(n_chain, n_draw, inputs)
    if keep is not None and len(keep) == 0:
        idata.posterior.attrs[LOGLIK_OMITTED_ATTR] = (
            f"{_stored_per_draw(inputs):,} pointwise values per draw (static labels and "
            f"arena prompts): the budget of {MAX_POINTWISE:.0e} stored values and "
            f"{LOGLIK_ELEMENTS:.0e} evaluations leaves fewer than {MIN_LOGLIK_DRAWS} draws"
        )
        return
    if keep is not None:
        samples = {k: samples[k][:, keep] for k in LOGLIK_SITES if k in samples}
    group = _group(samples, dataset, inputs, config, keep)
    if group is not None:
        idata.add_groups(log_likelihood=group)


def _group(samples, dataset, inputs, config, keep) -> xr.Dataset | None:
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
    group = group.drop_vars("static_cell", errors="ignore")
    group.attrs[LOGLIK_UNIT_ATTR] = json.dumps(loglik_unit(config, inputs))
    return group
