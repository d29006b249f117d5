"""Sorting, order statistics, searching and scans: `sort argsort msort topk kthvalue median nanmedian mode quantile
nanquantile unique unique_consecutive searchsorted bucketize isin cumprod cummax cummin logcumsumexp`.

Two kinds of primitive, each with every rule in one block below:

- `sort` (values and indices together, a multi-operand `jax.lax.sort` keyed on the values with an iota carried
  along): stable, NaN last ascending and first descending, as PyTorch. Its tangent is the input's tangent
  gathered by the indices; it batches along the shifted axis. Every order statistic (`topk`, `kthvalue`,
  `median`, `mode`, `quantile`) is a composition of it and `gather`.
- the cumulative scans `cumprod cummax cummin cumlogsumexp` (XLA's native scans; a composition would be
  quadratic). The tangent of `cumprod`/`cumlogsumexp` is a log-depth prefix scan of (value, tangent) pairs,
  exact where the input has zeros (or -inf), linear in the tangent and so transposable by its parts; the
  tangent of `cummax`/`cummin` is a gather at their indices.
"""
from __future__ import annotations

import math
from collections import namedtuple

import jax.numpy as jnp
import numpy as np
from jax import lax

from aotjax.core.errors import DTypeError, ShapeError, UnsupportedError
from aotjax.core.interpreter import Tracer
from aotjax.core.primitive import Primitive, Recompute, largest_array_flops
from aotjax.core.source_info import where as _where
from aotjax.interpreters.ad_util import Zero
from aotjax.interpreters.batching import batching_rules, defaxis, shift_axis
from aotjax.interpreters.jvp import jvp_rules
from aotjax.interpreters.lowering import register_lowering
from aotjax.ops.base.casts import convert
from aotjax.ops.base.combinators import standard_primitive
from aotjax.ops.base.data import as_tensor, tensor
from aotjax.ops.base.frontend import canonical_dim
from aotjax.ops.base.promotion import _FLOAT, category, default_int_dtype
from aotjax.ops.creation.factories import arange, full
from aotjax.ops.indexing.subscripts import gather_p
from aotjax.ops.math.elementwise import where
from aotjax.ops.reduce.reductions import _int_to_default, _ordered
from aotjax.ops.shape.copies import cat
from aotjax.ops.shape.views import slice_p
from aotjax.tensor import Tensor, method

__all__ = ["sort", "argsort", "msort", "topk", "kthvalue", "median", "nanmedian", "mode", "quantile", "nanquantile",
           "unique", "unique_consecutive", "searchsorted", "bucketize", "isin", "cumprod", "cummax", "cummin",
           "logcumsumexp", "cumsum_", "cumprod_"]


# -- sort ----------------------------------------------------------------------------------------------
def _sort_lower(x, *, axis, descending):
    iota = lax.broadcasted_iota(np.dtype(default_int_dtype()), x.shape, axis)
    if not descending:
        return list(lax.sort((x, iota), dimension=axis, num_keys=1, is_stable=True))
    # NOTE: descending and stable, NaN first: the stable ascending sort of the reversed input, reversed.
    values, rev = lax.sort((lax.rev(x, (axis,)), iota), dimension=axis, num_keys=1, is_stable=True)
    return [lax.rev(values, (axis,)), x.shape[axis] - 1 - lax.rev(rev, (axis,))]


sort_p = Primitive("sort", multiple_results=True, recompute=Recompute.EXPENSIVE, flops=largest_array_flops)
register_lowering(sort_p, _sort_lower)


def _selection_rules(prim: Primitive) -> None:
    """jvp and batching of a primitive returning (values, indices) picked from `x` along its `axis` param (`sort`,
    `top_k`): the values' tangent is the tangent gathered at the indices; batching shifts the axis."""
    def jvp(primals, tangents, *, axis, **params):
        (x,), (t,) = primals, tangents
        values, indices = prim.bind(x, axis=axis, **params)
        tv = Zero(values.aval) if isinstance(t, Zero) else gather_p.bind(t, indices, dim=axis)
        return [values, indices], [tv, Zero(indices.aval)]

    def batch(axis_size, vals, bdims, *, axis, **params):
        (x,), (d,) = vals, bdims
        return prim.bind(x, axis=shift_axis(axis, d), **params), [d, d]

    jvp_rules[prim] = jvp
    batching_rules[prim] = batch


_selection_rules(sort_p)


# -- top_k: the k largest along an axis (XLA's TopK: NaN counts as the largest, ties keep their order, as the
# stable descending sort does), without sorting the whole axis
def _top_k_lower(x, *, k, axis):
    moved = jnp.moveaxis(x, axis, -1)
    values, indices = lax.top_k(moved, k)
    return [jnp.moveaxis(values, -1, axis), jnp.moveaxis(indices.astype(default_int_dtype()), -1, axis)]


top_k_p = Primitive("top_k", multiple_results=True, recompute=Recompute.EXPENSIVE, flops=largest_array_flops)
register_lowering(top_k_p, _top_k_lower)
_selection_rules(top_k_p)


# -- cumulative scans -----------------------------------------------------------------------------------
def _scan_lower(fn):
    return lambda x, *, axis: fn(x, axis=axis) if x.ndim else x


def _scan_shape(name):
    def rule(x, *, axis):
        if not 0 <= axis < max(x.ndim, 1):
            raise ShapeError(f"{name}: axis {axis} is out of range for shape {list(x.shape)}")
        return x.shape
    return rule


def _scan_primitive(name, fn):
    prim = standard_primitive(name, _scan_shape(name), lambda x, *, axis: x.dtype, _scan_lower(fn),
                              recompute=Recompute.EXPENSIVE, flops=largest_array_flops)
    defaxis(prim)
    return prim


def _shifted(v, k: int, axis: int, fill):
    """`v` moved `k` places forward along `axis`, the first `k` places `fill`."""
    n = v.shape[axis]
    head = full(v.shape[:axis] + (k,) + v.shape[axis + 1:], fill, dtype=v.dtype)
    return cat([head, slice_p.bind(v, dim=axis, start=0, stop=n - k, step=1)], axis)


def _pair_scan(combine, identity, p, dp, axis: int):
    """The inclusive prefix scan of `(p, dp)` pairs by `combine(earlier, later)` (Hillis-Steele: log2(n) steps of
    a shifted combine), its tangent half linear in `dp`."""
    n, k = p.shape[axis] if p.ndim else 1, 1
    while k < n:
        p, dp = combine((_shifted(p, k, axis, identity), _shifted(dp, k, axis, 0)), (p, dp))
        k *= 2
    return dp


def _mul_pairs(a, b):
    (pa, ta), (pb, tb) = a, b
    return pa * pb, ta * pb + pa * tb


def _logaddexp_pairs(a, b):
    (ma, ta), (mb, tb) = a, b
    m = _logaddexp(ma, mb)
    return m, ta * _safe_exp(ma - m) + tb * _safe_exp(mb - m)


def _logaddexp(a, b):
    hi = where(a > b, a, b)
    lo = where(a > b, b, a)
    finite = hi.isfinite()
    return where(finite, hi + (lo - where(finite, hi, 0.0)).exp().log1p(), hi)


def _safe_exp(d):
    return where(d.isnan(), 0.0, d).exp()  # NOTE: -inf - -inf: the weight of an empty prefix is 0


def _scan_jvp(prim, combine, identity):
    def rule(primals, tangents, *, axis):
        (x,), (t,) = primals, tangents
        out = prim.bind(x, axis=axis)
        if isinstance(t, Zero) or x.ndim == 0:
            return [out], [t]
        return [out], [_pair_scan(combine, identity, x, t, axis)]
    return rule


cumprod_p = _scan_primitive("cumprod", lambda x, axis: lax.cumprod(x, axis=axis))
jvp_rules[cumprod_p] = _scan_jvp(cumprod_p, _mul_pairs, 1)
cumlogsumexp_p = _scan_primitive("cumlogsumexp", lambda x, axis: lax.cumlogsumexp(x, axis=axis))
jvp_rules[cumlogsumexp_p] = _scan_jvp(cumlogsumexp_p, _logaddexp_pairs, -math.inf)


def _extremum_lower(fn, nan_wins):
    def lower(x, *, axis):
        if x.ndim == 0:
            return x
        if x.dtype == jnp.bool_:  # NOTE: lax's running max/min refuse bools; as 0/1 they are the same
            return fn(x.astype(np.int8), axis=axis) != 0
        out = fn(x, axis=axis)
        if jnp.issubdtype(x.dtype, jnp.floating):  # NOTE: PyTorch's running max/min is NaN from the first NaN on
            out = jnp.where(lax.cummax(jnp.isnan(x).astype(np.int8), axis=axis) > 0, jnp.nan, out)
        return out
    return lower


cummax_p = _scan_primitive("cummax", _extremum_lower(lambda x, axis: lax.cummax(x, axis=axis), True))
cummin_p = _scan_primitive("cummin", _extremum_lower(lambda x, axis: lax.cummin(x, axis=axis), True))


def _running_extremum_indices(x, values, axis: int):
    """The index of the last element equal to the running extremum (NaN equal to NaN), as PyTorch's `cummax`."""
    hit = (x == values) | (x.isnan() & values.isnan())
    shape = [1] * x.ndim
    shape[axis] = x.shape[axis]
    iota = arange(x.shape[axis], dtype=default_int_dtype()).reshape(shape)
    return cummax_p.bind(where(hit, iota, 0), axis=axis)


def _extremum_jvp(prim):
    def rule(primals, tangents, *, axis):
        (x,), (t,) = primals, tangents
        out = prim.bind(x, axis=axis)
        if isinstance(t, Zero) or x.ndim == 0:
            return [out], [t]
        return [out], [gather_p.bind(t, _running_extremum_indices(x, out, axis), dim=axis)]
    return rule


jvp_rules[cummax_p] = _extremum_jvp(cummax_p)
jvp_rules[cummin_p] = _extremum_jvp(cummin_p)


# -- scans: frontend ----------------------------------------------------------------------------------
def cumprod(x, dim: int, *, dtype=None):
    """The running product along `dim`; integer and bool tensors give the default int dtype.

    >>> aotjax.cumprod(aotjax.tensor([1.0, 2.0, 3.0]), 0)
    tensor([1., 2., 6.])
    """
    x = _int_to_default(as_tensor(x), dtype, "cumprod")
    return cumprod_p.bind(x, axis=canonical_dim(dim, x.ndim, "cumprod"))


def cumsum_(x, dim: int, *, dtype=None):
    """In-place `cumsum`.

    >>> x = aotjax.tensor([1.0, 2.0, 3.0])
    >>> x.cumsum_(0)
    tensor([1., 3., 6.])
    """
    x = as_tensor(x)
    v = x.cumsum(dim, dtype=dtype)
    return x.copy_(v)


def cumprod_(x, dim: int, *, dtype=None):
    """In-place `cumprod`.

    >>> x = aotjax.tensor([1.0, 2.0, 3.0])
    >>> x.cumprod_(0)
    tensor([1., 2., 6.])
    """
    x = as_tensor(x)
    return x.copy_(cumprod(x, dim, dtype=dtype))


CummaxResult = namedtuple("cummax", ["values", "indices"])
CumminResult = namedtuple("cummin", ["values", "indices"])


def _running(prim, result, op, x, dim):
    x = _ordered(op, x)
    axis = canonical_dim(dim, x.ndim, op)
    values = prim.bind(x, axis=axis)
    if x.ndim == 0:
        return result(values, tensor(0, dtype=default_int_dtype()))
    return result(values, _running_extremum_indices(x, values, axis))


def cummax(x, dim: int):
    """The running maximum along `dim` and the index where each was found (the last one on ties), as a
    named tuple `(values, indices)`; NaN propagates.

    >>> aotjax.cummax(aotjax.tensor([1, 3, 2, 3]), 0)
    cummax(values=tensor([1, 3, 3, 3]), indices=tensor([0, 1, 1, 3]))
    """
    return _running(cummax_p, CummaxResult, "cummax", x, dim)


def cummin(x, dim: int):
    """The running minimum along `dim` and its indices, like `cummax`.

    >>> aotjax.cummin(aotjax.tensor([3, 1, 2]), 0).values
    tensor([3, 1, 1])
    """
    return _running(cummin_p, CumminResult, "cummin", x, dim)


def logcumsumexp(x, dim: int):
    """`log(cumsum(exp(x)))` along `dim`, computed stably; floating-point tensors only.

    >>> aotjax.logcumsumexp(aotjax.tensor([0.0, 0.0]), 0)
    tensor([0.        , 0.6931472])
    """
    x = as_tensor(x)
    if category(x.dtype) < _FLOAT:
        raise DTypeError(f"logcumsumexp: expected a floating-point tensor, got {x.aval.str_short()}{_where()}; "
                         f"convert it first (`x.float()`)")
    return cumlogsumexp_p.bind(x, axis=canonical_dim(dim, x.ndim, "logcumsumexp"))


# -- sort: frontend -----------------------------------------------------------------------------------
SortResult = namedtuple("sort", ["values", "indices"])
TopkResult = namedtuple("topk", ["values", "indices"])
KthvalueResult = namedtuple("kthvalue", ["values", "indices"])
MedianResult = namedtuple("median", ["values", "indices"])
NanmedianResult = namedtuple("nanmedian", ["values", "indices"])
ModeResult = namedtuple("mode", ["values", "indices"])


def _sort(x, axis: int, descending: bool):
    if x.ndim == 0:
        return x.clone(), tensor(0, dtype=default_int_dtype())
    return tuple(sort_p.bind(x, axis=axis, descending=bool(descending)))


def sort(x, dim: int = -1, descending: bool = False, *, stable: bool = False):
    """`x` sorted along `dim`, and the indices of the sorted elements in `x`, as a named tuple
    `(values, indices)`. The sort is always stable (`stable` is accepted for PyTorch's signature); NaN
    sorts last ascending and first descending, as in PyTorch.

    >>> aotjax.sort(aotjax.tensor([3.0, 1.0, 2.0]))
    sort(values=tensor([1., 2., 3.]), indices=tensor([1, 2, 0]))
    >>> aotjax.tensor([[1, 3], [4, 2]]).sort(dim=0, descending=True).indices
    tensor([[1, 0],
            [0, 1]])
    """
    x = _ordered("sort", x)
    return SortResult(*_sort(x, canonical_dim(dim, x.ndim, "sort"), descending))


def argsort(x, dim: int = -1, descending: bool = False, *, stable: bool = False):
    """The indices that sort `x` along `dim` (stable).

    >>> aotjax.argsort(aotjax.tensor([3, 1, 2]))
    tensor([1, 2, 0])
    """
    return sort(x, dim, descending, stable=stable).indices


def msort(x):
    """`x` sorted along its first dim.

    >>> aotjax.msort(aotjax.tensor([[2, 1], [0, 3]]))
    tensor([[0, 1],
            [2, 3]])
    """
    return sort(x, 0).values


def _take(v, axis: int, start: int, stop: int):
    return slice_p.bind(v, dim=axis, start=start, stop=stop, step=1)


def topk(x, k: int, dim: int = -1, largest: bool = True, sorted: bool = True):
    """The `k` largest (or smallest, `largest=False`) elements along `dim` and their indices, as a named tuple
    `(values, indices)`, in sorted order (largest first); NaN counts as the largest.

    >>> aotjax.topk(aotjax.tensor([1.0, 5.0, 3.0, 4.0]), 2)
    topk(values=tensor([5., 4.]), indices=tensor([1, 3]))
    """
    x = _ordered("topk", x)
    axis = canonical_dim(dim, x.ndim, "topk")
    n = x.shape[axis] if x.ndim else 1
    if not 0 <= k <= n:
        raise ShapeError(f"topk: k ({k}) is out of range for a dimension of size {n}{_where()}")
    if largest and x.ndim and x.dtype != np.bool_:  # NOTE: XLA's TopK, without sorting the whole axis
        return TopkResult(*top_k_p.bind(x, k=int(k), axis=axis))
    values, indices = _sort(x, axis, largest)
    if x.ndim == 0:
        return TopkResult(values, indices)
    return TopkResult(_take(values, axis, 0, k), _take(indices, axis, 0, k))


def _at(values, indices, position, axis: int, keepdim: bool):
    """The elements at `position` (an int, or an index tensor of the result's shape with `axis` kept) along `axis`."""
    if isinstance(position, int):
        v, i = _take(values, axis, position, position + 1), _take(indices, axis, position, position + 1)
    else:
        v, i = gather_p.bind(values, position, dim=axis), gather_p.bind(indices, position, dim=axis)
    return (v, i) if keepdim else (v.squeeze(axis), i.squeeze(axis))


def kthvalue(x, k: int, dim: int = -1, keepdim: bool = False):
    """The `k`-th smallest element (1-based) along `dim` and its index, as a named tuple `(values, indices)`.

    >>> aotjax.kthvalue(aotjax.tensor([3.0, 1.0, 2.0]), 2)
    kthvalue(values=tensor(2.), indices=tensor(2))
    """
    x = _ordered("kthvalue", x)
    axis = canonical_dim(dim, x.ndim, "kthvalue")
    n = x.shape[axis] if x.ndim else 1
    if not 1 <= k <= n:
        raise ShapeError(f"kthvalue: k ({k}) must be between 1 and the size of dim {dim} ({n}){_where()}")
    values, indices = _sort(x, axis, False)
    if x.ndim == 0:
        return KthvalueResult(values, indices)
    return KthvalueResult(*_at(values, indices, k - 1, axis, keepdim))


def _median(op: str, result, x, dim, keepdim: bool, ignore_nan: bool):
    x = _ordered(op, x)
    flat = dim is None
    if flat:
        x, dim = x.reshape(-1), 0
    axis = canonical_dim(dim, x.ndim, op)
    n = x.shape[axis] if x.ndim else 1
    if n == 0 and flat and category(x.dtype) >= _FLOAT:
        return full((), math.nan, dtype=x.dtype)  # NOTE: torch's median of no element
    if n == 0:
        raise ShapeError(f"{op}: cannot compute the median of an empty dimension{_where()}")
    values, indices = _sort(x, axis, False)
    if x.ndim == 0:
        return values if flat else result(values, indices)
    if category(x.dtype) >= _FLOAT:
        # NOTE: NaN sorts last: `median` picks the first NaN if there is one, `nanmedian` the median of the others.
        n_nan = x.isnan().sum(axis, keepdim=True)
        if ignore_nan:
            position = ((n - n_nan - 1) // 2).clamp(min=0)
        else:
            position = where(n_nan > 0, n - n_nan, (n - 1) // 2)
        v, i = _at(values, indices, position, axis, keepdim or flat)
    else:
        v, i = _at(values, indices, (n - 1) // 2, axis, keepdim or flat)
    return v.reshape(()) if flat else result(v, i)


def median(x, dim=None, keepdim: bool = False):
    """The lower median of `x` (`dim=None`: of every element, a 0-d tensor), or along `dim` the named tuple
    `(values, indices)`; NaN if there is a NaN.

    >>> aotjax.median(aotjax.tensor([4.0, 1.0, 3.0, 2.0]))
    tensor(2.)
    >>> aotjax.median(aotjax.tensor([[4, 1, 3]]), 1)
    median(values=tensor([3]), indices=tensor([2]))
    """
    return _median("median", MedianResult, x, dim, keepdim, False)


def nanmedian(x, dim=None, keepdim: bool = False):
    """`median` ignoring NaN (NaN only where every element is NaN).

    >>> aotjax.nanmedian(aotjax.tensor([1.0, float('nan'), 3.0, 2.0]))
    tensor(2.)
    """
    return _median("nanmedian", NanmedianResult, x, dim, keepdim, True)


def mode(x, dim: int = -1, keepdim: bool = False):
    """The most frequent value along `dim` (the smallest one on ties) and the index of its last occurrence,
    as a named tuple `(values, indices)`.

    >>> aotjax.mode(aotjax.tensor([3, 1, 3, 1, 2]))
    mode(values=tensor(1), indices=tensor(3))
    """
    x = _ordered("mode", x)
    axis = canonical_dim(dim, x.ndim, "mode")
    values, indices = _sort(x, axis, False)
    if x.ndim == 0:
        return ModeResult(values, indices)
    n = x.shape[axis]
    shape = [1] * x.ndim
    shape[axis] = n
    iota = arange(n, dtype=default_int_dtype()).reshape(shape)
    # NOTE: in sorted order a run of equal values starts where the value changes; its length at its end is
    # the value's count, and the stable sort puts the value's last occurrence there.
    changed = values != _shifted(values, 1, axis, 0)
    changed = changed | (iota == 0)
    start = cummax_p.bind(where(changed, iota, 0), axis=axis)
    position = (iota - start).argmax(axis, keepdim=True)
    return ModeResult(*_at(values, indices, position, axis, keepdim))


_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(op: str, x, q, dim, keepdim: bool, interpolation: str, ignore_nan: bool):
    x = _ordered(op, x)
    if category(x.dtype) < _FLOAT:
        raise DTypeError(f"{op}: expected a floating-point input, got {x.aval.str_short()}{_where()}")
    if interpolation not in _INTERPOLATIONS:
        raise ValueError(f"{op}: interpolation must be one of {_INTERPOLATIONS}, got {interpolation!r}{_where()}")
    qt = convert(q, x.dtype) if isinstance(q, Tensor) else tensor(q, dtype=x.dtype)  # NOTE: not via float32
    if qt.ndim > 1:
        raise ShapeError(f"{op}: q must be a number, a 0-d or a 1-d tensor, got {qt.aval.str_short()}{_where()}")
    scalar_q, qt = qt.ndim == 0, qt.reshape(-1)
    if not isinstance(qt, Tracer) and qt.numel() and not bool(((qt >= 0) & (qt <= 1)).all()):
        raise ValueError(f"{op}: q values must be in the range [0, 1]{_where()}")
    ndim = x.ndim
    if dim is None:
        x, axis = x.reshape(-1), 0
    else:
        axis = canonical_dim(dim, x.ndim, op)
        x = x.reshape(1) if x.ndim == 0 else x
    n = x.shape[axis]
    if x.numel() == 0:
        raise ShapeError(f"{op}: expected a non-empty input, got {x.aval.str_short()}{_where()}")
    values = _sort(x, axis, False)[0].movedim(axis, -1)  # (..., n), NaN last
    n_nan = values.isnan().sum(-1, keepdim=True)  # (..., 1)
    count = n - n_nan if ignore_nan else full((), n, dtype=n_nan.dtype)
    rank = qt * convert(count - 1, x.dtype).clamp(min=0)  # (..., Q)
    lo_i, hi_i = rank.floor(), rank.ceil()
    if interpolation == "nearest":
        lo_i = hi_i = rank.round()
    elif interpolation == "lower":
        hi_i = lo_i
    elif interpolation == "higher":
        lo_i = hi_i
    rank = rank.expand(*values.shape[:-1], qt.shape[0])
    lo, hi = (gather_p.bind(values, convert(i.expand(*rank.shape), default_int_dtype()), dim=values.ndim - 1)
              for i in (lo_i, hi_i))
    out = lo.lerp(hi, rank - lo_i) if interpolation == "linear" else lo.lerp(hi, 0.5) if interpolation == "midpoint" \
        else lo
    if not ignore_nan:
        out = where(n_nan > 0, math.nan, out)
    out = out.movedim(-1, 0)  # (Q, ...)
    if keepdim and ndim:  # NOTE: a 0-d input keeps no dim: (Q,) or, for a number q, 0-d (as torch)
        out = out.reshape((out.shape[0],) + (1,) * ndim) if dim is None else out.unsqueeze(1 + axis)
    return out[0] if scalar_q else out


def quantile(x, q, dim=None, keepdim: bool = False, *, interpolation: str = "linear"):
    """The `q`-th quantiles (a number, or a 1-d tensor: one result per entry, stacked first) of `x` along
    `dim` (`None`: of every element); `interpolation` between the two nearest: `linear`, `lower`, `higher`,
    `midpoint`, `nearest`. NaN where the input has a NaN.

    >>> aotjax.quantile(aotjax.tensor([1.0, 2.0, 3.0, 4.0]), 0.5)
    tensor(2.5)
    >>> aotjax.quantile(aotjax.tensor([1.0, 2.0, 3.0, 4.0]), aotjax.tensor([0.25, 1.0]), interpolation="lower")
    tensor([1., 4.])
    """
    return _quantile("quantile", x, q, dim, keepdim, interpolation, False)


def nanquantile(x, q, dim=None, keepdim: bool = False, *, interpolation: str = "linear"):
    """`quantile` ignoring NaN.

    >>> aotjax.nanquantile(aotjax.tensor([1.0, float('nan'), 3.0]), 0.5)
    tensor(2.)
    """
    return _quantile("nanquantile", x, q, dim, keepdim, interpolation, True)


# -- data-dependent shapes (eager only) ----------------------------------------------------------------
def _eager(op: str, x):
    x = as_tensor(x)
    if isinstance(x, Tracer):
        raise UnsupportedError(
            f"{op}: the result's shape depends on the tensor's values, so it cannot be traced (the tensor is "
            f"{x.aval.str_short()}){_where()}. Call it eagerly, outside jit/grad/vmap, or keep shapes static "
            f"(sort and compare neighbours with aotjax.sort).")
    return x


def _index_tensor_np(a):
    return tensor(np.asarray(a, dtype=default_int_dtype()))


def unique(x, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False, dim=None):
    """The distinct elements of `x` in ascending order (eager only), with the index of each element's value
    in them (`return_inverse`) and their counts (`return_counts`); `dim` for distinct slices.

    >>> aotjax.unique(aotjax.tensor([3, 1, 3, 2]), return_counts=True)
    (tensor([1, 2, 3]), tensor([1, 1, 2]))
    """
    a = _eager("unique", x).numpy()
    out = np.unique(a, return_inverse=True, return_counts=True, axis=dim)
    values, inverse, counts = out
    inverse = inverse.reshape(a.shape if dim is None else a.shape[dim])
    return _unique_result(tensor(values), inverse, counts, return_inverse, return_counts)


def _unique_result(values, inverse, counts, return_inverse, return_counts):
    extras = ([_index_tensor_np(inverse)] if return_inverse else []) + (
        [_index_tensor_np(counts)] if return_counts else [])
    return (values, *extras) if extras else values


def unique_consecutive(x, return_inverse: bool = False, return_counts: bool = False, dim=None):
    """`x` with each run of equal consecutive elements (slices along `dim`) kept once (eager only).

    >>> aotjax.unique_consecutive(aotjax.tensor([1, 1, 2, 2, 1]))
    tensor([1, 2, 1])
    """
    a = _eager("unique_consecutive", x).numpy()
    axis = 0 if dim is None else canonical_dim(dim, a.ndim, "unique_consecutive")
    b = a.reshape(-1) if dim is None else np.moveaxis(a, axis, 0)
    if b.shape[0] == 0:
        starts = np.zeros(0, bool)
    else:
        diff = (b[1:] != b[:-1]).reshape(b.shape[0] - 1, math.prod(b.shape[1:])).any(axis=1)  # NOTE: 0 elements
        starts = np.concatenate([[True], diff])
    keep = b[starts]
    values = keep if dim is None else np.moveaxis(keep, 0, axis)
    inverse = np.cumsum(starts) - 1
    counts = np.diff(np.append(np.flatnonzero(starts), b.shape[0]))
    inverse = inverse.reshape(a.shape) if dim is None else inverse
    return _unique_result(tensor(np.ascontiguousarray(values)), inverse, counts, return_inverse, return_counts)


# -- searching ------------------------------------------------------------------------------------------
def searchsorted(sorted_sequence, values, *, out_int32: bool = False, right: bool = False, side=None,
                 sorter=None):
    """For each of `values`, the index in `sorted_sequence` (sorted along its last dim; 1-d, or with the leading
    dims of `values`) where it would be inserted keeping the order: before equal elements, or after them
    with `right=True` / `side='right'`. `sorter` holds the indices that sort an unsorted sequence. NaN counts
    as the largest.

    >>> aotjax.searchsorted(aotjax.tensor([1, 3, 5]), aotjax.tensor([3, 6]))
    tensor([1, 3])
    >>> aotjax.searchsorted(aotjax.tensor([1, 3, 5]), 3, right=True)
    tensor(2)
    """
    seq = as_tensor(sorted_sequence)
    if side is not None:
        if side not in ("left", "right") or (right and side == "left"):
            raise ValueError(f"searchsorted: side must be 'left' or 'right' and agree with right={right}, got "
                             f"{side!r}{_where()}")
        right = side == "right"
    if sorter is not None:
        seq = gather_p.bind(seq, as_tensor(sorter), dim=seq.ndim - 1)
    scalar = not hasattr(values, "shape")
    v = as_tensor(values)
    if seq.ndim > 1 and tuple(seq.shape[:-1]) != tuple(v.shape[:-1]):
        raise ShapeError(f"searchsorted: the sequence's leading dims {list(seq.shape[:-1])} must match the "
                         f"values' {list(v.shape[:-1])}{_where()}")
    s = seq.unsqueeze(-2) if seq.ndim > 1 else seq  # (..., 1, n) or (n,)
    vv = v.unsqueeze(-1)  # (..., m, 1)
    if category(seq.dtype) >= _FLOAT or category(v.dtype) >= _FLOAT:
        s_nan, v_nan = s.isnan(), vv.isnan()
        before = (s <= vv) | v_nan if right else (s < vv) | (v_nan & ~s_nan)
    else:
        before = s <= vv if right else s < vv
    out = before.sum(-1)
    out = convert(out, np.int32 if out_int32 else default_int_dtype())
    return out.reshape(()) if scalar else out


def bucketize(input, boundaries, *, out_int32: bool = False, right: bool = False):
    """The index of the bucket of each element of `input` among the 1-d sorted `boundaries`
    (`searchsorted(boundaries, input, right=right)`).

    >>> aotjax.bucketize(aotjax.tensor([0.5, 2.0, 9.0]), aotjax.tensor([1.0, 2.0, 3.0]))
    tensor([0, 1, 3])
    """
    b = as_tensor(boundaries)
    if b.ndim != 1:
        raise ShapeError(f"bucketize: boundaries must be 1-d, got {b.aval.str_short()}{_where()}")
    return searchsorted(b, input, out_int32=out_int32, right=right)


def isin(elements, test_elements, *, assume_unique: bool = False, invert: bool = False):
    """Whether each of `elements` is among `test_elements` (bool, `elements`' shape); negated with `invert`.

    >>> aotjax.isin(aotjax.tensor([1, 2, 3]), aotjax.tensor([3, 1]))
    tensor([ True, False,  True])
    """
    e, t = as_tensor(elements), as_tensor(test_elements).reshape(-1)
    found = (e.unsqueeze(-1) == t).any(-1)
    return ~found if invert else found


for _op in (sort, argsort, msort, topk, kthvalue, median, nanmedian, mode, quantile, nanquantile, unique,
            unique_consecutive, cumprod, cummax, cummin, logcumsumexp, cumsum_, cumprod_):
    method(_op)
