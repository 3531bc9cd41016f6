# SPDX-License-Identifier: Apache-2.0
"""podfeed for JAX: a host batch as global jax.Arrays.

Every host of a pod runs one podfeed.Loader (host_index and num_hosts come
from jax.process_index()/process_count() when jax is imported first) and
turns each batch into global arrays sharded over the pod's devices:

    import jax, podfeed, podfeed.jax
    mesh = jax.sharding.Mesh(jax.devices(), ("data",))
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("data"))
    for batch in podfeed.Loader(paths, spec, per_core_batch=32,
                                cores=jax.local_device_count()):
        arrays = podfeed.jax.global_arrays(batch, sharding)   # name -> jax.Array
        state = train_step(state, arrays)

jax is not a Debian package, so podfeed's tests check only what this
helper hands to JAX (shapes, dtypes, C-contiguity, the host's rows in core
order), not JAX itself.
"""

import numpy as _np


def local_data(batch, name):
    """This host's rows of feature name, as jax.make_array_from_process_local_data
    wants them: [cores * per_core_batch, len], C-contiguous, core 0's rows
    first.  A view of the loader's memory when the cores' rows are adjacent
    (one core, or one feature); otherwise one copy, made here (the loader
    lays each core's features out together, so the same feature of two
    cores is a block apart)."""
    a = batch[name]
    cores, rows, length = a.shape
    if a.flags.c_contiguous:
        return a.reshape(cores * rows, length)
    return _np.ascontiguousarray(a).reshape(cores * rows, length)


def global_shape(batch, name, num_hosts):
    """The global array's shape: [num_hosts * cores * per_core_batch, len]."""
    cores, rows, length = batch[name].shape
    return (num_hosts * cores * rows, length)


def global_arrays(batch, sharding, num_hosts=None):
    """{name: jax.Array} of the pod's global batch, sharded by sharding along
    its first axis, built with jax.make_array_from_process_local_data from
    local_data(batch, name) on every host.  num_hosts: jax.process_count()
    when None."""
    import jax

    hosts = jax.process_count() if num_hosts is None else num_hosts
    return {name: jax.make_array_from_process_local_data(
                sharding, local_data(batch, name), global_shape(batch, name, hosts))
            for name in batch.keys()}
