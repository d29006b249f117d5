"""Random numbers with explicit keys, as `jax.random` (exposed as `aotjax.random`).

A key is a `uint32[2]` Tensor, the raw threefry key `jax.random.PRNGKey` makes. Every sampler is a
primitive taking the key as an operand, so it traces and lowers like any op, and the same key gives
the same values eagerly, traced, compiled and through `jax.random` itself. The min-cut partitioner
saves a draw rather than replaying it in the backward, whatever the memory budget (`Recompute.NEVER`).

Under `vmap`, a batched key draws per example and an unbatched one draws the same for every example, as
a Python loop over the examples would (and as `jax.vmap` of `jax.random`): each primitive also takes keys
with leading batch dims (`u32[*batch, 2]`, its other operands carrying the same leading dims) and gives
one result per key (`*batch` leading its result's shape), so a batching rule binds it once.

>>> k1, k2 = aotjax.random.split(aotjax.random.key(0))
>>> aotjax.random.normal(k1, (2, 3)).shape
(2, 3)
"""
from __future__ import annotations

from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from aotjax.core.avals import ShapedArray
from aotjax.core.errors import DTypeError, ShapeError
from aotjax.core.primitive import Primitive, Recompute, output_size_flops
from aotjax.interpreters.batching import batching_rules, bdim_at_front
from aotjax.interpreters.jvp import defjvp_zero
from aotjax.ops.base.casts import convert
from aotjax.ops.base.combinators import standard_primitive
from aotjax.ops.base.data import as_tensor
from aotjax.ops.base.frontend import to_dtype
from aotjax.ops.base.promotion import category, default_float_dtype, default_int_dtype, is_float
from aotjax.tensor import Tensor

__all__ = ["key", "split", "fold_in", "uniform", "normal", "randint", "bernoulli"]

_KEY = ShapedArray((2,), np.uint32)


def _key_error(op: str, k: ShapedArray) -> DTypeError:
    return DTypeError(f"{op}: the key must be a u32[2] tensor made by aotjax.random.key(seed) or "
                      f"aotjax.random.split(key), got {k.str_short()}")


def _key_batch(op: str, k: ShapedArray) -> tuple[int, ...]:
    """The leading batch dims of a key operand `u32[*batch, 2]` (a batching rule binds one key per example)."""
    if k.dtype != _KEY.dtype or k.shape[-1:] != _KEY.shape:
        raise _key_error(op, k)
    return k.shape[:-1]


def _key_operand(op: str, k) -> Tensor:
    """One key Tensor (`u32[2]`) from a Tensor, a raw `jax.random.PRNGKey` array or a typed `jax.random.key`."""
    if isinstance(k, jax.Array) and jnp.issubdtype(k.dtype, jax.dtypes.prng_key):
        k = jax.random.key_data(k)
    k = as_tensor(k)
    if k.aval != _KEY:
        raise _key_error(op, k.aval)
    return k


def _per_key(fn, k):
    """`fn` mapped (`jax.vmap`) over the leading batch dims of key `k` and of the other operands with it."""
    for _ in range(k.ndim - 1):
        fn = jax.vmap(fn)
    return fn


def _batch_per_key(prim: Primitive) -> None:
    """The batching rule of a random primitive: every operand's batch axis moved to the front (an unbatched one
    broadcast there: its one key draws the same for every example), bound once."""
    def rule(axis_size, vals, bdims, **params):
        return [prim.bind(*[bdim_at_front(v, d, axis_size) for v, d in zip(vals, bdims)], **params)], [0]
    batching_rules[prim] = rule


def _shape(op: str, shape) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    if not isinstance(shape, Sequence) or not all(isinstance(s, (int, np.integer)) for s in shape):
        raise TypeError(f"{op}: shape must be a tuple of ints, got {shape!r}")
    return tuple(int(s) for s in shape)


def _float_dtype(op: str, dtype) -> np.dtype:
    dt = to_dtype(dtype, op)
    if not is_float(dt):
        raise DTypeError(f"{op}: dtype must be a floating-point dtype, got {dt.name}")
    return dt


# -- keys ------------------------------------------------------------------------------------------
def _random_seed_shape(seed):
    if seed.shape != () or category(seed.dtype) != 1:
        raise DTypeError(f"random_seed: the seed must be a scalar integer, got {seed.str_short()}")
    return (2,)


random_seed_p = standard_primitive("random_seed", _random_seed_shape, lambda seed: _KEY.dtype,
                                   lambda seed: jax.random.PRNGKey(seed),
                                   recompute=Recompute.NEVER, flops=output_size_flops)
defjvp_zero(random_seed_p)


def key(seed) -> Tensor:
    """A new key from an integer seed (a Python int or an integer scalar tensor), as
    `jax.random.PRNGKey(seed)`.

    >>> aotjax.random.key(42)
    tensor([ 0, 42], dtype=uint32)
    """
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
        # NOTE: through int64, as jax.random.PRNGKey: without x64 a seed past 32 bits keeps its low 32 bits
        # (the key jax makes) instead of overflowing int32
        seed = np.int64(seed).astype(default_int_dtype())
    return random_seed_p.bind(seed)


def _random_split_shape(k, *, num):
    return (*_key_batch("split", k), num, 2)


random_split_p = standard_primitive("random_split", _random_split_shape, lambda k, *, num: _KEY.dtype,
                                    lambda k, *, num: _per_key(lambda k: jax.random.split(k, num), k)(k),
                                    recompute=Recompute.NEVER, flops=output_size_flops)
defjvp_zero(random_split_p)
_batch_per_key(random_split_p)


def split(key, num: int = 2) -> Tensor:
    """`num` new keys from `key`, as a `u32[num, 2]` tensor (unpack it, or index it for each key).

    >>> aotjax.random.split(aotjax.random.key(0), 3).shape
    (3, 2)
    """
    return random_split_p.bind(_key_operand("split", key), num=int(num))


def _random_fold_in_shape(k, data):
    batch = _key_batch("fold_in", k)
    if data.shape != batch or category(data.dtype) != 1:
        raise DTypeError(f"fold_in: data must be a scalar integer, got {data.str_short()}")
    return (*batch, 2)


random_fold_in_p = standard_primitive("random_fold_in", _random_fold_in_shape, lambda k, data: _KEY.dtype,
                                      lambda k, data: _per_key(jax.random.fold_in, k)(k, data),
                                      recompute=Recompute.NEVER, flops=output_size_flops)
defjvp_zero(random_fold_in_p)
_batch_per_key(random_fold_in_p)


def fold_in(key, data) -> Tensor:
    """A new key from `key` and an integer `data` (a step or layer number), as `jax.random.fold_in`.

    >>> aotjax.random.fold_in(aotjax.random.key(0), 1).shape
    (2,)
    """
    if isinstance(data, (int, np.integer)) and not isinstance(data, bool):
        data = np.uint32(data)
    return random_fold_in_p.bind(_key_operand("fold_in", key), data)


# -- samplers --------------------------------------------------------------------------------------
def _sampler(name: str, draw) -> Primitive:
    """A primitive `name[shape dtype ...] key`, sampling `shape` values of `dtype` from the key with
    `draw(key, shape=, dtype=, ...)` (a `jax.random` function); per key, for keys with batch dims."""
    def shape_rule(k, *, shape, dtype, **params):
        return (*_key_batch(name, k), *shape)

    def lower(k, **params):
        return _per_key(lambda k: draw(k, **params), k)(k)

    prim = standard_primitive(name, shape_rule, lambda k, *, shape, dtype, **params: dtype, lower,
                              recompute=Recompute.NEVER, flops=output_size_flops)
    defjvp_zero(prim)
    _batch_per_key(prim)
    return prim


random_uniform_p = _sampler("random_uniform", lambda k, *, shape, dtype, low, high: jax.random.uniform(
    k, shape, dtype, minval=low, maxval=high))
random_normal_p = _sampler("random_normal", lambda k, *, shape, dtype: jax.random.normal(k, shape, dtype))
random_randint_p = _sampler("random_randint", lambda k, *, shape, dtype, low, high: jax.random.randint(
    k, shape, low, high, dtype))


def uniform(key, shape=(), dtype=np.float32, low=0.0, high=1.0) -> Tensor:
    """Samples uniform in `[low, high)`, as `jax.random.uniform(key, shape, dtype, low, high)`.

    >>> x = aotjax.random.uniform(aotjax.random.key(0), (3,), low=2.0, high=4.0)
    >>> bool(((x.numpy() >= 2) & (x.numpy() < 4)).all())
    True
    """
    return random_uniform_p.bind(_key_operand("uniform", key), shape=_shape("uniform", shape),
                                 dtype=_float_dtype("uniform", dtype), low=float(low), high=float(high))


def normal(key, shape=(), dtype=np.float32) -> Tensor:
    """Standard normal samples, as `jax.random.normal(key, shape, dtype)`.

    >>> aotjax.random.normal(aotjax.random.key(0), (2, 2)).dtype
    dtype('float32')
    """
    return random_normal_p.bind(_key_operand("normal", key), shape=_shape("normal", shape),
                                dtype=_float_dtype("normal", dtype))


def randint(key, shape, low, high, dtype=int) -> Tensor:
    """Integers uniform in `[low, high)` (the default int dtype unless `dtype`), as `jax.random.randint`.

    >>> x = aotjax.random.randint(aotjax.random.key(0), (4,), 0, 3)
    >>> set(x.tolist()) <= {0, 1, 2}
    True
    """
    dt = to_dtype(dtype, "randint")
    if category(dt) != 1:
        raise DTypeError(f"randint: dtype must be an integer dtype, got {dt.name}")
    return random_randint_p.bind(_key_operand("randint", key), shape=_shape("randint", shape), dtype=dt, low=int(low),
                                 high=int(high))


def _random_bernoulli_shape(k, p, *, shape):
    batch = _key_batch("bernoulli", k)
    if not is_float(p.dtype):
        raise DTypeError(f"bernoulli: p must be floating point, got {p.str_short()}")
    if p.shape[:len(batch)] != batch:
        raise ShapeError(f"bernoulli: p of shape {list(p.shape)} does not start with the keys' batch dims "
                         f"{list(batch)}")
    p_shape = p.shape[len(batch):]
    tail = shape[len(shape) - len(p_shape):] if len(p_shape) <= len(shape) else None
    if tail is None or any(d not in (1, s) for d, s in zip(p_shape, tail, strict=True)):
        raise ShapeError(f"bernoulli: p of shape {list(p_shape)} does not broadcast to shape {list(shape)}")
    return (*batch, *shape)


random_bernoulli_p = standard_primitive(
    "random_bernoulli", _random_bernoulli_shape, lambda k, p, *, shape: np.dtype(np.bool_),
    lambda k, p, *, shape: _per_key(lambda k, p: jax.random.bernoulli(k, p, shape), k)(k, p),
    recompute=Recompute.NEVER, flops=output_size_flops)
defjvp_zero(random_bernoulli_p)
_batch_per_key(random_bernoulli_p)


def bernoulli(key, p=0.5, shape=None) -> Tensor:
    """Booleans that are True with probability `p` (a float or a float tensor), of `shape` (default
    `p`'s shape). A Python float `p` is float32, so this equals
    `jax.random.bernoulli(key, jnp.float32(p), shape)`.

    >>> aotjax.random.bernoulli(aotjax.random.key(0), 0.5, (3,)).dtype
    dtype('bool')
    """
    if isinstance(p, (float, int)) and not isinstance(p, bool):
        p = default_float_dtype().type(p)
    else:
        p = as_tensor(p)
        if not is_float(p.dtype):
            p = convert(p, default_float_dtype())
    p_shape = tuple(np.shape(p)) if not isinstance(p, Tensor) else tuple(p.shape)
    shape = p_shape if shape is None else _shape("bernoulli", shape)
    return random_bernoulli_p.bind(_key_operand("bernoulli", key), p, shape=shape)
