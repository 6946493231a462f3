"""Data parallelism for SVI and MAP: the likelihood's cells and pairs split across devices.

The model reads its data from :class:`~bayes_dualeval.model.inputs.ModelInputs`. Placing the
per-cell arrays (static cells, decisive pairs) with a :class:`jax.sharding.NamedSharding`
split along their one axis, and every other array (parameters' supports: models, items,
arena cells) whole on every device, is all it takes: the compiled programs that read them
are partitioned by XLA (GSPMD), each device evaluates its share of the terms, and the
sums over cells and pairs become all-reductions. The model and the samplers are the same
code on one CPU, on several host devices
(``XLA_FLAGS=--xla_force_host_platform_device_count=N``) and on several GPUs; nothing is
written for one device kind only.

Arrays are padded to a multiple of the device count with terms that contribute exactly
nothing (:func:`~bayes_dualeval.inference.buckets.padded_to`), so the answers are those of
one device up to the order of floating-point sums.

NUTS does not split data: its chains already run one per device
(:mod:`~bayes_dualeval.inference.chains`).
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from bayes_dualeval.core.errors import ConfigError
from bayes_dualeval.core.fields import setting
from bayes_dualeval.inference.buckets import padded_to
from bayes_dualeval.model.inputs import ModelInputs, fields_of

#: The arrays with one entry per static cell or decisive pair: split across devices.
SPLIT = fields_of("static_cell") + fields_of("pair")
#: Name of the mesh axis the data are split along.
AXIS = "data"


def data_devices(shards: int) -> list:
    """``shards`` devices of JAX's default backend: the first ones of each process.

    One process: its first ``shards`` devices. A run over several processes
    (:class:`~bayes_dualeval.inference.device.Cluster`): ``shards / processes`` devices of
    each, so that every process holds its share of the data.

    Raises
    ------
    ConfigError
        If there are fewer, saying how to make more host devices on a CPU, or the
        processes cannot share ``shards`` equally.
    """
    devices = jax.devices()
    count = jax.process_count()
    if count > 1:
        if shards % count:
            raise ConfigError(
                f"{setting('shards', shards)} cannot be shared equally by {count} processes"
            )
        own = [[d for d in devices if d.process_index == p] for p in range(count)]
        per = shards // count
        short = [p for p, ds in enumerate(own) if len(ds) < per]
        if short:  # the first global devices would leave these processes without data
            raise ConfigError(
                f"{setting('shards', shards)} needs {per} device(s) in each of {count} "
                f"processes; process(es) {', '.join(map(str, short))} have fewer"
            )
        return [d for ds in own for d in ds[:per]]
    if shards > len(devices):
        raise ConfigError(
            f"{setting('shards', shards)} asks for {shards} devices, but JAX sees "
            f"{len(devices)} ({devices[0].platform}); on a CPU the command line makes as "
            "many host devices as shards, and a Python session calls "
            "numpyro.set_host_device_count(N) before JAX starts"
        )
    return devices[:shards]


def shard(inputs: ModelInputs, devices) -> ModelInputs:
    """``inputs`` with cells and pairs split across ``devices``, the rest on each of them.

    Parameters
    ----------
    inputs : ModelInputs
    devices : sequence of jax.Device
        One device: ``inputs`` unchanged.

    Returns
    -------
    ModelInputs
        Padded to a multiple of ``len(devices)`` cells and pairs (masked cells, pairs of
        weight 0), the :data:`SPLIT` arrays sharded along :data:`AXIS`, every other array
        replicated.
    """
    n = len(devices)
    if n <= 1:
        return inputs
    s, p = inputs.static_y.shape[0], inputs.pair_w.shape[0]
    inputs = padded_to(inputs, -(-s // n) * n, -(-p // n) * n)  # the next multiples of n
    mesh = Mesh(np.asarray(devices), (AXIS,))
    split, whole = NamedSharding(mesh, PartitionSpec(AXIS)), NamedSharding(mesh, PartitionSpec())
    placed = {
        f.name: jax.device_put(getattr(inputs, f.name), split if f.name in SPLIT else whole)
        for f in dataclasses.fields(inputs)
        if isinstance(getattr(inputs, f.name), jax.Array)
    }
    return dataclasses.replace(inputs, **placed)


def replicated_like(inputs: ModelInputs):
    """A function placing an array whole on every device ``inputs`` are sharded over.

    A state carried from one compiled call to the next (MAP's inner solutions) comes back
    with whatever layout the compiler chose; placed back as it went in, the next call is
    the same program instead of a new compilation. Identity for unsharded inputs.
    """
    sharding = inputs.static_y.sharding
    if not isinstance(sharding, NamedSharding) or len(sharding.device_set) <= 1:
        return lambda x: x
    whole = NamedSharding(sharding.mesh, PartitionSpec())
    return lambda x: jax.device_put(x, whole)
