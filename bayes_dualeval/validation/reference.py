"""Reference (non-Bayesian) estimators used to validate the Bayesian fits.

:func:`mml_2pl` is classic marginal maximum likelihood for the 2PL with a standard normal
ability distribution (Bock & Aitkin), by Gauss-Hermite quadrature. With many respondents
per item and weak priors, posterior means of ``a`` and ``b`` must come close to it.
"""

from __future__ import annotations

import numpy as np
from scipy import optimize

from bayes_dualeval.model import links


def mml_2pl(y: np.ndarray, *, nodes: int = 61):
    """Marginal maximum likelihood estimates of a complete 2PL response matrix.

    Parameters
    ----------
    y : numpy.ndarray of {0, 1}, shape (n_respondents, n_items)
        Complete responses.
    nodes : int
        Gauss-Hermite quadrature nodes over ``theta ~ Normal(0, 1)``.

    Returns
    -------
    a, b, se_a, se_b : numpy.ndarray, shape (n_items,)
        Estimates and standard errors (from the numerical Hessian of the marginal
        log likelihood in ``(a, b)``).
    """
    y = np.asarray(y, dtype=float)
    x_nodes, weights = np.polynomial.hermite_e.hermegauss(nodes)
    weights = weights / weights.sum()
    n_items = y.shape[1]

    def nll_ab(params):
        a, b = params[:n_items], params[n_items:]
        eta = links.eta(x_nodes[:, None], b[None, :], a[None, :])  # (K, Q)
        logp, log1mp = links.log_probabilities(eta)
        ll = y @ logp.T + (1 - y) @ log1mp.T  # (N, K)
        top = ll.max(axis=1, keepdims=True)
        return -np.sum(top[:, 0] + np.log(np.exp(ll - top) @ weights))

    res = optimize.minimize(
        lambda x: nll_ab(np.r_[np.exp(x[:n_items]), x[n_items:]]),
        np.zeros(2 * n_items),
        method="BFGS",
    )
    est = np.r_[np.exp(res.x[:n_items]), res.x[n_items:]]
    k, h = len(est), 1e-3
    eye = np.eye(k) * h
    hess = np.empty((k, k))
    for i in range(k):  # 2Q x 2Q finite differences of a cheap function: fine as a loop
        for j in range(k):
            hess[i, j] = (
                nll_ab(est + eye[i] + eye[j])
                - nll_ab(est + eye[i] - eye[j])
                - nll_ab(est - eye[i] + eye[j])
                + nll_ab(est - eye[i] - eye[j])
            ) / (4 * h * h)
    se = np.sqrt(np.diag(np.linalg.inv(hess)))
    return est[:n_items], est[n_items:], se[:n_items], se[n_items:]


#: Discriminations and difficulties of the five items of :func:`calibration_data`.
A_TRUE = np.array([0.8, 1.2, 1.5, 1.0, 2.0])
B_TRUE = np.array([-1.0, -0.3, 0.0, 0.6, 1.2])


def calibration_data(rng, n: int = 1000):
    """Classic calibration data: ``n`` examinees (the "models") answering five 2PL items.

    Parameters
    ----------
    rng : numpy.random.Generator
    n : int
        Examinees, with standard normal abilities.

    Returns
    -------
    y : numpy.ndarray, shape (n, 5)
        The 0/1 answers (items :data:`A_TRUE`, :data:`B_TRUE`).
    dataset : Dataset
        The same answers as a static dataset (source ``calib``, benchmark ``quiz``).
    """
    import pandas as pd

    from bayes_dualeval.data.dataset import Dataset

    theta = rng.normal(size=n)
    p = 1 / (1 + np.exp(-A_TRUE * (theta[:, None] - B_TRUE)))
    y = (rng.random((n, len(A_TRUE))) < p).astype(int)
    frame = pd.DataFrame(
        {
            "model_label": np.repeat([f"examinee{i:04d}" for i in range(n)], len(A_TRUE)),
            "dataset": "quiz",
            "sample_index": np.tile(np.arange(len(A_TRUE)), n),
            "correct": y.ravel(),
        }
    )
    return y, Dataset.from_frames(static=frame, source="calib")
