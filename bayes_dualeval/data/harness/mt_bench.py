"""MT-Bench (FastChat ``llm_judge``) single-answer grades.

``gen_judgment.py --mode single`` writes ``data/mt_bench/model_judgment/<judge>_single.jsonl``:
per model, question and turn one line with ``question_id``, ``model``, ``judge`` (a
list: the judge model and its prompt), ``turn`` and ``score`` (the grade, 1-10; -1 when the
judgment held no grade). A file is recognised by a first line with ``question_id``,
``model``, ``judge``, ``turn`` and ``score``. Fields:

* model: ``model``; judge: the judge model (``judge[0]``, ``gpt-4``);
* item: arena prompt ``mt_bench::mtbench_q<question_id>_t<turn>`` (the question id
  written with three digits when it is a number: ``mtbench_q081_t1``);
* reward: ``score``; a grade of -1 (unparseable) is skipped and counted;
* domain: the question's ``category`` from ``question.jsonl`` two folders up
  (``data/mt_bench/question.jsonl``), when it is there.

The other files of this layout, which Arena-Hard shares (``question.jsonl``,
``model_answer/*.jsonl``, ``reference_answer/*.jsonl``: lines with ``question_id`` or
``uid`` and ``turns``, ``prompt``, ``choices`` or ``messages``), are claimed too and give
no records, so that a whole ``data/`` folder can be read.
"""

from __future__ import annotations

from pathlib import Path

from bayes_dualeval.core.errors import InputError
from bayes_dualeval.data.harness import limits

NAME = "mt_bench"
SUFFIXES = (".jsonl",)
_KEYS = ("question_id", "model", "judge", "turn", "score")
_SIDECAR = ("turns", "prompt", "choices", "messages")


def _sidecar(row) -> bool:
    """A question or answer line of the FastChat / Arena-Hard layout (no grade)."""
    return (
        isinstance(row, dict)
        and ("question_id" in row or "uid" in row)
        and any(k in row for k in _SIDECAR)
        and "score" not in row
        and "games" not in row
    )


def claims(path: Path, head: bytes) -> bool:
    """A JSONL file whose first line is a single-answer grade, or a question or answer."""
    row = limits.first_json_line(head)
    return isinstance(row, dict) and (all(k in row for k in _KEYS) or _sidecar(row))


def _categories(path: Path) -> dict:
    questions = path.parent.parent / "question.jsonl"
    if not questions.is_file():
        return {}
    return {
        q.get("question_id"): q.get("category")
        for _, q in limits.json_lines(questions)
        if isinstance(q, dict)
    }


def prompt_id(question_id, turn) -> str:
    """``mtbench_q<question_id>_t<turn>``, a numeric id written with three digits."""
    qid = f"{question_id:03d}" if isinstance(question_id, int) else str(question_id)
    return f"mtbench_q{qid}_t{turn}"


def rows(path: Path, skip):
    """Yield ``(line, row)`` per graded answer."""
    if _sidecar(limits.first_json_line(limits.head(path))):
        return
    categories = _categories(path)
    for n, line in limits.json_lines(path):
        if not isinstance(line, dict) or not all(k in line for k in _KEYS):
            raise InputError(f"{path}:{n}: expected a single-answer grade ({', '.join(_KEYS)})")
        if line["score"] == -1:
            skip("grade -1 (no grade in the judgment)", f"{path}:{n}")
            continue
        judge = line["judge"]
        row = {
            "model_label": line["model"],
            "item_id": prompt_id(line["question_id"], line["turn"]),
            "reward": line["score"],
            "judge": judge[0] if isinstance(judge, list) and judge else judge,
            "task": "mt_bench",
        }
        category = categories.get(line["question_id"])
        if isinstance(category, str) and category:
            row["domain"] = category
        yield n, row
