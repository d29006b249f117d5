"""Randomized low-rank factorizations, as `torch.svd_lowrank` and `torch.pca_lowrank` (Halko, Martinsson and
Tropp, 2009: an orthonormal basis of the range of `A` found from `A` applied to a random Gaussian matrix, refined by
subspace iterations, then the exact SVD of `A` projected onto it). Compositions of `matmul`, `linalg.qr` and
`linalg.svd`, so every transform works through them; the Gaussian matrix is drawn from aotjax's generator (the
default one unless `generator`), as torch draws it from its own: the same algorithm, other random numbers.
"""
from __future__ import annotations

from aotjax.core.errors import DTypeError
from aotjax.core.source_info import where
from aotjax.ops.linalg.decompositions import _matrix, qr, svd
from aotjax.ops.random.generator import randn

__all__ = ["svd_lowrank", "pca_lowrank"]


def _basis(A, q: int, niter: int, M, generator):
    """`q` orthonormal columns `Q` with `Q Q^T (A - M)` close to `A - M` (Halko et al.'s algorithm 4.4)."""
    def times(X):
        return A @ X if M is None else A @ X - M @ X

    def times_transposed(X):
        return A.mT @ X if M is None else A.mT @ X - M.mT @ X

    Q = qr(times(randn(A.shape[-1], q, dtype=A.dtype, generator=generator))).Q
    for _ in range(niter):
        Q = qr(times(qr(times_transposed(Q)).Q)).Q
    return Q


def _svd_lowrank(A, q: int, niter: int, M, generator):
    m, n = A.shape[-2:]
    if M is not None:
        M = M.broadcast_to(A.shape)
    if m < n:  # NOTE: the algorithm wants a tall matrix: that of A^T, its factors swapped back after
        A, M = A.mT, None if M is None else M.mT
    Q = _basis(A, q, niter, M, generator)
    B = Q.mT @ A if M is None else Q.mT @ A - Q.mT @ M
    U, S, Vh = svd(B, full_matrices=False)
    U, V = Q @ U, Vh.mT
    return (V, S, U) if m < n else (U, S, V)


def _check(op: str, A, q, niter):
    A = _matrix(op, A, square=False)
    if niter < 0:
        raise ValueError(f"{op}: niter(={niter}) must be non-negative integer{where()}")
    if q is not None and not 0 <= q <= min(A.shape[-2:]):
        raise ValueError(f"{op}: q(={q}) must be non-negative integer and not greater than min(m, n)="
                         f"{min(A.shape[-2:])}{where()}")
    return A


def svd_lowrank(A, q: int | None = 6, niter: int | None = 2, M=None, *, generator=None):
    """An approximate SVD `A ~ U diag(S) V^T` of rank `q` (`U` `[..., m, q]`, `S` `[..., q]`, `V` `[..., n, q]`)
    of `A` (or `A - M`, `M` broadcast to `A`'s shape), as `torch.svd_lowrank`: exact where `A`'s rank is at most
    `q`; `niter` subspace iterations sharpen it otherwise. Randomized: it draws from `generator`.

    >>> A = aotjax.tensor([[3.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    >>> U, S, V = aotjax.svd_lowrank(A, q=2)
    >>> [round(s, 4) for s in S.tolist()], bool(((U * S) @ V.mT - A).abs().max() < 1e-5)
    ([3.0, 2.0], True)
    """
    q, niter = 6 if q is None else int(q), 2 if niter is None else int(niter)
    A = _check("svd_lowrank", A, None, niter)
    if M is not None:
        M = _matrix("svd_lowrank", M, square=False)
        if M.dtype != A.dtype:
            raise DTypeError(f"svd_lowrank: expected M of A's dtype {A.dtype.name}, got {M.dtype.name}{where()}")
    return _svd_lowrank(A, q, niter, M, generator)


def pca_lowrank(A, q: int | None = None, center: bool = True, niter: int = 2, *, generator=None):
    """Principal component analysis of the data matrix `A` (`m` samples of `n` features) by `svd_lowrank` of
    `A` less its column means (unless `center=False`), as `torch.pca_lowrank`: `V`'s columns are the principal
    directions, `S ** 2 / (m - 1)` the variances along them. `q` defaults to `min(6, m, n)`.

    >>> A = aotjax.tensor([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]])
    >>> U, S, V = aotjax.pca_lowrank(A, q=1)
    >>> [round(abs(v), 4) for v in V[:, 0].tolist()], round(S.item() ** 2 / 2, 4)
    ([0.7071, 0.7071], 2.0)
    """
    A = _check("pca_lowrank", A, q, niter)
    q = min(6, *A.shape[-2:]) if q is None else int(q)
    if center:
        A = A - A.mean(-2, keepdim=True)
    return _svd_lowrank(A, q, int(niter), None, generator)
