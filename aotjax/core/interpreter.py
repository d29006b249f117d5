"""The interpreter stack, as in JAX's autodidax: levels, `bind`, and finding the top trace.

Every transform pushes a `MainTrace` at the next level. `bind(prim, *args)` finds the highest
level among its tracer arguments (or the dynamic trace, if higher), raises every argument to that
trace and lets it process the primitive; the trace binds whatever it computes in turn, which
reaches the levels below. Level 0 is eager evaluation. The dynamic trace is the innermost staging
trace (`make_jaxpr`), so that ops with no traced operands (`zeros(3)`) are staged too.

The stack is per thread (`_state`, a `threading.local`): each thread starts with eager evaluation
alone at level 0, so two threads can trace (`make_jaxpr`, `grad`, a `jit` first call) at once
without seeing each other's interpreters. `bind` reads it once.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any

from aotjax.core import call_epoch
from aotjax.core.errors import AotjaxError, ConcretizationError
from aotjax.core.primitive import Kind, Primitive
from aotjax.core.source_info import where


class MainTrace:
    """One active transform: its level on the stack, its Trace class and its global data."""

    __slots__ = ("level", "trace_type", "global_data", "trace", "active", "dynamic_below")

    def __init__(self, level: int, trace_type: type, global_data: Any):
        self.level = level
        self.trace_type = trace_type
        self.global_data = global_data
        self.trace = trace_type(self)
        self.active = True
        self.dynamic_below: MainTrace | None = None  # the dynamic trace when this one was pushed

    def __repr__(self) -> str:
        return f"MainTrace({self.level}, {self.trace_type.__name__})"


class Trace:
    """An interpreter. Subclasses implement `pure`, `lift` and `process_primitive`. `enables_grad`: the
    function it runs starts with differentiation enabled whatever the caller's `no_grad` (a staging trace,
    whose program is cached and reused where grad is on; a JVP trace, as `torch.func.grad` ignores an outer
    `torch.no_grad`)."""

    enables_grad = False

    def __init__(self, main: MainTrace):
        self.main = main

    def pure(self, val: Any) -> Any:
        """Wrap a value that is not a tracer (eager Tensor, array, scalar) as this trace's tracer."""
        raise NotImplementedError

    def lift(self, tracer: "Tracer") -> "Tracer":
        """Wrap a tracer of a lower level as this trace's tracer."""
        raise NotImplementedError

    def writes_captured(self, x: Any) -> bool:
        """Whether the function this trace runs may write in place into `x`, a tensor it captured from outside (not
        yet one of this trace's tracers): a trace that makes such writes effects of its own accepts them (a loop body
        carries them out; jit makes a captured eager tensor an implicit input). Elsewhere they are refused."""
        return False

    def is_captured(self, tracer: "Tracer") -> bool:
        """Whether `tracer` views a value this trace lifted from outside the function it runs (a tensor the
        function captured, through `pure` or `lift`): not an argument and not made inside, so not writable."""
        return False

    def view_base(self, tracer: "Tracer") -> tuple[int, "Tracer", tuple]:
        """The memory `tracer` views, for control flow capturing it: a key shared by the tracers viewing the same
        memory, the tracer of all of it (its current value) and the view chain from that to `tracer`. A trace that
        tracks no views answers that every tracer is its own memory."""
        return id(tracer), tracer, ()

    def argument_keys(self, tracer: "Tracer") -> list:
        """`(storage key, chain)` of the captured tensors that `tracer`, an argument of the function this trace
        runs, stands for (captured tensors sharing memory with it): what a transform nested inside maps too."""
        return []

    def process_primitive(self, prim: Primitive, tracers: list, params: dict) -> list:
        """Apply `prim`; return the outputs (for a mutation: the written operand tracers, updated). A
        trace that makes the tensors of a primitive with a `view_strides` rule (views) or a `layout_rule`
        (elementwise ops, `clone`) or that re-views a tensor (a metadata mutation) records their PyTorch layout on them
        (`aotjax.tensor.record_layout`, `view_layout`): `bind` only dispatches."""
        raise NotImplementedError


class Tracer:
    """Mixin of every interpreter's tracer. Concrete tracers subclass `aotjax.Tensor` and this."""

    __slots__ = ()
    _trace: Trace

    def _concrete_error(self, what: str) -> ConcretizationError:
        return ConcretizationError(
            f"{what} needs a concrete value, but this tensor is abstract ({self.aval.str_short()}, traced by "
            f"{type(self._trace).__name__}){where()}. Python control flow cannot depend on a traced value: "
            f"use aotjax.where(cond, a, b) for data-dependent selection, or mark the argument static "
            f"(static_argnums=...) if it is a configuration value.")


_eval_trace_type: type | None = None  # level 0 of every thread's stack (set by `install_eval_trace`)


class _ThreadState(threading.local):
    """The current thread's interpreter stack (`stack[0]` is eager evaluation) and dynamic trace, the
    innermost staging trace. `__init__` runs once in each thread, on its first use."""

    def __init__(self):
        self.stack: list[MainTrace] = []
        self.dynamic: MainTrace | None = None
        self.grad_enabled = True  # False inside `aotjax.no_grad()`: traced results get a zero derivative
        self.autocast = None  # inside `aotjax.autocast()`: (the dtype its low-precision ops use, its device type)
        if _eval_trace_type is not None:
            self.dynamic = MainTrace(0, _eval_trace_type, None)
            self.stack.append(self.dynamic)


_state = _ThreadState()


def install_eval_trace(trace_type: type) -> None:
    """Put the eager interpreter at level 0 of every thread's stack (called once by
    `aotjax.interpreters.eval`)."""
    global _eval_trace_type
    _eval_trace_type = trace_type
    _state.__init__()  # NOTE: this thread's state may predate the eager interpreter


@contextmanager
def new_main(trace_type: type, global_data: Any = None, dynamic: bool = False):
    """Push a new interpreter level for the duration of a transform."""
    state = _state
    main = MainTrace(len(state.stack), trace_type, global_data)
    state.stack.append(main)
    prev_dynamic = main.dynamic_below = state.dynamic
    if dynamic:
        state.dynamic = main
    prev_grad = state.grad_enabled
    if trace_type.enables_grad:
        state.grad_enabled = True
    call_epoch.transform_entered()
    try:
        yield main
    finally:
        state.grad_enabled = prev_grad
        state.dynamic = prev_dynamic
        state.stack.pop()
        main.active = False
        call_epoch.transform_left()


@contextmanager
def below(main: MainTrace):
    """Bind under `main`: while active, values without tracers of `main` (and ops with no tracer
    operands) go to the interpreters below it, even if `main` is the dynamic trace. A dynamic
    non-staging interpreter (functionalize) binds what it computes inside this context."""
    state = _state
    prev = state.dynamic
    state.dynamic = main.dynamic_below if prev is main else prev
    try:
        yield
    finally:
        state.dynamic = prev


@contextmanager
def rules_of(main: MainTrace):
    """While an interpreter's rule runs: ops with no tensor operand (the zeros a rule instantiates)
    are made at the level just below `main`, like the values the rule computes with."""
    state = _state
    prev = state.dynamic
    state.dynamic = state.stack[main.level - 1]
    try:
        yield
    finally:
        state.dynamic = prev


def stack_of_this_thread() -> list[MainTrace]:
    """The active interpreters of this thread, eager evaluation first (a copy)."""
    return list(_state.stack)


def find_top_trace(args) -> Trace:
    top = _state.dynamic
    for a in args:
        if isinstance(a, Tracer):
            m = a._trace.main
            if not m.active:
                raise escaped(a)
            if m.level > top.level:
                top = m
    return top.trace


def escaped(val: "Tracer") -> AotjaxError:
    """The error for a traced value used after its transform returned (kept in a global, a closure, an attribute)."""
    return AotjaxError(
        f"a traced value escaped its transform: a tensor traced by {type(val._trace).__name__} "
        f"({val.aval.str_short()}) was used after that transform returned{where()}. Return it as an output of the "
        f"transformed function instead of storing it in a global, a closure or an attribute (`self.cache = y` "
        f"inside a compiled forward: return y and assign it after the call)")


def staging() -> bool:
    """Whether a staging transform (`make_jaxpr`, a `jit` being traced, ...) is the dynamic trace of this thread:
    then even an op on eager values only is staged into its program.

    >>> seen = []
    >>> _ = aotjax.make_jaxpr(lambda x: seen.append(staging()) or x)(aotjax.ones(1))
    >>> staging(), seen
    (False, [True])
    """
    return _state.dynamic.level > 0


def full_raise(trace: Trace, val: Any) -> Any:
    if not isinstance(val, Tracer):
        return trace.pure(val)
    main = val._trace.main
    if main is trace.main:
        return val
    if not main.active:
        raise escaped(val)
    if main.level < trace.main.level:
        return trace.lift(val)
    raise AotjaxError(f"values of two different transforms were mixed at the same level{where()}")


def bind(prim: Primitive, *args, **params):
    """Apply `prim` to `args` under the interpreter stack; returns one output, or a list when the
    primitive has multiple results. Dispatch only: what a primitive means for PyTorch's layout and
    write rules is the frontend's and each interpreter's business."""
    top = _state.dynamic
    if top.level == 0:
        for a in args:
            if isinstance(a, Tracer):
                break
        else:  # NOTE: eager operands, no transform staging them: eager evaluation, which checks the params itself
            outs = top.trace.process_primitive(prim, args, params)
            return outs if prim.multiple_results else outs[0]
    if params:
        check_params(prim, params)
    trace = find_top_trace(args)
    tracers = [full_raise(trace, a) for a in args] if trace.main.level else args
    if trace.main.level and not _state.grad_enabled:
        outs = _bind_without_grad(trace, prim, tracers, params)
    else:
        outs = trace.process_primitive(prim, tracers, params)
    return outs if prim.multiple_results else outs[0]


def check_params(prim: Primitive, params: dict) -> None:
    """A TypeError naming `prim` and the param unless every value of `params` is hashable (they key the compile
    caches).

    >>> check_params(Primitive("demo"), {"perm": [1, 0]})
    Traceback (most recent call last):
    TypeError: demo: parameters must be hashable (they key the compile caches), but 'perm' (list) is not...
    """
    try:
        hash(tuple(params.values()))
    except TypeError:
        raise _unhashable_param(prim, params) from None


Primitive.bind = bind  # `prim.bind(*args)` is `bind(prim, *args)`, with no extra call on the hot path


# -- grad mode: `aotjax.no_grad()` -------------------------------------------------------------------
_cut_derivatives: list = [None]  # (prim, outs) -> outs with a zero derivative; set by `aotjax.ops.shape.views`


def register_no_grad(cut_derivatives) -> None:
    """Install `cut_derivatives(prim, outs)`, which gives the results of `prim` a zero derivative (a view's
    result stays a view): while grad is disabled, `bind` applies it to the results of every traced op."""
    _cut_derivatives[0] = cut_derivatives


def grad_enabled() -> bool:
    """Whether values computed now may be differentiated (False inside `aotjax.no_grad()`)."""
    return _state.grad_enabled


def set_grad_enabled(enabled: bool) -> bool:
    """Enable or disable differentiation of the values computed from now on, in this thread; returns the
    previous setting."""
    state = _state
    prev, state.grad_enabled = state.grad_enabled, bool(enabled)
    return prev


@contextmanager
def grad_mode(enabled: bool):
    """Enable or disable differentiation of the values computed inside, in this thread."""
    prev = set_grad_enabled(enabled)
    try:
        yield
    finally:
        _state.grad_enabled = prev


def _bind_without_grad(trace: Trace, prim: Primitive, tracers, params) -> list:
    """`prim` bound while grad is disabled: its results get a zero derivative. A mutation's result is the
    written tensor itself (kept), so the ops computing the value it writes are cut instead (grad stays
    disabled for them); any other primitive runs with grad enabled inside and its results are cut once, here."""
    if prim.kind is Kind.MUTATION:
        return trace.process_primitive(prim, tracers, params)
    with grad_mode(True):
        return _cut_derivatives[0](prim, trace.process_primitive(prim, tracers, params))


def _unhashable_param(prim: Primitive, params: dict) -> TypeError:
    bad = []
    for name, value in params.items():
        try:
            hash(value)
        except TypeError:
            bad.append(f"'{name}' ({type(value).__name__})")
    return TypeError(f"{prim.name}: parameters must be hashable (they key the compile caches), but "
                     f"{', '.join(bad)} {'is' if len(bad) == 1 else 'are'} not{where()}; pass a tuple instead of a "
                     f"list, a tuple of pairs instead of a dict")
