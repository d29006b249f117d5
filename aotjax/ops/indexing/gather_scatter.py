"""Scatter with a reduction, and the gather/scatter extras built on aotjax/ops/indexing/subscripts.py's primitives:
`scatter_reduce index_reduce index_copy index_fill take take_along_dim put select_scatter slice_scatter
diagonal_scatter masked_select masked_scatter argwhere unravel_index`, `nonzero` (eager), and `nonzero_static` /
`nonzero(size=)`, which trace.

One primitive, `scatter_reduce` (`reduce` one of `prod amax amin`; sums and means are `scatter_add`), with
every rule in its block below. Its operand 0 is the destination with `include_self` already applied (the
written slots reset to the reduction's identity by a `scatter` when the destination's own values are left
out). The tangent of `amax`/`amin` is shared equally among the elements equal to the result (PyTorch's
gradient); that of `prod` is exact where elements are zero (the product of the others, counted by zeros).
"""
from __future__ import annotations

import math

import numpy as np

from aotjax.core.errors import DTypeError, ShapeError, UnsupportedError
from aotjax.core.interpreter import Tracer
from aotjax.core.primitive import Recompute, largest_array_flops
from aotjax.core.source_info import where as _where
from aotjax.interpreters.ad_util import Zero
from aotjax.interpreters.batching import batching_rules, shift_axis
from aotjax.interpreters.jvp import jvp_rules
from aotjax.ops.base.casts import convert
from aotjax.ops.base.combinators import standard_primitive
from aotjax.ops.base.data import as_tensor, tensor
from aotjax.ops.base.frontend import bind_inplace, canonical_dim, is_scalar
from aotjax.ops.base.promotion import _FLOAT, category, default_int_dtype, is_float
from aotjax.ops.creation import factories as creation
from aotjax.ops.creation.factories import arange, full, zeros
from aotjax.ops.indexing.subscripts import (
    _common_axis,
    _gather_args,
    _index_1d,
    _index_tensor,
    _nonzero_indices,
    _scalar_operand,
    accumulate_at,
    check_index,
    gather_p,
    index_p,
    index_put__p,
    index_put_p,
    scatter_add_p,
    scatter_p,
)
from aotjax.ops.math.elementwise import floor_divide, remainder, where
from aotjax.ops.shape import views
from aotjax.ops.shape.copies import stack
from aotjax.ops.shape.views import _slice_len, diagonal_scatter_p, select_scatter_p, slice_scatter_p
from aotjax.tensor import Tensor, method

__all__ = ["unravel_index", "scatter_reduce", "scatter_reduce_", "index_reduce", "index_reduce_", "index_copy",
           "index_copy_", "index_fill", "index_fill_", "take", "take_along_dim", "put", "put_", "select_scatter",
           "slice_scatter", "diagonal_scatter", "masked_select", "masked_scatter", "masked_scatter_", "argwhere",
           "nonzero", "nonzero_static"]

_REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")


# -- scatter_reduce ------------------------------------------------------------------------------
def _written(index, *, dim, ndim):
    return tuple(index if d == dim else _iota(index, d) for d in range(ndim))


def _iota(index, d):
    from jax import lax  # NOTE: only the lowering uses lax here

    return lax.broadcasted_iota(index.dtype, index.shape, d)


def _lower(x, index, src, *, dim, reduce):
    src = src[tuple(slice(0, s) for s in index.shape)]
    how = {"prod": "multiply", "amax": "max", "amin": "min"}[reduce]
    return accumulate_at(x, _written(index, dim=dim, ndim=x.ndim), src, how)


scatter_reduce_p = standard_primitive("scatter_reduce", lambda x, index, src, **_: x.shape,
                                      lambda x, index, src, **_: x.dtype, _lower,
                                      recompute=Recompute.EXPENSIVE, flops=largest_array_flops)


def _crop(v, shape):
    return v if tuple(v.shape) == tuple(shape) else v[tuple(slice(0, s) for s in shape)]


def _scatter_reduce_jvp(primals, tangents, *, dim, reduce):
    (x, index, src), (tx, _, ts) = primals, tangents
    out = scatter_reduce_p.bind(x, index, src, dim=dim, reduce=reduce)
    if isinstance(tx, Zero) and isinstance(ts, Zero):
        return [out], [Zero(out.aval)]
    tx = zeros(*x.shape, dtype=x.dtype) if isinstance(tx, Zero) else tx
    ts = zeros(*index.shape, dtype=x.dtype) if isinstance(ts, Zero) else _crop(ts, index.shape)
    src = _crop(src, index.shape)
    empty = zeros(*x.shape, dtype=x.dtype)

    def spread(v):  # each slot's sum over the src elements written there
        return scatter_add_p.bind(empty, index, v, dim=dim)

    if reduce == "prod":
        # NOTE: d(prod) = sum_k t_k * prod(others): with no zero, out * sum(t / v); with one zero, that zero's
        # tangent times the product of the rest; with more, 0.
        x_zero, s_zero = x == 0, src == 0
        n_zero = convert(x_zero, x.dtype) + spread(convert(s_zero, x.dtype))
        rest = scatter_reduce_p.bind(where(x_zero, 1.0, x), index, where(s_zero, 1.0, src), dim=dim, reduce=reduce)
        share = tx / where(x_zero, 1.0, x) + spread(ts / where(s_zero, 1.0, src))
        at_zero = where(x_zero, tx, 0.0) + spread(where(s_zero, ts, 0.0))
        return [out], [where(n_zero == 0, rest * share, where(n_zero == 1, rest * at_zero, 0.0))]
    hit_x = convert(x == out, x.dtype)
    hit_s = convert(src == gather_p.bind(out, index, dim=dim), x.dtype)
    count = hit_x + spread(hit_s)
    return [out], [(tx * hit_x + spread(ts * hit_s)) / where(count > 0, count, 1.0)]


def _scatter_reduce_batch(axis_size, vals, bdims, *, dim, reduce):
    (x, index, src), axis = _common_axis(axis_size, vals, bdims)
    return [scatter_reduce_p.bind(x, index, src, dim=shift_axis(dim, axis), reduce=reduce)], [axis]


jvp_rules[scatter_reduce_p] = _scatter_reduce_jvp
batching_rules[scatter_reduce_p] = _scatter_reduce_batch


def _identity(reduce: str, dtype):
    if reduce == "prod":
        return 1
    if category(dtype) >= _FLOAT:
        return -math.inf if reduce == "amax" else math.inf
    info = np.iinfo(dtype) if dtype != np.bool_ else None
    if info is None:
        return reduce == "amin"
    return info.min if reduce == "amax" else info.max


def _scatter_reduce(op: str, x, dim, index, src, reduce, include_self):
    x = as_tensor(x)
    if reduce not in _REDUCTIONS:
        raise ValueError(f"{op}: reduce must be one of {_REDUCTIONS}, got {reduce!r}{_where()}")
    if x.ndim == 0:  # NOTE: a 0-d tensor takes dim 0/-1, as in torch: reduced into as a 1-d one
        canonical_dim(dim, 0, op)
        src = src if is_scalar(src) else as_tensor(src).reshape(-1)
        return _scatter_reduce(op, x.reshape(1), 0, as_tensor(index).reshape(-1), src, reduce, include_self).reshape(())
    dim, index = _gather_args(op, x, dim, index, src)
    src = convert(as_tensor(src), x.dtype)
    if not include_self and reduce != "mean":
        x = scatter_p.bind(x, index, x.dtype.type(0 if reduce == "sum" else _identity(reduce, x.dtype)), dim=dim)
    if reduce == "sum":
        return scatter_add_p.bind(x, index, src, dim=dim)
    if reduce != "mean":
        return scatter_reduce_p.bind(x, index, src, dim=dim, reduce=reduce)
    base = x if include_self else scatter_p.bind(x, index, x.dtype.type(0), dim=dim)
    total = scatter_add_p.bind(base, index, src, dim=dim)
    ones = full(tuple(index.shape), 1, dtype=x.dtype)
    start = full(tuple(x.shape), 1 if include_self else 0, dtype=x.dtype)
    count = scatter_add_p.bind(start, index, ones, dim=dim)
    count = where(count == 0, x.dtype.type(1), count)
    return total / count if category(x.dtype) >= _FLOAT else total.floor_divide(count)


def scatter_reduce(x, dim: int, index, src, reduce: str, *, include_self: bool = True):
    """A copy of `x` with the elements of `src` reduced into the slots `index` names along `dim` (as `scatter`):
    `reduce` is `'sum'`, `'prod'`, `'mean'`, `'amax'` or `'amin'`, over the slot's own value too unless
    `include_self=False`.

    >>> x = aotjax.tensor([1.0, 2.0, 3.0])
    >>> x.scatter_reduce(0, aotjax.tensor([0, 0, 2]), aotjax.tensor([5.0, 7.0, 1.0]), "amax")
    tensor([7., 2., 3.])
    >>> x.scatter_reduce(0, aotjax.tensor([0, 0]), aotjax.tensor([5.0, 7.0]), "mean", include_self=False)
    tensor([6., 2., 3.])
    """
    return _scatter_reduce("scatter_reduce", x, dim, index, src, reduce, include_self)


def scatter_reduce_(x, dim: int, index, src, reduce: str, *, include_self: bool = True):
    """In-place `scatter_reduce`.

    >>> x = aotjax.ones(2)
    >>> x.scatter_reduce_(0, aotjax.tensor([1, 1]), aotjax.tensor([2.0, 3.0]), "prod")
    tensor([1., 6.])
    """
    return x.copy_(_scatter_reduce("scatter_reduce_", x, dim, index, src, reduce, include_self))


def _index_reduce(op, x, dim, index, source, reduce, include_self):
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise ValueError(f"{op}: reduce must be 'prod', 'mean', 'amax' or 'amin', got {reduce!r}{_where()}")
    x = as_tensor(x)
    dim, index = _index_1d(op, x, dim, index)
    source = as_tensor(source)
    shape = [1] * source.ndim
    if source.ndim:
        shape[dim] = index.shape[0]
    full_index = index.reshape(shape).expand(*source.shape) if source.ndim else index.reshape(())
    return _scatter_reduce(op, x, dim, full_index, source, reduce, include_self)


def index_reduce(x, dim: int, index, source, reduce: str, *, include_self: bool = True):
    """A copy of `x` with the slices of `source` reduced into the slices `index` (1-d) names along `dim`:
    `reduce` is `'prod'`, `'mean'`, `'amax'` or `'amin'`.

    >>> aotjax.ones(3).index_reduce(0, aotjax.tensor([0, 0]), aotjax.tensor([2.0, 3.0]), "prod")
    tensor([6., 1., 1.])
    """
    return _index_reduce("index_reduce", x, dim, index, source, reduce, include_self)


def index_reduce_(x, dim: int, index, source, reduce: str, *, include_self: bool = True):
    """In-place `index_reduce`.

    >>> x = aotjax.zeros(2)
    >>> x.index_reduce_(0, aotjax.tensor([1]), aotjax.tensor([4.0]), "amax")
    tensor([0., 4.])
    """
    return x.copy_(_index_reduce("index_reduce_", x, dim, index, source, reduce, include_self))


# -- index_copy / index_fill / take / put --------------------------------------------------------
def _index_copy(prim, op, x, dim, index, source):
    x = as_tensor(x)
    dim, index = _index_1d(op, x, dim, index)
    source = as_tensor(source)
    want = x.shape[:dim] + (index.shape[0],) + x.shape[dim + 1:]
    if tuple(source.shape) != want and not (x.ndim == 0 and source.numel() == 1):
        raise ShapeError(f"{op}: source must have shape {list(want)}, got {list(source.shape)}{_where()}")
    if x.ndim == 0:
        return bind_inplace(prim, x, source.reshape(()), dims=(), accumulate=False)
    return bind_inplace(prim, x, source, index, dims=(dim,), accumulate=False)


def index_copy(x, dim: int, index, source):
    """A copy of `x` with the slices of `source` written at `index` (1-d) along `dim`.

    >>> aotjax.zeros(3).index_copy(0, aotjax.tensor([2, 0]), aotjax.tensor([5.0, 6.0]))
    tensor([6., 0., 5.])
    """
    return _index_copy(index_put_p, "index_copy", x, dim, index, source)


def index_copy_(x, dim: int, index, source):
    """In-place `index_copy`.

    >>> x = aotjax.zeros(2)
    >>> x.index_copy_(0, aotjax.tensor([1]), aotjax.tensor([3.0]))
    tensor([0., 3.])
    """
    return _index_copy(index_put__p, "index_copy_", x, dim, index, source)


def _index_fill(prim, op, x, dim, index, value):
    x = as_tensor(x)
    if isinstance(value, Tensor) and value.ndim:
        raise ShapeError(f"{op}: the fill value must be a number or a 0-d tensor, got {value.aval.str_short()}"
                         f"{_where()}")
    dim, index = _index_1d(op, x, dim, index)
    if x.ndim == 0:
        return bind_inplace(prim, x, _scalar_operand(x, value), dims=(), accumulate=False)
    return bind_inplace(prim, x, _scalar_operand(x, value), index, dims=(dim,), accumulate=False)


def index_fill(x, dim: int, index, value):
    """A copy of `x` with `value` written into the slices at `index` (1-d) along `dim`.

    >>> aotjax.zeros(2, 2).index_fill(1, aotjax.tensor([1]), 7.0)
    tensor([[0., 7.],
            [0., 7.]])
    """
    return _index_fill(index_put_p, "index_fill", x, dim, index, value)


def index_fill_(x, dim: int, index, value):
    """In-place `index_fill`.

    >>> x = aotjax.zeros(3)
    >>> x.index_fill_(0, aotjax.tensor([0, 2]), -1.0)
    tensor([-1.,  0., -1.])
    """
    return _index_fill(index_put__p, "index_fill_", x, dim, index, value)


def take(x, index):
    """The elements of `x` (read as 1-d) at `index` (negative counts from the end), in `index`'s shape.

    >>> aotjax.take(aotjax.tensor([[1, 2], [3, 4]]), aotjax.tensor([[0, -1]]))
    tensor([[1, 4]])
    """
    x = as_tensor(x)
    index = _index_tensor("take", index)
    flat = x.reshape(-1)
    index = check_index("take", index, flat.shape[0], 0, negative=True)
    return index_p.bind(flat, index, dims=(0,))


def take_along_dim(x, indices, dim=None):
    """`gather` with the input and `indices` broadcast against each other outside `dim` (`dim=None`: of the
    flattened input).

    >>> aotjax.take_along_dim(aotjax.tensor([[10, 30, 20]]), aotjax.tensor([[1], [0]]), dim=1)
    tensor([[30],
            [10]])
    """
    x, indices = as_tensor(x), _index_tensor("take_along_dim", indices)
    if dim is None:
        x, indices, dim = x.reshape(-1), indices.reshape(-1), 0
    if indices.ndim != x.ndim:
        raise ShapeError(f"take_along_dim: input and indices should have the same number of dimensions, got "
                         f"{x.ndim} and {indices.ndim}{_where()}")
    dim = canonical_dim(dim, x.ndim, "take_along_dim")
    shape = [max(a, b) for a, b in zip(x.shape, indices.shape)]
    x = x.expand(*[s if d != dim else x.shape[d] for d, s in enumerate(shape)])
    indices = indices.expand(*[s if d != dim else indices.shape[d] for d, s in enumerate(shape)])
    return x.gather(dim, indices)


def _put(x, index, source, accumulate, op):
    x = as_tensor(x)
    index = _index_tensor(op, index).reshape(-1)
    source = as_tensor(source).reshape(-1)
    if source.shape[0] != index.shape[0]:
        raise ShapeError(f"{op}: source and index should have the same number of elements, got "
                         f"{source.shape[0]} and {index.shape[0]}{_where()}")
    flat = x.reshape(-1)
    index = check_index(op, index, flat.shape[0], 0, negative=True)
    return index_put_p.bind(flat, convert(source, x.dtype), index, dims=(0,), accumulate=bool(accumulate)) \
        .reshape(x.shape)


def put(x, index, source, accumulate: bool = False):
    """A copy of `x` with `source` written (or added, `accumulate=True`) at `index` of `x` read as 1-d.

    >>> aotjax.zeros(2, 2).put(aotjax.tensor([3, 0]), aotjax.tensor([1.0, 2.0]))
    tensor([[2., 0.],
            [0., 1.]])
    """
    return _put(x, index, source, accumulate, "put")


def put_(x, index, source, accumulate: bool = False):
    """In-place `put`.

    >>> x = aotjax.zeros(3)
    >>> x.put_(aotjax.tensor([1, 1]), aotjax.tensor([1.0, 2.0]), accumulate=True)
    tensor([0., 3., 0.])
    """
    return x.copy_(_put(x, index, source, accumulate, "put_"))


# -- the *_scatter ops -----------------------------------------------------------------------------
def _check_src(op, src, want):
    if tuple(src.shape) != tuple(want):
        raise ShapeError(f"{op}: src must have shape {list(want)}, got {list(src.shape)}{_where()}")


def select_scatter(x, src, dim: int, index: int):
    """A copy of `x` with `src` written into `x.select(dim, index)`.

    >>> aotjax.zeros(2, 2).select_scatter(aotjax.ones(2), 0, 1)
    tensor([[0., 0.],
            [1., 1.]])
    """
    x, src = as_tensor(x), as_tensor(src)
    dim = canonical_dim(dim, x.ndim, "select_scatter")
    index = check_index("select_scatter", index, x.shape[dim], dim, negative=True) % x.shape[dim]
    _check_src("select_scatter", src, x.shape[:dim] + x.shape[dim + 1:])
    return select_scatter_p.bind(x, src, dim=dim, index=index)


def slice_scatter(x, src, dim: int = 0, start=None, end=None, step: int = 1):
    """A copy of `x` with `src` written into the slice `start:end:step` along `dim`.

    >>> aotjax.zeros(4).slice_scatter(aotjax.ones(2), start=1, step=2)
    tensor([0., 1., 0., 1.])
    """
    x, src = as_tensor(x), as_tensor(src)
    dim = canonical_dim(dim, x.ndim, "slice_scatter")
    start, stop, step = slice(start, end, step).indices(x.shape[dim])
    stop = max(start, stop)
    _check_src("slice_scatter", src, x.shape[:dim] + (_slice_len(start, stop, step),) + x.shape[dim + 1:])
    return slice_scatter_p.bind(x, src, dim=dim, start=start, stop=stop, step=step)


def diagonal_scatter(x, src, offset: int = 0, dim1: int = 0, dim2: int = 1):
    """A copy of `x` with `src` written into `x.diagonal(offset, dim1, dim2)`.

    >>> aotjax.zeros(2, 2).diagonal_scatter(aotjax.tensor([1.0, 2.0]))
    tensor([[1., 0.],
            [0., 2.]])
    """
    x, src = as_tensor(x), as_tensor(src)
    dim1, dim2 = canonical_dim(dim1, x.ndim, "diagonal_scatter"), canonical_dim(dim2, x.ndim, "diagonal_scatter")
    _check_src("diagonal_scatter", src, x.diagonal(offset, dim1, dim2).shape)
    return diagonal_scatter_p.bind(x, src, offset=offset, dim1=dim1, dim2=dim2)


# -- masks -----------------------------------------------------------------------------------------
def masked_select(x, mask):
    """The elements of `x` where `mask` (broadcast with `x`) is True, as 1-d (eager only: the length depends
    on the mask).

    >>> x = aotjax.tensor([[1, 2], [3, 4]])
    >>> aotjax.masked_select(x, x > 2)
    tensor([3, 4])
    """
    x, mask = as_tensor(x), as_tensor(mask)
    if isinstance(mask, Tracer):
        raise UnsupportedError(f"masked_select: the result's length depends on the mask's values, so it cannot be "
                               f"traced{_where()}. Use aotjax.where(mask, x, 0) to keep the shape static.")
    shape = np.broadcast_shapes(tuple(x.shape), tuple(mask.shape))
    return x.expand(*shape)[mask.expand(*shape)].reshape(-1)


def _masked_scatter(op: str, x, mask, source, inplace: bool):
    x, mask, source = as_tensor(x), as_tensor(mask), as_tensor(source)
    if mask.dtype != np.bool_:
        raise DTypeError(f"{op}: expected a bool mask, got {mask.aval.str_short()}{_where()}; make one with a "
                         f"comparison (`x > 0`) or `.bool()`")
    if source.dtype != x.dtype:
        raise DTypeError(f"{op}: expected source to have self's dtype {x.dtype.name}, got {source.aval.str_short()}"
                         f"{_where()}; convert it with `.to(self.dtype)`")
    shape = _broadcast_shape(op, x, mask)
    if inplace and shape != tuple(x.shape):
        raise ShapeError(f"{op}: the mask {mask.aval.str_short()} must broadcast to self's shape {list(x.shape)} (in "
                         f"place, self cannot grow){_where()}; use the out-of-place masked_scatter")
    m = mask.expand(*shape).reshape(-1)
    flat_source, flat_x = source.reshape(-1), x.expand(*shape).reshape(-1)
    slots = None if isinstance(mask, Tracer) else np.broadcast_to(mask.numpy(), shape).sum()
    if slots is not None and slots > flat_source.shape[0]:
        raise ShapeError(f"{op}: the mask has {slots} True slots but source only {flat_source.shape[0]} elements"
                         f"{_where()}")
    # NOTE: the k-th True slot (in row-major order) reads source's k-th element.
    position = convert(m, default_int_dtype()).cumsum(0) - 1
    position = position.clamp(min=0, max=max(flat_source.shape[0] - 1, 0))
    taken = index_p.bind(flat_source, position, dims=(0,)) if flat_source.shape[0] else flat_x
    return where(m, taken, flat_x).reshape(shape)


def _broadcast_shape(op: str, x, mask) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(tuple(x.shape), tuple(mask.shape)))
    except ValueError:
        raise ShapeError(f"{op}: the mask {mask.aval.str_short()} does not broadcast with self {x.aval.str_short()}"
                         f"{_where()}") from None


def masked_scatter(x, mask, source):
    """A copy of `x` with the slots where `mask` (a bool tensor, broadcast with `x`) is True filled, in order, by the
    elements of `source` (of `x`'s dtype). Traced, a `source` shorter than the mask's True slots is not detected.

    >>> aotjax.zeros(4).masked_scatter(aotjax.tensor([True, False, True, False]), aotjax.tensor([1.0, 2.0, 3.0]))
    tensor([1., 0., 2., 0.])
    >>> aotjax.zeros(2).masked_scatter(aotjax.tensor([[True, False], [True, True]]), aotjax.arange(4.0))
    tensor([[0., 0.],
            [1., 2.]])
    """
    return _masked_scatter("masked_scatter", x, mask, source, False)


def masked_scatter_(x, mask, source):
    """In-place `masked_scatter`: `mask` broadcasts to `x`'s shape.

    >>> x = aotjax.zeros(2)
    >>> x.masked_scatter_(aotjax.tensor([False, True]), aotjax.tensor([5.0]))
    tensor([0., 5.])
    """
    return x.copy_(_masked_scatter("masked_scatter_", x, mask, source, True))


def argwhere(x):
    """The indices of the nonzero elements of `x`, one row each (`nonzero(x)`; eager only).

    >>> aotjax.argwhere(aotjax.tensor([[0, 1], [2, 0]]))
    tensor([[0, 1],
            [1, 0]])
    """
    return nonzero(x)


def nonzero(x, *, as_tuple: bool = False, size: int | None = None, fill_value=None):
    """The indices of the nonzero elements of `x` (eager only: the result's shape depends on the data), or,
    with `size`, the first `size` of them padded with `fill_value` (default 0), which traces (JAX's `size=`).

    >>> aotjax.nonzero(aotjax.tensor([0, 3, 0, 5]), as_tuple=True)
    (tensor([1, 3]),)
    >>> aotjax.jit(lambda x: aotjax.nonzero(x, size=3, fill_value=-1))(aotjax.tensor([0, 3, 0, 5]))
    tensor([[ 1],
            [ 3],
            [-1]])
    """
    x = as_tensor(x)
    if size is not None:
        return nonzero_static(x, size=size, fill_value=0 if fill_value is None else fill_value, as_tuple=as_tuple)
    if isinstance(x, Tracer):
        raise UnsupportedError(
            f"nonzero: the number of nonzero elements depends on the data, so it cannot be traced (the tensor is "
            f"{x.aval.str_short()}){_where()}. Use aotjax.where(mask, a, b) or masked_fill to stay static-shaped.")
    idx = _nonzero_indices(x.reshape(1) if x.ndim == 0 else x)  # NOTE: torch's 0-d: as 1-d, or n rows of no index
    if as_tuple:
        return idx
    return tensor(np.stack([i.numpy() for i in idx], axis=-1)[:, :x.ndim])


def nonzero_static(x, *, size: int, fill_value=-1, as_tuple: bool = False):
    """The indices of `x`'s nonzero elements, exactly `size` rows (the first `size` found; the rest `fill_value`):
    `nonzero` with a static shape, so it traces (torch's `nonzero_static`, JAX's `nonzero(size=)`).

    >>> aotjax.nonzero_static(aotjax.tensor([0.0, 2.0, 3.0]), size=3).tolist()
    [[1], [2], [-1]]
    """
    x = as_tensor(x)
    flat = (x != 0).reshape(-1)
    position = convert(flat, default_int_dtype()).cumsum(0) - 1
    slot = where(flat & (position < size), position, size)  # NOTE: slot `size` collects what is dropped
    found = full((size + 1,), -1, dtype=default_int_dtype())
    found = scatter_p.bind(found, slot, arange(flat.shape[0], dtype=default_int_dtype()), dim=0)[:size]
    coords, rest = [], found
    for n in reversed(x.shape):
        coords.append(rest.remainder(n) if n else rest)
        rest = rest.floor_divide(max(n, 1))
    coords = [where(found >= 0, c, fill_value) for c in reversed(coords)]
    if as_tuple:
        return tuple(coords)
    return (coords[0].unsqueeze(1) if len(coords) == 1 else stack(coords, 1)) if coords else zeros(
        size, 0, dtype=default_int_dtype())


for _op in (scatter_reduce, scatter_reduce_, index_reduce, index_reduce_, index_copy, index_copy_, index_fill,
            index_fill_, take, take_along_dim, put, put_, select_scatter, slice_scatter, diagonal_scatter,
            masked_select, masked_scatter, masked_scatter_, argwhere, nonzero, nonzero_static):
    method(_op)


def unravel_index(indices, shape):
    """The coordinates in an array of `shape` of each flat index of `indices`, as a tuple of tensors (one per dim of
    `shape`); negative indices count from the end.

    >>> [t.tolist() for t in aotjax.unravel_index(aotjax.tensor([4, 1, -1]), (2, 3))]
    [[1, 0, 1], [1, 1, 2]]
    """
    indices = as_tensor(indices)
    if is_float(indices.dtype) or indices.dtype == bool:
        raise DTypeError(f"unravel_index: expected integer indices, got {indices.aval.str_short()}{_where()}")
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * shape[i + 1]
    if any(n < 0 for n in shape):
        raise ValueError(f"unravel_index: 'shape' cannot have negative values, but got {shape}{_where()}")
    largest = int(np.iinfo(default_int_dtype()).max)
    if any(n > largest for n in shape):
        raise ShapeError(f"unravel_index: shape {list(shape)} has a size past the largest {default_int_dtype().name} "
                         f"({largest}), so its coordinates cannot be held{_where()}; enable jax's 64-bit mode "
                         f"(JAX_ENABLE_X64=1)")
    flat = indices.to(default_int_dtype()).unsqueeze(-1)
    # NOTE: one floor division and one remainder for every dim at once (a negative index wraps by itself, as
    # torch's: no `+ numel` to overflow), then the coordinates as views of that result (as PyTorch returns them). A
    # stride past the integer range (32-bit mode) gives every index the quotient 0, or -1 if negative.
    quotients = floor_divide(flat, creation.tensor([s if s <= largest else 1 for s in strides]))
    if any(s > largest for s in strides):
        quotients = where(creation.tensor([s > largest for s in strides]), where(flat < 0, -1, 0), quotients)
    coords = remainder(quotients, creation.tensor(list(shape)))
    return views.unbind(coords, -1)
