"""Warm starts of NUTS: what a fit adapted, kept by site, and mapped onto a new fit.

A leaderboard is refitted when a model or some items are added. The posterior then moves
little, and a fresh warm-up (400 iterations, three quarters of them spent estimating the
metric) re-learns what the previous fit already knew. :func:`adaptation` collects what a
NUTS fit adapted, per site and in the coordinates NUTS samples: the inverse mass matrix
(pooled over chains; the dense block of the global sites kept whole), the step size, and
each site's posterior mean in unconstrained coordinates. :func:`map_site` carries one
site's mean and metric onto the sizes of a new fit, axis by axis:

* an axis labelled by models, items, groups, judges... (``labels``) is matched by label,
  never by position, since a new model shifts the positions of those after it;
* a sum-to-zero (Helmert) axis (``contrast``: the abilities, the judges' and graders'
  effects) is lifted to its labelled axis (``v = H u``; variances ``(H∘H) w``), matched by
  label there, and projected onto the new basis (``u' = H'ᵀ v``): a new model enters the
  mean at the average (0) and the variances at the mean of the others;
* any other axis must keep its size.

Entries that have no counterpart (a new model's coordinates, a new item's, an item whose
centring changed) start at the mean of the site's old means and take the mean of the
site's old metric entries. :class:`WarmStart` is what the sampler is given
(:func:`bayes_dualeval.inference.nuts.run_nuts`): the metric as NumPyro's block dictionary,
the step size, one starting point, and a short warm-up (:data:`WARMUP`) that tunes the
step size only. Everything here is NumPy, and nothing is compiled.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import numpy as np
from numpyro.distributions.transforms import biject_to
from numpyro.handlers import seed, trace

from bayes_dualeval.core.errors import InputError
from bayes_dualeval.inference.metric import adapted_metric
from bayes_dualeval.model.config import ModelConfig
from bayes_dualeval.model.contrasts import helmert_basis
from bayes_dualeval.model.inputs import ModelInputs
from bayes_dualeval.model.joint import dualeval_model

#: Warm-up iterations of a warm-started fit (or the fit's own warm-up, when shorter): the
#: step size only, from the stored one, with the stored metric kept (measured against a
#: short metric window in docs/performance.md, "Warm starts").
WARMUP = 100
#: Sum-to-zero axes and the labelled axes they are contrasts of.
CONTRAST_OF = {
    "contrast": "model",
    "judge_contrast": "judge",
    "family_contrast": "family",
    "grader_contrast": "grader",
}


class WarmStart(NamedTuple):
    """What a warm-started NUTS fit starts from.

    Attributes
    ----------
    metric : dict
        The inverse mass matrix, NumPyro's block dictionary (the dense block of
        :func:`~bayes_dualeval.model.joint.global_sites`, then the other sites sorted by
        name), float32.
    step_size : float
    init : dict of str to numpy.ndarray
        One unconstrained starting point per latent site (every chain starts there).
    warmup : int
        Warm-up iterations.
    adapt_metric : bool
        Whether warm-up adapts the metric too (False: the step size only).
    record : dict
        What was mapped, for ``diagnostics.json``.
    """

    metric: dict
    step_size: float
    init: dict
    warmup: int = WARMUP
    adapt_metric: bool = False
    record: dict = {}


def latent_transforms(inputs: ModelInputs, config: ModelConfig, names=None) -> dict:
    """Each latent site's bijection from unconstrained coordinates (an abstract trace).

    The supports do not depend on the data's values: given ``names`` (the latent sites),
    the answer is kept per specification, so that the fits of a simulation study trace the
    model once.
    """
    key = (config, tuple(sorted(names))) if names is not None else None
    if key is not None and key in _TRANSFORMS:
        return _TRANSFORMS[key]
    supports = {}

    def probe():
        tr = trace(seed(dualeval_model, 0)).get_trace(inputs, config)
        for name, site in tr.items():
            if site["type"] == "sample" and not site.get("is_observed", False):
                supports[name] = site["fn"].support
        return 0

    jax.eval_shape(probe)
    found = {name: biject_to(support) for name, support in supports.items()}
    if key is not None:
        _TRANSFORMS[key] = found
    return found


#: :func:`latent_transforms` by specification and latent sites.
_TRANSFORMS: dict = {}


def adaptation(state, samples: dict, inputs: ModelInputs, config: ModelConfig, chains: int):
    """What a NUTS fit adapted, per site: metric, step size, unconstrained means.

    Parameters
    ----------
    state : numpyro.infer.hmc.HMCState
        The chains' last state (``MCMC.last_state``).
    samples : dict
        The draws, ``(chain, draw, ...)``, constrained.
    inputs : ModelInputs
    config : ModelConfig
    chains : int

    Returns
    -------
    dict
        ``step_size`` (float, mean over chains), ``var`` (site -> the metric's diagonal,
        site-shaped), ``mean`` (site -> unconstrained posterior mean), ``dense_sites``
        (tuple) and ``dense`` (the dense block, over the flattened sites in that order),
        ``centring`` (the items' layouts, ``ModelInputs.centring``).
    """
    metric = adapted_metric(state, chains)
    shapes = {k: np.shape(v)[1:] if chains > 1 else np.shape(v) for k, v in state.z.items()}
    var, dense_sites, dense = {}, (), np.zeros((0, 0), np.float32)
    for names, block in metric.items():
        block = np.asarray(block, np.float64)
        diagonal = np.diag(block) if block.ndim == 2 else block
        offset = 0
        for name in names:
            size = int(np.prod(shapes[name], dtype=np.int64))
            var[name] = diagonal[offset : offset + size].reshape(shapes[name])
            offset += size
        if block.ndim == 2:
            dense_sites, dense = tuple(names), block
    transforms = latent_transforms(inputs, config, shapes)
    mean = {
        name: np.asarray(transforms[name].inv(np.mean(samples[name], axis=(0, 1))), np.float64)
        for name in shapes
    }
    return {
        "step_size": float(np.mean(np.asarray(state.adapt_state.step_size))),
        "var": var,
        "mean": mean,
        "dense_sites": dense_sites,
        "dense": dense,
        "centring": np.asarray(inputs.centring),
    }


class Axis(NamedTuple):
    """One axis of a site, old and new: how entries are matched.

    ``kind`` is ``"labels"`` (``old`` and ``new`` the labels; ``keep`` optionally false
    where a matched label must still count as new), ``"contrast"`` (``old`` and ``new``
    the labels of the axis it is a contrast of) or ``"fixed"`` (``old`` and ``new`` sizes).
    """

    kind: str
    old: object
    new: object
    keep: np.ndarray | None = None


def _index(axis: Axis) -> np.ndarray:
    """Old position of each new label (-1: none)."""
    where = {label: i for i, label in enumerate(np.asarray(axis.old).tolist())}
    index = np.array([where.get(label, -1) for label in np.asarray(axis.new).tolist()], int)
    if axis.keep is not None:
        index[~np.asarray(axis.keep, bool)] = -1
    return index


def _take(x: np.ndarray, index: np.ndarray, k: int, fill: float) -> np.ndarray:
    """``x`` along axis ``k`` at ``index``, ``fill`` where the index is -1."""
    out = np.take(x, np.maximum(index, 0), axis=k)
    shape = [1] * x.ndim
    shape[k] = len(index)
    return np.where((index < 0).reshape(shape), fill, out)


def _along(matrix: np.ndarray, x: np.ndarray, k: int) -> np.ndarray:
    """``matrix`` applied to axis ``k`` of ``x``."""
    return np.moveaxis(np.tensordot(matrix, x, axes=([1], [k])), 0, k)


def map_site(mean, var, axes: list[Axis], *, fill: bool = True):
    """One site's unconstrained mean and metric diagonal, carried onto a new fit's axes.

    Parameters
    ----------
    mean, var : numpy.ndarray
        The old site's mean and the diagonal of its inverse mass matrix (site-shaped).
    axes : list of Axis
        One per axis of the site.
    fill : bool
        Give entries without a counterpart the site's means (False: 0, for the linear map
        of the dense block).

    Returns
    -------
    mean, var : numpy.ndarray
        Shaped as the new site.
    new : numpy.ndarray of bool
        Entries without a counterpart along a labelled axis.

    Raises
    ------
    InputError
        An axis that is neither labelled nor a contrast changed size.
    """
    mean, var = np.asarray(mean, np.float64), np.asarray(var, np.float64)
    mean_fill = float(mean.mean()) if fill and mean.size else 0.0
    var_fill = float(var.mean()) if fill and var.size else 0.0
    new = np.zeros(mean.shape, bool)
    for k, axis in enumerate(axes):
        if axis.kind == "labels":
            index = _index(axis)
            mean = _take(mean, index, k, 0.0)
            var = _take(var, index, k, 0.0)
            new = _take(new, index, k, True)
        elif axis.kind == "contrast":
            index = _index(Axis("labels", axis.old, axis.new))
            h_old, h_new = helmert_basis(len(axis.old)), helmert_basis(len(axis.new))
            h_old, h_new = h_old.astype(np.float64), h_new.astype(np.float64)
            lifted = _along(h_old**2, var, k)  # each label's variance (diagonal part)
            level = lifted.mean(axis=k, keepdims=True) if fill else 0.0
            mean = _along(h_new.T, _take(_along(h_old, mean, k), index, k, 0.0), k)
            lifted = _take(lifted, index, k, 0.0)
            if fill and (index < 0).any():
                shape = [1] * lifted.ndim
                shape[k] = len(index)
                lifted = np.where((index < 0).reshape(shape), level, lifted)
            var = _along((h_new**2).T, lifted, k)
            marked = _take(_along(np.abs(h_old), new.astype(float), k) > 0, index, k, False)
            new = _along(np.abs(h_new.T), marked.astype(float), k) > 0
        elif int(axis.old) != int(axis.new):
            raise InputError(f"an axis of {axis.old} entries now has {axis.new}")
    mean = np.where(new, mean_fill, mean)
    var = np.where(new, var_fill, var)
    return mean, var, new


def site_map(shape_old: tuple, axes: list[Axis]) -> np.ndarray:
    """The linear map of a site's flattened old coordinates onto its new ones (small sites).

    Column ``j`` is :func:`map_site`'s mean of the ``j``-th unit vector, without fill:
    ``L C Lᵀ`` carries a covariance block of the site onto the new fit.
    """
    size = int(np.prod(shape_old, dtype=np.int64))
    columns = []
    for j in range(size):
        unit = np.zeros(size)
        unit[j] = 1.0
        mapped = map_site(unit.reshape(shape_old), np.zeros(shape_old), axes, fill=False)[0]
        columns.append(mapped.ravel())
    return np.stack(columns, axis=1) if columns else np.zeros((0, 0))


def block_metric(var: dict, dense_sites: tuple, dense: np.ndarray) -> dict:
    """NumPyro's block dictionary: the dense block, then every other site's diagonal.

    The other sites are sorted by name, as :func:`~bayes_dualeval.inference.metric.pilot`
    lays them out.
    """
    metric = {}
    if dense_sites:
        metric[tuple(dense_sites)] = np.asarray(dense, np.float32)
    rest = tuple(sorted(set(var) - set(dense_sites)))
    if rest:
        metric[rest] = np.concatenate([np.ravel(var[k]) for k in rest]).astype(np.float32)
    return metric
