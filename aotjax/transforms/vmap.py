"""`vmap`: a function of one example mapped over a batch axis of its arguments.

`vmap(f)(*args)` computes what a Python loop of `f` over the examples would compute, stacked, in one
program: the batching interpreter (`aotjax.interpreters.batching`) runs `f` once on tracers holding the
whole batch. As `grad` does, vmap functionalizes `f` at its boundary, so only pure primitives reach the
batching interpreter; an input `f` writes in place gets the new value written back (at its batch axis),
a tensor made inside `f` and written with a batched value is simply batched, and a write of a batched value
into an input passed without a batch axis is an error (its one storage cannot hold one value per example).
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable

import jax
import numpy as np

from aotjax.autograd import graph
from aotjax.core import views
from aotjax.core.interpreter import bind
from aotjax.core.source_info import where
from aotjax.interpreters.batching import BatchAxis, BatchTracer, batch_flat, batch_flat_dims, matchaxis, not_mapped
from aotjax.ops import cat
from aotjax.runtime.boundary import OutKind
from aotjax.tensor import Tensor, contiguous_strides
from aotjax.transforms.pure_call import PureCall

__all__ = ["vmap"]

_RANDOMNESS = ("error", "same", "different")


class _DefaultAxis(int):
    """The default `in_axes`/`out_axes`, 0: an int, told apart from a 0 the caller passed (which conflicts with
    PyTorch's `in_dims`/`out_dims`)."""


_AXIS0 = _DefaultAxis(0)


def vmap(f: Callable, in_axes: Any = _AXIS0, out_axes: Any = _AXIS0, axis_name: str | None = None,
         axis_size: int | None = None, *, randomness: str = "error", chunk_size: int | None = None,
         in_dims: Any = None, out_dims: Any = None) -> Callable:
    """`f` mapped over axis `in_axes` of its arguments, its outputs stacked at `out_axes`.

    `in_axes` is an int, None (the argument is the same for every example), or a pytree prefix of the
    positional arguments (a tuple with one entry per argument, each an int, None or a subtree); axes may be
    negative. `out_axes` is likewise a prefix of the output (for a single tensor output, a 1-tuple is taken too, as
    PyTorch's vmap takes it). `axis_size` gives the batch size when no argument is batched. PyTorch's keywords
    `in_dims`/`out_dims` are accepted for `in_axes`/`out_axes` (not both of a pair).

    >>> aotjax.vmap(lambda x, y: x @ y, in_axes=(0, None))(aotjax.ones(3, 2), aotjax.ones(2))
    tensor([2., 2., 2.])
    """
    in_axes = _torch_name(in_axes, in_dims, "in_axes", "in_dims")
    out_axes = _torch_name(out_axes, out_dims, "out_axes", "out_dims")
    _check_out_axes(out_axes)
    if randomness not in _RANDOMNESS:
        raise ValueError(f"vmap: randomness must be one of {', '.join(map(repr, _RANDOMNESS))}, got {randomness!r}")
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"vmap: chunk_size must be a positive int or None, got {chunk_size!r}")
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)

    @functools.wraps(f)
    def batched(*args, **kwargs):
        if kwargs:
            raise TypeError(f"vmap: keyword arguments are not batched; pass them positionally (with an in_axes "
                            f"entry, None for an unbatched one), or bind them with functools.partial{where()}")
        return _call(f, args, in_axes, out_axes, BatchAxis(axis_size, axis_name, randomness), chunk_size)

    return batched


def _torch_name(axes: Any, dims: Any, name: str, torch_name: str) -> Any:
    """JAX's `in_axes` (`out_axes`), or PyTorch's `in_dims` (`out_dims`) for it; both given is an error."""
    if dims is None:
        return axes
    if axes is not _AXIS0:
        raise TypeError(f"vmap: got both {name}={axes!r} and {torch_name}={dims!r}{where()}; {torch_name} is "
                        f"PyTorch's name for {name}: pass one of them")
    return dims


def _check_out_axes(out_axes: Any) -> None:
    """Each leaf of `out_axes` is an int (None is a pytree node with no leaves: no axis)."""
    for path, ax in jax.tree_util.tree_flatten_with_path(out_axes)[0]:
        if not isinstance(ax, (int, np.integer)) or isinstance(ax, bool):
            at = f" at {jax.tree_util.keystr(path)}" if path else ""
            raise TypeError(f"vmap: out_axes must be an int, None, or a pytree prefix of the output holding them, "
                            f"got {ax!r}{at}{where()}")


def _call(f: Callable, args: tuple, in_axes: Any, out_axes: Any, axis: BatchAxis, chunk_size: int | None):
    """`f` over the examples; `axis.size` is vmap's `axis_size` (None: the batched arguments' size)."""
    paths, leaves, axes = _flat_in_axes(args, in_axes)
    size = _batch_size(paths, leaves, axes, axis.size)
    if chunk_size is None or chunk_size >= size:
        return _call_batch(f, args, leaves, paths, axes, dataclasses.replace(axis, size=size), out_axes)[0]
    # NOTE: chunks of the examples, one after the other: each chunk's arguments are views of the caller's (so
    # writes into batched inputs reach them); the chunks' outputs are concatenated at their out axes.
    tree = jax.tree_util.tree_structure(list(args))
    chunks = []
    for start in range(0, size, chunk_size):
        n = min(chunk_size, size - start)
        part = [x if ax is None else x.narrow(ax, start, n) for x, ax in zip(leaves, axes, strict=True)]
        chunks.append(_call_batch(f, tuple(jax.tree_util.tree_unflatten(tree, part)), part, paths, axes,
                                  dataclasses.replace(axis, size=n), out_axes))
    (first, out_dims), rest = chunks[0], [c[0] for c in chunks[1:]]
    flat = [jax.tree_util.tree_leaves(c) for c in [first, *rest]]
    joined = [pieces[0] if d is None else cat(list(pieces), dim=d)
              for d, pieces in zip(out_dims, zip(*flat, strict=True), strict=True)]
    return jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(first), joined)


def _call_batch(f: Callable, args: tuple, leaves: list, paths: list[str], axes: list, axis: BatchAxis,
                out_axes: Any) -> tuple[Any, list]:
    """`f` over `axis.size` examples of `args` (flat `leaves` batched at `axes`): the output tree, and its leaves' out
    axes (non-negative, or None)."""
    # NOTE: a view passed in is made its own storage, so that its batch axis is an axis of the base the boundary
    # batches; a write into it is written back to the view below.
    bases_in = [x.clone() if isinstance(x, Tensor) and _is_view(x) else x for x in leaves]
    call = PureCall(lambda *xs: f(*xs), _unflatten(args, bases_in), {}, False, "vmap")
    call.layouts = {i: _example_layout(x, ax) for i, (x, ax) in enumerate(zip(bases_in, axes, strict=True))
                    if isinstance(x, Tensor) and ax is not None}
    group_dims = [_group_axis(call, g, paths, axes) for g in call.groups]
    call.on_enter = functools.partial(_enter, call, group_dims, paths)
    outs, dims = batch_flat_dims(functools.partial(_pure_tensors, call), call.bases, group_dims, axis)
    size = axis.size
    group_dims += [None] * (len(call.groups) - len(group_dims))  # NOTE: captured tensors the function wrote
    n_main, n_new = call.n_main, call.n_new
    _write_back(call, leaves, paths, outs[n_main:n_main + n_new], dims[n_main:n_main + n_new], group_dims, size)
    values, value_dims = outs[:n_main], dims[:n_main]
    out_tree = call.main_tree
    out_paths = _paths(out_tree)
    want = _flat_out_axes(out_axes, out_tree, out_paths)
    result = [_stack_output(v, d, w, size, p) for v, d, w, p in zip(values, value_dims, want, out_paths, strict=True)]
    for k, spec in enumerate(call.meta.outputs[:n_main]):
        if spec.kind in (OutKind.INPUT, OutKind.ALIAS) and not call.groups[spec.index].synthetic:
            result[k] = _alias_output(call, spec, leaves, group_dims, axis, want[k])
    out_dims = [None if w is None else w % r.ndim for w, r in zip(want, result, strict=True)]
    return jax.tree_util.tree_unflatten(out_tree, result), out_dims


def _enter(call: PureCall, group_dims: list, paths: list[str], trace, inner: list) -> None:
    """Configure vmap's functionalize trace: a write of a batched value into a tensor that is not batched (an input
    with in axis None, a captured tensor) is refused where it happens. Imperative autograd reaches through the
    function (`autograd.grad` inside it gives per-example gradients): a captured tensor that requires grad is
    that tensor in the recording, as is an argument that does, where each example's place in the graph is the
    argument's own (a leaf, or an argument without a batch axis)."""
    batch_main = trace.main.level - 1
    trace.links_autograd = True
    group_of = {i: gi for gi, g in enumerate(call.groups) for idxs in g.leaves for i in idxs}
    for i, (t, x) in enumerate(zip(inner, call.leaves)):
        gi = group_of.get(i)
        if gi is not None and gi < len(group_dims) and (group_dims[gi] is None or graph.leaf_of(x) is not None):
            graph.link_lifted(t, x)

    def check_write(prim, t, value):
        if not (isinstance(value, BatchTracer) and value.bdim is not not_mapped
                and value._trace.main.level == batch_main):
            return
        gi = t._storage.origin
        if t._storage.captured or (gi is not None and gi >= len(group_dims)):
            what = "a tensor captured from outside the function"
        elif gi is not None and group_dims[gi] is None:
            what = f"argument {paths[call.groups[gi].leaves[0][0]]} (in axis None)"
        else:
            return  # NOTE: a batched input, or a tensor made inside (which becomes batched)
        raise ValueError(f"vmap: {prim.name} writes a batched value into a tensor that is not batched, {what}"
                         f"{where()}; its one storage cannot hold one value per example: use the out-of-place op, or "
                         f"pass the tensor with a batch axis")

    trace.check_write = check_write


def _alias_output(call: PureCall, spec, leaves: list, group_dims: list, axis: BatchAxis, want) -> Tensor:
    """An output that is an input or a view of one, made a real view of the caller's tensor (as PyTorch's vmap
    returns it, and as every aotjax boundary does): the output's view chain replayed, batched, on the caller's
    tensor; the view ops' batching rules only view."""
    g = call.groups[spec.index]
    idx = g.leaves[0][0]
    target = leaves[idx] if idx < len(leaves) else call.leaves[idx]
    chain = () if spec.kind is OutKind.INPUT else spec.chain
    (out,) = batch_flat(lambda x: [views.apply_chain(bind, x, chain)], [target], [group_dims[spec.index]],
                        axis, [want])
    return out


def _paths(tree) -> list[str]:
    """The pytree paths (`[0]['w']`) of the leaves of `tree`, a treedef."""
    return [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(
        jax.tree_util.tree_unflatten(tree, [0] * tree.num_leaves))[0]]


def _pure_tensors(call: PureCall, *bases) -> list:
    """`call.pure`, refusing outputs that are not tensors (the batching interpreter would make them tensors)."""
    flat = call.pure(*bases)
    for value, path in zip(flat[:call.n_main], _paths(call.main_tree), strict=True):
        if not isinstance(value, Tensor):
            raise TypeError(f"vmap: output {path or '(the result)'} is a {type(value).__name__}, not a tensor"
                            f"{where()}; a vmapped function must return tensors (pytrees of them)")
    return flat


def _example_layout(x: Tensor, axis: int) -> tuple:
    """The strides (None: contiguous) and offset of one example of `x` batched at `axis`, as `stride()` reports
    them inside the function: the whole tensor's strides without the batch axis (PyTorch's vmap)."""
    full = x.stride()
    strides = full[:axis] + full[axis + 1:]
    shape = x.shape[:axis] + x.shape[axis + 1:]
    return (None if strides == contiguous_strides(shape) else strides), x._offset


def _is_view(x: Tensor) -> bool:
    return bool(getattr(x, "_chain", ())) or getattr(x, "_strides", None) is not None


def _unflatten(args: tuple, leaves: list) -> tuple:
    return tuple(jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(list(args)), leaves))


def _flat_in_axes(args: tuple, in_axes: Any) -> tuple[list[str], list, list]:
    """The flat arguments, their pytree paths (`[0]['w']`) and their batch axes (non-negative, or None)."""
    flat = jax.tree_util.tree_flatten_with_path(list(args))[0]
    paths = [jax.tree_util.keystr(p) for p, _ in flat]
    leaves = [x for _, x in flat]
    if isinstance(in_axes, int) or in_axes is None:
        per_leaf = [in_axes] * len(leaves)
    else:
        if not isinstance(in_axes, tuple) or len(in_axes) != len(args):
            raise ValueError(f"vmap: in_axes must be an int, None, or a tuple with one entry per positional "
                             f"argument ({len(args)}), got {in_axes!r}{where()}")
        per_leaf = _broadcast_prefix(list(in_axes), list(args), "in_axes", "the arguments")
    axes = [_normalized_in_axis(x, ax, p) for x, ax, p in zip(leaves, per_leaf, paths, strict=True)]
    return paths, leaves, axes


def _normalized_in_axis(x, ax, path: str):
    if ax is None:
        return None
    if not isinstance(ax, int):
        raise TypeError(f"vmap: the in axis of argument {path} must be an int or None, got {ax!r}{where()}")
    if not isinstance(x, Tensor):
        raise TypeError(f"vmap: argument {path} is a {type(x).__name__}, not a tensor, but has in axis {ax}"
                        f"{where()}; give it in axis None, or pass a tensor")
    if not -x.ndim <= ax < x.ndim:
        raise ValueError(f"vmap: in axis {ax} of argument {path} is out of range for its shape {list(x.shape)}"
                         f"{where()}")
    return ax % x.ndim


def _batch_size(paths, leaves, axes, axis_size: int | None) -> int:
    sizes = {p: x.shape[ax] for p, x, ax in zip(paths, leaves, axes) if ax is not None}
    if axis_size is not None:
        sizes = {"axis_size": axis_size, **sizes}
    if not sizes:
        raise ValueError(f"vmap: no argument is batched (every in axis is None) and no axis_size is given"
                         f"{where()}; pass axis_size=n")
    if len(set(sizes.values())) > 1:
        listed = ", ".join(f"{p}: {n}" for p, n in sizes.items())
        raise ValueError(f"vmap: the batched arguments have different sizes along their in axes ({listed})"
                         f"{where()}; every batched argument needs the same batch size")
    return next(iter(sizes.values()))


def _group_axis(call: PureCall, g, paths: list[str], axes: list) -> int | None:
    """The batch axis of an input group's base: its argument's in axis (one tensor passed twice must have one)."""
    group_axes = {axes[i] for idxs in g.leaves for i in idxs}
    if len(group_axes) > 1:
        named = ", ".join(paths[i] for idxs in g.leaves for i in idxs)
        raise NotImplementedError(f"vmap: arguments {named} are one tensor passed with different in axes{where()}; "
                                  f"pass a clone for one of them")
    return group_axes.pop()


def _write_back(call: PureCall, leaves: list, paths: list[str], new_bases: list, dims: list, group_dims: list,
                size: int) -> None:
    """Write the new values of the inputs (and captured tensors) `f` wrote in place into the caller's tensors, at
    their batch axes."""
    if call.meta.metadata:
        raise NotImplementedError(f"vmap: the function changes the shape or strides of an input in place{where()};"
                                  f" this is not supported under vmap yet")
    for gi, value, d in zip(call.meta.mutated, new_bases, dims, strict=True):
        g = call.groups[gi]
        idxs = g.leaves[0]
        captured = idxs[0] >= len(leaves)
        target = call.leaves[idxs[0]] if captured else leaves[idxs[0]]
        axis = group_dims[gi]
        if axis is None and d is not not_mapped:
            what = "a tensor captured from outside the function" if captured else f"argument {paths[idxs[0]]}"
            raise ValueError(
                f"vmap: the function writes a batched value in place into {what}, which is not batched{where()}; its "
                f"one storage cannot hold one value per example: use the out-of-place op, or pass the tensor with a "
                f"batch axis")
        if axis is not None:
            value = matchaxis(d, axis, size, value)
        target.copy_(value)


def _flat_out_axes(out_axes: Any, out_tree, out_paths: list[str]) -> list:
    if isinstance(out_axes, int) or out_axes is None:
        return [out_axes] * out_tree.num_leaves
    if isinstance(out_axes, list):
        out_axes = tuple(out_axes)
    if (jax.tree_util.treedef_is_leaf(out_tree) and out_tree.num_leaves == 1 and isinstance(out_axes, tuple)
            and len(out_axes) == 1
            and (out_axes[0] is None or isinstance(out_axes[0], int))):
        return [out_axes[0]]  # NOTE: PyTorch's vmap takes a 1-tuple for a single (non-tuple) output
    outs = jax.tree_util.tree_unflatten(out_tree, [0] * out_tree.num_leaves)
    return _broadcast_prefix(out_axes, outs, "out_axes", "the output")


class _Repeated:
    """One axis standing for every leaf of a subtree (a pytree leaf of its own)."""

    def __init__(self, axis, count: int):
        self.axes = [axis] * count


def _broadcast_prefix(prefix: Any, tree: Any, what: str, of: str) -> list:
    """One axis per leaf of `tree`, from `prefix`, a pytree prefix of it whose leaves are axes (or None)."""
    try:
        expanded = jax.tree_util.tree_map(lambda ax, sub: _Repeated(ax, len(jax.tree_util.tree_leaves(sub))),
                                          prefix, tree, is_leaf=lambda a: a is None)
    except ValueError:
        axes = jax.tree_util.tree_structure(prefix, is_leaf=lambda a: a is None)
        raise ValueError(f"vmap: {what} {prefix!r} is not a pytree prefix of {of}{where()}: {what} has the "
                         f"structure {axes}, {of} {jax.tree_util.tree_structure(tree)}; give an axis (or None) "
                         f"for each of them, or for a subtree of them") from None
    return [ax for r in jax.tree_util.tree_leaves(expanded, is_leaf=lambda a: isinstance(a, _Repeated))
            for ax in r.axes]


def _stack_output(value, d, want, size: int, path: str):
    if want is None:
        if d is not not_mapped:
            raise ValueError(f"vmap: output {path or '(the result)'} varies over the examples but its out axis is "
                             f"None{where()}; give it an axis to stack the examples at")
        return value
    ndim = value.ndim + (d is not_mapped)
    if not -ndim <= want < ndim:
        raise ValueError(f"vmap: out axis {want} of output {path or '(the result)'} is out of range for a batched "
                         f"result of {ndim} dims{where()}")
    return matchaxis(d, want % ndim, size, value)
