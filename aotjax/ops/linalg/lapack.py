"""torch's top-level BLAS/LAPACK functions, older than `torch.linalg`: `cholesky cholesky_solve cholesky_inverse qr
svd lu lu_solve triangular_solve pinverse`, with torch's arguments (`upper=`, `some=`, `compute_uv=`) and result
tuples, composed of `aotjax.linalg`'s factorizations and solvers (aotjax/ops/linalg/decompositions.py); one primitive
of its own, `cholesky_solve` (made with `from_jax`), for torch's derivative in the factor."""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from aotjax.core.errors import ShapeError
from aotjax.core.source_info import where
from aotjax.ops.base.data import as_tensor
from aotjax.ops.base.from_jax import from_jax
from aotjax.ops.creation import factories as creation
from aotjax.ops.linalg import decompositions
from aotjax.ops.linalg.decompositions import _batch_broadcast, _matrix, _same_dtype
from aotjax.ops.shape import views
from aotjax.ops.shape.clone import clone
from aotjax.tensor import Tensor, method

__all__ = ["pinverse", "cholesky", "cholesky_solve", "cholesky_inverse", "qr", "svd", "SvdResult", "lu", "lu_solve",
           "triangular_solve", "TriangularSolveResult"]


def pinverse(x, rcond: float = 1e-15):
    """The Moore-Penrose pseudo-inverse, singular values below `rcond` times the largest set to zero
    (`torch.pinverse`; `aotjax.linalg.pinv` is the newer form).

    >>> aotjax.pinverse(aotjax.tensor([[2.0, 0.0], [0.0, 0.0]]))
    tensor([[0.5, 0. ],
            [0. , 0. ]])
    """
    return decompositions.pinv(x, rtol=rcond)


# -- torch's older linear-algebra functions, through aotjax.linalg ---------------------------------------------------
def cholesky(A, upper: bool = False):
    """The Cholesky factor of `A` (`torch.cholesky`; `aotjax.linalg.cholesky` is the newer form).

    >>> aotjax.cholesky(aotjax.tensor([[4.0, 2.0], [2.0, 5.0]])).tolist()
    [[2.0, 0.0], [1.0, 2.0]]
    """
    return decompositions.cholesky(A, upper=upper)


# NOTE: torch's derivative in the factor is that of `(L L^T)^-1 b` in the whole of `L` as given (its gradient
# `-(C + C^T) L`, C = A^-1 grad X^T, is not masked to the triangle read), and so is `cholesky_inverse`'s. So a linear
# solve (JAX's `custom_linear_solve`) whose value reads one triangle and whose derivatives, to every order, are
# those of the product `L L^T v` (jax's own triangular solves would mask them to the triangle).
def _cholesky_solve(b, factor, *, upper):
    lower = jnp.swapaxes(factor, -1, -2) if upper else factor

    def solve(_, b):
        y = jax.lax.linalg.triangular_solve(lower, b, left_side=True, lower=True)
        return jax.lax.linalg.triangular_solve(lower, y, left_side=True, lower=True, transpose_a=True)

    def matvec(v):
        return lower @ (jnp.swapaxes(lower, -1, -2) @ v)
    return jax.lax.custom_linear_solve(matvec, b, solve, symmetric=True)


cholesky_solve_p = from_jax("cholesky_solve", _cholesky_solve)


def cholesky_solve(B, L, upper: bool = False):
    """`X` solving `A X = B` for `A = L L^H` (or `U^H U` when `upper`), from `A`'s Cholesky factor (only its lower,
    or upper, triangle is read; batch dims broadcast). Its derivative in `L` is torch's: that of `A^-1 B` with `A`
    made of the whole of `L` (not masked to the triangle).

    >>> aotjax.cholesky_solve(aotjax.tensor([[4.0], [8.0]]), aotjax.tensor([[2.0, 0.0], [0.0, 2.0]])).tolist()
    [[1.0], [2.0]]
    """
    B, L = _matrix("cholesky_solve", B, square=False), _matrix("cholesky_solve", L)
    _same_dtype("cholesky_solve", B, L)
    if B.shape[-2] != L.shape[-1]:
        raise ShapeError(f"cholesky_solve: B of shape {list(B.shape)} and L of shape {list(L.shape)} cannot be "
                         f"solved ({L.shape[-1]} != {B.shape[-2]}){where()}")
    B2, L2 = _batch_broadcast("cholesky_solve", B, L)
    return cholesky_solve_p.bind(B2, L2, upper=bool(upper), chain=())


def cholesky_inverse(L, upper: bool = False):
    """The inverse of `A = L L^H` (or `U^H U` when `upper`) from its Cholesky factor (its derivative in `L` as
    `cholesky_solve`'s: torch's, not masked to the triangle read).

    >>> aotjax.cholesky_inverse(aotjax.tensor([[2.0, 0.0], [0.0, 4.0]])).tolist()
    [[0.25, 0.0], [0.0, 0.0625]]
    """
    L = as_tensor(L)
    eye = creation.eye(L.shape[-1], dtype=L.dtype).expand(L.shape)
    return cholesky_solve(eye, L, upper)


def qr(A, some: bool = True):
    """`A = Q R` (`torch.qr`): the reduced factorization, or the complete one when `some=False`.

    >>> Q, R = aotjax.qr(aotjax.tensor([[3.0, 0.0], [4.0, 1.0], [0.0, 2.0]]))
    >>> Q.shape, R.shape
    ((3, 2), (2, 2))
    """
    return decompositions.qr(A, "reduced" if some else "complete")


class SvdResult(NamedTuple):
    """`torch.svd`'s result: `A = U diag(S) V^H` (`V`, not `aotjax.linalg.svd`'s `Vh`)."""
    U: Tensor
    S: Tensor
    V: Tensor


def svd(A, some: bool = True, compute_uv: bool = True) -> SvdResult:
    """The singular value decomposition as `torch.svd` gives it: `(U, S, V)` with `A = U diag(S) V^T`; reduced
    unless `some=False`; with `compute_uv=False`, `U` and `V` are zeros (`(m, m)`, `(n, n)`) as in PyTorch.

    >>> aotjax.svd(aotjax.tensor([[3.0, 0.0], [0.0, -2.0]])).S
    tensor([3., 2.])
    """
    A = as_tensor(A)
    if not compute_uv:
        m, n = A.shape[-2:]
        S = decompositions.svdvals(A)
        return SvdResult(creation.zeros(*A.shape[:-2], m, m, dtype=A.dtype), S,
                         creation.zeros(*A.shape[:-2], n, n, dtype=A.dtype))
    U, S, Vh = decompositions.svd(A, full_matrices=not some)
    return SvdResult(U, S, views.transpose(Vh, -2, -1))


def lu(A, pivot: bool = True, get_infos: bool = False):
    """`(LU, pivots)` of `A` (`torch.lu`, that is `aotjax.linalg.lu_factor`), and zeros for `infos` when
    `get_infos` (aotjax does not report singular factors).

    >>> LU, pivots = aotjax.lu(aotjax.tensor([[1.0, 2.0], [3.0, 4.0]]))
    >>> pivots.tolist()
    [2, 2]
    """
    LU, pivots = decompositions.lu_factor(A, pivot=pivot)
    if get_infos:
        return LU, pivots, creation.zeros(*LU.shape[:-2], dtype=pivots.dtype)
    return LU, pivots


def lu_solve(b, LU_data, LU_pivots):
    """`X` solving `A X = b` from `A`'s LU factorization (`torch.lu_solve`; argument order as in PyTorch).

    >>> LU, pivots = aotjax.lu(aotjax.tensor([[2.0, 0.0], [0.0, 4.0]]))
    >>> aotjax.lu_solve(aotjax.tensor([[2.0], [4.0]]), LU, pivots).tolist()
    [[1.0], [1.0]]
    """
    return decompositions.lu_solve(LU_data, LU_pivots, b)


class TriangularSolveResult(NamedTuple):
    """`torch.triangular_solve`'s result: the solution and a copy of the triangular matrix."""
    solution: Tensor
    cloned_coefficient: Tensor


def triangular_solve(b, A, upper: bool = True, transpose: bool = False,
                     unitriangular: bool = False) -> TriangularSolveResult:
    """`X` solving `A X = b` (or `A^T X = b` when `transpose`) for triangular `A` (`torch.triangular_solve`;
    `aotjax.linalg.solve_triangular` is the newer form, arguments reversed).

    >>> aotjax.triangular_solve(aotjax.tensor([[3.0], [4.0]]), aotjax.tensor([[1.0, 1.0], [0.0, 2.0]])).solution
    tensor([[1.],
            [2.]])
    """
    coefficient = views.transpose(A, -2, -1) if transpose else A
    X = decompositions.solve_triangular(coefficient, b, upper=upper != transpose, unitriangular=unitriangular)
    return TriangularSolveResult(X, clone(A))


for _fn in (pinverse, cholesky, cholesky_solve, cholesky_inverse, qr, svd, lu, lu_solve, triangular_solve):
    method(_fn)
