r"""The ability each model brings to each item: one per model, per domain, or per dimension.

Every likelihood term, the anchored level term and the checks read a cell's ability through
:func:`ability_at`, so the three ways of having abilities share one code path:

* one ability per model: the abilities themselves, an array of shape (M,);
* an ability per item domain (``abilities = "domain"``): an :class:`AbilityMap` whose table
  has one column per domain plus the overall ability, and whose ``columns`` are each item's
  column (integers);
* ``K`` ability dimensions (``dims = K``): an :class:`AbilityMap` whose table is the
  abilities (M, K) and whose ``columns`` are each item's loadings on the simplex (floats,
  shape (Q, K)); the item sees :math:`\theta_i \cdot w_q`.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np


class AbilityMap(NamedTuple):
    """Abilities per column and the columns each item reads (a JAX pytree).

    Attributes
    ----------
    table : array, shape (M, C)
        Abilities per model and column (domain, or dimension).
    columns : array, shape (Q,) of int, or (Q, C) of float
        Each item's column, or its weights over the columns (summing to one).
    """

    table: jax.Array | np.ndarray
    columns: jax.Array | np.ndarray

    def at(self, model, item):
        """The ability of each cell ``(model[k], item[k])``."""
        if np.issubdtype(self.columns.dtype, np.integer):
            return self.table[model, self.columns[item]]
        return (self.table[model] * self.columns[item]).sum(axis=-1)


def ability_at(theta, model, item):
    """The ability of each cell ``(model[k], item[k])`` (NumPy or JAX arrays).

    ``theta`` is the abilities, shape (M,), or an :class:`AbilityMap`.
    """
    if isinstance(theta, AbilityMap):
        return theta.at(model, item)
    return theta[model]


def abilities_of(draws, item_domain):
    """The abilities the items see in one draw (a mapping of site values).

    ``theta``, or the :class:`AbilityMap` of ``theta_domain`` (each item's domain
    ``item_domain``) or of ``theta_dims`` and the items' ``loading``.
    """
    if "theta_dims" in draws:
        return AbilityMap(draws["theta_dims"], draws["loading"])
    if "theta_domain" in draws:
        return domain_map(draws["theta"], draws["theta_domain"], item_domain)
    return draws["theta"]


def domain_map(theta, theta_domain, item_domain) -> AbilityMap:
    """The ability map of domain abilities (NumPy or JAX arrays).

    Parameters
    ----------
    theta : array, shape (M,)
        The overall abilities, which items without a domain read.
    theta_domain : array, shape (M, K)
        Abilities per domain.
    item_domain : array of int, shape (Q,)
        Each item's domain (``K`` for an item without one).
    """
    xp = jnp if isinstance(theta_domain, jax.Array) else np
    return AbilityMap(xp.concatenate([theta_domain, theta[..., None]], axis=-1), item_domain)
