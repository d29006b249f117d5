"""`with_sharding_constraint`: how a value inside a compiled program is laid out over devices, as JAX's. One
primitive, an identity to every transform (linear: its tangent and cotangent are constrained alike), lowered to
`jax.lax.with_sharding_constraint`; under `vmap` the batch axis is left unsharded.

>>> import jax
>>> one = jax.sharding.SingleDeviceSharding(jax.devices()[0])
>>> aotjax.jit(lambda x: aotjax.lax.with_sharding_constraint(x * 2, one))(aotjax.ones(2))
tensor([2., 2.])
"""
from __future__ import annotations

import jax
from jax.sharding import NamedSharding, PartitionSpec

from aotjax.core.avals import ShapedArray
from aotjax.core.errors import UnsupportedError
from aotjax.core.primitive import Primitive, Recompute, output_size_flops
from aotjax.core.source_info import where
from aotjax.interpreters.batching import batching_rules
from aotjax.interpreters.jvp import deflinear
from aotjax.interpreters.lowering import register_lowering
from aotjax.interpreters.transpose import deflinear_transpose
from aotjax.ops.base.data import as_tensor

__all__ = ["with_sharding_constraint"]

sharding_constraint_p = Primitive("sharding_constraint", recompute=Recompute.CHEAP, flops=output_size_flops,
                                  linear=True)
sharding_constraint_p.abstract_eval = lambda x, *, sharding: ShapedArray(x.shape, x.dtype)
register_lowering(sharding_constraint_p, lambda x, *, sharding: jax.lax.with_sharding_constraint(x, sharding))


deflinear(sharding_constraint_p)
deflinear_transpose(sharding_constraint_p, lambda ct, x, *, sharding: sharding_constraint_p.bind(ct, sharding=sharding))


def _constraint_batch(axis_size, vals, dims, *, sharding):
    (x,), (d,) = vals, dims
    if not isinstance(sharding, NamedSharding) and sharding.is_fully_replicated:  # NOTE: one device, or copies
        return [sharding_constraint_p.bind(x, sharding=sharding)], [d]
    if not isinstance(sharding, NamedSharding):
        raise UnsupportedError(f"with_sharding_constraint under vmap: only a NamedSharding can leave the batch axis "
                               f"unsharded, got {type(sharding).__name__}{where()}")
    spec = list(sharding.spec) + [None] * (x.ndim - 1 - len(sharding.spec))
    spec.insert(d, None)
    return [sharding_constraint_p.bind(x, sharding=NamedSharding(sharding.mesh, PartitionSpec(*spec)))], [d]


batching_rules[sharding_constraint_p] = _constraint_batch


def with_sharding_constraint(x, sharding):
    """`x` (a Tensor or a pytree of them) laid out as `sharding` inside a compiled program (`jax.lax`'s); eagerly,
    the value placed so."""
    return jax.tree_util.tree_map(
        lambda t: sharding_constraint_p.bind(as_tensor(t), sharding=sharding), x)
