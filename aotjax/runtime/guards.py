"""Guards: the key a compiled program is cached on.

A program is reused only for calls with the same input abstract values, PyTorch strides (they
decide view-or-copy while tracing), pytree structure, static arguments, aliasing pattern (which
arguments share a storage, with what view chains, and which are the same object) and modes (grad,
autocast). A call matching no key traces again, so a program compiled for one pattern never runs for
another. The Python values a trace read are checked too, per program (`aotjax.runtime.trace_reads`).
"""
from __future__ import annotations

from aotjax.core.avals import PYTHON_SCALARS as _SCALARS
from aotjax.core.avals import get_aval
from aotjax.core.interpreter import Tracer, _state, find_top_trace
from aotjax.tensor import Tensor, is_eager


def call_key(leaves: list) -> tuple | None:
    """The signature of a call's flat arguments in one pass (this runs on every call): per leaf its
    shape, dtype and PyTorch strides, the first leaf sharing its storage and the first that is the
    same object; the view chains too when distinct tensors share a storage (a synthetic base).
    None if a leaf is a tracer (the call is under another transform).
    NOTE: not a view's storage offset: a view argument is the program's input by value (`source[i:i+n]` for each
    `i` runs one program); a program that returns an alias of it or changes its view checks the offset it was
    traced with (`Staged.offsets`)."""
    storages: dict = {}
    objects: dict = {}
    sig = []
    shared = False
    for i, x in enumerate(leaves):
        if is_eager(x):
            aval = x._aval
            if aval is None:  # NOTE: a base: its array has the shape, no aval is built
                aval = x._storage.base if not x._chain else x.aval
            same = objects.setdefault(id(x), i)
            first = storages.setdefault(id(x._storage), i)
            shared = shared or (first != i and same == i)
            sig.append((aval.shape, aval.dtype, x._strides, first, same))
        elif isinstance(x, Tracer):
            return None
        elif isinstance(x, _SCALARS):
            sig.append(type(x))
        else:
            sig.append((x.shape, x.dtype, objects.setdefault(id(x), i)))
    if shared:
        sig.append(tuple(x._chain if isinstance(x, Tensor) else None for x in leaves))
    return tuple(sig)


def modes() -> tuple:
    """The modes a trace depends on, part of every cache key: autocast's `(dtype, device type)` (or None) and
    whether grad is enabled (a program traced under `no_grad()` stops every derivative; a function may read
    `is_grad_enabled()`)."""
    return _state.autocast, _state.grad_enabled


def under_transform() -> bool:
    """Whether a transform is tracing the caller: a compiled function called then with eager arguments only
    (tensors its caller captured) must be traced into the caller's program, not run now, once."""
    return find_top_trace(()).main.level > 0


def hashable_statics(statics: tuple, positions: tuple = (), what: str = "jit") -> tuple:
    """Static arguments (at `positions` of the call, when given) as a cache key, each with its type (and the
    types inside tuples): `2`, `2.0` and `True` are equal in Python but trace different programs (`int_tensor
    * 2` is an int tensor, `int_tensor * 2.0` a float one). An unhashable one is a clear error."""
    try:
        hash(statics)
    except TypeError:
        for s, i in zip(statics, positions or range(len(statics))):
            try:
                hash(s)
            except TypeError:
                raise TypeError(f"{what}: static arguments must be hashable (use tuples, not lists or dicts); "
                                f"argument {i} is a {type(s).__name__}") from None
        raise
    return _typed(statics)


def _typed(x):
    if isinstance(x, tuple):
        return type(x), tuple(_typed(e) for e in x)
    return type(x), x


def abstract_key(leaves: list) -> tuple:
    """`call_key` for a call under another transform (tracer leaves): abstract values, PyTorch layout
    and aliasing (tracers sharing a functional storage), so a traced call reuses a compiled entry."""
    storages: dict = {}
    objects: dict = {}
    sig = []
    for i, x in enumerate(leaves):
        if isinstance(x, _SCALARS):
            sig.append(type(x))
            continue
        aval = get_aval(x)
        same = objects.setdefault(id(x), i)
        storage = getattr(x, "_storage", None)
        first = storages.setdefault(id(storage), i) if storage is not None else same
        chain = x._chain if isinstance(x, Tensor) and first != i else None
        sig.append((aval.shape, aval.dtype, getattr(x, "_strides", None), getattr(x, "_offset", 0), first, same,
                    chain))
    return tuple(sig)
