"""Creation ops: `tensor`, `zeros`, `ones`, `full`, `arange`, ... ."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from aotjax.ops._frontend import normalize_shape, to_dtype
from aotjax.ops.promotion import default_float_dtype, default_int_dtype
from aotjax.tensor import Tensor

__all__ = ["tensor", "zeros", "ones"]


def _infer_dtype(data) -> np.dtype:
    arr = np.asarray(data)
    if arr.dtype == np.bool_:
        return arr.dtype
    if np.issubdtype(arr.dtype, np.integer):
        return default_int_dtype() if not isinstance(data, np.ndarray) else arr.dtype
    if np.issubdtype(arr.dtype, np.floating) and not isinstance(data, (np.ndarray, np.generic)):
        return default_float_dtype()
    return arr.dtype


def tensor(data, dtype=None) -> Tensor:
    """A new tensor from a list, NumPy array, `jax.Array`, Tensor or Python scalar.

    Python floats give float32, Python ints the default int dtype; arrays keep their dtype. A
    `jax.Array` is wrapped without a copy (and is never donated by aotjax).

    >>> aotjax.tensor([[1, 2], [3, 4]]).shape
    (2, 2)
    """
    if isinstance(data, Tensor):
        data = data.numpy() if dtype is None else data.numpy()
    if isinstance(data, jax.Array) and not isinstance(data, jax.core.Tracer):
        if dtype is not None and to_dtype(dtype) != data.dtype:
            return Tensor._wrap(data.astype(to_dtype(dtype)))
        return Tensor._wrap(data, owned=False)
    dt = to_dtype(dtype) if dtype is not None else to_dtype(_infer_dtype(data))
    return Tensor._wrap(jnp.asarray(np.asarray(data), dtype=dt))


def zeros(*shape, dtype=None) -> Tensor:
    """A tensor of zeros (float32 unless `dtype` is given)."""
    return Tensor._wrap(jnp.zeros(normalize_shape(shape), to_dtype(dtype or default_float_dtype())))


def ones(*shape, dtype=None) -> Tensor:
    """A tensor of ones (float32 unless `dtype` is given)."""
    return Tensor._wrap(jnp.ones(normalize_shape(shape), to_dtype(dtype or default_float_dtype())))
