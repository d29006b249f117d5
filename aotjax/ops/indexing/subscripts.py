"""Indexing: `x[index]` and `x[index] = value` with PyTorch's rules, and the gather/scatter primitives
(`index`, `index_put`, `gather`, `scatter`, `scatter_add`, `masked_fill`, `copy_`, `fill_`) they lower to.

Basic indices (ints, slices with a positive step, None, Ellipsis) make views: ints become `select`s
first, as in PyTorch, then slices and None. Advanced indices (integer tensors, lists, NumPy arrays)
then gather a copy (`index`), placing the indexed dims by NumPy's rules; writes through them are
`index_put_` on the basic view. Boolean masks work eagerly (their shape depends on the data); a
masked *write* of a broadcastable value also works under tracing (`masked_fill_`).
"""
from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import checkify

from aotjax.core.avals import ShapedArray, get_aval
from aotjax.core.checks import check_record, checks_emitted
from aotjax.core.errors import ShapeError, UnsupportedError
from aotjax.core.interpreter import Tracer
from aotjax.core.primitive import Recompute, largest_array_flops, output_size_flops
from aotjax.core.source_info import where
from aotjax.interpreters.ad_util import Zero, instantiate, unbroadcast
from aotjax.interpreters.batching import (
    aligned,
    batching_rules,
    bdim_at_front,
    broadcast,
    defbroadcasting,
    defvectorized,
    matchaxis,
    moveaxis,
    not_mapped,
    shift_axis,
)
from aotjax.interpreters.jvp import defjvp, defjvp_zero, deflinear
from aotjax.interpreters.transpose import deflinear_transpose
from aotjax.ops.base.casts import convert
from aotjax.ops.base.combinators import broadcast_shapes, inplace_variant, standard_primitive
from aotjax.ops.base.data import as_tensor, tensor
from aotjax.ops.base.frontend import bind_inplace, canonical_dim, is_scalar, record_traced_select
from aotjax.ops.base.layout import preserve_layout
from aotjax.ops.base.promotion import category, default_int_dtype
from aotjax.ops.creation.factories import arange, full
from aotjax.ops.math.elementwise import eq_p, mul_p, where_p
from aotjax.ops.reduce.reductions import reduce_sum_p
from aotjax.ops.shape import views
from aotjax.ops.shape.views import _slice, alias, expand_p, select, slice_scatter_p, unsqueeze, view_p
from aotjax.tensor import Tensor, method

__all__ = ["getitem", "setitem", "index_select", "gather", "scatter", "scatter_", "scatter_add", "scatter_add_",
           "masked_fill", "masked_fill_", "index_put", "index_put_", "index_add", "index_add_", "copy_", "fill",
           "fill_", "zero_"]


def _keep_dtype(x, *args, **params):
    return x.dtype


def _same_shape(x, *args, **params):
    return x.shape


def _full_index(ndim: int, dims, indices) -> tuple:
    """A jnp index tuple: `indices` at `dims`, full slices elsewhere."""
    out = [slice(None)] * ndim
    for d, i in zip(dims, indices, strict=True):
        out[d] = i
    return tuple(out)


# -- transpose helpers -----------------------------------------------------------------------
def _landed(write, read, slots_shape, base_shape):
    """Which of the updates of an overwriting scatter land. With repeated indices only one of them is
    written (XLA picks which), so only its cotangent is read back: replay the scatter (`write(base,
    updates)`) with the updates' ids and see which id each slot reads back (`read(base)`)."""
    ids = view_p.bind(arange(math.prod(slots_shape)), shape=tuple(slots_shape))
    return eq_p.bind(read(write(full(base_shape, -1, dtype=ids.dtype), ids)), ids)


def _uncrop(v, aval: ShapedArray):
    """`v` padded with zeros at the end of each dim up to `aval`'s shape: the transpose of a crop."""
    for d, n in enumerate(aval.shape):
        if v.shape[d] != n:
            zeros = instantiate(Zero(ShapedArray(v.shape[:d] + (n,) + v.shape[d + 1:], v.dtype)))
            v = slice_scatter_p.bind(zeros, v, dim=d, start=0, stop=v.shape[d], step=1)
    return v


def _sum_all(v):
    return reduce_sum_p.bind(v, axes=tuple(range(v.ndim)), keepdims=False)


# -- batching helpers (vmap) -------------------------------------------------------------------
def _example_shape(v, bdim) -> tuple:
    """The shape of one example of `v`, batched at `bdim` (or `not_mapped`)."""
    shape = tuple(get_aval(v).shape)
    return shape if bdim is not_mapped else shape[:bdim] + shape[bdim + 1:]


def _indices_rank(indices, idims) -> int:
    """The rank of the shape one example's advanced indices broadcast to."""
    return len(np.broadcast_shapes(*(_example_shape(i, d) for i, d in zip(indices, idims))))


def _batch_advanced(axis_size, x, dx, indices, idims, dims):
    """Advanced indexing of every example (`x[indices at dims]`, NumPy placement) as one indexing of the whole
    batch: `(x, indices, dims, dx, out)`, the operands of one `index`/`index_put` on the batch, `x`'s batch axis
    `dx` (`not_mapped` if it was and stays so), and the axis of the gathered result that runs over the examples.

    With no index batched, `x`'s batch axis is a full slice (kept where it is unless it splits the indexed dims).
    Otherwise the batched indices get their batch axis first and the batch axis of `x` becomes an indexed dim too,
    indexed by `arange(axis_size)`; when the indexed dims are adjacent it is placed among them, so that the
    gathered dims stay where each example has them."""
    d0, last = (min(dims), max(dims)) if dims else (0, -1)
    adjacent = last - d0 + 1 == len(dims)
    rank = _indices_rank(indices, idims)
    if all(d is not_mapped for d in idims):
        if adjacent and d0 < dx <= last:
            x, dx = moveaxis(x, dx, 0), 0
        out = dx - sum(d < dx for d in dims) + (rank if not adjacent or dx > d0 else 0)
        return x, list(indices), tuple(shift_axis(d, dx) for d in dims), dx, out
    indices = [i if d is not_mapped else aligned(i, d, len(get_aval(i).shape) - 1, rank, 0)
               for i, d in zip(indices, idims)]
    out = d0 if adjacent else 0
    if dx is not_mapped:
        return x, indices, tuple(dims), dx, out
    if adjacent and not d0 <= dx <= last + 1:
        x, dx = moveaxis(x, dx, d0), d0
    dtype = next(get_aval(i).dtype for i, d in zip(indices, idims) if d is not not_mapped)
    examples = aligned(arange(axis_size, dtype=dtype), 0, 0, rank, 0)
    return x, [examples, *indices], (dx, *(shift_axis(d, dx) for d in dims)), dx, out


def _batch_put(axis_size, x, dx, values, dv, indices, idims, dims, accumulate):
    """`index_put` of each example's `values` into its `x`, as one `index_put` on the batch (an unbatched `x` made
    batched: the result differs per example)."""
    shape = _example_shape(x, dx)
    if dx is not_mapped:
        dx = min(dims, default=0)
        x = broadcast(x, axis_size, dx)
    rank = len(shape) - len(dims) + _indices_rank(indices, idims)  # of an example's indexed slots
    x, indices, dims, dx, out = _batch_advanced(axis_size, x, dx, indices, idims, dims)
    values = aligned(values, dv, len(_example_shape(values, dv)), rank, out)
    return [index_put_p.bind(x, values, *indices, dims=dims, accumulate=accumulate)], [dx]


def _common_axis(axis_size, vals, bdims):
    """`vals` all batched at one axis, the first batched one's (0 if none is): `(vals, axis)`."""
    axis = next((d for d in bdims if d is not not_mapped), 0)
    return [matchaxis(d, axis, axis_size, v) for v, d in zip(vals, bdims)], axis


# -- primitives --------------------------------------------------------------------------------
# index: advanced indexing (a gather), NumPy placement of the indexed dims. Gathers and scatters are saved
# rather than recomputed (recomputing one needs its indices too).
index_p = standard_primitive("index", None, None, lambda x, *indices, dims: x[_full_index(x.ndim, dims, indices)],
                             recompute=Recompute.EXPENSIVE, flops=largest_array_flops)
deflinear(index_p, argnums=(0,))
deflinear_transpose(index_p, lambda ct, x, *indices, dims: index_put_p.bind(
    instantiate(Zero(x.aval)), ct, *indices, dims=dims, accumulate=True))


def _index_batch(axis_size, vals, bdims, *, dims):
    (x, *indices), (dx, *idims) = vals, bdims
    x, indices, dims, _, out = _batch_advanced(axis_size, x, dx, indices, idims, dims)
    return [index_p.bind(x, *indices, dims=dims)], [out]


batching_rules[index_p] = _index_batch


def accumulate_at(x, where_, values, how: str = "add"):
    """`x.at[where_].<how>(values)` (`add`, `multiply`, `max`, `min`) in `x`'s dtype; bools as torch accumulates
    them (a sum is an `or`, a product an `and`): jax's scatters refuse bools, so they run on int32 and are read back."""
    if x.dtype != jnp.bool_:
        return getattr(x.at[where_], how)(values.astype(x.dtype))
    return getattr(x.astype(jnp.int32).at[where_], how)(values.astype(jnp.int32)) != 0


def _index_put_lower(x, values, *indices, dims, accumulate):
    where_ = _full_index(x.ndim, dims, indices)
    return accumulate_at(x, where_, values) if accumulate else x.at[where_].set(values.astype(x.dtype))


index_put_p = standard_primitive("index_put", _same_shape, _keep_dtype, _index_put_lower,
                                 recompute=Recompute.EXPENSIVE, flops=largest_array_flops)
index_put_p.layout_rule = preserve_layout  # NOTE: PyTorch's index_put is a preserve_format clone, then index_put_
index_put__p = inplace_variant(index_put_p)
deflinear(index_put_p, argnums=(0, 1))


def _index_put_transpose_x(ct, x, values, *indices, dims, accumulate):
    return ct if accumulate else index_put_p.bind(ct, ct.dtype.type(0), *indices, dims=dims, accumulate=False)


def _index_put_transpose_values(ct, x, values, *indices, dims, accumulate):
    def read(v):
        return index_p.bind(v, *indices, dims=dims)

    def write(v, u):
        return index_put_p.bind(v, u, *indices, dims=dims, accumulate=False)

    slots = read(ct)
    if not accumulate:
        slots = where_p.bind(_landed(write, read, slots.shape, ct.shape), slots, ct.dtype.type(0))
    return convert(unbroadcast(slots, values.aval), values.dtype)


deflinear_transpose(index_put_p, _index_put_transpose_x, _index_put_transpose_values)


def _index_put_batch(axis_size, vals, bdims, *, dims, accumulate):
    (x, values, *indices), (dx, dv, *idims) = vals, bdims
    return _batch_put(axis_size, x, dx, values, dv, indices, idims, dims, accumulate)


batching_rules[index_put_p] = _index_put_batch


def _gather_lower(x, index, *, dim):
    # NOTE: PyTorch lets the index be smaller than the input outside `dim`: crop the input to it.
    crop = tuple(slice(None) if d == dim else slice(0, index.shape[d]) for d in range(x.ndim))
    return jnp.take_along_axis(x[crop], index, axis=dim)


gather_p = standard_primitive("gather", lambda x, index, *, dim: index.shape, _keep_dtype, _gather_lower,
                              recompute=Recompute.EXPENSIVE, flops=largest_array_flops)
deflinear(gather_p, argnums=(0,))
deflinear_transpose(gather_p, lambda ct, x, index, *, dim: scatter_add_p.bind(
    instantiate(Zero(x.aval)), index, ct, dim=dim))


def _gather_batch(axis_size, vals, bdims, *, dim):
    """Each example's gather: the input and the index batched at one axis (an unbatched one broadcast there)."""
    (x, index), axis = _common_axis(axis_size, vals, bdims)
    return [gather_p.bind(x, index, dim=shift_axis(dim, axis))], [axis]


batching_rules[gather_p] = _gather_batch


def _scatter_lower(reduce_add):
    def lower(x, index, src, *, dim):
        where_ = tuple(index if d == dim else lax.broadcasted_iota(index.dtype, index.shape, d)
                       for d in range(x.ndim))
        src = jnp.broadcast_to(src, index.shape) if src.ndim == 0 else src[tuple(slice(0, s) for s in index.shape)]
        return accumulate_at(x, where_, src) if reduce_add else x.at[where_].set(src.astype(x.dtype))
    return lower


scatter_p = standard_primitive("scatter", _same_shape, _keep_dtype, _scatter_lower(False),
                               recompute=Recompute.EXPENSIVE, flops=largest_array_flops)
scatter__p = inplace_variant(scatter_p)
deflinear(scatter_p, argnums=(0, 2))
scatter_add_p = standard_primitive("scatter_add", _same_shape, _keep_dtype, _scatter_lower(True),
                                   recompute=Recompute.EXPENSIVE, flops=largest_array_flops)
scatter_add__p = inplace_variant(scatter_add_p)
deflinear(scatter_add_p, argnums=(0, 2))


def _scatter_src_ct(v, src):
    """The cotangent of `src` from `v`, that of the slots written (index's shape): `src` is cropped to
    the index's shape, or broadcast when it is 0-d."""
    return convert(_sum_all(v) if src.ndim == 0 else _uncrop(v, src.aval), src.dtype)


def _scatter_transpose_src(ct, x, index, src, *, dim):
    def read(v):
        return gather_p.bind(v, index, dim=dim)

    def write(v, u):
        return scatter_p.bind(v, index, u, dim=dim)

    slots = where_p.bind(_landed(write, read, index.shape, ct.shape), read(ct), ct.dtype.type(0))
    return _scatter_src_ct(slots, src)


deflinear_transpose(scatter_p, lambda ct, x, index, src, *, dim: scatter_p.bind(ct, index, ct.dtype.type(0), dim=dim),
                    None, _scatter_transpose_src)
deflinear_transpose(scatter_add_p, lambda ct, x, index, src, *, dim: ct, None,
                    lambda ct, x, index, src, *, dim: _scatter_src_ct(gather_p.bind(ct, index, dim=dim), src))


def _scatter_batch(prim):
    def rule(axis_size, vals, bdims, *, dim):
        """Each example's scatter: the input, the index and the source batched at one axis (the unbatched ones
        broadcast there); a batched 0-d source (broadcast to the index's shape in each example) made index-shaped."""
        (x, index, src), (dx, di, ds) = vals, bdims
        if _example_shape(src, ds):
            (x, index, src), axis = _common_axis(axis_size, vals, bdims)
        else:
            (x, index), axis = _common_axis(axis_size, [x, index], [dx, di])
            if ds is not not_mapped:
                rank = len(_example_shape(index, axis))
                src = expand_p.bind(aligned(src, ds, 0, rank, axis), shape=tuple(get_aval(index).shape))
        return [prim.bind(x, index, src, dim=shift_axis(dim, axis))], [axis]
    return rule


batching_rules[scatter_p] = _scatter_batch(scatter_p)
batching_rules[scatter_add_p] = _scatter_batch(scatter_add_p)

masked_fill_p = standard_primitive(
    "masked_fill", lambda x, mask, value: broadcast_shapes("masked_fill", x.shape, mask.shape, value.shape),
    _keep_dtype, lambda x, mask, value: jnp.where(mask, value.astype(x.dtype), x),
    recompute=Recompute.CHEAP, flops=output_size_flops)
masked_fill__p = inplace_variant(masked_fill_p)
deflinear(masked_fill_p, argnums=(0, 2))
deflinear_transpose(
    masked_fill_p, lambda ct, x, mask, value: unbroadcast(where_p.bind(mask, ct.dtype.type(0), ct), x.aval), None,
    lambda ct, x, mask, value: convert(unbroadcast(where_p.bind(mask, ct, ct.dtype.type(0)), value.aval), value.dtype))
defbroadcasting(masked_fill_p)


def _index_add_lower(x, index, source, *, dim, alpha):
    source = source * source.dtype.type(alpha) if alpha != 1 else source  # NOTE: PyTorch's alpha: of source's dtype
    return accumulate_at(x, _full_index(x.ndim, (dim,), (index,)), source)


index_add_p = standard_primitive("index_add", _same_shape, _keep_dtype, _index_add_lower,
                                 recompute=Recompute.EXPENSIVE, flops=largest_array_flops)
index_add__p = inplace_variant(index_add_p)
deflinear(index_add_p, argnums=(0, 2))


def _index_add_transpose_source(ct, x, index, source, *, dim, alpha):
    v = index_p.bind(ct, index, dims=(dim,))
    return convert(v if alpha == 1 else mul_p.bind(v, ct.dtype.type(alpha)), source.dtype)


deflinear_transpose(index_add_p, lambda ct, x, index, source, **params: ct, None, _index_add_transpose_source)


def _index_add_batch(axis_size, vals, bdims, *, dim, alpha):
    """Each example's `index_add`: one `index_add` with the batch axis a full slice when the index is the same for
    every example, else an accumulating `index_put` (the batch axis indexed too) of the scaled sources."""
    (x, index, source), (dx, di, ds) = vals, bdims
    if di is not_mapped:
        (x, source), axis = _common_axis(axis_size, [x, source], [dx, ds])
        return [index_add_p.bind(x, index, source, dim=shift_axis(dim, axis), alpha=alpha)], [axis]
    if alpha != 1:
        source = mul_p.bind(source, source.dtype.type(alpha))
    return _batch_put(axis_size, x, dx, source, ds, [index], [di], (dim,), True)


batching_rules[index_add_p] = _index_add_batch


def _copy_shape(dst, src):
    out = broadcast_shapes("copy_", dst.shape, src.shape)
    if out != dst.shape:
        raise ShapeError(f"copy_: the source of shape {list(src.shape)} cannot be broadcast to the destination "
                         f"of shape {list(dst.shape)}")
    return dst.shape


copy_p = standard_primitive("copy", _copy_shape, _keep_dtype,
                            lambda dst, src: jnp.broadcast_to(src.astype(dst.dtype), dst.shape),
                            recompute=Recompute.CHEAP, flops=output_size_flops)
copy__p = inplace_variant(copy_p)


def _copy_batch(axis_size, vals, dims):
    """`copy` with the batch axis first: the destination broadcast there when it is not batched (a tensor made
    inside vmap and written with a batched value becomes batched), a batched source given the destination's rank."""
    (dst, src), (d_dst, d_src) = vals, dims
    dst = bdim_at_front(dst, d_dst, axis_size)
    if d_src is not not_mapped:
        src = moveaxis(src, d_src, 0)
        src = view_p.bind(src, shape=(axis_size,) + (1,) * (dst.ndim - src.ndim) + tuple(src.shape[1:]))
    return [copy_p.bind(dst, src)], [0]


batching_rules[copy_p] = _copy_batch
defjvp(copy_p, None, lambda t, dst, src: copy_p.bind(dst, t))  # the result does not depend on dst's values
deflinear_transpose(copy_p, lambda ct, dst, src: Zero(dst.aval),
                    lambda ct, dst, src: convert(unbroadcast(ct, src.aval), src.dtype))
fill_p = standard_primitive("fill", _same_shape, _keep_dtype,
                            lambda x, value: jnp.broadcast_to(value.astype(x.dtype), x.shape),
                            recompute=Recompute.CHEAP, flops=output_size_flops)
fill__p = inplace_variant(fill_p)
defjvp(fill_p, None, lambda t, x, value: fill_p.bind(x, t))
deflinear_transpose(fill_p, lambda ct, x, value: Zero(x.aval), lambda ct, x, value: convert(_sum_all(ct), value.dtype))


def _fill_batch(axis_size, vals, bdims):
    """`fill` with one value for every example; a batched value (one per example) is a `copy` of it."""
    (x, value), (dx, dv) = vals, bdims
    if dv is not_mapped:
        return [fill_p.bind(x, value)], [dx]
    return _copy_batch(axis_size, vals, bdims)


batching_rules[fill_p] = _fill_batch


# -- run-time bounds checks --------------------------------------------------------------------
# check_index: its operand, once every entry is known to lie in [lo, hi); otherwise `error(message)`, the first
# offending entry in place of the message's `{}`. It runs eagerly on a concrete index (a tracer's, under an eager
# transform); staged (only inside `emit_checks(True)`: `jit(f, checks=True)`), it lowers to a checkify check in a
# checked program (`lowering_checks`) and to nothing elsewhere. The op reads its result, so the check lives as
# long as the op does (DCE, partitioning). The message carries the user's line: lowering runs long after.
def _in_range(xp, index, lo: int, hi: int):
    """`(ok, bad)`: whether every entry of the (nonempty) integer array `index` lies in [lo, hi), and the entry an
    error reports (the smallest if one is below lo, else the largest); `xp` is NumPy or jax.numpy."""
    info = np.iinfo(index.dtype)
    lo, top = max(lo, info.min), min(hi - 1, info.max)  # NOTE: bounds an unsigned or narrow index can compare to
    smallest, largest = index.min(), index.max()
    bad = xp.where(smallest < lo, smallest, largest)
    if top < lo:  # an empty range: a dim of size 0
        return xp.asarray(False), bad
    return (smallest >= lo) & (largest <= top), bad


def _check_index_eager(index, *, lo, hi, error, message):
    ok, bad = _in_range(np, np.asarray(index), lo, hi) if index.size else (True, None)
    if not ok:
        raise error(message.format(int(bad)))
    return index


def _check_index_lower(index, *, lo, hi, error, message):
    record = check_record()
    if record is None or index.size == 0:
        return index
    ok, bad = _in_range(jnp, index, lo, hi)
    checkify.check(ok, message, bad)
    record.predicates.append(ok)
    record.errors[message] = error
    return index


check_index_p = standard_primitive("check_index", lambda index, **params: index.shape, _keep_dtype,
                                   _check_index_lower, recompute=Recompute.CHEAP, flops=output_size_flops)
check_index_p.eager_impl = lambda **params: functools.partial(_check_index_eager, **params)
check_index_p.print_rule = lambda params: {"lo": params["lo"], "hi": params["hi"], "error": params["error"].__name__}
defjvp_zero(check_index_p)
defvectorized(check_index_p)  # NOTE: the batched index holds every example's: one check of it checks them all


# -- operand helpers ---------------------------------------------------------------------------
def _is_int(dtype) -> bool:
    return np.issubdtype(dtype, np.integer)


def _index_tensor(op: str, index) -> Tensor:
    """An integer (or bool) tensor from a Tensor, list or array index."""
    if isinstance(index, list) and not index:
        index = np.zeros(0, default_int_dtype())
    t = as_tensor(index)
    if not (_is_int(t.dtype) or t.dtype == np.bool_):
        raise IndexError(f"{op}: tensors used as indices must be integer or bool tensors, got "
                         f"{t.aval.str_short()}{where()}")
    return t


def check_index(op: str, index, size: int, dim: int, *, negative: bool, error: type = IndexError,
                message: str | None = None):
    """PyTorch's bounds check of `index` (a Python int or an integer tensor) into dimension `dim` of size `size`:
    every entry in [-size, size) when `negative` (indexing), in [0, size) otherwise (gather, scatter, ...). Raises
    `error` with `message` (a template whose `{}` is the offending entry; by default PyTorch's "index {} is out of
    bounds for dimension {dim} with size {size}" after the op's name) and the user's line. Returns the index the
    op must read: a traced index is checked by the staged `check_index` when checks are emitted, else not at all
    (XLA then clamps gathers and drops scatters: see the README)."""
    lo = -size if negative else 0
    message = message or f"{op}: index {{}} is out of bounds for dimension {dim} with size {size}"
    if not isinstance(index, Tensor):
        if not lo <= index < size:
            raise error(message.format(index) + where())
        return index
    if isinstance(index, Tracer):
        if not checks_emitted() or index.aval.size == 0:
            return index
        line = where().replace("{", "{{").replace("}", "}}")
        return check_index_p.bind(index, lo=lo, hi=size, error=error, message=message + line)
    if index.numel():
        ok, bad = _in_range(np, index.numpy(), lo, size)
        if not ok:
            raise error(message.format(int(bad)) + where())
    return index


def _scalar_operand(x, value):
    """`value` as an operand written into `x`: a Python number becomes a NumPy scalar of `x`'s dtype (a
    literal in jaxprs), anything else a tensor."""
    return x.dtype.type(value) if is_scalar(value) else as_tensor(value)


def _nonzero_indices(x) -> tuple:
    """The coordinates of `x`'s nonzero elements, one int tensor per dim (eager: the count depends on the data)."""
    return tuple(tensor(np.asarray(i, default_int_dtype())) for i in np.nonzero(x.numpy()))


# -- parsing an index --------------------------------------------------------------------------
def _consumed(item) -> int:
    if item is None or item is Ellipsis or isinstance(item, bool):
        return 0
    if isinstance(item, Tensor) and item.dtype == np.bool_:
        return item.ndim
    return 1


def _sequence_as_tuple(index) -> bool:
    """PyTorch (like old NumPy) reads a short list holding sequences, slices, None or ... as a tuple."""
    return isinstance(index, list) and len(index) < 32 and any(
        isinstance(i, (list, tuple, slice, Tensor, np.ndarray)) or i is None or i is Ellipsis for i in index)


def _normalize_items(index) -> list:
    items = list(index) if isinstance(index, tuple) or _sequence_as_tuple(index) else [index]
    out = []
    for it in items:
        if isinstance(it, range):  # NOTE: a range indexes as the list of its ints, as in torch
            it = list(it)
        if isinstance(it, (list, np.ndarray, jax.Array)):
            it = _index_tensor("index", it)
        elif isinstance(it, np.bool_):
            it = bool(it)
        elif isinstance(it, Tensor) and it.ndim == 0 and it.dtype == np.bool_ and not isinstance(it, Tracer):
            it = bool(it.item())
        out.append(it)
    return out


def _basic(x, index, op: str):
    """`x` after the basic indices (as views), and the advanced ones as `(dim, tensor)` in its dims."""
    items = _normalize_items(index)
    if sum(it is Ellipsis for it in items) > 1:
        raise IndexError(f"{op}: an index can only have a single ellipsis ('...'){where()}")
    n = sum(_consumed(it) for it in items)
    if n > x.ndim:
        raise IndexError(f"{op}: too many indices for a tensor of dimension {x.ndim} (got {n}){where()}")
    v, dim, adv = x, 0, []
    for it in items:
        if it is Ellipsis:
            dim += x.ndim - n
        elif it is None or isinstance(it, bool):
            v = unsqueeze(v, dim)
            v = v if it is not False else _slice(v, dim, 0, 0)
            dim += 1
        elif isinstance(it, slice):
            v = _apply_slice(v, dim, it, op)
            dim += 1
        elif isinstance(it, Tensor):
            if it.dtype == np.bool_:
                _check_mask(op, v, dim, it)
                adv.append((dim, it))
                dim += it.ndim
            elif it.ndim == 0 and not isinstance(it, Tracer):
                # NOTE: PyTorch selects with an eager 0-d integer tensor
                v = select(v, dim, check_index(op, int(it.item()), v.shape[dim], dim, negative=True))
            else:
                _index_tensor(op, it)
                adv.append((dim, check_index(op, it, v.shape[dim], dim, negative=True)))
                dim += 1
        elif hasattr(it, "__index__"):
            v = select(v, dim, check_index(op, it.__index__(), v.shape[dim], dim, negative=True))
        else:
            raise IndexError(f"{op}: only integers, slices, None, ..., and integer or bool tensors are valid "
                             f"indices, got {type(it).__name__}{where()}")
    return v, adv


def _apply_slice(v, dim: int, s: slice, op: str):
    size = v.shape[dim]
    idx = [i if i is None else i.__index__() for i in (s.start, s.stop, s.step)]
    if idx[2] is not None and idx[2] <= 0:
        raise ValueError(f"{op}: slice step must be positive, got {idx[2]}{where()}; use .flip(dim) to reverse")
    start, stop, step = slice(*idx).indices(size)
    if (start, stop, step) == (0, size, 1):
        return v  # NOTE: PyTorch skips full slices (x[:, 0] is just a select)
    return _slice(v, dim, start, max(start, stop), step)


def _check_mask(op: str, v, dim: int, mask) -> None:
    want = tuple(v.shape[dim:dim + mask.ndim])
    if tuple(mask.shape) != want:
        raise IndexError(f"{op}: the shape of the mask {list(mask.shape)} does not match the shape of the indexed "
                         f"tensor {list(want)} starting at dimension {dim}{where()}")


def _masks_to_indices(op: str, adv):
    """Boolean masks replaced by the integer indices of their True elements (eager only)."""
    out = []
    for dim, t in adv:
        if t.dtype != np.bool_:
            out.append((dim, t))
            continue
        if isinstance(t, Tracer):
            raise UnsupportedError(
                f"{op}: boolean mask indexing gives a result whose shape depends on the mask's values, which "
                f"cannot be traced (mask {t.aval.str_short()}){where()}. Use aotjax.where(mask, x, 0) or "
                f"x.masked_fill(~mask, 0) to keep the shape static; x[mask] = value works under tracing.")
        out.extend((dim + k, i) for k, i in enumerate(_nonzero_indices(t)))
    return out


def getitem(x, index):
    """`x[index]`, as PyTorch: basic indices give a view, advanced ones a copy (NumPy placement).

    >>> x = aotjax.tensor([[1, 2, 3], [4, 5, 6]])
    >>> x[1, ::2], x[:, [2, 0]].tolist(), x[aotjax.tensor([False, True])].tolist()
    (tensor([4, 6]), [[3, 1], [6, 4]], [[4, 5, 6]])
    """
    v, adv = _basic(x, index, "getitem")
    if not adv:
        return alias(v) if v is x else v
    adv = _masks_to_indices("getitem", adv)
    out = index_p.bind(v, *(i for _, i in adv), dims=tuple(d for d, _ in adv))
    if any(i.ndim == 0 and i.dtype != np.bool_ for _, i in adv):
        # NOTE: PyTorch would have selected (a view): a write into the copy is written back (`_frontend.traced_selects`)
        record_traced_select(out, lambda: setitem(x, index, out))
    return out


def setitem(x, index, value) -> None:
    """`x[index] = value`: a write through the basic view (`copy_`/`fill_`), an `index_put_` for advanced
    indices, or a masked write for a boolean mask (which also works under tracing).

    >>> x = aotjax.zeros(2, 3)
    >>> x[0, 1:] = 1.0
    >>> x[:, [0]] = aotjax.tensor([[5.0], [6.0]])
    >>> x[aotjax.tensor([[False, False, False], [True, False, False]])] = -1.0
    >>> x
    tensor([[ 5.,  1.,  1.],
            [-1.,  0.,  0.]])
    """
    v, adv = _basic(x, index, "setitem")
    if not adv:
        _assign(v, value)
    elif len(adv) == 1 and adv[0][1].dtype == np.bool_ and _masked_write(v, *adv[0], value):
        pass
    else:
        adv = _masks_to_indices("setitem", adv)
        _index_put(index_put__p, v, adv, value, False)


def _assign(v, value) -> None:
    if is_scalar(value):
        fill_(v, value)
    else:
        copy_(v, value)


def _masked_write(v, dim: int, mask, value, accumulate: bool = False) -> bool:
    """`v[mask] = value` (`+=` when `accumulate`) as `masked_fill_` when `value` broadcasts without knowing the
    number of True elements; False (nothing written) otherwise."""
    rest = v.shape[dim + mask.ndim:]
    selected = v.shape[:dim] + (1,) + rest  # x[mask]'s shape, with the data-dependent dim as 1
    value = _scalar_operand(v, value)
    vshape = tuple(np.shape(value))
    if len(vshape) > len(selected) or broadcast_shapes("setitem", vshape, selected) != selected:
        return False
    padded = (1,) * (len(selected) - len(vshape)) + vshape
    if isinstance(value, Tensor):
        value = value.reshape(padded[:dim] + (1,) * mask.ndim + padded[dim + 1:])
    if rest:
        mask = mask.reshape(tuple(mask.shape) + (1,) * len(rest))
    if accumulate:
        value = convert(as_tensor(v + value), v.dtype)
    bind_inplace(masked_fill__p, v, mask, value)
    return True


def _index_put(prim, x, adv, values, accumulate):
    values = _scalar_operand(x, values)
    return bind_inplace(prim, x, values, *(i for _, i in adv), dims=tuple(d for d, _ in adv), accumulate=accumulate)


# -- index_put / index_select / index_add ------------------------------------------------------
def _index_put_args(op: str, x, indices):
    if not isinstance(indices, (tuple, list)):
        raise TypeError(f"{op}: indices must be a tuple of tensors, got {type(indices).__name__}{where()}")
    adv, dim = [], 0
    for i in indices:
        if i is None:
            dim += 1
            continue
        t = _index_tensor(op, i)
        if t.dtype == np.bool_:
            _check_mask(op, x, dim, t)
        elif dim >= x.ndim:
            raise IndexError(f"{op}: too many indices ({len(indices)}) for a tensor of dimension {x.ndim}{where()}")
        else:
            t = check_index(op, t, x.shape[dim], dim, negative=True)
        adv.append((dim, t))
        dim += t.ndim if t.dtype == np.bool_ else 1
    return _masks_to_indices(op, adv)


def _single_mask(op: str, x, indices):
    """`(dim, mask)` when `indices` is leading Nones then one traced boolean mask (`x[..., mask]`), else None (a
    concrete mask is read as the indices of its True elements)."""
    if not isinstance(indices, (tuple, list)) or not indices or any(i is not None for i in indices[:-1]):
        return None
    mask = indices[-1]
    if not isinstance(mask, Tracer) or mask.dtype != np.bool_:
        return None
    _check_mask(op, x, len(indices) - 1, mask)
    return len(indices) - 1, mask


def index_put(x, indices, values, accumulate: bool = False):
    """A copy of `x` with `x[indices] = values` (added instead when `accumulate`); `indices` is a tuple
    of index tensors for the leading dims. One traced boolean mask with a value that broadcasts over the selected
    elements is a masked write (as `x[mask] = v`), so it traces.

    >>> aotjax.zeros(4).index_put((aotjax.tensor([0, 0, 2]),), aotjax.tensor(1.0), accumulate=True)
    tensor([2., 0., 1., 0.])
    >>> aotjax.jit(lambda x: x.index_put((x > 1,), aotjax.tensor(0.0)))(aotjax.tensor([1.0, 2.0]))
    tensor([1., 0.])
    """
    m = _single_mask("index_put", x, indices)
    if m is not None:
        out = x.clone()
        if _masked_write(out, *m, values, bool(accumulate)):
            return out
    return _index_put(index_put_p, x, _index_put_args("index_put", x, indices), values, bool(accumulate))


def index_put_(x, indices, values, accumulate: bool = False):
    """In-place `index_put`.

    >>> x = aotjax.zeros(3)
    >>> x.index_put_((aotjax.tensor([1]),), aotjax.tensor([5.0]))
    tensor([0., 5., 0.])
    """
    m = _single_mask("index_put_", x, indices)
    if m is not None and _masked_write(x, *m, values, bool(accumulate)):
        return x
    return _index_put(index_put__p, x, _index_put_args("index_put_", x, indices), values, bool(accumulate))


def _index_1d(op: str, x, dim: int, index):
    dim = canonical_dim(dim, x.ndim, op)
    index = _index_tensor(op, index)
    if index.ndim > 1 or index.dtype == np.bool_:
        raise IndexError(f"{op}: index must be a 1-d integer tensor, got {index.aval.str_short()}{where()}")
    index = check_index(op, index, x.shape[dim] if x.ndim else 1, dim, negative=False, error=RuntimeError)
    return dim, index.reshape(-1)


def index_select(x, dim: int, index):
    """The entries of `x` at `index` (1-d) along `dim` (a copy).

    >>> aotjax.tensor([[1, 2], [3, 4]]).index_select(1, aotjax.tensor([1, 1]))
    tensor([[2, 2],
            [4, 4]])
    """
    dim, index = _index_1d("index_select", x, dim, index)
    if x.ndim == 0:  # NOTE: a 0-d tensor takes dim 0/-1, as in torch
        out = index_p.bind(x.reshape(1), index, dims=(0,))
        return out.reshape(()) if index.shape == (1,) else out
    return index_p.bind(x, index, dims=(dim,))


def _index_add(prim, op, x, dim, index, source, alpha):
    source = as_tensor(source)
    if x.ndim == 0:  # NOTE: torch reads a 0-d x and its 0-d source as 1-d, of one element
        if source.ndim != 0:
            raise ShapeError(f"{op}: source must be 0-d, as x is, got shape {list(source.shape)}{where()}")
        out = _index_add(prim, op, x.view(1), dim, index, source.reshape(1), alpha)
        return x if prim is index_add__p else out.reshape(())
    dim, index = _index_1d(op, x, dim, index)
    want = x.shape[:dim] + (index.shape[0],) + x.shape[dim + 1:]
    if tuple(source.shape) != want:
        raise ShapeError(f"{op}: source must have shape {list(want)} (x's shape with dim {dim} of the index's "
                         f"length), got {list(source.shape)}{where()}")
    return bind_inplace(prim, x, index, source, dim=dim, alpha=alpha)


def index_add(x, dim: int, index, source, *, alpha=1):
    """A copy of `x` with `alpha * source` added at `index` along `dim` (repeated indices accumulate).

    >>> aotjax.zeros(3).index_add(0, aotjax.tensor([0, 0]), aotjax.tensor([1.0, 2.0]))
    tensor([3., 0., 0.])
    """
    return _index_add(index_add_p, "index_add", x, dim, index, source, alpha)


def index_add_(x, dim: int, index, source, *, alpha=1):
    """In-place `index_add`.

    >>> x = aotjax.ones(2)
    >>> x.index_add_(0, aotjax.tensor([1]), aotjax.tensor([2.0]), alpha=2)
    tensor([1., 5.])
    """
    return _index_add(index_add__p, "index_add_", x, dim, index, source, alpha)


# -- gather / scatter --------------------------------------------------------------------------
def _gather_args(op: str, x, dim, index, src=None):
    dim = canonical_dim(dim, x.ndim, op)
    index = _index_tensor(op, index)
    if index.dtype == np.bool_ or index.ndim != x.ndim:
        raise ShapeError(f"{op}: index must be an integer tensor with as many dims as the input ({x.ndim}), got "
                         f"{index.aval.str_short()}{where()}")
    too_big = [d for d in range(x.ndim) if d != dim and index.shape[d] > x.shape[d]]
    if src is not None and not is_scalar(src):
        too_big += [d for d in range(x.ndim) if as_tensor(src).ndim == x.ndim and index.shape[d] > src.shape[d]]
    if too_big or (src is not None and not is_scalar(src) and as_tensor(src).ndim not in (0, x.ndim)):
        raise ShapeError(f"{op}: index of shape {list(index.shape)} must be no larger than the input "
                         f"{list(x.shape)} outside dim {dim}" + ("" if src is None else f" and than the source "
                         f"{list(np.shape(src))}") + f"{where()}")
    return dim, check_index(op, index, x.shape[dim], dim, negative=False, error=RuntimeError)


def gather(x, dim: int, index):
    """`out[i][j] = x[index[i][j]][j]` for `dim=0` (and likewise for other dims); `index` has the input's
    number of dims and may be smaller than it outside `dim`.

    >>> aotjax.tensor([[1, 2], [3, 4]]).gather(1, aotjax.tensor([[1], [0]]))
    tensor([[2],
            [3]])
    """
    x = as_tensor(x)
    if x.ndim == 0:  # NOTE: a 0-d tensor takes dim 0/-1, as in torch: gathered as a 1-d one
        canonical_dim(dim, 0, "gather")
        index = _index_tensor("gather", index)
        return gather(x.reshape(1), 0, index.reshape(-1)).reshape(index.shape)
    dim, index = _gather_args("gather", x, dim, index)
    return gather_p.bind(x, index, dim=dim)


def _scatter(prim, op, x, dim, index, src, reduce):
    if x.ndim == 0:  # NOTE: a 0-d tensor takes dim 0/-1, as in torch: scattered into as a 1-d view of it
        canonical_dim(dim, 0, op)
        src = src if is_scalar(src) else as_tensor(src).reshape(-1)
        out = _scatter(prim, op, x.reshape(1), 0, _index_tensor(op, index).reshape(-1), src, reduce)
        return x if prim.mutates else out.reshape(())
    if reduce is not None:
        out = _scatter_with_reduce(op, x, dim, index, src, reduce)
        return copy_(x, out) if prim.mutates else out
    dim, index = _gather_args(op, x, dim, index, src)
    return bind_inplace(prim, x, index, _scalar_operand(x, src), dim=dim)


_OLD_REDUCTIONS = {"add": "sum", "multiply": "prod"}


def _scatter_with_reduce(op: str, x, dim, index, src, reduce):
    """`scatter(..., reduce='add' | 'multiply')`, PyTorch's older form of `scatter_reduce` (a Tensor method of the
    gather/scatter family, aotjax/ops/indexing/gather_scatter.py, which builds on this module)."""
    if reduce not in _OLD_REDUCTIONS:
        raise ValueError(f"{op}: reduce must be 'add' or 'multiply', got {reduce!r}{where()}; use "
                         f"scatter_reduce for 'mean', 'amax', 'amin'")
    x = as_tensor(x)
    src = full(tuple(as_tensor(index).shape), src, dtype=x.dtype) if is_scalar(src) else src
    return x.scatter_reduce(dim, index, src, _OLD_REDUCTIONS[reduce])


def scatter(x, dim: int, index, src, *, reduce=None):
    """A copy of `x` with `out[index[i][j]][j] = src[i][j]` for `dim=0` (`src` may be a number).

    >>> aotjax.zeros(3).scatter(0, aotjax.tensor([2, 0]), aotjax.tensor([1.0, 2.0]))
    tensor([2., 0., 1.])
    """
    return _scatter(scatter_p, "scatter", x, dim, index, src, reduce)


def scatter_(x, dim: int, index, src, *, reduce=None):
    """In-place `scatter`.

    >>> x = aotjax.zeros(2, 2)
    >>> x.scatter_(1, aotjax.tensor([[1], [0]]), 7.0)
    tensor([[0., 7.],
            [7., 0.]])
    """
    return _scatter(scatter__p, "scatter_", x, dim, index, src, reduce)


def scatter_add(x, dim: int, index, src):
    """A copy of `x` with `src` added at `index` along `dim` (repeated indices accumulate).

    >>> aotjax.zeros(2).scatter_add(0, aotjax.tensor([1, 1, 0]), aotjax.tensor([1.0, 2.0, 3.0]))
    tensor([3., 3.])
    """
    return _scatter(scatter_add_p, "scatter_add", x, dim, index, src, None)


def scatter_add_(x, dim: int, index, src):
    """In-place `scatter_add`.

    >>> x = aotjax.ones(2)
    >>> x.scatter_add_(0, aotjax.tensor([0]), aotjax.tensor([4.0]))
    tensor([5., 1.])
    """
    return _scatter(scatter_add__p, "scatter_add_", x, dim, index, src, None)


# -- masked_fill / copy_ / fill_ ---------------------------------------------------------------
def _fill_value(op: str, x, value):
    if isinstance(value, Tensor) and value.ndim != 0:
        raise ShapeError(f"{op}: the fill value must be a number or a 0-d tensor, got {value.aval.str_short()}"
                         f"{where()}")
    return _scalar_operand(x, value)


def _mask(op: str, mask):
    mask = as_tensor(mask)
    if mask.dtype != np.bool_:
        raise TypeError(f"{op}: the mask must be a bool tensor, got {mask.aval.str_short()}{where()}")
    return mask


def masked_fill(x, mask, value):
    """A copy of `x` with `value` where `mask` (broadcast to `x`) is True.

    >>> x = aotjax.tensor([1.0, 2.0, 3.0])
    >>> x.masked_fill(x > 1.5, 0.0)
    tensor([1., 0., 0.])
    """
    return masked_fill_p.bind(x, _mask("masked_fill", mask), _fill_value("masked_fill", x, value))


def masked_fill_(x, mask, value):
    """In-place `masked_fill`.

    >>> x = aotjax.tensor([1, 2, 3])
    >>> x.masked_fill_(aotjax.tensor([True, False, True]), 0)
    tensor([0, 2, 0])
    """
    return bind_inplace(masked_fill__p, x, _mask("masked_fill_", mask), _fill_value("masked_fill_", x, value))


def copy_(x, src):
    """Write `src` (broadcast to `x`'s shape, cast to `x`'s dtype) into `x`; returns `x`.

    >>> x = aotjax.zeros(2, 2)
    >>> x[0].copy_(aotjax.tensor([1, 2]))
    tensor([1., 2.])
    >>> x
    tensor([[1., 2.],
            [0., 0.]])
    """
    if is_scalar(src):
        return fill_(x, src)
    return bind_inplace(copy__p, x, as_tensor(src))


def fill(x, value):
    """A tensor of `x`'s shape and dtype holding `value` (a number or a 0-d tensor, which gets the gradient) in
    every element, as `torch.fill` (the out-of-place `fill_`).

    >>> aotjax.fill(aotjax.zeros(2), 3)
    tensor([3., 3.])
    """
    return fill_p.bind(as_tensor(x), _fill_value("fill", x, value))


def fill_(x, value):
    """Write `value` (a number or a 0-d tensor) into every element of `x`; returns `x`.

    >>> aotjax.zeros(2).fill_(3)
    tensor([3., 3.])
    """
    return bind_inplace(fill__p, x, _fill_value("fill_", x, value))


def zero_(x):
    """Write zeros into `x`; returns `x`.

    >>> aotjax.ones(2).zero_()
    tensor([0., 0.])
    """
    return bind_inplace(fill__p, x, x.dtype.type(0))


# -- Tensor methods and operators ----------------------------------------------------------------
for _op in (index_select, gather, scatter, scatter_, scatter_add, scatter_add_, masked_fill, masked_fill_, index_put,
            index_put_, index_add, index_add_, copy_, fill_, zero_):
    method(_op)
method(getitem, "__getitem__")
method(setitem, "__setitem__")


def gather_at(op: str, x, dim: int, start, length: int):
    """The `length` elements of `x` along `dim` from a traced 0-d integer tensor `start` (negative: from the end),
    gathered: a copy, not a view (its offset is a value, not a static param), so writes to it do not reach `x`. As
    XLA's dynamic slices, a start out of range is clamped into it (torch raises; a traced value cannot be checked)."""
    size = x.shape[dim]
    if start.ndim != 0 or category(start.dtype) != 1:
        raise ShapeError(f"{op}: expected an int or a 0-d integer tensor as the position, got "
                         f"{start.aval.str_short()}{where()}")
    if not 0 <= length <= size:
        raise RuntimeError(f"{op}: length {length} is out of range for dimension {dim} of size {size}{where()}")
    start = start.detach()
    start = start.where(start >= 0, start + size).clamp(0, max(size - length, 0))
    return index_select(x, dim, start + as_tensor(np.arange(length)).to(start.dtype))


views.gather_at = gather_at  # NOTE: `narrow`/`select` at a traced position (views sit on a floor below)
