"""`clone`: the copy primitive, a new tensor with its own data laid out in a memory format (strides are metadata).
`contiguous`, `reshape` of a non-viewable layout and `Tensor.to` make one when a view will not do, so it sits below
the view ops and the other shape ops."""
from __future__ import annotations

import jax.numpy as jnp

from aotjax.core.primitive import Recompute, output_size_flops
from aotjax.dtypes import preserve_format
from aotjax.interpreters.batching import defvectorized
from aotjax.interpreters.jvp import deflinear
from aotjax.interpreters.transpose import deflinear_transpose
from aotjax.ops.base.combinators import standard_primitive
from aotjax.ops.base.data import as_tensor
from aotjax.ops.base.layout import format_name, format_strides
from aotjax.tensor import method

__all__ = ["clone"]


def _keep_dtype(x, **params):
    return x.dtype


# -- clone -------------------------------------------------------------------------------------
def _clone_layout(operands, shape, /, *, memory_format):
    # NOTE: preserve_format keeps a dense layout (a transposed tensor stays transposed), as in PyTorch
    return format_strides(memory_format, shape, operands[0], "clone")


clone_p = standard_primitive("clone", lambda x, *, memory_format: x.shape, _keep_dtype,
                             lambda x, *, memory_format: jnp.copy(x), recompute=Recompute.CHEAP,
                             flops=output_size_flops)


clone_p.layout_rule = _clone_layout


deflinear(clone_p)


deflinear_transpose(clone_p, lambda ct, x, *, memory_format: ct)


def clone(x, *, memory_format=preserve_format):
    """A copy of `x` with its own data, laid out in `memory_format` (strides are metadata). With the default
    `preserve_format` a dense tensor keeps its strides (as PyTorch: `a.t().clone()` is not contiguous);
    `contiguous_format` gives a row-major copy, `channels_last` (4-d) / `channels_last_3d` (5-d) channels-last.

    >>> a = aotjax.zeros(2, 3)
    >>> b = a.t().clone()
    >>> b.add_(1).is_contiguous(), a.sum().item()
    (False, 0.0)
    >>> aotjax.zeros(1, 2, 3, 3).clone(memory_format=aotjax.channels_last).stride()
    (18, 1, 6, 2)
    """
    x = as_tensor(x)
    fmt = format_name(memory_format, "clone")
    format_strides(fmt, tuple(x.shape), op="clone")  # NOTE: a channels-last format of the wrong rank raises here
    return clone_p.bind(x, memory_format=fmt)


defvectorized(clone_p)


for _op in (clone,):
    method(_op)
