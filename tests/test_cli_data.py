"""The data commands of the command line (``check``, ``simulate``), run in-process."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from bayes_dualeval import __version__
from bayes_dualeval.cli.commands import cli

DATA = Path(__file__).resolve().parent.parent / "data"


def run(*args):
    result = CliRunner().invoke(cli, [str(a) for a in args])
    assert "Traceback" not in result.output
    # a clean exit (0, or the exit code of a reported error), never an escaped exception
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result


def assert_user_error(result, *expected, code=None):
    assert result.exit_code != 0
    if code is not None:
        assert result.exit_code == code, result.output
    assert "Error:" in result.output
    assert "Traceback" not in result.output
    assert len([ln for ln in result.output.splitlines() if ln.startswith("Error:")]) == 1
    for text in expected:
        assert text in result.output, result.output


# --------------------------------------------------------------------------- help and version


def test_version():
    for flag in ("--version", "-V"):
        r = run(flag)
        assert r.exit_code == 0
        assert r.output.strip() == f"bayes-dualeval, version {__version__}"


def test_group_help_lists_commands_and_example():
    for flag in ("--help", "-h"):
        r = run(flag)
        assert r.exit_code == 0
        assert "Example" in r.output
        assert "check" in r.output and "simulate" in r.output


@pytest.mark.parametrize("command", sorted(cli.commands))
def test_every_command_help_has_an_example(command):
    r = run(command, "--help")
    assert r.exit_code == 0
    assert "Example" in r.output
    assert f"bayes-dualeval {command}" in r.output


def test_no_command_shows_usage():
    r = run()
    assert "Usage:" in r.output and "Commands:" in r.output


# --------------------------------------------------------------------------- check


def test_check_prints_summary():
    r = run("check", DATA)
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert lines[0] == "12 models, 400 items (300 static questions, 100 arena prompts)"
    assert "arena rewards (z-normalised per source)" in lines[1]
    assert "domains: code, math, writing" in r.output
    assert lines[-1].startswith("arena pairs: ")
    assert "decisive" in lines[-1] and "both-bad" in lines[-1] and "ties" in lines[-1]
    assert "warning" not in r.output


def test_check_options_change_the_counts():
    default = run("check", DATA).output.splitlines()[-1]
    off = run("check", DATA, "--bb-ratio", "0", "--tie-ratio", "0").output.splitlines()[-1]
    assert default != off
    assert off.endswith(", 0 both-bad, 0 ties")
    g = run("check", DATA, "--reward-norm", "global")
    assert g.exit_code == 0 and "(z-normalised per global)" in g.output


def test_check_shows_skips_as_warnings(tmp_data):
    tmp_data.jsonl(
        "s/a.jsonl",
        [
            {"model_label": "m1", "item_id": "p", "reward": 1},
            {"model_label": "m2", "item_id": "p", "reward": 2},
            {"model_label": "m1", "item_id": "p", "reward": 3},
            {"model_label": "m2", "item_id": "q"},
        ],
    )
    r = run("check", tmp_data.root)
    assert r.exit_code == 0, r.output
    assert (
        "warning: skipped while loading: 1 missing reward, 1 duplicate (model, item)" in r.output
    )
    assert "skipped: 1 missing reward, 1 duplicate (model, item)" in r.output


def test_check_skip_invalid(tmp_data):
    p = tmp_data.jsonl(
        "s/a.jsonl",
        [
            {"model_label": "m1", "item_id": "p", "reward": 1},
            {"model_label": "m2", "item_id": "p", "reward": 2},
            {"model_label": "m2", "item_id": "q", "reward": "n/a"},
        ],
    )
    assert_user_error(run("check", p), f"{p}:3:", "'n/a'", code=1)
    r = run("check", p, "--skip-invalid")
    assert r.exit_code == 0 and "1 invalid reward" in r.output


def test_check_static_only_has_no_pairs_line(tmp_data):
    tmp_data.csv(
        "s/x.csv",
        [{"model_label": m, "dataset": "d", "sample_index": 0, "correct": 1} for m in "ab"],
    )
    r = run("check", tmp_data.root)
    assert r.exit_code == 0 and "arena pairs" not in r.output
    assert r.output.startswith("2 models, 1 items (1 static questions, 0 arena prompts)")


# --------------------------------------------------------------------------- simulate


def test_simulate_writes_files_and_refuses_to_overwrite(tmp_path):
    out = tmp_path / "sim"
    args = ["simulate", out, "--models", 4, "--static-items", 20, "--arena-prompts", 6]
    r = run(*args, "--seed", 3, "--missing", 0.1, "--domains", 2)
    assert r.exit_code == 0, r.output
    assert r.output.splitlines() == [
        f"wrote {out / 'bench' / 'static.jsonl'}",
        f"wrote {out / 'arena' / 'arena.jsonl'}",
        f"wrote {out / 'truth.json'}",
    ]
    truth = json.loads((out / "truth.json").read_text())
    assert truth["settings"]["seed"] == 3 and truth["settings"]["domains"] == 2
    assert run("check", out).output.startswith("4 models, 26 items")

    again = run(*args, "--seed", 4)
    assert_user_error(again, "already exists", "--force", code=1)
    assert json.loads((out / "truth.json").read_text())["settings"]["seed"] == 3
    forced = run(*args, "--seed", 4, "--force")
    assert forced.exit_code == 0
    assert json.loads((out / "truth.json").read_text())["settings"]["seed"] == 4


def test_simulate_reward_noise_option(tmp_path):
    r = run("simulate", tmp_path, "--models", 3, "--static-items", 2, "--reward-noise", 0.05)
    assert r.exit_code == 0
    assert json.loads((tmp_path / "truth.json").read_text())["reward_noise"] == 0.05


def test_simulate_guess_and_slip_make_a_4pl_truth(tmp_path):
    args = ["simulate", tmp_path, "--models", 3, "--static-items", 12, "--arena-prompts", 2]
    r = run(*args, "--guess", 0.25, "--slip", 0.05)
    assert r.exit_code == 0, r.output
    truth = json.loads((tmp_path / "truth.json").read_text())
    assert (truth["settings"]["guess"], truth["settings"]["slip"]) == (0.25, 0.05)
    static = [v for v in truth["items"].values() if v["kind"] == "static"]
    assert len(static) == 12
    assert all(v["c"] == 0.25 and v["d"] == pytest.approx(0.95) for v in static)
    plain = tmp_path / "plain"
    assert run("simulate", plain, "--models", 3, "--static-items", 2).exit_code == 0
    truth = json.loads((plain / "truth.json").read_text())
    assert not any("c" in v for v in truth["items"].values())  # a 2PL truth by default
    assert_user_error(run(*args, "--guess", 0.6, "--slip", 0.5, "--force"), "guess", code=1)


def test_simulate_dims_writes_a_multidimensional_truth(tmp_path):
    args = ["simulate", tmp_path, "--models", 4, "--static-items", 10, "--arena-prompts", 4]
    r = run(*args, "--domains", 2, "--dims", 2, "--dim-loading", 0.9, "--dim-correlation", 0)
    assert r.exit_code == 0, r.output
    truth = json.loads((tmp_path / "truth.json").read_text())
    assert all(len(v) == 2 for v in truth["theta_dims"].values())
    loadings = [v["loading"] for v in truth["items"].values()]
    assert len(loadings) == 14 and all(max(w) == pytest.approx(0.95) for w in loadings)
    # the domain mixes with more than one dimension and refuses with one line
    assert_user_error(run(*args, "--dims", 2, "--domain-sd", 0.5, "--force"), "choose one", code=1)


# --------------------------------------------------------------------------- user mistakes


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["check", "does/not/exist"], "does not exist"),
        (["check"], "Missing argument"),
        (["check", DATA, "--reward-norm", "zscore"], "Invalid value for '--reward-norm'"),
        (["check", DATA, "--bb-ratio", "lots"], "'lots' is not a valid float"),
        (["check", DATA, "--no-such-option"], "No such option"),
        (["simulate", "x", "--models", "1"], "Invalid value for '--models'"),
        (["simulate", "x", "--missing", "1.0"], "Invalid value for '--missing'"),
        (["simulate", "x", "--missing", "-0.5"], "Invalid value for '--missing'"),
        (["simulate", "x", "--domains", "0"], "Invalid value for '--domains'"),
        (["simulate", "x", "--guess", "1"], "Invalid value for '--guess'"),
        (["simulate", "x", "--slip", "-0.1"], "Invalid value for '--slip'"),
        (["simulate", "x", "--seed", "abc"], "is not a valid integer"),
        (["simulate", "x", "--dims", "0"], "Invalid value for '--dims'"),
        (["simulate", "x", "--dim-correlation", "1"], "Invalid value for '--dim-correlation'"),
        (["simulate"], "Missing argument"),
        (["frobnicate"], "No such command"),
    ],
)
def test_usage_errors(args, expected):
    assert_user_error(run(*args), expected, code=2)


def test_out_that_is_a_file(tmp_data):
    f = tmp_data.text("taken", "x")
    assert_user_error(run("simulate", f), "is a file", code=2)


def test_unsupported_file_type(tmp_data):
    f = tmp_data.text("s/a.txt", "x")
    assert_user_error(run("check", f), "unsupported file type", code=1)


def test_bad_ratio_value():
    # the range comes from ModelConfig's field, as for fit's --bb-ratio
    assert_user_error(
        run("check", DATA, "--bb-ratio", "1.5"), "Invalid value for '--bb-ratio'", "0<=x<1", code=2
    )
    assert_user_error(run("check", DATA, "--tie-ratio", "-1"), "'--tie-ratio'", code=2)


def test_simulate_nothing_to_simulate(tmp_path):
    r = run("simulate", tmp_path, "--static-items", 0, "--arena-prompts", 0)
    assert_user_error(r, "at least one static question or arena prompt", code=1)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('{"model_label": "m2", "item_id": "p", ', "malformed JSON"),
        ('{"model_label": "m2", "item_id": "p", "reward": NaN}', "reward must be finite"),
        ('{"model_label": "m2", "item_id": "p", "reward": "high"}', "reward must be a number"),
        ('{"model_label": "m2", "dataset": "d", "sample_index": 0, "correct": 1}', "mixes"),
        ('{"model_label": "m2", "item_id": "p", "reward": ' + "1" * 400 + "}", "finite"),
        ('{"model_label": "m2", "item_id": "p", "reward": ' + "1" * 5000 + "}", "malformed"),
    ],
)
def test_bad_data_is_one_error_line_with_file_and_line(tmp_data, line, expected):
    p = tmp_data.jsonl("s/a.jsonl", ['{"model_label": "m1", "item_id": "p", "reward": 1}', line])
    assert_user_error(run("check", p), f"{p}:2:", expected, code=1)


def test_unfittable_data_names_the_skips(tmp_data):
    p = tmp_data.jsonl("s/a.jsonl", [{"model_label": "m1", "item_id": "p", "reward": 1}])
    r = run("check", p)
    assert_user_error(
        r, "Error: no usable rows: nothing to fit (skipped: 1 arena prompt answered by one model)"
    )
    q = tmp_data.jsonl(
        "t/a.jsonl",
        [
            {"model_label": "m1", "item_id": "p", "reward": 1},
            {"model_label": "m2", "item_id": "p", "reward": 2},
            {"model_label": "m3", "item_id": "q", "reward": 3},
            {"model_label": "m3", "item_id": "r"},
        ],
    )
    assert_user_error(
        run("check", q),
        "Error: model 'm3' has no usable rows "
        "(skipped: 1 missing reward, 1 arena prompt answered by one model)",
        code=1,
    )


def test_console_entry_point_has_no_traceback(tmp_data):
    """The real ``python -m bayes_dualeval``: error on stderr, exit 1, no traceback."""
    p = tmp_data.text("s/a.jsonl", "{oops\n")
    proc = subprocess.run(
        [sys.executable, "-m", "bayes_dualeval", "check", str(p)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr.startswith(f"Error: {p}:1: malformed JSON")
    assert "Traceback" not in proc.stderr
