"""Conditional SBC of the measure stage (bayes_dualeval.calibration.measure and .conditional).

No fit: the bank is built directly from known draws (8 bank models x 40 static questions,
60 draws spread around fixed values), which is all the measure stage reads, so the check is
exact for it: new models simulated from the bank's draws are scored by the grid code of
``score``, and the truth's PIT under the mixture weighted by each draw's marginal
likelihood is uniform by construction when the simulation draws from the same draws that
are mixed over (``held_out=False``; checked against a brute-force posterior on a
1,201-point grid: PITs within 0.007 on 300 replicates). Tolerances: for the bank itself,
the weighted mixture's ECDF p-value above 0.01 (a false alarm one time in a hundred; seen
0.028, 0.100, 0.41 on seeds 1-3 at 800 simulations) and its 90% interval's coverage within
4 binomial standard errors; from a generator whose abilities are twice as spread as the
prior (``theta_scale=2``, 400 simulations) its ranks leave their band and the 90% interval
covers below 0.85 (0.78 seen at 1,000).
"""

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from bayes_dualeval.calibration.conditional import measure_sbc
from bayes_dualeval.calibration.generate import design
from bayes_dualeval.calibration.measure import mixtures, parse_perturbation, pit, simulate
from bayes_dualeval.cli.commands import cli
from bayes_dualeval.core.errors import ConfigError
from bayes_dualeval.measure.bank import Bank, _item_table
from bayes_dualeval.model.config import load_spec
from bayes_dualeval.model.spec import DualEvalModel


def known_bank(n_models=8, n_items=40, n_draws=60, spread=0.3, seed=0) -> Bank:
    """A 2PL bank whose draws are fixed values plus ``spread`` x standard normal noise."""
    rng = np.random.default_rng(seed)
    data = design(n_models, n_items)
    b0, log_a0 = rng.normal(0, 1, n_items), rng.normal(0, 0.3, n_items)
    theta = rng.normal(0, 1, n_models) + spread * rng.normal(size=(n_draws, n_models))
    f = np.float32
    draws = dict.fromkeys(("c", "d", "gamma", "sigma", "gamma_judge", "judge_bias",
                           "style_coef"))  # fmt: skip
    draws.update(
        theta=theta.astype(f),
        theta_centred=(theta - theta.mean(axis=1, keepdims=True)).astype(f),
        b=(b0 + spread * rng.normal(size=(n_draws, n_items))).astype(f),
        a=np.exp(log_a0 + spread * rng.normal(size=(n_draws, n_items))).astype(f),
    )
    config = dataclasses.replace(load_spec("dualeval-2pl"), mode="static")
    return Bank(
        run_dir=Path("known"), model=DualEvalModel(config), dataset=data,
        items=_item_table(data), draws=draws, reward_centre={}, reward_scale={},
        tie_threshold=-np.inf, bb_threshold=-np.inf,
    )  # fmt: skip


@pytest.fixture(scope="module")
def bank():
    return known_bank()


def _row(result, quantity, level=0.9):
    c = result.coverage
    return c[(c["quantity"] == quantity) & (c["nominal"] == level)].iloc[0]


@pytest.mark.study
def test_the_weighted_mixture_is_calibrated_and_a_wider_generator_is_not(bank):
    own = measure_sbc(bank, sims=800, seed=1, held_out=False)
    weighted = own.summary.set_index("quantity").loc["theta_weighted"]
    assert weighted["p_value"] > 0.01
    row = _row(own, "theta_weighted")
    assert abs(row["observed"] - 0.9) <= 4 * row["se"]
    assert set(own.summary["quantity"]) == {"theta_equal", "theta_weighted", "fit_p"}
    assert own.info["mean_tv"] > 0 and own.info["fit_p_missing"] == 0
    wide = measure_sbc(bank, sims=400, seed=1, perturb={"theta_scale": 2.0}, held_out=False)
    assert not wide.summary.set_index("quantity").loc["theta_weighted", "within_band"]
    assert _row(wide, "theta_weighted")["observed"] < 0.85


def test_the_mixtures_agree_when_every_draw_is_the_same():
    """One bank draw repeated: the weights are equal, so are the mixtures (tv 0)."""
    same = known_bank(n_draws=5, spread=0.0)
    result = measure_sbc(same, sims=50, seed=2, bank_draws=5, held_out=False)
    assert result.replicates["tv"].max() < 1e-6


def test_pit_reads_cells_and_the_weights_follow_the_evidence():
    grids = np.array([[0.0, 1.0, 2.0]])
    mass = np.array([[0.2, 0.5, 0.3]])
    # a point's mass is spread over its cell: half of the first cell below 0
    np.testing.assert_allclose(pit(grids, mass, np.array([0.0])), [0.1])
    np.testing.assert_allclose(pit(grids, mass, np.array([1.25])), [0.2 + 0.5 * 0.75])
    assert pit(grids, mass, np.array([9.0]))[0] == 1.0
    w = np.array([[[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]])  # two draws
    equal, weighted = mixtures(w, np.log([[3.0, 1.0]]))
    np.testing.assert_allclose(equal, [[0.5, 0.0, 0.5]])
    np.testing.assert_allclose(weighted, [[0.75, 0.0, 0.25]])


def test_simulated_labels_follow_the_draw_and_the_perturbation(bank):
    sim = simulate(bank, 3000, items=10, seed=4)
    assert sim.item.shape == (3000, 10) and len(np.unique(sim.item[0])) == 10
    shifted = simulate(bank, 3000, items=10, seed=4, perturb={"b_shift": 1.0})
    assert shifted.label.mean() < sim.label.mean() - 0.1
    raw = sim.truth + bank.draws["theta"][sim.draw].mean(axis=1)
    assert abs(raw.std() - 1.0) < 0.05  # the ability prior, theta_scale 1


def test_adaptive_posterior_is_the_rescored_equal_mixture(bank):
    result = measure_sbc(bank, sims=30, measure="adaptive", seed=3, max_items=8, bank_draws=30)
    assert result.info["held_out"] and result.info["simulation_draws"] == 30
    reps = result.replicates
    assert (reps["n_items"] == 8).all() and reps["gap"].max() < 1e-5
    assert "theta_reported" in set(result.coverage["quantity"])


def test_wrong_requests_are_refused(bank):
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        parse_perturbation(["theta_scale"])
    with pytest.raises(ConfigError, match="adaptive"):
        measure_sbc(bank, sims=10, max_items=5)
    with pytest.raises(ConfigError, match="between 1 and"):
        measure_sbc(bank, sims=10, items=41, held_out=False)
    with pytest.raises(ConfigError, match="none beyond"):
        measure_sbc(bank, sims=10)  # 60 draws, all of them scored
    runner = CliRunner()
    out = runner.invoke(cli, ["sbc", "--bank", "b", "--chains", "2", "--sims", "3", "--out", "o"])
    assert out.exit_code == 2 and "--chains" in out.output
    out = runner.invoke(cli, ["sbc", "--measure", "adaptive", "--sims", "3", "--out", "o"])
    assert out.exit_code == 2 and "need --bank" in out.output
