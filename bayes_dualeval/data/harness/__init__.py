"""Readers of what evaluation harnesses write, recognised by content.

Each module here knows one harness's files and nothing else: its ``NAME``, the file
``SUFFIXES`` it may claim, ``claims(path, head)`` (whether a file is its own, from the file's
first bytes and name) and ``rows(path, skip)``, which yields ``(line, row)`` with ``row`` in
the package's own row format (:mod:`bayes_dualeval.data.readers`), so the shared
``parse_rows`` checks apply unchanged. Rows also carry ``sample`` (a repeated answer's id),
``judge`` (the scorer, annotator or judge model) and ``domain`` where the harness knows
them. ``skip(reason, where)`` counts a record or file left out.

A harness's items are named after the harness, not the folder: the source of its item ids
is the harness's ``NAME`` (``inspect_ai::arith_3``), because these tools write one folder
per model and the same question must be one item across them.

:data:`HARNESSES` is the one registry that discovery (:func:`claim`) asks, in order.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from bayes_dualeval.data.harness import (
    alpaca_eval,
    arena_hard,
    helm,
    inspect_ai,
    lm_eval,
    mt_bench,
)
from bayes_dualeval.data.harness.limits import head

#: Every harness reader, asked in this order.
HARNESSES = (inspect_ai, lm_eval, helm, alpaca_eval, arena_hard, mt_bench)
#: The suffixes some harness may claim (``.jsonl`` files no harness claims are ours).
SUFFIXES = tuple(sorted({s for h in HARNESSES for s in h.SUFFIXES}))


@dataclass
class HarnessTally:
    """What was read from one harness's files, for ``bayes-dualeval check``.

    Attributes
    ----------
    files : int
        Files read.
    rows : int
        Records yielded (one per model, item, sample and judge).
    models, tasks, samples, judges : set of str
        The distinct models, tasks (benchmarks), sample ids (epochs, repeats, runs) and
        judges (scorers, annotators, judge models) met.
    skipped : Counter
        Records or files left out, per reason.
    examples : dict
        The first file (and record) left out for each reason.
    """

    files: int = 0
    rows: int = 0
    models: set = field(default_factory=set)
    tasks: set = field(default_factory=set)
    samples: set = field(default_factory=set)
    judges: set = field(default_factory=set)
    skipped: Counter = field(default_factory=Counter)
    examples: dict = field(default_factory=dict)

    def lines(self, name: str) -> list[str]:
        """Human-readable lines describing the tally (``check`` prints them)."""

        def few(values) -> str:
            shown = sorted(map(str, values))
            more = f", ... ({len(shown)} in all)" if len(shown) > 6 else ""
            return ", ".join(shown[:6]) + more

        out = [f"{name}: {self.files} files, {self.rows} records"]
        for label, values in (
            ("models", self.models),
            ("tasks", self.tasks),
            ("samples", self.samples),
            ("judges", self.judges),
        ):
            if values:
                out.append(f"  {label} ({len(values)}): {few(values)}")
        for reason, n in self.skipped.items():
            out.append(f"  skipped {n}: {reason} (first: {self.examples[reason]})")
        return out


def claim(path: Path):
    """The harness module whose file ``path`` is, or None.

    Only harnesses that take the file's suffix are asked; each decides from the file's
    first 64 KiB and its name.
    """
    suffix = path.suffix.lower()
    candidates = [h for h in HARNESSES if suffix in h.SUFFIXES]
    if not candidates:
        return None
    start = head(path)
    return next((h for h in candidates if h.claims(path, start)), None)


def read(harness, path: Path, report):
    """Yield the rows of one harness file, tallying them in ``report.harnesses``.

    Parameters
    ----------
    harness : module
        One of :data:`HARNESSES`.
    path : Path
        A file the harness claims.
    report : ReadReport
        Its ``harnesses[harness.NAME]`` tally and its ``skipped`` counts are updated.
    """
    tally = report.harnesses.setdefault(harness.NAME, HarnessTally())
    tally.files += 1

    def skip(reason: str, where: str) -> None:
        tally.skipped[reason] += 1
        tally.examples.setdefault(reason, where)
        report.skipped[f"{harness.NAME} {reason}"] += 1

    for line, row in harness.rows(path, skip):
        tally.rows += 1
        tally.models.add(row["model_label"])
        tally.tasks.add(row.get("dataset") or row.get("task"))
        for name, seen in (("sample", tally.samples), ("judge", tally.judges)):
            if row.get(name) not in (None, ""):
                seen.add(row[name])
        yield line, row
