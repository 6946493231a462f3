"""A harness's score as a correct/incorrect label, and sample ids as question indices."""

from __future__ import annotations

import hashlib
import math

#: A numeric score in [0, 1] at or above this is counted correct.
THRESHOLD = 0.5
#: Letter and word grades (inspect_ai's ``C``/``I``/``P``/``N`` and their words).
GRADES = {
    "c": 1.0,
    "correct": 1.0,
    "i": 0.0,
    "incorrect": 0.0,
    "p": 0.5,
    "partial": 0.5,
    "n": 0.0,
    "noanswer": 0.0,
}


def to_label(value) -> int | None:
    """A score as 1 (correct) or 0, or None when it is not a label.

    Booleans count as they are; ``C``/``I`` (inspect_ai's CORRECT and INCORRECT),
    ``correct``/``incorrect``, ``P`` (partial, 0.5) and ``N`` (no answer, 0) as their
    values; a number in [0, 1] (or text holding one) is correct at or above
    :data:`THRESHOLD`. Anything else (a number outside [0, 1], other text) is None.
    """
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, str):
        text = value.strip().lower()
        if text in GRADES:
            value = GRADES[text]
        else:
            try:
                value = float(text)
            except ValueError:
                return None
    if isinstance(value, (int, float)) and math.isfinite(value) and 0 <= value <= 1:
        return int(value >= THRESHOLD)
    return None


def question_index(sample_id) -> int:
    """A sample id as the integer ``sample_index`` of a static row.

    Integer ids (and text holding one) are kept; any other id becomes a stable 48-bit
    number from its BLAKE2 hash, the same in every file, so that one question of two logs
    is one item.
    """
    if isinstance(sample_id, int) and not isinstance(sample_id, bool):
        return sample_id
    text = str(sample_id).strip()
    if text.lstrip("-").isdigit():
        return int(text)
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=6).digest(), "big")
