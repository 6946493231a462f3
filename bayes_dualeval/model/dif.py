r"""Differential item functioning (DIF): items that are harder for one group of models.

With a per-model grouping (a model family, open or closed weights, models released after
the benchmark: :attr:`ModelConfig.dif <bayes_dualeval.model.config.ModelConfig>` names
the column), each static item ``q`` may shift the log-odds of the models of group ``g``
at the same ability:

.. math:: \eta_{iq} = a_q(\theta_i - b_q) - \delta_{q, g(i)},
   \qquad \delta_{q,\cdot} = H u_q,

``H`` the Helmert basis of the vectors that sum to zero over the ``G`` groups
(:func:`~bayes_dualeval.model.contrasts.helmert_basis`): a shift common to every group is
the item's difficulty, so each item's shifts sum to zero over the groups. The shift
enters inside the link, before any 3PL floor or 4PL ceiling, as a grader's severity does
(:mod:`bayes_dualeval.model.graders`). A positive shift makes the item harder for the
group.

Most items have no DIF, so the ``u`` follow a regularised horseshoe (Piironen and
Vehtari 2017), sampled non-centred:

.. math:: u_{qk} = \tau \tilde\lambda_{qk} z_{qk},\quad z \sim N(0, 1),\quad
   \lambda \sim C^+(0, 1),\quad \tau \sim C^+(0, \mathrm{GLOBAL\_SCALE}),\quad
   \tilde\lambda^2 = \frac{s^2 \lambda^2}{s^2 + \tau^2 \lambda^2},\quad
   s^2 \sim \mathrm{Inv\text{-}Gamma}(\nu/2, \nu\, \mathrm{SLAB\_SCALE}^2 / 2).

A group's shift common to *every* item is its ability (the models' ``theta`` hold it);
the shrinkage prior, not a constraint, tells the two apart: moving every item's shift
costs the prior of all the items that have none, moving the group's abilities costs
little (anchor-free DIF by regularisation). The items are not centred over the items, so
a clean item's shift stays at zero rather than at minus the DIF items' mean.

Models without a group (an empty label) have no shift. With fewer than two groups, or
without the setting, nothing is sampled. Sites (declared in
:mod:`bayes_dualeval.model.parameters`): ``dif_z``, ``dif_lambda`` (``static_item`` x
``dif_contrast``), ``dif_tau``, ``dif_slab``, and ``dif_shift`` (``item`` x
``dif_group``: 0 on arena prompts), which the static likelihood reads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist

from bayes_dualeval.core.errors import InputError
from bayes_dualeval.core.fields import setting
from bayes_dualeval.model.contrasts import helmert_basis

if TYPE_CHECKING:
    from bayes_dualeval.data.dataset import Dataset
    from bayes_dualeval.model.inputs import ModelInputs

#: Prior scale of the horseshoe's global scale ``tau`` (logits): with 200 items and a
#: handful of DIF items, Piironen and Vehtari's ``p0 / (D - p0) / sqrt(n)`` guess is of
#: this order.
GLOBAL_SCALE = 0.1
#: Slab: the scale a large shift is regularised to (logits) and its degrees of freedom.
SLAB_SCALE = 2.0
SLAB_DF = 4.0
#: The site the static likelihood reads.
SITE = "dif_shift"
#: The sites of the DIF prior, raw coordinates and scales included.
SITES = ("dif_z", "dif_lambda", "dif_tau", "dif_slab", SITE)


def model_groups(dataset: Dataset, column: str) -> tuple[np.ndarray, np.ndarray]:
    """The groups of a per-model column and each model's group.

    Parameters
    ----------
    dataset : Dataset
    column : str
        ``family`` (the models' families) or a column of the models' metadata
        (:attr:`~bayes_dualeval.data.dataset.Dataset.model_meta`).

    Returns
    -------
    names : numpy.ndarray of str, shape (G,)
        The groups, sorted.
    group : numpy.ndarray of int32, shape (M,)
        Each model's group, -1 for a model without one.

    Raises
    ------
    InputError
        When the column does not exist, or holds fewer than two groups.
    """
    labels = per_model(dataset, column)
    known = labels != ""
    names, index = np.unique(labels[known], return_inverse=True)
    if len(names) < 2:
        found = f"one group ({names[0]!r})" if len(names) else "no group"
        raise InputError(
            f"DIF by {column!r} needs two groups of models or more; the column holds {found}"
        )
    group = np.full(len(labels), -1, np.int32)
    group[known] = index.ravel()
    return names.astype(str), group


def per_model(dataset: Dataset, column: str) -> np.ndarray:
    """Each model's label in ``column`` (``""`` where it has none); InputError if absent."""
    if column == "family":
        return np.asarray(dataset.model_family, str)
    meta = dataset.model_meta
    if column not in meta:
        have = ", ".join(["family", *meta]) or "none"
        raise InputError(
            f"{setting('dif', column)} names no column of the models' metadata "
            f"(the columns: {have})"
        )
    return np.asarray(meta[column], str)


def check_items(dataset: Dataset, use_static: bool) -> None:
    """Refuse DIF where there is no static item to shift."""
    if not use_static or len(dataset.static_y) == 0:
        raise InputError(
            f"{setting('dif')} compares static items across groups of models, and the "
            "fitted data hold no static labels"
        )


def dif_groups(dataset: Dataset, column: str, use_static: bool) -> dict:
    """The :class:`~bayes_dualeval.model.inputs.ModelInputs` fields of DIF by ``column``.

    ``n_dif_groups`` and ``model_dif_group`` (nothing for an empty ``column``).
    """
    if not column:
        return {}
    check_items(dataset, use_static)
    names, group = model_groups(dataset, column)
    return {"n_dif_groups": len(names), "model_dif_group": jnp.asarray(group, jnp.int32)}


def has_dif(inputs: ModelInputs) -> bool:
    """Whether the static labels carry DIF shifts (two groups or more)."""
    return inputs.n_dif_groups > 1


def dif_parameters(inputs: ModelInputs):
    """Sample the items' DIF shifts, shape (Q, G) with 0 on arena prompts; None without."""
    if not has_dif(inputs):
        return None
    g, q = inputs.n_dif_groups, inputs.n_static_items
    tau = numpyro.sample("dif_tau", dist.HalfCauchy(GLOBAL_SCALE))
    half = SLAB_DF / 2.0
    slab = numpyro.sample("dif_slab", dist.InverseGamma(half, half * SLAB_SCALE**2))
    lam = numpyro.sample("dif_lambda", dist.HalfCauchy(jnp.ones((q, g - 1))).to_event(2))
    z = numpyro.sample("dif_z", dist.Normal(jnp.zeros((q, g - 1)), 1.0).to_event(2))
    lam2 = lam * lam
    reg = jnp.sqrt(slab * lam2 / (slab + tau * tau * lam2))
    u = tau * reg * z
    static = u @ helmert_basis(g).T  # (Q_static, G): each item's shifts sum to zero
    full = jnp.zeros((inputs.n_items, g), static.dtype).at[inputs.static_items].set(static)
    return numpyro.deterministic(SITE, full)


def shift(eta, dif, item, group):
    """The cells' linear predictors ``eta`` shifted by their items' DIF for their groups.

    The one formula of DIF: every reader of a static cell's success probability (the
    model, the checks, the held-out cells, LOO, MAP) applies it here. ``dif`` (Q, G) may
    carry leading axes of draws ((..., Q, G) with ``eta`` (..., S)); ``item`` and
    ``group`` (each cell's item, and its model's group, -1 for none) have shape (S,).
    None leaves ``eta`` as it is. Works on NumPy and JAX arrays.
    """
    if dif is None:
        return eta
    xp = np if isinstance(dif, np.ndarray) else jnp
    g = xp.maximum(group, 0)
    value = dif[..., item, g]
    return eta - xp.where(group >= 0, value, 0.0)


def against_rest(dif: np.ndarray) -> np.ndarray:
    """Each group's shift against the mean of the other groups, from shifts summing to 0.

    ``dif`` (..., G), summing to zero over the last axis: ``G / (G - 1) dif``. With two
    groups, the gap between them (of the log-odds at the same ability).
    """
    g = dif.shape[-1]
    return dif * (g / (g - 1.0))
