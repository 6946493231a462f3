"""A specialist is not a leak: contamination.csv with abilities per domain.

One simulated panel (12 models; two benchmarks of 40 questions in each of two domains,
one in the third; :func:`bayes_dualeval.validation.specialist.specialist_data`): a
middling model is 2 logits stronger on every question of the first domain, and two other
models leak 90% of their failures on one benchmark. The true parameters stand in for the
posterior (no fit: seconds), once with one ability per model and once with abilities per
domain. The NUTS study over seeds is scripts/studies/specialist_study.py.
"""

import warnings

import arviz as az
import numpy as np
import pytest

from bayes_dualeval.checks.benchmark_audit import benchmark_audit
from bayes_dualeval.checks.domain_grid import DOMAIN, DOMAIN_ONE_BENCHMARK, ONE_ABILITY
from bayes_dualeval.model.config import ModelConfig
from bayes_dualeval.model.spec import DualEvalModel
from bayes_dualeval.validation.specialist import audit_counts, specialist_data


@pytest.fixture(scope="module")
def planted():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return specialist_data(seed=0)


def _truth_posterior(data, *, domains: bool, tau: float = 0.6):
    ds, truth = data["dataset"], data["truth"]
    theta = np.array([truth["theta"][m] for m in ds.models])
    post = {
        "theta": theta,
        "b": np.array([truth["items"][q]["b"] for q in ds.items]),
        "a": np.array([truth["items"][q]["a"] for q in ds.items]),
    }
    dims = {"theta": ["model"], "b": ["item"], "a": ["item"]}
    config = ModelConfig(mode="static")
    if domains:
        config = ModelConfig(mode="static", abilities="domain")
        post["theta_domain"] = np.array(
            [[truth["theta_domain"][m][d] for d in ds.domains] for m in ds.models]
        )
        post["tau_domain"] = np.full(len(ds.domains), tau)
        dims.update(theta_domain=["model", "domain"], tau_domain=["domain"])
    idata = az.from_dict(
        posterior={k: np.asarray(v, np.float64)[None, None] for k, v in post.items()},
        coords={"model": ds.models, "item": ds.items, "domain": ds.domains},
        dims=dims,
    )
    idata.posterior.attrs.update(DualEvalModel(config).to_attrs())
    return idata


def test_one_ability_flags_the_specialist_like_a_leak(planted):
    table = benchmark_audit(_truth_posterior(planted, domains=False), planted["dataset"])
    counts = audit_counts(table, planted)
    assert counts["leaks"] == 2 and counts["specialist"] >= 1
    assert set(table["design"]) == {ONE_ABILITY} and (table["domain"] == "").all()


def test_domain_abilities_clear_the_specialist_and_keep_the_leaks(planted):
    ds = planted["dataset"]
    table = benchmark_audit(_truth_posterior(planted, domains=True), ds)
    counts = audit_counts(table, planted)
    assert counts["specialist"] == 0, table.head(6).to_string()
    assert counts["leaks"] == 2 and counts["clean"] == 0
    specialist = table[table["model"] == planted["specialist"]]
    assert specialist["q_value"].min() > 0.5
    # two benchmarks in each of the first two domains, one in the last: its rows say the
    # design cannot tell a specialist from a leak there
    by_domain = table.groupby("domain")
    benchmarks = by_domain["dataset"].nunique().to_dict()
    design = by_domain["design"].unique().map(set).to_dict()
    assert sorted(benchmarks.values()) == [1, 2, 2] and set(design) == set(ds.domains)
    for domain, n in benchmarks.items():
        assert design[domain] == ({DOMAIN_ONE_BENCHMARK} if n == 1 else {DOMAIN})
    assert len(table) == 12 * 5


def test_left_out_posterior_is_the_integral_over_the_domain_deviations():
    """One model, two domains and a domain-free column: the grid's left-out posterior of a
    domain-0 block's ability against a direct quadrature of the same model."""
    from scipy import stats

    from bayes_dualeval.checks.domain_grid import kernels, left_out_log_posterior

    grid = np.linspace(-6, 6, 241)
    rng = np.random.default_rng(1)

    def loglik(n, shift):  # a smooth log likelihood: n Bernoulli answers at ability shift
        b = rng.normal(shift, 1.0, n)
        y = rng.random(n) < 0.5
        p = 1 / (1 + np.exp(-(grid[:, None] - b)))
        return np.where(y, np.log(p), np.log1p(-p)).sum(axis=1)

    own, rest, other, free = loglik(15, 0.5), loglik(20, 0.5), loglik(25, -0.5), loglik(5, 0.0)
    tau = np.array([0.4, 0.7])
    column_ll = np.stack([own + rest, other, free])[None]  # (1, 3, G)
    log_prior = -0.5 * grid**2
    got = left_out_log_posterior(
        log_prior, column_ll, np.array([0]), np.array([0]), own[None], kernels(grid, tau)
    )[0]
    # direct: p(t) ∝ L_rest(t) ∫ prior(s) L_free(s) [∫ L_other(u) N(u; s, tau1) du]
    # N(t; s, tau0) ds, with densities on a finer quadrature
    fine = np.linspace(-6, 6, 961)
    on = lambda f: np.interp(fine, grid, f)  # noqa: E731
    lo, lf, lr = on(other), on(free), on(rest)
    conv = np.log(
        (np.exp(lo - lo.max())[:, None] * stats.norm.pdf(fine[:, None], fine, tau[1])).sum(0)
    )
    theta = -0.5 * fine**2 + lf + conv
    carried = np.log(
        (np.exp(theta - theta.max())[None] * stats.norm.pdf(fine[:, None], fine, tau[0])).sum(1)
    )
    direct = lr + carried
    w_got = np.exp(got - got.max())
    w_dir = np.exp(direct - direct.max())
    mean_got = np.sum(grid * w_got) / w_got.sum()
    mean_dir = np.sum(fine * w_dir) / w_dir.sum()
    sd_dir = np.sqrt(np.sum((fine - mean_dir) ** 2 * w_dir) / w_dir.sum())
    assert mean_got == pytest.approx(mean_dir, abs=0.01)
    sd_got = np.sqrt(np.sum((grid - mean_got) ** 2 * w_got) / w_got.sum())
    assert sd_got == pytest.approx(sd_dir, rel=0.02)
    # without domains the same function is the one-ability left-out posterior
    one = left_out_log_posterior(
        log_prior, (own + rest)[None, None], np.array([0]), np.array([0]), own[None]
    )
    np.testing.assert_allclose(one[0], log_prior + rest)
