"""The fit command in-process: files, refusal to overwrite, clean errors, no partial runs."""

import json

import pandas as pd
import pytest
from click.testing import CliRunner

from bayes_dualeval.cli.commands import cli
from bayes_dualeval.runs import output


@pytest.fixture(scope="module")
def small_data(tmp_path_factory):
    root = tmp_path_factory.mktemp("sim")
    result = CliRunner().invoke(
        cli,
        [
            "simulate",
            str(root / "d"),
            "--models",
            "5",
            "--static-items",
            "20",
            "--arena-prompts",
            "8",
            "--seed",
            "1",
        ],
    )
    assert result.exit_code == 0, result.output
    return root / "d"


def test_fit_map_writes_the_run_folder(small_data, tmp_path):
    out = tmp_path / "run"
    result = CliRunner().invoke(
        cli, ["fit", str(small_data), "--sampler", "map", "--out", str(out), "-q", "--no-report"]
    )
    assert result.exit_code == 0, result.output
    for name in (
        "posterior.nc",
        "diagnostics.json",
        "leaderboard.csv",
        "pairwise.csv",
        "items.csv",
        "anomalies.csv",
    ):
        assert (out / name).is_file(), name
    board = pd.read_csv(out / "leaderboard.csv")
    assert list(board["rank"]) == [1, 2, 3, 4, 5]
    assert board["theta_lo"].isna().all()  # a point estimate has no interval
    diag = json.loads((out / "diagnostics.json").read_text())
    assert diag["sampler"]["sampler"] == "map"
    assert diag["config"]["name"] == "dualeval-2pl"
    assert diag["data"]["models"] == 5
    assert {"data", "compile", "sampling"} <= set(diag["timings"])
    assert "Traceback" not in result.output
    assert "rank" in result.output and "wrote" in result.output

    # an earlier run is never overwritten
    again = CliRunner().invoke(
        cli, ["fit", str(small_data), "--sampler", "map", "--out", str(out)]
    )
    assert again.exit_code != 0
    assert "already exists" in again.output
    assert pd.read_csv(out / "leaderboard.csv").equals(board)


@pytest.mark.parametrize(
    "args,message",
    [
        (["--chains", "0"], "--chains"),
        (["--sampler", "hmc"], "--sampler"),
        (["--model", "no-such-model"], "unknown model"),
        (["--mode", "static", "--arena-likelihood", "sideways"], "--arena-likelihood"),
        (["--device", "tpu"], "--device"),
    ],
)
def test_fit_user_mistakes_are_one_clean_line(small_data, tmp_path, args, message):
    result = CliRunner().invoke(cli, ["fit", str(small_data), "--out", str(tmp_path / "r"), *args])
    assert result.exit_code != 0
    assert message in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "r").exists()


def test_a_failure_while_writing_leaves_no_partial_run(small_data, tmp_path, monkeypatch):
    def boom(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(output, "write_tables", boom)
    out = tmp_path / "run"
    result = CliRunner().invoke(
        cli, ["fit", str(small_data), "--sampler", "map", "--out", str(out), "-q"]
    )
    assert result.exit_code != 0
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []  # no staging folder left behind


def test_models_command_lists_the_specifications():
    result = CliRunner().invoke(cli, ["models"])
    assert result.exit_code == 0
    for name in ("dualeval-2pl", "dualeval-1pl", "bradley-terry", "calibration-2pl"):
        assert name in result.output


def test_fit_svi_keeps_every_latent_site(small_data, tmp_path):
    """SVI draws include gamma and the hyperparameters (the checks need gamma)."""
    import arviz as az

    out = tmp_path / "svi"
    result = CliRunner().invoke(
        cli,
        [
            "fit",
            str(small_data),
            "--sampler",
            "svi",
            "--svi-steps",
            "1000",
            "--draws",
            "50",
            "--subsample",
            "30",
            "--out",
            str(out),
            "-q",
            "--no-report",
        ],
    )
    assert result.exit_code == 0, result.output
    post = az.from_netcdf(str(out / "posterior.nc"), engine="h5netcdf").posterior
    for name in ("theta", "a", "b", "gamma", "mu_b", "sigma_b"):
        assert name in post, name
    assert post.sizes["draw"] == 50
    assert (out / "anomalies.csv").is_file()
    # minibatches, said on the terminal and recorded
    assert "random batches of 30 static cells and 30 arena pairs" in result.output
    info = json.loads((out / "diagnostics.json").read_text())
    assert info["sampler"]["subsample"] == "30"
    assert info["sampler_info"]["static_batch"] == 30
    bad = CliRunner().invoke(cli, ["fit", str(small_data), "--sampler", "svi", "--subsample", "x"])
    assert bad.exit_code != 0 and "subsample must be auto, none" in bad.output
    assert "Traceback" not in bad.output


def test_map_that_stops_short_of_the_mode_says_so(small_data, tmp_path, monkeypatch):
    """An optimiser that stops early (here after one iteration) is reported with its
    gradient norm and its own reason, not as a step limit to raise."""
    from scipy import optimize

    from bayes_dualeval.inference import mode

    def one_step(*args, options=None, **kwargs):
        return optimize.minimize(*args, options={**(options or {}), "maxiter": 1}, **kwargs)

    monkeypatch.setattr(mode, "minimize", one_step)
    out = tmp_path / "run"
    result = CliRunner().invoke(
        cli, ["fit", str(small_data), "--sampler", "map", "--out", str(out), "--no-report"]
    )
    assert result.exit_code == 0, result.output
    assert result.output.count("map stopped short of the mode (1 optimiser steps") == 1
    assert "gradient norm" in result.output and "--sampler nuts" in result.output
    assert "--svi-steps" not in result.output
    info = json.loads((out / "diagnostics.json").read_text())["sampler_info"]
    assert info["converged"] is False and info["steps"] == 1
