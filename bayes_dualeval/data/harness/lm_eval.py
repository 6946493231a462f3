"""lm-evaluation-harness (EleutherAI ``lm-eval``) samples logged with ``--log_samples``.

``lm_eval --model hf --model_args pretrained=org/name --tasks t --output_path out
--log_samples`` writes ``out/<model>/samples_<task>_<time>.jsonl`` (one line per document
and filter: ``doc_id``, ``doc``, ``resps``, ``filtered_resps``, ``filter``, the metric
values) beside ``results_<time>.json`` (the run's ``config`` and ``model_name``). A line
is recognised by its ``doc_id`` with ``resps``, ``filtered_resps``, ``arguments`` or
``doc``. Fields:

* model: the results file of the same time (or the folder's only results file):
  ``model_name``, else ``pretrained=`` of ``config.model_args``, else ``config.model``;
* item: static question ``lm_eval::<task>_<doc_id>``, the task from the file name;
* correct: the first of :data:`METRICS` on the line, as a label (a number in [0, 1]
  thresholded at 0.5); a line with none of them is skipped and counted;
* judge: the filter (``strict-match``, ``flexible-extract``, ``none``): each is one
  scoring of the same answers;
* sample: the run's time, so two runs of a task are repeated answers; a metric holding
  one value per repeat (a list) gives one row per repeat (``<time>/<k>``);
* domain: the document's ``domain``, ``category`` or ``subject``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from bayes_dualeval.core.errors import InputError
from bayes_dualeval.data.harness import limits
from bayes_dualeval.data.harness.labels import to_label

NAME = "lm_eval"
SUFFIXES = (".jsonl",)
#: The metrics read as the label, in this order of preference.
METRICS = ("acc", "exact_match", "acc_norm", "pass@1", "pass_at_1", "em")
_FILE = re.compile(r"samples_(?P<task>.+)_(?P<time>\d{4}-\d\d-\d\dT[\d.\-]+)\.jsonl", re.I)
_MARKS = ("resps", "filtered_resps", "arguments", "doc")


def claims(path: Path, head: bytes) -> bool:
    """A JSONL file whose first line has ``doc_id`` and a logged response or document."""
    if b"\n" in head.lstrip() or len(head) < limits.HEAD_BYTES:
        row = limits.first_json_line(head)
        return isinstance(row, dict) and "doc_id" in row and any(k in row for k in _MARKS)
    # a first line longer than the head: look for the fields themselves
    return b'"doc_id"' in head and any(f'"{k}"'.encode() in head for k in _MARKS)


def _task_and_time(path: Path) -> tuple[str, str]:
    m = _FILE.fullmatch(path.name)
    if m:
        return m["task"], m["time"]
    stem = path.stem[len("samples_") :] if path.stem.startswith("samples_") else path.stem
    return stem, ""


def model_name(path: Path, time: str) -> str:
    """The model of a samples file, from the results file beside it.

    Raises
    ------
    InputError
        No results file, several and none of the same time, or one naming no model.
    """
    same = path.parent / f"results_{time}.json"
    found = [same] if time and same.is_file() else sorted(path.parent.glob("results_*.json"))
    if len(found) != 1:
        what = "no results_*.json" if not found else f"{len(found)} results files, none"
        raise InputError(
            f"{path}: {what} of the same time beside it, to name the model "
            "(lm-eval writes results_<time>.json beside the samples when given an output path)"
        )
    doc = limits.json_file(found[0])
    config = doc.get("config") if isinstance(doc, dict) else None
    config = config if isinstance(config, dict) else {}
    args = config.get("model_args")
    if isinstance(args, str):
        args = dict(kv.split("=", 1) for kv in args.split(",") if "=" in kv)
    for name in (
        doc.get("model_name") if isinstance(doc, dict) else None,
        (args or {}).get("pretrained") if isinstance(args, dict) else None,
        (args or {}).get("model") if isinstance(args, dict) else None,
        config.get("model"),
    ):
        if isinstance(name, str) and name.strip():
            return name.strip()
    raise InputError(f"{found[0]}: names no model (model_name, config.model_args, config.model)")


def rows(path: Path, skip):
    """Yield ``(line, row)`` per document, filter and repeat of a samples file."""
    task, time = _task_and_time(path)
    model = model_name(path, time)
    for n, line in limits.json_lines(path):
        if not isinstance(line, dict) or "doc_id" not in line:
            raise InputError(f"{path}:{n}: expected a logged sample with doc_id")
        metric = next((m for m in METRICS if m in line), None)
        if metric is None:
            kept = [k for k in line.get("metrics", []) if isinstance(k, str)]
            skip(f"sample without a label metric ({', '.join(kept) or 'none'})", f"{path}:{n}")
            continue
        value = line[metric]
        values = value if isinstance(value, list) else [value]
        doc = line.get("doc") if isinstance(line.get("doc"), dict) else {}
        domain = next((doc[k] for k in ("domain", "category", "subject") if k in doc), None)
        for k, v in enumerate(values):
            label = to_label(v)
            if label is None:
                skip(f"{metric} value not a label: {json.dumps(v)[:40]}", f"{path}:{n}")
                continue
            row = {
                "model_label": model,
                "dataset": task,
                "sample_index": line["doc_id"],
                "correct": label,
                "judge": str(line.get("filter", "none")),
                "sample": time if len(values) == 1 else f"{time}/{k}",
            }
            if isinstance(domain, str) and domain:
                row["domain"] = domain
            yield n, row
