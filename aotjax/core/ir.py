"""The program representation: SSA jaxprs of primitive equations, as in JAX.

A `Jaxpr` has input variables, a list of equations and output atoms (variables or literals). A
`ClosedJaxpr` pairs one with the values of its constant variables. Equations keep the user source
line that produced them. A jaxpr traced without functionalize may contain view and mutation
equations; it is then read with reference semantics (see `aotjax.core.eval_jaxpr`).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from typing import Any, Iterator, Protocol

import numpy as np

from aotjax.core.avals import ShapedArray
from aotjax.core.source_info import SourceInfo

_var_ids = itertools.count()


class Var:
    """A variable of a jaxpr. Identity is the object; names are given when printing."""

    __slots__ = ("aval", "id", "hint")

    def __init__(self, aval: ShapedArray, hint: str | None = None):
        self.aval = aval
        self.id = next(_var_ids)
        self.hint = hint  # NOTE: a pytree path or role, shown by printers that want it; never semantic.

    def __repr__(self) -> str:
        return f"Var({self.id}:{self.aval.str_short()})"


class Literal:
    """A scalar constant written inline in an equation (`add a 1.0`)."""

    __slots__ = ("val", "aval")

    def __init__(self, val: Any, aval: ShapedArray):
        self.val = val
        self.aval = aval

    def __repr__(self) -> str:
        return f"Literal({format_literal(self.val)})"


def format_literal(val) -> str:
    v = np.asarray(val)
    if v.dtype == np.bool_:
        return "True" if v.item() else "False"
    if np.issubdtype(v.dtype, np.floating):
        return repr(float(v.item()))
    return repr(v.item())


Atom = Var | Literal


@dataclass(eq=False)
class Eqn:
    """`outputs = primitive[params] inputs`, with the user's source line that produced it."""

    primitive: Any  # aotjax.core.primitive.Primitive
    inputs: list[Atom]
    outputs: list[Var]
    params: dict[str, Any]
    source_info: SourceInfo | None = None


@dataclass(eq=False)
class Jaxpr:
    """`{ lambda constvars ; invars . let eqns in (outvars) }`."""

    constvars: list[Var]
    invars: list[Var]
    eqns: list[Eqn]
    outvars: list[Atom]

    @property
    def in_avals(self) -> list[ShapedArray]:
        return [v.aval for v in self.invars]

    @property
    def out_avals(self) -> list[ShapedArray]:
        return [v.aval for v in self.outvars]

    def __str__(self) -> str:
        return self.pretty()

    def _repr_pretty_(self, p, cycle):  # IPython / Jupyter
        p.text(str(self))


@dataclass(frozen=True)
class JaxprMeta:
    """What a program carries beside its equations, for the passes after the one that made it.

    `name`: the program's name (`f_forward`; the StableHLO module's); `donate`: the inputs a compiler
    may donate (their buffers are written in place); `residual_sources`: for a linear program made by
    partial evaluation, one `aotjax.interpreters.partial_eval.ResidualSource` per residual input (the
    primitive and user source line that computed it). Core knows no interpreter: the type is theirs."""

    name: str | None = None
    donate: tuple[int, ...] = ()
    residual_sources: tuple[Any, ...] = ()


@dataclass(eq=False)
class ClosedJaxpr:
    """A jaxpr plus the values of its constvars, (optionally) the pytree structures of its inputs and
    outputs as the user wrote them, and its `JaxprMeta`."""

    jaxpr: Jaxpr
    consts: list[Any]
    in_tree: Any = None
    out_tree: Any = None
    meta: JaxprMeta = field(default_factory=JaxprMeta)

    @property
    def in_avals(self) -> list[ShapedArray]:
        return self.jaxpr.in_avals

    @property
    def out_avals(self) -> list[ShapedArray]:
        return self.jaxpr.out_avals

    @property
    def eqns(self) -> list[Eqn]:
        return self.jaxpr.eqns

    def with_meta(self, **changes: Any) -> "ClosedJaxpr":
        """The same program with `meta` fields replaced (`closed.with_meta(name="f_joint")`)."""
        return ClosedJaxpr(self.jaxpr, self.consts, self.in_tree, self.out_tree, replace(self.meta, **changes))

    def __str__(self) -> str:
        return self.pretty()

    __repr__ = __str__

    def _repr_pretty_(self, p, cycle):
        p.text(str(self))


class DceRule(Protocol):
    """`rule(eqn, used_outputs) -> eqn`: equation `eqn` (of a higher-order primitive) with what produces its unused
    outputs removed (`used_outputs[k]` says whether output k is read); the new equation may drop unused outputs and
    the operands nothing then reads (a loop's dead carries, a branch's dead results). Its outputs must be a subset of
    `eqn.outputs` (the same `Var` objects) that includes every used one."""

    def __call__(self, eqn: "Eqn", used_outputs: list[bool]) -> "Eqn": ...


# NOTE: filled by the op families beside their higher-order primitives (`aotjax.ops.control_flow`); core knows no op.
dce_rules: dict[Any, DceRule] = {}


class SplitRule(Protocol):
    """`rule(eqn, first, second) -> (first_eqn, second_eqn) | None`: equation `eqn` (a loop) as two equations run one
    after the other: `first_eqn` computes the outputs marked in `first` and returns besides, stacked over the
    iterations, the values of the body the second part reads; `second_eqn` computes the outputs marked in `second` and
    not in `first` from those, computing nothing `first_eqn` does. Their outputs are `eqn`'s (the same `Var` objects)
    plus the stacked values (new ones). None when there is nothing to split. How a backward is split into its
    input-gradient and weight-gradient programs (`aotjax.transforms.split_backward`) without running a loop twice."""

    def __call__(self, eqn: "Eqn", first: list[bool], second: list[bool]) -> "tuple[Eqn, Eqn] | None": ...


split_rules: dict[Any, SplitRule] = {}  # NOTE: as `dce_rules`: filled beside the loops (`scan`)


def dce(eqns: list[Eqn], outvars: list) -> list[Eqn]:
    """The equations `outvars` need, in order (equations are pure: the others can go). An equation of a primitive
    with a rule in `dce_rules` is pruned inside too (a loop's unused carries and results)."""
    live = {id(a) for a in outvars if isinstance(a, Var)}
    kept = []
    for eqn in reversed(eqns):
        used = [id(v) in live for v in eqn.outputs]
        if any(used):
            rule = dce_rules.get(eqn.primitive)
            if rule is not None:
                eqn = rule(eqn, used)
            kept.append(eqn)
            live.update(id(a) for a in eqn.inputs if isinstance(a, Var))
    return kept[::-1]


def rename_inputs(eqns: list[Eqn], renamed: dict) -> list[Eqn]:
    """`eqns` reading `renamed[id(v)]` wherever they read a variable `v` that `renamed` maps (what joins two programs
    at the values one passes the other); equations reading none of them are kept as they are."""
    def read(a):
        return renamed.get(id(a), a) if isinstance(a, Var) else a

    return [Eqn(e.primitive, [read(a) for a in e.inputs], e.outputs, e.params, e.source_info)
            if any(isinstance(a, Var) and id(a) in renamed for a in e.inputs) else e for e in eqns]


def sub_jaxprs(eqn: Eqn) -> Iterator[Jaxpr]:
    """The sub-programs a higher-order equation carries in its params (a loop's body, a conditional's branches)."""
    for v in eqn.params.values():
        for p in v if isinstance(v, (tuple, list)) else (v,):
            if isinstance(p, ClosedJaxpr):
                yield p.jaxpr
            elif isinstance(p, Jaxpr):
                yield p


def uses_primitive(jaxpr: Jaxpr | ClosedJaxpr, prim: Any) -> bool:
    """Whether `jaxpr`, or a sub-program of one of its equations, has an equation of `prim`."""
    jaxpr = jaxpr.jaxpr if isinstance(jaxpr, ClosedJaxpr) else jaxpr
    return any(e.primitive is prim or any(uses_primitive(s, prim) for s in sub_jaxprs(e)) for e in jaxpr.eqns)


def prune_jaxpr(closed: ClosedJaxpr, used_outputs: list[bool]) -> tuple[ClosedJaxpr, list[bool]]:
    """`closed` returning only the outputs marked in `used_outputs`, with the equations they need and only the inputs
    those read; also which inputs are kept (the DCE rules of higher-order primitives prune their bodies with it)."""
    j = closed.jaxpr
    outvars = [v for v, u in zip(j.outvars, used_outputs, strict=True) if u]
    eqns = dce(j.eqns, outvars)
    used = _read_inputs(j, eqns, outvars)
    pruned = Jaxpr(j.constvars, [v for v, u in zip(j.invars, used) if u], eqns, outvars)
    return ClosedJaxpr(pruned, closed.consts, meta=closed.meta), used


def used_inputs(jaxpr: Jaxpr, used_outputs: list[bool]) -> list[bool]:
    """Which inputs of `jaxpr` the outputs marked in `used_outputs` read (through the equations they need)."""
    outvars = [v for v, u in zip(jaxpr.outvars, used_outputs) if u]
    return _read_inputs(jaxpr, dce(jaxpr.eqns, outvars), outvars)


def _read_inputs(jaxpr: Jaxpr, eqns: list[Eqn], outvars: list) -> list[bool]:
    read = {id(a) for e in eqns for a in e.inputs} | {id(a) for a in outvars}
    return [id(v) in read for v in jaxpr.invars]


def structure_key(closed: ClosedJaxpr | Jaxpr) -> tuple:
    """A hashable key equal for two programs that compute the same thing the same way: equations, variables numbered
    in order of appearance, literals, avals, params (sub-programs by their own key, other params as they are), and
    constants by identity. What lets eager control flow reuse one executable for a body traced again."""
    jaxpr, consts = (closed.jaxpr, closed.consts) if isinstance(closed, ClosedJaxpr) else (closed, ())
    number: dict[int, int] = {}

    def bind(v: Var) -> tuple:
        number[id(v)] = len(number)
        return (v.aval.shape, v.aval.dtype)

    def atom(a) -> Any:
        if isinstance(a, Literal):
            return ("lit", format_literal(a.val), a.aval.dtype)
        return number[id(a)]

    key: list = [tuple(id(c) for c in consts), tuple(bind(v) for v in jaxpr.constvars),
                 tuple(bind(v) for v in jaxpr.invars)]
    for e in jaxpr.eqns:
        params = tuple((k, param_key(v)) for k, v in e.params.items())
        key.append((e.primitive, tuple(atom(a) for a in e.inputs), params, tuple(bind(v) for v in e.outputs)))
    key.append(tuple(atom(a) for a in jaxpr.outvars))
    return tuple(key)


def param_key(v: Any) -> Any:
    """A param as a hashable key: a sub-program by its `structure_key`, other values as they are."""
    if isinstance(v, (ClosedJaxpr, Jaxpr)):
        return structure_key(v)
    if isinstance(v, (tuple, list)):
        return tuple(param_key(x) for x in v)
    return v


def dce_jaxpr(closed: ClosedJaxpr) -> ClosedJaxpr:
    """`closed` without the equations its outputs do not need."""
    j = closed.jaxpr
    return ClosedJaxpr(Jaxpr(j.constvars, j.invars, dce(j.eqns, j.outvars), j.outvars), closed.consts,
                       closed.in_tree, closed.out_tree, closed.meta)
