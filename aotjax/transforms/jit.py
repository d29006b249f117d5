"""`jit`: functionalize, trace, lower and compile through XLA; every call restores eager semantics.

Stages, as in JAX: `jit(f).lower(*args)` is a `Lowered` (the functionalized jaxpr, the boundary
record, StableHLO), and `.compile()` a `Compiled`. Calls look up a compiled program by the
guards of `aotjax.runtime.guards` (shapes, dtypes, pytree structure, static arguments, aliasing
pattern) and trace again on a miss. Written inputs are donated: the program returns each written
input's new base in the buffer of the old one, and the caller's storage takes it (no copy).
"""
from __future__ import annotations

import functools
from operator import attrgetter
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from aotjax.interpreters.eval import read
from aotjax.lowering.to_jax import avals_to_structs, flat_function
from aotjax.runtime import boundary, guards
from aotjax.runtime.boundary import GroupKind, Slot
from aotjax.tensor import Tensor
from aotjax.transforms.argnums import fun_name, normalize_argnums
from aotjax.transforms.functionalize import Staged, functionalize, stage_functionalized
from aotjax.transforms.make_jaxpr import split_static
from aotjax.transforms.passes import run_pass


class _Entry:
    """One compiled program of a jitted function: the staged program, the jax-jitted flat function
    (jax compiles it on first call), which flat inputs it donates, and where each output goes."""

    __slots__ = ("staged", "fn", "donated", "readers", "base_pos", "mutated_pos")

    def __init__(self, staged: Staged, donate: bool):
        self.staged = staged
        meta = staged.meta
        self.donated = tuple(meta.mutated) if donate else ()
        self.fn = jax.jit(flat_function(staged.jaxpr), donate_argnums=self.donated)
        self.readers = [_reader(g, gi in self.donated) for gi, g in enumerate(meta.groups)]
        positions = {entry: i for i, entry in enumerate(meta.layout)}
        self.base_pos = [positions[(Slot.BASE, k)] for k in range(meta.n_bases)]
        self.mutated_pos = [positions[(Slot.MUTATED, g)] for g in meta.mutated]

    def run(self, leaves: list, fn) -> Any:
        """Call `fn` (the jitted function or an executable) on this call's arguments; replay."""
        outs = fn(*[read_input(leaves[i]) for i, read_input in self.readers])
        return boundary.apply(self.staged.meta, leaves, [outs[i] for i in self.mutated_pos],
                              [outs[i] for i in self.base_pos], wrap=_wrap)


def _reader(g, donated: bool):
    """`(leaf index, read)`: how the program's input for group `g` is read from a call's arguments.
    A donated input that aotjax does not own alone (the user's own array, a view's value) is copied
    first, so that only aotjax's own buffers are ever deleted."""
    if g.kind is GroupKind.TENSOR:
        if g.synthetic:
            read_input = _read_storage
        elif donated:
            read_input = _read_for_donation
        else:
            read_input = read
    elif g.kind is GroupKind.SCALAR:
        read_input = functools.partial(np.asarray, dtype=g.aval.dtype)
    else:
        read_input = jnp.copy if donated else _identity
    return g.leaves[0][0], read_input


def _read_storage(x):
    return x._storage.base


def _read_for_donation(x):
    v = read(x)
    return v if x._storage.owned and not x._chain else jnp.copy(v)


def _identity(x):
    return x


def _wrap(array) -> Tensor:
    return Tensor._wrap(array)


def _lowered_program(entry: _Entry):
    """What `jit: lower` shows: the program handed to `jax.jit`, its donated inputs in `meta.donate`."""
    return entry.staged.jaxpr.with_meta(donate=entry.donated)


class Jitted:
    """A function compiled through XLA on first call for each new input signature. See `jit`."""

    what = "jit"  # the transform's name, for messages

    def __init__(self, fun: Callable, static_argnums: int | Sequence[int], donate: bool):
        self.fun = fun
        self.static_argnums = normalize_argnums(fun, static_argnums, self.what, "static_argnums")
        self.donate = donate
        self._cache: dict = {}
        self.trace_count = 0
        functools.update_wrapper(self, fun, updated=())  # NOTE: not fun.__dict__: a wrapped Jitted has state

    def _split(self, args, kwargs):
        dyn, statics = args, ()
        if self.static_argnums:
            dyn, static, _ = split_static(args, self.static_argnums, kwargs, self.what, self.fun)
            statics = guards.hashable_statics(tuple(args[i] for i in static), static, self.what)
        leaves, in_tree = jax.tree_util.tree_flatten((dyn, kwargs))
        return leaves, in_tree, statics

    def __call__(self, *args, **kwargs):
        leaves, in_tree, statics = self._split(args, kwargs)
        signature = guards.call_key(leaves)
        if signature is None or guards.under_transform():
            # NOTE: under another transform the body is inlined into it, functionalized.
            return functionalize(self.fun, self.static_argnums)(*args, **kwargs)
        key = (in_tree, statics, signature)
        entry = self._cache.get(key)
        if entry is None:
            entry = self._cache[key] = self._stage(args, kwargs)
        return entry.run(leaves, entry.fn)

    def _stage(self, args, kwargs) -> _Entry:
        """jit's pipeline, once per input signature."""
        self.trace_count += 1
        staged = run_pass("jit: functionalize", stage_functionalized, self.fun, args, kwargs,  # the pure program
                          self.static_argnums, self.what, show=attrgetter("jaxpr")).release()
        return run_pass("jit: lower", _Entry, staged, self.donate, show=_lowered_program)  # jax.jit, donating

    def lower(self, *args, **kwargs) -> "Lowered":
        """Trace and lower for these arguments (nothing runs): the functionalized jaxpr, the boundary
        record and the StableHLO text."""
        entry = self._stage(args, kwargs)
        return Lowered(self, entry, entry.fn.lower(*avals_to_structs(entry.staged.jaxpr.in_avals)), args, kwargs)

    def clear_cache(self) -> None:
        self._cache.clear()

    def __repr__(self) -> str:
        options = f", static_argnums={self.static_argnums}" if self.static_argnums else ""
        options += ", donate=False" if not self.donate else ""
        n = len(self._cache)
        return f"{self.what}({fun_name(self.fun)}{options}): {n} program{'' if n == 1 else 's'} cached"


def _signature(closed) -> str:
    """`(f32[3], i32[]) -> (f32[],)`: a program's input and output types."""
    ins = ", ".join(a.str_short() for a in closed.in_avals)
    outs = ", ".join(a.str_short() for a in closed.out_avals)
    return f"({ins}) -> ({outs}{',' if len(closed.out_avals) == 1 else ''})"


class Lowered:
    """A jitted function lowered for one input signature.

    `jaxpr`: the functionalized, pure ClosedJaxpr (inputs: one base per input group; outputs in
    `meta.layout` order); `meta`: the `BoundaryMeta` (what is written, what aliases what);
    `as_written`: the jaxpr of the function as written; `as_text()`: StableHLO; `compile()`."""

    def __init__(self, jitted: Jitted, entry: _Entry, lowered, args, kwargs):
        self._jitted, self._entry, self._lowered = jitted, entry, lowered
        self._args, self._kwargs = args, kwargs

    @property
    def jaxpr(self):
        return self._entry.staged.jaxpr

    @property
    def meta(self) -> boundary.BoundaryMeta:
        return self._entry.staged.meta

    @property
    def as_written(self):
        from aotjax.transforms.make_jaxpr import make_jaxpr

        return make_jaxpr(self._jitted.fun, self._jitted.static_argnums)(*self._args, **self._kwargs)

    def as_text(self) -> str:
        return self._lowered.as_text()

    def eval(self, *args, **kwargs):
        """Call with the functionalized jaxpr run by the reference interpreter (`eval_jaxpr`, one eager
        op at a time) instead of XLA, boundary included: a check that compilation changed nothing."""
        from aotjax.core.eval_jaxpr import eval_jaxpr

        closed = self.jaxpr

        def interpret(*vals):
            return [read(o) for o in eval_jaxpr(closed, *map(_wrap, vals))]

        leaves, _, _ = self._jitted._split(args, kwargs)
        return self._entry.run(leaves, interpret)

    def compile(self) -> "Compiled":
        return Compiled(self._jitted, self._entry, self._lowered.compile())

    def __str__(self) -> str:
        return f"{self.jaxpr.pretty(source_info=True)}\n{self.meta.describe()}"

    def __repr__(self) -> str:
        return f"Lowered({self._jitted.what}({fun_name(self._jitted.fun)}) {_signature(self.jaxpr)})"

    def _repr_pretty_(self, p, cycle):  # IPython / Jupyter: the program and its boundary
        p.text(str(self))


class Compiled:
    """A jitted function compiled for one input signature: call it with arguments of that signature
    (same shapes, dtypes, structure and aliasing pattern). `cost_analysis()` and `memory_analysis()`
    are XLA's."""

    def __init__(self, jitted: Jitted, entry: _Entry, executable):
        self._jitted, self._entry, self._executable = jitted, entry, executable

    def __call__(self, *args, **kwargs):
        leaves, _, _ = self._jitted._split(args, kwargs)
        if guards.call_key(leaves) != self._entry.staged.key:
            raise TypeError("Compiled: these arguments do not match the signature it was compiled for (shapes, "
                            "dtypes or aliasing pattern); call the jitted function instead, which compiles again")
        return self._entry.run(leaves, self._executable)

    def as_text(self) -> str:
        return self._executable.as_text()

    def cost_analysis(self):
        return self._executable.cost_analysis()

    def memory_analysis(self):
        return self._executable.memory_analysis()

    def __repr__(self) -> str:
        return f"Compiled({self._jitted.what}({fun_name(self._jitted.fun)}) {_signature(self._entry.staged.jaxpr)})"


def jit(fun: Callable, static_argnums: int | Sequence[int] = (), donate: bool = True) -> Jitted:
    """Compile `fun` through XLA, keeping eager semantics at the call.

    `fun` is functionalized and traced for the shapes, dtypes, pytree structure, static arguments
    and aliasing pattern of its arguments, then compiled; later calls with the same signature reuse
    the program. Arguments written in place are updated after the call (with `donate`, in place:
    the program writes the new value into the old buffer); outputs that alias inputs are views of
    the caller's tensors. Under another transform (`grad`, `make_jaxpr`, ...) the body is inlined.

    >>> @aotjax.jit
    ... def step(w, g):
    ...     w.sub_(0.5 * g)
    ...     return (w * w).sum()
    >>> w = aotjax.ones(3)
    >>> step(w, aotjax.ones(3)), w
    (tensor(0.75), tensor([0.5, 0.5, 0.5]))
    """
    return Jitted(fun, static_argnums, donate)
