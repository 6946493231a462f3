"""lm-evaluation-harness samples: the files of scripts/tools/harness_fixtures.py, edge cases."""

import json
import shutil
from pathlib import Path

import pytest

from bayes_dualeval.core.errors import InputError
from bayes_dualeval.data.harness import claim, lm_eval
from bayes_dualeval.data.readers import read_paths

RUNS = Path(__file__).parent / "fixtures" / "harness" / "lm_eval"
#: (model, task, filter) -> labels of documents 0-3, as FixedLM answers them.
EXPECTED = {
    ("org/model-x", "qa_gen", "take-first"): [1, 1, 1, 1],
    ("org/model-x", "qa_gen", "majority"): [1, 1, 1, 1],
    ("org/model-x", "qa_mc", "none"): [1, 1, 1, 1],
    ("org/model-y", "qa_gen", "take-first"): [1, 1, 1, 0],
    ("org/model-y", "qa_gen", "majority"): [1, 1, 1, 0],
    ("org/model-y", "qa_mc", "none"): [1, 1, 0, 0],
}


def rows_of(path):
    skipped = []
    rows = [r for _, r in lm_eval.rows(Path(path), lambda *a: skipped.append(a))]
    return rows, skipped


def test_real_samples_give_model_task_document_and_filter():
    got = {}
    times = {}
    for f in sorted(RUNS.rglob("samples_*.jsonl")):
        assert claim(f) is lm_eval
        rows, skipped = rows_of(f)
        assert skipped == []
        for r in rows:
            got.setdefault((r["model_label"], r["dataset"], r["judge"]), {})[r["sample_index"]] = (
                r["correct"]
            )
            times.setdefault(r["model_label"], set()).add(r["sample"])
    assert {k: [v[i] for i in range(4)] for k, v in got.items()} == EXPECTED
    # the run's time (from the file name) is the sample: one run per model here
    assert all(len(t) == 1 for t in times.values())
    assert times["org/model-x"] == {
        f.stem.split("_")[-1] for f in RUNS.glob("org__model-x/samples_qa_mc_*")
    }


def test_a_folder_of_runs_reads_as_static_labels():
    static, arena, report = read_paths([RUNS])
    assert len(arena) == 0
    assert set(static["model"]) == {"org/model-x", "org/model-y"}
    assert set(static["item"]) == {
        f"lm_eval::{t}_{i}" for t in ("qa_gen", "qa_mc") for i in range(4)
    }
    assert len(static) == 24  # 2 models x (4 docs x 2 filters + 4 docs)
    tally = report.harnesses["lm_eval"]
    assert tally.files == 4 and tally.tasks == {"qa_gen", "qa_mc"}
    assert tally.judges == {"take-first", "majority", "none"}
    # results_*.json beside the samples is read for the model, not as an input file
    assert all("samples_" in f for f in report.files)


def test_a_second_run_is_a_second_sample(tmp_path):
    src = next(RUNS.glob("org__model-y/samples_qa_mc_*.jsonl"))
    res = next(RUNS.glob("org__model-y/results_*.json"))
    d = tmp_path / "org__model-y"
    d.mkdir()
    for stamp in ("2026-01-01T00-00-00.000001", "2026-01-02T00-00-00.000001"):
        shutil.copy(src, d / f"samples_qa_mc_{stamp}.jsonl")
        shutil.copy(res, d / f"results_{stamp}.json")
    _, _, report = read_paths([tmp_path])
    assert report.harnesses["lm_eval"].samples == {
        "2026-01-01T00-00-00.000001",
        "2026-01-02T00-00-00.000001",
    }


def write_run(folder, lines, results=None, task="t"):
    folder.mkdir(parents=True, exist_ok=True)
    stamp = "2026-01-01T00-00-00.000001"
    f = folder / f"samples_{task}_{stamp}.jsonl"
    f.write_text("".join(json.dumps(x) + "\n" for x in lines))
    if results is not None:
        (folder / f"results_{stamp}.json").write_text(json.dumps(results))
    return f


def line(doc_id, **metrics):
    return {"doc_id": doc_id, "doc": {"q": "?"}, "resps": [["a"]], "filter": "none", **metrics}


def test_metric_order_threshold_lists_and_skips(tmp_path):
    f = write_run(
        tmp_path / "m",
        [
            line(0, acc_norm=0.0, acc=1.0),  # acc comes first
            line(1, exact_match=0.6),  # thresholded at 0.5
            line(2, exact_match=[1.0, 0.0, 1.0]),  # one value per repeat
            line(3, bleu=12.0, metrics=["bleu"]),  # no label metric
            line(4, acc=2.0),  # not in [0, 1]
        ],
        results={"config": {"model": "hf", "model_args": "pretrained=org/m,dtype=bfloat16"}},
    )
    rows, skipped = rows_of(f)
    assert [(r["sample_index"], r["correct"], r["sample"]) for r in rows] == [
        (0, 1, "2026-01-01T00-00-00.000001"),
        (1, 1, "2026-01-01T00-00-00.000001"),
        (2, 1, "2026-01-01T00-00-00.000001/0"),
        (2, 0, "2026-01-01T00-00-00.000001/1"),
        (2, 1, "2026-01-01T00-00-00.000001/2"),
    ]
    assert {r["model_label"] for r in rows} == {"org/m"}
    assert [why for why, _ in skipped] == [
        "sample without a label metric (bleu)",
        "acc value not a label: 2.0",
    ]


def test_model_name_from_results(tmp_path):
    cases = [
        ({"model_name": "a/b", "config": {"model": "hf"}}, "a/b"),
        ({"config": {"model": "vllm", "model_args": {"pretrained": "c/d"}}}, "c/d"),
        ({"config": {"model": "openai-completions", "model_args": "model=gpt-x"}}, "gpt-x"),
        ({"config": {"model": "dummy", "model_args": ""}}, "dummy"),
    ]
    for n, (results, name) in enumerate(cases):
        f = write_run(tmp_path / str(n), [line(0, acc=1)], results=results)
        assert lm_eval.model_name(f, "2026-01-01T00-00-00.000001") == name


def test_samples_without_results_is_one_line_naming_the_file(tmp_path):
    f = write_run(tmp_path / "m", [line(0, acc=1)])
    with pytest.raises(InputError, match=r"samples_t_.*\.jsonl: no results_\*\.json"):
        read_paths([f])


def test_a_long_first_line_is_still_recognised(tmp_path):
    f = write_run(
        tmp_path / "m",
        [{**line(0, acc=1), "doc": {"q": "x" * 100_000}}],
        results={"model_name": "m"},
    )
    assert claim(f) is lm_eval
    static, _, _ = read_paths([f])
    assert list(static["item"]) == ["lm_eval::t_0"]


def test_our_own_jsonl_is_not_claimed(tmp_path):
    f = tmp_path / "s.jsonl"
    f.write_text(
        json.dumps({"model_label": "m", "dataset": "d", "sample_index": 0, "correct": 1}) + "\n"
    )
    assert claim(f) is None
