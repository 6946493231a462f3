"""Parquet input: the same tables, counts and errors as the same rows in JSONL or CSV."""

import json
import re

import numpy as np
import pandas as pd
import pyarrow as pa  # the "parquet" extra, part of the test extras (pyproject.toml)
import pyarrow.parquet as pq
import pytest
from conftest import invoke

from bayes_dualeval.core.errors import InputError
from bayes_dualeval.data.readers import read_paths


def _messy_static(rng, n):
    """Static rows with gaps and bad values of every kind the readers tell apart."""
    rows = []
    for _ in range(n):
        row = {
            "model_label": rng.choice(["m0", "m1", " m2 ", "", "  "], p=[0.3, 0.3, 0.2, 0.1, 0.1]),
            "dataset": rng.choice(["qa", "math", ""], p=[0.6, 0.35, 0.05]),
            "sample_index": int(rng.integers(0, 6)),
            "correct": rng.choice(["1", "0", "true", "False", "2", "yes", ""]),
            "domain": rng.choice(["algebra", "", "  "]),
        }
        if rng.random() < 0.05:
            row["sample_index"] = rng.choice(["3", "4.0", "x", "-1"])
        if rng.random() < 0.05:
            row = {"model_label": row["model_label"]}  # neither correct nor reward
        rows.append(row)
    rows[0] = {"model_label": "m0", "dataset": "qa", "sample_index": 0, "correct": "1"}
    return rows


def _messy_arena(rng, n):
    rows = []
    for _ in range(n):
        reward = rng.normal()
        rows.append(
            {
                "model_label": rng.choice(["a", "b", "c", ""]),
                "item_id": rng.choice(["p0", "p1", "p2", "p3"]),
                "reward": rng.choice([reward, np.nan, np.inf]) if rng.random() < 0.1 else reward,
            }
        )
    return rows


def _jsonl(path, rows):
    def plain(row):
        return {k: v for k, v in row.items() if v is not None and not _blank(v)}

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(plain(r)) + "\n" for r in rows), encoding="utf-8")


def _blank(value):
    return isinstance(value, str) and value == ""


def _parquet(path, rows, types):
    """``rows`` as a Parquet file, each column of the Arrow type in ``types`` (null if absent)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    names = list(types)
    data = {n: [r.get(n) if not _blank(r.get(n)) else None for r in rows] for n in names}
    for n in names:  # a text column holds numbers as their text, as a CSV would
        if types[n] == pa.string():
            data[n] = [None if v is None else str(v) for v in data[n]]
    pq.write_table(pa.table({n: pa.array(data[n], type=types[n]) for n in names}), path)


def _same(a, b):
    """The two readers' tables agree on every column but the file."""
    a = a.drop(columns="file").astype(str).reset_index(drop=True)
    b = b.drop(columns="file").astype(str).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_long_static_parquet_reads_what_jsonl_reads(tmp_path, seed):
    rows = _messy_static(np.random.default_rng(seed), 400)
    text = dict.fromkeys(
        ["model_label", "dataset", "sample_index", "correct", "domain"], pa.string()
    )
    _jsonl(tmp_path / "j" / "bench" / "s.jsonl", rows)
    _parquet(tmp_path / "p" / "bench" / "s.parquet", rows, text)
    sj, _, rj = read_paths([tmp_path / "j"], skip_invalid=True)
    sp, _, rp = read_paths([tmp_path / "p"], skip_invalid=True)
    assert 0 < len(sp) < len(rows)  # some kept, some skipped
    _same(sj, sp)
    assert rp.missing == rj.missing and rp.invalid == rj.invalid and rp.rows == rj.rows
    assert rp.models_seen == rj.models_seen
    assert set(rp.invalid) == {"model_label", "sample_index", "correct"}  # every rule met


def test_typed_columns_follow_the_same_rules(tmp_path):
    """Integers, floats and booleans as JSON numbers and booleans are read."""
    rows = [
        {"model_label": "m0", "dataset": "qa", "sample_index": 0, "correct": True},
        {"model_label": "m1", "dataset": "qa", "sample_index": 1, "correct": False},
        {"model_label": "m1", "dataset": "qa", "sample_index": None, "correct": True},
    ]
    floats = [
        {"model_label": "m0", "dataset": "qa", "sample_index": 2.0, "correct": 1.0},
        {"model_label": "m1", "dataset": "qa", "sample_index": 2.5, "correct": 0.5},
    ]
    types = {"model_label": pa.string(), "dataset": pa.string()}
    _jsonl(tmp_path / "j" / "bench" / "s.jsonl", rows)
    _parquet(
        tmp_path / "p" / "bench" / "s.parquet",
        rows,
        {**types, "sample_index": pa.int64(), "correct": pa.bool_()},
    )
    _jsonl(tmp_path / "j" / "bench" / "f.jsonl", floats)
    _parquet(
        tmp_path / "p" / "bench" / "f.parquet",
        floats,
        {**types, "sample_index": pa.float64(), "correct": pa.float64()},
    )
    sj, _, rj = read_paths([tmp_path / "j"], skip_invalid=True)
    sp, _, rp = read_paths([tmp_path / "p"], skip_invalid=True)
    _same(sj.sort_values(["file", "line"]), sp.sort_values(["file", "line"]))
    assert len(sp) == 3 and rp.invalid == rj.invalid and rp.missing == rj.missing


@pytest.mark.parametrize("seed", [0, 1])
def test_long_arena_parquet_reads_what_jsonl_reads(tmp_path, seed):
    rows = _messy_arena(np.random.default_rng(seed), 300)
    types = {"model_label": pa.string(), "item_id": pa.string(), "reward": pa.float64()}
    (tmp_path / "j" / "arena").mkdir(parents=True)
    # JSON has no infinity or NaN of its own: Python writes them as the tokens it reads back
    _jsonl(tmp_path / "j" / "arena" / "a.jsonl", rows)
    _parquet(tmp_path / "p" / "arena" / "a.parquet", rows, types)
    _, aj, rj = read_paths([tmp_path / "j"], skip_invalid=True)
    _, ap, rp = read_paths([tmp_path / "p"], skip_invalid=True)
    assert len(ap) > 200
    _same(aj, ap)
    assert rp.missing == rj.missing and rp.invalid == rj.invalid
    assert rp.invalid["reward"] > 0 and rp.missing["model_label"] > 0


def _error(paths):
    with pytest.raises(InputError) as caught:
        read_paths(paths)
    return str(caught.value)


@pytest.mark.parametrize("seed", [3, 4, 5, 6])
def test_the_first_error_is_the_one_jsonl_gives(tmp_path, seed):
    rows = _messy_static(np.random.default_rng(seed), 60)
    text = dict.fromkeys(
        ["model_label", "dataset", "sample_index", "correct", "domain"], pa.string()
    )
    _jsonl(tmp_path / "j" / "bench" / "s.jsonl", rows)
    _parquet(tmp_path / "p" / "bench" / "s.parquet", rows, text)
    from_jsonl, from_parquet = _error([tmp_path / "j"]), _error([tmp_path / "p"])
    line = int(re.search(r"s\.jsonl:(\d+): ", from_jsonl).group(1))
    assert from_parquet.endswith(from_jsonl.split(f"s.jsonl:{line}: ", 1)[1])
    assert f"s.parquet:row {line}: " in from_parquet  # rows numbered as JSONL lines are


def test_a_file_of_both_kinds_is_refused_at_its_first_row_of_the_other(tmp_path):
    rows = [
        {"model_label": "a", "dataset": "qa", "sample_index": "0", "correct": "1"},
        {"model_label": "a", "item_id": "p", "reward": "1.5"},
    ]
    types = dict.fromkeys(["model_label", "dataset", "sample_index", "correct", "item_id",
                           "reward"], pa.string())  # fmt: skip
    _parquet(tmp_path / "x.parquet", rows, types)
    assert "x.parquet:row 2: file mixes static and arena rows" in _error([tmp_path])
    rows[1].update(dataset="qa")
    _parquet(tmp_path / "x.parquet", rows, types)
    assert "x.parquet:row 2: row has both static fields" in _error([tmp_path])


def test_wide_parquet_reads_what_the_wide_csv_reads(tmp_path):
    rng = np.random.default_rng(7)
    y = (rng.random((6, 9)) < 0.5).astype(int)
    gone = rng.random(y.shape) < 0.3
    models = [f"model-{i}" for i in range(6)]
    text = np.where(gone, "", y.astype(str))
    (tmp_path / "csv" / "chem").mkdir(parents=True)
    lines = ["model_label," + ",".join(f"q{k}" for k in range(9))]
    lines += [m + "," + ",".join(row) for m, row in zip(models, text, strict=True)]
    (tmp_path / "csv" / "chem" / "bench.csv").write_text("\n".join(lines) + "\n")
    columns = {"model_label": pa.array(models)}
    for k in range(9):  # each column its own type: integers, booleans, floats, text
        values = [None if g else v for g, v in zip(gone[:, k], y[:, k].tolist(), strict=True)]
        kind = k % 4
        if kind == 1:
            values = [None if v is None else bool(v) for v in values]
        elif kind == 2:
            values = [None if v is None else float(v) for v in values]
        elif kind == 3:
            values = [" " if v is None else str(v) for v in values]  # blank text: missing
        columns[f"q{k}"] = pa.array(values)
    (tmp_path / "pq" / "chem").mkdir(parents=True)
    pq.write_table(pa.table(columns), tmp_path / "pq" / "chem" / "bench.parquet")
    sc, _, rc = read_paths([tmp_path / "csv"])
    sp, _, rp = read_paths([tmp_path / "pq"])
    assert len(sp) == int((~gone).sum())
    # CSV lines count the header; Parquet rows do not
    sc = sc.assign(line=sc["line"] - 1)
    _same(sc, sp)
    assert rp.rows == rc.rows and rp.models_seen == rc.models_seen
    columns["q4"] = pa.array([0, 1, 2, 0, 1, None])
    pq.write_table(pa.table(columns), tmp_path / "pq" / "chem" / "bench.parquet")
    message = _error([tmp_path / "pq"])
    assert "bench.parquet:row 3: column 'q4': correct must be 0 or 1 (or empty), got 2" in message
    sp, _, rp = read_paths([tmp_path / "pq"], skip_invalid=True)
    assert rp.invalid["correct"] == 1


def test_unreadable_parquet_and_missing_pyarrow_are_one_line_errors(tmp_path, monkeypatch):
    (tmp_path / "x.parquet").write_text("model_label,correct\n")
    assert "not a readable Parquet file" in _error([tmp_path / "x.parquet"])
    import sys

    monkeypatch.setitem(sys.modules, "pyarrow", None)
    message = _error([tmp_path / "x.parquet"])
    assert "needs the pyarrow package" in message and "bayes-dualeval[parquet]" in message


def test_check_command_reads_a_parquet_folder(tmp_path):
    rng = np.random.default_rng(1)
    rows = [
        {
            "model_label": f"m{i}",
            "dataset": "qa",
            "sample_index": k,
            "correct": int(rng.random() < 0.5),
        }
        for i in range(4)
        for k in range(10)
    ]
    types = {"model_label": pa.string(), "dataset": pa.string(), "sample_index": pa.int32(),
             "correct": pa.int8()}  # fmt: skip
    _parquet(tmp_path / "data" / "bench" / "static.parquet", rows, types)
    result = invoke("check", tmp_path / "data")
    assert result.exit_code == 0, result.output
    assert "4 models, 10 items (10 static questions, 0 arena prompts)" in result.output
    assert "40 static labels" in result.output
