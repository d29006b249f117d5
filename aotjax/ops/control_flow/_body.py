"""Tracing what control flow runs (a loop body, a branch, a loop condition) into a pure sub-program, keeping
PyTorch's eager meaning of the writes it makes.

The function is traced once, under functionalize over a trace (as `jit` traces a function), on fresh tensors of
the given abstract values: writing into them in place is fine (a loop body's carry is its own). What else it
does is read off the trace:

- a tensor it **captures** from outside (an eager tensor, or a tensor of an enclosing transform) becomes an
  input of the sub-program: its whole storage, read through the captured tensor's view chain, so that views
  of one storage stay one value. If the function writes into it, the storage's new value is an extra output:
  the primitive's rule carries it (a loop carries it across iterations) and the caller writes it back
  (`write_back`), so every iteration's writes reach the caller, eagerly and under every transform;
- an input it writes into (the `x` of a scan, a view of `xs[i]`; a branch's operand) has its new value as an
  extra output, for the caller to write through;
- an output that is a view of an input or a captured tensor is materialized: a loop's values cross the
  iteration boundary as values.

Captured values that are not tensors (NumPy and jax arrays) become inputs too; Python scalars stay literals.
The sub-program has no constants: every value it reads from outside is an operand of the primitive, as in
JAX's control flow (`Body.captured`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import jax

from aotjax.autograd import graph
from aotjax.core import views
from aotjax.core.avals import ShapedArray, get_aval
from aotjax.core.errors import UnsupportedError
from aotjax.core.interpreter import Tracer, below, full_raise, grad_mode, new_main
from aotjax.core.ir import ClosedJaxpr, Jaxpr, dce
from aotjax.core.source_info import where
from aotjax.core.typecheck import typecheck, typecheck_enabled
from aotjax.interpreters.functionalize import FunctionalizeTrace, FunctionalStorage, FunctionalTensor, current_value
from aotjax.interpreters.trace import JaxprBuilder, JaxprTrace
from aotjax.ops.base.frontend import bind_inplace
from aotjax.ops.indexing.subscripts import copy__p
from aotjax.tensor import Tensor, is_eager

__all__ = ["Body", "trace_body", "write_back", "caller_base", "memory_of", "memory_key", "describe_path"]


class _Capture:
    """A storage the body captured: the caller-level tensor that is all of it (`outer`), and the body's
    functional storage over the sub-program's input for it."""

    __slots__ = ("outer", "storage", "tracer")

    def __init__(self, outer, storage: FunctionalStorage, tracer):
        self.outer, self.storage, self.tracer = outer, storage, tracer


class BodyTrace(FunctionalizeTrace):
    """Functionalize for a body: a captured tensor is writable; its storage becomes an input of the sub-program
    (see the module docstring). `main.global_data` is the trace interpreter below, which records the body."""

    def writes_captured(self, x) -> bool:
        return True  # NOTE: its writes into captured tensors are carried out (see the module docstring)

    def __init__(self, main):
        super().__init__(main)
        self.captures: dict[int, _Capture] = {}
        self.captured_views: list[tuple[FunctionalTensor, int]] = []

    def pure(self, val):
        if not isinstance(val, Tensor):
            return val  # NOTE: scalars stay literals, arrays constants of the trace below (then operands)
        if isinstance(val, Tracer) and val._trace.main is self.main.global_data.main:
            # NOTE: a value of the body's own trace below, read as a value (a backward inside the body reads the
            # values its recording saved): computed in the body, so captured from nowhere
            return self.new_tensor(val)
        key, outer, chain = memory_of(val)
        cap = self.captures.get(key)
        if cap is None:
            jtrace: JaxprTrace = self.main.global_data
            tracer = jtrace.builder.const(jtrace, outer, get_aval(outer))
            cap = self.captures[key] = _Capture(outer, FunctionalStorage(tracer), tracer)
        t = FunctionalTensor(self, cap.storage, chain, get_aval(val), val._strides, val._offset)
        self.captured_views.append((t, len(chain)))
        graph.link_lifted(t, val)  # NOTE: `autograd.grad` inside the body reaches a captured tensor that requires grad
        return t

    lift = pure

    def is_captured(self, tracer) -> bool:
        return False  # NOTE: writes into captured tensors are carried out (see the module docstring)


def _has_storage(x) -> bool:
    return getattr(x, "_storage", None) is not None


def caller_base(x):
    """The caller-level tensor that is the whole storage of `x` (no view chain): what a write-back goes to."""
    if isinstance(x, FunctionalTensor):
        return x if not x._chain else FunctionalTensor(x._trace, x._storage, (), get_aval(x._storage.base))
    if is_eager(x):
        if not x._chain:
            return x
        t = Tensor._wrap(None)
        t._storage = x._storage
        return t
    return x  # NOTE: the tensors of other interpreters hold no view chain: each is its own base


def memory_of(x) -> tuple[int, Any, tuple]:
    """The memory the caller's tensor `x` views: a key shared by the tensors viewing it, the caller-level tensor
    that is all of it (`caller_base`) and the view chain from that to `x`. Eager and functionalized tensors hold
    their storage; a tracer of another interpreter asks its trace (`Trace.view_base`)."""
    if _has_storage(x):
        return views.storage_key(x), caller_base(x), x._chain
    if isinstance(x, Tracer):
        return x._trace.view_base(x)
    return id(x), x, ()


def memory_key(x) -> int:
    """What the caller's tensors sharing memory with `x` have in common (see `memory_of`)."""
    return memory_of(x)[0]


@dataclass
class Body:
    """A traced body. `jaxpr` (no constants) takes the `captured` values, then one value per traced input, and
    returns the function's flat outputs (`out_tree`), then the new values of the inputs it wrote
    (`written_inputs`, indices of traced inputs), then the new values of the captured storages it wrote
    (`written_captured`, indices into `captured`). `captured` are caller-level values (each tensor the whole of
    a storage, `caller_base`)."""

    jaxpr: ClosedJaxpr
    captured: list
    written_inputs: list[int]
    written_captured: list[int]
    out_tree: Any
    num_outputs: int
    captured_keys: list[int] = field(default_factory=list)  # the storage key of each captured value

    @property
    def num_captured(self) -> int:
        return len(self.captured)


def trace_body(fun: Callable[..., Sequence], in_avals: Sequence[ShapedArray], what: str,
               in_strides: Sequence[tuple | None] | None = None) -> Body:
    """Trace `fun` (flat inputs of `in_avals`, with PyTorch strides `in_strides`, returning a pytree) into a
    `Body`. `what` names it in errors ("scan body", "cond branch 1")."""
    builder = JaxprBuilder()
    strides = list(in_strides) if in_strides is not None else [None] * len(in_avals)
    with new_main(JaxprTrace, builder, dynamic=True) as jmain:
        jtrace = jmain.trace
        arg_tracers = [builder.new_arg(jtrace, a) for a in in_avals]
        with new_main(BodyTrace, jtrace, dynamic=True) as fmain:
            ftrace: BodyTrace = fmain.trace
            inner = [FunctionalTensor(ftrace, FunctionalStorage(t), (), t.aval, s)
                     for t, s in zip(arg_tracers, strides, strict=True)]
            out = fun(*inner)
            out_leaves, out_tree = jax.tree_util.tree_flatten(out)
            for t, n in ftrace.captured_views:
                if len(t._chain) != n:
                    raise UnsupportedError(
                        f"{what}: the function changes the view of a tensor captured from outside it in place "
                        f"(`t_`, `unsqueeze_`, ...){where()}; control flow cannot replay that on the caller's tensor. "
                        f"Use the out-of-place op (`w.t()`) or change the view outside.")
            out_leaves = [ftrace.pure(o) if isinstance(o, Tensor) and not _is_of(o, ftrace) else o
                          for o in out_leaves]
            with below(fmain):
                values = [current_value(o) if _is_of(o, ftrace) else o for o in out_leaves]
                written_inputs = [i for i, t in enumerate(inner) if t._storage.version > 0]
                values += [inner[i]._storage.base for i in written_inputs]
                caps = list(ftrace.captures.items())
                written_caps = [k for k, (_, c) in enumerate(caps) if c.storage.version > 0]
                values += [caps[k][1].storage.base for k in written_caps]
        out_tracers = [full_raise(jtrace, v) for v in values]
        closed = builder.build([t._var for t in arg_tracers], out_tracers)
    j = closed.jaxpr
    # NOTE: constants become leading inputs: the captured storages, in capture order, then any other constant
    # (an array the function read); the written captures are found by their variable.
    cap_index = {id(c.tracer._var): k for k, (_, c) in enumerate(caps)}
    order = sorted(range(len(j.constvars)), key=lambda i: cap_index.get(id(j.constvars[i]), len(caps) + i))
    constvars = [j.constvars[i] for i in order]
    consts = [closed.consts[i] for i in order]
    jaxpr = ClosedJaxpr(Jaxpr([], constvars + j.invars, dce(j.eqns, j.outvars), j.outvars), [])
    if typecheck_enabled():
        typecheck(jaxpr)
    keys = [key for key, _ in caps] + [id(c) for c in consts[len(caps):]]
    return Body(jaxpr, consts, written_inputs, written_caps, out_tree, len(out_leaves), keys)


def _is_of(x, trace) -> bool:
    return isinstance(x, FunctionalTensor) and x._trace is trace


def write_back(target, new_value) -> None:
    """Write `new_value` into the caller's tensor `target` (a loop's carried capture, a scanned `xs`), under
    whatever interpreter the caller runs: eagerly it is stored, under a transform it is that transform's write. A
    parameter's `.grad` that a `backward()` inside the body accumulated into is written as the gradient it is, not
    recorded (`graph.gradient_buffers`)."""
    if id(getattr(target, "_storage", None)) in graph.gradient_buffers:
        with grad_mode(False):
            bind_inplace(copy__p, target, new_value)
        return
    bind_inplace(copy__p, target, new_value)


def describe_path(path) -> str:
    """A pytree key path in words (`[0]['w']`), or `the value itself` for the root."""
    s = jax.tree_util.keystr(tuple(path))
    return s if s else "(the value itself)"
