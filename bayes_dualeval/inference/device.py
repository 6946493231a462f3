"""Choose where JAX runs, before it starts: platform, host devices and compile cache.

These settings only take effect when made before JAX initialises its backends, so the
command line calls :func:`configure` first thing; library code never calls it.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from bayes_dualeval.core.errors import ConfigError
from bayes_dualeval.core.fields import setting

DEVICES = ("auto", "cpu", "gpu")
#: Most bytes the compilation cache keeps on disk: beyond it, the least recently used
#: programs are removed when a command starts (:func:`prune_cache`).
CACHE_MAX_BYTES = 1024**3
#: Seconds the processes of a several-host run wait for each other to join.
JOIN_TIMEOUT_S = 120


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


@dataclasses.dataclass(frozen=True)
class Cluster:
    """One process of a run spread over several processes (hosts), joined by JAX.

    Every process runs the same command with its own ``process_id``; JAX's coordination
    service at ``coordinator`` (``host:port`` of process 0) joins them, after which
    :func:`jax.devices` lists the devices of every process and a sharded run splits
    SVI's and MAP's cells and pairs across all of them. Process 0 writes the run folder.

    Parameters
    ----------
    coordinator : str
        ``host:port`` where process 0 listens (reachable from every process).
    processes : int
        How many processes take part.
    process_id : int
        This process, ``0 <= process_id < processes``.
    """

    coordinator: str
    processes: int
    process_id: int

    def __post_init__(self):
        host, _, port = self.coordinator.rpartition(":")
        if not host or not port.isdigit():
            raise ConfigError(f"the coordinator must be host:port; got {self.coordinator!r}")
        if self.processes < 1:
            raise ConfigError(f"the number of processes must be at least 1; got {self.processes}")
        if not 0 <= self.process_id < self.processes:
            raise ConfigError(
                f"the process id must be between 0 and {self.processes - 1}; got {self.process_id}"
            )


def configure(
    device: str = "auto",
    chains: int = 1,
    *,
    compile_cache: bool = True,
    cluster: Cluster | None = None,
) -> None:
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

    cluster : Cluster, optional
        Join the other processes of a run on several hosts (:func:`jax.distributed.initialize`;
        on a CPU their collectives go through Gloo) before JAX starts its backends.

    Raises
    ------
    ConfigError
        If ``device`` is unknown, ``gpu`` is asked for and JAX finds none, or the
        processes of ``cluster`` cannot be joined.
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
    if cluster is not None:
        join(cluster, device)
    if device == "gpu":
        try:
            gpus = jax.local_devices(backend="gpu")  # this process's (several hosts)
        except RuntimeError:
            gpus = []
        if not gpus:
            raise ConfigError(f"{setting('device', 'gpu')} was asked for, but JAX finds no GPU")
        jax.config.update("jax_default_device", gpus[0])


def join(cluster: Cluster, device: str = "auto") -> None:
    """Join the processes of ``cluster`` (:func:`jax.distributed.initialize`).

    Raises
    ------
    ConfigError
        If the coordination service cannot be reached or the processes do not all join
        within :data:`JOIN_TIMEOUT_S` seconds.
    """
    import jax

    if device != "gpu":  # CPU devices of other processes are reached through Gloo
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    try:
        jax.distributed.initialize(
            coordinator_address=cluster.coordinator,
            num_processes=cluster.processes,
            process_id=cluster.process_id,
            initialization_timeout=JOIN_TIMEOUT_S,
        )
    except (RuntimeError, ValueError) as err:  # XlaRuntimeError is a RuntimeError
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ConfigError(
            f"process {cluster.process_id} of {cluster.processes} could not join the run at "
            f"{cluster.coordinator}: {first}"
        ) from err


def is_writer() -> bool:
    """Whether this process writes the run's output (process 0, or the only process)."""
    import jax

    return jax.process_index() == 0
