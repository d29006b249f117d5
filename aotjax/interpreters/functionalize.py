"""The functionalize interpreter: views and in-place writes become a pure program.

Every tracer (`FunctionalTensor`) is a view chain over a `FunctionalStorage`, a cell holding the
current value of its base as a value of the interpreters below (an eager Tensor or a tracer). As in
eager mode, a view primitive only extends the chain; reading a tensor applies its chain to the base
(binding the view primitives below, which only read); a data mutation binds the mutation's pure
`functional` primitive below and stores the new base obtained through the chain's inverses (the
same `write_through` eager mode uses, with `bind` as the evaluator); a metadata mutation (`t_`)
re-views the tracer itself. Every other primitive reads its operands and binds below. Nothing below
ever sees a write, so what it records is a pure program.

The interpreter is *dynamic* (ops with no tensor operand, such as `zeros(3)`, make functional
tensors too, so writing into them works); it binds everything it computes `below` itself.
"""
from __future__ import annotations

import weakref

from aotjax.autograd import graph
from aotjax.core import views
from aotjax.core.avals import get_aval
from aotjax.core.errors import AliasingError, UnsupportedError
from aotjax.core.interpreter import Trace, Tracer, below, bind, grad_enabled, grad_mode
from aotjax.core.primitive import Kind, abstract_eval
from aotjax.core.source_info import where
from aotjax.interpreters import hooks
from aotjax.tensor import Tensor, is_eager, record_layout, view_layout


class FunctionalStorage:
    """The base shared by a functional tensor and its views: `base` is the current value (a value of
    the interpreters below), `version` counts the writes, `origin` tags the boundary's input groups,
    `captured` marks a tensor lifted from outside the function (by `pure`: read-only)."""

    __slots__ = ("base", "version", "origin", "immutable", "captured", "grad_node", "grad_index")

    def __init__(self, base, origin=None, immutable: str | None = None, captured: bool = False):
        self.base = base
        self.version = 0
        self.origin = origin
        self.immutable = immutable  # what the base is, if it is an immutable argument (a jax.Array, ...)
        self.captured = captured
        self.grad_node = None  # imperative autograd inside a staged function: as `Storage.grad_node`
        self.grad_index = 0


class FunctionalTensor(Tracer, Tensor):
    """A tracer of the functionalize interpreter: a view chain over a FunctionalStorage (kept in the
    Tensor's `_storage` slot, so the boundary treats eager and functional tensors alike)."""

    __slots__ = ("_trace",)

    def __init__(self, trace: "FunctionalizeTrace", storage: FunctionalStorage, chain, aval,
                 strides=None, offset: int = 0):
        self._trace = trace
        self._init_slots(aval, strides, offset, storage, chain)


def current_value(t: FunctionalTensor):
    """The value of `t` as a value of the interpreters below: its chain applied to its base."""
    storage = t._storage
    if not t._chain:
        return storage.base
    cache = t._cache
    if cache is not None and cache[0] == storage.version:
        return cache[1]
    val = views.apply_chain(bind, storage.base, t._chain)
    t._cache = (storage.version, val)
    return val


def write(t: FunctionalTensor, new_value, chain_vals: list | None = None) -> None:
    """Make `new_value` the value of `t`: the base becomes the write through `t`'s chain (whose
    intermediates `chain_vals` may already be known)."""
    storage = t._storage
    storage.base = (views.write_through(bind, storage.base, t._chain, new_value, chain_vals) if t._chain
                    else new_value)
    storage.version += 1


# NOTE: a snapshot of an eager tensor (a transform's entry value, `boundary.snapshot`) -> that tensor. A staging trace
# that meets the snapshot reads the tensor itself (live state), so the program never bakes the snapshot in. Keyed by
# id (a Tensor's `==` is elementwise), each entry dropped with its snapshot.
_snapshot_origins: dict[int, tuple] = {}


def note_snapshot(snapshot: Tensor, origin: Tensor) -> None:
    key = id(snapshot)
    _snapshot_origins[key] = (weakref.ref(snapshot, lambda _: _snapshot_origins.pop(key, None)), origin)


def snapshot_origin(t) -> Tensor | None:
    entry = _snapshot_origins.get(id(t))
    return entry[1] if entry is not None and entry[0]() is t else None


class FunctionalizeTrace(Trace):
    # NOTE: set by the boundary: the storage key of each argument group (`views.storage_key`) -> (its functional
    # storage, the chain of the group's base in the caller's storage).
    arguments: dict | None = None
    # NOTE: set by a boundary that makes captured tensors live state (jit, aot, functionalize): an eager tensor the
    # function captures is passed to `capture(val)`, which makes its storage an implicit input of the program and
    # returns the functional tensor to read (None: it stays a read-only constant).
    capture = None
    capture_tracers = False  # NOTE: set by a transform that runs inside others (grad, vmap): see `_live`
    # NOTE: set by a boundary that constrains what may be written where (vmap: no batched value into an unbatched
    # tensor): `check_write(prim, t, value)` runs before `value` (a value of the levels below) is written into `t`.
    check_write = None

    def new_tensor(self, base, origin=None, chain=(), aval=None, strides=None, offset: int = 0):
        """A functional tensor over a new storage holding `base` (a value of the levels below)."""
        aval = aval if aval is not None else get_aval(base)
        return FunctionalTensor(self, FunctionalStorage(base, origin), chain, aval, strides, offset)

    def pure(self, val):
        if isinstance(val, Tensor):  # NOTE: a tensor captured from outside the function: read-only
            origin = snapshot_origin(val) if _snapshot_origins else None
            if origin is not None:
                return self._snapshot_of(val, origin)
            argument = self.arguments.get(views.storage_key(val)) if self.arguments else None
            if argument is not None:
                return self._linked(self._argument_view(val, *argument), val)
            if self.capture is not None and self._live(val):
                implicit = self.capture(val)
                if implicit is not None:
                    return self._linked(implicit, val)
            return FunctionalTensor(self, FunctionalStorage(val, captured=True), (), get_aval(val), val._strides,
                                    val._offset)
        return val  # NOTE: scalars and arrays pass through, so the trace below still makes them literals

    lift = pure

    links_autograd = False  # NOTE: set by a staging boundary (jit, aot): see `_linked`

    def _linked(self, t: FunctionalTensor, val: Tensor) -> FunctionalTensor:
        """`t`, standing for captured `val`: in a staged function it requires grad where `val` does (a leaf stays that
        leaf), so that `backward()` inside reaches it."""
        if self.links_autograd:
            graph.link_lifted(t, val)
        return t

    def writes_captured(self, x) -> bool:
        return self.capture is not None and self._live(x)  # NOTE: an eager tensor becomes an implicit input

    def _live(self, x) -> bool:
        """Whether `x`, captured, is live state here: an eager tensor, or (`capture_tracers`) a tensor of an enclosing
        functionalize (a jitted step's module buffer, captured by `grad` inside it)."""
        return is_eager(x) or (self.capture_tracers and isinstance(x, FunctionalTensor)
                               and x._trace.main.level < self.main.level)

    def is_captured(self, tracer) -> bool:
        return tracer._storage.captured

    def argument_keys(self, tracer) -> list:
        return [(key, chain) for key, (storage, chain) in (self.arguments or {}).items() if storage is tracer._storage]

    def _snapshot_of(self, val: Tensor, origin: Tensor) -> FunctionalTensor:
        """`val`, an inner transform's snapshot of the eager tensor `origin` taken when it was entered: the value
        `origin` has here now (an argument, or live state this trace captures), never a constant baked in, and
        apart from later writes into `origin`. Made once per snapshot."""
        made = self.__dict__.setdefault("_snapshots", {})
        t = made.get(id(val))
        if t is None:
            current = self.pure(origin)
            with below(self.main):
                value = current_value(current)
            t = made[id(val)] = FunctionalTensor(self, FunctionalStorage(value), (), get_aval(val), val._strides,
                                                 val._offset)
        return t

    def _argument_view(self, val: Tensor, storage: FunctionalStorage, base_chain) -> FunctionalTensor:
        """A captured tensor that shares memory with an argument: the argument's storage, read through `val`'s
        view of it (so that it sees what the function wrote into the argument)."""
        chain = views.relative_chain(val._chain, base_chain)
        if chain is None:
            raise captured_alias_error("functionalize", val)
        return FunctionalTensor(self, storage, chain, get_aval(val), val._strides, val._offset)

    def process_primitive(self, prim, tracers, params):
        with below(self.main):
            kind = prim.kind
            if kind is Kind.FUNCTIONAL:
                vals = list(map(_read, tracers))
                if prim in graph.saving_rules and graph.records(tracers):  # NOTE: a loop keeping its residuals
                    outs, saved = graph.saving_rules[prim](prim, params, tracers, vals, False)
                    outs = [self.new_tensor(o) for o in outs]
                    graph.record_functional(prim, params, tracers, vals, outs, saved)
                    return record_layout(prim, tracers, outs, params)
                outs = prim.bind(*vals, **params)
                outs = [self.new_tensor(o) for o in (outs if prim.multiple_results else [outs])]
                if graph.records(tracers):  # NOTE: imperative autograd inside a staged function (`backward()`)
                    graph.record_functional(prim, params, tracers, vals, outs)
                return record_layout(prim, tracers, outs, params)  # NOTE: elementwise results keep a layout
            if kind is Kind.VIEW:
                x = tracers[0]
                (aval,) = abstract_eval(prim, [get_aval(t) for t in tracers], params)
                chain = x._chain + (views.ViewStep.make(prim, params),)
                t = FunctionalTensor(self, x._storage, chain, aval, *view_layout(prim, x, aval.shape, params))
                if x._ag is not None and graph.view_step_records(chain[-1]):
                    t._ag = graph.NONLEAF
                return [t]
            if prim.metadata_view is not None:
                return [self._metadata_mutation(prim, tracers[0], params)]
            return self._data_mutation(prim, tracers, params)

    def _metadata_mutation(self, prim, x: FunctionalTensor, params):
        _check_mutable(prim, x)
        (aval,) = abstract_eval(prim.metadata_view, [x.aval], params)
        return x._review(prim.metadata_view, params, aval)

    def _data_mutation(self, prim, tracers, params):
        if prim.functional is None:
            raise UnsupportedError(f"functionalize: the in-place primitive '{prim.name}' declares no pure "
                                   f"counterpart (`functional`), so it cannot be functionalized{where()}")
        abstract_eval(prim, [get_aval(t) for t in tracers], params)  # shape errors name the in-place op
        written = [tracers[i] for i in prim.mutates]
        for t in written:
            _check_mutable(prim, t)
        recording = graph.check_write(prim, tracers)
        # NOTE: a write under `no_grad()` or through a detached view changes the value and keeps the derivative the
        # written tensor had (torch records nothing for it: its graph stays as it was)
        detached = not grad_enabled() or any(graph.is_detached(t) for t in written)
        # NOTE: a written view is read once; its intermediates serve the write back through the chain. Under
        # `no_grad` only the value written has no derivative: reading and writing back keep the rest of the base's.
        with grad_mode(True):
            chain_vals = {id(t): views.chain_values(bind, t._storage.base, t._chain) for t in written if t._chain}
            operands = [chain_vals[id(t)][-1] if id(t) in chain_vals else _read(t) for t in tracers]
        new = prim.functional.bind(*operands, **params)
        old_bases = [t._storage.base for t in written] if recording else None
        for t, v in zip(written, new if len(written) > 1 else [new], strict=True):
            if v.dtype != t.dtype:  # NOTE: in-place ops cast their result to the written tensor's dtype
                v = hooks.convert(v, t.dtype)
            if self.check_write is not None:
                self.check_write(prim, t, v)
            with grad_mode(True):
                old = t._storage.base
                write(t, v, chain_vals.get(id(t)))
                if detached:
                    t._storage.base = hooks.keep_derivative(old, t._storage.base)
        if recording:
            graph.record_write(prim, params, tracers, operands, old_bases)
        return written


def _check_mutable(prim, t: FunctionalTensor) -> None:
    what = t._storage.immutable
    if what is not None:
        raise AliasingError(
            f"{prim.name}: in-place write into an argument that is {what}, which is immutable{where()}. Pass "
            f"aotjax.tensor(...) of it to have the write applied to the caller, or write into a copy (`x.clone()`).")


def _read(x):
    return current_value(x) if isinstance(x, FunctionalTensor) else x


def captured_alias_error(transform: str, val: Tensor) -> UnsupportedError:
    return UnsupportedError(
        f"{transform}: the function reads a tensor captured from outside it ({get_aval(val).str_short()}) that shares "
        f"memory with one of its arguments without being a view of that argument{where()}. Pass the captured tensor "
        f"as an argument too (or the base that both view), or read the argument instead.")
