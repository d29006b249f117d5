"""Global tensors: one tensor laid out over the devices of every process, each process holding its part.

`global_tensor` makes one from each process's local data (its share of a batch); `local_tensor` gives this process's
part back. With one process both are a `device_put` and its inverse, so a script runs unchanged on one machine.
"""
from __future__ import annotations

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from aotjax.core.errors import ShapeError
from aotjax.core.source_info import where
from aotjax.interpreters.eval import read
from aotjax.tensor import Tensor

__all__ = ["global_tensor", "local_tensor"]


def global_tensor(local, mesh: Mesh, spec: PartitionSpec, global_shape: tuple | None = None) -> Tensor:
    """A tensor sharded over `mesh` as `spec` says, made from this process's part of it, `local` (a Tensor or an
    array): `jax.make_array_from_process_local_data`. Along a dimension `spec` shards, the processes' parts are
    put side by side in process order (each process gives its share of a batch); along one it does not, every
    process gives the whole (the same values). `global_shape` is needed only when it cannot be told from the local
    shape (processes holding parts of different sizes).

    >>> import jax, numpy as np
    >>> from jax.sharding import Mesh, PartitionSpec as P
    >>> mesh = Mesh(np.array(jax.devices()), ("data",))
    >>> aotjax.distributed.global_tensor(np.ones((4, 2), np.float32), mesh, P("data")).shape
    (4, 2)
    """
    value = read(local) if isinstance(local, Tensor) else np.asarray(local)
    sharding = NamedSharding(mesh, spec)
    if global_shape is None:
        _check_local_shape(tuple(value.shape), sharding, spec)
    return Tensor._wrap(jax.make_array_from_process_local_data(sharding, value, global_shape))


def _local_shards(shape: tuple, sharding: NamedSharding) -> list[int]:
    """Per dimension, how many of its shards this process holds (for any shape that shards evenly like `shape`)."""
    per_device = sharding.addressable_devices_indices_map(shape).values()
    return [len({s[d].start for s in per_device}) for d in range(len(shape))]


def _check_local_shape(shape: tuple, sharding: NamedSharding, spec: PartitionSpec) -> None:
    if len(spec) > len(shape):
        raise ShapeError(f"global_tensor: the PartitionSpec {spec} names {len(spec)} dimensions, but the local data "
                         f"has shape {shape} ({len(shape)} dimensions){where()}; give one entry per dimension at most")
    mesh_sizes = dict(sharding.mesh.shape)
    n_shards = [int(np.prod([mesh_sizes[a] for a in _axes(spec[d])])) if d < len(spec) else 1
                for d in range(len(shape))]
    held = _local_shards(tuple(n_shards), sharding)  # NOTE: one element per shard: the count is the same
    bad = [d for d, (size, k) in enumerate(zip(shape, held, strict=True)) if size % k]
    if bad:
        want = tuple(-(-size // k) * k for size, k in zip(shape, held, strict=True))
        d = bad[0]
        raise ShapeError(f"global_tensor: local data of shape {shape} does not fit {spec} over the mesh "
                         f"{mesh_sizes}: this process holds {held[d]} of the {n_shards[d]} shards of dimension {d}, "
                         f"so its local size there must be a multiple of {held[d]}{where()}; expected a local shape "
                         f"like {want}")


def _axes(entry) -> tuple:
    if entry is None:
        return ()
    return tuple(entry) if isinstance(entry, (tuple, list)) else (entry,)


def local_tensor(t: Tensor) -> Tensor:
    """This process's part of the global tensor `t` (the inverse of `global_tensor` along a sharded dimension): its
    shards put together, as a tensor of this process. With one process, `t`'s value.

    >>> import jax, numpy as np
    >>> from jax.sharding import Mesh, PartitionSpec as P
    >>> mesh = Mesh(np.array(jax.devices()), ("data",))
    >>> g = aotjax.distributed.global_tensor(np.arange(4.0, dtype=np.float32), mesh, P("data"))
    >>> aotjax.distributed.local_tensor(g)
    tensor([0., 1., 2., 3.])
    """
    value = read(t)
    if value.is_fully_addressable:
        return Tensor._wrap(value)
    shards = value.addressable_shards
    ndim = value.ndim
    starts = [sorted({_start(s.index[d]) for s in shards}) for d in range(ndim)]
    sizes = [{_start(s.index[d]): s.data.shape[d] for s in shards} for d in range(ndim)]
    offsets = [dict(zip(st, np.cumsum([0] + [sz[k] for k in st[:-1]]), strict=True)) for st, sz in zip(starts, sizes)]
    block = np.empty([sum(sz.values()) for sz in sizes], value.dtype)
    for s in shards:
        at = tuple(slice(int(offsets[d][_start(s.index[d])]), int(offsets[d][_start(s.index[d])]) + s.data.shape[d])
                   for d in range(ndim))
        block[at] = np.asarray(s.data)
    return Tensor._wrap(jax.numpy.asarray(block))


def _start(index: slice) -> int:
    return index.start or 0
