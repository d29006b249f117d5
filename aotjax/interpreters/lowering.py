"""The lowering rule table: how each primitive computes on `jax` values, and `eval_jaxpr_jax`, which
runs a jaxpr with those rules.

Eager evaluation, `to_jax` and compilation all use these rules, so the three cannot disagree. The
table lives in the interpreter layer (as JAX's lives in `interpreters/mlir.py`): the eval interpreter
executes primitives through it and every op family fills it; `aotjax.lowering` builds jax functions
and XLA executables from jaxprs on top of it.
"""
from __future__ import annotations

import functools
import os
from typing import Any, Protocol, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import checkify

from aotjax.core.avals import ShapedArray
from aotjax.core.checks import check_record, lowering_checks
from aotjax.core.errors import ShapeError
from aotjax.core.ir import Jaxpr, Literal
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


def lowered_avals(prim: Primitive, avals: Sequence[ShapedArray], params: dict) -> tuple[ShapedArray, ...]:
    """What `prim`'s lowering computes from operands of `avals` (jax's shape rules: a check of params from outside)."""
    return _eval_shape(prim, tuple(avals), tuple(params.items()))


def _fallback_abstract_eval(prim: Primitive, avals, params: dict):
    outs = _eval_shape(prim, tuple(avals), tuple(params.items()))
    return list(outs) if prim.multiple_results else outs[0]


set_fallback_abstract_eval(_fallback_abstract_eval)


def eval_jaxpr_jax(jaxpr: Jaxpr, consts: Sequence[Any], args: Sequence[Any]) -> list[Any]:
    """Evaluate `jaxpr` on `jax` values (arrays or jax tracers) with each primitive's lowering rule;
    returns the list of outputs. Assumes the jaxpr has no in-place equations
    (`aotjax.lowering.check_lowerable`).

    Higher-order primitives call this on the sub-jaxprs in their params from their lowering rule."""
    env: dict = {}

    def read(a):
        return jnp.asarray(a.val, dtype=a.aval.dtype) if isinstance(a, Literal) else env[a]

    for v, x in zip(jaxpr.constvars, consts, strict=True):
        env[v] = x
    for v, x in zip(jaxpr.invars, args, strict=True):
        env[v] = x
    for eqn in jaxpr.eqns:
        info = eqn.source_info
        if info is None:
            out = lowering_rule(eqn.primitive)(*map(read, eqn.inputs), **eqn.params)
        else:  # NOTE: the user's line in the op's location (XLA dumps, profiles), as `prim@file.py:12 (fn)`
            with jax.named_scope(_scope_name(eqn.primitive, info)):
                out = lowering_rule(eqn.primitive)(*map(read, eqn.inputs), **eqn.params)
        outs = out if eqn.primitive.multiple_results else (out,)
        for v, x in zip(eqn.outputs, outs, strict=True):
            env[v] = x
    return [read(a) for a in jaxpr.outvars]


@functools.lru_cache(maxsize=8192)
def _scope_name(prim: Primitive, info) -> str:
    return f"{prim.name}@{os.path.basename(info.file)}:{info.line} ({info.function})".replace("/", "|")


# -- run-time checks -----------------------------------------------------------------------------------
def check_failure(error, errors: dict) -> Exception | None:
    """The exception of the first failed check of `jax.experimental.checkify` error `error` (the class and message
    the op raises eagerly, the user's line included; `errors` maps message templates to classes, as a `CheckRecord`
    collects them), or None if every check passed."""
    exc = error.get_exception()
    if exc is None:
        return None
    cls = errors.get(getattr(exc, "fmt_string", None))
    if cls is None:  # NOTE: not one of ours (a check jax added itself): report it as jax words it
        return RuntimeError(str(exc))
    return cls(exc.fmt_string.format(*(np.asarray(a).item() for a in exc.args)))


def checked_executable(prim: Primitive, params: dict):
    """`prim`'s lowering rule, jitted with the run-time checks of its sub-programs lowered through `checkify`: how
    eager mode runs a higher-order primitive, so that an index out of range in a loop body raises as it would in a
    Python loop."""
    rule = functools.partial(lowering_rule(prim), **params)
    errors: dict = {}

    def lowered(*vals):
        with lowering_checks() as record:
            outs = rule(*vals)
        errors.update(record.errors)
        return outs

    checked = jax.jit(checkify.checkify(lowered, errors=checkify.user_checks))

    def call(*vals):
        error, outs = checked(*vals)
        if errors:
            failure = check_failure(error, errors)
            if failure is not None:
                raise failure
        return outs

    return call


def eval_sub_jaxpr(closed, args: Sequence[Any]) -> tuple[list, Any]:
    """For the lowering rule of a higher-order primitive: `closed` (a sub-program: a loop body, a branch) evaluated
    on `args`, and, when a checked program is being lowered (`jit(f, checks=True)`, eager control flow), its
    run-time checks' predicates and-ed into one `ok` (a value of the sub-program's trace, which the rule must pass
    out of the sub-program, as a carry or an output, and append to `check_record().predicates`); else None."""
    record = check_record()
    if record is None:
        return eval_jaxpr_jax(closed.jaxpr, closed.consts, args), None
    with lowering_checks() as inner:
        outs = eval_jaxpr_jax(closed.jaxpr, closed.consts, args)
    record.errors.update(inner.errors)
    return outs, functools.reduce(jnp.logical_and, inner.predicates, jnp.asarray(True))
