"""Dtype names, as PyTorch spells them. Each is a `numpy.dtype`; 64-bit types hold 64-bit data only
when jax's x64 mode is on (`jax.config.update("jax_enable_x64", True)`), else their 32-bit form."""
from __future__ import annotations

import builtins

import ml_dtypes
import numpy as np

float16 = half = np.dtype(np.float16)
bfloat16 = np.dtype(ml_dtypes.bfloat16)
float32 = float = np.dtype(np.float32)  # noqa: A001
float64 = double = np.dtype(np.float64)
int8 = np.dtype(np.int8)
int16 = short = np.dtype(np.int16)
int32 = int = np.dtype(np.int32)  # noqa: A001
int64 = long = np.dtype(np.int64)
uint8 = np.dtype(np.uint8)
uint32 = np.dtype(np.uint32)
bool = np.dtype(np.bool_)  # noqa: A001
complex64 = cfloat = np.dtype(np.complex64)
complex128 = cdouble = np.dtype(np.complex128)

__all__ = ["float16", "half", "bfloat16", "float32", "float", "float64", "double", "int8", "int16", "short",
           "int32", "int", "int64", "long", "uint8", "uint32", "bool", "complex64", "cfloat",
           "complex128", "cdouble"]


class memory_format:
    """A memory format, as `torch.memory_format`: the strides `clone`, `contiguous`, `to`, `empty` and the `_like`
    factories give their result (metadata: XLA arrays have no strides of their own). `preserve_format` keeps a
    dense input's strides; `channels_last` is NHWC order for 4-d tensors, `channels_last_3d` NDHWC for 5-d ones.

    >>> aotjax.zeros(1, 3, 2, 2).contiguous(memory_format=aotjax.channels_last).stride()
    (12, 1, 6, 3)
    """

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"aotjax.{self.name}"


contiguous_format = memory_format("contiguous_format")
preserve_format = memory_format("preserve_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")

__all__ += ["memory_format", "contiguous_format", "preserve_format", "channels_last", "channels_last_3d"]


class layout(memory_format):
    """A tensor layout, as `torch.layout`: aotjax tensors are dense XLA arrays, so `strided` is the only one (the
    factories take `layout=aotjax.strided`, as torch's do).

    >>> aotjax.zeros(2, layout=aotjax.strided).shape
    (2,)
    """

    __slots__ = ()


strided = layout("strided")
__all__ += ["layout", "strided"]


def _canonical(dtype, what: str) -> np.dtype:
    """`dtype` as tensors of it hold their data (a 64-bit type in its 32-bit form outside jax's x64 mode)."""
    import jax  # NOTE: at call time: this module is imported before jax's configuration is read

    if dtype is None:
        # NOTE: the dtype names sit below every layer; the default is read at call time, once all are loaded
        from aotjax.ops.base.promotion import default_float_dtype
        dtype = default_float_dtype()
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{what}(): argument 'type' must be a dtype, got {type(dtype).__name__}") from None
    return np.dtype(jax.dtypes.canonicalize_dtype(dtype))


class finfo:
    """The limits of a floating-point dtype, as `torch.finfo(dtype=None)` (None: the default dtype): `bits`, `eps`,
    `max`, `min`, `tiny` (= `smallest_normal`), `resolution` as Python floats, and `dtype` as its name. A 64-bit
    dtype outside jax's x64 mode gives its 32-bit form's limits, which its tensors hold.

    >>> aotjax.finfo(aotjax.bfloat16).eps
    0.0078125
    >>> aotjax.finfo().dtype
    'float32'
    """

    def __init__(self, dtype=None):
        dtype = _canonical(dtype, "finfo")
        if dtype.kind == "c":
            dtype = np.dtype(np.float32 if dtype.itemsize == 8 else np.float64)  # NOTE: torch: the real part's
        if dtype.kind != "f" and dtype.name != "bfloat16":
            raise TypeError(f"torch.finfo() requires a floating point input type. Use torch.iinfo to handle "
                            f"'{dtype.name}'")
        info = ml_dtypes.finfo(dtype)
        self.bits = builtins.int(info.bits)
        self.eps, self.max, self.min = builtins.float(info.eps), builtins.float(info.max), builtins.float(info.min)
        self.tiny = self.smallest_normal = builtins.float(info.smallest_normal)
        self.resolution = 10.0 ** -builtins.int(info.precision)  # NOTE: torch's: exactly a power of ten
        self.dtype = dtype.name

    def __repr__(self) -> str:
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, eps={self.eps:g}, "
                f"smallest_normal={self.smallest_normal:g}, tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:
    """The limits of an integer dtype, as `torch.iinfo(dtype)`: `bits`, `max`, `min` as Python ints and
    `dtype` as its name. A 64-bit dtype outside jax's x64 mode gives its 32-bit form's.

    >>> aotjax.iinfo(aotjax.uint8).max
    255
    """

    def __init__(self, dtype):
        dtype = _canonical(dtype, "iinfo")
        if dtype.kind == "b":
            raise TypeError("torch.bool is not supported by torch.iinfo")
        if dtype.kind not in "iu":
            raise TypeError(f"torch.iinfo() requires an integer input type. Use torch.finfo to handle "
                            f"'{dtype.name}'")
        info = np.iinfo(dtype)
        self.bits, self.max, self.min = builtins.int(info.bits), builtins.int(info.max), builtins.int(info.min)
        self.dtype = dtype.name

    def __repr__(self) -> str:
        return f"iinfo(min={self.min:g}, max={self.max:g}, dtype={self.dtype})"  # NOTE: torch's %g


__all__ += ["finfo", "iinfo"]


def set_default_dtype(d) -> None:
    """`torch.set_default_dtype`: the dtype of Python floats and of float tensors made without a dtype (float32,
    float64, float16 or bfloat16; complex numbers follow: complex128 with float64). Set it before building models and
    compiling, as scripts do: a program already traced keeps the dtypes it was traced with. Outside jax's x64 mode
    float64 is held as float32 (a DTypeTruncationWarning says so).

    >>> aotjax.set_default_dtype(aotjax.bfloat16)
    >>> aotjax.tensor([1.5]).dtype, aotjax.get_default_dtype()
    (dtype(bfloat16), dtype(bfloat16))
    >>> aotjax.set_default_dtype(aotjax.float32)
    """
    import warnings

    # NOTE: the dtype names sit below every layer; the default dtype lives in the core, set at call time
    from aotjax.core import avals
    from aotjax.core.errors import DTypeTruncationWarning

    try:
        dtype = np.dtype(d)
    except TypeError:
        raise TypeError(f"set_default_dtype(): argument 'd' must be a dtype, not {type(d).__name__}") from None
    if dtype not in (float16, bfloat16, float32, float64):
        raise TypeError(f"only floating-point types are supported as the default type, got {dtype.name}")
    held = _canonical(dtype, "set_default_dtype")
    if held != dtype:
        warnings.warn(DTypeTruncationWarning(
            f"set_default_dtype: {dtype.name} is held as {held.name} outside jax's x64 mode; to make float64 the "
            f"default, enable x64 first (jax.config.update('jax_enable_x64', True) or JAX_ENABLE_X64=1)"), stacklevel=2)
    # NOTE: as above: promotion caches the dtypes of Python scalars, which follow the default
    from aotjax.ops.base import promotion

    avals._default_float[0] = held
    promotion._result_types.clear()  # NOTE: what `int_tensor * 0.5` gives follows the default


def get_default_dtype() -> np.dtype:
    """The default float dtype (`torch.get_default_dtype`): float32 unless `set_default_dtype` changed it."""
    # NOTE: as above: the default dtype lives in the core
    from aotjax.core import avals

    return avals._default_float[0]


__all__ += ["set_default_dtype", "get_default_dtype"]
