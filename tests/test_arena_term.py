"""The arena likelihood has one definition (bayes_dualeval.model.arena_term).

Every reader of the arena is evaluated here against that definition on the same inputs:
the joint model's ``arena`` factor in both layouts (arena lists, the prompts x pairs
matrix), the pointwise log likelihood per prompt that LOO reads, and the posterior
predictive checks' win probabilities; the reference sums the definition over the
distilled pairs themselves (not over the layouts' per-cell sums). The reward likelihood's
integrated prompt offset is checked against numerical integration, and the curvatures the
information of a prompt reads against automatic differentiation of the terms.
``tests/test_score.py`` checks ``score``'s and ``adaptive``'s grid kernels against the
same functions, and ``tests/test_map.py`` MAP's item likelihood against the model.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import compiled_trace
from scipy.special import log_expit, logsumexp

from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.inference import layout
from bayes_dualeval.model import arena_term, facets, links, parameters
from bayes_dualeval.model.config import ModelConfig
from bayes_dualeval.model.inputs import build_inputs, contrast_weight
from bayes_dualeval.model.joint import dualeval_model
from bayes_dualeval.model.simulate import simulate
from bayes_dualeval.model.spec import DualEvalModel


def _dataset(seed=5):
    static, arena, _ = simulate(6, 10, 7, missing=0.15, seed=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Dataset.from_frames(static=static, arena=arena)


#: one configuration per arena likelihood and weight: the default pairs with the level
#: term, both-bad pairs weighted and DualEval's unweighted pairs, the rewards,
#: Bradley-Terry on the abilities, and a weight calibrated from the data
CONFIGS = {
    "pairs, level": ModelConfig(),
    "pairs-full, lambda_bb 2, lambda_arena 0.5": ModelConfig(
        arena_likelihood="pairs-full", lambda_bb=2.0, lambda_arena=0.5, arena_level="none"
    ),
    "reward, level": ModelConfig(arena_likelihood="reward"),
    "bt": ModelConfig(mode="bt"),
    "pairs, level, calibrated weight 2.5": ModelConfig(
        arena_weight="calibrated", arena_weight_factor=2.5
    ),
}


def _reference(values, inputs, pairs, ds, config):
    """The arena term per prompt from the definition, summed over the distilled pairs.

    Returns ``(soft, both_bad)`` per item: the pairs, rewards and level term unweighted,
    and the both-bad terms unweighted.
    """
    term = DualEvalModel(config).arena
    q_all = ds.n_items
    soft, bad_terms = np.zeros(q_all), np.zeros(q_all)
    theta = np.asarray(values["theta"], np.float64)
    if term.kind == "bt":
        decisive = ~pairs.both_bad
        x = theta[pairs.i] - theta[pairs.j]
        w = contrast_weight(pairs.unit_models, config.arena_likelihood)
        terms = arena_term.pair(x, pairs.target, w)[decisive]
        np.add.at(soft, pairs.item[decisive], terms)
        return soft, bad_terms
    a, b = (np.asarray(values[k], np.float64) for k in ("a", "b"))
    gamma = float(values["gamma"])
    model, item = np.asarray(ds.arena_model), np.asarray(ds.arena_item)
    eta = links.eta(theta[model], b[item], a[item])
    p = links.probability(eta)
    scores = term.score(p, gamma)
    if term.kind == "reward" and "level_c" in values:
        # with the level term: every reward around its source's intercept, no offset of its
        # own (the level's standard error is sigma / sqrt(n))
        sigma, z = float(values["sigma"]), np.asarray(ds.arena_z, np.float64)
        level_c = np.asarray(values["level_c"], np.float64)
        shift = level_c[np.asarray(inputs.level_group)[item]]
        np.add.at(soft, item, arena_term.gaussian(z - shift - scores, sigma))
        return soft, bad_terms
    if term.kind == "reward":
        sigma = float(values["sigma"])
        z = np.asarray(ds.arena_z, np.float64)
        for q in np.unique(item):
            cells = item == q
            # the prompt's offset c integrated out under a flat prior, numerically
            c = np.linspace(-8, 8, 20_001)
            mu = scores[cells][None, :] + c[:, None]
            dens = arena_term.gaussian(z[cells][None, :] - mu, sigma).sum(axis=1)
            soft[q] += logsumexp(dens) + np.log(c[1] - c[0])
    else:
        w = contrast_weight(pairs.unit_models, config.arena_likelihood)
        x = scores[pairs.row_i] - scores[pairs.row_j]
        dec = ~pairs.both_bad
        np.add.at(soft, pairs.item[dec], arena_term.pair(x, pairs.target, w)[dec])
        bad = arena_term.both_bad(eta[pairs.row_i], w) + arena_term.both_bad(eta[pairs.row_j], w)
        np.add.at(bad_terms, pairs.item[~dec], bad[~dec])
    if "level_c" in values:
        level_c = np.asarray(values["level_c"], np.float64)
        for q in np.unique(item):
            cells = item == q
            zbar = float(np.mean(ds.arena_z[cells]))
            shift = level_c[int(inputs.level_group[q])]
            se = float(inputs.prompt_se[q])
            soft[q] += arena_term.level(zbar, shift, scores[cells].mean(), se)
    return soft, bad_terms


@pytest.mark.parametrize("name", list(CONFIGS))
def test_every_layout_and_the_pointwise_loglik_are_the_definition_summed(name):
    """The model's factor (lists and matrix) and LOO's per-prompt values against the data."""
    config = CONFIGS[name]
    ds = _dataset()
    inputs, pairs = build_inputs(ds, config)
    tr = compiled_trace(dualeval_model, inputs, config, seed=2)
    values = {k: np.asarray(v["value"]) for k, v in tr.items()}
    soft, bad = _reference(values, inputs, pairs, ds, config)
    weight = DualEvalModel(config).arena.weight  # lambda_arena, or its calibrated value
    want = weight * soft.sum() + config.lambda_bb * bad.sum()
    assert float(tr["arena"]["log_prob"]) == pytest.approx(want, rel=1e-5, abs=1e-3)
    if DualEvalModel(config).arena_term == "pairs":
        latent = {k: v["value"] for k, v in tr.items() if v["type"] == "sample"}
        matrix = layout.with_arena_matrix(inputs)
        other = compiled_trace(dualeval_model, matrix, config, seed=2, data=latent)
        assert float(other["arena"]["log_prob"]) == pytest.approx(want, rel=1e-5, abs=1e-3)
    # the pointwise log likelihood, per prompt, unweighted (LOO reads it with lambda_bb 0)
    loo = DualEvalModel(config.replace(lambda_bb=0.0)).arena_loglik(values, inputs)
    np.testing.assert_allclose(np.asarray(loo), soft, rtol=1e-5, atol=1e-3)


def test_a_missing_site_is_an_error_not_a_default():
    config = ModelConfig()
    inputs, _ = build_inputs(_dataset(), config)
    values = compiled_trace(dualeval_model, inputs, config, seed=0)
    draw = {k: v["value"] for k, v in values.items() if k != "gamma"}
    with pytest.raises(Exception, match="gamma"):
        DualEvalModel(config).arena_loglik(draw, inputs)


def test_the_parts_of_a_pair_add_up_in_numpy_and_jax():
    rng = np.random.default_rng(0)
    x, t, w = rng.normal(0, 3, 50), rng.random(50), rng.random(50)
    want = w * (t * log_expit(x) + (1 - t) * log_expit(-x))
    np.testing.assert_allclose(arena_term.pair(x, t, w), want, rtol=1e-12)
    got = arena_term.pair(jnp.asarray(x), jnp.asarray(t), jnp.asarray(w))
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)
    assert isinstance(got, jax.Array)
    np.testing.assert_allclose(
        arena_term.win_probability(x, 0.0), np.exp(log_expit(x)), rtol=1e-12
    )


def test_the_curvatures_are_the_terms_second_derivatives():
    """What the information of a prompt reads, against automatic differentiation."""
    xs = jnp.linspace(-6.0, 6.0, 25)
    with jax.enable_x64(True):
        xs = xs.astype(jnp.float64)
        for t in (0.0, 0.3, 1.0):  # the soft target does not move the curvature
            second = jax.vmap(jax.grad(jax.grad(lambda x, t=t: arena_term.pair(x, t, 0.7))))
            np.testing.assert_allclose(
                -second(xs), arena_term.pair_curvature(xs, 0.7), rtol=1e-9, atol=1e-12
            )
        second = jax.vmap(jax.grad(jax.grad(lambda e: arena_term.both_bad(e, 1.3))))
        np.testing.assert_allclose(
            -second(xs), arena_term.both_bad_curvature(xs, 1.3), rtol=1e-9, atol=1e-12
        )
        second = jax.vmap(jax.grad(jax.grad(lambda r: arena_term.gaussian(r, 0.6))))
        np.testing.assert_allclose(-second(xs), arena_term.gaussian_curvature(0.6), rtol=1e-9)


def test_the_reward_win_probability_is_that_of_two_noisy_rewards():
    rng = np.random.default_rng(1)
    s_i, s_j, sigma = 0.4, -0.1, 0.8
    z_i = s_i + sigma * rng.standard_normal(400_000)
    z_j = s_j + sigma * rng.standard_normal(400_000)
    got = arena_term.reward_win_probability(s_i, s_j, sigma)
    assert got == pytest.approx(np.mean(z_i > z_j), abs=4e-3)  # 5 standard errors


@pytest.mark.parametrize("judges", [1, 3])
def test_the_facets_scores_enter_the_pairs_and_the_layout_keeps_them(judges):
    """With judges or style alone, the model's factor is the definition over the pairs.

    One judge with a style covariate once went to NUTS's prompt matrix, which does not
    carry the style term: the layout must keep the lists.
    """
    static, arena, _ = simulate(6, 8, 9, judges=judges, self_preference=0.8,
                                style_effect=0.7, seed=3)  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = Dataset.from_frames(static=static, arena=arena, style=("length",))
    config = ModelConfig()
    inputs, pairs = build_inputs(ds, config)
    assert layout.arena_layout(inputs, config) == "cells"
    tr = compiled_trace(dualeval_model, inputs, config, seed=4)
    v = {k: np.asarray(s["value"], np.float64) for k, s in tr.items()}
    eta = links.eta(v["theta"][ds.arena_model], v["b"][ds.arena_item], v["a"][ds.arena_item])
    p = links.probability(eta)
    facet = facets.Facets.from_draws(v, v["gamma"])
    family = np.asarray(inputs.model_family)[ds.arena_model]
    s = np.asarray(facets.scores(p, facet, np.asarray(inputs.arena_judge), family,
                                 np.asarray(inputs.arena_style)))  # fmt: skip
    w = contrast_weight(pairs.unit_models, config.arena_likelihood)
    dec = ~pairs.both_bad
    x = s[pairs.row_i] - s[pairs.row_j]
    want = arena_term.pair(x, pairs.target, w)[dec].sum()
    # the level term per unit: its mean score on its judge's level scale, and its judge's
    # severity (several judges)
    unit = np.asarray(inputs.arena_unit)
    severity = v.get("severity", np.zeros(judges))
    scale = v.get("level_scale", np.ones(max(judges, 1)))
    assert ("level_scale" in v) == (judges > 1)
    for u in np.unique(unit):
        cells = unit == u
        shift = v["level_c"][int(inputs.level_group[u])] + severity[u // ds.n_items]
        mean = scale[u // ds.n_items] * s[cells].mean()
        want += arena_term.level(float(inputs.prompt_zbar[u]), shift, mean,
                                 float(inputs.prompt_se[u]))  # fmt: skip
    assert float(tr["arena"]["log_prob"]) == pytest.approx(want, rel=1e-5, abs=1e-3)


@pytest.mark.parametrize("judges", [0, 3])
def test_the_checks_win_probabilities_are_the_definitions(judges):
    """The posterior predictive checks' pair probabilities, from a run's posterior."""
    from bayes_dualeval.checks.fitted import resolve
    from bayes_dualeval.inference.sampling import Draws
    from bayes_dualeval.posterior.idata import to_inference_data

    extra = {"judges": judges, "self_preference": 0.8, "style_effect": 0.7} if judges else {}
    static, arena, _ = simulate(6, 8, 9, seed=5, **extra)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        style = ("length",) if judges else ()
        ds = Dataset.from_frames(static=static, arena=arena, style=style)
    config = ModelConfig()
    inputs, pairs = build_inputs(ds, config)
    draws = [compiled_trace(dualeval_model, inputs, config, seed=s) for s in (1, 2)]
    names = [n for n in draws[0] if n in parameters.SITE_DIMS]
    samples = {n: np.stack([np.asarray(d[n]["value"]) for d in draws])[None] for n in names}
    idata = to_inference_data(Draws(samples, {}), ds, inputs, config)
    fit = resolve(idata, ds, pairs, None, None)
    got = fit.pair_prob(np.array([0, 1]))  # (decisive pairs, draws)
    dec = ~pairs.both_bad
    for k, d in enumerate(draws):
        v = {n: np.asarray(d[n]["value"], np.float64) for n in names}
        eta = links.eta(v["theta"][ds.arena_model], v["b"][ds.arena_item], v["a"][ds.arena_item])
        p = links.probability(eta)
        if judges:
            family = np.asarray(inputs.model_family)[ds.arena_model]
            s = np.asarray(facets.scores(p, facets.Facets.from_draws(v, v["gamma"]),
                                         np.asarray(inputs.arena_judge), family,
                                         np.asarray(inputs.arena_style)))  # fmt: skip
        else:
            s = DualEvalModel(config).arena.score(p, v["gamma"])
        want = arena_term.win_probability(s[pairs.row_i], s[pairs.row_j])[dec]
        np.testing.assert_allclose(got[:, k], want, rtol=2e-5, atol=2e-6)
