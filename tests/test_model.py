"""The model's terms: stable primitives, precomputed coefficients, pointwise = joint."""

import itertools
import json
import os
import subprocess
import sys
import warnings
import zipfile
from pathlib import Path
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
from numpyro.handlers import seed, substitute, trace
from numpyro.infer import Predictive

from bayes_dualeval.core.errors import ConfigError
from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.model.ability_priors import abilities
from bayes_dualeval.model.config import ModelConfig, available_models, load_spec
from bayes_dualeval.model.contrasts import helmert_basis
from bayes_dualeval.model.inputs import build_inputs
from bayes_dualeval.model.joint import arena_loglik, dualeval_model, static_loglik
from bayes_dualeval.model.links import log_sigmoid, softplus
from bayes_dualeval.model.simulate import simulate


def small_dataset(n_models=6, n_static=12, n_arena=8, missing=0.2, seed_=3):
    static, arena, _ = simulate(n_models, n_static, n_arena, missing=missing, seed=seed_)
    static["source"], arena["source"] = "bench", "arena"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Dataset.from_frames(static=static, arena=arena)


def test_log_sigmoid_matches_reference_and_gradient():
    x = jnp.linspace(-60.0, 60.0, 1001)
    np.testing.assert_allclose(log_sigmoid(x), jax.nn.log_sigmoid(x), rtol=1e-6, atol=1e-7)
    g = jax.vmap(jax.grad(log_sigmoid))(x)
    np.testing.assert_allclose(g, jax.nn.sigmoid(-x), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(softplus(x), jax.nn.softplus(x), rtol=1e-6, atol=1e-6)
    assert np.all(np.isfinite(jax.vmap(jax.grad(softplus))(x)))


@pytest.mark.parametrize("m", [2, 3, 7, 40])
def test_helmert_is_orthonormal_sum_to_zero_basis(m):
    """The abilities' basis and what the prior builds with it (docs/model.md).

    ``theta = theta_mean + H z``, ``theta_mean ~ N(0, s / sqrt(M))``, ``z ~ N(0, s)`` must
    be exactly the iid ``N(0, s)`` prior, with ``theta_mean`` the mean ability.
    """
    h = np.asarray(helmert_basis(m), np.float64)
    ones = np.ones(m)
    # an orthonormal basis of all the vectors that sum to zero (float32: 1e-6)
    assert h.shape == (m, m - 1) and np.all(np.isfinite(h))
    np.testing.assert_allclose(h.T @ h, np.eye(m - 1), atol=1e-6)
    np.testing.assert_allclose(ones @ h, 0.0, atol=1e-6)
    np.testing.assert_allclose(h @ h.T, np.eye(m) - 1.0 / m, atol=1e-6)

    # the abilities the model builds through it, at a prior draw
    scale = 1.7
    inputs, config = SimpleNamespace(n_models=m), ModelConfig(theta_scale=scale)
    with trace() as tr, seed(rng_seed=5):
        returned = abilities(inputs, config)
    theta = np.asarray(tr["theta"]["value"], np.float64)
    theta_mean = float(tr["theta_mean"]["value"])
    z = np.asarray(tr["theta_contrast"]["value"], np.float64)
    assert theta.shape == (m,) and z.shape == (m - 1,)
    np.testing.assert_array_equal(returned[0], tr["theta"]["value"])
    assert float(returned[1]) == theta_mean
    np.testing.assert_allclose(theta, theta_mean + h @ z, atol=1e-5 * scale)
    np.testing.assert_allclose(theta.mean(), theta_mean, atol=1e-5 * scale)  # its mean
    np.testing.assert_allclose((theta - theta_mean).sum(), 0.0, atol=1e-4 * scale)
    # an isometry: the contrasts keep their length, so z's scale is the abilities' scale
    np.testing.assert_allclose(np.linalg.norm(theta - theta_mean), np.linalg.norm(z), rtol=1e-5)
    # the spread items are drawn in units of: sqrt((|z|^2 / s^2 + 1) / M)
    np.testing.assert_allclose(returned[2], np.sqrt((z @ z / scale**2 + 1) / m), rtol=1e-5)

    # the prior scales: exactly theta ~ N(0, s) iid
    prior_mean, prior_z = tr["theta_mean"]["fn"], tr["theta_contrast"]["fn"]
    assert float(prior_mean.mean) == 0.0 and np.all(np.asarray(prior_z.mean) == 0.0)
    sd_mean = float(np.sqrt(prior_mean.variance))
    sd_z = np.broadcast_to(np.sqrt(np.asarray(prior_z.variance, np.float64)), (m - 1,))
    np.testing.assert_allclose(sd_mean, scale / np.sqrt(m), rtol=1e-6)
    np.testing.assert_allclose(sd_z, scale, rtol=1e-6)
    cov = sd_mean**2 * np.outer(ones, ones) + h @ np.diag(sd_z**2) @ h.T
    np.testing.assert_allclose(cov, scale**2 * np.eye(m), atol=1e-5 * scale**2)
    # and so are its draws (seeded; 20000 draws: each covariance within 6 standard errors)
    n = 20_000
    draws = Predictive(abilities, num_samples=n)(jax.random.PRNGKey(0), inputs, config)
    sample = np.asarray(draws["theta"], np.float64)
    np.testing.assert_allclose(sample.mean(axis=0), 0.0, atol=6 * scale / np.sqrt(n))
    np.testing.assert_allclose(
        np.cov(sample, rowvar=False), scale**2 * np.eye(m), atol=6 * scale**2 * np.sqrt(2 / n)
    )


def _draw_params(inputs, config, key=0):
    tr = trace(seed(dualeval_model, key)).get_trace(inputs, config)
    return {k: v["value"] for k, v in tr.items() if v["type"] in ("sample", "deterministic")}, tr


CONFIGS = [
    ModelConfig(),
    ModelConfig(arena_level="none"),
    ModelConfig(arena_likelihood="pairs-full"),
    ModelConfig(arena_likelihood="reward"),
    ModelConfig(irt="1pl"),
    ModelConfig(item_prior="independent", lambda_bb=0.7),
    ModelConfig(mode="bt"),
    ModelConfig(irt="3pl", lambda_static=0.5),
    ModelConfig(irt="4pl", arena_likelihood="reward"),
]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"{c.mode}-{c.irt}-{c.arena_likelihood}")
def test_pointwise_loglik_sums_to_the_model_factor(config):
    ds = small_dataset()
    if config.mode == "bt":
        ds = ds.only("arena")
    inputs, _ = build_inputs(ds, config)
    params, tr = _draw_params(inputs, config)
    theta = params["theta"]
    a, b = params.get("a"), params.get("b")
    gamma, sigma = params.get("gamma", 1.0), params.get("sigma", 1.0)
    level = params.get("level_c")
    assert (level is not None) == (config.mode != "bt" and config.arena_level == "mean")
    if inputs.has_static and config.mode != "bt":
        expected = static_loglik(theta, a, b, inputs, params.get("c"), params.get("d")).sum()
        site = tr["static_y"]
        np.testing.assert_allclose(site["fn"].log_prob(site["value"]).sum(), expected, rtol=2e-5)
        assert (site["scale"] or 1.0) == config.lambda_static
    per_item = arena_loglik(theta, a, b, gamma, sigma, inputs, config, level)
    # lambda_arena = 1, so the arena factor is the plain sum of the pointwise terms
    np.testing.assert_allclose(tr["arena"]["fn"].log_factor, per_item.sum(), rtol=2e-5)
    assert np.all(per_item[np.asarray(ds.item_kind) == "static"] == 0)


def test_pair_terms_match_a_plain_loop():
    """The collapsed linear term and both-bad cell weights equal the per-pair formula."""
    ds = small_dataset(missing=0.1)
    config = ModelConfig(lambda_bb=0.3, arena_level="none")
    inputs, pairs = build_inputs(ds, config)
    params, tr = _draw_params(inputs, config, key=5)
    theta, a, b, gamma = (np.asarray(params[k], np.float64) for k in ("theta", "a", "b", "gamma"))
    p = 1 / (1 + np.exp(-a[ds.arena_item] * (theta[ds.arena_model] - b[ds.arena_item])))
    total = 0.0
    for k in range(pairs.n_pairs):
        w = 2.0 / pairs.prompt_models[pairs.item[k]]
        pi, pj = p[pairs.row_i[k]], p[pairs.row_j[k]]
        if pairs.both_bad[k]:
            total += 0.3 * w * (np.log1p(-pi) + np.log1p(-pj))
        else:
            s = 1 / (1 + np.exp(-gamma * (pi - pj)))
            t = pairs.target[k]
            total += w * (t * np.log(s) + (1 - t) * np.log1p(-s))
    np.testing.assert_allclose(float(tr["arena"]["fn"].log_factor), total, rtol=1e-4)


def test_level_term_matches_a_plain_computation():
    """Each prompt's mean reward ~ Normal(c_s + gamma (mean p - 1/2), noise / sqrt(n))."""
    ds = small_dataset(missing=0.2)
    config = ModelConfig()
    inputs, _ = build_inputs(ds, config)
    params, tr = _draw_params(inputs, config, key=7)
    theta, a, b, gamma = (np.asarray(params[k], np.float64) for k in ("theta", "a", "b", "gamma"))
    c = float(params["level_c"][0])
    p = 1 / (1 + np.exp(-a[ds.arena_item] * (theta[ds.arena_model] - b[ds.arena_item])))
    # the within-prompt noise: residual sd of an additive model x prompt fit, by lstsq
    m_idx, q_idx = ds.arena_model, ds.arena_item
    prompts = np.unique(q_idx)
    design = np.concatenate(
        [(q_idx[:, None] == prompts).astype(float), np.eye(ds.n_models)[m_idx][:, 1:]], axis=1
    )
    coef, *_ = np.linalg.lstsq(design, ds.arena_z, rcond=None)
    resid = ds.arena_z - design @ coef
    noise = np.sqrt((resid**2).sum() / (len(resid) - design.shape[1]))
    expected = 0.0
    for q in prompts:
        cells = q_idx == q
        sd = noise / np.sqrt(cells.sum())
        z = (ds.arena_z[cells].mean() - c - gamma * (p[cells].mean() - 0.5)) / sd
        expected += -0.5 * z**2 - np.log(sd) - 0.5 * np.log(2 * np.pi)
    with_level = arena_loglik(*(params[k] for k in ("theta", "a", "b", "gamma")), 1.0, inputs,
                              config, params["level_c"])  # fmt: skip
    without = arena_loglik(*(params[k] for k in ("theta", "a", "b", "gamma")), 1.0, inputs,
                           config, None)  # fmt: skip
    np.testing.assert_allclose(float((with_level - without).sum()), expected, rtol=2e-3)


def test_a_layout_without_centred_items_reads_no_mask_and_gives_the_same_density():
    """With ``n_centred`` 0 the item sites are drawn without the layout mask.

    The same inputs with the mask path forced (``n_centred`` 1, every entry still 0) give
    the same log joint and the same ``b`` and ``a``, to float32 rounding; the program of
    the maskless path is shorter: it reads no weights (SVI's and MAP's layout).
    """
    import dataclasses

    from numpyro.infer.util import log_density

    ds = small_dataset()
    config = ModelConfig()
    inputs, _ = build_inputs(ds, config, centred="none")
    assert inputs.n_centred == 0
    masked = dataclasses.replace(inputs, n_centred=1)
    params, tr = _draw_params(inputs, config, key=5)
    latent = {k: v for k, v in params.items() if tr[k]["type"] == "sample"}
    lp, tr0 = log_density(dualeval_model, (inputs, config), {}, latent)
    lp_masked, tr1 = log_density(dualeval_model, (masked, config), {}, latent)
    assert float(lp) == pytest.approx(float(lp_masked), abs=1e-4)
    for site in ("b", "a"):
        np.testing.assert_allclose(tr0[site]["value"], tr1[site]["value"], rtol=1e-6)

    def equations(x):
        text = str(
            jax.make_jaxpr(lambda z: log_density(dualeval_model, (x, config), {}, z)[0])(latent)
        )
        return text.count(" = ")

    assert equations(inputs) < equations(masked)


@pytest.mark.parametrize("prior", ["hierarchical", "independent"])
def test_centred_and_non_centred_coordinates_give_the_same_prior(prior):
    """The density of each item site is the prior of (b, log a) transformed exactly.

    For the same abilities, hyperparameters, b and a, the log joint in centred coordinates
    (x = shift + stretch y) and in non-centred ones (x = loc + scale u) differ by exactly
    the log Jacobians, sum(log scale) - sum(log stretch).
    """
    import dataclasses

    from numpyro.infer.util import log_density

    ds = small_dataset()
    config = ModelConfig(item_prior=prior)
    inputs, _ = build_inputs(ds, config, centred="none")
    params, tr = _draw_params(inputs, config, key=3)
    latent = {k: v for k, v in params.items() if tr[k]["type"] == "sample"}
    theta_c = np.asarray(params["theta_contrast"], np.float64)
    spread = np.sqrt(((theta_c**2).sum() / config.theta_scale**2 + 1) / ds.n_models)
    b_rel = np.asarray(params["b"]) - float(params["theta_mean"])
    log_a = np.log(np.asarray(params["a"]))
    rows = jnp.stack([jnp.ones_like(inputs.b_centred)] * 2 + [inputs.b_anchored])
    centred = dataclasses.replace(inputs, centring=rows, n_centred=int(rows[:2].sum()))
    other = dict(latent)
    g = np.asarray(ds.item_group)
    if prior == "hierarchical":
        arena = np.asarray(ds.item_kind) == "arena"
        shift = np.where(arena, np.asarray(params["mu_b"])[g], 0.0)
        other["b_raw"], other["log_a_raw"] = (b_rel - shift) / spread, log_a + np.log(spread)
        scale_b = np.asarray(params["sigma_b"])[g]
        scale_a = np.asarray(params["sigma_log_a"])[g]
        jac = np.log(scale_b).sum() + np.log(scale_a).sum() - ds.n_items * np.log(spread)
        lp_nc, _ = log_density(dualeval_model, (inputs, config), {}, latent)
        lp_c, tr_c = log_density(dualeval_model, (centred, config), {}, other)
        np.testing.assert_allclose(tr_c["b"]["value"], params["b"], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(tr_c["a"]["value"], params["a"], rtol=1e-4)
        np.testing.assert_allclose(float(lp_nc - lp_c), jac, rtol=1e-4, atol=1e-3)
    else:  # always centred: the b_rel site holds b / spread, log a + log spread
        np.testing.assert_allclose(latent["b_rel"] * spread, b_rel, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(latent["log_a"] - np.log(spread), log_a, rtol=1e-4, atol=1e-5)


def test_partially_centred_coordinates_give_the_same_prior():
    """At a centring weight ``w`` per item the site density is the prior transformed exactly.

    The site holds ``r`` with ``y = m + s^(1 - w) (r - w m)`` in the centred coordinate
    ``y``; for the same ``b`` and ``a`` the log joint differs from the non-centred one by
    ``sum(log scale - log stretch - (1 - w) log s)`` over both item parameters. Weights 0
    and 1 are among those drawn, so the ends are checked with the middle.
    """
    import dataclasses

    from numpyro.infer.util import log_density

    ds = small_dataset()
    config = ModelConfig()
    inputs, _ = build_inputs(ds, config, centred="none")
    params, tr = _draw_params(inputs, config, key=4)
    latent = {k: v for k, v in params.items() if tr[k]["type"] == "sample"}
    theta_c = np.asarray(params["theta_contrast"], np.float64)
    spread = np.sqrt(((theta_c**2).sum() / config.theta_scale**2 + 1) / ds.n_models)
    g = np.asarray(ds.item_group)
    arena = np.asarray(ds.item_kind) == "arena"
    mu_b, mu_la = np.asarray(params["mu_b"])[g], np.asarray(params["mu_log_a"])[g]
    sigma_b, sigma_la = np.asarray(params["sigma_b"])[g], np.asarray(params["sigma_log_a"])[g]
    rng = np.random.default_rng(0)
    w = rng.choice([0.0, 0.2, 0.5, 0.9, 1.0], size=(2, ds.n_items))
    rows = jnp.asarray(np.r_[w, np.zeros((1, ds.n_items))], jnp.float32)
    partial = dataclasses.replace(inputs, centring=rows, n_centred=int(np.count_nonzero(w)))
    # the centred coordinates y, their means m and scales s, per parameter
    b_rel = np.asarray(params["b"]) - float(params["theta_mean"])
    shift_b = np.where(arena, mu_b, 0.0)
    y_b, m_b, s_b = (b_rel - shift_b) / spread, (mu_b - shift_b) / spread, sigma_b / spread
    log_a = np.log(np.asarray(params["a"]))
    y_a, m_a, s_a = log_a + np.log(spread), mu_la + np.log(spread), sigma_la
    other = dict(latent)
    other["b_raw"] = w[0] * m_b + (y_b - m_b) * s_b ** (w[0] - 1.0)
    other["log_a_raw"] = w[1] * m_a + (y_a - m_a) * s_a ** (w[1] - 1.0)
    jac = (np.log(sigma_b) - np.log(spread) - (1 - w[0]) * np.log(s_b)).sum() + (
        np.log(sigma_la) - (1 - w[1]) * np.log(s_a)
    ).sum()
    lp_nc, _ = log_density(dualeval_model, (inputs, config), {}, latent)
    lp_w, tr_w = log_density(dualeval_model, (partial, config), {}, other)
    np.testing.assert_allclose(tr_w["b"]["value"], params["b"], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(tr_w["a"]["value"], params["a"], rtol=1e-4)
    np.testing.assert_allclose(float(lp_nc - lp_w), jac, rtol=1e-4, atol=1e-3)


def test_more_data_means_a_larger_log_likelihood_magnitude():
    """Terms are sums, not means: doubling the data doubles the static log likelihood."""
    static, _, _ = simulate(5, 10, 0, seed=1)
    static["source"] = "bench"
    twice = pd.concat([static, static.assign(dataset=static["dataset"] + "_copy")])
    config = ModelConfig(mode="static")
    one, _ = build_inputs(Dataset.from_frames(static=static), config)
    two, _ = build_inputs(Dataset.from_frames(static=twice), config)
    theta = jnp.linspace(-1, 1, 5)
    a1, b1 = jnp.ones(one.n_items), jnp.zeros(one.n_items)
    a2, b2 = jnp.ones(two.n_items), jnp.zeros(two.n_items)
    l1 = static_loglik(theta, a1, b1, one).sum()
    l2 = static_loglik(theta, a2, b2, two).sum()
    np.testing.assert_allclose(l2, 2 * l1, rtol=1e-5)


@pytest.mark.parametrize("likelihood,expected", [("pairs", 6.0), ("pairs-full", 21.0)])
def test_pair_weights_count_n_minus_one_contrasts(likelihood, expected):
    """With 7 models per prompt, the weights the model reads sum to 6 (2/n) or 21 (full)."""
    ds = small_dataset(missing=0.0, n_models=7)
    config = ModelConfig(tie_ratio=0.0, bb_ratio=0.0, arena_likelihood=likelihood)
    inputs, _ = build_inputs(ds, config)
    per_prompt = np.bincount(np.asarray(inputs.pair_item), weights=np.asarray(inputs.pair_w))
    np.testing.assert_allclose(per_prompt[ds.arena_items], expected, rtol=1e-6)


def test_mode_needs_its_kind_of_data():
    static, _, _ = simulate(4, 6, 0, seed=0)
    ds = Dataset.from_frames(static=static)
    with pytest.raises(ConfigError, match="arena"):
        build_inputs(ds, ModelConfig(mode="arena"))
    with pytest.raises(ConfigError, match="arena"):
        build_inputs(ds, ModelConfig(mode="bt"))


def test_specs_load_and_typos_are_errors(tmp_path):
    names = available_models()
    assert {"dualeval-2pl", "dualeval-1pl", "bradley-terry", "calibration-2pl"} <= set(names)
    for name in names:
        assert load_spec(name).name == name
    assert load_spec("dualeval-1pl").irt == "1pl"
    bad = tmp_path / "bad.toml"
    bad.write_text('[likelihood]\nmode = "both"\nlamda_bb = 0.3\n')
    with pytest.raises(ConfigError, match="lamda_bb"):
        load_spec(bad)
    with pytest.raises(ConfigError, match="unknown model"):
        load_spec("no-such-model")
    with pytest.raises(ConfigError, match="positive"):
        ModelConfig(theta_scale=0.0)
    with pytest.raises(ConfigError, match="mode"):
        ModelConfig(mode="joint")


ROOT = Path(__file__).resolve().parent.parent

#: Run in the installed layout: which package and spec folder it found, and a named spec.
INSTALLED_PROBE = """
import json
import bayes_dualeval
from bayes_dualeval.model.config import available_models, load_spec, models_dir
print(json.dumps({
    "package": bayes_dualeval.__file__,
    "models_dir": str(models_dir()),
    "names": sorted(available_models()),
    "spec": load_spec("dualeval-2pl").name,
}))
"""


def test_models_folder_ships_with_the_package(tmp_path):
    # build the wheel as pip would and look inside it: the checkout's models/ cannot hide
    # a wheel that lacks them
    pytest.importorskip("hatchling", reason="building the wheel needs hatchling (test extra)")
    wheels = tmp_path / "wheels"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--no-build-isolation",
         "--no-index", "--quiet", "-w", str(wheels)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert build.returncode == 0, build.stderr
    (wheel,) = wheels.glob("bayes_dualeval-*.whl")
    specs = sorted(p.name for p in (ROOT / "models").glob("*.toml"))
    assert "dualeval-2pl.toml" in specs
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        for name in specs:
            assert f"bayes_dualeval/_models/{name}" in names, name
            shipped = zf.read(f"bayes_dualeval/_models/{name}")
            assert shipped == (ROOT / "models" / name).read_bytes(), name
        site = tmp_path / "site"
        zf.extractall(site)

    # installed layout: the package from the unpacked wheel, run from a folder that is not
    # the checkout, finds its specifications in bayes_dualeval/_models
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site), "PYTHONDONTWRITEBYTECODE": "1"}
    probe = subprocess.run(
        [sys.executable, "-c", INSTALLED_PROBE],
        cwd=elsewhere, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert probe.returncode == 0, probe.stderr
    found = json.loads(probe.stdout.strip().splitlines()[-1])
    assert Path(found["package"]).is_relative_to(site)
    assert Path(found["models_dir"]) == site / "bayes_dualeval" / "_models"
    assert found["names"] == [name.removesuffix(".toml") for name in specs]
    assert found["spec"] == "dualeval-2pl"


@pytest.mark.parametrize(
    "irt,prior",
    list(itertools.product(["2pl", "1pl", "3pl", "4pl"], ["hierarchical", "independent"])),
)
def test_model_is_finite_at_prior_draws(irt, prior):
    ds = small_dataset()
    config = ModelConfig(irt=irt, item_prior=prior)
    inputs, _ = build_inputs(ds, config)
    params, tr = _draw_params(inputs, config, key=11)
    assert ("a" in params) == (irt != "1pl")
    assert ("c" in params) == (irt in ("3pl", "4pl"))
    assert ("d" in params) == (irt == "4pl")
    static_y = tr["static_y"]
    assert np.isfinite(float(static_y["fn"].log_prob(static_y["value"]).sum()))
    assert np.isfinite(float(tr["arena"]["fn"].log_factor))
    # substituting fixed values reproduces the same factors (pure function of parameters)
    latent = {k: v for k, v in params.items() if tr[k]["type"] == "sample"}
    tr2 = trace(substitute(seed(dualeval_model, 99), latent)).get_trace(inputs, config)
    np.testing.assert_allclose(tr2["arena"]["fn"].log_factor, tr["arena"]["fn"].log_factor)


def test_floors_and_ceilings_live_on_static_questions_only():
    ds = small_dataset()
    config = ModelConfig(irt="4pl")
    inputs, _ = build_inputs(ds, config)
    params, _ = _draw_params(inputs, config, key=2)
    arena = np.asarray(ds.item_kind) == "arena"
    c, d = np.asarray(params["c"]), np.asarray(params["d"])
    assert np.all(c[arena] == 0.0) and np.all(d[arena] == 1.0)
    assert np.all((c[~arena] > 0) & (c[~arena] < d[~arena]) & (d[~arena] < 1))
    # logit-normal around the group's level: c_raw standard normal, spread guess_spread
    g = np.asarray(ds.item_group)[~arena]
    logit = np.log(c[~arena] / (1 - c[~arena]))
    mu = np.asarray(params["mu_c"])[g]
    expected = np.log(mu / (1 - mu)) + config.guess_spread * np.asarray(params["c_raw"])
    np.testing.assert_allclose(logit, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("irt", ["3pl", "4pl"])
def test_static_loglik_equals_the_plain_formula(irt):
    """log p and log(1 - p) of c + (d - c) sigmoid(eta), against float64 NumPy."""
    ds = small_dataset()
    config = ModelConfig(irt=irt)
    inputs, _ = build_inputs(ds, config)
    params, _ = _draw_params(inputs, config, key=4)
    th, a, b, c = (np.asarray(params[k], np.float64) for k in ("theta", "a", "b", "c"))
    d = np.asarray(params["d"], np.float64) if irt == "4pl" else np.ones_like(c)
    m, q, y = ds.static_model, ds.static_item, ds.static_y
    p = c[q] + (d[q] - c[q]) / (1 + np.exp(-a[q] * (th[m] - b[q])))
    expected = np.where(y == 1, np.log(p), np.log1p(-p))
    got = static_loglik(params["theta"], params["a"], params["b"], inputs, params["c"],
                        params.get("d"))  # fmt: skip
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


def test_log_probabilities_stay_finite_at_extreme_eta():
    from bayes_dualeval.model.links import log_probabilities

    eta = jnp.array([-80.0, -20.0, 0.0, 20.0, 80.0])
    log_p, log_q = log_probabilities(eta, jnp.full(5, 0.25), jnp.ones(5))
    assert np.all(np.isfinite(log_p)) and np.all(np.isfinite(log_q))
    np.testing.assert_allclose(log_p[0], np.log(0.25), rtol=1e-6)
    np.testing.assert_allclose(log_q[-2], np.log(0.75) - 20.0, rtol=1e-4)
