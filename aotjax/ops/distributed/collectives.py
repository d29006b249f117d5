"""Collectives over a named `vmap` axis or a mesh axis of an enclosing `shard_map`: `psum`, `pmean`, `pmax`, `pmin`,
`axis_index`, `all_gather`, `psum_scatter`, `ppermute` (exposed in `aotjax.lax`).

Inside `vmap(f, axis_name="i")`, `psum(x, "i")` is the sum of `x` over the examples, the same for every example (a
batch-norm's statistics over the batch, a data-parallel gradient's mean). `axis_name` may be a tuple of names of
nested vmaps, reducing over all of them. A collective is a primitive with the axis names as a param; the batching
level whose axis it names reduces over its batch axis (`collective_rules`), the others batch it as an elementwise
op, so it works at any depth of nesting, through `jit`, loops and derivatives. Inside the body of `aotjax.shard_map`, a
name of its mesh's axes makes the collective one between devices: it stays in the body's program and lowers to
`jax.lax`'s collective inside `jax.shard_map` (a vmap inside the body batches it like an elementwise op). Outside every
vmap and shard_map of that name it is an error naming the axis.

Derivatives follow JAX's convention for programs without replication checking: `psum` transposes to `psum`,
`all_gather` to `psum_scatter` and back, `ppermute` to the inverse permutation (`shard_map`'s transpose divides the
cotangent of a replicated output by the number of its copies and sums a replicated input's cotangent over them).

>>> xs = aotjax.tensor([1.0, 2.0, 3.0])
>>> aotjax.vmap(lambda x: x - aotjax.lax.pmean(x, "i"), axis_name="i")(xs)
tensor([-1.,  0.,  1.])
"""
from __future__ import annotations

import math
import threading
from contextlib import contextmanager
from typing import Any

import jax

from aotjax.core.avals import ShapedArray
from aotjax.core.errors import UnsupportedError
from aotjax.core.interpreter import Tracer, full_raise, stack_of_this_thread
from aotjax.core.primitive import Primitive, Recompute, output_size_flops
from aotjax.core.source_info import where
from aotjax.interpreters.ad_util import Zero, instantiate
from aotjax.interpreters.batching import (
    BatchTrace,
    collective_rules,
    example_index,
    moveaxis,
    not_mapped,
)
from aotjax.interpreters.jvp import defjvp_zero, deflinear, jvp_rules
from aotjax.interpreters.lowering import register_lowering
from aotjax.interpreters.transpose import deflinear_transpose
from aotjax.ops.base.data import as_tensor
from aotjax.ops.math.elementwise import div, eq, mul
from aotjax.ops.reduce.reductions import amax, amin
from aotjax.ops.reduce.reductions import sum as reduce_sum
from aotjax.ops.shape.copies import stack
from aotjax.ops.shape.views import reshape

__all__ = ["psum", "pmean", "pmax", "pmin", "axis_index", "all_gather", "psum_scatter", "ppermute", "mesh_axes"]


# -- which axis a name means ----------------------------------------------------------------------------
class _MeshAxes(threading.local):
    """The mesh axes of the `shard_map` bodies being traced in this thread, innermost last: `(level, sizes)`, the
    interpreter level the body's staging starts at and `{axis name: size}`."""

    def __init__(self):
        self.stack: list[tuple[int, dict]] = []


_mesh_axes = _MeshAxes()


@contextmanager
def mesh_axes(sizes: dict):
    """While a `shard_map` body is traced: the collectives inside read the names of `sizes` (`{name: size}`) as mesh
    axes (see `aotjax.transforms.shard_map`)."""
    _mesh_axes.stack.append((len(stack_of_this_thread()), dict(sizes)))
    try:
        yield
    finally:
        _mesh_axes.stack.pop()


def _vmap_main(name):
    for main in reversed(stack_of_this_thread()):
        if main.trace_type is BatchTrace and main.global_data.name == name:
            return main
    return None


def _mesh_entry(name):
    for level, sizes in reversed(_mesh_axes.stack):
        if name in sizes:
            return level, sizes[name]
    return None


def _resolve(names: tuple, what: str) -> tuple[list, tuple]:
    """The vmap levels (their `MainTrace`s) and the mesh axes `names` refer to, the innermost binding of each name
    winning; an error naming `what` for a name bound by neither."""
    vmaps, mesh = [], []
    for n in names:
        main, entry = _vmap_main(n), _mesh_entry(n)
        if main is not None and (entry is None or main.level >= entry[0]):
            vmaps.append(main)
        elif entry is not None:
            mesh.append(n)
        else:
            raise NameError(f"{what}: unbound axis name {n!r}: no enclosing vmap has axis_name={n!r} and no "
                            f"enclosing shard_map has a mesh axis {n!r}{where()}; pass axis_name={n!r} to the vmap "
                            f"whose examples {what} combines, or run it inside aotjax.shard_map over a mesh with "
                            f"that axis")
    return vmaps, tuple(mesh)


def _names(axis_name) -> tuple:
    return tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)


def _axis_size(names: tuple, what: str) -> int:
    vmaps, mesh = _resolve(names, what)
    return math.prod(m.global_data.size for m in vmaps) * math.prod(_mesh_entry(n)[1] for n in mesh)


def _lower_jax(name: str, fn):
    """A lowering rule calling `jax.lax`'s collective `fn`: valid inside `jax.shard_map`, where the mesh axes are
    bound; anywhere else the collective was staged outside every vmap or shard_map of its axis."""
    def lower(x, *, axis_name, **params):
        try:
            return fn(_varying(x, axis_name), axis_name, **params)
        except NameError:
            raise UnsupportedError(f"{name}: axis {axis_name!r} is not bound: a collective must run inside "
                                   f"vmap(..., axis_name={axis_name[0]!r}) or inside aotjax.shard_map over a mesh "
                                   f"with that axis") from None
    return lower


def _varying(x, names: tuple):
    """`x` made varying over every axis of `names` when it varies over some of them only (JAX's collectives with
    replication checking take a value varying over all the axes they combine, or over none)."""
    mat = getattr(jax.typeof(x), "mat", None)
    varying = getattr(mat, "varying", None)
    if varying is None:
        return x
    fixed = tuple(n for n in names if n not in varying)
    return jax.lax.pcast(x, fixed, to="varying") if fixed and len(fixed) < len(names) else x


# -- reductions ----------------------------------------------------------------------------------------
def _collective(name: str, reduce, unbatched, jax_fn):
    """A collective primitive: `reduce(x, axis)` combines the examples along a batch axis; `unbatched(x, size)` is
    its value when `x` is the same for every example; `jax_fn` is `jax.lax`'s, between devices."""
    prim = Primitive(name, recompute=Recompute.CHEAP, flops=output_size_flops)
    prim.abstract_eval = lambda x, *, axis_name: ShapedArray(x.shape, x.dtype)
    prim.print_rule = lambda params: {"axis_name": params["axis_name"]}
    register_lowering(prim, _lower_jax(name, jax_fn))

    def rule(trace, vals, dims, *, axis_name):
        (x,), (d,) = vals, dims
        own = trace.axis.name
        if own not in axis_name:  # another level's axis (or a mesh axis): batched like an elementwise op
            return [prim.bind(x, axis_name=axis_name)], [d]
        x = unbatched(x, trace.axis_size) if d is not_mapped else reduce(x, d)
        rest = tuple(n for n in axis_name if n != own)
        return [prim.bind(x, axis_name=rest) if rest else x], [not_mapped]

    collective_rules[prim] = rule
    return prim


psum_p = _collective("psum", lambda x, d: reduce_sum(x, d), lambda x, size: mul(x, size), jax.lax.psum)
pmax_p = _collective("pmax", lambda x, d: amax(x, d), lambda x, size: x, jax.lax.pmax)
pmin_p = _collective("pmin", lambda x, d: amin(x, d), lambda x, size: x, jax.lax.pmin)

deflinear(psum_p)
# NOTE: every example's result is the sum of all examples' x, so each x gets the sum of all results' cotangents.
deflinear_transpose(psum_p, lambda ct, x, *, axis_name: psum_p.bind(ct, axis_name=axis_name))


def _extremum_jvp(prim: Primitive):
    """The tangent of `pmax`/`pmin`: the mean of the tangents of the examples that attain the extremum."""
    def rule(primals, tangents, *, axis_name):
        (x,), (t,) = primals, tangents
        out = prim.bind(x, axis_name=axis_name)
        if isinstance(t, Zero):
            return [out], [t]
        hit = eq(x, out).to(x.dtype)
        total = psum_p.bind(mul(instantiate(t), hit), axis_name=axis_name)
        return [out], [div(total, psum_p.bind(hit, axis_name=axis_name))]
    jvp_rules[prim] = rule


_extremum_jvp(pmax_p)
_extremum_jvp(pmin_p)


def _bind(prim: Primitive, what: str, x: Any, axis_name, **params) -> Any:
    """`prim` on each leaf of `x`: first over the vmap axes among `axis_name` (a value from below the vmap is the
    same for every example), then over the mesh axes."""
    vmaps, mesh = _resolve(_names(axis_name), what)

    def one(leaf):
        leaf = as_tensor(leaf)
        if vmaps:
            top = max(vmaps, key=lambda m: m.level)
            if not (isinstance(leaf, Tracer) and leaf._trace.main.level >= top.level):
                leaf = full_raise(top.trace, leaf)
            leaf = prim.bind(leaf, axis_name=tuple(m.global_data.name for m in vmaps), **params)
        return prim.bind(leaf, axis_name=mesh, **params) if mesh else leaf

    return jax.tree_util.tree_map(one, x)


def psum(x: Any, axis_name) -> Any:
    """The sum of `x` (a tensor or a pytree of them) over the examples of the vmap(s) or the devices of the mesh
    axes named `axis_name` (a name or a tuple of names).

    >>> aotjax.vmap(lambda x: aotjax.lax.psum(x, "i"), axis_name="i")(aotjax.tensor([1.0, 2.0]))
    tensor([3., 3.])
    """
    return _bind(psum_p, "psum", x, axis_name)


def pmean(x: Any, axis_name) -> Any:
    """The mean of `x` over the examples of the vmap(s) or the devices of the mesh axes named `axis_name`.

    >>> aotjax.vmap(lambda x: aotjax.lax.pmean(x, "i"), axis_name="i")(aotjax.tensor([1.0, 3.0]))
    tensor([2., 2.])
    """
    size = _axis_size(_names(axis_name), "pmean")
    return jax.tree_util.tree_map(lambda s: div(s, size), psum(x, axis_name))


def pmax(x: Any, axis_name) -> Any:
    """The largest `x` over the examples or devices named `axis_name` (elementwise).

    >>> aotjax.vmap(lambda x: aotjax.lax.pmax(x, "i"), axis_name="i")(aotjax.tensor([1.0, 2.0]))
    tensor([2., 2.])
    """
    return _bind(pmax_p, "pmax", x, axis_name)


def pmin(x: Any, axis_name) -> Any:
    """The smallest `x` over the examples or devices named `axis_name` (elementwise).

    >>> aotjax.vmap(lambda x: aotjax.lax.pmin(x, "i"), axis_name="i")(aotjax.tensor([1.0, 2.0]))
    tensor([1., 1.])
    """
    return _bind(pmin_p, "pmin", x, axis_name)


# -- axis_index ------------------------------------------------------------------------------------------
axis_index_p = Primitive("axis_index", recompute=Recompute.CHEAP, flops=output_size_flops)
axis_index_p.abstract_eval = lambda *, axis_name: ShapedArray((), "int32")
register_lowering(axis_index_p, lambda *, axis_name: jax.lax.axis_index(axis_name))
defjvp_zero(axis_index_p)


def axis_index(axis_name) -> Any:
    """The index of the current example along the vmap named `axis_name`, or of the current device along the mesh
    axis `axis_name` of an enclosing `shard_map` (an int32 0-d tensor).

    >>> aotjax.vmap(lambda x: x * aotjax.lax.axis_index("i"), axis_name="i")(aotjax.tensor([5.0, 5.0]))
    tensor([0., 5.])
    """
    vmaps, mesh = _resolve((axis_name,), "axis_index")
    if vmaps:
        return example_index(vmaps[0])
    return axis_index_p.bind(axis_name=mesh[0])


# -- all_gather, psum_scatter, ppermute ------------------------------------------------------------------
def _one_kind(names: tuple, what: str) -> int:
    """The size of the axes `names` of a gather, scatter or permutation: all vmap axes or all mesh axes."""
    vmaps, mesh = _resolve(names, what)
    if vmaps and mesh:
        raise UnsupportedError(f"{what} over vmap axes and mesh axes at once ({names!r}){where()}: call it once per "
                               f"kind of axis")
    return _axis_size(names, what)


def _single_vmap(name: str, axis_name: tuple) -> None:
    if len(axis_name) != 1:
        raise UnsupportedError(f"{name} over a vmap axis takes one axis name, got {axis_name!r}{where()}; nest "
                               f"{name} calls, one per axis")


def _gathered_shape(shape, axis: int, size: int, tiled: bool) -> tuple:
    if tiled:
        return (*shape[:axis], shape[axis] * size, *shape[axis + 1:])
    return (*shape[:axis], size, *shape[axis:])


all_gather_p = Primitive("all_gather", recompute=Recompute.CHEAP, flops=output_size_flops, linear=True)
all_gather_p.abstract_eval = lambda x, *, axis_name, axis, tiled, axis_size: ShapedArray(
    _gathered_shape(x.shape, axis, axis_size, tiled), x.dtype)
register_lowering(all_gather_p, _lower_jax("all_gather", lambda x, names, *, axis, tiled, axis_size: jax.lax.all_gather(
    x, names, axis=axis, tiled=tiled)))


def _scattered_shape(shape, dim: int, size: int, tiled: bool) -> tuple:
    if tiled:
        if shape[dim] % size:
            raise ValueError(f"psum_scatter: dimension {dim} of size {shape[dim]} does not split into {size} equal "
                             f"blocks{where()}")
        return (*shape[:dim], shape[dim] // size, *shape[dim + 1:])
    if shape[dim] != size:
        raise ValueError(f"psum_scatter: without tiled=True, dimension {dim} must have the axis size {size}, got "
                         f"{shape[dim]}{where()}")
    return (*shape[:dim], *shape[dim + 1:])


psum_scatter_p = Primitive("psum_scatter", recompute=Recompute.CHEAP, flops=output_size_flops, linear=True)
psum_scatter_p.abstract_eval = lambda x, *, axis_name, scatter_dimension, tiled, axis_size: ShapedArray(
    _scattered_shape(x.shape, scatter_dimension, axis_size, tiled), x.dtype)
register_lowering(psum_scatter_p, _lower_jax(
    "psum_scatter", lambda x, names, *, scatter_dimension, tiled, axis_size: jax.lax.psum_scatter(
        x, names, scatter_dimension=scatter_dimension, tiled=tiled)))

deflinear(all_gather_p)
deflinear(psum_scatter_p)
# NOTE: a gathered value feeds every device, so each block's cotangent is the sum of all devices' cotangents of its
# slice of the gathered value: a psum_scatter; a scattered sum's cotangent comes from every device's slice: a gather.
deflinear_transpose(all_gather_p, lambda ct, x, *, axis_name, axis, tiled, axis_size: psum_scatter_p.bind(
    ct, axis_name=axis_name, scatter_dimension=axis, tiled=tiled, axis_size=axis_size))
deflinear_transpose(psum_scatter_p, lambda ct, x, *, axis_name, scatter_dimension, tiled, axis_size: all_gather_p.bind(
    ct, axis_name=axis_name, axis=scatter_dimension, tiled=tiled, axis_size=axis_size))


def _all_gather_rule(trace, vals, dims, *, axis_name, axis, tiled, axis_size):
    (x,), (d,) = vals, dims
    own = trace.axis.name
    if own not in axis_name:  # a mesh axis (or another vmap's): per example, the axis shifted past the batch axis
        if d is not_mapped:
            return [all_gather_p.bind(x, axis_name=axis_name, axis=axis, tiled=tiled, axis_size=axis_size)], [d]
        x = moveaxis(x, d, 0)
        return [all_gather_p.bind(x, axis_name=axis_name, axis=axis + 1, tiled=tiled, axis_size=axis_size)], [0]
    _single_vmap("all_gather", axis_name)
    n = trace.axis_size
    x = stack([x] * n, axis) if d is not_mapped else moveaxis(x, d, axis)  # the examples, stacked at `axis`
    if tiled:
        shape = tuple(x.shape)
        x = reshape(x, (*shape[:axis], shape[axis] * shape[axis + 1], *shape[axis + 2:]))
    return [x], [not_mapped]


def _psum_scatter_rule(trace, vals, dims, *, axis_name, scatter_dimension, tiled, axis_size):
    (x,), (d,) = vals, dims
    own, sd = trace.axis.name, scatter_dimension
    if own not in axis_name:
        params = dict(axis_name=axis_name, tiled=tiled, axis_size=axis_size)
        if d is not_mapped:
            return [psum_scatter_p.bind(x, scatter_dimension=sd, **params)], [d]
        x = moveaxis(x, d, 0)
        return [psum_scatter_p.bind(x, scatter_dimension=sd + 1, **params)], [0]
    _single_vmap("psum_scatter", axis_name)
    n = trace.axis_size
    total = mul(x, n) if d is not_mapped else reduce_sum(x, d)  # the sum over the examples, then example e's slice
    if tiled:
        shape = tuple(total.shape)
        total = reshape(total, (*shape[:sd], n, shape[sd] // n, *shape[sd + 1:]))
    return [total], [sd]


collective_rules[all_gather_p] = _all_gather_rule
collective_rules[psum_scatter_p] = _psum_scatter_rule


def all_gather(x: Any, axis_name, *, axis: int = 0, tiled: bool = False) -> Any:
    """Every example's (or device's) `x` along the vmap or mesh axis `axis_name`, stacked at a new dim `axis` (joined
    along dim `axis` with `tiled=True`): the same value everywhere, as `jax.lax.all_gather`.

    >>> aotjax.vmap(lambda x: aotjax.lax.all_gather(x, "i"), axis_name="i")(aotjax.tensor([1.0, 2.0]))
    tensor([[1., 2.],
            [1., 2.]])
    """
    names = _names(axis_name)
    size = _one_kind(names, "all_gather")

    def one(leaf):
        leaf = as_tensor(leaf)
        if tiled and leaf.ndim == 0:
            raise ValueError(f"all_gather with tiled=True joins the values along an existing dim; a 0-d tensor has none"
                             f"{where()}: use tiled=False to stack them")
        ax = axis % (leaf.ndim + (0 if tiled else 1))
        return _bind(all_gather_p, "all_gather", leaf, names, axis=ax, tiled=tiled, axis_size=size)

    return jax.tree_util.tree_map(one, x)


def psum_scatter(x: Any, axis_name, *, scatter_dimension: int = 0, tiled: bool = False) -> Any:
    """The sum of `x` over the examples or devices of the axis `axis_name`, of which each gets only its own slice of dim
    `scatter_dimension` (with `tiled=False` the dim's size is the axis size and it is removed; with `tiled=True` it
    is split into equal blocks), as `jax.lax.psum_scatter`.

    >>> xs = aotjax.tensor([[1.0, 2.0], [10.0, 20.0]])
    >>> aotjax.vmap(lambda x: aotjax.lax.psum_scatter(x, "i"), axis_name="i")(xs)
    tensor([11., 22.])
    """
    names = _names(axis_name)
    size = _one_kind(names, "psum_scatter")
    return jax.tree_util.tree_map(
        lambda leaf: _bind(psum_scatter_p, "psum_scatter", as_tensor(leaf), names,
                           scatter_dimension=scatter_dimension % max(as_tensor(leaf).ndim, 1), tiled=tiled,
                           axis_size=size), x)


ppermute_p = Primitive("ppermute", recompute=Recompute.CHEAP, flops=output_size_flops, linear=True)
ppermute_p.abstract_eval = lambda x, *, axis_name, perm: ShapedArray(x.shape, x.dtype)
register_lowering(ppermute_p, _lower_jax("ppermute", lambda x, names, *, perm: jax.lax.ppermute(x, names, perm)))
deflinear(ppermute_p)
# NOTE: what device `src` sent to `dst`, `dst` sends back to `src`; a device nothing was sent to had zeros.
deflinear_transpose(ppermute_p, lambda ct, x, *, axis_name, perm: ppermute_p.bind(
    ct, axis_name=axis_name, perm=tuple((dst, src) for src, dst in perm)))


def _ppermute_rule(trace, vals, dims, *, axis_name, perm):
    (x,), (d,) = vals, dims
    own = trace.axis.name
    if own not in axis_name:
        return [ppermute_p.bind(x, axis_name=axis_name, perm=perm)], [d]
    _single_vmap("ppermute", axis_name)
    n = trace.axis_size
    if d is not_mapped:
        examples = [x] * n
    else:
        x = moveaxis(x, d, 0)
        examples = [x[i] for i in range(n)]
    sent = {dst: src for src, dst in perm}
    zero = mul(examples[0], 0)
    return [stack([examples[sent[i]] if i in sent else zero for i in range(n)])], [0]


collective_rules[ppermute_p] = _ppermute_rule


def ppermute(x: Any, axis_name, perm) -> Any:
    """`x` sent along the axis `axis_name` by `perm`, pairs `(source, destination)` of indices along it: each
    destination gets its source's `x`, an index no pair sends to gets zeros (`jax.lax.ppermute`).

    >>> shift = [(0, 1), (1, 2), (2, 0)]
    >>> aotjax.vmap(lambda x: aotjax.lax.ppermute(x, "i", shift), axis_name="i")(aotjax.tensor([1.0, 2.0, 3.0]))
    tensor([3., 1., 2.])
    """
    perm = tuple((int(s), int(t)) for s, t in perm)
    names = _names(axis_name)
    size = _one_kind(names, "ppermute")
    srcs, dsts = [s for s, _ in perm], [t for _, t in perm]
    if len(set(srcs)) != len(srcs) or len(set(dsts)) != len(dsts) or not all(0 <= i < size for i in srcs + dsts):
        raise ValueError(f"ppermute: perm must be pairs (source, destination) of distinct indices in [0, {size}) "
                         f"along {axis_name!r}, each index at most once as a source and once as a destination, got "
                         f"{list(perm)}{where()}")
    return _bind(ppermute_p, "ppermute", x, names, perm=perm)
