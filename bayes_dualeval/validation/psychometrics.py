"""Planted truths of the psychometric audits: saturation, item fit, model fit, dependence.

Each function draws static labels with a known fault from the run's own link
(:mod:`bayes_dualeval.model.links`) and returns the input frame (columns ``model_label,
source, dataset, sample_index, correct``) with what was planted. Used by
``tests/test_audits.py`` and ``scripts/studies/audit_study.py``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayes_dualeval.model import links
from bayes_dualeval.model.simulate import model_names


def labels_frame(
    labels: np.ndarray, models: list, source: str, dataset: str = "q"
) -> pd.DataFrame:
    """The long input frame of a (models x questions) 0/1 matrix of one source."""
    n_models, n_items = labels.shape
    return pd.DataFrame(
        {
            "model_label": np.repeat(np.asarray(models, dtype=object), n_items),
            "source": source,
            "dataset": dataset,
            "sample_index": np.tile(np.arange(n_items), n_models),
            "correct": labels.ravel().astype(int),
        }
    )


def draw_labels(rng, theta, b, a, c=None) -> np.ndarray:
    """0/1 labels of every model (rows) on every question (columns) under the link."""
    eta = links.eta(theta[:, None], b[None, :], a[None, :])
    p = links.probability(eta, None if c is None else c[None, :])
    return (rng.random(p.shape) < p).astype(int)


def two_benchmarks(n_models: int, n_items: int, seed: int) -> tuple[pd.DataFrame, dict]:
    """An easy benchmark and one matched to the top models, answered by the same models.

    Abilities ``theta ~ Normal(0, 1)``; ``log a ~ Normal(0, 0.3)``. The easy benchmark's
    difficulties are ``Normal(min(theta) - 1, 0.7)`` (the top models pass nearly all of it);
    the matched one's are ``Normal(mean of the top five abilities, 0.5)``.
    """
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=n_models)
    top = np.sort(theta)[-5:].mean()
    models = model_names(n_models)
    frames = []
    for name, centre, sd in (("easy", theta.min() - 1.0, 0.7), ("matched", top, 0.5)):
        b = rng.normal(centre, sd, n_items)
        a = np.exp(rng.normal(0.0, 0.3, n_items))
        frames.append(labels_frame(draw_labels(rng, theta, b, a), models, name))
    return pd.concat(frames, ignore_index=True), {"theta": dict(zip(models, theta, strict=True))}


def floor_items(
    n_models: int, n_items: int, n_floor: int, seed: int, floor: float = 0.4
) -> tuple[pd.DataFrame, dict]:
    """2PL questions, of which ``n_floor`` follow a 3PL with guessing floor ``floor``.

    Returns the frame and the item ids (``bench::q_<k>``) of the floored questions, each
    with its true difficulty (a floor shows only where models sit below the difficulty).
    """
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=n_models)
    b = rng.normal(0.0, 1.0, n_items)
    a = np.exp(rng.normal(0.0, 0.3, n_items))
    planted = rng.choice(n_items, n_floor, replace=False)
    c = np.zeros(n_items)
    c[planted] = floor
    labels = draw_labels(rng, theta, b, a, c)
    frame = labels_frame(labels, model_names(n_models), "bench")
    return frame, {f"bench::q_{k}": float(b[k]) for k in planted}


def inverted_model(n_models: int, n_items: int, seed: int) -> tuple[pd.DataFrame, str]:
    """2PL labels where one mid-ranked model's answers are inverted (``1 - y``)."""
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=n_models)
    b = rng.normal(0.0, 1.0, n_items)
    a = np.exp(rng.normal(0.0, 0.3, n_items))
    labels = draw_labels(rng, theta, b, a)
    models = model_names(n_models)
    bad = int(np.argsort(theta)[n_models // 2])
    labels[bad] = 1 - labels[bad]
    return labels_frame(labels, models, "bench"), models[bad]


def dependent_cluster(
    n_models: int, n_items: int, seed: int, size: int = 5, effect: float = 0.0
) -> tuple[pd.DataFrame, set]:
    """2PL labels with one testlet: ``size`` questions share a per-model effect.

    Each model's log-odds on the testlet's questions gain ``u_i ~ Normal(0, effect)``, the
    same for all of them (a shared stem: a model that gets it answers them together).
    ``effect = 0`` gives independent data (the planted set is then empty).
    """
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=n_models)
    b = rng.normal(0.0, 1.0, n_items)
    a = np.exp(rng.normal(0.0, 0.3, n_items))
    planted = rng.choice(n_items, size, replace=False) if effect > 0 else np.array([], int)
    eta = links.eta(theta[:, None], b[None, :], a[None, :])
    eta[:, planted] += rng.normal(0.0, effect, n_models)[:, None] if effect > 0 else 0.0
    labels = (rng.random(eta.shape) < links.probability(eta)).astype(int)
    frame = labels_frame(labels, model_names(n_models), "bench")
    return frame, {f"bench::q_{k}" for k in planted}
