"""Factorizations in LAPACK's compact forms, as torch gives and takes them: `lu_unpack` (the `P, L, U` of
`lu_factor`'s `LU, pivots`), `geqrf` (QR as Householder reflectors below the diagonal and their scales `tau`) with
`orgqr` and `ormqr` (their product formed, or applied to a matrix), and `linalg.ldl_factor`/`ldl_factor_ex`/
`ldl_solve` (the Bunch-Kaufman factorization `A = L D L^T` of a symmetric matrix, `D` of 1x1 and 2x2 blocks).

`L`, `U`, `orgqr` and `ormqr` are compositions (their derivatives are those of the ops they are made of, as in
torch). `geqrf`, the permutation of `lu_unpack` and the LDL factorization and solve are primitives made by
`_jax_primitive` from `jax` functions: `geqrf` is LAPACK's (through `jnp.linalg.qr(mode="raw")`); the LDL pair
follows LAPACK's unblocked `sytf2`/`sytrs` step by step (the pivot choices, the order of the updates, the stored
form), so that the factors and pivots are torch's. As in torch, none of the four is differentiable.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from aotjax.core.avals import get_aval
from aotjax.core.errors import DTypeError, ShapeError, UnsupportedError
from aotjax.core.primitive import Primitive, Recompute
from aotjax.core.source_info import where
from aotjax.interpreters.ad_util import Zero
from aotjax.interpreters.batching import batching_rules, bdim_at_front
from aotjax.interpreters.jvp import jvp_rules
from aotjax.interpreters.lowering import register_lowering
from aotjax.ops.base.combinators import broadcast_shapes
from aotjax.ops.base.data import as_tensor
from aotjax.ops.base.from_jax import cubic_flops
from aotjax.ops.creation.factories import empty, eye
from aotjax.ops.linalg.decompositions import _floating, _matrix
from aotjax.ops.linalg.matmul import matmul
from aotjax.ops.linalg.solvers import householder_product
from aotjax.ops.math.elementwise import where as select
from aotjax.tensor import Tensor, method

__all__ = ["lu_unpack", "geqrf", "orgqr", "ormqr"]
# NOTE: what `aotjax.linalg` exports (torch.linalg's names)
LINALG = ["ldl_factor", "ldl_factor_ex", "ldl_solve", "LDLFactorResult", "LDLFactorExResult"]


class LUUnpackResult(NamedTuple):
    P: Tensor
    L: Tensor
    U: Tensor


class GeqrfResult(NamedTuple):
    a: Tensor
    tau: Tensor


class LDLFactorResult(NamedTuple):
    LD: Tensor
    pivots: Tensor


class LDLFactorExResult(NamedTuple):
    LD: Tensor
    pivots: Tensor
    info: Tensor


# -- primitives of jax functions, without derivatives ------------------------------------------------------------
def _jax_primitive(name: str, impl, *, multiple_results: bool = False) -> Primitive:
    """The primitive `name` computing `impl(*arrays, **params)`, whose operands share their leading (batch) dims:
    lowered to `impl`, batched by moving every batch axis to the front, and with no derivative (a nonzero tangent
    raises, as torch's autograd does for these ops)."""
    prim = Primitive(name, multiple_results=multiple_results, recompute=Recompute.EXPENSIVE, flops=cubic_flops)
    register_lowering(prim, lambda *xs, **params: list(impl(*xs, **params)) if multiple_results
                      else impl(*xs, **params))

    def jvp(primals, tangents, **params):
        if any(not isinstance(t, Zero) for t in tangents):
            raise UnsupportedError(f"{name}: the derivative is not implemented, as in PyTorch{where()}; apply it to "
                                   f"detached tensors")
        outs = prim.bind(*primals, **params)
        outs = outs if multiple_results else [outs]
        return outs, [Zero(get_aval(o)) for o in outs]

    def batch(axis_size, vals, dims, **params):
        outs = prim.bind(*(bdim_at_front(v, d, axis_size) for v, d in zip(vals, dims)), **params)
        return (outs, [0] * len(outs)) if multiple_results else ([outs], [0])

    jvp_rules[prim] = jvp
    batching_rules[prim] = batch
    return prim


# -- LU ------------------------------------------------------------------------------------------------------------
def _lu_permutation(pivots, *, m, dtype):
    perm = jax.lax.linalg.lu_pivots_to_permutation(pivots - 1, m)  # NOTE: torch's pivots count from 1
    # rows perm of A are L @ U, so A = P @ L @ U with P[perm[i], i] = 1
    return jnp.swapaxes(jax.nn.one_hot(perm, m, dtype=dtype), -1, -2)


lu_permutation_p = _jax_primitive("lu_permutation", _lu_permutation)


def lu_unpack(LU_data, LU_pivots, unpack_data: bool = True, unpack_pivots: bool = True) -> LUUnpackResult:
    """The `P, L, U` of `A = P L U` from `lu_factor(A)`'s compact `LU` (`[..., m, n]`) and `pivots`, as
    `torch.lu_unpack`: `P` `[..., m, m]`, `L` `[..., m, k]` (unit diagonal), `U` `[..., k, n]`, `k = min(m, n)`.
    With `unpack_data=False` (`unpack_pivots=False`), `L` and `U` (`P`) are empty tensors.

    >>> P, L, U = aotjax.lu_unpack(*aotjax.linalg.lu_factor(aotjax.tensor([[1.0, 2.0], [3.0, 4.0]])))
    >>> P
    tensor([[0., 1.],
            [1., 0.]])
    """
    LU, pivots = _matrix("lu_unpack", LU_data, square=False), as_tensor(LU_pivots)
    m, n = LU.shape[-2:]
    k = min(m, n)
    if not np.issubdtype(pivots.dtype, np.integer) or tuple(pivots.shape) != (*LU.shape[:-2], k):
        raise ShapeError(f"lu_unpack: expected integer pivots of shape {[*LU.shape[:-2], k]} for LU of shape "
                         f"{list(LU.shape)}, got {pivots.aval.str_short()}{where()}")
    nothing = empty(0, dtype=LU.dtype)
    P = lu_permutation_p.bind(pivots, m=m, dtype=LU.dtype.name) if unpack_pivots else nothing
    if not unpack_data:
        return LUUnpackResult(P, nothing, nothing)
    L = LU[..., :, :k].tril(-1) + eye(m, k, dtype=LU.dtype)
    return LUUnpackResult(P, L, LU[..., :k, :].triu())


# -- QR as Householder reflectors ----------------------------------------------------------------------------------
def _geqrf(a):
    h, tau = jnp.linalg.qr(a, mode="raw")  # NOTE: LAPACK's geqrf; jax gives its compact form transposed
    return jnp.swapaxes(h, -1, -2), tau


geqrf_p = _jax_primitive("geqrf", _geqrf, multiple_results=True)


def geqrf(input) -> GeqrfResult:
    """The QR factorization in LAPACK's compact form, as `torch.geqrf`: `a` holds `R` on and above the diagonal
    and the Householder vectors below it, `tau` their scales (`Q = H_1 ... H_k`, `H_i = I - tau_i v_i v_i^T`).
    `orgqr` forms `Q`, `ormqr` applies it. Not differentiable, as in torch (use `linalg.qr`).

    >>> a, tau = aotjax.geqrf(aotjax.tensor([[3.0], [4.0]]))
    >>> a, tau
    (tensor([[-5. ],
            [ 0.5]]), tensor([1.6]))
    """
    A = _matrix("geqrf", input, square=False)
    return GeqrfResult(*geqrf_p.bind(A))


def orgqr(input, tau):
    """The `m x n` matrix `Q` of the Householder reflectors in `input` and `tau` (as `geqrf` gives them), as
    `torch.orgqr` (that is `linalg.householder_product`).

    >>> aotjax.orgqr(*aotjax.geqrf(aotjax.tensor([[3.0], [4.0]])))
    tensor([[-0.6],
            [-0.8]])
    """
    return householder_product(input, tau)


def _reflector(A: Tensor, i: int) -> Tensor:
    """`v_i`: column `i` of `A` below the diagonal, with a 1 on it and zeros above."""
    rows = np.arange(A.shape[-2])
    return select(as_tensor(rows > i), A[..., :, i], as_tensor((rows == i).astype(np.float32)).to(A.dtype))


def ormqr(input, tau, other, left: bool = True, transpose: bool = False):
    """`Q @ other` for `Q = H_1 ... H_k` the product of the Householder reflectors in `input` (`[..., mn, k]`)
    and `tau` (`[..., k]`), as `geqrf` gives them, without forming `Q`, as `torch.ormqr`: `Q^T @ other` with
    `transpose`, `other @ Q` (`other @ Q^T`) with `left=False`. `mn` is `other`'s rows (`left`) or columns.

    >>> a, tau = aotjax.geqrf(aotjax.tensor([[3.0], [4.0]]))
    >>> aotjax.ormqr(a, tau, aotjax.tensor([[3.0], [4.0]]), transpose=True)
    tensor([[-5.],
            [ 0.]])
    """
    A, tau, C = _matrix("ormqr", input, square=False), as_tensor(tau), _floating("ormqr", other)
    mn, k = A.shape[-2], tau.shape[-1] if tau.ndim else -1
    if (C.ndim != A.ndim or tau.ndim != A.ndim - 1 or tuple(C.shape[:-2]) != tuple(A.shape[:-2])
            or tuple(tau.shape[:-1]) != tuple(A.shape[:-2]) or C.shape[-2 if left else -1] != mn
            or not 0 <= k <= min(mn, A.shape[-1])):
        side = "rows" if left else "columns"
        raise ShapeError(f"ormqr: expected input [..., mn, k], tau [..., min(mn, k)] or shorter, and other of "
                         f"input's batch dims with mn {side}, got {list(A.shape)}, {list(tau.shape)} and "
                         f"{list(C.shape)}{where()}")
    if len({A.dtype, tau.dtype, C.dtype}) > 1:
        raise DTypeError(f"ormqr: expected input, tau and other of one dtype, got {A.dtype.name}, "
                         f"{tau.dtype.name} and {C.dtype.name}{where()}")
    # Q @ C = H_1 (H_2 (... (H_k C))); Q^T @ C = H_k (... (H_1 C)); C @ Q = ((C H_1) H_2) ...; C @ Q^T likewise
    order = range(k) if left == transpose else reversed(range(k))
    for i in order:
        v, t = _reflector(A, i), tau[..., i, None, None]
        if left:  # H C = C - tau v (v^T C)
            C = C - t * v.unsqueeze(-1) * matmul(v.unsqueeze(-2), C)
        else:  # C H = C - tau (C v) v^T
            C = C - t * matmul(C, v.unsqueeze(-1)) * v.unsqueeze(-2)
    return C


# -- LDL^T with Bunch-Kaufman pivoting --------------------------------------------------------------------------------
_BUNCH_KAUFMAN = (1 + math.sqrt(17)) / 8  # the pivot threshold that bounds the growth of the factors


def _from_lower(a, start):
    """`a` with its block `[start:, start:]` made symmetric from its lower triangle."""
    i = jnp.arange(a.shape[-1])
    block = (i[:, None] >= start) & (i[None, :] >= start)
    return jnp.where(block & (i[:, None] < i[None, :]), a.T, a)


def _bunch_kaufman_pivot(a, k):
    """LAPACK's choice for column `k`: whether it is zero (nothing to eliminate), whether the pivot is a 2x2 block,
    and the row `kp` swapped into place (`k`, or `k + 1` for a 2x2 block)."""
    idx = jnp.arange(a.shape[-1])
    absakk = jnp.abs(a[k, k])
    column = jnp.where(idx > k, jnp.abs(a[:, k]), 0)
    imax = jnp.argmax(column)
    colmax = column[imax]
    rowmax = jnp.max(jnp.where((idx >= k) & (idx != imax), jnp.abs(a[imax]), 0))
    zero = (jnp.maximum(absakk, colmax) == 0) | jnp.isnan(absakk)
    keep = zero | (absakk >= _BUNCH_KAUFMAN * colmax) | (absakk >= _BUNCH_KAUFMAN * colmax * (colmax / rowmax))
    two = ~keep & (jnp.abs(a[imax, imax]) < _BUNCH_KAUFMAN * rowmax)
    return zero, two, jnp.where(keep, k, imax)


def _eliminate_1x1(a, k, unused):
    """`A22 -= x x^T / d` and column `k` below `d = a[k, k]` scaled by `1 / d` (only the lower triangle is read).
    Where `unused` (the step takes another branch), a divisor of 1 keeps the discarded values finite."""
    idx = jnp.arange(a.shape[-1])
    d = jnp.where(unused, 1, a[k, k])
    x = jnp.where(idx > k, a[:, k], 0)
    out = jnp.where((idx[:, None] > k) & (idx[None, :] > k), a + x[:, None] * (-(1 / d) * x)[None, :], a)
    return out.at[:, k].set(jnp.where(idx > k, x * (1 / d), a[:, k]))


def _eliminate_2x2(a, k, unused):
    """With `D = [[a_kk, d21], [d21, a_k1k1]]`, columns `k`, `k + 1` below it become `W = A21 D^-1` and
    `A22 -= A21 W^T`, in LAPACK's order of operations."""
    idx, k1 = jnp.arange(a.shape[-1]), jnp.minimum(k + 1, a.shape[-1] - 1)
    d21 = jnp.where(unused, 1, a[k1, k])
    d11, d22 = a[k1, k1] / d21, a[k, k] / d21
    scale = 1 / jnp.where(unused, 1, d11 * d22 - 1) / d21
    below = idx > k + 1
    c0, c1 = jnp.where(below, a[:, k], 0), jnp.where(below, a[:, k1], 0)
    wk, wk1 = scale * (d11 * c0 - c1), scale * (d22 * c1 - c0)
    out = jnp.where(below[:, None] & below[None, :], a - c0[:, None] * wk[None, :] - c1[:, None] * wk1[None, :], a)
    out = out.at[:, k].set(jnp.where(below, wk, a[:, k]))
    return out.at[:, k1].set(jnp.where(below, wk1, out[:, k1]))


def _ldl_step(k, state):
    """Step `k` of LAPACK's `sytf2` (lower): choose the pivot of column `k`, swap it into place in the trailing
    block (kept symmetric), eliminate. The second column of a 2x2 pivot is skipped."""
    a, pivots, info, skip = state
    n, idx = a.shape[-1], jnp.arange(a.shape[-1])
    zero, two, kp = _bunch_kaufman_pivot(a, k)
    kk = jnp.where(two, k + 1, k)
    swap = jnp.where(idx == kk, kp, jnp.where(idx == kp, kk, idx))
    a = jnp.where((idx[:, None] >= k) & (idx[None, :] >= k), a[swap][:, swap], a)
    eliminated = jnp.where(two, _eliminate_2x2(a, k, ~two), jnp.where(zero, a, _eliminate_1x1(a, k, zero | two)))
    p = (kp + 1).astype(pivots.dtype)
    new = (_from_lower(eliminated, k + 1),
           jnp.where(two, pivots.at[k].set(-p).at[jnp.minimum(k + 1, n - 1)].set(-p), pivots.at[k].set(p)),
           jnp.where(zero & (info == 0), k + 1, info).astype(info.dtype))
    a, pivots, info = (jnp.where(skip, old, value) for old, value in zip(state[:3], new))
    return a, pivots, info, two & ~skip


def _ldl_factor_one(a):
    n = a.shape[-1]
    if n == 0:  # NOTE: an empty matrix: nothing to factor (the steps below index row 0)
        return a, jnp.zeros(0, np.int32), jnp.zeros((), np.int32)
    state = (_from_lower(a, 0), jnp.zeros(n, np.int32), jnp.zeros((), np.int32), jnp.zeros((), bool))
    a, pivots, info, _ = jax.lax.fori_loop(0, n, _ldl_step, state)
    return jnp.tril(a), pivots, info


def _ldl_factor(a, *, hermitian):
    return jnp.vectorize(_ldl_factor_one, signature="(n,n)->(n,n),(n),()")(a)


def _swap_rows(b, i, j):
    idx = jnp.arange(b.shape[0])
    return b[jnp.where(idx == i, j, jnp.where(idx == j, i, idx))]


def _forward_step(ld, pivots):
    """Step `k` of `sytrs`'s solve of `L D Y = B` (its pivots' row swaps included)."""
    def step(k, state):
        b, skip = state
        n, idx, p = b.shape[0], jnp.arange(b.shape[0]), pivots[k]
        two = p < 0
        b = _swap_rows(b, jnp.where(two, k + 1, k), jnp.abs(p) - 1)
        d = jnp.where(two | skip, 1, ld[k, k])
        # NOTE: rows updated by `where`, not by zero multipliers: an inf (of a singular D) stays an inf, as in LAPACK
        one = jnp.where((idx > k)[:, None], b - ld[:, k, None] * b[k][None, :], b)
        one = jnp.where((idx == k)[:, None], b * (1 / d), one)
        below = (idx > k + 1)[:, None]
        two_b = jnp.where(below, b - ld[:, k, None] * b[k][None, :], b)
        k1 = jnp.minimum(k + 1, n - 1)
        two_b = jnp.where(below, two_b - ld[:, k1, None] * two_b[k1][None, :], two_b)
        d21 = jnp.where(two & ~skip, ld[k1, k], 1)
        dk, dk1 = ld[k, k] / d21, ld[k1, k1] / d21
        denom = jnp.where(two & ~skip, dk * dk1 - 1, 1)
        bk, bk1 = two_b[k] / d21, two_b[k1] / d21
        two_b = jnp.where((idx == k)[:, None], (dk1 * bk - bk1) / denom, two_b)
        two_b = jnp.where((idx == k + 1)[:, None], (dk * bk1 - bk) / denom, two_b)
        return jnp.where(skip, state[0], jnp.where(two, two_b, one)), two & ~skip
    return step


def _backward_step(ld, pivots):
    """Step `n - 1 - j` of `sytrs`'s solve of `L^T X = Y` (its pivots' row swaps included)."""
    def step(j, state):
        b, skip = state
        n, idx = b.shape[0], jnp.arange(b.shape[0])
        k = n - 1 - j
        p = pivots[k]
        two = p < 0  # NOTE: k is the second column of its 2x2 block; k - 1 the first
        below = (idx > k)[:, None]
        k0 = jnp.maximum(k - 1, 0)
        new = b.at[k].add(-jnp.sum(jnp.where(below, ld[:, k, None] * b, 0), 0))
        new = jnp.where(two, new.at[k0].add(-jnp.sum(jnp.where(below, ld[:, k0, None] * b, 0), 0)), new)
        new = _swap_rows(new, k, jnp.abs(p) - 1)
        return jnp.where(skip, b, new), two & ~skip
    return step


def _ldl_solve_one(ld, pivots, b):
    n = ld.shape[-1]
    y, _ = jax.lax.fori_loop(0, n, _forward_step(ld, pivots), (b, jnp.zeros((), bool)))
    x, _ = jax.lax.fori_loop(0, n, _backward_step(ld, pivots), (y, jnp.zeros((), bool)))
    return x


def _ldl_solve(ld, pivots, b, *, hermitian):
    return jnp.vectorize(_ldl_solve_one, signature="(n,n),(n),(n,k)->(n,k)")(ld, pivots, b)


ldl_factor_p = _jax_primitive("ldl_factor", _ldl_factor, multiple_results=True)
ldl_solve_p = _jax_primitive("ldl_solve", _ldl_solve)


def ldl_factor_ex(A, *, hermitian: bool = False, check_errors: bool = False) -> LDLFactorExResult:
    """`ldl_factor` and an int32 `info`: 0, or `i` (from 1) where `D[i-1, i-1]` is the first zero pivot (the
    factorization is still complete, but `D` is singular), as `torch.linalg.ldl_factor_ex`.

    >>> aotjax.linalg.ldl_factor_ex(aotjax.zeros(2, 2)).info.item()
    1
    """
    A = _matrix("linalg.ldl_factor_ex", A)
    return LDLFactorExResult(*ldl_factor_p.bind(A, hermitian=bool(hermitian)))


def ldl_factor(A, *, hermitian: bool = False) -> LDLFactorResult:
    """The Bunch-Kaufman factorization `A = L D L^T` of symmetric matrices, in LAPACK's compact form, as
    `torch.linalg.ldl_factor` (only the lower triangle of `A` is read): `LD` holds `L` (unit diagonal) below the
    diagonal and the 1x1 and 2x2 blocks of `D` on and beside it; `pivots` (int32, from 1) the interchanges: `p > 0`
    swapped rows `k` and `p` for a 1x1 block, `-p` twice marks a 2x2 block. `ldl_solve` solves with it. A singular
    `D` is not an error here (`ldl_factor_ex`'s `info` reports it). Not differentiable, as in torch.

    >>> LD, pivots = aotjax.linalg.ldl_factor(aotjax.tensor([[4.0, 2.0], [2.0, 3.0]]))
    >>> LD, pivots.tolist()
    (tensor([[4. , 0. ],
            [0.5, 2. ]]), [1, 2])
    """
    LD, pivots, _ = ldl_factor_ex(A, hermitian=hermitian)
    return LDLFactorResult(LD, pivots)


def ldl_solve(LD, pivots, B, *, hermitian: bool = False):
    """Solves `A X = B` from `ldl_factor(A)`, as `torch.linalg.ldl_solve` (LAPACK's `sytrs`); batch dims
    broadcast. Not differentiable, as in torch.

    >>> A = aotjax.tensor([[4.0, 2.0], [2.0, 3.0]])
    >>> aotjax.linalg.ldl_solve(*aotjax.linalg.ldl_factor(A), A @ aotjax.tensor([[1.0], [2.0]]))
    tensor([[1.],
            [2.]])
    """
    LD, B, pivots = _matrix("linalg.ldl_solve", LD), _matrix("linalg.ldl_solve", B, square=False), as_tensor(pivots)
    n = LD.shape[-1]
    if LD.dtype != B.dtype:
        raise DTypeError(f"linalg.ldl_solve: expected LD and B of one dtype, got {LD.dtype.name} and "
                         f"{B.dtype.name}{where()}; convert one first (e.g. `B.to(LD.dtype)`)")
    if (not np.issubdtype(pivots.dtype, np.integer) or tuple(pivots.shape) != tuple(LD.shape[:-1])
            or B.shape[-2] != n):
        raise ShapeError(f"linalg.ldl_solve: expected integer pivots {list(LD.shape[:-1])} and B [..., {n}, k] for "
                         f"LD of shape {list(LD.shape)}, got {pivots.aval.str_short()} and {list(B.shape)}{where()}")
    batch = broadcast_shapes("linalg.ldl_solve", tuple(LD.shape[:-2]), tuple(B.shape[:-2]))
    LD, pivots = LD.expand(*batch, n, n), pivots.to(np.int32).expand(*batch, n)
    B = B.expand(*batch, *B.shape[-2:])
    return ldl_solve_p.bind(LD, pivots, B, hermitian=bool(hermitian))


for _fn in (geqrf, orgqr, ormqr):
    method(_fn)
