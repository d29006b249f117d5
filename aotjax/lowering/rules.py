"""The lowering rule table: how each primitive computes on `jax` values.

Eager evaluation, `to_jax` and compilation all use these rules, so the three cannot disagree.
"""
from __future__ import annotations

import functools
from typing import Any, Protocol

import jax

from aotjax.core.avals import ShapedArray
from aotjax.core.errors import ShapeError
from aotjax.core.primitive import Primitive, set_fallback_abstract_eval


class LoweringRule(Protocol):
    """`(*jax_values, **params) -> jax value` (a list of values for multiple results; for a data
    mutation: the new values of the operands it writes). Runs under `jax.jit` tracing as well as on
    concrete arrays, so it must only use `jax`/`jax.numpy`/`jax.lax` functions."""

    def __call__(self, *vals: Any, **params: Any) -> Any: ...


lowering_rules: dict[Primitive, LoweringRule] = {}


def register_lowering(prim: Primitive, rule: LoweringRule) -> LoweringRule:
    lowering_rules[prim] = rule
    return rule


def lowering_rule(prim: Primitive) -> LoweringRule:
    rule = lowering_rules.get(prim)
    if rule is None:
        raise NotImplementedError(f"lowering rule for primitive '{prim.name}' is not implemented")
    return rule


@functools.lru_cache(maxsize=4096)
def _eval_shape(prim: Primitive, avals: tuple[ShapedArray, ...], params: tuple) -> tuple[ShapedArray, ...]:
    rule = lowering_rule(prim)
    structs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in avals]
    try:
        out = jax.eval_shape(functools.partial(rule, **dict(params)), *structs)
    except (TypeError, ValueError) as e:
        shapes = ", ".join(a.str_short() for a in avals)
        raise ShapeError(f"{prim.name}: operands {shapes} do not fit: {str(e).splitlines()[0]}") from None
    outs = out if isinstance(out, (list, tuple)) else [out]
    return tuple(ShapedArray(o.shape, o.dtype) for o in outs)


def _fallback_abstract_eval(prim: Primitive, avals, params: dict):
    outs = _eval_shape(prim, tuple(avals), tuple(params.items()))
    return list(outs) if prim.multiple_results else outs[0]


set_fallback_abstract_eval(_fallback_abstract_eval)
