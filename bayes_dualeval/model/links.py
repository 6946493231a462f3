r"""Item response functions: the one place where a cell's success probability is computed.

Every IRT variant shares the linear predictor :math:`\eta_{iq} = a_q (\theta_i - b_q)`
(``a_q = 1`` under 1PL) and maps it to a probability of success:

======  ============================================================
1PL     :math:`p = \sigma(\theta_i - b_q)`
2PL     :math:`p = \sigma(\eta)`
3PL     :math:`p = c_q + (1 - c_q)\,\sigma(\eta)` (guessing floor ``c``)
4PL     :math:`p = c_q + (d_q - c_q)\,\sigma(\eta)` (upper asymptote ``d``)
======  ============================================================

The model (JAX, inside the log density), the posterior predictive checks (NumPy, over
many draws), the report's item curves and the simulator all call these functions, so a
new link is added here and nowhere else. Functions accept NumPy or JAX arrays and return
the same kind. The floor and ceiling apply to static questions only: an arena prompt has
no answer to guess, so its ``c`` is 0 and its ``d`` is 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special

#: The IRT links, simplest first (the order of choices everywhere).
LINKS = ("1pl", "2pl", "3pl", "4pl")
#: Every per-item parameter a link may have, in table order: difficulty, discrimination,
#: guessing floor, upper asymptote.
ITEM_PARAMETERS = ("b", "a", "c", "d")


@dataclass(frozen=True)
class Link:
    """What an IRT variant adds to the 1PL: which item parameters it samples.

    Attributes
    ----------
    name : str
        ``1pl`` ... ``4pl``.
    slope : bool
        Items have a discrimination ``a`` (else ``a = 1``).
    floor : bool
        Static items have a guessing floor ``c``.
    ceiling : bool
        Static items have an upper asymptote ``d``.
    """

    name: str
    slope: bool
    floor: bool
    ceiling: bool

    @property
    def item_sites(self) -> tuple[str, ...]:
        """Per-item quantities the posterior holds, in table order."""
        has = {"b": True, "a": self.slope, "c": self.floor, "d": self.ceiling}
        return tuple(name for name in ITEM_PARAMETERS if has[name])

    @property
    def asymptotes(self) -> bool:
        """Whether ``p`` is bounded away from 0 or 1 (3PL, 4PL)."""
        return self.floor or self.ceiling


def get(name: str) -> Link:
    """The :class:`Link` named ``name`` (``1pl`` ... ``4pl``)."""
    if name not in LINKS:
        raise ValueError(f"unknown IRT link {name!r}; one of {', '.join(LINKS)}")
    k = LINKS.index(name) + 1
    return Link(name=name, slope=k >= 2, floor=k >= 3, ceiling=k >= 4)


def _xp(x):
    """NumPy for NumPy arrays and Python numbers, else ``jax.numpy`` (traceable under jit).

    JAX is imported only when a JAX array arrives, so reading data, the simulator and the
    command line's start do not pay for it.
    """
    if isinstance(x, np.ndarray | float | int | np.generic):
        return np
    import jax.numpy as jnp

    return jnp


def namespace(*values):
    """NumPy when every value is a NumPy array or a number, else ``jax.numpy``."""
    for value in values:
        if _xp(value) is not np:
            return _xp(value)
    return np


def eta(theta, b, a=None):
    """Linear predictor ``a (theta - b)`` (``theta - b`` when ``a`` is None), broadcast."""
    diff = theta - b
    return diff if a is None else a * diff


def sigmoid(x):
    """Logistic function, precise in both tails (``scipy.special.expit``, ``jax.nn``)."""
    if _xp(x) is np:
        return special.expit(x)
    import jax

    return jax.nn.sigmoid(x)


def log_sigmoid(x):
    """``log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|))``, stable for any ``x``.

    On NumPy arrays ``scipy.special.log_expit``, the same formula in one pass.
    """
    if _xp(x) is np:
        return special.log_expit(x)
    from bayes_dualeval.model.jax_ops import log_sigmoid as jax_log_sigmoid

    return jax_log_sigmoid(x)


def softplus(x):
    """``log(1 + exp(x)) = x - log_sigmoid(x)``, stable for any ``x``."""
    return x - log_sigmoid(x)


def probability(eta_, c=None, d=None):
    """Success probability ``c + (d - c) sigmoid(eta)``; ``c`` 0 and ``d`` 1 when None."""
    p = sigmoid(eta_)
    if c is None and d is None:
        return p
    lo = 0.0 if c is None else c
    hi = 1.0 if d is None else d
    return lo + (hi - lo) * p


def log_probabilities(eta_, c=None, d=None):
    """``(log p, log(1 - p))`` of :func:`probability`, computed without cancellation.

    With a floor and ceiling, ``log p = logaddexp(log c, log(d - c) + log sigmoid(eta))``
    and ``log(1 - p) = logaddexp(log(1 - d), log(d - c) + log sigmoid(-eta))``.
    """
    up, down = log_sigmoid(eta_), log_sigmoid(-eta_)
    if c is None and d is None:
        return up, down
    xp = _xp(eta_)
    lo = xp.zeros_like(eta_) if c is None else c
    hi = xp.ones_like(eta_) if d is None else d
    with np.errstate(divide="ignore"):  # log 0 = -inf (no floor, no ceiling) is intended
        log_span = xp.log(hi - lo)
        log_p = xp.logaddexp(xp.log(lo), log_span + up)
        log_q = xp.logaddexp(xp.log1p(-hi), log_span + down)
    return log_p, log_q


def bernoulli_loglik(y, eta_, c=None, d=None):
    """Log likelihood of binary labels ``y`` under :func:`probability`, elementwise.

    Without asymptotes this is ``y eta - softplus(eta)``, one transcendental pair per cell.
    """
    if c is None and d is None:
        return y * eta_ + log_sigmoid(-eta_)
    log_p, log_q = log_probabilities(eta_, c, d)
    return y * log_p + (1.0 - y) * log_q


def bernoulli_score(y, eta_, c=None, d=None):
    """Score of binary labels ``y`` in ``eta`` and its expected information, elementwise.

    ``(y - p) p' / (p (1 - p))`` and ``p'^2 / (p (1 - p))`` for :func:`probability`, with
    ``p' = (d - c) s (1 - s)`` and ``s = sigmoid(eta)``; without asymptotes ``y - p`` and
    ``p (1 - p)``. ``1 - p`` is computed as ``(1 - d) + (d - c) sigmoid(-eta)``, without
    cancellation.
    """
    s, s_minus = sigmoid(eta_), sigmoid(-eta_)
    if c is None and d is None:
        return y - s, s * s_minus
    lo = 0.0 if c is None else c
    hi = 1.0 if d is None else d
    p, q = lo + (hi - lo) * s, (1.0 - hi) + (hi - lo) * s_minus
    slope = (hi - lo) * s * s_minus
    return (y - p) * slope / (p * q), slope * slope / (p * q)
