"""What the autodiff interpreters share: the symbolic zero tangent/cotangent.

`Zero(aval)` stands for an all-zero tangent or cotangent of abstract value `aval` that was never
materialized: rules skip work on it (`jvp` of `x * c` with a zero tangent for `x` costs nothing),
and `instantiate` makes a real zero tensor only where a value is needed.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from aotjax.core.avals import ShapedArray
from aotjax.interpreters import hooks


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
    return hooks.zeros(aval or t.aval)


def add_tangents(a, b):
    """`a + b` where either may be a symbolic zero (then the other is returned, no op is bound)."""
    if isinstance(a, Zero):
        return b
    if isinstance(b, Zero):
        return a
    return hooks.add(a, b)


def unbroadcast(ct, aval: ShapedArray):
    """The cotangent `ct` of a broadcast result summed back to an operand of abstract value `aval`: over
    the leading dims the operand lacks and over the dims where it has size 1 (NumPy broadcasting)."""
    if isinstance(ct, Zero):
        return Zero(aval)
    shape = tuple(ct.shape)
    if shape == aval.shape:
        return ct
    lead = len(shape) - len(aval.shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(aval.shape) if n == 1 and shape[lead + i] != 1)
    out = hooks.reduce_sum(ct, axes) if axes else ct
    return out if tuple(out.shape) == aval.shape else hooks.reshape(out, aval.shape)
