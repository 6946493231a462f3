r"""The person-fit statistic :math:`l_z^*` of a model's static labels: the formula, once.

Used for the run's own models (:mod:`~bayes_dualeval.checks.model_fit`) and for new models
measured against a bank (:mod:`bayes_dualeval.measure.person_fit`, which explains the
statistic: Drasgow, Levine and Williams' standardised log likelihood with Snijders'
correction for an estimated ability). With :math:`p` the success probability of each
label, :math:`p'` its derivative in ability, :math:`w = \operatorname{logit} p` and
:math:`r = p' / (p (1 - p))`, a model's

.. math::

    l_z^* = \frac{\sum (k - n p)(w - c\, r)}{\sqrt{\sum n p (1 - p)(w - c\, r)^2}},
    \qquad c = \frac{\sum n p' w}{\sum n p' r},

summed over its cells (``k`` correct of ``n`` answers), is close to standard normal when
the labels follow the model, and small when they are less likely than it predicts.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

#: Fewest static labels for a person-fit p-value.
MIN_FIT_ITEMS = 20


def lz_star(
    k: np.ndarray,
    n: np.ndarray,
    p: np.ndarray,
    slope: np.ndarray,
    model: np.ndarray,
    per_model: Callable[[np.ndarray], np.ndarray],
) -> np.ndarray:
    """:math:`l_z^*` of every model in every draw.

    Parameters
    ----------
    k, n : numpy.ndarray, shape (C,) or (1, C)
        Correct answers and answers of each cell.
    p, slope : numpy.ndarray, shape (S, C)
        Each cell's success probability and its derivative in ability, per draw.
    model : numpy.ndarray of int, shape (C,)
        Each cell's model.
    per_model : callable
        Sums a (S, C) array over each model's cells, giving (S, K).

    Returns
    -------
    numpy.ndarray, shape (S, K)
        NaN for a model whose cells carry no information.
    """
    p = np.clip(p, 1e-12, 1 - 1e-12)
    w = np.log(p) - np.log1p(-p)
    r = slope / (p * (1 - p))
    with np.errstate(invalid="ignore", divide="ignore"):
        c = per_model(n * slope * w) / per_model(n * slope * r)  # (S, K)
        v = w - np.nan_to_num(c)[:, model] * r
        return per_model((k - n * p) * v) / np.sqrt(per_model(n * p * (1 - p) * v**2))
