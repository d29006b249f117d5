"""Elementwise math functions with PyTorch's names and semantics, built on the arithmetic core
(aotjax/ops/math/elementwise.py): inverse trigonometric and hyperbolic functions, `log2 log10 exp2`, rounding (`trunc
frac fix fmod`), `hypot logaddexp xlogy copysign fmax fmin ...`, the special functions (`erfc erfinv lgamma digamma
polygamma i0 ... zeta`) and the predicates (`isinf signbit ...`), `logical_xor ldexp true_divide positive`;
`aotjax.special` re-exports the `torch.special` names.

New primitives only where a composition would be wrong (inaccurate, or NaN/inf where PyTorch gives a number):
each is an `elementwise` primitive lowered to `jax.numpy`/`jax.scipy.special`/`jax.lax`, with its derivative
written out beside it (`defjvp`/`defjvp2`), batched by broadcasting like every elementwise primitive. The rest
(`fmax`, `xlogy`, `sinc`, `logit`, `nan_to_num`, `addcmul`, ...) are compositions of existing ops.

Dtypes as PyTorch: the float math promotes integer and bool operands to the default float dtype; `trunc`,
`fmod`, `fmax`, `fmin`, `copysign`'s magnitude and the clamps keep integers where PyTorch does; `gcd`, `lcm` and
the shifts take integers only; the predicates return bool.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import jax.scipy.special as jsp
import numpy as np
from jax import lax

from aotjax.core import source_info
from aotjax.core.errors import DTypeError, UnsupportedError
from aotjax.interpreters.jvp import defjvp, defjvp2, defjvp_zero
from aotjax.ops.base.casts import convert
from aotjax.ops.base.combinators import elementwise, inplace_variant
from aotjax.ops.base.data import as_tensor, promote
from aotjax.ops.base.frontend import bind_inplace
from aotjax.ops.base.promotion import (
    _FLOAT,
    _INT,
    category,
    check_inplace_cast,
    result_type,
)
from aotjax.ops.math.dtype_classes import ANY_DTYPE, FLOATING, PREDICATE, DtypeClass
from aotjax.ops.math.elementwise import (
    abs,
    add,
    binary_inplace,
    binary_operands,
    check_unary_inplace,
    clamp,
    clamp_,
    copy_into,
    div,
    div_,
    eq,
    exp,
    ge,
    inplace_docstring,
    isnan,
    keep_integers,
    le,
    log,
    log1p,
    logical_and,
    logical_or,
    lt,
    mul,
    named,
    ne,
    neg,
    pow,
    scalar_coefficient,
    sign,
    sin,
    sqrt,
    square,
    sub,
    unary_operand,
    where,
)
from aotjax.tensor import Tensor, method, reflected

__all__: list[str] = []

_FLOAT_ONLY = DtypeClass(lambda dt: dt, lambda dt: category(dt) >= _FLOAT, lambda dt: dt, "floating-point")
_INTEGER = DtypeClass(lambda dt: dt, lambda dt: category(dt) == _INT, lambda dt: dt, "integer (not bool)")


def _public(*fns):
    """Export `fns` and install each as the Tensor method of its name."""
    for fn in fns:
        method(fn)
        __all__.append(fn.__name__)
    return fns


def _unary(name: str, lower, cls: DtypeClass, doc: str, inplace: bool = True):
    """A unary elementwise primitive, its in-place variant where `inplace`, and their op functions (defined here,
    not by the elementwise family's maker, so that they are this family's exports and its doctests run)."""
    prim = elementwise(name, lower, out_dtype=cls.rule(name))
    fns = [named(lambda x: prim.bind(unary_operand(cls, x)), name, doc)]
    if inplace:
        prim_ = inplace_variant(prim)

        def op_(x):
            check_unary_inplace(prim_, cls, x)
            return bind_inplace(prim_, x)
        fns.append(named(op_, name + "_", inplace_docstring(name)))
    return (prim, prim_, *_public(*fns)) if inplace else (prim, *_public(*fns))


def _binary(name: str, lower, cls: DtypeClass, doc: str, inplace: bool = True):
    """A binary elementwise primitive (PyTorch's promotion of its operands), its in-place variant, their ops."""
    prim = elementwise(name, lower, out_dtype=cls.rule(name))

    def op(x, other):
        x, other = binary_operands(cls, x, other)
        if not cls.accepts(x.dtype):  # NOTE: eager dispatch skips the dtype rule: the frontend checks
            raise DTypeError(f"{name}: expected {cls.expected} operands, got {as_tensor(x).aval.str_short()} and "
                             f"{as_tensor(other).aval.str_short()}{source_info.where()}")
        return prim.bind(x, other)

    if not inplace:
        return (prim, *_public(named(op, name, doc)))
    prim_ = inplace_variant(prim)

    def op_(x, other):
        return binary_inplace(prim_, cls, x, other)

    return (prim, prim_, *_public(named(op, name, doc), named(op_, name + "_", inplace_docstring(name).replace(
        f"x.{name}_()", f"x.{name}_(aotjax.tensor([1.0, 1.0, 1.0]))"))))


def _inplace_of(fn, name: str, example_args: str = ""):
    """The in-place form of the composition `fn`: computes out of place, checks PyTorch's cast rule and
    copies the result into `x` (through any view, as `copy_` does)."""
    def op_(x, *args, **kwargs):
        out = fn(x, *args, **kwargs)
        check_inplace_cast(name, out.dtype, x.dtype)
        return copy_into(x, out)
    return named(op_, name, inplace_docstring(name[:-1]).replace(f"{name}()", f"{name}({example_args})"))


def _alias(fn, name: str):
    """`fn` under PyTorch's alias `name` (`arcsin` for `asin`)."""
    def alias(*args, **kwargs):
        return fn(*args, **kwargs)
    return named(alias, name, f"Alias of `{fn.__name__}`.\n\n    {fn.__doc__.split('>>>', 1)[0].strip()}\n"
                f"\n    >>> aotjax.{name} is not None\n    True\n    ")


def _safe(x, bad, value):
    """`x` with `value` where `bad`: the inner `where` of a derivative-safe pair, so that the branch `where`
    discards computes nothing infinite (whose zero cotangent would otherwise become NaN)."""
    return where(bad, value, x)


_LN2, _LN10 = math.log(2.0), math.log(10.0)
_SQRT_PI, _SQRT_2PI = math.sqrt(math.pi), math.sqrt(2 * math.pi)

# -- inverse trigonometric and hyperbolic -------------------------------------------------------------------------
asin_p, asin__p, asin, asin_ = _unary("asin", jnp.arcsin, FLOATING, """The inverse sine, in radians (NaN outside
    [-1, 1]; integers promote to float32).

    >>> aotjax.asin(aotjax.tensor([0.0, 1.0]))
    tensor([0.       , 1.5707964])
    """)
defjvp(asin_p, lambda t, x: mul(t, sqrt(sub(1, square(x))).reciprocal()))
acos_p, acos__p, acos, acos_ = _unary("acos", jnp.arccos, FLOATING, """The inverse cosine, in radians.

    >>> aotjax.acos(aotjax.tensor([1.0]))
    tensor([0.])
    """)
defjvp(acos_p, lambda t, x: neg(mul(t, sqrt(sub(1, square(x))).reciprocal())))
atan_p, atan__p, atan, atan_ = _unary("atan", jnp.arctan, FLOATING, """The inverse tangent, in radians.

    >>> aotjax.atan(aotjax.tensor([0.0]))
    tensor([0.])
    """)
defjvp(atan_p, lambda t, x: div(t, add(square(x), 1)))
asinh_p, asinh__p, asinh, asinh_ = _unary("asinh", jnp.arcsinh, FLOATING, """The inverse hyperbolic sine.

    >>> aotjax.asinh(aotjax.tensor([0.0]))
    tensor([0.])
    """)
defjvp(asinh_p, lambda t, x: div(t, sqrt(add(square(x), 1))))
acosh_p, acosh__p, acosh, acosh_ = _unary("acosh", jnp.arccosh, FLOATING, """The inverse hyperbolic cosine (NaN
    below 1).

    >>> aotjax.acosh(aotjax.tensor([1.0]))
    tensor([0.])
    """)
defjvp(acosh_p, lambda t, x: div(t, mul(sqrt(sub(x, 1)), sqrt(add(x, 1)))))
atanh_p, atanh__p, atanh, atanh_ = _unary("atanh", jnp.arctanh, FLOATING, """The inverse hyperbolic tangent
    (+-inf at +-1, NaN outside).

    >>> aotjax.atanh(aotjax.tensor([0.0]))
    tensor([0.])
    """)
defjvp(atanh_p, lambda t, x: div(t, sub(1, square(x))))
sinh_p, sinh__p, sinh, sinh_ = _unary("sinh", jnp.sinh, FLOATING, """The hyperbolic sine.

    >>> aotjax.sinh(aotjax.tensor([0.0]))
    tensor([0.])
    """)
cosh_p, cosh__p, cosh, cosh_ = _unary("cosh", jnp.cosh, FLOATING, """The hyperbolic cosine.

    >>> aotjax.cosh(aotjax.tensor([0.0]))
    tensor([1.])
    """)
defjvp(sinh_p, lambda t, x: mul(t, cosh(x)))
defjvp(cosh_p, lambda t, x: mul(t, sinh(x)))

_ALIASES = {"arcsin": asin, "arccos": acos, "arctan": atan, "arcsinh": asinh, "arccosh": acosh, "arctanh": atanh,
            "arcsin_": asin_, "arccos_": acos_, "arctan_": atan_, "arcsinh_": asinh_, "arccosh_": acosh_,
            "arctanh_": atanh_}

# -- exponentials and logarithms ------------------------------------------------------------------------------------
log2_p, log2__p, log2, log2_ = _unary("log2", jnp.log2, FLOATING, """The base-2 logarithm.

    >>> aotjax.log2(aotjax.tensor([8]))
    tensor([3.])
    """)
defjvp(log2_p, lambda t, x: div(t, mul(x, _LN2)))
log10_p, log10__p, log10, log10_ = _unary("log10", jnp.log10, FLOATING, """The base-10 logarithm.

    >>> aotjax.log10(aotjax.tensor([100.0]))
    tensor([2.])
    """)
defjvp(log10_p, lambda t, x: div(t, mul(x, _LN10)))
exp2_p, exp2__p, exp2, exp2_ = _unary("exp2", jnp.exp2, FLOATING, """`2 ** x` (integers promote to float32).

    >>> aotjax.exp2(aotjax.tensor([3]))
    tensor([8.])
    """)
defjvp2(exp2_p, lambda t, ans, x: mul(t, mul(ans, _LN2)))
logaddexp_p, logaddexp = _binary("logaddexp", jnp.logaddexp, _FLOAT_ONLY, """`log(exp(x) + exp(other))`, without
    overflow.

    >>> aotjax.logaddexp(aotjax.tensor([0.0]), aotjax.tensor([0.0]))
    tensor([0.6931472])
    """, inplace=False)
defjvp2(logaddexp_p, lambda t, ans, x, y: mul(t, exp(sub(x, ans))), lambda t, ans, x, y: mul(t, exp(sub(y, ans))))
logaddexp2_p, logaddexp2 = _binary("logaddexp2", jnp.logaddexp2, _FLOAT_ONLY, """`log2(2 ** x + 2 ** other)`.

    >>> aotjax.logaddexp2(aotjax.tensor([1.0]), aotjax.tensor([1.0]))
    tensor([2.])
    """, inplace=False)
defjvp2(logaddexp2_p, lambda t, ans, x, y: mul(t, exp(mul(sub(x, ans), _LN2))),
        lambda t, ans, x, y: mul(t, exp(mul(sub(y, ans), _LN2))))

# -- rounding and remainders ----------------------------------------------------------------------------------------
trunc_p, trunc__p, trunc, trunc_ = _unary("trunc", keep_integers(jnp.trunc), ANY_DTYPE, """Rounds toward zero; the
    identity on integer tensors.

    >>> aotjax.trunc(aotjax.tensor([-1.5, 1.5]))
    tensor([-1.,  1.])
    """)
defjvp_zero(trunc_p)
fix, fix_ = named(lambda x: trunc(x), "fix", trunc.__doc__), named(lambda x: trunc_(x), "fix_", trunc_.__doc__)
_public(fix, fix_)


def _check_float(op: str, x) -> None:
    if category(x.dtype) < _FLOAT:
        raise DTypeError(f"{op}: expected a floating-point tensor, got {x.aval.str_short()}{source_info.where()}; "
                         f"convert it first (`x.float()`)")


def frac(x):
    """The fractional part, `x - trunc(x)`, with `x`'s sign (floating-point tensors only, as PyTorch).

    >>> aotjax.frac(aotjax.tensor([-1.25, 2.5]))
    tensor([-0.25,  0.5 ])
    """
    x = as_tensor(x)
    _check_float("frac", x)
    return sub(x, trunc(x))


frac_ = _inplace_of(frac, "frac_")
_public(frac, frac_)

fmod_p, fmod__p, fmod, fmod_ = _binary("fmod", jnp.fmod, ANY_DTYPE, """The C remainder `x - trunc(x / other) * other`:
    its sign is `x`'s (`remainder` takes the divisor's sign); integer dtypes are kept.

    >>> aotjax.fmod(aotjax.tensor([-3.0, 3.0]), 2)
    tensor([-1.,  1.])
    """)
defjvp(fmod_p, lambda t, x, y: t, lambda t, x, y: neg(mul(t, trunc(div(x, y)))))

# -- two-operand float math -----------------------------------------------------------------------------------------
hypot_p, hypot__p, hypot, hypot_ = _binary("hypot", jnp.hypot, _FLOAT_ONLY, """`sqrt(x ** 2 + other ** 2)` without
    overflow (float operands; PyTorch refuses integers, so it is not promoted).

    >>> aotjax.hypot(aotjax.tensor([3.0]), aotjax.tensor([4.0]))
    tensor([5.])
    """)
defjvp2(hypot_p, lambda t, ans, x, y: mul(t, div(x, ans)), lambda t, ans, x, y: mul(t, div(y, ans)))
copysign_p, copysign__p, copysign, copysign_ = _binary("copysign", jnp.copysign, FLOATING, """`|x|` with the
    sign of `other` (the sign bit: -0.0 counts as negative); integers promote to float32.

    >>> aotjax.copysign(aotjax.tensor([1.0, 2.0]), aotjax.tensor([-0.0, 3.0]))
    tensor([-1.,  2.])
    """)
defjvp2(copysign_p, lambda t, ans, x, y: mul(t, where(eq(x, 0), 0.0, div(ans, _safe(x, eq(x, 0), 1.0)))), None)


def fmax(x, other):
    """The elementwise maximum ignoring NaN (NaN only where both are NaN); ties give `x`'s gradient, as PyTorch.

    >>> aotjax.fmax(aotjax.tensor([1.0, float('nan')]), aotjax.tensor([float('nan'), 2.0]))
    tensor([1., 2.])
    """
    x, other = promote(x, other)
    return where(logical_or(ge(x, other), isnan(other)), x, other)


def fmin(x, other):
    """The elementwise minimum ignoring NaN (NaN only where both are NaN).

    >>> aotjax.fmin(aotjax.tensor([1.0, float('nan')]), aotjax.tensor([float('nan'), 2.0]))
    tensor([1., 2.])
    """
    x, other = promote(x, other)
    return where(logical_or(le(x, other), isnan(other)), x, other)


_public(fmax, fmin)


def _x_times(log_fn):
    """`x * log_fn(y)`, 0 where `x == 0` unless `y` is NaN (whatever `log_fn(y)` is there)."""
    def lower(x, y):
        zero = (x == 0) & ~jnp.isnan(y)
        return jnp.where(zero, 0, x * log_fn(jnp.where(zero, 1, y)))
    return lower


xlogy_p, xlogy__p, xlogy, xlogy_ = _binary("xlogy", _x_times(jnp.log), FLOATING, """`x * log(other)`, 0 where
    `x == 0` (unless `other` is NaN); integers promote to float32. Its derivatives are torch's: `log(other)` (0 where
    `x == 0` and `other <= 0`) and `x / other` (NaN at `x == other == 0`).

    >>> aotjax.xlogy(aotjax.tensor([0.0, 2.0]), aotjax.tensor([0.0, 1.0]))
    tensor([0., 0.])
    """)
# NOTE: primitives for torch's derivatives: in x, `log(other)`, 0 where x == 0 and other <= 0; in other, `x / other`
# everywhere (NaN at x == other == 0, as torch's 0 / 0; a composition selecting 0 there has a zero derivative)
defjvp(xlogy_p, lambda t, x, y: mul(t, where(logical_and(eq(x, 0), le(y, 0)), 0.0, log(y))),
       lambda t, x, y: mul(t, div(x, y)))
xlog1py_p = elementwise("xlog1py", _x_times(jnp.log1p), out_dtype=FLOATING.rule("xlog1py"))
defjvp(xlog1py_p, lambda t, x, y: mul(t, where(logical_and(eq(x, 0), le(y, -1)), 0.0, log1p(y))),
       lambda t, x, y: mul(t, div(x, add(y, 1))))


def xlog1py(x, other):
    """`x * log1p(other)`, 0 where `x == 0` (unless `other` is NaN); derivatives as `xlogy`'s (`x / (1 + other)`
    in `other`).

    >>> aotjax.special.xlog1py(aotjax.tensor([0.0, 2.0]), aotjax.tensor([-1.0, 0.0]))
    tensor([0., 0.])
    """
    return xlog1py_p.bind(*binary_operands(FLOATING, x, other))


def float_power(x, exponent):
    """`x ** exponent` computed in the widest float dtype (float64 with jax's x64 mode, else float32).

    >>> aotjax.float_power(aotjax.tensor([2]), 3).tolist()
    [8.0]
    """
    dtype = jax.dtypes.canonicalize_dtype(np.float64)
    x, exponent = (convert(v, dtype) if isinstance(v, Tensor) else float(v) for v in (x, exponent))
    return x ** exponent


def float_power_(x, exponent):
    """In-place `float_power`: `x` must have the widest float dtype.

    >>> x = aotjax.float_power(aotjax.tensor([2.0]), 1)  # the widest float dtype
    >>> x.float_power_(2).tolist()
    [4.0]
    """
    dtype = jax.dtypes.canonicalize_dtype(np.float64)
    if x.dtype != dtype:
        raise DTypeError(f"float_power_: the tensor written in place has dtype {x.dtype}, but the result has "
                         f"{dtype}{source_info.where()}; use the out-of-place float_power")
    return copy_into(x, float_power(x, exponent))


_public(float_power, float_power_)


def _sin_over(y):
    """`sin(y) / y`, 1 at 0. Its Taylor series where |y| < 1 (10 terms: exact in float64): the quotient's derivative
    near 0 is a difference of two terms near 1 / y, which loses all precision as y -> 0."""
    small = lt(abs(y), 1.0)
    y2 = square(where(small, y, 0.0))
    series = 0.0
    for k in reversed(range(10)):
        series = add(mul(series, y2), (-1) ** k / math.factorial(2 * k + 1))
    safe = _safe(y, small, 1.0)
    return where(small, series, div(sin(safe), safe))


def sinc(x):
    """The normalized sinc, `sin(pi x) / (pi x)`, 1 at 0 (its derivative exact near 0, not just at 0).

    >>> aotjax.sinc(aotjax.tensor([0.0, 0.5]))
    tensor([1.        , 0.63661975])
    """
    return _sin_over(mul(unary_operand(FLOATING, x), math.pi))


sinc_ = _inplace_of(sinc, "sinc_")
_public(sinc, sinc_)


def deg2rad(x):
    """Degrees to radians.

    >>> aotjax.deg2rad(aotjax.tensor([180.0]))
    tensor([3.1415927])
    """
    return mul(unary_operand(FLOATING, x), math.pi / 180)


def rad2deg(x):
    """Radians to degrees.

    >>> aotjax.rad2deg(aotjax.tensor([math.pi]))
    tensor([180.])
    """
    return mul(unary_operand(FLOATING, x), 180 / math.pi)


deg2rad_, rad2deg_ = _inplace_of(deg2rad, "deg2rad_"), _inplace_of(rad2deg, "rad2deg_")
_public(deg2rad, rad2deg, deg2rad_, rad2deg_)


def _logit_lower(x, *, eps):
    z = x if eps is None else jnp.clip(x, eps, 1 - eps)
    return jnp.log(z / (1 - z))


def _logit_jvp(t, x, *, eps):
    if eps is None:
        return div(t, where(logical_or(lt(x, 0), lt(1, x)), math.nan, mul(x, sub(1, x))))
    return div(t, where(logical_or(lt(x, eps), lt(1 - eps, x)), math.inf, mul(x, sub(1, x))))


# NOTE: a primitive for torch's derivative `1 / (x (1 - x))`: +inf at 0 and 1 (a composition's is NaN there, from
# the zero cotangent of the branch not taken), NaN outside [0, 1]; with `eps`, 0 outside [eps, 1 - eps] and whole
# on its bounds (a clamp's derivative there is split)
logit_p = elementwise("logit", _logit_lower, out_dtype=FLOATING.rule("logit"))
defjvp(logit_p, _logit_jvp)


def logit(x, eps=None):
    """`log(x / (1 - x))`, with `x` first clamped to `[eps, 1 - eps]` when `eps` is given; the derivative is torch's
    (+inf at 0 and 1, NaN outside [0, 1], 0 where `eps` clamps).

    >>> aotjax.logit(aotjax.tensor([0.5, 0.0]), eps=0.25)
    tensor([ 0.       , -1.0986123])
    """
    return logit_p.bind(unary_operand(FLOATING, x), eps=None if eps is None else float(eps))


logit_ = _inplace_of(logit, "logit_")
_public(logit, logit_)


def nan_to_num(x, nan=0.0, posinf=None, neginf=None):
    """NaN, +inf and -inf replaced by `nan`, `posinf` and `neginf` (default: 0, the dtype's largest and lowest
    finite values); integer tensors are returned unchanged (a copy).

    >>> aotjax.nan_to_num(aotjax.tensor([float('nan'), float('inf'), 1.0]), posinf=9.0)
    tensor([0., 9., 1.])
    """
    x = as_tensor(x)
    if category(x.dtype) < _FLOAT:
        return x.clone()  # NOTE: a copy of the same dtype (bool stays bool)
    info = np.finfo(x.dtype)
    posinf = float(info.max) if posinf is None else posinf
    neginf = float(info.min) if neginf is None else neginf
    out = where(isnan(x), nan, x)
    return where(eq(x, math.inf), posinf, where(eq(x, -math.inf), neginf, out))


nan_to_num_ = _inplace_of(nan_to_num, "nan_to_num_")
_public(nan_to_num, nan_to_num_)


def clamp_min(x, min):
    """`clamp(x, min=min)`.

    >>> aotjax.clamp_min(aotjax.tensor([-1.0, 2.0]), 0.0)
    tensor([0., 2.])
    """
    return clamp(x, min=min)


def clamp_max(x, max):
    """`clamp(x, max=max)`.

    >>> aotjax.clamp_max(aotjax.tensor([-1.0, 2.0]), 0.0)
    tensor([-1.,  0.])
    """
    return clamp(x, max=max)


clamp_min_ = named(lambda x, min: clamp_(x, min=min), "clamp_min_", inplace_docstring("clamp_min").replace(
    "clamp_min_()", "clamp_min_(1.0)"))
clamp_max_ = named(lambda x, max: clamp_(x, max=max), "clamp_max_", inplace_docstring("clamp_max").replace(
    "clamp_max_()", "clamp_max_(1.0)"))
_public(clamp_min, clamp_max, clamp_min_, clamp_max_)


def addcmul(input, tensor1, tensor2, *, value=1):
    """`input + value * tensor1 * tensor2`.

    >>> aotjax.addcmul(aotjax.tensor([1.0]), aotjax.tensor([2.0]), aotjax.tensor([3.0]), value=0.5)
    tensor([4.])
    """
    value = scalar_coefficient("addcmul", "value", value, result_type(input, tensor1, tensor2), truncates=True)
    return add(input, mul(mul(tensor1, tensor2), value))


def addcdiv(input, tensor1, tensor2, *, value=1):
    """`input + value * tensor1 / tensor2` (PyTorch refuses integer `tensor1` and `tensor2`: no integer division).

    >>> aotjax.addcdiv(aotjax.tensor([1.0]), aotjax.tensor([2.0]), aotjax.tensor([4.0]), value=2)
    tensor([2.])
    """
    if all(category(as_tensor(t).dtype) < _FLOAT for t in (tensor1, tensor2)):
        raise DTypeError(f"addcdiv: integer division of tensor1 by tensor2 is not supported{source_info.where()}; "
                         f"convert one of them to float (`tensor1.float()`)")
    value = scalar_coefficient("addcdiv", "value", value, result_type(input, tensor1, tensor2), truncates=True)
    return add(input, mul(div(tensor1, tensor2), value))


addcmul_ = _inplace_of(addcmul, "addcmul_", "aotjax.tensor([2.0, 2.0, 2.0]), x")
addcdiv_ = _inplace_of(addcdiv, "addcdiv_", "x, aotjax.tensor([2.0, 2.0, 2.0])")


def rsub(input, other, *, alpha=1):
    """`other - alpha * input` (`sub` with its operands swapped).

    >>> aotjax.rsub(aotjax.tensor([1.0, 2.0]), 5)
    tensor([4., 3.])
    """
    return sub(other, input, alpha=alpha)


_public(addcmul, addcdiv, addcmul_, addcdiv_)
__all__.append("rsub")

# -- predicates -----------------------------------------------------------------------------------------------------


def isposinf(x):
    """Whether each element is +inf (bool).

    >>> aotjax.isposinf(aotjax.tensor([1.0, float('inf'), -float('inf')]))
    tensor([False,  True, False])
    """
    return eq(as_tensor(x), math.inf)


def isneginf(x):
    """Whether each element is -inf (bool).

    >>> aotjax.isneginf(aotjax.tensor([1.0, float('inf'), -float('inf')]))
    tensor([False, False,  True])
    """
    return eq(as_tensor(x), -math.inf)


def isinf(x):
    """Whether each element is +inf or -inf (bool; False for integer tensors).

    >>> aotjax.isinf(aotjax.tensor([1.0, float('inf'), -float('inf')]))
    tensor([False,  True,  True])
    """
    return eq(abs(as_tensor(x)), math.inf)


def isreal(x):
    """Whether each element is real (bool): always True, as aotjax has no complex dtypes.

    >>> aotjax.isreal(aotjax.tensor([1.0, float('nan')]))
    tensor([ True,  True])
    """
    x = as_tensor(x)
    return logical_or(eq(x, x), ne(x, x))


signbit_p, signbit = _unary("signbit", lambda x: jnp.zeros(x.shape, bool) if x.dtype == np.bool_ else jnp.signbit(x),
                            PREDICATE, """Whether the sign bit is set (bool): True for negatives and -0.0.

    >>> aotjax.signbit(aotjax.tensor([-0.0, 0.0, -2.0]))
    tensor([ True, False,  True])
    """, inplace=False)
defjvp_zero(signbit_p)
_public(isposinf, isneginf, isinf, isreal)


def heaviside(x, values):
    """The Heaviside step: 0 where `x < 0`, `values` where `x == 0`, 1 where `x > 0` (one dtype for both, as
    PyTorch; no derivative).

    >>> aotjax.heaviside(aotjax.tensor([-1.0, 0.0, 2.0]), aotjax.tensor([0.5]))
    tensor([0. , 0.5, 1. ])
    """
    x, values = as_tensor(x), as_tensor(values)
    if x.dtype != values.dtype:
        raise DTypeError(f"heaviside: x and values must have one dtype, got {as_tensor(x).aval.str_short()} and "
                         f"{values.aval.str_short()}{source_info.where()}; convert one of them first")
    one, zero = np.ones((), x.dtype), np.zeros((), x.dtype)
    return where(eq(x, 0), values, where(lt(0, x), one, zero))  # NOTE: NaN gives 0, as PyTorch


heaviside_ = _inplace_of(heaviside, "heaviside_", "aotjax.tensor([0.5])")
_public(heaviside, heaviside_)

# -- integers -------------------------------------------------------------------------------------------------------
gcd_p, gcd__p, gcd, gcd_ = _binary("gcd", jnp.gcd, _INTEGER, """The greatest common divisor (integers; >= 0).

    >>> aotjax.gcd(aotjax.tensor([12, -9, 0]), aotjax.tensor([18, 6, 0]))
    tensor([6, 3, 0])
    """)
lcm_p, lcm__p, lcm, lcm_ = _binary("lcm", jnp.lcm, _INTEGER, """The least common multiple (integers; >= 0).

    >>> aotjax.lcm(aotjax.tensor([4, -6]), aotjax.tensor([6, 4]))
    tensor([12, 12])
    """)
defjvp_zero(gcd_p)
defjvp_zero(lcm_p)


def _left_shift_lower(x, y):
    bits = np.iinfo(x.dtype).bits
    return jnp.where((y < 0) | (y >= bits), jnp.zeros_like(x), jnp.left_shift(x, jnp.clip(y, 0, bits - 1)))


def _right_shift_lower(x, y):
    # NOTE: arithmetic: a shift of the bit width or more leaves the sign (0 or -1), as PyTorch
    bits = np.iinfo(x.dtype).bits
    return jnp.right_shift(x, jnp.where((y < 0) | (y >= bits), bits - 1, y))


_SHIFT_CLASS = DtypeClass(lambda dt: dt, lambda dt: category(dt) == _INT, lambda dt: dt, "integer (not bool)")
bitwise_left_shift_p, bitwise_left_shift__p, bitwise_left_shift, bitwise_left_shift_ = _binary(
    "bitwise_left_shift", _left_shift_lower, _SHIFT_CLASS, """`x << other` for integer tensors (shifts of
    the bit width or more give 0).

    >>> aotjax.bitwise_left_shift(aotjax.tensor([1, 3]), 2)
    tensor([ 4, 12])
    """)
bitwise_right_shift_p, bitwise_right_shift__p, bitwise_right_shift, bitwise_right_shift_ = _binary(
    "bitwise_right_shift", _right_shift_lower, _SHIFT_CLASS, """`x >> other` for integer tensors, arithmetic
    (the sign is kept).

    >>> aotjax.bitwise_right_shift(aotjax.tensor([16, -16]), 2)
    tensor([ 4, -4])
    """)
defjvp_zero(bitwise_left_shift_p)
defjvp_zero(bitwise_right_shift_p)
for _f in (gcd_, lcm_, bitwise_left_shift_, bitwise_right_shift_):
    _f.__doc__ = _f.__doc__.replace("[0.5, 1.0, 2.0]", "[4, 6, 8]").replace("[1.0, 1.0, 1.0]", "[2, 2, 2]")

# -- special functions ----------------------------------------------------------------------------------------------
erfc_p, erfc__p, erfc, erfc_ = _unary("erfc", lax.erfc, FLOATING, """`1 - erf(x)`, accurate where `erf(x)` is
    near 1.

    >>> aotjax.erfc(aotjax.tensor([0.0]))
    tensor([1.])
    """)
defjvp(erfc_p, lambda t, x: mul(t, mul(exp(neg(square(x))), -2 / _SQRT_PI)))
erfinv_p, erfinv__p, erfinv, erfinv_ = _unary("erfinv", lax.erf_inv, FLOATING, """The inverse of `erf`
    (+-inf at +-1, NaN outside [-1, 1]).

    >>> aotjax.erfinv(aotjax.tensor([0.0]))
    tensor([0.])
    """)
defjvp2(erfinv_p, lambda t, ans, x: mul(t, mul(exp(square(ans)), _SQRT_PI / 2)))
lgamma_p, lgamma__p, lgamma, lgamma_ = _unary("lgamma", lax.lgamma, FLOATING, """`log(|gamma(x)|)`.

    >>> aotjax.lgamma(aotjax.tensor([0.5, 3.0]))
    tensor([0.5723648, 0.6931474])
    """)


def _digamma_lower(x):
    # NOTE: PyTorch's digamma is -inf at 0.0 and +inf at -0.0 (the limits from the right and from the left)
    return jnp.where(x == 0, jnp.copysign(jnp.asarray(jnp.inf, x.dtype), -x), lax.digamma(x))


digamma_p, digamma__p, digamma, digamma_ = _unary("digamma", _digamma_lower, FLOATING, """The logarithmic
    derivative of gamma, `psi(x)` (-inf at 0.0, +inf at -0.0, NaN at the negative integers).

    >>> aotjax.digamma(aotjax.tensor([1.0]))
    tensor([-0.5772154])
    """)
defjvp(lgamma_p, lambda t, x: mul(t, digamma(x)))


def _polygamma_lower(x, *, n):
    if n == 0:
        return _digamma_lower(x)
    # NOTE: as PyTorch: at the poles (0 and the negative integers; PyTorch's trigamma gives a large finite number
    # at the negative ones) and at -inf, (-1)^(n+1) inf, but NaN at -inf for n = 1; at +inf 0 for n = 1, NaN beyond
    pole = (x <= 0) & (jnp.floor(x) == x)
    series = (-1) ** (n + 1) * math.factorial(n) * _zeta_lower(jnp.asarray(n + 1, x.dtype), x)  # NOTE: jax's own
    out = jnp.where(pole, jnp.asarray((-1) ** (n + 1) * jnp.inf, x.dtype), series)  # is wrong at x < -8 (its zeta)
    if n == 1:
        out = jnp.where(x == -jnp.inf, jnp.asarray(jnp.nan, x.dtype), out)
    return jnp.where(x == jnp.inf, jnp.asarray(0.0 if n == 1 else jnp.nan, x.dtype), out)


polygamma_p = elementwise("polygamma", _polygamma_lower, out_dtype=FLOATING.rule("polygamma"))
polygamma__p = inplace_variant(polygamma_p)
defjvp(polygamma_p, lambda t, x, *, n: mul(t, polygamma_p.bind(x, n=n + 1)))
defjvp(digamma_p, lambda t, x: mul(t, polygamma_p.bind(x, n=1)))


def _order(n) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"polygamma: the order n must be a non-negative int, got {n!r}{source_info.where()}")
    return int(n)


def polygamma(n, input):
    """The `n`-th derivative of `digamma` (`n` a non-negative int; `x.polygamma(n)` as a method).

    >>> aotjax.polygamma(1, aotjax.tensor([1.0]))
    tensor([1.644934])
    """
    return polygamma_p.bind(unary_operand(FLOATING, input), n=_order(n))


def _polygamma_method(input, n):
    return polygamma(n, input)


def polygamma_(input, n):
    """In-place `polygamma` (`x.polygamma_(n)`).

    >>> x = aotjax.tensor([1.0])
    >>> x.polygamma_(0) is x
    True
    """
    check_unary_inplace(polygamma__p, FLOATING, input)
    return bind_inplace(polygamma__p, input, n=_order(n))


__all__.extend(["polygamma", "polygamma_"])
method(_polygamma_method, "polygamma")
method(polygamma_)


def mvlgamma(input, p):
    """The multivariate log-gamma of dimension `p`: `sum_i lgamma(x - i / 2) + p (p - 1) / 4 log(pi)`.

    >>> aotjax.mvlgamma(aotjax.tensor([2.5]), 2)
    tensor([0.8570479])
    """
    x = unary_operand(FLOATING, input)
    if isinstance(p, bool) or not isinstance(p, (int, np.integer)) or p < 1:
        raise ValueError(f"mvlgamma: p must be a positive int, got {p!r}{source_info.where()}")
    out = lgamma(x)
    for i in range(1, p):
        out = add(out, lgamma(sub(x, i / 2)))
    return add(out, p * (p - 1) / 4 * math.log(math.pi))


mvlgamma_ = _inplace_of(mvlgamma, "mvlgamma_", "1")
_public(mvlgamma, mvlgamma_)

i0e_p, i0e = _unary("i0e", lax.bessel_i0e, FLOATING, """The exponentially scaled modified Bessel function of the
    first kind of order 0, `exp(-|x|) i0(x)`.

    >>> aotjax.special.i0e(aotjax.tensor([1.0]))
    tensor([0.46575963])
    """, inplace=False)
i1e_p, i1e = _unary("i1e", lax.bessel_i1e, FLOATING, """The exponentially scaled modified Bessel function of the
    first kind of order 1, `exp(-|x|) i1(x)`.

    >>> aotjax.special.i1e(aotjax.tensor([0.0]))
    tensor([0.])
    """, inplace=False)


def _i1e_over_x(x, ans):
    """`i1e(x) / x`, 1/2 at 0."""
    zero = eq(x, 0)
    return where(zero, 0.5, div(ans, _safe(x, zero, 1.0)))


defjvp2(i0e_p, lambda t, ans, x: mul(t, sub(i1e(x), mul(sign(x), ans))))
defjvp2(i1e_p, lambda t, ans, x: mul(t, sub(sub(i0e(x), mul(sign(x), ans)), _i1e_over_x(x, ans))))


i0_p, i0__p, i0, i0_ = _unary("i0", jsp.i0, FLOATING, """The modified Bessel function of the first kind of order 0.

    >>> aotjax.i0(aotjax.tensor([1.0]))
    tensor([1.266066])
    """)
# NOTE: a primitive, not `exp(|x|) i0e(x)`, for its derivative `i1(x)`: the composition's is not 0 at 0 (|x|'s
# derivative there is not 0) and loses precision near 0 (a difference of two terms near 1 for a result near x / 2)
defjvp(i0_p, lambda t, x: mul(t, i1(x)))


def i1(x):
    """The modified Bessel function of the first kind of order 1.

    >>> aotjax.special.i1(aotjax.tensor([0.0]))
    tensor([0.])
    """
    x = unary_operand(FLOATING, x)
    return mul(exp(abs(x)), i1e(x))


erfcx_p, erfcx = _unary("erfcx", jsp.erfcx, FLOATING, """The scaled complementary error function,
    `exp(x ** 2) erfc(x)`, accurate for large `x`.

    >>> aotjax.special.erfcx(aotjax.tensor([0.0]))
    tensor([1.])
    """, inplace=False)
defjvp2(erfcx_p, lambda t, ans, x: mul(t, sub(mul(mul(x, ans), 2), 2 / _SQRT_PI)))
ndtri_p, ndtri = _unary("ndtri", jsp.ndtri, FLOATING, """The inverse of the standard normal CDF `ndtr`.

    >>> aotjax.special.ndtri(aotjax.tensor([0.5]))
    tensor([0.])
    """, inplace=False)
defjvp2(ndtri_p, lambda t, ans, x: mul(t, mul(exp(mul(square(ans), 0.5)), _SQRT_2PI)))
log_ndtr_p, log_ndtr = _unary("log_ndtr", jsp.log_ndtr, FLOATING, """The log of the standard normal CDF,
    accurate in the far left tail.

    >>> aotjax.special.log_ndtr(aotjax.tensor([0.0]))
    tensor([-0.6931472])
    """, inplace=False)
defjvp2(log_ndtr_p, lambda t, ans, x: mul(t, exp(sub(mul(square(x), -0.5), add(ans, math.log(_SQRT_2PI))))))


def _hankel_coefficients(nu: int, terms: int = 10) -> list[float]:
    """`a_k(nu) = prod_{j <= k} (4 nu^2 - (2j - 1)^2) / (k! 8^k)`: the coefficients of Hankel's asymptotic
    expansion of `J_nu(x)` for large `x`."""
    out, c = [1.0], 1.0
    for k in range(1, terms):
        c *= (4 * nu * nu - (2 * k - 1) ** 2) / (k * 8)
        out.append(c)
    return out


def _bessel_j(nu: int):
    """`J_nu(x)` for nu 0 or 1: the power series for `|x| <= 8`, Hankel's asymptotic expansion beyond
    (jax's `bessel_jn` is NaN for small arguments in float32)."""
    coefficients = _hankel_coefficients(nu)

    def lower(x):
        ax = jnp.abs(x)
        half, series, term = ax / 2, jnp.zeros_like(x), (ax / 2) ** nu / math.factorial(nu)
        for k in range(30):
            series = series + term
            term = -term * half * half / ((k + 1) * (k + 1 + nu))
        big = jnp.where(ax > 8, ax, jnp.asarray(8.0, x.dtype))
        p = sum((-1) ** (k // 2) * c / big ** k for k, c in enumerate(coefficients) if k % 2 == 0)
        q = sum((-1) ** (k // 2) * c / big ** k for k, c in enumerate(coefficients) if k % 2 == 1)
        chi = big - (nu / 2 + 0.25) * math.pi
        asymptotic = jnp.sqrt(2 / (math.pi * big)) * (p * jnp.cos(chi) - q * jnp.sin(chi))
        out = jnp.where(ax > 8, asymptotic, series)
        if nu == 1:
            out = jnp.where(jnp.signbit(x), -out, out)  # NOTE: J1 is odd
        return jnp.where(jnp.isinf(x), jnp.asarray(jnp.nan, x.dtype), out)  # NOTE: NaN at +-inf, as PyTorch
    return lower


bessel_j0_p, bessel_j0 = _unary("bessel_j0", _bessel_j(0), FLOATING, """The Bessel function of the first kind of
    order 0.

    >>> aotjax.special.bessel_j0(aotjax.tensor([0.0]))
    tensor([1.])
    """, inplace=False)
bessel_j1_p, bessel_j1 = _unary("bessel_j1", _bessel_j(1), FLOATING, """The Bessel function of the first kind of
    order 1.

    >>> aotjax.special.bessel_j1(aotjax.tensor([0.0]))
    tensor([0.])
    """, inplace=False)
defjvp(bessel_j0_p, lambda t, x: neg(mul(t, bessel_j1(x))))


def _bessel_j1_jvp(t, x):
    zero = eq(x, 0)
    return mul(t, sub(bessel_j0(x), where(zero, 0.5, div(bessel_j1(x), _safe(x, zero, 1.0)))))


defjvp(bessel_j1_p, _bessel_j1_jvp)


_ZETA_MAX_SHIFT = 2 ** 24  # every float32 below -2**23 is an integer (a pole); float64 could loop for ever


def _zeta_lower(x, q):
    # NOTE: as PyTorch (Cephes): inf at x = 1 and at the poles q = 0, -1, -2, ... (and -inf), NaN at x < 1 and at
    # another q < 0 unless x is an integer; then q is first moved past 0 by zeta(x, q) = q ** -x + zeta(x, q + 1),
    # since jax's series is accurate for q > 0 only (up to _ZETA_MAX_SHIFT steps; NaN beyond)
    x, q = jnp.broadcast_arrays(x, q)
    pole = (q <= 0) & (jnp.floor(q) == q)
    shifted = (q < 0) & ~pole & (jnp.floor(x) == x)

    def body(carry):
        a, head, steps = carry
        move = a < 0
        return jnp.where(move, a + 1, a), head + jnp.where(move, jnp.power(a, -x), 0), steps + 1

    def more(carry):
        return jnp.any(carry[0] < 0) & (carry[2] < _ZETA_MAX_SHIFT)

    a, head, _ = lax.while_loop(more, body, (jnp.where(shifted, q, 1), jnp.zeros_like(q), 0))
    out = jnp.where(shifted, jnp.where(a < 0, jnp.nan, head + jsp.zeta(x, a)), jsp.zeta(x, jnp.where(pole, 1, q)))
    # NOTE: the expansion (Euler-Maclaurin's first terms) at q > 1e4, as Cephes' at q > 1e8: jax's series sums
    # terms (q + k) ** -x that underflow (to 0 in float32 for a result near 1e-33); NaN at q = inf, as PyTorch's
    far = (1 / (x - 1) + 1 / (2 * q) + x / (12 * q * q)) * jnp.power(q, 1 - x)
    out = jnp.where((q > 1e4) & (q < jnp.inf), far, out)
    out = jnp.where(pole, jnp.inf, jnp.where((q < 0) & ~shifted, jnp.nan, out))
    return jnp.where(x == 1, jnp.inf, jnp.where(x < 1, jnp.nan, out)).astype(q.dtype)


def _zeta_jvp_x(t, x, q):
    raise UnsupportedError(f"zeta: the derivative in x (the exponent) is not implemented, as in PyTorch"
                           f"{source_info.where()}; differentiate in q only (detach x)")


zeta_p, zeta = _binary("zeta", _zeta_lower, FLOATING, """The Hurwitz zeta function `sum_k (k + q) ** -x`.

    >>> aotjax.special.zeta(aotjax.tensor([2.0]), aotjax.tensor([1.0]))
    tensor([1.644934])
    """, inplace=False)
defjvp(zeta_p, _zeta_jvp_x, lambda t, x, q: mul(t, neg(mul(x, zeta_p.bind(add(x, 1), q)))))
for _name in ("i0e", "i1e", "erfcx", "ndtri", "log_ndtr", "bessel_j0", "bessel_j1", "zeta"):
    __all__.remove(_name)
    delattr(Tensor, _name)  # NOTE: torch.special's only: no Tensor method, no top-level name


def ndtr(x):
    """The standard normal CDF.

    >>> aotjax.special.ndtr(aotjax.tensor([0.0]))
    tensor([0.5])
    """
    x = unary_operand(FLOATING, x)
    return mul(erfc(mul(x, -1 / math.sqrt(2))), 0.5)


def _entr_lower(x):
    pos = x > 0
    out = -x * jnp.log(jnp.where(pos, x, 1))
    return jnp.where(pos, out, jnp.where(x == 0, 0, jnp.where(jnp.isnan(x), x, -jnp.inf)))


# NOTE: a primitive for torch's derivative `-(1 + log(x))` everywhere: +inf at 0, NaN for negative x (a composition
# selecting the special values has a zero derivative there)
entr_p = elementwise("entr", _entr_lower, out_dtype=FLOATING.rule("entr"))
defjvp(entr_p, lambda t, x: neg(mul(t, add(log(x), 1.0))))


def entr(x):
    """The entropy term `-x log(x)`: 0 at 0, -inf for negative `x`; its derivative is `-(1 + log(x))` (+inf at 0),
    as torch's.

    >>> aotjax.special.entr(aotjax.tensor([0.0, 0.5, -1.0]))
    tensor([0.       , 0.3465736,      -inf])
    """
    return entr_p.bind(unary_operand(FLOATING, x))


# -- aliases and operators ------------------------------------------------------------------------------------------
for _name, _fn in _ALIASES.items():
    _f = _alias(_fn, _name)
    globals()[_name] = _f
    _public(_f)
for _op, _name in ((bitwise_left_shift, "lshift"), (bitwise_right_shift, "rshift")):
    method(_op, f"__{_name}__")
    method(reflected(_op), f"__r{_name}__")
method(bitwise_left_shift_, "__ilshift__")
method(bitwise_right_shift_, "__irshift__")


def logical_xor(x, other):
    """Whether exactly one of `x`, `other` is nonzero (bool).

    >>> aotjax.logical_xor(aotjax.tensor([0.0, 1.0, 2.0]), aotjax.tensor([1, 1, 0]))
    tensor([ True, False,  True])
    """
    return ne(ne(as_tensor(x), 0), ne(as_tensor(other), 0))


def ldexp(x, other):
    """`x * 2 ** other` (a float result).

    >>> aotjax.ldexp(aotjax.tensor([1.0, 3.0]), aotjax.tensor([2, -1]))
    tensor([4. , 1.5])
    """
    return mul(x, pow(2.0, as_tensor(other)))


def positive(x):
    """`x` itself (`+x`); PyTorch refuses bool tensors.

    >>> x = aotjax.tensor([1.0, -2.0])
    >>> aotjax.positive(x) is x
    True
    """
    if as_tensor(x).dtype == bool:
        raise DTypeError(f"positive: not supported for bool tensors{source_info.where()}; use x itself, or x.int()")
    return x


logical_xor_ = _inplace_of(logical_xor, "logical_xor_", "aotjax.tensor([1.0, 1.0, 0.0])")


ldexp_ = _inplace_of(ldexp, "ldexp_", "aotjax.tensor([1, 0, 2])")


true_divide = _alias(div, "true_divide")


true_divide_ = _alias(div_, "true_divide_")


for _fn in (logical_xor, logical_xor_, true_divide, true_divide_, ldexp, ldexp_, positive):
    method(_fn)


__all__ += ["logical_xor", "logical_xor_", "true_divide", "true_divide_", "ldexp", "ldexp_", "positive"]
