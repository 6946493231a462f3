"""Keep a long-lived process from running out of memory maps with compiled programs.

Every fit compiles its own programs (the model is closed over the data's shapes, and
NumPyro's initialisation alone compiles hundreds of small ones), and XLA keeps each of them
mapped in memory until JAX's caches are cleared. Linux limits the number of maps a process
may hold (``vm.max_map_count``, usually 65,530); a process that fits many models in turn (a
notebook loop, a validation study, the test suite) reaches it after a few dozen fits and
then dies inside XLA ("LLVM compilation error: Cannot allocate memory", or a segmentation
fault), losing everything it held. :func:`release_if_crowded` clears the caches first.
"""

from __future__ import annotations

#: Share of ``vm.max_map_count`` above which compiled programs are released. One large fit
#: maps up to about 30,000 regions, so a quarter of the usual limit leaves room for it.
MAP_SHARE = 0.25


def memory_maps() -> tuple[int, int] | None:
    """Memory maps this process holds and the kernel's limit (None where unreadable)."""
    try:
        with open("/proc/self/maps", "rb") as fh:
            used = sum(1 for _ in fh)
        with open("/proc/sys/vm/max_map_count") as fh:
            limit = int(fh.read())
    except (OSError, ValueError):
        return None
    return used, limit


def release_if_crowded(share: float = MAP_SHARE, *, unknown: bool = False) -> bool:
    """Clear JAX's compiled programs when the process holds more than ``share`` of its maps.

    Parameters
    ----------
    share : float
        Fraction of ``vm.max_map_count``.
    unknown : bool
        What to do where the count cannot be read (not Linux): release (True) or not.

    Returns
    -------
    bool
        Whether the programs were released (later calls compile them again).
    """
    maps = memory_maps()
    if (maps is None and not unknown) or (maps is not None and maps[0] <= share * maps[1]):
        return False
    import jax

    jax.clear_caches()
    return True
