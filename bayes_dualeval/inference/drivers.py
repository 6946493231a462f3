"""NUTS drivers shared by fits of one design, so that their sampler is traced once.

Each fit otherwise builds a NUTS driver of its own
(:func:`~bayes_dualeval.inference.nuts.make_mcmc`) and traces its sampler anew; the
compiled program itself then comes from the persistent compilation cache, but tracing and
lowering still take seconds a fit. Within
:func:`shared_drivers`, a fit whose specification, settings (all but the seed) and input
shapes match an earlier one's, and that starts warm-up from the identity metric (small
data: :func:`~bayes_dualeval.inference.metric.worth_it`), runs the earlier fit's driver:
the data are arguments of its programs (:mod:`~bayes_dualeval.inference.chains`), so
nothing is traced again. Rounds after the first (draw-more, divergence restarts) build
their own drivers as usual. Used by simulation-based calibration, which fits many data sets
of one design.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager

import jax
import numpy as np

from bayes_dualeval.inference.chains import release_programs

#: The drivers kept while :func:`shared_drivers` is active (None when it is not).
_SHARED: dict | None = None


@contextmanager
def shared_drivers():
    """While active, fits of the same shapes share their first round's driver.

    The kept drivers' programs are released when the block ends; a nested block shares the
    outer one's drivers.
    """
    global _SHARED
    if _SHARED is not None:
        yield
        return
    _SHARED = {}
    try:
        yield
    finally:
        kept, _SHARED = _SHARED, None
        for mcmc in kept.values():
            release_programs(mcmc)


def driver(what, inputs, make: Callable):
    """The driver for ``what`` (hashable: specification and settings) on ``inputs``' shapes.

    Outside :func:`shared_drivers`, ``make()``; inside, the kept one (made the first time),
    set to start a fresh warm-up.
    """
    if _SHARED is None:
        return make()
    leaves, tree = jax.tree_util.tree_flatten(inputs)
    shapes = tuple((np.shape(x), str(getattr(x, "dtype", type(x)))) for x in leaves)
    key = (what, tree, shapes)
    if key not in _SHARED:
        _SHARED[key] = make()
    mcmc = _SHARED[key]
    mcmc.post_warmup_state = None  # a continuation of the last fit may have set it
    return mcmc


def is_shared(mcmc) -> bool:
    """Whether ``mcmc`` is kept by :func:`shared_drivers` (its programs stay until the end)."""
    return _SHARED is not None and any(m is mcmc for m in _SHARED.values())


def kept() -> int:
    """How many drivers :func:`shared_drivers` keeps now (0 outside it)."""
    return 0 if _SHARED is None else len(_SHARED)
