"""Composite ops run eagerly as one compiled program: `fused_when_eager`.

An op written as a composition of primitives (`layer_norm` is a mean, a subtraction, a variance, an rsqrt and the
affine) runs eagerly one executable per primitive: each reads and writes its whole operand, and each costs a
dispatch. Called eagerly, a composite marked `fused_when_eager` instead runs its composition traced once per operand
signature (shapes, dtypes and the op's other arguments) and compiled whole, as one `compiled_call`: one dispatch, and
XLA fuses its elementwise parts, as PyTorch's eager ops are single fused kernels.

Nothing else changes:
- under a transform (`jit`, `grad`, `vmap`, `make_jaxpr`, ...) the composite is traced into the caller's program as
  it always was, primitive by primitive (XLA fuses it there with its neighbours);
- recorded for `backward()` it is one node (torch's one node per op: `grad_fn.name()` is torch's name for it), whose
  derivative is its composition's, differentiated by the same rules (`compiled_call`'s jvp inlines the program);
- a call that raises raises as the composition raises (the first call of a signature traces it: its checks run
  then, with the user's line). Only composites whose checks depend on shapes and arguments, not on values, and
  whose results are new tensors (no view or in-place write of an operand) may be marked.

Tensor operands are the program's inputs (a view is read as its value); the others (numbers, strings, shapes, None)
are part of the signature. An operand the signature cannot hold (an unhashable one) runs the composition as it is.
"""
from __future__ import annotations

import functools
from typing import Callable

import jax

from aotjax.core.interpreter import Tracer, _state
from aotjax.core.primitive import Kind
from aotjax.interpreters.eval import read
from aotjax.interpreters.lowering import eval_jaxpr_jax
from aotjax.interpreters.trace import trace_flat
from aotjax.ops.calls.compiled import Program, compiled_call_p
from aotjax.tensor import Tensor

__all__ = ["fused_when_eager", "fusion_enabled"]

_MAX_PROGRAMS = 256  # NOTE: per op; signatures past it run the composition (a model has a few per op)
_UNFUSABLE = object()  # NOTE: the cache's mark of a signature whose composition is not pure (see `_trace`)
_enabled = [True]


class fusion_enabled:
    """Whether eager composites run fused (`with fusion_enabled(False):` runs them primitive by primitive: what
    tests compare the fused programs with)."""

    def __init__(self, enabled: bool):
        self.enabled, self.previous = bool(enabled), None

    def __enter__(self):
        self.previous, _enabled[0] = _enabled[0], self.enabled

    def __exit__(self, *exc):
        _enabled[0] = self.previous


def _xla_jit(closed, example_avals) -> Callable:
    """The compiler of fused composites: jax's jit of the program (its C++ dispatch is the fastest path to an
    executable; the program takes values the caller keeps, so it donates nothing)."""
    jaxpr, consts = closed.jaxpr, [read(c) for c in closed.consts]

    def fused(*flat):
        return eval_jaxpr_jax(jaxpr, consts, flat)

    fused.__name__ = closed.meta.name or "fused"
    return jax.jit(fused)


def fused_when_eager(node_name: str | Callable[..., str]) -> Callable:
    """Decorate a composite op: called eagerly, it runs as one compiled program per signature (see the module's
    docstring); recorded for `backward()`, its node is named `node_name` (torch's name, such as
    `NativeLayerNormBackward0`), or `node_name(*args, **kwargs)` where torch's name depends on the call."""
    def decorate(fn: Callable) -> Callable:
        programs: dict = {}

        @functools.wraps(fn)
        def op(*args, **kwargs):
            if _state.dynamic.level or not _enabled[0]:
                return fn(*args, **kwargs)
            key, tensors = _signature(args, kwargs)
            if key is None:
                return fn(*args, **kwargs)
            # NOTE: an op's inner ops read the autocast region, and dtypes depend on jax's x64 mode
            key = (key, _state.autocast, jax.config.jax_enable_x64)
            program = programs.get(key)
            if program is None:
                if len(programs) >= _MAX_PROGRAMS:
                    return fn(*args, **kwargs)
                program = programs[key] = _trace(fn, args, kwargs, tensors, node_name)
            if program is _UNFUSABLE:
                return fn(*args, **kwargs)
            program, single = program
            outs = compiled_call_p.bind(*tensors, program=program)
            return outs[0] if single else tuple(outs)

        op.eager_programs = programs  # NOTE: what tests read to see that a call ran fused
        return op
    return decorate


def _signature(args: tuple, kwargs: dict):
    """`(key, tensors)`: the call's signature and its tensor operands in order; (None, None) where an operand is a
    tracer or cannot be part of a key."""
    key, tensors = [], []
    for v in args:
        if not _add(v, key, tensors):
            return None, None
    for k, v in kwargs.items():
        key.append(k)
        if not _add(v, key, tensors):
            return None, None
    key = tuple(key)
    try:
        hash(key)
    except TypeError:
        return None, None
    return key, tensors


def _add(v, key: list, tensors: list) -> bool:
    t = type(v)
    if isinstance(v, Tensor):  # NOTE: a Parameter or a tensor that requires grad too; a tracer is not eager
        if isinstance(v, Tracer):
            return False
        tensors.append(v)
        key.append((Tensor, v.shape, v.dtype))
        return True
    if t is list or t is tuple:
        if any(isinstance(e, Tensor) for e in v):
            return False
        key.append((t, tuple(v)))
        return True
    key.append((t, v))
    return True


def _trace(fn: Callable, args: tuple, kwargs: dict, tensors: list, node_name):
    """`fn` traced with its tensor operands as inputs: `(program, single result)`, or `_UNFUSABLE` where the
    composition writes in place, returns an operand or a non-tensor, or returns nothing from its inputs."""
    positions = {id(t): i for i, t in enumerate(tensors)}
    single = []

    def composition(*ins):
        def put(v):
            i = positions.get(id(v)) if isinstance(v, Tensor) else None
            return v if i is None else ins[i]
        out = fn(*(put(a) for a in args), **{k: put(v) for k, v in kwargs.items()})
        single.append(not isinstance(out, (tuple, list)))
        outs = [out] if single[0] else list(out)
        if not all(isinstance(o, Tracer) for o in outs) or any(o is i for o in outs for i in ins):
            raise _NotPure
        return outs

    try:
        closed = trace_flat(composition, [t.aval for t in tensors])
    except _NotPure:
        return _UNFUSABLE
    if any(e.primitive.kind is Kind.MUTATION for e in closed.jaxpr.eqns):
        return _UNFUSABLE
    if callable(node_name):
        node_name = node_name(*args, **kwargs)
    program = Program(closed.with_meta(name=fn.__name__), _xla_jit, fn.__name__, function=fn.__name__,
                      node_name=node_name)
    return program, single[0]


class _NotPure(Exception):
    """Raised out of a trace whose composition cannot run as one program."""
