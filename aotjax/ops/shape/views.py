"""View primitives: outputs that alias their operand. Each carries its lowering (reading the view),
its inverse (writing through it) and the strides PyTorch would give it.

The strides are metadata only (XLA has no strides), but they decide, exactly as in PyTorch, whether
`reshape`/`flatten`/`contiguous` return a view or a copy and whether `view` is allowed: see
`compute_view_strides`, PyTorch's algorithm for viewing a strided tensor with a new shape.
"""
from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jax import lax

from aotjax.autograd.graph import register_detaching
from aotjax.core.avals import get_aval
from aotjax.core.errors import AliasingError, ShapeError, UnsupportedError
from aotjax.core.interpreter import Tracer, register_no_grad
from aotjax.core.primitive import Kind, Primitive, Recompute, abstract_eval, output_size_flops
from aotjax.core.source_info import where
from aotjax.dtypes import contiguous_format
from aotjax.interpreters import hooks
from aotjax.interpreters.ad_util import Zero, instantiate, unbroadcast
from aotjax.interpreters.batching import batching_rules, bdim_at_front, not_mapped, shift_axis
from aotjax.interpreters.batching import moveaxis as move_batch_axis
from aotjax.interpreters.jvp import defjvp_zero, deflinear, jvp_rules
from aotjax.interpreters.lowering import register_lowering
from aotjax.interpreters.transpose import deflinear_transpose, defview_transpose
from aotjax.ops.base.casts import convert
from aotjax.ops.base.combinators import elementwise, standard_primitive
from aotjax.ops.base.data import as_tensor
from aotjax.ops.base.frontend import bind_inplace, canonical_dim, canonical_dims, normalize_shape
from aotjax.ops.base.layout import format_name, is_contiguous_in
from aotjax.ops.base.promotion import category
from aotjax.ops.shape.clone import clone
from aotjax.tensor import contiguous_strides, method

__all__ = ["select", "permute", "transpose", "t", "t_", "unbind", "view", "view_as", "reshape", "reshape_as",
           "flatten", "contiguous", "squeeze", "unsqueeze", "expand", "expand_as", "broadcast_to", "narrow",
           "diagonal", "split", "chunk", "movedim", "moveaxis", "swapaxes", "swapdims", "detach", "alias",
           "transpose_", "squeeze_", "unsqueeze_", "as_strided"]


def _view_primitive(name: str, shape_rule, lower) -> Primitive:
    return standard_primitive(name, shape_rule, lambda x, **params: x.dtype, lower, kind=Kind.VIEW)


def _same(b, y, **params):
    return b.shape


def _base_dtype(b, y, **params):
    return b.dtype


def _scatter_transpose(view_prim: Primitive, scatter_prim: Primitive) -> None:
    """`scatter(base, y)` writes `y` into the view `view_prim` of `base`, so it is linear in both: the
    base's cotangent is the output's with that view zeroed, `y`'s is that view of it."""
    def base_ct(ct, b, y, **params):
        (slot,) = abstract_eval(view_prim, [get_aval(ct)], params)
        return scatter_prim.bind(ct, instantiate(Zero(slot)), **params)

    def y_ct(ct, b, y, **params):
        return convert(view_prim.bind(ct, **params), y.dtype)

    deflinear_transpose(scatter_prim, base_ct, y_ct)


# -- batching helpers (vmap) -----------------------------------------------------------
# NOTE: a view acting on some axes of an example acts on those axes shifted past the batch axis, which stays where it
# is (moved left by the axes a view drops before it); views that rebuild the whole shape take the batch axis first.
def _identity_batch(prim):
    def rule(axis_size, vals, dims, **params):
        return [prim.bind(vals[0], **params)], [dims[0]]
    return rule


def _scatter_batch(prim):
    def rule(axis_size, vals, bdims, *, dim, **params):
        """The write of each example's `y` into its base: both batched at axis 0 (broadcast there if unbatched), the
        view's dim shifted past it."""
        (b, y), (db, dy) = vals, bdims
        b, y = bdim_at_front(b, db, axis_size), bdim_at_front(y, dy, axis_size)
        return [prim.bind(b, y, dim=dim + 1, **params)], [0]
    return rule


# -- select ------------------------------------------------------------------------------------
select_p = standard_primitive(
    "select", lambda x, *, dim, index: x.shape[:dim] + x.shape[dim + 1:], lambda x, *, dim, index: x.dtype,
    lambda x, *, dim, index: lax.index_in_dim(x, index, dim, keepdims=False), kind=Kind.VIEW)
select_scatter_p = standard_primitive(
    "select_scatter", lambda b, y, *, dim, index: b.shape, lambda b, y, *, dim, index: b.dtype,
    lambda b, y, *, dim, index: lax.dynamic_update_index_in_dim(b, y.astype(b.dtype), index, dim),
    recompute=Recompute.CHEAP, flops=output_size_flops)
select_p.view_inverse = lambda apply, base, y, *, dim, index: apply(select_scatter_p, base, y, dim=dim, index=index)
select_p.view_strides = lambda shape, strides, offset, *, dim, index: (
    strides[:dim] + strides[dim + 1:], offset + index * strides[dim])
deflinear(select_p)
deflinear(select_scatter_p)
defview_transpose(select_p)
_scatter_transpose(select_p, select_scatter_p)


def select(x, dim: int, index: int):
    """The slice of `x` at `index` along `dim`, without that dim (a view).

    >>> aotjax.tensor([[1, 2], [3, 4]]).select(1, -1)
    tensor([2, 4])
    """
    dim = canonical_dim(dim, x.ndim, "select")
    size = x.shape[dim]
    if isinstance(index, Tracer):
        return gather_at("select", x, dim, index, 1).squeeze(dim)
    index = int(index)
    if not -size <= index < size:
        raise IndexError(f"select: index {index} is out of range for dimension {dim} of size {size}{where()}")
    return select_p.bind(x, dim=dim, index=index % size)


# NOTE: a view acting on some axes of an example acts on those axes shifted past the batch axis, which stays where it
# is (moved left by the axes a view drops before it); views that rebuild the whole shape take the batch axis first.
def _batch_select(axis_size, vals, dims, *, dim, index):
    (x,), (d,) = vals, dims
    return [select_p.bind(x, dim=shift_axis(dim, d), index=index)], [d if dim >= d else d - 1]


batching_rules[select_p] = _batch_select


batching_rules[select_scatter_p] = _scatter_batch(select_scatter_p)


# -- slice -------------------------------------------------------------------------------------
def _slice_len(start: int, stop: int, step: int) -> int:
    return max(0, -(-(stop - start) // step))


def _slice_shape(x, *, dim, start, stop, step):
    return x.shape[:dim] + (_slice_len(start, stop, step),) + x.shape[dim + 1:]


def _slice_scatter_lower(b, y, *, dim, start, stop, step):
    y = y.astype(b.dtype)
    if step == 1:  # NOTE: a contiguous write is a dynamic_update_slice, in place once the buffer is donated
        return lax.dynamic_update_slice_in_dim(b, y, start, dim)
    return b.at[(slice(None),) * dim + (slice(start, stop, step),)].set(y)


slice_p = _view_primitive("slice", _slice_shape, lambda x, *, dim, start, stop, step: lax.slice_in_dim(
    x, start, max(start, stop), step, dim))
slice_scatter_p = standard_primitive("slice_scatter", _same, _base_dtype, _slice_scatter_lower,
                                     recompute=Recompute.CHEAP, flops=output_size_flops)
slice_p.view_inverse = lambda apply, base, y, **params: apply(slice_scatter_p, base, y, **params)


# Eager, the position of a select or a unit-step slice (and of the writes through them) is an argument of the compiled
# executable rather than a constant of it: `x[i]` and `source[i:i+n]` for every `i` run one program per shape and
# dimension (a loop over batches compiled nothing after its first step; it compiled once per offset). Positions are
# in range when these run (the frontend checked them), so the clamping of XLA's dynamic slices never applies.
_select_at = jax.jit(lambda x, index, dim: lax.dynamic_index_in_dim(x, index, dim, keepdims=False), static_argnums=2)
_select_scatter_at = jax.jit(lambda b, y, index, dim: lax.dynamic_update_index_in_dim(b, y.astype(b.dtype), index, dim),
                             static_argnums=3)
_slice_at = jax.jit(lambda x, start, size, dim: lax.dynamic_slice_in_dim(x, start, size, dim), static_argnums=(2, 3))
_slice_scatter_at = jax.jit(lambda b, y, start, dim: lax.dynamic_update_slice_in_dim(b, y.astype(b.dtype), start, dim),
                            static_argnums=3)


def _eager_select(*, dim, index):
    return lambda x: _select_at(x, index, dim)


def _eager_select_scatter(*, dim, index):
    return lambda b, y: _select_scatter_at(b, y, index, dim)


def _eager_slice(*, dim, start, stop, step):
    if step != 1:
        return jax.jit(lambda x: lax.slice_in_dim(x, start, max(start, stop), step, dim))
    size = max(stop - start, 0)
    return lambda x: _slice_at(x, start, size, dim)


def _eager_slice_scatter(*, dim, start, stop, step):
    if step != 1:
        return jax.jit(functools.partial(_slice_scatter_lower, dim=dim, start=start, stop=stop, step=step))
    return lambda b, y: _slice_scatter_at(b, y, start, dim)


select_p.eager_impl, select_scatter_p.eager_impl = _eager_select, _eager_select_scatter
slice_p.eager_impl, slice_scatter_p.eager_impl = _eager_slice, _eager_slice_scatter
slice_p.view_strides = lambda shape, strides, offset, *, dim, start, stop, step: (
    strides[:dim] + (strides[dim] * step,) + strides[dim + 1:], offset + start * strides[dim])
deflinear(slice_p)
deflinear(slice_scatter_p)
defview_transpose(slice_p)
_scatter_transpose(slice_p, slice_scatter_p)


def _slice(x, dim: int, start: int, stop: int, step: int = 1):
    """A slice view with `0 <= start <= stop <= size` already normalized."""
    return slice_p.bind(x, dim=dim, start=start, stop=stop, step=step)


# NOTE: `narrow`/`select` at a traced position gather (a copy): the gather is on a floor above, which sets this
gather_at = None  # (op, x, dim, start, length) -> Tensor: set by aotjax.ops.indexing.subscripts


def narrow(x, dim: int, start: int, length: int):
    """The `length` elements of `x` along `dim` starting at `start` (a view). `start` may be a 0-d integer tensor;
    a traced one (under `jit`) gives a copy gathered at its value instead of a view, clamped into range.

    >>> aotjax.tensor([1, 2, 3, 4]).narrow(0, 1, 2)
    tensor([2, 3])
    >>> aotjax.jit(lambda x, i: x.narrow(0, i, 2))(aotjax.tensor([1, 2, 3, 4]), aotjax.tensor(1))
    tensor([2, 3])
    """
    dim = canonical_dim(dim, x.ndim, "narrow")
    size = x.shape[dim]
    if isinstance(start, Tracer):
        return gather_at("narrow", x, dim, start, int(length))
    start = int(start)
    if not -size <= start <= size:
        raise IndexError(f"narrow: start {start} is out of range for dimension {dim} of size {size}{where()}")
    start = start + size if start < 0 else start
    if length < 0:
        raise RuntimeError(f"narrow: length must be non-negative, got {length}{where()}")
    if start + length > size:  # NOTE: PyTorch raises a RuntimeError here, an IndexError for `start` alone
        raise RuntimeError(f"narrow: start ({start}) + length ({length}) exceeds dimension {dim} of size "
                           f"{size}{where()}")
    return _slice(x, dim, start, start + int(length))


def split(x, split_size_or_sections, dim: int = 0):
    """`x` split along `dim` into chunks of `split_size_or_sections` elements (the last may be smaller),
    or into chunks of the listed sizes; a tuple of views.

    >>> [c.tolist() for c in aotjax.tensor([1, 2, 3, 4, 5]).split(2)]
    [[1, 2], [3, 4], [5]]
    """
    dim = canonical_dim(dim, x.ndim, "split")
    size = x.shape[dim]
    if isinstance(split_size_or_sections, (list, tuple)):
        sizes = [int(s) for s in split_size_or_sections]
        if sum(sizes) != size or any(s < 0 for s in sizes):
            raise ShapeError(f"split: the section sizes {sizes} must be non-negative and sum to the size of "
                             f"dimension {dim}, {size}{where()}")
    else:
        step = int(split_size_or_sections)
        if step <= 0 and size > 0:
            raise ShapeError(f"split: split_size must be positive, got {step}{where()}")
        sizes = [min(step, size - s) for s in range(0, size, step)] if size else [0]
    out, start = [], 0
    for s in sizes:
        out.append(_slice(x, dim, start, start + s))
        start += s
    return tuple(out)


def chunk(x, chunks: int, dim: int = 0):
    """`x` split along `dim` into at most `chunks` views of equal size (the last may be smaller).

    >>> [c.tolist() for c in aotjax.tensor([1, 2, 3, 4, 5]).chunk(3)]
    [[1, 2], [3, 4], [5]]
    """
    if chunks <= 0:
        raise ShapeError(f"chunk: chunks must be positive, got {chunks}{where()}")
    size = x.shape[canonical_dim(dim, x.ndim, "chunk")]
    if size == 0:
        return split(x, [0] * chunks, dim)
    return split(x, -(-size // chunks), dim)


def _batch_slice(axis_size, vals, dims, *, dim, start, stop, step):
    (x,), (d,) = vals, dims
    return [slice_p.bind(x, dim=shift_axis(dim, d), start=start, stop=stop, step=step)], [d]


batching_rules[slice_p] = _batch_slice


batching_rules[slice_scatter_p] = _scatter_batch(slice_scatter_p)


# -- diagonal ----------------------------------------------------------------------------------
def _diag_len(shape, offset: int, dim1: int, dim2: int) -> int:
    if offset >= 0:
        return max(0, min(shape[dim1], shape[dim2] - offset))
    return max(0, min(shape[dim1] + offset, shape[dim2]))


def _diagonal_shape(x, *, offset, dim1, dim2):
    rest = tuple(s for i, s in enumerate(x.shape) if i not in (dim1, dim2))
    return rest + (_diag_len(x.shape, offset, dim1, dim2),)


def _diagonal_scatter_lower(b, y, *, offset, dim1, dim2):
    n = y.shape[-1]
    rows, cols = jnp.arange(n) + max(-offset, 0), jnp.arange(n) + max(offset, 0)
    moved = jnp.moveaxis(b, (dim1, dim2), (-2, -1)).at[..., rows, cols].set(y.astype(b.dtype))
    return jnp.moveaxis(moved, (-2, -1), (dim1, dim2))


def _diagonal_strides(shape, strides, storage_offset, /, *, offset, dim1, dim2):
    rest = tuple(s for i, s in enumerate(strides) if i not in (dim1, dim2))
    if _diag_len(shape, offset, dim1, dim2) > 0:
        storage_offset += offset * strides[dim2] if offset >= 0 else -offset * strides[dim1]
    return rest + (strides[dim1] + strides[dim2],), storage_offset


diagonal_p = _view_primitive("diagonal", _diagonal_shape, lambda x, *, offset, dim1, dim2: jnp.diagonal(
    x, offset, dim1, dim2))
diagonal_scatter_p = standard_primitive("diagonal_scatter", _same, _base_dtype, _diagonal_scatter_lower,
                                        recompute=Recompute.CHEAP, flops=output_size_flops)
diagonal_p.view_inverse = lambda apply, base, y, **params: apply(diagonal_scatter_p, base, y, **params)
diagonal_p.view_strides = _diagonal_strides
deflinear(diagonal_p)
deflinear(diagonal_scatter_p)
defview_transpose(diagonal_p)
_scatter_transpose(diagonal_p, diagonal_scatter_p)


def diagonal(x, offset: int = 0, dim1: int = 0, dim2: int = 1):
    """The diagonal of `x` over dims `dim1`, `dim2` (offset above the main diagonal when positive), as a
    view whose last dim runs along the diagonal.

    >>> x = aotjax.tensor([[1, 2], [3, 4]])
    >>> x.diagonal().zero_()
    tensor([0, 0])
    >>> x
    tensor([[0, 2],
            [3, 0]])
    """
    d1, d2 = canonical_dim(dim1, x.ndim, "diagonal"), canonical_dim(dim2, x.ndim, "diagonal")
    if d1 == d2:
        raise ShapeError(f"diagonal: dim1 and dim2 must differ, both are {d1}{where()}")
    return diagonal_p.bind(x, offset=int(offset), dim1=d1, dim2=d2)


def _batch_diagonal(axis_size, vals, bdims, *, offset, dim1, dim2):
    """The diagonal of each example: the batch axis first, the diagonal's dims (canonical) shifted past it."""
    (x,), (d,) = vals, bdims
    return [diagonal_p.bind(move_batch_axis(x, d, 0), offset=offset, dim1=dim1 + 1, dim2=dim2 + 1)], [0]


batching_rules[diagonal_p] = _batch_diagonal


def _batch_diagonal_scatter(axis_size, vals, bdims, *, offset, dim1, dim2):
    """Each example's diagonal written into its base: both batched at axis 0 (broadcast there if unbatched)."""
    (b, y), (db, dy) = vals, bdims
    b, y = bdim_at_front(b, db, axis_size), bdim_at_front(y, dy, axis_size)
    return [diagonal_scatter_p.bind(b, y, offset=offset, dim1=dim1 + 1, dim2=dim2 + 1)], [0]


batching_rules[diagonal_scatter_p] = _batch_diagonal_scatter


# -- permute -----------------------------------------------------------------------------------
permute_p = standard_primitive(
    "permute", lambda x, *, perm: tuple(x.shape[p] for p in perm), lambda x, *, perm: x.dtype,
    lambda x, *, perm: jnp.transpose(x, perm), kind=Kind.VIEW)
permute_p.view_inverse = lambda apply, base, y, *, perm: apply(
    permute_p, y, perm=tuple(sorted(range(len(perm)), key=perm.__getitem__)))
permute_p.view_strides = lambda shape, strides, offset, *, perm: (tuple(strides[p] for p in perm), offset)
deflinear(permute_p)
defview_transpose(permute_p)
permute__p = Primitive("permute_", kind=Kind.MUTATION, mutates=(0,), metadata_view=permute_p)


def _perm(x, dims, op: str) -> tuple[int, ...]:
    perm = tuple(canonical_dim(d, x.ndim, op) for d in normalize_shape(dims))
    if sorted(perm) != list(range(x.ndim)):
        raise ShapeError(f"{op}: dims {list(dims)} are not a permutation of the {x.ndim} dims of the tensor"
                         f"{where()}")
    return perm


def permute(x, *dims):
    """`x` with its dimensions reordered (a view).

    >>> aotjax.zeros(2, 3, 4).permute(2, 0, 1).stride()
    (1, 12, 4)
    """
    return permute_p.bind(x, perm=_perm(x, dims, "permute"))


def _swap_perm(ndim, d0, d1):
    perm = list(range(ndim))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return tuple(perm)


def transpose(x, dim0: int, dim1: int):
    """`x` with dims `dim0` and `dim1` swapped (a view).

    >>> aotjax.zeros(2, 3).transpose(0, 1).shape
    (3, 2)
    """
    d0, d1 = canonical_dim(dim0, x.ndim, "transpose"), canonical_dim(dim1, x.ndim, "transpose")
    return permute_p.bind(x, perm=_swap_perm(x.ndim, d0, d1) if x.ndim else ())


swapaxes = swapdims = transpose


def _check_t(op: str, x) -> None:
    if x.ndim > 2:
        raise ShapeError(f"{op}: expects a tensor with <= 2 dimensions, got {x.ndim} (shape {list(x.shape)})"
                         f"{where()}; use transpose(dim0, dim1) or .mT")


def t(x):
    """The transpose of a tensor of at most 2 dims (a view).

    >>> aotjax.tensor([[1, 2]]).t()
    tensor([[1],
            [2]])
    """
    _check_t("t", x)
    return x if x.ndim < 2 else transpose(x, 0, 1)


def t_(x):
    """In-place `t`: `x` itself becomes its transpose (a metadata mutation: the data is unchanged).

    >>> x = aotjax.zeros(2, 3)
    >>> x.t_().shape, x.stride()
    ((3, 2), (1, 3))
    """
    _check_t("t_", x)
    return x if x.ndim < 2 else bind_inplace(permute__p, x, perm=_swap_perm(x.ndim, 0, 1))


def transpose_(x, dim0: int, dim1: int):
    """In-place `transpose` (a metadata mutation).

    >>> x = aotjax.zeros(2, 3, 4)
    >>> x.transpose_(0, 2).shape
    (4, 3, 2)
    """
    d0, d1 = canonical_dim(dim0, x.ndim, "transpose_"), canonical_dim(dim1, x.ndim, "transpose_")
    return bind_inplace(permute__p, x, perm=_swap_perm(x.ndim, d0, d1))


def movedim(x, source, destination):
    """`x` with dims `source` moved to positions `destination` (ints or sequences), the other dims
    keeping their order (a view).

    >>> aotjax.zeros(2, 3, 4).movedim(0, -1).shape
    (3, 4, 2)
    """
    src = (source,) if isinstance(source, int) else tuple(source)
    dst = (destination,) if isinstance(destination, int) else tuple(destination)
    src = tuple(canonical_dim(d, x.ndim, "movedim") for d in src)
    dst = tuple(canonical_dim(d, x.ndim, "movedim") for d in dst)
    if len(src) != len(dst) or len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise ShapeError(f"movedim: source {list(src)} and destination {list(dst)} must be as many distinct "
                         f"dims{where()}")
    perm = [None] * x.ndim
    for s, d in zip(src, dst, strict=True):
        perm[d] = s
    rest = iter(i for i in range(x.ndim) if i not in src)
    return permute_p.bind(x, perm=tuple(p if p is not None else next(rest) for p in perm))


moveaxis = movedim


def unbind(x, dim: int = 0):
    """The slices of `x` along `dim`, as a tuple of views.

    >>> a, b = aotjax.tensor([[1, 2], [3, 4]]).unbind(1)
    >>> b
    tensor([2, 4])
    """
    dim = canonical_dim(dim, x.ndim, "unbind")
    return tuple(select_p.bind(x, dim=dim, index=i) for i in range(x.shape[dim]))


def _batch_permute(axis_size, vals, dims, *, perm):
    (x,), (d,) = vals, dims
    x = move_batch_axis(x, d, 0)
    return [permute_p.bind(x, perm=(0,) + tuple(p + 1 for p in perm))], [0]


batching_rules[permute_p] = _batch_permute


# -- view / reshape ----------------------------------------------------------------------------
def compute_view_strides(shape, strides, new_shape) -> tuple[int, ...] | None:
    """PyTorch's strides for viewing a tensor of `shape` and `strides` with `new_shape`, or None when no
    strides exist (some new dim would span two non-contiguous chunks of the old dims).

    Walking the old dims from the last, runs of dims that are contiguous with each other form chunks;
    each chunk must be exactly covered by a run of new dims, which get strides within the chunk.

    >>> compute_view_strides((2, 3), (1, 2), (3, 2)) is None, compute_view_strides((2, 3), (3, 1), (6,))
    (True, (1,))
    """
    shape, new_shape = tuple(shape), tuple(new_shape)
    if not all(type(d) is int for d in shape + new_shape):  # NOTE: symbolic sizes (export): contiguous inputs only
        return contiguous_strides(new_shape) if tuple(strides) == contiguous_strides(shape) else None
    if math.prod(shape) == 0:
        return tuple(strides) if shape == new_shape else contiguous_strides(new_shape)
    if not shape:
        return contiguous_strides(new_shape)
    new_strides = [0] * len(new_shape)
    view_d = len(new_shape) - 1
    chunk_base_stride = strides[-1]
    tensor_numel = view_numel = 1
    for d in range(len(shape) - 1, -1, -1):
        tensor_numel *= shape[d]
        if d == 0 or (shape[d - 1] != 1 and strides[d - 1] != tensor_numel * chunk_base_stride):
            while view_d >= 0 and (view_numel < tensor_numel or new_shape[view_d] == 1):
                new_strides[view_d] = view_numel * chunk_base_stride
                view_numel *= new_shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if d > 0:
                chunk_base_stride = strides[d - 1]
                tensor_numel = view_numel = 1
    return tuple(new_strides) if view_d == -1 else None


def _view_strides(old_shape, strides, offset, /, *, shape):
    new = compute_view_strides(old_shape, strides, shape)
    # NOTE: the frontends only bind `view` when the strides exist; an inverse rule (reshaping a written
    # value back) or a jaxpr replayed on differently strided inputs may not, and then the data is a copy.
    return (new, offset) if new is not None else (contiguous_strides(shape), 0)


view_p = _view_primitive("view", lambda x, *, shape: shape, lambda x, *, shape: jnp.reshape(x, shape))
view_p.view_inverse = lambda apply, base, y, *, shape: apply(view_p, y, shape=tuple(base.shape))
view_p.view_strides = _view_strides
deflinear(view_p)
defview_transpose(view_p)


def _infer_size(op: str, shape: tuple[int, ...], numel: int) -> tuple[int, ...]:
    """`shape` with its one `-1` inferred so that it holds `numel` elements."""
    holes = [i for i, s in enumerate(shape) if s == -1]
    known = math.prod(s for s in shape if s != -1)
    bad = len(holes) > 1 or any(s < -1 for s in shape)
    if not bad and holes:
        if known == 0:
            raise ShapeError(f"{op}: cannot reshape a tensor of {numel} elements into shape {list(shape)}: the "
                             f"size -1 is ambiguous next to a 0{where()}")
        bad = numel % known != 0
        shape = shape[:holes[0]] + (numel // max(known, 1),) + shape[holes[0] + 1:]
    if bad or math.prod(shape) != numel:
        raise ShapeError(f"{op}: shape {list(shape)} is invalid for a tensor of {numel} elements{where()}")
    return shape


def _contiguous_copy(x):
    return clone(x, memory_format="contiguous")


def view(x, *shape):
    """`x` seen with a new shape (one size may be -1), sharing its data. Like PyTorch, raises when the
    tensor's strides do not allow it (e.g. after a transpose): use `reshape`, which copies then.

    >>> x = aotjax.zeros(2, 3)
    >>> x.view(-1).add_(1).shape, x.sum().item()
    ((6,), 6.0)
    """
    if len(shape) == 1 and not isinstance(shape[0], (int, tuple, list)) and not hasattr(shape[0], "__index__"):
        raise UnsupportedError(f"view: reinterpreting the bytes as another dtype (view(dtype)) is not supported"
                               f"{where()}; use x.to(dtype) to convert the values")
    shape = _infer_size("view", normalize_shape(shape), math.prod(x.shape))
    if compute_view_strides(x.shape, x.stride(), shape) is None:
        raise ShapeError(f"view: shape {list(shape)} is not compatible with the input's size {list(x.shape)} and "
                         f"stride {x.stride()} (at least one dimension spans across two contiguous subspaces)"
                         f"{where()}. Use .reshape(...) instead.")
    return view_p.bind(x, shape=shape)


def view_as(x, other):
    """`x.view(other.shape)`.

    >>> aotjax.zeros(6).view_as(aotjax.zeros(2, 3)).shape
    (2, 3)
    """
    return view(x, tuple(other.shape))


def reshape(x, *shape):
    """`x` with a new shape (one size may be -1): a view when PyTorch's strides allow it, else a
    contiguous copy, exactly as PyTorch decides.

    >>> a = aotjax.tensor([[1, 2], [3, 4]])
    >>> a.reshape(-1)[0] = 9                 # a view: writes into a
    >>> a.t().reshape(-1)[0] = 7             # a copy: a is unchanged
    >>> a
    tensor([[9, 2],
            [3, 4]])
    """
    x = as_tensor(x)
    shape = _infer_size("reshape", normalize_shape(shape), math.prod(x.shape))
    if compute_view_strides(x.shape, x.stride(), shape) is None:
        x = _contiguous_copy(x)
    return view_p.bind(x, shape=shape)


def reshape_as(x, other):
    """`x.reshape(other.shape)`.

    >>> aotjax.zeros(6).reshape_as(aotjax.zeros(3, 2)).shape
    (3, 2)
    """
    return reshape(x, tuple(other.shape))


def flatten(x, start_dim: int = 0, end_dim: int = -1):
    """Dims `start_dim`..`end_dim` of `x` merged into one (a view when possible, as `reshape`).

    >>> aotjax.zeros(2, 3, 4).flatten(1).shape
    (2, 12)
    """
    x = as_tensor(x)
    if x.ndim == 0:
        return reshape(x, 1)
    s, e = canonical_dim(start_dim, x.ndim, "flatten"), canonical_dim(end_dim, x.ndim, "flatten")
    if s > e:
        raise ShapeError(f"flatten: start_dim ({s}) must not come after end_dim ({e}){where()}")
    if s == e:
        return x
    return reshape(x, x.shape[:s] + (math.prod(x.shape[s:e + 1]),) + x.shape[e + 1:])


def contiguous(x, memory_format=contiguous_format):
    """`x` itself when it is contiguous in `memory_format` (row-major and dense by default; `channels_last` for
    NHWC), else a copy laid out so.

    >>> a = aotjax.zeros(2, 3)
    >>> a.contiguous() is a, a.t().contiguous().is_contiguous()
    (True, True)
    """
    fmt = format_name(memory_format, "contiguous")
    if fmt == "preserve":
        raise ValueError(f"contiguous: memory_format=preserve_format is not supported by contiguous (as in PyTorch)"
                         f"{where()}; use clone(memory_format=preserve_format)")
    if is_contiguous(x, memory_format):
        return x
    return clone(x, memory_format=memory_format)


def is_contiguous(x, memory_format=contiguous_format) -> bool:
    """Whether PyTorch would call `x` contiguous in `memory_format` (row-major and dense by default, or
    `channels_last`/`channels_last_3d`); strides are metadata that aotjax records as PyTorch would.

    >>> x = aotjax.zeros(1, 3, 2, 2)
    >>> x.is_contiguous(), x.is_contiguous(memory_format=aotjax.channels_last)
    (True, False)
    """
    if memory_format is contiguous_format and getattr(x, "_strides", None) is None:
        return True  # NOTE: the common case, without reading the format: no recorded strides mean row-major
    fmt = format_name(memory_format, "is_contiguous")
    if fmt == "preserve":
        raise ValueError(f"is_contiguous: memory_format=preserve_format is not a layout a tensor can have{where()}")
    return is_contiguous_in(fmt, tuple(x.shape), x.stride())


def _batch_view(axis_size, vals, dims, *, shape):
    (x,), (d,) = vals, dims
    return [view_p.bind(move_batch_axis(x, d, 0), shape=(axis_size,) + tuple(shape))], [0]


batching_rules[view_p] = _batch_view


# -- squeeze / unsqueeze -----------------------------------------------------------------------
def _squeeze_shape(x, *, dims):
    for d in dims:
        if x.shape[d] != 1:
            raise ShapeError(f"squeeze: dimension {d} has size {x.shape[d]}, not 1 (shape {list(x.shape)})")
    return tuple(s for i, s in enumerate(x.shape) if i not in dims)


def _squeeze_inverse(apply, base, y, *, dims):
    for d in dims:  # ascending: each insertion lands at its final position
        y = apply(unsqueeze_p, y, dim=d)
    return y


squeeze_p = _view_primitive("squeeze", _squeeze_shape, lambda x, *, dims: lax.squeeze(x, dims))
squeeze_p.view_inverse = _squeeze_inverse
squeeze_p.view_strides = lambda shape, strides, offset, *, dims: (
    tuple(s for i, s in enumerate(strides) if i not in dims), offset)
deflinear(squeeze_p)
defview_transpose(squeeze_p)
squeeze__p = Primitive("squeeze_", kind=Kind.MUTATION, mutates=(0,), metadata_view=squeeze_p)

unsqueeze_p = _view_primitive("unsqueeze", lambda x, *, dim: x.shape[:dim] + (1,) + x.shape[dim:],
                              lambda x, *, dim: lax.expand_dims(x, (dim,)))
unsqueeze_p.view_inverse = lambda apply, base, y, *, dim: apply(squeeze_p, y, dims=(dim,))
unsqueeze_p.view_strides = lambda shape, strides, offset, *, dim: (
    strides[:dim] + ((shape[dim] * strides[dim]) if dim < len(shape) else 1,) + strides[dim:], offset)
deflinear(unsqueeze_p)
defview_transpose(unsqueeze_p)
unsqueeze__p = Primitive("unsqueeze_", kind=Kind.MUTATION, mutates=(0,), metadata_view=unsqueeze_p)


def _squeeze_dims(x, dim, op: str) -> tuple[int, ...]:
    dims = canonical_dims(dim, x.ndim, op)
    return tuple(d for d in dims if x.ndim and x.shape[d] == 1)  # NOTE: a 0-d tensor takes dim 0/-1, as in torch


def squeeze(x, dim=None):
    """`x` without its size-1 dims (only those among `dim`, an int or tuple, when given); a view.

    >>> aotjax.zeros(2, 1, 3, 1).squeeze().shape, aotjax.zeros(2, 1, 3, 1).squeeze(1).shape
    ((2, 3), (2, 3, 1))
    """
    return squeeze_p.bind(x, dims=_squeeze_dims(x, dim, "squeeze"))


def squeeze_(x, dim=None):
    """In-place `squeeze` (a metadata mutation: `x` itself loses the dims).

    >>> x = aotjax.zeros(1, 3)
    >>> x.squeeze_().shape
    (3,)
    """
    dims = _squeeze_dims(x, dim, "squeeze_")
    return bind_inplace(squeeze__p, x, dims=dims) if dims else x


def _unsqueeze_dim(x, dim: int, op: str) -> int:
    return canonical_dim(dim, x.ndim + 1, op)


def unsqueeze(x, dim: int):
    """`x` with a new size-1 dim at position `dim` (a view).

    >>> aotjax.zeros(2, 3).unsqueeze(-1).shape
    (2, 3, 1)
    """
    return unsqueeze_p.bind(x, dim=_unsqueeze_dim(x, dim, "unsqueeze"))


def unsqueeze_(x, dim: int):
    """In-place `unsqueeze` (a metadata mutation).

    >>> x = aotjax.zeros(3)
    >>> x.unsqueeze_(0).shape
    (1, 3)
    """
    return bind_inplace(unsqueeze__p, x, dim=_unsqueeze_dim(x, dim, "unsqueeze_"))


def _squeeze_batch_rule(axis_size, vals, bdims, **params):
    (x,), (d,) = vals, bdims
    squeezed = params["dims"]
    out = squeeze_p.bind(x, dims=tuple(shift_axis(a, d) for a in squeezed))
    return [out], [d - sum(a < d for a in squeezed)]


batching_rules[squeeze_p] = _squeeze_batch_rule


def _batch_unsqueeze(axis_size, vals, dims, *, dim):
    (x,), (d,) = vals, dims
    if dim <= d:
        return [unsqueeze_p.bind(x, dim=dim)], [d + 1]
    return [unsqueeze_p.bind(x, dim=dim + 1)], [d]


batching_rules[unsqueeze_p] = _batch_unsqueeze


# -- expand ------------------------------------------------------------------------------------
def _expand_shape(x, *, shape):
    lead = len(shape) - x.ndim
    if lead < 0 or any(s != 1 and s != shape[lead + i] for i, s in enumerate(x.shape)):
        raise ShapeError(f"expand: a tensor of shape {list(x.shape)} cannot be expanded to {list(shape)}")
    return shape


def _expand_inverse(apply, base, y, *, shape):
    if math.prod(shape) == math.prod(base.shape):  # no element repeated: writing through is well defined
        return y if tuple(shape) == tuple(base.shape) else apply(view_p, y, shape=tuple(base.shape))
    raise AliasingError(f"expand: cannot write through an expanded view ({list(base.shape)} expanded to "
                        f"{list(shape)}): more than one element of the written tensor refers to a single memory "
                        f"location{where()}. Call .clone() on the expanded tensor before writing to it.")


def _expand_strides(old_shape, old_strides, offset, /, *, shape):
    # NOTE: as PyTorch's inferExpandGeometry: expanded dims get stride 0, new size-1 leading dims the
    # stride that would make them contiguous with the next dim.
    lead = len(shape) - len(old_shape)
    out = [0] * len(shape)
    for i in range(len(shape) - 1, -1, -1):
        if i >= lead:
            size, stride = old_shape[i - lead], old_strides[i - lead]
        else:
            size, stride = 1, (out[i + 1] * shape[i + 1] if i + 1 < len(shape) else 1)
        out[i] = 0 if size != shape[i] else stride
    return tuple(out), offset


expand_p = _view_primitive("expand", _expand_shape, lambda x, *, shape: jnp.broadcast_to(x, shape))
expand_p.view_inverse = _expand_inverse
expand_p.view_strides = _expand_strides
deflinear(expand_p)
deflinear_transpose(expand_p, lambda ct, x, *, shape: unbroadcast(ct, x.aval))  # sums the expanded dims


def expand(x, *sizes):
    """`x` repeated along its size-1 dims (and new leading dims) without copying: a view whose expanded
    dims have stride 0. A size of -1 keeps that dim. Writing through it raises, as in PyTorch.

    >>> aotjax.tensor([1, 2]).expand(3, -1).stride()
    (0, 1)
    """
    sizes = normalize_shape(sizes)
    lead = len(sizes) - x.ndim
    if lead < 0:
        raise ShapeError(f"expand: the number of sizes ({len(sizes)}) must be at least the number of dims of the "
                         f"tensor ({x.ndim}); got sizes {list(sizes)} for shape {list(x.shape)}{where()}")
    out = []
    for i, s in enumerate(sizes):
        cur = x.shape[i - lead] if i >= lead else None
        if s == -1 and cur is not None:
            s = cur
        elif s < 0 or (cur is not None and cur != 1 and cur != s):
            what = "-1 is not allowed in a new leading dim" if cur is None else (
                f"the expanded size {s} must match the existing size {cur} at non-singleton dimension {i}")
            raise ShapeError(f"expand: {what}; target sizes {list(sizes)}, tensor sizes {list(x.shape)}{where()}")
        out.append(s)
    return expand_p.bind(x, shape=tuple(out))


def expand_as(x, other):
    """`x.expand(other.shape)`.

    >>> aotjax.tensor([1, 2]).expand_as(aotjax.zeros(2, 2))
    tensor([[1, 2],
            [1, 2]])
    """
    return expand(x, tuple(other.shape))


def broadcast_to(x, shape):
    """`x` broadcast to `shape` (a view, as `expand`).

    >>> aotjax.broadcast_to(aotjax.tensor([1, 2]), (2, 2)).shape
    (2, 2)
    """
    return expand(as_tensor(x), tuple(shape))


def _batch_expand(axis_size, vals, dims, *, shape):
    (x,), (d,) = vals, dims
    x = move_batch_axis(x, d, 0)
    pad = len(shape) - (x.ndim - 1)
    if pad:
        x = view_p.bind(x, shape=(axis_size,) + (1,) * pad + tuple(x.shape[1:]))
    return [expand_p.bind(x, shape=(axis_size,) + tuple(shape))], [0]


batching_rules[expand_p] = _batch_expand


# -- identity views ----------------------------------------------------------------------------
def _identity_view(name: str) -> Primitive:
    prim = _view_primitive(name, lambda x: x.shape, lambda x: x)
    prim.view_inverse = lambda apply, base, y: y
    prim.view_strides = lambda shape, strides, offset: (strides, offset)
    return prim


detach_p = _identity_view("detach")
register_detaching(detach_p)  # NOTE: a detached view does not require grad
defjvp_zero(detach_p)  # NOTE: detach is stop_gradient: no tangent flows through it
deflinear_transpose(detach_p, lambda ct, x: Zero(x.aval))
stop_gradient_p = elementwise("stop_gradient", lax.stop_gradient)  # NOTE: `detach` of a result that is no view
defjvp_zero(stop_gradient_p)
register_detaching(stop_gradient_p)  # NOTE: nor does a cut result require grad

# `pinned(d, v)` is `v` with the derivative of `d` (operands of one aval). Imperative autograd's replay reads each
# value its forward read, with the derivative the graph gives it (`aotjax.autograd.engine`); a write under `no_grad()`
# or through a detached view changes a tensor's value and keeps its derivative, as torch's (functionalize). Its jvp
# rule returns `v` itself, so a replayed `d` is dead code.
pinned_p = Primitive("pinned", recompute=Recompute.CHEAP, flops=output_size_flops)
pinned_p.abstract_eval = lambda d, v: v
register_lowering(pinned_p, lambda d, v: v)
jvp_rules[pinned_p] = lambda primals, tangents: ([primals[1]], [tangents[0]])


def _pinned_batch(axis_size, vals, bdims):
    if all(b is not_mapped for b in bdims):
        return [pinned_p.bind(*vals)], [not_mapped]
    return [pinned_p.bind(*(bdim_at_front(v, b, axis_size) for v, b in zip(vals, bdims)))], [0]


batching_rules[pinned_p] = _pinned_batch
hooks.keep_derivative = pinned_p.bind


def _cut_derivatives(prim: Primitive, outs: list) -> list:
    """The results of `prim`, bound under `aotjax.no_grad()`, with a zero derivative: a view's result detached
    (still a view of its base), any other floating-point result passed through `stop_gradient`."""
    cut = detach_p if prim.kind is Kind.VIEW else stop_gradient_p
    return [cut.bind(o) if isinstance(o, Tracer) and category(o.dtype) >= 2 else o for o in outs]


register_no_grad(_cut_derivatives)
alias_p = _identity_view("alias")
deflinear(alias_p)
defview_transpose(alias_p)


def detach(x):
    """`x` as a view that shares its data (transforms will not differentiate through it).

    >>> x = aotjax.zeros(2)
    >>> x.detach().add_(1)
    tensor([1., 1.])
    >>> x
    tensor([1., 1.])
    """
    return detach_p.bind(x)


def alias(x):
    """A new tensor object that views all of `x` (what `x[...]` returns).

    >>> x = aotjax.zeros(2)
    >>> aotjax.alias(x) is x
    False
    """
    return alias_p.bind(x)


def as_strided(x, size=None, stride=None, storage_offset=None):
    """Not supported: XLA arrays have no strides to reinterpret.

    >>> aotjax.zeros(4).as_strided((2,), (2,))
    Traceback (most recent call last):
    ...
    aotjax.core.errors.UnsupportedError: as_strided: ...
    """
    raise UnsupportedError(
        f"as_strided: arbitrary strided views are not supported{where()}: aotjax runs on XLA, whose arrays have "
        f"no strides (each tensor only records the strides PyTorch would give it). Express the view with "
        f"slicing (x[::2]), narrow, diagonal, unfold-like reshape/permute, or expand instead.")


# NOTE: the interpreters broadcast tangents and reshape unbroadcast cotangents with these.
hooks.reshape = lambda x, shape: view_p.bind(x, shape=shape)
hooks.expand = lambda x, shape: expand_p.bind(x, shape=shape)
hooks.permute = lambda x, perm: permute_p.bind(x, perm=perm)  # batch axes moved by vmap's rules


batching_rules[detach_p] = _identity_batch(detach_p)


batching_rules[alias_p] = _identity_batch(alias_p)


# -- Tensor methods and properties ---------------------------------------------------------------
for _op in (view, view_as, reshape, reshape_as, flatten, contiguous, is_contiguous, transpose, permute, t, squeeze,
            unsqueeze, expand, expand_as, broadcast_to, select, narrow, diagonal, unbind, split, chunk, movedim, detach,
            t_, transpose_, squeeze_, unsqueeze_, as_strided):
    method(_op)


def _T(x):
    """All dimensions reversed (a view)."""
    return permute(x, tuple(range(x.ndim - 1, -1, -1)))


def _mT(x):
    """The last two dimensions swapped (a view)."""
    return transpose(x, -2, -1)


def _iter(x):
    if not x.shape:
        raise TypeError("iteration over a 0-d tensor")
    return iter(unbind(x, 0))


method(property(_T), "T")
method(property(_mT), "mT")
method(_iter, "__iter__")  # `for row in x`: the views along dim 0
