"""Arena-Hard (lmarena ``arena-hard-auto``) judgments: verdict games against a baseline.

``gen_judgment.py`` writes ``data/<bench>/model_judgment/<judge>/<model>.jsonl``: per
question one line with ``question_id`` (``uid`` in v2), ``model`` and ``games``, each game
a judgment whose ``score`` is a verdict such as ``A>>B``. The first game shows the
baseline as A and the model as B; the second swaps them, so position bias cancels. A file
is recognised by a first line with ``games`` and ``question_id`` or ``uid``. Fields:

* model: the line's ``model``; judge: the judgment folder's name (the judge model);
* item: arena prompt ``arena_hard::<question_id>``; domain: the line's ``category``;
* reward: the mean over games of the model's score, from :data:`SCORES` (the verdict
  read from the model's side: a strong win 1, a win 0.75, a tie 0.5, a loss 0.25, a
  strong loss 0). A game with no verdict or an unknown one is skipped and counted
  (naming the value); a question with no scored game is skipped.
"""

from __future__ import annotations

from pathlib import Path

from bayes_dualeval.core.errors import InputError
from bayes_dualeval.data.harness import limits

NAME = "arena_hard"
SUFFIXES = (".jsonl",)
#: The score of each verdict for the answer in position B (the model in the first game).
SCORES = {
    "A>>B": 0.0,
    "A>B": 0.25,
    "A=B": 0.5,
    "B=A": 0.5,
    "B>A": 0.75,
    "B>>A": 1.0,
}


def claims(path: Path, head: bytes) -> bool:
    """A JSONL file whose first line has ``games`` and ``question_id`` or ``uid``."""
    row = limits.first_json_line(head)
    if not isinstance(row, dict):
        return b'"games"' in head and (b'"question_id"' in head or b'"uid"' in head)
    return isinstance(row.get("games"), list) and ("question_id" in row or "uid" in row)


def model_score(verdict, game: int) -> float | None:
    """The model's score of one game's verdict (None for an unknown verdict)."""
    if not isinstance(verdict, str) or verdict.strip() not in SCORES:
        return None
    score = SCORES[verdict.strip()]
    return score if game % 2 == 0 else 1.0 - score


def rows(path: Path, skip):
    """Yield ``(line, row)`` per judged question."""
    judge = path.parent.name
    parts = path.parts
    task = parts[-4] if len(parts) >= 4 and parts[-3] == "model_judgment" else NAME
    for n, line in limits.json_lines(path):
        if not isinstance(line, dict) or not isinstance(line.get("games"), list):
            raise InputError(f"{path}:{n}: expected a judgment with games")
        qid = line.get("question_id", line.get("uid"))
        scores = []
        for g, game in enumerate(line["games"]):
            verdict = game.get("score") if isinstance(game, dict) else None
            score = model_score(verdict, g)
            if score is None:
                skip(f"game with verdict {verdict!r}", f"{path}:{n}")
            else:
                scores.append(score)
        if not scores:
            skip("question with no scored game", f"{path}:{n}")
            continue
        row = {
            "model_label": line.get("model", path.stem),
            "item_id": qid,
            "reward": sum(scores) / len(scores),
            "judge": judge,
            "task": task,
        }
        if isinstance(line.get("category"), str) and line["category"]:
            row["domain"] = line["category"]
        yield n, row
