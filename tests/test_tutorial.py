"""docs/tutorial.py (the notebook, as a jupytext script) runs from top to bottom."""

import runpy
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_tutorial_runs_on_tiny_settings(tmp_path, monkeypatch):
    monkeypatch.setenv("BAYES_DUALEVAL_TUTORIAL", "fast")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    (tmp_path / "data").symlink_to(ROOT / "data")
    monkeypatch.chdir(tmp_path)
    ns = runpy.run_path(str(ROOT / "docs" / "tutorial.py"))
    board = ns["board"]
    assert len(board) == 12 and list(board["rank"]) == list(range(1, 13))
    assert (tmp_path / "runs" / "tutorial" / "leaderboard.csv").is_file()
    assert ns["again"].leaderboard()["model"].tolist() == board["model"].tolist()
    new = ns["scored"].scores[ns["scored"].scores["new"]]
    assert len(new) == 12 and new["theta_mean"].between(-5, 5).all()
    assert len(ns["short"].items) == 40
    table = ns["cells"].table
    assert ((table["p_lo"] <= table["p_mean"]) & (table["p_mean"] <= table["p_hi"])).all()
