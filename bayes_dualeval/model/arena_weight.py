r"""The arena pairs' weight calibrated from the data: a sandwich (magnitude-adjusted) weight.

The soft-target pairs (:func:`~bayes_dualeval.model.arena_term.pair`) are a
pseudo-likelihood: a prompt's pairs share its rewards, and soft targets
:math:`t = \sigma(z_i - z_j)` scatter around the model's win probability less (or more) than
Bernoulli outcomes would. A pseudo-likelihood :math:`\ell` raised to a power :math:`w` gives a
posterior whose covariance for the abilities is about :math:`(w H)^{-1}`, with :math:`H` the
negative Hessian of :math:`\ell`; the covariance of the estimate itself is the sandwich
:math:`H^{-1} J H^{-1}`, with :math:`J` the variance of the score. The magnitude-adjusted
weight (Ribatet, Cooley and Davison 2012; Pauli, Racugno and Ventura 2011)

.. math:: w = \frac{p}{\operatorname{tr}(H^{-1} J)}

matches the two in trace, :math:`p` being the number of parameters. For a true likelihood
:math:`J = H` and :math:`w = 1`; soft targets that vary less than Bernoulli outcomes give
:math:`w > 1`, pairs that repeat one another's evidence :math:`w < 1`.

Here the parameters are the :math:`M - 2` directions of the abilities the pairs inform
(:func:`contrast_basis`: not their common level, not their scale) and :math:`\log\gamma`,
with each prompt's ``b`` and ``log a`` profiled out (:func:`sandwich`); :math:`H` and the
per-prompt scores are those of the pairs alone (no both-bad or level term) at a pilot
point, and :math:`J` is the variance over **prompts** of each prompt's efficient score,
times the number of prompts: prompts
are the independent units, the pairs within a prompt are not, and the judges of a prompt
score the same answers, so a prompt with several judges is one unit. The factor multiplies
the specification's ``lambda_arena`` (:class:`~bayes_dualeval.model.arena_term.ArenaTerm`);
the fit computes it once, records it with the specification (``arena_weight_factor``) and
every reader of the run applies it through the model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

#: The calibrated factor is kept within ``[1 / FACTOR_LIMIT, FACTOR_LIMIT]``.
FACTOR_LIMIT = 20.0
#: Curvature added to each prompt's ``b`` and ``log a`` when they are profiled out.
ITEM_RIDGE = 1.0
#: Directions whose pair curvature is at most this share of the largest are left out of
#: the factor: a parameter the pairs do not read (the common ``gamma`` where each judge has
#: its own), or one along which the pilot point is not a maximum of the pairs alone.
EIGEN_TOL = 1e-6


@dataclass(frozen=True)
class SandwichWeight:
    """A calibrated weight and what it was computed from.

    Attributes
    ----------
    factor : float
        ``p / tr(H^-1 J)``, clipped to :data:`FACTOR_LIMIT`: the multiplier of
        ``lambda_arena``.
    raw : float
        The factor before clipping (``nan`` where it could not be computed).
    parameters : int
        ``p``: the directions the factor is taken over: the abilities' contrasts and ``log
        gamma``, less any along which the pairs have no positive curvature.
    units : int
        The prompts the score variance is taken over.
    note : str
        Why the factor is 1, where it is, or which directions were left out ("" otherwise).
    """

    factor: float
    raw: float
    parameters: int
    units: int
    note: str = ""

    def to_dict(self) -> dict:
        """The record written to ``diagnostics.json["arena_weight"]``."""
        return {
            "factor": self.factor,
            "raw": None if not np.isfinite(self.raw) else self.raw,
            "parameters": self.parameters,
            "units": self.units,
            "note": self.note,
        }


def contrast_basis(theta: np.ndarray) -> np.ndarray:
    """An orthonormal basis of the abilities' directions the pairs inform, shape (n, n - 2).

    The vectors of length ``n`` orthogonal to the common level (ones) and to the centred
    abilities ``theta`` themselves: stretching the abilities (and the difficulties) while
    shrinking the discriminations changes no success probability, so with the items
    profiled out the pairs carry no information along ``theta`` (only the priors set the
    scale).
    """
    theta = np.asarray(theta, np.float64)
    n = len(theta)
    known = np.stack([np.ones(n), theta - theta.mean()], axis=1)
    q, _ = np.linalg.qr(known, mode="complete")
    return q[:, 2:]


def sandwich_factor(scores: np.ndarray, hessian: np.ndarray) -> SandwichWeight:
    """The magnitude-adjusted factor from per-unit scores and the negative Hessian.

    Parameters
    ----------
    scores : numpy.ndarray, shape (U, p)
        Each independent unit's score (gradient of its log pseudo-likelihood), units
        without data left out.
    hessian : numpy.ndarray, shape (p, p)
        The negative Hessian of the summed log pseudo-likelihood.

    Returns
    -------
    SandwichWeight
        ``p / tr(H^-1 J)`` with ``J = U * Var(scores)`` (the units' scores centred on their
        mean, so a score that does not vanish at the pilot point, as in a joint fit where
        the static labels also move the abilities, is not counted as variance), over the
        eigen-directions of ``H`` with positive curvature (above :data:`EIGEN_TOL` of the
        largest; ``p`` counts those): for a positive definite ``H`` this is every direction
        and the plain formula.
    """
    units, p = scores.shape
    if units < 2 or p < 1:
        return SandwichWeight(1.0, float("nan"), p, units, "fewer than two prompts")
    centred = scores - scores.mean(axis=0)
    j = centred.T @ centred * units / (units - 1)
    h = 0.5 * (hessian + hessian.T)
    if not (np.isfinite(h).all() and np.isfinite(j).all()):
        return SandwichWeight(1.0, float("nan"), p, units, "singular pair information")
    curvature, vectors = np.linalg.eigh(h)
    informed = curvature > EIGEN_TOL * max(float(curvature.max()), 0.0)
    if not informed.any():
        return SandwichWeight(1.0, float("nan"), p, units, "singular pair information")
    # tr(H^-1 J) over the directions the pairs inform: sum_k v_k' J v_k / lambda_k
    kept = vectors[:, informed]
    ratio = float(np.sum(np.einsum("pk,pr,rk->k", kept, j, kept) / curvature[informed]))
    if not np.isfinite(ratio) or ratio <= 0:
        return SandwichWeight(1.0, float("nan"), p, units, "singular pair information")
    n = int(informed.sum())
    raw = n / ratio
    factor = float(np.clip(raw, 1.0 / FACTOR_LIMIT, FACTOR_LIMIT))
    note = "" if n == p else f"{p - n} of {p} directions without positive pair curvature left out"
    return SandwichWeight(factor, raw, n, units, note)


def sandwich(model, point: Mapping, inputs) -> SandwichWeight:
    """The calibrated weight of ``model``'s arena pairs at a pilot ``point``.

    The global parameters are the abilities' contrasts and ``log gamma``; each prompt's
    own ``b`` and ``log a`` are profiled out prompt by prompt (each prompt's score is its
    efficient score, ``U_g - H_gi H_ii^-1 U_i``, and ``H`` the profile information), with
    :data:`ITEM_RIDGE` added to each prompt's item curvature, about what the items' prior
    adds.

    Parameters
    ----------
    model : DualEvalModel
        The specification (its pairs likelihood, facets and pair weights).
    point : mapping of str to array
        One value of every site the arena likelihood reads (``theta``, ``b``, ``a``,
        ``gamma`` and the facets' sites where the arena has them), e.g. a posterior mode.
    inputs : ModelInputs
        The fitted data.

    Returns
    -------
    SandwichWeight
    """
    pairs_only = type(model)(
        model.config.replace(lambda_bb=0.0, arena_level="none", arena_weight="fixed")
    )
    point = {k: jnp.asarray(v) for k, v in point.items()}
    theta0 = point["theta"]
    has_a = "a" in model.item_sites and "a" in point
    has_gamma = "gamma" in point and np.size(point["gamma"]) == 1
    basis = jnp.asarray(contrast_basis(np.asarray(theta0)), theta0.dtype)
    d = basis.shape[1]
    p = d + int(has_gamma)

    def derivatives(point, basis, inputs):
        # every derivative in one compiled program: run eagerly, each of them compiled
        # every primitive of the pairs likelihood on its own (hundreds of small programs)
        theta0, b0 = point["theta"], point["b"]
        la0 = jnp.log(point["a"]) if has_a else jnp.zeros_like(b0)

        def per_prompt(g, b, la):
            draws = {**point, "theta": theta0 + basis @ g[:d], "b": b}
            if has_a:
                draws["a"] = jnp.exp(la)
            if has_gamma:
                draws["gamma"] = point["gamma"] * jnp.exp(g[d])
            return pairs_only.arena_loglik(draws, inputs)

        def total(g, b, la):
            return per_prompt(g, b, la).sum()

        g0 = jnp.zeros(p, theta0.dtype)
        args = (g0, b0, la0)
        grad_items = jax.grad(total, argnums=(1, 2))
        # the item Hessian is block diagonal (a prompt's b and a enter its own terms
        # only): products with vectors of ones read each prompt's block
        ones = jnp.ones_like(b0)
        _, (hbb, hab) = jax.jvp(lambda b: grad_items(g0, b, la0), (b0,), (ones,))
        _, (_, haa) = jax.jvp(lambda la: grad_items(g0, b0, la), (la0,), (ones,))
        return {
            "scores": jax.jacfwd(per_prompt)(*args),  # (Q, p)
            "h_gg": -jax.hessian(total)(*args),
            "u": grad_items(*args),
            "hbb": hbb,
            "hab": hab,
            "haa": haa,
            "cross": jax.jacfwd(lambda g: grad_items(g, b0, la0))(g0),  # d2 l / d item d g
        }

    got = jax.jit(derivatives)(point, basis, inputs)
    got = jax.tree.map(lambda x: np.asarray(x, np.float64), got)
    scores, h_gg, (u_b, u_a), (hbb, hab, haa) = (
        got["scores"], got["h_gg"], got["u"], (got["hbb"], got["hab"], got["haa"])
    )  # fmt: skip
    cross_b, cross_a = (-x for x in got["cross"])  # (Q, p) each: -d2 l / d item d g
    used = np.asarray(inputs.prompt_n) > 0
    k = 2 if has_a else 1
    block = np.zeros((len(used), k, k))
    block[:, 0, 0] = -np.asarray(hbb, np.float64)
    u_items = u_b[:, None]
    cross = cross_b[:, :, None]
    if has_a:
        block[:, 0, 1] = block[:, 1, 0] = -np.asarray(hab, np.float64)
        block[:, 1, 1] = -np.asarray(haa, np.float64)
        u_items = np.stack([u_b, u_a], axis=1)
        cross = np.stack([cross_b, cross_a], axis=2)  # (Q, p, k)
    block = block + ITEM_RIDGE * np.eye(k)
    solve = np.linalg.solve(
        block[used], np.concatenate([u_items[used, :, None], np.swapaxes(cross[used], 1, 2)], 2)
    )
    efficient = scores[used] - np.einsum("qpk,qk->qp", cross[used], solve[:, :, 0])
    profile = h_gg - np.einsum("qpk,qkr->pr", cross[used], solve[:, :, 1:])
    return sandwich_factor(efficient, profile)
