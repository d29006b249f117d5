"""PyTorch's type promotion: dimensioned tensors outrank zero-dim tensors, which outrank Python
scalars, unless a lower group is of a higher category (bool < integer < floating < complex).

`x_int * 2.5` is float32 (the default float dtype); `x_f16 * 2.5` stays float16;
`x_f16 + zerodim_f32` is float16; `x_i32 + zerodim_f32` is float32.
"""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from aotjax.core.avals import (
    PYTHON_SCALARS,
    canonicalize_dtype,
    default_float_dtype,
    default_int_dtype,
    python_scalar_dtype,
)
from aotjax.core.errors import DTypeError
from aotjax.core.source_info import where

_BOOL, _INT, _FLOAT, _COMPLEX = 0, 1, 2, 3

__all__ = ["default_float_dtype", "default_int_dtype", "category", "is_float", "promote_types", "result_type",
           "can_cast", "check_inplace_cast"]


_categories: dict = {}


def category(dtype) -> int:
    """0 bool, 1 integer, 2 floating, 3 complex."""
    c = _categories.get(dtype)
    if c is None:
        d = np.dtype(dtype)
        if d == np.bool_:
            c = _BOOL
        elif np.issubdtype(d, np.integer):
            c = _INT
        elif np.issubdtype(d, np.complexfloating):
            c = _COMPLEX
        else:
            c = _FLOAT
        _categories[dtype] = c
    return c


def is_float(dtype) -> bool:
    return category(dtype) == _FLOAT


def promote_types(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return np.dtype(jnp.promote_types(a, b))


def _combine(higher, lower):
    if higher is None:
        return lower
    if lower is None:
        return higher
    ch, cl = category(higher), category(lower)
    if ch == _COMPLEX:
        return higher
    if cl == _COMPLEX:
        return np.dtype(np.complex128) if higher == np.float64 else lower
    if ch == _FLOAT:
        return higher
    if ch == _BOOL or cl == _FLOAT:
        return promote_types(higher, lower)
    return higher


def result_type(*operands) -> np.dtype:
    """The dtype PyTorch gives an elementwise op on `operands` (Tensors, arrays, Python scalars)."""
    key = []
    for x in operands:  # NOTE: a loop, not a generator: this runs once per eager op
        key.append(type(x) if isinstance(x, PYTHON_SCALARS) else (x.dtype, len(x.shape) > 0))
    key = tuple(key)
    dt = _result_types.get(key)
    if dt is None:
        dt = _result_types[key] = _result_type(key)
    return dt


_result_types: dict = {}  # NOTE: Python scalars' dtypes follow the default dtype: `set_default_dtype` clears it


def _result_type(key) -> np.dtype:
    if all(isinstance(k, type) for k in key) and any(issubclass(k, np.generic) for k in key):
        # NOTE: no Tensor: NumPy scalars (the literals a trace inlines, `np.float64(1.7)` in a jvp rule) keep
        # their dtypes, or `y - 1` of a float64 exponent would be computed in float32
        key = tuple((np.dtype(k), False) if issubclass(k, np.generic) else k for k in key)
    dim_t = zero_t = wrapped = None
    for k in key:
        if isinstance(k, type):
            wrapped = promote_types(wrapped, python_scalar_dtype(k(0)))
        elif k[1]:
            dim_t = promote_types(dim_t, np.dtype(k[0]))
        else:
            zero_t = promote_types(zero_t, np.dtype(k[0]))
    return canonicalize_dtype(_combine(dim_t, _combine(zero_t, wrapped)))


def can_cast(src, dst) -> bool:
    """PyTorch's rule for writing a result of dtype `src` into a tensor of dtype `dst` in place."""
    cs, cd = category(src), category(dst)
    return cs <= cd or (cs == _BOOL)


def check_inplace_cast(op: str, result_dtype, self_dtype) -> None:
    if not can_cast(result_dtype, self_dtype):
        raise DTypeError(f"{op}: the result type {np.dtype(result_dtype).name} cannot be cast to the dtype of "
                         f"the tensor written in place, {np.dtype(self_dtype).name}{where()}. Compute out of place "
                         f"(`x = x.{op.rstrip('_')}(...)`) or convert the tensor first (`x.float()`).")
