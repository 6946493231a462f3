"""Ability dimensions (``dims = K > 1``): the model, the relabelling, the tables and report.

The fitted test uses one small simulated panel with two ability dimensions (two domains,
each loading 0.9 on its own dimension); recovery and the comparison with one dimension on
larger panels are in scripts/studies/dimension_study.py and docs/validation.md.
"""

import json
import warnings

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import compiled_trace, frames_dataset
from scipy.linalg import orthogonal_procrustes

from bayes_dualeval.cli.commands import cli
from bayes_dualeval.core.errors import ConfigError, InputError
from bayes_dualeval.inference.mode import check_map_supports
from bayes_dualeval.measure.bank import Bank
from bayes_dualeval.model.ability_map import AbilityMap, ability_at
from bayes_dualeval.model.config import ModelConfig, load_spec
from bayes_dualeval.model.inputs import build_inputs
from bayes_dualeval.model.joint import dualeval_model
from bayes_dualeval.model.simulate import simulate
from bayes_dualeval.model.spec import DualEvalModel
from bayes_dualeval.posterior.dimension_tables import dimension_support
from bayes_dualeval.posterior.dimensions import align

TWO = ModelConfig(dims=2)


def test_configuration_refuses_what_it_cannot_fit():
    with pytest.raises(ConfigError, match="mode 'bt' has none"):
        ModelConfig(dims=2, mode="bt")
    with pytest.raises(ConfigError, match="choose one"):
        ModelConfig(dims=2, abilities="domain")
    with pytest.raises(ConfigError, match="whole number"):
        ModelConfig(dims=2.0)
    with pytest.raises(ConfigError, match="dims"):
        ModelConfig(dims=0)
    with pytest.raises(ConfigError, match="MAP does not fit ability dimensions"):
        check_map_supports(TWO)
    check_map_supports(ModelConfig())
    assert load_spec("dualeval-2d").dims == 2


def test_ability_map_reads_columns_or_mixes_them():
    table = np.arange(12.0).reshape(4, 3)
    model, item = np.array([0, 3, 2]), np.array([1, 0, 1])
    lookup = AbilityMap(table, np.array([2, 0]))
    np.testing.assert_array_equal(ability_at(lookup, model, item), [0.0, 11.0, 6.0])
    weights = np.array([[0.2, 0.3, 0.5], [1.0, 0.0, 0.0]])
    mixed = AbilityMap(table, weights)
    expected = (table[model] * weights[item]).sum(1)
    np.testing.assert_allclose(ability_at(mixed, model, item), expected)
    np.testing.assert_array_equal(ability_at(table[:, 0], model, item), table[model, 0])


def test_the_model_is_a_compensatory_multidimensional_2pl():
    static, arena, _ = simulate(5, 12, 6, n_domains=2, dims=2, seed=3)
    ds = frames_dataset(static, arena)
    inputs, _ = build_inputs(ds, TWO)
    assert inputs.n_domains == 2
    tr = compiled_trace(dualeval_model, inputs, TWO)
    theta, w = tr["theta_dims"]["value"], tr["loading"]["value"]
    a, b = np.asarray(tr["a"]["value"]), np.asarray(tr["b"]["value"])
    assert theta.shape == (5, 2) and w.shape == (ds.n_items, 2)
    np.testing.assert_allclose(np.asarray(w).sum(axis=1), 1.0, rtol=1e-6)
    # every dimension shares the models' mean: the difficulties absorb a shift
    mean = tr["theta_mean"]["value"]
    np.testing.assert_allclose(np.asarray(theta).mean(axis=0), mean, atol=1e-5)
    # logit p = a_vec . theta - d with a_vec = a w and d = a b
    m, q = ds.static_model, ds.static_item
    a_vec = a[:, None] * np.asarray(w)
    eta = (a_vec[q] * np.asarray(theta)[m]).sum(1) - a[q] * b[q]
    y = ds.static_y
    expected = np.sum(y * -np.logaddexp(0, -eta) + (1 - y) * -np.logaddexp(0, eta))
    np.testing.assert_allclose(tr["static_y"]["log_prob"], expected, rtol=2e-5)
    # the pointwise log likelihood (LOO, checks) reads the same abilities
    draws = {name: tr[name]["value"] for name in ("theta", "theta_dims", "loading", "a", "b")}
    np.testing.assert_allclose(
        DualEvalModel(TWO).static_loglik(draws, inputs).sum(), expected, rtol=2e-5
    )
    # the leaderboard's theta is the ability on the average item
    np.testing.assert_allclose(
        tr["theta"]["value"], np.asarray(theta) @ np.asarray(w).mean(0), rtol=1e-5
    )
    # items of a domain share a loading profile: equal raw draws give equal loadings
    fixed = {"loading_raw": np.zeros((ds.n_items, 1)), "sigma_loading": 1.0}
    tr2 = compiled_trace(dualeval_model, inputs, TWO, seed=1, data=fixed)
    w2 = np.asarray(tr2["loading"]["value"])
    for d in range(2):
        rows = w2[np.asarray(inputs.item_domain) == d]
        np.testing.assert_allclose(rows, np.broadcast_to(rows[0], rows.shape), rtol=1e-6)


def test_align_relabels_whole_chains_and_keeps_values():
    rng = np.random.default_rng(0)
    theta = rng.normal(size=(10, 2)) * [1.0, 0.5]
    w = rng.dirichlet([0.5, 0.5], size=40)
    n_chain, n_draw = 3, 30
    td = theta + rng.normal(0, 0.05, (n_chain, n_draw, 10, 2))
    ld = np.broadcast_to(w, (n_chain, n_draw, 40, 2)).copy()
    swapped = td.copy(), ld.copy()
    for arr in swapped:
        arr[1] = arr[1][..., ::-1]
    samples = {
        "theta_dims": swapped[0], "loading": swapped[1], "theta_contrast": swapped[0][:, :, 1:],
    }  # fmt: skip
    out, info = align(samples)
    assert info["chains_relabelled"] == 1
    # the three chains agree after alignment, and draws keep their values (a permutation)
    for name in ("theta_dims", "loading"):
        np.testing.assert_allclose(out[name][1], out[name][0], atol=0.5)
        np.testing.assert_allclose(np.sort(out[name], -1), np.sort(samples[name], -1))
    # dimension 1 carries the larger mean loading
    assert out["loading"][..., 0].mean() >= out["loading"][..., 1].mean()
    assert samples["theta_dims"] is swapped[0]  # the input is not changed
    one = {"theta_dims": td[..., :1], "loading": ld[..., :1]}
    assert align(one) == (one, None)


def test_simulated_dimensions_keep_old_seeds_and_state_their_truth():
    s0, a0, t0 = simulate(6, 20, 5, seed=2)
    s1, a1, t1 = simulate(6, 20, 5, seed=2, dims=1)
    assert s0.equals(s1) and a0.equals(a1) and t0 == t1
    _, _, truth = simulate(6, 20, 5, n_domains=2, dims=2, dim_loading=1.0, seed=2)
    assert truth["settings"]["dims"] == 2
    item = next(iter(truth["items"].values()))
    assert len(item["loading"]) == 2 and sum(item["loading"]) == pytest.approx(1.0)
    with pytest.raises(InputError, match="choose one"):
        simulate(6, 20, 5, dims=2, domain_sd=0.5)


def _dimension_draws(theta, loading, a=None):
    """An InferenceData holding ``theta_dims`` (M, K) and ``loading`` (Q, K) draws."""
    import arviz as az

    posterior = {"theta_dims": theta[None], "loading": loading[None]}
    if a is not None:
        posterior["a"] = a[None]
    return az.from_dict(posterior=posterior)


def test_dimension_support_counts_the_directions_the_items_see():
    rng = np.random.default_rng(3)
    s, m, q = 200, 12, 40
    # two real dimensions: independent abilities, each half of the items on its own one
    theta = rng.normal(size=(s, m, 2))
    own = np.repeat(np.eye(2) * 0.8 + 0.1, q // 2, axis=0)  # (Q, 2)
    loading = np.broadcast_to(own, (s, q, 2)).copy()
    two = dimension_support(_dimension_draws(theta, loading))
    assert two["fitted"] == 2 and two["supported"] == 2
    assert two["share_lo"][1] > 0.1  # measured 0.15 (mean 0.29)
    # a copy: the second dimension's abilities are the first's, so the items see one
    copied = theta.copy()
    copied[..., 1] = copied[..., 0] + 0.01 * rng.normal(size=(s, m))
    one = dimension_support(_dimension_draws(copied, loading))
    assert one["supported"] == 1 and one["share_hi"][1] < 0.01
    # an empty dimension: every item loads on the first one
    empty = np.zeros((s, q, 2))
    empty[..., 0] = 1.0
    assert dimension_support(_dimension_draws(theta, empty))["supported"] == 1
    # the discrimination weights the items: with the second half nearly flat, one direction
    a = np.broadcast_to(np.r_[np.ones(q // 2), np.full(q // 2, 0.02)], (s, q)).copy()
    assert dimension_support(_dimension_draws(theta, loading, a))["supported"] == 1
    assert sum(two["share_mean"]) == pytest.approx(1.0, abs=1e-3)


@pytest.fixture(scope="module")
def two_dim_run(tmp_path_factory):
    """A NUTS fit with ``--dims 2`` on a small two-dimensional panel (CLI, report)."""
    from bayes_dualeval.model.simulate import write

    root = tmp_path_factory.mktemp("dims")
    static, arena, truth = simulate(
        10, 160, 0, n_domains=2, dims=2, dim_correlation=0.0, dim_loading=0.9, seed=5
    )
    write(root / "data", static, arena, truth)
    out = root / "run"
    result = CliRunner().invoke(
        cli,
        ["fit", str(root / "data"), "--sampler", "nuts", "--dims", "2", "--chains", "2",
         "--warmup", "300", "--draws", "300", "--seed", "1", "--out", str(out)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return out, truth, result.output


def test_two_dimensional_fit_writes_its_tables_and_report(two_dim_run):
    import pandas as pd

    out, truth, output = two_dim_run
    assert "strongest by dimension (abilities.csv, loadings.csv)" in output
    # the round lines of a run that is not quiet (chains in parallel draw no progress bar)
    assert "round 1: 2 chain(s), 300 warm-up iterations and 300 draws each" in output
    assert "round 1 finished" in output
    abilities = pd.read_csv(out / "abilities.csv")
    assert list(abilities.columns[:7]) == [
        "model", "dimension", "label", "theta_mean", "theta_sd", "theta_lo", "theta_hi",
    ]  # fmt: skip
    assert sorted(abilities["dimension"].unique()) == [1, 2]
    assert (abilities["theta_lo"] <= abilities["theta_mean"]).all()
    loadings = pd.read_csv(out / "loadings.csv")
    for col in ("item", "dimension", "a_mean", "a_lo", "a_hi", "loading_mean"):
        assert col in loadings
    sums = loadings.groupby("item")["loading_mean"].sum()
    np.testing.assert_allclose(sums, 1.0, rtol=1e-4)
    # each domain loads mostly on its own dimension, and the labels name them apart
    by_domain = loadings.groupby(["domain", "dimension"])["loading_mean"].mean().unstack()
    assert by_domain.loc["code"].idxmax() != by_domain.loc["math"].idxmax()
    assert by_domain.max(axis=1).min() > 0.6
    assert sorted(abilities.drop_duplicates("dimension")["label"]) == ["code", "math"]
    assert not (out / "contamination.csv").exists()
    report = (out / "report.md").read_text(encoding="utf-8")
    section = report.split("## Ability dimensions", 1)[1].split("\n## ", 1)[0]
    assert "figures/loading_heatmap.png" in section and "figures/ability_map.png" in section
    assert "chain(s) were relabelled" in section
    assert (out / "figures" / "ability_map.png").stat().st_size > 10_000
    assert "Support: the models x items matrix" in section
    assert "Dimensions the data do not support" not in section
    assert "the data support" not in output
    diagnostics = json.loads((out / "diagnostics.json").read_text())
    assert diagnostics["config"]["dims"] == 2
    support = diagnostics["dimensions"]
    assert support["fitted"] == 2 and support["supported"] == 2, support


def test_two_dimensional_fit_recovers_the_abilities_up_to_rotation(two_dim_run):
    import arviz as az

    out, truth, _ = two_dim_run
    idata = az.from_netcdf(out / "posterior.nc")
    models = idata.posterior["model"].values
    true = np.array([truth["theta_dims"][m] for m in models])
    est = idata.posterior["theta_dims"].mean(("chain", "draw")).values
    est, true = est - est.mean(0), true - true.mean(0)
    rotation, _ = orthogonal_procrustes(est, true)
    aligned = est @ rotation
    # measured 0.97 and 0.96 on this panel (seed 5); stated tolerance: 0.85
    for k in range(2):
        assert np.corrcoef(aligned[:, k], true[:, k])[0, 1] > 0.85
    # the pointwise log likelihood is there for compare
    assert "log_likelihood" in idata.groups()


def test_a_bank_with_dimensions_is_refused(two_dim_run):
    out, _, _ = two_dim_run
    with pytest.raises(InputError, match="2 ability dimensions"):
        Bank.from_run(out)


def test_predict_reads_the_abilities_through_the_loadings(two_dim_run):
    import arviz as az
    import pandas as pd

    out, _, _ = two_dim_run
    idata = az.from_netcdf(out / "posterior.nc")
    post = idata.posterior
    model, item = str(post["model"].values[3]), str(post["item"].values[7])
    result = CliRunner().invoke(
        cli,
        [
            "predict",
            str(out),
            "--models",
            model,
            "--items",
            item,
            "--allow-approximate",
            "--out",
            str(out / "p.csv"),
        ],
    )
    assert result.exit_code == 0, result.output
    (row,) = pd.read_csv(out / "p.csv").itertuples()
    theta = post["theta_dims"].values[:, :, 3].reshape(-1, 2)
    w = post["loading"].values[:, :, 7].reshape(-1, 2)
    a = post["a"].values[:, :, 7].reshape(-1)
    b = post["b"].values[:, :, 7].reshape(-1)
    p = 1.0 / (1.0 + np.exp(-a * ((theta * w).sum(axis=1) - b)))
    assert row.p_mean == pytest.approx(p.mean(), abs=1e-5)


def test_dimensions_without_domains_warn_before_sampling(monkeypatch):
    from bayes_dualeval.core.errors import DataWarning
    from bayes_dualeval.inference.settings import SamplerSettings
    from bayes_dualeval.runs import fit as run_fit

    class Sampled(Exception):
        pass

    def sample(*args, **kwargs):
        raise Sampled

    monkeypatch.setattr(run_fit, "sample", sample)
    static, arena, _ = simulate(5, 20, 4, n_domains=2, seed=1)
    with_domains = frames_dataset(static, arena)
    without = frames_dataset(static.drop(columns="domain"), arena.drop(columns="domain"))
    settings = SamplerSettings(chains=1, progress=False)
    with pytest.warns(DataWarning, match="0 item domain"), pytest.raises(Sampled):
        run_fit.fit(without, TWO, settings)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataWarning)
        with pytest.raises(Sampled):
            run_fit.fit(with_domains, TWO, settings)
