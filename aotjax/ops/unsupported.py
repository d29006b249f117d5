"""The PyTorch ops aotjax deliberately does not provide, each with why and what to use instead.

Looking one up (`aotjax.to_sparse`, `x.backward()`, `x.resize_(4)`) raises `UnsupportedOpError`, which says so in a
full sentence instead of a bare `AttributeError`; it is an `AttributeError` too, so `hasattr` and `getattr(x, name,
default)` still answer False / the default. The README's list of unsupported ops is generated from `UNSUPPORTED`
(`python -m aotjax ops`). Ops that exist but raise for some arguments (`as_strided`) keep their own error; their row
here documents it.

>>> x = aotjax.ones(3)
>>> x.to_sparse()
Traceback (most recent call last):
...
aotjax.ops.unsupported.UnsupportedOpError: Tensor.to_sparse is not supported (sparse tensors): ...
>>> hasattr(x, "to_sparse")
False
"""
from __future__ import annotations

from dataclasses import dataclass

from aotjax.core.errors import UnsupportedError
from aotjax.tensor import Tensor

__all__ = ["Unsupported", "UNSUPPORTED", "UnsupportedOpError", "unsupported_error", "module_getattr"]


@dataclass(frozen=True)
class Unsupported:
    """A group of PyTorch names aotjax does not provide: where they live (`"aotjax"` for `torch.X`, `"Tensor"` for
    `torch.Tensor.X`), why, and what to do instead."""
    topic: str
    functions: tuple[str, ...]
    methods: tuple[str, ...]
    why: str
    instead: str


UNSUPPORTED: tuple[Unsupported, ...] = (
    Unsupported(
        "arbitrary strides", ("as_strided", "as_strided_scatter"), ("as_strided", "as_strided_"),
        "aotjax runs on XLA, whose arrays have no strides to reinterpret: each tensor only records the strides "
        "PyTorch would give it, and a view at arbitrary offsets into a storage cannot be functionalized into "
        "the scatter that a write through it needs",
        "express the view with slicing (x[::2]), narrow, diagonal, unfold, view/reshape/permute or expand"),
    Unsupported(
        "sparse tensors", ("sparse_coo_tensor", "sparse_csr_tensor", "sparse_compressed_tensor"),
        ("to_sparse", "to_sparse_csr", "to_sparse_coo", "to_sparse_csc", "coalesce", "indices", "values"),
        "aotjax tensors are dense XLA arrays and there is no sparse layout",
        "keep the tensor dense (masks, scatter_add / index_add for sparse updates, segment sums via index_add)"),
    Unsupported(
        "quantized tensors", ("quantize_per_tensor", "quantize_per_channel", "dequantize"),
        ("dequantize", "q_scale", "q_zero_point", "int_repr", "q_per_channel_scales"),
        "there are no quantized dtypes",
        "carry the scale and zero point yourself in an integer tensor (x.round().to(aotjax.int8)) and "
        "dequantize with arithmetic"),
    Unsupported(
        "named tensors", (), ("names", "refine_names", "rename", "rename_", "align_to", "align_as"),
        "tensors have no dimension names",
        "index dimensions by position (permute, movedim, einsum)"),
    Unsupported(
        "storage and in-place resizing", (), ("resize_", "resize_as_", "set_", "storage", "untyped_storage",
                                                    "data_ptr"),
        "a tensor's storage is an immutable, fixed-size XLA buffer that aotjax owns; it cannot be resized in place, "
        "swapped or addressed",
        "build a new tensor of the new shape (x.reshape(shape) when the size is unchanged, x.new_zeros(shape), "
        "aotjax.cat) and rebind the name"),
    Unsupported(
        "complex32", (), ("chalf",),
        "XLA and jax have no half-precision complex dtype (complex32), so a tensor cannot hold one",
        "use complex64 (x.cfloat() or x.to(aotjax.complex64)); keep half precision with two float16 tensors "
        "(the real and imaginary parts) if memory matters"),
)

_FUNCTIONS = {name: u for u in UNSUPPORTED for name in u.functions}
_METHODS = {name: u for u in UNSUPPORTED for name in u.methods}


class UnsupportedOpError(UnsupportedError, AttributeError):
    """A PyTorch op that aotjax deliberately does not provide (see `UNSUPPORTED`). An `AttributeError` too, so that
    `hasattr` answers False."""


def unsupported_error(owner: str, name: str) -> UnsupportedOpError | None:
    """The error for looking up `name` on `owner` (`"aotjax"` or `"Tensor"`), or None when `name` is not listed.

    >>> str(unsupported_error("aotjax", "sparse_coo_tensor")).split(":")[0]
    'aotjax.sparse_coo_tensor is not supported (sparse tensors)'
    """
    entry = (_FUNCTIONS if owner == "aotjax" else _METHODS).get(name)
    if entry is None:
        return None
    return UnsupportedOpError(f"{owner}.{name} is not supported ({entry.topic}): {entry.why}. Instead, "
                              f"{entry.instead}.")


def module_getattr(name: str):
    """The `__getattr__` of the `aotjax` package: a clear error for a listed PyTorch op, else AttributeError.

    >>> aotjax.quantize_per_tensor
    Traceback (most recent call last):
    ...
    aotjax.ops.unsupported.UnsupportedOpError: aotjax.quantize_per_tensor is not supported (quantized tensors): ...
    """
    raise unsupported_error("aotjax", name) or AttributeError(f"module 'aotjax' has no attribute {name!r}")


def _tensor_getattr(self, name: str):
    # NOTE: called only when normal lookup fails; dunders and unlisted names get the plain AttributeError at once,
    # so protocols that probe attributes (copy, pickle, NumPy, jax) are unaffected.
    error = None if name.startswith("__") else unsupported_error("Tensor", name)
    raise error or AttributeError(f"'{type(self).__name__}' object has no attribute {name!r}")


Tensor.__getattr__ = _tensor_getattr
