"""Printing jaxprs in JAX's textual style, nesting sub-jaxprs and optionally each equation's source line.

    { lambda ; a:f32[3]. let
        b:f32[3] = sin a
      in (b,) }
"""
from __future__ import annotations

from typing import Any

import numpy as np

from aotjax.core.ir import ClosedJaxpr, Eqn, Jaxpr, Literal, Var, format_literal


class _Names:
    def __init__(self):
        self.names: dict[int, str] = {}

    def __call__(self, v: Var) -> str:
        if v.id not in self.names:
            self.names[v.id] = _nth_name(len(self.names))
        return self.names[v.id]


def _nth_name(n: int) -> str:
    s = ""
    n += 1
    while n:
        n, r = divmod(n - 1, 26)
        s = chr(ord("a") + r) + s
    return s


def _atom(a, names: _Names) -> str:
    if isinstance(a, Literal):
        return format_literal(a.val)
    return names(a)


def _binder(v: Var, names: _Names) -> str:
    return f"{names(v)}:{v.aval.str_short()}"


def _param(v: Any, names: _Names, indent: int) -> str:
    if isinstance(v, ClosedJaxpr):
        v = v.jaxpr
    if isinstance(v, Jaxpr):
        return "\n" + _pp(v, names, indent + 6, False)
    if isinstance(v, np.dtype):
        return v.name
    if isinstance(v, type) and issubclass(v, np.generic):
        return np.dtype(v).name
    if hasattr(v, "name") and hasattr(v, "kind") and hasattr(v, "abstract_eval"):
        return v.name  # a Primitive
    return str(v)


def _pp_eqn(eqn: Eqn, names: _Names, indent: int, source_info: bool) -> str:
    print_rule = getattr(eqn.primitive, "print_rule", None)
    params = print_rule(eqn.params) if print_rule else eqn.params
    ps = ""
    if params:
        ps = "[" + " ".join(f"{k}={_param(v, names, indent)}" for k, v in params.items()) + "]"
    lhs = " ".join(_binder(v, names) for v in eqn.outputs)
    rhs = f"{eqn.primitive.name}{ps} " + " ".join(_atom(a, names) for a in eqn.inputs)
    line = f"{' ' * indent}{lhs} = {rhs.rstrip()}" if lhs else f"{' ' * indent}{rhs.rstrip()}"
    if source_info and eqn.source_info is not None:
        line = f"{line}    # {eqn.source_info}"
    return line


def _pp(jaxpr: Jaxpr, names: _Names, indent: int, source_info: bool) -> str:
    pad = " " * indent
    consts = " ".join(_binder(v, names) for v in jaxpr.constvars)
    ins = " ".join(_binder(v, names) for v in jaxpr.invars)
    head = f"{pad}{{ lambda {consts}{' ' if consts else ''}; {ins}. let"
    body = [_pp_eqn(e, names, indent + 4, source_info) for e in jaxpr.eqns]
    outs = ", ".join(_atom(a, names) for a in jaxpr.outvars)
    tail = f"{pad}  in ({outs}{',' if len(jaxpr.outvars) == 1 else ''}) }}"
    return "\n".join([head, *body, tail])


def pp_jaxpr(jaxpr: Jaxpr, source_info: bool = False) -> str:
    """The jaxpr as text; with `source_info=True` each equation ends with `# file.py:line (fn)`."""
    return _pp(jaxpr, _Names(), 0, source_info)
