"""`make_jaxpr`: trace a function into a jaxpr of the program as written."""
from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import jax

from aotjax.core import views
from aotjax.core.avals import PYTHON_SCALARS, ShapedArray, canonicalize_dtype, python_scalar_dtype
from aotjax.core.checks import emit_checks
from aotjax.core.interpreter import full_raise, new_main
from aotjax.interpreters.trace import JaxprBuilder, JaxprTrace
from aotjax.tensor import Tensor
from aotjax.transforms.argnums import normalize_argnums, static_positions
from aotjax.transforms.passes import run_pass


def split_static(args: Sequence, static_argnums: Sequence[int], kwargs: dict | None = None, what: str = "make_jaxpr",
                 fun: Callable | None = None):
    """Separate static positional arguments (kept as Python values) from dynamic ones: returns the
    dynamic ones, the static positions of this call (checked by `static_positions`: in range,
    holding no array) and `merge(dynamic values) -> all positional arguments`."""
    static = static_positions(static_argnums, args, kwargs or {}, what, fun) if static_argnums else ()
    dyn = [a for i, a in enumerate(args) if i not in static]

    def merge(dyn_vals):
        it = iter(dyn_vals)
        return [args[i] if i in static else next(it) for i in range(len(args))]

    return dyn, static, merge


def input_aval(x: Any) -> tuple[ShapedArray, Any, int]:
    """The abstract value (and PyTorch strides, offset) an argument leaf is traced with."""
    if isinstance(x, Tensor):
        return x.aval, x._strides, x._offset
    if isinstance(x, PYTHON_SCALARS):
        return ShapedArray((), python_scalar_dtype(x)), None, 0
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        return ShapedArray(x.shape, canonicalize_dtype(x.dtype)), None, 0
    raise TypeError(f"make_jaxpr: an argument of type {type(x).__name__} is not an array, a Tensor or a "
                    f"scalar; pass it with static_argnums if it is a configuration value")


def trace_to_jaxpr(fun: Callable, args: Sequence, kwargs: dict, static_argnums: Sequence[int] = ()):
    """Trace `fun(*args, **kwargs)` into a ClosedJaxpr (with `in_tree` and `out_tree` set)."""
    dyn, _, merge = split_static(args, static_argnums, kwargs, "make_jaxpr", fun)
    leaves, in_tree = jax.tree_util.tree_flatten((dyn, kwargs))
    with new_main(JaxprTrace, JaxprBuilder(), dynamic=True) as main, emit_checks(False):  # the program as written
        trace = main.trace
        in_tracers = [trace.builder.new_arg(trace, *input_aval(x)) for x in leaves]
        invars = [t._var for t in in_tracers]
        _note_arguments(trace.builder, leaves, in_tracers)
        dyn_t, kwargs_t = jax.tree_util.tree_unflatten(in_tree, in_tracers)
        out = fun(*merge(dyn_t), **kwargs_t)
        out_leaves, out_tree = jax.tree_util.tree_flatten(out)
        out_tracers = [full_raise(trace, o) for o in out_leaves]
        closed = trace.builder.build(invars, out_tracers)
    closed.in_tree, closed.out_tree = in_tree, out_tree
    return closed


def _note_arguments(builder: JaxprBuilder, leaves: list, tracers: list) -> None:
    """What the trace must know of the tensor arguments: their memory (a captured tensor sharing it is read through
    them) and which are the same tensor passed more than once (their views cannot change: one input each)."""
    seen: dict = {}
    for x, t in zip(leaves, tracers):
        if isinstance(x, Tensor):
            builder.arguments.setdefault(views.storage_key(x), []).append((t, x._chain))
            seen.setdefault(id(x), []).append(t)
    builder.passed_twice = {id(t) for ts in seen.values() if len(ts) > 1 for t in ts}


def make_jaxpr(fun: Callable, static_argnums: int | Sequence[int] = (), return_shape: bool = False):
    """Trace `fun` into the jaxpr of the program as written (views and in-place ops included).

    Returns a function that takes `fun`'s arguments (pytrees of Tensors, arrays and scalars) and
    returns a `ClosedJaxpr`; its `in_tree`/`out_tree` attributes hold the pytree structures of the
    arguments and results. With `return_shape=True` it returns `(jaxpr, out_shapes)`.

    >>> import aotjax
    >>> def f(x):
    ...     x[0].mul_(2)
    ...     return x.sin()
    >>> print(aotjax.make_jaxpr(f)(aotjax.ones(3)))
    { lambda ; a:f32[3]. let
        b:f32[] = select[dim=0 index=0] a
        c:f32[] = mul_ b 2.0
        d:f32[3] = sin a
      in (d,) }
    """
    static_argnums = normalize_argnums(fun, static_argnums, "make_jaxpr", "static_argnums")

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        closed = run_pass("trace", trace_to_jaxpr, fun, args, kwargs, static_argnums)
        if return_shape:
            shapes = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in closed.out_avals]
            return closed, jax.tree_util.tree_unflatten(closed.out_tree, shapes)
        return closed

    return wrapped


