"""Choose where JAX runs, before it starts: platform, host devices and compile cache.

These settings only take effect when made before JAX initialises its backends, so the
command line calls :func:`configure` first thing; library code never calls it.
"""

from __future__ import annotations

import os
from pathlib import Path

from bayes_dualeval.core.errors import ConfigError
from bayes_dualeval.core.fields import setting

DEVICES = ("auto", "cpu", "gpu")
#: Most bytes the compilation cache keeps on disk: beyond it, the least recently used
#: programs are removed when a command starts (:func:`prune_cache`).
CACHE_MAX_BYTES = 1024**3


def cache_dir() -> Path:
    """Folder of JAX's persistent compilation cache (``$BAYES_DUALEVAL_CACHE`` or ~/.cache)."""
    env = os.environ.get("BAYES_DUALEVAL_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "bayes-dualeval" / "jax"


def prune_cache(path: Path, max_bytes: int) -> int:
    """Remove the least recently used files of the cache folder until it holds ``max_bytes``.

    JAX bounds its cache itself only with the optional ``filelock`` package installed, so
    the bound is kept here, once per command. Files are ordered by their last access (or
    modification, where access times are not kept); a file another process removes first
    is skipped.

    Returns
    -------
    int
        Bytes removed.
    """
    files = []
    for f in path.iterdir():
        try:
            st = f.stat()
        except OSError:
            continue
        if f.is_file():
            files.append((max(st.st_atime, st.st_mtime), st.st_size, f))
    total = sum(size for _, size, _ in files)
    removed = 0
    for _, size, f in sorted(files, key=lambda t: t[0]):
        if total - removed <= max_bytes:
            break
        try:
            f.unlink()
        except OSError:
            continue
        removed += size
    return removed


def configure(device: str = "auto", chains: int = 1, *, compile_cache: bool = True) -> None:
    """Set the JAX platform, the number of host devices and the compilation cache.

    Parameters
    ----------
    device : {"auto", "cpu", "gpu"}
        ``auto`` uses a GPU when JAX finds one, else the CPU.
    chains : int
        On the CPU, this many host devices are made so that NUTS chains run in parallel.
    compile_cache : bool
        Keep compiled programs on disk (:func:`cache_dir`, at most
        :data:`CACHE_MAX_BYTES`) so that a second run on data of the same shapes skips
        compilation (``BAYES_DUALEVAL_CACHE=off`` or ``fit --no-compile-cache`` disables
        it).

    Raises
    ------
    ConfigError
        If ``device`` is unknown, or ``gpu`` is asked for and JAX finds none.
    """
    if device not in DEVICES:
        raise ConfigError(f"device must be one of {', '.join(DEVICES)}; got {device!r}")
    import numpyro

    if device == "cpu":
        numpyro.set_platform("cpu")
    if device in ("cpu", "auto"):
        numpyro.set_host_device_count(max(1, chains))
    import jax

    if compile_cache and os.environ.get("BAYES_DUALEVAL_CACHE", "").lower() != "off":
        path = cache_dir()
        try:
            path.mkdir(parents=True, exist_ok=True)
            jax.config.update("jax_compilation_cache_dir", str(path))
            jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
            jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
            prune_cache(path, CACHE_MAX_BYTES)
        except OSError:
            pass  # a read-only home: run without the cache
    if device == "gpu":
        try:
            gpus = jax.devices("gpu")
        except RuntimeError:
            gpus = []
        if not gpus:
            raise ConfigError(f"{setting('device', 'gpu')} was asked for, but JAX finds no GPU")
        jax.config.update("jax_default_device", gpus[0])
