"""Printing jaxprs in JAX's textual style, nesting sub-jaxprs and optionally each equation's source line.

    { lambda a:f32[]=2.0 b:f32[64] ; c:f32[3]. let
        d:f32[3] = sin c
        e:f32[3] = mul d a
      in (e,) }

A closed jaxpr's constants print their values after their binders when they are concrete and have at
most `MAX_PRINTED_CONST_SIZE` elements (`a:f32[]=2.0`, `b:i32[3]=[1,2,3]`); larger or traced ones print
only their type. Params print as text, never as a memory address: primitives and functions by name
(`policy=nothing_saveable`, `partial(f, 2)`), other objects by their `str` or else their type.
"""
from __future__ import annotations

import functools
import types
from typing import Any, Sequence

import jax
import numpy as np

from aotjax.core.ir import ClosedJaxpr, Eqn, Jaxpr, Literal, Var, format_literal

MAX_PRINTED_CONST_SIZE = 8  # constants with at most this many elements print their values


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


def _const_binder(v: Var, val: Any, names: _Names) -> str:
    text = _small_value(val)
    return _binder(v, names) if text is None else f"{_binder(v, names)}={text}"


def _small_value(val: Any) -> str | None:
    """A concrete constant of at most MAX_PRINTED_CONST_SIZE elements as text (`2.0`, `[1,2,3]`); None for
    a larger one or a traced one (a tracer of an enclosing transform has no value)."""
    if not isinstance(val, (np.ndarray, np.generic, jax.Array)) or isinstance(val, jax.core.Tracer):
        return None
    if np.size(val) > MAX_PRINTED_CONST_SIZE:
        return None
    try:
        arr = np.asarray(val)
    except Exception:  # NOTE: a deleted (donated) buffer: print the type only
        return None
    return _array_text(arr)


def _array_text(arr: np.ndarray) -> str:
    if arr.ndim == 0:
        return format_literal(arr.astype(np.float32) if arr.dtype.kind == "V" else arr)  # NOTE: V: bfloat16 & co
    return "[" + ",".join(_array_text(a) for a in arr) + "]"


_FUNCTIONS = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, functools.partial)


def _function_name(f: Any) -> str:
    """`nothing_saveable`, `Model.forward`, `partial(scale, 2)`: a function as its name, not its address."""
    if isinstance(f, functools.partial):
        args = [_function_name(f.func), *(_text(a, nested=True) for a in f.args),
                *(f"{k}={_text(a, nested=True)}" for k, a in f.keywords.items())]
        return f"partial({', '.join(args)})"
    if isinstance(f, types.MethodType):
        owner = f.__self__
        return f"{getattr(owner, '__name__', type(owner).__name__)}.{f.__name__}"
    return f.__name__


def _text(v: Any, nested: bool = False) -> str:
    """A param value as text: functions by name, containers element by element, an object with no
    `str` of its own by its type name; anything else as `str` (`repr` inside a container)."""
    if isinstance(v, _FUNCTIONS):
        return _function_name(v)
    if isinstance(v, (tuple, list)) and any(isinstance(x, _FUNCTIONS) or _has_default_repr(x) for x in v):
        items = [_text(x, nested=True) for x in v]
        if isinstance(v, list):
            return f"[{', '.join(items)}]"
        return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
    if _has_default_repr(v):
        return type(v).__name__
    return repr(v) if nested else str(v)


def _has_default_repr(v: Any) -> bool:
    """Whether `v` prints as `<... object at 0x...>` (its class defines neither `__str__` nor `__repr__`)."""
    return type(v).__repr__ is object.__repr__ and type(v).__str__ is object.__str__


def _param(v: Any, names: _Names, indent: int) -> str:
    consts: Sequence = ()
    if isinstance(v, ClosedJaxpr):
        v, consts = v.jaxpr, v.consts
    if isinstance(v, Jaxpr):
        return "\n" + _pp(v, names, indent + 6, False, consts)
    if isinstance(v, tuple) and v and all(isinstance(x, (Jaxpr, ClosedJaxpr)) for x in v):  # NOTE: cond's branches
        return "(" + "".join(_param(x, names, indent) for x in v) + "\n" + " " * (indent + 4) + ")"
    if isinstance(v, np.dtype):
        return v.name
    if isinstance(v, type) and issubclass(v, np.generic):
        return np.dtype(v).name
    if hasattr(v, "name") and hasattr(v, "kind") and hasattr(v, "abstract_eval"):
        return v.name  # a Primitive
    return _text(v)


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


def _pp(jaxpr: Jaxpr, names: _Names, indent: int, source_info: bool, const_vals: Sequence = ()) -> str:
    pad = " " * indent
    vals = list(const_vals) if len(const_vals) == len(jaxpr.constvars) else [None] * len(jaxpr.constvars)
    consts = " ".join(_const_binder(v, c, names) for v, c in zip(jaxpr.constvars, vals))
    ins = " ".join(_binder(v, names) for v in jaxpr.invars)
    head = f"{pad}{{ lambda {consts}{' ' if consts else ''}; {ins}. let"
    body = [_pp_eqn(e, names, indent + 4, source_info) for e in jaxpr.eqns]
    outs = ", ".join(_atom(a, names) for a in jaxpr.outvars)
    tail = f"{pad}  in ({outs}{',' if len(jaxpr.outvars) == 1 else ''}) }}"
    return "\n".join([head, *body, tail])


def pp_jaxpr(jaxpr: Jaxpr, source_info: bool = False, consts: Sequence = ()) -> str:
    """The jaxpr as text; with `source_info=True` each equation ends with `# file.py:line (fn)`. `consts`
    are the values of its constvars (a ClosedJaxpr's), printed when small."""
    return _pp(jaxpr, _Names(), 0, source_info, consts)


# NOTE: the printing methods of the IR's classes live with the printer, which reads the IR (the IR knows no printer);
# `aotjax.core` imports this module, so every Jaxpr has them.
def _pretty_jaxpr(self: Jaxpr, source_info: bool = False) -> str:
    """The program as text, in JAX's style; with `source_info=True` each equation ends with its user source line."""
    return pp_jaxpr(self, source_info=source_info)


def _pretty_closed_jaxpr(self: ClosedJaxpr, source_info: bool = False) -> str:
    """The program as text, in JAX's style, its small constants printed; with `source_info=True` each equation ends
    with its user source line."""
    return pp_jaxpr(self.jaxpr, source_info=source_info, consts=self.consts)


Jaxpr.pretty = _pretty_jaxpr
ClosedJaxpr.pretty = _pretty_closed_jaxpr
