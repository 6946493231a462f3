"""The arena pairs' calibrated weight: its defining property, and one weight for every reader.

The sandwich factor (:mod:`bayes_dualeval.model.arena_weight`) is ``p / tr(H^-1 J)``: 1 for
a true likelihood of independent units, smaller when a unit repeats its evidence
(overdispersion), larger when the observations scatter less than Bernoulli outcomes
(soft targets). On the model itself, pairs that are independent Bernoulli outcomes of the
model's win probabilities need a total weight of 1 per pair, i.e. the factor undoes the
``2 / n`` pair weight. Then every consumer (both layouts of the fit, MAP's item
likelihood, the LOO notes) applies the calibrated weight as a fixed ``lambda_arena`` of the
same value.
"""

from __future__ import annotations

import dataclasses
import warnings

import jax.numpy as jnp
import numpy as np
import pytest
from conftest import compiled_trace
from scipy.special import expit

from bayes_dualeval.core.errors import ConfigError
from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.inference import item_integral, layout
from bayes_dualeval.model import links
from bayes_dualeval.model.arena_weight import sandwich, sandwich_factor
from bayes_dualeval.model.config import ModelConfig
from bayes_dualeval.model.inputs import build_inputs
from bayes_dualeval.model.joint import dualeval_model
from bayes_dualeval.model.simulate import simulate
from bayes_dualeval.model.spec import DualEvalModel
from bayes_dualeval.posterior.loo import config_notes


def _logistic(y, x, beta):
    """Per-unit scores (rows) and the negative Hessian of a logistic regression at ``beta``."""
    p = expit(x @ beta)
    scores = (y - p)[:, None] * x
    hessian = (x * (p * (1 - p))[:, None]).T @ x
    return scores, hessian


def test_the_factor_is_one_for_a_likelihood_and_moves_with_dispersion():
    """Independent Bernoulli units: 1 (within 0.1 on 4,000 units, seeded); each unit's
    outcome counted twice: 1/2; soft targets equal to the probabilities plus small noise:
    far above 1."""
    rng = np.random.default_rng(0)
    n, beta = 4000, np.array([0.3, -1.0, 0.7])
    x = np.column_stack([np.ones(n), rng.normal(size=(n, 2))])
    p = expit(x @ beta)
    y = (rng.random(n) < p).astype(float)
    scores, hessian = _logistic(y, x, beta)
    assert sandwich_factor(scores, hessian).factor == pytest.approx(1.0, abs=0.1)
    # every unit's outcome entered twice: twice the score and twice the curvature
    twice = sandwich_factor(2 * scores, 2 * hessian).factor
    assert twice == pytest.approx(0.5, abs=0.05)
    soft = np.clip(p + rng.normal(0, 0.05, n), 0, 1)
    assert sandwich_factor(*_logistic(soft, x, beta)).factor > 10


def test_too_few_prompts_give_factor_one_and_say_why():
    out = sandwich_factor(np.ones((1, 3)), np.eye(3))
    assert out.factor == 1.0 and "two" in out.note


def _bernoulli_inputs(seed=0):
    """120 prompts x 8 models whose decisive pairs are Bernoulli draws of the model's win
    probability at the simulated truth, with that truth as the point."""
    static, arena, truth = simulate(8, 0, 120, seed=seed, prompt_offset_sd=0.0)
    arena["source"] = "arena"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = Dataset.from_frames(arena=arena)
    config = ModelConfig(mode="arena", arena_weight="calibrated", bb_ratio=0.0, tie_ratio=0.0)
    inputs, _ = build_inputs(ds, config)
    theta = np.array([truth["theta"][m] for m in ds.models])
    b = np.array([truth["items"][q]["b"] for q in ds.items])
    a = np.array([truth["items"][q]["a"] for q in ds.items])
    gamma = 4.0
    point = {"theta": theta, "b": b, "a": a, "gamma": np.asarray(gamma)}
    p = np.asarray(links.probability(links.eta(theta[ds.arena_model], b[ds.arena_item],
                                               a[ds.arena_item])))  # fmt: skip
    score = gamma * p
    i, j = np.asarray(inputs.pair_i), np.asarray(inputs.pair_j)
    rng = np.random.default_rng(seed)
    outcome = (rng.random(len(i)) < expit(score[i] - score[j])).astype(np.float32)
    inputs = dataclasses.replace(inputs, pair_t=jnp.asarray(outcome))
    return DualEvalModel(config), point, inputs


def test_bernoulli_pairs_get_a_total_weight_of_one_per_pair():
    """Each pair carries ``2 / n = 1/4``; the factor for independent Bernoulli pairs is
    ``n / 2 = 4`` (tolerance 25%: 120 prompts, the items' ridge, one seed)."""
    model, point, inputs = _bernoulli_inputs()
    weight = sandwich(model, point, inputs)
    assert weight.units == 120 and weight.parameters == 7
    assert weight.factor * 2 / 8 == pytest.approx(1.0, rel=0.25)


def test_a_calibrated_weight_is_asked_of_the_model_and_refused_before_it_is_computed():
    config = ModelConfig(arena_weight="calibrated")
    with pytest.raises(ConfigError, match="calibrated"):
        _ = DualEvalModel(config).arena.weight
    done = config.replace(arena_weight_factor=2.5, lambda_arena=0.8)
    assert DualEvalModel(done).arena.weight == pytest.approx(2.0)
    # the reward likelihood has no calibrated factor: its weight stays lambda_arena
    reward = done.replace(arena_likelihood="reward")
    assert DualEvalModel(reward).arena.weight == pytest.approx(0.8)
    # the fixed weight is lambda_arena exactly, whatever factor is recorded
    assert DualEvalModel(done.replace(arena_weight="fixed")).arena.weight == 0.8
    with pytest.raises(ConfigError, match="positive"):
        ModelConfig(arena_weight_factor=-1.0)


def _small():
    static, arena, _ = simulate(6, 10, 7, missing=0.15, seed=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Dataset.from_frames(static=static, arena=arena)


def test_every_consumer_applies_the_calibrated_weight_as_a_fixed_one_of_that_value():
    """Fit layouts (lists, matrix), MAP's item likelihood, the recorded specification and
    LOO's notes: a calibrated factor 2.5 reads exactly as ``lambda_arena = 2.5``."""
    calibrated = ModelConfig(arena_weight="calibrated", arena_weight_factor=2.5, lambda_bb=1.0)
    fixed = ModelConfig(lambda_arena=2.5, lambda_bb=1.0)
    ds = _small()
    inputs, _ = build_inputs(ds, calibrated)
    tr = compiled_trace(dualeval_model, inputs, calibrated, seed=2)
    latent = {k: v["value"] for k, v in tr.items() if v["type"] == "sample"}
    matrix = layout.with_arena_matrix(inputs)
    for data in (inputs, matrix):
        got = compiled_trace(dualeval_model, data, calibrated, seed=2, data=latent)
        want = compiled_trace(dualeval_model, data, fixed, seed=2, data=latent)
        assert float(got["arena"]["log_prob"]) == pytest.approx(
            float(want["arena"]["log_prob"]), rel=1e-6
        )
    items = ("b_raw", "log_a_raw")
    values = {k: v["value"] for k, v in tr.items()}
    x = jnp.stack([values["b"], jnp.log(values["a"])])
    extra = {n: values.get(n) for n in item_integral.ARENA_SITES}
    per_item = [
        item_integral.ItemIntegral(inputs, c, items).item_loglik(x, values["theta"], extra)
        for c in (calibrated, fixed)
    ]
    np.testing.assert_allclose(np.asarray(per_item[0]), np.asarray(per_item[1]), rtol=1e-6)
    # the run records the factor, and a reader gets the same model back
    again = DualEvalModel(ModelConfig().replace(**calibrated.to_dict()))
    assert again.arena.weight == 2.5
    assert any("arena weight 2.5" in note for note in config_notes(again))


def test_a_fit_computes_records_and_reads_back_one_weight():
    """``fit`` with a calibrated weight: the factor in ``diagnostics.json``, the recorded
    specification and the model read back from the posterior are the same number."""
    from bayes_dualeval.inference.settings import SamplerSettings
    from bayes_dualeval.runs.fit import fit

    result = fit(_small(), ModelConfig(arena_weight="calibrated"), SamplerSettings(sampler="map"))
    record = result.diagnostics["arena_weight"]
    assert record["setting"] == "calibrated" and record["units"] == 7
    assert record["factor"] > 0 and record["weight"] == pytest.approx(record["factor"])
    assert result.config.arena_weight_factor == record["factor"]
    assert result.diagnostics["config"]["arena_weight_factor"] == record["factor"]
    again = DualEvalModel.from_idata(result.idata)
    assert again.arena.weight == pytest.approx(record["weight"])
    # the fixed weight records nothing and reads lambda_arena
    fixed = fit(_small(), ModelConfig(), SamplerSettings(sampler="map"))
    assert "arena_weight" not in fixed.diagnostics
    assert DualEvalModel.from_idata(fixed.idata).arena.weight == 1.0


def test_directions_without_pair_curvature_are_left_out_of_the_factor():
    """A parameter the pairs do not read (zero score, zero curvature: the common ``gamma``
    when each judge has its own) or one along which the pilot point is not a maximum
    (negative curvature) leaves the factor of the other directions unchanged, said in the
    note; with several judges the fit's factor is computed, not the fallback of 1."""
    rng = np.random.default_rng(3)
    scores = rng.normal(size=(40, 3)) * 0.5
    hessian = np.diag([4.0, 6.0, 5.0])
    plain = sandwich_factor(scores, hessian)
    assert plain.note == "" and plain.parameters == 3
    for extra in (0.0, -2.0):
        wide_scores = np.c_[scores, np.zeros(40)] if extra == 0.0 else np.c_[scores, scores[:, 0]]
        wide = np.zeros((4, 4))
        wide[:3, :3], wide[3, 3] = hessian, extra
        got = sandwich_factor(wide_scores, wide)
        assert got.raw == pytest.approx(plain.raw, rel=1e-9)
        assert got.parameters == 3 and "1 of 4 directions" in got.note
    # a rotation of a positive definite problem keeps the plain formula's value
    q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    turned = sandwich_factor(scores @ q, q.T @ hessian @ q)
    assert turned.raw == pytest.approx(plain.raw, rel=1e-9)
    assert turned.raw == pytest.approx(
        3 / np.trace(np.linalg.solve(hessian, np.cov(scores.T) * 40)), rel=1e-9
    )


def test_several_judges_get_a_computed_factor():
    """With two judges each has its own ``gamma``, so the common one carries no pair
    information; the factor is still computed over the abilities' contrasts (it fell back
    to 1, "singular pair information", before directions without curvature were left out).
    At a draw of the model's sites, as the pilot's point would be."""
    static, arena, _ = simulate(6, 6, 16, judges=2, seed=11)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = Dataset.from_frames(static=static, arena=arena)
    config = ModelConfig()
    inputs, _ = build_inputs(DualEvalModel(config).fitted_data(ds), config)
    tr = compiled_trace(dualeval_model, inputs, config, seed=4)
    point = {k: np.asarray(v["value"]) for k, v in tr.items() if v["type"] != "plate"}
    weight = sandwich(DualEvalModel(config.replace(arena_weight="calibrated")), point, inputs)
    assert np.isfinite(weight.raw) and weight.factor != 1.0, weight
    assert weight.parameters <= 6 - 2 and "directions" in weight.note, weight
