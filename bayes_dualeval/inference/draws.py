"""What every sampler returns, and the clock that tells compilation from sampling.

Each sampler returns a :class:`Draws`: arrays shaped ``(chain, draw, ...)`` for every
sampled and deterministic site, sampler statistics, and timings with compilation measured
apart from sampling (through JAX's compile-time monitoring events, so the split is exact
even though compilation happens inside the first call).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field

import jax
import numpy as np


@dataclass
class Draws:
    """Posterior draws and what the sampler reports about them.

    Attributes
    ----------
    samples : dict of str to numpy.ndarray
        Each site's draws, shape ``(chain, draw, *site_shape)``.
    stats : dict of str to numpy.ndarray
        Sampler statistics, shape ``(chain, draw)`` (NUTS: ``diverging``, ``tree_depth``,
        ``n_steps``, ``acceptance_rate``, ``step_size``, ``energy``, ``lp``).
    timings : dict of str to float
        Seconds: ``compile`` and ``sampling`` (plus ``total``).
    info : dict
        Sampler-specific facts (SVI: losses, steps, converged; MAP: iterations, status).
    adaptation : dict or None
        NUTS: what the chains adapted, for a later warm start
        (:func:`bayes_dualeval.inference.warm.adaptation`).
    """

    samples: dict
    stats: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)
    info: dict = field(default_factory=dict)
    adaptation: dict | None = None


class _CompileClock:
    """Accumulates JAX compile-time events, and persistent-cache hits and misses, while active."""

    _EVENTS = (
        "/jax/core/compile/jaxpr_to_mlir_module_duration",
        "/jax/core/compile/backend_compile_duration",
    )
    _HIT, _MISS = "/jax/compilation_cache/cache_hits", "/jax/compilation_cache/cache_misses"

    def __init__(self):
        self.seconds = 0.0
        self.active = False
        self.hits = self.misses = 0

    def __call__(self, event, duration, **kwargs):
        if self.active and event in self._EVENTS:
            self.seconds += duration

    def count(self, event, **kwargs):
        """Count the persistent compilation cache's answers (an event listener)."""
        if self.active:
            self.hits += event == self._HIT
            self.misses += event == self._MISS

    def reset(self):
        self.seconds, self.hits, self.misses = 0.0, 0, 0


_CLOCK = _CompileClock()
jax.monitoring.register_event_duration_secs_listener(_CLOCK)
jax.monitoring.register_event_listener(_CLOCK.count)


def cache_verdict(hits: int, misses: int) -> str:
    """What JAX's persistent compilation cache did for a block of work.

    ``"hit"``: every program compiled was read from the cache; ``"cold"``: none was;
    ``"partial"``: some were; ``"off"``: the cache was not asked (disabled, or nothing was
    compiled).
    """
    if hits and misses:
        return "partial"
    if hits:
        return "hit"
    return "cold" if misses else "off"


@contextlib.contextmanager
def timed(timings: dict):
    """Record ``compile``, ``sampling`` and ``total`` seconds of the block into ``timings``.

    Also ``compile_cache``: :func:`cache_verdict` of the persistent compilation cache over
    the block, with ``cache_hits`` and ``cache_misses`` (programs read from it, and
    programs compiled and written to it).
    """
    _CLOCK.reset()
    _CLOCK.active = True
    start = time.perf_counter()
    try:
        yield
    finally:
        total = time.perf_counter() - start
        _CLOCK.active = False
        timings["compile"] = round(_CLOCK.seconds, 3)
        timings["sampling"] = round(max(total - _CLOCK.seconds, 0.0), 3)
        timings["total"] = round(total, 3)
        timings["compile_cache"] = cache_verdict(_CLOCK.hits, _CLOCK.misses)
        timings["cache_hits"], timings["cache_misses"] = _CLOCK.hits, _CLOCK.misses


def to_numpy(tree: dict) -> dict:
    """A flat dict of JAX arrays as NumPy arrays (one transfer from the device)."""
    return {k: np.asarray(v) for k, v in jax.device_get(tree).items()}
