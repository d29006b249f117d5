"""Creation ops (`tensor`, from concrete data, is aotjax/ops/base/data.py's): `zeros`, `ones`, `full`, `arange`,
`linspace`, `eye` and their `_like` forms are primitives with no operands, so that under `make_jaxpr` they are staged as
equations (`full[shape=(2, 3) fill_value=0.0 dtype=float32]`) rather than captured as constants. A `_like`
op keeps its input's layout as PyTorch's `preserve_format` does: `full`'s `strides` param (None: contiguous)
records it, so every interpreter gives the result those strides.

Compositions of them: the `Tensor.new_*` factories (`new_zeros new_ones new_full new_empty new_tensor`, the dtype of
`self` by default), `logspace`, `tril_indices`, `triu_indices`, `scalar_tensor` and `empty_strided` (contiguous
strides only: XLA arrays have no strides of their own), `linspace` with traced ends (an `arange` and elementwise
ops); and placement (`device_put`)."""
from __future__ import annotations

import functools
import inspect
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from aotjax.autograd import graph
from aotjax.core.avals import python_scalar_dtype
from aotjax.core.errors import ConcretizationError, ShapeError, UnsupportedError
from aotjax.core.interpreter import Tracer
from aotjax.core.primitive import Recompute, output_size_flops
from aotjax.core.source_info import where
from aotjax.dtypes import preserve_format, strided
from aotjax.interpreters import hooks
from aotjax.interpreters.eval import read
from aotjax.interpreters.jvp import defjvp_zero
from aotjax.ops.base.casts import convert
from aotjax.ops.base.combinators import standard_primitive
from aotjax.ops.base.data import _check_ints_fit, _dtype, _python_scalar, tensor
from aotjax.ops.base.from_jax import from_jax
from aotjax.ops.base.frontend import device as to_device
from aotjax.ops.base.frontend import place
from aotjax.ops.base.layout import format_name, format_strides, is_non_overlapping_and_dense
from aotjax.ops.base.promotion import category, default_float_dtype, default_int_dtype, is_float
from aotjax.ops.creation import factories as creation
from aotjax.tensor import Tensor, contiguous_strides, method

__all__ = ["scalar_tensor", "device_put", "zeros", "ones", "full", "empty", "arange", "linspace", "eye", "zeros_like",
           "ones_like", "full_like", "empty_like"]


def _size(op: str, size) -> tuple[int, ...]:
    """`f(2, 3)`, `f((2, 3))` and `f([2, 3])` all mean shape (2, 3); sizes must be non-negative ints."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = size[0]
    try:
        shape = tuple(s if jax.export.is_symbolic_dim(s) else _index(s) for s in size)  # NOTE: symbolic: export
    except ConcretizationError:
        raise
    except TypeError:
        raise TypeError(f"{op}: a size must be ints, e.g. {op}(2, 3) or {op}((2, 3)); got "
                        f"{tuple(size)!r}{where()}") from None
    if any(s < 0 for s in shape):
        raise ShapeError(f"{op}: sizes must be non-negative, got {list(shape)}{where()}")
    return shape


def _index(s) -> int:
    if isinstance(s, (bool, float)) or not hasattr(s, "__index__"):
        raise TypeError
    return int(s.__index__())


_NAN = float("nan")


def _as_param(x, dtype: np.dtype):
    """`x` as the Python scalar type of `dtype`'s category (so equal params mean equal results)."""
    c = category(dtype)
    if c < 3 and isinstance(x, complex):
        x = x.real
    x = (bool, int, float, complex)[c](x)
    # NOTE: one NaN object, so that NaN params hit the eager compile cache (NaN != NaN, but `is` holds).
    return _NAN if isinstance(x, float) and x != x else x


# -- the keywords every torch factory takes -------------------------------------------------------
def factory(fn):
    """Factory `fn` with the keywords each of torch's takes: `requires_grad` (aotjax/autograd/graph.py `factory`),
    `layout` (`aotjax.strided`, the only one), `pin_memory` (accepted: XLA manages host memory itself) and, where
    `fn` has no `device` of its own, `device` (the result placed there)."""
    has_device = "device" in inspect.signature(fn).parameters

    @functools.wraps(fn)
    def make(*args, layout=None, pin_memory: bool = False, **kwargs):
        if layout is not None and layout is not strided and str(layout) not in ("torch.strided", "aotjax.strided"):
            raise UnsupportedError(f"{fn.__name__}: layout={layout!r} is not supported{where()}: aotjax tensors are "
                                   f"dense, so only layout=aotjax.strided (the default) is")
        if not isinstance(pin_memory, (bool, np.bool_)):
            raise TypeError(f"{fn.__name__}: pin_memory must be a bool, got {pin_memory!r}{where()}")
        dev = None if has_device else to_device(kwargs.pop("device", None), fn.__name__)
        return place(fn(*args, **kwargs), dev)
    return graph.factory(make)


# -- placement -----------------------------------------------------------------------------------------
def device_put(x, device=None):
    """`x` (a Tensor, or a pytree of them) copied to `device`: a `jax` device, or a `jax.sharding.Sharding`
    (`NamedSharding(mesh, PartitionSpec(...))`) that lays it out over several devices, as `jax.device_put`. The
    result is a new tensor (as torch's `t.to(device)`); compiled functions take sharded tensors as they are, and
    XLA partitions the program from their shardings (a batch sharded over a `data` axis with replicated parameters
    is data parallelism, the gradient's all-reduce inserted by XLA). A written sharded argument keeps its sharding.

    >>> import jax
    >>> t = aotjax.device_put(aotjax.ones(2), jax.devices()[0])
    >>> t.devices() == {jax.devices()[0]}
    True
    """
    def put(t):
        if not isinstance(t, Tensor):
            return t
        if isinstance(t, Tracer):
            raise UnsupportedError(f"device_put of a traced tensor ({t.aval.str_short()}){where()}: place the "
                                   f"arguments before the call (their shardings then decide the program's)")
        return Tensor._wrap(jax.device_put(read(t), device))

    return jax.tree_util.tree_map(put, x)


# -- full ------------------------------------------------------------------------------------------
full_p = standard_primitive(
    "full", lambda *, shape, fill_value, dtype, strides: shape, lambda *, shape, fill_value, dtype, strides: dtype,
    lambda *, shape, fill_value, dtype, strides: jnp.full(shape, fill_value, dtype),
    recompute=Recompute.CHEAP, flops=output_size_flops)
full_p.layout_rule = lambda operands, out_shape, /, *, strides, **params: strides
full_p.print_rule = lambda params: {k: v for k, v in params.items() if k != "strides" or v is not None}
defjvp_zero(full_p)


def _full(shape, fill_value, dtype, like=None, device=None, memory_format=preserve_format, op="full") -> Tensor:
    """`full` on `device`, laid out in `memory_format` (for `preserve_format`: as `like`, a tensor whose layout a
    `_like` op preserves, if given; else contiguous)."""
    strides = format_strides(format_name(memory_format, op), shape, like, op)
    out = full_p.bind(shape=shape, fill_value=_as_param(fill_value, dtype), dtype=dtype, strides=strides)
    return place(out, to_device(device, op))


@factory
def full(size, fill_value, dtype=None, device=None) -> Tensor:
    """A tensor of shape `size` filled with `fill_value`; the dtype follows `fill_value` as in PyTorch
    (float → float32, int → the default int dtype, bool → bool) unless `dtype` is given.

    >>> aotjax.full((2, 2), 7)
    tensor([[7, 7],
            [7, 7]])
    """
    fill_value = _python_scalar("full", fill_value)
    dtype = _dtype("full", dtype, python_scalar_dtype(fill_value))
    if isinstance(fill_value, int):
        _check_ints_fit("full", fill_value, fill_value, dtype)
    return _full(_size("full", (size,)), fill_value, dtype, device=device)


@factory
def zeros(*size, dtype=None, device=None) -> Tensor:
    """A tensor of zeros (float32 unless `dtype` is given); `zeros(2, 3)` or `zeros((2, 3))`. `device` places it
    (a `jax.Device`, `'cpu'`, `'cpu:0'`: `aotjax.device`); under a transform placement follows the arguments.

    >>> aotjax.zeros(2, dtype=aotjax.int8)
    tensor([0, 0], dtype=int8)
    """
    return _full(_size("zeros", size), 0, _dtype("zeros", dtype, default_float_dtype()), device=device, op="zeros")


hooks.zeros = lambda aval: zeros(*aval.shape, dtype=aval.dtype)
hooks.arange = lambda n: arange(n, dtype=np.int32)


@factory
def ones(*size, dtype=None, device=None) -> Tensor:
    """A tensor of ones (float32 unless `dtype` is given); `ones(2, 3)` or `ones((2, 3))`.

    >>> aotjax.ones(3)
    tensor([1., 1., 1.])
    """
    return _full(_size("ones", size), 1, _dtype("ones", dtype, default_float_dtype()), device=device, op="ones")


@factory
def empty(*size, dtype=None, device=None, memory_format=preserve_format) -> Tensor:
    """An "uninitialized" tensor: XLA has no uninitialized memory, so it holds zeros. `memory_format` (contiguous,
    or `channels_last` for 4-d) sets its strides.

    >>> aotjax.empty(2, 3).shape
    (2, 3)
    """
    return _full(_size("empty", size), 0, _dtype("empty", dtype, default_float_dtype()), device=device,
                 memory_format=memory_format, op="empty")


@factory
def full_like(input, fill_value, dtype=None, device=None, memory_format=preserve_format) -> Tensor:
    """A tensor of `input`'s shape and layout (and dtype, unless `dtype` is given) filled with `fill_value`.

    >>> aotjax.full_like(aotjax.zeros(2), 0.5)
    tensor([0.5, 0.5])
    """
    fill_value = _python_scalar("full_like", fill_value)
    dtype = _dtype("full_like", dtype, input.dtype)
    if isinstance(fill_value, int):
        _check_ints_fit("full_like", fill_value, fill_value, dtype)
    return _full(tuple(input.shape), fill_value, dtype, input, device, memory_format, "full_like")


@factory
def zeros_like(input, dtype=None, device=None, memory_format=preserve_format) -> Tensor:
    """Zeros of `input`'s shape and dtype (unless `dtype` is given), laid out as `input` is (PyTorch's
    `preserve_format`: a transposed input gives a transposed result).

    >>> aotjax.zeros_like(aotjax.tensor([1, 2]))
    tensor([0, 0])
    >>> aotjax.zeros_like(aotjax.zeros(2, 3).t()).stride()
    (1, 3)
    """
    return _full(tuple(input.shape), 0, _dtype("zeros_like", dtype, input.dtype), input, device, memory_format,
                 "zeros_like")


@factory
def ones_like(input, dtype=None, device=None, memory_format=preserve_format) -> Tensor:
    """Ones of `input`'s shape, layout and dtype (unless `dtype` is given).

    >>> aotjax.ones_like(aotjax.zeros(2), dtype=aotjax.bool)
    tensor([ True,  True])
    """
    return _full(tuple(input.shape), 1, _dtype("ones_like", dtype, input.dtype), input, device, memory_format,
                 "ones_like")


@factory
def empty_like(input, dtype=None, device=None, memory_format=preserve_format) -> Tensor:
    """An "uninitialized" tensor of `input`'s shape, layout and dtype (zeros: XLA has no uninitialized memory).

    >>> aotjax.empty_like(aotjax.zeros(2, 3)).shape
    (2, 3)
    """
    return _full(tuple(input.shape), 0, _dtype("empty_like", dtype, input.dtype), input, device, memory_format,
                 "empty_like")


# -- arange ----------------------------------------------------------------------------------------
def _arange_length(start, end, step) -> int:
    if all(isinstance(v, int) for v in (start, end, step)):
        return max(-((start - end) // step), 0)  # exact ceil((end - start) / step)
    return max(math.ceil((end - start) / step), 0)


def _accumulation_dtype() -> np.dtype:
    """Float values are computed in the widest float the device has, then rounded (as PyTorch does)."""
    return np.dtype(np.float64) if jax.config.jax_enable_x64 else np.dtype(np.float32)


def _arange_lower(*, start, end, step, dtype):
    n = _arange_length(start, end, step)
    if not is_float(dtype) and all(isinstance(v, int) for v in (start, end, step)):
        return start + step * lax.iota(dtype, n)
    acc = _accumulation_dtype()
    return (start + step * lax.iota(acc, n)).astype(dtype)


arange_p = standard_primitive(
    "arange", lambda *, start, end, step, dtype: (_arange_length(start, end, step),),
    lambda *, start, end, step, dtype: dtype, _arange_lower, recompute=Recompute.CHEAP, flops=output_size_flops)
defjvp_zero(arange_p)


@factory
def arange(start, end=None, step=1, dtype=None, device=None) -> Tensor:
    """Values from `start` (default 0) up to `end` (excluded) by `step`, as `torch.arange`.

    All-integer arguments give the default int dtype, any float one float32.

    >>> aotjax.arange(4)
    tensor([0, 1, 2, 3])
    >>> aotjax.arange(0, 1, 0.25)
    tensor([0.  , 0.25, 0.5 , 0.75])
    """
    if end is None:
        start, end = 0, start
    start, end, step = (_python_scalar("arange", v) for v in (start, end, step))
    args = (start, end, step)
    if any(isinstance(v, complex) for v in args):
        raise TypeError(f"arange: complex arguments are not supported, got {args}{where()}")
    all_int = all(isinstance(v, int) for v in args)
    dt = _dtype("arange", dtype, default_int_dtype() if all_int else default_float_dtype())
    if step == 0:
        raise ValueError(f"arange: step must be nonzero{where()}")
    if (end - start) * step < 0:
        raise ValueError(f"arange: the bounds start={start}, end={end} are inconsistent with the sign of "
                         f"step={step}{where()}")
    if not is_float(dt) and not all_int:
        return place(_integer_arange(start, end, step, dtype, dt), to_device(device, "arange"))
    if all_int and not is_float(dt):
        start, end, step = int(start), int(end), int(step)
    else:
        start, end, step = float(start), float(end), float(step)
    return place(arange_p.bind(start=start, end=end, step=step, dtype=dt), to_device(device, "arange"))


def _integer_arange(start, end, step, requested, dt) -> Tensor:
    """`arange` of an integer dtype from float bounds, as torch's: for int64 (asked for, even where jax's 32-bit mode
    gives int32) the bounds and step are truncated first, the length counted from them; for the other integer dtypes
    the length is counted from the floats, and the values are the truncated start plus multiples of the truncated
    step (`arange(0, 2, 0.5, dtype=int32)` is four 0s)."""
    wide = requested is not None and np.dtype(requested) == np.int64
    if wide and math.trunc(step) == 0:
        raise ValueError(f"arange: step must be nonzero (it is truncated to the integer dtype int64){where()}")
    n = _arange_length(*((math.trunc(v) for v in (start, end, step)) if wide else (start, end, step)))
    start, step = math.trunc(start), math.trunc(step)
    if step == 0:
        return _full((n,), start, dt)
    return arange_p.bind(start=start, end=start + n * step, step=step, dtype=dt)


# -- linspace --------------------------------------------------------------------------------------
def _linspace_values(start, end, delta, steps: int, i, select, fused: bool = False):
    """PyTorch's values at the indices `i` (0 to `steps - 1`, in the computing dtype), `delta` apart: the first half
    counted from `start` and the second from `end`, so that both ends are exact. `select` is `where` for `i`'s kind
    of array. `fused`: each `c + a * b` rounded once, as the fused multiply-add torch's compiled kernel makes of it
    (in float64: an integer result truncates it, and one rounding or two can differ by 1 there)."""
    half = steps // 2 if steps > 1 else 1
    if fused:
        return select(i < half, _fma64(delta, i, start), _fma64(-delta, steps - 1 - i, end))
    return select(i < half, start + delta * i, end - delta * (steps - 1 - i))


def _fma64(a, b, c):
    """`a * b + c` rounded once, in float64 arithmetic with no fused multiply-add (NumPy's; XLA's at any
    optimization level): the product split exactly in two (Dekker's), then summed with its rounding error."""
    def halves(x):
        big = 134217729.0 * x  # 2 ** 27 + 1
        hi = big - (big - x)
        return hi, x - hi
    p = a * b
    (ah, al), (bh, bl) = halves(a), halves(b)
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl  # a * b == p + e exactly
    s = p + c
    v = s - p
    t = (p - (s - v)) + (c - v)  # p + c == s + t exactly
    return s + (t + e)


_HOST_LINSPACE = 1 << 16  # the most values of an integer `linspace` computed on the host in jax's 32-bit mode


def _linspace_lower(*, start, end, steps, dtype):
    delta = (end - start) / (steps - 1) if steps > 1 else 0.0
    if category(dtype) < 2 and _accumulation_dtype() != np.float64 and steps <= _HOST_LINSPACE:
        # NOTE: torch computes in float64, then truncates: a float32 value an ulp below an integer would be 1 less.
        # Without x64 jax has no float64 on the device; the values (static: `steps`, the ends) are computed here
        i = np.arange(steps, dtype=np.float64)
        return jnp.asarray(_linspace_values(start, end, delta, steps, i, np.where, fused=True).astype(dtype))
    if category(dtype) < 2:
        return _linspace_ends(np.float64(start), np.float64(end), steps=steps, dtype=dtype)
    i = lax.iota(_accumulation_dtype(), steps)
    return _linspace_values(start, end, delta, steps, i, jnp.where).astype(dtype)


linspace_p = standard_primitive(
    "linspace", lambda *, start, end, steps, dtype: (steps,), lambda *, start, end, steps, dtype: dtype,
    _linspace_lower, recompute=Recompute.CHEAP, flops=output_size_flops)
defjvp_zero(linspace_p)


def _linspace_ends(start, end, *, steps: int, dtype):
    """An integer `linspace` between array ends, computed in float64 as torch's, then truncated: jax's 32-bit mode
    has no float64 arrays, but one computation may use them inside (`jax.enable_x64`)."""
    with jax.enable_x64(True):
        start, end = (jnp.asarray(v).astype(jnp.float64) for v in (start, end))
        span = end - start  # NOTE: a divisor XLA cannot make a product by its reciprocal (an ulp off torch's step)
        delta = span / (span * 0 + (steps - 1)) if steps > 1 else 0.0
        i = lax.iota(jnp.float64, steps)
        return _linspace_values(start, end, delta, steps, i, jnp.where, fused=True).astype(dtype)


linspace_ends_p = from_jax("linspace_ends", _linspace_ends, flops=output_size_flops)


def _linspace_traced(start, end, steps: int, dtype) -> Tensor:
    """`linspace` with traced 0-d tensor ends: the same values, composed of tensor ops on their values (`detach`ed:
    torch reads the ends as numbers, so the result has no derivative in them)."""
    acc = _accumulation_dtype()
    if category(dtype) < 2:
        # NOTE: computed in float64, as torch's: float32 values an ulp below an integer would truncate to 1 less. A
        # number end (truncated: integral) goes in as an integer, exactly
        ends = [v.detach() if isinstance(v, Tensor) else creation.tensor(int(v)) if abs(v) < 2 ** 31 else
                creation.tensor(v, dtype=acc) for v in (start, end)]
        return linspace_ends_p.bind(*ends, steps=steps, dtype=np.dtype(dtype), chain=())
    start, end = (convert(v.detach(), acc) if isinstance(v, Tensor) else v for v in (start, end))
    span = end - start
    # NOTE: a divisor XLA cannot turn into a product by its reciprocal, which is an ulp off torch's step (and an
    # integer dtype's truncation makes that a 1)
    delta = span / (span * 0 + (steps - 1)) if steps > 1 else 0.0
    i = arange_p.bind(start=0.0, end=float(steps), step=1.0, dtype=acc)
    return convert(_linspace_values(start, end, delta, steps, i, lambda c, x, y: x.where(c, y)), dtype)


def _linspace_end(op: str, v, dtype):
    """A `linspace`/`logspace` end: a number, or a traced 0-d tensor kept as it is; an integer `dtype` truncates it
    (torch converts the ends to `dtype` first)."""
    if isinstance(v, Tensor) and v.ndim != 0:
        raise ShapeError(f"{op}: expected start and end to be numbers or 0-d tensors, got {v.aval.str_short()}"
                         f"{where()}")
    if not isinstance(v, Tracer):
        v = float(_python_scalar(op, v).real)
        return float(math.trunc(v)) if category(dtype) == 1 and math.isfinite(v) else v
    if category(v.dtype) == 3:
        v = v.real
    return v.trunc() if category(dtype) == 1 and category(v.dtype) == 2 else v


@factory
def linspace(start, end, steps, dtype=None, device=None) -> Tensor:
    """`steps` evenly spaced values from `start` to `end`, both included (float32 unless `dtype`). The ends are
    numbers or 0-d tensors, traced ones too (the result's shape depends on `steps` only); as torch, the result has
    no derivative in them, and an integer `dtype` truncates them first.

    >>> aotjax.linspace(0, 1, 5)
    tensor([0.  , 0.25, 0.5 , 0.75, 1.  ])
    >>> aotjax.jit(lambda end: aotjax.linspace(0, end, 3))(aotjax.tensor(4.0))
    tensor([0., 2., 4.])
    """
    steps = _python_scalar("linspace", steps)
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 0:
        raise ValueError(f"linspace: steps must be a non-negative int, got {steps!r}{where()}")
    dt = _dtype("linspace", dtype, default_float_dtype())
    start, end = (_linspace_end("linspace", v, dt) for v in (start, end))
    if isinstance(start, Tracer) or isinstance(end, Tracer):
        out = _linspace_traced(start, end, steps, dt)
    else:
        out = linspace_p.bind(start=start, end=end, steps=steps, dtype=dt)
    return place(out, to_device(device, "linspace"))


# -- eye -------------------------------------------------------------------------------------------
eye_p = standard_primitive(
    "eye", lambda *, n, m, dtype: (n, m), lambda *, n, m, dtype: dtype,
    lambda *, n, m, dtype: jnp.eye(n, m, dtype=dtype), recompute=Recompute.CHEAP, flops=output_size_flops)
defjvp_zero(eye_p)


@factory
def eye(n, m=None, dtype=None, device=None) -> Tensor:
    """The `n` x `m` identity matrix (`m` defaults to `n`; float32 unless `dtype` is given).

    >>> aotjax.eye(2, dtype=aotjax.int8)
    tensor([[1, 0],
            [0, 1]], dtype=int8)
    """
    n, m = _size("eye", (n, n if m is None else m))
    return place(eye_p.bind(n=n, m=m, dtype=_dtype("eye", dtype, default_float_dtype())), to_device(device, "eye"))


@factory
def scalar_tensor(s, *, dtype=None, device=None):
    """A 0-d tensor holding `s`, of the default float dtype unless `dtype` says otherwise (as PyTorch; `device` is
    accepted for compatibility).

    >>> aotjax.scalar_tensor(3)
    tensor(3.)
    """
    return creation.tensor(s, dtype=dtype or default_float_dtype())


__all__ += ["logspace", "tril_indices", "triu_indices", "empty_strided"]


# -- Tensor.new_* ----------------------------------------------------------------------------------
@factory
def new_zeros(self: Tensor, *size, dtype=None, device=None) -> Tensor:
    """Zeros of shape `size` with `self`'s dtype (unless `dtype` is given), as `torch.Tensor.new_zeros`.

    >>> aotjax.tensor([1, 2]).new_zeros(2, 3).dtype == aotjax.tensor([1]).dtype
    True
    """
    return zeros(*size, dtype=_dtype("new_zeros", dtype, self.dtype), device=device)


@factory
def new_ones(self: Tensor, *size, dtype=None, device=None) -> Tensor:
    """Ones of shape `size` with `self`'s dtype (unless `dtype` is given).

    >>> aotjax.zeros(1, dtype=aotjax.int8).new_ones((2,))
    tensor([1, 1], dtype=int8)
    """
    return ones(*size, dtype=_dtype("new_ones", dtype, self.dtype), device=device)


@factory
def new_empty(self: Tensor, *size, dtype=None, device=None) -> Tensor:
    """An "uninitialized" tensor of shape `size` with `self`'s dtype (zeros: XLA has no uninitialized memory).

    >>> aotjax.zeros(1).new_empty(2, 2).shape
    (2, 2)
    """
    return empty(*size, dtype=_dtype("new_empty", dtype, self.dtype), device=device)


@factory
def new_full(self: Tensor, size, fill_value, dtype=None, device=None) -> Tensor:
    """A tensor of shape `size` filled with `fill_value`, of `self`'s dtype (not the fill value's) unless `dtype`.

    >>> aotjax.tensor([1, 2]).new_full((2,), 3.7)
    tensor([3, 3])
    """
    dt = _dtype("new_full", dtype, self.dtype)
    fill_value = _python_scalar("new_full", fill_value)
    if isinstance(fill_value, float) and dt.kind in "iub":
        fill_value = int(fill_value) if dt.kind != "b" else bool(fill_value)  # torch truncates toward zero
    return full(size, fill_value, dtype=dt, device=device)


@factory
def new_tensor(self: Tensor, data, dtype=None, device=None) -> Tensor:
    """A new tensor (a copy) from `data`, of `self`'s dtype unless `dtype` is given.

    >>> aotjax.tensor([1, 2]).new_tensor([1.5, 2.5])
    tensor([1, 2])
    """
    return tensor(data, dtype=_dtype("new_tensor", dtype, self.dtype), device=device)


for _fn in (new_zeros, new_ones, new_empty, new_full, new_tensor):
    method(_fn)


# -- logspace --------------------------------------------------------------------------------------
@factory
def logspace(start, end, steps, base=10.0, dtype=None) -> Tensor:
    """`steps` values from `base ** start` to `base ** end`, their exponents evenly spaced (float32 unless
    `dtype`), as `torch.logspace`. Computed in the widest float, then rounded to `dtype`. The ends are numbers or
    0-d tensors, traced ones too, as `linspace`'s.

    >>> aotjax.logspace(0, 2, 3)
    tensor([  1.,  10., 100.])
    >>> aotjax.logspace(0, 3, 4, base=2, dtype=aotjax.int8)
    tensor([1, 2, 4, 8], dtype=int8)
    """
    dt = _dtype("logspace", dtype, default_float_dtype())
    base = _python_scalar("logspace", base)
    if isinstance(base, complex):
        raise TypeError(f"logspace: a complex base is not supported, got {base!r}{where()}")
    steps = _python_scalar("logspace", steps)
    ends_dtype = dt if steps != 1 else _accumulation_dtype()  # NOTE: torch converts the ends to `dtype`, but for 1
    start, end = (_linspace_end("logspace", v, ends_dtype) for v in (start, end))
    exponents = linspace(start, end, steps, dtype=_accumulation_dtype())
    return convert(float(base) ** exponents, dt)


# -- tril_indices / triu_indices -------------------------------------------------------------------
def _tri_indices(op: str, row, col, offset, dtype, lower: bool) -> Tensor:
    row, col = _size(op, (row, col))
    offset = _python_scalar(op, offset)
    if not isinstance(offset, int) or isinstance(offset, bool):
        raise TypeError(f"{op}: offset must be an int, got {offset!r}{where()}")
    dt = _dtype(op, dtype, default_int_dtype())
    if dt.kind not in "iu":
        raise TypeError(f"{op}: dtype must be an integer dtype (torch allows int32 and int64), got {dt.name}"
                        f"{where()}")
    mask = np.tri(row, col, offset, dtype=bool) if lower else ~np.tri(row, col, offset - 1, dtype=bool)
    return tensor(np.stack(np.nonzero(mask)).reshape(2, -1), dtype=dt)


@factory
def tril_indices(row, col, offset=0, dtype=None) -> Tensor:
    """The indices of the lower triangle of a `row` x `col` matrix (the diagonal `offset` and below), as a
    `2 x N` tensor of rows then columns in row-major order, as `torch.tril_indices`.

    >>> aotjax.tril_indices(3, 3)
    tensor([[0, 1, 1, 2, 2, 2],
            [0, 0, 1, 0, 1, 2]])
    """
    return _tri_indices("tril_indices", row, col, offset, dtype, lower=True)


@factory
def triu_indices(row, col, offset=0, dtype=None) -> Tensor:
    """The indices of the upper triangle of a `row` x `col` matrix (the diagonal `offset` and above), as a
    `2 x N` tensor, as `torch.triu_indices`.

    >>> aotjax.triu_indices(2, 3, 1)
    tensor([[0, 0, 1],
            [1, 2, 2]])
    """
    return _tri_indices("triu_indices", row, col, offset, dtype, lower=False)


# -- empty_strided ---------------------------------------------------------------------------------
@factory
def empty_strided(size, stride, dtype=None, device=None) -> Tensor:
    """`torch.empty_strided` (zeros, as `empty`) for strides that cover the tensor's memory densely, in any order
    (contiguous, channels-last, a permutation): strides are metadata (XLA arrays have none), so a layout with gaps
    or overlaps cannot be allocated.

    >>> aotjax.empty_strided((2, 3), (3, 1)).shape
    (2, 3)
    >>> aotjax.empty_strided((2, 3), (1, 2)).stride()
    (1, 2)
    """
    shape = _size("empty_strided", (size,))
    stride = tuple(int(s) for s in stride)
    if len(stride) != len(shape):
        raise ValueError(f"empty_strided: size {list(shape)} and stride {list(stride)} must have the same length"
                         f"{where()}")
    if not is_non_overlapping_and_dense(shape, stride):
        raise UnsupportedError(
            f"empty_strided: only strides that cover the tensor densely are supported (such as "
            f"{list(contiguous_strides(shape))} for size {list(shape)}), got {list(stride)}{where()}; XLA arrays have "
            f"no strides of their own. Allocate with empty(size) and take a view (narrow, slicing) for a strided "
            f"layout")
    dt = _dtype("empty_strided", dtype, default_float_dtype())
    strides = None if stride == contiguous_strides(shape) else stride
    return place(full_p.bind(shape=shape, fill_value=_as_param(0, dt), dtype=dt, strides=strides),
                 to_device(device, "empty_strided"))
