"""Casts: the `convert_element_type` primitive (one dtype to another; a complex value cast to a real dtype keeps its
real part, as torch's `to`) with its rules, and `convert`, the one way ops change an operand's dtype. The op
`Tensor.to` and the cast methods (`float`, `half`, ...) build on it in aotjax/ops/math/elementwise.py.

>>> aotjax.convert(aotjax.tensor([1.7, -1.7]), aotjax.int8)
tensor([ 1, -1], dtype=int8)
"""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from aotjax.core.primitive import Recompute, output_size_flops
from aotjax.interpreters import hooks
from aotjax.interpreters.ad_util import Zero, is_differentiable
from aotjax.interpreters.batching import defvectorized
from aotjax.interpreters.jvp import jvp_rules
from aotjax.interpreters.transpose import deflinear_transpose
from aotjax.ops.base.combinators import standard_primitive
from aotjax.ops.base.layout import preserve_layout
from aotjax.ops.base.promotion import _COMPLEX, category

__all__ = ["convert", "convert_element_type_p"]


# -- casts -------------------------------------------------------------------------------------
def _real_part_if_real(x, new_dtype):
    """A complex value converted to a real dtype keeps its real part (as torch's `to`, and a transpose's cast)."""
    return jnp.real(x) if jnp.iscomplexobj(x) and category(new_dtype) != _COMPLEX else x


convert_element_type_p = standard_primitive(
    "convert_element_type", lambda x, *, new_dtype: x.shape, lambda x, *, new_dtype: new_dtype,
    lambda x, *, new_dtype: _real_part_if_real(x, new_dtype).astype(new_dtype), recompute=Recompute.CHEAP,
    flops=output_size_flops)


convert_element_type_p.layout_rule = preserve_layout  # NOTE: `x.to(dtype)` is a preserve_format copy


defvectorized(convert_element_type_p)


def _convert_element_type_jvp(primals, tangents, *, new_dtype):
    (x,), (t,) = primals, tangents
    out = convert_element_type_p.bind(x, new_dtype=new_dtype)
    if isinstance(t, Zero) or not is_differentiable(new_dtype):
        return [out], [Zero(out.aval)]
    return [out], [convert_element_type_p.bind(t, new_dtype=new_dtype)]


jvp_rules[convert_element_type_p] = _convert_element_type_jvp


def _convert_element_type_transpose(ct, x, *, new_dtype):
    return convert(ct, x.dtype) if is_differentiable(x.dtype) else Zero(x.aval)


deflinear_transpose(convert_element_type_p, _convert_element_type_transpose)


def convert(x, dtype):
    """`x` converted to `dtype` (`x` itself if it already has it)."""
    if x.dtype == dtype:
        return x
    return convert_element_type_p.bind(x, new_dtype=np.dtype(dtype))


hooks.convert = convert


