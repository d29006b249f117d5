"""How a DataLoader turns samples into batches: `default_collate` (a list of samples into one batch) and
`default_convert` (one sample's arrays into tensors, for `batch_size=None`), as `torch.utils.data`'s.

Both recurse through the sample's structure: dicts (and other mappings), namedtuples, tuples and lists; strings stay
as they are. At the leaves, aotjax Tensors are stacked; NumPy arrays and scalars, `jax.Array`s and (for code ported
from PyTorch) `torch.Tensor`s become aotjax Tensors of their dtype; Python ints become the default int dtype (int32,
or int64 with x64, as `aotjax.tensor`), floats float64 (float32 without x64), bools bool.
"""
from __future__ import annotations

import collections.abc as abc
import copy
import re

import jax
import numpy as np

from aotjax.core.avals import canonicalize_dtype
from aotjax.ops.base.data import tensor
from aotjax.ops.shape.copies import stack
from aotjax.tensor import Tensor

__all__ = ["default_collate", "default_convert"]

_STRING_ARRAY = re.compile(r"[SaUO]")  # NumPy dtype kinds that hold no numbers: bytes, str, object
_ERROR = "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"


def _is_torch_tensor(x) -> bool:
    return type(x).__module__.startswith("torch") and type(x).__name__ in ("Tensor", "Parameter")


def _as_numpy(x) -> np.ndarray:
    """A NumPy array (a scalar for NumPy scalars) of a NumPy or jax array or torch tensor; strings are left."""
    if _is_torch_tensor(x):
        return x.detach().cpu().numpy()
    return np.asarray(x) if isinstance(x, jax.Array) else x


def _is_array(x) -> bool:
    return isinstance(x, (np.ndarray, np.generic, jax.Array)) or _is_torch_tensor(x)


def _rebuild(like, values: list):
    """A sequence of `like`'s type holding `values`: a copy when it is mutable, a list when the type cannot be
    made from one."""
    if isinstance(like, tuple):
        return type(like)(*values) if hasattr(like, "_fields") else values  # NOTE: a namedtuple keeps its type
    try:
        if isinstance(like, abc.MutableSequence):
            out = copy.copy(like)
            out[:] = values
            return out
        return type(like)(values)
    except TypeError:
        return values


def _rebuild_mapping(like, items: dict):
    """A mapping of `like`'s type (an `OrderedDict` stays one) holding `items`; a dict when it cannot be made."""
    try:
        if isinstance(like, abc.MutableMapping):
            out = copy.copy(like)
            out.update(items)
            return out
        return type(like)(items)
    except TypeError:
        return items


def default_convert(data):
    """`data` with its NumPy arrays and scalars (and `jax.Array`s, `torch.Tensor`s) turned into aotjax Tensors,
    through dicts, namedtuples, tuples (which become lists) and lists; everything else as it is. What a DataLoader
    with `batch_size=None` applies to each sample.

    >>> import numpy as np
    >>> aotjax.utils.data.default_convert({"x": np.array([1.5, 2.0], np.float32), "n": 3})
    {'x': tensor([1.5, 2. ]), 'n': 3}
    """
    if isinstance(data, Tensor) or isinstance(data, (str, bytes)):
        return data
    if _is_array(data):
        arr = _as_numpy(data)
        return data if _STRING_ARRAY.search(np.asarray(arr).dtype.str) else tensor(arr)
    if isinstance(data, abc.Mapping):
        return _rebuild_mapping(data, {k: default_convert(v) for k, v in data.items()})
    if isinstance(data, abc.Sequence):
        return _rebuild(data, [default_convert(d) for d in data])
    return data


def default_collate(batch: list):
    """A batch from a list of samples of one structure: tensors stacked along a new first dimension; NumPy arrays,
    scalars and Python numbers made into tensors of the batch; strings kept as they are gathered (the batch's list,
    a tuple inside a sequence); dicts, namedtuples and sequences collated field by field (a tuple gives a list).
    What a DataLoader applies to each batch.

    >>> samples = [(aotjax.tensor([1.0, 2.0]), 0, "a"), (aotjax.tensor([3.0, 4.0]), 1, "b")]
    >>> aotjax.utils.data.default_collate(samples)
    [tensor([[1., 2.],
            [3., 4.]]), tensor([0, 1]), ('a', 'b')]
    """
    elem = batch[0]
    if isinstance(elem, Tensor):
        return stack(batch, 0)
    if _is_array(elem) and not isinstance(elem, (str, bytes)):
        return _collate_arrays([_as_numpy(x) for x in batch])
    if isinstance(elem, float):
        return tensor(batch, dtype=canonicalize_dtype("float64"))
    if isinstance(elem, int):  # NOTE: bools too: `tensor` gives them bool
        return tensor(batch)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, abc.Mapping):
        return _rebuild_mapping(elem, {k: default_collate([d[k] for d in batch]) for k in elem})
    if isinstance(elem, abc.Sequence):
        if any(len(d) != len(elem) for d in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        return _rebuild(elem, [default_collate(samples) for samples in zip(*batch)])  # NOTE: strings stay tuples
    raise TypeError(_ERROR.format(type(elem)))


def _collate_arrays(batch: list[np.ndarray]) -> Tensor:
    """NumPy arrays (or scalars) of one shape stacked into one tensor of their dtype."""
    dtype = np.asarray(batch[0]).dtype
    if _STRING_ARRAY.search(dtype.str):
        raise TypeError(_ERROR.format(dtype))
    if any(np.shape(a) != np.shape(batch[0]) for a in batch):
        return stack([tensor(a) for a in batch], 0)  # NOTE: raises stack's error, as for tensors of two shapes
    return tensor(np.stack(batch))
