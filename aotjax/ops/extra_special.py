"""Elementwise ops torch has and aotjax lacked: the regularized incomplete gamma functions `igamma`/`igammac`
(`special.gammainc`/`gammaincc`), `nextafter` (elementwise primitives lowered to jax's functions, PyTorch's
promotion, in-place forms and Tensor methods), and `frexp` (a `from_jax` primitive of two results).
"""
from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import jax.scipy.special as jsp

from aotjax.core import source_info
from aotjax.core.errors import DTypeError, UnsupportedError
from aotjax.interpreters.jvp import defjvp
from aotjax.ops._combinators import elementwise, inplace_variant
from aotjax.ops._from_jax import from_jax
from aotjax.ops._frontend import as_tensor
from aotjax.ops.elementwise import _FLOATING, _binary_inplace, _binary_operands
from aotjax.ops.promotion import is_float
from aotjax.tensor import Tensor, method

__all__ = ["igamma", "igamma_", "igammac", "igammac_", "nextafter", "nextafter_", "frexp"]
SPECIAL = {"gammainc": "igamma", "gammaincc": "igammac"}


def _make(name: str, lower, doc: str):
    prim = elementwise(name, lower, out_dtype=_FLOATING.rule(name))
    prim_ = inplace_variant(prim)

    def op(input, other):
        x, y = _binary_operands(_FLOATING, input, other)
        if not _FLOATING.accepts(x.dtype):
            raise DTypeError(f"{name}: expected floating-point operands, got {as_tensor(input).aval.str_short()} "
                             f"and {as_tensor(other).aval.str_short()}{source_info.where()}")
        return prim.bind(x, y)

    def op_(input, other):
        return _binary_inplace(prim_, _FLOATING, input, other)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = doc
    op_.__name__ = op_.__qualname__ = name + "_"
    op_.__doc__ = (f"In-place `{name}`: writes the result into `input` and returns it.\n\n"
                   f"    >>> x = aotjax.tensor([1.0, 2.0])\n    >>> x.{name}_(aotjax.tensor([1.0, 1.0])) is x\n"
                   f"    True\n    ")
    method(op)
    method(op_)
    return prim, prim_, op, op_


def _no_derivative_in_a(name: str):
    def rule(t, a, x):
        raise UnsupportedError(f"{name}: the derivative in input (the shape parameter a) is not implemented, as in "
                               f"PyTorch{source_info.where()}; differentiate in other (x) only (detach input)")
    return rule


igamma_p, igamma_inplace_p, igamma, igamma_ = _make("igamma", jsp.gammainc, """The regularized lower incomplete
    gamma function `P(input, other) = gamma(input, other) / Gamma(input)`, as `torch.igamma` (also
    `aotjax.special.gammainc`). Differentiable in `other` only, as in PyTorch.

    >>> [round(v, 4) for v in aotjax.igamma(aotjax.tensor([1.0, 2.0]), aotjax.tensor([1.0, 1.0])).tolist()]
    [0.6321, 0.2642]
    """)
igammac_p, igammac_inplace_p, igammac, igammac_ = _make("igammac", jsp.gammaincc, """The regularized upper
    incomplete gamma function `Q(input, other) = 1 - P(input, other)`, as `torch.igammac` (also
    `aotjax.special.gammaincc`). Differentiable in `other` only, as in PyTorch.

    >>> round(aotjax.igammac(aotjax.tensor([1.0]), aotjax.tensor([1.0])).item(), 4)
    0.3679
    """)


def _density(a, x):
    """`x ** (a - 1) * exp(-x) / Gamma(a)`: the derivative of `P(a, x)` in `x`."""
    a, x = as_tensor(a), as_tensor(x)
    return ((a - 1) * x.log() - x - a.lgamma()).exp()


defjvp(igamma_p, _no_derivative_in_a("igamma"), lambda t, a, x: t * _density(a, x))
defjvp(igammac_p, _no_derivative_in_a("igammac"), lambda t, a, x: -(t * _density(a, x)))

nextafter_p, nextafter_inplace_p, nextafter, nextafter_ = _make("nextafter", jnp.nextafter, """The next
    floating-point value after `input` towards `other`, elementwise, as `torch.nextafter`. Not differentiable
    (as in PyTorch, differentiating it raises).

    >>> (aotjax.nextafter(aotjax.tensor([1.0]), aotjax.tensor([2.0])) > 1.0).item()
    True
    """)
def _nextafter_jvp(t, x, y):
    raise UnsupportedError(f"nextafter: the derivative is not implemented, as in PyTorch{source_info.where()}; "
                           f"apply it to detached tensors")


defjvp(nextafter_p, _nextafter_jvp, _nextafter_jvp)


class FrexpResult(NamedTuple):
    mantissa: Tensor
    exponent: Tensor


frexp_p = from_jax("frexp", lambda x: (jnp.frexp(x)[0], jnp.frexp(x)[1].astype(jnp.int32)), multiple_results=True,
                   flops=lambda in_avals, out_avals, **params: float(in_avals[0].size))


def frexp(input):
    """`input` as `mantissa * 2 ** exponent` with `0.5 <= |mantissa| < 1` (0 for 0) and an int32 `exponent`, as
    `torch.frexp`.

    >>> m, e = aotjax.frexp(aotjax.tensor([8.0, 0.75]))
    >>> m, e.tolist(), e.dtype
    (tensor([0.5 , 0.75]), [4, 0], dtype('int32'))
    """
    x = as_tensor(input)
    if not is_float(x.dtype):
        raise DTypeError(f"frexp: expected a floating-point tensor, got {x.aval.str_short()}{source_info.where()}; "
                         f"convert it first (e.g. `x.float()`)")
    return FrexpResult(*frexp_p.bind(x, chain=()))


method(frexp)

