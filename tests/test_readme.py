"""The README's Python example runs as it is, and uses only the package's top level."""

import re
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent


def _python_blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"), re.S)


def test_readme_example_is_short_uses_the_top_level_and_runs(tmp_path, monkeypatch, capsys):
    (block,) = _python_blocks(ROOT / "README.md")
    lines = [line for line in block.splitlines() if line.strip()]
    assert len(lines) <= 10
    imports = [line for line in lines if re.match(r"\s*(import|from)\s", line)]
    assert imports == ["import bayes_dualeval as bd"]
    (tmp_path / "data").symlink_to(ROOT / "data")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102 - the README's own code
    shown = capsys.readouterr().out
    board = namespace["run"].leaderboard()
    assert board["model"].iloc[0] in shown and len(board) == 12
    saved = pd.read_csv(tmp_path / "runs" / "example" / "leaderboard.csv")
    assert saved["model"].tolist() == board["model"].tolist()
    assert namespace["again"].leaderboard()["model"].tolist() == board["model"].tolist()
    assert len(namespace["fig"].axes[0].get_yticklabels()) == 12
