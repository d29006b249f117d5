"""The user-facing Tensor: PyTorch's mutable tensors and views on immutable XLA buffers.

An eager Tensor is a `Storage` (a mutable cell holding an immutable `jax.Array`, the base) plus a
view chain and its abstract value. Views share the storage: reading a view applies the chain to
the base, writing one computes a new base through the chain's inverses (see
`aotjax.interpreters.eval`). Every interpreter's tracer subclasses Tensor, so user code runs
unchanged under every transform. Method names and semantics follow `torch.Tensor`; most methods
are the functions of `aotjax.ops`, installed by name at the bottom of this file.

Each Tensor also records the strides and storage offset PyTorch would give it. They are metadata
only (XLA has no strides) and decide, as in PyTorch, whether `reshape`/`flatten`/`contiguous`
return a view or a copy and whether `view` is allowed.
"""
from __future__ import annotations

import numpy as np

from aotjax.core.avals import ShapedArray
from aotjax.core.interpreter import Tracer, contiguous_strides


class Storage:
    """A mutable cell holding an immutable `jax.Array`: the base shared by a tensor and its views.

    `owned` is False when the array came from the user without a copy, so that aotjax never
    donates (deletes) a buffer the user still holds."""

    __slots__ = ("base", "version", "owned", "__weakref__")

    def __init__(self, base, owned: bool = True):
        self.base = base
        self.version = 0
        self.owned = owned


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

    __slots__ = ("_storage", "_chain", "_aval", "_strides", "_offset", "_cache", "__weakref__")
    __array_priority__ = 100

    def __init__(self, data, dtype=None):
        t = _ops.tensor(data, dtype=dtype)
        self._storage, self._chain, self._aval = t._storage, t._chain, t._aval
        self._strides, self._offset, self._cache = None, 0, None

    # -- construction (internal) ------------------------------------------------------------
    @classmethod
    def _wrap(cls, array, owned: bool = True) -> "Tensor":
        """A new base tensor holding `array` (no copy)."""
        t = object.__new__(Tensor)
        t._storage = Storage(array, owned)
        t._chain = ()
        t._aval = None
        t._strides = None
        t._offset = 0
        t._cache = None
        return t

    @classmethod
    def _view_of(cls, x: "Tensor", step, aval: ShapedArray) -> "Tensor":
        """A view of eager tensor `x` through one more view step."""
        t = object.__new__(Tensor)
        t._storage = x._storage
        t._chain = x._chain + (step,)
        t._aval = aval
        t._strides = None
        t._offset = 0
        t._cache = None
        return t

    # -- metadata ------------------------------------------------------------------------------
    @property
    def aval(self) -> ShapedArray:
        """The abstract value (shape and dtype)."""
        a = self._aval
        if a is None:
            v = _read(self)
            a = self._aval = ShapedArray(v.shape, v.dtype)
        return a

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape, as a tuple (PyTorch returns a `torch.Size`, a tuple subclass)."""
        a = self._aval
        if a is None and not self._chain:
            return self._storage.base.shape
        return self.aval.shape

    @property
    def dtype(self) -> np.dtype:
        """The element type, a `numpy.dtype` (`aotjax.float32` is `numpy.dtype('float32')`)."""
        a = self._aval
        if a is None and not self._chain:
            return self._storage.base.dtype
        return self.aval.dtype

    @property
    def ndim(self) -> int:
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
        return shape if dim is None else shape[_ops.canonical_dim(dim, len(shape))]

    def numel(self) -> int:
        """The number of elements."""
        return int(np.prod(self.shape, dtype=np.int64))

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
        return s if dim is None else s[_ops.canonical_dim(dim, self.ndim)]

    def storage_offset(self) -> int:
        """The offset PyTorch would give this tensor in its storage, in elements."""
        return self._offset

    def is_contiguous(self) -> bool:
        """Whether PyTorch would call this tensor contiguous (row-major, dense)."""
        if self._strides is None:
            return True
        expected = 1
        for size, stride in reversed(list(zip(self.shape, self._strides))):
            if size == 0:
                return True
            if size != 1 and stride != expected:
                return False
            expected *= size
        return True

    def is_floating_point(self) -> bool:
        return np.issubdtype(self.dtype, np.floating) or self.dtype.name == "bfloat16"

    def is_complex(self) -> bool:
        return np.issubdtype(self.dtype, np.complexfloating)

    @property
    def device(self):
        """The `jax` device holding the data (None for a traced tensor)."""
        devices = getattr(self._storage.base, "devices", None)
        return next(iter(devices())) if devices else None

    @property
    def T(self) -> "Tensor":
        """All dimensions reversed (a view)."""
        return _ops.permute(self, tuple(range(self.ndim - 1, -1, -1)))

    @property
    def mT(self) -> "Tensor":
        """The last two dimensions swapped (a view)."""
        return _ops.transpose(self, -2, -1)

    # -- values (eager only; tracers raise) -------------------------------------------------------
    def numpy(self) -> np.ndarray:
        """The value as a NumPy array (a copy)."""
        return np.asarray(_read(self))

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
        _read(self).block_until_ready()
        return self

    def __array__(self, dtype=None, copy=None):
        a = np.asarray(_read(self))
        return a.astype(dtype) if dtype is not None else a

    def __jax_array__(self):
        return _read(self)

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

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d tensor")
        return iter(_ops.unbind(self, 0))

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        body = np.array2string(self.numpy(), separator=", ", prefix="tensor(",
                               formatter=None).replace("\n", "\n")
        if self.dtype in (np.dtype("float32"), np.dtype("bool")) or (
                self.dtype == np.dtype(_ops.default_int_dtype()) and self.numel() > 0):
            return f"tensor({body})"
        return f"tensor({body}, dtype={self.dtype.name})"

    def __format__(self, spec: str) -> str:
        if self.ndim == 0 and spec:
            return format(self.item(), spec)
        return repr(self)

    # -- casts (methods only: `aotjax.float` is a dtype, as `torch.float` is) -------------------
    def type_as(self, other: "Tensor") -> "Tensor":
        """`self` converted to `other`'s dtype."""
        return _ops.to(self, other.dtype)

    def float(self) -> "Tensor":
        """`self` as float32."""
        return _ops.to(self, np.float32)

    def double(self) -> "Tensor":
        """`self` as float64 (float32 unless jax's x64 mode is on)."""
        return _ops.to(self, np.float64)

    def half(self) -> "Tensor":
        """`self` as float16."""
        return _ops.to(self, np.float16)

    def bfloat16(self) -> "Tensor":
        """`self` as bfloat16."""
        return _ops.to(self, "bfloat16")

    def int(self) -> "Tensor":
        """`self` as int32."""
        return _ops.to(self, np.int32)

    def long(self) -> "Tensor":
        """`self` as int64 (int32 unless jax's x64 mode is on)."""
        return _ops.to(self, np.int64)

    def bool(self) -> "Tensor":
        """`self` as bool."""
        return _ops.to(self, np.bool_)

    # -- operators ------------------------------------------------------------------------------
    def __add__(self, other): return _ops.add(self, other)
    def __radd__(self, other): return _ops.add(other, self)
    def __sub__(self, other): return _ops.sub(self, other)
    def __rsub__(self, other): return _ops.sub(other, self)
    def __mul__(self, other): return _ops.mul(self, other)
    def __rmul__(self, other): return _ops.mul(other, self)
    def __truediv__(self, other): return _ops.div(self, other)
    def __rtruediv__(self, other): return _ops.div(other, self)
    def __floordiv__(self, other): return _ops.floor_divide(self, other)
    def __rfloordiv__(self, other): return _ops.floor_divide(other, self)
    def __mod__(self, other): return _ops.remainder(self, other)
    def __rmod__(self, other): return _ops.remainder(other, self)
    def __pow__(self, other): return _ops.pow(self, other)
    def __rpow__(self, other): return _ops.pow(other, self)
    def __matmul__(self, other): return _ops.matmul(self, other)
    def __rmatmul__(self, other): return _ops.matmul(other, self)
    def __neg__(self): return _ops.neg(self)
    def __pos__(self): return self
    def __abs__(self): return _ops.abs(self)
    def __invert__(self): return _ops.bitwise_not(self)
    def __and__(self, other): return _ops.bitwise_and(self, other)
    def __rand__(self, other): return _ops.bitwise_and(other, self)
    def __or__(self, other): return _ops.bitwise_or(self, other)
    def __ror__(self, other): return _ops.bitwise_or(other, self)
    def __xor__(self, other): return _ops.bitwise_xor(self, other)
    def __rxor__(self, other): return _ops.bitwise_xor(other, self)
    def __eq__(self, other): return _ops.eq(self, other)  # type: ignore[override]
    def __ne__(self, other): return _ops.ne(self, other)  # type: ignore[override]
    def __lt__(self, other): return _ops.lt(self, other)
    def __le__(self, other): return _ops.le(self, other)
    def __gt__(self, other): return _ops.gt(self, other)
    def __ge__(self, other): return _ops.ge(self, other)
    def __iadd__(self, other): return _ops.add_(self, other)
    def __isub__(self, other): return _ops.sub_(self, other)
    def __imul__(self, other): return _ops.mul_(self, other)
    def __itruediv__(self, other): return _ops.div_(self, other)
    def __ifloordiv__(self, other): return _ops.floor_divide_(self, other)
    def __imod__(self, other): return _ops.remainder_(self, other)
    def __ipow__(self, other): return _ops.pow_(self, other)
    def __iand__(self, other): return _ops.bitwise_and_(self, other)
    def __ior__(self, other): return _ops.bitwise_or_(self, other)
    def __getitem__(self, index): return _ops.getitem(self, index)
    def __setitem__(self, index, value): _ops.setitem(self, index, value)


def _tracer_conversion(what: str):
    def method(self, *args, **kwargs):
        raise self._concrete_error(what)
    method.__name__ = what
    return method


for _name in ("__bool__", "__int__", "__float__", "__index__", "item", "tolist", "numpy", "__array__",
              "__jax_array__", "block_until_ready"):
    setattr(Tracer, _name, _tracer_conversion(_name))
Tracer.__repr__ = lambda self: f"Traced<{self.aval.str_short()}>(by {type(self._trace).__name__})"  # type: ignore


# Methods that are the functions of `aotjax.ops` (the tensor is their first argument), grouped by
# family; `tests/test_api_surface.py` checks that each exists.
ELEMENTWISE_METHODS = """
neg abs exp log log1p expm1 sqrt rsqrt sin cos tan tanh sigmoid relu gelu silu erf floor ceil round sign
reciprocal square isnan isfinite logical_not
neg_ abs_ exp_ log_ log1p_ expm1_ sqrt_ rsqrt_ sin_ cos_ tan_ tanh_ sigmoid_ relu_ gelu_ silu_ erf_ floor_
ceil_ round_ sign_ reciprocal_ square_ logical_not_
add sub mul div floor_divide remainder pow maximum minimum atan2 eq ne lt le gt ge logical_and logical_or
bitwise_and bitwise_or bitwise_xor bitwise_not clamp clip lerp where
add_ sub_ mul_ div_ floor_divide_ remainder_ pow_ atan2_ eq_ ne_ lt_ le_ gt_ ge_ logical_and_ logical_or_
bitwise_and_ bitwise_or_ bitwise_xor_ clamp_ clip_ lerp_
to
""".split()
REDUCTION_METHODS = "sum mean prod amax amin max min argmax argmin all any var std logsumexp cumsum".split()
LINALG_METHODS = "matmul mm bmm dot outer".split()
VIEW_METHODS = """
view view_as reshape reshape_as flatten contiguous transpose permute t squeeze unsqueeze expand expand_as
broadcast_to select narrow diagonal unbind split chunk movedim detach t_ transpose_ squeeze_ unsqueeze_ as_strided
""".split()
NEW_VALUE_METHODS = "clone flip roll repeat tile tril triu".split()
INDEXING_METHODS = """
index_select gather scatter scatter_ scatter_add scatter_add_ masked_fill masked_fill_ index_put index_put_
index_add index_add_ copy_ fill_ zero_
""".split()
NN_METHODS = "softmax log_softmax".split()
TENSOR_METHODS = (ELEMENTWISE_METHODS + REDUCTION_METHODS + LINALG_METHODS + VIEW_METHODS + NEW_VALUE_METHODS
                  + INDEXING_METHODS + NN_METHODS)


# NOTE: imported last because the ops modules import Tensor from here.
from aotjax import ops as _ops  # noqa: E402
from aotjax.interpreters.eval import read as _read  # noqa: E402


def _install_methods() -> None:
    missing = []
    for name in TENSOR_METHODS:
        fn = getattr(_ops, name, None)
        if fn is None:
            missing.append(name)
        else:
            setattr(Tensor, name, fn)
    Tensor._missing_methods = tuple(missing)  # reported by tests/test_api_surface.py


_install_methods()
