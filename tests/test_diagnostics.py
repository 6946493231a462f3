"""Convergence diagnostics over every site, energy checks, and drawing more when they fail."""

import json
import warnings
from dataclasses import replace

import arviz as az
import numpy as np
import pytest

from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.inference import nuts, nuts_round
from bayes_dualeval.inference.nuts import DIVERGENCE_TARGET_ACCEPTS, run_nuts
from bayes_dualeval.inference.nuts_round import continuation_draws
from bayes_dualeval.inference.settings import SamplerSettings
from bayes_dualeval.model.config import ModelConfig
from bayes_dualeval.model.inputs import build_inputs
from bayes_dualeval.model.simulate import simulate
from bayes_dualeval.posterior.convergence import LIMITS, Convergence, ConvergenceLimits
from bayes_dualeval.posterior.diagnostics import (
    Verdict,
    convergence,
    draws_converged,
    draws_needed,
    draws_verdict,
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
    assert conv.converged, conv.problems
    assert conv.n_parameters == 3 + 1 + 5
    assert conv.max_rhat < 1.01 and conv.min_ess_tail > 400
    assert conv.ebfmi_min > 1.0  # independent energies: E-BFMI about 2
    table = per_parameter(idata)
    assert "log_a_raw[2]" in table.index and "sigma_b[0]" in table.index


def test_a_stuck_chain_on_a_raw_site_fails_and_is_named():
    """Raw (non-centred) sites are checked too, not only theta, a and b."""
    idata = _idata(np.random.default_rng(1), shift_raw=1.5)
    conv = convergence(idata, "nuts")
    assert conv.converged is False
    assert conv.worst[0].parameter == "log_a_raw[2]"
    assert conv.worst[0].rhat > 1.05
    assert any("R-hat" in p for p in conv.problems)


def test_low_ebfmi_is_a_problem():
    rng = np.random.default_rng(2)
    walk = np.cumsum(rng.normal(size=(4, 1000)), axis=1) * 0.1  # energy that barely moves
    idata = _idata(rng, energy=walk)
    stats = energy_stats(idata, None)
    assert stats["ebfmi_min"] < LIMITS.ebfmi_min
    assert len(stats["ebfmi"]) == 4
    conv = convergence(idata, "nuts")
    assert conv.converged is False
    assert any("E-BFMI" in p for p in conv.problems)


def test_treedepth_share_counts_draws_at_the_cap_and_is_a_note():
    steps = np.full((4, 1000), 7)
    steps[:, :100] = 63  # 10% at 2**6 - 1
    idata = _idata(np.random.default_rng(3), n_steps=steps)
    conv = convergence(idata, "nuts", max_tree_depth=6)
    assert conv.treedepth_hit_share == pytest.approx(0.1)
    assert conv.converged  # an efficiency note, not a failure
    assert any("tree depth" in n for n in conv.notes)
    assert convergence(idata, "nuts", max_tree_depth=7).treedepth_hit_share == 0.0


def test_divergences_are_located_and_the_advice_follows_the_target_acceptance():
    from bayes_dualeval.posterior.diagnostics import divergence_site

    rng = np.random.default_rng(8)
    idata = _idata(rng)
    assert divergence_site(idata) is None  # no divergent draws
    div = np.zeros((4, 1000), bool)
    div[:, :5] = True
    # the divergent draws sit 3 sd out on one element of a vector site
    idata.posterior["log_a_raw"].values[:, :5, 3] = 3.0
    idata.sample_stats["diverging"].values[:] = div
    site = divergence_site(idata)
    assert site["parameter"] == "log_a_raw[3]" and 2.5 < site["sd"] < 3.5
    low = convergence(idata, "nuts", target_accept=0.8)
    assert low.divergent_site == site
    (problem,) = [p for p in low.problems if "divergent" in p]
    assert problem.startswith("20 divergent transitions in 4,000 draws at target acceptance 0.8")
    assert "near log_a_raw[3]" in problem and "estimates may be biased there" in problem
    assert "raise the target acceptance: target_accept=0.99" in problem
    top = convergence(idata, "nuts", target_accept=0.99)
    (problem,) = [p for p in top.problems if "divergent" in p]
    assert "at target acceptance 0.99" in problem and "target_accept=" not in problem
    assert "consider item_prior='independent' or a simpler irt='1pl'" in problem


def test_point_estimates_have_no_convergence_verdict():
    idata = _idata(np.random.default_rng(4), chains=1, draws=1)
    conv = convergence(idata, "map")
    assert conv.converged is None and conv.max_rhat is None
    assert conv == Convergence()


#: The keys of ``diagnostics.json``'s ``convergence`` entry, in their order.
CONVERGENCE_KEYS = [
    "max_rhat", "min_ess_bulk", "min_ess_tail", "divergences", "ebfmi", "ebfmi_min",
    "treedepth_hit_share", "n_parameters", "worst", "converged", "problems", "notes",
    "divergent_site",
]  # fmt: skip


def test_the_typed_result_writes_the_same_dict_and_reads_it_back():
    rng = np.random.default_rng(1)
    idata = _idata(rng, shift_raw=1.5)
    idata.sample_stats["diverging"].values[0, :3] = True
    conv = convergence(idata, "nuts", max_tree_depth=6)
    data = conv.to_dict()
    assert list(data) == CONVERGENCE_KEYS
    assert isinstance(data["ebfmi"], list) and len(data["ebfmi"]) == 4
    assert isinstance(data["problems"], list) and isinstance(data["worst"][0], dict)
    assert list(data["worst"][0]) == ["parameter", "rhat", "ess_bulk", "ess_tail"]
    assert data["divergences"] == 3 and set(data["divergent_site"]) == {"parameter", "sd"}
    # what diagnostics.json holds reads back into the same result
    assert Convergence.from_dict(json.loads(json.dumps(data))) == conv
    assert list(conv.headline()) == list(Convergence.HEADLINE)
    assert conv.headline()["max_rhat"] == data["max_rhat"]
    assert list(Convergence().to_dict()) == CONVERGENCE_KEYS
    assert Convergence.from_dict({"converged": True, "unknown": 1}) == Convergence(converged=True)


def test_the_limits_are_one_object_that_the_check_follows():
    idata = _idata(np.random.default_rng(0))
    assert convergence(idata, "nuts").converged
    assert LIMITS == ConvergenceLimits(rhat_max=1.01, ess_min=400, ebfmi_min=0.3)
    strict = replace(LIMITS, ess_min=10**6)
    conv = convergence(idata, "nuts", limits=strict)
    assert conv.converged is False
    assert any(f"ESS < {10**6}" in p and "draws=2000" in p for p in conv.problems)
    assert convergence(idata, "nuts", limits=replace(LIMITS, ebfmi_min=10.0)).converged is False


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


def test_nuts_draws_more_rounds_while_the_check_fails(caplog, monkeypatch):
    import logging

    import bayes_dualeval.inference.nuts as nuts_module

    caplog.set_level(logging.INFO, logger="bayes_dualeval")
    beating = []  # what each round's heartbeat watched (its lines: tests/test_heartbeat.py)
    real = nuts_module.heartbeat
    monkeypatch.setattr(
        nuts_module,
        "heartbeat",
        lambda logger, what, *a: beating.append(what) or real(logger, what),
    )
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
    # each round is said as it starts and ends (parallel chains have no progress bar)
    said = [r.getMessage() for r in caplog.records if r.name.startswith("bayes_dualeval")]
    # the heartbeat's lines depend on the machine's speed (a loaded one: "still running")
    said = [m for m in said if " still running " not in m]
    assert said[0] == "round 1: 1 chain(s), 50 warm-up iterations and 20 draws each"
    assert said[1].startswith("round 1 finished")
    assert said[2] == "round 2: the convergence check has not passed; 20 more draws per chain"
    assert said[3].startswith("round 2 finished") and len(said) == 4
    assert beating == ["round 1", "round 2"]
    assert draws.samples["theta"].shape[:2] == (1, 40)
    assert draws.stats["diverging"].shape == (1, 40)
    # the continued chain carries on from where it stopped: no restart at the initial point
    assert np.isfinite(draws.samples["theta"]).all()


def test_a_continuation_in_chunks_draws_what_one_run_draws(monkeypatch):
    """A round that continues the chains runs in chunks of :data:`CONTINUE_STEP` draws (one
    compiled program for every length); each chunk carries on from the state and key the
    last one stopped at, so the draws are exactly those of one run of the whole length."""
    inputs, config = _tiny_inputs()
    settings = SamplerSettings(chains=1, warmup=50, draws=20, extend=1, seed=4, target_accept=TOP)
    real, chunks = nuts_round.one_round, []
    monkeypatch.setattr(
        nuts_round,
        "one_round",
        lambda *a, **kw: chunks.append(a[5] if len(a) > 5 else 1) or real(*a, **kw),
    )
    runs = {}
    for step in (10, 7):  # 20 draws: two chunks of 10; or, 20 not a multiple of 7, one run
        monkeypatch.setattr(nuts_round, "CONTINUE_STEP", step)
        draws = run_nuts(inputs, config, settings, until=lambda d: False)
        assert draws.info["rounds"] == 2 and draws.samples["theta"].shape[1] == 40
        runs[step] = draws
    assert chunks == [1, 2, 1, 1]  # round 1, then the continuation: in chunks, then whole
    for name, values in runs[10].samples.items():
        np.testing.assert_array_equal(values, runs[7].samples[name], err_msg=name)
    for name, values in runs[10].stats.items():
        np.testing.assert_array_equal(values, runs[7].stats[name], err_msg=name)


def test_nuts_stops_extending_at_its_budget():
    inputs, config = _tiny_inputs()
    # at the last divergence target acceptance, so the second round continues (never restarts);
    # warm-up and draws as in the test above, so its compiled programs are reused
    settings = SamplerSettings(chains=1, warmup=50, draws=20, extend=1, seed=2, target_accept=TOP)
    draws = run_nuts(inputs, config, settings, until=lambda d: False)
    assert draws.info["rounds"] == 2 and draws.samples["theta"].shape[1] == 40
    assert draws.info["max_tree_depth"] == settings.max_tree_depth  # continued, not deepened
    draws = run_nuts(inputs, config, replace(settings, extend=0), until=lambda d: False)
    assert draws.info["rounds"] == 1


def test_a_first_round_in_stages_draws_what_one_run_draws(caplog, monkeypatch):
    """From STAGED_TERMS terms on, round 1 runs warm-up apart and its draws in chunks, saying
    how far it has got; the draws are exactly those of the round run in one piece."""
    import logging

    caplog.set_level(logging.INFO, logger="bayes_dualeval")
    inputs, config = _tiny_inputs()
    # the settings of the continuation test above: its programs (warm-up and 20 draws in one
    # piece; 10-draw chunks) are the ones compared here
    settings = SamplerSettings(chains=1, warmup=50, draws=20, seed=4, target_accept=TOP)
    monkeypatch.setattr(nuts_round, "CONTINUE_STEP", 10)
    runs, lines = {}, {}
    for staged in (True, False):
        monkeypatch.setattr(nuts_round, "STAGED_TERMS", 0 if staged else 10**9)
        assert nuts_round.staged_chunks(inputs, settings) == (2 if staged else 1)
        caplog.clear()
        runs[staged] = run_nuts(inputs, config, settings)
        said = [r.getMessage() for r in caplog.records if r.name.startswith("bayes_dualeval")]
        lines[staged] = [m for m in said if " still running " not in m]
    assert runs[True].samples["theta"].shape[1] == 20 and runs[True].info["rounds"] == 1
    for name, values in runs[True].samples.items():
        np.testing.assert_array_equal(values, runs[False].samples[name], err_msg=name)
    for name, values in runs[True].stats.items():
        np.testing.assert_array_equal(values, runs[False].stats[name], err_msg=name)
    assert lines[True][0].endswith("and 20 draws each (warm-up, then 2 runs of 10 draws)")
    assert lines[True][1].startswith("warm-up finished (")
    assert lines[True][2].startswith("round 1 finished")
    assert lines[False][0].endswith("and 20 draws each")


def test_the_progress_of_a_round_in_stages(monkeypatch):
    """What the heartbeat reads while a staged round runs: warm-up done, then the draws
    made and how long the rest should take."""
    inputs, config = _tiny_inputs()
    settings = SamplerSettings(chains=1, warmup=50, draws=20, seed=4, target_accept=TOP)
    monkeypatch.setattr(nuts_round, "CONTINUE_STEP", 10)
    monkeypatch.setattr(nuts_round, "STAGED_TERMS", 0)
    seen = []
    real_run = nuts.MCMC.run

    def run(self, *args, **kwargs):
        seen.append(dict(progress))  # what the heartbeat would read as this run starts
        return real_run(self, *args, **kwargs)

    progress: dict = {}
    real_round = nuts_round.one_round
    monkeypatch.setattr(nuts.MCMC, "run", run)
    monkeypatch.setattr(
        nuts_round, "one_round", lambda *a, **kw: real_round(*a[:6], progress, **kw)
    )
    run_nuts(inputs, config, settings)
    said = [p.get("draws") for p in seen]
    # warm-up (MCMC.warmup runs MCMC.run), then two chunks of ten draws
    assert said[0] is None and said[1] == "warm-up done; 0 of 20 draws"
    assert said[2].startswith("10 of 20 draws, about ") and said[2].endswith(" left")
    assert len(said) == 3
    assert "draws" not in progress  # cleared when the round ends


def test_ctrl_c_in_a_first_round_in_stages_keeps_the_chunks_drawn(monkeypatch):
    """A first Ctrl-C after warm-up stops a staged first round at the end of the running
    chunk, with its draws; during warm-up it abandons the round (nothing to keep)."""
    import os
    import signal

    inputs, config = _tiny_inputs()
    settings = SamplerSettings(
        chains=1, warmup=50, draws=20, seed=4, target_accept=TOP, progress=False
    )
    monkeypatch.setattr(nuts_round, "CONTINUE_STEP", 10)
    monkeypatch.setattr(nuts_round, "STAGED_TERMS", 0)
    real_run = nuts.MCMC.run
    for signalled_at, kept in ((2, 10), (1, None)):  # in the first chunk; during warm-up
        calls = []

        def run(self, *args, calls=calls, signalled_at=signalled_at, **kwargs):
            calls.append(1)
            if len(calls) == signalled_at:
                os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while this run goes on
            return real_run(self, *args, **kwargs)

        monkeypatch.setattr(nuts.MCMC, "run", run)
        before = signal.getsignal(signal.SIGINT)
        if kept is None:
            with pytest.raises(KeyboardInterrupt):
                run_nuts(inputs, config, settings)
            assert len(calls) == 1  # warm-up ran; no chunk was started
        else:
            draws = run_nuts(inputs, config, settings)
            assert len(calls) == 2 and draws.samples["theta"].shape[1] == kept
            assert draws.info["interrupted_round"] == 1 and draws.info["rounds"] == 1
            assert draws.info["interrupted_draws"] == [10, 20]
            assert draws.adaptation is None  # not written for a cut run
        assert signal.getsignal(signal.SIGINT) is before


def test_a_round_cut_short_is_said_with_what_it_kept():
    from bayes_dualeval.runs.fit import _interrupted

    conv = Convergence(converged=False, problems=("R-hat 1.05",))
    info = {"interrupted_round": 1, "rounds": 1, "interrupted_draws": [250, 1000]}
    said = _interrupted(conv, info).problems[0]
    assert said.startswith("interrupted in round 1: the run holds 250 of that round's 1000 ")
    info = {"interrupted_round": 3, "rounds": 3, "interrupted_draws": [50, 200]}
    assert (
        "50 of that round's 200 draws per chain and the draws of 2 earlier round(s)"
        in (_interrupted(Convergence(converged=True), info).notes[0])
    )
    info = {"interrupted_round": 2, "rounds": 1}
    said = _interrupted(Convergence(converged=False), info).problems[0]
    assert said.startswith("interrupted in round 2: the run holds the draws of 1 finished round")


def test_an_interrupt_keeps_the_rounds_that_finished(monkeypatch):
    """Ctrl-C in an extra round writes the finished rounds' draws, marked not converged."""
    from bayes_dualeval.runs.fit import fit

    static, _, _ = simulate(5, 12, 0, seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = Dataset.from_frames(static=static)
    real, calls = nuts_round.one_round, []

    def interrupted_second(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(nuts_round, "one_round", interrupted_second)
    # one chain always fails the check (no R-hat), so a second round is started; the data
    # and the first round's shape are those of _tiny_inputs and the tests above (one compile)
    settings = SamplerSettings(
        chains=1, warmup=50, draws=20, extend=2, seed=2, target_accept=TOP, progress=False
    )
    result = fit(ds, ModelConfig(mode="static"), settings)
    info, conv = result.diagnostics["sampler_info"], result.convergence
    assert len(calls) == 2 and info["interrupted_round"] == 2 and info["rounds"] == 1
    assert result.idata.posterior.sizes["draw"] == 20
    assert conv.converged is False
    assert conv.problems[0].startswith("interrupted in round 2: the run holds the draws of 1")


def test_a_first_interrupt_in_an_extra_round_lets_it_finish(monkeypatch):
    import os
    import signal

    inputs, config = _tiny_inputs()
    real, calls = nuts_round.one_round, []

    def signalled_second(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while the round runs
        return real(*args, **kwargs)

    monkeypatch.setattr(nuts_round, "one_round", signalled_second)
    before = signal.getsignal(signal.SIGINT)
    settings = SamplerSettings(
        chains=1, warmup=50, draws=20, extend=3, seed=2, target_accept=TOP, progress=False
    )
    draws = run_nuts(inputs, config, settings, until=lambda d: False)
    # the round finished and was kept; no third round was started
    assert len(calls) == 2 and draws.info["rounds"] == 2
    assert draws.info["interrupted_round"] == 2 and draws.samples["theta"].shape[1] == 40
    assert signal.getsignal(signal.SIGINT) is before


def test_an_interrupt_in_the_first_round_is_not_swallowed(monkeypatch):

    inputs, config = _tiny_inputs()

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(nuts_round, "one_round", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_nuts(inputs, config, SamplerSettings(chains=1, warmup=10, draws=5, progress=False))


def test_draws_converged_reads_raw_draws():
    rng = np.random.default_rng(5)
    samples = {"theta": rng.normal(size=(4, 500, 2))}
    stats = {"diverging": np.zeros((4, 500), bool), "energy": rng.normal(size=(4, 500))}
    assert draws_converged(samples, stats)
    samples["theta"][1] += 3.0
    assert not draws_converged(samples, stats)


def test_draws_needed_scales_the_draws_to_land_inside_both_limits():
    # R-hat 1.012 after 1,000 draws: 1 + 0.012 / f = 1.008 at f = 1.5, so 500 more
    assert draws_needed(1000, 1.012, 2000.0) == 500
    # ESS 300 < 400: f = 400 / (0.8 * 300) = 5 / 3, so 667 more (rounded up)
    assert draws_needed(1000, 1.005, 300.0) == 667
    # both fail: the larger need wins
    assert draws_needed(1000, 1.012, 300.0) == 667
    # chains that disagree this much, or no R-hat at all: no estimate
    assert draws_needed(1000, 1.2, 2000.0) is None
    assert draws_needed(1000, None, 2000.0) is None


def test_draws_verdict_says_what_a_near_miss_needs():
    rng = np.random.default_rng(8)
    stats = {"diverging": np.zeros((4, 1000), bool), "energy": rng.normal(size=(4, 1000))}
    ok = draws_verdict({"theta": rng.normal(size=(4, 1000, 2))}, stats)
    assert ok and ok.more is None
    # independent draws, too few of them: ESS about 4 x 80 = 320 < 400
    short = {"diverging": np.zeros((4, 80), bool), "energy": rng.normal(size=(4, 80))}
    near = draws_verdict({"theta": rng.normal(size=(4, 80, 2))}, short)
    assert not near and 20 <= near.more <= 120, near
    # a chain elsewhere: not a matter of a few more draws
    far = {"theta": rng.normal(size=(4, 1000, 2))}
    far["theta"][1] += 3.0
    assert draws_verdict(far, stats) == Verdict(False, None)
    # divergent draws go to the restart ladder, never to a short continuation
    diverged = dict(stats, diverging=stats["diverging"].copy())
    diverged["diverging"][0, 3] = True
    assert draws_verdict({"theta": rng.normal(size=(4, 1000, 2))}, diverged).more is None


def test_draws_verdict_judges_the_centred_abilities_as_the_final_check_does():
    """Abilities that each mix can still disagree between chains about their difference."""
    rng = np.random.default_rng(9)
    stats = {"diverging": np.zeros((4, 1000), bool), "energy": rng.normal(size=(4, 1000))}
    common = rng.normal(0.0, 10.0, size=(4, 1000, 1))  # the shared level mixes well
    offset = np.array([-0.3, -0.1, 0.1, 0.3])[:, None, None]  # chains disagree on the gap
    theta = common + np.concatenate([offset, -offset], axis=2) + rng.normal(0, 0.1, (4, 1000, 2))
    raw_only = convergence(az.from_dict(posterior={"theta": theta}, sample_stats=stats), "nuts")
    assert raw_only.max_rhat < 1.01  # each ability alone passes ...
    verdict = draws_verdict({"theta": theta}, stats)
    assert not verdict  # ... their centred values do not, and the final check reads those


def test_continuation_draws_rounds_and_bounds_the_estimate():
    assert continuation_draws(False, 1000) == 1000  # no estimate: a full round
    assert continuation_draws(Verdict(False, None), 1000) == 1000
    assert continuation_draws(Verdict(False, 301), 1000) == 350  # multiples of 50
    assert continuation_draws(Verdict(False, 10), 1000) == 250  # at least a quarter
    assert continuation_draws(Verdict(False, 5000), 1000) == 1000  # at most a full round


def test_a_near_miss_continues_for_the_draws_it_needs(monkeypatch):
    inputs, config = _tiny_inputs()
    monkeypatch.setattr(nuts_round, "CONTINUE_STEP", 1)
    settings = SamplerSettings(chains=1, warmup=50, draws=20, extend=2, seed=1, target_accept=TOP)
    calls = []

    def until(draws):
        calls.append(draws.samples["theta"].shape[1])
        return Verdict(len(calls) >= 2, None if len(calls) >= 2 else 7)

    draws = run_nuts(inputs, config, settings, until=until)
    assert calls == [20, 27]  # 7 more draws, not another 20
    assert draws.info["rounds"] == 2
    assert draws.samples["theta"].shape[:2] == (1, 27)
    assert draws.stats["diverging"].shape == (1, 27)
    assert np.isfinite(draws.samples["theta"]).all()


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


def test_divergence_restart_keeps_the_adapted_metric_and_position(monkeypatch):
    """The round after divergences tunes only the step size, from where the chains stopped."""
    from bayes_dualeval.inference import nuts

    inputs, config = _tiny_inputs()
    built, runs = [], []
    make, run = nuts.make_mcmc, nuts.MCMC.run

    def recording_make(inputs, config, settings, metric=None, **kw):
        mcmc = make(inputs, config, settings, metric, **kw)
        built.append((settings, metric, kw))
        return mcmc

    def recording_run(self, key, *args, init_params=None, **kw):
        runs.append(init_params)
        out = run(self, key, *args, init_params=init_params, **kw)
        if len(runs) == 1:  # what the first round adapted, and where it stopped
            state = self.last_state
            built.append(("round 1", nuts.adapted_metric(state, 1), dict(state.z)))
        return out

    monkeypatch.setattr(nuts, "make_mcmc", recording_make)
    monkeypatch.setattr(nuts.MCMC, "run", recording_run)
    monkeypatch.setattr(nuts, "RETUNE_WARMUP", 30)
    settings = SamplerSettings(
        chains=1, warmup=60, draws=20, extend=1, seed=3, target_accept=0.05, progress=False
    )
    diverged = []
    draws = run_nuts(
        inputs, config, settings, until=lambda d: diverged.append(d.stats["diverging"].any())
    )
    assert diverged == [True] and draws.info["rounds"] == 2
    (first, metric0, kw0), (_, adapted, position), (second, metric1, kw1) = built
    assert metric0 is None and kw0 == {} and first.warmup == 60
    # the restart keeps the pooled adapted metric, fixed, with a short step-size warm-up
    assert second.warmup == 30 and kw1["adapt_metric"] is False
    assert second.target_accept == DIVERGENCE_TARGET_ACCEPTS[0]
    assert set(metric1) == set(adapted)
    for k in adapted:
        np.testing.assert_array_equal(metric1[k], adapted[k])
    # ... and starts each chain where it stopped, not at a fresh initial point
    assert runs[0] is None
    for k, v in position.items():
        np.testing.assert_array_equal(np.asarray(runs[1][k]), np.asarray(v))


def test_adapted_metric_pools_chains():
    from types import SimpleNamespace

    from bayes_dualeval.inference.nuts import adapted_metric

    per_chain = {("theta",): np.array([[1.0, 2.0], [3.0, 4.0]]), ("g",): np.ones((2, 3, 3))}
    state = SimpleNamespace(adapt_state=SimpleNamespace(inverse_mass_matrix=per_chain))
    pooled = adapted_metric(state, 2)
    np.testing.assert_array_equal(pooled[("theta",)], [2.0, 3.0])
    assert pooled[("g",)].shape == (3, 3)
    single = {("theta",): np.array([1.0, 2.0])}
    state = SimpleNamespace(adapt_state=SimpleNamespace(inverse_mass_matrix=single))
    np.testing.assert_array_equal(adapted_metric(state, 1)[("theta",)], [1.0, 2.0])


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
