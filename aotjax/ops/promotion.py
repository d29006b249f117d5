"""PyTorch's type promotion: dimensioned tensors outrank zero-dim tensors, which outrank Python
scalars, unless a lower group is of a higher category (bool < integer < floating < complex).

`x_int * 2.5` is float32 (the default float dtype); `x_f16 * 2.5` stays float16;
`x_f16 + zerodim_f32` is float16; `x_i32 + zerodim_f32` is float32.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from aotjax.core.avals import canonicalize_dtype
from aotjax.core.errors import DTypeError
from aotjax.core.source_info import where

_BOOL, _INT, _FLOAT, _COMPLEX = 0, 1, 2, 3
_PY_SCALARS = (bool, int, float, complex)


def default_float_dtype() -> np.dtype:
    """The dtype of Python floats and of float tensors created without a dtype: float32."""
    return np.dtype(np.float32)


def default_int_dtype() -> np.dtype:
    """int64 when jax's x64 mode is on (as PyTorch's default), else int32 (what the device holds)."""
    return np.dtype(np.int64) if jax.config.jax_enable_x64 else np.dtype(np.int32)


def category(dtype) -> int:
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return _BOOL
    if np.issubdtype(dtype, np.integer):
        return _INT
    if np.issubdtype(dtype, np.complexfloating):
        return _COMPLEX
    return _FLOAT


def is_float(dtype) -> bool:
    return category(dtype) == _FLOAT


def promote_types(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return np.dtype(jnp.promote_types(a, b))


def _scalar_dtype(x) -> np.dtype:
    if isinstance(x, bool):
        return np.dtype(np.bool_)
    if isinstance(x, int):
        return np.dtype(np.int64)
    if isinstance(x, float):
        return default_float_dtype()
    return np.dtype(np.complex64)


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
    dim_t = zero_t = wrapped = None
    for x in operands:
        if isinstance(x, _PY_SCALARS):
            wrapped = promote_types(wrapped, _scalar_dtype(x))
        elif getattr(x, "ndim", 0) == 0 and not isinstance(x, np.generic):
            zero_t = promote_types(zero_t, np.dtype(x.dtype))
        elif isinstance(x, np.generic):
            zero_t = promote_types(zero_t, np.dtype(x.dtype))
        else:
            dim_t = promote_types(dim_t, np.dtype(x.dtype))
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
