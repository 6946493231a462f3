"""Contamination study: do injected surprising successes top the anomaly table.

Static data are simulated with known truth; a share of the cells that the true model
predicts as failures (true ``p`` below ``max_p``) and that were observed as failures are
flipped to successes, as leaked test items would be; the model is fitted and the cells
are scored. :func:`contamination_study` returns the AUROC of the order of the anomaly
table (:func:`bayes_dualeval.checks.anomalies`: smallest one-sided p-value first) against
the simple baseline ``y (1 - acc_model * acc_item)`` of empirical accuracies
(:func:`~bayes_dualeval.validation.audit.empirical_baseline`). Used by
``tests/test_checks.py`` and ``scripts/studies/contamination_study.py``; the ranking metrics and
the arena planting are in :mod:`~bayes_dualeval.validation.audit`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayes_dualeval.checks.options import CheckOptions
from bayes_dualeval.checks.ppc import anomalies
from bayes_dualeval.core import item_ids
from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.model import links
from bayes_dualeval.model.simulate import STATIC_SOURCE, simulate
from bayes_dualeval.validation.audit import auroc, empirical_baseline, table_score

__all__ = [
    "auroc", "contaminate", "contamination_study", "empirical_baseline", "true_probability",
]  # fmt: skip


def true_probability(truth: dict, models, items) -> np.ndarray:
    """The simulator's true success probability of the cells ``(models[k], items[k])``.

    Parameters
    ----------
    truth : dict
        The truth of :func:`bayes_dualeval.model.simulate.simulate`.
    models, items : array_like of str
        Model labels and item ids of the cells.
    """
    theta = np.array([truth["theta"][m] for m in models], dtype=np.float64)
    par = [truth["items"][q] for q in items]
    a, b = (np.array([v[k] for v in par], dtype=np.float64) for k in ("a", "b"))
    c, d = (
        np.array([v.get(k, x) for v in par], dtype=np.float64) for k, x in (("c", 0.0), ("d", 1.0))
    )
    return links.probability(links.eta(theta, b, a), c, d)


def contaminate(
    static: pd.DataFrame, truth: dict, *, share: float = 0.03, max_p: float = 0.2, seed: int = 0
) -> tuple[pd.DataFrame, np.ndarray]:
    """Flip failures that the true model predicts (true ``p < max_p``) to successes.

    Parameters
    ----------
    static : pandas.DataFrame
        Static rows from :func:`bayes_dualeval.model.simulate.simulate`.
    truth : dict
        Its truth.
    share : float
        Cells flipped, as a share of all rows (fewer if not enough candidates).
    max_p : float
        Only cells whose true success probability is below this are candidates.
    seed : int
        Seed of the generator choosing the cells.

    Returns
    -------
    static : pandas.DataFrame
        A copy with ``correct`` flipped on the chosen rows and ``source`` set to the
        simulator's static source, so item ids match the truth.
    injected : numpy.ndarray of bool
        True on the flipped rows.
    """
    rng = np.random.default_rng(seed)
    out = static.copy()
    out["source"] = STATIC_SOURCE
    item = item_ids.static_ids(STATIC_SOURCE, out["dataset"], out["sample_index"])
    p = true_probability(truth, out["model_label"].to_numpy(str), item)
    candidates = np.flatnonzero((p < max_p) & (out["correct"].to_numpy() == 0))
    n = min(len(candidates), int(round(share * len(out))))
    chosen = rng.choice(candidates, size=n, replace=False)
    injected = np.zeros(len(out), dtype=bool)
    injected[chosen] = True
    out.loc[injected, "correct"] = 1
    return out, injected


def contamination_study(
    *,
    n_models: int = 20,
    n_static: int = 150,
    share: float = 0.03,
    max_p: float = 0.2,
    seed: int = 0,
    settings=None,
    config=None,
) -> dict:
    """Simulate, contaminate, fit and score one data set.

    Parameters
    ----------
    n_models, n_static : int
        Size of the simulated static benchmark (no arena prompts).
    share, max_p : float
        See :func:`contaminate`.
    seed : int
        Seed of the simulation and of the choice of flipped cells.
    settings : SamplerSettings, optional
        Defaults to a short NUTS run (2 chains, 150 warm-up and 150 kept draws).
    config : ModelConfig, optional
        Defaults to the ``dualeval-2pl`` specification.

    Returns
    -------
    dict
        ``auroc`` (ours: the table's order), ``auroc_baseline``, ``auroc_residual`` (the
        signed residual), ``auroc_oracle`` (score ``y (1 - p)`` with the true ``p``: the
        ceiling),
        ``injected``, ``cells`` and ``flagged_injected`` / ``flagged_clean`` (cells with
        ``q_value < 0.05``).
    """
    from bayes_dualeval.inference.sampling import SamplerSettings
    from bayes_dualeval.runs.fit import fit

    static, _, truth = simulate(n_models=n_models, n_static=n_static, n_arena=0, seed=seed)
    static, injected = contaminate(static, truth, share=share, max_p=max_p, seed=seed + 1)
    dataset = Dataset.from_frames(static=static)
    settings = settings or SamplerSettings(chains=2, warmup=150, draws=150, seed=seed)
    result = fit(dataset, config, settings)
    cells = anomalies(result.idata, result.dataset, options=CheckOptions(seed=seed))
    # rows of the frame and cells of the dataset: match on (model, item)
    ds = result.dataset
    key = pd.MultiIndex.from_arrays([ds.models[ds.static_model], ds.items[ds.static_item]])
    frame_key = pd.MultiIndex.from_arrays(
        [
            static["model_label"].to_numpy(str),
            item_ids.static_ids(STATIC_SOURCE, static["dataset"], static["sample_index"]),
        ]
    )
    positive = pd.Series(injected, index=frame_key).reindex(key).to_numpy(dtype=bool)
    ours = table_score(cells, key)
    table = cells.set_index(["model", "item"]).reindex(key)
    flagged = table["q_value"].to_numpy(dtype=np.float64) < 0.05
    p_true = true_probability(truth, ds.models[ds.static_model], ds.items[ds.static_item])
    return {
        "seed": seed,
        "auroc": auroc(ours, positive),
        "auroc_baseline": auroc(empirical_baseline(ds), positive),
        "auroc_residual": auroc(table["residual"].to_numpy(dtype=np.float64), positive),
        "auroc_oracle": auroc(ds.static_y * (1.0 - p_true), positive),
        "injected": int(positive.sum()),
        "cells": len(positive),
        "flagged_injected": int((flagged & positive).sum()),
        "flagged_clean": int((flagged & ~positive).sum()),
    }
