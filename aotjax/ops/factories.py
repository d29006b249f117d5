"""More creation ops, compositions of the creation primitives: the `Tensor.new_*` factories (`new_zeros new_ones
new_full new_empty new_tensor`, the dtype of `self` by default), `logspace`, `tril_indices`, `triu_indices`
and `empty_strided` (contiguous strides only: XLA arrays have no strides of their own)."""
from __future__ import annotations

import numpy as np

from aotjax.core.errors import UnsupportedError
from aotjax.core.source_info import where
from aotjax.ops._frontend import convert, place
from aotjax.ops._frontend import device as to_device
from aotjax.ops.creation import (
    _accumulation_dtype,
    _as_param,
    _dtype,
    _python_scalar,
    _size,
    empty,
    full,
    full_p,
    linspace,
    ones,
    tensor,
    zeros,
)
from aotjax.ops.layout import is_non_overlapping_and_dense
from aotjax.ops.promotion import default_float_dtype, default_int_dtype
from aotjax.tensor import Tensor, contiguous_strides, method

__all__ = ["logspace", "tril_indices", "triu_indices", "empty_strided"]


# -- Tensor.new_* ----------------------------------------------------------------------------------
def new_zeros(self: Tensor, *size, dtype=None, device=None) -> Tensor:
    """Zeros of shape `size` with `self`'s dtype (unless `dtype` is given), as `torch.Tensor.new_zeros`.

    >>> aotjax.tensor([1, 2]).new_zeros(2, 3).dtype == aotjax.tensor([1]).dtype
    True
    """
    return zeros(*size, dtype=_dtype("new_zeros", dtype, self.dtype), device=device)


def new_ones(self: Tensor, *size, dtype=None, device=None) -> Tensor:
    """Ones of shape `size` with `self`'s dtype (unless `dtype` is given).

    >>> aotjax.zeros(1, dtype=aotjax.int8).new_ones((2,))
    tensor([1, 1], dtype=int8)
    """
    return ones(*size, dtype=_dtype("new_ones", dtype, self.dtype), device=device)


def new_empty(self: Tensor, *size, dtype=None, device=None) -> Tensor:
    """An "uninitialized" tensor of shape `size` with `self`'s dtype (zeros: XLA has no uninitialized memory).

    >>> aotjax.zeros(1).new_empty(2, 2).shape
    (2, 2)
    """
    return empty(*size, dtype=_dtype("new_empty", dtype, self.dtype), device=device)


def new_full(self: Tensor, size, fill_value, dtype=None, device=None) -> Tensor:
    """A tensor of shape `size` filled with `fill_value`, of `self`'s dtype (not the fill value's) unless `dtype`.

    >>> aotjax.tensor([1, 2]).new_full((2,), 3.7)
    tensor([3, 3])
    """
    dt = _dtype("new_full", dtype, self.dtype)
    fill_value = _python_scalar("new_full", fill_value)
    if isinstance(fill_value, float) and dt.kind in "iub":
        fill_value = int(fill_value) if dt.kind != "b" else bool(fill_value)  # torch truncates toward zero
    return full(size, fill_value, dtype=dt, device=device)


def new_tensor(self: Tensor, data, dtype=None, device=None) -> Tensor:
    """A new tensor (a copy) from `data`, of `self`'s dtype unless `dtype` is given.

    >>> aotjax.tensor([1, 2]).new_tensor([1.5, 2.5])
    tensor([1, 2])
    """
    return tensor(data, dtype=_dtype("new_tensor", dtype, self.dtype), device=device)


for _fn in (new_zeros, new_ones, new_empty, new_full, new_tensor):
    method(_fn)


# -- logspace --------------------------------------------------------------------------------------
def logspace(start, end, steps, base=10.0, dtype=None) -> Tensor:
    """`steps` values from `base ** start` to `base ** end`, their exponents evenly spaced (float32 unless
    `dtype`), as `torch.logspace`. Computed in the widest float, then rounded to `dtype`.

    >>> aotjax.logspace(0, 2, 3)
    tensor([  1.,  10., 100.])
    >>> aotjax.logspace(0, 3, 4, base=2, dtype=aotjax.int8)
    tensor([1, 2, 4, 8], dtype=int8)
    """
    dt = _dtype("logspace", dtype, default_float_dtype())
    base = _python_scalar("logspace", base)
    if isinstance(base, complex):
        raise TypeError(f"logspace: a complex base is not supported, got {base!r}{where()}")
    exponents = linspace(start, end, steps, dtype=_accumulation_dtype())
    return convert(float(base) ** exponents, dt)


# -- tril_indices / triu_indices -------------------------------------------------------------------
def _tri_indices(op: str, row, col, offset, dtype, lower: bool) -> Tensor:
    row, col = _size(op, (row, col))
    offset = _python_scalar(op, offset)
    if not isinstance(offset, int) or isinstance(offset, bool):
        raise TypeError(f"{op}: offset must be an int, got {offset!r}{where()}")
    dt = _dtype(op, dtype, default_int_dtype())
    if dt.kind not in "iu":
        raise TypeError(f"{op}: dtype must be an integer dtype (torch allows int32 and int64), got {dt.name}"
                        f"{where()}")
    mask = np.tri(row, col, offset, dtype=bool) if lower else ~np.tri(row, col, offset - 1, dtype=bool)
    return tensor(np.stack(np.nonzero(mask)).reshape(2, -1), dtype=dt)


def tril_indices(row, col, offset=0, dtype=None) -> Tensor:
    """The indices of the lower triangle of a `row` x `col` matrix (the diagonal `offset` and below), as a
    `2 x N` tensor of rows then columns in row-major order, as `torch.tril_indices`.

    >>> aotjax.tril_indices(3, 3)
    tensor([[0, 1, 1, 2, 2, 2],
            [0, 0, 1, 0, 1, 2]])
    """
    return _tri_indices("tril_indices", row, col, offset, dtype, lower=True)


def triu_indices(row, col, offset=0, dtype=None) -> Tensor:
    """The indices of the upper triangle of a `row` x `col` matrix (the diagonal `offset` and above), as a
    `2 x N` tensor, as `torch.triu_indices`.

    >>> aotjax.triu_indices(2, 3, 1)
    tensor([[0, 0, 1],
            [1, 2, 2]])
    """
    return _tri_indices("triu_indices", row, col, offset, dtype, lower=False)


# -- empty_strided ---------------------------------------------------------------------------------
def empty_strided(size, stride, dtype=None, device=None) -> Tensor:
    """`torch.empty_strided` (zeros, as `empty`) for strides that cover the tensor's memory densely, in any order
    (contiguous, channels-last, a permutation): strides are metadata (XLA arrays have none), so a layout with gaps
    or overlaps cannot be allocated.

    >>> aotjax.empty_strided((2, 3), (3, 1)).shape
    (2, 3)
    >>> aotjax.empty_strided((2, 3), (1, 2)).stride()
    (1, 2)
    """
    shape = _size("empty_strided", (size,))
    stride = tuple(int(s) for s in stride)
    if len(stride) != len(shape):
        raise ValueError(f"empty_strided: size {list(shape)} and stride {list(stride)} must have the same length"
                         f"{where()}")
    if not is_non_overlapping_and_dense(shape, stride):
        raise UnsupportedError(
            f"empty_strided: only strides that cover the tensor densely are supported (such as "
            f"{list(contiguous_strides(shape))} for size {list(shape)}), got {list(stride)}{where()}; XLA arrays have "
            f"no strides of their own. Allocate with empty(size) and take a view (narrow, slicing) for a strided "
            f"layout")
    dt = _dtype("empty_strided", dtype, default_float_dtype())
    strides = None if stride == contiguous_strides(shape) else stride
    return place(full_p.bind(shape=shape, fill_value=_as_param(0, dt), dtype=dt, strides=strides),
                 to_device(device, "empty_strided"))
