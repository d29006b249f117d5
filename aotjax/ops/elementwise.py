"""Elementwise primitives and their op functions: unary math, binary arithmetic and comparisons,
casts, and the in-place `_` variant of each."""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from aotjax.core.avals import ShapedArray
from aotjax.ops._combinators import elementwise, inplace_variant, standard_primitive
from aotjax.ops._frontend import as_tensor, promote, to_dtype
from aotjax.ops.promotion import check_inplace_cast, default_float_dtype, is_float, result_type
from aotjax.tensor import Tensor

__all__ = ["convert_element_type_p", "add", "add_", "mul", "mul_", "sin", "sin_", "to"]

# -- casts -------------------------------------------------------------------------------------
convert_element_type_p = standard_primitive(
    "convert_element_type", lambda x, *, new_dtype: x.shape, lambda x, *, new_dtype: new_dtype,
    lambda x, *, new_dtype: x.astype(new_dtype))


def to(x, dtype=None, *args, **kwargs):
    """`x` converted to `dtype` (a new tensor, or `x` itself if it already has that dtype)."""
    from aotjax.ops._frontend import convert

    if isinstance(dtype, Tensor):
        dtype = dtype.dtype
    return x if dtype is None else convert(x, to_dtype(dtype))


# -- unary -------------------------------------------------------------------------------------
def _float_operand(x):
    x = as_tensor(x)
    return x if is_float(x.dtype) else promote(x, dtype=default_float_dtype())[0]


sin_p = elementwise("sin", jnp.sin)
sin__p = inplace_variant(sin_p)


def sin(x):
    """Elementwise sine (integer tensors are promoted to float32)."""
    return sin_p.bind(_float_operand(x))


def sin_(x):
    """In-place `sin`."""
    return sin__p.bind(x)


# -- binary ------------------------------------------------------------------------------------
def _binary(prim, x, y):
    if type(x) is type(y) is Tensor and x.dtype == y.dtype:
        return prim.bind(x, y)
    return prim.bind(*promote(x, y))


def _binary_inplace(prim, x, y):
    dtype = result_type(x, y)
    check_inplace_cast(prim.name, dtype, x.dtype)
    return prim.bind(x, promote(y, dtype=x.dtype)[0])


add_p = elementwise("add", jnp.add)
add__p = inplace_variant(add_p)
mul_p = elementwise("mul", jnp.multiply)
mul__p = inplace_variant(mul_p)


def add(x, y, *, alpha=1):
    """`x + alpha * y`, broadcasting, with PyTorch's type promotion."""
    return _binary(add_p, x, y if alpha == 1 else mul(y, alpha))


def add_(x, y, *, alpha=1):
    """In-place `add`: writes into `x` and returns it."""
    return _binary_inplace(add__p, x, y if alpha == 1 else mul(y, alpha))


def mul(x, y):
    """`x * y`, broadcasting, with PyTorch's type promotion."""
    return _binary(mul_p, x, y)


def mul_(x, y):
    """In-place `mul`."""
    return _binary_inplace(mul__p, x, y)


