"""Elementwise primitives and their op functions: unary math, binary arithmetic and comparisons,
selection (`where`, `clamp`, `lerp`), casts, and the in-place `_` variant of each.

Every op is one primitive made by the `elementwise` combinator; its dtype rule checks the operand
dtype (float-only math refuses integers, bitwise ops refuse floats). The op functions do PyTorch's
type promotion before binding, so the primitives always see operands of one dtype:

- float-only ops (`sin`, `exp`, `sqrt`, `sigmoid`, true `div`, `atan2`, ...) promote integer and
  bool operands to the default float dtype (float32);
- `neg abs sign square floor ceil round relu` and arithmetic keep integer dtypes;
- comparisons, logical ops, `isnan` and `isfinite` return bool.

An in-place op (`x.add_(y)`) checks that its result dtype can be written into `x`
(`check_inplace_cast`: an int tensor cannot take `add_(1.5)`), converts the other operands to
`x`'s dtype and binds the mutation primitive, so the as-written jaxpr shows `add_`.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from aotjax.autograd.graph import RecordingTensor, fast_operand
from aotjax.core import source_info
from aotjax.core.call_epoch import running as _transforms
from aotjax.core.errors import DTypeError
from aotjax.core.interpreter import Tracer
from aotjax.core.primitive import Recompute, output_size_flops
from aotjax.interpreters import hooks
from aotjax.interpreters.ad_util import Zero, unbroadcast
from aotjax.interpreters.batching import defbroadcasting
from aotjax.interpreters.eval import apply_plain, apply_recording, operand, plain_executable, write_plain
from aotjax.interpreters.jvp import defjvp, defjvp2, defjvp_zero, deflinear, jvp_rules, sum_tangents
from aotjax.interpreters.transpose import deflinear2_transpose, deflinear_transpose
from aotjax.ops.base.casts import convert
from aotjax.ops.base.combinators import broadcast_shapes, elementwise, inplace_variant, same_dtype, standard_primitive
from aotjax.ops.base.data import as_tensor, promote
from aotjax.ops.base.frontend import bind_inplace, is_scalar, place, require_gpus, to_dtype, write_out
from aotjax.ops.base.frontend import device as to_device
from aotjax.ops.base.layout import elementwise_layout, format_name, suggest_format, tensor_layout
from aotjax.ops.base.promotion import (
    _BOOL,
    _COMPLEX,
    _FLOAT,
    _INT,
    category,
    check_inplace_cast,
    result_type,
)
from aotjax.ops.creation.factories import device_put
from aotjax.ops.math.dtype_classes import (
    ABS,
    ANY_DTYPE,
    BOOL_DTYPE,
    FLOATING,
    INTEGRAL,
    NUMERIC,
    ORDERED,
    PREDICATE,
    REAL,
    SQUARE,
    DtypeClass,
    float_or_default,
)
from aotjax.ops.shape.clone import clone
from aotjax.tensor import Storage, Tensor, method, reflected

_new = object.__new__

__all__ = [
    "to", "add", "sub", "div", "floor_divide", "add_", "sub_", "div_", "floor_divide_", "where", "clamp", "clip",
    "clamp_", "clip_", "lerp", "lerp_", "gelu", "gelu_", "round", "round_"
]  # NOTE: the unary and binary families add their op functions as they define them (`_public`)



def to(x, *args, dtype=None, device=None, non_blocking: bool = False, copy: bool = False, memory_format=None):
    """`x` converted to `dtype`, placed on `device` and laid out in `memory_format`, as `torch.Tensor.to`:
    `x.to(dtype)`, `x.to(device, dtype)`, `x.to(other)` (its dtype and device), keywords likewise. `x` itself when
    nothing changes, unless `copy=True`, which always gives a new tensor. A device is a `jax.Device`, `'cpu'`,
    `'cpu:0'` or another name `aotjax.device` reads, or a `jax.sharding.Sharding` that lays `x` out over a mesh (as
    `aotjax.device_put`); under a transform the placement follows the arguments.

    >>> aotjax.tensor([1.7, -1.7]).to(aotjax.int8)
    tensor([ 1, -1], dtype=int8)
    >>> x = aotjax.zeros(2)
    >>> x.to("cpu") is x, x.to(aotjax.float32, copy=True) is x
    (True, False)
    """
    flags = [a for a in args if isinstance(a, bool)]  # NOTE: positional `non_blocking, copy`, as in PyTorch
    non_blocking, copy = (flags + [non_blocking, copy][len(flags):])[:2] if flags else (non_blocking, copy)
    for a in args:
        if isinstance(a, Tensor):
            dtype, device = a.dtype, a.device
        elif _is_device(a):
            device = a
        elif not isinstance(a, bool):
            dtype = a
    sharding = device if isinstance(device, jax.sharding.Sharding) else None  # NOTE: laid out over a mesh
    dev = None if sharding is not None else to_device(device, "to")
    out = x
    if dtype is not None:
        new_dtype = to_dtype(dtype, "to")
        if new_dtype != x.dtype or _truncated_request(dtype, new_dtype):
            # NOTE: `x.double()` without x64 gives float32, x's own dtype: still a new tensor, as PyTorch's
            # conversion to another dtype is (returning x itself would alias it).
            out = convert(x, new_dtype) if new_dtype != x.dtype else _clone(x)
    fmt = "preserve" if memory_format is None else format_name(memory_format, "to")
    if fmt != "preserve" and (out is not x or suggest_format(tuple(x.shape), x.stride()) != fmt):
        out = _clone(out, memory_format)  # NOTE: as torch, x itself when its strides suggest the format
    out = place(out, dev) if sharding is None else _laid_out(out, sharding)
    return _clone(x) if copy and out is x else out


def _laid_out(x, sharding):
    """`x` laid out by `sharding` (`x` itself when it is already, or traced: a program's layout follows its arguments',
    or `aotjax.lax.with_sharding_constraint`)."""
    if isinstance(x, Tracer) or x.sharding == sharding:
        return x
    return device_put(x, sharding)


def _is_device(a) -> bool:
    """Whether a positional argument of `to` names a device (a string, a jax or torch device, an index)."""
    return (isinstance(a, (str, int, jax.Device, jax.sharding.Sharding)) and not isinstance(a, bool)
            or type(a).__name__ == "device")


def _clone(x, memory_format=None):
    return clone(x) if memory_format is None else clone(x, memory_format=memory_format)


def _truncated_request(dtype, got: np.dtype) -> bool:
    """Whether `dtype`, a dtype the user asked for, is a 64-bit one that jax's 32-bit mode turned into `got`."""
    if any(dtype is t for t in (float, int, bool)):  # NOTE: by identity: np.dtype('float64') == float
        return False
    try:
        return np.dtype(dtype) != got
    except TypeError:
        return False


def _type_as(x, other):
    """`x` converted to `other`'s dtype."""
    return to(x, other.dtype)


def _cast_method(name: str, dtype, what: str):
    def cast(x, *, memory_format=None):
        # NOTE: a keyword: the name "bfloat16" is a string, which `to` reads as a device
        return to(x, dtype=dtype, memory_format=memory_format)
    cast.__name__ = cast.__qualname__ = name
    cast.__doc__ = f"`x` as {what} (laid out in `memory_format`, as `to` does)."
    return cast


def _cpu(x, memory_format=None):
    """`x` on the CPU (itself when it is there), as `torch.Tensor.cpu`."""
    return to(x, "cpu", memory_format=memory_format)


def _cuda(x, device=None, non_blocking: bool = False, memory_format=None):
    """`x` on a GPU (`device`: an index or 'cuda:i'; the first by default), as `torch.Tensor.cuda`; raises where
    jax has no GPU."""
    require_gpus()
    name = "cuda" if device is None else device if isinstance(device, str) else f"cuda:{int(device)}"
    return to(x, name, non_blocking=non_blocking, memory_format=memory_format)


# NOTE: methods only: `aotjax.float` is a dtype, as `torch.float` is.
method(to)
method(_cpu, "cpu")
method(_cuda, "cuda")
Tensor.is_cuda = property(lambda self: any(d.platform == "gpu" for d in self.devices()),
                          doc="Whether the tensor is on a GPU.")
method(_type_as, "type_as")
for _name, _dtype, _what in (("float", np.float32, "float32"), ("half", np.float16, "float16"),
                             ("bfloat16", "bfloat16", "bfloat16"), ("int", np.int32, "int32"),
                             ("bool", np.bool_, "bool"), ("short", np.int16, "int16"), ("byte", np.uint8, "uint8"),
                             ("char", np.int8, "int8"),
                             ("double", np.float64, "float64 (float32 unless jax's x64 mode is on)"),
                             ("long", np.int64, "int64 (int32 unless jax's x64 mode is on)"),
                             ("cfloat", np.complex64, "complex64"),
                             ("cdouble", np.complex128, "complex128 (complex64 unless jax's x64 mode is on)")):
    method(_cast_method(_name, _dtype, _what))


def _public(*fns):
    """Export the op functions `fns` and install each as the Tensor method of its name: a family's ops
    become public where the family defines them."""
    for fn in fns:
        method(fn)
        __all__.append(fn.__name__)
    return fns


def named(fn, name: str, doc: str):
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


def inplace_docstring(name: str) -> str:
    return (f"In-place `{name}`: writes the result into `x` (through any view, into its base) and returns `x`."
            f"\n\n    >>> x = aotjax.tensor([0.5, 1.0, 2.0])\n    >>> x.{name}_() is x\n    True\n    ")


# -- unary -------------------------------------------------------------------------------------
def unary_operand(cls: DtypeClass, x):
    x = as_tensor(x)
    dt = cls.operand(x.dtype)
    return x if dt == x.dtype else convert(x, dt)


def check_unary_inplace(prim_, cls: DtypeClass, x) -> None:
    result = cls.result(cls.operand(x.dtype))
    if category(x.dtype) == _COMPLEX and category(result) != _COMPLEX:  # NOTE: abs_: torch refuses a real result
        raise DTypeError(f"{prim_.name}: in-place {prim_.name[:-1]} is not supported for complex tensors (its result "
                         f"is real){source_info.where()}; compute out of place (`x.{prim_.name[:-1]}()`).")
    check_inplace_cast(prim_.name, result, x.dtype)


def _unary(name: str, lower, cls: DtypeClass, doc: str, inplace: bool = True):
    """A unary elementwise primitive, its in-place variant, and their op functions."""
    prim = elementwise(name, lower, out_dtype=cls.rule(name))
    as_is, plain = cls.as_is, []  # plain: [the primitive's fast-path executable], once looked up

    def op(x, *, out=None):
        # NOTE: the eager fast path (`apply_plain`) inlined, the commonest case first: one unary op on a plain
        # tensor whose dtype is taken as it is costs its executable's call plus about a microsecond. `out=` is
        # handled here, not by a wrapper (`out_variant`), which would be one call more per op.
        if out is not None:
            return write_out(name, op(x), out)
        if (type(x) is Tensor and not x._chain and x._strides is None and not _transforms[0]
                and x._storage.grad_node is None):
            base = x._storage.base
            try:
                dtype = base.aval.dtype
            except AttributeError:
                dtype = None
            if dtype in as_is:
                if not plain:
                    plain.append(plain_executable(prim, {}))
                fn = plain[0]
                if fn is not None:
                    try:
                        out = fn(base)
                    except Exception:  # NOTE: `bind` says what is wrong
                        pass
                    else:  # NOTE: `Tensor._wrap(out)` inlined: even as a plain call it costs exp 0.15 µs (6.2 -> 6.4)
                        storage = _new(Storage)
                        storage.base, storage.version, storage.owned, storage.grad_node = out, 0, True, None
                        t = _new(Tensor)
                        t._storage, t._chain, t._aval = storage, (), None
                        t._strides, t._offset, t._cache, t._ag = None, 0, None, None
                        return t
        elif type(x) is RecordingTensor and not _transforms[0] and fast_operand(x) and x.dtype in as_is:
            if not plain:
                plain.append(plain_executable(prim, {}))
            if plain[0] is not None:
                out = apply_recording(prim, (x,), (x._storage.base,), plain[0])
                if out is not None:
                    return out
        if isinstance(x, Tensor):
            dtype = x.dtype
            if dtype in as_is or cls.takes_as_is(dtype):  # NOTE: the common case, known once per dtype
                return prim.bind(x)
        x = unary_operand(cls, x)
        _refuse_complex(prim, cls, x.dtype)
        return prim.bind(x)

    if not inplace:
        return (prim, *_public(named(op, name, doc)))
    prim_ = inplace_variant(prim)

    def op_(x):
        check_unary_inplace(prim_, cls, x)
        return bind_inplace(prim_, x)

    return (prim, prim_, *_public(named(op, name, doc), named(op_, name + "_", inplace_docstring(name))))


def keep_integers(fn):
    """`fn` for floats; the identity for integer and bool arrays (floor, ceil, round)."""
    return lambda x: x if category(x.dtype) < _FLOAT else fn(x)


def _neg_lower(x):
    return jnp.negative(x)


neg_p, neg__p, neg, neg_ = _unary("neg", _neg_lower, NUMERIC, """`-x`; integer dtypes are kept (bool is refused).

    >>> aotjax.neg(aotjax.tensor([1, -2]))
    tensor([-1,  2])
    """)
deflinear(neg_p)
deflinear_transpose(neg_p, lambda ct, x: neg_p.bind(ct))
abs_p, abs__p, abs, abs_ = _unary("abs", jnp.abs, ABS, """`|x|`; integer dtypes are kept.

    >>> aotjax.abs(aotjax.tensor([-1.5, 2.0]))
    tensor([1.5, 2. ])
    """)
# NOTE: the real derivative is sign(x), 0 at 0 (torch's subgradient there)
defjvp(abs_p, lambda t, x: _complex_abs_jvp(t, x) if category(x.dtype) == _COMPLEX else mul(t, sign(x)))


def _complex_abs_jvp(t, x):
    """`Re(conj(x) * t) / |x|`, 0 where `x == 0` (JAX's choice)."""
    r = mul(x.conj_physical(), t).real  # NOTE: the methods: the complex family builds on this module
    a = abs(x)
    return where(eq(a, 0), mul(r, 0), div(r, where(eq(a, 0), 1.0, a)))

exp_p, exp__p, exp, exp_ = _unary("exp", jnp.exp, FLOATING, """`e ** x` (integers are promoted to float32).

    >>> aotjax.exp(aotjax.tensor([0.0]))
    tensor([1.])
    """)
defjvp2(exp_p, lambda t, ans, x: mul(t, ans))
log_p, log__p, log, log_ = _unary("log", jnp.log, FLOATING, """Natural logarithm (integers promote to float32).

    >>> aotjax.log(aotjax.tensor([1.0]))
    tensor([0.])
    """)
defjvp(log_p, lambda t, x: div(t, x))
log1p_p, log1p__p, log1p, log1p_ = _unary("log1p", jnp.log1p, FLOATING, """`log(1 + x)`, accurate near 0.

    >>> aotjax.log1p(aotjax.tensor([0.0]))
    tensor([0.])
    """)
defjvp(log1p_p, lambda t, x: div(t, add(x, 1)))
expm1_p, expm1__p, expm1, expm1_ = _unary("expm1", jnp.expm1, FLOATING, """`exp(x) - 1`, accurate near 0.

    >>> aotjax.expm1(aotjax.tensor([0.0]))
    tensor([0.])
    """)
defjvp2(expm1_p, lambda t, ans, x: mul(t, add(ans, 1)))
sqrt_p, sqrt__p, sqrt, sqrt_ = _unary("sqrt", jnp.sqrt, FLOATING, """Square root (integers promote to float32).

    >>> aotjax.sqrt(aotjax.tensor([4, 9]))
    tensor([2., 3.])
    """)
defjvp2(sqrt_p, lambda t, ans, x: div(t, mul(ans, 2)))
rsqrt_p, rsqrt__p, rsqrt, rsqrt_ = _unary("rsqrt", lax.rsqrt, FLOATING, """`1 / sqrt(x)`.

    >>> aotjax.rsqrt(aotjax.tensor([4.0]))
    tensor([0.5])
    """)
defjvp2(rsqrt_p, lambda t, ans, x: mul(t, div(mul(ans, -0.5), x)))
sin_p, sin__p, sin, sin_ = _unary("sin", jnp.sin, FLOATING, """Elementwise sine (integers promote to float32).

    >>> aotjax.sin(aotjax.tensor([0.0]))
    tensor([0.])
    """)
defjvp(sin_p, lambda t, x: mul(t, cos(x)))
cos_p, cos__p, cos, cos_ = _unary("cos", jnp.cos, FLOATING, """Elementwise cosine.

    >>> aotjax.cos(aotjax.tensor([0.0]))
    tensor([1.])
    """)
defjvp(cos_p, lambda t, x: neg(mul(t, sin(x))))
tan_p, tan__p, tan, tan_ = _unary("tan", jnp.tan, FLOATING, """Elementwise tangent.

    >>> aotjax.tan(aotjax.tensor([0.0]))
    tensor([0.])
    """)
defjvp2(tan_p, lambda t, ans, x: mul(t, add(square(ans), 1)))
tanh_p, tanh__p, tanh, tanh_ = _unary("tanh", jnp.tanh, FLOATING, """Hyperbolic tangent.

    >>> aotjax.tanh(aotjax.tensor([0.0]))
    tensor([0.])
    """)
defjvp2(tanh_p, lambda t, ans, x: mul(t, sub(1, square(ans))))
sigmoid_p, sigmoid__p, sigmoid, sigmoid_ = _unary("sigmoid", jax.nn.sigmoid, FLOATING, """`1 / (1 + exp(-x))`.

    >>> aotjax.sigmoid(aotjax.tensor([0.0]))
    tensor([0.5])
    """)
defjvp2(sigmoid_p, lambda t, ans, x: mul(t, mul(ans, sub(1, ans))))
relu_p, relu__p, relu, relu_ = _unary("relu", lambda x: jnp.maximum(x, jnp.zeros((), x.dtype)), NUMERIC,
                                      """`max(x, 0)`; integer dtypes are kept.

    >>> aotjax.relu(aotjax.tensor([-1, 2]))
    tensor([0, 2])
    """)
defjvp(relu_p, lambda t, x: where(gt(x, 0), t, 0))
silu_p, silu__p, silu, silu_ = _unary("silu", jax.nn.silu, FLOATING, """`x * sigmoid(x)` (also called swish).

    >>> aotjax.silu(aotjax.tensor([0.0]))
    tensor([0.])
    """)


def _silu_jvp(t, x):
    s = sigmoid(x)
    return mul(t, mul(s, add(mul(x, sub(1, s)), 1)))


defjvp(silu_p, _silu_jvp)
erf_p, erf__p, erf, erf_ = _unary("erf", lax.erf, FLOATING, """The Gauss error function.

    >>> aotjax.erf(aotjax.tensor([0.0]))
    tensor([0.])
    """)
defjvp(erf_p, lambda t, x: mul(t, mul(exp(neg(square(x))), 2 / math.sqrt(math.pi))))
floor_p, floor__p, floor, floor_ = _unary("floor", keep_integers(jnp.floor), REAL,
                                          """Rounds down; the identity on integer tensors.

    >>> aotjax.floor(aotjax.tensor([-0.5, 1.5]))
    tensor([-1.,  1.])
    """)
defjvp_zero(floor_p)
ceil_p, ceil__p, ceil, ceil_ = _unary("ceil", keep_integers(jnp.ceil), REAL,
                                      """Rounds up; the identity on integer tensors.

    >>> aotjax.ceil(aotjax.tensor([-0.5, 1.5]))
    tensor([-0.,  2.])
    """)
defjvp_zero(ceil_p)
def _sign_lower(x):
    if x.dtype == np.bool_:
        return x
    return jnp.sign(x) if category(x.dtype) != _FLOAT else jnp.where(jnp.isnan(x), 0, jnp.sign(x)).astype(x.dtype)


sign_p, sign__p, sign, sign_ = _unary("sign", _sign_lower, REAL,
                                      """-1, 0 or 1 by the sign of `x` (0 for NaN, as in PyTorch); integer dtypes are
    kept.

    >>> aotjax.sign(aotjax.tensor([-2, 0, 3]))
    tensor([-1,  0,  1])
    """)
defjvp_zero(sign_p)
reciprocal_p, reciprocal__p, reciprocal, reciprocal_ = _unary("reciprocal", jnp.reciprocal, FLOATING, """`1 / x`.

    >>> aotjax.reciprocal(aotjax.tensor([2, 4]))
    tensor([0.5 , 0.25])
    """)
defjvp2(reciprocal_p, lambda t, ans, x: neg(mul(t, square(ans))))
square_p, square__p, square, square_ = _unary("square", jnp.square, SQUARE,
                                              """`x * x`; integer dtypes are kept, bool gives int64.

    >>> aotjax.square(aotjax.tensor([-3, 2]))
    tensor([9, 4])
    """)
defjvp(square_p, lambda t, x: mul(t, mul(x, 2)))
isnan_p, isnan = _unary("isnan", jnp.isnan, PREDICATE, """Whether each element is NaN (bool).

    >>> aotjax.isnan(aotjax.tensor([1.0, float('nan')]))
    tensor([False,  True])
    """, inplace=False)
defjvp_zero(isnan_p)
isfinite_p, isfinite = _unary("isfinite", jnp.isfinite, PREDICATE, """Whether each element is finite (bool).

    >>> aotjax.isfinite(aotjax.tensor([1.0, float('inf')]))
    tensor([ True, False])
    """, inplace=False)
defjvp_zero(isfinite_p)
logical_not_p, logical_not__p, logical_not, logical_not_ = _unary(
    "logical_not", jnp.logical_not, PREDICATE, """`x == 0`, as bool (any input dtype).

    >>> aotjax.logical_not(aotjax.tensor([0, 3]))
    tensor([ True, False])
    """)
defjvp_zero(logical_not_p)
bitwise_not_p, bitwise_not__p, bitwise_not, bitwise_not_ = _unary(
    "bitwise_not", jnp.invert, INTEGRAL, """`~x`: bitwise NOT of integers, logical NOT of bools.

    >>> aotjax.bitwise_not(aotjax.tensor([0, 5]))
    tensor([-1, -6])
    """)
defjvp_zero(bitwise_not_p)
bitwise_not_.__doc__ = """In-place `bitwise_not`.

    >>> x = aotjax.tensor([True, False])
    >>> aotjax.bitwise_not_(x) is x
    True
    """


def _unary_with_params(name: str, lower, cls: DtypeClass):
    prim = elementwise(name, lower, out_dtype=cls.rule(name))
    return prim, inplace_variant(prim)


gelu_p, gelu__p = _unary_with_params(
    "gelu", lambda x, *, approximate: jax.nn.gelu(x, approximate=approximate == "tanh"), FLOATING)
round_p, round__p = _unary_with_params(
    "round", lambda x, *, decimals: x if category(x.dtype) < _FLOAT else jnp.round(x, decimals), REAL)


def _gelu_jvp(t, x, *, approximate):
    if approximate == "tanh":
        c = math.sqrt(2 / math.pi)
        th = tanh(mul(add(x, mul(mul(x, square(x)), 0.044715)), c))
        dth = mul(mul(sub(1, square(th)), add(mul(square(x), 3 * 0.044715), 1)), c)
        return mul(t, mul(add(add(th, 1), mul(x, dth)), 0.5))
    cdf = mul(add(erf(mul(x, math.sqrt(0.5))), 1), 0.5)
    pdf = mul(exp(mul(square(x), -0.5)), 1 / math.sqrt(2 * math.pi))
    return mul(t, add(cdf, mul(x, pdf)))


defjvp(gelu_p, _gelu_jvp)
defjvp_zero(round_p)


def _gelu_approximate(approximate: str) -> str:
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}{source_info.where()}")
    return approximate


def gelu(x, approximate: str = "none"):
    """`x * Phi(x)` (Phi the standard normal CDF), or its tanh approximation (`approximate='tanh'`).

    >>> aotjax.gelu(aotjax.tensor([0.0]))
    tensor([0.])
    """
    return gelu_p.bind(unary_operand(FLOATING, x), approximate=_gelu_approximate(approximate))


def gelu_(x, approximate: str = "none"):
    """In-place `gelu`.

    >>> x = aotjax.tensor([0.5, 1.0, 2.0])
    >>> x.gelu_() is x
    True
    """
    check_unary_inplace(gelu__p, FLOATING, x)
    return bind_inplace(gelu__p, x, approximate=_gelu_approximate(approximate))


def _round_decimals(x, decimals) -> int:
    if decimals < 0 and category(x.dtype) < _FLOAT:
        raise DTypeError(f"round: decimals={decimals} needs a floating-point tensor, got {x.aval.str_short()}"
                         f"{source_info.where()}; convert it first (`x.float()`)")
    return int(decimals)


def round(x, decimals: int = 0):
    """Rounds half to even, to `decimals` decimal places; the identity on integer tensors.

    >>> aotjax.round(aotjax.tensor([0.5, 1.5, 2.567]))
    tensor([0., 2., 3.])
    >>> aotjax.round(aotjax.tensor([1.25]), decimals=1)
    tensor([1.2])
    """
    x = as_tensor(x)
    return round_p.bind(x, decimals=_round_decimals(x, decimals))


def round_(x, decimals: int = 0):
    """In-place `round`.

    >>> x = aotjax.tensor([0.5, 1.0, 2.0])
    >>> x.round_() is x
    True
    """
    return bind_inplace(round__p, x, decimals=_round_decimals(x, decimals))


# -- binary ------------------------------------------------------------------------------------
def binary_operands(cls: DtypeClass, x, y):
    if type(x) is type(y) is Tensor and x.dtype == y.dtype and cls.operand(x.dtype) == x.dtype:
        return x, y
    return promote(x, y, dtype=cls.operand(result_type(x, y)))


def _binary(prim, cls: DtypeClass, x, y, **params):
    if type(x) is type(y) is Tensor:
        dtype = x.dtype
        if dtype == y.dtype and (dtype in cls.as_is or cls.takes_as_is(dtype)):  # NOTE: the common case
            if (not params and not x._chain and not y._chain and x._strides is None and y._strides is None
                    and not _transforms[0] and x._storage.grad_node is None and y._storage.grad_node is None):
                out = apply_plain(prim, x._storage.base, y._storage.base)
                if out is not None:
                    return out
            return prim.bind(x, y, **params)
    elif not params and not _transforms[0]:
        tx, ty = type(x), type(y)
        if tx is RecordingTensor or ty is RecordingTensor:  # NOTE: an operand requires grad: the recording fast path
            out = _recording(prim, cls, x, y)
            if out is not None:
                return out
        elif tx is Tensor and ty in _NUMBERS or ty is Tensor and tx in _NUMBERS:
            out = _tensor_and_number(prim, cls, x, y)
            if out is not None:
                return out
    x, y = binary_operands(cls, x, y)
    _refuse_complex(prim, cls, x.dtype)
    return prim.bind(x, y, **params)


_NUMBERS = (int, float)


def _tensor_and_number(prim, cls: DtypeClass, x, y):
    """The eager fast path of a binary op on a plain floating-point tensor and a Python int or float (either
    order): the number takes the tensor's dtype, as in PyTorch (`promote`), and is passed as `operand` passes a
    NumPy scalar; None where it does not apply."""
    t = x if type(x) is Tensor else y
    if t._chain or t._strides is not None or t._storage.grad_node is not None:
        return None
    dtype = t.dtype
    if category(dtype) != _FLOAT or not (dtype in cls.as_is or cls.takes_as_is(dtype)):
        return None
    if t is x:
        return apply_plain(prim, x._storage.base, operand(dtype.type(y)))
    return apply_plain(prim, operand(dtype.type(x)), y._storage.base)


def _recording(prim, cls: DtypeClass, x, y):
    """The eager fast path of a binary op where an operand requires grad (`apply_recording`): two tensors of one
    dtype taken as it is, or a floating-point tensor and a Python int or float; None where it does not apply."""
    if fast_operand(x):
        if fast_operand(y):
            a, b = x._storage.base, y._storage.base
            dtype = a.dtype
            if dtype != b.dtype or not (dtype in cls.as_is or cls.takes_as_is(dtype)):
                return None
            return apply_recording(prim, (x, y), (a, b))
        t = x
    elif fast_operand(y):
        t = y
    else:
        return None
    other = y if t is x else x
    if type(other) not in _NUMBERS:
        return None
    base = t._storage.base
    dtype = base.dtype
    if not (dtype in cls.as_is or cls.takes_as_is(dtype)) or category(dtype) != _FLOAT:
        return None
    number = operand(dtype.type(other))
    return apply_recording(prim, (x, y), (base, number) if t is x else (number, base))


def _refuse_complex(prim, cls: DtypeClass, dtype) -> None:
    """Eager evaluation skips abstract rules: the ops torch refuses on complex operands check here too."""
    if category(dtype) == _COMPLEX and cls.rule is not None:
        cls.rule(prim.name)(dtype)


def binary_inplace(prim_, cls: DtypeClass, x, y, **params):
    if type(x) is type(y) is Tensor:
        dtype = x.dtype
        if dtype == y.dtype and (dtype in cls.written_as_is or cls.writes_as_is(dtype)):  # NOTE: the common case
            if (not params and not x._chain and not y._chain and x._strides is None and y._strides is None
                    and not _transforms[0] and x._storage is not y._storage and x._storage.grad_node is None
                    and y._storage.grad_node is None):
                out = write_plain(prim_, x, x._storage.base, y._storage.base)
                if out is not None:
                    return out
            return bind_inplace(prim_, x, y, **params)
    dtype = cls.operand(result_type(x, y))
    check_inplace_cast(prim_.name, cls.result(dtype), x.dtype)
    if dtype != x.dtype and cls in (PREDICATE, ORDERED):
        # NOTE: `int_x.lt_(2.5)` must compare in float: converting 2.5 to int first would change the
        # answer. Compute out of place and copy the result in.
        return copy_into(x, prim_.functional.bind(*promote(x, y, dtype=dtype), **params))
    return bind_inplace(prim_, x, promote(y, dtype=x.dtype)[0], **params)


def copy_into(x, value):
    return x.copy_(value)  # NOTE: the method: `copy_` is the indexing family's, which builds on this module


def _binary_family(name: str, lower, cls: DtypeClass, doc: str, inplace: bool = True):
    """A binary elementwise primitive, its in-place variant, and their op functions."""
    prim = elementwise(name, lower, out_dtype=cls.rule(name))

    def op(x, y):
        return _binary(prim, cls, x, y)

    if not inplace:
        return (prim, *_public(named(op, name, doc)))
    prim_ = inplace_variant(prim)

    def op_(x, y):
        return binary_inplace(prim_, cls, x, y)

    inplace_doc = f"""In-place `{name}`: writes the result into `x` (cast to `x`'s dtype) and returns `x`.

    >>> x = aotjax.tensor([1.0, 2.0, 3.0])
    >>> x.{name}_(aotjax.tensor([2.0, 1.0, 1.0])) is x
    True
    """
    return (prim, prim_, *_public(named(op, name, doc), named(op_, name + "_", inplace_doc)))


add_p = elementwise("add", jnp.add, out_dtype=ANY_DTYPE.rule("add"))
add__p = inplace_variant(add_p)
defjvp(add_p, lambda t, x, y: t, lambda t, x, y: t)
deflinear_transpose(add_p, lambda ct, x, y: unbroadcast(ct, x.aval), lambda ct, x, y: unbroadcast(ct, y.aval))
sub_p = elementwise("sub", jnp.subtract, out_dtype=NUMERIC.rule("sub"))
sub__p = inplace_variant(sub_p)
defjvp(sub_p, lambda t, x, y: t, lambda t, x, y: neg(t))
deflinear_transpose(sub_p, lambda ct, x, y: unbroadcast(ct, x.aval),
                    lambda ct, x, y: unbroadcast(neg_p.bind(ct), y.aval))


_SCALAR_KINDS = ((_BOOL, (bool, np.bool_)), (_INT, (int, np.integer)), (_FLOAT, (float, np.floating)),
                 (_COMPLEX, (complex, np.complexfloating)))


def scalar_coefficient(op: str, name: str, value, dtype, *, truncates: bool = False):
    """torch's Scalar argument `name` (`alpha`, `beta`, `value`) of `op` as torch takes it for a result of `dtype`:
    a bool for a bool result; for an integer result an int, where a float is truncated toward zero (`truncates`: as
    `addmm` and `addcmul` do) or refused with a bool (as `add` and `addr` do); never complex for a real result. A
    tensor passes as it is."""
    if not isinstance(value, (int, float, complex, np.number, np.bool_)):
        return value
    kind = category(dtype)
    given = next(c for c, types in _SCALAR_KINDS if isinstance(value, types))  # NOTE: bool before int
    if given == _COMPLEX and kind != _COMPLEX:
        raise DTypeError(f"{op}: {name} must be real for a result of dtype {np.dtype(dtype).name}, got {value!r}"
                         f"{source_info.where()}; make the operands complex first (`input.to(aotjax.complex64)`)")
    if kind == _BOOL and (truncates or given != _FLOAT):
        return bool(value)
    if kind > _INT or given == _INT or (given == _BOOL and truncates):
        return value
    if not truncates:
        raise DTypeError(f"{op}: {name} must be an integer for a result of dtype {np.dtype(dtype).name}, got "
                         f"{value!r}{source_info.where()} (torch refuses a {'bool' if given == _BOOL else 'float'} "
                         f"{name} here); pass an int, or convert the operands to float first")
    if not math.isfinite(value):
        raise DTypeError(f"{op}: {name}={value} cannot be converted to the integer dtype "
                         f"{np.dtype(dtype).name} of the result{source_info.where()}; pass a finite number")
    return int(value)  # NOTE: torch truncates toward zero (its Scalar cast to the result's type)


def _scaled(x, y, alpha, op: str = "add"):
    if type(alpha) is int and alpha == 1:
        return y
    alpha = scalar_coefficient(op, "alpha", alpha, result_type(x, y))
    if alpha == 1:
        return y
    return y * alpha if is_scalar(y) else mul(y, alpha)


def add(x, y, *, alpha=1):
    """`x + alpha * y`, broadcasting, with PyTorch's type promotion.

    >>> aotjax.add(aotjax.tensor([1, 2]), 2.5)
    tensor([3.5, 4.5])
    >>> aotjax.tensor([1.0, 2.0]).add(aotjax.tensor([1.0, 1.0]), alpha=10)
    tensor([11., 12.])
    """
    return _binary(add_p, ANY_DTYPE, x, _scaled(x, y, alpha))


def add_(x, y, *, alpha=1):
    """In-place `add`: writes into `x` and returns it.

    >>> x = aotjax.tensor([1.0, 2.0])
    >>> x += 1
    >>> x
    tensor([2., 3.])
    """
    return binary_inplace(add__p, ANY_DTYPE, x, _scaled(x, y, alpha, "add_"))


def sub(x, y, *, alpha=1):
    """`x - alpha * y`, broadcasting (bool tensors are refused, as in PyTorch).

    >>> aotjax.sub(aotjax.tensor([5, 6]), aotjax.tensor(1))
    tensor([4, 5])
    """
    return _binary(sub_p, NUMERIC, x, _scaled(x, y, alpha, "sub"))


def sub_(x, y, *, alpha=1):
    """In-place `sub`.

    >>> x = aotjax.tensor([5, 6])
    >>> x -= 1
    >>> x
    tensor([4, 5])
    """
    return binary_inplace(sub__p, NUMERIC, x, _scaled(x, y, alpha, "sub_"))


mul_p, mul__p, mul, mul_ = _binary_family("mul", jnp.multiply, ANY_DTYPE, """`x * y`, broadcasting, with PyTorch's type
    promotion (`int_tensor * 2.5` is float32, `half_tensor * 2.5` stays float16).

    >>> aotjax.mul(aotjax.tensor([1, 2]), 3)
    tensor([3, 6])
    """)
defjvp(mul_p, lambda t, x, y: mul_p.bind(t, y), lambda t, x, y: mul_p.bind(x, t))
deflinear2_transpose(mul_p, lambda ct, x, y: unbroadcast(mul_p.bind(ct, y), x.aval),
                     lambda ct, x, y: unbroadcast(mul_p.bind(x, ct), y.aval))
remainder_p, remainder__p, remainder, remainder_ = _binary_family(
    "remainder", jnp.remainder, NUMERIC, """`x - floor(x / y) * y`: the remainder with the sign of `y` (Python's
    `%`).

    >>> aotjax.remainder(aotjax.tensor([-7, 7]), 3)
    tensor([2, 1])
    """)
defjvp(remainder_p, lambda t, x, y: t, lambda t, x, y: neg(mul(t, floor(div(x, y)))))
pow_p, pow__p, _pow, pow_ = _binary_family("pow", jnp.power, ANY_DTYPE, "")
pow_p.layout_rule = tensor_layout  # NOTE: PyTorch's `x ** 2.5` is a unary op of x


def _pow_jvp_x(t, ans, x, y):
    return mul(t, where(eq(y, 0), 0, mul(y, _pow(x, sub(y, 1)))))


def _pow_jvp_y(t, ans, x, y):
    return mul(t, mul(log(where(eq(x, 0), 1, x)), ans))


defjvp2(pow_p, _pow_jvp_x, _pow_jvp_y)
# `x ** n` for a Python int `n` (JAX's `integer_pow`): repeated multiplication, and the derivative
# `n * x ** (n - 1)` with no `where` for `x == 0` (which the general `pow` rule needs for real `y`).
integer_pow_p = elementwise("integer_pow", lambda x, *, y: lax.integer_pow(x, y),
                            out_dtype=ANY_DTYPE.rule("integer_pow"))
integer_pow__p = inplace_variant(integer_pow_p)


def _integer_pow_jvp(t, x, *, y):
    if y == 0:
        return Zero(x.aval)
    return t if y == 1 else mul(t, mul(x if y == 2 else integer_pow_p.bind(x, y=y - 1), y))


defjvp(integer_pow_p, _integer_pow_jvp)


maximum_p, maximum = _binary_family("maximum", jnp.maximum, REAL, """The elementwise maximum (NaN propagates).

    >>> aotjax.maximum(aotjax.tensor([1, 5]), aotjax.tensor([3, 2]))
    tensor([3, 5])
    """, inplace=False)


def _balanced(t, x, ans, y):
    """`t` where `x` is the chosen extremum `ans`, half of it where `y` ties with it, else 0."""
    return where(eq(x, ans), where(eq(y, ans), mul(t, 0.5), t), 0)


defjvp2(maximum_p, lambda t, ans, x, y: _balanced(t, x, ans, y), lambda t, ans, x, y: _balanced(t, y, ans, x))
minimum_p, minimum = _binary_family("minimum", jnp.minimum, REAL, """The elementwise minimum (NaN propagates).

    >>> aotjax.minimum(aotjax.tensor([1, 5]), aotjax.tensor([3, 2]))
    tensor([1, 2])
    """, inplace=False)
defjvp2(minimum_p, lambda t, ans, x, y: _balanced(t, x, ans, y), lambda t, ans, x, y: _balanced(t, y, ans, x))
atan2_p, atan2__p, atan2, atan2_ = _binary_family("atan2", jnp.arctan2, FLOATING, """The angle of the point
    `(x=other, y=input)`, in radians (integers promote to float32).

    >>> aotjax.atan2(aotjax.tensor([1.0]), aotjax.tensor([1.0]))
    tensor([0.7853982])
    """)
def _over_squared_norm(v, x, y):
    """`v / (x^2 + y^2)`, 0 where both are 0 (torch's atan2 derivative at the origin)."""
    d = add(square(x), square(y))
    zero = eq(d, 0)
    return where(zero, 0, div(v, where(zero, 1, d)))


defjvp(atan2_p, lambda t, x, y: mul(t, _over_squared_norm(y, x, y)),
       lambda t, x, y: mul(t, _over_squared_norm(neg(x), x, y)))
eq_p, eq__p, eq, eq_ = _binary_family("eq", jnp.equal, PREDICATE, """`x == y`, as bool.

    >>> aotjax.eq(aotjax.tensor([1, 2]), 2)
    tensor([False,  True])
    """)
defjvp_zero(eq_p)
ne_p, ne__p, ne, ne_ = _binary_family("ne", jnp.not_equal, PREDICATE, """`x != y`, as bool.

    >>> aotjax.ne(aotjax.tensor([1, 2]), 2)
    tensor([ True, False])
    """)
defjvp_zero(ne_p)
lt_p, lt__p, lt, lt_ = _binary_family("lt", jnp.less, ORDERED, """`x < y`, as bool (compared in the promoted
    dtype: `int_tensor < 2.5` compares as float).

    >>> aotjax.lt(aotjax.tensor([2, 3]), 2.5)
    tensor([ True, False])
    """)
defjvp_zero(lt_p)
le_p, le__p, le, le_ = _binary_family("le", jnp.less_equal, ORDERED, """`x <= y`, as bool.

    >>> aotjax.le(aotjax.tensor([2, 3]), 2)
    tensor([ True, False])
    """)
defjvp_zero(le_p)
gt_p, gt__p, gt, gt_ = _binary_family("gt", jnp.greater, ORDERED, """`x > y`, as bool.

    >>> aotjax.gt(aotjax.tensor([2, 3]), 2)
    tensor([False,  True])
    """)
defjvp_zero(gt_p)
ge_p, ge__p, ge, ge_ = _binary_family("ge", jnp.greater_equal, ORDERED, """`x >= y`, as bool.

    >>> aotjax.ge(aotjax.tensor([2, 3]), 3)
    tensor([False,  True])
    """)
defjvp_zero(ge_p)
logical_and_p, logical_and__p, logical_and, logical_and_ = _binary_family(
    "logical_and", jnp.logical_and, PREDICATE, """Whether both `x` and `y` are nonzero (bool).

    >>> aotjax.logical_and(aotjax.tensor([0, 1, 2]), aotjax.tensor([1, 1, 0]))
    tensor([False,  True, False])
    """)
defjvp_zero(logical_and_p)
logical_or_p, logical_or__p, logical_or, logical_or_ = _binary_family(
    "logical_or", jnp.logical_or, PREDICATE, """Whether `x` or `y` is nonzero (bool).

    >>> aotjax.logical_or(aotjax.tensor([0, 1, 0]), aotjax.tensor([0, 0, 2]))
    tensor([False,  True,  True])
    """)
defjvp_zero(logical_or_p)
bitwise_and_p, bitwise_and__p, bitwise_and, bitwise_and_ = _binary_family(
    "bitwise_and", jnp.bitwise_and, INTEGRAL, """`x & y` for integer or bool tensors.

    >>> aotjax.bitwise_and(aotjax.tensor([12]), 10)
    tensor([8])
    """)
defjvp_zero(bitwise_and_p)
bitwise_or_p, bitwise_or__p, bitwise_or, bitwise_or_ = _binary_family(
    "bitwise_or", jnp.bitwise_or, INTEGRAL, """`x | y` for integer or bool tensors.

    >>> aotjax.bitwise_or(aotjax.tensor([12]), 10)
    tensor([14])
    """)
defjvp_zero(bitwise_or_p)
bitwise_xor_p, bitwise_xor__p, bitwise_xor, bitwise_xor_ = _binary_family(
    "bitwise_xor", jnp.bitwise_xor, INTEGRAL, """`x ^ y` for integer or bool tensors.

    >>> aotjax.bitwise_xor(aotjax.tensor([12]), 10)
    tensor([6])
    """)
defjvp_zero(bitwise_xor_p)
for _f in (bitwise_and_, bitwise_or_, bitwise_xor_):
    _f.__doc__ = _f.__doc__.replace("[1.0, 2.0, 3.0]", "[1, 2, 3]").replace("[2.0, 1.0, 1.0]", "[2, 1, 1]")


def _check_int_pow(x, y) -> None:
    if (isinstance(y, (int, np.integer)) and not isinstance(y, bool) and y < 0 and isinstance(x, Tensor)
            and category(x.dtype) <= _INT):
        raise ValueError(f"pow: integers to negative integer powers are not allowed (got {x.aval.str_short()} "
                         f"** {y}){source_info.where()}; convert to float first (`x.float() ** {y}`)")


def _int_exponent(x, y) -> bool:
    """Whether `x ** y` is an `integer_pow`: a tensor (or array) to a Python/NumPy int power."""
    return (isinstance(y, (int, np.integer)) and not isinstance(y, (bool, np.bool_)) and not is_scalar(x))


def pow(x, y):
    """`x ** y`, broadcasting; `int_tensor ** 2` stays integer, `int_tensor ** 0.5` is float32. A Python
    int exponent binds `integer_pow` (repeated multiplication, a simple derivative).

    >>> aotjax.pow(aotjax.tensor([2, 3]), 2)
    tensor([4, 9])
    >>> aotjax.pow(2.0, aotjax.tensor([3.0]))
    tensor([8.])
    """
    _check_int_pow(x, y)
    if _int_exponent(x, y):
        x = as_tensor(x)
        dtype = result_type(x, y)  # NOTE: y as given: a NumPy int promotes as a 0-d array, as in `pow`
        return integer_pow_p.bind(x if x.dtype == dtype else convert(x, dtype), y=int(y))
    if is_scalar(x) and isinstance(y, Tensor):
        y = y.contiguous()  # NOTE: PyTorch's pow(Scalar, Tensor) (`2 ** x`) gives a contiguous result
    return _pow(x, y)


def _pow_(x, y):
    _check_int_pow(x, y)
    if _int_exponent(x, y):
        check_inplace_cast(pow__p.name, result_type(x, y), x.dtype)
        return bind_inplace(integer_pow__p, x, y=int(y))
    return binary_inplace(pow__p, ANY_DTYPE, x, y)


pow_ = named(_pow_, "pow_", pow_.__doc__)


# -- division ----------------------------------------------------------------------------------
def _div_lower(x, y, *, rounding_mode):
    if rounding_mode is None:
        return jnp.true_divide(x, y)
    if rounding_mode == "floor":
        return jnp.floor_divide(x, y)
    if category(x.dtype) < _FLOAT:
        return lax.div(*jnp.broadcast_arrays(x, y))  # integer division rounds toward zero
    return jnp.trunc(x / y)


def _div_dtype(x, y, *, rounding_mode):
    dt = same_dtype("div", x, y)
    expected = FLOATING if rounding_mode is None else NUMERIC
    return expected.rule("div" if rounding_mode is None else f"div (rounding_mode={rounding_mode!r})")(dt)


div_p = standard_primitive("div", lambda x, y, **_: broadcast_shapes("div", x.shape, y.shape), _div_dtype,
                           _div_lower, recompute=Recompute.CHEAP, flops=output_size_flops)
div_p.layout_rule = elementwise_layout
defbroadcasting(div_p)
div__p = inplace_variant(div_p)
div_p.print_rule = div__p.print_rule = lambda params: {k: v for k, v in params.items() if v is not None}


def _div_jvp_x(t, ans, x, y, *, rounding_mode):
    return div(t, y) if rounding_mode is None else Zero(ans.aval)  # rounded division is piecewise constant


def _div_jvp_y(t, ans, x, y, *, rounding_mode):
    return neg(mul(t, div(ans, y))) if rounding_mode is None else Zero(ans.aval)


defjvp2(div_p, _div_jvp_x, _div_jvp_y)


def _div_transpose(ct, x, y, *, rounding_mode):
    if rounding_mode is not None:
        raise ValueError(f"transpose: div with rounding_mode={rounding_mode!r} is not linear in its numerator")
    return unbroadcast(div_p.bind(ct, y, rounding_mode=None), x.aval)


deflinear2_transpose(div_p, _div_transpose)  # linear in the numerator only


def _rounding(rounding_mode) -> DtypeClass:
    if rounding_mode not in (None, "trunc", "floor"):
        raise ValueError(f"div: rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}"
                         f"{source_info.where()}")
    return FLOATING if rounding_mode is None else NUMERIC


def div(x, y, *, rounding_mode=None):
    """`x / y`: true division (integers give float32), or rounded toward zero (`rounding_mode='trunc'`) or
    down (`'floor'`), which keep integer dtypes.

    >>> aotjax.div(aotjax.tensor([7, -7]), 2)
    tensor([ 3.5, -3.5])
    >>> aotjax.div(aotjax.tensor([7, -7]), 2, rounding_mode='trunc')
    tensor([ 3, -3])
    """
    return _binary(div_p, _rounding(rounding_mode), x, y, rounding_mode=rounding_mode)


def div_(x, y, *, rounding_mode=None):
    """In-place `div` (an integer tensor needs a `rounding_mode`).

    >>> x = aotjax.tensor([3.0, 4.0])
    >>> x /= 2
    >>> x
    tensor([1.5, 2. ])
    """
    return binary_inplace(div__p, _rounding(rounding_mode), x, y, rounding_mode=rounding_mode)


def floor_divide(x, y):
    """`floor(x / y)`, Python's `//` (`div(x, y, rounding_mode='floor')`).

    >>> aotjax.floor_divide(aotjax.tensor([7, -7]), 2)
    tensor([ 3, -4])
    """
    return div(x, y, rounding_mode="floor")


def floor_divide_(x, y):
    """In-place `floor_divide`.

    >>> x = aotjax.tensor([7, -7])
    >>> x //= 2
    >>> x
    tensor([ 3, -4])
    """
    return div_(x, y, rounding_mode="floor")


# -- selection ---------------------------------------------------------------------------------
def _where_dtype(cond, x, y):
    if cond.dtype != BOOL_DTYPE:
        raise DTypeError(f"where: the condition must be bool, got {cond.str_short()}")
    return same_dtype("where", x, y)


where_p = standard_primitive("where", lambda c, x, y: broadcast_shapes("where", c.shape, x.shape, y.shape),
                             _where_dtype, jnp.where, recompute=Recompute.CHEAP, flops=output_size_flops)
where_p.layout_rule = elementwise_layout  # NOTE: the condition first, as in PyTorch
defbroadcasting(where_p)
defjvp(where_p, None, lambda t, c, x, y: where(c, t, 0), lambda t, c, x, y: where(c, 0, t))
deflinear_transpose(where_p, None, lambda ct, c, x, y: unbroadcast(where_p.bind(c, ct, ct.dtype.type(0)), x.aval),
                    lambda ct, c, x, y: unbroadcast(where_p.bind(c, ct.dtype.type(0), ct), y.aval))


def where(condition, x, y):
    """`x` where `condition` is True, else `y`, broadcasting; `x` and `y` are promoted together.

    >>> aotjax.where(aotjax.tensor([True, False]), aotjax.tensor([1, 2]), 0.5)
    tensor([1. , 0.5])
    """
    condition = as_tensor(condition)
    if condition.dtype != BOOL_DTYPE:
        raise DTypeError(f"where: the condition must be a bool tensor, got {condition.aval.str_short()}"
                         f"{source_info.where()}; compare it first (`cond != 0`)")
    return where_p.bind(condition, *promote(x, y))


def _clamp_lower(x, lo, hi):
    return jnp.minimum(jnp.maximum(x, lo), hi)


clamp_p = elementwise("clamp", _clamp_lower, out_dtype=REAL.rule("clamp"), layout=tensor_layout)
clamp__p = inplace_variant(clamp_p)


def _clamp_jvp(primals, tangents):
    x, lo, hi = primals
    out = clamp_p.bind(x, lo, hi)
    if all(isinstance(t, Zero) for t in tangents):
        return [out], [Zero(out.aval)]
    # NOTE: torch's convention, not `minimum(maximum(x, lo), hi)`'s shared ties: `x` passes its tangent wherever
    # lo <= x <= hi (at a bound too), `lo` where x < lo < hi, `hi` where x > hi or hi < lo (then the result is hi).
    masks = (logical_and(ge(x, lo), le(x, hi)), logical_and(lt(x, lo), lt(lo, hi)), logical_or(gt(x, hi), lt(hi, lo)))
    return [out], [sum_tangents(out.aval, [where(mask, t, 0) for t, mask in zip(tangents, masks)
                                           if not isinstance(t, Zero)])]


jvp_rules[clamp_p] = _clamp_jvp


def _bound(bound, dtype, lowest: bool):
    """A missing clamp bound: the lowest (or highest) value of `dtype`, as a Python scalar (traced as a
    literal), so that it clamps nothing."""
    if bound is not None:
        return bound
    if category(dtype) >= _FLOAT:
        return -float("inf") if lowest else float("inf")
    if category(dtype) == _BOOL:
        return not lowest
    info = np.iinfo(dtype)
    return int(info.min if lowest else info.max)


def _clamp_args(op: str, x, min, max):
    if min is None and max is None:
        raise ValueError(f"{op}: at least one of min and max must be given{source_info.where()}")
    x = as_tensor(x)
    dtype = result_type(x, *(b for b in (min, max) if b is not None))
    _refuse_complex(clamp_p, REAL, dtype)
    return dtype, _bound(min, dtype, True), _bound(max, dtype, False)


def clamp(x, min=None, max=None):
    """`x` limited to `[min, max]` (scalars or tensors, broadcasting; either may be None). Where
    `min > max` the result is `max`, as in PyTorch. `clip` is the same function.

    >>> aotjax.clamp(aotjax.tensor([-2, 0, 5]), min=-1, max=3)
    tensor([-1,  0,  3])
    >>> aotjax.clamp(aotjax.tensor([-2.0, 5.0]), max=1.0)
    tensor([-2.,  1.])
    """
    dtype, lo, hi = _clamp_args("clamp", x, min, max)
    return clamp_p.bind(*promote(x, lo, hi, dtype=dtype))


def clamp_(x, min=None, max=None):
    """In-place `clamp` (`clip_` is the same function).

    >>> x = aotjax.tensor([-2.0, 5.0])
    >>> x.clamp_(0.0, 1.0) is x
    True
    """
    dtype, lo, hi = _clamp_args("clamp_", x, min, max)
    check_inplace_cast("clamp_", dtype, x.dtype)
    return bind_inplace(clamp__p, x, *promote(lo, hi, dtype=x.dtype))


clip, clip_ = clamp, clamp_


def _lerp_lower(start, end, weight):
    # NOTE: PyTorch's formula: exact at both ends (weight 0 gives start, weight 1 gives end).
    diff = end - start
    return jnp.where(jnp.abs(weight) < 0.5, start + weight * diff, end - diff * (1 - weight))


lerp_p = elementwise("lerp", _lerp_lower, out_dtype=FLOATING.rule("lerp"), layout=tensor_layout)
lerp__p = inplace_variant(lerp_p)
defjvp(lerp_p, lambda t, s, e, w: mul(t, sub(1, w)), lambda t, s, e, w: mul(t, w),
       lambda t, s, e, w: mul(t, sub(e, s)))


def lerp(start, end, weight):
    """`start + weight * (end - start)` (`weight` a scalar or a tensor; integers promote to float32).

    >>> aotjax.lerp(aotjax.tensor([0.0, 10.0]), aotjax.tensor([10.0, 20.0]), 0.5)
    tensor([ 5., 15.])
    """
    dtype = float_or_default(result_type(start, end, weight))
    return lerp_p.bind(*promote(start, end, weight, dtype=dtype))


def lerp_(start, end, weight):
    """In-place `lerp`: writes into `start`.

    >>> x = aotjax.tensor([0.0, 10.0])
    >>> x.lerp_(aotjax.tensor([10.0, 20.0]), 0.25)
    tensor([ 2.5, 12.5])
    """
    dtype = float_or_default(result_type(start, end, weight))
    check_inplace_cast("lerp_", dtype, start.dtype)
    return bind_inplace(lerp__p, start, *promote(end, weight, dtype=start.dtype))


hooks.add = add_p.bind  # tangents and cotangents are summed with `add`


# -- Tensor methods and operators ----------------------------------------------------------------
for _op in (add, sub, div, floor_divide, pow, lerp, gelu, round, add_, sub_, div_, floor_divide_, pow_, lerp_,
            gelu_, round_):
    method(_op)  # NOTE: the ops the families define are installed by `_public`; `pow`/`pow_` replace theirs


def _where_method(x, condition, y):
    """`x.where(condition, y)`: `where(condition, x, y)`, as `torch.Tensor.where`.

    >>> aotjax.tensor([1.0, 2.0]).where(aotjax.tensor([True, False]), 0.0)
    tensor([1., 0.])
    """
    return where(condition, x, y)


method(_where_method, "where")
method(clamp, "clamp", "clip")
method(clamp_, "clamp_", "clip_")
for _op, _name in ((add, "add"), (sub, "sub"), (mul, "mul"), (div, "truediv"), (floor_divide, "floordiv"),
                   (remainder, "mod"), (pow, "pow"), (bitwise_and, "and"), (bitwise_or, "or"), (bitwise_xor, "xor")):
    method(_op, f"__{_name}__")
    method(reflected(_op), f"__r{_name}__")
for _op, _name in ((eq, "eq"), (ne, "ne"), (lt, "lt"), (le, "le"), (gt, "gt"), (ge, "ge"), (neg, "neg"),
                   (abs, "abs"), (bitwise_not, "invert"), (add_, "iadd"), (sub_, "isub"), (mul_, "imul"),
                   (div_, "itruediv"), (floor_divide_, "ifloordiv"), (remainder_, "imod"), (pow_, "ipow"),
                   (bitwise_and_, "iand"), (bitwise_or_, "ior"), (bitwise_xor_, "ixor")):
    method(_op, f"__{_name}__")
