"""Dtype names, as PyTorch spells them. Each is a `numpy.dtype`; 64-bit types hold 64-bit data only
when jax's x64 mode is on (`jax.config.update("jax_enable_x64", True)`), else their 32-bit form."""
from __future__ import annotations

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
