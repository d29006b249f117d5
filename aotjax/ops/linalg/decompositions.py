"""`torch.linalg`: factorizations, solvers and determinants over the last two dims (leading dims are
batch dims). The factorizations and solvers are primitives made with `from_jax` (`aotjax.ops.base.from_jax`): each
computes what its `jax.numpy.linalg`/`jax.scipy.linalg`/`jax.lax.linalg` function computes, and its derivatives,
batching and transposes are JAX's own, where torch's convention differs made torch's inside the `jax` function (a
symmetric gradient for symmetric input: `_as_symmetric`; `pinv(hermitian=True)`'s), and `matrix_exp` is torch's
algorithm (a degree-18 Taylor polynomial, scaled and squared). The rest (`pinv`, `lstsq`, `matrix_power`,
`matrix_rank`, `multi_dot`, `vecdot`, `cross`, `logdet`) compose them and the elementwise ops; the norms are
aotjax/ops/linalg/norms.py's. The public namespace is
`aotjax.linalg` (torch's names); `det`, `logdet`, `slogdet`, `inverse`, `matrix_power` and `matrix_exp` are also
`aotjax.X` and Tensor methods, as in torch. Real floating dtypes only for now: a complex input raises.
"""
from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from aotjax.core.errors import DTypeError, ShapeError, UnsupportedError
from aotjax.core.interpreter import Tracer
from aotjax.core.source_info import where
from aotjax.ops.base.combinators import broadcast_shapes
from aotjax.ops.base.data import as_tensor
from aotjax.ops.base.from_jax import from_jax
from aotjax.ops.base.frontend import canonical_dims
from aotjax.ops.base.promotion import default_int_dtype
from aotjax.ops.creation.factories import eye, zeros
from aotjax.ops.indexing.subscripts import index_select
from aotjax.ops.linalg.matmul import matmul
from aotjax.ops.math import elementwise as ew
from aotjax.ops.reduce import reductions as red
from aotjax.tensor import Tensor, method

__all__ = ["det", "logdet", "slogdet", "inverse", "matrix_power", "matrix_exp"]
# NOTE: what `aotjax.linalg` exports (torch.linalg's names); `__all__` is what `aotjax.X` gets
LINALG = ["inv", "inv_ex", "solve", "solve_triangular", "cholesky",
          "cholesky_ex", "qr", "svd", "svdvals", "eig", "eigvals", "eigh", "eigvalsh",
          "det", "slogdet", "pinv", "lstsq", "matrix_power",
          "matrix_rank", "lu_factor", "lu_solve", "lu", "multi_dot", "vecdot", "cross", "matrix_exp",
          "QR", "SVD", "EigResult",
          "EighResult", "SlogdetResult", "LUResult", "LUFactorResult", "LstsqResult", "InvExResult",
          "CholeskyExResult"]


class QR(NamedTuple):
    Q: Tensor
    R: Tensor


class SVD(NamedTuple):
    U: Tensor
    S: Tensor
    Vh: Tensor


class EighResult(NamedTuple):
    eigenvalues: Tensor
    eigenvectors: Tensor


class EigResult(NamedTuple):
    eigenvalues: Tensor
    eigenvectors: Tensor


class SlogdetResult(NamedTuple):
    sign: Tensor
    logabsdet: Tensor


class LUResult(NamedTuple):
    P: Tensor
    L: Tensor
    U: Tensor


class LUFactorResult(NamedTuple):
    LU: Tensor
    pivots: Tensor


class LstsqResult(NamedTuple):
    solution: Tensor
    residuals: Tensor
    rank: Tensor
    singular_values: Tensor


class InvExResult(NamedTuple):
    inverse: Tensor
    info: Tensor


class CholeskyExResult(NamedTuple):
    L: Tensor
    info: Tensor


# -- checks ----------------------------------------------------------------------------------------------
def _floating(op: str, x) -> Tensor:
    x = as_tensor(x)
    if np.issubdtype(x.dtype, np.complexfloating):
        raise UnsupportedError(f"{op}: complex tensors are not supported yet (got {x.dtype.name}){where()}; aotjax's "
                               f"linear algebra takes real floating tensors (float32, float64)")
    if not np.issubdtype(x.dtype, np.floating):
        raise DTypeError(f"{op}: expected a floating point tensor as input, got {x.dtype.name}{where()}; convert it "
                         f"first (e.g. `A.float()`)")
    return x


def _matrix(op: str, x, square: bool = True) -> Tensor:
    x = _floating(op, x)
    if x.ndim < 2:
        raise ShapeError(f"{op}: the input must have at least 2 dimensions, got shape {list(x.shape)}{where()}")
    if square and x.shape[-1] != x.shape[-2]:
        raise ShapeError(f"{op}: a batch of square matrices is expected, got shape {list(x.shape)} "
                         f"({x.shape[-2]} x {x.shape[-1]} matrices){where()}")
    return x


def _same_dtype(op: str, *xs) -> None:
    if len({x.dtype for x in xs}) > 1:
        got = " and ".join(x.dtype.name for x in xs)
        raise DTypeError(f"{op}: expected operands of one dtype, got {got}{where()}; convert one first "
                         f"(e.g. `B.to(A.dtype)`)")


def _batch_broadcast(op: str, a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    """`a` and `b` with their batch dims (all but the last two) broadcast together."""
    batch = broadcast_shapes(op, tuple(a.shape[:-2]), tuple(b.shape[:-2]))
    return a.expand(*batch, *a.shape[-2:]), b.expand(*batch, *b.shape[-2:])


# -- the primitives ---------------------------------------------------------------------------------------
@jax.custom_jvp
def _as_symmetric(a):
    """`a` itself, differentiated as its symmetric part `(a + a^T) / 2`: see `_as_symmetric_jvp`."""
    return a


@_as_symmetric.defjvp
def _as_symmetric_jvp(primals, tangents):
    # NOTE: torch's convention for the factorizations of symmetric input (cholesky, eigh, eigvalsh): the value reads
    # one triangle, but the derivative is that of a function of the symmetric matrix, so a gradient is symmetric
    # (torch symmetrizes it; it does not mask the triangle not read). The tangent made symmetric transposes to the
    # gradient made symmetric. The primal is `_as_symmetric(a)` again, not `a`, so that the derivatives of this rule
    # (second derivatives) follow the same convention.
    (a,), (t,) = primals, tangents
    return _as_symmetric(a), (t + jnp.swapaxes(t, -1, -2)) / 2


def _cholesky(a, *, upper):
    lower = jnp.linalg.cholesky(_as_symmetric(a), symmetrize_input=False)
    return jnp.swapaxes(lower, -1, -2) if upper else lower


def _qr(a, *, mode):
    if mode == "r":
        return jnp.zeros((0,), a.dtype), jnp.linalg.qr(a, mode="r")
    return tuple(jnp.linalg.qr(a, mode=mode))


def _eigh(a, *, UPLO):
    return tuple(jnp.linalg.eigh(_as_symmetric(a), UPLO=UPLO, symmetrize_input=False))


# NOTE: jax's derivatives of det and eig fail on empty matrices: their results (1; none) are constants here
def _det(a):
    return jnp.ones(a.shape[:-2], a.dtype) if a.shape[-1] == 0 else jnp.linalg.det(a)


def _empty_eig(a):
    dtype = jnp.result_type(a.dtype, jnp.complex64)
    return jnp.zeros(a.shape[:-1], dtype), jnp.zeros(a.shape, dtype)


def _lu_factor(a):
    lu, pivots, _ = jax.lax.linalg.lu(a)
    return lu, pivots + 1  # NOTE: torch's pivots count from 1 (LAPACK's)


def _lu(a):
    lu, _, perm = jax.lax.linalg.lu(a)
    m, n = a.shape[-2:]
    k = min(m, n)
    lower = jnp.tril(lu[..., :, :k], -1) + jnp.eye(m, k, dtype=a.dtype)
    upper = jnp.triu(lu[..., :k, :])
    # NOTE: rows perm of A are L @ U, so A = P @ L @ U with P[perm[i], i] = 1
    p = jnp.swapaxes(jax.nn.one_hot(perm, m, dtype=a.dtype), -1, -2)
    return p, lower, upper


def _lu_solve(lu, pivots, b, *, adjoint):
    n = lu.shape[-1]
    perm = jax.lax.linalg.lu_pivots_to_permutation(pivots - 1, n)
    lower = dict(lower=True, unit_diagonal=True)
    if not adjoint:  # A = P L U: x = U^-1 L^-1 P^T b
        pb = jnp.take_along_axis(b, perm[..., :, None], axis=-2)
        y = jax.lax.linalg.triangular_solve(lu, pb, left_side=True, **lower)
        return jax.lax.linalg.triangular_solve(lu, y, left_side=True, lower=False)
    # A^T = U^T L^T P^T: x = P L^-T U^-T b
    y = jax.lax.linalg.triangular_solve(lu, b, left_side=True, lower=False, transpose_a=True)
    z = jax.lax.linalg.triangular_solve(lu, y, left_side=True, transpose_a=True, **lower)
    inverse = jnp.argsort(perm, axis=-1)
    return jnp.take_along_axis(z, inverse[..., :, None], axis=-2)


def _solve_triangular(a, b, *, upper, unitriangular):
    return jax.lax.linalg.triangular_solve(a, b, left_side=True, lower=not upper, unit_diagonal=unitriangular)


def _pinv(a, *, rtol, atol, hermitian):
    return _pinv_hermitian(a, rtol, atol) if hermitian else _pinv_of(a, rtol, atol, False)


@functools.partial(jax.custom_jvp, nondiff_argnums=(1, 2))
def _pinv_hermitian(a, rtol, atol):
    """torch's `pinv(hermitian=True)`: of the symmetric matrix of `a`'s lower triangle (what its `eigh` reads)."""
    return _pinv_of(jnp.tril(a) + jnp.swapaxes(jnp.tril(a, -1), -1, -2), rtol, atol, True)


@_pinv_hermitian.defjvp
def _pinv_hermitian_jvp(rtol, atol, primals, tangents):
    # NOTE: torch differentiates pinv(hermitian=True) as a pinv of `a` as given (Golub & Pereyra's derivative, of
    # the whole of `a`, not symmetrized): dP = -P dA P + P P^T dA^T (I - A P) + (I - P A) dA^T P^T P
    (a,), (t,) = primals, tangents
    p = _pinv_hermitian(a, rtol, atol)
    pt, tt = jnp.swapaxes(p, -1, -2), jnp.swapaxes(t, -1, -2)
    return p, -p @ t @ p + (p @ pt) @ (tt - tt @ a @ p) + (tt - p @ (a @ tt)) @ (pt @ p)


def _pinv_tolerances(a, atol, rtol, *, hermitian):
    """`_pinv` with tolerance arrays over the batch: torch's threshold max(atol, rtol * s_max) as jax's rtol."""
    if 0 in a.shape[-2:]:
        return jnp.zeros(a.shape[:-2] + a.shape[-2:][::-1], a.dtype)
    sym = jnp.tril(a) + jnp.swapaxes(jnp.tril(a, -1), -1, -2).conj() if hermitian else a
    s_max = jax.lax.stop_gradient(jnp.linalg.svd(sym, compute_uv=False)[..., 0])
    rel = jnp.maximum(jnp.where(s_max > 0, atol / jnp.where(s_max > 0, s_max, 1), 0), rtol)
    return _pinv_hermitian(a, rel, None) if hermitian else jnp.linalg.pinv(a, rtol=rel)


def _pinv_of(a, rtol, atol, hermitian):
    if atol is None and rtol is None:
        rtol = float(np.finfo(a.dtype).eps) * max(a.shape[-2:])
    if atol is not None:  # NOTE: torch's threshold max(atol, rtol * s_max), as jax's rtol relative to s_max
        s_max = jax.lax.stop_gradient(jnp.linalg.svd(a, compute_uv=False)[..., 0])
        rel = jnp.where(s_max > 0, atol / jnp.where(s_max > 0, s_max, 1), 0)
        rtol = jnp.maximum(rel, rtol or 0.0)
    return jnp.linalg.pinv(a, rtol=rtol, hermitian=hermitian)


def _matrix_exp(a):
    """torch's algorithm: the degree-18 Taylor polynomial of `A / 2^s`, squared `s` times, `s` the fewest halvings
    that bring the 1-norm under theta_18 (the largest norm at which the polynomial's backward error stays under the
    unit roundoff: Bader, Blanes & Casas, 2019), per matrix of the batch. Float16/bfloat16 compute in float32."""
    if a.shape[-1] == 0:
        return a
    x = a if a.dtype.itemsize >= 4 else a.astype(jnp.float32)
    theta = 1.090863719290036 if x.dtype == jnp.float64 else 3.010066362817634
    norm = jnp.max(jnp.sum(jnp.abs(x), axis=-2), axis=-1)
    s = jax.lax.stop_gradient(jnp.maximum(jnp.ceil(jnp.log2(norm / theta)), 0))
    r = _taylor_18(x * (0.5 ** s)[..., None, None])
    s_max = jnp.max(s, initial=0)

    def square(r, i):  # NOTE: a scan (not a while loop) so that reverse mode can transpose it
        def step(r):
            return jnp.where((i < s)[..., None, None], _dot(r, r), r)
        return jax.lax.cond(i < s_max, step, lambda r: r, r), None
    r, _ = jax.lax.scan(square, r, jnp.arange(_MAX_SQUARINGS, dtype=s.dtype))
    return jnp.where((s > _MAX_SQUARINGS)[..., None, None], jnp.nan, r).astype(a.dtype)


_MAX_SQUARINGS = 64  # NOTE: a 1-norm past theta_18 * 2^64 (~5e19) gives NaNs, as jax's expm does past 2^16


def _dot(a, b):
    return jnp.matmul(a, b, precision=jax.lax.Precision.HIGHEST)


def _taylor_18(x):
    """`sum_{k <= 18} x^k / k!` by Paterson-Stockmeyer: powers up to x^4, then Horner's rule in x^4 (7 products)."""
    eye = jnp.eye(x.shape[-1], dtype=x.dtype)
    powers = [eye, x, _dot(x, x)]
    powers.append(_dot(powers[2], x))
    x4 = _dot(powers[2], powers[2])

    def block(j):  # the terms k = 4j .. 4j + 3 over x^(4j)
        return sum(powers[i] * (1 / math.factorial(4 * j + i)) for i in range(4) if 4 * j + i <= 18)
    out = block(4)
    for j in (3, 2, 1, 0):
        out = block(j) + _dot(x4, out)
    return out


cholesky_p = from_jax("cholesky", _cholesky)
qr_p = from_jax("qr", _qr, multiple_results=True)
svd_p = from_jax("svd", lambda a, *, full_matrices: tuple(jnp.linalg.svd(a, full_matrices=full_matrices)),
                 multiple_results=True)
svdvals_p = from_jax("svdvals", lambda a: jnp.linalg.svd(a, compute_uv=False))
# NOTE: the eigenvectors' derivatives assume distinct eigenvalues and a loss that does not depend on their phase
# (as torch's do); JAX makes callers opt in to that (`enable_eigvec_derivs`).
eig_p = from_jax("eig", lambda a: _empty_eig(a) if a.shape[-1] == 0 else tuple(jax.lax.linalg.eig(
    a, compute_left_eigenvectors=False, enable_eigvec_derivs=True)), multiple_results=True)
eigvals_p = from_jax("eigvals", lambda a: jax.lax.linalg.eig(a, compute_left_eigenvectors=False,
                                                             compute_right_eigenvectors=False)[0])
eigh_p = from_jax("eigh", _eigh, multiple_results=True)
eigvalsh_p = from_jax("eigvalsh", lambda a, *, UPLO: _eigh(a, UPLO=UPLO)[0])
det_p = from_jax("det", _det)
slogdet_p = from_jax("slogdet", lambda a: tuple(jnp.linalg.slogdet(a)), multiple_results=True)
inv_p = from_jax("inv", jnp.linalg.inv)
solve_p = from_jax("solve", jnp.linalg.solve)
solve_triangular_p = from_jax("solve_triangular", _solve_triangular)
lu_factor_p = from_jax("lu_factor", _lu_factor, multiple_results=True)
lu_p = from_jax("lu", _lu, multiple_results=True)
lu_solve_p = from_jax("lu_solve", _lu_solve)
matrix_exp_p = from_jax("matrix_exp", _matrix_exp)
pinv_p = from_jax("pinv", _pinv)
pinv_tolerances_p = from_jax("pinv_tolerances", _pinv_tolerances)


# -- factorizations -----------------------------------------------------------------------------------------
def cholesky(A, *, upper=False):
    """The Cholesky factor of symmetric positive-definite matrices, as `torch.linalg.cholesky` (lower unless
    `upper=True`; only the lower triangle of `A` is read). A matrix that is not positive-definite gives NaNs. Its
    gradient is symmetric, as torch's: that of a function of the symmetric matrix (not masked to the triangle read).

    >>> aotjax.linalg.cholesky(aotjax.tensor([[4.0, 2.0], [2.0, 5.0]]))
    tensor([[2., 0.],
            [1., 2.]])
    """
    A = _matrix("linalg.cholesky", A)
    return cholesky_p.bind(A, upper=bool(upper), chain=())


def cholesky_ex(A, *, upper=False, check_errors=False):
    """`cholesky` and an `info` of zeros where the factorization succeeded (nonzero where a factor is NaN).

    >>> aotjax.linalg.cholesky_ex(aotjax.eye(2)).info.item()
    0
    """
    L = cholesky(A, upper=upper)
    bad = ew.logical_not(ew.isfinite(L)).any(-1).any(-1)
    return CholeskyExResult(L, bad.to(np.int32))


def qr(A, mode="reduced"):
    """The QR decomposition `A = Q R`, as `torch.linalg.qr` (`mode`: 'reduced', 'complete', or 'r' for R alone
    with an empty Q).

    >>> Q, R = aotjax.linalg.qr(aotjax.tensor([[3.0, 1.0], [4.0, 2.0]]))
    >>> bool(((Q @ R - aotjax.tensor([[3.0, 1.0], [4.0, 2.0]])).abs() < 1e-5).all())
    True
    """
    A = _matrix("linalg.qr", A, square=False)
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"linalg.qr: mode must be 'reduced', 'complete' or 'r', got {mode!r}{where()}")
    return QR(*qr_p.bind(A, mode=mode, chain=()))


def svd(A, full_matrices=True, *, driver=None):
    """The singular value decomposition `A = U diag(S) Vh`, as `torch.linalg.svd` (singular values descending).

    >>> aotjax.linalg.svd(aotjax.tensor([[3.0, 0.0], [0.0, -2.0]])).S
    tensor([3., 2.])
    """
    A = _matrix("linalg.svd", A, square=False)
    return SVD(*svd_p.bind(A, full_matrices=bool(full_matrices), chain=()))


def svdvals(A, *, driver=None):
    """The singular values of `A`, descending, as `torch.linalg.svdvals`.

    >>> aotjax.linalg.svdvals(aotjax.tensor([[3.0, 0.0], [0.0, -2.0]]))
    tensor([3., 2.])
    """
    return svdvals_p.bind(_matrix("linalg.svdvals", A, square=False), chain=())


def _uplo(op: str, UPLO) -> str:
    if UPLO not in ("L", "U"):
        raise ValueError(f"{op}: UPLO must be 'L' or 'U', got {UPLO!r}{where()}")
    return UPLO


def eigh(A, UPLO="L"):
    """Eigenvalues (ascending) and eigenvectors of symmetric matrices, as `torch.linalg.eigh` (only the `UPLO`
    triangle is read; the gradient is symmetric, as torch's).

    >>> aotjax.linalg.eigh(aotjax.tensor([[2.0, 1.0], [1.0, 2.0]])).eigenvalues
    tensor([1., 3.])
    """
    A = _matrix("linalg.eigh", A)
    return EighResult(*eigh_p.bind(A, UPLO=_uplo("linalg.eigh", UPLO), chain=()))


def eig(A):
    """Eigenvalues and (unit-norm) eigenvectors of square matrices, as `torch.linalg.eig`: complex results, also for
    real input (complex64 for float32). Computed by LAPACK on the CPU, as in jax. Derivatives of the eigenvectors
    hold for distinct eigenvalues and a loss that does not depend on each eigenvector's phase, as torch's do.

    >>> aotjax.linalg.eig(aotjax.tensor([[2.0, 0.0], [0.0, 3.0]])).eigenvalues
    tensor([2.+0.j, 3.+0.j])
    """
    A = _matrix("linalg.eig", A)
    return EigResult(*eig_p.bind(A, chain=()))


def eigvals(A):
    """The eigenvalues of square matrices (complex), as `torch.linalg.eigvals`.

    >>> aotjax.linalg.eigvals(aotjax.tensor([[0.0, -1.0], [1.0, 0.0]]))
    tensor([0.+1.j, 0.-1.j])
    """
    A = _matrix("linalg.eigvals", A)
    return eigvals_p.bind(A, chain=())


def eigvalsh(A, UPLO="L"):
    """The eigenvalues (ascending) of symmetric matrices, as `torch.linalg.eigvalsh`.

    >>> aotjax.linalg.eigvalsh(aotjax.tensor([[2.0, 1.0], [1.0, 2.0]]))
    tensor([1., 3.])
    """
    A = _matrix("linalg.eigvalsh", A)
    return eigvalsh_p.bind(A, UPLO=_uplo("linalg.eigvalsh", UPLO), chain=())


def lu_factor(A, *, pivot=True):
    """The LU factorization with partial pivoting in LAPACK's compact form, as `torch.linalg.lu_factor`: `LU`
    holds L (unit diagonal, below) and U, `pivots` (int32, counted from 1) the row swaps.

    >>> aotjax.linalg.lu_factor(aotjax.tensor([[1.0, 2.0], [3.0, 4.0]])).pivots.tolist()
    [2, 2]
    """
    if not pivot:
        raise UnsupportedError(f"linalg.lu_factor: pivot=False is not supported{where()}; use pivot=True")
    A = _matrix("linalg.lu_factor", A, square=False)
    return LUFactorResult(*lu_factor_p.bind(A, chain=()))


def lu(A, *, pivot=True):
    """The LU decomposition with partial pivoting `A = P L U`, as `torch.linalg.lu`.

    >>> P, L, U = aotjax.linalg.lu(aotjax.tensor([[1.0, 2.0], [3.0, 4.0]]))
    >>> P
    tensor([[0., 1.],
            [1., 0.]])
    """
    if not pivot:
        raise UnsupportedError(f"linalg.lu: pivot=False is not supported{where()}; use pivot=True")
    A = _matrix("linalg.lu", A, square=False)
    return LUResult(*lu_p.bind(A, chain=()))


def lu_solve(LU, pivots, B, *, left=True, adjoint=False):
    """Solves `A X = B` from `lu_factor(A)`, as `torch.linalg.lu_solve` (`adjoint`: with `A^T`; `left=False`:
    `X A = B`).

    >>> LU, piv = aotjax.linalg.lu_factor(aotjax.tensor([[2.0, 0.0], [0.0, 4.0]]))
    >>> aotjax.linalg.lu_solve(LU, piv, aotjax.tensor([[2.0], [2.0]]))
    tensor([[1. ],
            [0.5]])
    """
    LU, B = _matrix("linalg.lu_solve", LU), _matrix("linalg.lu_solve", B, square=False)
    pivots = as_tensor(pivots)
    _same_dtype("linalg.lu_solve", LU, B)
    if not np.issubdtype(pivots.dtype, np.integer):
        raise DTypeError(f"linalg.lu_solve: pivots must be an integer tensor, got {pivots.dtype.name}{where()}")
    if left:
        if B.shape[-2] != LU.shape[-1]:
            raise ShapeError(f"linalg.lu_solve: LU of shape {list(LU.shape)} and B of shape {list(B.shape)} do not "
                             f"fit (B's rows must be {LU.shape[-1]}){where()}")
        LU2, B2 = _batch_broadcast("linalg.lu_solve", LU, B)
        piv = pivots.to(np.int32).expand(*LU2.shape[:-1])
        return lu_solve_p.bind(LU2, piv, B2, adjoint=bool(adjoint), chain=())
    # X A = B  <=>  A^T X^T = B^T
    return lu_solve(LU, pivots, B.mT, left=True, adjoint=not adjoint).mT


# -- solvers and inverses ---------------------------------------------------------------------------------
def inv(A):
    """The inverse of square matrices, as `torch.linalg.inv` (a singular matrix gives infs or NaNs).

    >>> aotjax.linalg.inv(aotjax.tensor([[2.0, 0.0], [0.0, 4.0]]))
    tensor([[0.5 , 0.  ],
            [0.  , 0.25]])
    """
    return inv_p.bind(_matrix("linalg.inv", A), chain=())


def inv_ex(A, *, check_errors=False):
    """`inv` and an `info` of zeros where the inverse is finite.

    >>> aotjax.linalg.inv_ex(aotjax.eye(2)).info.item()
    0
    """
    X = inv(A)
    return InvExResult(X, ew.logical_not(ew.isfinite(X)).any(-1).any(-1).to(np.int32))


def inverse(A):
    """`torch.inverse`: `aotjax.linalg.inv`.

    >>> aotjax.inverse(aotjax.tensor([[2.0]]))
    tensor([[0.5]])
    """
    return inv(A)


def _vector_rhs(A: Tensor, B: Tensor) -> bool:
    """torch's rule: B is a (batch of) vector(s) if 1-D, or of A's batch shape with one dim less."""
    return B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))


def solve(A, B, *, left=True):
    """The solution `X` of `A X = B` (`left=False`: `X A = B`), as `torch.linalg.solve`; `B` may be a vector or
    a batch of vectors; batch dims broadcast.

    >>> aotjax.linalg.solve(aotjax.tensor([[2.0, 0.0], [0.0, 4.0]]), aotjax.tensor([2.0, 2.0]))
    tensor([1. , 0.5])
    """
    A, B = _matrix("linalg.solve", A), _floating("linalg.solve", B)
    _same_dtype("linalg.solve", A, B)
    vector = _vector_rhs(A, B)
    Bm = B.unsqueeze(-1) if vector else B
    if not left:
        if vector:
            raise ShapeError(f"linalg.solve: left=False needs a matrix B, got shape {list(B.shape)}{where()}")
        return solve(A.mT, B.mT).mT
    if Bm.shape[-2] != A.shape[-1]:
        raise ShapeError(f"linalg.solve: A of shape {list(A.shape)} and B of shape {list(B.shape)} cannot be "
                         f"solved ({A.shape[-1]} != {Bm.shape[-2]}){where()}")
    A2, B2 = _batch_broadcast("linalg.solve", A, Bm)
    X = solve_p.bind(A2, B2, chain=())
    return X.squeeze(-1) if vector else X


def solve_triangular(A, B, *, upper, left=True, unitriangular=False):
    """The solution of a triangular system `A X = B` (`left=False`: `X A = B`), as
    `torch.linalg.solve_triangular` (only the `upper` or lower triangle of `A` is read).

    >>> aotjax.linalg.solve_triangular(aotjax.tensor([[2.0, 1.0], [0.0, 4.0]]), aotjax.tensor([[3.0], [4.0]]),
    ...                                upper=True)
    tensor([[1.],
            [1.]])
    """
    A, B = _matrix("linalg.solve_triangular", A), _matrix("linalg.solve_triangular", B, square=False)
    _same_dtype("linalg.solve_triangular", A, B)
    if not left:
        return solve_triangular(A.mT, B.mT, upper=not upper, left=True, unitriangular=unitriangular).mT
    if B.shape[-2] != A.shape[-1]:
        raise ShapeError(f"linalg.solve_triangular: A of shape {list(A.shape)} and B of shape {list(B.shape)} "
                         f"cannot be solved ({A.shape[-1]} != {B.shape[-2]}){where()}")
    A2, B2 = _batch_broadcast("linalg.solve_triangular", A, B)
    return solve_triangular_p.bind(A2, B2, upper=bool(upper), unitriangular=bool(unitriangular), chain=())


def _tolerances(op: str, A: Tensor, atol, rtol, rcond=None):
    """torch's tolerances: floats (None where not given), or, where either is a tensor, two tensors over the batch
    (detached; atol 0 where not given). An rtol not given is 0 where atol > 0, else eps * max(m, n), as torch's."""
    if rcond is not None:
        rtol = rcond
    default = float(np.finfo(A.dtype).eps) * max(A.shape[-2:])
    if isinstance(atol, Tensor) or isinstance(rtol, Tensor):
        real = np.finfo(A.dtype).dtype
        atol = as_tensor(0.0 if atol is None else atol).detach().to(real)
        rtol = as_tensor(rtol).detach().to(real) if rtol is not None else ew.where(atol > 0, 0.0, default).to(real)
        return atol, rtol
    if rtol is None and atol is not None and float(atol) <= 0:
        rtol = default
    return (None if atol is None else float(atol)), (None if rtol is None else float(rtol))


def pinv(A, rcond=None, hermitian=False, *, atol=None, rtol=None):
    """The Moore-Penrose pseudo-inverse, as `torch.linalg.pinv` (singular values below `max(atol, rtol *
    largest)` are treated as zero; by default `rtol = eps * max(m, n)`, or 0 where `atol > 0`; `rcond` is torch's
    older name of `rtol`). `atol` and `rtol` may be tensors, one value per matrix of the batch (broadcast with
    `A`'s). With `hermitian=True` only the lower triangle is read, and the derivative is still that of `A` as given
    (not symmetrized), as torch's.

    >>> aotjax.linalg.pinv(aotjax.tensor([[2.0, 0.0], [0.0, 0.0]]))
    tensor([[0.5, 0. ],
            [0. , 0. ]])
    """
    A = _matrix("linalg.pinv", A, square=bool(hermitian))
    atol, rtol = _tolerances("linalg.pinv", A, atol, rtol, rcond)  # NOTE: rcond, torch's older name of rtol
    if isinstance(atol, Tensor):  # tolerances per matrix: the batch is theirs and A's broadcast together
        batch = broadcast_shapes("linalg.pinv", A.shape[:-2], atol.shape, rtol.shape)
        A = A.expand(*batch, *A.shape[-2:])
        return pinv_tolerances_p.bind(A, atol.expand(*batch), rtol.expand(*batch), hermitian=bool(hermitian),
                                      chain=())
    return pinv_p.bind(A, rtol=rtol, atol=atol, hermitian=bool(hermitian), chain=())


def lstsq(A, B, rcond=None, *, driver=None):
    """The least-squares solution of `A X = B`, as `torch.linalg.lstsq` (for full-rank `A`; computed as
    `pinv(A) @ B`). The other results are those of torch's CPU `driver` (default 'gelsy'): `residuals`, the squared
    residual of each column of `B`, for a tall `A` (m > n) with 'gels', and with 'gelsd'/'gelss' where every
    matrix is of full rank (assumed so while tracing), else empty; `rank` except with 'gels' (empty);
    `singular_values` (not differentiable, as torch's) with 'gelsd'/'gelss' (else empty).

    >>> round(aotjax.linalg.lstsq(aotjax.tensor([[1.0], [1.0]]), aotjax.tensor([[1.0], [3.0]])).solution.item(), 4)
    2.0
    """
    A, B = _matrix("linalg.lstsq", A, square=False), _floating("linalg.lstsq", B)
    _same_dtype("linalg.lstsq", A, B)
    vector = B.ndim == A.ndim - 1
    Bm = B.unsqueeze(-1) if vector else B
    if Bm.shape[-2] != A.shape[-2]:
        raise ShapeError(f"linalg.lstsq: A of shape {list(A.shape)} and B of shape {list(B.shape)} do not fit "
                         f"(B's rows must be {A.shape[-2]}){where()}")
    driver = "gelsy" if driver is None else driver
    if driver not in ("gels", "gelsy", "gelsd", "gelss"):
        raise ValueError(f"linalg.lstsq: parameter `driver` should be one of ('gels', 'gelsy', 'gelsd', 'gelss'), "
                         f"got {driver!r}{where()}")
    X = matmul(pinv(A, rtol=rcond), Bm)
    empty = zeros(0, dtype=A.dtype)
    rank = zeros(0, dtype=_int()) if driver == "gels" else matrix_rank(A, rtol=rcond)
    m, n = A.shape[-2:]
    # NOTE: gelsd/gelss give residuals only if every matrix is of full rank: a fact of the values, so known eagerly
    full = driver == "gels" or isinstance(rank, Tracer) or bool((rank == n).all())
    residuals = ew.abs(matmul(A, X) - Bm).square().sum(-2) if m > n and driver != "gelsy" and full else empty
    values = svdvals(A).detach() if driver in ("gelsd", "gelss") else empty  # NOTE: not differentiable, as torch's
    return LstsqResult(X.squeeze(-1) if vector else X, residuals, rank, values)


# -- determinants ------------------------------------------------------------------------------------------
def det(A):
    """The determinant of square matrices, as `torch.linalg.det` (also `aotjax.det`, `Tensor.det`).

    >>> aotjax.linalg.det(aotjax.tensor([[1.0, 2.0], [3.0, 4.0]]))
    tensor(-2.)
    """
    return det_p.bind(_matrix("linalg.det", A), chain=())


def slogdet(A):
    """The sign and log absolute value of the determinant, as `torch.linalg.slogdet`.

    >>> aotjax.linalg.slogdet(aotjax.tensor([[1.0, 2.0], [3.0, 4.0]])).sign
    tensor(-1.)
    """
    return SlogdetResult(*slogdet_p.bind(_matrix("linalg.slogdet", A), chain=()))


def logdet(A):
    """The log of the determinant, as `torch.logdet`: NaN for a negative determinant, -inf for zero.

    >>> aotjax.logdet(aotjax.tensor([[2.0, 0.0], [0.0, 3.0]]))
    tensor(1.7917595)
    """
    sign, logabs = slogdet_p.bind(_matrix("logdet", A), chain=())
    return logabs + ew.log(sign)


def matrix_exp(A):
    """The matrix exponential, as `torch.linalg.matrix_exp` (also `aotjax.matrix_exp`, `Tensor.matrix_exp`).

    >>> aotjax.matrix_exp(aotjax.zeros(2, 2))
    tensor([[1., 0.],
            [0., 1.]])
    """
    return matrix_exp_p.bind(_matrix("linalg.matrix_exp", A), chain=())


def matrix_power(A, n):
    """`A` to the integer power `n` by repeated squaring (`n < 0`: of the inverse; `n = 0`: the identity), as
    `torch.linalg.matrix_power`.

    >>> aotjax.linalg.matrix_power(aotjax.tensor([[1.0, 1.0], [0.0, 1.0]]), 3)
    tensor([[1., 3.],
            [0., 1.]])
    """
    A = as_tensor(A)
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise ShapeError(f"linalg.matrix_power: a batch of square matrices is expected, got shape {list(A.shape)}"
                         f"{where()}")
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
        raise TypeError(f"linalg.matrix_power: n must be an int, got {type(n).__name__}{where()}")
    if n == 0:
        return eye(A.shape[-1], dtype=A.dtype).expand(*A.shape).clone()
    if n < 0:
        A, n = inv(A), -n
    result, power = None, A
    while n:
        if n & 1:
            result = power if result is None else matmul(result, power)
        n >>= 1
        if n:
            power = matmul(power, power)
    return result


def matrix_rank(A, *, atol=None, rtol=None, hermitian=False, tol=None):
    """The numerical rank: the number of singular values above `max(atol, rtol * largest)` (default `rtol = eps *
    max(m, n)`), as `torch.linalg.matrix_rank` (an integer tensor).

    >>> aotjax.linalg.matrix_rank(aotjax.tensor([[1.0, 2.0], [2.0, 4.0]]))
    tensor(1)
    """
    A = _matrix("linalg.matrix_rank", A, square=False)
    if tol is not None and rtol is None:  # NOTE: torch's older `tol` is an atol with rtol 0
        atol, rtol = tol, 0.0
    atol, rtol = _tolerances("linalg.matrix_rank", A, atol, rtol)
    if atol is None and rtol is None:
        rtol = float(np.finfo(A.dtype).eps) * max(A.shape[-2:])
    s = svdvals(A).detach() if not hermitian else ew.abs(eigvalsh(A)).detach()
    if s.shape[-1] == 0:
        return zeros(*A.shape[:-2], dtype=_int())
    top = red.amax(s, -1, keepdim=True)
    if isinstance(atol, Tensor):  # tolerances per matrix
        return (s > ew.maximum(atol.unsqueeze(-1), rtol.unsqueeze(-1) * top)).sum(-1).to(_int())
    threshold = top * (rtol or 0.0)
    if atol is not None:
        threshold = ew.clamp(threshold, min=atol)
    return (s > threshold).sum(-1).to(_int())


def _int():
    return default_int_dtype()


# -- compositions of products ------------------------------------------------------------------------------
def multi_dot(tensors):
    """The product of a chain of matrices, as `torch.linalg.multi_dot` (the first may be 1-D, a row vector, and
    the last 1-D, a column vector).

    >>> aotjax.linalg.multi_dot([aotjax.tensor([1.0, 2.0]), aotjax.eye(2), aotjax.tensor([3.0, 4.0])])
    tensor(11.)
    """
    tensors = [as_tensor(t) for t in tensors]
    if len(tensors) < 2:
        raise ValueError(f"linalg.multi_dot: expected at least 2 tensors, got {len(tensors)}{where()}")
    for i, t in enumerate(tensors):
        if t.ndim != 2 and not (t.ndim == 1 and i in (0, len(tensors) - 1)):
            raise ShapeError(f"linalg.multi_dot: tensor {i} must be 2-D (the first and last may be 1-D), got shape "
                             f"{list(t.shape)}{where()}")
    _same_dtype("linalg.multi_dot", *tensors)
    out = tensors[0]
    for t in tensors[1:]:
        out = matmul(out, t)
    return out


def vecdot(x, y, *, dim=-1):
    """The dot product of vectors along `dim`, broadcasting the rest, as `torch.linalg.vecdot` (real tensors).

    >>> aotjax.linalg.vecdot(aotjax.tensor([[1.0, 2.0], [3.0, 4.0]]), aotjax.tensor([1.0, 1.0]))
    tensor([3., 7.])
    """
    x, y = as_tensor(x), as_tensor(y)
    _same_dtype("linalg.vecdot", x, y)
    return (x * y).sum(dim)


def cross(input, other, *, dim=-1):
    """The cross product of 3-vectors along `dim` (the other dims broadcast), as `torch.linalg.cross`.

    >>> aotjax.linalg.cross(aotjax.tensor([1.0, 0.0, 0.0]), aotjax.tensor([0.0, 1.0, 0.0]))
    tensor([0., 0., 1.])
    """
    a, b = as_tensor(input), as_tensor(other)
    _same_dtype("linalg.cross", a, b)
    shape = broadcast_shapes("linalg.cross", tuple(a.shape), tuple(b.shape))
    if not shape or shape[dim if -len(shape) <= dim < len(shape) else 0] != 3:
        raise ShapeError(f"linalg.cross: dim {dim} must have size 3, got shapes {list(a.shape)} and "
                         f"{list(b.shape)}{where()}")
    a, b = a.expand(*shape), b.expand(*shape)
    d = canonical_dims((dim,), len(shape), "linalg.cross")[0]
    i1, i2 = [1, 2, 0], [2, 0, 1]
    idx1, idx2 = as_tensor(np.array(i1, np.int32)), as_tensor(np.array(i2, np.int32))
    return (index_select(a, d, idx1) * index_select(b, d, idx2)
            - index_select(a, d, idx2) * index_select(b, d, idx1))


# -- Tensor methods ----------------------------------------------------------------------------------------
for _op in (det, logdet, slogdet, inverse, matrix_power, matrix_exp):
    method(_op)
del _op
