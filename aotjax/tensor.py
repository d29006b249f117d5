"""The user-facing Tensor: PyTorch's mutable tensors and views on immutable XLA buffers.

An eager Tensor is a `Storage` (a mutable cell holding an immutable `jax.Array`, the base) plus a
view chain and its abstract value. Views share the storage: reading a view applies the chain to
the base, writing one computes a new base through the chain's inverses (see
`aotjax.interpreters.eval`). Every interpreter's tracer subclasses Tensor, so user code runs
unchanged under every transform. Method names and semantics follow `torch.Tensor`; most methods
are the functions of `aotjax.ops`, which each op family installs beside the op's definition
(`method(add, "add", "__add__")`): this module sits below the ops and imports only `aotjax.core`.

Each Tensor also records the strides and storage offset PyTorch would give it. They are metadata
only (XLA has no strides) and decide, as in PyTorch, whether `reshape`/`flatten`/`contiguous`
return a view or a copy and whether `view` is allowed. Every interpreter records them on the tensors it
makes for views (`view_layout`) and for functional primitives that keep their operands' layout
(elementwise ops, casts, `clone`: `record_layout`), so they hold under every transform.
"""
from __future__ import annotations

import math
import sys
from typing import Callable

import jax
import numpy as np

from aotjax.core.avals import ShapedArray, default_int_dtype
from aotjax.core.call_epoch import epoch as call_epoch
from aotjax.core.interpreter import Tracer
from aotjax.core.primitive import Primitive
from aotjax.core.source_info import where
from aotjax.core.views import ViewStep


class Storage:
    """A mutable cell holding an immutable `jax.Array`: the base shared by a tensor and its views.

    `owned` is False when the array came from the user without a copy, so that aotjax never
    donates (deletes) a buffer the user still holds."""

    __slots__ = ("base", "version", "owned", "grad_node", "grad_index", "__weakref__")

    def __init__(self, base, owned: bool = True):
        self.base = base
        self.version = 0
        self.owned = owned
        self.grad_node = None  # imperative autograd: the recorded node whose output `grad_index` the base is
        self.grad_index = 0


_TYPE_NAMES = {"float32": "FloatTensor", "float64": "DoubleTensor", "float16": "HalfTensor",
               "bfloat16": "BFloat16Tensor", "int64": "LongTensor", "int32": "IntTensor", "int16": "ShortTensor",
               "int8": "CharTensor", "uint8": "ByteTensor", "bool": "BoolTensor", "complex64": "ComplexFloatTensor",
               "complex128": "ComplexDoubleTensor"}  # the tensor type names `Tensor.type()` gives, as torch's


class Tensor:
    """A mutable n-dimensional array with PyTorch semantics, usable under every aotjax transform.

    >>> import aotjax
    >>> x = aotjax.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> x.t()[0].mul_(10)            # writes through the view into x
    tensor([10., 30.])
    >>> x
    tensor([[10.,  2.],
            [30.,  4.]])
    """

    # NOTE: `_ag` is the tensor's imperative autograd state (`aotjax.autograd.graph`): None when it does not require
    # grad. A plain eager tensor that requires grad is of the subclass `RecordingTensor`, so that `type(x) is Tensor`
    # (the ops' eager fast paths) means "records nothing".
    __slots__ = ("_storage", "_chain", "_aval", "_strides", "_offset", "_cache", "_ag", "__weakref__")
    __array_priority__ = 100

    def __init__(self, data, dtype=None):
        """`aotjax.Tensor(data, dtype)` is `aotjax.tensor(data, dtype)`."""
        raise NotImplementedError  # NOTE: replaced beside `tensor` in aotjax.ops.base.data when that module loads

    # -- construction (internal) ------------------------------------------------------------
    def _init_slots(self, aval: ShapedArray | None, strides: tuple | None = None, offset: int = 0,
                    storage=None, chain=()) -> None:
        """Set every slot of a tensor: what each interpreter's tracer `__init__` starts with, and how an existing
        tensor takes another's data in place (which advances `call_epoch`)."""
        self._storage = storage
        self._chain = chain
        self._aval = aval
        self._strides = strides
        self._offset = offset
        self._cache = None
        self._ag = None
        call_epoch[0] += 1

    @staticmethod
    def _wrap(array, owned: bool = True) -> "Tensor":
        """A new base tensor holding `array` (no copy): the one place an eager op's result tensor is made."""
        # NOTE: the slots are set inline, not by `_init_slots` or `Storage.__init__`: this runs once per eager op. A
        # staticmethod: the fast paths call it as a plain function (`_wrap = Tensor._wrap`), about 40 ns less than a
        # classmethod's bound call.
        storage = object.__new__(Storage)
        storage.base, storage.version, storage.owned, storage.grad_node = array, 0, owned, None
        t = object.__new__(Tensor)
        t._storage, t._chain, t._aval, t._strides, t._offset, t._cache, t._ag = storage, (), None, None, 0, None, None
        return t

    @classmethod
    def _view_of(cls, x: "Tensor", step, aval: ShapedArray, strides: tuple | None, offset: int) -> "Tensor":
        """A view of eager tensor `x` through one more view step, with its PyTorch layout (a view of a tensor that
        requires grad requires grad, unless the step detaches or grad is disabled: `view_records`)."""
        if x._ag is not None and view_records[0](step):
            t = object.__new__(recording_tensor[0])
            t._ag = view_records[1]
        else:
            t = object.__new__(Tensor)
            t._ag = None
        t._storage = x._storage  # NOTE: inline, as in `_wrap`: this runs once per eager view op
        t._chain = x._chain + (step,)
        t._aval = aval
        t._strides = strides
        t._offset = offset
        t._cache = None
        return t

    def _review(self, view_prim: Primitive, params: dict, aval: ShapedArray) -> "Tensor":
        """A metadata mutation (`t_`): this tensor itself becomes its view through `view_prim`, of abstract
        value `aval`, with the layout PyTorch gives it. For tensors that hold a view chain (eager,
        functional)."""
        self._strides, self._offset = view_layout(view_prim, self, aval.shape, params)
        self._chain = self._chain + (ViewStep.make(view_prim, params),)
        self._aval = aval
        self._cache = None
        call_epoch[0] += 1
        return self

    # -- metadata ------------------------------------------------------------------------------
    @property
    def aval(self) -> ShapedArray:
        """The abstract value (shape and dtype)."""
        a = self._aval
        if a is None:
            v = self._read()
            a = self._aval = ShapedArray(v.shape, v.dtype)
        return a

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape, as a tuple (PyTorch returns a `torch.Size`, a tuple subclass)."""
        a = self._aval
        if a is not None:
            return a.shape
        if not self._chain:
            base = self._storage.base
            try:
                return base.aval.shape  # NOTE: a jax.Array's aval is a plain attribute, its shape a property
            except AttributeError:
                return base.shape
        return self.aval.shape

    @property
    def dtype(self) -> np.dtype:
        """The element type, a `numpy.dtype` (`aotjax.float32` is `numpy.dtype('float32')`)."""
        a = self._aval
        if a is not None:
            return a.dtype
        if not self._chain:
            base = self._storage.base
            try:
                return base.aval.dtype  # NOTE: as in `shape`
            except AttributeError:
                return base.dtype
        return self.aval.dtype

    @property
    def ndim(self) -> int:
        """The number of dimensions."""
        return len(self.shape)

    def dim(self) -> int:
        """The number of dimensions."""
        return len(self.shape)

    def size(self, dim: int | None = None):
        """The shape, or the size of dimension `dim`.

        >>> aotjax.zeros(2, 3).size(-1)
        3
        """
        shape = self.shape
        return shape if dim is None else shape[canonical_dim(dim, len(shape))]

    def numel(self) -> int:
        """The number of elements (a symbolic expression for a batch-polymorphic shape, `aotjax.export`)."""
        return math.prod(self.shape)

    nelement = numel

    def element_size(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.numel() * self.dtype.itemsize

    def stride(self, dim: int | None = None):
        """The strides PyTorch would give this tensor (metadata: data is never strided).

        >>> aotjax.zeros(2, 3).t().stride()
        (1, 3)
        """
        s = self._strides if self._strides is not None else contiguous_strides(self.shape)
        return s if dim is None else s[canonical_dim(dim, self.ndim)]

    def storage_offset(self) -> int:
        """The offset PyTorch would give this tensor in its storage, in elements."""
        return self._offset

    def is_floating_point(self) -> bool:
        return np.issubdtype(self.dtype, np.floating) or self.dtype.name == "bfloat16"

    def is_complex(self) -> bool:
        return np.issubdtype(self.dtype, np.complexfloating)

    def type(self, dtype=None, non_blocking: bool = False, **kwargs):
        """With no `dtype`, the name torch gives the tensor's type (`'torch.FloatTensor'`, `'torch.cuda.LongTensor'`
        on a GPU); with one (a dtype, or a name such as `'torch.LongTensor'`), the tensor converted, as `to(dtype)`.

        >>> aotjax.ones(2).type(), aotjax.ones(2).type("torch.IntTensor").dtype
        ('torch.FloatTensor', dtype('int32'))
        """
        if dtype is None:
            return f"torch.{'cuda.' if self.is_cuda else ''}{_TYPE_NAMES.get(self.dtype.name, self.dtype.name)}"
        if isinstance(dtype, str) and dtype.endswith("Tensor"):
            name = dtype.rpartition(".")[2]
            dtype = next((d for d, n in _TYPE_NAMES.items() if n == name), None)
            if dtype is None:
                raise ValueError(f"type: invalid type {name!r}{where()}; expected a dtype or one of "
                                 f"{', '.join(f'torch.{n}' for n in _TYPE_NAMES.values())}")
        return self.to(dtype=dtype)

    @property
    def device(self):
        """The `jax` device holding the data (None for a traced tensor)."""
        devices = getattr(getattr(self._storage, "base", None), "devices", None)
        return next(iter(devices()), None) if devices else None

    @property
    def sharding(self):
        """The `jax.sharding.Sharding` of the data: how it is laid out over devices (None for a traced tensor).
        `aotjax.device_put(t, sharding)` makes a tensor with another one."""
        return getattr(getattr(self._storage, "base", None), "sharding", None)

    def devices(self) -> set:
        """The `jax` devices holding the data (empty for a traced tensor)."""
        devices = getattr(getattr(self._storage, "base", None), "devices", None)
        return set(devices()) if devices else set()

    @property
    def is_cpu(self) -> bool:
        """Whether the data is on jax's CPU devices (for a traced tensor: whether jax computes on the CPU)."""
        devices = self.devices()
        return all(d.platform == "cpu" for d in devices) if devices else jax.default_backend() == "cpu"

    # NOTE: torch's other device and layout flags, as scripts test them (`if x.is_cuda or x.is_xpu:`): none holds
    is_xpu = is_mps = is_meta = is_sparse = is_quantized = is_nested = is_mkldnn = property(lambda self: False)

    # -- values (eager only; tracers raise) -------------------------------------------------------
    def _read(self):
        """The current value, a `jax.Array`: the view chain applied to the base."""
        raise NotImplementedError  # NOTE: replaced by aotjax.interpreters.eval.read when that module loads

    def numpy(self) -> np.ndarray:
        """The value as a NumPy array (a copy)."""
        return np.asarray(self._read())

    def item(self):
        """The value of a one-element tensor as a Python scalar."""
        if self.numel() != 1:
            raise ValueError(f"item: only a one-element tensor can be converted to a Python scalar, this one "
                             f"has shape {list(self.shape)}")
        return self.numpy().reshape(()).item()

    def tolist(self):
        """The value as (nested) Python lists."""
        return self.numpy().tolist()

    def block_until_ready(self) -> "Tensor":
        """Wait until the value is computed (dispatch is asynchronous, as in JAX); returns `self`.

        >>> (aotjax.ones(2) * 2).block_until_ready()
        tensor([2., 2.])
        """
        (self._storage.base if not self._chain else self._read()).block_until_ready()
        return self

    def __array__(self, dtype=None, copy=None):
        a = np.asarray(self._read())
        return a.astype(dtype) if dtype is not None else a

    def __jax_array__(self):
        return self._read()

    def __bool__(self) -> bool:
        return bool(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __float__(self) -> float:
        return float(self.item())

    def __index__(self) -> int:
        if not np.issubdtype(self.dtype, np.integer):
            raise TypeError(f"only integer tensors of a single element can be used as an index, got "
                            f"{self.aval.str_short()}")
        return int(self.item())

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        values = self.numpy()
        if values.dtype.name == "bfloat16":  # NOTE: NumPy prints ml_dtypes' bfloat16 as integers: as float32 (exact)
            values = values.astype(np.float32)
        body = np.array2string(values, separator=", ", prefix="tensor(", formatter=None, **print_options)
        extra = "" if self._ag is None else autograd_repr[0](self)  # NOTE: `, grad_fn=<MulBackward0>` as torch
        if self.dtype in (np.dtype("float32"), np.dtype("bool"), np.dtype("complex64")) or (
                self.dtype == default_int_dtype() and self.numel() > 0):
            return f"tensor({body}{extra})"
        return f"tensor({body}, dtype={self.dtype.name}{extra})"

    def __format__(self, spec: str) -> str:
        if self.ndim == 0 and spec:
            return format(self.item(), spec)
        return repr(self)

    def __pos__(self):
        return self


# What `aotjax.set_printoptions` set, as NumPy's `array2string` arguments (none: NumPy's defaults).
print_options: dict = {}

_PROFILES = {"default": {}, "short": dict(precision=2, edgeitems=2), "full": dict(threshold=sys.maxsize)}


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None,
                     sci_mode=None) -> None:
    """How tensors print (`torch.set_printoptions`): `precision` digits, `threshold` elements before summarizing
    with `edgeitems` at each end, `linewidth` characters a line, a `profile` ("default", "short", "full") setting
    all of them, `sci_mode` False for fixed-point notation (True / None: NumPy's choice). aotjax's default prints
    as NumPy does (8 digits where torch shows 4); `profile="default"` goes back to it.

    >>> aotjax.set_printoptions(precision=2)
    >>> aotjax.tensor([1.23456])
    tensor([1.23])
    >>> aotjax.set_printoptions(profile="default")
    >>> aotjax.tensor([1.23456])
    tensor([1.23456])
    """
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueError(f"set_printoptions: profile must be 'default', 'short' or 'full', got {profile!r}")
        print_options.clear()
        print_options.update(_PROFILES[profile])
    for key, value in (("precision", precision), ("threshold", threshold), ("edgeitems", edgeitems),
                       ("max_line_width", linewidth)):
        if value is not None:
            print_options[key] = value
    if sci_mode is not None:
        print_options["suppress_small"] = not sci_mode


# NOTE: set by `aotjax.autograd.graph`, which sits above this module: [whether a view step of a tensor that requires
# grad makes a tensor that requires grad, the `_ag` of such a view]; [the class of plain tensors that require grad].
view_records: list = [lambda step: False, None]
recording_tensor: list = [Tensor]
autograd_repr: list = [lambda t: ""]  # the end of the repr of a tensor that requires grad


def is_eager(x) -> bool:
    """Whether `x` is an eager tensor (a `Tensor` or a subclass such as `nn.Parameter`, not a tracer)."""
    return type(x) is Tensor or (isinstance(x, Tensor) and not isinstance(x, Tracer))


def _tracer_conversion(what: str):
    def conversion(self, *args, **kwargs):
        raise self._concrete_error(what)
    conversion.__name__ = what
    return conversion


for _name in ("__bool__", "__int__", "__float__", "__index__", "item", "tolist", "numpy", "__array__",
              "__jax_array__", "block_until_ready"):
    setattr(Tracer, _name, _tracer_conversion(_name))
Tracer.__repr__ = lambda self: f"Traced<{self.aval.str_short()}>(by {type(self._trace).__name__})"  # type: ignore


def method(fn: Callable, *names: str) -> Callable:
    """Install the op function `fn` (its tensor operand first) as the Tensor methods `names` (default: its
    own name); returns `fn`. Each op family declares the methods of its ops once, in its own file:
    `method(add, "add", "__add__")`, `method(reflected(add), "__radd__")`.

    >>> def double(x):
    ...     return x * 2
    >>> _ = method(double, "double_it")
    >>> aotjax.tensor([1.0]).double_it()
    tensor([2.])
    >>> del Tensor.double_it
    """
    for name in names or (fn.__name__,):
        setattr(Tensor, name, fn)
    return fn


def reflected(fn: Callable) -> Callable:
    """`fn` with its two operands swapped: the reflected operator (`__radd__` of `add`)."""
    def reflected_op(self, other):
        return fn(other, self)
    reflected_op.__name__ = reflected_op.__qualname__ = f"reflected_{fn.__name__}"
    return reflected_op


def canonical_dim(dim: int, ndim: int, op: str = "") -> int:
    """`dim` in [0, ndim) (negative dims count from the end); an IndexError naming `op` if out of range."""
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"{op or 'dim'}: dimension {dim} is out of range for a tensor of {ndim} dimensions "
                         f"(expected in [{-n}, {n - 1}]){where()}")
    return dim % n


# -- layout: the strides PyTorch would give a tensor (metadata only) --------------------------------
def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= max(d, 1)
    return tuple(reversed(strides))


def view_layout(prim: Primitive, x, shape: tuple[int, ...], params: dict) -> tuple[tuple | None, int]:
    """The strides (None when contiguous) and storage offset PyTorch gives the result, of shape `shape`, of
    `prim` applied to `x`, by the primitive's `view_strides` rule (view primitives, and `clone`, which
    keeps its operand's memory order). Each interpreter records this on the tensors it makes for such a
    primitive (and on a tensor a metadata mutation re-views), so the layout is the same under all of them."""
    in_shape = tuple(x.shape)
    strides = getattr(x, "_strides", None)
    new_strides, new_offset = prim.view_strides(in_shape, contiguous_strides(in_shape) if strides is None else strides,
                                                getattr(x, "_offset", 0), **params)
    new_strides = tuple(new_strides)
    return (None if new_strides == contiguous_strides(tuple(shape)) else new_strides), new_offset


def record_layout(prim: Primitive, operands, outs: list, params: dict) -> list:
    """Give each tensor of `outs`, the results of `prim` on `operands`, its PyTorch layout: for a view,
    `view_layout` of operand 0; for a functional primitive with a `layout_rule` (elementwise ops, casts,
    `clone`, `*_like`: `aotjax.ops.base.layout`), the strides the rule gives. Returns `outs`."""
    if prim.view_strides is not None:
        for o in outs:
            o._strides, o._offset = view_layout(prim, operands[0], tuple(o.shape), params)
    elif prim.layout_rule is not None:
        for o in outs:
            shape = tuple(o.shape)
            try:
                strides = prim.layout_rule(operands, shape, **params)
            except Exception:
                if all(type(d) is int for d in shape):
                    raise
                strides = None  # NOTE: symbolic sizes (batch-polymorphic export): the result is taken as contiguous
            if strides is not None and tuple(strides) != contiguous_strides(shape):
                o._strides = tuple(strides)
    return outs
