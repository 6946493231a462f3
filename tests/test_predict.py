"""``predict``: posterior predictions for any model-item pair, and routing by them."""

import json

import arviz as az
import numpy as np
import pandas as pd
import pytest
from conftest import invoke, one_error

from bayes_dualeval.model.simulate import simulate, write

SPECIALIST = "cirrus-34b"  # model 2 of the simulator's names


@pytest.fixture(scope="module")
def domain_run(tmp_path_factory):
    """An SVI fit with abilities per domain on a panel with one specialist (+3 in code)."""
    root = tmp_path_factory.mktemp("predict")
    deviation = np.zeros((6, 2))  # columns in the simulator's order: math, code
    deviation[2, 1] = 3.0  # the specialist is strong in code
    deviation[:, 1] -= deviation[:, 1].mean()
    static, arena, truth = simulate(
        6, 60, 8, n_domains=2, missing=0.2, domain_deviation=deviation, seed=4
    )
    write(root / "data", static, arena, truth)
    out = root / "run"
    result = invoke(
        "fit", root / "data", "--sampler", "svi", "--abilities", "domain", "--svi-steps", "3000",
        "--draws", "400", "--seed", "2", "--no-report", "--out", out,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return out, root / "data", truth


def test_static_predictions_are_the_posterior_success_probability(domain_run):
    out, _, _ = domain_run
    r = invoke("predict", "--allow-approximate", out)
    assert r.exit_code == 0, r.output
    table = pd.read_csv(out / "predictions.csv")
    idata = az.from_netcdf(out / "posterior.nc")
    post = idata.posterior
    models = list(post["model"].values)
    items = list(post["item"].values)
    domains = sorted(set(idata.constant_data["item_domain"].values.astype(str)) - {""})
    static = table[table["kind"] == "static"]
    assert len(static) == len(models) * int((idata.constant_data["item_kind"] == "static").sum())
    # by hand from the draws: the domain ability, the item's a and b
    theta_domain = post["theta_domain"].values.reshape(-1, len(models), len(domains))
    a = post["a"].values.reshape(-1, len(items))
    b = post["b"].values.reshape(-1, len(items))
    for row in static.sample(25, random_state=0).itertuples():
        m, q = models.index(row.model), items.index(row.item)
        d = domains.index(str(idata.constant_data["item_domain"].values[q]))
        p = 1.0 / (1.0 + np.exp(-a[:, q] * (theta_domain[:, m, d] - b[:, q])))
        assert row.p_mean == pytest.approx(p.mean(), abs=1e-5)
        lo, hi = np.quantile(p, [0.025, 0.975])
        assert (row.p_lo, row.p_hi) == pytest.approx((lo, hi), abs=1e-5)
    assert (static["ci"] == 0.95).all()  # the one default level


def test_observed_is_the_label_where_the_data_had_the_cell(domain_run):
    out, data, _ = domain_run
    table = pd.read_csv(out / "predictions.csv")
    static = table[table["kind"] == "static"].set_index(["model", "item"])
    lines = (data / "bench" / "static.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    labels = {
        (r["model_label"], f"bench::{r['dataset']}_{r['sample_index']}"): r["correct"]
        for r in rows
    }
    assert static["observed"].notna().sum() == len(labels)  # the rest was missing (20%)
    assert static["observed"].isna().sum() > 0
    for key, label in list(labels.items())[:50]:
        assert static.loc[key, "observed"] == label


def test_arena_predictions_are_pairwise_and_complementary(domain_run):
    out, _, _ = domain_run
    table = pd.read_csv(out / "predictions.csv", keep_default_na=False, na_values=[""])
    arena = table[table["kind"] == "arena"]
    assert (arena["model"] != arena["opponent"]).all()
    assert len(arena) == 6 * 5 * 8  # every ordered pair of the 6 models on 8 prompts
    forward = arena.set_index(["model", "opponent", "item"])["p_mean"]
    backward = arena.set_index(["opponent", "model", "item"])["p_mean"]
    backward.index = backward.index.set_names(["model", "opponent", "item"])
    np.testing.assert_allclose(forward, backward.reindex(forward.index).rsub(1.0), atol=1e-5)
    seen = arena.dropna(subset=["observed"])
    assert len(seen) > 0 and seen["observed"].between(0, 1).all()
    # the observed soft targets and the predictions agree in direction more often than not
    agree = np.sign(seen["observed"] - 0.5) == np.sign(seen["p_mean"] - 0.5)
    assert agree.mean() > 0.6


def test_cells_file_and_named_opponents(domain_run, tmp_path):
    out, _, _ = domain_run
    cells = tmp_path / "cells.csv"
    pd.DataFrame(
        {
            "model": ["atlas-70b", SPECIALIST],
            "item": ["bench::code_bench_3", "arena::math_prompt_0001"],
            "opponent": ["", "atlas-70b"],
        }
    ).to_csv(cells, index=False)
    target = tmp_path / "wanted.csv"
    r = invoke("predict", "--allow-approximate", out, "--cells", cells, "--out", target)
    assert r.exit_code == 0, r.output
    table = pd.read_csv(target, keep_default_na=False, na_values=[""])
    assert list(table.columns[:8]) == [
        "model", "opponent", "item", "kind", "p_mean", "p_lo", "p_hi", "observed",
    ]  # fmt: skip
    assert len(table) == 2
    assert table.loc[table["kind"] == "arena", "opponent"].item() == "atlas-70b"


def test_routing_sends_the_specialists_domain_to_the_specialist(domain_run):
    out, _, truth = domain_run
    r = invoke("predict", "--allow-approximate", out, "--route")
    assert r.exit_code == 0, r.output
    assert "best single model" in r.output and "oracle" in r.output
    table = pd.read_csv(out / "routing.csv")
    code = table["item"].str.contains("code_")
    # the specialist wins the code items, and not the others
    assert (table.loc[code, "model"] == SPECIALIST).mean() > 0.8
    assert (table.loc[~code, "model"] == SPECIALIST).mean() < 0.2
    assert table["p_best"].between(0, 1).all()
    # routed >= best single model; the oracle knows each draw's best, so it is higher still
    line = next(ln for ln in r.output.splitlines() if ln.startswith("routed"))
    routed, single, oracle = (float(x) for x in _numbers(line))
    assert single < routed <= oracle


def _numbers(line: str) -> list[str]:
    import re

    return [x for x in re.findall(r"\d\.\d{3}", line)]


def test_a_cost_moves_the_route(domain_run, tmp_path):
    out, _, _ = domain_run
    prices = tmp_path / "prices.csv"
    idata = az.from_netcdf(out / "posterior.nc")
    models = list(idata.posterior["model"].values)
    cost = {m: (10.0 if m == SPECIALIST else 0.0) for m in models}
    pd.DataFrame({"model": list(cost), "cost": list(cost.values())}).to_csv(prices, index=False)
    target = tmp_path / "route.csv"
    r = invoke(
        "predict",
        "--allow-approximate",
        out,
        "--route",
        "--cost",
        prices,
        "--cost-weight",
        1,
        "--out",
        target,
    )
    assert r.exit_code == 0, r.output
    table = pd.read_csv(target)
    assert (table["model"] != SPECIALIST).all()
    assert {"cost", "utility_mean"} <= set(table.columns)
    assert "mean utility" in r.output


def test_mistakes_are_one_line_errors(domain_run, tmp_path):
    out, _, _ = domain_run
    one_error(
        invoke("predict", "--allow-approximate", out, "--models", "nope,atlas-70b"),
        "no model 'nope'",
    )
    one_error(
        invoke("predict", "--allow-approximate", out, "--items", "bench::x"), "no item 'bench::x'"
    )
    bad = tmp_path / "bad.csv"
    bad.write_text("model,question\natlas-70b,x\n")
    one_error(
        invoke("predict", "--allow-approximate", out, "--cells", bad), "needs the column(s) item"
    )
    one_error(
        invoke("predict", "--allow-approximate", out, "--cells", bad, "--models", "a"), "not both"
    )
    prices = tmp_path / "prices.csv"
    prices.write_text("model,cost\natlas-70b,1\n")
    one_error(
        invoke("predict", "--allow-approximate", out, "--cost", prices),
        "only applies with --route",
    )
    one_error(
        invoke("predict", "--allow-approximate", out, "--route", "--cost", prices), "no cost for"
    )
    prices.write_text("model,cost\natlas-70b,cheap\n")
    one_error(
        invoke("predict", "--allow-approximate", out, "--route", "--cost", prices),
        "line 2",
        "not a number",
    )
    same = tmp_path / "same.csv"
    same.write_text("model,item,opponent\natlas-70b,arena::math_prompt_0001,atlas-70b\n")
    one_error(
        invoke("predict", "--allow-approximate", out, "--cells", same), "two different models"
    )


def test_a_bradley_terry_run_predicts_pairs_and_refuses_to_route(tmp_path):
    static, arena, truth = simulate(4, 0, 5, seed=1)
    write(tmp_path / "data", static, arena, truth)
    out = tmp_path / "bt"
    r = invoke("fit", tmp_path / "data", "--model", "bradley-terry", "--sampler", "map",
               "--out", out)  # fmt: skip
    assert r.exit_code == 0, r.output
    r = invoke("predict", "--allow-approximate", out)
    assert r.exit_code == 0, r.output
    table = pd.read_csv(out / "predictions.csv")
    assert len(table) == 4 * 3 * 5 and (table["kind"] == "arena").all()
    idata = az.from_netcdf(out / "posterior.nc")
    post = idata.posterior
    theta = dict(zip(post["model"].values, post["theta"].values[0, 0], strict=True))
    row = table.iloc[0]
    expected = 1.0 / (1.0 + np.exp(-(theta[row["model"]] - theta[row["opponent"]])))
    assert row["p_mean"] == pytest.approx(expected, abs=1e-5)
    one_error(invoke("predict", "--allow-approximate", out, "--route"), "no item parameters")
