"""`aotjax.linalg` and the products (`addmm` ...) against PyTorch: each op on a few inputs eagerly, under one
`jit`, and its vjp against torch's autograd (well-conditioned inputs: SPD matrices for cholesky, symmetric ones
with distinct eigenvalues for eigh; for factors unique only up to signs, sign-invariant quantities); and the
`from_jax` combinator's derivatives against jax's (hessian, vmap of grad, grad of grad).

Tolerances: factorizations in float32 agree with torch's LAPACK to ~1e-5 relative only for well-conditioned
inputs; we compare at 1e-4 in float32 and 1e-8 in float64 (x64)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import aotjax
from aotjax.core.errors import DTypeError, ShapeError, UnsupportedError
from tests.helpers import FLOAT, X64, by_mode

torch = pytest.importorskip("torch")
TOL = by_mode(1e-8, 1e-4)


def _rng(seed=0):
    return np.random.default_rng(seed)


def mat(*shape, seed=0):
    """Well-conditioned square matrices (a multiple of the identity added)."""
    a = _rng(seed).standard_normal(shape)
    return (a + shape[-1] * np.eye(shape[-1])).astype(FLOAT)


def rect(*shape, seed=0):
    return _rng(seed).standard_normal(shape).astype(FLOAT)


def spd(*shape, seed=0):
    x = _rng(seed).standard_normal(shape)
    return (x @ np.swapaxes(x, -1, -2) + shape[-1] * np.eye(shape[-1])).astype(FLOAT)


def sym(*shape, seed=0):
    x = _rng(seed).standard_normal(shape)
    return (x + np.swapaxes(x, -1, -2)).astype(FLOAT)


def triu(*shape, seed=0):
    return np.triu(mat(*shape, seed=seed)).astype(FLOAT)


# -- sign-invariant views of factors (written once for both libraries: Tensor methods they share) ----------
def _signs(R):
    """The signs making a factor's diagonal positive (a factor is unique up to them)."""
    d = R.diagonal(0, -2, -1)
    return (d >= 0).to(R.dtype) * 2 - 1


def qr_canon(out):
    Q, R = out
    s = _signs(R)
    return Q * s.unsqueeze(-2), R * s.unsqueeze(-1)


def qr_complete_canon(out):
    Q, R = out
    k = R.shape[-1]
    s = _signs(R[..., :k, :])
    return Q[..., :, :k] * s.unsqueeze(-2), R[..., :k, :] * s.unsqueeze(-1)


def projectors(V, c):
    """`V diag(c) V^T`: invariant under the signs of V's columns (distinct c tell the columns apart)."""
    return (V * c) @ V.mT


def svd_canon(out):
    U, S, Vh = out
    c = _weights(S.shape[-1], U)
    return S, projectors(U, c), projectors(Vh.mT, c)


def eigh_canon(out):
    w, V = out
    return w, projectors(V, _weights(w.shape[-1], V))


def _weights(n, like):
    c = np.linspace(1.0, 2.0, n).astype(FLOAT)
    return torch.from_numpy(c) if isinstance(like, torch.Tensor) else aotjax.tensor(c)


def _symmetrized(f):
    """`f` of the symmetric part: both libraries then differentiate the same function of the input."""
    return lambda L, X, *a, **k: f(L, (X + X.mT) / 2, *a, **k)


@dataclass
class Case:
    name: str
    fn: Callable  # fn(lib, *inputs): lib is torch or aotjax
    samples: list  # lists of NumPy inputs; the first is differentiated (float inputs only) and jitted
    canon: Callable | None = None  # a differentiable, sign-invariant view of the outputs
    grad: bool = True
    tol: float = TOL
    slow: bool = False  # NOTE: compile-heavy or redundant with a faster case: runs in the slow pass


L = "linalg"
CASES = [
    Case("cholesky", _symmetrized(lambda L, A: L.linalg.cholesky(A)), [[spd(3, 3)], [spd(2, 4, 4)], [spd(0, 2, 2)]]),
    Case("cholesky_upper", _symmetrized(lambda L, A: L.linalg.cholesky(A, upper=True)), [[spd(3, 3)]], slow=True),
    Case("qr", lambda L, A: L.linalg.qr(A), [[mat(3, 3)], [rect(2, 4, 3)]], qr_canon),
    Case("qr_complete", lambda L, A: L.linalg.qr(A, mode="complete"), [[rect(4, 3)]], qr_complete_canon,
         grad=False, slow=True),
    Case("qr_r", lambda L, A: L.linalg.qr(A, mode="r")[1].abs(), [[rect(4, 3)]], grad=False),
    Case("svd", lambda L, A: L.linalg.svd(A, full_matrices=False), [[rect(3, 3)], [rect(2, 4, 3)]], svd_canon),
    Case("svdvals", lambda L, A: L.linalg.svdvals(A), [[rect(4, 3)], [rect(2, 3, 5)]]),
    Case("eigh", _symmetrized(lambda L, A: L.linalg.eigh(A)), [[sym(3, 3)], [sym(2, 4, 4)]], eigh_canon),
    Case("eigh_upper", _symmetrized(lambda L, A: L.linalg.eigh(A, UPLO="U")), [[sym(3, 3)]], eigh_canon, slow=True),
    Case("eigvalsh", _symmetrized(lambda L, A: L.linalg.eigvalsh(A)), [[sym(4, 4)]]),
    Case("det", lambda L, A: L.linalg.det(A), [[mat(3, 3)], [mat(2, 2, 2)], [mat(0, 2, 2)]]),
    Case("det_method", lambda L, A: A.det(), [[mat(3, 3)]]),
    Case("slogdet", lambda L, A: L.linalg.slogdet(A), [[mat(3, 3)], [rect(2, 3, 3)]]),
    Case("logdet", lambda L, A: L.logdet(A), [[spd(3, 3)], [rect(3, 3, seed=1)]]),
    Case("inv", lambda L, A: L.linalg.inv(A), [[mat(3, 3)], [mat(2, 3, 3)]]),
    Case("inverse", lambda L, A: A.inverse(), [[mat(2, 2)]], grad=False),
    Case("solve", lambda L, A, B: L.linalg.solve(A, B), [[mat(3, 3), rect(3, 2)], [mat(2, 3, 3), rect(3)],
                                                        [mat(2, 3, 3), rect(2, 3)], [mat(3, 3), rect(4, 3, 1)]]),
    Case("solve_right", lambda L, A, B: L.linalg.solve(A, B, left=False), [[mat(3, 3), rect(2, 3)]]),
    Case("solve_triangular", lambda L, A, B: L.linalg.solve_triangular(A, B, upper=True),
         [[triu(3, 3), rect(3, 2)], [triu(2, 3, 3), rect(3, 1)]]),
    Case("solve_triangular_lower_right_unit",
         lambda L, A, B: L.linalg.solve_triangular(A, B, upper=False, left=False, unitriangular=True),
         [[mat(3, 3), rect(2, 3)]], slow=True),
    Case("lu_factor", lambda L, A: L.linalg.lu_factor(A), [[mat(3, 3, seed=2)], [rect(2, 4, 4)]]),
    Case("lu", lambda L, A: L.linalg.lu(A), [[rect(3, 3)], [rect(2, 4, 3)], [rect(3, 5)]]),
    Case("lu_solve", lambda L, A, B: L.linalg.lu_solve(*L.linalg.lu_factor(A), B), [[rect(3, 3), rect(3, 2)],
                                                                                   [rect(2, 3, 3), rect(3, 1)]]),
    Case("lu_solve_adjoint_right", lambda L, A, B: L.linalg.lu_solve(*L.linalg.lu_factor(A), B, left=False,
                                                                     adjoint=True), [[rect(3, 3), rect(2, 3)]],
         slow=True),
    Case("matrix_exp", lambda L, A: L.linalg.matrix_exp(A), [[rect(3, 3) / 2], [rect(2, 2, 2)]], slow=True),
    Case("matrix_exp_top", lambda L, A: L.matrix_exp(A), [[rect(2, 2)]], grad=False, slow=True),
    Case("pinv", lambda L, A: L.linalg.pinv(A), [[rect(4, 3)], [rect(2, 2, 3)]]),
    Case("pinv_atol", lambda L, A: L.linalg.pinv(A, atol=1.5), [[np.diag([3.0, 1.0, 2.0]).astype(FLOAT)]], slow=True),
    Case("lstsq", lambda L, A, B: L.linalg.lstsq(A, B).solution, [[rect(5, 3), rect(5, 2)]], slow=True),
    Case("matrix_power", lambda L, A: L.linalg.matrix_power(A, 3), [[rect(3, 3)], [rect(2, 2, 2)]]),
    Case("matrix_power_neg", lambda L, A: L.linalg.matrix_power(A, -2), [[mat(3, 3)]]),
    Case("matrix_power_zero", lambda L, A: L.linalg.matrix_power(A, 0), [[mat(3, 3)]], grad=False),
    Case("matrix_rank", lambda L, A: L.linalg.matrix_rank(A), [[rect(4, 3)], [np.ones((2, 3, 3), FLOAT)]],
         grad=False),
    Case("matrix_rank_hermitian_atol", lambda L, A: L.linalg.matrix_rank(A, hermitian=True, atol=2.5),
         [[np.diag([3.0, -1.0, 2.0]).astype(FLOAT)]], grad=False, slow=True),
    Case("vector_norm", lambda L, x: L.linalg.vector_norm(x), [[rect(3, 4)], [rect()], [rect(0, 2)]]),
    Case("vector_norm_ord_dim", lambda L, x: L.linalg.vector_norm(x, ord=3, dim=(0, 2), keepdim=True),
         [[rect(2, 3, 4)]]),
    Case("vector_norm_inf", lambda L, x: L.linalg.vector_norm(x, ord=float("inf"), dim=1), [[rect(3, 4)]]),
    Case("vector_norm_1", lambda L, x: L.linalg.vector_norm(x, ord=1, dim=-1), [[rect(3, 4)]]),
    Case("vector_norm_0", lambda L, x: L.linalg.vector_norm(x, ord=0), [[np.array([1.0, 0.0, 2.0], FLOAT)]],
         grad=False),
    Case("vector_norm_zero", lambda L, x: L.linalg.vector_norm(x, dim=-1), [[np.array([[0.0, 0.0], [3.0, 4.0]],
                                                                                       FLOAT)]]),
    Case("matrix_norm_fro", lambda L, A: L.linalg.matrix_norm(A), [[rect(3, 4)], [rect(2, 3, 3)]]),
    Case("matrix_norm_nuc", lambda L, A: L.linalg.matrix_norm(A, ord="nuc"), [[rect(3, 4)]]),
    Case("matrix_norm_2_dim", lambda L, A: L.linalg.matrix_norm(A, ord=2, dim=(0, 2), keepdim=True),
         [[rect(3, 2, 4)]], slow=True),
    Case("matrix_norm_1", lambda L, A: L.linalg.matrix_norm(A, ord=1), [[rect(3, 4)]]),
    Case("matrix_norm_neg_inf", lambda L, A: L.linalg.matrix_norm(A, ord=-float("inf")), [[rect(3, 4)]]),
    Case("norm", lambda L, x: L.linalg.norm(x), [[rect(2, 3, 4)]]),
    Case("norm_matrix_ord", lambda L, x: L.linalg.norm(x, ord=-2), [[rect(3, 3)]], slow=True),
    Case("norm_dim", lambda L, x: L.linalg.norm(x, ord=1, dim=0), [[rect(3, 2)]]),
    Case("multi_dot", lambda L, a, b, c: L.linalg.multi_dot([a, b, c]), [[rect(3), rect(3, 4), rect(4, 2)]], slow=True),
    Case("vecdot", lambda L, x, y: L.linalg.vecdot(x, y, dim=0), [[rect(3, 2), rect(3, 1)]]),
    Case("linalg_cross", lambda L, x, y: L.linalg.cross(x, y), [[rect(2, 3), rect(1, 3, seed=1)]]),
    Case("cross", lambda L, x, y: L.cross(x, y, dim=0), [[rect(3, 2), rect(3, 2)]]),
    Case("addmm", lambda L, i, a, b: L.addmm(i, a, b, beta=0.5, alpha=2.0), [[rect(3), rect(2, 4), rect(4, 3)]]),
    Case("addmm_beta0", lambda L, i, a, b: L.addmm(i, a, b, beta=0), [[np.full((2, 3), np.nan, FLOAT), rect(2, 4),
                                                                        rect(4, 3)]], grad=False),
    Case("addmv", lambda L, i, a, v: L.addmv(i, a, v, alpha=-1.0), [[rect(2), rect(2, 3), rect(3)]]),
    Case("addbmm", lambda L, i, a, b: L.addbmm(i, a, b, beta=2.0), [[rect(2, 4), rect(3, 2, 5), rect(3, 5, 4)]],
         slow=True),
    Case("baddbmm", lambda L, i, a, b: L.baddbmm(i, a, b, alpha=0.5), [[rect(1, 4), rect(3, 2, 5), rect(3, 5, 4)]],
         slow=True),
    Case("addr", lambda L, i, a, b: L.addr(i, a, b, beta=3.0), [[rect(2, 3), rect(2), rect(3)]]),
    Case("mv", lambda L, a, v: L.mv(a, v), [[rect(2, 3), rect(3)]]),
    Case("inner", lambda L, a, b: L.inner(a, b), [[rect(2, 3), rect(4, 3)], [rect(), rect(2)], [rect(3), rect(3)]]),
    Case("vdot", lambda L, a, b: L.vdot(a, b), [[rect(3), rect(3)]]),
    Case("kron", lambda L, a, b: L.kron(a, b), [[rect(2, 3), rect(2, 2)], [rect(3), rect(2, 2)]], slow=True),
    Case("tensordot", lambda L, a, b: L.tensordot(a, b, dims=([1, 0], [0, 2])), [[rect(3, 2, 4), rect(2, 5, 3)]],
         slow=True),
    Case("tensordot_int", lambda L, a, b: L.tensordot(a, b, dims=1), [[rect(3, 2), rect(2, 4)]]),
    Case("cdist", lambda L, a, b: L.cdist(a, b), [[rect(4, 3), rect(2, 3, seed=1)], [rect(2, 3, 2), rect(1, 4, 2)]]),
    Case("cdist_p1", lambda L, a, b: L.cdist(a, b, p=1.0), [[rect(4, 3), rect(2, 3, seed=1)]], slow=True),
    Case("cdist_zero", lambda L, a, b: L.cdist(a, b),
         [[np.array([[0.0, 1.0]], FLOAT), np.array([[0.0, 1.0], [1.0, 1.0]],
                                                                                              FLOAT)]], slow=True),
]


def _flat(out) -> list:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _run(case: Case, lib, xs):
    out = case.fn(lib, *xs)
    return _flat(case.canon(out) if case.canon else out)


def _np(x):
    if isinstance(x, torch.Tensor):
        x = x.detach().numpy()
        return x.astype(np.int32) if x.dtype == np.int64 and not X64 else x
    return np.asarray(x)


def _assert_close(got, want, tol, how):
    assert len(got) == len(want), how
    for i, (g, w) in enumerate(zip(got, want)):
        g, w = _np(g), _np(w)
        assert g.shape == w.shape, f"{how}: output {i}: shape {g.shape} != torch's {w.shape}"
        assert g.dtype == w.dtype, f"{how}: output {i}: dtype {g.dtype} != torch's {w.dtype}"
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol, err_msg=f"{how}: output {i}")


def _loss_weights(outs):
    rng = _rng(7)
    return [rng.standard_normal(o.shape).astype(FLOAT) for o in outs]


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.slow) if c.slow else c for c in CASES],
                         ids=lambda c: c.name)
def test_against_torch(case):
    want_first = None
    for k, sample in enumerate(case.samples):
        want = _run(case, torch, [torch.from_numpy(x.copy()) for x in sample])
        got = _run(case, aotjax, [aotjax.tensor(x) for x in sample])
        _assert_close(got, want, case.tol, f"{case.name} eagerly, sample {k}")
        want_first = want if k == 0 else want_first
    jitted = aotjax.jit(lambda *xs: _run(case, aotjax, xs))  # NOTE: one jit per op: the first sample only
    _assert_close(jitted(*[aotjax.tensor(x) for x in case.samples[0]]), want_first, case.tol, f"{case.name} jitted")
    if not case.grad:
        return
    sample = case.samples[0]
    weights = _loss_weights([o for o in want_first if np.issubdtype(_np(o).dtype, np.floating)])

    def loss(lib, xs):
        outs = [o for o in _run(case, lib, xs) if o.dtype in (torch.float32, torch.float64) or
                isinstance(o, aotjax.Tensor) and np.issubdtype(o.dtype, np.floating)]
        conv = (lambda w: torch.from_numpy(w)) if lib is torch else aotjax.tensor
        return sum(((o * conv(w)).sum() for o, w in zip(outs, weights)), start=0.0)

    xs_t = [torch.from_numpy(x.copy()).requires_grad_(True) for x in sample]
    loss(torch, xs_t).backward()
    grads = aotjax.grad(lambda *xs: loss(aotjax, xs), argnums=tuple(range(len(sample))))(
        *[aotjax.tensor(x) for x in sample])
    _assert_close(list(grads), [x.grad for x in xs_t], case.tol * 10, f"{case.name} vjp against torch autograd")


def test_inplace_products_write_self():
    i, a, b = rect(2, 3), rect(2, 4), rect(4, 3)
    x = aotjax.tensor(i.copy())
    view = x[:, :]
    assert view.addmm_(aotjax.tensor(a), aotjax.tensor(b), beta=0.5, alpha=2.0) is view
    want = torch.from_numpy(i.copy()).addmm_(torch.from_numpy(a), torch.from_numpy(b), beta=0.5, alpha=2.0)
    np.testing.assert_allclose(x.numpy(), want.numpy(), rtol=TOL, atol=TOL)
    y = aotjax.tensor(i.copy())
    y.addr_(aotjax.tensor(rect(2)), aotjax.tensor(rect(3)))
    want = torch.from_numpy(i.copy()).addr_(torch.from_numpy(rect(2)), torch.from_numpy(rect(3)))
    np.testing.assert_allclose(y.numpy(), want.numpy(), rtol=TOL)
    with pytest.raises(ShapeError, match="does not fit"):
        aotjax.tensor(rect(3)).addmm_(aotjax.tensor(a), aotjax.tensor(b))


def test_integer_products_and_errors():
    a = np.arange(6).reshape(2, 3)
    got = aotjax.addmm(aotjax.tensor(np.ones((2, 2), np.int32)), aotjax.tensor(a.astype(np.int32)),
                       aotjax.tensor(a.T.astype(np.int32)), alpha=2)
    np.testing.assert_array_equal(got.numpy(), 1 + 2 * a @ a.T)
    with pytest.raises(DTypeError, match="linalg.inv: expected a floating point tensor"):
        aotjax.linalg.inv(aotjax.tensor(np.eye(2, dtype=np.int32)))
    with pytest.raises(UnsupportedError, match="complex tensors are not supported"):
        aotjax.linalg.det(aotjax.tensor(np.eye(2, dtype=np.complex64)))
    with pytest.raises(ShapeError, match="square matrices"):
        aotjax.linalg.inv(aotjax.ones(2, 3))
    with pytest.raises(ShapeError, match="cannot be solved"):
        aotjax.linalg.solve(aotjax.eye(3), aotjax.ones(2, 1))
    with pytest.raises(ShapeError, match="addmm: expected 2-D"):
        aotjax.addmm(aotjax.ones(2), aotjax.ones(2), aotjax.ones(2, 2))


# -- the combinator: derivatives of derivatives and batching, against jax --------------------------------------
B = np.array([0.5, -1.0, 2.0], FLOAT)


def _f(L, A):  # a composition of two from_jax primitives, det and solve
    return L.linalg.det(A) * L.linalg.solve(A, L.tensor(B) if L is aotjax else jnp.asarray(B)).sum()


def _f_jax(A):
    return jnp.linalg.det(A) * jnp.linalg.solve(A, B).sum()


@pytest.mark.slow
def test_hessian_of_det_and_solve_matches_jax():
    A = aotjax.tensor(mat(3, 3, seed=3))
    H = aotjax.jit(aotjax.hessian(lambda A: _f(aotjax, A)))(A)  # NOTE: jitted: one compile, not one per chain
    np.testing.assert_allclose(H.numpy(), jax.hessian(_f_jax)(A.numpy()), rtol=TOL * 10, atol=TOL * 10)
    gg = aotjax.jit(aotjax.grad(lambda A: aotjax.grad(lambda A: _f(aotjax, A))(A).sum()))(A)
    np.testing.assert_allclose(gg.numpy(), jax.grad(lambda A: jax.grad(_f_jax)(A).sum())(A.numpy()),
                               rtol=TOL * 10, atol=TOL * 10)


def test_vmap_of_grad_matches_jax_and_programs_name_the_primitives():
    As = np.stack([mat(3, 3, seed=s) for s in range(4)])
    got = aotjax.vmap(aotjax.grad(lambda A: _f(aotjax, A)))(aotjax.tensor(As))
    np.testing.assert_allclose(got.numpy(), jax.vmap(jax.grad(_f_jax))(As), rtol=TOL * 10, atol=TOL * 10)
    S = sym(2, 3, 3)
    eigs = aotjax.vmap(lambda A: aotjax.linalg.eigh(A).eigenvalues, in_axes=1)(aotjax.tensor(np.moveaxis(S, 0, 1)))
    np.testing.assert_allclose(eigs.numpy(), np.linalg.eigvalsh(S), rtol=TOL, atol=TOL)
    program = str(aotjax.make_jaxpr(aotjax.grad(lambda A: _f(aotjax, A)))(aotjax.tensor(As[0])))
    assert " det " in program and "det_jvp[chain=(jvp(1), T(1))]" in program, program
    assert "solve_jvp" in program
