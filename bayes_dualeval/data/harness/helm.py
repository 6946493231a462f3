"""HELM (stanford-crfm) run folders: ``per_instance_stats.json`` beside ``run_spec.json``.

``helm-run --suite v1 ...`` writes ``benchmark_output/runs/<suite>/<run name>/`` per
scenario and model, with ``run_spec.json`` (the run's ``name``, its ``adapter_spec`` with
the ``model``) and ``per_instance_stats.json`` (a JSON list: per instance and trial its
``instance_id``, ``train_trial_index``, an optional ``perturbation`` and ``stats``, each a
metric ``name`` with its ``mean``). A file is recognised as a JSON list named
``per_instance_stats.json`` whose first record has ``instance_id`` and ``stats``; records
are read one at a time. Fields:

* model: ``adapter_spec.model`` of ``run_spec.json`` (else ``model_deployment``);
* item: static question ``helm::<scenario>_<instance>``: the scenario is the run's name
  without its ``model=`` and ``model_deployment=`` arguments
  (``mmlu:subject=anatomy,method=multiple_choice_joint``), the instance the number of an
  ``id<number>`` id (another id becomes a stable number);
* correct: the first of :data:`METRICS` among the instance's unperturbed stats, its mean
  thresholded at 0.5; judge: that metric's name; sample: ``train_trial_index``.

Perturbed instances (robustness and fairness variants) and instances with none of the
metrics are skipped and counted.
"""

from __future__ import annotations

import re
from pathlib import Path

from bayes_dualeval.core.errors import InputError
from bayes_dualeval.data.harness import limits
from bayes_dualeval.data.harness.labels import question_index, to_label

NAME = "helm"
SUFFIXES = (".json",)
#: The per-instance metrics read as the label, in this order of preference.
METRICS = (
    "exact_match",
    "quasi_exact_match",
    "prefix_exact_match",
    "quasi_prefix_exact_match",
    "air_score",
)
_MODEL_ARG = re.compile(r",?(model|model_deployment)=[^,]*")


def claims(path: Path, head: bytes) -> bool:
    """``per_instance_stats.json``: a JSON list of records with ``instance_id`` and ``stats``."""
    return (
        path.name == "per_instance_stats.json"
        and head.lstrip().startswith(b"[")
        and b'"instance_id"' in head
        and b'"stats"' in head
    )


def run_spec(path: Path) -> tuple[str, str]:
    """The model and scenario of the run folder holding ``path``.

    Raises
    ------
    InputError
        No ``run_spec.json`` beside the stats, or one naming no model.
    """
    spec_path = path.parent / "run_spec.json"
    if not spec_path.is_file():
        raise InputError(f"{path}: no run_spec.json beside it, to name the model")
    spec = limits.json_file(spec_path)
    adapter = spec.get("adapter_spec") if isinstance(spec, dict) else None
    adapter = adapter if isinstance(adapter, dict) else {}
    model = adapter.get("model") or adapter.get("model_deployment")
    if not isinstance(model, str) or not model.strip():
        raise InputError(f"{spec_path}: names no adapter_spec.model")
    name = spec.get("name") if isinstance(spec.get("name"), str) else path.parent.name
    scenario = _MODEL_ARG.sub("", name).replace(":,", ":").rstrip(":,")
    return model.strip(), scenario


def _instance(instance_id) -> int:
    text = str(instance_id)
    return int(text[2:]) if re.fullmatch(r"id\d+", text) else question_index(text)


def rows(path: Path, skip):
    """Yield ``(record, row)`` per unperturbed instance and trial."""
    model, scenario = run_spec(path)
    for n, rec in limits.json_array(path):
        where = f"{path}: record {n}"
        if not isinstance(rec, dict) or "instance_id" not in rec:
            raise InputError(f"{where}: expected per-instance stats with instance_id")
        if rec.get("perturbation"):
            skip("perturbed instance", where)
            continue
        means = {}
        for stat in rec.get("stats") or []:
            name = stat.get("name") if isinstance(stat, dict) else None
            if isinstance(name, dict) and not name.get("perturbation"):
                means.setdefault(name.get("name"), stat.get("mean"))
        metric = next((m for m in METRICS if m in means), None)
        if metric is None:
            skip("instance without a label metric", where)
            continue
        label = to_label(means[metric])
        if label is None:
            skip(f"{metric} value not a label", where)
            continue
        yield (
            n,
            {
                "model_label": model,
                "dataset": scenario,
                "sample_index": _instance(rec["instance_id"]),
                "correct": label,
                "sample": rec.get("train_trial_index", 0),
                "judge": metric,
            },
        )
