"""The eval interpreter (level 0): eager execution with PyTorch's view and mutation semantics.

An eager Tensor is a Storage (a mutable cell holding an immutable `jax.Array`, the base) plus a
view chain. A view primitive returns a Tensor on the same storage with a longer chain; a data
mutation computes the new value of the written tensor and stores the new base obtained through
the chain's inverses; a metadata mutation (`t_`) extends the tensor's own chain. Functional
primitives run their lowering rule, compiled once per primitive and params with `jax.jit`.

Importing this module installs it at level 0 of the interpreter stack and makes it the reader of
eager values (`Tensor._read`); the op families import it, so anything that makes a tensor has it.
"""
from __future__ import annotations

import functools

import jax

from aotjax.core import views
from aotjax.core.avals import get_aval
from aotjax.core.errors import AliasingError, AotjaxError
from aotjax.core.interpreter import Trace, install_eval_trace
from aotjax.core.ir import param_key
from aotjax.core.primitive import Kind, Primitive, abstract_eval
from aotjax.core.source_info import where
from aotjax.interpreters.lowering import checked_executable, lowering_rule
from aotjax.tensor import Tensor, record_layout, view_layout

_jitted: dict = {}


def impl(prim: Primitive, vals, params: dict):
    """Evaluate `prim`'s lowering rule on concrete values (compiled once per primitive and params)."""
    # NOTE: `bind` has checked that the params are hashable. A higher-order primitive's sub-programs are traced anew
    # at each use (a loop body): keyed by their structure, one executable serves every trace of the same body.
    key = (prim, tuple((k, param_key(v)) for k, v in params.items()) if prim.higher_order else tuple(params.items()))
    fn = _jitted.get(key)
    if fn is None:
        make = prim.eager_impl  # NOTE: a call of an already compiled program runs that program as it is
        # NOTE: threads: one built twice at worst, cached whole (`setdefault`), never half-made.
        if make is not None:
            fn = make(**params)
        elif prim.higher_order:  # NOTE: a loop body's index checks raise as in a Python loop
            fn = checked_executable(prim, params)
        else:
            fn = jax.jit(functools.partial(lowering_rule(prim), **params))
        fn = _jitted.setdefault(key, fn)
    try:
        return fn(*vals)
    except AotjaxError:
        raise
    except Exception:
        # NOTE: re-derive the error from the abstract rule, which names the op, the shapes and the
        # user's line; if the rule accepts the operands, the original error stands.
        abstract_eval(prim, [get_aval(v) for v in vals], params)
        raise


def apply(prim: Primitive, *vals, **params):
    """`views.Apply` over concrete arrays."""
    return impl(prim, vals, params)


def read(x):
    """The current value of an eager Tensor (its chain applied to its base), or `x` itself."""
    if not isinstance(x, Tensor):
        return x
    chain = x._chain
    storage = x._storage
    if not chain:
        return storage.base
    cache = x._cache
    if cache is not None and cache[0] == storage.version:
        return cache[1]
    val = views.apply_chain(apply, storage.base, chain)
    x._cache = (storage.version, val)
    return val


Tensor._read = read  # eager evaluation owns reading a tensor's value


def write(t: Tensor, new_value) -> None:
    """Store `new_value` as the value of `t`, writing through its view chain into the base."""
    if not isinstance(t, Tensor):
        raise AliasingError(f"in-place write to a {type(t).__name__}, which is immutable{where()}: "
                            f"convert it with aotjax.tensor(...) first")
    storage = t._storage
    storage.base = views.write_through(apply, storage.base, t._chain, new_value) if t._chain else new_value
    storage.version += 1
    eager_writes[0] += 1


# NOTE: how many times an eager storage was given a new base (by `write`, or a compiled call's write-back): a compiled
# call's fast path (`aotjax.runtime.fast_call`) trusts what it checked of its arguments' buffers while this is unchanged.
eager_writes = [0]


def _as_tensor(x) -> Tensor:
    return x if isinstance(x, Tensor) else Tensor._wrap(jax.numpy.asarray(x))


_FUNCTIONAL = Kind.FUNCTIONAL


class EvalTrace(Trace):
    def pure(self, x):
        return x

    lift = pure

    def process_primitive(self, prim, args, params):
        kind = prim.kind
        if kind is _FUNCTIONAL:
            out = impl(prim, [read(a) for a in args], params)
            if prim.multiple_results:
                return [Tensor._wrap(o) for o in out]
            if prim.layout_rule is not None:  # NOTE: elementwise results keep their operands' layout
                return record_layout(prim, args, [Tensor._wrap(out)], params)
            return [Tensor._wrap(out)]
        if kind is Kind.VIEW:
            return [self._view(prim, args, params)]
        if prim.metadata_view is not None:
            return [self._metadata_mutation(prim, args[0], params)]
        new_values = impl(prim, [read(a) for a in args], params)
        if len(prim.mutates) == 1:
            new_values = [new_values]
        written = [args[i] for i in prim.mutates]
        for t, v in zip(written, new_values):
            if v.shape != t.shape:  # an in-place op cannot broadcast its result: let the rule say so
                abstract_eval(prim, [get_aval(read(a)) for a in args], params)
            write(t, v)
        return written

    def _view(self, prim, args, params):
        x = _as_tensor(args[0])
        (aval,) = abstract_eval(prim, [x.aval, *(get_aval(read(a)) for a in args[1:])], params)
        step = views.ViewStep.make(prim, params)
        return Tensor._view_of(x, step, aval, *view_layout(prim, x, aval.shape, params))

    def _metadata_mutation(self, prim, x, params):
        (aval,) = abstract_eval(prim.metadata_view, [x.aval], params)
        return x._review(prim.metadata_view, params, aval)


install_eval_trace(EvalTrace)
