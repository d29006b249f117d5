"""Reductions and statistics composed of the reduction primitives: `nansum nanmean var_mean std_mean aminmax
count_nonzero norm dist diff trace bincount histc cov corrcoef equal allclose isclose`. No primitive of their own:
every transform works through the ones they are made of."""
from __future__ import annotations

import math
from collections import namedtuple

import numpy as np

from aotjax.core.errors import ShapeError
from aotjax.core.interpreter import Tracer
from aotjax.core.source_info import where as _where
from aotjax.ops._frontend import as_tensor, canonical_dim, convert
from aotjax.ops.creation import full, zeros
from aotjax.ops.elementwise import where
from aotjax.ops.indexing import scatter_add_p
from aotjax.ops.promotion import _FLOAT, category, default_float_dtype, default_int_dtype, result_type
from aotjax.ops.reduction import _require_float, mean, std, var
from aotjax.ops.shape import cat
from aotjax.tensor import method

__all__ = ["nansum", "nanmean", "var_mean", "std_mean", "aminmax", "count_nonzero", "norm", "dist", "diff", "trace",
           "bincount", "histc", "cov", "corrcoef", "equal", "allclose", "isclose"]


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
    norm of the elements; `'fro'` is the 2-norm. `'nuc'` needs singular values: use `aotjax.linalg.matrix_norm`.

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
    if isinstance(p, str):
        raise ValueError(f"norm: p={p!r} is not supported{_where()}; pass a number, 'fro', or use "
                         f"aotjax.linalg.matrix_norm for the nuclear norm")
    return _vector_norm(x, float(p), dim, bool(keepdim))


def dist(x, other, p=2):
    """The `p`-norm of `x - other` (broadcast).

    >>> aotjax.dist(aotjax.tensor([1.0, 1.0]), aotjax.tensor([4.0, 5.0]))
    tensor(5.)
    """
    return norm(as_tensor(x) - other, p)


def diff(x, n: int = 1, dim: int = -1, prepend=None, append=None):
    """The `n`-th forward difference along `dim` (`out[i] = x[i + 1] - x[i]`), after joining `prepend` and
    `append`; bool tensors give `x[i + 1] != x[i]`.

    >>> aotjax.diff(aotjax.tensor([1, 4, 9, 16]), n=2)
    tensor([2, 2])
    """
    x = as_tensor(x)
    if x.ndim == 0:
        raise ShapeError(f"diff: expected a tensor with at least one dimension{_where()}")
    dim = canonical_dim(dim, x.ndim, "diff")
    parts = [as_tensor(v) for v in (prepend, x, append) if v is not None]
    x = cat(parts, dim) if len(parts) > 1 else x
    for _ in range(n):
        size = x.shape[dim]
        hi, lo = x.narrow(dim, 1, max(size - 1, 0)), x.narrow(dim, 0, max(size - 1, 0))
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
    the columns, weighted by integer `fweights` and/or `aweights`.

    >>> aotjax.cov(aotjax.tensor([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]]))
    tensor([[ 1., -1.],
            [-1.,  1.]])
    """
    x = as_tensor(x)
    if x.ndim > 2:
        raise ShapeError(f"cov: expected a 1-d or 2-d tensor, got {x.aval.str_short()}{_where()}")
    if category(x.dtype) < _FLOAT:
        x = convert(x, default_float_dtype())
    obs = x.reshape(1, -1) if x.ndim < 2 else x
    w = None
    for given in (fweights, aweights):
        if given is not None:
            g = convert(as_tensor(given), obs.dtype)
            w = g if w is None else w * g
    if w is None:
        w_sum = full((), obs.shape[1], dtype=obs.dtype)
        avg = obs.mean(1, keepdim=True)
        norm_ = w_sum - correction
    else:
        w_sum = w.sum()
        avg = (obs * w).sum(1, keepdim=True) / w_sum
        if aweights is None or correction == 0:
            norm_ = w_sum - correction
        else:
            a = convert(as_tensor(aweights), obs.dtype)
            norm_ = w_sum - correction * (w * a).sum() / w_sum
    centered = obs - avg
    weighted = centered if w is None else centered * w
    c = weighted.matmul(centered.mT)
    out = c / where(norm_ > 0, norm_, 0.0)
    return out.reshape(()) if x.ndim < 2 else out


def corrcoef(x):
    """The Pearson correlation coefficients of the variables in the rows of `x`, clipped to [-1, 1].

    >>> aotjax.corrcoef(aotjax.tensor([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]]))
    tensor([[ 1., -1.],
            [-1.,  1.]])
    """
    c = cov(x)
    if c.ndim == 0:
        return c / c
    d = c.diagonal().sqrt()
    return (c / d.unsqueeze(1) / d.unsqueeze(0)).clamp(-1, 1)


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
