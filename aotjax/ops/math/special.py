"""`torch.special`'s orthogonal polynomials and Bessel functions, and the special elementwise ops torch has at its top
level: `igamma`/`igammac` (`special.gammainc`/`gammaincc`), `nextafter` (elementwise primitives lowered to jax's
functions, PyTorch's promotion, in-place forms and Tensor methods), `frexp` (a `from_jax` primitive of two results),
`sgn`, `resolve_neg`. The rest of torch.special (`erfc`, `i0`, `digamma`, ...) is aotjax/ops/math/functions.py's.

The polynomials: the Chebyshev polynomials
(`chebyshev_polynomial_t/u/v/w` and their shifted forms on [0, 1]), `hermite_polynomial_h/he`,
`laguerre_polynomial_l`, `legendre_polynomial_p`; `modified_bessel_i0/i1/k0/k1`, `scaled_modified_bessel_k0/k1`,
`bessel_y0/y1`, `spherical_bessel_j0`, `airy_ai`. `aotjax.special` exports them (torch has them in
`torch.special` only, so they are not `aotjax.X`).

The polynomials are binary elementwise primitives lowered to a three-term recurrence run up to the largest degree
in `n` (a `lax.fori_loop`, so `n` may be a traced tensor). Like PyTorch: `n` is truncated to an integer, a
negative degree gives 0, integer operands promote to the default float dtype; and like PyTorch they have no
derivative (their results carry no tangent).

`modified_bessel_k0/k1` (and the scaled forms) and `bessel_y0/y1` are unary primitives: a power series for small
arguments, the integral `K_nu(x) = int_0^inf exp(-x cosh t) cosh(nu t) dt` by the trapezoidal rule (which
converges geometrically for this integrand) or Hankel's asymptotic expansion for large ones. PyTorch gives them no
derivative; here they have their exact ones (`K0' = -K1`, `Y0' = -Y1`, ...). `modified_bessel_i0/i1` are `i0`,
`i1`; `spherical_bessel_j0` is `sin(x) / x`; `airy_ai` a primitive without a derivative, as PyTorch.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import jax.numpy as jnp
import jax.scipy.special as jsp
import numpy as np
from jax import lax

from aotjax.core import source_info
from aotjax.core.errors import DTypeError, UnsupportedError
from aotjax.interpreters.jvp import defjvp, defjvp_zero
from aotjax.ops.base.combinators import elementwise, inplace_variant
from aotjax.ops.base.data import as_tensor
from aotjax.ops.base.from_jax import from_jax
from aotjax.ops.base.promotion import _COMPLEX, category, is_float
from aotjax.ops.math.dtype_classes import FLOATING
from aotjax.ops.math.elementwise import (
    abs,
    add,
    binary_inplace,
    binary_operands,
    div,
    eq,
    mul,
    named,
    neg,
    sign,
    sub,
    unary_operand,
    where,
)
from aotjax.ops.math.functions import _bessel_j, _hankel_coefficients, _inplace_of, _sin_over, i0, i1, isinf
from aotjax.tensor import Tensor, method

__all__: list[str] = []

_EULER = 0.5772156649015329


# -- orthogonal polynomials -----------------------------------------------------------------------------------------
def _recurrence(first, step, shift: bool = False):
    """The lowering of a polynomial family: `p_0 = 1`, `p_1 = first(x)`, `p_{k+1} = step(k, x, p_{k-1}, p_k)`,
    evaluated at each element's degree `trunc(n)` (0 for a negative degree)."""
    def lower(x, n):
        x, n = jnp.broadcast_arrays(x, n)
        if shift:
            x = 2 * x - 1
        degree = n.astype(jnp.int32)
        p1 = first(x)
        out = jnp.where(degree == 0, jnp.ones_like(x), jnp.where(degree == 1, p1, jnp.zeros_like(x)))

        def body(k, carry):
            previous, current, out = carry
            following = step(k.astype(x.dtype), x, previous, current)
            return current, following, jnp.where(degree == k + 1, following, out)
        top = jnp.max(degree, initial=1)
        return lax.fori_loop(1, top, body, (jnp.ones_like(x), p1, out))[2]
    return lower


def _polynomial(name: str, lower, doc: str):
    prim = elementwise(name, lower)
    defjvp_zero(prim)  # NOTE: as PyTorch: no derivative in `input` (nor in the integer degree `n`)

    def op(input, n):
        return prim.bind(*binary_operands(FLOATING, input, n))
    __all__.append(name)
    return prim, named(op, name, doc)


def _chebyshev_step(k, x, previous, current):
    return 2 * x * current - previous


_CHEBYSHEV_FIRST = {"t": lambda x: x, "u": lambda x: 2 * x, "v": lambda x: 2 * x - 1, "w": lambda x: 2 * x + 1}
_CHEBYSHEV_KIND = {"t": "first", "u": "second", "v": "third", "w": "fourth"}
_CHEBYSHEV_EXAMPLE = {"t": "tensor([-0.5])", "u": "tensor([0.])", "v": "tensor([-1.])", "w": "tensor([1.])"}
_SHIFTED_EXAMPLE = {"t": "tensor([-1.])", "u": "tensor([-1.])", "v": "tensor([-1.])", "w": "tensor([-1.])"}

for _kind, _first in _CHEBYSHEV_FIRST.items():
    _name = f"chebyshev_polynomial_{_kind}"
    globals()[_name + "_p"], globals()[_name] = _polynomial(_name, _recurrence(_first, _chebyshev_step), f"""The
    Chebyshev polynomial of the {_CHEBYSHEV_KIND[_kind]} kind of degree `n` (an integer tensor or number,
    truncated; 0 for a negative degree) at `input`, broadcast together.

    >>> aotjax.special.{_name}(aotjax.tensor([0.5]), 2)
    {_CHEBYSHEV_EXAMPLE[_kind]}
    """)
    _name = f"shifted_chebyshev_polynomial_{_kind}"
    globals()[_name + "_p"], globals()[_name] = _polynomial(_name, _recurrence(_first, _chebyshev_step, shift=True),
                                                            f"""The shifted Chebyshev polynomial of the
    {_CHEBYSHEV_KIND[_kind]} kind, `chebyshev_polynomial_{_kind}(2 * input - 1, n)`, of degree `n` at `input`.

    >>> aotjax.special.{_name}(aotjax.tensor([0.5]), 2)
    {_SHIFTED_EXAMPLE[_kind]}
    """)

hermite_polynomial_h_p, hermite_polynomial_h = _polynomial("hermite_polynomial_h", _recurrence(
    lambda x: 2 * x, lambda k, x, p, c: 2 * x * c - 2 * k * p), """The physicists' Hermite polynomial `H_n` of degree
    `n` (an integer tensor or number, truncated; 0 for a negative degree) at `input`.

    >>> aotjax.special.hermite_polynomial_h(aotjax.tensor([1.0]), 2)
    tensor([2.])
    """)
hermite_polynomial_he_p, hermite_polynomial_he = _polynomial("hermite_polynomial_he", _recurrence(
    lambda x: x, lambda k, x, p, c: x * c - k * p), """The probabilists' Hermite polynomial `He_n` of degree `n` at
    `input`.

    >>> aotjax.special.hermite_polynomial_he(aotjax.tensor([1.0]), 2)
    tensor([0.])
    """)
laguerre_polynomial_l_p, laguerre_polynomial_l = _polynomial("laguerre_polynomial_l", _recurrence(
    lambda x: 1 - x, lambda k, x, p, c: ((2 * k + 1 - x) * c - k * p) / (k + 1)), """The Laguerre polynomial `L_n`
    of degree `n` (an integer tensor or number, truncated; 0 for a negative degree) at `input`.

    >>> aotjax.special.laguerre_polynomial_l(aotjax.tensor([1.0]), 2)
    tensor([-0.5])
    """)
legendre_polynomial_p_p, legendre_polynomial_p = _polynomial("legendre_polynomial_p", _recurrence(
    lambda x: x, lambda k, x, p, c: ((2 * k + 1) * x * c - k * p) / (k + 1)), """The Legendre polynomial `P_n` of
    degree `n` (an integer tensor or number, truncated; 0 for a negative degree) at `input`.

    >>> aotjax.special.legendre_polynomial_p(aotjax.tensor([0.5]), 2)
    tensor([-0.125])
    """)


# -- Bessel functions -----------------------------------------------------------------------------------------------
def _harmonic(k: int) -> float:
    return sum(1.0 / j for j in range(1, k + 1))


def _power_series(q, coefficients):
    """`sum_k coefficients[k] q^k`, one vectorized sum (a small program)."""
    powers = q[..., None] ** jnp.arange(len(coefficients))
    return jnp.sum(powers * jnp.asarray(coefficients, q.dtype), axis=-1)


def _series_coefficients(nu: int, terms: int, weight) -> np.ndarray:
    """`weight(k) / (k! (k + nu)!)` for k < terms."""
    return np.array([weight(k) / (math.factorial(k) * math.factorial(k + nu)) for k in range(terms)])


def _digamma_sum(nu: int):
    """`psi(k + 1) + psi(k + nu + 1)` (`psi(k + 1) = H_k - gamma`)."""
    return lambda k: _harmonic(k) + _harmonic(k + nu) - 2 * _EULER


def _k_series(nu: int, x):
    """`K_nu(x)` for `0 < x <= 2` by its power series (Abramowitz and Stegun 9.6.11)."""
    q, log_half = x * x / 4, jnp.log(x / 2)
    bessel_i = _power_series(q, _series_coefficients(nu, 14, lambda k: 1.0))
    total = _power_series(q, _series_coefficients(nu, 14, _digamma_sum(nu)))
    if nu == 0:
        return total / 2 - log_half * bessel_i
    return 1 / x + log_half * (x / 2) * bessel_i - (x / 4) * total


def _trapezoid(z, nu: float, last: float):
    """`int_0^last exp(-z (cosh t - 1)) cosh(nu t) dt` by the trapezoidal rule at step 0.05 (one vectorized sum
    over the nodes, a small program)."""
    t = np.arange(0.0, last + 0.025, 0.05)
    weights = 0.05 * np.cosh(nu * t)
    weights[0] /= 2
    values = jnp.exp(-z[..., None] * jnp.asarray(np.cosh(t) - 1, z.dtype))
    return jnp.sum(values * jnp.asarray(weights, z.dtype), axis=-1)




def _k_scaled(nu: int, x):
    """`exp(x) K_nu(x)` for `x > 0`: the series below 2, the trapezoidal rule of the integral up to 100,
    Hankel's asymptotic expansion beyond."""
    small = jnp.where(x <= 2, x, jnp.asarray(2.0, x.dtype))
    mid = jnp.clip(x, 2, 100)
    big = jnp.where(x > 100, x, jnp.asarray(100.0, x.dtype))
    series = _k_series(nu, small) * jnp.exp(small)
    integral = _trapezoid(mid, nu, 4.0)  # NOTE: exp(-x (cosh t - 1)) < e^-50 beyond t = 4 for x >= 2
    asymptotic = jnp.sqrt(math.pi / (2 * big)) * sum(c / big ** k for k, c in enumerate(_hankel_coefficients(nu)))
    return jnp.where(x <= 2, series, jnp.where(x <= 100, integral, asymptotic))


def _k_lower(nu: int, scaled: bool):
    def lower(x):
        positive = jnp.where(x > 0, x, jnp.asarray(1.0, x.dtype))
        out = _k_scaled(nu, positive)
        if not scaled:
            out = out * jnp.exp(-positive)
        out = jnp.where(jnp.isposinf(x), jnp.zeros_like(x), out)
        out = jnp.where(x == 0, jnp.asarray(jnp.inf, x.dtype), out)
        return jnp.where((x < 0) | jnp.isnan(x), jnp.asarray(jnp.nan, x.dtype), out)
    return lower


def _y_lower(nu: int):
    """`Y_nu(x)`: the power series (Abramowitz and Stegun 9.1.11) up to 8, Hankel's expansion beyond."""
    j = _bessel_j(nu)
    coefficients = _hankel_coefficients(nu)

    def lower(x):
        small = jnp.where((x > 0) & (x <= 8), x, jnp.asarray(1.0, x.dtype))
        q, log_half = -small * small / 4, jnp.log(small / 2)
        total = _power_series(q, _series_coefficients(nu, 28, _digamma_sum(nu)))
        if nu == 0:
            series = (2 / math.pi) * (log_half * j(small) - total / 2)
        else:
            series = -2 / (math.pi * small) + (2 / math.pi) * log_half * j(small) - (small / (2 * math.pi)) * total
        big = jnp.where(x > 8, x, jnp.asarray(8.0, x.dtype))
        p = sum((-1) ** (k // 2) * c / big ** k for k, c in enumerate(coefficients) if k % 2 == 0)
        q_ = sum((-1) ** (k // 2) * c / big ** k for k, c in enumerate(coefficients) if k % 2 == 1)
        chi = big - (nu / 2 + 0.25) * math.pi
        asymptotic = jnp.sqrt(2 / (math.pi * big)) * (p * jnp.sin(chi) + q_ * jnp.cos(chi))
        out = jnp.where(x > 8, asymptotic, series)
        out = jnp.where(x == 0, jnp.asarray(-jnp.inf, x.dtype), out)
        return jnp.where((x < 0) | jnp.isnan(x) | jnp.isinf(x), jnp.asarray(jnp.nan, x.dtype), out)
    return lower


def _unary_special(name: str, lower, doc: str):
    prim = elementwise(name, lower)

    def op(input):
        return prim.bind(unary_operand(FLOATING, input))
    __all__.append(name)
    return prim, named(op, name, doc)


modified_bessel_k0_p, modified_bessel_k0 = _unary_special("modified_bessel_k0", _k_lower(0, False), """The modified
    Bessel function of the second kind of order 0 (inf at 0, NaN for negative `input`).

    >>> aotjax.special.modified_bessel_k0(aotjax.tensor([1.0]))
    tensor([0.421024...])
    """)
modified_bessel_k1_p, modified_bessel_k1 = _unary_special("modified_bessel_k1", _k_lower(1, False), """The modified
    Bessel function of the second kind of order 1 (inf at 0, NaN for negative `input`).

    >>> aotjax.special.modified_bessel_k1(aotjax.tensor([1.0]))
    tensor([0.60190725])
    """)
scaled_modified_bessel_k0_p, scaled_modified_bessel_k0 = _unary_special(
    "scaled_modified_bessel_k0", _k_lower(0, True), """`exp(input) * modified_bessel_k0(input)`, accurate where
    `modified_bessel_k0` underflows.

    >>> aotjax.special.scaled_modified_bessel_k0(aotjax.tensor([1.0]))
    tensor([1.14446...])
    """)
scaled_modified_bessel_k1_p, scaled_modified_bessel_k1 = _unary_special(
    "scaled_modified_bessel_k1", _k_lower(1, True), """`exp(input) * modified_bessel_k1(input)`.

    >>> aotjax.special.scaled_modified_bessel_k1(aotjax.tensor([1.0]))
    tensor([1.6361535])
    """)
bessel_y0_p, bessel_y0 = _unary_special("bessel_y0", _y_lower(0), """The Bessel function of the second kind of order
    0 (-inf at 0, NaN for negative `input`).

    >>> aotjax.special.bessel_y0(aotjax.tensor([1.0]))
    tensor([0.08825...])
    """)
bessel_y1_p, bessel_y1 = _unary_special("bessel_y1", _y_lower(1), """The Bessel function of the second kind of order
    1 (-inf at 0, NaN for negative `input`).

    >>> aotjax.special.bessel_y1(aotjax.tensor([1.0]))
    tensor([-0.781212...])
    """)


def _over_x(y, x):
    return div(y, x)


defjvp(modified_bessel_k0_p, lambda t, x: neg(mul(t, modified_bessel_k1(x))))
defjvp(modified_bessel_k1_p, lambda t, x: neg(mul(t, add(modified_bessel_k0(x), _over_x(modified_bessel_k1(x), x)))))
defjvp(scaled_modified_bessel_k0_p,
       lambda t, x: mul(t, sub(scaled_modified_bessel_k0(x), scaled_modified_bessel_k1(x))))
defjvp(scaled_modified_bessel_k1_p, lambda t, x: mul(t, sub(
    sub(scaled_modified_bessel_k1(x), scaled_modified_bessel_k0(x)), _over_x(scaled_modified_bessel_k1(x), x))))
defjvp(bessel_y0_p, lambda t, x: neg(mul(t, bessel_y1(x))))
defjvp(bessel_y1_p, lambda t, x: mul(t, sub(bessel_y0(x), _over_x(bessel_y1(x), x))))


def modified_bessel_i0(input):
    """The modified Bessel function of the first kind of order 0 (`aotjax.i0`).

    >>> aotjax.special.modified_bessel_i0(aotjax.tensor([1.0]))
    tensor([1.266066])
    """
    return i0(input)


def modified_bessel_i1(input):
    """The modified Bessel function of the first kind of order 1 (`aotjax.special.i1`).

    >>> aotjax.special.modified_bessel_i1(aotjax.tensor([0.0]))
    tensor([0.])
    """
    return i1(input)


def spherical_bessel_j0(input):
    """The spherical Bessel function of the first kind of order 0, `sin(x) / x` (1 at 0).

    >>> aotjax.special.spherical_bessel_j0(aotjax.tensor([0.0]))
    tensor([1.])
    """
    x = unary_operand(FLOATING, input)
    infinite = isinf(x)
    return where(infinite, 0.0, _sin_over(where(infinite, 1.0, x)))  # NOTE: 0 at +-inf, as PyTorch


__all__ += ["modified_bessel_i0", "modified_bessel_i1", "spherical_bessel_j0"]


# -- sgn, resolve_neg (torch.X and Tensor methods) --------------------------------------------------------------------
def sgn(input):
    """The sign of a real tensor (`sign`), `z / |z|` of a complex one (0 at 0).

    >>> aotjax.sgn(aotjax.tensor([3 + 4j, 0j]))
    tensor([0.6+0.8j, 0. +0.j ])
    >>> aotjax.tensor([-2.0, 0.0, 5.0]).sgn()
    tensor([-1.,  0.,  1.])
    """
    x = as_tensor(input)
    if category(x.dtype) != _COMPLEX:
        return sign(x)
    magnitude = abs(x)
    zero = eq(magnitude, 0)
    return where(zero, 0, div(x, where(zero, 1.0, magnitude)))


sgn_ = _inplace_of(sgn, "sgn_")


def resolve_neg(input):
    """`input` itself: aotjax has no lazy negation bit to resolve (PyTorch's `resolve_neg` materializes one).

    >>> x = aotjax.tensor([1.0])
    >>> aotjax.resolve_neg(x) is x
    True
    """
    return as_tensor(input)


for _op in (sgn, sgn_, resolve_neg):
    method(_op)
TOP_LEVEL = ["sgn", "resolve_neg"]  # NOTE: torch.X functions too (the rest are torch.special's only)


# -- airy_ai ----------------------------------------------------------------------------------------------------------
_AI0, _AI1 = 3 ** (-2 / 3) / math.gamma(2 / 3), 3 ** (-1 / 3) / math.gamma(1 / 3)  # Ai(0) and -Ai'(0)
_AIRY_U = [math.exp(math.lgamma(3 * k + 0.5) - math.lgamma(k + 0.5) - k * math.log(54) - math.lgamma(k + 1))
           for k in range(16)]  # the coefficients of Ai's asymptotic expansions in 1 / zeta


def _airy_lower(x):
    """Ai: the Maclaurin series on [-6, 1]; above 1, `Ai(x) = sqrt(x / 3) K_{1/3}(zeta) / pi` (`zeta = 2/3 x^1.5`)
    with the integral of `K_{1/3}` by the trapezoidal rule, up to zeta = 200, then its asymptotic expansion; below
    -6 the oscillating asymptotic expansion."""
    near = jnp.clip(x, -6, 1)
    cube, f, g = near ** 3, jnp.ones_like(x), near
    a, b = jnp.ones_like(x), near
    for k in range(1, 25):  # NOTE: |x| <= 6: the 25th terms are below 1e-17 of the sum
        a = a * cube / ((3 * k - 1) * (3 * k))
        b = b * cube / ((3 * k) * (3 * k + 1))
        f, g = f + a, g + b
    series = _AI0 * f - _AI1 * g
    right = jnp.maximum(x, 1)
    zeta = (2 / 3) * right ** 1.5
    mid = jnp.minimum(zeta, 200)
    integral = _trapezoid(mid, 1 / 3, 5.0)  # NOTE: exp(-zeta (cosh t - 1)) < e^-50 beyond t = 5 for zeta >= 2/3
    decaying_mid = jnp.sqrt(right / 3) / math.pi * jnp.exp(-zeta) * integral
    big = jnp.maximum(zeta, 200)
    decaying_far = jnp.exp(-zeta) / (2 * math.sqrt(math.pi) * right ** 0.25) * sum(
        (-1) ** k * u / big ** k for k, u in enumerate(_AIRY_U[:8]))
    left = jnp.maximum(-x, 6)
    zeta_left = (2 / 3) * left ** 1.5
    even = sum((-1) ** k * _AIRY_U[2 * k] / zeta_left ** (2 * k) for k in range(8))
    odd = sum((-1) ** k * _AIRY_U[2 * k + 1] / zeta_left ** (2 * k + 1) for k in range(7))
    phase = zeta_left + math.pi / 4
    oscillating = (jnp.sin(phase) * even - jnp.cos(phase) * odd) / (math.sqrt(math.pi) * left ** 0.25)
    out = jnp.where(x < -6, oscillating, jnp.where(x <= 1, series, jnp.where(zeta <= 200, decaying_mid,
                                                                                decaying_far)))
    return jnp.where(jnp.isinf(x), jnp.asarray(jnp.nan, x.dtype), out)  # NOTE: NaN at +-inf, as PyTorch


airy_ai_p, airy_ai = _unary_special("airy_ai", _airy_lower, """The Airy function `Ai` (NaN at +-inf, as PyTorch).

    >>> aotjax.special.airy_ai(aotjax.tensor([0.0]))
    tensor([0.35502806])
    """)
defjvp_zero(airy_ai_p)  # NOTE: as PyTorch: no derivative


TOP_LEVEL += ["igamma", "igamma_", "igammac", "igammac_", "nextafter", "nextafter_", "frexp"]
SPECIAL = {"gammainc": "igamma", "gammaincc": "igammac"}


def _make(name: str, lower, doc: str):
    prim = elementwise(name, lower, out_dtype=FLOATING.rule(name))
    prim_ = inplace_variant(prim)

    def op(input, other):
        x, y = binary_operands(FLOATING, input, other)
        if not FLOATING.accepts(x.dtype):
            raise DTypeError(f"{name}: expected floating-point operands, got {as_tensor(input).aval.str_short()} "
                             f"and {as_tensor(other).aval.str_short()}{source_info.where()}")
        return prim.bind(x, y)

    def op_(input, other):
        return binary_inplace(prim_, FLOATING, input, other)

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
    floating-point value after `input` towards `other`, elementwise, as `torch.nextafter`; its derivative is
    torch's: 1 in `input` where it differs from `other` (the step is below any tangent's resolution), else 0; 0 in
    `other`.

    >>> (aotjax.nextafter(aotjax.tensor([1.0]), aotjax.tensor([2.0])) > 1.0).item()
    True
    """)
# NOTE: torch 2.13's NextafterBackward0: 1 in input where it differs from other (0 where they are equal), 0 in other
defjvp(nextafter_p, lambda t, x, y: t * (x != y).to(t.dtype), None)


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

