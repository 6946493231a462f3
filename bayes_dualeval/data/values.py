"""One field of an input row, checked and converted: the rules every reader shares.

The JSONL and CSV readers (:mod:`bayes_dualeval.data.readers`) and the Parquet reader
(:mod:`bayes_dualeval.data.parquet`) accept the same values through these functions; each
raises ``ValueError`` with a message naming the field, which the readers turn into an
``InputError`` with the file and line (or skip, with ``--skip-invalid``).
"""

from __future__ import annotations

import math
import re

_TRUE = {"1", "1.0", "true"}
_FALSE = {"0", "0.0", "false"}
_INTEGER = re.compile(r"[+-]?\d+(\.0*)?")  # "7" or "7.0" (pandas writes NaN-holed ints so)


def text_field(value, name: str) -> str:
    """A label field (text, or an integer written as text); ``ValueError`` names ``name``."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError(f"{name} must be a string, got {value!r}")
    text = str(value).strip()
    if not text:
        raise ValueError(f"{name} is empty")
    return text


def correct_field(value) -> int:
    """``correct`` as 0 or 1: a boolean, 0 or 1, or true/false text; else ``ValueError``."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value in (0, 1):
            return int(value)
    elif isinstance(value, str):
        text = value.strip().lower()
        if text in _TRUE:
            return 1
        if text in _FALSE:
            return 0
    raise ValueError(f"correct must be true/false or 0/1, got {value!r}")


def index_field(value) -> int:
    """``sample_index`` as an integer (``7``, ``7.0``, ``"7"``); else ``ValueError``."""
    if isinstance(value, bool):
        raise ValueError(f"sample_index must be an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, str) and _INTEGER.fullmatch(value.strip()):
        return int(value.strip().split(".")[0])
    raise ValueError(f"sample_index must be an integer, got {value!r}")


def reward_field(value) -> float:
    """``reward`` as a finite float (a number or numeric text); else ``ValueError``."""
    if isinstance(value, bool):
        raise ValueError(f"reward must be a number, got {value!r}")
    if isinstance(value, (int, float)):
        try:
            out = float(value)
        except OverflowError:  # an int too large for a float
            raise ValueError(f"reward must be finite, got {value!r}") from None
    elif isinstance(value, str):
        try:
            out = float(value.strip())
        except ValueError:
            raise ValueError(f"reward must be a number, got {value!r}") from None
    else:
        raise ValueError(f"reward must be a number, got {value!r}")
    if not math.isfinite(out):
        raise ValueError(f"reward must be finite, got {value!r}")
    return out


def count_field(value, name: str) -> int:
    """A count (``n_correct``, ``n_samples``): a non-negative integer; else ``ValueError``."""
    if isinstance(value, bool):
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    out = None
    if isinstance(value, int):
        out = value
    elif isinstance(value, float) and math.isfinite(value) and value.is_integer():
        out = int(value)
    elif isinstance(value, str) and _INTEGER.fullmatch(value.strip()):
        out = int(value.strip().split(".")[0])
    if out is None or out < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    return out


def counts_fields(n_correct, n_samples) -> tuple[int, int]:
    """An aggregated cell ``(n_correct, n_samples)``, with ``0 <= n_correct <= n_samples >= 1``."""
    k, n = count_field(n_correct, "n_correct"), count_field(n_samples, "n_samples")
    if n < 1:
        raise ValueError(f"n_samples must be at least 1, got {n_samples!r}")
    if k > n:
        raise ValueError(f"n_correct must be at most n_samples, got {k} of {n}")
    return k, n


def sample_field(value) -> str:
    """The id of a repeated answer (``sample``, ``epoch``, ``repeat``, ``seed``), as text."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    return text_field(value, "sample")
