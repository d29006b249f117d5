"""The fast path of a compiled call: the last call's tensors, compared by identity.

`guards.call_key` builds a call's whole signature (per leaf its shape, dtype, PyTorch layout and aliasing) at a few
hundred nanoseconds per argument. A loop calling a compiled step mostly repeats the last call: the same pytree
structure (positional Tensors and Python scalars, no keyword), the same tensor objects or tensors of the same
shapes, dtypes and layouts, no two arguments sharing memory. A `FastCall` remembers, for the entry that call ran,
the last call's tensor arguments (by weak reference, so that no argument's data is kept alive), their layouts
(whether a view, and the strides: a view is read by value, wherever it starts, unless the program returns an alias
of it), shapes and dtypes, and what the boundary does with the program's results,
precomputed: which inputs it reads how, which buffers it donates, which inputs take which new bases, how the
outputs are built. A call passing the very same tensor objects runs the program directly; one passing other
tensors (a new batch) has those checked once (layout, shape, dtype), then all storages distinct; anything else (a
new type, a keyword, a tracer, a changed layout or aliasing) is a miss, and the caller takes the full path, which
traces again if it must.

Three facts make the identity comparison enough:
- a tensor object keeps its storage and layout unless one of them is set again, which counts in
  `aotjax.tensor.relayouts` (a metadata mutation such as `t_()`, `Module.to(dtype)`, an `out=` resized): any such
  change, to any tensor, sends the next call through the check by value;
- a storage's base keeps its shape and dtype for the storage's life (writes check it; the program compiled for an
  entry refuses, when jax would trace it again, inputs of other shapes or dtypes: `guard_avals`);
- the buffers of the last call's arguments were checked not to be shared by a donated input then; they are
  checked again whenever some storage has been given a new base since (`aotjax.interpreters.eval.eager_writes`),
  or when the program may return one of its inputs as a new base.
"""
from __future__ import annotations

import weakref
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from aotjax.autograd import graph
from aotjax.core import call_epoch
from aotjax.core.avals import PYTHON_SCALARS as _SCALARS
from aotjax.core.checks import config
from aotjax.core.interpreter import _state, staging
from aotjax.interpreters.eval import eager_writes, read, write
from aotjax.runtime.boundary import BoundaryMeta, OutKind, apply
from aotjax.tensor import Storage, Tensor, is_eager

_new = object.__new__

MISS = object()  # what `FastCall.run` returns for a call it does not match


def no_fast_call(args: tuple) -> object:
    """The `FastCall.run` of a function with no fast path (yet): every call misses."""
    return MISS


class SignatureChanged(Exception):
    """Raised when jax would trace a compiled entry's program again for inputs of other shapes or dtypes (which the
    fast path's checks rule out): the call is taken by the full path instead."""


def guard_avals(fn: Callable, in_avals) -> Callable:
    """`fn` (a program's flat function, about to be `jax.jit`-ed) refusing to be traced for inputs whose shapes or
    dtypes are not `in_avals`' (`SignatureChanged`): jax traces again for other committed devices or shardings,
    which change nothing in the program, but never runs it on inputs it was not traced for."""
    expected = [(tuple(a.shape), np.dtype(a.dtype)) for a in in_avals]

    def guarded(*vals):
        if [(tuple(v.shape), np.dtype(v.dtype)) for v in vals] != expected:
            raise SignatureChanged(fn.__name__)
        return fn(*vals)

    guarded.__name__ = fn.__name__
    return guarded


class Signature(NamedTuple):
    """What the fast path keeps of a call, taken before it runs: its tensors (the positional arguments', then the
    captured ones), their layouts `(whether a view, strides)` and `(shape, dtype)`, and `call_epoch` then
    (None while a transform runs: the call is checked again)."""
    tensors: list
    layouts: list
    avals: list
    stamp: int | None


def signature(args: tuple, implicit: list) -> Signature | None:
    """The fast signature of a call with positional `args` only (captured tensors `implicit` after them); None if
    an argument is neither an eager tensor nor a Python scalar (a pytree, an array of another library, a tracer)."""
    stamp = None if call_epoch.transforms_running() else call_epoch.epoch[0]
    tensors = []
    for x in args:
        if is_eager(x):
            tensors.append(x)
        elif type(x) not in _SCALARS:
            return None
    tensors.extend(implicit)
    return Signature(tensors, [(bool(x._chain), x._strides) for x in tensors],
                     [(x.shape, x.dtype) for x in tensors], stamp)


class FastCall:
    """The last call of one compiled entry, ready to be repeated (see the module docstring). Built by `build`;
    `run` with the next call's positional arguments returns the outputs, or `MISS`: a function compiled for this
    record (`specialized_run`; `source` is its text)."""

    __slots__ = ("implicit", "unless_checks", "refs", "stamp", "layouts", "avals", "fn", "donated", "forwards",
                 "writes", "outputs", "single", "meta", "generic", "mutated_pos", "base_pos", "statics", "run",
                 "source", "recording_free", "guards", "grad_enabled", "offsets")

    @classmethod
    def build(cls, fn: Callable, meta: BoundaryMeta, jaxpr, donated: tuple, mutated_pos: list, base_pos: list,
              args: tuple, implicit: list, sig: Signature, unless_checks: bool = False,
              slow: Callable | None = None, guards=None, offsets: list = ()) -> "FastCall | None":
        """The fast path of the call that just ran `fn` (a compiled entry's jitted function) on `args` (positional
        only; `implicit`: the entry's captured tensors) with signature `sig` (taken before the call), or None where
        it does not apply (tensors sharing memory, the same object twice, view changes of inputs). It misses while
        a staging transform traces (the call is staged then), and with `unless_checks` while `aotjax.config.checks`
        is on (the entry was compiled without checks). With `slow` (a weak reference to the caller's full path),
        `run` takes the call's own arguments (`*args, **kwargs`) and calls `slow()` with them where it misses: it
        can then be the caller's `__call__` itself (`Jitted`), one Python frame fewer per call. `guards` (the
        entry's `trace_reads.Guards`) must hold at each call, and grad mode be as it is now."""
        full = [*args, *implicit]
        groups = meta.groups
        if meta.metadata or len(groups) != len(full) or any(
                g.synthetic or g.leaves != [[i]] for i, g in enumerate(groups)):
            return None
        self = cls()
        self.implicit, self.unless_checks = implicit, unless_checks
        self.guards, self.grad_enabled = guards or None, _state.grad_enabled
        # NOTE: the offsets the program depends on (`Staged.offsets`), by position among the call's tensors
        position = {i: k for k, i in enumerate(i for i, x in enumerate(args) if is_eager(x))}
        self.offsets = [(position[i], o) for i, o in offsets if i in position]
        # NOTE: whether no tensor of the call required grad: then one that does later misses (its call is recorded)
        self.recording_free = not any(x._ag is not None for x in sig.tensors)
        # NOTE: the argument tensors by weak reference: a compiled function keeps no argument's data alive
        self.refs = [weakref.ref(x) for x in sig.tensors[:len(sig.tensors) - len(implicit)]]
        self.stamp = [sig.stamp]
        self.layouts, self.avals = sig.layouts, sig.avals
        self.fn = fn
        self.donated = donated
        # NOTE: a program returning an input unchanged as a written input's new base hands back that very buffer:
        # the two storages then share it, so every call checks the donated buffers.
        invars = set(map(id, jaxpr.jaxpr.invars))
        self.forwards = any(id(jaxpr.jaxpr.outvars[p]) in invars for p in mutated_pos)
        self.writes = [(g, p) for g, p in zip(meta.mutated, mutated_pos, strict=True)]
        self.mutated_pos, self.base_pos = mutated_pos, base_pos
        self.meta = meta
        self.generic = any(s.kind is OutKind.ALIAS or s.chain for s in meta.outputs)
        self.outputs = [(s.kind, s.index, s.layout, s.value) for s in meta.outputs]
        self.single = meta.out_tree.num_leaves == 1 and meta.out_tree.num_nodes == 1
        self.statics = None  # what a caller with static arguments keeps of them, to compare (`jit`'s)
        self.run, self.source = specialized_run(self, args, slow)
        return self

    def refit(self, tensors: tuple) -> bool:
        """Whether the call with these tensors (the positional arguments', then the captured ones) fits the entry,
        when some of them are not the last call's objects or `call_epoch` advanced since: eager tensors of the same
        layouts, shapes and dtypes, no two of one storage, and no staging transform tracing this call (it is staged
        then), nor checks turned on. If so it is the last call now (`run` compares the next call's tensors with it
        by identity), unless a transform runs somewhere: then the next call is checked again."""
        now = None if call_epoch.transforms_running() else call_epoch.epoch[0]
        if staging() or self.unless_checks and config.checks or _state.autocast is not None:
            return False  # NOTE: under autocast a call takes the full path, whose key holds autocast's dtype
        refs = self.refs
        same = self.stamp[0] is not None and self.stamp[0] == now
        for k, x in enumerate(tensors):
            if same and (k >= len(refs) or x is refs[k]()):
                continue  # NOTE: this object was checked, and nothing it depends on changed since
            if not is_eager(x) or (bool(x._chain), x._strides) != self.layouts[k]:
                return False
            if self.recording_free and graph.joins_graph(x):
                return False  # NOTE: imperative autograd records this call (`aotjax.transforms.jit.records_call`)
            shape, dtype = self.avals[k]
            value = x._storage.base if not x._chain else x
            if value.shape != shape or value.dtype != dtype:
                return False
        if len({id(x._storage) for x in tensors}) != len(tensors):
            return False
        for i, offset in self.offsets:
            if tensors[i]._offset != offset:
                return False
        refs[:] = [weakref.ref(x) for x in tensors[:len(refs)]]
        self.stamp[0] = now
        return True


def unshare_donated(vals: list, donated: tuple) -> None:
    """Copy a donated input whose buffer is also another input of the call (an argument and a snapshot of it that
    an inner transform captured, say): XLA cannot donate a buffer the same call reads elsewhere."""
    others = {id(v) for i, v in enumerate(vals) if i not in donated}
    for i in donated:
        if id(vals[i]) in others:
            vals[i] = jnp.copy(vals[i])
        others.add(id(vals[i]))


# ---------------------------------------------------------------------------------------------------------------
# The fast path compiled. What a repeated call does depends on the record only: which arguments are tensors or
# scalars, which are views, which buffers are donated and which inputs take new bases, how the outputs are built.
# `specialized_run` writes that work out as Python source for the one record, the loops over arguments and outputs
# unrolled and each of those decisions taken once, and compiles it (the way `dataclasses` and
# `collections.namedtuple` build their methods): a repeated call costs a few bytecodes per argument.
# `FastCall.source` keeps the text, for reading.

def specialized_run(fast: FastCall, args: tuple, slow: Callable | None = None) -> tuple[Callable, str]:
    """The function `fast.run`, compiled for `fast` (built from the call with positional `args`), and its
    source: `run(args)` returning MISS where it misses, or with `slow` (see `FastCall.build`) `run(*args,
    **kwargs)` calling `slow()(*args, **kwargs)` there."""
    n = len(args)
    implicit = fast.implicit
    full = [*args, *implicit]
    names = [f"a{i}" for i in range(n)] + [f"m{j}" for j in range(len(implicit))]
    tensors = [i for i, x in enumerate(full) if isinstance(x, Tensor)]
    storage = set(tensors)
    env: dict[str, Any] = {"MISS": MISS, "SignatureChanged": SignatureChanged, "fn": fast.fn, "read": read,
                           "write": write, "copy": jnp.copy, "unshare": unshare_donated, "EW": eager_writes,
                           "asarray": np.asarray, "Storage": Storage, "Tensor": Tensor, "new": _new,
                           "refit": fast.refit, "fast": fast, "SLOW": slow}
    for j, t in enumerate(implicit):
        env[names[n + j]] = t
    miss = "MISS" if slow is None else "SLOW()(*args)"  # NOTE: what a miss returns
    if slow is None:
        lines = ["def run(args):"]
    else:
        lines = ["def run(*args, **kwargs):", "    if kwargs:", "        return SLOW()(*args, **kwargs)"]
    emit = lines.append
    if n:
        emit("    try:")
        emit(f"        {''.join(name + ', ' for name in names[:n])}= args")
        emit("    except ValueError:  # NOTE: another number of arguments")
        emit(f"        return {miss}")
    else:
        emit("    if args:")
        emit(f"        return {miss}")
    # the modes and the Python values the program's trace read (`aotjax.runtime.trace_reads`)
    env.update(STATE=_state, GRAD=fast.grad_enabled)
    emit("    if STATE.grad_enabled is not GRAD:")
    emit(f"        return {miss}")
    if fast.guards is not None:
        env.update(HOLDS=fast.guards.holds, IMPLICIT=implicit)
        emit("    if not HOLDS(IMPLICIT):")
        emit(f"        return {miss}")
    for i, x in enumerate(args):
        if not isinstance(x, Tensor):
            env[f"T{i}"] = type(x)
            emit(f"    if type(a{i}) is not T{i}:")
            emit(f"        return {miss}")
    # the signature: the same tensor objects as the last call's, and nothing changed since (`FastCall.refit`)
    env.update(W=fast.refs, STAMP=fast.stamp, CALL_EPOCH=call_epoch.epoch)
    checks = ["CALL_EPOCH[0] != STAMP[0]"]
    checks += [f"{names[i]} is not W[{k}]()" for k, i in enumerate(i for i in tensors if i < n)]
    emit(f"    if {' or '.join(checks)}:")
    emit(f"        if not refit(({''.join(names[i] + ', ' for i in tensors)})):")
    emit(f"            return {miss}")
    emit("        fresh = True")
    emit("    else:")
    emit("        fresh = False")
    # the program's inputs
    storages = {g for g, _ in fast.writes} | set(fast.donated)
    for i, x in enumerate(full):
        if i in storage and i in storages:
            emit(f"    s{i} = {names[i]}._storage")
        if i not in storage:
            env[f"D{i}"] = fast.meta.groups[i].aval.dtype
            emit(f"    v{i} = asarray({names[i]}, D{i})")
        elif x._chain:
            emit(f"    v{i} = read({names[i]})")
        else:
            emit(f"    v{i} = s{i}.base" if i in storages else f"    v{i} = {names[i]}._storage.base")
    values = ", ".join(f"v{i}" for i in range(len(full)))
    epoch = None
    if fast.donated:
        for i in fast.donated:  # NOTE: only aotjax's own buffers are ever donated
            if full[i]._chain:
                emit(f"    v{i} = copy(v{i})")
            else:
                emit(f"    if not s{i}.owned:")
                emit(f"        v{i} = copy(v{i})")
        env["DONATED"] = fast.donated
        if len(full) > 1:  # NOTE: one input shares its buffer with no other
            emit("    if True:" if fast.forwards else "    if fresh or SEEN[0] != EW[0]:")
            env["SEEN"] = epoch = [None]  # NOTE: `eager_writes` after this record's last call
            emit(f"        vals = [{values}]")
            emit("        unshare(vals, DONATED)")
            emit(f"        {values}, = vals")
    emit("    try:")
    emit(f"        outs = fn({values})")
    emit("    except SignatureChanged:")
    emit(f"        return {miss}")
    if fast.generic:
        env.update(apply=apply, meta=fast.meta, wrap=Tensor._wrap)
        mutated = ", ".join(f"outs[{p}]" for p in fast.mutated_pos)
        bases = ", ".join(f"outs[{p}]" for p in fast.base_pos)
        emit(f"    out = apply(meta, [{', '.join(names)}], [{mutated}], [{bases}], wrap=wrap)")
        if epoch is not None:
            emit("    SEEN[0] = EW[0]")
        emit("    return out")
        return _compiled(lines, env)
    for g, p in fast.writes:
        if full[g]._chain:
            emit(f"    write({names[g]}, outs[{p}])")
        else:
            emit(f"    s{g}.base = outs[{p}]")
            emit(f"    s{g}.owned = True")
            emit(f"    s{g}.version += 1")
    emit("    SEEN[0] = EW[0] = EW[0] + 1" if epoch is not None else "    EW[0] += 1")
    results = []
    wrapped = set()
    for k, (kind, index, layout, value) in enumerate(fast.outputs):
        if kind is OutKind.BASE:
            if index not in wrapped:
                wrapped.add(index)
                # NOTE: one store per slot (no tuple built and unpacked), as `Tensor._wrap` would set them
                emit(f"    b{index} = new(Storage)")
                emit(f"    b{index}.base = outs[{fast.base_pos[index]}]")
                emit(f"    b{index}.version = 0")
                emit(f"    b{index}.owned = True")
                emit(f"    b{index}.grad_node = None")
                emit(f"    o{index} = new(Tensor)")
                for slot, value in (("_storage", f"b{index}"), ("_chain", "()"), ("_aval", "None"),
                                    ("_strides", "None"), ("_offset", "0"), ("_cache", "None"),
                                    ("_ag", "None")):
                    emit(f"    o{index}.{slot} = {value}")
            if layout != (None, 0):
                env[f"L{k}"] = layout
                emit(f"    o{index}._strides, o{index}._offset = L{k}")
            results.append(f"o{index}")
        elif kind is OutKind.INPUT:
            results.append(names[index])
        else:  # CONST (no chain: `generic` takes views)
            env[f"K{k}"] = value
            results.append(f"K{k}")
    if fast.single:
        emit(f"    return {results[0]}")
    elif fast.meta.out_tree == jax.tree_util.tree_structure((0,) * len(results)):
        emit(f"    return ({''.join(r + ', ' for r in results)})")
    else:
        env.update(unflatten=jax.tree_util.tree_unflatten, OUT_TREE=fast.meta.out_tree)
        emit(f"    return unflatten(OUT_TREE, [{', '.join(results)}])")
    return _compiled(lines, env)


def _compiled(lines: list[str], env: dict) -> tuple[Callable, str]:
    source = "\n".join(lines) + "\n"
    exec(compile(source, "<aotjax: fast call>", "exec"), env)
    return env["run"], source
