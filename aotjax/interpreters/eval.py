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
import numpy as np

from aotjax.autograd import graph
from aotjax.core import views
from aotjax.core.avals import get_aval
from aotjax.core.errors import AliasingError, AotjaxError
from aotjax.core.interpreter import Trace, _state, check_params, install_eval_trace
from aotjax.core.ir import param_key
from aotjax.core.primitive import Kind, Primitive, abstract_eval
from aotjax.core.source_info import where
from aotjax.interpreters.lowering import checked_executable, lowering_rule
from aotjax.tensor import Tensor, record_layout, view_layout

_wrap = Tensor._wrap

_jitted: dict = {}


def impl(prim: Primitive, vals, params: dict):
    """Evaluate `prim`'s lowering rule on concrete values (compiled once per primitive and params)."""
    return run(executable(prim, params), prim, vals, params)


def executable(prim: Primitive, params: dict):
    """The jitted function evaluating `prim` with `params` (built on first use, then cached)."""
    # NOTE: a higher-order primitive's sub-programs are traced anew at each use (a loop body): keyed by their
    # structure, one executable serves every trace of the same body. Without params the primitive is the key.
    if prim.higher_order:
        key = (prim, tuple((k, param_key(v)) for k, v in params.items()))
    else:
        key = (prim, tuple(params.items())) if params else prim
    try:
        fn = _jitted.get(key)
    except TypeError:  # NOTE: eager `bind` leaves the params' check to this lookup, which hashes them anyway
        check_params(prim, params)
        raise
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
    return fn


def run(fn, prim: Primitive, vals, params: dict):
    """`fn(*vals)`, `prim`'s executable: an error it raises is re-derived from the abstract rule, which names the op,
    the shapes and the user's line (if the rule accepts the operands, the original error stands)."""
    try:
        return fn(*vals)
    except AotjaxError:
        raise
    except Exception:
        abstract_eval(prim, [get_aval(v) for v in vals], params)
        raise


def apply(prim: Primitive, *vals, **params):
    """`views.Apply` over concrete arrays."""
    return impl(prim, vals, params)


_device_scalars: dict = {}


def operand(x):
    """What an eager op passes its executable for operand `x`: a tensor's value (`read`), a NumPy scalar as a 0-d
    device array (made once per dtype and bit pattern, then reused: jax's dispatch takes an array faster than it
    converts a scalar), anything else as it is."""
    if not isinstance(x, np.generic):
        return read(x)
    key = (x.dtype, x.tobytes())  # NOTE: the bits: 0.0 and -0.0 are two keys, a NaN is one
    val = _device_scalars.get(key)
    if val is None:
        if len(_device_scalars) >= 4096:
            _device_scalars.clear()
        val = _device_scalars[key] = jax.device_put(x)
    return val


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
    old = storage.base
    new = views.write_through(apply, old, t._chain, new_value) if t._chain else new_value
    if getattr(old, "_committed", False) and getattr(new, "sharding", old.sharding) != old.sharding:
        # NOTE: as torch's `copy_`, a tensor placed on its device(s) keeps them when written; one never placed
        # (jax's uncommitted array, on the default device) takes the written value's placement
        new = jax.device_put(new, old.sharding)
    storage.base = new
    storage.version += 1
    eager_writes[0] += 1


# NOTE: how many times an eager storage was given a new base (by `write`, or a compiled call's write-back): a
# compiled call's fast path (`aotjax.runtime.fast_call`) trusts what it checked of its arguments' buffers while this
# is unchanged.
eager_writes = [0]


def _as_tensor(x) -> Tensor:
    return x if isinstance(x, Tensor) else Tensor._wrap(jax.numpy.asarray(x))


_FUNCTIONAL = Kind.FUNCTIONAL
_MUTATION = Kind.MUTATION


# NOTE: the layout rules that give a contiguous result (None) whenever no operand has strides (the elementwise
# ones): eager evaluation skips them then. The op families register theirs (`aotjax.ops.base.frontend`).
contiguous_layout_rules: set = set()


# -- the ops' eager fast path -------------------------------------------------------------------------------
# An eager op on plain tensors (eager, no view chain, contiguous) when no transform runs in any thread
# (`call_epoch.transforms_running`) binds to `EvalTrace.process_primitive`; for a primitive with no params and one
# result whose layout rule keeps plain operands contiguous, that is its executable on the operands' bases and the
# result wrapped. The frontends of the commonest ops (`aotjax.ops.math.elementwise`) check those conditions on their
# operands and call `apply_plain` / `write_plain` directly, skipping the dispatch layers (about half of an op's
# Python on a small tensor). Anything else, or an executable that raises, returns None: the frontend then binds,
# which computes the same thing or reports the error.

_plain: dict = {}  # primitive -> its executable for the fast path, or False where it does not apply


def _plain_executable(prim: Primitive):
    rule = prim.layout_rule
    if prim.multiple_results or prim.higher_order or (rule is not None and rule not in contiguous_layout_rules):
        return False
    if prim.kind is _FUNCTIONAL or (prim.kind is _MUTATION and prim.metadata_view is None and prim.mutates == (0,)):
        return executable(prim, {})  # NOTE: made, not compiled: `plain_executable` takes the params' own
    return False


def _plain_fn(prim: Primitive, kind: Kind):
    """`prim`'s executable without params for the fast path if `prim` is of `kind` and the fast path applies to it,
    else False (looked up once per primitive)."""
    fn = _plain.get(prim)
    if fn is None:
        fn = _plain[prim] = _plain_executable(prim)
    return fn if prim.kind is kind else False


def apply_plain(prim: Primitive, *vals):
    """`prim.bind` of plain eager tensors whose bases are `vals` (see above), or None."""
    fn = _plain_fn(prim, _FUNCTIONAL)
    return None if fn is False else run_plain(fn, *vals)


def plain_executable(prim: Primitive, params: dict):
    """`prim`'s executable for `params` (a reduction's axes) for the fast path, or None where it does not apply: a
    frontend keeps it per call signature and runs it with `run_plain`."""
    if _plain_fn(prim, _FUNCTIONAL) is False:
        return None
    try:
        return executable(prim, params)
    except TypeError:  # NOTE: unhashable params: `bind` says so
        return None


def run_plain(fn, *vals):
    """`fn` (a `plain_executable`) on plain operands' bases, its result wrapped; None if it raises."""
    try:
        out = fn(*vals)
    except Exception:  # NOTE: `bind` says what is wrong
        return None
    return _wrap(out)


_NO_PARAMS: dict = {}  # NOTE: shared by the recorded nodes of ops without params; never written


def apply_recording(prim: Primitive, args, vals, fn=None, params: dict | None = None):
    """`apply_plain` where one or more of the operands `args` (each a `graph.fast_operand`; `vals`: what the op
    reads of each) requires grad: the result, recorded when grad is enabled (`graph.record_result`); None where
    the fast path does not apply. `fn`: the executable for `params` (`plain_executable`), else `prim`'s own."""
    if fn is None:
        fn = _plain_fn(prim, _FUNCTIONAL)
        if fn is False:
            return None
    try:
        out = fn(*vals)
    except Exception:  # NOTE: `bind` says what is wrong
        return None
    if _state.grad_enabled:
        return graph.record_result(prim, _NO_PARAMS if params is None else params, args, vals, out)
    return _wrap(out)


def write_plain(prim: Primitive, x: Tensor, *vals):
    """`prim.bind(x, ...)` for an in-place primitive writing its first operand, plain eager tensor `x`, the other
    operands plain too (`vals`: the bases, `x`'s first): `x` after the write, or None (see above)."""
    fn = _plain_fn(prim, _MUTATION)
    if fn is False:
        return None
    try:
        new = fn(*vals)
    except Exception:  # NOTE: `bind` says what is wrong
        return None
    if new.shape != vals[0].shape:  # NOTE: an in-place op cannot broadcast its result: `bind` says so
        return None
    storage = x._storage
    storage.base = new
    storage.version += 1
    eager_writes[0] += 1
    return x


class EvalTrace(Trace):
    def pure(self, x):
        return x

    lift = pure

    def process_primitive(self, prim, args, params):
        # NOTE: `bind` calls this for eager operands without checking that the params are hashable: `impl` does.
        kind = prim.kind
        if kind is _FUNCTIONAL:
            # NOTE: this runs once per eager op: lookups, reads and the result's slots are inlined.
            fn = _jitted.get(prim) if not params else None
            if fn is None:
                fn = executable(prim, params)
            vals = []
            rec = False  # NOTE: whether an operand requires grad (a plain `Tensor` never does)
            for a in args:
                if type(a) is Tensor and not a._chain and a._storage.grad_node is None:
                    vals.append(a._storage.base)
                else:
                    vals.append(operand(a))
                    if not rec and isinstance(a, Tensor) and (a._ag is not None or graph.joins_graph(a)):
                        rec = True
            if rec and prim in graph.saving_rules and _state.grad_enabled:  # NOTE: a loop keeping its residuals
                outs, saved = graph.saving_rules[prim](prim, params, args, vals, True)
                outs = [Tensor._wrap(o) for o in outs]
                graph.record_functional(prim, params, args, vals, outs, saved)
                return outs
            try:
                out = fn(*vals)
            except AotjaxError:
                raise
            except Exception:
                abstract_eval(prim, [get_aval(v) for v in vals], params)  # NOTE: as in `run`
                raise
            if prim.multiple_results:
                outs = [Tensor._wrap(o) for o in out]
                if rec and _state.grad_enabled:
                    graph.record_functional(prim, params, args, vals, outs)
                return outs
            t = _wrap(out)
            if rec and _state.grad_enabled:
                graph.record_functional(prim, params, args, vals, [t])
            rule = prim.layout_rule  # NOTE: elementwise results keep their operands' layout
            if rule is not None:
                if rule not in contiguous_layout_rules:
                    record_layout(prim, args, [t], params)
                else:
                    for a in args:
                        if getattr(a, "_strides", None) is not None:
                            record_layout(prim, args, [t], params)
                            break
            return [t]
        if kind is _MUTATION and prim.metadata_view is None:  # NOTE: a data write: the functional op, then `write`
            vals = []
            for a in args:
                vals.append(a._storage.base if type(a) is Tensor and not a._chain else operand(a))
            rec = graph.check_write(prim, args)
            new_values = impl(prim, vals, params)
            mutates = prim.mutates
            if len(mutates) == 1:
                new_values = (new_values,)
            for i, v in zip(mutates, new_values):
                if v.shape != vals[i].shape:  # an in-place op cannot broadcast its result: let the rule say so
                    abstract_eval(prim, [get_aval(val) for val in vals], params)
            old_bases = [args[i]._storage.base for i in mutates] if rec else None
            for i, v in zip(mutates, new_values):
                write(args[i], v)
            if rec:
                graph.record_write(prim, params, args, vals, old_bases)
            return [args[i] for i in mutates] if len(mutates) > 1 else [args[mutates[0]]]
        if params:
            check_params(prim, params)
        if kind is Kind.VIEW:
            return [self._view(prim, args, params)]
        return [self._metadata_mutation(prim, args[0], params)]

    def _view(self, prim, args, params):
        x = _as_tensor(args[0])
        (aval,) = abstract_eval(prim, [x.aval, *(get_aval(read(a)) for a in args[1:])], params)
        step = views.ViewStep.make(prim, params)
        return Tensor._view_of(x, step, aval, *view_layout(prim, x, aval.shape, params))

    def _metadata_mutation(self, prim, x, params):
        (aval,) = abstract_eval(prim.metadata_view, [x.aval], params)
        return x._review(prim.metadata_view, params, aval)


install_eval_trace(EvalTrace)
