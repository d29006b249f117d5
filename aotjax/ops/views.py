"""View primitives: outputs that alias their operand. Each carries its lowering (reading the view),
its inverse (writing through it) and the strides PyTorch would give it."""
from __future__ import annotations

import jax.numpy as jnp
from jax import lax

from aotjax.core.primitive import Kind, Primitive
from aotjax.ops._combinators import standard_primitive
from aotjax.ops._frontend import canonical_dim, normalize_shape

__all__ = ["select", "permute", "transpose", "t", "t_", "unbind"]

# -- select ------------------------------------------------------------------------------------
select_p = standard_primitive(
    "select", lambda x, *, dim, index: x.shape[:dim] + x.shape[dim + 1:], lambda x, *, dim, index: x.dtype,
    lambda x, *, dim, index: lax.index_in_dim(x, index, dim, keepdims=False), kind=Kind.VIEW)
select_scatter_p = standard_primitive(
    "select_scatter", lambda b, y, *, dim, index: b.shape, lambda b, y, *, dim, index: b.dtype,
    lambda b, y, *, dim, index: lax.dynamic_update_index_in_dim(b, y.astype(b.dtype), index, dim))
select_p.view_inverse = lambda apply, base, y, *, dim, index: apply(select_scatter_p, base, y, dim=dim, index=index)
select_p.view_strides = lambda shape, strides, offset, *, dim, index: (
    strides[:dim] + strides[dim + 1:], offset + index * strides[dim])


def select(x, dim: int, index: int):
    """The slice of `x` at `index` along `dim`, without that dim (a view)."""
    dim = canonical_dim(dim, x.ndim, "select")
    size = x.shape[dim]
    if not -size <= index < size:
        raise IndexError(f"select: index {index} is out of range for dimension {dim} of size {size}")
    return select_p.bind(x, dim=dim, index=index % size)


# -- permute -----------------------------------------------------------------------------------
permute_p = standard_primitive(
    "permute", lambda x, *, perm: tuple(x.shape[p] for p in perm), lambda x, *, perm: x.dtype,
    lambda x, *, perm: jnp.transpose(x, perm), kind=Kind.VIEW)
permute_p.view_inverse = lambda apply, base, y, *, perm: apply(
    permute_p, y, perm=tuple(sorted(range(len(perm)), key=perm.__getitem__)))
permute_p.view_strides = lambda shape, strides, offset, *, perm: (tuple(strides[p] for p in perm), offset)
permute__p = Primitive("permute_", kind=Kind.MUTATION, mutates=(0,), metadata_view=permute_p)


def permute(x, *dims):
    """`x` with its dimensions reordered (a view)."""
    perm = tuple(canonical_dim(d, x.ndim, "permute") for d in normalize_shape(dims))
    return permute_p.bind(x, perm=perm)


def _swap_perm(ndim, d0, d1):
    perm = list(range(ndim))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return tuple(perm)


def transpose(x, dim0: int, dim1: int):
    """`x` with dims `dim0` and `dim1` swapped (a view)."""
    d0, d1 = canonical_dim(dim0, x.ndim, "transpose"), canonical_dim(dim1, x.ndim, "transpose")
    return permute_p.bind(x, perm=_swap_perm(x.ndim, d0, d1))


def t(x):
    """The transpose of a tensor of at most 2 dims (a view)."""
    return x if x.ndim < 2 else transpose(x, 0, 1)


def t_(x):
    """In-place `t`: `x` itself becomes its transpose (a metadata mutation)."""
    return x if x.ndim < 2 else permute__p.bind(x, perm=_swap_perm(x.ndim, 0, 1))


def unbind(x, dim: int = 0):
    """The slices of `x` along `dim`, as a tuple of views."""
    dim = canonical_dim(dim, x.ndim, "unbind")
    return tuple(select_p.bind(x, dim=dim, index=i) for i in range(x.shape[dim]))
