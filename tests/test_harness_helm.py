"""HELM run folders: per_instance_stats.json read with the model of run_spec.json."""

import json
from pathlib import Path

import pytest

from bayes_dualeval.core.errors import InputError
from bayes_dualeval.data.harness import claim, helm
from bayes_dualeval.data.readers import read_paths

RUNS = Path(__file__).parent / "fixtures" / "harness" / "helm"
SCENARIO = "mmlu:subject=anatomy,method=multiple_choice_joint"


def test_runs_read_as_static_labels_per_model_and_instance():
    static, arena, report = read_paths([RUNS])
    assert len(arena) == 0
    got = {(m, i): c for m, i, c in static[["model", "item", "correct"]].itertuples(index=False)}
    assert got == {
        ("openai/gpt2", f"helm::{SCENARIO}_10"): 1,
        ("openai/gpt2", f"helm::{SCENARIO}_11"): 0,
        ("openai/gpt2", f"helm::{SCENARIO}_12"): 0,
        ("meta/llama-7b", f"helm::{SCENARIO}_10"): 1,
        ("meta/llama-7b", f"helm::{SCENARIO}_11"): 1,
        ("meta/llama-7b", f"helm::{SCENARIO}_12"): 0,
    }
    tally = report.harnesses["helm"]
    assert tally.files == 2 and tally.judges == {"exact_match"} and tally.samples == {0}
    assert dict(tally.skipped) == {"perturbed instance": 2}
    assert all(f.endswith("per_instance_stats.json") for f in report.files)  # not run_spec


def write_run(tmp_path, records, spec=True, name="bench:x=1,model=org_m"):
    d = tmp_path / name
    d.mkdir(parents=True)
    if spec:
        (d / "run_spec.json").write_text(
            json.dumps({"name": name, "adapter_spec": {"model": "org/m"}})
        )
    f = d / "per_instance_stats.json"
    f.write_text(json.dumps(records))
    return f


def rec(iid, trial=0, **means):
    stats = [{"name": {"name": k, "split": "test"}, "mean": v} for k, v in means.items()]
    return {"instance_id": iid, "train_trial_index": trial, "stats": stats}


def test_metric_order_trials_ids_and_skips(tmp_path):
    f = write_run(
        tmp_path,
        [
            rec("id3", quasi_exact_match=1.0, exact_match=0.0),  # exact_match first
            rec("id3", trial=1, quasi_exact_match=0.6),
            rec("q-x", exact_match=1.0),  # not id<number>: a stable number
            rec("id4", bleu_4=0.3),
            rec("id5", exact_match=2.0),
        ],
    )
    assert claim(f) is helm
    skipped = []
    rows = [r for _, r in helm.rows(f, lambda why, where: skipped.append(why))]
    assert [
        (r["dataset"], r["sample_index"], r["correct"], r["sample"], r["judge"]) for r in rows
    ] == [
        ("bench:x=1", 3, 0, 0, "exact_match"),
        ("bench:x=1", 3, 1, 1, "quasi_exact_match"),
        ("bench:x=1", helm.question_index("q-x"), 1, 0, "exact_match"),
    ]
    assert skipped == ["instance without a label metric", "exact_match value not a label"]


def test_stats_without_run_spec_is_one_line_naming_the_file(tmp_path):
    f = write_run(tmp_path, [rec("id1", exact_match=1.0)], spec=False)
    with pytest.raises(InputError, match=r"per_instance_stats\.json: no run_spec\.json beside it"):
        read_paths([f])
