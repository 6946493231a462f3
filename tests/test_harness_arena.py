"""AlpacaEval annotations, Arena-Hard judgments and MT-Bench grades as arena rewards."""

import json
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bayes_dualeval.core.errors import InputError
from bayes_dualeval.data.harness import alpaca_eval, arena_hard, claim, limits, mt_bench
from bayes_dualeval.data.load import load
from bayes_dualeval.data.readers import read_paths

FIXTURES = Path(__file__).parent / "fixtures" / "harness"
SHARED = Path(__file__).parents[2] / "shared" / "data" / "real"


def rewards(folder):
    _, arena, report = read_paths([folder])
    return {
        (m, i): r for m, i, r in arena[["model", "item", "reward"]].itertuples(index=False)
    }, report


def test_alpaca_eval_annotations():
    got, report = rewards(FIXTURES / "alpaca_eval")
    ids = [
        alpaca_eval.prompt_id(t)
        for t in (
            "Write a haiku about rain.",
            "Explain photosynthesis briefly.",
            "Name three prime numbers.",
            "Give a tip for better sleep.",
        )
    ]
    assert got == pytest.approx(
        {
            ("model-p", f"alpaca_eval::{ids[0]}"): 0.9,
            ("model-p", f"alpaca_eval::{ids[1]}"): 0.0,
            ("model-p", f"alpaca_eval::{ids[2]}"): 1.0,
            ("model-p", f"alpaca_eval::{ids[3]}"): 0.5,
            ("model-q", f"alpaca_eval::{ids[0]}"): 0.25,
            ("model-q", f"alpaca_eval::{ids[2]}"): 0.0,
            ("model-q", f"alpaca_eval::{ids[3]}"): 0.75,
        }
    )
    tally = report.harnesses["alpaca_eval"]
    assert tally.judges == {"weighted_alpaca_eval_gpt4_turbo"}
    assert tally.models == {"model-p", "model-q"}  # never the baseline gpt4_1106_preview
    assert dict(tally.skipped) == {"annotation without a preference": 1}
    assert tally.examples["annotation without a preference"].endswith("annotations.json: record 2")


def test_alpaca_eval_preference_encodings():
    assert [alpaca_eval.reward(p) for p in (1, 2, 1.5, 0, 1.2)] == [
        0.0,
        1.0,
        0.5,
        0.5,
        pytest.approx(0.2),
    ]
    assert [alpaca_eval.reward(p) for p in (None, 3, -1, float("nan"), True, "2")] == [None] * 6


def test_arena_hard_verdicts_from_the_models_side():
    got, report = rewards(FIXTURES / "arena_hard")
    assert got == pytest.approx(
        {
            ("model-p", "arena_hard::q0"): 1.0,  # B>>A, then A>>B with the model as A
            ("model-p", "arena_hard::q1"): 0.625,  # B>A 0.75, A=B 0.5
            ("model-p", "arena_hard::q2"): 0.25,  # A>B 0.25, B>A swapped 0.25
            ("model-q", "arena_hard::q0"): 0.0,
            ("model-q", "arena_hard::q1"): 0.5,  # the game without a verdict left out
            ("model-q", "arena_hard::q2"): 0.25,  # A>>>B left out
        }
    )
    tally = report.harnesses["arena_hard"]
    assert tally.judges == {"gpt-4-1106-preview"} and tally.tasks == {"arena-hard-v0.1"}
    assert dict(tally.skipped) == {"game with verdict None": 1, "game with verdict 'A>>>B'": 1}
    assert tally.examples["game with verdict 'A>>>B'"].endswith("model-q.jsonl:3")
    assert report.missing == {}  # question.jsonl is claimed, not read as rows


def test_arena_hard_question_with_no_verdict_is_skipped(tmp_path):
    f = tmp_path / "model_judgment" / "judge-x" / "m.jsonl"
    f.parent.mkdir(parents=True)
    f.write_text(
        json.dumps({"uid": "u1", "model": "m", "games": [{"score": "??"}, {"score": None}]}) + "\n"
    )
    skipped = []
    assert list(arena_hard.rows(f, lambda *a: skipped.append(a[0]))) == []
    assert skipped == [
        "game with verdict '??'",
        "game with verdict None",
        "question with no scored game",
    ]


def test_mt_bench_grades_with_categories():
    got, report = rewards(FIXTURES / "mt_bench")
    assert got == {
        ("model-p", "mt_bench::mtbench_q081_t1"): 9.0,
        ("model-p", "mt_bench::mtbench_q081_t2"): 8.0,
        ("model-p", "mt_bench::mtbench_q101_t1"): 7.0,
        ("model-q", "mt_bench::mtbench_q081_t1"): 4.0,
        ("model-q", "mt_bench::mtbench_q081_t2"): 5.0,
        ("model-q", "mt_bench::mtbench_q101_t1"): 6.0,
        ("model-q", "mt_bench::mtbench_q101_t2"): 3.0,
    }
    tally = report.harnesses["mt_bench"]
    assert tally.judges == {"gpt-4"} and dict(tally.skipped) == {
        "grade -1 (no grade in the judgment)": 1
    }
    assert claim(FIXTURES / "mt_bench" / "data" / "mt_bench" / "question.jsonl") is mt_bench
    ds = load(FIXTURES / "mt_bench")
    domain = dict(zip(ds.items, ds.item_domain, strict=True))
    assert domain["mt_bench::mtbench_q081_t1"] == "writing"
    assert domain["mt_bench::mtbench_q101_t1"] == "reasoning"
    assert report.missing == {}  # question.jsonl is claimed, not read as rows


def test_a_mixed_folder_reads_both_kinds_at_once():
    ds = load([FIXTURES / "inspect", FIXTURES / "alpaca_eval"])
    assert len(ds.static_items) == 6 and len(ds.arena_items) == 3
    assert set(ds.models) == {
        "mockllm/model-a",
        "mockllm/model-b",
        "mockllm/model-c",
        "model-p",
        "model-q",
    }


def test_json_array_streams_records_and_refuses_a_huge_one(tmp_path, monkeypatch):
    f = tmp_path / "a.json"
    f.write_text(
        json.dumps(
            [{"generator_2": "m", "instruction": str(i), "preference": 2} for i in range(3)]
        )
    )
    assert [n for n, _ in limits.json_array(f)] == [1, 2, 3]
    monkeypatch.setattr(limits, "MAX_RECORD_BYTES", 2**20)
    big = tmp_path / "big.json"
    with big.open("w") as fh:
        fh.write('[{"generator_2": "m", "instruction": "' + "x" * (8 * 2**20) + '"}]')
    tracemalloc.start()
    with pytest.raises(InputError, match=r"big\.json: record 1: record larger than 1 MiB"):
        list(limits.json_array(big))
    assert tracemalloc.get_traced_memory()[1] < 12 * 2**20
    tracemalloc.stop()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[{}, {}", "truncated JSON array"),
        ('{"a": 1}', "not a JSON array"),
        ("[{}, {]", "record 2: malformed JSON"),
    ],
)
def test_json_array_errors(tmp_path, text, message):
    f = tmp_path / "a.json"
    f.write_text(text)
    with pytest.raises(InputError, match=message):
        list(limits.json_array(f))


def test_a_huge_jsonl_line_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(limits, "MAX_RECORD_BYTES", 2**20)
    f = tmp_path / "j" / "judge" / "m.jsonl"
    f.parent.mkdir(parents=True)
    f.write_text(
        json.dumps(
            {"question_id": 1, "model": "m", "games": [{"score": "A>B", "judgment": "x" * 2**21}]}
        )
        + "\n"
    )
    assert claim(f) is arena_hard
    with pytest.raises(InputError, match=r"m\.jsonl:1: record larger than 1 MiB, refused"):
        read_paths([f])


def shared_slice(name, n_models=3, n_items=15):
    path = SHARED / name / "arena.jsonl"
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    rows = pd.read_json(path, lines=True)
    models = sorted(rows["model_label"].unique())[:n_models]
    items = sorted(rows["item_id"].unique())[:n_items]
    return rows[rows["model_label"].isin(models) & rows["item_id"].isin(items)]


def annotations(rows, baseline, tmp_path):
    """AlpacaEval's layout, results/<model>/<annotator>/annotations.json, from converted rows."""
    for (model, judge), part in rows.groupby(["model_label", "annotator"]):
        recs = [
            {
                "dataset": r.get("subset", "s"),
                "instruction": f"instruction {r['item_id']}",
                "output_1": "baseline",
                "generator_1": baseline,
                "output_2": "model",
                "generator_2": model,
                "annotator": judge,
                "preference": r["reward"] + 1,
            }
            for r in part.to_dict("records")
        ]
        d = tmp_path / "results" / model / judge
        d.mkdir(parents=True)
        (d / "annotations.json").write_text(json.dumps(recs))
    return tmp_path / "results"


def test_shared_alpaca_eval_round_trips_through_annotations(tmp_path):
    rows = shared_slice("alpaca_eval").assign(annotator="weighted_alpaca_eval_gpt4_turbo")
    converted = tmp_path / "alpaca_eval" / "arena.jsonl"
    converted.parent.mkdir()
    rows.drop(columns="annotator").to_json(converted, orient="records", lines=True)
    a = load(converted)
    b = load(annotations(rows, "gpt4_1106_preview", tmp_path / "ae"))
    # the annotations carry no index of the evaluation set: items are named by instruction
    rename = {
        f"alpaca_eval::{alpaca_eval.prompt_id('instruction ' + i)}": f"alpaca_eval::{i}"
        for i in rows["item_id"]
    }
    assert list(a.models) == list(b.models)
    assert sorted(a.items) == sorted(rename[i] for i in b.items)
    cells = [
        {
            (ds.models[m], rename.get(ds.items[i], ds.items[i])): (r, z)
            for m, i, r, z in zip(
                ds.arena_model, ds.arena_item, ds.arena_reward, ds.arena_z, strict=True
            )
        }
        for ds in (a, b)
    ]
    assert cells[0].keys() == cells[1].keys() and len(cells[0]) == len(rows)
    for key, (r, z) in cells[0].items():
        assert cells[1][key] == pytest.approx((r, z), abs=1e-12)
    assert set(a.item_domain) == set(b.item_domain) == {""}


def test_shared_alpaca_eval_judges_round_trip_with_their_judges(tmp_path):
    rows = shared_slice("alpaca_eval_judges", n_models=68, n_items=10).rename(
        columns={"judge": "annotator"}
    )
    folder = annotations(rows, "text_davinci_003", tmp_path)
    got = []
    for f in sorted(folder.rglob("annotations.json")):
        got += [r for _, r in alpaca_eval.rows(f, lambda *a: None)]
    back = pd.DataFrame(got)
    back["item_id"] = back["item_id"].map(
        {alpaca_eval.prompt_id(f"instruction {i}"): i for i in rows["item_id"]}
    )
    key = ["model_label", "item_id", "judge"]
    want = rows.rename(columns={"annotator": "judge"}).sort_values(key).reset_index(drop=True)
    back = back.sort_values(key).reset_index(drop=True)
    assert len(back) == len(want) and back["judge"].nunique() >= 2
    assert (back[key].to_numpy() == want[key].to_numpy()).all()
    np.testing.assert_allclose(back["reward"], want["reward"], atol=1e-12)
