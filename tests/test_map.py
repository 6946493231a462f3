"""MAP keeps the latent scale, reports convergence honestly, and reads the model right."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
from numpyro.handlers import substitute, trace
from numpyro.infer.util import constrain_fn
from scipy.stats import spearmanr

from bayes_dualeval.core.errors import ConfigError
from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.inference import item_integral, mode
from bayes_dualeval.inference.mode import run_map
from bayes_dualeval.inference.sampling import SamplerSettings, sample
from bayes_dualeval.model.config import load_spec
from bayes_dualeval.model.inputs import build_inputs
from bayes_dualeval.model.joint import dualeval_model
from bayes_dualeval.model.simulate import simulate


def wide_static(n_models=10, n_items=3000, seed=0):
    """Few models, many items: evenly spread true abilities (sd 1), 2PL items."""
    rng = np.random.default_rng(seed)
    theta = np.linspace(-1.0, 1.0, n_models)
    theta /= theta.std()
    b = rng.normal(size=n_items)
    a = np.exp(rng.normal(0.0, 0.3, n_items))
    p = 1.0 / (1.0 + np.exp(-a * (theta[:, None] - b)))
    y = (rng.random(p.shape) < p).astype(int)
    names = [f"model-{i:02d}" for i in range(n_models)]
    frame = pd.DataFrame(
        {
            "model_label": np.repeat(names, n_items),
            "dataset": "wide",
            "sample_index": np.tile(np.arange(n_items), n_models),
            "correct": y.ravel(),
        }
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = Dataset.from_frames(static=frame, source="wide")
    truth = dict(zip(names, theta, strict=True))
    return ds, np.array([truth[m] for m in ds.models])


@pytest.mark.study
def test_map_keeps_the_spread_on_a_wide_static_matrix():
    # The joint mode of the old MAP squeezed these abilities to half their spread, tied
    # neighbours and sent discriminations into the thousands while claiming convergence.
    ds, true = wide_static()
    config = load_spec("dualeval-2pl").replace(mode="static")
    inputs, _ = build_inputs(ds, config)
    draws = run_map(inputs, config, SamplerSettings(sampler="map", seed=0))
    theta = draws.samples["theta"][0, 0]
    assert draws.samples["theta"].shape == (1, 1, ds.n_models)
    assert 0.8 <= theta.std() / true.std() <= 1.2
    assert spearmanr(theta, true)[0] >= 0.95
    assert np.diff(np.sort(theta)).min() > 0.1 * theta.std()  # no tied neighbours
    assert draws.samples["a"].max() < 5.0
    info = draws.info
    assert info["converged"]
    assert info["grad_norm"] <= info["grad_tol"]
    assert info["newton_converged"]


def test_map_does_not_claim_convergence_it_has_not_reached():
    ds, _ = wide_static(6, 200, seed=1)
    config = load_spec("dualeval-2pl").replace(mode="static")
    inputs, _ = build_inputs(ds, config)
    draws = run_map(inputs, config, SamplerSettings(sampler="map", map_steps=1, seed=0))
    info = draws.info
    assert info["steps"] <= 250
    assert info["converged"] == (
        info["grad_norm"] <= info["grad_tol"] and info["relative_change"] <= mode.RTOL
    )


def _joint_inputs(config):
    static, arena, _ = simulate(5, 12, 8, missing=0.1, seed=4)
    static["source"], arena["source"] = "bench", "arena"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = Dataset.from_frames(static=static, arena=arena)
    return build_inputs(ds, config)[0]


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"lambda_arena": 0.5, "lambda_static": 2.0},
        {"arena_likelihood": "reward"},
        {"arena_weight": "calibrated", "arena_weight_factor": 2.5},
    ],
)
def test_item_likelihood_matches_the_model(changes):
    """The per-item terms MAP integrates add up to the model's likelihood factors."""
    config = load_spec("dualeval-2pl").replace(**changes)
    inputs = _joint_inputs(config)
    args = (inputs, config)
    sites = mode._latent_sites(args)
    keys = jax.random.split(jax.random.PRNGKey(3), len(sites))
    items = [n for n, (_, plates) in sites.items() if item_integral.ITEM_PLATE in plates]

    @jax.jit  # one program: run eagerly, every primitive compiles on its own
    def both_sides(z, inputs):
        args = (inputs, config)
        values = constrain_fn(dualeval_model, args, {}, z, return_deterministic=True)
        tr = trace(substitute(dualeval_model, data=values)).get_trace(*args)
        factors = sum(
            jnp.sum(site["fn"].log_prob(site["value"])) * (site["scale"] or 1.0)
            for site in tr.values()
            if site["type"] == "sample" and site["is_observed"]
        )
        problem = item_integral.ItemIntegral(inputs, config, tuple(items))
        x = jnp.stack([values["b"], jnp.log(values["a"])])
        extra = {n: values.get(n) for n in item_integral.ARENA_SITES}
        return jnp.sum(problem.item_loglik(x, values["theta"], extra)), factors

    with jax.enable_x64(True):
        z = {
            name: jax.random.normal(key, shape, jnp.float64) * 0.5
            for key, (name, (shape, _)) in zip(keys, sites.items(), strict=True)
        }
        total, factors = (float(v) for v in both_sides(z, inputs))
    assert total == pytest.approx(factors, rel=1e-6, abs=1e-6)


@pytest.mark.parametrize("irt", ["3pl", "4pl"])
def test_map_refuses_links_with_floors_or_ceilings(irt):
    config = load_spec("dualeval-2pl").replace(irt=irt)
    inputs = _joint_inputs(config)
    settings = SamplerSettings(sampler="map")
    refused = f"MAP supports irt='1pl' and irt='2pl', not irt='{irt}': use sampler='nuts'"
    with pytest.raises(ConfigError, match=refused):
        sample(inputs, config, settings)
    with pytest.raises(ConfigError, match="MAP supports"):
        run_map(inputs, config, settings)
    mode.check_map_supports(config.replace(mode="bt"))  # no items: nothing to integrate
