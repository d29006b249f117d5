"""PyTorch's `torch.masked` reductions and normalizations on plain tensors with a boolean `mask` (`aotjax.masked`):
`sum prod mean amax amin argmax argmin cumsum cumprod logsumexp logaddexp softmax log_softmax softmin normalize
norm var std median`.

Each is a composition: the masked-out elements are replaced by the reduction's identity (0 for sums and norms, 1
for products, -inf for maxima, logsumexp and softmax, +inf for minima) and the ordinary op runs, so every transform
works with no new rules. `mask` broadcasts to `input`'s shape; `mask=None` masks nothing. Fully masked results are
PyTorch's: `sum` 0, `prod` 1, `amax` -inf (the dtype's least integer), `mean`/`var`/`std`/`median` NaN, `logsumexp`
-inf, `softmax`/`log_softmax`/`softmin` NaN, `norm`/`normalize` 0; and, as PyTorch, `argmax`/`argmin` return
their indices in `dtype` (default: `input`'s dtype).
"""
from __future__ import annotations

import math

import numpy as np

from aotjax.core.errors import DTypeError
from aotjax.ops.base.casts import convert
from aotjax.ops.base.data import as_tensor
from aotjax.ops.base.frontend import to_dtype
from aotjax.ops.base.promotion import _BOOL, _FLOAT, _INT, category, default_float_dtype
from aotjax.ops.linalg.norms import vector_norm
from aotjax.ops.math.elementwise import abs, div, maximum, mul, neg, sqrt, sub, where
from aotjax.ops.math.functions import logaddexp as _logaddexp
from aotjax.ops.nn.activations import log_softmax as _log_softmax
from aotjax.ops.nn.activations import softmax as _softmax
from aotjax.ops.reduce.reductions import amax as _amax
from aotjax.ops.reduce.reductions import amin as _amin
from aotjax.ops.reduce.reductions import argmax as _argmax
from aotjax.ops.reduce.reductions import argmin as _argmin
from aotjax.ops.reduce.reductions import cumsum as _cumsum
from aotjax.ops.reduce.reductions import logsumexp as _logsumexp
from aotjax.ops.reduce.reductions import prod as _prod
from aotjax.ops.reduce.reductions import sum as _sum
from aotjax.ops.reduce.sorting import cumprod as _cumprod
from aotjax.ops.reduce.sorting import nanmedian
from aotjax.ops.shape.views import broadcast_to

__all__ = ["sum", "prod", "mean", "amax", "amin", "argmax", "argmin", "cumsum", "cumprod", "logsumexp", "logaddexp",
           "softmax", "log_softmax", "softmin", "normalize", "norm", "var", "std", "median"]


def _input(input, dtype):
    x = as_tensor(input)
    return x if dtype is None or to_dtype(dtype) == x.dtype else convert(x, to_dtype(dtype))


def _mask(op: str, mask, x):
    """`mask` broadcast to `x`'s shape (None: None)."""
    if mask is None:
        return None
    mask = as_tensor(mask)
    if mask.dtype != np.bool_:
        raise DTypeError(f"masked.{op}: mask must be a bool tensor, got {mask.dtype}; pass `mask != 0` for a "
                         f"mask of numbers.")
    return mask if tuple(mask.shape) == tuple(x.shape) else broadcast_to(mask, tuple(x.shape))


def _fill(x, mask, value):
    """`x` with `value` where `mask` is False."""
    return x if mask is None else where(mask, x, value)


def _lowest(dtype) -> float | int:
    if category(dtype) == _BOOL:
        return False
    return -math.inf if category(dtype) >= _FLOAT else int(np.iinfo(dtype).min)


def _highest(dtype) -> float | int:
    if category(dtype) == _BOOL:
        return True
    return math.inf if category(dtype) >= _FLOAT else int(np.iinfo(dtype).max)


def _count(x, mask, dim, keepdim):
    """The number of unmasked elements reduced into each result (in `x`'s dtype)."""
    ones = mul(as_tensor(x), 0) + 1 if mask is None else convert(mask, x.dtype)
    return _sum(ones, dim, keepdim)


def _floating(op: str, x):
    if category(x.dtype) < _FLOAT:
        raise DTypeError(f"masked.{op}: expected a floating-point or complex input, got {x.dtype}; pass "
                         f"dtype=aotjax.float32 (or cast the input) to reduce integers.")


def sum(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The sum of the unmasked elements over `dim` (all by default); 0 where everything is masked.

    >>> mask = aotjax.tensor([[True, False], [False, False]])
    >>> aotjax.masked.sum(aotjax.tensor([[1.0, 2.0], [3.0, 4.0]]), 1, mask=mask)
    tensor([1., 0.])
    """
    x = _input(input, dtype)
    return _sum(_fill(x, _mask("sum", mask, x), 0), dim, keepdim)


def prod(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The product of the unmasked elements over `dim`; 1 where everything is masked.

    >>> aotjax.masked.prod(aotjax.tensor([2.0, 3.0, 4.0]), mask=aotjax.tensor([True, False, True]))
    tensor(8.)
    """
    x = _input(input, dtype)
    return _prod(_fill(x, _mask("prod", mask, x), 1), dim, keepdim)


def mean(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The mean of the unmasked elements over `dim`; NaN where everything is masked. Floating inputs only (or a
    floating `dtype`), as PyTorch.

    >>> aotjax.masked.mean(aotjax.tensor([1.0, 2.0, 6.0]), mask=aotjax.tensor([True, False, True]))
    tensor(3.5)
    """
    x = _input(input, dtype)
    _floating("mean", x)
    m = _mask("mean", mask, x)
    return div(_sum(_fill(x, m, 0), dim, keepdim), _count(x, m, dim, keepdim))


def amax(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The largest unmasked element over `dim`; -inf (the least integer of an integer dtype) where everything is
    masked.

    >>> aotjax.masked.amax(aotjax.tensor([1.0, 9.0, 3.0]), mask=aotjax.tensor([True, False, True]))
    tensor(3.)
    """
    x = _input(input, dtype)
    return _amax(_fill(x, _mask("amax", mask, x), _lowest(x.dtype)), dim, keepdim)


def amin(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The smallest unmasked element over `dim`; inf (the largest integer) where everything is masked.

    >>> aotjax.masked.amin(aotjax.tensor([1.0, -9.0, 3.0]), mask=aotjax.tensor([True, False, True]))
    tensor(1.)
    """
    x = _input(input, dtype)
    return _amin(_fill(x, _mask("amin", mask, x), _highest(x.dtype)), dim, keepdim)


def argmax(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The index of the largest unmasked element over `dim` (0 where everything is masked), in `dtype` (default:
    `input`'s dtype, as PyTorch's `torch.masked.argmax`).

    >>> aotjax.masked.argmax(aotjax.tensor([1.0, 9.0, 3.0]), mask=aotjax.tensor([True, False, True]))
    tensor(2.)
    """
    x = as_tensor(input)
    out = _argmax(_fill(x, _mask("argmax", mask, x), _lowest(x.dtype)), dim, keepdim)
    return convert(out, to_dtype(dtype) if dtype is not None else x.dtype)


def argmin(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The index of the smallest unmasked element over `dim`, in `dtype` (default: `input`'s dtype).

    >>> aotjax.masked.argmin(aotjax.tensor([1.0, -9.0, 3.0]), mask=aotjax.tensor([True, False, True]))
    tensor(0.)
    """
    x = as_tensor(input)
    out = _argmin(_fill(x, _mask("argmin", mask, x), _highest(x.dtype)), dim, keepdim)
    return convert(out, to_dtype(dtype) if dtype is not None else x.dtype)


def cumsum(input, dim, *, dtype=None, mask=None):
    """The cumulative sum along `dim`, the masked-out elements counting as 0.

    >>> aotjax.masked.cumsum(aotjax.tensor([1.0, 2.0, 3.0]), 0, mask=aotjax.tensor([True, False, True]))
    tensor([1., 1., 4.])
    """
    x = _input(input, dtype)
    return _cumsum(_fill(x, _mask("cumsum", mask, x), 0), dim)


def cumprod(input, dim, *, dtype=None, mask=None):
    """The cumulative product along `dim`, the masked-out elements counting as 1.

    >>> aotjax.masked.cumprod(aotjax.tensor([2.0, 5.0, 3.0]), 0, mask=aotjax.tensor([True, False, True]))
    tensor([2., 2., 6.])
    """
    x = _input(input, dtype)
    return _cumprod(_fill(x, _mask("cumprod", mask, x), 1), dim)


def logsumexp(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """`log(sum(exp(x)))` of the unmasked elements over `dim`; -inf where everything is masked.

    >>> aotjax.masked.logsumexp(aotjax.tensor([0.0, 5.0, 0.0]), mask=aotjax.tensor([True, False, True]))
    tensor(0.6931472)
    """
    x = _input(input, dtype)
    if category(x.dtype) < _FLOAT:  # NOTE: as torch's: computed in float, the result cast back (truncated)
        wide = convert(x, default_float_dtype())
        return convert(_logsumexp(_fill(wide, _mask("logsumexp", mask, x), -math.inf), dim, keepdim), x.dtype)
    return _logsumexp(_fill(x, _mask("logsumexp", mask, x), -math.inf), dim, keepdim)


def logaddexp(input, other, *, dtype=None, input_mask=None, other_mask=None):
    """`log(exp(input) + exp(other))`, each operand's masked-out elements counting as -inf (the result is -inf
    where both are masked).

    >>> aotjax.masked.logaddexp(aotjax.tensor([0.0, 0.0]), aotjax.tensor([0.0, 0.0]),
    ...                         other_mask=aotjax.tensor([True, False]))
    tensor([0.6931472, 0.       ])
    """
    x, y = _input(input, dtype), _input(other, dtype)
    return _logaddexp(_fill(x, _mask("logaddexp", input_mask, x), -math.inf),
                      _fill(y, _mask("logaddexp", other_mask, y), -math.inf))


def softmax(input, dim, *, dtype=None, mask=None):
    """The softmax along `dim` over the unmasked elements (0 at the masked-out ones; NaN where everything is
    masked).

    >>> aotjax.masked.softmax(aotjax.tensor([0.0, 7.0, 0.0]), 0, mask=aotjax.tensor([True, False, True]))
    tensor([0.5, 0. , 0.5])
    """
    x = _input(input, dtype)
    return _softmax(_fill(x, _mask("softmax", mask, x), -math.inf), dim)


def log_softmax(input, dim, *, dtype=None, mask=None):
    """The log of `masked.softmax` (-inf at the masked-out elements; NaN where everything is masked).

    >>> aotjax.masked.log_softmax(aotjax.tensor([0.0, 7.0, 0.0]), 0, mask=aotjax.tensor([True, False, True]))
    tensor([-0.6931472,       -inf, -0.6931472])
    """
    x = _input(input, dtype)
    return _log_softmax(_fill(x, _mask("log_softmax", mask, x), -math.inf), dim)


def softmin(input, dim, *, dtype=None, mask=None):
    """`masked.softmax(-input)`: the softmin along `dim` over the unmasked elements.

    >>> aotjax.masked.softmin(aotjax.tensor([0.0, -7.0, 0.0]), 0, mask=aotjax.tensor([True, False, True]))
    tensor([0.5, 0. , 0.5])
    """
    x = _input(input, dtype)
    return _softmax(_fill(neg(x), _mask("softmin", mask, x), -math.inf), dim)


def norm(input, ord=2.0, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The vector `ord`-norm of the unmasked elements over `dim` (all by default); 0 where everything is masked.

    >>> aotjax.masked.norm(aotjax.tensor([3.0, 9.0, 4.0]), mask=aotjax.tensor([True, False, True]))
    tensor(5.)
    """
    x = _input(input, dtype)
    identity = math.inf if ord == -math.inf else 0
    return vector_norm(_fill(abs(x) if identity else x, _mask("norm", mask, x), identity), ord, dim, keepdim)


def normalize(input, ord, dim, *, eps=1e-12, dtype=None, mask=None):
    """`input` divided by its masked `norm` along `dim` (at least `eps`); 0 at the masked-out elements.

    >>> aotjax.masked.normalize(aotjax.tensor([3.0, 9.0, 4.0]), 2.0, 0, mask=aotjax.tensor([True, False, True]))
    tensor([0.6, 0. , 0.8])
    """
    x = _input(input, dtype)
    m = _mask("normalize", mask, x)
    denominator = maximum(norm(x, ord, dim, keepdim=True, mask=m), as_tensor(eps))
    return div(_fill(x, m, 0), denominator)


def var(input, dim=None, unbiased=None, *, correction=None, keepdim=False, dtype=None, mask=None):
    """The variance of the unmasked elements over `dim`, with `correction` (default 1, or 0 when `unbiased` is
    False) subtracted from their count; NaN where everything is masked.

    >>> aotjax.masked.var(aotjax.tensor([1.0, 9.0, 3.0]), mask=aotjax.tensor([True, False, True]))
    tensor(2.)
    """
    x = _input(input, dtype)
    x = convert(x, default_float_dtype()) if category(x.dtype) == _INT else x  # NOTE: torch's: a float variance
    _floating("var", x)
    if correction is None:
        correction = 0 if unbiased is False else 1
    m = _mask("var", mask, x)
    centered = _fill(sub(x, div(_sum(_fill(x, m, 0), dim, True), _count(x, m, dim, True))), m, 0)
    total = _sum(mul(centered, centered), dim, keepdim)
    return div(total, maximum(sub(_count(x, m, dim, keepdim), correction), 0))


def std(input, dim=None, unbiased=None, *, correction=None, keepdim=False, dtype=None, mask=None):
    """The standard deviation of the unmasked elements over `dim` (`sqrt` of `masked.var`).

    >>> aotjax.masked.std(aotjax.tensor([1.0, 9.0, 3.0]), mask=aotjax.tensor([True, False, True]), unbiased=False)
    tensor(1.)
    """
    return sqrt(var(input, dim, unbiased, correction=correction, keepdim=keepdim, dtype=dtype, mask=mask))


def median(input, dim=-1, *, keepdim=False, dtype=None, mask=None):
    """The median (the lower of the two middle values) of the unmasked elements along `dim`; NaN where
    everything is masked. Floating inputs only, as PyTorch.

    >>> aotjax.masked.median(aotjax.tensor([1.0, 9.0, 3.0, 2.0]), mask=aotjax.tensor([True, False, True, True]))
    tensor(2.)
    """
    x = _input(input, dtype)
    _floating("median", x)
    return nanmedian(_fill(x, _mask("median", mask, x), math.nan), dim, keepdim).values
