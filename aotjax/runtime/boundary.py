"""The call boundary: eager semantics restored around a functionalized body.

A transform (functionalize, jit, and the ones built on them) runs the user's function as a pure
program. This module does what surrounds that program:

- `group_inputs`: the flat arguments grouped by storage. One input of the pure program per group:
  a lone tensor is its own base; tensors sharing a storage get one *synthetic base* (the whole
  storage) and each its view chain relative to it; the same object passed twice is one input.
- `enter`: functional tensors for the inside, one storage per group.
- `collect`: after the body, what it did: which groups were written (their new bases), which
  inputs changed view (metadata mutations), and what each output is — an input, a view of an
  input (its chain), a view of an intermediate base (several outputs may share one), or a constant.
- `BoundaryMeta`: that record, printable; `apply` replays it on the caller's objects once the
  body has succeeded: new bases written back (an eager base takes the new buffer, no copy), view
  changes replayed, aliasing outputs returned as real views (view replay, never strides).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

import jax

from aotjax.autograd import graph
from aotjax.core import views
from aotjax.core.avals import PYTHON_SCALARS as _SCALARS
from aotjax.core.avals import ShapedArray, get_aval
from aotjax.core.interpreter import Tracer, below
from aotjax.core.interpreter import bind as _bind
from aotjax.core.primitive import all_primitives
from aotjax.interpreters.eval import eager_writes, read, write
from aotjax.interpreters.functionalize import FunctionalStorage, FunctionalTensor, current_value, note_snapshot
from aotjax.ops.base.frontend import bind_inplace
from aotjax.ops.indexing.subscripts import copy__p
from aotjax.tensor import Tensor, is_eager
from aotjax.transforms.make_jaxpr import input_aval


# -- inputs ----------------------------------------------------------------------------------------
class GroupKind(enum.Enum):
    """What the objects of an input group are: Tensors, a Python scalar, or an array of another library
    (a `jax.Array`, a NumPy array)."""

    TENSOR = "tensor"
    SCALAR = "scalar"
    ARRAY = "array"


@dataclass
class InputGroup:
    """Flat arguments sharing one storage. `objects` are the distinct objects (by identity), `leaves`
    the flat argument indices of each, `chains` each object's view chain relative to the group's
    base: `()` when the group is one object (its own base), the object's own chain when the base is
    the whole shared storage (`synthetic`). `kind` (a `GroupKind`) and `aval` (the base's) outlive
    the objects: a cached program keeps its groups, never the call's arguments (`release`)."""

    objects: list[Any]
    leaves: list[list[int]]
    chains: list[views.Chain]
    synthetic: bool = False
    kind: GroupKind | None = None
    aval: ShapedArray | None = None
    what: str = ""  # the first object, in words ("a jax.Array"), for error messages

    @property
    def is_tensor(self) -> bool:
        return self.kind is GroupKind.TENSOR

    def base_aval(self) -> ShapedArray:
        return self.aval

    def release(self) -> None:
        """Forget the arguments of the call this group was made from (they may be large, or dead tracers)."""
        self.objects = []


def _describe_group(g: InputGroup) -> None:
    x = g.objects[0]
    if isinstance(x, Tensor):
        g.kind = GroupKind.TENSOR
        g.aval = get_aval(_storage_base_value(x)) if g.synthetic else get_aval(x)
    elif isinstance(x, _SCALARS):
        g.kind, g.aval = GroupKind.SCALAR, input_aval(x)[0]
    else:
        g.kind, g.aval = GroupKind.ARRAY, get_aval(x)
    g.what = _kind(x)


def _storage_base(x: Tensor) -> Tensor:
    """A caller-level tensor that is the whole storage of `x` (no view chain)."""
    if isinstance(x, FunctionalTensor):
        return FunctionalTensor(x._trace, x._storage, (), get_aval(x._storage.base))
    t = Tensor._wrap(None)
    t._storage = x._storage
    return t


def _storage_base_value(x: Tensor):
    return x._storage.base


def group_inputs(leaves: list, scalars: bool = False) -> list[InputGroup]:
    """Group the flat arguments by storage (see `InputGroup`). Python scalars form groups only when
    `scalars` (a staged program takes them as 0-d inputs); otherwise they are left out."""
    groups: list[InputGroup] = []
    by_key: dict = {}
    for i, x in enumerate(leaves):
        if isinstance(x, _SCALARS):
            if not scalars:
                continue
            # NOTE: a scalar is a value, whatever its identity: `f(x, 1000, 1000)` passes one int object twice, and a
            # later `f(x, 1000, 3)` must not read both from the first.
            key = ("scalar", i)
        else:
            key = views.storage_key(x)
        g = by_key.get(key)
        if g is None:
            g = by_key[key] = InputGroup([x], [[i]], [()])
            groups.append(g)
            continue
        for k, o in enumerate(g.objects):
            if o is x:
                g.leaves[k].append(i)
                break
        else:
            g.objects.append(x)
            g.leaves.append([i])
            g.synthetic = True
    for g in groups:
        if g.synthetic:
            g.chains = [o._chain for o in g.objects]
        _describe_group(g)
    return groups


def enter(trace, groups: list[InputGroup], base_values: list, leaves: list, layouts: dict | None = None) -> list:
    """The inside's flat arguments: functional tensors of `trace`, one storage per group holding
    `base_values[g]` (a value of the levels below), each object viewed through its chain. `layouts` maps a flat
    argument's index to the strides and offset the inside sees (vmap's per-example layout; default: the object's)."""
    inner = list(leaves)
    trace.arguments = {}
    for gi, (g, base) in enumerate(zip(groups, base_values, strict=True)):
        storage = FunctionalStorage(base, origin=gi, immutable=None if g.is_tensor else g.what)
        if g.is_tensor:
            _map_captured(trace.arguments, g, storage)
        for obj, chain, idxs in zip(g.objects, g.chains, g.leaves, strict=True):
            strides, offset = (obj._strides, obj._offset) if isinstance(obj, Tensor) else (None, 0)
            if layouts is not None and idxs[0] in layouts:
                strides, offset = layouts[idxs[0]]
            aval = get_aval(base) if not g.synthetic else get_aval(obj)
            t = FunctionalTensor(trace, storage, chain, aval, strides, offset)
            for i in idxs:
                inner[i] = t
    return inner


def capture(trace, groups: list[InputGroup], leaves: list, inner: list, val: Tensor, make_base) -> FunctionalTensor:
    """Make the storage of `val`, an eager tensor the function captured, an implicit input: live state, read at
    every call and written back after it like an argument. Its whole storage becomes a new input group after the
    others (its object appended to `leaves`, its functional tensor to `inner`), holding `make_base(base)` (the
    value of the levels below: a new program input when staging); the function reads `val` through it, as it
    reads every later capture of the same storage. Returns the functional tensor that stands for `val`."""
    base = _storage_base(val) if val._chain else val
    g = InputGroup([base], [[len(leaves)]], [()])
    _describe_group(g)
    storage = FunctionalStorage(make_base(base), origin=len(groups))
    groups.append(g)
    leaves.append(base)
    inner.append(FunctionalTensor(trace, storage, (), g.aval, base._strides, base._offset))
    trace.arguments[views.storage_key(base)] = (storage, ())
    return trace._argument_view(val, storage, ())


def _map_captured(arguments: dict, g: InputGroup, storage: FunctionalStorage) -> None:
    """A tensor the function captures that shares memory with group `g` is read through its storage: keyed by
    the group's storage, and by whatever an enclosing transform maps onto the group's argument."""
    x = g.objects[0]
    base_chain = () if g.synthetic else x._chain
    arguments[views.storage_key(x)] = (storage, base_chain)
    if isinstance(x, Tracer):
        for key, chain in x._trace.argument_keys(x):
            arguments.setdefault(key, (storage, chain + base_chain))


# -- what the body did -----------------------------------------------------------------------------
class OutKind(enum.Enum):
    """What an output leaf is (see `OutSpec`)."""

    INPUT = "input"
    ALIAS = "alias"
    BASE = "base"
    CONST = "const"


class Slot(enum.Enum):
    """What an output of a staged pure program is: an intermediate base (`BASE`, new values among them)
    or the new base of a written input group (`MUTATED`). `BoundaryMeta.layout` pairs one with its index."""

    BASE = "base"
    MUTATED = "mutated"


@dataclass(frozen=True)
class OutSpec:
    """What an output leaf is: `INPUT` (the object itself: group `index`, object `obj`), `ALIAS` (a view
    of input group `index`'s base through `chain`), `BASE` (a view of intermediate base number `index`
    through `chain`; `()` is the base itself, a new value), or `CONST` (`value`, returned as it is, or
    its view through `chain`: a tensor the function captured)."""

    kind: OutKind
    index: int = 0
    obj: int = 0
    chain: views.Chain = ()
    value: Any = None
    layout: tuple = (None, 0)  # the PyTorch strides and offset the output had inside (metadata)


@dataclass
class BoundaryMeta:
    """How a pure program's results become the effects and outputs of the user's call.

    `mutated`: input groups whose data the body wrote (their new bases are program outputs);
    `metadata`: (group, object, view steps) for inputs whose view changed (`t_`, `unsqueeze_`, ...);
    `outputs`: an `OutSpec` per output leaf; `n_bases`: intermediate bases the program returns;
    `layout`: the pure program's outputs in order, each `(Slot.BASE, k)` or `(Slot.MUTATED, g)`."""

    groups: list[InputGroup]
    mutated: list[int]
    metadata: list[tuple[int, int, views.Chain]]
    outputs: list[OutSpec]
    out_tree: Any
    n_bases: int
    layout: list[tuple[Slot, int]] = field(default_factory=list)
    input_names: list[str] = field(default_factory=list)
    output_names: list[str] = field(default_factory=list)

    def describe(self) -> str:
        """A readable account of the boundary: inputs, input mutations, output aliasing."""
        name = self._leaf_name
        lines = ["inputs:"]
        for gi, g in enumerate(self.groups):
            objs = [" = ".join(name(i) for i in idxs) for idxs in g.leaves]
            if g.synthetic:
                parts = ", ".join(f"{o} as {views.chain_str(c)}" for o, c in zip(objs, g.chains, strict=True))
                lines.append(f"  [{gi}] synthetic base {g.base_aval().str_short()} shared by {parts}")
            else:
                lines.append(f"  [{gi}] {objs[0]}: {g.base_aval().str_short()}")
        lines.append("input mutations:" if self.mutated or self.metadata else "input mutations: none")
        for gi in self.mutated:
            lines.append(f"  data: [{gi}] {self.group_name(gi)} is written (the program returns its new base, "
                         f"which replaces the caller's)")
        for gi, oi, steps in self.metadata:
            lines.append(f"  view: {' = '.join(name(i) for i in self.groups[gi].leaves[oi])} becomes "
                         f"itself -> {views.chain_str(steps)}")
        lines.append("outputs:")
        for k, spec in enumerate(self.outputs):
            out = self.output_names[k] if k < len(self.output_names) else f"out[{k}]"
            lines.append(f"  {out}: {self._spec_str(spec)}")
        return "\n".join(lines)

    __str__ = describe

    def _leaf_name(self, i: int) -> str:
        return self.input_names[i] if i < len(self.input_names) else f"arg[{i}]"

    def input_name(self, gi: int, oi: int = 0) -> str:
        """The argument that is object `oi` of input group `gi`, in words (`x`, `params['w']`)."""
        return self._leaf_name(self.groups[gi].leaves[oi][0])

    def group_name(self, gi: int) -> str:
        """The input group `gi` in words: its arguments' names (`x`, `a / b` for a shared storage)."""
        g = self.groups[gi]
        return " / ".join(self._leaf_name(idxs[0]) for idxs in g.leaves)

    def _spec_str(self, spec: OutSpec) -> str:
        if spec.kind is OutKind.INPUT:
            return f"is the input {self.input_name(spec.index, spec.obj)}"
        if spec.kind is OutKind.ALIAS:
            return f"a view of input [{spec.index}] {self.group_name(spec.index)}: {views.chain_str(spec.chain)}"
        if spec.kind is OutKind.BASE:
            shared = sum(1 for s in self.outputs if s.kind is OutKind.BASE and s.index == spec.index)
            if not spec.chain and shared == 1:
                return "a new value"
            return f"a view of intermediate base #{spec.index}: {views.chain_str(spec.chain)}"
        if spec.chain:
            return f"a view of a captured tensor: {views.chain_str(spec.chain)}"
        return f"a constant ({type(spec.value).__name__})"

    def _repr_pretty_(self, p, cycle):
        p.text(self.describe())


@dataclass
class BodyResult:
    """`collect`'s result: the record plus the values (of the levels below) it refers to."""

    meta: BoundaryMeta
    new_bases: list  # aligned with meta.mutated
    bases: list  # intermediate bases, aligned with OutSpec.index of kind BASE


def collect(trace, groups: list[InputGroup], inner: list, out_leaves: list, out_tree) -> BodyResult:
    """Read off what the body did to its functional inputs and what its outputs are."""
    objects: dict[int, tuple[int, int]] = {}
    storages: list[FunctionalStorage | None] = [None] * len(groups)
    for gi, g in enumerate(groups):
        for oi, idxs in enumerate(g.leaves):
            t = inner[idxs[0]]
            if isinstance(t, FunctionalTensor):
                objects[id(t)] = (gi, oi)
                storages[gi] = t._storage
    mutated = [gi for gi, s in enumerate(storages) if s is not None and s.version > 0]
    metadata = []
    for gi, g in enumerate(groups):
        for oi, idxs in enumerate(g.leaves):
            t = inner[idxs[0]]
            if isinstance(t, FunctionalTensor) and len(t._chain) > len(g.chains[oi]):
                metadata.append((gi, oi, t._chain[len(g.chains[oi]):]))
    bases, base_index, outputs = [], {}, []
    for o in out_leaves:
        if not (isinstance(o, FunctionalTensor) and o._trace is trace):
            outputs.append(OutSpec(OutKind.CONST, value=o))
        elif id(o) in objects:
            gi, oi = objects[id(o)]
            outputs.append(OutSpec(OutKind.INPUT, gi, oi))
        elif o._storage.origin is not None and storages[o._storage.origin] is o._storage:
            outputs.append(OutSpec(OutKind.ALIAS, o._storage.origin, chain=o._chain, layout=(o._strides, o._offset)))
        elif o._storage.captured:  # NOTE: a view of a captured tensor is a view of it at every call, as in eager
            outputs.append(OutSpec(OutKind.CONST, value=o._storage.base, chain=o._chain))
        else:
            k = base_index.get(id(o._storage))
            if k is None:
                k = base_index[id(o._storage)] = len(bases)
                bases.append(o._storage.base)
            outputs.append(OutSpec(OutKind.BASE, k, chain=o._chain, layout=(o._strides, o._offset)))
    meta = BoundaryMeta(groups, mutated, metadata, outputs, out_tree, len(bases))
    return BodyResult(meta, [storages[gi].base for gi in mutated], bases)


def _kind(x) -> str:
    if isinstance(x, jax.Array):
        return "a jax.Array"
    if isinstance(x, _SCALARS):
        return f"a Python {type(x).__name__}"
    return f"a {type(x).__module__.split('.')[0]}.{type(x).__name__}"


# -- replay on the caller --------------------------------------------------------------------------
_METADATA_MUTATION: dict = {}


def _metadata_mutation_of(view_prim):
    if not _METADATA_MUTATION:
        _METADATA_MUTATION.update({p.metadata_view: p for p in all_primitives() if p.is_metadata_mutation})
    return _METADATA_MUTATION[view_prim]


def write_back(target, new_base) -> None:
    """Make `new_base` the value of the caller's `target`. An eager base tensor takes the new buffer
    (no copy: with donation the executable wrote it in place); anything else gets a `copy_`."""
    if is_eager(target) and not isinstance(new_base, Tensor):
        if not target._chain:
            storage = target._storage
            storage.base, storage.owned = new_base, True
            storage.version += 1
            eager_writes[0] += 1
            return
        write(target, new_base)
        return
    bind_inplace(copy__p, target, new_base)


def group_base(g: InputGroup, leaves: list):
    """The caller-level base of group `g` in a call whose flat arguments are `leaves`."""
    x = leaves[g.leaves[0][0]]
    return _storage_base(x) if g.synthetic else x


def entry_bases(groups: list[InputGroup], leaves: list, recorded: bool = False) -> list:
    """The groups' bases as the body sees them: snapshots of the values at entry, so that what the body
    keeps of them (residuals, views) never sees the write-back into the caller's tensors. `recorded`: an eager
    base that requires grad keeps its place in imperative autograd's graph (`graph_snapshot`), so that what an eager
    transform computes from it is recorded (`grad(f)(x)` with `x.requires_grad`, as `torch.func` composes with
    `backward()`)."""
    if recorded and graph.records(leaves):
        return [graph_snapshot(group_base(g, leaves)) for g in groups]
    return [snapshot(group_base(g, leaves)) for g in groups]


def snapshot(x):
    """A new tensor with `x`'s current value and layout, sharing no storage with it (no data is copied:
    the underlying arrays are immutable)."""
    if is_eager(x):
        t = Tensor._wrap(read(x), owned=False)  # NOTE: the buffer is still `x`'s: never donated as the snapshot's
        note_snapshot(t, x)
    elif isinstance(x, FunctionalTensor):
        with below(x._trace.main):
            t = FunctionalTensor(x._trace, FunctionalStorage(current_value(x)), (), x.aval)
    else:
        return x
    t._strides, t._offset = x._strides, x._offset
    return t


def graph_snapshot(x):
    """A snapshot of eager `x` (see `snapshot`) that carries its place in the autograd graph: the same
    node when `x` views all of its storage, else a recorded copy. Anything else: its `snapshot`."""
    if not is_eager(x) or (not graph.requires_grad(x) and not graph.joins_graph(x)):
        return snapshot(x)
    if x._chain:
        t = x.clone()
    else:
        t = Tensor._wrap(x._storage.base, owned=False)
        t._storage.grad_node, t._storage.grad_index = x._storage.grad_node, x._storage.grad_index
        graph.start_recording(t, graph.NONLEAF)
    note_snapshot(t, x)
    t._strides, t._offset = x._strides, x._offset
    return t


def apply(meta: BoundaryMeta, leaves: list, new_bases: list, bases: list, wrap=None) -> Any:
    """Replay the body's effects on the caller's arguments `leaves` (any call matching the traced
    pattern) and build the outputs (a pytree). Values in `new_bases`/`bases` are caller-level values,
    or raw arrays to be wrapped by `wrap`."""
    groups = meta.groups
    for gi, value in zip(meta.mutated, new_bases, strict=True):
        write_back(group_base(groups[gi], leaves), value)
    base_objs = [wrap(b) for b in bases] if wrap is not None else bases
    outs = []
    for spec in meta.outputs:
        kind = spec.kind
        if kind is OutKind.INPUT:
            outs.append(leaves[groups[spec.index].leaves[spec.obj][0]])
        elif kind is OutKind.CONST:
            outs.append(views.apply_chain(_bind, spec.value, spec.chain) if spec.chain else spec.value)
        else:
            base = base_objs[spec.index] if kind is OutKind.BASE else group_base(groups[spec.index], leaves)
            out = views.apply_chain(_bind, base, spec.chain) if spec.chain else base
            if out is not base or kind is OutKind.BASE:  # NOTE: never re-stride the caller's own tensor
                out._strides, out._offset = spec.layout
            outs.append(out)
    # NOTE: after the outputs: an output chain is relative to the input's view at entry.
    for gi, oi, steps in meta.metadata:
        obj = leaves[groups[gi].leaves[oi][0]]
        for step in steps:
            bind_inplace(_metadata_mutation_of(step.prim), obj, **dict(step.params))
    return jax.tree_util.tree_unflatten(meta.out_tree, outs)
