"""torch.linalg's solvers built on the factorizations: `solve_ex`, `lu_factor_ex`, `tensorinv`, `tensorsolve`, `cond`,
`householder_product`, and the matrix constructors `vander` and `diagonal`: compositions of the factorizations and
solvers of aotjax/ops/linalg/decompositions.py (so every transform works through them), with torch's arguments, result
NamedTuples and errors.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from aotjax.core.errors import ShapeError
from aotjax.core.source_info import where
from aotjax.ops.base.data import as_tensor
from aotjax.ops.creation.factories import eye, ones, zeros
from aotjax.ops.linalg.decompositions import _floating, _matrix, inv, lu_factor, solve, svdvals
from aotjax.ops.linalg.matmul import matmul
from aotjax.ops.linalg.norms import matrix_norm
from aotjax.ops.math.elementwise import where as select
from aotjax.ops.shape.copies import cat
from aotjax.tensor import Tensor

__all__: list[str] = []
LINALG = ["diagonal", "vander", "solve_ex", "lu_factor_ex", "tensorinv", "tensorsolve", "cond",
          "householder_product", "SolveExResult", "LUFactorExResult"]


class SolveExResult(NamedTuple):
    result: Tensor
    info: Tensor


class LUFactorExResult(NamedTuple):
    LU: Tensor
    pivots: Tensor
    info: Tensor


def diagonal(A, *, offset: int = 0, dim1: int = -2, dim2: int = -1):
    """The diagonal of each matrix (over the last two dims by default), a view, as `torch.linalg.diagonal`.

    >>> aotjax.linalg.diagonal(aotjax.arange(4.0).reshape(2, 2))
    tensor([0., 3.])
    """
    return as_tensor(A).diagonal(offset, dim1, dim2)


def vander(x, *, N: int | None = None):
    """The Vandermonde matrix `[1, x, x**2, ..., x**(N-1)]` along a new last dim (increasing powers), as
    `torch.linalg.vander`; `N` defaults to `x.shape[-1]`.

    >>> aotjax.linalg.vander(aotjax.tensor([1.0, 2.0, 3.0]))
    tensor([[1., 1., 1.],
            [1., 2., 4.],
            [1., 3., 9.]])
    """
    x = as_tensor(x)
    x = x.reshape(1) if x.ndim == 0 else x  # NOTE: torch reads a 0-d x as 1-d
    n = x.shape[-1] if N is None else int(N)
    if n <= 1:  # NOTE: torch 2.13 refuses it (a 0-d or one-element x, without N, gives N = 1)
        raise ValueError(f"linalg.vander: N must be greater than 1, got {n}{' (x.shape[-1])' if N is None else ''}"
                         f"{where()}")
    powers = cat([ones(*x.shape, 1, dtype=x.dtype), x.unsqueeze(-1).expand(*x.shape, n - 1)], -1)
    return powers.cumprod(-1)


def solve_ex(A, B, *, left: bool = True, check_errors: bool = False):
    """`solve` and an int32 `info`: 0 where the solution is finite, as `torch.linalg.solve_ex` (whose nonzero
    `info` names the singular pivot; here any nonzero value means singular).

    >>> aotjax.linalg.solve_ex(aotjax.eye(2), aotjax.tensor([1.0, 2.0])).info.item()
    0
    """
    X = solve(A, B, left=left)
    bad = X.isfinite().logical_not()
    batch = as_tensor(A).ndim - 2
    info = bad.reshape(*bad.shape[:batch], -1).any(-1).to(np.int32) if X.ndim > batch else bad.to(np.int32)
    return SolveExResult(X, info)


def lu_factor_ex(A, *, pivot: bool = True, check_errors: bool = False):
    """`lu_factor` and an int32 `info`: 0, or `i` (from 1) where `U[i-1, i-1]` is the first zero pivot, as
    `torch.linalg.lu_factor_ex`.

    >>> aotjax.linalg.lu_factor_ex(aotjax.tensor([[1.0, 2.0], [2.0, 4.0]])).info.item()
    2
    """
    LU, pivots = lu_factor(A, pivot=pivot)
    zero = LU.diagonal(0, -2, -1) == 0
    k = zero.shape[-1]
    first = select(zero, as_tensor(np.arange(1, k + 1, dtype=np.int32)), k + 1).amin(-1) if k else None
    info = select(first <= k, first, 0).to(np.int32) if k else zero.any(-1).to(np.int32)
    return LUFactorExResult(LU, pivots, info)


def tensorinv(A, ind: int = 2):
    """The inverse of `A` seen as a linear map from its last dims to its first `ind` dims: `tensordot(
    tensorinv(A), A, ind)` is the identity, as `torch.linalg.tensorinv`.

    >>> aotjax.linalg.tensorinv(aotjax.eye(4).reshape(4, 2, 2), ind=1).shape
    (2, 2, 4)
    """
    A = _floating("linalg.tensorinv", A)
    if ind <= 0:
        raise ValueError(f"linalg.tensorinv: ind must be a positive integer, got {ind}{where()}")
    out_dims, in_dims = tuple(A.shape[:ind]), tuple(A.shape[ind:])
    if math.prod(out_dims) != math.prod(in_dims):
        raise ShapeError(f"linalg.tensorinv: the product of the first ind={ind} dims {list(out_dims)} must equal "
                         f"that of the rest {list(in_dims)}{where()}")
    n = math.prod(out_dims)
    return inv(A.reshape(n, n)).reshape(*in_dims, *out_dims)


def tensorsolve(A, B, dims=None):
    """The `X` with `tensordot(A, X, X.ndim) == B`, as `torch.linalg.tensorsolve`; `dims` moves those dims of `A`
    to the end first.

    >>> aotjax.linalg.tensorsolve(aotjax.eye(4).reshape(2, 2, 4), aotjax.ones(2, 2)).shape
    (4,)
    """
    A, B = _floating("linalg.tensorsolve", A), as_tensor(B)
    if dims is not None:
        dims = [d % A.ndim for d in (dims if isinstance(dims, (tuple, list)) else (dims,))]
        A = A.permute(*[d for d in range(A.ndim) if d not in dims], *dims)
    # NOTE: as torch's, only the sizes count: A's leading B.ndim dims hold B's elements, in any shape
    if A.ndim < B.ndim or math.prod(A.shape[:B.ndim]) != B.numel():
        raise ShapeError(f"linalg.tensorsolve: the leading {B.ndim} dims of A {list(A.shape)} must hold B's "
                         f"{B.numel()} elements (B of shape {list(B.shape)}){where()}")
    rest = tuple(A.shape[B.ndim:])
    n = B.numel()
    if math.prod(rest) != n:
        raise ShapeError(f"linalg.tensorsolve: the product of A's trailing dims {list(rest)} must equal B's number "
                         f"of elements ({n}){where()}")
    return solve(A.reshape(n, n), B.reshape(n).to(A.dtype)).reshape(*rest)


def cond(A, p=None):
    """The condition number of each matrix in the norm `p` (`None`/2: the ratio of the largest to the smallest
    singular value; -2: its inverse; `'fro'`, `'nuc'`, `inf`, `-inf`, 1, -1: `norm(A) * norm(inv(A))`), as
    `torch.linalg.cond`.

    >>> aotjax.linalg.cond(aotjax.tensor([[2.0, 0.0], [0.0, 0.5]]))
    tensor(4.)
    """
    if p is not None and p not in (2, -2, "fro", "nuc", math.inf, -math.inf, 1, -1):
        raise ValueError(f"linalg.cond: p must be None, 2, -2, 'fro', 'nuc', inf, -inf, 1 or -1, got {p!r}{where()}")
    A = _matrix("linalg.cond", A, square=p not in (None, 2, -2))
    if 0 in A.shape[-2:]:  # NOTE: an empty matrix's condition number is 0, as torch's
        return zeros(*A.shape[:-2], dtype=A.dtype)
    if p is None or p in (2, -2):
        s = svdvals(A)
        hi, lo = s[..., 0], s[..., -1]
        return hi / lo if p != -2 else lo / hi
    return matrix_norm(A, p) * matrix_norm(inv(A), p)


def householder_product(A, tau):
    """The first `n` columns of the product of Householder reflections `H_i = I - tau_i v_i v_i^T` (`v_i`: column
    `i` of the `[m, n]` `A` below the diagonal, with a 1 on it), as `torch.linalg.householder_product` (LAPACK's
    `orgqr`).

    >>> aotjax.linalg.householder_product(aotjax.tensor([[1.0], [1.0]]), aotjax.tensor([1.0]))
    tensor([[ 0.],
            [-1.]])
    """
    A, tau = _matrix("linalg.householder_product", A, square=False), as_tensor(tau)
    m, n = A.shape[-2:]
    k = tau.shape[-1] if tau.ndim else -1
    if n > m or tau.ndim != A.ndim - 1 or k > n or tuple(tau.shape[:-1]) != tuple(A.shape[:-2]):
        raise ShapeError(f"linalg.householder_product: expected A [..., m, n] with m >= n and tau [..., k] with "
                         f"k <= n and A's batch dims, got {list(A.shape)} and {list(tau.shape)}{where()}")
    rows = np.arange(m)
    Q = eye(m, n, dtype=A.dtype).expand(*A.shape[:-2], m, n)
    for i in reversed(range(k)):  # Q = H_0 (H_1 (... H_{k-1} I[:, :n]))
        v = select(as_tensor(rows > i), A[..., :, i], as_tensor((rows == i).astype(np.float32)).to(A.dtype))
        w = matmul(v.unsqueeze(-2), Q)  # [..., 1, n]
        Q = Q - tau[..., i, None, None] * v.unsqueeze(-1) * w
    return Q
