"""Reading the input formats: files, folders, item ids, domains, skips and errors."""

import csv
import io
import json
import string
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from bayes_dualeval import Dataset, DataWarning, InputError, load
from bayes_dualeval.data.readers import find_files, read_paths

M = ["m1", "m2", "m3"]


def quiet_load(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)
        return load(*args, **kwargs)


def static_value(ds, model, item):
    mi = list(ds.models).index(model)
    qi = list(ds.items).index(item)
    hit = np.flatnonzero((ds.static_model == mi) & (ds.static_item == qi))
    assert len(hit) == 1
    return int(ds.static_y[hit[0]])


def arena_value(ds, model, item):
    mi = list(ds.models).index(model)
    qi = list(ds.items).index(item)
    hit = np.flatnonzero((ds.arena_model == mi) & (ds.arena_item == qi))
    assert len(hit) == 1
    return float(ds.arena_reward[hit[0]])


# --------------------------------------------------------------------------- formats


def test_jsonl_static_and_arena_in_folders(tmp_data, rows):
    tmp_data.jsonl("bench/static.jsonl", rows.static(M, "gsm8k", n=2))
    tmp_data.jsonl("arena/arena.jsonl", rows.arena(M, ["q1", "q2"]))
    ds = load(tmp_data.root)
    assert ds.models.tolist() == M
    assert ds.items.tolist() == [
        "bench::gsm8k_0",
        "bench::gsm8k_1",
        "arena::q1",
        "arena::q2",
    ]
    assert ds.item_kind.tolist() == ["static", "static", "arena", "arena"]
    assert ds.item_source.tolist() == ["bench", "bench", "arena", "arena"]
    # domain: the first folder level below the given directory
    assert ds.item_domain.tolist() == ["bench", "bench", "arena", "arena"]
    assert len(ds.static_y) == 6 and len(ds.arena_reward) == 6
    assert static_value(ds, "m2", "bench::gsm8k_0") == 1  # (1 + 0) % 2
    assert arena_value(ds, "m3", "arena::q2") == 4.0  # 2 + 2 * 1
    assert ds.files == (
        str(tmp_data.root / "arena" / "arena.jsonl"),
        str(tmp_data.root / "bench" / "static.jsonl"),
    )
    assert ds.skipped == {}


def test_csv_static_and_arena(tmp_data, rows):
    s = tmp_data.csv("src/static.csv", rows.static(M, "mmlu", n=2))
    a = tmp_data.csv("pool/arena.csv", rows.arena(M, ["x"]))
    ds = load([s, a])
    assert ds.items.tolist() == ["src::mmlu_0", "src::mmlu_1", "pool::x"]
    assert static_value(ds, "m1", "src::mmlu_1") == 1  # (0 + 1) % 2
    assert static_value(ds, "m2", "src::mmlu_1") == 0  # (1 + 1) % 2
    assert arena_value(ds, "m2", "pool::x") == 1.0
    # a file given directly has no folder level below its root: domain ""
    assert set(ds.item_domain) == {""}


def test_csv_and_jsonl_give_the_same_dataset(tmp_data, rows):
    data = rows.static(M, "d", n=4)
    j = load(tmp_data.jsonl("a/s/x.jsonl", data))
    c = load(tmp_data.csv("b/s/x.csv", data))
    assert j.items.tolist() == c.items.tolist() == [f"s::d_{k}" for k in range(4)]
    np.testing.assert_array_equal(j.static_y, c.static_y)
    np.testing.assert_array_equal(j.static_model, c.static_model)


def test_csv_whitespace_blank_lines_and_extra_columns(tmp_data):
    p = tmp_data.text(
        "s/x.csv",
        " model_label , dataset ,sample_index,correct,notes\n"
        " m1 , d , 0 , 1 ,hello\n"
        "\n"
        ",,,,\n"
        "m2,d,0,0,\n",
    )
    ds = load(p)
    assert ds.models.tolist() == ["m1", "m2"]
    assert ds.items.tolist() == ["s::d_0"]
    assert ds.static_y.tolist() == [1, 0]
    assert ds.skipped == {}


def test_directories_are_searched_recursively(tmp_data, rows):
    tmp_data.jsonl("math/deep/er/bench/s.jsonl", rows.static(M, "d", n=1))
    tmp_data.csv("code/arena/a.CSV", rows.arena(M, ["p"]))  # suffix case does not matter
    tmp_data.text("code/notes.txt", "not data")  # other suffixes are ignored
    tmp_data.jsonl(".hidden/bench/s.jsonl", ["{broken"])  # hidden folders are ignored
    tmp_data.jsonl("math/.tmp.jsonl", ["{broken"])  # hidden files are ignored
    found = find_files([tmp_data.root])
    assert [f.relative_to(tmp_data.root).as_posix() for f, _ in found] == [
        "code/arena/a.CSV",
        "math/deep/er/bench/s.jsonl",
    ]
    assert all(root == tmp_data.root for _, root in found)
    ds = load(tmp_data.root)
    # source = parent folder; domain = first folder level below the searched directory
    assert dict(zip(ds.items, ds.item_domain, strict=True)) == {
        "bench::d_0": "math",
        "arena::p": "code",
    }


def test_several_files_are_concatenated(tmp_data, rows):
    a = tmp_data.jsonl("s/a.jsonl", rows.static(M, "d", n=2))
    b = tmp_data.jsonl("s/b.jsonl", rows.static(M, "e", n=3))
    c = tmp_data.csv("s/c.csv", rows.static(M, "f", n=1))
    ds = load([a, b, c])
    assert len(ds.static_y) == 3 * (2 + 3 + 1)
    assert ds.n_items == 6
    assert ds.files == (str(a), str(b), str(c))
    # the same three files found through their folder
    ds2 = load(tmp_data.root / "s")
    assert sorted(ds2.items.tolist()) == sorted(ds.items.tolist())
    assert len(ds2.static_y) == 18


def test_string_path_and_single_path_accepted(tmp_data, rows):
    p = tmp_data.jsonl("s/a.jsonl", rows.static(M))
    assert load(str(p)).n_models == 3
    assert load(p).n_models == 3
    assert load([str(p)]).n_models == 3


# --------------------------------------------------------------------------- ids, domains


def test_item_id_convention_uses_parent_folder(tmp_data):
    s = [
        {"model_label": m, "dataset": "gsm8k", "sample_index": "7", "correct": 1} for m in M[:2]
    ] + [{"model_label": m, "dataset": "gsm8k", "sample_index": 7.0, "correct": 0} for m in M[2:]]
    tmp_data.jsonl("root/mybench/sub/s.jsonl", s)
    tmp_data.jsonl(
        "root/other/sub/a.jsonl",
        [{"model_label": m, "item_id": "arena_math_0042", "reward": i} for i, m in enumerate(M)],
    )
    ds = load(tmp_data.root / "root")
    # "7" and 7.0 name the same question; the source is the parent folder ("sub")
    assert ds.items.tolist() == ["sub::gsm8k_7", "sub::arena_math_0042"]
    assert ds.item_domain.tolist() == ["mybench", "other"]
    assert ds.groups.tolist() == ["arena:sub", "static:sub"]


def test_source_tag_does_not_depend_on_how_the_path_is_spelled(tmp_data, rows, monkeypatch):
    tmp_data.jsonl("top/bench/s.jsonl", rows.static(M, "d", n=1))
    tmp_data.jsonl("top/arena/a.jsonl", rows.arena(M, ["p"]))
    monkeypatch.chdir(tmp_data.root / "top" / "bench")
    for spelling in (["s.jsonl"], ["./s.jsonl"], ["."], ["../bench/s.jsonl"], ["../bench"]):
        ds = load(spelling)
        assert ds.items.tolist() == ["bench::d_0"], spelling
    ds = load(["s.jsonl", "../arena/a.jsonl"])
    assert ds.items.tolist() == ["bench::d_0", "arena::p"]
    # the domain still comes from the first folder level below a searched directory
    assert load([".."]).item_domain.tolist() == ["bench", "arena"]
    assert load(["."]).item_domain.tolist() == [""]


def test_same_local_ids_in_two_sources_stay_distinct(tmp_data, rows):
    tmp_data.jsonl("x/bench/s.jsonl", rows.static(M, "d", n=1))
    tmp_data.jsonl("y/bench2/s.jsonl", rows.static(M, "d", n=1))
    ds = load(tmp_data.root)
    assert sorted(ds.items.tolist()) == ["bench2::d_0", "bench::d_0"]
    assert sorted(ds.groups.tolist()) == ["static:bench", "static:bench2"]


def test_static_and_arena_id_clash_is_an_error(tmp_data, rows):
    tmp_data.jsonl("s/static.jsonl", rows.static(M, "d", n=1))
    tmp_data.jsonl("s/arena.jsonl", rows.arena(M, ["d_0"]))
    with pytest.raises(InputError, match="s::d_0.*both a static question and an arena prompt"):
        load(tmp_data.root)


def test_domain_field_then_category_then_folder(tmp_data):
    rows = [
        {"model_label": "m1", "dataset": "d", "sample_index": 0, "correct": 1, "domain": "math"},
        {"model_label": "m2", "dataset": "d", "sample_index": 0, "correct": 0, "domain": "math"},
        {
            "model_label": "m1",
            "dataset": "d",
            "sample_index": 1,
            "correct": 1,
            "category": "code",
            "domain": "writing",
        },
        {
            "model_label": "m2",
            "dataset": "d",
            "sample_index": 1,
            "correct": 1,
            "category": "code",
            "domain": "writing",
        },
        {"model_label": "m1", "dataset": "d", "sample_index": 2, "correct": 1, "category": "code"},
        {"model_label": "m2", "dataset": "d", "sample_index": 2, "correct": 1, "category": "code"},
        {"model_label": "m1", "dataset": "d", "sample_index": 3, "correct": 1, "domain": ""},
        {"model_label": "m2", "dataset": "d", "sample_index": 3, "correct": 1, "domain": " "},
    ]
    tmp_data.jsonl("top/src/s.jsonl", rows)
    ds = load(tmp_data.root)
    assert dict(zip(ds.items, ds.item_domain, strict=True)) == {
        "src::d_0": "math",
        "src::d_1": "writing",
        "src::d_2": "code",
        "src::d_3": "top",
    }


def test_domain_is_empty_for_a_file_directly_in_the_searched_folder(tmp_data, rows):
    tmp_data.jsonl("s/x.jsonl", rows.static(M, n=1))
    ds = load(tmp_data.root / "s")
    assert ds.item_domain.tolist() == [""]
    assert ds.summary_dict()["domains"] == []


# --------------------------------------------------------------------------- accepted values


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (True, 1),
        (False, 0),
        (1, 1),
        (0, 0),
        (1.0, 1),
        (0.0, 0),
        ("1", 1),
        ("0", 0),
        ("true", 1),
        ("false", 0),
        ("True", 1),
        (" FALSE ", 0),
    ],
)
def test_accepted_correct_spellings_jsonl(tmp_data, value, expected):
    rows = [
        {"model_label": "m1", "dataset": "d", "sample_index": 0, "correct": value},
        {"model_label": "m2", "dataset": "d", "sample_index": 0, "correct": 1 - expected},
    ]
    ds = load(tmp_data.jsonl("s/x.jsonl", rows))
    assert static_value(ds, "m1", "s::d_0") == expected
    assert static_value(ds, "m2", "s::d_0") == 1 - expected


@pytest.mark.parametrize(
    ("text", "expected"), [("1", 1), ("0", 0), ("true", 1), ("False", 0), ("TRUE", 1)]
)
def test_accepted_correct_spellings_csv(tmp_data, text, expected):
    p = tmp_data.text(
        "s/x.csv", f"model_label,dataset,sample_index,correct\nm1,d,0,{text}\nm2,d,0,1\n"
    )
    assert static_value(load(p), "m1", "s::d_0") == expected


def test_reward_accepts_numeric_strings_and_ints(tmp_data):
    p = tmp_data.jsonl(
        "s/a.jsonl",
        [
            {"model_label": "m1", "item_id": "p", "reward": "2.5"},
            {"model_label": "m2", "item_id": "p", "reward": 3},
            {"model_label": "m3", "item_id": "p", "reward": -1e-3},
        ],
    )
    ds = load(p)
    assert ds.arena_reward.tolist() == [2.5, 3.0, -0.001]


# --------------------------------------------------------------------------- errors with file:line


def _assert_error(path, line, match, **kwargs):
    with pytest.raises(InputError) as info:
        load(path, **kwargs)
    msg = str(info.value)
    assert f"{path}:{line}:" in msg, msg
    assert match in msg, msg
    return msg


def test_malformed_json_names_file_and_line(tmp_data, rows):
    lines = [json.dumps(r) for r in rows.static(M, n=1)]
    lines.insert(1, "")  # blank lines are skipped but still counted
    lines.insert(3, '{"model_label": "m9", "dataset": ')
    p = tmp_data.jsonl("s/x.jsonl", lines)
    _assert_error(p, 4, "malformed JSON")


def test_json_that_is_not_an_object(tmp_data):
    p = tmp_data.jsonl(
        "s/x.jsonl", ['{"model_label": "m1", "item_id": "p", "reward": 1}', "[1, 2]"]
    )
    _assert_error(p, 2, "expected a JSON object")


@pytest.mark.parametrize("bad", [2, -1, 0.5, "yes", "no", "2", "", None])
def test_bad_correct_names_file_line_and_value(tmp_data, bad):
    rows = [
        {"model_label": "m1", "dataset": "d", "sample_index": 0, "correct": 1},
        {"model_label": "m2", "dataset": "d", "sample_index": 0, "correct": bad},
    ]
    p = tmp_data.jsonl("s/x.jsonl", rows)
    if bad in ("", None):  # empty is "missing", not invalid: skipped and counted
        with pytest.raises(InputError, match="model 'm2' has no usable rows"):
            quiet_load(p)
        return
    msg = _assert_error(p, 2, "correct must be true/false or 0/1")
    assert repr(bad) in msg


def test_bad_correct_in_csv_names_line(tmp_data):
    p = tmp_data.text(
        "s/x.csv", "model_label,dataset,sample_index,correct\nm1,d,0,1\nm2,d,0,yes\nm3,d,0,0\n"
    )
    _assert_error(p, 3, "'yes'")


@pytest.mark.parametrize(
    ("raw", "match"),
    [
        ("NaN", "reward must be finite"),
        ("Infinity", "reward must be finite"),
        ("-Infinity", "reward must be finite"),
        ('"inf"', "reward must be finite"),
        ('"nan"', "reward must be finite"),
        ("1e400", "reward must be finite"),
        ("1" * 400, "reward must be finite"),  # an int too large for a float
        ('"abc"', "reward must be a number, got 'abc'"),
        ("true", "reward must be a number, got True"),
        ("[1]", "reward must be a number, got [1]"),
        ('{"a": 1}', "reward must be a number"),
    ],
)
def test_bad_reward_names_file_line_and_value(tmp_data, raw, match):
    lines = [
        '{"model_label": "m1", "item_id": "p", "reward": 1.0}',
        '{"model_label": "m2", "item_id": "p", "reward": 2.0}',
        '{"model_label": "m3", "item_id": "p", "reward": ' + raw + "}",
    ]
    _assert_error(tmp_data.jsonl("s/a.jsonl", lines), 3, match)


def test_bad_reward_in_csv_names_line(tmp_data):
    p = tmp_data.text("s/a.csv", "model_label,item_id,reward\nm1,p,1\nm2,p,nan\n")
    _assert_error(p, 3, "reward must be finite")
    p = tmp_data.text("s/b.csv", "model_label,item_id,reward\nm1,p,1\nm2,p,1.2.3\n")
    _assert_error(p, 3, "reward must be a number, got '1.2.3'")


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("sample_index", 1.5, "sample_index must be an integer, got 1.5"),
        ("sample_index", "x1", "sample_index must be an integer, got 'x1'"),
        ("sample_index", True, "sample_index must be an integer, got True"),
        ("model_label", [1], "model_label must be a string"),
        ("model_label", " ", "model_label is empty"),
        ("dataset", {"a": 1}, "dataset must be a string"),
    ],
)
def test_other_invalid_values(tmp_data, field, value, match):
    rows = [
        {"model_label": "m1", "dataset": "d", "sample_index": 0, "correct": 1},
        {"model_label": "m2", "dataset": "d", "sample_index": 0, "correct": 1},
    ]
    rows[1][field] = value
    _assert_error(tmp_data.jsonl("s/x.jsonl", rows), 2, match)


def test_file_mixing_kinds_names_file_and_line(tmp_data, rows):
    lines = rows.static(M, n=1) + [{"model_label": "m1", "item_id": "p", "reward": 1}]
    p = tmp_data.jsonl("s/x.jsonl", lines)
    _assert_error(p, 4, "file mixes static and arena rows")
    p = tmp_data.csv(
        "s/y.csv",
        [
            {"model_label": "m1", "item_id": "p", "reward": 1},
            {"model_label": "m2", "dataset": "d", "sample_index": 0, "correct": 1},
        ],
        fields=["model_label", "item_id", "reward", "dataset", "sample_index", "correct"],
    )
    _assert_error(p, 3, "file mixes static and arena rows")


def test_row_with_both_kinds_of_field_is_an_error(tmp_data):
    row = {"model_label": "m1", "dataset": "d", "sample_index": 0, "correct": 1, "reward": 2}
    _assert_error(tmp_data.jsonl("s/x.jsonl", [row]), 1, "row has both static fields")


def test_errors_are_raised_even_after_skippable_rows(tmp_data):
    lines = ['{"model_label": "m1"}', '{"model_label": "m2", "item_id": "p", "reward": "?"}']
    _assert_error(tmp_data.jsonl("s/x.jsonl", lines), 2, "'?'")


def test_huge_json_integer_is_an_input_error_not_a_crash(tmp_data):
    lines = [
        '{"model_label": "m1", "item_id": "p", "reward": 1}',
        '{"model_label": "m2", "item_id": "p", "reward": ' + "9" * 5000 + "}",
    ]
    _assert_error(tmp_data.jsonl("s/x.jsonl", lines), 2, "malformed JSON")


def test_not_utf8_is_an_input_error(tmp_data):
    p = tmp_data.path("s/x.jsonl")
    p.write_bytes(b'{"model_label": "m\xff1", "item_id": "p", "reward": 1}\n')
    with pytest.raises(InputError, match=r"x\.jsonl: not UTF-8 text"):
        load(p)
    p = tmp_data.path("s/y.csv")
    p.write_bytes(b"model_label,item_id,reward\nm\xff,p,1\n")
    with pytest.raises(InputError, match=r"y\.csv: not UTF-8 text"):
        load(p)


def test_utf8_byte_order_mark_is_accepted(tmp_data):
    p = tmp_data.path("s/x.csv")
    p.write_bytes("model_label,item_id,reward\nm1,p,1\nm2,p,2\n".encode("utf-8-sig"))
    assert load(p).arena_reward.tolist() == [1.0, 2.0]
    p = tmp_data.path("t/x.jsonl")
    text = '{"model_label": "m1", "item_id": "p", "reward": 1}\n'
    text += '{"model_label": "m2", "item_id": "p", "reward": 3}\n'
    p.write_bytes(text.encode("utf-8-sig"))
    assert load(p).arena_reward.tolist() == [1.0, 3.0]


def test_path_errors(tmp_data, tmp_path):
    with pytest.raises(InputError, match="no such file or directory"):
        load(tmp_path / "nope")
    bad = tmp_data.text("s/x.txt", "hello")
    with pytest.raises(InputError, match=r"x\.txt: unsupported file type"):
        load(bad)
    (tmp_path / "empty").mkdir()
    tmp_data.text("empty/readme.md", "no data here")
    with pytest.raises(InputError, match="no .jsonl, .csv or .parquet input files found"):
        load(tmp_path / "empty")


def test_bad_reward_norm(tmp_data, rows):
    p = tmp_data.jsonl("s/x.jsonl", rows.static(M))
    with pytest.raises(InputError, match="reward_norm must be one of"):
        load(p, reward_norm="zscore")


# --------------------------------------------------------------------------- skips and counts


def test_missing_fields_are_skipped_and_counted(tmp_data, rows):
    lines = rows.static(M, n=2) + [
        {"model_label": "m1", "sample_index": 9, "correct": 1},  # no dataset
        {"model_label": "m1", "dataset": "d", "sample_index": 9, "correct": ""},  # empty
        {"model_label": "m2", "dataset": "d", "correct": 1},  # no sample_index
        {"dataset": "d", "sample_index": 9, "correct": 1},  # no model
        {"model_label": "m3", "dataset": "d", "sample_index": None, "correct": 1},
        {"model_label": "m3", "note": "nothing else"},  # neither correct nor reward
    ]
    p = tmp_data.jsonl("s/x.jsonl", lines)
    with pytest.warns(DataWarning, match="skipped while loading") as rec:
        ds = load(p)
    assert dict(ds.skipped) == {
        "missing dataset": 1,
        "missing correct": 1,
        "missing sample_index": 2,
        "missing model_label": 1,
        "missing correct or reward": 1,
    }
    assert "2 missing sample_index" in str(rec[0].message)
    assert len(ds.static_y) == 6
    assert ds.summary_dict()["skipped"] == dict(ds.skipped)


def test_skip_invalid_counts_instead_of_raising(tmp_data, rows):
    lines = rows.static(M, n=2) + [
        {"model_label": "m1", "dataset": "d", "sample_index": 5, "correct": 2},
        {"model_label": "m2", "dataset": "d", "sample_index": 5, "correct": "yes"},
        {"model_label": "m2", "dataset": "d", "sample_index": "five", "correct": 1},
        "not json at all",
    ]
    p = tmp_data.jsonl("s/x.jsonl", lines)
    # malformed JSON is never skipped
    _assert_error(p, 10, "malformed JSON", skip_invalid=True)
    p = tmp_data.jsonl("s/x.jsonl", lines[:-1])
    with pytest.raises(InputError, match=":7: correct must be"):
        load(p)
    with pytest.warns(DataWarning, match="2 invalid correct, 1 invalid sample_index"):
        ds = load(p, skip_invalid=True)
    assert dict(ds.skipped) == {"invalid correct": 2, "invalid sample_index": 1}
    assert len(ds.static_y) == 6
    arena = tmp_data.jsonl(
        "a/a.jsonl",
        rows.arena(M, ["p"]) + [{"model_label": "m1", "item_id": "q", "reward": "NaN"}],
    )
    with pytest.warns(DataWarning):
        ds = load(arena, skip_invalid=True)
    assert dict(ds.skipped) == {"invalid reward": 1}
    assert ds.items.tolist() == ["a::p"]


def test_duplicates_keep_the_last_value(tmp_data, rows):
    lines = rows.static(M, "d", n=1) + [
        {"model_label": "m1", "dataset": "d", "sample_index": 0, "correct": 1},
        {"model_label": "m1", "dataset": "d", "sample_index": "0", "correct": 0},
    ]
    lines[0]["correct"] = 1
    with pytest.warns(DataWarning, match="2 duplicate"):
        ds = load(tmp_data.jsonl("s/x.jsonl", lines))
    assert dict(ds.skipped) == {"duplicate (model, item)": 2}
    assert static_value(ds, "m1", "s::d_0") == 0
    assert len(ds.static_y) == 3


def test_duplicates_across_files_keep_the_later_file(tmp_data):
    first = [{"model_label": m, "item_id": "p", "reward": 1.0 + i} for i, m in enumerate(M)]
    second = [{"model_label": "m2", "item_id": "p", "reward": 10.0}]
    tmp_data.jsonl("s/a.jsonl", first)
    tmp_data.jsonl("s/b.jsonl", second)  # sorted after a.jsonl
    ds = quiet_load(tmp_data.root)
    assert arena_value(ds, "m2", "s::p") == 10.0
    assert arena_value(ds, "m1", "s::p") == 1.0
    assert dict(ds.skipped) == {"duplicate (model, item)": 1}


def test_single_model_arena_prompts_are_dropped_and_counted(tmp_data, rows):
    lines = rows.arena(M, ["p"]) + [
        {"model_label": "m1", "item_id": "solo1", "reward": 1},
        {"model_label": "m2", "item_id": "solo2", "reward": 1},
        {"model_label": "m2", "item_id": "solo2", "reward": 2},  # still one model
    ]
    with pytest.warns(DataWarning, match="2 arena prompt answered by one model"):
        ds = load(tmp_data.jsonl("s/a.jsonl", lines))
    assert ds.items.tolist() == ["s::p"]
    assert dict(ds.skipped) == {
        "duplicate (model, item)": 1,
        "arena prompt answered by one model": 2,
    }


# --------------------------------------------------------------------------- unfittable input


def test_no_usable_rows(tmp_data):
    p = tmp_data.jsonl("s/x.jsonl", [{"model_label": "m1", "dataset": "d"}])
    with pytest.raises(InputError) as info:
        quiet_load(p)
    # a file none of whose rows can be read names itself and the missing field
    assert str(info.value).startswith(f"{p}: none of its 1 rows can be read: they miss the field")
    assert "'sample_index'" in str(info.value) and "dataset, model_label" in str(info.value)
    p = tmp_data.text("t/x.jsonl", "\n\n")
    with pytest.raises(InputError) as info:
        load(p)
    assert str(info.value) == "no usable rows: nothing to fit"


def test_fewer_than_two_models(tmp_data):
    p = tmp_data.jsonl(
        "s/x.jsonl",
        [{"model_label": "m1", "dataset": "d", "sample_index": k, "correct": 1} for k in range(3)],
    )
    with pytest.raises(InputError, match="need at least two models to rank, found 1"):
        load(p)


def test_model_with_no_usable_rows(tmp_data, rows):
    lines = rows.static(["m1", "m2"]) + [
        {"model_label": "m3", "dataset": "d", "correct": 1},
        {"model_label": "m4", "dataset": "d", "correct": 1},
    ]
    with pytest.raises(InputError) as info:
        quiet_load(tmp_data.jsonl("s/x.jsonl", lines))
    assert str(info.value) == (
        "model 'm3' has no usable rows (and 1 more) (skipped: 2 missing sample_index)"
    )


def test_model_only_on_single_model_prompts_has_no_usable_rows(tmp_data, rows):
    lines = rows.arena(["m1", "m2"], ["p"]) + [{"model_label": "m3", "item_id": "q", "reward": 1}]
    with pytest.raises(InputError, match="model 'm3' has no usable rows"):
        quiet_load(tmp_data.jsonl("s/a.jsonl", lines))


# --------------------------------------------------------------------------- normalisation


def _two_source_arena(tmp_data):
    rng = np.random.default_rng(3)
    ra = rng.normal(20.0, 2.0, (4, 5))
    rb = rng.normal(-2.0, 0.5, (4, 3))
    for name, r in (("ra", ra), ("rb", rb)):
        tmp_data.jsonl(
            f"{name}/a.jsonl",
            [
                {"model_label": f"m{i}", "item_id": f"p{q}", "reward": float(r[i, q])}
                for i in range(r.shape[0])
                for q in range(r.shape[1])
            ],
        )
    return ra, rb


def test_reward_normalisation_per_source(tmp_data):
    ra, rb = _two_source_arena(tmp_data)
    ds = load(tmp_data.root)
    assert ds.reward_norm == "source"
    f = ds.arena_frame()
    for src, r in (("ra", ra), ("rb", rb)):
        z = f.loc[f["source"] == src, "z"].to_numpy()
        raw = f.loc[f["source"] == src, "reward"].to_numpy()
        assert len(z) == r.size
        assert abs(z.mean()) < 1e-12
        assert z.std() == pytest.approx(1.0, abs=1e-12)  # population sd (ddof=0)
        np.testing.assert_allclose(z, (raw - r.mean()) / r.std(), atol=1e-12)


def test_reward_normalisation_global(tmp_data):
    ra, rb = _two_source_arena(tmp_data)
    ds = load(tmp_data.root, reward_norm="global")
    assert ds.reward_norm == "global"
    allr = np.concatenate([ra.ravel(), rb.ravel()])
    assert abs(ds.arena_z.mean()) < 1e-12
    assert ds.arena_z.std() == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(ds.arena_z, (ds.arena_reward - allr.mean()) / allr.std())
    f = ds.arena_frame()
    # source "ra" has far larger rewards: its z are all above source "rb"'s
    assert f.loc[f.source == "ra", "z"].min() > 0 > f.loc[f.source == "rb", "z"].max()
    assert f.loc[f.source == "rb", "z"].std(ddof=0) < 0.2  # not rescaled to 1 per source


def test_constant_rewards_give_zero_z(tmp_data):
    tmp_data.jsonl("s/a.jsonl", [{"model_label": m, "item_id": "p", "reward": 4.2} for m in M])
    ds = load(tmp_data.root)
    assert ds.arena_z.tolist() == [0.0, 0.0, 0.0]


def test_read_paths_tables(tmp_data, rows):
    tmp_data.jsonl("s/x.jsonl", rows.static(M, n=1))
    static, arena, report = read_paths([tmp_data.root])
    assert list(static.columns) == ["model", "item", "source", "domain", "correct", "file", "line"]
    assert static["line"].tolist() == [1, 2, 3]
    assert str(static["correct"].dtype) == "int8"
    assert len(arena) == 0 and list(arena.columns)[-3:] == ["reward", "file", "line"]
    assert report.rows == 3 and report.models_seen == set(M)


# --------------------------------------------------------------------------- property tests

FIELDS = [
    "model_label",
    "dataset",
    "sample_index",
    "correct",
    "item_id",
    "reward",
    "domain",
    "category",
]
_chars = st.characters(blacklist_categories=("Cs",))
_values = st.one_of(
    st.integers(),
    st.integers(min_value=-1, max_value=2),
    st.just(10**400),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.text(_chars, max_size=6),
    st.sampled_from(["m1", "m2", "m3", "0", "1", "true", "no", "nan", "inf", "", " "]),
    st.none(),
    st.lists(st.one_of(st.integers(), st.text(max_size=3)), max_size=3),
    st.dictionaries(st.text(string.ascii_letters, max_size=3), st.integers(), max_size=2),
)
_row_dicts = st.dictionaries(st.sampled_from(FIELDS), _values, max_size=len(FIELDS))
_models = st.sampled_from(["m1", "m2", "m3", " m1 "])
_static_rows = st.fixed_dictionaries(
    {
        "model_label": _models,
        "dataset": st.sampled_from(["d", "e"]),
        "sample_index": st.one_of(st.integers(0, 3), st.sampled_from(["1", 2.0])),
        "correct": st.sampled_from([0, 1, True, False, "0", "1", "true", "False"]),
    },
    optional={"domain": _values, "category": _values},
)
_arena_rows = st.fixed_dictionaries(
    {
        "model_label": _models,
        "item_id": st.sampled_from(["p", "q", 7]),
        "reward": st.one_of(
            st.floats(-5, 5),
            st.integers(-3, 3),
            st.sampled_from(["1.5", 1e308, -1e308, 2**53 + 1, 10**400, "1e999", float("nan")]),
        ),
    },
    optional={"domain": _values},
)


def _mutated(valid):
    """A valid row with one field replaced by an arbitrary value (or removed)."""
    return st.tuples(valid, st.sampled_from(FIELDS), st.one_of(_values, st.just(...))).map(
        lambda t: {k: v for k, v in {**t[0], t[1]: t[2]}.items() if v is not ...}
    )


@st.composite
def _jsonl_lines(draw):
    """Lines of one file: valid rows of one kind mixed with a few broken lines."""
    valid = draw(st.sampled_from([_static_rows, _arena_rows]))
    good = draw(st.lists(valid.map(json.dumps), min_size=2, max_size=12))
    noise = st.one_of(
        _mutated(valid).map(json.dumps),
        _row_dicts.map(json.dumps),
        st.text(_chars, max_size=40),
        st.sampled_from(
            ["", "[]", "{}", "null", "NaN", "[" * 5000, '{"reward": 1' + "0" * 5000 + "}"]
        ),
    )
    bad = draw(st.lists(noise, max_size=3))
    return draw(st.permutations(good + bad))


def _load_or_input_error(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)
        try:
            ds = load(path, skip_invalid=False)
        except InputError:
            event("InputError")
            return None
    event("Dataset")
    assert isinstance(ds, Dataset)
    assert ds.n_models >= 2
    assert len(ds.static_y) + len(ds.arena_z) > 0
    assert np.isfinite(ds.arena_z).all()
    return ds


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,  # seeded: the same examples on every run
    suppress_health_check=[HealthCheck.too_slow],
)
@given(lines=_jsonl_lines(), skip_invalid=st.booleans())
def test_any_jsonl_gives_a_dataset_or_an_input_error(lines, skip_invalid):
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "src" / "x.jsonl"
        p.parent.mkdir()
        p.write_text("\n".join(lines) + "\n", encoding="utf-8")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DataWarning)
            try:
                ds = load(p, skip_invalid=skip_invalid)
            except InputError as exc:
                event("InputError: " + str(exc).split(": ")[-1].split(" ")[0])
                return
        event("Dataset")
        assert isinstance(ds, Dataset)
        assert ds.n_models >= 2
        assert np.isfinite(ds.arena_z).all()
        assert set(np.unique(ds.static_y)) <= {0, 1}


_csv_cells = st.one_of(
    _values.map(str),
    st.sampled_from(["m1", "m2", "0", "1", "true", "2.5", "nan", ""]),
    st.text(_chars, max_size=8),
)


@st.composite
def _csv_text(draw):
    """A CSV file: usually a valid header and rows of one kind, plus a few broken rows."""
    valid = draw(st.sampled_from([_static_rows, _arena_rows]))
    fields = ["model_label", "dataset", "sample_index", "correct"]
    if valid is _arena_rows:
        fields = ["model_label", "item_id", "reward"]
    header = draw(
        st.one_of(
            st.just(fields + ["domain"]),
            st.permutations(fields),
            st.lists(st.one_of(st.sampled_from(FIELDS), st.text(_chars, max_size=5)), max_size=6),
        )
    )
    good = draw(st.lists(valid, min_size=2, max_size=10))
    # CSV has no float type: an index is written as an integer ("2", not "2.0")
    cell = lambda f, v: str(int(v)) if f == "sample_index" and isinstance(v, float) else str(v)  # noqa: E731
    body = [[cell(f, r.get(f, "")) for f in header] for r in good]
    body += draw(st.lists(st.lists(_csv_cells, max_size=7), max_size=2))
    body = draw(st.permutations(body))
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(header)
    w.writerows(body)
    raw = draw(st.lists(st.text(_chars, max_size=30), max_size=2))
    return buf.getvalue() + "".join(r + "\n" for r in raw)


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,  # seeded: the same examples on every run
    suppress_health_check=[HealthCheck.too_slow],
)
@given(text=_csv_text())
def test_any_csv_gives_a_dataset_or_an_input_error(text):
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "src" / "x.csv"
        p.parent.mkdir()
        p.write_text(text, encoding="utf-8")
        _load_or_input_error(p)
