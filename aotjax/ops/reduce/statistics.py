"""Reductions and statistics composed of the reduction primitives: `nansum nanmean var_mean std_mean aminmax
count_nonzero norm dist diff trace bincount histc histogram cov corrcoef equal allclose isclose renorm`, the
trapezoid rule (`trapezoid trapz cumulative_trapezoid`) and `gradient`. No primitive of their own:
every transform works through the ones they are made of."""
from __future__ import annotations

import math
from collections import namedtuple
from typing import NamedTuple

import numpy as np

from aotjax.core.errors import DTypeError, ShapeError
from aotjax.core.interpreter import Tracer
from aotjax.core.source_info import where as _where
from aotjax.ops.base.casts import convert
from aotjax.ops.base.data import as_tensor
from aotjax.ops.base.frontend import canonical_dim
from aotjax.ops.base.promotion import (
    _COMPLEX,
    _FLOAT,
    category,
    default_float_dtype,
    default_int_dtype,
    is_float,
    result_type,
)
from aotjax.ops.creation import factories as creation
from aotjax.ops.creation.factories import full, zeros
from aotjax.ops.indexing import subscripts as indexing
from aotjax.ops.indexing.subscripts import scatter_add_p
from aotjax.ops.math.complex import complex as complex_
from aotjax.ops.math.complex import real_dtype
from aotjax.ops.math.elementwise import add, div, mul, where
from aotjax.ops.math.functions import _inplace_of
from aotjax.ops.reduce import sorting
from aotjax.ops.reduce.reductions import _require_float, cumsum, mean, std, sum, var
from aotjax.ops.shape import views
from aotjax.ops.shape.copies import cat
from aotjax.tensor import Tensor, method

__all__ = ["trapezoid", "trapz", "cumulative_trapezoid", "gradient", "histogram", "HistogramResult", "renorm",
           "renorm_", "nansum", "nanmean", "var_mean", "std_mean", "aminmax", "count_nonzero", "norm", "dist", "diff",
           "trace", "bincount", "histc", "cov", "corrcoef", "equal", "allclose", "isclose"]


def nansum(x, dim=None, keepdim: bool = False, *, dtype=None):
    """The sum over `dim` with NaN counted as zero.

    >>> aotjax.nansum(aotjax.tensor([1.0, float('nan'), 2.0]))
    tensor(3.)
    """
    x = as_tensor(x)
    if category(x.dtype) >= _FLOAT:
        x = where(x.isnan(), 0.0, x)
    return x.sum(dim, keepdim, dtype=dtype)


def nanmean(x, dim=None, keepdim: bool = False, *, dtype=None):
    """The mean over `dim` of the elements that are not NaN.

    >>> aotjax.nanmean(aotjax.tensor([1.0, float('nan'), 2.0]))
    tensor(1.5)
    """
    x = _require_float("nanmean", x, dtype)
    present = ~x.isnan()
    return nansum(x, dim, keepdim) / convert(present.sum(dim, keepdim), x.dtype)


def var_mean(x, dim=None, unbiased=None, keepdim: bool = False, *, correction=None):
    """`(var(x, dim, ...), mean(x, dim))`.

    >>> aotjax.var_mean(aotjax.tensor([1.0, 2.0, 3.0]))
    (tensor(1.), tensor(2.))
    """
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    return var(x, dim, unbiased, keepdim, correction=correction), mean(x, dim, keepdim)


def std_mean(x, dim=None, unbiased=None, keepdim: bool = False, *, correction=None):
    """`(std(x, dim, ...), mean(x, dim))`.

    >>> aotjax.std_mean(aotjax.tensor([1.0, 3.0]), correction=0)
    (tensor(1.), tensor(2.))
    """
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    return std(x, dim, unbiased, keepdim, correction=correction), mean(x, dim, keepdim)


AminmaxResult = namedtuple("aminmax", ["min", "max"])


def aminmax(x, *, dim=None, keepdim: bool = False):
    """The named tuple `(min, max)` over `dim` (None: every element).

    >>> aotjax.aminmax(aotjax.tensor([[3, 1], [2, 5]]), dim=1)
    aminmax(min=tensor([1, 2]), max=tensor([3, 5]))
    """
    x = as_tensor(x)
    if x.numel() == 0:
        raise ShapeError(f"aminmax: cannot compute the minimum and maximum of an empty tensor{_where()}")
    dims = dim if dim is not None else ()
    return AminmaxResult(x.amin(dims, keepdim), x.amax(dims, keepdim))


def count_nonzero(x, dim=None):
    """The number of nonzero elements over `dim` (default int dtype).

    >>> aotjax.count_nonzero(aotjax.tensor([[0, 1], [2, 3]]), dim=0)
    tensor([1, 2])
    """
    x = as_tensor(x)
    return (x != 0).sum(dim)


def _vector_norm(x, p, dim, keepdim):
    a = x.abs()
    if p == math.inf:
        return a.amax(dim if dim is not None else (), keepdim)
    if p == -math.inf:
        return a.amin(dim if dim is not None else (), keepdim)
    if p == 0:
        return convert((x != 0).sum(dim, keepdim), x.dtype)
    if p == 1:
        return a.sum(dim, keepdim)
    if p == 2:
        total = (x * x).sum(dim, keepdim)
        # NOTE: a zero norm has gradient 0 (PyTorch's subgradient), not the NaN of sqrt at 0.
        positive = total > 0
        return where(positive, where(positive, total, 1.0).sqrt(), 0.0)
    nonzero = a > 0  # NOTE: |0|**p has gradient 0 (PyTorch's), not the NaN of 0 * inf for p < 1
    total = where(nonzero, where(nonzero, a, 1.0) ** p, 0.0).sum(dim, keepdim)
    positive = total > 0
    return where(positive, where(positive, total, 1.0) ** (1.0 / p), 0.0)


def norm(x, p="fro", dim=None, keepdim: bool = False, dtype=None):
    """The `p`-norm over `dim` (PyTorch's `torch.norm`): a number `p` (including `inf`, `-inf`, 0) is the vector
    norm of the elements; `'fro'` is the 2-norm; `'nuc'` the nuclear norm over two dims (all of a 2-D `x`).

    >>> aotjax.norm(aotjax.tensor([3.0, 4.0]))
    tensor(5.)
    >>> aotjax.tensor([[1.0, -2.0], [3.0, 4.0]]).norm(p=1, dim=1)
    tensor([3., 7.])
    """
    x = as_tensor(x)
    if dtype is not None:
        x = convert(x, dtype)
    if category(x.dtype) < _FLOAT:
        x = convert(x, default_float_dtype())
    if p == "fro" or p is None:
        p = 2
    if p == "nuc":
        from aotjax.ops.linalg.norms import matrix_norm  # NOTE: linalg builds on the reductions: a lazy import up
        dims = tuple(range(x.ndim)) if dim is None else (dim,) if isinstance(dim, int) else tuple(dim)
        if len(dims) != 2:
            raise ValueError(f"norm: p='nuc' is a matrix norm over two dims, got dim={dim} for "
                             f"{x.aval.str_short()}{_where()}")
        return matrix_norm(x, "nuc", dims, bool(keepdim))
    if isinstance(p, str):
        raise ValueError(f"norm: p={p!r} is not supported{_where()}; pass a number, 'fro' or 'nuc'")
    dims = range(x.ndim) if dim is None else [dim] if isinstance(dim, int) else dim
    if abs(p) == math.inf and x.numel() == 0 and any(x.shape[canonical_dim(d, x.ndim, "norm")] == 0 for d in dims):
        raise ShapeError(f"norm: cannot take the {p}-norm over a zero-size dim (it has no identity), got "
                         f"{x.aval.str_short()} and dim={dim}{_where()}")
    return _vector_norm(x, float(p), dim, bool(keepdim))


def dist(x, other, p=2):
    """The `p`-norm of `x - other` (broadcast).

    >>> aotjax.dist(aotjax.tensor([1.0, 1.0]), aotjax.tensor([4.0, 5.0]))
    tensor(5.)
    """
    return norm(as_tensor(x) - other, p)


def diff(x, n: int = 1, dim: int = -1, prepend=None, append=None):
    """The `n`-th forward difference along `dim` (`out[i] = x[i + 1] - x[i]`), after joining `prepend` and
    `append` (of `x`'s shape but along `dim`); bool tensors give `x[i + 1] != x[i]`. An `n` past the size gives an
    empty result; `n=0` a copy of `x`, `prepend` and `append` ignored (as torch).

    >>> aotjax.diff(aotjax.tensor([1, 4, 9, 16]), n=2)
    tensor([2, 2])
    """
    x = as_tensor(x)
    if x.ndim == 0:
        raise ShapeError(f"diff: expected a tensor with at least one dimension{_where()}")
    if n < 0:
        raise ValueError(f"diff: the order n must be non-negative, got {n}{_where()}")
    dim = canonical_dim(dim, x.ndim, "diff")
    if n == 0:  # NOTE: torch ignores prepend and append then
        return x.clone()
    parts = [as_tensor(v) for v in (prepend, x, append) if v is not None]
    across = lambda t: (t.ndim, t.shape[:dim] + t.shape[dim + 1:])  # NOTE: the shape but along `dim`
    if any(across(v) != across(x) for v in parts):
        raise ShapeError(f"diff: expected prepend and append to have the input's shape {list(x.shape)} but along dim "
                         f"{dim}, got {[list(v.shape) for v in parts if v is not x]}{_where()}")
    x = cat(parts, dim) if len(parts) > 1 else x
    for _ in range(min(n, x.shape[dim])):  # NOTE: past the dim's size the result stays empty
        size = x.shape[dim] - 1
        hi, lo = x.narrow(dim, 1, size), x.narrow(dim, 0, size)
        x = hi != lo if x.dtype == np.bool_ else hi - lo
    return x


def trace(x):
    """The sum of the main diagonal of a 2-d tensor (integers give the default int dtype).

    >>> aotjax.trace(aotjax.tensor([[1, 2], [3, 4]]))
    tensor(5)
    """
    x = as_tensor(x)
    if x.ndim != 2:
        raise ShapeError(f"trace: expected a matrix, got {x.aval.str_short()}{_where()}")
    return x.diagonal().sum()


def bincount(x, weights=None, minlength: int = 0):
    """The number of occurrences of each value in the 1-d non-negative int tensor `x` (the sum of their
    `weights` if given), of length `max(x) + 1` or `minlength`. Traced, the length must be known: it is
    `minlength`, and larger values are dropped (JAX's `bincount(length=)`).

    >>> aotjax.bincount(aotjax.tensor([0, 1, 1, 3]))
    tensor([1, 2, 0, 1])
    """
    x = as_tensor(x)
    if x.ndim != 1 or category(x.dtype) != 1:
        raise ShapeError(f"bincount: expected a 1-d integer tensor, got {x.aval.str_short()}{_where()}")
    if isinstance(x, Tracer):
        if minlength <= 0:
            raise ShapeError(f"bincount: under tracing the result's length must be static: pass minlength (the "
                             f"number of bins; larger values are dropped){_where()}")
        length = minlength
    else:
        values = x.numpy()
        if values.size and values.min() < 0:
            raise ValueError(f"bincount: the input must be non-negative{_where()}")
        length = max(int(values.max()) + 1 if values.size else 0, minlength)
    if weights is None:
        w, dtype = full((x.shape[0],), 1, dtype=default_int_dtype()), default_int_dtype()
    else:
        w = as_tensor(weights)
        dtype = w.dtype if category(w.dtype) >= _FLOAT else np.dtype(np.float64 if np.dtype(default_int_dtype())
                                                                      == np.int64 else np.float32)
        w = convert(w, dtype)
    keep = x < length
    index = where(keep, x, length)  # NOTE: slot `length` collects the values dropped
    out = scatter_add_p.bind(zeros(length + 1, dtype=dtype), index, where(keep, w, 0), dim=0)
    return out[:length]


def histc(x, bins: int = 100, min=0, max=0):
    """The histogram of `x` in `bins` equal bins over `[min, max]` (both 0: the data's range); elements
    outside are ignored, `max` falls in the last bin.

    >>> aotjax.histc(aotjax.tensor([1.0, 2.0, 1.0, 4.0]), bins=4, min=0, max=4)
    tensor([0., 2., 1., 1.])
    """
    x = as_tensor(x)
    if category(x.dtype) < _FLOAT:
        raise TypeError(f"histc: expected a floating-point tensor, got {x.aval.str_short()}{_where()}")
    flat = x.reshape(-1).detach()
    lo, hi = (flat.amin(), flat.amax()) if min == max else (full((), min, dtype=x.dtype), full((), max, dtype=x.dtype))
    if min == max and flat.numel() == 0:
        lo, hi = full((), 0.0, dtype=x.dtype), full((), 0.0, dtype=x.dtype)
    lo, hi = where(lo == hi, lo - 1, lo), where(lo == hi, hi + 1, hi)
    position = ((flat - lo) * bins / (hi - lo)).floor()
    position = where(flat == hi, bins - 1, position)
    keep = (flat >= lo) & (flat <= hi)
    index = where(keep, convert(position, default_int_dtype()), bins)
    out = scatter_add_p.bind(zeros(bins + 1, dtype=x.dtype), index, convert(keep, x.dtype), dim=0)
    return out[:bins]


def cov(x, *, correction: int = 1, fweights=None, aweights=None):
    """The covariance matrix of the variables in the rows of `x` (a 1-d `x`: one variable), observations in
    the columns, weighted by integer `fweights` and/or `aweights`. One variable gives a 0-d tensor, as torch.

    >>> aotjax.cov(aotjax.tensor([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]]))
    tensor([[ 1., -1.],
            [-1.,  1.]])
    """
    x = as_tensor(x)
    if x.ndim > 2:
        raise ShapeError(f"cov: expected a 1-d or 2-d tensor, got {x.aval.str_short()}{_where()}")
    if x.dtype == np.bool_:
        raise DTypeError(f"cov: a bool input is not supported, got {x.aval.str_short()}{_where()}; convert it with "
                         f".float()")
    if category(x.dtype) < _FLOAT:
        x = convert(x, default_float_dtype())
    obs = x.reshape(1, -1) if x.ndim < 2 else x
    real = real_dtype(obs.dtype)
    f = None if fweights is None else _cov_weights("fweights", fweights, obs.shape[1], real)
    a = None if aweights is None else _cov_weights("aweights", aweights, obs.shape[1], real)
    w = a if f is None else f if a is None else f * a
    if w is None:
        w_sum = full((), obs.shape[1], dtype=real)
        avg = obs.mean(1, keepdim=True)
        norm_ = w_sum - correction
    else:
        w_sum = w.sum()
        avg = (obs * w).sum(1, keepdim=True) / w_sum
        norm_ = w_sum - correction if a is None or correction == 0 else w_sum - correction * (w * a).sum() / w_sum
    centered = obs - avg
    weighted = centered if w is None else centered * w
    c = centered.matmul(weighted.mT.conj())
    out = c / where(norm_ > 0, norm_, 0.0)
    return out.reshape(()) if obs.shape[0] == 1 else out  # NOTE: one variable: a 0-d tensor, as torch's squeeze


def _cov_weights(name: str, given, n: int, dtype):
    """`cov`'s `fweights` (integers) or `aweights` (floats): one non-negative weight per observation, as `dtype`."""
    w = as_tensor(given)
    if category(w.dtype) != (1 if name == "fweights" else _FLOAT):
        kind = "an integer" if name == "fweights" else "a floating-point"
        raise DTypeError(f"cov: expected {name} to be {kind} tensor, got {w.aval.str_short()}{_where()}")
    if w.ndim > 1 or w.numel() != n:
        raise ShapeError(f"cov: expected {name} to be a 1-d tensor of {n} weights (one per observation), got "
                         f"{w.aval.str_short()}{_where()}")
    if not isinstance(w, Tracer) and (w.numpy() < 0).any():
        raise ValueError(f"cov: {name} cannot be negative{_where()}")
    return convert(w.reshape(-1), dtype)


def corrcoef(x):
    """The Pearson correlation coefficients of the variables in the rows of `x`, clipped to [-1, 1].

    >>> aotjax.corrcoef(aotjax.tensor([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]]))
    tensor([[ 1., -1.],
            [-1.,  1.]])
    """
    c = cov(x)
    if c.ndim == 0:
        return c / c
    d = c.diagonal()
    d = (d.real if category(d.dtype) == _COMPLEX else d).sqrt()
    c = c / d.unsqueeze(1) / d.unsqueeze(0)
    if category(c.dtype) == _COMPLEX:  # NOTE: each part clipped, as torch
        return complex_(c.real.clamp(-1, 1), c.imag.clamp(-1, 1))
    return c.clamp(-1, 1)


def isclose(x, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False):
    """Elementwise `|x - other| <= atol + rtol * |other|` (bool), infinities equal to themselves, NaN equal
    to NaN only with `equal_nan`.

    >>> aotjax.isclose(aotjax.tensor([1.0, 2.0]), aotjax.tensor([1.0 + 1e-9, 2.1]))
    tensor([ True, False])
    """
    x, other = as_tensor(x), as_tensor(other)
    dtype = result_type(x, other)
    a, b = convert(x, dtype), convert(other, dtype)
    if category(dtype) < _FLOAT:
        a, b = convert(a, default_float_dtype()), convert(b, default_float_dtype())
    close = (a == b) | (((a - b).abs() <= atol + rtol * b.abs()) & a.isfinite() & b.isfinite())
    if equal_nan:
        close = close | (a.isnan() & b.isnan())
    return close


def allclose(x, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
    """Whether every element of `x` is close to `other`'s (`isclose(...).all()`), as a Python bool.

    >>> aotjax.allclose(aotjax.tensor([1.0]), aotjax.tensor([1.0 + 1e-9]))
    True
    """
    return bool(isclose(x, other, rtol, atol, equal_nan).all())


def equal(x, other) -> bool:
    """Whether `x` and `other` have the same shape and elements, as a Python bool.

    >>> aotjax.equal(aotjax.tensor([1, 2]), aotjax.tensor([1, 2]))
    True
    """
    x, other = as_tensor(x), as_tensor(other)
    return tuple(x.shape) == tuple(other.shape) and bool((x == other).all())


for _op in (nansum, nanmean, aminmax, count_nonzero, norm, dist, diff, trace, bincount, histc,
            cov, corrcoef, isclose, allclose, equal):
    method(_op)


# -- the trapezoid rule ---------------------------------------------------------------------------------------------
def _trapezoids(y, x, dx, dim: int):
    """The area of each trapezoid along `dim`: (y[i] + y[i+1]) / 2 * (x[i+1] - x[i]) (or `dx`)."""
    y = as_tensor(y)
    d = canonical_dim(dim, y.ndim, "trapezoid")
    n = max(y.shape[d] - 1, 0)
    mid = div(add(views.narrow(y, d, 0, n), views.narrow(y, d, min(1, y.shape[d]), n)), 2)
    if x is None:
        return mul(mid, 1 if dx is None else dx)
    x = as_tensor(x)
    if x.ndim == 1:  # spacing along `dim`, broadcast over the other dims
        if x.shape[0] != y.shape[d]:
            raise ShapeError(f"trapezoid: x has {x.shape[0]} points but y has {y.shape[d]} along dim {dim}{_where()}")
        x = views.view(x, *[-1 if i == d else 1 for i in range(y.ndim)])
    steps = add(views.narrow(x, d, min(1, x.shape[d]), n), views.narrow(x, d, 0, n), alpha=-1)
    return mul(mid, steps)


def trapezoid(y, x=None, *, dx=None, dim: int = -1):
    """The integral of `y` along `dim` by the trapezoid rule, with sample points `x` (1-D, or `y`'s shape) or a
    constant spacing `dx` (default 1).

    >>> aotjax.trapezoid(aotjax.tensor([1.0, 2.0, 3.0]), aotjax.tensor([0.0, 1.0, 3.0]))
    tensor(6.5)
    """
    return sum(_trapezoids(y, x, dx, dim), dim)


def trapz(y, x=None, *, dx=None, dim: int = -1):
    """`trapezoid` (NumPy's older name).

    >>> aotjax.trapz(aotjax.tensor([1.0, 2.0, 3.0]), dx=2.0)
    tensor(8.)
    """
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y, x=None, *, dx=None, dim: int = -1):
    """The running integral of `y` along `dim` by the trapezoid rule (one element fewer than `y` along `dim`).

    >>> aotjax.cumulative_trapezoid(aotjax.tensor([1.0, 2.0, 3.0]))
    tensor([1.5, 4. ])
    """
    return cumsum(_trapezoids(y, x, dx, dim), dim)


def _gradient_along(f, d: int, x, edge_order: int):
    """The derivative of `f` along dim `d` by finite differences at sample points `x` (a 1-D tensor) or spacing `x` (a
    number): second order in the interior, `edge_order` at the two ends (NumPy's and PyTorch's formulas)."""
    n = f.shape[d]
    if n < edge_order + 1:
        raise ShapeError(f"gradient: dim {d} has {n} points; edge_order={edge_order} needs at least {edge_order + 1}"
                         f"{_where()}")
    part = lambda start, length: views.narrow(f, d, start, length)
    if isinstance(x, Tensor) and x.ndim == 1:
        steps = views.view(diff(x), *[-1 if i == d else 1 for i in range(f.ndim)])
        h = lambda i: views.narrow(steps, d, i % (n - 1), 1)  # x[i+1] - x[i], i from either end
        left, right = views.narrow(steps, d, 0, n - 2), views.narrow(steps, d, 1, n - 2)
    else:
        h = lambda i: x
        left = right = x
    inner = div(add(add(mul(part(2, n - 2), left * left), mul(part(0, n - 2), right * right), alpha=-1),
                    mul(part(1, n - 2), right * right - left * left)), left * right * (left + right))
    if edge_order == 1:
        first = div(add(part(1, 1), part(0, 1), alpha=-1), h(0))
        last = div(add(part(n - 1, 1), part(n - 2, 1), alpha=-1), h(-1))
    else:
        h1, h2 = h(0), h(1)
        first = (-(2 * h1 + h2) / (h1 * (h1 + h2)) * part(0, 1) + (h1 + h2) / (h1 * h2) * part(1, 1)
                 - h1 / (h2 * (h1 + h2)) * part(2, 1))
        h1, h2 = h(-2), h(-1)
        last = (h2 / (h1 * (h1 + h2)) * part(n - 3, 1) - (h1 + h2) / (h1 * h2) * part(n - 2, 1)
                + (2 * h2 + h1) / (h2 * (h1 + h2)) * part(n - 1, 1))
    return cat([first, inner, last], d)


def gradient(input, *, spacing=1, dim=None, edge_order: int = 1):
    """The derivative of `input` along each of `dim` (default: every dim) by finite differences, as a tuple of
    tensors: central differences inside, one-sided (`edge_order` 1 or 2) at the ends. `spacing` is one number for
    every dim (None: 1), a number per dim, or a 1-D tensor of sample points per dim (a list or a tuple; numbers and
    tensors may mix, and a 0-d tensor is a number, which torch refuses).

    >>> aotjax.gradient(aotjax.tensor([1.0, 2.0, 4.0, 8.0]))
    (tensor([1. , 1.5, 3. , 4. ]),)
    >>> aotjax.gradient(aotjax.tensor([1.0, 2.0, 4.0, 8.0]), spacing=[aotjax.tensor([0.0, 1.0, 1.5, 3.5])])
    (tensor([1. , 3. , 3.6, 2. ]),)
    """
    f = as_tensor(input)
    if edge_order not in (1, 2):
        raise ValueError(f"gradient: edge_order must be 1 or 2, got {edge_order}{_where()}")
    if f.dtype == np.uint8:
        raise DTypeError(f"gradient: a uint8 input is not supported (as torch), got {f.aval.str_short()}{_where()}")
    dims = tuple(range(f.ndim)) if dim is None else (dim,) if isinstance(dim, int) else tuple(dim)
    dims = tuple(canonical_dim(d, f.ndim, "gradient") for d in dims)
    if len(set(dims)) != len(dims):
        raise ValueError(f"gradient: expected distinct dims, got {list(dims)}{_where()}")
    spacing = 1 if spacing is None else spacing
    spacings = list(spacing) if isinstance(spacing, (list, tuple)) else [spacing] * len(dims)
    if len(spacings) != len(dims):
        raise ValueError(f"gradient: expected one spacing per dim ({len(dims)}), got {len(spacings)}{_where()}")
    if category(f.dtype) < _FLOAT:
        f = f.to(default_float_dtype())
    return tuple(_gradient_along(f, d, _spacing_along(f, d, x), edge_order) for d, x in zip(dims, spacings))


def _spacing_along(f, d: int, x):
    """`gradient`'s spacing along dim `d`: a number (or a 0-d tensor), or a 1-D tensor of `f.shape[d]` points."""
    if not isinstance(x, Tensor) or x.ndim == 0:
        return x
    if x.ndim != 1 or x.shape[0] != f.shape[d]:
        raise ShapeError(f"gradient: expected the coordinates along dim {d} to be a 1-D tensor of {f.shape[d]} points "
                         f"(the input is {f.aval.str_short()}), got {x.aval.str_short()}{_where()}")
    return x


class HistogramResult(NamedTuple):
    """`histogram`'s result: the count (or weight, or density) in each bin, and the bins' edges."""
    hist: Tensor
    bin_edges: Tensor


def _edges(lo, hi, steps: int):
    """`steps` evenly spaced edges from `lo` to `hi` (numbers or 0-d tensors), computed as PyTorch's `linspace` does
    (from the start up to half way, from the end after): PyTorch's edges, to within a rounding."""
    k = creation.arange(steps)
    step = (hi - lo) / (steps - 1)
    return where(k < steps // 2, lo + k * step, hi - (steps - 1 - k) * step)


def histogram(input, bins, *, range=None, weight=None, density: bool = False) -> HistogramResult:
    """A histogram of `input`'s elements: `bins` equal bins over `range` (default: the data's min and max, widened
    by 0.5 each way when they are equal), or the bins between the edges of a 1-D tensor `bins`. Each bin holds its
    left edge, the last one its right edge too; elements outside are not counted. `weight` (`input`'s shape) counts
    each element by its weight; `density` divides by the total and the bin widths. Float tensors only, as PyTorch.
    A NaN among the data without `range` gives NaN edges (PyTorch raises).

    >>> aotjax.histogram(aotjax.tensor([0.0, 1.0, 1.0, 3.0]), 3)
    HistogramResult(hist=tensor([1., 2., 1.]), bin_edges=tensor([0., 1., 2., 3.]))
    """
    x = as_tensor(input)
    if not is_float(x.dtype):
        raise DTypeError(f"histogram: expected a floating-point tensor, got {x.aval.str_short()}{_where()}; convert "
                         f"it with .float()")
    flat = views.reshape(x, -1)
    if isinstance(bins, Tensor):
        edges = as_tensor(bins).to(x.dtype)
    else:
        if range is not None:
            lo, hi = float(range[0]), float(range[1])
        elif flat.shape[0] == 0:
            lo, hi = 0.0, 1.0
        else:
            lo, hi = flat.min(), flat.max()
        if isinstance(lo, float):
            lo, hi = (lo - 0.5, hi + 0.5) if lo == hi else (lo, hi)
        else:
            same = lo == hi
            lo, hi = where(same, lo - 0.5, lo), where(same, hi + 0.5, hi)
        edges = _edges(lo, hi, int(bins) + 1).to(x.dtype)
    n = edges.shape[0] - 1
    last = views.select(edges, 0, n)
    index = add(sorting.searchsorted(edges, flat, right=True), -1)
    index = where(flat == last, n - 1, index)
    inside = (flat >= views.select(edges, 0, 0)) & (flat <= last)
    weights = creation.ones_like(flat) if weight is None else views.reshape(as_tensor(weight).to(x.dtype), -1)
    hist = indexing.index_add(creation.zeros(n, dtype=x.dtype), 0, where(inside, index, 0), where(inside, weights, 0))
    if density:
        hist = div(hist, mul(sum(hist), diff(edges)))
    return HistogramResult(hist, edges)


# -- renorm ---------------------------------------------------------------------------------------------------------
def renorm(x, p, dim: int, maxnorm):
    """`x` with each slice along `dim` whose `p`-norm exceeds `maxnorm` scaled down to norm `maxnorm`.

    >>> aotjax.renorm(aotjax.tensor([[3.0, 4.0], [0.3, 0.4]]), 2, 0, 1.0)
    tensor([[0.6, 0.8],
            [0.3, 0.4]])
    """
    x = as_tensor(x)
    if not is_float(x.dtype):
        raise DTypeError(f"renorm: expected a floating-point tensor, got {x.aval.str_short()}{_where()}")
    if x.ndim < 2:
        raise ShapeError(f"renorm: expected a tensor of at least 2 dims, got {x.aval.str_short()}{_where()}")
    d = canonical_dim(dim, x.ndim, "renorm")
    norms = norm(x, p, dim=tuple(i for i in range(x.ndim) if i != d), keepdim=True)
    # NOTE: PyTorch's factor, with its 1e-7 guard, so that results match to the last bit.
    return mul(x, where(norms > maxnorm, div(maxnorm, add(norms, 1e-7)), 1.0))


renorm_ = _inplace_of(renorm, "renorm_")


renorm_.__doc__ = """In-place `renorm`: writes the result into `x` (through any view, into its base) and returns `x`.

    >>> x = aotjax.tensor([[3.0, 4.0]])
    >>> x.renorm_(2, 0, 1.0) is x, [round(v, 4) for v in x[0].tolist()]
    (True, [0.6, 0.8])
    """


for _fn in (histogram, renorm, renorm_):
    method(_fn)


# -- histogramdd ----------------------------------------------------------------------------------------------------
class HistogramddResult(NamedTuple):
    """`histogramdd`'s result: the count (or weight, or density) in each cell, and each dim's bin edges."""
    hist: Tensor
    bin_edges: tuple


def _histogramdd_edges(points, bins, span):
    """Each dim's edges: the 1-D tensors `bins`, or `bins[d]` equal bins over `span[2d:2d+2]` (default: the data's
    min and max along `d`, widened by 0.5 each way when they are equal)."""
    D = points.shape[-1]
    if isinstance(bins, (tuple, list)) and bins and all(isinstance(b, Tensor) for b in bins):
        return [as_tensor(b).to(points.dtype) for b in bins]
    counts = [int(b) for b in bins] if isinstance(bins, (tuple, list)) else [int(bins)] * D
    if len(counts) != D:
        raise ValueError(f"histogramdd: expected {D} bin counts (one per dim of the last input dim), got "
                         f"{len(counts)}{_where()}")
    if span is not None:
        if len(span) != 2 * D:
            raise ValueError(f"histogramdd: for a {D}-dimensional histogram range should have {2 * D} elements, but "
                             f"got {len(span)}{_where()}")
        bounds = [(float(span[2 * d]), float(span[2 * d + 1])) for d in range(D)]
    elif points.shape[0] == 0:
        bounds = [(0.0, 1.0)] * D
    else:
        lo, hi = points.amin(0), points.amax(0)
        bounds = [(views.select(lo, 0, d), views.select(hi, 0, d)) for d in range(D)]
    edges = []
    for (lo, hi), n in zip(bounds, counts):
        if isinstance(lo, float):
            lo, hi = (lo - 0.5, hi + 0.5) if lo == hi else (lo, hi)
        else:
            same = lo == hi
            lo, hi = where(same, lo - 0.5, lo), where(same, hi + 0.5, hi)
        edges.append(_edges(lo, hi, n + 1).to(points.dtype))
    return edges


def histogramdd(input, bins, *, range=None, weight=None, density: bool = False) -> HistogramddResult:
    """The `D`-dimensional histogram of the points in the last dim of `input` (`[..., D]`), as
    `torch.histogramdd`: `bins` is a count for every dim, one count per dim, or one 1-D tensor of edges per dim;
    `range` the flat `[lo_0, hi_0, lo_1, hi_1, ...]` (default: the data's). Each cell holds its lower edges, the
    last one its upper edges too; points outside are not counted. `weight` (`input.shape[:-1]`) counts each point
    by its weight; `density` divides by the total and the cells' volumes. Float tensors only, as in torch.

    >>> aotjax.histogramdd(aotjax.tensor([[0.0, 0.0], [1.0, 1.0], [1.0, 0.0]]), bins=2).hist
    tensor([[1., 0.],
            [1., 1.]])
    """
    x = as_tensor(input)
    if not is_float(x.dtype):
        raise DTypeError(f"histogramdd: expected a floating-point tensor, got {x.aval.str_short()}{_where()}; "
                         f"convert it with .float()")
    if x.ndim < 1:
        raise ShapeError(f"histogramdd: expected input to have at least one dimension, got a 0-d tensor{_where()}")
    points = views.reshape(x, (-1, x.shape[-1]))
    edges = _histogramdd_edges(points, bins, range)
    counts = [e.shape[0] - 1 for e in edges]
    cell, inside = None, None
    for d, (e, n) in enumerate(zip(edges, counts)):
        p, last = views.select(points, 1, d), views.select(e, 0, n)
        index = where(p == last, n - 1, add(sorting.searchsorted(e, p, right=True), -1))
        ok = (p >= views.select(e, 0, 0)) & (p <= last)
        cell = index if cell is None else add(mul(cell, n), index)
        inside = ok if inside is None else inside & ok
    weights = creation.ones_like(views.select(points, 1, 0)) if weight is None else views.reshape(
        as_tensor(weight).to(x.dtype), -1)
    total = math.prod(counts)
    hist = indexing.index_add(creation.zeros(total, dtype=x.dtype), 0, where(inside, cell, 0),
                              where(inside, weights, 0))
    hist = views.reshape(hist, tuple(counts))
    if density:
        volume = None
        for d, e in enumerate(edges):
            width = views.reshape(diff(e), tuple(-1 if i == d else 1 for i, _ in enumerate(edges)))
            volume = width if volume is None else mul(volume, width)
        hist = div(hist, mul(sum(hist), volume))
    return HistogramddResult(hist, tuple(edges))


__all__ += ["histogramdd", "HistogramddResult"]
