"""The Python API (bayes_dualeval.api): it mirrors the commands, which are thin calls of it.

Two fits are shared by the module: a MAP fit of a small simulated evaluation, and a small
NUTS bank (the bank of tests/test_score.py, so its programs come from the compile cache).
"""

import dataclasses
import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import bayes_dualeval as bd
from bayes_dualeval.cli.commands import cli
from bayes_dualeval.core.errors import ConfigError

#: Bank draws the measurement tests use (of 600).
DRAWS = 100


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    root = tmp_path_factory.mktemp("api")
    sim = bd.simulate(root / "data", n_models=5, n_static=20, n_arena=8, seed=1)
    run = bd.fit(sim.folder, sampler="map")
    return root, run


@pytest.fixture(scope="module")
def bank(tmp_path_factory):
    root = tmp_path_factory.mktemp("api-bank")
    sim = bd.simulate(n_models=16, n_static=120, n_arena=30, seed=11)
    names = sorted(sim.static["model_label"].unique())
    from bayes_dualeval.model.simulate import write

    for folder, models in (("bank_data", names[:10]), ("new_data", names[10:])):
        write(
            root / folder,
            sim.static[sim.static["model_label"].isin(models)],
            sim.arena[sim.arena["model_label"].isin(models)],
            sim.truth,
        )
    with pytest.warns(bd.core.errors.ConvergenceWarning, match="did not converge"):
        run = bd.fit(
            root / "bank_data", sampler="nuts", chains=2, warmup=300, draws=300, seed=3, extend=0
        )
    run.save(root / "bank", report=False)
    return root, run


def test_import_does_not_start_jax():
    code = (
        "import sys, bayes_dualeval as bd; bd.fit; bd.Run; "
        "assert 'jax' not in sys.modules, 'jax imported'; print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_no_subpackage_hides_a_verb_of_the_api():
    """Importing a submodule sets it on its package: a subpackage named like a verb of the
    API (``bayes_dualeval.sbc``) would replace ``bd.sbc`` once anything imported it."""
    import pkgutil

    import bayes_dualeval as bd

    names = {m.name for m in pkgutil.iter_modules(bd.__path__)}
    assert not names & set(bd._API), names & set(bd._API)
    import bayes_dualeval.calibration.study  # noqa: F401 - what sbc imports

    assert callable(bd.sbc) and callable(bd.measure_sbc)


def _run(code: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_PLATFORMS")}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)


def test_the_api_makes_host_devices_when_it_starts_jax():
    code = (
        "from bayes_dualeval.api import devices; devices.start('cpu', 2, compile_cache=False); "
        "import jax; print(jax.local_device_count())"
    )
    out = _run(code)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout.strip()) == devices_least()


def devices_least() -> int:
    from bayes_dualeval.api.devices import LEAST_HOST_DEVICES

    return LEAST_HOST_DEVICES


def test_jax_started_by_someone_else_gets_one_warning_with_the_fix():
    code = (
        "import warnings, jax; jax.devices()\n"
        "from bayes_dualeval.api import devices\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    devices.start('cpu', 4); devices.start('cpu', 4)\n"
        "print(len(caught)); print(caught[0].message)"
    )
    out = _run(code)
    assert out.returncode == 0, out.stderr
    count, message = out.stdout.strip().split("\n", 1)
    assert count == "1"
    assert "numpyro.set_host_device_count(4)" in message and "1 CPU device" in message


def test_fit_in_python_and_on_the_command_line_writes_the_same_run(small, tmp_path):
    root, run = small
    res = CliRunner().invoke(
        cli, ["fit", str(root / "data"), "--sampler", "map", "-q", "--no-report",
              "--out", str(tmp_path / "cli")],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    run.save(tmp_path / "api", report=False)
    for name in ("leaderboard", "pairwise", "items", "anomalies", "contamination"):
        a = pd.read_csv(tmp_path / "cli" / f"{name}.csv")
        b = pd.read_csv(tmp_path / "api" / f"{name}.csv")
        pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=1e-5, obj=name)
    a, b = (json.loads((tmp_path / d / "diagnostics.json").read_text()) for d in ("cli", "api"))
    for key in ("config", "sampler", "data", "convergence", "ci"):
        assert a[key] == b[key] or key == "sampler" and _same_but_progress(a[key], b[key]), key
    # the tables in memory are the files' (same columns, same values)
    board = pd.read_csv(tmp_path / "api" / "leaderboard.csv")
    assert list(run.leaderboard().columns) == list(board.columns)
    np.testing.assert_allclose(run.leaderboard()["theta_mean"], board["theta_mean"], rtol=1e-5)


def _same_but_progress(a: dict, b: dict) -> bool:
    return {**a, "progress": None} == {**b, "progress": None}


def test_run_tables_repr_and_round_trip(small, tmp_path):
    root, run = small
    board = run.leaderboard()
    assert list(board["rank"]) == [1, 2, 3, 4, 5]
    assert board["converged"].isna().all()  # MAP: no convergence check
    assert board["theta_lo"].isna().all()  # a point estimate has no interval
    top = board["model"].iloc[0]
    assert top in run._repr_html_() and "MAP" in run._repr_html_()
    assert top in repr(run) and "dualeval-2pl (mode both, 2pl)" in repr(run)
    pw = run.pairwise()
    assert list(pw.index) == list(board["model"]) and pw.shape == (5, 5)
    assert run.items().shape[0] == len(run.dataset.items)
    d = run.diagnostics
    assert d.sampler == "map" and d.models == 5 and d.converged is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.sampler = "nuts"
    opened = bd.open(run.save(tmp_path / "saved", report=False))
    pd.testing.assert_frame_equal(opened.leaderboard(), board, check_exact=False, rtol=1e-5)
    assert opened.model == run.model and opened.folder == tmp_path / "saved"
    fig = run.plot.forest()
    assert len(fig.axes[0].get_yticklabels()) == 5


def test_one_default_interval_level():
    from bayes_dualeval.runs import output

    assert bd.api.DEFAULT_CI == output.DEFAULT_CI == 0.95
    for command in ("fit", "score", "calibrate", "predict"):
        ci = next(p for p in cli.commands[command].params if p.name == "ci")
        assert ci.default == 0.95, command


def test_the_effective_model_is_named_with_its_abilities():
    from bayes_dualeval.model.config import load_spec

    spec = load_spec("dualeval-2pl")
    assert bd.api.model_name(spec) == "dualeval-2pl (mode both, 2pl)"
    two = bd.api.model_name(spec.replace(dims=2))
    assert two == "dualeval-2pl (mode both, 2pl, 2 ability dimensions)"
    by_domain = bd.api.model_name(spec.replace(abilities="domain", irt="3pl"))
    assert by_domain == "dualeval-2pl (mode both, 3pl, an ability per domain)"


def test_a_misspelt_option_names_the_valid_ones(small):
    root, _ = small
    with pytest.raises(ConfigError, match="'drawz'.*did you mean 'draws'.*chains"):
        bd.fit(root / "data", sampler="map", drawz=10)
    with pytest.raises(ConfigError, match="irt"):
        bd.fit(root / "data", sampler="map", irt="9pl")


def test_score_compress_predict_equal_the_commands(bank, tmp_path):
    root, run = bank
    runner = CliRunner()
    scored = run.score(root / "new_data", ci=0.9, draws=DRAWS, allow_approximate=True)
    args = [
        "--bank",
        str(root / "bank"),
        "--draws",
        str(DRAWS),
        "--ci",
        "0.9",
        "--allow-approximate",
    ]
    out = ["--out", str(tmp_path / "s")]
    res = runner.invoke(cli, ["score", str(root / "new_data"), *args, *out])
    assert res.exit_code == 0, res.output
    cli_scores = pd.read_csv(tmp_path / "s" / "scores.csv")
    api_scores = pd.read_csv(scored.save(tmp_path / "s2") / "scores.csv")
    pd.testing.assert_frame_equal(cli_scores, api_scores)
    assert scored.scores["new"].sum() == 6
    # the tiny bank did not converge, and every surface says so
    assert run.converged is False and "NOT CONVERGED" in run._repr_html_()
    assert any("APPROXIMATE BANK" in w and "convergence check" in w for w in scored.warnings)

    short = run.compress(20, allow_approximate=True)
    short_out = ["--allow-approximate", "--out", str(tmp_path / "short.csv")]
    res = runner.invoke(cli, ["compress", str(root / "bank"), "--items", "20", *short_out])
    assert res.exit_code == 0, res.output
    assert pd.read_csv(tmp_path / "short.csv")["item"].tolist() == short.items["item"].tolist()
    measured = pd.read_csv(tmp_path / "short_benchmarks.csv")
    assert measured["form"].tolist()[-1] == "bank" and (measured["form"] == "short").any()
    assert measured["verdict"].tolist() == short.benchmarks["verdict"].tolist()
    assert len(short.items) == 20
    assert any("APPROXIMATE BANK" in w for w in short.warnings)

    models = list(run.dataset.models[:2])
    items = list(run.dataset.items[:3])
    table = run.predict(models, items, ci=0.9, allow_approximate=True).table
    wanted = ["--models", ",".join(models), "--items", ",".join(items)]
    res = runner.invoke(
        cli,
        [
            "predict",
            str(root / "bank"),
            *wanted,
            "--allow-approximate",
            "--out",
            str(tmp_path / "p.csv"),
        ],
    )
    assert res.exit_code == 0, res.output
    cli_table = pd.read_csv(tmp_path / "p.csv")
    np.testing.assert_allclose(cli_table["p_mean"], table["p_mean"], rtol=1e-6)
    assert ((table["p_lo"] <= table["p_mean"]) & (table["p_mean"] <= table["p_hi"])).all()
