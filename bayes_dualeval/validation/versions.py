"""Two versions of a simulated benchmark that share items, some of them drifted.

The planted truth of ``calibrate`` (:mod:`bayes_dualeval.measure.calibrate`): one
simulated static benchmark (:func:`bayes_dualeval.model.simulate.simulate`, one source,
2PL) whose questions are split into v1 (the first ``n_v1``) and v2 (the last ``n_v1``,
so ``2 n_v1 - n_items`` are common). v1's answers are the simulation's; v2's are drawn
afresh from the same models' abilities, with ``n_drift`` common questions moved by
``shift`` logits, easier or harder at random (a leaked question gets easier, a reworded
one may go either way). The bank is fitted on v1, and v2
is calibrated against it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from bayes_dualeval.model import links
from bayes_dualeval.model.simulate import simulate, write


def linked_versions(
    out: str | Path,
    *,
    n_models: int = 30,
    n_items: int = 300,
    n_v1: int = 200,
    n_drift: int = 5,
    shift: float = 1.5,
    extra_models: int = 0,
    toward_centre: bool = False,
    seed: int = 0,
) -> dict:
    """Write ``out/v1`` and ``out/v2`` (evaluation folders) and return the truth.

    Parameters
    ----------
    out : str or Path
        Folder to write into (``v1/`` and ``v2/`` are created).
    n_models : int
        Models answering both versions (the bank's models).
    n_items, n_v1 : int
        Questions in all, and in each version (``n_v1`` at least ``n_items / 2``).
    n_drift : int
        Common questions whose difficulty moves by ``shift`` in v2 (chosen at random).
    shift : float
        The size of the drift in logits (its sign is random).
    extra_models : int
        Models answering v2 only (not in the bank).
    toward_centre : bool
        Drift the common questions whose ``|b|`` is nearest ``shift / 2``, each to ``-b``
        (a move of about ``shift`` through the models' mean ability, where answers
        measure a question best), instead of random ones by ``shift`` either way.
    seed : int

    Returns
    -------
    dict
        ``b`` and ``a`` (item id -> true value in v1), ``theta`` (model -> ability),
        ``new`` (v2's items not in v1), ``common`` and ``drifted`` (item ids), ``drift``
        (drifted id -> signed shift), ``extra_models`` (v2 only), ``shift``.
    """
    out = Path(out)
    static, arena, truth = simulate(
        n_models=n_models + extra_models, n_static=n_items, n_arena=0, n_domains=1, seed=seed
    )
    static = static.assign(position=static.groupby("model_label").cumcount())
    rng = np.random.default_rng(seed + 1)
    names = sorted(static["model_label"].unique())
    extra = set(rng.choice(names, extra_models, replace=False)) if extra_models else set()
    ids = [str(q) for q in truth["items"]]
    common = np.arange(n_items - n_v1, n_v1)
    b = np.array([truth["items"][q]["b"] for q in ids])
    a = np.array([truth["items"][q]["a"] for q in ids])
    drifted = np.sort(rng.choice(common, n_drift, replace=False))
    moved = shift * rng.choice([-1.0, 1.0], n_drift)
    if toward_centre:
        drifted = np.sort(common[np.argsort(np.abs(np.abs(b[common]) - shift / 2))[:n_drift]])
        moved = -2.0 * b[drifted]
    b_v2 = b.copy()
    b_v2[drifted] += moved
    theta = static["model_label"].map(truth["theta"]).to_numpy()
    pos = static["position"].to_numpy()
    p = links.probability(links.eta(theta, b_v2[pos], a[pos]))
    v2 = static.assign(correct=(rng.random(len(static)) < p).astype(int))
    v1 = static[(pos < n_v1) & ~static["model_label"].isin(extra)]
    v2 = v2[pos >= n_items - n_v1]
    for name, table in (("v1", v1), ("v2", v2)):
        write(out / name, table.drop(columns="position"), arena, {})
    return {
        "b": dict(zip(ids, b.tolist(), strict=True)),
        "a": dict(zip(ids, a.tolist(), strict=True)),
        "theta": {m: truth["theta"][m] for m in names},
        "new": [ids[k] for k in range(n_v1, n_items)],
        "common": [ids[k] for k in common],
        "drifted": [ids[k] for k in drifted],
        "drift": {ids[k]: float(m) for k, m in zip(drifted, moved, strict=True)},
        "extra_models": sorted(extra),
        "shift": shift,
    }


def truth_table(truth: dict, items) -> pd.DataFrame:
    """True ``b`` and ``a`` (v1's) of ``items``, indexed by item id."""
    items = list(items)
    return pd.DataFrame(
        {"b": [truth["b"][q] for q in items], "a": [truth["a"][q] for q in items]}, index=items
    )
