"""Helpers shared by the op functions: operand conversion, dtype promotion, dim and shape arguments."""
from __future__ import annotations

import warnings
from typing import Sequence

import jax
import numpy as np

from aotjax.core.avals import canonicalize_dtype
from aotjax.core.errors import DTypeError, DTypeTruncationWarning, ShapeError
from aotjax.core.interpreter import bind
from aotjax.core.source_info import user_stacklevel, where
from aotjax.ops.promotion import _PY_SCALARS, result_type
from aotjax.tensor import Tensor

__all__ = ["canonical_dim", "canonical_dims", "normalize_shape", "as_tensor", "promote", "convert", "to_dtype",
           "is_scalar"]


def is_scalar(x) -> bool:
    return isinstance(x, _PY_SCALARS)


def canonical_dim(dim: int, ndim: int, op: str = "") -> int:
    """`dim` in [0, ndim) (negative dims count from the end); an IndexError naming `op` if out of range."""
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"{op or 'dim'}: dimension {dim} is out of range for a tensor of {ndim} dimensions "
                         f"(expected in [{-n}, {n - 1}]){where()}")
    return dim % n


def canonical_dims(dims, ndim: int, op: str = "") -> tuple[int, ...]:
    """A sorted tuple of canonical dims; None means all dims."""
    if dims is None:
        return tuple(range(ndim))
    if isinstance(dims, (int, np.integer)):
        dims = (dims,)
    return tuple(sorted({canonical_dim(int(d), ndim, op) for d in dims}))


def normalize_shape(shape: Sequence) -> tuple[int, ...]:
    """`f(2, 3)` and `f((2, 3))` both mean shape (2, 3)."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = shape[0]
    return tuple(int(s) for s in shape)


def as_tensor(x) -> Tensor:
    """`x` if it is a Tensor, else a new Tensor holding it (jax arrays are not copied)."""
    if isinstance(x, Tensor):
        return x
    from aotjax.ops.creation import tensor

    return tensor(x)


def to_dtype(dtype, op: str = "") -> np.dtype:
    """A canonical numpy dtype from a dtype-like (`aotjax.float32`, `'float32'`, `np.int8`, `float`);
    a DTypeError naming `op` for anything else. Every dtype a user asks for passes here: a 64-bit one
    without jax's x64 mode gets its 32-bit form and a `DTypeTruncationWarning` (once per op and dtype)."""
    if dtype is float:
        from aotjax.ops.promotion import default_float_dtype

        return default_float_dtype()
    if dtype is int:
        from aotjax.ops.promotion import default_int_dtype

        return default_int_dtype()
    if dtype is bool:
        return np.dtype(np.bool_)
    try:
        requested = np.dtype(dtype)
        canonical = canonicalize_dtype(requested)
    except TypeError:
        prefix = f"{op}: " if op else ""
        raise DTypeError(f"{prefix}unknown dtype {dtype!r}{where()}; use one of aotjax.float32, float16, "
                         f"bfloat16, float64, int8, int16, int32, int64, uint8, bool, complex64") from None
    if canonical != requested and (op, requested) not in _truncations_warned:
        _warn_truncated(requested, canonical, op)
    return canonical


_truncations_warned: set = set()  # (op, requested dtype): jax warns once per process, so do we


def _warn_truncated(requested: np.dtype, canonical: np.dtype, op: str) -> None:
    _truncations_warned.add((op, requested))
    warnings.warn(f"{op or 'aotjax'}: explicitly requested dtype {requested.name} is not available, and will be "
                  f"truncated to dtype {canonical.name}. To enable 64-bit dtypes, set the jax_enable_x64 "
                  f"configuration option (`jax.config.update('jax_enable_x64', True)`, before creating tensors) or "
                  f"the JAX_ENABLE_X64=1 shell environment variable.", DTypeTruncationWarning,
                  stacklevel=user_stacklevel())


def convert(x, dtype):
    """`x` converted to `dtype` (`x` itself if it already has it)."""
    from aotjax.ops.elementwise import convert_element_type_p

    if x.dtype == dtype:
        return x
    return bind(convert_element_type_p, x, new_dtype=np.dtype(dtype))


def promote(*operands, dtype=None):
    """The operands converted to their PyTorch result type (or `dtype`): Tensors through a convert
    op, Python scalars to NumPy scalars of that dtype (traced as literals)."""
    if dtype is None:
        dtype = result_type(*operands)
    out = []
    for x in operands:
        if isinstance(x, Tensor):
            out.append(x if x.dtype == dtype else convert(x, dtype))
        elif is_scalar(x):
            out.append(dtype.type(x))
        elif isinstance(x, (np.ndarray, np.generic, jax.Array)):
            out.append(convert(as_tensor(x), dtype))
        else:
            raise TypeError(f"expected a Tensor, an array or a Python scalar, got {type(x).__name__}{where()}")
    return out


def check_shape(op: str, ok: bool, message: str) -> None:
    if not ok:
        raise ShapeError(f"{op}: {message}{where()}")
