"""Where a test suite's XLA compilation goes, from ``suite_compilations.py``'s records.

That script (``scripts/tools/``) runs pytest with a plugin that writes one JSON line per
compilation and per worker (``compilations-<worker>.jsonl``: ``test``, ``program``,
``seconds``, ``shapes``); :func:`read` gathers them and :func:`report` prints where the
seconds went.
"""

from __future__ import annotations

import collections
import glob
import json
from pathlib import Path

#: Programs compiled in less than this many seconds count as small (mostly primitives
#: compiled one by one by eager evaluation).
SMALL = 0.5


def read(where: Path) -> list[dict]:
    """Every recorded compilation of a run (all workers), with ``file`` added.

    Parameters
    ----------
    where : Path
        The folder of the ``compilations-*.jsonl`` records.

    Returns
    -------
    list of dict
        One per compilation, ``file`` the test file (or ``(between tests)``).
    """
    rows = []
    for path in sorted(glob.glob(str(Path(where) / "compilations-*.jsonl"))):
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                row = json.loads(line)
                row["file"] = (row["test"] or "(between tests)").split("::")[0]
                rows.append(row)
    return rows


def _table(rows: list[dict], key: str, top: int, title: str) -> str:
    """Seconds and count of compilations grouped by ``key``, largest first."""
    total = collections.defaultdict(lambda: [0.0, 0])
    for row in rows:
        total[row[key] or "(between tests)"][0] += row["seconds"]
        total[row[key] or "(between tests)"][1] += 1
    lines = [title, f"{'seconds':>9} {'count':>6}  {key}"]
    for name, (seconds, count) in sorted(total.items(), key=lambda kv: -kv[1][0])[:top]:
        lines.append(f"{seconds:9.1f} {count:6d}  {name}")
    return "\n".join(lines)


def report(rows: list[dict], top: int = 20) -> str:
    """The printed summary: totals, then tables by program, file and test.

    Parameters
    ----------
    rows : list of dict
        From :func:`read`.
    top : int
        Rows of each table.

    Returns
    -------
    str
    """
    if not rows:
        return "no compilations recorded (was the plugin loaded, and did JAX log them?)"
    big = [r for r in rows if r["seconds"] >= SMALL]
    small = [r for r in rows if r["seconds"] < SMALL]
    signatures = {(r["program"], r["shapes"]) for r in big}
    parts = [
        f"{len(rows)} compilations, {sum(r['seconds'] for r in rows):.0f} s of XLA; "
        f"{len(big)} of {SMALL} s or more ({sum(r['seconds'] for r in big):.0f} s, "
        f"{len(signatures)} distinct programs and shapes), {len(small)} smaller "
        f"({sum(r['seconds'] for r in small):.0f} s)",
        _table(big, "program", top, f"\nprograms of {SMALL} s or more:"),
        _table(rows, "file", top, "\nby test file:"),
        _table(rows, "test", top, "\nby test:"),
        _table(small, "test", top, f"\nsmall programs (under {SMALL} s) by test:"),
    ]
    return "\n".join(parts)
