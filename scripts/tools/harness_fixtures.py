"""Write the harness fixtures of ``tests/fixtures/harness/`` with the real tools.

The evaluation harnesses are not dependencies of bayes-dualeval: run this script in a
separate virtual environment that has them, offline::

    python -m venv /tmp/harness-venv
    /tmp/harness-venv/bin/pip install inspect-ai lm-eval
    /tmp/harness-venv/bin/python scripts/tools/harness_fixtures.py [--out tests/fixtures/harness]

**inspect_ai** (``inspect/``): one task, ``arith``, of six questions with integer ids
1-6, two epochs and two scorers (``match`` and ``includes``), run on three models of
inspect_ai's ``mockllm`` provider (``mockllm/model-a``, ``-b``, ``-c``). Each model answers
from a fixed key (:data:`ANSWERS`), through ``custom_outputs``, so the correct answers
are known: model-a gets 6 of 6 right, model-b 4 of 6 and model-c 2 of 6, in both epochs
and by both scorers. (mockllm estimates token counts with tiktoken, which downloads its
encoding on first use: offline, the script counts characters instead.) A fourth log
(``inspect-failed/``) is an eval whose solver raises: its status is ``error``; a fifth
(``inspect-json/``) is written with ``log_format="json"``: ``mockllm/model-j`` answers the
first three questions with model-b's key (all right), one epoch, one scorer.

**lm-evaluation-harness** (``lm_eval/``): ``pip install lm-eval`` (0.4.13 needs no
PyTorch for this) runs offline on two local tasks over a JSON file of four questions:
``qa_gen`` (generated answers, ``exact_match``, ``repeats: 2`` and two filters,
``take-first`` and ``majority``) and ``qa_mc`` (multiple choice, ``acc``). The model is
lm-eval's ``dummy`` model with fixed answers (:class:`FixedLM`), under two names
(``pretrained=org/model-x`` and ``org/model-y``): model-x answers all four right, model-y
questions 0 and 1 (and, in ``qa_gen``, question 2 in its first repeat only).

The AlpacaEval, Arena-Hard, MT-Bench and HELM fixtures follow their published layouts,
written by ``scripts/tools/harness_layouts.py`` (no tool needed).
"""

from __future__ import annotations

import argparse
import re
import shutil
import tempfile
from pathlib import Path

#: The question of each sample id: ``"<id> + <id>"``; the right answer is ``2 * id``.
QUESTIONS = {i: f"What is {i} + {i}? Answer with the number only." for i in range(1, 7)}
#: Which sample ids each mock model answers correctly (the others it answers ``0``).
ANSWERS = {"model-a": {1, 2, 3, 4, 5, 6}, "model-b": {1, 2, 3, 4}, "model-c": {5, 6}}


def _outputs(name):
    """A ``custom_outputs`` callable: the answer of ``name`` to the question asked."""
    from inspect_ai.model import ModelOutput

    right = ANSWERS[name]

    def answer(messages, tools, tool_choice, config):
        i = int(re.search(r"What is (\d+)", messages[-1].text).group(1))
        return ModelOutput.from_content(
            model=f"mockllm/{name}", content=str(2 * i if i in right else 0)
        )

    return answer


def _offline_token_counts() -> None:
    """Count mockllm's tokens by characters: tiktoken would download its encoding."""
    from inspect_ai.model._providers.mockllm import MockLLM

    async def count_text_tokens(self, text: str) -> int:
        return len(text) // 4 + 1

    MockLLM.count_text_tokens = count_text_tokens


LM_QUESTIONS = [
    {
        "id": i,
        "question": f"What is {i} + {i}?",
        "answer": str(2 * i),
        "choices": [str(2 * i + 1), str(2 * i)],
        "label": 1,
    }
    for i in range(4)
]
#: Which question ids each lm-eval model gets right (model-y: question 2 in repeat 0 only).
LM_RIGHT = {"org/model-x": {0, 1, 2, 3}, "org/model-y": {0, 1}}

TASK_YAML = """task: {task}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
doc_to_text: "Q: {{{{question}}}}\\nA:"
{body}"""
GEN_BODY = """output_type: generate_until
doc_to_target: "{{answer}}"
generation_kwargs:
  until: ["\\n"]
  do_sample: false
repeats: 2
filter_list:
  - name: take-first
    filter:
      - function: take_first
  - name: majority
    filter:
      - function: majority_vote
      - function: take_first
metric_list:
  - metric: exact_match
"""
MC_BODY = """output_type: multiple_choice
doc_to_choice: "{{choices}}"
doc_to_target: label
metric_list:
  - metric: acc
"""


def lm_eval_fixtures(out: Path) -> None:
    """Run lm-eval's dummy model with fixed answers on two local tasks, log samples."""
    import json
    import os
    import sys

    os.environ["HF_DATASETS_OFFLINE"] = "1"
    from lm_eval.__main__ import cli_evaluate
    from lm_eval.api.registry import register_model
    from lm_eval.models.dummy import DummyLM

    @register_model("fixed")
    class FixedLM(DummyLM):
        """lm-eval's dummy model answering from :data:`LM_RIGHT` instead of at random."""

        def __init__(self, pretrained="org/model-x", **kwargs):
            super().__init__()
            self.right = LM_RIGHT[pretrained]
            self.seen = {}

        @classmethod
        def create_from_arg_string(cls, arg_string, additional_config=None):
            return cls(**dict(kv.split("=", 1) for kv in arg_string.split(",") if kv))

        def _right(self, doc, repeat=0):
            return doc["id"] in self.right or (doc["id"] == 2 and repeat == 0)

        def loglikelihood(self, requests, disable_tqdm=False):
            out = []
            for r in requests:
                good = r.idx == r.doc["label"]
                out.append((-1.0 if good == self._right(r.doc, 1) else -2.0, False))
            return out

        def generate_until(self, requests, disable_tqdm=False):
            out = []
            for r in requests:
                k = self.seen[r.doc["id"]] = self.seen.get(r.doc["id"], -1) + 1
                out.append(r.doc["answer"] if self._right(r.doc, k) else "0")
            return out

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        data = tmp / "qa.json"
        data.write_text(json.dumps(LM_QUESTIONS))
        tasks = tmp / "tasks"
        tasks.mkdir()
        for task, body in (("qa_gen", GEN_BODY), ("qa_mc", MC_BODY)):
            text = TASK_YAML.format(task=task, data=data, body=body)
            (tasks / f"{task}.yaml").write_text(text)
        dest = out / "lm_eval"
        shutil.rmtree(dest, ignore_errors=True)
        for name in LM_RIGHT:
            sys.argv = [
                "lm_eval",
                "--model",
                "fixed",
                "--model_args",
                f"pretrained={name}",
                "--include_path",
                str(tasks),
                "--tasks",
                "qa_gen,qa_mc",
                "--output_path",
                str(tmp / "out"),
                "--log_samples",
            ]
            cli_evaluate()
        for f in sorted((tmp / "out").rglob("*.json*")):
            target = dest / f.relative_to(tmp / "out")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(f, target)


def main() -> None:
    """Run the evals and copy their logs under ``--out``."""
    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import get_model
    from inspect_ai.scorer import includes, match
    from inspect_ai.solver import generate, solver

    _offline_token_counts()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="tests/fixtures/harness")
    args = parser.parse_args()
    out = Path(args.out)

    dataset = [
        Sample(id=i, input=q, target=str(2 * i), metadata={"category": "arithmetic"})
        for i, q in QUESTIONS.items()
    ]

    @solver
    def fail():
        async def solve(state, generate):
            raise RuntimeError("this eval fails on purpose")

        return solve

    with tempfile.TemporaryDirectory() as tmp:
        logs = Path(tmp)
        for name in ANSWERS:
            model = get_model(f"mockllm/{name}", custom_outputs=_outputs(name))
            task = Task(
                name="arith", dataset=dataset, solver=generate(), scorer=[match(), includes()]
            )
            eval(task, model=model, epochs=2, log_dir=str(logs / "ok"), display="none")
        task = Task(name="arith", dataset=dataset, solver=generate(), scorer=match())
        eval(
            task,
            model=get_model("mockllm/model-j", custom_outputs=_outputs("model-b")),
            limit=3,
            log_format="json",
            log_dir=str(logs / "json"),
            display="none",
        )
        task = Task(name="arith", dataset=dataset[:2], solver=fail(), scorer=match())
        eval(
            task,
            model=get_model("mockllm/model-d", custom_outputs=_outputs("model-a")),
            log_dir=str(logs / "failed"),
            display="none",
            fail_on_error=True,
        )
        for sub, target in (
            ("ok", "inspect"),
            ("failed", "inspect-failed"),
            ("json", "inspect-json"),
        ):
            dest = out / target
            shutil.rmtree(dest, ignore_errors=True)
            dest.mkdir(parents=True)
            suffix = ".json" if sub == "json" else ".eval"
            for n, log in enumerate(sorted((logs / sub).glob(f"*{suffix}"))):
                # a stable name: inspect names logs by time and a random id
                shutil.copy(log, dest / f"{target}-{n}{suffix}")
    lm_eval_fixtures(out)


if __name__ == "__main__":
    main()
