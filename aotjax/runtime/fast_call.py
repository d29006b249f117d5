"""The fast path of a compiled call: the last call's signature, checked with a few list comparisons.

`guards.call_key` builds a call's whole signature (per leaf its shape, dtype, PyTorch layout and aliasing) at a few
hundred nanoseconds per argument. A loop calling a compiled step mostly repeats the last call: the same pytree
structure (positional Tensors and Python scalars, no keyword), the same storages or storages of the same shapes
and dtypes, the same layouts, no two arguments sharing memory. A `FastCall` remembers, for the entry that call
ran, the last call's `(storage, view chain, strides, offset)` per tensor argument (captured tensors after them;
the storages by weak reference, so that no argument's data is kept alive)
and what the boundary does with the program's results, precomputed: which inputs it reads how, which buffers it
donates, which inputs take which new bases, how the outputs are built. A call whose signature compares equal runs
the program directly; one whose storages changed (a new batch) is checked once per changed tensor (its base's
shape and dtype), then all storages distinct; anything else (a new type, layout, aliasing, a keyword, a tracer)
is a miss, and the caller takes the full path, which traces again if it must.

Two facts make the comparison enough: a storage's base keeps its shape and dtype for the storage's life (writes
check it; the program compiled for an entry refuses, when jax would trace it again, inputs of other shapes or
dtypes: `guard_avals`), and the buffers of the last call's arguments were checked not to be shared by a donated
input then; they are checked again whenever some storage has been given a new base since
(`aotjax.interpreters.eval.eager_writes`), or when the program may return one of its inputs as a new base.
"""
from __future__ import annotations

import weakref
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from aotjax.core.avals import PYTHON_SCALARS as _SCALARS
from aotjax.interpreters.eval import eager_writes, read, write
from aotjax.runtime.boundary import BoundaryMeta, OutKind, apply
from aotjax.tensor import Storage, Tensor, is_eager

_new = object.__new__

MISS = object()  # what `FastCall.run` returns for a call it does not match


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


def signature(args: tuple, implicit: list) -> list | None:
    """The fast signature of a call with positional `args` only (captured tensors `implicit` after them): per
    tensor `(storage, chain, strides, offset)`; None if an argument is neither an eager tensor nor a Python
    scalar (a pytree, an array of another library, a tracer)."""
    tensors = []
    for x in args:
        if is_eager(x):
            tensors.append(x)
        elif type(x) not in _SCALARS:
            return None
    return [(x._storage, x._chain, x._strides, x._offset) for x in (*tensors, *implicit)]


def _weak(sig: list) -> list:
    """`sig` holding its storages by weak reference: a compiled function keeps no argument's data alive."""
    return [(weakref.ref(s), chain, strides, offset) for s, chain, strides, offset in sig]


class FastCall:
    """The last call of one compiled entry, ready to be repeated (see the module docstring). Built by `build`;
    `run` with the next call's positional arguments returns the outputs, or `MISS`."""

    __slots__ = ("n", "tensor_pos", "scalar_types", "implicit", "sig", "avals", "fn", "plain", "readers",
                 "donated", "forwards", "epoch", "writes", "bases", "outputs", "single", "meta", "generic",
                 "mutated_pos", "base_pos", "single_base", "statics")

    @classmethod
    def build(cls, fn: Callable, meta: BoundaryMeta, jaxpr, donated: tuple, mutated_pos: list, base_pos: list,
              args: tuple, implicit: list, sig: list) -> "FastCall | None":
        """The fast path of the call that just ran `fn` (a compiled entry's jitted function) on `args` (positional
        only; `implicit`: the entry's captured tensors) with signature `sig` (`signature`, taken before the call),
        or None where it does not apply (tensors sharing memory, the same object twice, view changes of inputs)."""
        full = [*args, *implicit]
        groups = meta.groups
        if meta.metadata or len(groups) != len(full) or any(
                g.synthetic or g.leaves != [[i]] for i, g in enumerate(groups)):
            return None
        self = cls()
        self.n = len(args)
        tensor_pos = [i for i, x in enumerate(args) if isinstance(x, Tensor)]
        self.tensor_pos = None if len(tensor_pos) == len(args) else tensor_pos
        self.scalar_types = [(i, type(x)) for i, x in enumerate(args) if not isinstance(x, Tensor)]
        self.implicit = implicit
        self.sig = _weak(sig)
        self.avals = [(x.shape, x.dtype) for x in (*(args[i] for i in tensor_pos), *implicit)]
        self.fn = fn
        self.plain = not self.scalar_types and all(not s[1] for s in sig)
        self.readers = [_reader(x, g) for x, g in zip(full, groups, strict=True)]
        self.donated = donated
        # NOTE: a program returning an input unchanged as a written input's new base hands back that very buffer:
        # the two storages then share it, so every call checks the donated buffers.
        invars = set(map(id, jaxpr.jaxpr.invars))
        self.forwards = any(id(jaxpr.jaxpr.outvars[p]) in invars for p in mutated_pos)
        self.epoch = None
        self.writes = [(g, p) for g, p in zip(meta.mutated, mutated_pos, strict=True)]
        self.mutated_pos, self.base_pos = mutated_pos, base_pos
        self.meta = meta
        self.generic = any(s.kind is OutKind.ALIAS or s.chain for s in meta.outputs)
        self.bases = base_pos
        self.outputs = [(s.kind, s.index, s.layout, s.value) for s in meta.outputs]
        self.single = meta.out_tree.num_leaves == 1 and meta.out_tree.num_nodes == 1
        spec = meta.outputs[0] if self.single else None
        plain_base = spec is not None and spec.kind is OutKind.BASE and not spec.chain and spec.layout == (None, 0)
        self.single_base = base_pos[spec.index] if plain_base else None
        self.statics = None  # what a caller with static arguments keeps of them, to compare (`jit`'s)
        return self

    def run(self, args: tuple) -> Any:
        """The outputs of the call with positional `args`, or `MISS`."""
        # NOTE: this runs once per compiled call: loops rather than comprehensions (cheaper on Python 3.11), one
        # pass reading each tensor's signature and its base.
        if len(args) != self.n:
            return MISS
        if self.tensor_pos is None:
            tensors = args if not self.implicit else (*args, *self.implicit)
        else:
            for i, t in self.scalar_types:
                if type(args[i]) is not t:
                    return MISS
            tensors = [*(args[i] for i in self.tensor_pos), *self.implicit]
        vals = []
        checked = True
        try:
            for x, (ref, chain, strides, offset) in zip(tensors, self.sig):
                storage = x._storage
                if (storage is not ref() or x._chain is not chain or x._strides is not strides
                        or x._offset is not offset):
                    checked = False
                    break
                vals.append(storage.base)
            if not checked:  # NOTE: not the very same storages and layout objects: compared by value
                sig = [(x._storage, x._chain, x._strides, x._offset) for x in tensors]
                if not self._fits(sig, tensors):
                    return MISS
                self.sig = _weak(sig)
                vals = [s[0].base for s in sig]
        except AttributeError:  # NOTE: not a tensor where the last call had one
            return MISS
        full = args if not self.implicit else (*args, *self.implicit)
        if not self.plain:
            vals = [r(x) for r, x in zip(self.readers, full)]
        donated = self.donated
        if donated:
            for i in donated:
                x = full[i]
                if x._chain or not x._storage.owned:  # NOTE: only aotjax's own buffers are ever donated
                    vals[i] = jnp.copy(vals[i])
            if not checked or self.forwards or self.epoch != eager_writes[0]:
                unshare_donated(vals, donated)
        try:
            outs = self.fn(*vals)
        except SignatureChanged:
            return MISS
        if self.generic:
            out = apply(self.meta, list(full), [outs[i] for i in self.mutated_pos], [outs[i] for i in self.base_pos],
                        wrap=Tensor._wrap)
            self.epoch = eager_writes[0]
            return out
        for g, p in self.writes:
            target = full[g]
            if target._chain:
                write(target, outs[p])
            else:
                storage = target._storage
                storage.base, storage.owned = outs[p], True
                storage.version += 1
        self.epoch = eager_writes[0] = eager_writes[0] + 1
        single = self.single_base
        if single is not None:  # NOTE: one output, a new value (made inline, as `Tensor._wrap` does)
            storage = _new(Storage)
            storage.base, storage.version, storage.owned = outs[single], 0, True
            t = _new(Tensor)
            t._storage, t._chain, t._aval, t._strides, t._offset, t._cache = storage, (), None, None, 0, None
            return t
        return self._outputs(outs, full)

    def _fits(self, sig: list, tensors) -> bool:
        """Whether a call whose signature differs from the last one's only by storages of the same shapes and
        dtypes (eager tensors, none shared) fits the entry."""
        if len(sig) != len(self.sig):
            return False
        for new, old, aval, x in zip(sig, self.sig, self.avals, tensors):
            if new[1:] != old[1:]:
                return False
            if new[0] is not old[0]():
                if not is_eager(x):
                    return False
                base = new[0].base
                if not x._chain and (base.shape != aval[0] or base.dtype != aval[1]):
                    return False
                if x._chain and (x.shape != aval[0] or x.dtype != aval[1]):
                    return False
        return len({s[0] for s in sig}) == len(sig)

    def _outputs(self, outs: list, full) -> Any:
        bases = [Tensor._wrap(outs[p]) for p in self.bases]
        results = []
        for kind, index, layout, value in self.outputs:
            if kind is OutKind.BASE:
                t = bases[index]
                t._strides, t._offset = layout
                results.append(t)
            elif kind is OutKind.INPUT:
                results.append(full[index])
            else:  # CONST (no chain: `generic` takes views)
                results.append(value)
        if self.single:
            return results[0]
        return jax.tree_util.tree_unflatten(self.meta.out_tree, results)


def _reader(x, g) -> Callable:
    if isinstance(x, Tensor):
        return read
    return lambda v, dtype=g.aval.dtype: np.asarray(v, dtype=dtype)


def unshare_donated(vals: list, donated: tuple) -> None:
    """Copy a donated input whose buffer is also another input of the call (an argument and a snapshot of it that
    an inner transform captured, say): XLA cannot donate a buffer the same call reads elsewhere."""
    others = {id(v) for i, v in enumerate(vals) if i not in donated}
    for i in donated:
        if id(vals[i]) in others:
            vals[i] = jnp.copy(vals[i])
        others.add(id(vals[i]))
