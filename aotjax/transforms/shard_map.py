"""`shard_map`: a function written for one device's block of its arguments, run on every device of a mesh, as JAX's
`jax.shard_map` (same signature and meaning), on aotjax tensors.

The function is staged (functionalized, so it may use views and in-place ops) with each argument's block shape into
one `shard_map` equation (`aotjax.ops.distributed.shard_map`), which every transform handles: `jit`, `grad`/`vjp`,
`jvp`, `aot`, `vmap`, `checkpoint`. Eagerly it runs compiled. Inside, the collectives of `aotjax.lax` (`psum`,
`pmean`, `pmax`, `pmin`, `all_gather`, `psum_scatter`, `ppermute`, `axis_index`) take the mesh's axis names.

Eager semantics hold at the boundary: an argument the body writes in place is written back, each device's block into
its place in the global tensor (the program returns the written blocks, split by the argument's in spec), and a
tensor the body reads from outside (a closure, a module's buffer) is an implicit input replicated on every device; a
write into such a tensor must give it the same value on every device (a `psum` of the devices' parts, say), else
JAX's replication check (`check_vma`) refuses the program. Arguments that share memory (two views of one tensor) are
refused: a device's block of a view is not a view of its block of the base.
"""
from __future__ import annotations

import functools
from operator import attrgetter
from typing import Any, Callable

import jax
from jax.sharding import Mesh, PartitionSpec

from aotjax.core.errors import UnsupportedError
from aotjax.core.source_info import where
from aotjax.ops.base.data import as_tensor
from aotjax.ops.distributed.collectives import mesh_axes
from aotjax.ops.distributed.shard_map import block_aval, shard_map_p, spec_axes
from aotjax.ops.shape.clone import clone
from aotjax.runtime import boundary
from aotjax.runtime.boundary import Slot
from aotjax.tensor import Tensor
from aotjax.transforms.argnums import fun_name
from aotjax.transforms.checkpoint import _closure_convert
from aotjax.transforms.functionalize import stage_functionalized
from aotjax.transforms.passes import run_pass

__all__ = ["shard_map"]

_REPLICATED = PartitionSpec()


def shard_map(f: Callable | None = None, /, *, mesh: Mesh, in_specs: Any, out_specs: Any, check_vma: bool = True,
              check_rep: bool | None = None, axis_names=None) -> Callable:
    """`f` run on every device of `mesh`, each seeing its block of the arguments: `in_specs` (a `PartitionSpec` per
    argument, or a pytree prefix of the arguments) says which mesh axes split which dims, `out_specs` (a prefix of the
    outputs) how the devices' results make the global outputs (an axis a spec leaves out means the value is the same
    on every device of it). `check_vma` (`check_rep`, its older name) is JAX's check that such outputs really are
    the same. Usable as a decorator with only the keywords.

    >>> import jax, numpy as np
    >>> from jax.sharding import Mesh, PartitionSpec as P
    >>> mesh = Mesh(np.array(jax.devices()[:1]), ("i",))
    >>> total = aotjax.shard_map(lambda x: aotjax.lax.psum(x.sum(0), "i"), mesh=mesh, in_specs=P("i"), out_specs=P())
    >>> total(aotjax.tensor([[1.0, 2.0], [3.0, 4.0]]))
    tensor([4., 6.])
    """
    if f is None:
        return functools.partial(shard_map, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=check_vma,
                                 check_rep=check_rep, axis_names=axis_names)
    if check_rep is not None:
        check_vma = check_rep
    if not isinstance(mesh, Mesh):
        raise TypeError(f"shard_map: mesh must be a jax.sharding.Mesh (devices and axis names), got "
                        f"{type(mesh).__name__}")
    if axis_names is not None and set(axis_names) != set(mesh.axis_names):
        raise UnsupportedError(f"shard_map: axis_names={set(axis_names)} names only some of the mesh axes "
                               f"{mesh.axis_names}; aotjax.shard_map maps over every mesh axis: leave axis_names "
                               f"out, or make a mesh of those axes alone")

    @functools.wraps(f)
    def wrapped(*args, **kwargs):
        if kwargs:
            raise TypeError(f"shard_map: {getattr(f, '__name__', 'the function')} was called with keyword arguments "
                            f"{sorted(kwargs)}; a shard_map function takes positional arguments only (as JAX's)")
        return _call(f, mesh, in_specs, out_specs, bool(check_vma), args)

    return wrapped


def _is_spec(s) -> bool:
    return s is None or isinstance(s, PartitionSpec)


class _Repeated:
    """One spec standing for every leaf of a subtree (a pytree leaf of its own: a list would be a pytree node)."""

    def __init__(self, specs: list):
        self.specs = specs


def _flat_specs(specs, tree, what: str, mesh: Mesh) -> list[PartitionSpec]:
    """One `PartitionSpec` per leaf of `tree`, from `specs` (a spec, or a pytree prefix of `tree`)."""
    if _is_spec(specs):
        flat = [specs] * len(jax.tree_util.tree_leaves(tree))
    else:
        try:
            per = jax.tree_util.tree_map(lambda s, sub: _Repeated([s] * len(jax.tree_util.tree_leaves(sub))), specs,
                                         tree, is_leaf=_is_spec)
        except (ValueError, TypeError):
            of = "arguments" if what == "in_specs" else "outputs"
            raise ValueError(f"shard_map: {what} must be a PartitionSpec or a pytree prefix of the {of} with a "
                             f"PartitionSpec at each leaf; {what} has the structure "
                             f"{jax.tree_util.tree_structure(specs, is_leaf=_is_spec)}, the {of} "
                             f"{jax.tree_util.tree_structure(tree)}{where()}") from None
        flat = [s for group in jax.tree_util.tree_leaves(per, is_leaf=lambda x: isinstance(x, _Repeated))
                for s in group.specs]
    flat = [_REPLICATED if s is None else s for s in flat]
    for s in flat:
        if not isinstance(s, PartitionSpec):
            raise TypeError(f"shard_map: {what} holds {s!r}; each leaf must be a jax.sharding.PartitionSpec")
        seen = []
        for entry in s:
            for a in spec_axes(entry):
                if a not in mesh.axis_names:
                    raise ValueError(f"shard_map: {what} names the axis {a!r} in {s}, but the mesh has the axes "
                                     f"{mesh.axis_names}")
                if a in seen:
                    raise ValueError(f"shard_map: {what} names the mesh axis {a!r} twice in {s}; an axis splits at "
                                     f"most one dim")
                seen.append(a)
    return flat


def _entries(tree) -> int | None:
    """How many entries the pytree structure `tree` has if it is a tuple or list, else None."""
    if jax.tree_util.treedef_is_leaf(tree):
        return None
    is_sequence = type(jax.tree_util.tree_unflatten(tree, [0] * tree.num_leaves)) in (tuple, list)
    return len(tree.children()) if is_sequence else None


def _describe_tree(tree) -> str:
    """`a tuple of 2 outputs`, `one output`: what a function returned, by its pytree structure."""
    if jax.tree_util.treedef_is_leaf(tree):
        return "one output" if tree.num_leaves == 1 else "no output"
    kind = type(jax.tree_util.tree_unflatten(tree, [0] * tree.num_leaves)).__name__
    return f"a {kind} of {len(tree.children())} ({tree})"


def _stand_in(x: Tensor, spec: PartitionSpec, mesh: Mesh, name: str) -> Tensor:
    """A tensor of `x`'s block shape for tracing the body (its data is never read: no memory is taken)."""
    aval = block_aval(x.aval, spec, mesh, f"argument {name}")
    t = Tensor._wrap(jax.ShapeDtypeStruct(aval.shape, aval.dtype))
    t._aval = aval
    return t


def _call(f: Callable, mesh: Mesh, in_specs, out_specs, check_vma: bool, args: tuple):
    leaves, in_tree = jax.tree_util.tree_flatten(args)
    leaves = [x if isinstance(x, Tensor) else as_tensor(x) for x in leaves]
    if isinstance(in_specs, list):
        in_specs = tuple(in_specs)
    if isinstance(in_specs, tuple) and not _is_spec(in_specs) and len(in_specs) != len(args):
        raise ValueError(f"shard_map: in_specs must be a PartitionSpec or a pytree prefix of the arguments: "
                         f"{fun_name(f)} is called with {len(args)} argument{'' if len(args) == 1 else 's'} but "
                         f"in_specs has {len(in_specs)} entr{'y' if len(in_specs) == 1 else 'ies'} {in_specs}"
                         f"{where()}; give one PartitionSpec (or a pytree prefix of the argument) per argument, or "
                         f"one PartitionSpec for all of them")
    specs = _flat_specs(in_specs, args, "in_specs", mesh)
    names = [f"args{jax.tree_util.keystr(p)}" for p, _ in jax.tree_util.tree_flatten_with_path(args)[0]]
    stand_ins: dict[int, tuple[Tensor, PartitionSpec]] = {}
    inner = []
    for x, spec, name in zip(leaves, specs, names, strict=True):
        seen = stand_ins.get(id(x))
        if seen is None:
            seen = stand_ins[id(x)] = (_stand_in(x, spec, mesh, name), spec)
        elif seen[1] != spec:
            raise ValueError(f"shard_map: the same tensor is passed twice with the specs {seen[1]} and {spec} "
                             f"({name}); pass it once, or pass a copy")
        inner.append(seen[0])

    def body(*block_args):
        out = f(*block_args)
        # NOTE: every output a new value of the body: a device's result never aliases a global tensor.
        return jax.tree_util.tree_map(lambda o: clone(as_tensor(o)), out)

    with mesh_axes(dict(mesh.shape)):
        staged = run_pass("shard_map: functionalize", stage_functionalized, body,
                          jax.tree_util.tree_unflatten(in_tree, inner), {}, (), "shard_map", show=attrgetter("jaxpr"))
    meta = staged.meta
    n_explicit = len(leaves)
    real_groups = boundary.group_inputs(leaves, scalars=True)
    explicit_groups = [g for g in meta.groups if g.leaves[0][0] < n_explicit]
    if [g.leaves for g in real_groups] != [g.leaves for g in explicit_groups]:
        shared = next(g for g in real_groups if len(g.leaves) > 1)
        raise UnsupportedError(f"shard_map: the arguments {', '.join(names[i[0]] for i in shared.leaves)} share "
                               f"memory (views of one tensor); each device's block of a view is not a view of its "
                               f"block of the base. Pass copies (x.clone()), or one tensor")
    if meta.metadata:
        which = meta.input_name(*meta.metadata[0][:2])
        raise UnsupportedError(f"shard_map: the body changes the view of its argument {which} in place (t_, "
                               f"unsqueeze_, ...), which a device's block cannot do to the global tensor; use the "
                               f"out-of-place op and return the result")
    all_leaves = [*leaves, *staged.implicit]
    group_specs = [specs[g.leaves[0][0]] if g.leaves[0][0] < n_explicit else _REPLICATED for g in meta.groups]
    consts, jaxpr = _closure_convert(staged.jaxpr)
    if isinstance(out_specs, (tuple, list)) and not _is_spec(out_specs) and _entries(meta.out_tree) != len(out_specs):
        raise ValueError(f"shard_map: out_specs must be a PartitionSpec or a pytree prefix of the outputs: it has "
                         f"{len(out_specs)} entr{'y' if len(out_specs) == 1 else 'ies'} {out_specs}, but {fun_name(f)} "
                         f"returns {_describe_tree(meta.out_tree)}{where()}; give one PartitionSpec per output (a "
                         f"pytree prefix of the outputs), or one PartitionSpec for all")
    flat_out = _flat_specs(out_specs, jax.tree_util.tree_unflatten(meta.out_tree, list(range(len(meta.outputs)))),
                           "out_specs", mesh)
    base_spec = {spec.index: s for spec, s in zip(meta.outputs, flat_out, strict=True)}
    out_spec_list = tuple(base_spec[k] if slot is Slot.BASE else group_specs[k] for slot, k in meta.layout)
    for (slot, k), s, a in zip(meta.layout, out_spec_list, jaxpr.out_avals, strict=True):
        if len(s) > len(a.shape):
            what = meta.output_names[k] if slot is Slot.BASE else f"the written argument {meta.group_name(k)}"
            raise ValueError(f"shard_map: the out spec {s} of {what} ({a.str_short()} on each device) "
                             f"names more dims than it has")
    bases = [boundary.group_base(g, all_leaves) for g in meta.groups]
    outs = shard_map_p.bind(*consts, *bases, jaxpr=jaxpr, mesh=mesh,
                            in_specs=(*[_REPLICATED] * len(consts), *group_specs), out_specs=out_spec_list,
                            check_vma=check_vma)
    by_kind = dict(zip(meta.layout, outs, strict=True))
    return boundary.apply(meta, all_leaves, [by_kind[(Slot.MUTATED, g)] for g in meta.mutated],
                          [by_kind[(Slot.BASE, k)] for k in range(meta.n_bases)])
