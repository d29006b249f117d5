"""Tensors from data: `tensor` (a new tensor from lists, NumPy or jax arrays, numbers), `as_tensor` (an operand as a
tensor), `promote` (operands converted to their common dtype by PyTorch's promotion), and the argument checks the
creation ops share (a dtype argument, a Python number, ints that must fit their dtype)."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from aotjax.autograd.graph import factory
from aotjax.core.errors import ShapeError
from aotjax.core.interpreter import Tracer, find_top_trace
from aotjax.core.source_info import where
from aotjax.dtypes import bfloat16
from aotjax.interpreters import hooks
from aotjax.interpreters.eval import read
from aotjax.ops.base.casts import convert
from aotjax.ops.base.frontend import constants_made_inside, is_scalar, place, to_dtype
from aotjax.ops.base.frontend import device as to_device
from aotjax.ops.base.promotion import category, default_float_dtype, default_int_dtype, result_type
from aotjax.tensor import Tensor, method

__all__ = ["as_tensor", "tensor", "promote", "from_numpy", "is_tensor", "numel", "is_floating_point", "is_nonzero",
           "is_same_size"]


# -- frontend helpers ------------------------------------------------------------------------------
def _dtype(op: str, dtype, default=None) -> np.dtype:
    """`dtype` as a canonical numpy dtype (or `default` when it is None); errors name `op`."""
    if dtype is None:
        return default
    if isinstance(dtype, Tensor):
        return dtype.dtype
    return to_dtype(dtype, op)


def _python_scalar(op: str, x):
    """A Python bool/int/float/complex from a number, a NumPy scalar or a one-element eager Tensor."""
    if isinstance(x, Tracer):
        raise TypeError(f"{op}: expects a Python number, got a traced tensor ({x.aval.str_short()}){where()}; "
                        f"compute with the tensor instead, e.g. `zeros_like(x) + v`")
    if isinstance(x, (Tensor, np.ndarray, np.generic, jax.Array)):
        x = np.asarray(x).item()
    if not isinstance(x, (bool, int, float, complex)):
        raise TypeError(f"{op}: expects a Python number, got {type(x).__name__}{where()}")
    return x


def _check_ints_fit(op: str, lo: int, hi: int, dtype: np.dtype) -> None:
    """Python ints from `lo` to `hi` must fit the integer `dtype`: an error, as in PyTorch and jax, not a
    silent wrap (without jax's x64 mode the default int is int32)."""
    if category(dtype) != 1:
        return
    info = np.iinfo(dtype)
    if lo < info.min or hi > info.max:
        x64 = "" if jax.config.jax_enable_x64 else (", or turn on jax's x64 mode for int64 "
                                                    "(`jax.config.update('jax_enable_x64', True)`)")
        raise OverflowError(f"{op}: the value {hi if hi > info.max else lo} does not fit in {dtype.name} (from "
                            f"{info.min} to {info.max}){where()}; pass a wider dtype{x64}")


# -- tensor ----------------------------------------------------------------------------------------
def _infer_dtype(data, arr: np.ndarray) -> np.dtype:
    """PyTorch's dtype for `data` (as the NumPy array `arr`): arrays keep theirs; Python numbers and
    lists get the defaults (float32, the default int, bool, complex64)."""
    if isinstance(data, (np.ndarray, np.generic)) or arr.dtype == np.bool_:
        return arr.dtype
    if np.issubdtype(arr.dtype, np.integer):
        return default_int_dtype()
    if np.issubdtype(arr.dtype, np.complexfloating):
        return np.dtype(np.complex64)
    return default_float_dtype()


@factory
def tensor(data, dtype=None, device=None, *, pin_memory: bool = False) -> Tensor:
    """A new tensor from a (nested) list, NumPy array, `jax.Array`, Tensor or Python scalar.

    Python floats give float32, ints the default int dtype, bools bool; arrays keep their dtype. A
    `jax.Array` is wrapped without a copy (and is never donated by aotjax); NumPy bfloat16 arrays (ml_dtypes)
    are read as bfloat16. `device` places the data (`aotjax.device`); `pin_memory` is accepted, as torch's (XLA
    manages host memory itself). Created from concrete data, the tensor is a constant of any function traced with it.

    >>> aotjax.tensor([[1, 2], [3, 4]]).shape
    (2, 2)
    >>> aotjax.tensor(1.5).dtype
    dtype('float32')
    """
    dt = _dtype("tensor", dtype)
    dev = to_device(device, "tensor")
    if isinstance(data, Tracer):  # a traced tensor: a copy is a new value of the same program
        return convert(data, dt) if dt is not None and dt != data.dtype else data.clone()
    t = place(_from_data(data, dt), dev)
    if find_top_trace(()).main.level:  # a constant of the program being traced
        constants_made_inside.add(t._storage)
    return t


def _from_data(data, dt: np.dtype | None) -> Tensor:
    if isinstance(data, Tensor):
        data = read(data)
        return Tensor._wrap(jnp.array(data, dtype=dt, copy=True))
    if isinstance(data, jax.Array) and not isinstance(data, jax.core.Tracer):
        if dt is not None and dt != data.dtype:
            return Tensor._wrap(data.astype(dt))
        return Tensor._wrap(data, owned=False)
    try:
        arr = np.asarray(data)
    except ValueError as e:
        raise ShapeError(f"tensor: the data is not a rectangular nested list of numbers ({e}){where()}") from None
    if arr.dtype == object or (arr.dtype.kind in "USV" and arr.dtype != bfloat16):
        raise TypeError(f"tensor: cannot make a tensor from {type(data).__name__} data{where()}; expected "
                        f"numbers, (nested) lists of numbers or arrays")
    if dt is None:
        dt = to_dtype(_infer_dtype(data, arr), "tensor")
    if arr.dtype.kind in "iu" and arr.size and not isinstance(data, (np.ndarray, np.generic)):
        _check_ints_fit("tensor", int(arr.min()), int(arr.max()), dt)
    return Tensor._wrap(jnp.array(arr, dtype=dt, copy=True))  # NOTE: asarray may alias an aligned host buffer


def _init_from_data(self, data, dtype=None):
    """`aotjax.Tensor(data, dtype)` is `aotjax.tensor(data, dtype)`.

    >>> aotjax.Tensor([1.0, 2.0])
    tensor([1., 2.])
    """
    t = tensor(data, dtype=dtype)
    self._init_slots(t._aval, storage=t._storage, chain=t._chain)


method(_init_from_data, "__init__")


def as_tensor(x) -> Tensor:
    """`x` if it is a Tensor, else a new Tensor holding it (jax arrays are not copied)."""
    if isinstance(x, Tensor):
        return x
    return tensor(x)


hooks.as_tensor = as_tensor


def from_numpy(ndarray) -> Tensor:
    """A tensor of a NumPy array's values, with its dtype (as `torch.from_numpy`). torch's shares the array's
    memory; a jax array is immutable, so this is a copy: writes to either are not seen by the other.

    >>> aotjax.from_numpy(np.arange(3, dtype=np.int16))
    tensor([0, 1, 2], dtype=int16)
    """
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"from_numpy: expected np.ndarray (got {type(ndarray).__name__}){where()}")
    return tensor(ndarray)


def promote(*operands, dtype=None):
    """The operands converted to their PyTorch result type (or `dtype`): Tensors through a convert
    op, Python scalars to NumPy scalars of that dtype (traced as literals)."""
    if dtype is None:
        dtype = result_type(*operands)
    out = []
    for x in operands:
        if isinstance(x, Tensor):
            out.append(x if x.dtype == dtype else convert(x, dtype))
        elif is_scalar(x):
            out.append(dtype.type(x))
        elif isinstance(x, (np.ndarray, np.generic, jax.Array)):
            out.append(convert(as_tensor(x), dtype))
        else:
            raise TypeError(f"expected a Tensor, an array or a Python scalar, got {type(x).__name__}{where()}")
    return out


# -- questions about a tensor, as torch's top-level functions ---------------------------------------------------------
def is_tensor(obj) -> bool:
    """Whether `obj` is an aotjax Tensor (`torch.is_tensor`).

    >>> aotjax.is_tensor(aotjax.ones(1)), aotjax.is_tensor([1.0])
    (True, False)
    """
    return isinstance(obj, Tensor)


def _tensor_argument(x, what: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{what}(): argument 'input' (position 1) must be Tensor, not {type(x).__name__}{where()}")
    return x


def numel(input) -> int:
    """The number of elements of `input` (`torch.numel`)."""
    return _tensor_argument(input, "numel").numel()


def is_floating_point(input) -> bool:
    """Whether `input` has a floating-point dtype (`torch.is_floating_point`)."""
    return _tensor_argument(input, "is_floating_point").is_floating_point()


def is_nonzero(input) -> bool:
    """Whether the one element of `input` is nonzero (`torch.is_nonzero`; another number of elements raises, as
    torch's)."""
    x = _tensor_argument(input, "is_nonzero")
    if x.numel() != 1:
        raise RuntimeError(f"Boolean value of Tensor with {'no values' if x.numel() == 0 else 'more than one value'} "
                           f"is ambiguous{where()}")
    return bool(x.reshape(()).item() != 0)


def is_same_size(input, other) -> bool:
    """Whether `input` and `other` have the same shape (`torch.is_same_size`)."""
    return tuple(_tensor_argument(input, "is_same_size").shape) == tuple(_tensor_argument(other, "is_same_size").shape)
