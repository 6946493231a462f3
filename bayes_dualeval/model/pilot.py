"""Cheap summaries of the data computed once before sampling.

They shape the model's inputs, never its estimates directly: each arena prompt's mean
reward and its standard error (the arena level term's data), and a pilot of each item's
information that chooses centred or non-centred coordinates per item.
"""

from __future__ import annotations

import numpy as np

from bayes_dualeval.core.errors import ConfigError
from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.model import item_solve, links


def prompt_level(model, item, z, item_group, n_models: int, sweeps: int = 10):
    """Each arena prompt's mean reward, its standard error, and its arena source.

    The within-prompt noise is estimated per arena source from the residuals of an additive
    fit ``z_iq ~ alpha_q + beta_i`` (a few sweeps of alternating means, vectorised); the
    residual also holds whatever of ``gamma p_iq`` is not additive, so the estimate errs
    on the wide side. The standard error of prompt ``q``'s mean is that noise over
    ``sqrt(n_q)``.

    Parameters
    ----------
    model, item : numpy.ndarray of int, shape (R,)
        Arena cells' model and item indices.
    z : numpy.ndarray, shape (R,)
        Normalised rewards.
    item_group : numpy.ndarray of int, shape (Q,)
        Group of every item.
    n_models : int

    Returns
    -------
    zbar, se : numpy.ndarray of float32, shape (Q,)
        Mean and standard error (0 and 1 for items without arena cells).
    level_group : numpy.ndarray of int32, shape (Q,)
        Index of each item's arena source (0 for items without arena cells).
    n_level_groups : int
    """
    q = len(item_group)
    n = np.bincount(item, minlength=q).astype(np.float64)
    zbar = np.bincount(item, weights=z, minlength=q) / np.maximum(n, 1.0)
    prompts = np.flatnonzero(n > 0)
    groups, inverse = np.unique(item_group[prompts], return_inverse=True)
    level_group = np.zeros(q, np.int32)
    level_group[prompts] = inverse
    se = np.ones(q)
    if len(z):
        n_m = np.maximum(np.bincount(model, minlength=n_models), 1.0)
        alpha, beta = zbar.copy(), np.zeros(n_models)
        for _ in range(sweeps):
            beta = np.bincount(model, weights=z - alpha[item], minlength=n_models) / n_m
            alpha = np.bincount(item, weights=z - beta[model], minlength=q) / np.maximum(n, 1)
        resid2 = (z - alpha[item] - beta[model]) ** 2
        cell_group = level_group[item]
        k = len(groups)
        ss = np.bincount(cell_group, weights=resid2, minlength=k)
        cells = np.bincount(cell_group, minlength=k)
        n_prompts = np.bincount(level_group[prompts], minlength=k)
        pairs_seen = np.unique(cell_group.astype(np.int64) * n_models + model)
        models_in = np.bincount(pairs_seen // n_models, minlength=k)
        dof = np.maximum(cells - n_prompts - models_in + 1.0, 1.0)
        noise = np.sqrt(np.maximum(ss / dof, 1e-4))
        se[prompts] = noise[level_group[prompts]] / np.sqrt(n[prompts])
    return zbar.astype(np.float32), se.astype(np.float32), level_group, len(groups)


def item_information(dataset: Dataset, use_static: bool) -> tuple[np.ndarray, np.ndarray]:
    """Rough Fisher information of each item's static responses about ``b`` and ``log a``.

    A cheap pilot, not an estimate anyone reads: abilities are proxied by the standardised
    logits of the models' smoothed accuracies, each item's 2PL is fitted to them by a few
    vectorised Newton steps of a ridge-penalised logistic regression (so separated items
    stay finite; :func:`~bayes_dualeval.model.item_solve.fisher_scoring` in the
    coordinates ``eta = alpha + beta theta``, which let a slope turn negative), and the
    information is read off at that fit,
    ``I_b = a^2 sum_i w_i`` and ``I_log_a = a^2 sum_i w_i (theta_i - b)^2`` with
    ``w = p (1 - p)``.

    Returns
    -------
    info_b, info_log_a : numpy.ndarray, shape (Q,)
        Zero for items without static responses.
    """
    q = dataset.n_items
    zeros = np.zeros(q)
    if not use_static or len(dataset.static_y) == 0:
        return zeros, zeros.copy()
    model, item = dataset.static_model, dataset.static_item
    y, answers = dataset.static_share, dataset.static_n.astype(np.float64)
    n_i = np.bincount(model, weights=answers, minlength=dataset.n_models)
    k_i = np.bincount(model, weights=dataset.static_y, minlength=dataset.n_models)
    acc = (k_i + 0.5) / (n_i + 1.0)
    theta = np.log(acc / (1.0 - acc))
    theta = (theta - theta.mean()) / max(theta.std(), 1e-6)
    x = theta[model]

    def predictor(v):  # eta = alpha + beta x and its derivatives in alpha and beta
        return v[0][item] + v[1][item] * x, (1.0, x)

    # ridge alpha ~ N(0, 3), beta ~ N(1, 1); undamped: Newton's method for the logistic
    ridge = ((0.0, 1.0), (3.0, 1.0))
    (alpha, beta), _ = item_solve.fisher_scoring(
        predictor, y, item, q, ridge, iterations=12, n=answers
    )
    a = np.maximum(np.abs(beta), 0.05)
    b = -alpha / a
    w = links.probability(predictor((alpha, beta))[0])
    w = answers * w * (1.0 - w)
    info_b = a**2 * np.bincount(item, weights=w, minlength=q)
    info_log_a = a**2 * np.bincount(item, weights=w * (x - b[item]) ** 2, minlength=q)
    return info_b, info_log_a


#: Typical prior standard deviations of ``b`` and ``log a`` within a group, below which an
#: item's information is compared in :func:`centring`.
PRIOR_SD_B, PRIOR_SD_LOG_A = 1.0, 0.3


def centring(
    dataset: Dataset,
    use_static: bool,
    how: str = "auto",
    *,
    arena_level: bool = False,
) -> np.ndarray:
    """Choose per item whether NUTS samples ``b`` and ``log a`` centred (1) or not (0).

    Parameters
    ----------
    dataset : Dataset
    use_static : bool
        Whether static labels enter the model.
    how : {"auto", "none", "all"}
        ``auto``: a parameter is centred when its data outweigh a typical prior, that is
        when its information (:func:`item_information`) times the prior variance
        (:data:`PRIOR_SD_B`, :data:`PRIOR_SD_LOG_A` squared) is at least 1: its likelihood
        is then narrower than the prior. Arena prompts, whose pairs see only differences,
        stay non-centred, unless the level term sees them (``arena_level``): then their
        ``b`` is anchored to the level their mean reward implies (``b_anchored``;
        :mod:`bayes_dualeval.model.anchoring`). ``none``: every item non-centred; ``all``:
        every item centred; neither anchors.
    arena_level : bool
        Whether the arena level term is in the model.

    Returns
    -------
    numpy.ndarray of float32, shape (3, Q)
        ``ModelInputs.centring``, rows ``b_centred, log_a_centred, b_anchored`` (as
        :class:`~bayes_dualeval.model.inputs.ModelInputs` names them): 1 where ``b`` (``log a``) is
        centred, 0 where non-centred; 1 where ``b`` is anchored instead.
    """
    q = dataset.n_items
    if how == "none":
        return np.zeros((3, q), np.float32)
    if how == "all":
        return np.r_[np.ones((2, q)), np.zeros((1, q))].astype(np.float32)
    if how != "auto":
        raise ConfigError(f"centring must be auto, none or all; got {how!r}")
    info_b, info_log_a = item_information(dataset, use_static)
    arena = np.asarray(dataset.item_kind == "arena")
    anchored = arena if arena_level else np.zeros(q, bool)
    centred = np.stack(
        [
            (info_b * PRIOR_SD_B**2 >= 1.0) | anchored,
            info_log_a * PRIOR_SD_LOG_A**2 >= 1.0,
            anchored,
        ]
    )
    return centred.astype(np.float32)
