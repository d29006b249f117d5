"""The eval interpreter (level 0): eager execution with PyTorch's view and mutation semantics.

An eager Tensor is a Storage (a mutable cell holding an immutable `jax.Array`, the base) plus a
view chain. A view primitive returns a Tensor on the same storage with a longer chain; a data
mutation computes the new value of the written tensor and stores the new base obtained through
the chain's inverses; a metadata mutation (`t_`) extends the tensor's own chain. Functional
primitives run their lowering rule, compiled once per primitive and params with `jax.jit`.
"""
from __future__ import annotations

import functools

import jax

from aotjax.core import views
from aotjax.core.avals import ShapedArray
from aotjax.core.errors import AliasingError, AotjaxError
from aotjax.core.interpreter import Trace, install_eval_trace
from aotjax.core.primitive import Kind, Primitive, abstract_eval
from aotjax.core.source_info import where
from aotjax.lowering.rules import lowering_rule
from aotjax.tensor import Tensor

_jitted: dict = {}


def impl(prim: Primitive, vals, params: dict):
    """Evaluate `prim`'s lowering rule on concrete values (compiled once per primitive and params)."""
    try:
        key = (prim, tuple(params.items()))
        fn = _jitted.get(key)
    except TypeError:
        raise TypeError(f"{prim.name}: params must be hashable (use tuples, not lists); got "
                        f"{ {k: type(v).__name__ for k, v in params.items()} }") from None
    if fn is None:
        make = prim.eager_impl  # NOTE: a call of an already compiled program runs that program as it is
        fn = _jitted[key] = make(**params) if make is not None else jax.jit(
            functools.partial(lowering_rule(prim), **params))
    try:
        return fn(*vals)
    except AotjaxError:
        raise
    except Exception:
        # NOTE: re-derive the error from the abstract rule, which names the op, the shapes and the
        # user's line; if the rule accepts the operands, the original error stands.
        abstract_eval(prim, [_aval(v) for v in vals], params)
        raise


def apply(prim: Primitive, *vals, **params):
    """`views.Apply` over concrete arrays."""
    return impl(prim, vals, params)


def _aval(v) -> ShapedArray:
    return ShapedArray(getattr(v, "shape", ()), getattr(v, "dtype", None) or jax.numpy.asarray(v).dtype)


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


def write(t: Tensor, new_value) -> None:
    """Store `new_value` as the value of `t`, writing through its view chain into the base."""
    if not isinstance(t, Tensor):
        raise AliasingError(f"in-place write to a {type(t).__name__}, which is immutable{where()}: "
                            f"convert it with aotjax.tensor(...) first")
    storage = t._storage
    storage.base = views.write_through(apply, storage.base, t._chain, new_value) if t._chain else new_value
    storage.version += 1


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
                abstract_eval(prim, [_aval(read(a)) for a in args], params)
            write(t, v)
        return written

    def _view(self, prim, args, params):
        x = _as_tensor(args[0])
        (aval,) = abstract_eval(prim, [x.aval, *(_aval(read(a)) for a in args[1:])], params)
        return Tensor._view_of(x, views.ViewStep.make(prim, params), aval)

    def _metadata_mutation(self, prim, x, params):
        (aval,) = abstract_eval(prim.metadata_view, [x.aval], params)
        x._chain = x._chain + (views.ViewStep.make(prim.metadata_view, params),)
        x._aval = aval
        x._cache = None
        return x


install_eval_trace(EvalTrace)
