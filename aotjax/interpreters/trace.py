"""The trace interpreter: records every primitive bound into a jaxpr, as written.

View and in-place equations are recorded as they happen; a mutation equation binds a new variable
for the tensor it wrote, and the Python tracer object then stands for that variable, so the jaxpr
stays SSA. Read with reference semantics (`eval_jaxpr` on eager Tensors), it reproduces the
traced function's writes into its arguments.
"""
from __future__ import annotations

from aotjax.core import views
from aotjax.core.avals import ShapedArray, aval_of_value, scalar_literal
from aotjax.core.errors import UnsupportedError
from aotjax.core.interpreter import Trace, Tracer, bind, full_raise, new_main
from aotjax.core.ir import ClosedJaxpr, Eqn, Jaxpr, Literal, Var
from aotjax.core.primitive import Kind, abstract_eval
from aotjax.core.source_info import user_source_info, where
from aotjax.core.typecheck import typecheck, typecheck_enabled
from aotjax.interpreters.eval import read
from aotjax.interpreters.functionalize import captured_alias_error
from aotjax.tensor import Tensor, record_layout, view_layout


class JaxprTracer(Tracer, Tensor):
    __slots__ = ("_trace", "_var")

    def __init__(self, trace: "JaxprTrace", atom, strides=None, offset: int = 0):
        self._trace = trace
        self._var = atom
        self._init_slots(atom.aval, strides, offset)


class JaxprBuilder:
    """Collects the equations, constants and inputs of the jaxpr being traced."""

    def __init__(self):
        self.eqns: list[Eqn] = []
        self.constvars: list[Var] = []
        self.consts: list = []
        self._const_tracers: dict[int, JaxprTracer] = {}
        self.captured: set[Var] = set()  # the constants and the views of them: what the function did not make
        # NOTE: set by make_jaxpr: storage key -> (tracer, chain) of the arguments: what a captured tensor sharing
        # memory with one is read through
        self.arguments: dict[int, list[tuple[JaxprTracer, tuple]]] = {}
        self.passed_twice: set[int] = set()  # ids of the tracers of a tensor passed as several arguments
        # NOTE: the memory each traced tensor views, which the program as written leaves to reference semantics:
        # var -> (the var of the tensor that first held that memory, the view chain from it), and that tensor's
        # latest var (a write into it binds a new one). Control flow reads it (`JaxprTrace.view_base`): the views
        # of one tensor that a body captures must stay views of one value in its pure sub-program.
        self.view_of: dict[Var, tuple[Var, tuple]] = {}
        self.latest: dict[Var, Var | None] = {}

    def new_arg(self, trace: "JaxprTrace", aval: ShapedArray, strides=None, offset: int = 0) -> JaxprTracer:
        return JaxprTracer(trace, Var(aval), strides, offset)

    def const(self, trace: "JaxprTrace", val, aval: ShapedArray, strides=None, offset: int = 0) -> JaxprTracer:
        tracer = self._const_tracers.get(id(val))
        if tracer is None:
            var = Var(aval)
            self.constvars.append(var)
            self.consts.append(val)
            self.captured.add(var)
            tracer = self._const_tracers[id(val)] = JaxprTracer(trace, var, strides, offset)
        return tracer

    def build(self, invars: list[Var], out_tracers: list[JaxprTracer]) -> ClosedJaxpr:
        jaxpr = Jaxpr(list(self.constvars), list(invars), list(self.eqns), [t._var for t in out_tracers])
        return ClosedJaxpr(jaxpr, list(self.consts))


class JaxprTrace(Trace):
    enables_grad = True  # NOTE: a traced program is cached; under `no_grad` the call of it is cut, not its inside

    @property
    def builder(self) -> JaxprBuilder:
        return self.main.global_data

    def pure(self, val):
        if isinstance(val, Tensor):  # NOTE: an eager value captured as a constant, unless it is an argument's
            arguments = self.builder.arguments.get(views.storage_key(val))
            if arguments is not None:
                return _argument_view(val, arguments)
            return self.builder.const(self, read(val), val.aval, val._strides, val._offset)
        lit = scalar_literal(val)
        if lit is not None:
            return JaxprTracer(self, Literal(lit, aval_of_value(lit)))
        return self.builder.const(self, val, aval_of_value(val))

    def lift(self, tracer):
        return self.builder.const(self, tracer, tracer.aval, tracer._strides, tracer._offset)

    def is_captured(self, tracer) -> bool:
        return tracer._var in self.builder.captured

    def argument_keys(self, tracer) -> list:
        return [(key, chain) for key, arguments in self.builder.arguments.items() for t, chain in arguments
                if t is tracer]

    def process_primitive(self, prim, tracers, params):
        avals_out = abstract_eval(prim, [t.aval for t in tracers], params)
        outvars = [Var(a) for a in avals_out]
        self.builder.eqns.append(Eqn(prim, [t._var for t in tracers], outvars, dict(params), user_source_info()))
        if prim.kind is Kind.MUTATION:
            written = [tracers[i] for i in prim.mutates]
            if prim.metadata_view is not None:
                t = written[0]
                if id(t) in self.builder.passed_twice:
                    raise UnsupportedError(
                        f"make_jaxpr: {prim.name} changes the view of a tensor passed as several arguments{where()}; "
                        f"the program as written has one input per argument, which cannot change view together. Pass "
                        f"the tensor once, or trace with jit or functionalize, which make it one input.")
                t._strides, t._offset = view_layout(prim.metadata_view, t, avals_out[0].shape, params)
            for t, v in zip(written, outvars):
                self._note_write(t._var, v, metadata=prim.metadata_view is not None)
                t._var = v
                t._aval = v.aval
            return written
        if prim.kind is Kind.VIEW:
            if tracers[0]._var in self.builder.captured:
                self.builder.captured.update(outvars)
            root, chain = self.builder.view_of.get(tracers[0]._var, (tracers[0]._var, ()))
            self.builder.view_of[outvars[0]] = (root, chain + (views.ViewStep.make(prim, params),))
        return record_layout(prim, tracers, [JaxprTracer(self, v) for v in outvars], params)

    def _note_write(self, old: Var, new: Var, metadata: bool) -> None:
        """`new` is the var of the tensor that was `old` after an in-place write (see `JaxprBuilder.view_of`)."""
        root, chain = self.builder.view_of.get(old, (old, ()))
        if metadata:
            # NOTE: a tensor that changed its own view (`t_`) is traced as its own memory from now on; if it was the
            # memory's first tensor, the views made from it are no longer views of what its var reads: untracked
            if not chain:
                self.builder.latest[root] = None
            return
        self.builder.view_of[new] = (root, chain)
        if not chain:
            self.builder.latest[root] = new

    def view_base(self, tracer):
        root, chain = self.builder.view_of.get(tracer._var, (tracer._var, ()))
        latest = self.builder.latest.get(root, root)
        if latest is None:
            return id(tracer), tracer, ()
        return id(root), JaxprTracer(self, latest), chain


def _argument_view(val: Tensor, arguments: list) -> JaxprTracer:
    """A captured tensor that shares memory with arguments: a view of one of them (the program as written reads
    it through the argument, so that it sees what the function wrote)."""
    for tracer, base_chain in arguments:
        chain = views.relative_chain(val._chain, base_chain)
        if chain is not None:
            return views.apply_chain(bind, tracer, chain)
    raise captured_alias_error("make_jaxpr", val)


def trace_flat(fun, avals) -> ClosedJaxpr:
    """Trace `fun` (flat inputs of `avals`, returning a flat list) into a ClosedJaxpr: what rules of
    higher-order primitives use to build the sub-jaxprs of their transformed forms."""
    with new_main(JaxprTrace, JaxprBuilder(), dynamic=True) as main:
        trace = main.trace
        in_tracers = [trace.builder.new_arg(trace, a) for a in avals]
        outs = [full_raise(trace, o) for o in fun(*in_tracers)]
        closed = trace.builder.build([t._var for t in in_tracers], outs)
    if typecheck_enabled():
        typecheck(closed)
    return closed
