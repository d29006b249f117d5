"""Checking a jaxpr: SSA (each variable bound once, used after it is bound) and types (each
equation's outputs match its primitive's abstract evaluation)."""
from __future__ import annotations

import os

from aotjax.core.errors import AotjaxError
from aotjax.core.ir import ClosedJaxpr, Jaxpr, Literal
from aotjax.core.primitive import abstract_eval


class JaxprTypeError(AotjaxError, TypeError):
    """A jaxpr that is not well formed: a bug in the pass that produced it."""


def typecheck_enabled() -> bool:
    """Whether passes typecheck the jaxprs they produce (`AOTJAX_TYPECHECK=1`; the test suite sets it)."""
    return os.environ.get("AOTJAX_TYPECHECK", "0") not in ("", "0")


def typecheck(jaxpr: Jaxpr | ClosedJaxpr) -> None:
    """Raise `JaxprTypeError` if `jaxpr` is not well formed."""
    if isinstance(jaxpr, ClosedJaxpr):
        if len(jaxpr.consts) != len(jaxpr.jaxpr.constvars):
            raise JaxprTypeError("typecheck: the number of consts does not match the constvars")
        jaxpr = jaxpr.jaxpr
    bound: set[int] = set()

    def bind_var(v, where):
        if v.id in bound:
            raise JaxprTypeError(f"typecheck: variable {v} is bound twice ({where})")
        bound.add(v.id)

    def check_atom(a, where):
        if not isinstance(a, Literal) and a.id not in bound:
            raise JaxprTypeError(f"typecheck: variable {a} is used before it is bound ({where})")

    for v in jaxpr.constvars + jaxpr.invars:
        bind_var(v, "inputs")
    for i, eqn in enumerate(jaxpr.eqns):
        where = f"equation {i}: {eqn.primitive.name} at {eqn.source_info}"
        for a in eqn.inputs:
            check_atom(a, where)
        try:
            expected = abstract_eval(eqn.primitive, [a.aval for a in eqn.inputs], eqn.params)
        except AotjaxError as e:
            raise JaxprTypeError(f"typecheck: {where}: {e}") from None
        got = [v.aval for v in eqn.outputs]
        if [(a.shape, a.dtype) for a in expected] != [(a.shape, a.dtype) for a in got]:
            raise JaxprTypeError(f"typecheck: {where}: outputs are {[str(a) for a in got]}, the rule gives "
                                 f"{[str(a) for a in expected]}")
        for v in eqn.outputs:
            bind_var(v, where)
    for a in jaxpr.outvars:
        check_atom(a, "outputs")
