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
    """

    samples: dict
    stats: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)
    info: dict = field(default_factory=dict)


class _CompileClock:
    """Accumulates JAX compile-time events while active."""

    _EVENTS = (
        "/jax/core/compile/jaxpr_to_mlir_module_duration",
        "/jax/core/compile/backend_compile_duration",
    )

    def __init__(self):
        self.seconds = 0.0
        self.active = False

    def __call__(self, event, duration, **kwargs):
        if self.active and event in self._EVENTS:
            self.seconds += duration


_CLOCK = _CompileClock()
jax.monitoring.register_event_duration_secs_listener(_CLOCK)


@contextlib.contextmanager
def timed(timings: dict):
    """Record ``compile``, ``sampling`` and ``total`` seconds of the block into ``timings``."""
    _CLOCK.seconds, _CLOCK.active = 0.0, True
    start = time.perf_counter()
    try:
        yield
    finally:
        total = time.perf_counter() - start
        _CLOCK.active = False
        timings["compile"] = round(_CLOCK.seconds, 3)
        timings["sampling"] = round(max(total - _CLOCK.seconds, 0.0), 3)
        timings["total"] = round(total, 3)


def to_numpy(tree: dict) -> dict:
    """A flat dict of JAX arrays as NumPy arrays (one transfer from the device)."""
    return {k: np.asarray(v) for k, v in jax.device_get(tree).items()}
