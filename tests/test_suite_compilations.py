"""The suite's compilation records (scripts/tools/suite_compilations.py): read and summed right."""

import json

from bayes_dualeval.validation import compilations as suite_compilations


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def test_records_of_every_worker_are_summed_by_program_file_and_test(tmp_path):
    row = {"shapes": "(float32[3],)"}
    _write(
        tmp_path / "compilations-gw0.jsonl",
        [
            {**row, "test": "tests/test_a.py::one", "program": "jit(_fun)", "seconds": 8.0},
            {**row, "test": "tests/test_a.py::one", "program": "jit(add)", "seconds": 0.1},
        ],
    )
    _write(
        tmp_path / "compilations-gw1.jsonl",
        [
            {**row, "test": "tests/test_b.py::two", "program": "jit(_fun)", "seconds": 2.0},
            {**row, "test": None, "program": "jit(mul)", "seconds": 0.2},
        ],
    )
    rows = suite_compilations.read(tmp_path)
    assert len(rows) == 4
    assert {r["file"] for r in rows} == {"tests/test_a.py", "tests/test_b.py", "(between tests)"}
    text = suite_compilations.report(rows, top=5)
    assert text.startswith("4 compilations, 10 s of XLA; 2 of 0.5 s or more (10 s, 1 distinct")
    lines = text.splitlines()
    # the programs' table: _fun's two compilations summed, small ones left out
    at = lines.index("programs of 0.5 s or more:")
    assert lines[at + 2].split() == ["10.0", "2", "jit(_fun)"]
    assert lines[at + 3] == ""  # and no other row
    # by file, largest first
    at = lines.index("by test file:")
    assert lines[at + 2].split() == ["8.1", "2", "tests/test_a.py"]
    assert lines[at + 3].split() == ["2.0", "1", "tests/test_b.py"]


def test_nothing_recorded_says_so(tmp_path):
    rows = suite_compilations.read(tmp_path)
    assert rows == []
    assert "no compilations recorded" in suite_compilations.report(rows)
