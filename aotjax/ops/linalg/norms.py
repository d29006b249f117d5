"""`torch.linalg`'s norms: `vector_norm` (any real `ord`), `matrix_norm` ('fro', 'nuc', +-inf, +-1, +-2 over two
dims) and `norm` (either, as torch picks). Their two primitives are made with `from_jax`
(`aotjax.ops.base.from_jax`) from `jax.numpy.linalg`'s norms, with torch's derivative at zero (`_safe_norm`); the
namespace is `aotjax.linalg`. `torch.norm` (the older top level) is `aotjax.ops.reduce.statistics.norm`.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from aotjax.core.errors import ShapeError, UnsupportedError
from aotjax.core.source_info import where
from aotjax.ops.base.data import as_tensor
from aotjax.ops.base.from_jax import from_jax
from aotjax.ops.base.frontend import canonical_dim, canonical_dims
from aotjax.ops.linalg.decompositions import _floating
from aotjax.tensor import Tensor

__all__: list[str] = []
LINALG = ["norm", "vector_norm", "matrix_norm"]  # NOTE: what `aotjax.linalg` exports from here


# -- the primitives ---------------------------------------------------------------------------------------
def _vector_norm(x, *, ord, axis, keepdims):
    return _safe_norm(x, ord, axis, keepdims)


def _safe_norm(x, ord, axis, keepdims):
    """`jnp.linalg.vector_norm` with torch's derivatives at zero: a zero norm has a zero derivative (jax's is nan
    for ord > 1), as does |x| at x = 0 for ord = 1 (jax's is 1) and a zero element for ord < 1 (jax's is nan) or
    +-inf (the elements of largest / smallest |x| share it, sgn(x) each)."""
    if ord == 0:
        return jnp.linalg.vector_norm(x, axis=axis, keepdims=keepdims, ord=ord)

    @jax.custom_jvp
    def norm(x):
        return jnp.linalg.vector_norm(x, axis=axis, keepdims=keepdims, ord=ord)

    @norm.defjvp
    def norm_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        out = norm(x)
        full = out if keepdims else jnp.expand_dims(out, axis)
        if ord in (np.inf, -np.inf):
            hit = jnp.abs(x) == full
            scale = jnp.sign(x) * hit / jnp.sum(hit, axis=axis, keepdims=True)
            return out, jnp.sum(scale * t, axis=axis, keepdims=keepdims)
        if ord < 1:  # NOTE: torch's: sgn(x) |x|^(ord - 1) norm^(1 - ord), 0 at x = 0 (where |x|^(ord - 1) is inf)
            nonzero = x != 0
            scale = jnp.where(nonzero, jnp.sign(x) * jnp.abs(jnp.where(nonzero, x, 1)) ** (ord - 1), 0)
            return out, jnp.sum(scale * full ** (1 - ord) * t, axis=axis, keepdims=keepdims)
        safe = jnp.where(full > 0, full, 1)
        scale = jnp.abs(x) ** (ord - 1) * jnp.sign(x) / safe ** (ord - 1)
        t_out = jnp.sum(jnp.where(full > 0, scale * t, 0), axis=axis, keepdims=keepdims)
        return out, t_out
    return norm(x)


def _matrix_norm(a, *, ord):
    return jnp.linalg.matrix_norm(a, ord=ord)

vector_norm_p = from_jax("vector_norm", _vector_norm, flops=lambda i, o, **p: float(i[0].size))
matrix_norm_p = from_jax("matrix_norm", _matrix_norm)


# -- the ops ----------------------------------------------------------------------------------------------
def _norm_ord(op: str, ord):
    if isinstance(ord, Tensor):
        raise UnsupportedError(f"{op}: ord as a tensor is not supported{where()}; pass a Python number")
    return float(ord) if isinstance(ord, (int, float, np.number)) and not isinstance(ord, bool) else ord


def _norm_dtype(op: str, x: Tensor, dtype) -> Tensor:
    if dtype is not None:
        x = x.to(dtype)
    return _floating(op, x)


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    """The vector `ord`-norm over `dim` (all dims by default), as `torch.linalg.vector_norm` (`ord`: any real,
    `inf`, `-inf`, 0 counts nonzeros). Its derivative at a zero vector is zero, as torch's.

    >>> aotjax.linalg.vector_norm(aotjax.tensor([3.0, -4.0]))
    tensor(5.)
    >>> aotjax.linalg.vector_norm(aotjax.tensor([3.0, -4.0]), ord=float('inf'))
    tensor(4.)
    """
    x = _norm_dtype("linalg.vector_norm", as_tensor(x), dtype)
    ord = _norm_ord("linalg.vector_norm", ord)
    if dim is None:
        axis = tuple(range(x.ndim))
    else:
        axis = canonical_dims((dim,) if isinstance(dim, int) else tuple(dim), x.ndim, "linalg.vector_norm")
    if x.ndim == 0:  # NOTE: dim 0 or -1 of a 0-d tensor, keepdim or not: a 0-d result, as torch's
        return vector_norm_p.bind(x.reshape(1), ord=ord, axis=(0,), keepdims=False, chain=())
    if (ord < 0 or ord == np.inf) and any(x.shape[d] == 0 for d in axis):
        raise ShapeError(f"linalg.vector_norm: cannot take the {ord}-norm of an empty tensor over a zero-size "
                         f"dim{where()}")
    return vector_norm_p.bind(x, ord=ord, axis=axis, keepdims=bool(keepdim), chain=())


_MATRIX_ORDS = ("fro", "nuc", np.inf, -np.inf, 1.0, -1.0, 2.0, -2.0)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):
    """The matrix norm over the two dims `dim`, as `torch.linalg.matrix_norm` (`ord`: 'fro', 'nuc', inf, -inf, 1,
    -1, 2, -2).

    >>> aotjax.linalg.matrix_norm(aotjax.tensor([[1.0, -2.0], [3.0, 4.0]]), ord=1)
    tensor(6.)
    """
    A = _norm_dtype("linalg.matrix_norm", as_tensor(A), dtype)
    ord = _norm_ord("linalg.matrix_norm", ord)
    if ord not in _MATRIX_ORDS:
        raise ValueError(f"linalg.matrix_norm: ord must be one of 'fro', 'nuc', inf, -inf, 1, -1, 2, -2, got {ord!r}"
                         f"{where()}")
    if A.ndim < 2:
        raise ShapeError(f"linalg.matrix_norm: the input must have at least 2 dimensions, got shape "
                         f"{list(A.shape)}{where()}")
    d0, d1 = (canonical_dim(int(d), A.ndim, "linalg.matrix_norm") for d in dim)  # NOTE: in order: (1, 0) transposes
    if d0 == d1:
        raise ValueError(f"linalg.matrix_norm: dim must name two different dims, got {tuple(dim)}{where()}")
    moved = A.movedim((d0, d1), (-2, -1))
    out = matrix_norm_p.bind(moved, ord=ord, chain=())
    if keepdim:
        for d in sorted((d0, d1)):
            out = out.unsqueeze(d)
    return out


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):
    """A vector or matrix norm, as `torch.linalg.norm`: with `dim` an int or `ord` None and `dim` None, a vector
    norm (of the flattened input); with `dim` a pair or a 2-D input and `ord` given, a matrix norm.

    >>> aotjax.linalg.norm(aotjax.tensor([[3.0, 0.0], [0.0, 4.0]]))
    tensor(5.)
    >>> aotjax.linalg.norm(aotjax.tensor([[3.0, 0.0], [0.0, 4.0]]), ord=2)
    tensor(4.)
    """
    A = as_tensor(A)
    if isinstance(dim, int):
        dim = (dim,)
    if dim is not None and len(dim) == 2 or dim is None and ord is not None and A.ndim == 2:
        return matrix_norm(A, "fro" if ord is None else ord, (-2, -1) if dim is None else dim, keepdim, dtype=dtype)
    if dim is None and ord is not None and A.ndim != 1:
        raise ShapeError(f"linalg.norm: with ord given and no dim, the input must be 1-D or 2-D, got shape "
                         f"{list(A.shape)}{where()}")
    if isinstance(ord, str):
        raise ValueError(f"linalg.norm: ord {ord!r} is a matrix norm; give dim a pair of dims{where()}")
    return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)
