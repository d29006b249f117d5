"""Abstract values: the static shape and dtype of an array, and dtype helpers, among them the default
dtypes that every layer (promotion, tracing, the interpreters, make_jaxpr) gives Python scalars."""
from __future__ import annotations

import functools
import operator
from dataclasses import dataclass

import jax
import numpy as np

_SHORT_NAMES = {
    "float64": "f64", "float32": "f32", "float16": "f16", "bfloat16": "bf16",
    "int64": "i64", "int32": "i32", "int16": "i16", "int8": "i8",
    "uint64": "u64", "uint32": "u32", "uint16": "u16", "uint8": "u8",
    "bool": "bool", "complex64": "c64", "complex128": "c128",
}


def canonicalize_dtype(dtype) -> np.dtype:
    """The dtype an array of `dtype` really has on the device (64-bit types only when jax x64 is on)."""
    return np.dtype(jax.dtypes.canonicalize_dtype(np.dtype(dtype)))


_default_float = [np.dtype(np.float32)]  # NOTE: `aotjax.set_default_dtype` sets it


def default_float_dtype() -> np.dtype:
    """The dtype of Python floats and of float tensors created without a dtype: float32 (PyTorch's), or what
    `aotjax.set_default_dtype` set."""
    return _default_float[0]


def default_complex_dtype() -> np.dtype:
    """The dtype of Python complex numbers: complex128 when the default float dtype is float64, else complex64."""
    return np.dtype(np.complex128) if _default_float[0] == np.float64 else np.dtype(np.complex64)


def default_int_dtype() -> np.dtype:
    """int64 when jax's x64 mode is on (as PyTorch's default), else int32 (what the device holds)."""
    return np.dtype(np.int64) if jax.config.jax_enable_x64 else np.dtype(np.int32)


PYTHON_SCALARS = (bool, int, float, complex)


def python_scalar_dtype(x) -> np.dtype:
    """The dtype PyTorch gives the Python number `x`: bool, the default int, float32, complex64."""
    if isinstance(x, bool):
        return np.dtype(np.bool_)
    if isinstance(x, int):
        return default_int_dtype()
    if isinstance(x, float):
        return default_float_dtype()
    return default_complex_dtype()


def scalar_literal(x):
    """`x` as the NumPy scalar a trace inlines as a literal, or None if `x` is not a scalar constant: a
    NumPy scalar (or 0-d array) keeps its dtype, a Python number gets `python_scalar_dtype`."""
    if isinstance(x, np.generic):  # NOTE: first: np.float64 subclasses float but keeps its dtype
        return x
    if isinstance(x, np.ndarray):
        return x[()] if x.ndim == 0 else None
    if isinstance(x, PYTHON_SCALARS):
        return python_scalar_dtype(x).type(x)
    return None


def dtype_short_name(dtype) -> str:
    return _SHORT_NAMES.get(np.dtype(dtype).name, np.dtype(dtype).name)


@dataclass(frozen=True, slots=True)
class ShapedArray:
    """The abstract value of an array: a static shape and a dtype. Caches key on these."""

    shape: tuple[int, ...]
    dtype: np.dtype

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(d if type(d) is int else _dim(d) for d in self.shape))
        object.__setattr__(self, "dtype", np.dtype(self.dtype))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        if not all(type(d) is int for d in self.shape):  # NOTE: a symbolic dimension: a symbolic size
            return functools.reduce(operator.mul, self.shape, 1)
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def update(self, shape=None, dtype=None) -> "ShapedArray":
        return ShapedArray(self.shape if shape is None else shape, self.dtype if dtype is None else dtype)

    def str_short(self) -> str:
        return f"{dtype_short_name(self.dtype)}[{','.join(map(str, self.shape))}]"

    __str__ = str_short

    def __repr__(self) -> str:
        return f"ShapedArray({self.str_short()})"


def _dim(d):
    """A dimension: an int, or one of `jax.export.symbolic_shape`'s symbolic dimensions (kept as it is)."""
    return d if jax.export.is_symbolic_dim(d) else int(d)


def aval_of_value(x) -> ShapedArray:
    """The abstract value of a concrete array-like (jax/NumPy array or NumPy scalar)."""
    return ShapedArray(np.shape(x), x.dtype)


def get_aval(x) -> ShapedArray:
    """The abstract value of any operand: the `aval` of a Tensor (or of a marker such as `Zero`), that of
    an array, or that of a Python number as it is traced (`scalar_literal`)."""
    aval = getattr(x, "aval", None)
    if isinstance(aval, ShapedArray):
        return aval
    if isinstance(x, PYTHON_SCALARS):
        x = scalar_literal(x)
    return aval_of_value(x)
