"""Abilities per item domain (``abilities = "domain"``): the model, its tables and report.

The fitted test uses one small simulated panel with a planted specialist: an average model
that is 2 (prior sd) better than its overall ability in one domain and no different in the
others, as issue 24 states it.
"""

import json

import jax
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import compiled_trace, frames_dataset
from scipy.stats import spearmanr

from bayes_dualeval.cli.commands import cli
from bayes_dualeval.core.errors import ConfigError, InputError
from bayes_dualeval.measure.bank import Bank
from bayes_dualeval.model.ability_map import AbilityMap, ability_at, domain_map
from bayes_dualeval.model.config import ModelConfig, load_spec
from bayes_dualeval.model.inputs import build_inputs
from bayes_dualeval.model.joint import dualeval_model, global_sites
from bayes_dualeval.model.likelihood import arena_loglik
from bayes_dualeval.model.simulate import simulate
from bayes_dualeval.model.spec import DualEvalModel
from bayes_dualeval.runs.compare import compare_runs

DOMAIN = ModelConfig(abilities="domain")


def small(missing=0.2, seed_=4, **kw):
    static, arena, truth = simulate(6, 18, 9, missing=missing, seed=seed_, **kw)
    return frames_dataset(static, arena), truth


def test_configuration_refuses_what_it_cannot_fit():
    with pytest.raises(ConfigError, match="mode 'bt' has none"):
        ModelConfig(abilities="domain", mode="bt")
    with pytest.raises(ConfigError, match="abilities must be one of single, domain"):
        ModelConfig(abilities="skill")
    assert load_spec("dualeval-domains").abilities == "domain"


def test_inputs_map_items_to_their_domain_column():
    ds, _ = small()
    inputs, _ = build_inputs(ds, DOMAIN)
    assert inputs.n_domains == 3 and list(ds.domains) == ["code", "math", "writing"]
    expected = np.searchsorted(ds.domains, ds.item_domain)
    np.testing.assert_array_equal(np.asarray(inputs.item_domain), expected)
    single, _ = build_inputs(ds, ModelConfig())
    assert single.n_domains == 0 and not np.any(np.asarray(single.item_domain))
    # an item without a domain reads the overall ability (the last column)
    static, arena, _ = simulate(5, 10, 0, seed=1)
    static.loc[static["sample_index"] == 0, "domain"] = ""
    ds2 = frames_dataset(static, arena.iloc[:0])
    blank = np.asarray(ds2.item_domain) == ""
    assert blank.any() and np.all(ds2.domain_index[blank] == len(ds2.domains))
    table = np.arange(5 * (len(ds2.domains) + 1), dtype=float).reshape(5, -1)
    cells = ability_at(AbilityMap(table, ds2.domain_index), ds2.static_model, ds2.static_item)
    np.testing.assert_array_equal(
        cells, table[ds2.static_model, ds2.domain_index[ds2.static_item]]
    )
    one = table[:, -1]
    np.testing.assert_array_equal(ability_at(one, np.array([1, 2]), [0, 0]), one[[1, 2]])


def test_data_without_domains_is_a_clear_error():
    static, arena, _ = simulate(4, 8, 0, seed=2)
    ds = frames_dataset(static.drop(columns="domain"), arena.iloc[:0].drop(columns="domain"))
    with pytest.raises(ConfigError, match="no item in the data names one"):
        build_inputs(ds, DOMAIN)


def test_domain_likelihood_matches_a_plain_computation():
    """Every term reads the ability of the item's domain (float32: rtol 2e-5)."""
    ds, _ = small(domain_sd=0.7)
    inputs, _ = build_inputs(ds, DOMAIN)
    tr = compiled_trace(dualeval_model, inputs, DOMAIN, seed=3)
    value = {k: np.asarray(v["value"], np.float64) for k, v in tr.items()}
    theta, dom = value["theta"], value["theta_domain"]
    # the deviations sum to zero over models in every domain, and vary with the domain
    np.testing.assert_allclose((dom - theta[:, None]).sum(axis=0), 0.0, atol=1e-5)
    assert np.ptp(dom - theta[:, None]) > 0.01
    a, b = value["a"], value["b"]
    k = np.searchsorted(ds.domains, ds.item_domain)
    own = dom[ds.static_model, k[ds.static_item]]
    eta = a[ds.static_item] * (own - b[ds.static_item])
    y = ds.static_y
    expected = np.sum(y * -np.logaddexp(0, -eta) + (1 - y) * -np.logaddexp(0, eta))
    np.testing.assert_allclose(tr["static_y"]["log_prob"], expected, rtol=2e-5)
    # pointwise, as LOO and the checks compute it
    draws = {name: tr[name]["value"] for name in ("theta", "theta_domain", "a", "b")}
    model = DualEvalModel(DOMAIN)
    np.testing.assert_allclose(model.static_loglik(draws, inputs).sum(), expected, rtol=2e-5)
    # the arena factor with the table equals the per-prompt terms
    table = domain_map(tr["theta"]["value"], tr["theta_domain"]["value"], inputs.item_domain)
    loglik = jax.jit(arena_loglik)  # one program per ability table, not one per primitive
    per_item = loglik(
        table, tr["a"]["value"], tr["b"]["value"], tr["gamma"]["value"], 1.0, inputs, DOMAIN,
        tr["level_c"]["value"],
    )  # fmt: skip
    np.testing.assert_allclose(tr["arena"]["log_prob"], per_item.sum(), rtol=2e-5)
    # and a single ability is the table whose deviations are all zero
    flat = domain_map(
        tr["theta"]["value"], np.repeat(theta[:, None], 3, axis=1), inputs.item_domain
    )
    single = loglik(
        tr["theta"]["value"], tr["a"]["value"], tr["b"]["value"], tr["gamma"]["value"], 1.0,
        inputs, DOMAIN, tr["level_c"]["value"],
    )  # fmt: skip
    other = loglik(
        flat, tr["a"]["value"], tr["b"]["value"], tr["gamma"]["value"], 1.0, inputs, DOMAIN,
        tr["level_c"]["value"],
    )  # fmt: skip
    np.testing.assert_allclose(single, other, rtol=1e-5, atol=1e-5)
    assert "tau_domain" in global_sites(DOMAIN, inputs)


N_MODELS = 10
SPECIALIST, STRONG_DOMAIN = 4, 1  # the model ranked 5th of 10 overall; "math" (index 1)


@pytest.fixture(scope="module")
def specialist_run(tmp_path_factory):
    """A planted specialist, fitted once through ``fit`` (static only: 360 questions)."""
    root = tmp_path_factory.mktemp("domains")
    rng = np.random.default_rng(11)
    deviation = rng.normal(0.0, 0.3, (N_MODELS, 3))
    deviation -= deviation.mean(axis=0)
    static, arena, truth = simulate(
        N_MODELS, 360, 0, n_domains=3, seed=11, domain_deviation=deviation
    )
    # make the fifth-best model average overall and +2 in one domain
    names = list(truth["theta"])
    order = np.argsort([-truth["theta"][m] for m in names])
    spec = names[order[SPECIALIST]]
    index = names.index(spec)
    deviation[index] = 0.0
    deviation[index, STRONG_DOMAIN] = 2.0
    deviation -= deviation.mean(axis=0)
    static, arena, truth = simulate(
        N_MODELS, 360, 0, n_domains=3, seed=11, domain_deviation=deviation
    )
    (root / "data").mkdir()
    static.to_json(root / "data" / "static.jsonl", orient="records", lines=True)
    out = root / "run"
    printed = _nuts(root / "data", out, "--abilities", "domain")
    assert "best by domain (leaderboard_by_domain.csv): " in printed
    return out, truth, spec


def _nuts(data, out, *extra):
    result = CliRunner().invoke(
        cli,
        ["fit", str(data), "--chains", "2", "--warmup", "300", "--draws", "300", "--extend",
         "0", "--seed", "3", "--out", str(out), "-q", *extra],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.study
def test_the_specialist_leads_its_domain_only(specialist_run):
    out, truth, spec = specialist_run
    board = pd.read_csv(out / "leaderboard_by_domain.csv")
    assert list(board.columns) == [
        "domain", "rank", "model", "theta_mean", "theta_sd", "theta_lo", "theta_hi",
        "rank_mean", "rank_lo", "rank_hi", "p_top1", "overall_rank", "n_items", "ci",
        "converged",
    ]  # fmt: skip
    strong = ["math", "code", "writing"][STRONG_DOMAIN]  # the simulator's domain order
    first = board[board["rank"] == 1].set_index("domain")["model"]
    assert first[strong] == spec
    assert all(first[d] != spec for d in first.index if d != strong)
    # each domain's order matches the truth (issue 24: Spearman >= 0.85)
    for domain, rows in board.groupby("domain"):
        true = [truth["theta_domain"][m][domain] for m in rows["model"]]
        assert spearmanr(rows["theta_mean"], true).statistic >= 0.85, domain
    # items answered per model and domain, and the overall rank from leaderboard.csv
    assert set(board["n_items"]) == {120}
    overall = pd.read_csv(out / "leaderboard.csv").set_index("model")["rank"]
    np.testing.assert_array_equal(board["overall_rank"], overall[board["model"]].to_numpy())
    # the deviations table calls the specialist stronger where it is
    dev = pd.read_csv(out / "domain_deviations.csv")
    row = dev[(dev["model"] == spec) & (dev["domain"] == strong)].iloc[0]
    assert row["specialist"] == "stronger" and row["p_above"] > 0.99
    true = truth["theta_domain"][spec][strong] - truth["theta"][spec]
    assert row["deviation_lo"] < true < row["deviation_hi"]


def test_the_report_shows_domain_abilities_and_specialists(specialist_run):
    out, _, spec = specialist_run
    report = (out / "report.md").read_text(encoding="utf-8")
    section = report.split("## Abilities by domain", 1)[1].split("\n## ", 1)[0]
    assert "figures/domain_heatmap.png" in section
    assert "figures/domain_wright.png" in section
    assert "Specialists:" in section and spec in section
    assert (out / "figures" / "domain_heatmap.png").stat().st_size > 10_000
    diagnostics = json.loads((out / "diagnostics.json").read_text())
    assert diagnostics["config"]["abilities"] == "domain"
    # the benchmark audit reads the block's domain ability; each simulated domain is one
    # benchmark, so no row can tell a specialist from a leak, and every row says so
    audit = pd.read_csv(out / "contamination.csv", keep_default_na=False)
    assert set(audit["design"]) == {"left_out_domain_only"}
    assert set(audit.loc[audit["kind"] == "static", "domain"]) == {"code", "math", "writing"}


def test_a_domain_bank_is_refused_by_the_measuring_commands(specialist_run):
    out, _, _ = specialist_run
    with pytest.raises(InputError, match="ability per item domain"):
        Bank.from_run(out)


def test_one_ability_runs_have_no_domain_section(tmp_path):
    static, arena, _ = simulate(5, 30, 0, seed=2)
    (tmp_path / "data").mkdir()
    static.to_json(tmp_path / "data" / "static.jsonl", orient="records", lines=True)
    result = CliRunner().invoke(
        cli,
        ["fit", str(tmp_path / "data"), "--sampler", "map", "--out", str(tmp_path / "run"),
         "-q"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "run" / "leaderboard_by_domain.csv").exists()
    report = (tmp_path / "run" / "report.md").read_text(encoding="utf-8")
    section = report.split("## Abilities by domain", 1)[1].split("\n## ", 1)[0]
    assert "abilities='domain'" in section


@pytest.mark.study
def test_compare_prefers_domain_abilities_on_a_panel_with_a_specialist(specialist_run):
    """PSIS-LOO over the same static labels: the specialist's domain is what one ability misses."""
    out, _, _ = specialist_run
    one = out.parent / "one"
    _nuts(out.parent / "data", one, "--no-report")
    table = compare_runs([one, out])
    best = table.iloc[0]
    assert best["run"] == str(out)
    assert table.iloc[1]["elpd_diff"] > 2 * table.iloc[1]["dse"]
    assert bool(best["preferred"])
