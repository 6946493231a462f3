"""Settings in messages: the library names them as Python does, the command line as options.

The library writes a reference to a setting once, through ``core.fields.setting``
(``draws=2000``, ``sampler='nuts'``, a name in backquotes); ``cli.shared.to_flags`` says it
as the option the command line generates from the same field (``--draws 2000``).
"""

import ast
import dataclasses
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from bayes_dualeval.cli import fit as fit_command
from bayes_dualeval.cli import options
from bayes_dualeval.cli.commands import cli
from bayes_dualeval.cli.shared import COMMAND_FLAGS, setting_flags, to_flags
from bayes_dualeval.core.fields import setting
from bayes_dualeval.inference.settings import SamplerSettings
from bayes_dualeval.model.config import ModelConfig
from bayes_dualeval.posterior.convergence import Convergence

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data"


def test_setting_writes_a_python_keyword_or_the_name_in_backquotes():
    assert setting("draws", 2000) == "draws=2000"
    assert setting("target_accept", 0.99) == "target_accept=0.99"
    assert setting("item_prior", "independent") == "item_prior='independent'"
    assert setting("force", True) == "force=True"
    assert setting("max_tree_depth") == "`max_tree_depth`"


@pytest.mark.parametrize(
    "library,command_line",
    [
        (
            "chains disagree; run longer (draws=2000, warmup=2000), or check the data",
            "chains disagree; run longer (--draws 2000, --warmup 2000), or check the data",
        ),
        (
            "only one chain: R-hat cannot be computed; run chains=4",
            "only one chain: R-hat cannot be computed; run --chains 4",
        ),
        (
            "consider item_prior='independent' or a simpler irt='1pl'",
            "consider --item-prior independent or a simpler --irt 1pl",
        ),
        (
            "raise the target acceptance: target_accept=0.99",
            "raise the target acceptance: --target-accept 0.99",
        ),
        (
            "costs draws; `max_tree_depth` raises the cap",
            "costs draws; --max-tree-depth raises the cap",
        ),
        (
            "x already exists (use force=True to overwrite)",
            "x already exists (use --force to overwrite)",
        ),
        ("r is not empty; choose another `out`", "r is not empty; choose another --out"),
        ("device='gpu' was asked for", "--device gpu was asked for"),
        ("raise `svi_steps` or svi_lr=1e-3.", "raise --svi-steps or --svi-lr 1e-3."),
        # not settings, a False, or not a literal: left as they are
        (
            "`theta` and a_q=1 and mode=False and draws=many",
            "`theta` and a_q=1 and mode=False and draws=many",
        ),
        ("see diagnostics.json (max R-hat 1.20)", "see diagnostics.json (max R-hat 1.20)"),
    ],
)
def test_to_flags_says_settings_as_options(library, command_line):
    assert to_flags(library) == command_line


def test_every_generated_option_is_the_flag_of_its_setting():
    flags = setting_flags()
    params = {p.name: p for p in fit_command.fit.params}
    for cls in (SamplerSettings, ModelConfig):
        for f in options.cli_fields(cls):
            assert flags[f.name] == options.flag(f) and flags[f.name] in params[f.name].opts
    assert {k: flags[k] for k in COMMAND_FLAGS} == COMMAND_FLAGS
    # a field may name its option in its metadata
    named = dataclasses.field(default=1, metadata={"help": "h", "cli": "--other"})
    named.name = "some_field"
    assert options.flag(named) == "--other"
    # a help line that names a setting shows its flag
    assert "more rounds of --draws." in params["extend"].help


def test_a_library_error_reaches_the_user_with_its_flags(tmp_path):
    out = tmp_path / "run"
    args = ["fit", str(DATA), "--sampler", "map", "--irt", "3pl", "--out", str(out)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1
    assert (
        "Error: MAP supports --irt 1pl and --irt 2pl, not --irt 3pl: "
        "use --sampler nuts or --sampler svi"
    ) in result.output
    assert "sampler='nuts'" not in result.output and "Traceback" not in result.output
    assert not out.exists()


def test_convergence_problems_and_notes_reach_the_user_with_their_flags(monkeypatch, capsys):
    from bayes_dualeval.runs import output

    conv = Convergence(
        converged=False,
        problems=(f"draw more ({setting('draws', 2000)})",),
        notes=(f"{setting('max_tree_depth')} raises the cap",),
    )
    result = SimpleNamespace(
        diagnostics={"timings": {}, "sampler_info": {}, "convergence": conv.to_dict()},
        convergence=conv,
    )
    summary = f"rank  model\nNOT CONVERGED: run longer ({setting('draws', 4000)})"
    monkeypatch.setattr(output, "terminal_summary", lambda result, ci: summary)
    fit_command._tell(result, "runs/x", "nuts", 0.95)
    shown = capsys.readouterr()
    assert "NOT CONVERGED: run longer (--draws 4000)" in shown.out
    assert "warning: convergence: draw more (--draws 2000)" in shown.err
    assert "note: --max-tree-depth raises the cap" in shown.err
    assert "draws=" not in shown.out + shown.err


#: An option as the command line spells it, at the start of a word.
FLAG = re.compile(r"(?<![\w-])--[a-z]")


def _strings(tree: ast.AST):
    """The string constants of a module that are not docstrings (those describe the CLI)."""
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docs.add(id(first.value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            yield node


def test_the_library_outside_the_cli_writes_no_flags():
    found = []
    for path in sorted((ROOT / "bayes_dualeval").rglob("*.py")):
        if "cli" in path.relative_to(ROOT / "bayes_dualeval").parts[:1]:
            continue
        for node in _strings(ast.parse(path.read_text())):
            if FLAG.search(node.value):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    assert not found, "\n".join(found)
