"""Shape ops that make new values (never views): concatenation, stacking, flips, rolls, repeats and triangular
masks (`clone`, which they build on, is aotjax/ops/shape/clone.py's)."""
from __future__ import annotations

import math

import jax.numpy as jnp

from aotjax.core.avals import ShapedArray
from aotjax.core.errors import ShapeError
from aotjax.core.primitive import Primitive, Recompute, output_size_flops
from aotjax.core.source_info import where
from aotjax.interpreters.ad_util import unbroadcast
from aotjax.interpreters.batching import batching_rules, bdim_at_front, moveaxis, shift_axis
from aotjax.interpreters.jvp import deflinear
from aotjax.interpreters.transpose import deflinear_transpose, is_undefined, transpose_rules
from aotjax.ops.base.combinators import standard_primitive
from aotjax.ops.base.data import as_tensor, promote
from aotjax.ops.base.frontend import canonical_dim, canonical_dims, normalize_shape
from aotjax.ops.base.layout import preserve_layout
from aotjax.ops.shape.clone import _keep_dtype
from aotjax.ops.shape.views import slice_p, unsqueeze, view_p
from aotjax.tensor import method

__all__ = ["cat", "concat", "concatenate", "stack", "flip", "roll", "repeat", "tile", "tril", "triu"]


# -- batching helpers (vmap) -----------------------------------------------------------
def _batch_triangle(prim):
    def rule(axis_size, vals, bdims, *, diagonal):
        """The triangle of each example's last two dims: the batch axis moved first when it is one of them."""
        (x,), (d,) = vals, bdims
        if d >= x.ndim - 2:
            x, d = moveaxis(x, d, 0), 0
        return [prim.bind(x, diagonal=diagonal)], [d]
    return rule


# -- cat / stack -------------------------------------------------------------------------------
def _cat_shape(*xs, dim):
    first = xs[0].shape
    for x in xs[1:]:
        if x.ndim != len(first) or any(a != b for i, (a, b) in enumerate(zip(x.shape, first, strict=True)) if i != dim):
            raise ShapeError(f"cat: tensors must have the same shape except in dimension {dim}, got "
                             f"{', '.join(str(list(x.shape)) for x in xs)}")
    return first[:dim] + (sum(x.shape[dim] for x in xs),) + first[dim + 1:]


cat_p = standard_primitive("cat", _cat_shape, lambda *xs, dim: xs[0].dtype,
                           lambda *xs, dim: jnp.concatenate(xs, axis=dim),
                           recompute=Recompute.CHEAP, flops=output_size_flops,
                           linear=True)  # in every operand: see `_cat_transpose`
deflinear(cat_p)


def _cat_transpose(ct, *xs, dim):
    cts, start = [], 0
    for x in xs:
        stop = start + x.shape[dim]
        cts.append(slice_p.bind(ct, dim=dim, start=start, stop=stop, step=1) if is_undefined(x) else None)
        start = stop
    return cts


transpose_rules[cat_p] = _cat_transpose


def cat(tensors, dim: int = 0):
    """The tensors joined along an existing dim `dim`, with PyTorch's dtype promotion.

    >>> aotjax.cat([aotjax.tensor([1, 2]), aotjax.tensor([3])])
    tensor([1, 2, 3])
    """
    tensors = [as_tensor(x) for x in tensors]
    if not tensors:
        raise ValueError(f"cat: expected a non-empty sequence of tensors{where()}")
    nonempty = [x for x in tensors if x.shape != (0,)] or tensors[:1]  # PyTorch skips legacy empty 1-d tensors
    if any(x.ndim == 0 for x in nonempty):
        raise ShapeError(f"cat: zero-dimensional tensors cannot be concatenated (got shapes "
                         f"{[list(x.shape) for x in tensors]}){where()}; use stack")
    dim = canonical_dim(dim, nonempty[0].ndim, "cat")
    return cat_p.bind(*promote(*nonempty), dim=dim)


concat = concatenate = cat


def stack(tensors, dim: int = 0):
    """The tensors (all of one shape) joined along a new dim `dim`.

    >>> aotjax.stack([aotjax.tensor([1, 2]), aotjax.tensor([3, 4])], dim=1)
    tensor([[1, 3],
            [2, 4]])
    """
    tensors = [as_tensor(x) for x in tensors]
    if not tensors:
        raise ValueError(f"stack: expected a non-empty sequence of tensors{where()}")
    shapes = {tuple(x.shape) for x in tensors}
    if len(shapes) != 1:
        raise ShapeError(f"stack: expects each tensor to be of equal shape, got "
                         f"{[list(x.shape) for x in tensors]}{where()}")
    dim = canonical_dim(dim, tensors[0].ndim + 1, "stack")
    return cat_p.bind(*promote(*(unsqueeze(x, dim) for x in tensors)), dim=dim)


def _batch_cat(axis_size, vals, bdims, *, dim):
    """`cat` with every operand batched at axis 0 (an unbatched one broadcast there), along the shifted dim."""
    operands = [bdim_at_front(v, d, axis_size) for v, d in zip(vals, bdims)]
    return [cat_p.bind(*operands, dim=dim + 1)], [0]


batching_rules[cat_p] = _batch_cat


# -- flip / roll -------------------------------------------------------------------------------
flip_p = standard_primitive("flip", lambda x, *, dims: x.shape, _keep_dtype, lambda x, *, dims: jnp.flip(x, dims),
                            recompute=Recompute.CHEAP, flops=output_size_flops)
flip_p.layout_rule = preserve_layout  # NOTE: PyTorch's flip writes into `empty_like(x)`: x's dense layout
deflinear(flip_p)
deflinear_transpose(flip_p, lambda ct, x, *, dims: flip_p.bind(ct, dims=dims))


def flip(x, *dims_, dims=None):
    """`x` reversed along `dims` (given as arguments or as the keyword `dims=`).

    >>> aotjax.tensor([[1, 2], [3, 4]]).flip(-1)
    tensor([[2, 1],
            [4, 3]])
    >>> aotjax.flip(aotjax.tensor([1, 2]), dims=[0])
    tensor([2, 1])
    """
    if dims is not None and dims_:
        raise TypeError(f"flip: got dims both as arguments {list(dims_)} and as the keyword dims={dims}{where()}")
    dims = (dims,) if isinstance(dims, int) else dims_ if dims is None else tuple(dims)
    dims = canonical_dims(normalize_shape(dims), x.ndim, "flip")
    return flip_p.bind(x, dims=dims if x.ndim else ())  # NOTE: a 0-d tensor takes dim 0/-1, as in torch


roll_p = standard_primitive("roll", lambda x, *, shifts, dims: x.shape, _keep_dtype,
                            lambda x, *, shifts, dims: jnp.roll(x, shifts, dims),
                            recompute=Recompute.CHEAP, flops=output_size_flops)
deflinear(roll_p)
deflinear_transpose(roll_p, lambda ct, x, *, shifts, dims: roll_p.bind(
    ct, shifts=-shifts if isinstance(shifts, int) else tuple(-s for s in shifts), dims=dims))


def roll(x, shifts, dims=None):
    """`x` rolled by `shifts` along `dims` (elements pushed off the end come back at the start); with no
    dims, the flattened tensor is rolled.

    >>> aotjax.tensor([1, 2, 3, 4]).roll(1)
    tensor([4, 1, 2, 3])
    """
    shifts = (shifts,) if isinstance(shifts, int) else tuple(int(s) for s in shifts)
    if dims is None:
        if len(shifts) != 1:
            raise ShapeError(f"roll: without dims, shifts must be one int, got {list(shifts)}{where()}")
        return roll_p.bind(x, shifts=shifts[0], dims=None)
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    if len(dims) != len(shifts):
        raise ShapeError(f"roll: shifts {list(shifts)} and dims {list(dims)} must have the same length{where()}")
    return roll_p.bind(x, shifts=shifts, dims=tuple(canonical_dim(d, x.ndim, "roll") for d in dims))


def _batch_flip(axis_size, vals, bdims, *, dims):
    (x,), (d,) = vals, bdims
    return [flip_p.bind(x, dims=tuple(shift_axis(a, d) for a in dims))], [d]


batching_rules[flip_p] = _batch_flip


def _batch_roll(axis_size, vals, bdims, *, shifts, dims):
    """`roll` along the shifted dims; with no dims (each example flattened, rolled, reshaped back), per example
    with the batch axis first."""
    (x,), (d,) = vals, bdims
    if dims is None:
        x = moveaxis(x, d, 0)
        shape = tuple(x.shape)
        flat = view_p.bind(x, shape=(axis_size, math.prod(shape[1:])))
        return [view_p.bind(roll_p.bind(flat, shifts=shifts, dims=(1,)), shape=shape)], [0]
    return [roll_p.bind(x, shifts=shifts, dims=tuple(shift_axis(a, d) for a in dims))], [d]


batching_rules[roll_p] = _batch_roll


# -- repeat / tile -----------------------------------------------------------------------------
def _repeat_shape(x, *, repeats):
    padded = (1,) * (len(repeats) - x.ndim) + x.shape
    return tuple(a * b for a, b in zip(padded, repeats, strict=True))


repeat_p = standard_primitive("repeat", _repeat_shape, _keep_dtype, lambda x, *, repeats: jnp.tile(x, repeats),
                              recompute=Recompute.CHEAP, flops=output_size_flops)
deflinear(repeat_p)


def _repeat_transpose(ct, x, *, repeats):
    # NOTE: a dim of size n tiled r times reads as [r, n]: the cotangent sums over the r copies.
    padded = (1,) * (len(repeats) - x.ndim) + tuple(x.shape)
    tiles = view_p.bind(ct, shape=tuple(d for r, n in zip(repeats, padded) for d in (r, n)))
    summed = unbroadcast(tiles, ShapedArray(tuple(d for n in padded for d in (1, n)), ct.dtype))
    return view_p.bind(summed, shape=tuple(x.shape))


deflinear_transpose(repeat_p, _repeat_transpose)


def repeat(x, *sizes):
    """`x` tiled `sizes[i]` times along each dim (extra leading sizes add dims), as `torch.Tensor.repeat`.

    >>> aotjax.tensor([1, 2]).repeat(2, 2)
    tensor([[1, 2, 1, 2],
            [1, 2, 1, 2]])
    """
    sizes = normalize_shape(sizes)
    if len(sizes) < x.ndim or any(s < 0 for s in sizes):
        raise ShapeError(f"repeat: expects at least as many non-negative repeats as dims: {list(sizes)} for a "
                         f"tensor of shape {list(x.shape)}{where()}")
    return repeat_p.bind(x, repeats=sizes)


def tile(x, *dims):
    """`x` tiled `dims[i]` times along each dim; missing leading repeats count as 1.

    >>> aotjax.tensor([[1, 2]]).tile(2)
    tensor([[1, 2, 1, 2]])
    """
    dims = normalize_shape(dims)
    return repeat(x, (1,) * (x.ndim - len(dims)) + dims)


def _batch_repeat(axis_size, vals, bdims, *, repeats):
    """`repeat` (tile) of each example: the batch axis first, repeated once, after the example padded to the
    repeats' length."""
    (x,), (d,) = vals, bdims
    x = moveaxis(x, d, 0)
    pad = len(repeats) - (x.ndim - 1)
    if pad > 0:
        x = view_p.bind(x, shape=(axis_size,) + (1,) * pad + tuple(x.shape[1:]))
    return [repeat_p.bind(x, repeats=(1,) * (x.ndim - len(repeats)) + tuple(repeats))], [0]


batching_rules[repeat_p] = _batch_repeat


# -- tril / triu -------------------------------------------------------------------------------
def _triangle(name: str, fn) -> Primitive:
    def shape_rule(x, *, diagonal):
        if x.ndim < 2:
            raise ShapeError(f"{name}: input must have at least 2 dimensions, got shape {list(x.shape)}")
        return x.shape
    return standard_primitive(name, shape_rule, _keep_dtype, lambda x, *, diagonal: fn(x, diagonal),
                              recompute=Recompute.CHEAP, flops=output_size_flops)


tril_p = _triangle("tril", jnp.tril)
deflinear(tril_p)
deflinear_transpose(tril_p, lambda ct, x, *, diagonal: tril_p.bind(ct, diagonal=diagonal))
triu_p = _triangle("triu", jnp.triu)
deflinear(triu_p)
deflinear_transpose(triu_p, lambda ct, x, *, diagonal: triu_p.bind(ct, diagonal=diagonal))


def tril(x, diagonal: int = 0):
    """The lower triangle of the last two dims of `x` (entries above diagonal `diagonal` zeroed).

    >>> aotjax.tensor([[1, 2], [3, 4]]).tril()
    tensor([[1, 0],
            [3, 4]])
    """
    return tril_p.bind(x, diagonal=int(diagonal))


def triu(x, diagonal: int = 0):
    """The upper triangle of the last two dims of `x` (entries below diagonal `diagonal` zeroed).

    >>> aotjax.tensor([[1, 2], [3, 4]]).triu(1)
    tensor([[0, 2],
            [0, 0]])
    """
    return triu_p.bind(x, diagonal=int(diagonal))


def tril_(x, diagonal: int = 0):
    """In-place `tril`: zeroes the entries of `x` above diagonal `diagonal`; returns `x`.

    >>> x = aotjax.ones(2, 2)
    >>> x.tril_() is x, x.tolist()
    (True, [[1.0, 0.0], [1.0, 1.0]])
    """
    return x.copy_(tril(x, diagonal))


def triu_(x, diagonal: int = 0):
    """In-place `triu`: zeroes the entries of `x` below diagonal `diagonal`; returns `x`.

    >>> aotjax.ones(2, 2).triu_(1).tolist()
    [[0.0, 1.0], [0.0, 0.0]]
    """
    return x.copy_(triu(x, diagonal))


batching_rules[tril_p] = _batch_triangle(tril_p)


batching_rules[triu_p] = _batch_triangle(triu_p)


# -- Tensor methods --------------------------------------------------------------------------------
for _op in (flip, roll, repeat, tile, tril, triu, tril_, triu_):
    method(_op)
