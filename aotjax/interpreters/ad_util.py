"""What the autodiff interpreters share: the symbolic zero tangent/cotangent.

`Zero(aval)` stands for an all-zero tangent or cotangent of abstract value `aval` that was never
materialized: rules skip work on it (`jvp` of `x * c` with a zero tangent for `x` costs nothing),
and `instantiate` makes a real zero tensor only where a value is needed.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from aotjax.core.avals import ShapedArray


class AbstractOnly:
    """Mixin of the markers that stand for a value known only by its abstract value `aval` (`Zero`,
    `UndefinedPrimal`): array-like `shape`, `dtype`, `ndim`, so rules can read them like operands."""

    __slots__ = ()
    aval: ShapedArray

    @property
    def shape(self) -> tuple[int, ...]:
        return self.aval.shape

    @property
    def dtype(self) -> np.dtype:
        return self.aval.dtype

    @property
    def ndim(self) -> int:
        return self.aval.ndim

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.aval.str_short()})"


@dataclass(frozen=True, slots=True, repr=False)
class Zero(AbstractOnly):
    """A symbolic zero of abstract value `aval`."""

    aval: ShapedArray


def is_differentiable(dtype) -> bool:
    """Whether values of `dtype` have nonzero tangents (floating and complex types)."""
    dt = np.dtype(dtype)
    return np.issubdtype(dt, np.inexact) or dt.name == "bfloat16"


def instantiate(t, aval: ShapedArray | None = None):
    """`t` itself, or a real zero tensor if `t` is a symbolic `Zero`."""
    if not isinstance(t, Zero):
        return t
    from aotjax.ops.creation import zeros  # NOTE: interpreters sit below ops; lazy import to build a value

    aval = aval or t.aval
    return zeros(*aval.shape, dtype=aval.dtype)


def add_tangents(a, b):
    """`a + b` where either may be a symbolic zero (then the other is returned, no op is bound)."""
    if isinstance(a, Zero):
        return b
    if isinstance(b, Zero):
        return a
    from aotjax.ops.elementwise import add_p  # NOTE: lazy, see instantiate

    return add_p.bind(a, b)


def unbroadcast(ct, aval: ShapedArray):
    """The cotangent `ct` of a broadcast result summed back to an operand of abstract value `aval`: over
    the leading dims the operand lacks and over the dims where it has size 1 (NumPy broadcasting)."""
    if isinstance(ct, Zero):
        return Zero(aval)
    shape = tuple(ct.shape)
    if shape == aval.shape:
        return ct
    from aotjax.ops.reduction import reduce_sum_p  # NOTE: lazy, see instantiate
    from aotjax.ops.views import view_p

    lead = len(shape) - len(aval.shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(aval.shape) if n == 1 and shape[lead + i] != 1)
    out = reduce_sum_p.bind(ct, axes=axes, keepdims=False) if axes else ct
    return out if tuple(out.shape) == aval.shape else view_p.bind(out, shape=aval.shape)
