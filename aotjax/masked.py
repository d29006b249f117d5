"""`aotjax.masked`: PyTorch's `torch.masked` reductions and normalizations on strided tensors with a boolean
`mask` (broadcast to the input; `None`: every element): the masked-out elements count as the operation's
identity (0 for `sum`, 1 for `prod`, -inf for `amax`/`logsumexp`/`softmax`, ...), so a fully masked-out slice
gives that identity's result. Compositions of `where` and the ordinary ops.

>>> x = aotjax.tensor([[1.0, 2.0, 3.0]])
>>> aotjax.masked.sum(x, 1, mask=aotjax.tensor([[True, False, True]]))
tensor([4.])
"""
from __future__ import annotations

import math

import numpy as np

from aotjax.core.errors import DTypeError
from aotjax.core.source_info import where
from aotjax.ops._frontend import as_tensor
from aotjax.ops.decompositions import vector_norm
from aotjax.ops.elementwise import where as select

__all__ = ["sum", "prod", "amax", "amin", "argmax", "argmin", "mean", "median", "norm", "var", "std", "logsumexp",
           "softmax", "log_softmax", "softmin", "normalize", "cumsum", "cumprod", "logaddexp"]


def _filled(op: str, input, mask, fill, dtype=None):
    x = as_tensor(input)
    if dtype is not None:
        x = x.to(dtype)
    if mask is None:
        return x, None
    m = as_tensor(mask)
    if m.dtype != np.bool_:
        raise DTypeError(f"masked.{op}: mask must be a boolean tensor, got {m.aval.str_short()}{where()}")
    m = m.expand(*x.shape) if tuple(m.shape) != tuple(x.shape) else m
    return select(m, x, fill), m


def _dims(x, dim):
    if dim is None:
        return tuple(range(x.ndim))
    return tuple(dim) if isinstance(dim, (tuple, list)) else (dim,)


def _lowest(x):
    return -math.inf if np.issubdtype(x.dtype, np.floating) else np.iinfo(x.dtype).min


def _highest(x):
    return math.inf if np.issubdtype(x.dtype, np.floating) else np.iinfo(x.dtype).max


def sum(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The sum over `dim` of the elements in `mask`, as `torch.masked.sum`.

    >>> aotjax.masked.sum(aotjax.tensor([1.0, 2.0]), mask=aotjax.tensor([False, True]))
    tensor(2.)
    """
    x, _ = _filled("sum", input, mask, 0, dtype)
    return x.sum(_dims(x, dim), keepdim=keepdim)


def prod(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The product over `dim` of the elements in `mask`, as `torch.masked.prod`.

    >>> aotjax.masked.prod(aotjax.tensor([3.0, 2.0]), mask=aotjax.tensor([False, True]))
    tensor(2.)
    """
    x, _ = _filled("prod", input, mask, 1, dtype)
    if dim is None:
        return x.reshape(-1).prod(0).reshape((1,) * x.ndim if keepdim else ())
    return x.prod(dim, keepdim=keepdim)


def _extreme_filled(op: str, input, dtype, mask):
    """The input with the masked-out elements the lowest value of its dtype (`amax`, `argmax`) or the highest."""
    x = as_tensor(input) if dtype is None else as_tensor(input).to(dtype)
    return _filled(op, x, mask, _lowest(x) if op.endswith("max") else _highest(x))[0]


def amax(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The maximum over `dim` of the elements in `mask`, as `torch.masked.amax`.

    >>> aotjax.masked.amax(aotjax.tensor([3.0, 2.0]), mask=aotjax.tensor([False, True]))
    tensor(2.)
    """
    x = _extreme_filled("amax", input, dtype, mask)
    return x.amax(_dims(x, dim), keepdim=keepdim)


def amin(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The minimum over `dim` of the elements in `mask`, as `torch.masked.amin`.

    >>> aotjax.masked.amin(aotjax.tensor([1.0, 2.0]), mask=aotjax.tensor([False, True]))
    tensor(2.)
    """
    x = _extreme_filled("amin", input, dtype, mask)
    return x.amin(_dims(x, dim), keepdim=keepdim)


def argmax(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The index of the maximum over `dim` among the elements in `mask`, in the input's dtype, as
    `torch.masked.argmax`.

    >>> aotjax.masked.argmax(aotjax.tensor([3.0, 2.0]), 0, mask=aotjax.tensor([False, True]))
    tensor(1.)
    """
    x = _extreme_filled("argmax", input, dtype, mask)
    return x.argmax(dim, keepdim=keepdim).to(x.dtype)  # NOTE: torch.masked's index is of the input's dtype


def argmin(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The index of the minimum over `dim` among the elements in `mask`, in the input's dtype, as
    `torch.masked.argmin`.

    >>> aotjax.masked.argmin(aotjax.tensor([1.0, 2.0]), 0, mask=aotjax.tensor([False, True]))
    tensor(1.)
    """
    x = _extreme_filled("argmin", input, dtype, mask)
    return x.argmin(dim, keepdim=keepdim).to(x.dtype)  # NOTE: torch.masked's index is of the input's dtype


def _count(x, m, dims, keepdim):
    if m is None:
        return math.prod(x.shape[d] for d in dims)
    return m.to(x.dtype).sum(dims, keepdim=keepdim)


def mean(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The mean over `dim` of the elements in `mask`, as `torch.masked.mean`.

    >>> aotjax.masked.mean(aotjax.tensor([1.0, 2.0, 6.0]), mask=aotjax.tensor([True, False, True]))
    tensor(3.5)
    """
    x, m = _filled("mean", input, mask, 0, dtype)
    dims = _dims(x, dim)
    return x.sum(dims, keepdim=keepdim) / _count(x, m, dims, keepdim)


def median(input, dim=-1, *, keepdim=False, dtype=None, mask=None):
    """The median (the lower of the two middle values) over `dim` of the elements in `mask`, as
    `torch.masked.median`.

    >>> aotjax.masked.median(aotjax.tensor([1.0, 9.0, 3.0, 2.0]), mask=aotjax.tensor([True, False, True, True]))
    tensor(2.)
    """
    x, _ = _filled("median", input, mask, math.nan, dtype)
    return x.nanmedian(dim, keepdim=keepdim).values


def norm(input, ord=2.0, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The `ord` vector norm over `dim` of the elements in `mask`, as `torch.masked.norm`.

    >>> aotjax.masked.norm(aotjax.tensor([3.0, 9.0, 4.0]), mask=aotjax.tensor([True, False, True]))
    tensor(5.)
    """
    x, _ = _filled("norm", input, mask, 0, dtype)
    return vector_norm(x, ord, _dims(x, dim), keepdim)


def var(input, dim=None, unbiased=None, *, correction=None, keepdim=False, dtype=None, mask=None):
    """The variance over `dim` of the elements in `mask` (`correction`, default 1; `unbiased=False`: 0), as
    `torch.masked.var`.

    >>> aotjax.masked.var(aotjax.tensor([1.0, 9.0, 3.0]), mask=aotjax.tensor([True, False, True]))
    tensor(2.)
    """
    c = correction if correction is not None else (0 if unbiased is False else 1)
    x, m = _filled("var", input, mask, 0, dtype)
    dims = _dims(x, dim)
    n = _count(x, m, dims, True)
    centered = x - x.sum(dims, keepdim=True) / n
    if m is not None:
        centered = select(m, centered, 0.0)
    out = (centered * centered).sum(dims, keepdim=True) / (n - c)
    return out if keepdim else out.squeeze(dims) if dims else out


def std(input, dim=None, unbiased=None, *, correction=None, keepdim=False, dtype=None, mask=None):
    """The standard deviation over `dim` of the elements in `mask`, as `torch.masked.std`.

    >>> aotjax.masked.std(aotjax.tensor([1.0, 9.0, 5.0]), mask=aotjax.tensor([True, False, True]), unbiased=False)
    tensor(2.)
    """
    return var(input, dim, unbiased, correction=correction, keepdim=keepdim, dtype=dtype, mask=mask).sqrt()


def logsumexp(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """`log(sum(exp(x)))` over `dim` of the elements in `mask`, as `torch.masked.logsumexp`.

    >>> aotjax.masked.logsumexp(aotjax.tensor([0.0, 5.0, 0.0]), mask=aotjax.tensor([True, False, True]))
    tensor(0.6931472)
    """
    x, _ = _filled("logsumexp", input, mask, -math.inf, dtype)
    return x.logsumexp(_dims(x, dim), keepdim=keepdim)


def softmax(input, dim, *, dtype=None, mask=None):
    """The softmax over `dim` of the elements in `mask` (0 at the others), as `torch.masked.softmax`.

    >>> aotjax.masked.softmax(aotjax.tensor([0.0, 5.0, 0.0]), 0, mask=aotjax.tensor([True, False, True]))
    tensor([0.5, 0. , 0.5])
    """
    x, _ = _filled("softmax", input, mask, -math.inf, dtype)
    return x.softmax(dim)


def log_softmax(input, dim, *, dtype=None, mask=None):
    """The log-softmax over `dim` of the elements in `mask` (-inf at the others), as `torch.masked.log_softmax`.

    >>> aotjax.masked.log_softmax(aotjax.tensor([0.0, 5.0, 0.0]), 0, mask=aotjax.tensor([True, False, True]))
    tensor([-0.6931472,       -inf, -0.6931472])
    """
    x, _ = _filled("log_softmax", input, mask, -math.inf, dtype)
    return x.log_softmax(dim)


def softmin(input, dim, *, dtype=None, mask=None):
    """The softmin over `dim` of the elements in `mask` (0 at the others), as `torch.masked.softmin`.

    >>> aotjax.masked.softmin(aotjax.tensor([0.0, -5.0, 0.0]), 0, mask=aotjax.tensor([True, False, True]))
    tensor([0.5, 0. , 0.5])
    """
    x, _ = _filled("softmin", input, mask, math.inf, dtype)
    return (-x).softmax(dim)


def normalize(input, ord, dim, *, eps=1e-12, dtype=None, mask=None):
    """The elements divided by the masked `ord` norm over `dim` (at least `eps`), 0 outside `mask`, as
    `torch.masked.normalize`.

    >>> aotjax.masked.normalize(aotjax.tensor([3.0, 9.0, 4.0]), 2.0, 0, mask=aotjax.tensor([True, False, True]))
    tensor([0.6, 0. , 0.8])
    """
    x, _ = _filled("normalize", input, mask, 0, dtype)
    n = vector_norm(x, ord, (dim,), True)
    return x / n.clamp(min=eps)


def cumsum(input, dim, *, dtype=None, mask=None):
    """The cumulative sum along `dim` of the elements in `mask` (the others count as 0), as `torch.masked.cumsum`.

    >>> aotjax.masked.cumsum(aotjax.tensor([1.0, 5.0, 2.0]), 0, mask=aotjax.tensor([True, False, True]))
    tensor([1., 1., 3.])
    """
    x, _ = _filled("cumsum", input, mask, 0, dtype)
    return x.cumsum(dim)


def cumprod(input, dim, *, dtype=None, mask=None):
    """The cumulative product along `dim` of the elements in `mask` (the others count as 1), as
    `torch.masked.cumprod`.

    >>> aotjax.masked.cumprod(aotjax.tensor([2.0, 5.0, 3.0]), 0, mask=aotjax.tensor([True, False, True]))
    tensor([2., 2., 6.])
    """
    x, _ = _filled("cumprod", input, mask, 1, dtype)
    return x.cumprod(dim)


def logaddexp(input, other, *, dtype=None, input_mask=None, other_mask=None):
    """`log(exp(input) + exp(other))` with the elements outside each mask counting as -inf, as
    `torch.masked.logaddexp`.

    >>> aotjax.masked.logaddexp(aotjax.tensor([0.0, 0.0]), aotjax.tensor([0.0, 0.0]),
    ...                         input_mask=aotjax.tensor([True, False]), other_mask=aotjax.tensor([True, True]))
    tensor([0.6931472, 0.       ])
    """
    x, _ = _filled("logaddexp", input, input_mask, -math.inf, dtype)
    y, _ = _filled("logaddexp", other, other_mask, -math.inf, dtype)
    return x.logaddexp(y)
