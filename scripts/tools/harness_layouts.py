"""Write the hand-made harness fixtures of ``tests/fixtures/harness/`` (no tool needed).

AlpacaEval, Arena-Hard, MT-Bench and HELM are not run to make the test fixtures: their
judges are paid models, and HELM needs its model servers. These fixtures follow each
tool's published file layout with a few records, chosen so the tests know every value:

* ``alpaca_eval/results/<model>/weighted_alpaca_eval_gpt4_turbo/annotations.json``: four
  instructions, two models against the baseline ``gpt4_1106_preview``, one failed
  annotation (``preference`` null);
* ``arena_hard/data/arena-hard-v0.1/model_judgment/gpt-4-1106-preview/<model>.jsonl``:
  three questions of two games each, one game with no verdict and one with an unknown
  verdict (``A>>>B``), and the bench's ``question.jsonl``;
* ``mt_bench/data/mt_bench/model_judgment/gpt-4_single.jsonl``: two questions of two
  turns, two models, one grade of -1, and ``question.jsonl`` with the categories;
* ``helm/benchmark_output/runs/v1/<run>/``: one MMLU scenario for two models, three
  instances, and one perturbed instance per run.

Usage::

    python scripts/tools/harness_layouts.py [--out tests/fixtures/harness]

The inspect_ai and lm-evaluation-harness fixtures are written by the tools themselves:
``scripts/tools/harness_fixtures.py``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

INSTRUCTIONS = [
    ("helpful_base", "Write a haiku about rain."),
    ("koala", "Explain photosynthesis briefly."),
    ("oasst", "Name three prime numbers."),
    ("vicuna", "Give a tip for better sleep."),
]
#: AlpacaEval preferences per model (1 baseline wins, 2 model wins, None failed).
PREFERENCES = {"model-p": [1.9, 1.0, 2.0, 1.5], "model-q": [1.25, None, 1.0, 1.75]}
#: Arena-Hard verdicts per model and question (first game: baseline A, model B).
GAMES = {
    "model-p": [["B>>A", "A>>B"], ["B>A", "A=B"], ["A>B", "B>A"]],
    "model-q": [["A>>B", "B>>A"], ["A=B", None], ["A>>>B", "B>A"]],
}
#: MT-Bench grades per model: question 81 turns 1-2, question 101 turns 1-2.
GRADES = {"model-p": [9, 8, 7, -1], "model-q": [4, 5, 6, 3]}
#: HELM exact_match of instances id10-id12 per model.
HELM_RIGHT = {"openai/gpt2": [1, 0, 0], "meta/llama-7b": [1, 1, 0]}


def _jsonl(path: Path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _json(path: Path, doc) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2))


def alpaca_eval(out: Path) -> None:
    for model, prefs in PREFERENCES.items():
        records = [
            {
                "dataset": subset,
                "instruction": text,
                "output_1": "Baseline answer.",
                "generator_1": "gpt4_1106_preview",
                "output_2": f"Answer of {model}.",
                "generator_2": model,
                "annotator": "weighted_alpaca_eval_gpt4_turbo",
                "preference": p,
                "time_per_example": 0.8,
                "price_per_example": 0.01,
            }
            for (subset, text), p in zip(INSTRUCTIONS, prefs, strict=True)
        ]
        folder = out / "alpaca_eval" / "results" / model / "weighted_alpaca_eval_gpt4_turbo"
        _json(folder / "annotations.json", records)


def arena_hard(out: Path) -> None:
    bench = out / "arena_hard" / "data" / "arena-hard-v0.1"
    judge = "gpt-4-1106-preview"
    for model, games in GAMES.items():
        _jsonl(
            bench / "model_judgment" / judge / f"{model}.jsonl",
            (
                {
                    "question_id": f"q{q}",
                    "model": model,
                    "judge": judge,
                    "games": [{"user_prompt": "...", "judgment": "...", "score": g} for g in pair],
                }
                for q, pair in enumerate(games)
            ),
        )
    _jsonl(
        bench / "question.jsonl",
        (
            {
                "question_id": f"q{i}",
                "category": "arena-hard-v0.1",
                "cluster": "c",
                "turns": [{"content": f"Question {i}?"}],
            }
            for i in range(3)
        ),
    )


def mt_bench(out: Path) -> None:
    data = out / "mt_bench" / "data" / "mt_bench"
    _jsonl(
        data / "question.jsonl",
        [
            {"question_id": 81, "category": "writing", "turns": ["Write a poem.", "Shorter."]},
            {"question_id": 101, "category": "reasoning", "turns": ["A riddle.", "Why?"]},
        ],
    )
    lines = []
    for model, grades in GRADES.items():
        cells = [(q, t) for q in (81, 101) for t in (1, 2)]
        for (q, turn), grade in zip(cells, grades, strict=True):
            prompt = "single-v1" if turn == 1 else "single-v1-multi-turn"
            lines.append(
                {
                    "question_id": q,
                    "model": model,
                    "judge": ["gpt-4", prompt],
                    "user_prompt": "...",
                    "judgment": "... Rating: [[x]]",
                    "score": grade,
                    "turn": turn,
                    "tstamp": 1700000000.0,
                }
            )
    _jsonl(data / "model_judgment" / "gpt-4_single.jsonl", lines)


def _stat(name, mean, perturbation=None):
    key = {"name": name, "split": "test"}
    if perturbation:
        key["perturbation"] = perturbation
    return {
        "name": key,
        "count": 1,
        "sum": mean,
        "sum_squared": mean * mean,
        "min": mean,
        "max": mean,
        "mean": mean,
        "variance": 0.0,
        "stddev": 0.0,
    }


def helm(out: Path) -> None:
    typo = {"name": "typos", "robustness": True, "fairness": False, "prob": 0.1}
    for model, right in HELM_RIGHT.items():
        name = "mmlu:subject=anatomy,method=multiple_choice_joint,model=" + model.replace("/", "_")
        run = out / "helm" / "benchmark_output" / "runs" / "v1" / name
        _json(
            run / "run_spec.json",
            {
                "name": name,
                "scenario_spec": {
                    "class_name": "helm.benchmark.scenarios.mmlu_scenario.MMLUScenario",
                    "args": {"subject": "anatomy"},
                },
                "adapter_spec": {
                    "method": "multiple_choice_joint",
                    "model_deployment": model,
                    "model": model,
                    "max_train_instances": 5,
                    "num_outputs": 1,
                },
                "metric_specs": [
                    {
                        "class_name": "helm.benchmark.metrics.basic_metrics.BasicMetric",
                        "args": {"names": ["exact_match", "quasi_exact_match"]},
                    }
                ],
                "groups": ["mmlu"],
            },
        )
        records = [
            {
                "instance_id": f"id{10 + i}",
                "train_trial_index": 0,
                "stats": [
                    _stat("num_references", 4.0),
                    _stat("exact_match", float(r)),
                    _stat("quasi_exact_match", float(r)),
                ],
            }
            for i, r in enumerate(right)
        ]
        records.append(
            {
                "instance_id": "id10",
                "train_trial_index": 0,
                "perturbation": typo,
                "stats": [_stat("exact_match", 0.0, typo)],
            }
        )
        _json(run / "per_instance_stats.json", records)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="tests/fixtures/harness")
    out = Path(parser.parse_args().out)
    for write in (alpaca_eval, arena_hard, mt_bench, helm):
        write(out)


if __name__ == "__main__":
    main()
