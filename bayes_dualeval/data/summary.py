"""What a :class:`~bayes_dualeval.data.dataset.Dataset` holds, counted.

Sizes, coverage, repeated answers, judges, families, style covariates and the rows skipped
while loading.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from bayes_dualeval.data.cells import skip_hint

if TYPE_CHECKING:
    from bayes_dualeval.data.dataset import Dataset


def summary_dict(ds: Dataset) -> dict:
    """Machine-readable summary: sizes, coverage, judges, families, style, skip counts.

    ``static_labels`` and ``arena_rewards`` count every answer (repeated samples
    included), ``static_cells`` and ``arena_cells`` the (model, item, judge) cells; per
    judge its cells of each kind and the models it scored.
    """
    per_source = {}
    for g, name in enumerate(ds.groups):
        kind, source = name.split(":", 1)
        idx = np.flatnonzero(ds.item_group == g)
        model, item = (
            (ds.static_model, ds.static_item)
            if kind == "static"
            else (ds.arena_model, ds.arena_item)
        )
        inside = np.isin(item, idx)
        cells = int(inside.sum())
        # coverage: the share of (model, item) pairs with a cell, whatever the judges
        pairs = len(np.unique(model[inside].astype(np.int64) * ds.n_items + item[inside]))
        per_source[name] = {
            "kind": kind,
            "source": source,
            "items": len(idx),
            "cells": cells,
            "coverage": pairs / (len(idx) * ds.n_models) if len(idx) else 0.0,
        }
    return {
        "models": ds.n_models,
        "items": ds.n_items,
        "static_items": len(ds.static_items),
        "arena_items": len(ds.arena_items),
        "static_labels": ds.static_answers,
        "static_cells": len(ds.static_y),
        "arena_rewards": int(ds.arena_n.sum()),
        "arena_cells": len(ds.arena_z),
        "domains": sorted(set(ds.item_domain) - {""}),
        "judges": judges(ds),
        "families": {
            str(f): int(n)
            for f, n in zip(*np.unique(ds.model_family, return_counts=True), strict=True)
            if f != ""
        },  # fmt: skip
        "style": list(ds.style),
        "reward_norm": ds.reward_norm,
        "groups": per_source,
        "skipped": dict(ds.skipped),
        "files": len(ds.files),
    }


def judges(ds: Dataset) -> dict:
    """Per named judge: its static and arena cells and the models it scored (``{}``: none).

    Rows that name no judge, beside rows that do, are left out of it.
    """
    if not ds.has_judges:
        return {}
    out = {}
    for k, name in enumerate(ds.judges):
        if name == "":  # rows that name no judge (static labels, often): not a judge
            continue
        s, a = ds.static_judge == k, ds.arena_judge == k
        models = np.union1d(ds.static_model[s], ds.arena_model[a])
        out[str(name)] = {
            "static_cells": int(s.sum()),
            "arena_cells": int(a.sum()),
            "models": len(models),
        }
    return out


def summary(ds: Dataset) -> str:
    """A short human-readable summary."""
    d = summary_dict(ds)
    lines = [
        f"{d['models']} models, {d['items']} items "
        f"({d['static_items']} static questions, {d['arena_items']} arena prompts)",
        f"{d['static_labels']} static labels, {d['arena_rewards']} arena rewards"
        + (f" (z-normalised per {ds.reward_norm})" if d["arena_rewards"] else ""),
    ]
    repeated = [
        f"{d[f'{kind}_cells']} {kind} cells hold {d[f'{label}']} answers"
        for kind, label in (("static", "static_labels"), ("arena", "arena_rewards"))
        if d[label] > d[f"{kind}_cells"]
    ]
    if repeated:
        lines.append("repeated samples: " + "; ".join(repeated))
    for g in d["groups"].values():
        lines.append(
            f"  {g['kind']:<6} source {g['source']!r}: {g['items']} items, "
            f"{g['cells']} cells, coverage {100 * g['coverage']:.0f}%"
        )
    if d["domains"]:
        lines.append("domains: " + ", ".join(d["domains"]))
    if d["judges"]:
        lines.append(f"judges ({len(d['judges'])}):")
        for name, j in d["judges"].items():
            lines.append(
                f"  {name}: {j['models']} models, "
                f"{j['static_cells']} static cells, {j['arena_cells']} arena cells"
            )
    if d["families"]:
        lines.append(
            "families: " + ", ".join(f"{f} ({n} models)" for f, n in d["families"].items())
        )
    if d["style"]:
        lines.append("style covariates: " + ", ".join(d["style"]))
    if d["skipped"]:
        lines.append("skipped: " + ", ".join(f"{n} {why}" for why, n in d["skipped"].items()))
        if skip_hint(d["skipped"]):
            lines.append(f"  ({skip_hint(d['skipped'])})")
    return "\n".join(lines)
