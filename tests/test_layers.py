"""The stages import one way: the import-linter contract of pyproject.toml holds.

The contract is checked on the package as it is, and on a copy with one import added the
wrong way (``data`` importing ``runs``), which must break it: a contract that never breaks
would pass whatever the code did.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")

pytestmark = pytest.mark.skipif(not Path(LINT).exists(), reason="import-linter not installed")


def _lint(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [LINT, "--config", str(root / "pyproject.toml"), "--no-cache"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(root), "PATH": str(Path(sys.executable).parent)},
    )


def test_the_layer_contract_is_kept():
    run = _lint(ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Stages import one way KEPT" in run.stdout


def test_a_wrong_way_import_breaks_the_contract(tmp_path):
    shutil.copytree(
        ROOT / "bayes_dualeval",
        tmp_path / "bayes_dualeval",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    bad = tmp_path / "bayes_dualeval" / "data" / "readers.py"
    wrong = "\nfrom bayes_dualeval.runs import fit as _wrong_way  # noqa\n"
    bad.write_text(bad.read_text() + wrong)
    run = _lint(tmp_path)
    assert run.returncode != 0
    assert "Stages import one way BROKEN" in run.stdout
    assert "bayes_dualeval.data.readers -> bayes_dualeval.runs" in run.stdout
