"""Checking the `argnums` and `static_argnums` of a transform against the function and the call.

Every transform that takes argument positions checks them here, in two steps, as JAX does:

- when the transform is made (`normalize_argnums`): each position is an int, none repeats, and where
  the function's signature has a fixed number of positional parameters, each is in range; negative
  positions then count from the last parameter (-1 is the last);
- at each call (`call_argnums`, `static_positions`): positions are checked against the positional
  arguments of this call (negative ones of a `*args` function count from the last of them).

A static argument is a Python value that the program is specialized on (cached by hash and
equality). A Tensor, a jax/NumPy array, or a pytree holding one is never a valid static argument: it
would be cached by identity, so a later in-place write would return a stale program
(`check_static_value`).
"""
from __future__ import annotations

import inspect
from typing import Callable, Sequence

import jax
import numpy as np

from aotjax.core.source_info import where
from aotjax.tensor import Tensor


def fun_name(fun: Callable) -> str:
    """The name of the user's function, for messages."""
    return getattr(fun, "__name__", None) or type(fun).__name__


def positional_params(fun: Callable) -> list[str] | None:
    """The names of `fun`'s positional parameters, or None when their number is not fixed (`*args`)
    or the signature cannot be read (some builtins)."""
    try:
        params = inspect.signature(fun).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return None
    return [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def _plural(n: int) -> str:
    return f"{n} positional argument" + ("" if n == 1 else "s")


def _as_positions(argnums, what: str, fun: Callable, kind: str) -> tuple[int, ...]:
    items = (argnums,) if not isinstance(argnums, (tuple, list)) else tuple(argnums)
    for i in items:
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)):
            raise TypeError(f"{what} of {fun_name(fun)}: {kind} must be an int or a tuple of ints, got {argnums!r} "
                            f"(an element of type {type(i).__name__}){where()}; e.g. {kind}=0 or {kind}=(0, 2)")
    return tuple(int(i) for i in items)


def normalize_argnums(fun: Callable, argnums, what: str, kind: str = "argnums") -> tuple[int, ...]:
    """`argnums` (an int or a sequence of ints) as a tuple, checked against `fun`'s signature where
    its positional parameters are fixed (negative positions made non-negative). `what` is the
    transform, `kind` the parameter's name, both for the messages."""
    positions = _as_positions(argnums, what, fun, kind)
    if len(set(positions)) != len(positions):
        raise ValueError(f"{what} of {fun_name(fun)}: {kind}={argnums!r} repeats a position{where()}; list each "
                         f"argument once")
    params = positional_params(fun)
    if params is None:
        return positions
    n = len(params)
    for i in positions:
        if not -n <= i < n:
            raise ValueError(f"{what} of {fun_name(fun)}: {kind}={argnums!r} is out of range: {fun_name(fun)} takes "
                             f"{_plural(n)} ({', '.join(params) or 'none'}), so a position must be in "
                             f"[{-n}, {n - 1}]{where()}")
    normalized = tuple(i % n for i in positions)
    if len(set(normalized)) != len(normalized):
        raise ValueError(f"{what} of {fun_name(fun)}: {kind}={argnums!r} names one argument twice (counting "
                         f"negative positions from the end){where()}; list each argument once")
    return normalized


def _out_of_range(what: str, fun: Callable, kind: str, i: int, n_args: int) -> ValueError:
    return ValueError(f"{what} of {fun_name(fun)}: {kind} has position {i}, but the call passed {_plural(n_args)}; "
                      f"a position must be in [{-n_args}, {n_args - 1}]{where()}. Pass that argument "
                      f"positionally, or change {kind}")


def call_argnums(argnums: Sequence[int], n_args: int, what: str, fun: Callable) -> tuple[int, ...]:
    """The differentiated positions for a call with `n_args` positional arguments (negative ones
    counted from the last): each must be one of the call's arguments."""
    out = []
    for i in argnums:
        if not -n_args <= i < n_args:
            raise _out_of_range(what, fun, "argnums", i, n_args)
        out.append(i % n_args)
    if len(set(out)) != len(out):
        raise ValueError(f"{what} of {fun_name(fun)}: argnums={tuple(argnums)!r} names one argument twice for a call "
                         f"with {_plural(n_args)}{where()}; list each argument once")
    return tuple(out)


def static_positions(static_argnums: Sequence[int], args: Sequence, kwargs: dict, what: str,
                     fun: Callable | None) -> tuple[int, ...]:
    """The positions of this call's static arguments, sorted; each holds no array. A position past the
    call's arguments is a parameter left to its default (allowed where the signature has it); one
    passed by keyword is an error, as `static_argnums` counts positions."""
    n_args = len(args)
    out = set()
    for i in static_argnums:
        if -n_args <= i < n_args:
            out.add(i % n_args)
            continue
        params = positional_params(fun) if fun is not None else None  # NOTE: only here: this runs per call
        if params is not None and 0 <= i < len(params):
            if params[i] in kwargs:
                raise TypeError(f"{what} of {fun_name(fun)}: argument {i} ({params[i]}) is in static_argnums but was "
                                f"passed by keyword{where()}; pass it positionally")
        else:
            raise _out_of_range(what, fun, "static_argnums", i, n_args)
    for i in out:
        check_static_value(args[i], i, what, fun)
    return tuple(sorted(out))


_ARRAYS = (Tensor, jax.Array, np.ndarray)


def check_static_value(value, i: int, what: str, fun: Callable | None) -> None:
    """Refuse a static argument holding a Tensor or an array (anywhere in its pytree)."""
    for leaf in jax.tree_util.tree_leaves(value):
        if isinstance(leaf, _ARRAYS):
            kind = "a Tensor" if isinstance(leaf, Tensor) else f"an array ({type(leaf).__name__})"
            shape = f" of shape {list(np.shape(leaf))}"
            inside = "" if leaf is value else f" (inside a {type(value).__name__})"
            of = f" of {fun_name(fun)}" if fun is not None else ""
            raise TypeError(f"{what}{of}: static argument {i} holds {kind}{shape}{inside}{where()}. A tensor is never "
                            f"a static argument: the program would be cached on its identity and miss later in-place "
                            f"writes. Pass it as a regular argument (remove {i} from static_argnums)")
