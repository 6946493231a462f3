"""Start JAX for the user: host devices on a CPU, the platform and the compile cache.

The command line calls :func:`~bayes_dualeval.inference.device.configure` before JAX
starts; a notebook user should not have to. :func:`start` does it the first time the
Python API needs JAX, and when someone else started JAX first with too few host devices
it warns once, saying the fix.
"""

from __future__ import annotations

import sys
import warnings

from bayes_dualeval.core.errors import PerformanceWarning

#: Host devices made on a CPU at the least when the API starts JAX: the default number of
#: NUTS chains, so that a later fit with the defaults runs its chains in parallel.
LEAST_HOST_DEVICES = 4

_warned: set[int] = set()


def started() -> bool:
    """Whether JAX has initialised its backends (after which devices are fixed)."""
    if "jax" not in sys.modules:
        return False
    from jax._src import xla_bridge

    return bool(xla_bridge.backends_are_initialized())


def _host_devices_set() -> int | None:
    """The host device count already asked of XLA (``XLA_FLAGS``), or None."""
    import os
    import re

    found = re.search(
        r"xla_force_host_platform_device_count=(\d+)", os.environ.get("XLA_FLAGS", "")
    )
    return int(found.group(1)) if found else None


def start(device: str = "auto", wanted: int = 1, *, compile_cache: bool = True) -> None:
    """Make sure JAX runs with ``wanted`` devices, configuring it if it has not started.

    Parameters
    ----------
    device : {"auto", "cpu", "gpu"}
        Where JAX runs (see :func:`~bayes_dualeval.inference.device.configure`).
    wanted : int
        Devices the coming computation runs on in parallel (NUTS chains, or SVI's and
        MAP's shards). On a CPU at least :data:`LEAST_HOST_DEVICES` are made.
    compile_cache : bool
        Keep compiled programs on disk for the next process.

    Warns
    -----
    PerformanceWarning
        Once per number of devices: JAX was started before (by other code in the same
        process) with fewer CPU devices than ``wanted``, with the fix.
    """
    from bayes_dualeval.inference.device import configure

    if not started():
        if _host_devices_set() is None:  # nobody configured JAX: this is the first start
            configure(device, max(wanted, LEAST_HOST_DEVICES), compile_cache=compile_cache)
        return  # else the command line (or the user) configured it and it has not started
    import jax

    have = jax.local_device_count()
    if jax.process_count() > 1:  # a run over several hosts: the command line set them
        return
    if jax.default_backend() == "cpu" and have < wanted and wanted not in _warned:
        _warned.add(wanted)
        warnings.warn(
            f"JAX was started before bayes_dualeval could configure it, with {have} CPU "
            f"device(s) for {wanted} parallel chains or shards, so they run one after "
            "another (several times slower). Fix: restart the kernel and call "
            "bayes_dualeval.fit before any other JAX work, or run "
            f"numpyro.set_host_device_count({wanted}) first thing",
            PerformanceWarning,
            stacklevel=3,
        )
