"""Anchored arena difficulties: the same model in other coordinates.

The anchored coordinates (``bayes_dualeval.model.anchoring``) must change only the geometry
NUTS explores, never the posterior: at matched points the log density in anchored
coordinates equals the plain one plus the log Jacobian ``sum_q log s_q - log sigma_b``.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro.infer.util import constrain_fn, initialize_model, potential_energy

from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.inference.start import init_strategy, level_start
from bayes_dualeval.model import anchoring
from bayes_dualeval.model.config import load_spec
from bayes_dualeval.model.facets import Facets, has_facets
from bayes_dualeval.model.inputs import build_inputs
from bayes_dualeval.model.joint import dualeval_model
from bayes_dualeval.model.simulate import simulate


@pytest.fixture(scope="module")
def setup():
    static, arena, _ = simulate(8, 20, 20, prompt_offset_sd=0.0, seed=3)
    dataset = Dataset.from_frames(static=static, arena=arena)
    config = load_spec("dualeval-2pl")
    inputs, _ = build_inputs(dataset, config, centred="auto")
    return dataset, config, inputs


def test_arena_prompts_are_anchored_under_the_level_term(setup):
    dataset, config, inputs = setup
    arena = np.asarray(dataset.item_kind == "arena")
    assert inputs.n_anchored == arena.sum() == 20
    np.testing.assert_array_equal(np.asarray(inputs.b_anchored) > 0, arena)
    none, _ = build_inputs(dataset, config.replace(arena_level="none"), centred="auto")
    assert none.n_anchored == 0
    plain, _ = build_inputs(dataset, config, centred="none")
    assert plain.n_anchored == 0


def test_level_difficulty_solves_the_level_equation(setup):
    _, _, inputs = setup
    rng = np.random.default_rng(0)
    theta = jnp.asarray(rng.normal(0, 1, inputs.n_models), jnp.float32)
    a = jnp.asarray(np.exp(rng.normal(0, 0.4, inputs.n_items)), jnp.float32)
    gamma, level_c = level_start(inputs)
    b_star, _ = anchoring.level_difficulty(theta, a, gamma, jnp.asarray(level_c), inputs)
    pbar, _ = anchoring._mean_probability(b_star, a, theta, inputs)
    arena = np.asarray(inputs.prompt_n) > 0
    # the level at p = 1/2 is c_s: pbar = 1/2 + (zbar - c_s) / gamma
    target = (
        0.5 + (np.asarray(inputs.prompt_zbar) - level_c[np.asarray(inputs.level_group)]) / gamma
    )
    # level_start puts every target inside [m / (1 + 2m), (1 + m) / (1 + 2m)]
    assert np.all((target[arena] > 0.1) & (target[arena] < 0.9))
    np.testing.assert_allclose(np.asarray(pbar)[arena], target[arena], atol=1e-4)


def test_the_solve_stops_early_where_all_its_steps_would_land(setup, monkeypatch):
    """The Newton solve stops once every arena prompt's step is below NEWTON_TOL: at
    ordinary points within 8 steps (an open bracket, which bisected where a step was too
    small to move b in float32, took 24), and its answer is the capped solve's
    (NEWTON_TOL = 0 runs on until nothing moves) to single precision, even with abilities
    spread four times wider than the data's."""
    _, _, inputs = setup
    gamma, level_c = level_start(inputs)
    level_c = jnp.asarray(level_c)
    arena = np.asarray(inputs.prompt_n) > 0
    steps = []
    real = jax.lax.while_loop

    def counted(cond, body, init):
        out = real(cond, body, init)
        steps.append(int(out[-1]))
        return out

    monkeypatch.setattr(anchoring.jax.lax, "while_loop", counted)
    rng = np.random.default_rng(2)
    for spread in (1.0, 4.0):
        theta = jnp.asarray(rng.normal(0, spread, inputs.n_models), jnp.float32)
        a = jnp.asarray(np.exp(rng.normal(0, 0.4, inputs.n_items)), jnp.float32)
        early, _ = anchoring.level_difficulty(theta, a, gamma, level_c, inputs)
        with monkeypatch.context() as no_tolerance:
            no_tolerance.setattr(anchoring, "NEWTON_TOL", 0.0)
            full, _ = anchoring.level_difficulty(theta, a, gamma, level_c, inputs)
        np.testing.assert_allclose(np.asarray(early)[arena], np.asarray(full)[arena], atol=1e-5)
    # without a tolerance it runs on until no prompt moves at all
    assert all(full > early for early, full in zip(steps[0::2], steps[1::2], strict=True)), steps
    assert max(steps[0::2]) <= 8, steps  # a bisection step would take it past 8


@pytest.mark.parametrize("slope", [15.0, 30.0])
def test_the_solve_reaches_the_root_of_a_steep_prompt(setup, slope):
    """At ``a_q`` of 15-30 (HELM AIR-Bench's arena posterior reaches them) ``pbar_q(b)`` is
    a staircase of the models' steps; plain Newton steps stalled on its plateaus, short of
    the root (4 of 20 prompts at 15 and 6 of 20 at 30 off by more than 1e-4, their targets
    spread over the level's range). The bracketed solve lands on the root of every one."""
    _, _, inputs = setup
    rng = np.random.default_rng(4)
    theta = jnp.asarray(rng.normal(0, 1, inputs.n_models), jnp.float32)
    a = jnp.full(inputs.n_items, slope, jnp.float32)
    arena = np.asarray(inputs.prompt_n) > 0
    gamma = 2.0
    # mean rewards that put the prompts' targets 1/2 + zbar / gamma across [0.02, 0.98]
    target = np.zeros(inputs.n_items)
    target[arena] = np.linspace(0.02, 0.98, arena.sum())
    zbar = jnp.asarray(gamma * (target - 0.5), jnp.float32)
    moved = dataclasses.replace(inputs, prompt_zbar=zbar)
    level_c = jnp.zeros(inputs.n_level_groups)
    b_star, _ = anchoring.level_difficulty(theta, a, jnp.float32(gamma), level_c, moved)
    pbar, _ = anchoring._mean_probability(b_star, a, theta, moved)
    np.testing.assert_allclose(np.asarray(pbar)[arena], target[arena], atol=1e-4)


def test_level_difficulty_has_the_implicit_derivatives(setup):
    """The solve carries no gradient; its derivatives come from the implicit function
    theorem. Checked against central finite differences of the solved value (float64 not
    needed: relative tolerance 2%, steps of 1e-2 on a smooth map)."""
    _, _, inputs = setup
    rng = np.random.default_rng(1)
    theta = jnp.asarray(rng.normal(0, 1, inputs.n_models), jnp.float32)
    a = jnp.asarray(np.exp(rng.normal(0, 0.4, inputs.n_items)), jnp.float32)
    gamma, level_c = level_start(inputs)
    level_c = jnp.asarray(level_c)
    arena = np.flatnonzero(np.asarray(inputs.prompt_n) > 0)

    def total(theta, a, gamma):  # a weighted sum, so one gradient checks every prompt
        b_star, _ = anchoring.level_difficulty(theta, a, gamma, level_c, inputs)
        weights = jnp.zeros(inputs.n_items).at[arena].set(jnp.linspace(0.5, 1.5, arena.size))
        return jnp.sum(weights * b_star)

    grads = jax.grad(total, argnums=(0, 1, 2))(theta, a, jnp.float32(gamma))
    h = 1e-2
    probes = ([0, 3], arena[:3], [0])  # two abilities, three prompts' slopes, gamma
    for k, (arg, grad, where) in enumerate(
        zip((theta, a, jnp.float32(gamma)), grads, probes, strict=True)
    ):
        flat = np.asarray(arg, np.float32).ravel()
        for idx in where:
            up, down = flat.copy(), flat.copy()
            up[idx] += h
            down[idx] -= h
            args = [theta, a, jnp.float32(gamma)]
            args[k] = jnp.asarray(up.reshape(np.shape(arg)))
            f_up = total(*args)
            args[k] = jnp.asarray(down.reshape(np.shape(arg)))
            f_down = total(*args)
            numeric = float(f_up - f_down) / (2 * h)
            analytic = float(np.asarray(grad).ravel()[idx])
            assert analytic == pytest.approx(numeric, rel=0.02, abs=2e-3), (k, idx)


@pytest.fixture(scope="module")
def judged():
    """Three judges (a prompt's target combines their levels), biases and no style."""
    static, arena, _ = simulate(
        8, 20, 20, prompt_offset_sd=0.0, judges=3, self_preference=0.5, seed=3
    )
    dataset = Dataset.from_frames(static=static, arena=arena)
    config = load_spec("dualeval-2pl")
    inputs, _ = build_inputs(dataset, config, centred="auto")
    assert inputs.n_judges == 3 and inputs.n_families == 3
    return dataset, config, inputs


@pytest.mark.parametrize("case", ["setup", "judged"])
def test_anchored_density_is_the_plain_density_times_the_jacobian(case, request):
    """Tolerance 1e-3 nats on a total of a few hundred (float32)."""
    dataset, config, anchored = request.getfixturevalue(case)
    arena = jnp.asarray(np.asarray(anchored.prompt_n) > 0)
    rows = jnp.stack(
        [
            jnp.where(arena, 0.0, anchored.b_centred),
            anchored.log_a_centred,
            jnp.zeros_like(anchored.b_anchored),
        ]
    )
    plain = dataclasses.replace(
        anchored, centring=rows, n_anchored=0, n_centred=int(rows[:2].sum())
    )

    anchored_groups = np.unique(np.asarray(anchored.item_group)[np.asarray(arena)]).size
    assert anchored_groups == 1

    # compiled: run eagerly, every primitive would be a program of its own (seconds)
    @jax.jit
    def start(key, anchored):
        info = initialize_model(
            key, dualeval_model, model_args=(anchored, config),
            init_strategy=init_strategy(config, anchored),
        )  # fmt: skip
        return info.param_info.z

    @jax.jit
    def sides(z, anchored, plain):
        args = (anchored, config)
        values = constrain_fn(dualeval_model, args, {}, z, return_deterministic=True)
        g = anchored.item_group
        sigma_b = values["sigma_b"][g]
        raw = (values["b"] - values["theta_mean"] - values["mu_b"][g]) / sigma_b
        # the level block's anchored units (level_u, mu_b_raw) back to the plain sites
        plain_sites = {plain_name: values[plain_name] for plain_name in anchoring.LEVEL_SITES}
        z_plain = {k: v for k, v in z.items() if k not in anchoring.LEVEL_SITES.values()}
        z_plain = {**z_plain, **plain_sites, "b_raw": jnp.where(arena, raw, z["b_raw"])}
        back = constrain_fn(
            dualeval_model, (plain, config), {}, z_plain, return_deterministic=True
        )
        facets = Facets.from_draws(values, values["gamma"]) if has_facets(anchored) else None
        slope = anchoring.anchor_slope(values["a"])  # the discrimination the anchor reads
        _, w = anchoring.level_difficulty(
            values["theta"], slope, values["gamma"], values["level_c"], anchored, facets
        )
        s = anchoring.anchored_scale(
            slope, w, values["gamma"], sigma_b, anchored, facets, values["level_c"]
        )
        log_jacobian = jnp.sum(jnp.where(arena, jnp.log(s) - jnp.log(sigma_b), 0.0))
        # level_c = k level_u per source and mu_b = k mu_b_raw per anchored group
        n_units = values["level_c"].shape[0] + anchored_groups
        log_jacobian += n_units * jnp.log(anchoring.level_unit(values["gamma"]))
        u_anchored = potential_energy(dualeval_model, args, {}, z)
        u_plain = potential_energy(dualeval_model, (plain, config), {}, z_plain)
        return back["b"], values["b"], log_jacobian, u_anchored, u_plain

    back_b, b, log_jacobian, u_anchored, u_plain = sides(
        start(jax.random.PRNGKey(0), anchored), anchored, plain
    )
    np.testing.assert_allclose(back_b, b, atol=1e-5)
    log_jacobian, u_anchored, u_plain = float(log_jacobian), float(u_anchored), float(u_plain)
    assert abs(log_jacobian) > 1.0  # the check below is not vacuous
    assert u_plain - u_anchored == pytest.approx(log_jacobian, abs=1e-3)


def test_the_anchor_reads_a_smoothly_capped_slope():
    """Within 1% of ``a`` up to 3.5 and 1.5% up to 4 (AlpacaEval's posterior means reach
    1.97, the bundled example's steepest arena prompts 3 at their 99.9th percentile), rising
    throughout, and never above ANCHOR_SLOPE."""
    a = np.linspace(0.05, 200.0, 4001)
    capped = anchoring.anchor_slope(a)  # float64: the function reads NumPy too
    np.testing.assert_allclose(capped[a <= 3.5], a[a <= 3.5], rtol=0.01)
    np.testing.assert_allclose(capped[a <= 4.0], a[a <= 4.0], rtol=0.016)  # 1.504% at 4
    assert np.all(np.diff(capped) > 0)
    assert capped.max() < anchoring.ANCHOR_SLOPE
    assert capped[-1] > 0.99 * anchoring.ANCHOR_SLOPE
