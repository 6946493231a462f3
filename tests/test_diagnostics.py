"""Convergence diagnostics over every site, energy checks, and drawing more when they fail."""

import warnings
from dataclasses import replace

import arviz as az
import numpy as np
import pytest

from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.data.simulate import simulate
from bayes_dualeval.inference.nuts import DIVERGENCE_TARGET_ACCEPTS, run_nuts
from bayes_dualeval.inference.settings import SamplerSettings
from bayes_dualeval.model.config import ModelConfig
from bayes_dualeval.model.inputs import build_inputs
from bayes_dualeval.posterior.diagnostics import (
    EBFMI_MIN,
    convergence,
    draws_converged,
    energy_stats,
    per_parameter,
)


def _idata(rng, *, shift_raw=0.0, energy=None, n_steps=None, chains=4, draws=1000):
    post = {
        "theta": rng.normal(size=(chains, draws, 3)),
        "sigma_b": np.abs(rng.normal(size=(chains, draws, 1))) + 0.5,
        "log_a_raw": rng.normal(size=(chains, draws, 5)),
    }
    post["log_a_raw"][0, :, 2] += shift_raw  # one chain stuck elsewhere on a raw site
    stats = {"diverging": np.zeros((chains, draws), bool)}
    stats["energy"] = rng.normal(size=(chains, draws)) if energy is None else energy
    if n_steps is not None:
        stats["n_steps"] = n_steps
    return az.from_dict(posterior=post, sample_stats=stats)


def test_iid_draws_converge_and_every_scalar_is_checked():
    idata = _idata(np.random.default_rng(0))
    conv = convergence(idata, "nuts", max_tree_depth=6)
    assert conv["converged"], conv["problems"]
    assert conv["n_parameters"] == 3 + 1 + 5
    assert conv["max_rhat"] < 1.01 and conv["min_ess_tail"] > 400
    assert conv["ebfmi_min"] > 1.0  # independent energies: E-BFMI about 2
    table = per_parameter(idata)
    assert "log_a_raw[2]" in table.index and "sigma_b[0]" in table.index


def test_a_stuck_chain_on_a_raw_site_fails_and_is_named():
    """Raw (non-centred) sites are checked too, not only theta, a and b."""
    idata = _idata(np.random.default_rng(1), shift_raw=1.5)
    conv = convergence(idata, "nuts")
    assert conv["converged"] is False
    assert conv["worst"][0]["parameter"] == "log_a_raw[2]"
    assert conv["worst"][0]["rhat"] > 1.05
    assert any("R-hat" in p for p in conv["problems"])


def test_low_ebfmi_is_a_problem():
    rng = np.random.default_rng(2)
    walk = np.cumsum(rng.normal(size=(4, 1000)), axis=1) * 0.1  # energy that barely moves
    idata = _idata(rng, energy=walk)
    stats = energy_stats(idata, None)
    assert stats["ebfmi_min"] < EBFMI_MIN
    assert len(stats["ebfmi"]) == 4
    conv = convergence(idata, "nuts")
    assert conv["converged"] is False
    assert any("E-BFMI" in p for p in conv["problems"])


def test_treedepth_share_counts_draws_at_the_cap_and_is_a_note():
    steps = np.full((4, 1000), 7)
    steps[:, :100] = 63  # 10% at 2**6 - 1
    idata = _idata(np.random.default_rng(3), n_steps=steps)
    conv = convergence(idata, "nuts", max_tree_depth=6)
    assert conv["treedepth_hit_share"] == pytest.approx(0.1)
    assert conv["converged"]  # an efficiency note, not a failure
    assert any("tree depth" in n for n in conv["notes"])
    assert convergence(idata, "nuts", max_tree_depth=7)["treedepth_hit_share"] == 0.0


def test_point_estimates_have_no_convergence_verdict():
    idata = _idata(np.random.default_rng(4), chains=1, draws=1)
    conv = convergence(idata, "map")
    assert conv["converged"] is None and conv["max_rhat"] is None


#: The last rung of the divergence ladder: from there a round always continues the chains.
TOP = DIVERGENCE_TARGET_ACCEPTS[-1]


def _tiny_inputs():
    static, _, _ = simulate(5, 12, 0, seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = Dataset.from_frames(static=static)
    config = ModelConfig(mode="static")
    inputs, _ = build_inputs(ds, config, centred="auto")
    return inputs, config


def test_nuts_draws_more_rounds_while_the_check_fails():
    inputs, config = _tiny_inputs()
    # at the last divergence target acceptance already, a round always continues the chains
    settings = SamplerSettings(chains=1, warmup=50, draws=20, extend=2, seed=1, target_accept=TOP)
    calls = []

    def until(draws):
        calls.append(draws.samples["theta"].shape[1])
        return len(calls) >= 2  # fails after round 1, passes after round 2

    draws = run_nuts(inputs, config, settings, until=until)
    assert calls == [20, 40]
    assert draws.info["rounds"] == 2
    assert draws.samples["theta"].shape[:2] == (1, 40)
    assert draws.stats["diverging"].shape == (1, 40)
    # the continued chain carries on from where it stopped: no restart at the initial point
    assert np.isfinite(draws.samples["theta"]).all()


def test_nuts_stops_extending_at_its_budget():
    inputs, config = _tiny_inputs()
    # at the last divergence target acceptance, so the second round continues (never restarts)
    settings = SamplerSettings(chains=1, warmup=30, draws=10, extend=1, seed=2, target_accept=TOP)
    draws = run_nuts(inputs, config, settings, until=lambda d: False)
    assert draws.info["rounds"] == 2 and draws.samples["theta"].shape[1] == 20
    assert draws.info["max_tree_depth"] == settings.max_tree_depth  # continued, not deepened
    draws = run_nuts(inputs, config, replace(settings, extend=0), until=lambda d: False)
    assert draws.info["rounds"] == 1


def test_draws_converged_reads_raw_draws():
    rng = np.random.default_rng(5)
    samples = {"theta": rng.normal(size=(4, 500, 2))}
    stats = {"diverging": np.zeros((4, 500), bool), "energy": rng.normal(size=(4, 500))}
    assert draws_converged(samples, stats)
    samples["theta"][1] += 3.0
    assert not draws_converged(samples, stats)


def test_divergences_restart_with_a_smaller_step_instead_of_drawing_more():
    inputs, config = _tiny_inputs()
    # a target acceptance this low adapts a step size far too large: divergences follow
    settings = SamplerSettings(chains=1, warmup=60, draws=20, extend=1, seed=3, target_accept=0.05)
    seen = []

    def until(draws):
        seen.append(bool(draws.stats["diverging"].any()))
        return False

    draws = run_nuts(inputs, config, settings, until=until)
    assert seen == [True]  # the first round diverged; the second is not checked (budget)
    assert (
        draws.info["rounds"] == 2 and draws.info["target_accept"] == DIVERGENCE_TARGET_ACCEPTS[0]
    )
    # the smaller step size gets a trajectory cap one level deeper
    assert draws.info["max_tree_depth"] == settings.max_tree_depth + 1
    assert draws.samples["theta"].shape[1] == 20  # replaced, not appended


def test_divergences_climb_the_ladder_of_target_acceptances(monkeypatch):
    from bayes_dualeval.inference import nuts

    inputs, config = _tiny_inputs()
    # rungs this low keep the step size too large, so every round diverges and climbs
    monkeypatch.setattr(nuts, "DIVERGENCE_TARGET_ACCEPTS", (0.1, 0.15))
    settings = SamplerSettings(chains=1, warmup=60, draws=20, extend=3, seed=3, target_accept=0.05)
    seen = []

    def until(draws):
        seen.append((draws.info["max_tree_depth"], bool(draws.stats["diverging"].any())))
        return False

    draws = run_nuts(inputs, config, settings, until=until)
    depth = settings.max_tree_depth
    assert seen[:3] == [(depth, True), (depth + 1, True), (depth + 2, True)]
    # past the last rung the chains continue: same kernel, draws appended
    assert draws.info["target_accept"] == 0.15 and draws.info["max_tree_depth"] == depth + 2
    assert draws.samples["theta"].shape[1] == 40


def test_report_shows_the_final_rounds_settings():
    from bayes_dualeval.report.panels.diagnostics import _final

    assert _final({}, "target_accept", 0.8) == "0.8"
    assert _final({"max_tree_depth": 8}, "max_tree_depth", 8) == "8"
    raised = _final({"target_accept": 0.99}, "target_accept", 0.8)
    assert raised.startswith("0.99 (requested 0.8;")
