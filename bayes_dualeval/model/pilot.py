"""Cheap summaries of the data computed once before sampling.

They shape the model's inputs, never its estimates directly: each arena prompt's mean
reward and its standard error (the arena level term's data), and a pilot of what each
item's data say about its ``b`` and ``log a``, which weighs how centred NUTS samples them.
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


def b_information(dataset: Dataset, use_static: bool) -> np.ndarray:
    """Rough Fisher information of each item's static responses about its ``b``.

    A cheap pilot, not an estimate anyone reads: abilities are proxied by the standardised
    logits of the models' smoothed accuracies, each item's 2PL is fitted to them by a few
    vectorised Newton steps of a ridge-penalised logistic regression (so separated items
    stay finite; :func:`~bayes_dualeval.model.item_solve.fisher_scoring` in the
    coordinates ``eta = alpha + beta theta``, which let a slope turn negative), and the
    information is read off at that fit, ``I_b = a^2 sum_i w_i`` with ``w = p (1 - p)``.
    (``log a`` is weighed on a grid instead, :func:`log_a_weights`.)

    Returns
    -------
    numpy.ndarray, shape (Q,)
        Zero for items without static responses.
    """
    q = dataset.n_items
    if not use_static or len(dataset.static_y) == 0:
        return np.zeros(q)
    model, item = dataset.static_model, dataset.static_item
    y, answers = dataset.static_share, dataset.static_n.astype(np.float64)
    x = _proxy_abilities(dataset)[model]

    def predictor(v):  # eta = alpha + beta x and its derivatives in alpha and beta
        return v[0][item] + v[1][item] * x, (1.0, x)

    # ridge alpha ~ N(0, 3), beta ~ N(1, 1); undamped: Newton's method for the logistic
    ridge = ((0.0, 1.0), (3.0, 1.0))
    (alpha, beta), _ = item_solve.fisher_scoring(
        predictor, y, item, q, ridge, iterations=12, n=answers
    )
    a = np.maximum(np.abs(beta), 0.05)
    w = links.probability(predictor((alpha, beta))[0])
    return a**2 * np.bincount(item, weights=answers * w * (1.0 - w), minlength=q)


def _proxy_abilities(dataset: Dataset) -> np.ndarray:
    """The pilot's abilities: standardised logits of the models' smoothed accuracies."""
    model, answers = dataset.static_model, dataset.static_n.astype(np.float64)
    n_i = np.bincount(model, weights=answers, minlength=dataset.n_models)
    k_i = np.bincount(model, weights=dataset.static_y, minlength=dataset.n_models)
    acc = (k_i + 0.5) / (n_i + 1.0)
    theta = np.log(acc / (1.0 - acc))
    return (theta - theta.mean()) / max(theta.std(), 1e-6)


#: Typical prior standard deviations of ``b`` and ``log a`` within a group, the spreads
#: :func:`centring` weighs an item's information against (``log a``'s unless its group's
#: spread is estimated, :func:`log_a_weights`).
PRIOR_SD_B, PRIOR_SD_LOG_A = 1.0, 0.3
#: The share of :func:`b_information`'s ``I_b`` that the posterior shows: the pilot's
#: slopes are fitted to each item alone and come out steep, so its information reads high.
#: Measured as the information implied by each item's posterior variance of ``b`` over the
#: pilot's, medians 0.54-0.78 on the bundled example, ChemBench, the paper-scale
#: simulation and the 30 x 300 steep set (docs/performance.md, "ChemBench's energy").
PILOT_SHARE_B = 0.6
#: A group's spread of ``log a`` is estimated (:func:`log_a_weights`) when at least this
#: many of its items have static responses ...
SPREAD_MIN_ITEMS = 100
#: ... from at least this many models. With fewer, the pilot's proxy abilities (accuracy
#: logits) make the estimate read high: 0.55-0.68 on 12 x 300 simulations whose spread
#: is 0.3; at 18 models it read 0.38-0.40 (``scripts/studies/centring_check.py``).
SPREAD_MIN_MODELS = 20
#: The values of ``log a`` (on the proxy abilities' scale) over which each item's
#: likelihood is evaluated in :func:`log_a_weights`.
LOG_A_GRID = np.linspace(-2.5, 2.5, 41)


def centring(
    dataset: Dataset,
    use_static: bool,
    how: str = "auto",
    *,
    arena_level: bool = False,
) -> np.ndarray:
    """Choose per item how centred NUTS samples ``b`` and ``log a``: a weight in [0, 1].

    A parameter ``x ~ Normal(loc, s)`` is sampled in coordinates centred by a weight
    ``w`` (:func:`bayes_dualeval.model.priors.item_parameters`): 1 is the centred
    coordinate, 0 the standard normal ``(x - loc) / s``. For a normal prior and a normal
    likelihood, the coordinate at which the parameter is a posteriori independent of its
    group's ``loc`` and ``s`` has ``w`` the share of the prior's variance that the data
    remove, ``1 - posterior variance / s^2`` (Papaspiliopoulos, Roberts and Skold 2007);
    centred coordinates tie a weakly informed item to ``s`` (a funnel), non-centred ones
    tie an informed item's coordinate to ``s``, and many of either hold ``s`` still.

    Parameters
    ----------
    dataset : Dataset
    use_static : bool
        Whether static labels enter the model.
    how : {"auto", "none", "all"}
        ``auto``: for ``b``, ``w = r / (1 + r)`` with ``r`` the pilot's information
        (:func:`b_information`, times :data:`PILOT_SHARE_B`) times :data:`PRIOR_SD_B`
        squared; for ``log a``, ``w`` from each item's posterior variance on a grid
        (:func:`log_a_weights`). Arena prompts, whose pairs see only differences, are
        non-centred (0), unless the level term sees them (``arena_level``): then their
        ``b`` is anchored to the level their mean reward implies (``b_anchored``;
        :mod:`bayes_dualeval.model.anchoring`). ``none``: every item non-centred; ``all``:
        every item centred; neither anchors.
    arena_level : bool
        Whether the arena level term is in the model.

    Returns
    -------
    numpy.ndarray of float32, shape (3, Q)
        ``ModelInputs.centring``, rows ``b_centred, log_a_centred, b_anchored`` (as
        :class:`~bayes_dualeval.model.inputs.ModelInputs` names them): the weights of
        ``b`` and ``log a``; 1 where ``b`` is anchored instead, else 0.
    """
    q = dataset.n_items
    if how == "none":
        return np.zeros((3, q), np.float32)
    if how == "all":
        return np.r_[np.ones((2, q)), np.zeros((1, q))].astype(np.float32)
    if how != "auto":
        raise ConfigError(f"centring must be auto, none or all; got {how!r}")
    info_b = b_information(dataset, use_static)
    arena = np.asarray(dataset.item_kind == "arena")
    anchored = arena if arena_level else np.zeros(q, bool)
    weights = np.stack(
        [
            np.where(anchored, 1.0, _weight(PILOT_SHARE_B * info_b * PRIOR_SD_B**2)),
            log_a_weights(dataset) if use_static else np.zeros(q),
            anchored,
        ]
    )
    return weights.astype(np.float32)


def _weight(ratio: np.ndarray) -> np.ndarray:
    """``r / (1 + r)``: the share of a normal prior's variance that a normal likelihood removes.

    ``r`` is the likelihood's information times the prior's variance.
    """
    return ratio / (1.0 + ratio)


def log_a_weights(dataset: Dataset, *, spreads: bool = False):
    """Each item's centring weight for ``log a``: the share of its prior variance the data remove.

    On the pilot's proxy abilities (:func:`_proxy_abilities`), each item's likelihood of
    ``log a`` is evaluated on :data:`LOG_A_GRID` with its intercept integrated out by
    Laplace's method; each item group's ``log a ~ Normal(m, s)`` is fitted to them by
    marginal likelihood, over ``m`` with ``s`` at :data:`PRIOR_SD_LOG_A`, or over both
    where the group has :data:`SPREAD_MIN_ITEMS` items answered by
    :data:`SPREAD_MIN_MODELS` models (then ``s`` is kept at least
    :data:`PRIOR_SD_LOG_A`). The weight is ``1 - v / s^2``, ``v`` the item's posterior
    variance of ``log a`` on the grid under that prior, clipped to [0, 1].

    A variance on the grid rather than a curvature at a point, because the likelihood of
    ``log a`` is often one-sided: an item that a few models split cleanly bounds its slope
    from below only, and its curvature at a fitted point says it is well measured when
    its upper side is the prior's. A spread read from the data, because on ChemBench (22 x
    2,854) the fitted ``sigma_log_a`` is 0.62, twice the typical prior, and weighing the
    items against 0.3 left every ``log a`` tied to ``sigma_log_a`` and every chain's
    E-BFMI under 0.3.

    Parameters
    ----------
    dataset : Dataset
    spreads : bool
        Also return each item's group spread ``s`` as used.

    Returns
    -------
    weights : numpy.ndarray, shape (Q,)
        0 for items without static responses.
    spread : numpy.ndarray, shape (Q,)
        Only with ``spreads``: ``s`` of each item's group (:data:`PRIOR_SD_LOG_A` for items
        without static responses).
    """
    q = dataset.n_items
    out, spread = np.zeros(q), np.full(q, PRIOR_SD_LOG_A)
    if len(dataset.static_y) == 0:
        return (out, spread) if spreads else out
    model, item = dataset.static_model, dataset.static_item
    group = np.asarray(dataset.item_group)
    loglik = _log_a_likelihood(dataset, _proxy_abilities(dataset))  # (grid, Q)
    grid = LOG_A_GRID[:, None]
    for g in np.unique(group[item]):
        cells = group[item] == g
        items = np.unique(item[cells])
        free = items.size >= SPREAD_MIN_ITEMS and np.unique(model[cells]).size >= SPREAD_MIN_MODELS
        m, s = _group_prior(loglik[:, items], free)
        log_post = loglik[:, items] - 0.5 * ((grid - m) / s) ** 2
        post = np.exp(log_post - log_post.max(axis=0))
        post /= post.sum(axis=0)
        mean = (post * grid).sum(axis=0)
        var = (post * (grid - mean) ** 2).sum(axis=0)
        out[items] = np.clip(1.0 - var / s**2, 0.0, 1.0)
        spread[items] = s
    return (out, spread) if spreads else out


def _log_a_likelihood(dataset: Dataset, theta: np.ndarray) -> np.ndarray:
    """Each item's log likelihood at every ``log a`` of the grid, intercept integrated out."""
    q = dataset.n_items
    item, y = dataset.static_item, dataset.static_share
    n = dataset.static_n.astype(np.float64)
    x = theta[dataset.static_model]
    prior_var = 9.0  # the intercept's Normal(0, 3), as in b_information's ridge
    out = np.empty((len(LOG_A_GRID), q))
    alpha = np.zeros(q)
    for k, log_a in enumerate(LOG_A_GRID):  # 41 values, each vectorised over the cells
        slope = np.exp(log_a) * x
        # Newton's method for a logistic intercept, from its value at the previous log a
        for _ in range(12 if k == 0 else 4):
            p = links.probability(alpha[item] + slope)
            grad = np.bincount(item, weights=n * (y - p), minlength=q) - alpha / prior_var
            hess = np.bincount(item, weights=n * p * (1 - p), minlength=q) + 1 / prior_var
            alpha = alpha + grad / hess
        p = np.clip(links.probability(alpha[item] + slope), 1e-12, 1 - 1e-12)
        cells = n * (y * np.log(p) + (1 - y) * np.log1p(-p))
        hess = np.bincount(item, weights=n * p * (1 - p), minlength=q) + 1 / prior_var
        out[k] = (
            np.bincount(item, weights=cells, minlength=q)
            - 0.5 * alpha**2 / prior_var
            - 0.5 * np.log(hess * prior_var)
        )
    return out


def _group_prior(loglik: np.ndarray, free_spread: bool) -> tuple[float, float]:
    """``(m, s)`` of ``log a ~ Normal(m, s)`` maximising the items' marginal likelihood.

    ``s`` is :data:`PRIOR_SD_LOG_A` unless ``free_spread``; then it is fitted too and kept
    at least that.
    """
    from scipy.optimize import minimize
    from scipy.special import logsumexp

    grid, step = LOG_A_GRID[:, None], LOG_A_GRID[1] - LOG_A_GRID[0]

    def minus(v):
        m, log_s = v[0], (v[1] if free_spread else np.log(PRIOR_SD_LOG_A))
        log_w = -0.5 * ((grid - m) / np.exp(log_s)) ** 2 - log_s + np.log(step)
        return -float(np.sum(logsumexp(loglik + log_w, axis=0)))

    start = [float(LOG_A_GRID[np.argmax(loglik.mean(axis=1))]), np.log(PRIOR_SD_LOG_A)]
    bounds = [(LOG_A_GRID[0], LOG_A_GRID[-1]), (np.log(0.05), np.log(2.0))]
    if not free_spread:
        start, bounds = start[:1], bounds[:1]
    res = minimize(minus, start, method="L-BFGS-B", bounds=bounds)
    s = max(float(np.exp(res.x[1])), PRIOR_SD_LOG_A) if free_spread else PRIOR_SD_LOG_A
    return float(res.x[0]), s
