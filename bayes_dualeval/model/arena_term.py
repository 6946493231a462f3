r"""The arena likelihood, written once: the formulas every reader of the arena calls.

An arena observation is read through one chain of formulas. The joint model in each of
its layouts (arena cells and pair lists, :mod:`~bayes_dualeval.model.likelihood`; the
prompts x model-pairs matrix, :mod:`~bayes_dualeval.model.arena_matrix`), MAP's item
likelihood and the pointwise log likelihood for LOO (both through
:func:`~bayes_dualeval.model.likelihood.arena_loglik`), the posterior predictive checks,
``predict``, and the measurement of new models (``score``'s and ``adaptive``'s grid
kernels, the prompts' information) call the functions here instead of writing them again;
they differ only in how they lay out the cells and pairs (``tests/test_arena_term.py``
evaluates each against these functions on the same inputs).

1. A cell's **score** :math:`s` (:meth:`ArenaTerm.score`): :math:`\gamma (p_{iq} - 1/2)`
   under the pairs and reward likelihoods (:func:`reward_score`), the ability
   :math:`\theta_i` under DualEval's Bradley-Terry baseline, and with several judges or
   style covariates :math:`\gamma_k (p_{iq} - 1/2) + \beta_{k,f(i)} + x^\top\lambda_k`
   (:func:`~bayes_dualeval.model.facets.scores`). Pairs and rewards read only differences
   of scores; the level term reads their mean, so its intercepts are the level at a
   success probability of one half (see :data:`SCORE_CENTRE`).
2. A pair's **logit** :math:`x = s_i - s_j` and **win probability** :math:`\sigma(x)`
   (:func:`win_probability`; two Gaussian rewards', :func:`reward_win_probability`).
3. A decisive pair with soft target :math:`t` and weight :math:`w`
   (:func:`pair`): :math:`w[t \log\sigma(x) + (1 - t)\log\sigma(-x)] = w\log\sigma(x) -
   w(1 - t)\,x`. The first part (:func:`pair_nonlinear`) costs one log-sigmoid per pair;
   the second (:func:`pair_linear`) is linear in the scores, so every layout sums its
   coefficients :math:`w(1 - t)` per cell before the parameters arrive
   (``ModelInputs.pair_linear``). Its curvature in :math:`x` does not depend on
   :math:`t` (:func:`pair_curvature`: the information of a comparison).
4. A **both-bad** pair (both answers bad): :math:`w \log(1 - \sigma(\eta))` for each side
   (:func:`both_bad`), weighted by ``lambda_bb`` instead of ``lambda_arena``.
5. A **reward** :math:`z \sim N(\bar z_q + \gamma(p - \bar p_q), \sigma)`
   (:func:`reward_mean`, :func:`gaussian`); the fit integrates each prompt's offset out
   under a flat prior, which adds :func:`integrated_offset` per prompt.
6. The **level term**: a unit's mean reward :math:`\bar z` around its source's intercept
   (plus its judge's severity) and its cells' mean score, with the standard error of a
   mean (:func:`level`): under the pairs a plug-in from the data, under the reward
   likelihood the model's own ``sigma / sqrt(n)`` (:func:`mean_se`), which makes the
   rewards and their level one Gaussian density around the source's intercept.

The weights of the parts (``lambda_arena``, ``lambda_bb``) and which likelihood a
specification uses are the :class:`ArenaTerm` its model answers
(:attr:`bayes_dualeval.model.spec.DualEvalModel.arena`). Every function accepts NumPy or
JAX arrays and returns the same kind (:mod:`~bayes_dualeval.model.links`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special

from bayes_dualeval.core.errors import ConfigError
from bayes_dualeval.model import links

#: The arena likelihoods: distilled soft-target pairs, the rewards themselves, and
#: DualEval's Bradley-Terry baseline on the abilities.
KINDS = ("pairs", "reward", "bt")
_LOG_2PI = math.log(2.0 * math.pi)


#: The success probability at which a cell's score is 0. Pairs and rewards read only
#: differences of scores, so it changes nothing there; the level term reads a unit's mean
#: score, so its intercept ``c_s`` (and a judge's severity) is the level at this
#: probability. At 0, where the data rarely are, the intercept traded with ``gamma`` (and
#: with each judge's level slope) along a ridge: on the judge study's facets seed 1 a level
#: slope per judge failed to converge with the intercept at 0 (31 divergences after a
#: retune) and converged with it at one half (0 divergences, 18 leapfrog steps per draw;
#: docs/validation.md section 11).
SCORE_CENTRE = 0.5


@dataclass(frozen=True)
class ArenaTerm:
    """Which arena likelihood a specification uses, and its weights.

    Attributes
    ----------
    kind : str
        ``"pairs"`` (also ``pairs-full``: the same term, other pair weights), ``"reward"``
        or ``"bt"``.
    power : float
        ``lambda_arena``, the weight the specification sets.
    factor : float or None
        The calibrated factor (``arena_weight = "calibrated"``; 1 under ``fixed``, None while
        a calibrated weight is not yet computed from the data).
    both_bad_weight : float
        ``lambda_bb``: the multiplier of the both-bad pairs.
    """

    kind: str
    power: float = 1.0
    both_bad_weight: float = 0.0
    factor: float | None = 1.0

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown arena likelihood {self.kind!r}; one of {KINDS}")

    @classmethod
    def from_config(cls, config) -> ArenaTerm:
        """The term of a :class:`~bayes_dualeval.model.config.ModelConfig`."""
        if config.mode == "bt":
            kind = "bt"
        else:
            kind = "reward" if config.arena_likelihood == "reward" else "pairs"
        factor = 1.0
        if config.arena_weight == "calibrated" and kind == "pairs":
            factor = config.arena_weight_factor
        return cls(kind, float(config.lambda_arena), float(config.lambda_bb), factor)

    @property
    def weight(self) -> float:
        """The multiplier of the pairs, rewards and level term: ``lambda_arena * factor``.

        Raises
        ------
        ConfigError
            When the weight is calibrated and not yet computed from the data
            (:func:`bayes_dualeval.model.arena_weight.calibrate` computes it).
        """
        if self.factor is None:
            raise ConfigError(
                "the arena weight is calibrated from the data and has not been computed "
                "yet: fit the data, or give the specification its arena_weight_factor"
            )
        if self.factor == 1.0:
            return self.power
        return self.power * self.factor

    @property
    def reads_pairs(self) -> bool:
        """Whether the term reads distilled pairs (``pairs``, ``bt``) or rewards."""
        return self.kind != "reward"

    @property
    def has_items(self) -> bool:
        """Whether prompts have item parameters (all but Bradley-Terry)."""
        return self.kind != "bt"

    def score(self, value, gamma=1.0):
        """A cell's score without facets: :func:`reward_score`, or the ability under ``bt``.

        Parameters
        ----------
        value : array_like
            Success probabilities ``p`` (abilities under ``bt``).
        gamma : array_like
            The reward scale (broadcast; ignored under ``bt``).
        """
        return value if self.kind == "bt" else reward_score(value, gamma)

    def score_difference(self, value, gamma=1.0):
        """A difference of success probabilities (or a derivative) on the score scale.

        ``gamma value``, or ``value`` itself under ``bt``: the score is affine in ``p``
        (:func:`reward_score`), so a difference or a derivative of scores is not the score
        of the difference.
        """
        return value if self.kind == "bt" else gamma * value


def reward_score(p, gamma):
    """A success probability's score on the reward scale: ``gamma (p - SCORE_CENTRE)``."""
    return gamma * (p - SCORE_CENTRE)


def win_probability(s_first, s_second):
    """``P(first beats second) = sigmoid(s_first - s_second)`` from the two cells' scores."""
    return links.sigmoid(s_first - s_second)


def reward_win_probability(s_first, s_second, sigma):
    """``P(z_first > z_second)`` of two rewards with Gaussian noise ``sigma`` around scores.

    ``Phi((s_first - s_second) / (sqrt(2) sigma))``: the reward likelihood's win probability.
    """
    x = (s_first - s_second) / (math.sqrt(2.0) * sigma)
    if links.namespace(x) is np:
        return special.ndtr(x)
    import jax.scipy.special as jsp

    return jsp.ndtr(x)


def pair(x, t, w):
    """A decisive pair's soft-target log likelihood ``w [t log s(x) + (1 - t) log s(-x)]``.

    Equal to :func:`pair_nonlinear` plus :func:`pair_linear`.
    """
    return pair_nonlinear(x, w) + pair_linear(x, t, w)


def pair_nonlinear(x, w):
    """The part of :func:`pair` that is not linear in the logit: ``w log sigmoid(x)``."""
    return w * links.log_sigmoid(x)


def linear_weight(t, w):
    """The coefficient of ``-x`` in :func:`pair`: ``w (1 - t)``, summed per cell by layouts."""
    return w * (1.0 - t)


def pair_linear(x, t, w):
    """The part of :func:`pair` linear in the logit: ``-w (1 - t) x``."""
    return -linear_weight(t, w) * x


def pair_curvature(x, w):
    """``-d^2/dx^2`` of :func:`pair`: ``w sigmoid(x) sigmoid(-x)``, whatever the target."""
    return w * links.sigmoid(x) * links.sigmoid(-x)


def both_bad(eta, w):
    """A both-bad pair's term for one of its cells: ``w log(1 - sigmoid(eta))``."""
    return w * links.log_sigmoid(-eta)


def both_bad_curvature(eta, w):
    """``-d^2/d eta^2`` of :func:`both_bad`: ``w sigmoid(eta) sigmoid(-eta)``."""
    return w * links.sigmoid(eta) * links.sigmoid(-eta)


def reward_mean(p, pbar, gamma, zbar=None):
    """Predicted normalised reward of arena cells: ``zbar + gamma (p - pbar)``.

    The prompt's mean reward ``zbar`` plus the cell's success probability ``p`` relative
    to the prompt's mean probability ``pbar``, on the reward scale ``gamma`` (arguments
    broadcast). Without ``zbar``: the prediction of the centred reward ``z - zbar``.
    """
    deviation = gamma * (p - pbar)
    return deviation if zbar is None else zbar + deviation


def gaussian(resid, scale):
    """Normal log density of residuals ``resid`` with standard deviation ``scale``."""
    return -0.5 * (resid / scale) ** 2 - links.namespace(resid, scale).log(scale) - 0.5 * _LOG_2PI


def gaussian_curvature(scale):
    """``-d^2/d resid^2`` of :func:`gaussian`: ``1 / scale^2``."""
    return 1.0 / scale**2


def integrated_offset(n, sigma):
    """What integrating a prompt's offset out adds to its ``n`` rewards' Gaussian terms.

    ``log integral prod_r N(z_r; c + mu_r, sigma) dc - sum_r log N(z_r; zbar + mu_r - mubar,
    sigma) = log sigma + log(2 pi) / 2 - log(n) / 2`` under a flat prior on ``c``.
    """
    xp = links.namespace(n, sigma)
    return xp.log(sigma) + 0.5 * _LOG_2PI - 0.5 * xp.log(n)


def mean_se(n, sigma):
    """The standard error of a mean of ``n`` rewards of noise ``sigma``: ``sigma / sqrt(n)``.

    The reward likelihood's level term reads it (:func:`level`), so that the level term and
    :func:`integrated_offset` add up to the Gaussian density of a prompt's rewards around its
    source's intercept, with no offset of its own: ``log prod_r N(z_r; c_s + mu_r, sigma)``
    (a generative density, which simulation-based calibration can check).
    """
    xp = links.namespace(n, sigma)
    return sigma / xp.sqrt(xp.maximum(n, 1.0))


def level(zbar, shift, mean_score, se):
    """A unit's level term: ``zbar ~ Normal(shift + mean_score, se)``.

    ``shift`` is its source's intercept ``c_s`` (plus its judge's severity), ``mean_score``
    the mean score of its cells (``gamma (pbar - 1/2)`` without facets), ``se`` the standard error
    of a mean of its rewards (:func:`bayes_dualeval.model.pilot.prompt_level`).
    """
    return gaussian(zbar - shift - mean_score, se)
