"""The partial-evaluation interpreter: run what is known, record what is not.

Each input is a `PartialVal`: a known value or only an abstract value (unknown). A primitive whose
operands are all known is bound at the level below, so it is computed (or staged by an outer
trace); a primitive with any unknown operand is recorded as an equation of the *unknown jaxpr*.
Known values read by recorded equations become **residuals**: inputs of the unknown jaxpr. Scalars
stay inline as literals.

`vjp = linearize (jvp + partial_eval) + transpose`: with the primals known and the tangents unknown,
the known part is the forward program (which returns the residuals) and the unknown jaxpr is the
linear tangent program that `transpose` turns into the backward program.

Convention of `partial_eval_flat(fun, pvals_in)` -> `(unknown_jaxpr, pvals_out, residuals)`:

- `unknown_jaxpr` is a `ClosedJaxpr` without consts whose inputs are `residuals` followed by the
  unknown inputs (in the order of `pvals_in`) and whose outputs are the unknown outputs (in the order
  of `pvals_out`), so `eval_jaxpr(unknown_jaxpr, *residuals, *unknown_args)` computes them;
- residuals come in the order of their first use, each known value at most once; only those used by
  the (dead-code-eliminated) unknown jaxpr are kept;
- `unknown_jaxpr.meta.residual_sources` has one `ResidualSource` per residual: the primitive and
  user source line that computed it (both None for a known input or a captured constant).
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple, Protocol, Sequence

from aotjax.core.avals import ShapedArray, aval_of_value, get_aval, scalar_literal
from aotjax.core.errors import UnsupportedError
from aotjax.core.eval_jaxpr import eval_jaxpr
from aotjax.core.interpreter import Trace, Tracer, below, full_raise, new_main
from aotjax.core.ir import ClosedJaxpr, Eqn, Jaxpr, JaxprMeta, Literal, Var, dce
from aotjax.core.primitive import Kind, Primitive, abstract_eval
from aotjax.core.source_info import SourceInfo, user_source_info, where
from aotjax.core.typecheck import typecheck, typecheck_enabled
from aotjax.interpreters.trace import trace_flat
from aotjax.tensor import Tensor, is_eager, record_layout

__all__ = ["PartialVal", "PartialEvalTracer", "PartialEvalTrace", "PartialEvalRule", "partial_eval_rules",
           "ResidualSource", "partial_eval_flat", "SplitJaxpr", "partial_eval_jaxpr",
           "partitioning_loop_bodies", "loop_body_repartition"]


@dataclass(frozen=True, slots=True)
class PartialVal:
    """A value known at partial-evaluation time (`const` is it), or only its abstract value (`const` is
    None: unknown)."""

    aval: ShapedArray
    const: Any = None

    @classmethod
    def known(cls, val) -> "PartialVal":
        return cls(get_aval(val), val)

    @classmethod
    def unknown(cls, aval: ShapedArray) -> "PartialVal":
        return cls(aval, None)

    @property
    def is_known(self) -> bool:
        return self.const is not None


class ResidualSource(NamedTuple):
    """Where a residual was computed: the primitive and the user's source line (None for inputs).
    `recipe` is `(primitive, params)` for a value made from no operand (a constant such as the zeros
    a jvp rule instantiates): the unknown jaxpr makes it again rather than reading it as a residual."""

    primitive: str | None
    source_info: SourceInfo | None
    recipe: tuple | None = None


def _literal_value(val):
    """`val` as the NumPy scalar it is inlined as (`scalar_literal`, as in the trace interpreter), or None
    if it is not a scalar constant."""
    if is_eager(val) and not val.shape:  # NOTE: a concrete 0-d tensor (a rule's scalar operand)
        if val._ag is not None:  # NOTE: it requires grad: a residual, which the backward reads recorded
            return None
        return val.numpy()[()]
    return scalar_literal(val)


class PartialEvalTracer(Tracer, Tensor):
    """A known value (`pval.const`, a value of the interpreters below) or an unknown one (`var`, its
    variable in the unknown jaxpr). `source` is the primitive and line that computed a known value."""

    __slots__ = ("_trace", "pval", "var", "source")

    def __init__(self, trace: "PartialEvalTrace", pval: PartialVal, var: Var | None = None,
                 source: ResidualSource | None = None):
        self._trace = trace
        self.pval = pval
        self.var = var
        self.source = source
        # NOTE: a known value's layout: the level below recorded it when it computed the value.
        self._init_slots(pval.aval, getattr(pval.const, "_strides", None), getattr(pval.const, "_offset", 0))


class _UnknownBuilder:
    """The unknown jaxpr under construction: its equations and the residuals read by them."""

    def __init__(self):
        self.eqns: list[Eqn] = []
        self.residual_vars: list[Var] = []
        self.residuals: list = []
        self.sources: list[ResidualSource] = []
        self._by_id: dict[int, Var] = {}
        self._made: list = []

    def atom(self, t: PartialEvalTracer):
        """The jaxpr atom reading tracer `t`: its variable, a literal, or a residual variable."""
        if not t.pval.is_known:
            return t.var
        const = t.pval.const
        lit = _literal_value(const)
        if lit is not None:
            return Literal(lit, aval_of_value(lit))
        var = self._by_id.get(id(const))
        if var is None and t.source is not None and t.source.recipe is not None:
            prim, params = t.source.recipe  # NOTE: made from nothing: cheaper to make again than to save
            var = self._by_id[id(const)] = Var(t.aval)
            self._made.append(const)  # NOTE: keeps `const` alive, so its id stays unique
            self.eqns.append(Eqn(prim, [], [var], dict(params), t.source.source_info))
        if var is None:
            var = self._by_id[id(const)] = Var(t.aval, hint="residual")
            self.residual_vars.append(var)
            self.residuals.append(const)
            self.sources.append(t.source or ResidualSource(None, None))
        return var

    def build(self, invars: list[Var], outvars: list) -> tuple[ClosedJaxpr, list]:
        eqns = dce(self.eqns, outvars)
        used = {id(a) for e in eqns for a in e.inputs} | {id(a) for a in outvars}
        keep = [i for i, v in enumerate(self.residual_vars) if id(v) in used]
        jaxpr = Jaxpr([], [self.residual_vars[i] for i in keep] + invars, eqns, outvars)
        closed = ClosedJaxpr(jaxpr, [], meta=JaxprMeta(residual_sources=tuple(self.sources[i] for i in keep)))
        return closed, [self.residuals[i] for i in keep]


class PartialEvalRule(Protocol):
    """`rule(trace, tracers, **params) -> list[PartialEvalTracer]` (one per result), used in place of the
    default for a primitive (typically higher-order: checkpoint, custom_vjp, control flow) of which at
    least one operand is unknown; all-known applications are always just bound below.

    A rule splits the primitive itself: it computes known parts with `trace.bind_known(prim, tracers,
    params)` (or by binding on `t.pval.const` of known tracers, then `trace.known(value)`), and records
    unknown parts with `trace.record(prim, tracers, params)`, which turns the known operands it reads into
    residuals. Every unknown tracer it returns must come from `record` (or be an input), so that the
    unknown jaxpr stays closed and in SSA order; known tracers it returns hold values of the levels below.
    """

    def __call__(self, trace: "PartialEvalTrace", tracers: list, **params: Any) -> list: ...


partial_eval_rules: dict[Primitive, PartialEvalRule] = {}


class PartialEvalTrace(Trace):
    @property
    def builder(self) -> _UnknownBuilder:
        return self.main.global_data

    def known(self, val, source: ResidualSource | None = None) -> PartialEvalTracer:
        return PartialEvalTracer(self, PartialVal.known(val), source=source)

    pure = lift = known

    def new_arg(self, pval: PartialVal) -> PartialEvalTracer:
        if pval.is_known:
            return self.known(pval.const)
        return PartialEvalTracer(self, pval, Var(pval.aval))

    def instantiate(self, t: PartialEvalTracer) -> PartialEvalTracer:
        """`t` as an unknown tracer (a known value becomes a residual or a literal read by the jaxpr)."""
        if not t.pval.is_known:
            return t
        return PartialEvalTracer(self, PartialVal.unknown(t.aval), self.builder.atom(t))

    def process_primitive(self, prim, tracers, params):
        if all(t.pval.is_known for t in tracers):
            return self.bind_known(prim, tracers, params)
        rule = partial_eval_rules.get(prim)
        if rule is not None:
            with below(self.main):  # NOTE: what the rule computes on known values belongs below this trace
                return rule(self, tracers, **params)
        if prim.kind is Kind.MUTATION:
            raise UnsupportedError(
                f"{prim.name}: partial evaluation of an in-place write to a value that is not known yet"
                f"{where()}; functionalize the function first (every derivative transform does).")
        return self.record(prim, tracers, params)

    def bind_known(self, prim, tracers, params) -> list:
        """Compute `prim` on known operands at the level below."""
        with below(self.main):
            outs = prim.bind(*(t.pval.const for t in tracers), **params)
        if prim.kind is Kind.MUTATION:  # NOTE: the known value itself was written; refresh its tracers
            written = [tracers[i] for i in prim.mutates]
            for t in written:
                t.pval = PartialVal.known(t.pval.const)
                t._aval = t.pval.aval
                t._strides, t._offset = getattr(t.pval.const, "_strides", None), getattr(t.pval.const, "_offset", 0)
            return written
        source = ResidualSource(prim.name, user_source_info(), None if tracers else (prim, dict(params)))
        return [self.known(o, source) for o in (outs if prim.multiple_results else [outs])]

    def record(self, prim, tracers, params) -> list:
        """Record `prim` as an equation of the unknown jaxpr; returns its (unknown) output tracers."""
        avals_out = abstract_eval(prim, [t.aval for t in tracers], params)
        inputs = [self.builder.atom(t) for t in tracers]
        outvars = [Var(a) for a in avals_out]
        self.builder.eqns.append(Eqn(prim, inputs, outvars, dict(params), user_source_info()))
        return record_layout(prim, tracers, [PartialEvalTracer(self, PartialVal.unknown(v.aval), v) for v in outvars],
                             params)


def partial_eval_flat(fun: Callable[..., Sequence], pvals_in: Sequence[PartialVal],
                      instantiate: bool | Sequence[bool] = False) -> tuple[ClosedJaxpr, list[PartialVal], list]:
    """Partially evaluate `fun` (flat inputs, a flat list of outputs) on `pvals_in`.

    Returns `(unknown_jaxpr, pvals_out, residuals)` as described in the module docstring. With
    `instantiate` (one flag, or one per output) known outputs are made unknown: the jaxpr returns them
    (as residuals or literals) and their `PartialVal` is unknown.

    >>> import aotjax
    >>> x = aotjax.tensor([0.0, 1.0])
    >>> jaxpr, pvals_out, res = partial_eval_flat(lambda x, y: [x.sin() * y],
    ...     [PartialVal.known(x), PartialVal.unknown(x.aval)])
    >>> print(jaxpr)
    { lambda ; a:f32[2] b:f32[2]. let
        c:f32[2] = mul a b
      in (c,) }
    >>> res[0]
    tensor([0.       , 0.84147096])
    """
    builder = _UnknownBuilder()
    with new_main(PartialEvalTrace, builder) as main:
        trace = main.trace
        in_tracers = [trace.new_arg(pv) for pv in pvals_in]
        outs = fun(*in_tracers)
        outs = [outs] if isinstance(outs, Tensor) else list(outs)
        out_tracers = [full_raise(trace, o) for o in outs]
        flags = [instantiate] * len(out_tracers) if isinstance(instantiate, bool) else list(instantiate)
        out_tracers = [trace.instantiate(t) if f else t for t, f in zip(out_tracers, flags, strict=True)]
        invars = [t.var for t in in_tracers if not t.pval.is_known]
        outvars = [t.var for t in out_tracers if not t.pval.is_known]
        jaxpr, residuals = builder.build(invars, outvars)
    if typecheck_enabled():
        typecheck(jaxpr)
    return jaxpr, [t.pval for t in out_tracers], residuals


# -- sub-programs (the rules of higher-order primitives) -------------------------------------------------
@dataclass
class SplitJaxpr:
    """A pure program split by `partial_eval_jaxpr`: `known` takes the known inputs and returns the known outputs
    then the residuals; `unknown` takes the residuals then the unknown inputs and returns the unknown outputs
    (`out_unknowns` marks them). `residual_inputs[r]` is the index of the input residual `r` is (a known input
    passed straight through, which a loop forwards rather than saves), or None; `residual_sources[r]` says where
    it was computed."""

    known: ClosedJaxpr
    unknown: ClosedJaxpr
    out_unknowns: list[bool]
    residual_inputs: list[int | None]

    @property
    def num_res(self) -> int:
        return len(self.residual_inputs)

    @property
    def residual_sources(self) -> tuple:
        return self.unknown.meta.residual_sources


def partial_eval_jaxpr(jaxpr: ClosedJaxpr, unknowns: Sequence[bool],
                       instantiate: bool | Sequence[bool] = False) -> SplitJaxpr:
    """Split pure program `jaxpr` into the part computable from the inputs not marked in `unknowns` and the rest
    (see `SplitJaxpr`); `instantiate` (one flag, or one per output) makes known outputs unknown. What loops and
    branches build their partial evaluation from (`aotjax.ops.control_flow`)."""
    avals = list(jaxpr.in_avals)
    split: dict = {}

    def known_part(*known_vals):
        it = iter(known_vals)
        pvals = [PartialVal.unknown(a) if uk else PartialVal.known(next(it))
                 for a, uk in zip(avals, unknowns, strict=True)]
        unknown, pvals_out, residuals = partial_eval_flat(lambda *a: eval_jaxpr(jaxpr, *a), pvals, instantiate)
        split.update(unknown=unknown, out_unknowns=[not pv.is_known for pv in pvals_out], n_res=len(residuals))
        return [pv.const for pv in pvals_out if pv.is_known] + residuals

    known = trace_flat(known_part, [a for a, uk in zip(avals, unknowns) if not uk])
    known_index = [i for i, uk in enumerate(unknowns) if not uk]
    invar_index = {id(v): known_index[k] for k, v in enumerate(known.jaxpr.invars)}
    n_res = split["n_res"]
    res_vars = known.jaxpr.outvars[len(known.jaxpr.outvars) - n_res:]
    residual_inputs = [invar_index.get(id(v)) if isinstance(v, Var) else None for v in res_vars]
    return SplitJaxpr(known, split["unknown"], split["out_unknowns"], residual_inputs)


# -- how loops split their bodies -------------------------------------------------------------------------
class _LoopBodies(threading.local):
    repartition: Callable | None = None


_loop_bodies = _LoopBodies()


@contextmanager
def partitioning_loop_bodies(repartition: Callable[[SplitJaxpr, Sequence[bool]], SplitJaxpr] | None):
    """While active, a loop split by partial evaluation (`scan`) passes its body's split to
    `repartition(split, unknowns)`, which may choose other residuals (what each iteration saves) and move the
    rest of the forward work into the unknown body (recomputed there): how `aot`'s partitioner reaches inside a
    loop body (`aotjax.partition.loops`). None: the body saves what its unknown part reads (JAX's choice)."""
    prev = _loop_bodies.repartition
    _loop_bodies.repartition = repartition
    try:
        yield
    finally:
        _loop_bodies.repartition = prev


def loop_body_repartition() -> Callable[[SplitJaxpr, Sequence[bool]], SplitJaxpr] | None:
    """The `repartition` of the innermost active `partitioning_loop_bodies`, or None."""
    return _loop_bodies.repartition
