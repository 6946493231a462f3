r"""The arena's facets: judges, their biases by model family, and style control.

With one judge and no style covariates an arena cell's *score* is
:math:`\gamma (p_{iq} - 1/2)`: the success probability on the reward scale
(:func:`~bayes_dualeval.model.arena_term.reward_score`), whose differences make the pair
logits (:func:`~bayes_dualeval.model.arena_term.win_probability`) and whose prompt mean
makes the level term. The facets generalise that score, per arena cell ``c`` of model ``i``,
prompt ``q`` and judge ``k``:

.. math:: s_c = \gamma_k (p_{iq} - 1/2) + \beta_{k, f(i)} + x_c^\top \lambda_{\cdot, k},

* ``gamma_judge`` :math:`\gamma_k = \gamma \exp(r_k - \bar r)`: each judge's
  discrimination around the shared ``gamma`` (their geometric mean), the log spreads
  :math:`r` under a shrinkage prior (below), so a judge with few rows borrows strength
  from the others;
* ``severity`` :math:`\delta_k = r'_k - \bar r'` with :math:`r'_k \sim N(0, 1)`: each
  judge's level shift (a fixed prior scale: a judge's level is read from all its prompts),
  read by the level term,
  :math:`\bar z_{qk} \sim N(c_s + \delta_k + \kappa_k \bar s_{qk}, se_{qk})` (sum to zero
  over judges: the sources' intercepts hold the common level); the shift at a success
  probability of one half, so ``judges.csv`` reports instead each judge's predicted mean
  reward on the answers the judges share
  (:func:`~bayes_dualeval.posterior.facet_tables.judge_levels`);
* ``level_scale`` :math:`\kappa_k = L_k / \gamma_k`: the level term reads each judge's
  mean score on a slope of its own, ``level_slope`` :math:`L_k \sim
  \mathrm{LogNormal}(\log\gamma_k, 0.5)`. A prompt's leniency, shared by every judge,
  can enter the model only through its difficulty, so through each judge's
  :math:`\gamma_k p`; read at :math:`\kappa_k = 1`, the level term (far more precise
  than the pairs) pulled the judges' discriminations together, and the judge x family
  biases took up what the pairs then saw (3 of 9 null biases excluded 0 on each of three
  seeds of an arena-heavy simulation; docs/validation.md §11). Sampled as the slope
  itself, which the level pins: a posteriori nearly independent of :math:`\gamma_k` (19
  leapfrog steps per draw against 46 when sampled as the ratio). With the intercepts at
  a success probability of 0 the slopes traded with them (a facets seed failed to
  converge); at one half (:data:`~bayes_dualeval.model.arena_term.SCORE_CENTRE`) they
  do not;
* ``judge_bias`` :math:`\beta_{kf}`: how much more judge ``k`` favours models of family
  ``f`` than the other judges do (self-preference), under a shrinkage prior (below),
  centred over judges within each family and over families within each judge (only
  this interaction is identified: a family's common advantage is ability, a judge's
  common shift is severity);
* ``style_coef`` :math:`\lambda_{mk}`: what judge ``k`` pays per standard deviation of style
  covariate ``m`` (``length``...), covariates standardised over the arena cells, as
  LMArena's style control does for Bradley-Terry.

The sum-to-zero parts are sampled in coordinates that have no redundant direction: the
centred draws :math:`r - \bar r` of ``K`` independent normals are exactly ``H u`` with ``H``
the Helmert basis of the vectors that sum to zero and ``u`` ``K - 1`` independent normals
of the same scale (and the doubly centred biases ``H_J U H_F^T``), so ``gamma_judge_raw``
and ``severity_raw`` have ``K - 1`` entries and ``bias_raw`` ``(K - 1) x (F - 1)``. In
the centred form the mean of the raw draws is read by nothing (it keeps its prior's
width) while the data pin their differences: a direction hundreds of times wider than
the others, which a diagonal metric cannot follow (the step size fell fivefold with three
judges).

*Shrinkage without a scale to sample.* The judges' log spreads and the biases shrink
together: ``u | tau ~ N(0, tau^2 I)`` with a scale ``tau`` learned from all of them. A
sampled ``tau`` made a funnel either way: non-centred (``tau * z``), a planted
self-preference pins the product and leaves a curved ridge in ``(tau, z)``; centred, a
spread near zero leaves ``tau`` falling into the neck (a probe of 12 models, four judges
and a self-preference had 14-53 divergences in 2,400 draws, at the tails of
``tau``). With ``tau^2 ~ InvGamma(DF / 2, DF s^2 / 2)`` the scale integrates out in
closed form: ``u`` is jointly multivariate Student-t (``DF`` degrees of freedom, scale
``s I``), the same hierarchical model with nothing left to funnel (0 divergences on the
same probe). One large bias is allowed by the heavy tail; many small ones shrink
together, because the joint density is not a product over entries.

Pairs are formed within a prompt and a judge (a *unit*), so a pair's logit is
:math:`s_i - s_j`; abilities are then judge-adjusted and style-adjusted. Each part is
present only when the data can identify it: judge parameters with two judges or more of
the arena, biases when at least two judges and two families meet, style coefficients when
covariates are given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist

from bayes_dualeval.core.errors import ConfigError
from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.model import parameters
from bayes_dualeval.model.arena_term import reward_score
from bayes_dualeval.model.contrasts import helmert_basis

if TYPE_CHECKING:
    from bayes_dualeval.model.inputs import ModelInputs

#: Scales of the multivariate Student-t priors (:data:`DF` degrees of freedom) of the
#: judges' log discriminations and of the judge x family biases (pair-logit scale); prior
#: sd of a judge's severity (z-normalised reward scale, before centring) and of a style
#: coefficient per covariate sd.
SPREAD_SCALE, BIAS_SCALE, SEVERITY_SCALE, STYLE_SCALE = 0.3, 0.3, 1.0, 1.0
#: Prior sd of the log of each judge's level scale.
LEVEL_SCALE_SD = 0.5
#: Degrees of freedom of the judges' shrinkage priors.
DF = 3.0
#: The facet values the likelihood reads, and every facet site in the order the model
#: samples them (declared in :mod:`bayes_dualeval.model.parameters`).
VALUES, SITES = parameters.FACET_VALUES, parameters.FACET_SITES


@dataclass(frozen=True)
class Facets:
    """One draw of the facet parameters (None where the data have no such facet).

    Attributes
    ----------
    gamma : jax.Array, shape (J,)
        Each judge's discrimination (the shared ``gamma`` with one judge).
    severity : jax.Array, shape (J,), or None
    level_scale : jax.Array, shape (J,), or None
        Each judge's factor on its units' mean scores in the level term (None: 1).
    bias : jax.Array, shape (J, F), or None
    style : jax.Array, shape (C, J), or None
    """

    gamma: jax.Array
    severity: jax.Array | None = None
    bias: jax.Array | None = None
    style: jax.Array | None = None
    level_scale: jax.Array | None = None

    def level_mean(self, mean_score, judge):
        """What the level term predicts of a unit's mean reward beyond its source's level.

        ``level_scale[..., judge] * mean_score + severity[..., judge]`` (each part only
        where present): the one formula of the level term's facets, read by the fit, the
        anchoring and the judges' table
        (:func:`~bayes_dualeval.posterior.facet_tables.judge_levels`, with leading axes of
        draws).
        """
        out = mean_score
        if self.level_scale is not None:
            out = self.level_scale[..., judge] * out
        return out if self.severity is None else out + self.severity[..., judge]

    @classmethod
    def from_draws(cls, draws, gamma) -> Facets:
        """The facets of posterior draws (a mapping of site values).

        ``gamma`` is the shared discrimination: a scalar for one draw, or shaped (..., 1)
        with the draws' leading axes; it stands for every judge without ``gamma_judge``.
        """
        judge = draws.get("gamma_judge")
        shared = gamma if jnp.ndim(gamma) > 1 else jnp.reshape(gamma, (1,))
        return cls(
            gamma=shared if judge is None else judge,
            severity=draws.get("severity"),
            bias=draws.get("judge_bias"),
            style=draws.get("style_coef"),
            level_scale=draws.get("level_scale"),
        )


@dataclass(frozen=True)
class ArenaFacets:
    """How the arena cells meet the facets (:mod:`bayes_dualeval.model.facets`).

    Attributes
    ----------
    n_judges : int
        Judges of the arena (1 when its cells name fewer than two).
    judges : numpy.ndarray of str, shape (n_judges,)
        Their names, sorted (one judge: its name, or ``""``).
    judge : numpy.ndarray of int, shape (R,)
        Each arena cell's judge (index into ``judges``; 0 with one judge).
    n_families : int
        Families with judge biases (0 unless two judges and two families meet).
    families : numpy.ndarray of str, shape (n_families,)
        Their names, sorted.
    family : numpy.ndarray of int, shape (M,)
        Each model's family index (``n_families`` without one; all 0 without biases).
    style : numpy.ndarray of float, shape (R, C)
        The style covariates, standardised over the arena cells.
    style_mean, style_sd : numpy.ndarray, shape (C,)
        The standardisation (kept by the run, in ``style.csv``).
    """

    n_judges: int
    judges: np.ndarray
    judge: np.ndarray
    n_families: int
    families: np.ndarray
    family: np.ndarray
    style: np.ndarray
    style_mean: np.ndarray
    style_sd: np.ndarray

    @property
    def present(self) -> bool:
        """Whether the arena has facets (several judges, or style covariates)."""
        return self.n_judges > 1 or self.style.shape[1] > 0


def arena_facets(dataset: Dataset, use_arena: bool) -> ArenaFacets:
    """The arena facets of ``dataset`` (none when ``use_arena`` is False).

    Raises
    ------
    ConfigError
        When a style covariate does not vary over the arena cells.
    """
    n_cells = len(dataset.arena_z) if use_arena else 0
    used, judge = np.unique(
        np.asarray(dataset.arena_judge[:n_cells], np.int64), return_inverse=True
    )
    judges = np.asarray(dataset.judges)[used].astype(str) if n_cells else np.array([""])
    n_judges = len(judges) if len(judges) > 1 else 1
    judge = judge.ravel() if n_judges > 1 else np.zeros(n_cells, np.int64)
    names = np.asarray(dataset.model_family)
    seen = np.unique(names[np.asarray(dataset.arena_model[:n_cells])])
    families = seen[seen != ""]
    n_families = len(families) if n_judges > 1 and len(families) > 1 else 0
    families = families[:n_families].astype(str)
    family = np.zeros(dataset.n_models, np.int64)
    if n_families:
        family = np.searchsorted(families, names)
        family[~np.isin(names, families)] = n_families
    width = len(dataset.style) if use_arena else 0
    raw = np.asarray(dataset.arena_style, np.float64)[:n_cells, :width].reshape(n_cells, width)
    # without arena cells: no covariates, and no statistic of an empty column
    mean, sd = (raw.mean(axis=0), raw.std(axis=0)) if n_cells else (raw.sum(axis=0),) * 2
    flat = [c for c, v in zip(dataset.style, sd, strict=False) if not v > 0]
    if flat:
        raise ConfigError(f"style covariate {flat[0]!r} does not vary over the arena cells")
    style = (raw - mean) / np.where(sd > 0, sd, 1.0)
    return ArenaFacets(n_judges, judges, judge, n_families, families, family, style, mean, sd)


def has_facets(inputs: ModelInputs) -> bool:
    """Whether arena scores need the facets (several judges, or style covariates)."""
    return inputs.n_judges > 1 or inputs.arena_style.shape[1] > 0


def has_bias(inputs: ModelInputs) -> bool:
    """Whether judge x family biases are identified: two judges and two families at least."""
    return inputs.n_judges > 1 and inputs.n_families > 1


def facet_parameters(inputs: ModelInputs, gamma, *, severity: bool) -> Facets | None:
    """Sample the facets the data identify (see the module); None without facets.

    Parameters
    ----------
    inputs : ModelInputs
    gamma : jax.Array
        The shared discrimination (``gamma``), already sampled.
    severity : bool
        Whether the level term is in the model (the only reader of the severities).
    """
    if not has_facets(inputs):
        return None
    judges = inputs.n_judges
    gamma_k = jnp.reshape(gamma, (1,))
    sev = bias = style = scale = None
    if judges > 1:
        over_judges = helmert_basis(judges)
        raw = numpyro.sample("gamma_judge_raw", _student((judges - 1,), SPREAD_SCALE))
        gamma_k = numpyro.deterministic("gamma_judge", gamma * jnp.exp(over_judges @ raw))
        if severity:
            # a fixed scale: every judge's level is read from all its prompts
            raw = numpyro.sample("severity_raw", _standard((judges - 1,), SEVERITY_SCALE))
            sev = numpyro.deterministic("severity", over_judges @ raw)
            # each judge's level reads its mean score on a slope of its own (see the
            # module), sampled as the slope itself: the level pins it, so it is nearly
            # independent of the pairs' gamma_k a posteriori
            slope = numpyro.sample(
                "level_slope", dist.LogNormal(jnp.log(gamma_k), LEVEL_SCALE_SD).to_event(1)
            )
            scale = numpyro.deterministic("level_scale", slope / gamma_k)
    if has_bias(inputs):
        over_families = helmert_basis(inputs.n_families)
        shape = (judges - 1, inputs.n_families - 1)
        raw = numpyro.sample("bias_raw", _student(shape, BIAS_SCALE))
        bias = numpyro.deterministic("judge_bias", over_judges @ raw @ over_families.T)
    n_style = inputs.arena_style.shape[1]
    if n_style:
        style = numpyro.sample("style_coef", _standard((n_style, judges), STYLE_SCALE))
    return Facets(gamma=gamma_k, severity=sev, bias=bias, style=style, level_scale=scale)


def _student(shape, scale):
    """A centred multivariate Student-t of ``shape``, one site: :data:`DF`, ``scale`` I.

    The marginal of ``u | tau ~ N(0, tau^2 I)`` with ``tau^2 ~ InvGamma(DF / 2, DF
    scale^2 / 2)``: the hierarchical shrinkage with its scale integrated out.
    """
    size = int(np.prod(shape))
    joint = dist.MultivariateStudentT(DF, jnp.zeros(size), scale * jnp.eye(size))
    if len(shape) == 1:
        return joint
    return dist.TransformedDistribution(joint, dist.transforms.ReshapeTransform(shape, (size,)))


def _standard(shape, scale=1.0):
    """Independent ``Normal(0, scale)`` of ``shape``, one site."""
    return dist.Normal(0.0, scale).expand(list(shape)).to_event(len(shape))


def cell_scores(p, facets: Facets, inputs: ModelInputs):
    """Each arena cell's score ``s_c`` (see the module), shape (R,), from ``p`` (R,)."""
    family = inputs.model_family[inputs.arena_model]
    return scores(p, facets, inputs.arena_judge, family, inputs.arena_style)


def scores(p, facets: Facets, judge, family, style):
    """Scores ``s_c`` of cells with success probabilities ``p`` (NumPy or JAX, shape (R,)).

    ``judge`` and ``family`` index the facets' judges and families per cell (``family``
    equal to the number of families for a model without one, which has no bias), ``style``
    holds the standardised covariates (R, C). The one formula of a cell's score: the fit,
    the pointwise log likelihood and the checks' replicates all compute it here. The
    facets may carry leading axes of draws (``gamma`` (..., J), ``bias`` (..., J, F),
    ``style`` (..., C, J)), with ``p`` (..., R): the scores are then (..., R).
    """
    score = reward_score(p, jnp.take(facets.gamma, judge, axis=-1))
    if facets.bias is not None:
        # a model without a family (index n_families) has no bias: a zero column
        bias = facets.bias
        padded = jnp.concatenate([bias, bias[..., :1] * 0.0], axis=-1)
        score = score + padded[..., judge, family]
    if facets.style is not None:
        per_cell = jnp.swapaxes(jnp.take(facets.style, judge, axis=-1), -1, -2)  # (..., R, C)
        score = score + jnp.sum(style * per_cell, axis=-1)
    return score
