"""Arrangement ops PyTorch code passes everywhere, mostly compositions of the view and shape ops (so every transform
handles them with no new rules): unflatten/ravel, repeat_interleave, the stacks (hstack vstack dstack column_stack
row_stack), the splits (tensor_split split_with_sizes hsplit vsplit dsplit), broadcasting (broadcast_tensors
broadcast_shapes meshgrid), rotations and flips (rot90 fliplr flipud), diagonal matrices (diag diag_embed diagflat
block_diag), products of index sets (cartesian_prod combinations), atleast_1d/2d/3d, `mH`/`H`,
`unsafe_chunk`/`unsafe_split`, narrow_copy and the `*_copy` forms of the views (`t_copy`, `diagonal_copy`, ...: the
view's values in a new contiguous tensor); and one view primitive, `unfold` (`Tensor.unfold`'s sliding windows), with
its inverse `unfold_scatter` (writing through non-overlapping windows) and every rule beside them.

Views where PyTorch returns views (unflatten, ravel of a viewable tensor, the splits, broadcast_tensors, meshgrid,
atleast_Nd, mH/H, unfold); copies where PyTorch copies.
"""
from __future__ import annotations

import itertools
import math

import jax.numpy as jnp
import numpy as np

from aotjax.core.errors import AliasingError, ShapeError, UnsupportedError
from aotjax.core.interpreter import Tracer
from aotjax.core.primitive import Kind, Recompute, output_size_flops
from aotjax.core.source_info import where
from aotjax.interpreters.ad_util import Zero, instantiate
from aotjax.interpreters.batching import batching_rules, bdim_at_front
from aotjax.interpreters.batching import moveaxis as move_batch_axis
from aotjax.interpreters.jvp import deflinear
from aotjax.interpreters.transpose import deflinear_transpose
from aotjax.ops.base.casts import convert
from aotjax.ops.base.combinators import standard_primitive
from aotjax.ops.base.data import as_tensor, promote, tensor
from aotjax.ops.base.frontend import canonical_dim
from aotjax.ops.base.promotion import category, default_int_dtype
from aotjax.ops.creation.factories import arange, zeros
from aotjax.ops.indexing.gather_scatter import diagonal_scatter
from aotjax.ops.indexing.subscripts import index_add_p, index_select
from aotjax.ops.math.complex import conj
from aotjax.ops.reduce.reductions import cumsum
from aotjax.ops.shape import views
from aotjax.ops.shape.clone import clone
from aotjax.ops.shape.copies import cat, flip, stack
from aotjax.ops.shape.views import (
    _scatter_transpose,
    _slice,
    expand,
    movedim,
    narrow,
    permute,
    reshape,
    split,
    transpose,
    unsqueeze,
    view,
)
from aotjax.tensor import Tensor, method

__all__ = ["unsafe_chunk", "unsafe_split", "unflatten", "ravel", "repeat_interleave", "hstack", "vstack", "dstack",
           "column_stack", "row_stack", "tensor_split", "split_with_sizes", "hsplit", "vsplit", "dsplit",
           "broadcast_tensors", "broadcast_shapes", "meshgrid", "rot90", "fliplr", "flipud", "diag", "diag_embed",
           "diagflat", "block_diag", "cartesian_prod", "combinations", "atleast_1d", "atleast_2d", "atleast_3d",
           "narrow_copy"]


def _tensors(op: str, tensors) -> list:
    """`f(a, b)` and `f([a, b])` both mean the tensors a, b."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tensors[0]
    return [as_tensor(t) for t in tensors]


# -- unflatten / ravel -----------------------------------------------------------------------------------------
def unflatten(x, dim: int, sizes):
    """`x` with dim `dim` split into dims of `sizes` (one may be -1), a view.

    >>> aotjax.arange(6).unflatten(0, (2, -1)).shape
    (2, 3)
    """
    dim = canonical_dim(dim, x.ndim, "unflatten")
    sizes = tuple(int(s) for s in sizes)
    if not sizes:
        raise ShapeError(f"unflatten: sizes must be non-empty{where()}")
    size = x.shape[dim]
    if sizes.count(-1) > 1:
        raise ShapeError(f"unflatten: only one dimension of sizes {list(sizes)} can be inferred{where()}")
    known = math.prod(s for s in sizes if s != -1)
    if -1 in sizes:
        if known == 0 or size % known:
            raise ShapeError(f"unflatten: sizes {list(sizes)} don't multiply up to the size of dim {dim} ({size}) "
                             f"of the input{where()}")
        sizes = tuple(size // known if s == -1 else s for s in sizes)
    elif known != size:
        raise ShapeError(f"unflatten: sizes {list(sizes)} don't multiply up to the size of dim {dim} ({size}) of "
                         f"the input{where()}")
    return view(x, x.shape[:dim] + sizes + x.shape[dim + 1:])


def ravel(x):
    """`x` flattened to 1-d: a view when `x`'s strides allow, else a copy (as `reshape(-1)`).

    >>> aotjax.tensor([[1, 2], [3, 4]]).ravel()
    tensor([1, 2, 3, 4])
    """
    return reshape(x, -1)


# -- repeat_interleave -----------------------------------------------------------------------------------------
def repeat_interleave(x, repeats=None, dim=None, *, output_size=None):
    """Each element of `x` repeated `repeats` times along `dim` (`x` flattened first when `dim` is None);
    `repeats` an int or a 1-d int tensor (one count per element). With a tensor of counts the result's length
    depends on the data: under a trace pass `output_size` (their sum). `repeat_interleave(counts)` alone repeats
    `arange(len(counts))`.

    >>> aotjax.tensor([1, 2]).repeat_interleave(2)
    tensor([1, 1, 2, 2])
    >>> aotjax.repeat_interleave(aotjax.tensor([[1, 2], [3, 4]]), aotjax.tensor([1, 2]), dim=0)
    tensor([[1, 2],
            [3, 4],
            [3, 4]])
    """
    x = as_tensor(x)
    if repeats is None:  # torch.repeat_interleave(repeats)
        if x.ndim != 1 or category(x.dtype) != 1:
            raise ShapeError(f"repeat_interleave: the counts must be a 1-d integer tensor, got {x.dtype} of shape "
                             f"{list(x.shape)}{where()}")
        return repeat_interleave(arange(x.shape[0], dtype=x.dtype), x, 0, output_size=output_size)
    if dim is None:
        x, dim = reshape(x, -1), 0
    dim = canonical_dim(dim, max(x.ndim, 1), "repeat_interleave")
    if x.ndim == 0:
        x = reshape(x, 1)
    if isinstance(repeats, Tensor) and repeats.ndim == 0 and not isinstance(repeats, Tracer):
        repeats = repeats.item()
    if not isinstance(repeats, Tensor):
        if isinstance(repeats, (list, tuple)):
            return repeat_interleave(x, tensor(list(repeats), dtype=default_int_dtype()), dim,
                                     output_size=output_size)
        r = int(repeats)
        if r < 0:
            raise ShapeError(f"repeat_interleave: repeats must be non-negative, got {r}{where()}")
        if output_size is not None and output_size != x.shape[dim] * r:
            raise ShapeError(f"repeat_interleave: output_size {output_size} is not the result's length "
                             f"{x.shape[dim] * r}{where()}")
        shape = x.shape[:dim + 1] + (r,) + x.shape[dim + 1:]
        out = expand(unsqueeze(x, dim + 1), shape)
        return clone(reshape(out, x.shape[:dim] + (x.shape[dim] * r,) + x.shape[dim + 1:]), memory_format="contiguous")
    if category(repeats.dtype) != 1 or repeats.ndim > 1:
        raise ShapeError(f"repeat_interleave: repeats must be an int or a 0-d or 1-d integer tensor, got "
                         f"{repeats.dtype} of shape {list(repeats.shape)}{where()}")
    n = x.shape[dim]
    if repeats.ndim == 1 and repeats.shape[0] not in (1, n):
        raise ShapeError(f"repeat_interleave: repeats must have the same size as input along dim {dim} ({n}), "
                         f"got {repeats.shape[0]}{where()}")
    if repeats.ndim == 0 or repeats.shape[0] == 1:
        repeats = expand(reshape(repeats, 1), (n,))
    if isinstance(repeats, Tracer):
        if output_size is None:
            raise UnsupportedError(
                f"repeat_interleave: with a traced tensor of repeats the result's length depends on the data{where()}; "
                f"pass output_size= (the sum of the repeats), or give repeats as a Python int or list.")
        # NOTE: output position p comes from the first element whose running count exceeds p
        ends = cumsum(convert(repeats, default_int_dtype()), 0)
        positions = arange(int(output_size), dtype=default_int_dtype())
        index = convert(unsqueeze(ends, 0) <= unsqueeze(positions, 1), default_int_dtype()).sum(1)
    else:
        counts = np.asarray(repeats.numpy(), np.int64)
        if (counts < 0).any():
            raise ShapeError(f"repeat_interleave: repeats must be non-negative, got {counts.tolist()}{where()}")
        if output_size is not None and output_size != counts.sum():
            raise ShapeError(f"repeat_interleave: output_size {output_size} is not the sum of the repeats "
                             f"{int(counts.sum())}{where()}")
        index = tensor(np.repeat(np.arange(n), counts).astype(default_int_dtype()))
    return index_select(x, dim, index)


# -- stacks ------------------------------------------------------------------------------------------------------
def hstack(tensors):
    """The tensors joined column-wise: along dim 0 when all are 1-d (or 0-d), else dim 1.

    >>> aotjax.hstack([aotjax.tensor([1, 2]), aotjax.tensor([3])])
    tensor([1, 2, 3])
    """
    tensors = atleast_1d(list(tensors))
    return cat(tensors, 0 if tensors and tensors[0].ndim == 1 else 1)


def vstack(tensors):
    """The tensors (1-d ones as rows) joined along dim 0.

    >>> aotjax.vstack([aotjax.tensor([1, 2]), aotjax.tensor([3, 4])])
    tensor([[1, 2],
            [3, 4]])
    """
    return cat(atleast_2d(list(tensors)), 0)


row_stack = vstack


def dstack(tensors):
    """The tensors (made at least 3-d) joined along dim 2.

    >>> aotjax.dstack([aotjax.tensor([1, 2]), aotjax.tensor([3, 4])]).shape
    (1, 2, 2)
    """
    return cat(atleast_3d(list(tensors)), 2)


def column_stack(tensors):
    """The tensors joined along dim 1, 0-d and 1-d ones made columns first.

    >>> aotjax.column_stack([aotjax.tensor([1, 2]), aotjax.tensor([3, 4])])
    tensor([[1, 3],
            [2, 4]])
    """
    tensors = [as_tensor(t) for t in tensors]
    return cat([reshape(t, (t.numel(), 1)) if t.ndim <= 1 else t for t in tensors], 1)


# -- splits ------------------------------------------------------------------------------------------------------
def _int_list(value, op: str):
    if isinstance(value, Tensor):
        if isinstance(value, Tracer):
            raise UnsupportedError(f"{op}: the split points must be known when tracing, got a traced tensor{where()}; "
                                   f"pass a Python int or list.")
        if category(value.dtype) != 1 or value.ndim > 1:
            raise ShapeError(f"{op}: indices_or_sections must be an integer tensor with 0 or 1 dims, got "
                             f"{value.dtype} of shape {list(value.shape)}{where()}")
        return value.tolist()
    return value


def tensor_split(x, indices_or_sections, dim: int = 0):
    """`x` split along `dim` into views: into `n` parts as equal as possible (the first `size % n` one longer)
    for an int `n`, or at the listed indices.

    >>> [t.tolist() for t in aotjax.arange(5).tensor_split(2)]
    [[0, 1, 2], [3, 4]]
    >>> [t.tolist() for t in aotjax.arange(5).tensor_split([1, 4])]
    [[0], [1, 2, 3], [4]]
    """
    dim = canonical_dim(dim, x.ndim, "tensor_split")
    size = x.shape[dim]
    spec = _int_list(indices_or_sections, "tensor_split")
    if isinstance(spec, (list, tuple)):
        bounds = [0] + [int(i) for i in spec] + [size]
        out = []
        for start, stop in zip(bounds[:-1], bounds[1:]):
            start, stop, _ = slice(start, stop).indices(size)
            out.append(_slice(x, dim, start, max(start, stop)))
        return tuple(out)
    n = int(spec)
    if n <= 0:
        raise ShapeError(f"tensor_split: number of sections must be larger than 0, got {n}{where()}")
    sizes = [size // n + (i < size % n) for i in range(n)]
    return split_with_sizes(x, sizes, dim)


def split_with_sizes(x, split_sizes, dim: int = 0):
    """`x` split along `dim` into views of the listed sizes (which must add up to its size).

    >>> [t.tolist() for t in aotjax.arange(5).split_with_sizes([2, 3])]
    [[0, 1], [2, 3, 4]]
    """
    return split(x, [int(s) for s in split_sizes], dim)


def _split_by(op: str, x, spec, dim: int, min_ndim: int):
    if x.ndim < min_ndim:
        raise ShapeError(f"torch.{op} requires a tensor with at least {min_ndim} dimension, but got a tensor with "
                         f"{x.ndim} dimensions!{where()}")
    spec = _int_list(spec, op)
    if not isinstance(spec, (list, tuple)):
        n = int(spec)
        if n == 0 or x.shape[dim] % n:
            raise ShapeError(f"torch.{op} attempted to split along dimension {dim}, but the size of the dimension "
                             f"{x.shape[dim]} is not divisible by the split_size {n}!{where()}")
    return tensor_split(x, spec, dim)


def hsplit(x, indices_or_sections):
    """`x` split into views along dim 1 (dim 0 when 1-d): into equal parts for an int, at the listed indices
    for a list.

    >>> [t.tolist() for t in aotjax.arange(4).hsplit(2)]
    [[0, 1], [2, 3]]
    """
    return _split_by("hsplit", x, indices_or_sections, 0 if x.ndim == 1 else 1, 1)


def vsplit(x, indices_or_sections):
    """`x` (at least 2-d) split into views along dim 0.

    >>> [t.shape for t in aotjax.zeros(4, 2).vsplit([1])]
    [(1, 2), (3, 2)]
    """
    return _split_by("vsplit", x, indices_or_sections, 0, 2)


def dsplit(x, indices_or_sections):
    """`x` (at least 3-d) split into views along dim 2.

    >>> [t.shape for t in aotjax.zeros(1, 2, 4).dsplit(2)]
    [(1, 2, 2), (1, 2, 2)]
    """
    return _split_by("dsplit", x, indices_or_sections, 2, 3)


# -- broadcasting --------------------------------------------------------------------------------------------------
def broadcast_shapes(*shapes):
    """The shape the given shapes (ints or sequences) broadcast to.

    >>> aotjax.broadcast_shapes((2, 1), (3,))
    (2, 3)
    """
    shapes = [(int(s),) if isinstance(s, (int, np.integer)) else tuple(int(d) for d in s) for s in shapes]
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        for i, d in enumerate(s, ndim - len(s)):
            if d < 0:
                raise ShapeError(f"broadcast_shapes: trying to create tensor with negative dimension {d}: "
                                 f"{[list(s) for s in shapes]}{where()}")
            if d != 1 and out[i] not in (1, d):
                raise ShapeError(f"broadcast_shapes: shape mismatch: objects cannot be broadcast to a single shape "
                                 f"({[list(s) for s in shapes]}){where()}")
            if d != 1:
                out[i] = d
    return tuple(out)


def broadcast_tensors(*tensors):
    """The tensors expanded to their common broadcast shape (views).

    >>> a, b = aotjax.broadcast_tensors(aotjax.tensor([[1], [2]]), aotjax.tensor([3, 4, 5]))
    >>> b.shape
    (2, 3)
    """
    tensors = _tensors("broadcast_tensors", tensors)
    shape = broadcast_shapes(*(t.shape for t in tensors))
    return tuple(expand(t, shape) for t in tensors)


def meshgrid(*tensors, indexing: str | None = None):
    """Coordinate grids from 0-d or 1-d tensors: output `i` holds `tensors[i]` along dim `i`, expanded over the
    others (views). `indexing="xy"` swaps the first two grid dims (Cartesian, as NumPy's default); the default is
    `"ij"` (matrix indexing), PyTorch's.

    >>> x, y = aotjax.meshgrid(aotjax.tensor([1, 2]), aotjax.tensor([3, 4, 5]), indexing="ij")
    >>> x.shape, y[1].tolist()
    ((2, 3), [3, 4, 5])
    """
    tensors = _tensors("meshgrid", tensors)
    indexing = "ij" if indexing is None else indexing
    if indexing not in ("ij", "xy"):
        raise ValueError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}{where()}")
    if not tensors:
        raise ShapeError(f"meshgrid: expects a non-empty list of tensors{where()}")
    for t in tensors:
        if t.ndim > 1:
            raise ShapeError(f"meshgrid: expects 0D or 1D tensors, got a tensor of shape {list(t.shape)}{where()}")
        if t.dtype != tensors[0].dtype:
            raise ShapeError(f"meshgrid: expects all tensors to have the same dtype, got {tensors[0].dtype} and "
                             f"{t.dtype}{where()}")
    swap = indexing == "xy" and len(tensors) >= 2
    if swap:
        tensors = [tensors[1], tensors[0], *tensors[2:]]
    shape = tuple(t.numel() for t in tensors)
    grids = [expand(reshape(t, tuple(-1 if j == i else 1 for j in range(len(tensors)))), shape)
             for i, t in enumerate(tensors)]
    if swap:  # NOTE: the outputs keep the (swapped) grid shape; only their order comes back
        grids[0], grids[1] = grids[1], grids[0]
    return tuple(grids)


# -- rotations and flips ---------------------------------------------------------------------------------------------
def rot90(x, k: int = 1, dims=(0, 1)):
    """`x` rotated by 90 degrees `k` times in the plane of `dims`, from the first towards the second (a copy).

    >>> aotjax.tensor([[1, 2], [3, 4]]).rot90()
    tensor([[2, 4],
            [1, 3]])
    """
    dims = tuple(dims)
    if len(dims) != 2:
        raise ShapeError(f"rot90: expected total rotation dims == 2, but got dims = {len(dims)}{where()}")
    if x.ndim < 2:
        raise ShapeError(f"rot90: expected total dims >= 2, but got total dims = {x.ndim}{where()}")
    d0, d1 = (canonical_dim(d, x.ndim, "rot90") for d in dims)
    if d0 == d1:
        raise ShapeError(f"rot90: expected rotation dims to be different, but got dim0 = {d0} and dim1 = {d1}"
                         f"{where()}")
    k = int(k) % 4
    if k == 1:
        return transpose(flip(x, d1), d0, d1)
    if k == 2:
        return flip(x, d0, d1)
    if k == 3:
        return transpose(flip(x, d0), d0, d1)
    return clone(x, memory_format="contiguous")


def fliplr(x):
    """`x` (at least 2-d) reversed along dim 1 (a copy).

    >>> aotjax.tensor([[1, 2], [3, 4]]).fliplr()
    tensor([[2, 1],
            [4, 3]])
    """
    if x.ndim < 2:
        raise ShapeError(f"fliplr: input must be >= 2-d, got a tensor of shape {list(x.shape)}{where()}")
    return flip(x, 1)


def flipud(x):
    """`x` (at least 1-d) reversed along dim 0 (a copy).

    >>> aotjax.tensor([[1, 2], [3, 4]]).flipud()
    tensor([[3, 4],
            [1, 2]])
    """
    if x.ndim < 1:
        raise ShapeError(f"flipud: input must be >= 1-d, got a 0-d tensor{where()}")
    return flip(x, 0)


# -- diagonal matrices ----------------------------------------------------------------------------------------------
def diag_embed(x, offset: int = 0, dim1: int = -2, dim2: int = -1):
    """A tensor whose diagonals (`offset`, in the plane of output dims `dim1`, `dim2`) hold the last dim of `x`,
    zeros elsewhere (a copy).

    >>> aotjax.tensor([1, 2]).diag_embed()
    tensor([[1, 0],
            [0, 2]])
    """
    x = as_tensor(x)
    if x.ndim == 0:
        raise ShapeError(f"diag_embed: input must be at least 1-d, got a 0-d tensor{where()}")
    ndim = x.ndim + 1
    d1, d2 = canonical_dim(dim1, ndim, "diag_embed"), canonical_dim(dim2, ndim, "diag_embed")
    if d1 == d2:
        raise ShapeError(f"diag_embed: diagonal dimensions cannot be identical {dim1}, {dim2}{where()}")
    n = x.shape[-1] + abs(int(offset))
    rest = iter(x.shape[:-1])
    shape = tuple(n if i in (d1, d2) else next(rest) for i in range(ndim))
    return diagonal_scatter(zeros(shape, dtype=x.dtype), x, int(offset), d1, d2)


def diag(x, diagonal: int = 0):
    """For a 1-d `x`, the square matrix with `x` on diagonal `diagonal`; for a 2-d `x`, a copy of that diagonal.

    >>> aotjax.tensor([[1, 2], [3, 4]]).diag()
    tensor([1, 4])
    >>> aotjax.tensor([1, 2]).diag(1)
    tensor([[0, 1, 0],
            [0, 0, 2],
            [0, 0, 0]])
    """
    x = as_tensor(x)
    if x.ndim == 1:
        return diag_embed(x, diagonal)
    if x.ndim == 2:
        return clone(x.diagonal(int(diagonal)), memory_format="contiguous")
    raise ShapeError(f"diag: supports 1D or 2D tensors, got {x.ndim}D{where()}")


def diagflat(x, offset: int = 0):
    """The square matrix with the flattened `x` on diagonal `offset` (a copy).

    >>> aotjax.tensor([[1, 2]]).diagflat()
    tensor([[1, 0],
            [0, 2]])
    """
    return diag_embed(reshape(as_tensor(x), -1), offset)


def block_diag(*tensors):
    """The block-diagonal matrix of the tensors (0-d taken as 1x1, 1-d as one row), promoted to one dtype.

    >>> aotjax.block_diag(aotjax.tensor([[1, 2]]), aotjax.tensor(3))
    tensor([[1, 2, 0],
            [0, 0, 3]])
    """
    tensors = [as_tensor(t) for t in tensors]
    for i, t in enumerate(tensors):
        if t.ndim > 2:
            raise ShapeError(f"block_diag: input tensors must have 2 or fewer dimensions, input {i} has {t.ndim} "
                             f"dimensions{where()}")
    if not tensors:
        return zeros((1, 0))
    blocks = [reshape(t, (1, -1)) if t.ndim < 2 else t for t in promote(*tensors)]
    dtype, width, rows, before = blocks[0].dtype, sum(b.shape[1] for b in blocks), [], 0
    for b in blocks:
        parts = [zeros((b.shape[0], before), dtype=dtype), b, zeros((b.shape[0], width - before - b.shape[1]),
                                                                    dtype=dtype)]
        rows.append(cat(parts, 1))
        before += b.shape[1]
    return cat(rows, 0)


# -- products of index sets -----------------------------------------------------------------------------------------
def cartesian_prod(*tensors):
    """All tuples with one element from each 1-d tensor, in lexicographic order, as rows (one tensor: itself).

    >>> aotjax.cartesian_prod(aotjax.tensor([1, 2]), aotjax.tensor([3, 4]))
    tensor([[1, 3],
            [1, 4],
            [2, 3],
            [2, 4]])
    """
    tensors = _tensors("cartesian_prod", tensors)
    for t in tensors:
        if t.ndim != 1:
            raise ShapeError(f"cartesian_prod: expects 1D tensors, got a tensor of shape {list(t.shape)}{where()}")
    if len(tensors) == 1:
        return tensors[0]
    return stack([reshape(g, -1) for g in meshgrid(tensors, indexing="ij")], 1)


def combinations(x, r: int = 2, with_replacement: bool = False):
    """The length-`r` combinations of the elements of the 1-d `x` (with repeats when `with_replacement`), as
    rows, in the order of `itertools.combinations`.

    >>> aotjax.combinations(aotjax.tensor([1, 2, 3]))
    tensor([[1, 2],
            [1, 3],
            [2, 3]])
    """
    x = as_tensor(x)
    if x.ndim != 1:
        raise ShapeError(f"combinations: expects a 1D vector, got a tensor of shape {list(x.shape)}{where()}")
    r = int(r)
    if r < 0:
        raise ShapeError(f"combinations: r must be non-negative, got {r}{where()}")
    if r == 0:
        return zeros((0,), dtype=x.dtype)
    choose = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    rows = list(choose(range(x.shape[0]), r))
    index = tensor(np.asarray(rows, default_int_dtype()).reshape(-1))
    return view(index_select(x, 0, index), (len(rows), r))


# -- atleast_Nd ------------------------------------------------------------------------------------------
def _atleast(op: str, tensors, fix):
    if len(tensors) == 1 and not isinstance(tensors[0], (list, tuple)):
        return fix(as_tensor(tensors[0]))
    return tuple(fix(t) for t in _tensors(op, tensors))


def atleast_1d(*tensors):
    """The tensor (or each of several) viewed as at least 1-d; others returned as they are.

    >>> aotjax.atleast_1d(aotjax.tensor(1.0))
    tensor([1.])
    """
    return _atleast("atleast_1d", tensors, lambda t: reshape(t, (1,)) if t.ndim == 0 else t)


def atleast_2d(*tensors):
    """The tensor (or each of several) viewed as at least 2-d (a 1-d one as a row).

    >>> aotjax.atleast_2d(aotjax.tensor([1, 2])).shape
    (1, 2)
    """
    def fix(t):
        return reshape(t, (1, 1)) if t.ndim == 0 else unsqueeze(t, 0) if t.ndim == 1 else t
    return _atleast("atleast_2d", tensors, fix)


def atleast_3d(*tensors):
    """The tensor (or each of several) viewed as at least 3-d: 0-d as (1, 1, 1), (n,) as (1, n, 1), (m, n)
    as (m, n, 1).

    >>> aotjax.atleast_3d(aotjax.zeros(2, 3)).shape
    (2, 3, 1)
    """
    def fix(t):
        if t.ndim == 0:
            return reshape(t, (1, 1, 1))
        if t.ndim == 1:
            return unsqueeze(unsqueeze(t, 0), -1)
        return unsqueeze(t, -1) if t.ndim == 2 else t
    return _atleast("atleast_3d", tensors, fix)


# -- Tensor.unfold, narrow_copy, mH / H ----------------------------------------------------------------------
def _windows(length: int, size: int, step: int) -> np.ndarray:
    """The positions along the unfolded dim, window by window: `[n, size]`."""
    n = (length - size) // step + 1
    return np.arange(n)[:, None] * step + np.arange(size)


def _unfold_shape(x, *, dim, size, step):
    n = (x.shape[dim] - size) // step + 1
    return x.shape[:dim] + (n,) + x.shape[dim + 1:] + (size,)


def _unfold_lower(x, *, dim, size, step):
    return jnp.moveaxis(jnp.take(x, _windows(x.shape[dim], size, step), axis=dim), dim + 1, -1)


def _unfold_scatter_lower(b, y, *, dim, size, step):
    index = _windows(b.shape[dim], size, step).reshape(-1)
    y = jnp.moveaxis(y, -1, dim + 1).reshape(b.shape[:dim] + (index.size,) + b.shape[dim + 1:])
    return b.at[(slice(None),) * dim + (index,)].set(y.astype(b.dtype))


def _unfold_inverse(apply, base, y, *, dim, size, step):
    if size > step and (base.shape[dim] - size) // step > 0:
        raise AliasingError(f"unfold: cannot write through windows that overlap (size {size} > step {step}): more "
                            f"than one element of the written tensor refers to a single memory location{where()}. "
                            f"Call .clone() on the unfolded tensor before writing to it.")
    return apply(unfold_scatter_p, base, y, dim=dim, size=size, step=step)


def _unfold_strides(shape, strides, offset, /, *, dim, size, step):
    return strides[:dim] + (step * strides[dim],) + strides[dim + 1:] + (strides[dim],), offset


def _unfold_transpose(ct, x, *, dim, size, step):
    """Each window's cotangent added back at its positions (overlapping windows accumulate)."""
    index = _windows(x.aval.shape[dim], size, step).reshape(-1)
    src = reshape(movedim(ct, -1, dim + 1), x.aval.shape[:dim] + (index.size,) + x.aval.shape[dim + 1:])
    return index_add_p.bind(instantiate(Zero(x.aval)), tensor(index.astype(default_int_dtype())), src, dim=dim,
                            alpha=1)


unfold_p = standard_primitive("unfold", _unfold_shape, lambda x, **params: x.dtype, _unfold_lower, kind=Kind.VIEW)
unfold_scatter_p = standard_primitive("unfold_scatter", lambda b, y, **params: b.shape, lambda b, y, **params: b.dtype,
                                      _unfold_scatter_lower, recompute=Recompute.CHEAP, flops=output_size_flops)
unfold_p.view_inverse = _unfold_inverse
unfold_p.view_strides = _unfold_strides
deflinear(unfold_p)
deflinear_transpose(unfold_p, _unfold_transpose)
deflinear(unfold_scatter_p)
_scatter_transpose(unfold_p, unfold_scatter_p)  # NOTE: unfold_scatter only writes windows that do not overlap


def _batch_unfold(axis_size, vals, bdims, *, dim, size, step):
    """The windows of each example: the batch axis first, the unfolded dim shifted past it."""
    (x,), (d,) = vals, bdims
    return [unfold_p.bind(move_batch_axis(x, d, 0), dim=dim + 1, size=size, step=step)], [0]


def _batch_unfold_scatter(axis_size, vals, bdims, *, dim, size, step):
    """Each example's windows written into its base: both batched at axis 0 (broadcast there if unbatched)."""
    (b, y), (db, dy) = vals, bdims
    b, y = bdim_at_front(b, db, axis_size), bdim_at_front(y, dy, axis_size)
    return [unfold_scatter_p.bind(b, y, dim=dim + 1, size=size, step=step)], [0]


batching_rules[unfold_p] = _batch_unfold
batching_rules[unfold_scatter_p] = _batch_unfold_scatter


def _unfold(x, dimension: int, size: int, step: int):
    """The windows of `size` elements every `step` along `dimension`, as a new last dim (that dim becoming the
    number of windows): a view, as `torch.Tensor.unfold`. Writing through overlapping windows (`size > step`)
    raises, as most in-place ops do in torch; clone first.

    >>> x = aotjax.arange(5)
    >>> x.unfold(0, 3, 1)
    tensor([[0, 1, 2],
            [1, 2, 3],
            [2, 3, 4]])
    >>> x.unfold(0, 2, 2).zero_()
    tensor([[0, 0],
            [0, 0]])
    >>> x
    tensor([0, 0, 0, 0, 4])
    """
    if x.ndim == 0:
        return view(_unfold(reshape(x, (1,)), 0, size, step), (int(size),))
    dim = canonical_dim(dimension, x.ndim, "unfold")
    size, step, length = int(size), int(step), x.shape[dim]
    if size > length or size < 0:
        raise ShapeError(f"unfold: maximum size for tensor at dimension {dim} is {length} but size is {size}"
                         f"{where()}")
    if step <= 0:
        raise ShapeError(f"unfold: step is {step} but must be > 0{where()}")
    return unfold_p.bind(x, dim=dim, size=size, step=step)


def narrow_copy(x, dim: int, start: int, length: int):
    """A contiguous copy of `x.narrow(dim, start, length)`.

    >>> aotjax.tensor([1, 2, 3, 4]).narrow_copy(0, 1, 2)
    tensor([2, 3])
    """
    return clone(narrow(x, dim, start, length), memory_format="contiguous")


def _mH(x):
    """The last two dims swapped and conjugated (a view, as torch's)."""
    if x.ndim < 2:
        raise ShapeError(f"tensor.mH is only supported on matrices or batches of matrices. Got {x.ndim}-D tensor."
                         f"{where()}")
    return conj(transpose(x, -2, -1))


def _H(x):
    """The matrix transposed and conjugated (a view; 2-d tensors only)."""
    if x.ndim != 2:
        raise ShapeError(f"tensor.H is only supported on matrices (2-D tensors). Got {x.ndim}-D tensor.{where()}")
    return conj(permute(x, (1, 0)))


for _op in (unflatten, ravel, repeat_interleave, tensor_split, split_with_sizes, hsplit, vsplit, dsplit, rot90, fliplr,
            flipud, diag, diag_embed, diagflat, narrow_copy):
    method(_op)
method(_unfold, "unfold")
method(movedim, "moveaxis")
method(transpose, "swapaxes", "swapdims")
method(property(_mH), "mH")
method(property(_H), "H")


def unsafe_chunk(x, chunks: int, dim: int = 0):
    """`chunk` (PyTorch's form that skips autograd's version checks; the same views here).

    >>> [c.tolist() for c in aotjax.unsafe_chunk(aotjax.tensor([1, 2, 3]), 2)]
    [[1, 2], [3]]
    """
    return views.chunk(x, chunks, dim)


def unsafe_split(x, split_size, dim: int = 0):
    """`split` (PyTorch's form that skips autograd's version checks; the same views here).

    >>> [c.tolist() for c in aotjax.unsafe_split(aotjax.tensor([1, 2, 3]), 2)]
    [[1, 2], [3]]
    """
    return views.split(x, split_size, dim)


for _fn in (unsafe_chunk, unsafe_split):
    method(_fn)


# -- the *_copy forms of the views -------------------------------------------------------------------------------
def _copy_form(view_fn, name: str, example: str, expected: str):
    """`torch.<view>_copy`: the view's values in a new contiguous tensor (sequences of views: a tuple of them)."""
    def copy_op(x, *args, **kwargs):
        out = view_fn(x, *args, **kwargs)
        if isinstance(out, (tuple, list)):
            return tuple(clone(o, memory_format="contiguous") for o in out)
        return clone(out, memory_format="contiguous")
    copy_op.__name__ = copy_op.__qualname__ = name
    copy_op.__doc__ = (f"`{view_fn.__name__.lstrip('_')}` as a copy: the view's values in a new contiguous tensor "
                       f"that shares nothing with `x`.\n\n    >>> aotjax.{name}({example})\n    {expected}\n    ")
    return copy_op


_COPIES = {
    "alias_copy": (views.alias, "aotjax.tensor([1.0])", "tensor([1.])"),
    "t_copy": (views.t, "aotjax.tensor([[1, 2]])", "tensor([[1],\n            [2]])"),
    "transpose_copy": (views.transpose, "aotjax.tensor([[1, 2]]), 0, 1", "tensor([[1],\n            [2]])"),
    "permute_copy": (views.permute, "aotjax.tensor([[1, 2]]), (1, 0)", "tensor([[1],\n            [2]])"),
    "diagonal_copy": (views.diagonal, "aotjax.tensor([[1, 2], [3, 4]])", "tensor([1, 4])"),
    "expand_copy": (views.expand, "aotjax.tensor([1, 2]), (2, 2)", "tensor([[1, 2],\n            [1, 2]])"),
    "squeeze_copy": (views.squeeze, "aotjax.tensor([[1, 2]])", "tensor([1, 2])"),
    "unsqueeze_copy": (views.unsqueeze, "aotjax.tensor([1, 2]), 0", "tensor([[1, 2]])"),
    "view_copy": (views.view, "aotjax.tensor([1, 2]), 2, 1", "tensor([[1],\n            [2]])"),
    "unbind_copy": (views.unbind, "aotjax.tensor([[1, 2]])", "(tensor([1, 2]),)"),
    "unfold_copy": (Tensor.unfold, "aotjax.tensor([1, 2, 3]), 0, 2, 1", "tensor([[1, 2],\n            [2, 3]])"),
    "split_with_sizes_copy": (split_with_sizes, "aotjax.tensor([1, 2, 3]), [1, 2]", "(tensor([1]), tensor([2, 3]))"),
}
for _name, (_view, _example, _expected) in _COPIES.items():
    globals()[_name] = _copy_form(_view, _name, _example, _expected)
    __all__.append(_name)
