"""Reductions: sums, products, extrema, their indices, logical reductions, and cumulative sums.

The primitives (`reduce_sum reduce_prod reduce_max reduce_min reduce_and reduce_or argmax argmin
cumsum`) take static params: `axes` (a sorted tuple of non-negative dims) and `keepdims`, or one
`axis`. `mean`, `var`, `std` and `logsumexp` are compositions of them. Signatures follow PyTorch:
`dim` may be an int or a tuple, negative dims count from the end, `dim=None` reduces everything;
integer and bool `sum`/`prod`/`cumsum` give the default int dtype (int64 with jax's x64 mode on).

NOTE: `sum max min all any` shadow the Python builtins in this module; `builtins.max` is used
where the builtin is meant.
"""
from __future__ import annotations

import builtins
import math
from collections import namedtuple

import jax
import jax.numpy as jnp
import numpy as np

from aotjax.autograd.graph import RecordingTensor, fast_operand
from aotjax.core.call_epoch import running as _transforms
from aotjax.core.errors import DTypeError, ShapeError
from aotjax.core.primitive import Recompute, largest_array_flops
from aotjax.core.source_info import where as _where
from aotjax.interpreters import hooks
from aotjax.interpreters.ad_util import Zero, instantiate
from aotjax.interpreters.batching import batching_rules, defreducer, moveaxis, shift_axis
from aotjax.interpreters.eval import apply_recording, plain_executable, run_plain
from aotjax.interpreters.jvp import defjvp_zero, deflinear, jvp_rules
from aotjax.interpreters.transpose import deflinear_transpose
from aotjax.ops.base.casts import convert
from aotjax.ops.base.combinators import standard_primitive
from aotjax.ops.base.data import as_tensor
from aotjax.ops.base.frontend import canonical_dim, canonical_dims, to_dtype
from aotjax.ops.base.promotion import _FLOAT, _INT, category, default_float_dtype, default_int_dtype
from aotjax.ops.math.elementwise import abs as magnitude
from aotjax.ops.math.elementwise import (
    add,
    div,
    eq,
    exp,
    isfinite,
    log,
    maximum,
    minimum,
    mul,
    sqrt,
    where,
)
from aotjax.ops.shape.copies import flip_p
from aotjax.ops.shape.views import detach_p, expand_p, permute_p, select_p, slice_p, view_p
from aotjax.tensor import Tensor, method

__all__ = ["sum", "mean", "prod", "amax", "amin", "max", "min", "argmax", "argmin", "all", "any", "var", "std",
           "logsumexp", "cumsum"]

_LOW_PRECISION = (np.dtype(np.float16), to_dtype("bfloat16"))


# -- primitives --------------------------------------------------------------------------------
def _reduced_shape(op: str, shape: tuple, axes: tuple, keepdims: bool) -> tuple:
    if builtins.any(not 0 <= a < len(shape) for a in axes):
        raise ShapeError(f"{op}: axes {axes} are out of range for shape {list(shape)}")
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _accumulating(fn):
    """`fn(x, axis=..., ...)` computed in float32 for float16/bfloat16 inputs (as PyTorch accumulates),
    and cast back to the input dtype."""
    def lower(x, **kw):
        if x.dtype in _LOW_PRECISION:
            return fn(x.astype(np.float32), **kw).astype(x.dtype)
        return fn(x, **kw).astype(x.dtype)
    return lower


def _reducer(name: str, fn, out_dtype=None):
    """A reduction primitive over `axes` (params `axes`, `keepdims`): saved rather than recomputed, at one
    operation per element read."""
    prim = standard_primitive(
        name, lambda x, *, axes, keepdims: _reduced_shape(name, x.shape, axes, keepdims),
        lambda x, *, axes, keepdims: x.dtype if out_dtype is None else out_dtype,
        lambda x, *, axes, keepdims: fn(x, axis=axes, keepdims=keepdims),
        recompute=Recompute.EXPENSIVE, flops=largest_array_flops)
    defreducer(prim)
    return prim


reduce_sum_p = _reducer("reduce_sum", _accumulating(jnp.sum))
deflinear(reduce_sum_p)


def _reduce_sum_transpose(ct, x, *, axes, keepdims):
    kept = tuple(1 if i in axes else n for i, n in enumerate(x.shape))
    v = ct if keepdims or kept == tuple(ct.shape) else view_p.bind(ct, shape=kept)
    return v if kept == x.shape else expand_p.bind(v, shape=x.shape)


deflinear_transpose(reduce_sum_p, _reduce_sum_transpose)
reduce_prod_p = _reducer("reduce_prod", _accumulating(jnp.prod))


def _reduce_prod_jvp(primals, tangents, *, axes, keepdims):
    (x,), (t,) = primals, tangents
    out = reduce_prod_p.bind(x, axes=axes, keepdims=keepdims)
    if isinstance(t, Zero):
        return [out], [Zero(out.aval)]
    # NOTE: the product as a tree of pairwise products, differentiated by the product rule: exact where x
    # has zeros (unlike `t * out / x`), and differentiable again.
    kept = tuple(d for d in range(x.ndim) if d not in axes)
    n = math.prod(x.shape[a] for a in axes)
    p, dp = (view_p.bind(permute_p.bind(v, perm=axes + kept), shape=(n, *(x.shape[d] for d in kept))) for v in (x, t))
    if n == 0:
        return [out], [instantiate(Zero(out.aval))]
    rest = None  # the (product, tangent) of the elements left over by odd halvings
    while n > 1:
        if n % 2:
            first = (select_p.bind(p, dim=0, index=0), select_p.bind(dp, dim=0, index=0))
            rest = first if rest is None else _product_rule(rest, first)
            p, dp = tuple(slice_p.bind(v, dim=0, start=1, stop=n, step=1) for v in (p, dp))
            n -= 1
        halves = [tuple(slice_p.bind(v, dim=0, start=i * n // 2, stop=(i + 1) * n // 2, step=1) for v in (p, dp))
                  for i in (0, 1)]
        p, dp = _product_rule(*halves)
        n //= 2
    total = (select_p.bind(p, dim=0, index=0), select_p.bind(dp, dim=0, index=0))
    _, tangent = total if rest is None else _product_rule(total, rest)
    return [out], [view_p.bind(tangent, shape=out.aval.shape)]


def _product_rule(a, b):
    (pa, ta), (pb, tb) = a, b
    return mul(pa, pb), add(mul(ta, pb), mul(pa, tb))


jvp_rules[reduce_prod_p] = _reduce_prod_jvp
reduce_max_p = _reducer("reduce_max", jnp.max)


def _extremum_jvp(prim):
    """The tangent at the extremum's positions, shared equally among ties (as `jax.jvp` of `jnp.max`)."""
    def rule(primals, tangents, *, axes, keepdims):
        (x,), (t,) = primals, tangents
        out = prim.bind(x, axes=axes, keepdims=keepdims)
        if isinstance(t, Zero):
            return [out], [Zero(out.aval)]
        kept_shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
        at_extremum = convert(eq(x, view_p.bind(out, shape=kept_shape)), t.dtype)
        total = reduce_sum_p.bind(mul(t, at_extremum), axes=axes, keepdims=keepdims)
        return [out], [div(total, reduce_sum_p.bind(at_extremum, axes=axes, keepdims=keepdims))]
    return rule


jvp_rules[reduce_max_p] = _extremum_jvp(reduce_max_p)
reduce_min_p = _reducer("reduce_min", jnp.min)
jvp_rules[reduce_min_p] = _extremum_jvp(reduce_min_p)
reduce_and_p = _reducer("reduce_and", jnp.all, np.dtype(np.bool_))
defjvp_zero(reduce_and_p)
reduce_or_p = _reducer("reduce_or", jnp.any, np.dtype(np.bool_))
defjvp_zero(reduce_or_p)


def _arg_shape(name: str):
    def shape_rule(x, *, axis, keepdims):
        axes = tuple(range(x.ndim)) if axis is None else (axis,)
        return _reduced_shape(name, x.shape, axes, keepdims)
    return shape_rule


def _arg_lower(fn):
    def lower(x, *, axis, keepdims):
        return fn(x, axis=axis, keepdims=keepdims).astype(default_int_dtype())
    return lower


# NOTE: the index dtype is the default int dtype (int64 under x64), read when the rule runs.
argmax_p = standard_primitive("argmax", _arg_shape("argmax"), lambda x, **_: default_int_dtype(),
                              _arg_lower(jnp.argmax), recompute=Recompute.EXPENSIVE, flops=largest_array_flops)
defjvp_zero(argmax_p)
argmin_p = standard_primitive("argmin", _arg_shape("argmin"), lambda x, **_: default_int_dtype(),
                              _arg_lower(jnp.argmin), recompute=Recompute.EXPENSIVE, flops=largest_array_flops)
defjvp_zero(argmin_p)


def _arg_batch(prim):
    """The batching rule of `argmax`/`argmin`: one axis shifted past the batch axis; with `axis=None` (the index
    into each example flattened), the batch axis first and each example flattened."""
    def rule(axis_size, vals, dims, *, axis, keepdims):
        (x,), (d,) = vals, dims
        if axis is not None:
            out = prim.bind(x, axis=shift_axis(axis, d), keepdims=keepdims)
            return [out], [d if keepdims or axis > d else d - 1]
        example_ndim = x.ndim - 1
        flat = view_p.bind(moveaxis(x, d, 0), shape=(axis_size, math.prod(x.shape) // axis_size))
        out = prim.bind(flat, axis=1, keepdims=False)
        if keepdims:
            out = view_p.bind(out, shape=(axis_size,) + (1,) * example_ndim)
        return [out], [0]
    batching_rules[prim] = rule


_arg_batch(argmax_p)
_arg_batch(argmin_p)


def _cumsum_shape(x, *, axis):
    if not 0 <= axis < builtins.max(x.ndim, 1):
        raise ShapeError(f"cumsum: axis {axis} is out of range for shape {list(x.shape)}")
    return x.shape


cumsum_p = standard_primitive(
    "cumsum", _cumsum_shape, lambda x, *, axis: x.dtype,
    lambda x, *, axis: _accumulating(jnp.cumsum)(x, axis=axis) if x.ndim else x,
    recompute=Recompute.EXPENSIVE, flops=largest_array_flops)
deflinear(cumsum_p)


def _cumsum_batch(axis_size, vals, dims, *, axis):
    (x,), (d,) = vals, dims
    if x.ndim == 1:  # NOTE: the cumsum of a 0-d example is the example itself
        return [x], [d]
    return [cumsum_p.bind(x, axis=shift_axis(axis, d))], [d]


batching_rules[cumsum_p] = _cumsum_batch


def _cumsum_transpose(ct, x, *, axis):
    if x.ndim == 0:
        return ct
    # NOTE: the transpose of a prefix sum is a suffix sum: the prefix sum of the reversed cotangent, reversed.
    return flip_p.bind(cumsum_p.bind(flip_p.bind(ct, dims=(axis,)), axis=axis), dims=(axis,))


deflinear_transpose(cumsum_p, _cumsum_transpose)


# -- frontend helpers --------------------------------------------------------------------------
def _axes(op: str, x, dim) -> tuple[int, ...]:
    """The primitive's `axes` for a PyTorch `dim` argument (None or () means every dim)."""
    if isinstance(dim, (list, tuple)) and len(dim) == 0:
        dim = None
    axes = canonical_dims(dim, x.ndim, op)
    return axes if x.ndim else ()


def _count(x, axes, dtype=None):
    n = math.prod(x.shape[a] for a in axes)
    if dtype is None or isinstance(n, int):
        return n
    # NOTE: a symbolic size (a batch-polymorphic export): counted by the program, as jax does with its dimensions
    ones = expand_p.bind(convert(as_tensor(1), dtype), shape=tuple(x.shape[a] for a in axes))
    return reduce_sum_p.bind(ones, axes=tuple(range(len(axes))), keepdims=False)


def _int_to_default(x, dtype, op: str):
    """`x` converted to `dtype` if given, else integer and bool tensors to the default int dtype."""
    if dtype is not None:
        return convert(x, to_dtype(dtype, op))
    return convert(x, default_int_dtype()) if category(x.dtype) <= _INT else x


def _require_float(op: str, x, dtype=None):
    x = as_tensor(x)
    if dtype is not None:
        x = convert(x, to_dtype(dtype, op))
    if category(x.dtype) < _FLOAT:
        raise DTypeError(f"{op}: expected a floating-point tensor, got {x.aval.str_short()}{_where()}; convert it "
                         f"first (`x.float()`) or pass dtype=aotjax.float32")
    return x


def _compute(x):
    """`x` in the dtype to compute a mean or variance in: float32 for float16/bfloat16."""
    return convert(x, np.float32) if x.dtype in _LOW_PRECISION else x


# -- sums and products -------------------------------------------------------------------------
_plain_sums: dict = {}  # (dim, keepdim, ndim) -> sum's executable for those axes (`plain_executable`)


def _plain_sum(x, dim, keepdim):
    """The executable of `sum(x, dim, keepdim)` on a plain eager tensor (kept per call signature when `dim` is None
    or an int: `True == 1` must not share a key), or None where the fast path does not apply."""
    if dim is None or type(dim) is int:
        key = (dim, bool(keepdim), x.ndim)
        fn = _plain_sums.get(key)
        if fn is not None:
            return fn
    params = {"axes": _axes("sum", x, dim), "keepdims": bool(keepdim)}
    fn = plain_executable(reduce_sum_p, params)
    if fn is not None and (dim is None or type(dim) is int) and len(_plain_sums) < 1024:
        _plain_sums[key] = fn
    return fn


def sum(x, dim=None, keepdim: bool = False, *, dtype=None):
    """The sum over `dim` (an int, a tuple, or None for all); integer and bool tensors sum to the
    default int dtype unless `dtype` is given.

    >>> aotjax.sum(aotjax.tensor([[1, 2], [3, 4]]), dim=0)
    tensor([4, 6])
    >>> aotjax.tensor([[1.0, 2.0], [3.0, 4.0]]).sum(-1, keepdim=True)
    tensor([[3.],
            [7.]])
    """
    if (dtype is None and type(x) is Tensor and not x._chain and x._strides is None and not _transforms[0]
            and category(x.dtype) >= _FLOAT and x._storage.grad_node is None):  # NOTE: the eager fast path
        fn = _plain_sum(x, dim, keepdim)
        out = run_plain(fn, x._storage.base) if fn is not None else None
        if out is not None:
            return out
    elif (dtype is None and type(x) is RecordingTensor and not _transforms[0] and fast_operand(x)
          and category(x.dtype) >= _FLOAT):  # NOTE: it requires grad: the recording fast path
        fn = _plain_sum(x, dim, keepdim)
        if fn is not None:
            out = apply_recording(reduce_sum_p, (x,), (x._storage.base,), fn,
                                  {"axes": _axes("sum", x, dim), "keepdims": bool(keepdim)})
            if out is not None:
                return out
    x = _int_to_default(as_tensor(x), dtype, "sum")
    return reduce_sum_p.bind(x, axes=_axes("sum", x, dim), keepdims=bool(keepdim))


def prod(x, dim=None, keepdim: bool = False, *, dtype=None):
    """The product over `dim` (an int, or None for all); integer and bool tensors give the default
    int dtype unless `dtype` is given.

    >>> aotjax.prod(aotjax.tensor([[1, 2], [3, 4]]), 1)
    tensor([ 2, 12])
    """
    x = _int_to_default(as_tensor(x), dtype, "prod")
    return reduce_prod_p.bind(x, axes=_axes("prod", x, dim), keepdims=bool(keepdim))


def mean(x, dim=None, keepdim: bool = False, *, dtype=None):
    """The mean over `dim` (an int, a tuple, or None for all). Integer tensors raise, as in PyTorch:
    pass `dtype=aotjax.float32` or convert first.

    >>> aotjax.mean(aotjax.tensor([[1.0, 2.0], [3.0, 5.0]]), dim=1)
    tensor([1.5, 4. ])
    """
    x = _require_float("mean", x, dtype)
    axes = _axes("mean", x, dim)
    total = reduce_sum_p.bind(_compute(x), axes=axes, keepdims=bool(keepdim))
    return convert(total / _count(x, axes, total.dtype), x.dtype)


def cumsum(x, dim: int, *, dtype=None):
    """The running sum along `dim`; integer and bool tensors give the default int dtype.

    >>> aotjax.cumsum(aotjax.tensor([1, 2, 3]), 0)
    tensor([1, 3, 6])
    """
    x = _int_to_default(as_tensor(x), dtype, "cumsum")
    return cumsum_p.bind(x, axis=canonical_dim(dim, x.ndim, "cumsum"))


# -- extrema -----------------------------------------------------------------------------------
def _ordered(op: str, x):
    """`x` as a tensor; complex numbers are not ordered, so torch's extrema refuse them."""
    x = as_tensor(x)
    if category(x.dtype) > _FLOAT:
        raise DTypeError(f"{op}: complex tensors are not ordered, got {x.aval.str_short()}{_where()}; compare their "
                         f"abs() or real parts instead.")
    return x


def amax(x, dim=None, keepdim: bool = False):
    """The maximum over `dim` (an int, a tuple, or None/() for all); NaN propagates.

    >>> aotjax.amax(aotjax.tensor([[1, 5], [7, 2]]), dim=(0, 1))
    tensor(7)
    """
    x = _ordered("amax", x)
    return reduce_max_p.bind(x, axes=_axes("amax", x, dim), keepdims=bool(keepdim))


def amin(x, dim=None, keepdim: bool = False):
    """The minimum over `dim` (an int, a tuple, or None/() for all); NaN propagates.

    >>> aotjax.amin(aotjax.tensor([[1, 5], [7, 2]]), dim=-1)
    tensor([1, 2])
    """
    x = _ordered("amin", x)
    return reduce_min_p.bind(x, axes=_axes("amin", x, dim), keepdims=bool(keepdim))


def _arg(prim, op: str, x, dim, keepdim):
    x = _ordered(op, x)
    if dim is None:
        return prim.bind(x, axis=None, keepdims=bool(keepdim))
    axis = canonical_dim(dim, x.ndim, op)
    return prim.bind(x, axis=axis if x.ndim else None, keepdims=bool(keepdim))


def argmax(x, dim=None, keepdim: bool = False):
    """The index of the maximum along `dim` (of the flattened tensor when `dim` is None); the first
    one on ties.

    >>> aotjax.argmax(aotjax.tensor([[1, 5], [7, 2]]))
    tensor(2)
    >>> aotjax.argmax(aotjax.tensor([[1, 5], [7, 2]]), dim=1)
    tensor([1, 0])
    """
    return _arg(argmax_p, "argmax", x, dim, keepdim)


def argmin(x, dim=None, keepdim: bool = False):
    """The index of the minimum along `dim` (of the flattened tensor when `dim` is None).

    >>> aotjax.argmin(aotjax.tensor([[1, 5], [7, 2]]), dim=0)
    tensor([0, 1])
    """
    return _arg(argmin_p, "argmin", x, dim, keepdim)


MaxResult = namedtuple("max", ["values", "indices"])
MinResult = namedtuple("min", ["values", "indices"])


def _extremum(op: str, reduce_p, arg_p, elementwise_op, result_type, x, dim, keepdim):
    if isinstance(dim, (Tensor, np.ndarray, jax.Array)):
        return elementwise_op(x, dim)
    x = _ordered(op, x)
    if dim is None:
        return reduce_p.bind(x, axes=_axes(op, x, None), keepdims=False)
    axis = canonical_dim(dim, x.ndim, op)
    axes = (axis,) if x.ndim else ()
    values = reduce_p.bind(x, axes=axes, keepdims=bool(keepdim))
    indices = arg_p.bind(x, axis=axis if x.ndim else None, keepdims=bool(keepdim))
    return result_type(values, indices)


def max(x, dim=None, keepdim: bool = False):
    """`max(x)`: the largest element (0-d). `max(x, dim, keepdim=False)`: a named tuple
    `(values, indices)` along `dim`. `max(x, other)` with a tensor `other`: `maximum(x, other)`.

    >>> x = aotjax.tensor([[1, 5], [7, 2]])
    >>> aotjax.max(x)
    tensor(7)
    >>> aotjax.max(x, dim=1)
    max(values=tensor([5, 7]), indices=tensor([1, 0]))
    """
    return _extremum("max", reduce_max_p, argmax_p, maximum, MaxResult, x, dim, keepdim)


def min(x, dim=None, keepdim: bool = False):
    """`min(x)`, `min(x, dim, keepdim=False)` → `(values, indices)`, or `minimum(x, other)`, like `max`.

    >>> aotjax.min(aotjax.tensor([[1, 5], [7, 2]]), dim=0).values
    tensor([1, 2])
    """
    return _extremum("min", reduce_min_p, argmin_p, minimum, MinResult, x, dim, keepdim)


# -- logical -----------------------------------------------------------------------------------
def all(x, dim=None, keepdim: bool = False):
    """Whether every element over `dim` is nonzero (bool).

    >>> aotjax.all(aotjax.tensor([[1, 0], [2, 3]]), dim=1)
    tensor([False,  True])
    """
    x = as_tensor(x)
    return reduce_and_p.bind(x, axes=_axes("all", x, dim), keepdims=bool(keepdim))


def any(x, dim=None, keepdim: bool = False):
    """Whether any element over `dim` is nonzero (bool).

    >>> aotjax.any(aotjax.tensor([[0, 0], [2, 0]]), dim=1)
    tensor([False,  True])
    """
    x = as_tensor(x)
    return reduce_or_p.bind(x, axes=_axes("any", x, dim), keepdims=bool(keepdim))


# -- statistics --------------------------------------------------------------------------------
def _correction(op: str, unbiased, correction) -> float:
    if unbiased is not None and correction is not None:
        raise ValueError(f"{op}: pass either unbiased or correction, not both{_where()}")
    if correction is not None:
        return correction
    return 0 if unbiased is False else 1


def var(x, dim=None, unbiased=None, keepdim: bool = False, *, correction=None):
    """The variance over `dim`: `sum((x - mean)**2) / (N - correction)`, with `correction=1` (Bessel's)
    by default; `unbiased=False` means `correction=0`. Floating-point tensors only.

    >>> aotjax.var(aotjax.tensor([1.0, 2.0, 3.0, 4.0]))
    tensor(1.6666666)
    >>> aotjax.tensor([1.0, 2.0, 3.0, 4.0]).var(correction=0)
    tensor(1.25)
    """
    if isinstance(dim, bool):  # NOTE: PyTorch's `x.var(False)` means unbiased=False
        dim, unbiased = None, dim
    c = _correction("var", unbiased, correction)
    x = _require_float("var", x)
    axes = _axes("var", x, dim)
    xc = _compute(x)
    n = _count(x, axes)
    centered = xc - reduce_sum_p.bind(xc, axes=axes, keepdims=True) / n
    if category(x.dtype) > _FLOAT:  # NOTE: complex: the mean squared magnitude, a real result (torch's)
        centered = magnitude(centered)
    total = reduce_sum_p.bind(centered * centered, axes=axes, keepdims=bool(keepdim))
    return convert(total / builtins.max(0, n - c), x.dtype if category(x.dtype) <= _FLOAT else total.dtype)


def std(x, dim=None, unbiased=None, keepdim: bool = False, *, correction=None):
    """The standard deviation over `dim`: `sqrt(var(x, dim, ...))`.

    >>> aotjax.std(aotjax.tensor([1.0, 3.0]))
    tensor(1.4142135)
    """
    return sqrt(var(x, dim, unbiased, keepdim, correction=correction))


def logsumexp(x, dim=None, keepdim: bool = False):
    """`log(sum(exp(x)))` over `dim`, computed stably (the max is subtracted first); integer tensors
    promote to float32.

    >>> aotjax.logsumexp(aotjax.tensor([1000.0, 1000.0]), dim=0)
    tensor(1000.69...)
    """
    x = as_tensor(x)
    if category(x.dtype) < _FLOAT:
        x = convert(x, default_float_dtype())
    axes = _axes("logsumexp", x, dim)
    if _count(x, axes) == 0:  # NOTE: log(0) = -inf over an empty dim, as in torch (the max of it is undefined)
        return log(reduce_sum_p.bind(exp(x), axes=axes, keepdims=bool(keepdim)))
    # NOTE: the max of `x` detached: `log(sum(exp(x - m))) + m` has the derivative softmax(x) for any m, so
    # m's own (cancelling) derivative need not be computed.
    m = reduce_max_p.bind(detach_p.bind(x), axes=axes, keepdims=True)
    m = where(isfinite(m), m, 0.0)  # all -inf (or an inf) must not become NaN
    total = log(reduce_sum_p.bind(exp(x - m), axes=axes, keepdims=bool(keepdim)))
    # NOTE: a max over the kept size-1 dims drops them (a squeeze that needs no shape op).
    return total + (m if keepdim else reduce_max_p.bind(m, axes=axes, keepdims=False))


hooks.reduce_sum = lambda x, axes: reduce_sum_p.bind(x, axes=axes, keepdims=False)  # unbroadcasting cotangents


# -- Tensor methods --------------------------------------------------------------------------------
for _op in (sum, mean, prod, amax, amin, max, min, argmax, argmin, all, any, var, std, logsumexp, cumsum):
    method(_op)


def _sum_to_size(x, *size):
    """`x` summed down to `size` (which `x` must broadcast from): PyTorch's reduction of a broadcast gradient.

    >>> aotjax.ones(2, 3).sum_to_size(1, 3)
    tensor([[2., 2., 2.]])
    """
    size = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else size
    if not size:  # NOTE: torch's `sum_to` of an empty size is `x.sum()`, whose dtype promotes (bool -> int64)
        return sum(x)
    extra = x.ndim - len(size)
    if extra < 0 or builtins.any(s not in (1, n) for s, n in zip(size, x.shape[extra:])):
        raise ShapeError(f"sum_to_size: size {tuple(size)} is not expandable to the tensor's shape {x.shape}{_where()}")
    out = sum(x, tuple(range(extra))) if extra else x
    dims = tuple(i for i, (s, n) in enumerate(zip(size, out.shape)) if s == 1 and n != 1)
    return sum(out, dims, keepdim=True) if dims else out


method(_sum_to_size, "sum_to_size")
