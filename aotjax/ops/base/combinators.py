"""Combinators that make a primitive cost a few lines: standard shape/dtype rules, broadcasting
elementwise families, and in-place variants of functional primitives. Each declares what it knows of
the primitives it makes (`Primitive.recompute`, `Primitive.flops`, `Primitive.layout_rule`): an
elementwise primitive is `Recompute.CHEAP` at one operation per output element, laid out as PyTorch's
TensorIterator lays out its result; an in-place variant costs what its functional primitive costs."""
from __future__ import annotations

from typing import Callable

import numpy as np

from aotjax.core.avals import ShapedArray
from aotjax.core.errors import DTypeError, ShapeError
from aotjax.core.primitive import FlopsRule, Kind, LayoutRule, Primitive, Recompute, output_size_flops
from aotjax.interpreters.batching import defbroadcasting
from aotjax.interpreters.lowering import lowering_rules, register_lowering
from aotjax.ops.base.layout import elementwise_layout


def standard_primitive(name: str, shape_rule: Callable | None, dtype_rule: Callable | None, lower: Callable,
                       *, kind: Kind = Kind.FUNCTIONAL, recompute: Recompute | None = None,
                       flops: FlopsRule | None = None, linear: tuple[int, ...] | bool = False,
                       is_dot: bool = False) -> Primitive:
    """A single-result primitive whose abstract eval is `shape_rule` and `dtype_rule` of the
    operand avals and params (both None: inferred from `lower` with `jax.eval_shape`). The keyword
    arguments after `kind` are the declared properties of `Primitive`; a functional primitive must
    give `recompute` and `flops` (a view defaults to cheap, at one operation per output element)."""
    prim = Primitive(name, kind=kind, recompute=recompute, flops=flops, linear=linear, is_dot=is_dot)
    if shape_rule is not None:
        def _abstract_eval(*avals, **params):
            return ShapedArray(shape_rule(*avals, **params), dtype_rule(*avals, **params))
        prim.abstract_eval = _abstract_eval
    register_lowering(prim, lower)
    return prim


def broadcast_shapes(op: str, *shapes: tuple[int, ...]) -> tuple[int, ...]:
    """NumPy/PyTorch broadcasting of `shapes`; a ShapeError naming `op` if they do not broadcast."""
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(ndim):
        sizes = {s[len(s) - ndim + i] for s in shapes if len(s) - ndim + i >= 0} - {1}
        if len(sizes) > 1:
            raise ShapeError(f"{op}: shapes {' and '.join(str(list(s)) for s in shapes)} cannot be broadcast "
                             f"together (dimension {i - ndim} has sizes {sorted(sizes)})")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def same_dtype(op: str, *avals: ShapedArray) -> np.dtype:
    dtypes = {a.dtype for a in avals}
    if len(dtypes) != 1:
        raise DTypeError(f"{op}: operands must have one dtype, got {', '.join(a.str_short() for a in avals)}")
    return avals[0].dtype


def elementwise(name: str, lower: Callable, *, out_dtype: Callable[[np.dtype], np.dtype] | None = None,
                layout: LayoutRule = elementwise_layout) -> Primitive:
    """An elementwise primitive of any arity: operands of one dtype, broadcast together, cheap to
    recompute (`Recompute.CHEAP`, one operation per output element), its result laid out as PyTorch's
    TensorIterator lays it out (`layout`, see `aotjax.ops.base.layout`), batched by `vmap` with broadcasting.
    `out_dtype(in_dtype)` gives the result dtype (default: the operands' dtype)."""
    def shape_rule(*avals, **params):
        return broadcast_shapes(name, *(a.shape for a in avals))

    def dtype_rule(*avals, **params):
        dt = same_dtype(name, *avals)
        return out_dtype(dt) if out_dtype is not None else dt

    prim = standard_primitive(name, shape_rule, dtype_rule, lower, recompute=Recompute.CHEAP, flops=output_size_flops)
    prim.layout_rule = layout
    defbroadcasting(prim)  # NOTE: every elementwise primitive batches by broadcasting, whatever its arity
    return prim


def inplace_variant(prim: Primitive, name: str | None = None, mutates: tuple[int, ...] = (0,)) -> Primitive:
    """The in-place form of `prim` (`add` -> `add_`): writes `prim`'s result, cast to the written
    operand's dtype, into operand 0. Its result must have operand 0's shape. It has `prim`'s recompute
    class and cost rule (`Primitive` copies them from `functional`)."""
    inplace = Primitive(name or prim.name + "_", kind=Kind.MUTATION, mutates=mutates, functional=prim)
    functional_lower = lowering_rules[prim]

    def _lower(*vals, **params):
        out = functional_lower(*vals, **params)
        return out.astype(vals[0].dtype) if out.dtype != vals[0].dtype else out

    register_lowering(inplace, _lower)
    return inplace
