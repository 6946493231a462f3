"""Write the harness fixtures of ``tests/fixtures/harness/`` with the real tools.

The evaluation harnesses are not dependencies of bayes-dualeval: run this script in a
separate virtual environment that has them, offline::

    python -m venv /tmp/harness-venv
    /tmp/harness-venv/bin/pip install inspect-ai
    /tmp/harness-venv/bin/python scripts/harness_fixtures.py [--out tests/fixtures/harness]

**inspect_ai** (``inspect/``): one task, ``arith``, of six questions with integer ids
1-6, two epochs and two scorers (``match`` and ``includes``), run on three models of
inspect_ai's ``mockllm`` provider (``mockllm/model-a``, ``-b``, ``-c``). Each model answers
from a fixed key (:data:`ANSWERS`), through ``custom_outputs``, so the correct answers
are known: model-a gets 6 of 6 right, model-b 4 of 6 and model-c 2 of 6, in both epochs
and by both scorers. (mockllm estimates token counts with tiktoken, which downloads its
encoding on first use: offline, the script counts characters instead.) A fourth log
(``inspect-failed/``) is an eval whose solver raises: its status is ``error``.

**lm-evaluation-harness** is not run here (it needs PyTorch and ``datasets``, which this
project does not install even on the side): its fixtures are written by
``tests/test_harness_lm_eval.py``'s helpers from the documented ``--log_samples`` layout,
and the AlpacaEval, Arena-Hard and MT-Bench fixtures from their published layouts.
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
        task = Task(name="arith", dataset=dataset[:2], solver=fail(), scorer=match())
        eval(
            task,
            model=get_model("mockllm/model-d", custom_outputs=_outputs("model-a")),
            log_dir=str(logs / "failed"),
            display="none",
            fail_on_error=True,
        )
        for sub, target in (("ok", "inspect"), ("failed", "inspect-failed")):
            dest = out / target
            shutil.rmtree(dest, ignore_errors=True)
            dest.mkdir(parents=True)
            for n, log in enumerate(sorted((logs / sub).glob("*.eval"))):
                # a stable name: inspect names logs by time and a random id
                shutil.copy(log, dest / f"{target}-{n}.eval")


if __name__ == "__main__":
    main()
