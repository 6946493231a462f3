"""AlpacaEval (tatsu-lab) ``annotations.json``: a judge's preference against a baseline.

``alpaca_eval --model_outputs outputs.json --annotators_config weighted_alpaca_eval_gpt4_turbo``
writes ``annotations.json`` beside its leaderboard (the published results keep them as
``results/<model>/<annotator>/annotations.json``): a JSON list with one record per
instruction, ``instruction``, ``dataset`` (the subset), ``output_1``/``generator_1`` (the
baseline), ``output_2``/``generator_2`` (the model), ``annotator`` and ``preference``. A
file is recognised as a JSON list whose first record names ``generator_1`` or
``generator_2``; records are read one at a time (:func:`~.limits.json_array`). Fields:

* model: ``generator_2`` (the baseline ``generator_1`` is the same in every record and
  is not a model of the dataset);
* item: arena prompt ``alpaca_eval::ae_<hash>``, the first 12 hex digits of the BLAKE2b
  hash of the instruction text, so that one instruction is one prompt across models and
  files (the annotations carry no index of the evaluation set);
* reward: the probability that the model's output wins, ``preference - 1``: AlpacaEval
  encodes 1 for a baseline win, 2 for a model win, 1.5 (or 0) for a draw and a number in
  [1, 2] for a weighted judge; so 0, 1, 0.5, and the probability. A record with no
  preference (a failed annotation) or one outside [1, 2] is skipped and counted;
* judge: ``annotator``; subset: ``dataset`` (kept as an extra field, as in the converted
  AlpacaEval data of ``../shared/data/real``).
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

from bayes_dualeval.core.errors import InputError
from bayes_dualeval.data.harness import limits

NAME = "alpaca_eval"
SUFFIXES = (".json",)


def claims(path: Path, head: bytes) -> bool:
    """A JSON list whose first record names ``generator_1`` or ``generator_2``."""
    return head.lstrip().startswith(b"[") and (
        b'"generator_1"' in head or b'"generator_2"' in head
    )


def prompt_id(instruction: str) -> str:
    """The prompt id of an instruction: ``ae_`` and 12 hex digits of its BLAKE2b hash."""
    return "ae_" + hashlib.blake2b(instruction.encode("utf-8"), digest_size=6).hexdigest()


def reward(preference) -> float | None:
    """AlpacaEval's ``preference`` as the model's win probability, or None."""
    if isinstance(preference, bool) or not isinstance(preference, (int, float)):
        return None
    if preference == 0:  # AlpacaEval 1's draw
        return 0.5
    if not math.isfinite(preference) or not 1 <= preference <= 2:
        return None
    return float(preference) - 1.0


def rows(path: Path, skip):
    """Yield ``(record, row)`` per annotated instruction."""
    for n, rec in limits.json_array(path):
        if not isinstance(rec, dict):
            raise InputError(f"{path}: record {n}: expected a JSON object")
        model, instruction = rec.get("generator_2"), rec.get("instruction")
        if not isinstance(model, str) or not isinstance(instruction, str):
            raise InputError(f"{path}: record {n}: no generator_2 or instruction")
        value = reward(rec.get("preference"))
        if value is None:
            what = "without a preference" if rec.get("preference") is None else "out of range"
            skip(f"annotation {what}", f"{path}: record {n}")
            continue
        row = {"model_label": model, "item_id": prompt_id(instruction), "reward": value}
        if isinstance(rec.get("annotator"), str):
            row["judge"] = rec["annotator"]
        if isinstance(rec.get("dataset"), str):
            row["subset"] = rec["dataset"]
        row["task"] = "alpaca_eval"
        yield n, row
