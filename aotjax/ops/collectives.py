"""Collectives over a named `vmap` axis: `psum`, `pmean`, `pmax`, `pmin`, `axis_index` (exposed in `aotjax.lax`).

Inside `vmap(f, axis_name="i")`, `psum(x, "i")` is the sum of `x` over the examples, the same for every example (a
batch-norm's statistics over the batch, a data-parallel gradient's mean). `axis_name` may be a tuple of names of
nested vmaps, reducing over all of them. A collective is a primitive with the axis names as a param; the batching
level whose axis it names reduces over its batch axis (`collective_rules`), the others batch it as an elementwise
op, so it works at any depth of nesting, through `jit`, loops and derivatives. Outside every vmap of that name it is
an error naming the axis.

>>> xs = aotjax.tensor([1.0, 2.0, 3.0])
>>> aotjax.vmap(lambda x: x - aotjax.lax.pmean(x, "i"), axis_name="i")(xs)
tensor([-1.,  0.,  1.])
"""
from __future__ import annotations

import math
from typing import Any

import jax

from aotjax.core.avals import ShapedArray
from aotjax.core.errors import UnsupportedError
from aotjax.core.interpreter import Tracer, full_raise
from aotjax.core.primitive import Primitive, Recompute, output_size_flops
from aotjax.interpreters.ad_util import Zero, instantiate
from aotjax.interpreters.batching import collective_rules, example_index, find_axis, not_mapped
from aotjax.interpreters.jvp import deflinear, jvp_rules
from aotjax.interpreters.lowering import register_lowering
from aotjax.interpreters.transpose import deflinear_transpose
from aotjax.ops._frontend import as_tensor
from aotjax.ops.elementwise import div, eq, mul
from aotjax.ops.reduction import amax, amin
from aotjax.ops.reduction import sum as reduce_sum

__all__ = ["psum", "pmean", "pmax", "pmin", "axis_index"]


def _collective(name: str, reduce, unbatched):
    """A collective primitive: `reduce(x, axis)` combines the examples along a batch axis; `unbatched(x, size)` is
    its value when `x` is the same for every example."""
    prim = Primitive(name, recompute=Recompute.CHEAP, flops=output_size_flops)
    prim.abstract_eval = lambda x, *, axis_name: ShapedArray(x.shape, x.dtype)
    prim.print_rule = lambda params: {"axis_name": params["axis_name"]}

    def lower(x, *, axis_name):
        # NOTE: every collective is consumed by the batching level of its axis before lowering; one reaching
        # XLA was staged outside any vmap of that name (a program traced alone, then called).
        raise UnsupportedError(f"{name}: axis {axis_name!r} is not bound: a collective must run inside "
                               f"vmap(..., axis_name={axis_name[0]!r})")

    register_lowering(prim, lower)

    def rule(trace, vals, dims, *, axis_name):
        (x,), (d,) = vals, dims
        own = trace.axis.name
        if own not in axis_name:  # another level's axis: batched like an elementwise op
            return [prim.bind(x, axis_name=axis_name)], [d]
        x = unbatched(x, trace.axis_size) if d is not_mapped else reduce(x, d)
        rest = tuple(n for n in axis_name if n != own)
        return [prim.bind(x, axis_name=rest) if rest else x], [not_mapped]

    collective_rules[prim] = rule
    return prim


psum_p = _collective("psum", lambda x, d: reduce_sum(x, d), lambda x, size: mul(x, size))
pmax_p = _collective("pmax", lambda x, d: amax(x, d), lambda x, size: x)
pmin_p = _collective("pmin", lambda x, d: amin(x, d), lambda x, size: x)

deflinear(psum_p)
# NOTE: every example's result is the sum of all examples' x, so each x gets the sum of all results' cotangents.
deflinear_transpose(psum_p, lambda ct, x, *, axis_name: psum_p.bind(ct, axis_name=axis_name))


def _extremum_jvp(prim: Primitive):
    """The tangent of `pmax`/`pmin`: the mean of the tangents of the examples that attain the extremum."""
    def rule(primals, tangents, *, axis_name):
        (x,), (t,) = primals, tangents
        out = prim.bind(x, axis_name=axis_name)
        if isinstance(t, Zero):
            return [out], [t]
        hit = eq(x, out).to(x.dtype)
        total = psum_p.bind(mul(instantiate(t), hit), axis_name=axis_name)
        return [out], [div(total, psum_p.bind(hit, axis_name=axis_name))]
    jvp_rules[prim] = rule


_extremum_jvp(pmax_p)
_extremum_jvp(pmin_p)


def _names(axis_name) -> tuple:
    return tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)


def _bind(prim: Primitive, what: str, x: Any, axis_name) -> Any:
    names = _names(axis_name)
    top = max((find_axis(n, what) for n in names), key=lambda m: m.level)

    def one(leaf):
        leaf = as_tensor(leaf)
        if not (isinstance(leaf, Tracer) and leaf._trace.main.level >= top.level):
            leaf = full_raise(top.trace, leaf)  # NOTE: a value from below the vmap: the same for every example
        return prim.bind(leaf, axis_name=names)

    return jax.tree_util.tree_map(one, x)


def _axis_size(axis_name) -> int:
    return math.prod(find_axis(n, "pmean").global_data.size for n in _names(axis_name))


def psum(x: Any, axis_name) -> Any:
    """The sum of `x` (a tensor or a pytree of them) over the examples of the vmap(s) named `axis_name`."""
    return _bind(psum_p, "psum", x, axis_name)


def pmean(x: Any, axis_name) -> Any:
    """The mean of `x` over the examples of the vmap(s) named `axis_name`."""
    size = _axis_size(axis_name)
    return jax.tree_util.tree_map(lambda s: div(s, size), psum(x, axis_name))


def pmax(x: Any, axis_name) -> Any:
    """The largest `x` over the examples of the vmap(s) named `axis_name` (elementwise)."""
    return _bind(pmax_p, "pmax", x, axis_name)


def pmin(x: Any, axis_name) -> Any:
    """The smallest `x` over the examples of the vmap(s) named `axis_name` (elementwise)."""
    return _bind(pmin_p, "pmin", x, axis_name)


def axis_index(axis_name) -> Any:
    """The index of the current example along the vmap named `axis_name` (an int32 0-d tensor per example)."""
    return example_index(find_axis(axis_name, "axis_index"))

