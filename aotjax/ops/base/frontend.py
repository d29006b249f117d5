"""Helpers shared by the op functions: operand conversion, dtype promotion, dim and shape arguments,
and `bind_inplace`, the one way in-place ops bind their primitives (PyTorch's write checks)."""
from __future__ import annotations

import functools
import inspect
import warnings
import weakref
from typing import Callable, Sequence

import jax
import numpy as np

import aotjax.interpreters.eval  # noqa: F401  (installs eager evaluation, which every op needs)
from aotjax.core import views
from aotjax.core.avals import PYTHON_SCALARS, canonicalize_dtype, default_float_dtype, default_int_dtype
from aotjax.core.errors import AliasingError, DTypeError, DTypeTruncationWarning, ShapeError, UnsupportedError
from aotjax.core.interpreter import Trace, Tracer, find_top_trace
from aotjax.core.primitive import Primitive
from aotjax.core.source_info import user_stacklevel, where
from aotjax.interpreters.eval import contiguous_layout_rules, read
from aotjax.ops.base.layout import elementwise_layout, preserve_layout, tensor_layout
from aotjax.ops.base.promotion import can_cast
from aotjax.tensor import Storage, Tensor, canonical_dim

__all__ = ["canonical_dim", "canonical_dims", "normalize_shape", "to_dtype", "is_scalar", "device"]


def is_scalar(x) -> bool:
    return isinstance(x, PYTHON_SCALARS)


def canonical_dims(dims, ndim: int, op: str = "") -> tuple[int, ...]:
    """A sorted tuple of canonical dims; None means all dims."""
    if dims is None:
        return tuple(range(ndim))
    if isinstance(dims, (int, np.integer)):
        d, n = int(dims), max(ndim, 1)
        if -n <= d < n:  # NOTE: the common case, without building a set
            return (d % n,)
        dims = (dims,)
    return tuple(sorted({canonical_dim(int(d), ndim, op) for d in dims}))


def normalize_shape(shape: Sequence) -> tuple[int, ...]:
    """`f(2, 3)` and `f((2, 3))` both mean shape (2, 3)."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = shape[0]
    return tuple(int(s) for s in shape)


# NOTE: these give a contiguous result whenever no operand has strides: eager evaluation skips them then
contiguous_layout_rules.update((elementwise_layout, tensor_layout, preserve_layout))


def to_dtype(dtype, op: str = "") -> np.dtype:
    """A canonical numpy dtype from a dtype-like (`aotjax.float32`, `'float32'`, `np.int8`, `float`, `torch.int8`);
    a DTypeError naming `op` for anything else. Every dtype a user asks for passes here: a 64-bit one
    without jax's x64 mode gets its 32-bit form and a `DTypeTruncationWarning` (once per op and dtype)."""
    if dtype is float:
        return default_float_dtype()
    if dtype is int:
        return default_int_dtype()
    if dtype is bool:
        return np.dtype(np.bool_)
    if type(dtype).__module__ == "torch":  # NOTE: `torch.float32` by its name, for code ported from PyTorch
        dtype = str(dtype).removeprefix("torch.")
    try:
        requested = np.dtype(dtype)
        canonical = canonicalize_dtype(requested)
    except TypeError:
        prefix = f"{op}: " if op else ""
        raise DTypeError(f"{prefix}unknown dtype {dtype!r}{where()}; use one of aotjax.float32, float16, "
                         f"bfloat16, float64, int8, int16, int32, int64, uint8, bool, complex64") from None
    if canonical != requested and (op, requested) not in _truncations_warned:
        _warn_truncated(requested, canonical, op)
    return canonical


_truncations_warned: set = set()  # (op, requested dtype): jax warns once per process, so do we


def _warn_truncated(requested: np.dtype, canonical: np.dtype, op: str) -> None:
    _truncations_warned.add((op, requested))
    warnings.warn(f"{op or 'aotjax'}: explicitly requested dtype {requested.name} is not available, and will be "
                  f"truncated to dtype {canonical.name}. To enable 64-bit dtypes, set the jax_enable_x64 "
                  f"configuration option (`jax.config.update('jax_enable_x64', True)`, before creating tensors) or "
                  f"the JAX_ENABLE_X64=1 shell environment variable.", DTypeTruncationWarning,
                  stacklevel=user_stacklevel())


def device(device, op: str = "device"):
    """The `jax.Device` a device-like names: a `jax.Device`, a platform name as jax or PyTorch spells it
    (`"cpu"`, `"cpu:0"`, `"gpu"`/`"cuda:1"`, `"tpu"`), a `torch.device`, or an index into `jax.devices()`; None
    stays None. `Tensor.device` is such a `jax.Device`, so `t.device == aotjax.device("cpu")` compares them.
    An unknown or absent device raises a ValueError naming `op`.

    >>> import jax
    >>> aotjax.device("cpu:0") == jax.devices("cpu")[0], aotjax.zeros(2).device == aotjax.device("cpu")
    (True, True)
    """
    if device is None or isinstance(device, jax.Device):
        return device
    if isinstance(device, (int, np.integer)) and not isinstance(device, bool):
        platform, index = "", str(device)
    else:
        platform, _, index = str(device).partition(":")
    try:
        devices = jax.devices(_PLATFORMS.get(platform, platform) or None)
        return devices[int(index or 0)]
    except (RuntimeError, ValueError, IndexError):
        available = ", ".join(str(d) for d in jax.devices())
        raise ValueError(f"{op}: unknown device {device!r}{where()}; the devices jax has here are {available} (pass "
                         f"one of them, a platform name such as 'cpu', or a jax.Device)") from None


_PLATFORMS = {"cuda": "gpu", "rocm": "gpu"}  # PyTorch's names for jax's `gpu` platform


def gpus() -> list:
    """jax's GPUs here (none without a GPU backend)."""
    try:
        return jax.devices("gpu")
    except RuntimeError:  # NOTE: jax has no GPU backend here
        return []


def require_gpus() -> list:
    """`gpus()`, or torch's error where there is none (`t.cuda()`, `aotjax.cuda.set_device`, ...)."""
    found = gpus()
    if not found:
        raise RuntimeError(f"No CUDA GPUs are available{where()}: jax has no GPU on this machine (its devices: "
                           f"{', '.join(str(d) for d in jax.devices())}). Guard GPU code with "
                           f"aotjax.cuda.is_available().")
    return found


def place(x, dev, copy: bool = False):
    """Eager tensor `x` on the jax device `dev` (`x` itself when it is there already, unless `copy`), as
    `jax.device_put`; a new tensor keeps `x`'s layout. A traced tensor is returned as it is: the compiled program's
    placement follows its arguments'."""
    if dev is None or isinstance(x, Tracer) or (not copy and getattr(x, "devices", lambda: ())() == {dev}):
        return x
    out = Tensor._wrap(jax.device_put(read(x), dev))
    out._strides = preserve_layout([x], tuple(x.shape))
    return out


# -- in-place ops --------------------------------------------------------------------------------
def bind_inplace(prim: Primitive, *args, **params):
    """Bind the in-place primitive `prim` (a data or a metadata mutation) after the checks PyTorch makes
    on a write: every in-place op goes through here, so they hold under every transform. A write into a
    tensor captured from outside the function being transformed raises (it must be an argument, so that
    the boundary can apply the write to the caller) unless that transform carries such writes out itself
    (`Trace.writes_captured`: a loop body, jit's live state), as does a data write into an expanded view. An
    AliasingError raised by the write (through a view that cannot be written) is prefixed with `prim`.
    A functional `prim` is simply bound (for helpers shared by an op and its in-place form).

    >>> from aotjax.ops.indexing.subscripts import fill__p
    >>> x = aotjax.zeros(3)
    >>> bind_inplace(fill__p, x, np.float32(2)) is x
    True
    """
    if not prim.mutates:
        return prim.bind(*args, **params)
    trace = find_top_trace(args)
    if trace.main.level:
        _check_writable(prim, trace, args)
    if prim.metadata_view is not None:
        return prim.bind(*args, **params)
    for i in prim.mutates:
        if getattr(args[i], "_strides", None) is not None:  # NOTE: only a strided tensor can overlap itself
            _check_no_internal_overlap(prim, args)
            break
    try:
        out = prim.bind(*args, **params)
    except AliasingError as e:
        if not str(e).startswith(prim.name + ":"):
            raise AliasingError(f"{prim.name}: {e}") from None
        raise
    if traced_selects:
        _write_back_traced_selects(prim, args)
    return out


def _check_writable(prim: Primitive, trace: Trace, args) -> None:
    data = prim.metadata_view is None  # NOTE: a view of a captured tensor may change its own view (`t_`), not data
    for i in prim.mutates:
        a = args[i]
        outside = not (isinstance(a, Tracer) and a._trace.main is trace.main)
        if outside or (data and trace.is_captured(a)):
            if not isinstance(a, Tracer) and a._storage in constants_made_inside:
                raise AliasingError(
                    f"{prim.name}: in-place write to a tensor made from data inside the function being transformed"
                    f"{where()}: `aotjax.tensor(...)` is a constant of the traced program (concrete: it can index, "
                    f"mask, be read by Python). Write into a copy of it (`aotjax.tensor(...).clone()`), which is "
                    f"the function's own tensor.")
            if outside and data and trace.writes_captured(a):
                # NOTE: a loop body, jit's live state: the write is carried out (`Trace.writes_captured`). A view
                # change (`t_`) of a captured tensor is not: the caller's object could not be re-viewed.
                continue
            raise AliasingError(
                f"{prim.name}: in-place write to a tensor captured from outside the function being "
                f"transformed{where()}. Pass the tensor to the function as an argument (its mutation is "
                f"then applied to the caller's tensor), or write into a copy (`t.clone()`).")


# NOTE: `x[i]` with a traced 0-d integer index `i` (a loop's index): PyTorch selects (a view), but a view chain holds
# no traced index, so aotjax gathers a copy. A write into that copy (or a view of it) is then written back into `x`
# (`x[i] = copy`), so that `x[i].add_(1)` in a loop body does what it does in PyTorch. storage key of the copy ->
# (weakref of the copy, the write-back).
traced_selects: dict[int, tuple[weakref.ref, Callable[[], None]]] = {}


def record_traced_select(copy, write_back: Callable[[], None]) -> None:
    """`copy` is `x[i]` with a traced 0-d index: after a write into it, call `write_back` (`x[i] = copy`)."""
    key = views.storage_key(copy)
    traced_selects[key] = (weakref.ref(copy, lambda _, table=traced_selects: table.pop(key, None)), write_back)


def _write_back_traced_selects(prim: Primitive, args) -> None:
    for i in prim.mutates:
        entry = traced_selects.get(views.storage_key(args[i]))
        if entry is not None and entry[0]() is not None:
            entry[1]()


# NOTE: the storages of tensors `aotjax.tensor` made while a transform traced, so that a write into one is
# refused with a message that says what it is (they are constants of the program, like captured tensors).
constants_made_inside: weakref.WeakSet = weakref.WeakSet()


def _check_no_internal_overlap(prim: Primitive, args) -> None:
    """As PyTorch: an in-place write into a tensor whose elements share memory (an expanded view, with a
    stride of 0 on a dim of size > 1) is an error."""
    for i in prim.mutates:
        a = args[i]
        strides = getattr(a, "_strides", None)
        if strides is not None and any(s == 0 and n > 1 for s, n in zip(strides, a.shape, strict=True)):
            raise AliasingError(
                f"{prim.name}: unsupported operation: more than one element of the written-to tensor (shape "
                f"{list(a.shape)}, stride {tuple(strides)}) refers to a single memory location{where()}. This "
                f"tensor is an expanded view; call .clone() on it before writing in place.")


# -- out= -------------------------------------------------------------------------------------------
def out_variant(fn: Callable) -> Callable:
    """`fn` taking PyTorch's keyword `out=`: the result is written into the tensor `out` (a tuple of tensors for
    an op with several results), which is returned, as in PyTorch (`write_out`). `aotjax.X` is the out variant of
    every op that has one in torch (`OUT_OPS`); Tensor methods take no `out=`, as in torch.

    >>> out = aotjax.zeros(2)
    >>> aotjax.add(aotjax.tensor([1.0, 2.0]), 1, out=out) is out, out
    (True, tensor([2., 3.]))
    """
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        sig = None
    if sig is not None and "out" in sig.parameters:  # NOTE: an op that takes `out=` itself (the unary ops)
        return fn
    op = _with_out_keyword(fn, sig) if sig is not None else None
    if op is None:
        def op(*args, out=None, **kwargs):
            result = fn(*args, **kwargs)
            return result if out is None else write_out(fn.__name__, result, out)
    return functools.wraps(fn)(op)


def _with_out_keyword(fn: Callable, sig: inspect.Signature) -> Callable | None:
    """`fn`'s out variant with `fn`'s own parameters (`sig`) and keyword `out=None`, compiled from source: called
    without `out`, it costs one plain call more than `fn` (a `*args, **kwargs` wrapper costs several times that,
    once per eager op). None where a parameter's name is one the source uses."""
    if {"fn", "write_out", "NAME", "result"} & set(sig.parameters):
        return None
    env: dict = {"fn": fn, "write_out": write_out, "NAME": fn.__name__}
    params, call, star = [], [], False
    for i, p in enumerate(sig.parameters.values()):
        default = ""
        if p.default is not p.empty:
            env[f"D{i}"] = p.default
            default = f"=D{i}"
        if p.kind is p.VAR_POSITIONAL:
            params.append(f"*{p.name}")
            call.append(f"*{p.name}")
            star = True
        elif p.kind is p.VAR_KEYWORD:
            continue  # NOTE: added after `out`
        elif p.kind is p.KEYWORD_ONLY:
            if not star:
                params.append("*")
                star = True
            params.append(p.name + default)
            call.append(f"{p.name}={p.name}")
        else:
            params.append(p.name + default)
            call.append(p.name)
        if p.kind is p.POSITIONAL_ONLY and (i + 1 == len(sig.parameters) or list(sig.parameters.values())[i + 1].kind
                                            is not p.POSITIONAL_ONLY):
            params.append("/")
    if not star:
        params.append("*")
    params.append("out=None")
    kwargs = next((p.name for p in sig.parameters.values() if p.kind is p.VAR_KEYWORD), None)
    if kwargs is not None:
        params.append(f"**{kwargs}")
        call.append(f"**{kwargs}")
    source = (f"def op({', '.join(params)}):\n"
              f"    result = fn({', '.join(call)})\n"
              f"    return result if out is None else write_out(NAME, result, out)\n")
    exec(compile(source, f"<aotjax: out variant of {fn.__name__}>", "exec"), env)
    return env["op"]


def write_out(op: str, result, out):
    """`result` written into `out` as PyTorch's `out=` does: `out` keeps its dtype (the result must cast to it in
    place), an eager `out` of another shape is resized (with a warning unless it is empty), and it is returned.
    Under a transform the write is an ordinary in-place write into `out`, which must have the result's shape."""
    if isinstance(result, tuple):
        if not isinstance(out, (tuple, list)) or len(out) != len(result):
            raise TypeError(f"{op}: out= must be a tuple of {len(result)} tensors for this op, got {out!r}{where()}")
        written = [write_out(op, r, o) for r, o in zip(result, out)]
        return result._make(written) if hasattr(result, "_make") else tuple(written)
    if not isinstance(out, Tensor):
        raise TypeError(f"{op}: out= must be a Tensor, got {type(out).__name__}{where()}")
    if not can_cast(result.dtype, out.dtype):
        raise DTypeError(f"{op}: the result type {result.dtype.name} can't be cast to the desired output type "
                         f"{out.dtype.name} of out={out.aval.str_short()}{where()}; pass an out of dtype "
                         f"{result.dtype.name} (or convert after the op)")
    if tuple(out.shape) != tuple(result.shape):
        _resize_out(op, out, tuple(result.shape))
    return out.copy_(result)  # NOTE: the method: `copy_` is the indexing family's, which builds on this module


def _resize_out(op: str, out: Tensor, shape: tuple) -> None:
    """`out` given a new storage of `shape` (PyTorch resizes an out= tensor of the wrong shape)."""
    if isinstance(out, Tracer) or out._chain:
        what = "a traced tensor" if isinstance(out, Tracer) else "a view"
        raise (UnsupportedError if isinstance(out, Tracer) else ShapeError)(
            f"{op}: out= has shape {list(out.shape)} but the result has shape {list(shape)}, and {what} cannot be "
            f"resized{where()}; pass an out of shape {list(shape)}")
    if out.numel():
        warnings.warn(f"{op}: an output with one or more elements was resized since it had shape {list(out.shape)}, "
                      f"which does not match the required output shape {list(shape)}. Pass an out of the right "
                      f"shape, or one with zero elements, to silence this warning.", UserWarning,
                      stacklevel=user_stacklevel())
    out._init_slots(None, storage=Storage(jax.numpy.zeros(shape, out.dtype)))


# NOTE: the `aotjax.X` ops that take `out=` (as torch's do); `aotjax.ops` replaces each by its `out_variant`. A list
# of names, not a fact on each op: it is a property of torch's signature for the public name (`aotjax.add` takes
# `out=`, `Tensor.add` does not), and the ops come from a dozen factories (`_unary`, `_binary_family`, `from_jax`, ...)
# across the families, while the variant must replace the name in the namespace the user calls.
OUT_OPS = (
    "add", "sub", "mul", "div", "true_divide", "floor_divide", "remainder", "fmod", "pow", "atan2", "maximum",
    "minimum", "fmax", "fmin", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor",
    "logical_not", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "hypot", "copysign", "logaddexp",
    "logaddexp2", "xlogy", "lerp", "clamp", "clip", "where", "abs", "neg", "negative", "exp", "exp2", "expm1", "log",
    "log2", "log10", "log1p", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh",
    "atanh", "sigmoid", "sqrt", "rsqrt", "square", "reciprocal", "floor", "ceil", "round", "trunc", "frac", "sign",
    "erf", "erfc", "erfinv", "lgamma", "digamma", "nan_to_num", "isnan", "isinf", "isfinite", "sum", "prod", "mean",
    "nansum", "nanmean", "amax", "amin", "max", "min", "argmax", "argmin", "all", "any", "var", "std", "logsumexp",
    "cumsum", "cumprod", "norm", "matmul", "mm", "bmm", "mv", "dot", "addmm", "addmv", "baddbmm", "addr", "inner",
    "vdot", "kron", "tensordot", "cross", "chain_matmul", "cat", "concat", "concatenate",
    "stack", "sort", "topk", "index_select", "gather", "masked_select", "tril", "triu",
)


def with_out_variants(namespace: dict) -> dict:
    """The `out_variant` of each op of `OUT_OPS` that `namespace` (a module's globals) defines. A Tensor method that
    is that op becomes its out variant too, so that `Tensor.add is aotjax.add` still holds."""
    variants = {}
    for name in OUT_OPS:
        fn = namespace.get(name)
        if callable(fn):
            variants[name] = out_variant(fn)
            if getattr(Tensor, name, None) is fn:
                setattr(Tensor, name, variants[name])
    return variants
