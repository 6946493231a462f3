r"""Graders of static labels: a judge's severity on the pass rate.

Static labels graded by several judges (an LLM judge deciding whether an answer is
correct, a human and a model grading the same answers) are cells of (model, item,
judge). A lenient grader passes more answers than a strict one at the same ability, so
each grader ``g`` shifts the log-odds of the labels it gave:

.. math:: \eta_c = a_q (\theta_i - b_q) - \delta_{g(c)}, \qquad \delta = H u,
   \quad u \sim N(0, \mathrm{SEVERITY\_SCALE}^2 I_{G - 1}),

``H`` the Helmert basis of the vectors that sum to zero
(:func:`~bayes_dualeval.model.contrasts.helmert_basis`): the severities sum to zero over
graders (the items' difficulties hold the common level), each exactly as a centred draw
of independent ``N(0, SEVERITY_SCALE)`` would. A positive severity is a strict grader.
The severity enters inside the link, before any 3PL floor or 4PL ceiling.

The graders are the judges that graded static cells (a judge that scored arena rewards
only is not one). With fewer than two, nothing is sampled and the static likelihood is
the plain IRT model. Sites ``grader_severity_raw`` (``grader_contrast``) and
``grader_severity`` (``grader``), declared in :mod:`bayes_dualeval.model.parameters`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpyro
import numpyro.distributions as dist

from bayes_dualeval.model.contrasts import helmert_basis

if TYPE_CHECKING:
    from bayes_dualeval.data.dataset import Dataset
    from bayes_dualeval.model.inputs import ModelInputs

#: Prior sd of a grader's severity before centring, in logits of the pass rate.
SEVERITY_SCALE = 1.0
#: The site the static likelihood reads.
SITE = "grader_severity"


def graders(dataset: Dataset) -> tuple[np.ndarray, np.ndarray]:
    """The graders of ``dataset``'s static cells and each cell's grader.

    Returns
    -------
    names : numpy.ndarray of str, shape (G,)
        The judges that graded static cells, in the order of ``dataset.judges``; one
        empty name when there is one grader or none.
    grader : numpy.ndarray of int32, shape (S,)
        Each static cell's grader (all 0 with one grader).
    """
    judge = np.asarray(dataset.static_judge, np.int64)
    used, index = np.unique(judge, return_inverse=True)
    if len(used) < 2:
        return np.array([""]), np.zeros(len(judge), np.int32)
    return np.asarray(dataset.judges)[used].astype(str), index.ravel().astype(np.int32)


def has_graders(inputs: ModelInputs) -> bool:
    """Whether the static labels come from two graders or more."""
    return inputs.n_graders > 1


def grader_parameters(inputs: ModelInputs):
    """Sample the graders' severities (shape (G,)), or None with one grader."""
    if not has_graders(inputs):
        return None
    g = inputs.n_graders
    prior = dist.Normal(0.0, SEVERITY_SCALE).expand([g - 1]).to_event(1)
    raw = numpyro.sample("grader_severity_raw", prior)
    return numpyro.deterministic(SITE, helmert_basis(g) @ raw)


def shift(eta, severity, grader):
    """The cells' linear predictors ``eta`` shifted by their graders' severities.

    The one formula of a grader's effect: every reader of a static cell's success
    probability (the model, the checks, the held-out cells, LOO, MAP) applies it here.
    ``severity`` may carry leading axes of draws ((..., G) with ``eta`` (..., S)); None
    leaves ``eta`` as it is.
    """
    if severity is None:
        return eta
    return eta - severity[..., grader]


def difficulty(b, a, severity):
    """The difficulty that carries a grader's severity: ``b + severity / a``.

    The same shift as :func:`shift`, written on the item instead of on the linear
    predictor (``a (theta - b) - severity = a (theta - (b + severity / a))``), for the
    readers that take item parameters rather than linear predictors (the measure stage:
    scoring, short forms, adaptive tests). ``a`` None is the Rasch slope 1; the arrays
    broadcast.
    """
    return b + severity / (1.0 if a is None else a)
