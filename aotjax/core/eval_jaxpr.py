"""Evaluating a jaxpr by binding each equation under the current interpreters."""
from __future__ import annotations

from aotjax.core.ir import ClosedJaxpr, Jaxpr, Literal
from aotjax.core.source_info import source_info_of


def eval_jaxpr(jaxpr: Jaxpr | ClosedJaxpr, *args, consts=None, overrides: dict | None = None):
    """Run `jaxpr` on `args`; returns the list of outputs.

    Views and in-place equations keep reference semantics: with eager Tensors as arguments, a view
    equation makes a real view and an in-place equation writes through into the arguments, exactly
    as the traced function did. Under a transform, each equation is bound to that transform.
    """
    if isinstance(jaxpr, ClosedJaxpr):
        consts = jaxpr.consts if consts is None else consts
        jaxpr = jaxpr.jaxpr
    consts = consts or []
    if len(args) != len(jaxpr.invars):
        raise TypeError(f"eval_jaxpr: the jaxpr takes {len(jaxpr.invars)} arguments, got {len(args)}")
    env: dict = {}
    for v, x in zip(jaxpr.constvars, consts):
        env[v] = x
    for v, x in zip(jaxpr.invars, args):
        env[v] = x

    def read(a):
        return a.val if isinstance(a, Literal) else env[a]

    for eqn in jaxpr.eqns:
        run = (overrides.get(eqn.primitive.name) if overrides else None) or eqn.primitive.bind
        with source_info_of(eqn.source_info):  # NOTE: a replayed equation keeps its user line
            outs = run(*map(read, eqn.inputs), **eqn.params)
        if len(eqn.outputs) == 1 and not eqn.primitive.multiple_results and not isinstance(outs, list):
            outs = [outs]
        for v, x in zip(eqn.outputs, outs):
            env[v] = x
    return [read(a) for a in jaxpr.outvars]
