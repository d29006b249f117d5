"""Guards: the key a compiled program is cached on.

A program is reused only for calls with the same input abstract values, PyTorch strides (they
decide view-or-copy while tracing), pytree structure, static arguments and aliasing pattern (which
arguments share a storage, with what view chains, and which are the same object). A call matching
no key traces again, so a program compiled for one pattern never runs for another.
"""
from __future__ import annotations

from typing import Any

from aotjax.runtime.boundary import InputGroup
from aotjax.tensor import Tensor

_SCALARS = (bool, int, float, complex)


def _object_signature(x: Any) -> Any:
    if isinstance(x, Tensor):
        return (x.aval, x._strides, x._offset)
    if isinstance(x, _SCALARS):
        return type(x)
    return (type(x).__name__, tuple(x.shape), str(x.dtype))


def signature(groups: list[InputGroup]) -> tuple:
    """The aliasing pattern and abstract values of the grouped arguments, hashable."""
    sig = []
    for g in groups:
        objs = tuple(_object_signature(o) for o in g.objects)
        leaves = tuple(tuple(idxs) for idxs in g.leaves)
        if g.synthetic:
            sig.append((leaves, objs, tuple(g.chains), g.base_aval()))
        else:
            sig.append((leaves, objs))
    return tuple(sig)


def hashable_statics(statics: tuple) -> tuple:
    """Static arguments as a cache key; an unhashable one is a clear error."""
    try:
        hash(statics)
    except TypeError:
        kinds = ", ".join(type(s).__name__ for s in statics)
        raise TypeError(f"jit: static arguments must be hashable (use tuples, not lists or dicts); got {kinds}") \
            from None
    return statics
