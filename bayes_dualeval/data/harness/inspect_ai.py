"""inspect_ai (UK AISI) ``.eval`` logs: a zip of JSON, one log per eval run.

A JSON log (``--log-format json``) is read too, whole, up to the cap of
:data:`~.limits.MAX_RECORD_BYTES`. In an ``.eval`` log, the members read are
``header.json`` (the eval's status, task and model) and ``summaries.json`` (per sample its
id, epoch, scores by scorer and metadata), or each ``samples/<id>_epoch_<n>.json`` when a
log has no summaries. A log whose status is not ``success`` (``error``, ``cancelled``, or
``started`` with no header yet) is skipped, and counted. Fields:

* model: ``eval.model`` of the header (``mockllm/model-a``);
* item: static question ``inspect_ai::<eval.task>_<sample id>`` (a sample id that is not
  an integer becomes a stable number, :func:`~.labels.question_index`);
* sample: the epoch; judge: the scorer's name (``<scorer>/<key>`` for a scorer that
  returns a dict of values); domain: the sample's ``domain`` or ``category`` metadata;
* correct: the score value as a label (:func:`~.labels.to_label`: ``C``/``I``, booleans,
  0/1, a number in [0, 1] thresholded at 0.5). A sample without a score, or a value that
  is not a label, is skipped and counted.
"""

from __future__ import annotations

import re
from pathlib import Path

from bayes_dualeval.core.errors import InputError
from bayes_dualeval.data.harness import limits
from bayes_dualeval.data.harness.labels import question_index, to_label

NAME = "inspect_ai"
SUFFIXES = (".eval", ".json")
_SAMPLE = re.compile(r"samples/.+_epoch_(\d+)\.json")


def claims(path: Path, head: bytes) -> bool:
    """An ``.eval`` file (a zip, checked when read), or a JSON log object with ``eval``."""
    if path.suffix.lower() == ".eval":
        return True
    start = head.lstrip()[:4096]
    return start.startswith(b"{") and all(
        f'"{k}"'.encode() in start for k in ("version", "status", "eval")
    )


def _samples(zf, names, where):
    if "summaries.json" in names:
        summaries = limits.zip_json(zf, "summaries.json", where)
        if not isinstance(summaries, list):
            raise InputError(f"{where}:summaries.json: expected a JSON list")
        yield from summaries
        return
    for name in sorted(n for n in names if _SAMPLE.fullmatch(n)):
        yield limits.zip_json(zf, name, where)


def rows(path: Path, skip):
    """Yield ``(record, row)`` per sample and scorer of a successful log.

    Raises
    ------
    InputError
        A corrupt or truncated archive, an unsafe member, a JSON log over the cap, or a
        header without a model or task.
    """
    where = str(path)
    if path.suffix.lower() == ".json":
        if path.stat().st_size > limits.MAX_RECORD_BYTES:
            raise InputError(
                f"{where}: JSON log larger than {limits.MAX_RECORD_BYTES // 2**20} MiB, "
                "refused (write logs in inspect's eval format, or convert them: 'inspect log "
                "convert')"
            )
        log = limits.json_file(path)
        if not isinstance(log, dict):
            raise InputError(f"{where}: expected an inspect_ai log object")
        yield from _log_rows(log, lambda: log.get("samples") or [], where, skip)
        return
    with limits.open_zip(path) as zf:
        names = set(zf.namelist())
        if "header.json" not in names:
            skip("log with status 'started' (no header)", where)
            return
        header = limits.zip_json(zf, "header.json", where)
        if not isinstance(header, dict):
            raise InputError(f"{where}:header.json: expected a JSON object")
        yield from _log_rows(header, lambda: _samples(zf, names, where), where, skip)


def _log_rows(header: dict, samples, where: str, skip):
    """The rows of one log: its header (status, model, task) and its samples."""
    status = header.get("status")
    if status != "success":
        skip(f"log with status {status!r}", where)
        return
    ev = header.get("eval") if isinstance(header.get("eval"), dict) else {}
    model, task = ev.get("model"), ev.get("task")
    if not isinstance(model, str) or not isinstance(task, str):
        raise InputError(f"{where}: the log's header has no eval.model or eval.task")
    for s in samples():
        if not isinstance(s, dict):
            raise InputError(f"{where}: expected a sample object, got {str(s)[:40]}")
        sid, epoch = s.get("id"), s.get("epoch", 1)
        record = f"sample {sid} epoch {epoch}"
        scores = s.get("scores")
        if not scores or not isinstance(scores, dict):
            skip("sample without a score", f"{where}: {record}")
            continue
        meta = s.get("metadata") if isinstance(s.get("metadata"), dict) else {}
        domain = meta.get("domain", meta.get("category"))
        for scorer, score in scores.items():
            value = score.get("value") if isinstance(score, dict) else None
            values = value.items() if isinstance(value, dict) else [(None, value)]
            for key, v in values:
                label = to_label(v)
                if label is None:
                    skip(f"score value {v!r} not a label", f"{where}: {record}")
                    continue
                row = {
                    "model_label": model,
                    "dataset": task,
                    "sample_index": question_index(sid),
                    "correct": label,
                    "sample": epoch,
                    "judge": scorer if key is None else f"{scorer}/{key}",
                }
                if isinstance(domain, str) and domain:
                    row["domain"] = domain
                yield f"{record} {row['judge']}", row
