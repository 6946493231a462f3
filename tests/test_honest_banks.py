"""A bank must be a converged NUTS posterior, or every output says that it is not.

One small SVI run (8 simulated models x 40 questions + 10 prompts, 600 SVI steps) is the
approximate bank: ``score``, ``calibrate``, ``compress``, ``adaptive`` and ``predict``
refuse it with one ``Error:`` line and write nothing, and with ``--allow-approximate`` each
output carries the reason.
"""

import json

import pandas as pd
import pytest
from click.testing import CliRunner

import bayes_dualeval as bd
from bayes_dualeval.cli.commands import cli
from bayes_dualeval.core.errors import InputError
from bayes_dualeval.measure.approximate import approximation, check_posterior
from bayes_dualeval.model.simulate import simulate, write


@pytest.fixture(scope="module")
def svi_bank(tmp_path_factory):
    root = tmp_path_factory.mktemp("honest")
    write(root / "data", *simulate(n_models=8, n_static=40, n_arena=10, seed=2))
    run = bd.fit(root / "data", sampler="svi", svi_steps=600, draws=200, seed=1)
    run.save(root / "svi", report=False)
    return root


def _invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_the_rule_names_the_reason():
    nuts = {"sampler": {"sampler": "nuts"}, "convergence": {"converged": True}}
    assert approximation(nuts) == ""
    assert "variational" in approximation({"sampler": {"sampler": "svi"}})
    assert "point estimate" in approximation({"sampler": {"sampler": "map"}})
    problems = ["3 parameter(s) have R-hat > 1.01"]
    failed = {
        "sampler": {"sampler": "nuts"},
        "convergence": {"converged": False, "problems": problems},
    }
    assert "R-hat" in approximation(failed)
    with pytest.raises(InputError, match="allow_approximate=True"):
        check_posterior("runs/x", failed)
    assert "R-hat" in check_posterior("runs/x", failed, allow_approximate=True)


def test_commands_refuse_an_svi_bank_in_one_line_and_write_nothing(svi_bank):
    root = svi_bank
    for args in (
        ("score", root / "data", "--bank", root / "svi", "--out", root / "scored"),
        ("calibrate", root / "data", "--bank", root / "svi", "--out", root / "calibrated"),
        ("compress", root / "svi", "--items", "10", "--out", root / "short.csv"),
        ("adaptive", "--bank", root / "svi", "--data", root / "data", "--out", root / "cat"),
        ("predict", root / "svi", "--out", root / "pred.csv"),
    ):
        res = _invoke(*args)
        assert res.exit_code == 1, res.output
        lines = res.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error:"), res.output
        assert "--sampler svi" in lines[0] and "--allow-approximate" in lines[0]
        assert "allow_approximate" not in lines[0]
    written = ("scored", "calibrated", "short.csv", "cat", "pred.csv")
    assert not any((root / name).exists() for name in written)


def test_allowed_approximate_banks_say_so_in_every_output(svi_bank):
    root = svi_bank
    flag = "--allow-approximate"
    res = _invoke("score", root / "data", "--bank", root / "svi", "--rescore", flag,
                  "--draws", "50", "--out", root / "scored")  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "APPROXIMATE BANK" in res.output
    summary = json.loads((root / "scored" / "summary.json").read_text())
    assert "variational" in summary["approximate_bank"]
    assert any("APPROXIMATE BANK" in w for w in summary["warnings"])
    assert pd.read_csv(root / "scored" / "scores.csv")["approximate_bank"].notna().all()
    res = _invoke("compress", root / "svi", "--items", "10", flag, "--out", root / "short.csv")
    assert res.exit_code == 0 and "APPROXIMATE BANK" in res.output, res.output
    assert pd.read_csv(root / "short.csv")["approximate_bank"].notna().all()
    res = _invoke("predict", root / "svi", flag, "--out", root / "pred.csv")
    assert res.exit_code == 0 and "APPROXIMATE BANK" in res.output, res.output
    assert pd.read_csv(root / "pred.csv")["approximate_bank"].notna().all()
    run = bd.open(root / "svi")
    with pytest.raises(InputError, match="not a converged NUTS posterior"):
        run.compress(5)
    assert "approximate_bank" in run.compress(5, allow_approximate=True).items
