"""Fixes found by PyTorch's OpInfo database, each against the installed torch:

- the derivatives of the factorizations of symmetric input (`cholesky`, `cholesky_ex`, `eigh`, `eigvalsh`) follow
  torch's convention: the gradient of a function of the symmetric matrix, symmetric (not masked to the triangle
  read); `cholesky_solve`/`cholesky_inverse` differentiate in the whole factor and `pinv(hermitian=True)` as a
  general pinv (both as torch), to the second order;
- the derivatives at removable singularities and other special points (`i0` at 0, `sinc` near 0, `entr` at 0,
  `logit` at 0 and 1, `xlogy`/`xlog1py` at 0);
- `matrix_exp` in float32 as accurate as torch's (against a float64 reference), and for large norms;
- `addbmm_` resizing `self` as torch does (and only it of the in-place products), and the products' `input`
  expanding one way only.

Tolerances: 1e-8 with x64 (float64 inputs), 1e-4 relative to the largest value without (float32)."""
from __future__ import annotations

import math
import re
import warnings

import numpy as np
import pytest

import aotjax
from aotjax.core.errors import DTypeError, ShapeError, UnsupportedError
from tests.helpers import FLOAT, X64, by_mode, central_difference

torch = pytest.importorskip("torch")
TOL = by_mode(1e-8, 1e-4)


def _rng(seed=0):
    return np.random.default_rng(seed)


def spd(*shape, seed=0):
    x = _rng(seed).standard_normal(shape)
    return (x @ np.swapaxes(x, -1, -2) + shape[-1] * np.eye(shape[-1])).astype(FLOAT)


def rect(*shape, seed=0):
    return _rng(seed).standard_normal(shape).astype(FLOAT)


def chol(*shape, seed=0):
    return np.linalg.cholesky(spd(*shape, seed=seed).astype(np.float64)).astype(FLOAT)


def _t(x):
    return torch.from_numpy(np.array(x))


def _close(got, want, how, tol=TOL):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{how}: shape {got.shape} != torch's {want.shape}"
    scale = max(1.0, float(np.nanmax(np.abs(want), initial=0.0)))
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale, err_msg=how)


def _weights(outs):
    rng = _rng(7)
    return [rng.standard_normal(tuple(o.shape)).astype(FLOAT) for o in outs]


def _outs(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _check_grads(fn, inputs, how, tol=TOL):
    """`fn(lib, *xs)`'s outputs and the gradients of a fixed random weighting of them (not symmetric: the
    convention shows), aotjax against torch."""
    want = _outs(fn(torch, *[_t(x) for x in inputs]))
    got = _outs(fn(aotjax, *[aotjax.tensor(x) for x in inputs]))
    for g, w in zip(got, want):
        _close(g.numpy(), w.numpy(), f"{how}: value")
    weights = _weights(want)

    def loss(lib, xs):
        conv = _t if lib is torch else aotjax.tensor
        return sum((o * conv(w)).sum() for o, w in zip(_outs(fn(lib, *xs)), weights))

    xs_t = [_t(x).requires_grad_(True) for x in inputs]
    loss(torch, xs_t).backward()
    grads = aotjax.grad(lambda *xs: loss(aotjax, xs), argnums=tuple(range(len(inputs))))(
        *[aotjax.tensor(x) for x in inputs])
    for i, (g, x) in enumerate(zip(grads, xs_t)):
        _close(g.numpy(), x.grad.numpy(), f"{how}: gradient of input {i}", tol * 10)
    return [g.numpy() for g in grads]


def _projectors(lib, V):  # NOTE: eigenvectors are unique up to signs: V diag(c) V^T is not
    c = np.linspace(1.0, 2.0, V.shape[-1]).astype(FLOAT)
    return (V * (_t(c) if lib is torch else aotjax.tensor(c))) @ V.mT


# -- 3. the factorizations of symmetric input: torch's gradient convention ---------------------------------------
SYMMETRIC = [  # (name, fn(lib, A), input): the gradient is symmetric
    ("linalg.cholesky", lambda L, A: L.linalg.cholesky(A), spd(3, 3)),
    ("linalg.cholesky_upper_batched", lambda L, A: L.linalg.cholesky(A, upper=True), spd(2, 3, 3, seed=1)),
    ("cholesky_upper", lambda L, A: L.cholesky(A, upper=True) if L is aotjax else L.linalg.cholesky(A).mT,
     spd(3, 3)),  # NOTE: torch.cholesky is deprecated (it warns); linalg.cholesky(A).mT is the same factor
    ("linalg.cholesky_ex", lambda L, A: L.linalg.cholesky_ex(A).L, spd(4, 4, seed=2)),
    ("linalg.eigh", lambda L, A: _projectors(L, L.linalg.eigh(A).eigenvectors), spd(3, 3, seed=3)),
    ("linalg.eigh_upper", lambda L, A: (_projectors(L, L.linalg.eigh(A, UPLO="U").eigenvectors),
                                        L.linalg.eigh(A, UPLO="U").eigenvalues), spd(3, 3, seed=4)),
    ("linalg.eigvalsh", lambda L, A: L.linalg.eigvalsh(A), spd(3, 3, seed=5)),
]
FACTOR = [  # (name, fn(lib, ...), inputs): torch differentiates in the whole factor (not masked to its triangle)
    ("cholesky_solve", lambda L, B, F: L.cholesky_solve(B, F), [rect(3, 2), chol(3, 3)]),
    ("cholesky_solve_upper_batched", lambda L, B, F: L.cholesky_solve(B, F, upper=True),
     [rect(2, 3, 1), chol(3, 3, seed=1).T.copy()]),
    ("cholesky_inverse", lambda L, F: L.cholesky_inverse(F), [chol(3, 3, seed=2)]),
    ("cholesky_inverse_upper", lambda L, F: L.cholesky_inverse(F, upper=True), [chol(3, 3, seed=3).T.copy()]),
    ("pinv_hermitian", lambda L, A: L.linalg.pinv(A, hermitian=True), [spd(3, 3, seed=4) - 4 * np.eye(3, dtype=FLOAT)]),
]


@pytest.mark.parametrize("name, fn, A", SYMMETRIC, ids=[c[0] for c in SYMMETRIC])
def test_symmetric_input_gradients_are_torchs(name, fn, A):
    (g,) = _check_grads(fn, [A], name)
    np.testing.assert_allclose(g, np.swapaxes(g, -1, -2), rtol=TOL, atol=TOL, err_msg=f"{name}: not symmetric")


@pytest.mark.parametrize("name, fn, inputs", FACTOR, ids=[c[0] for c in FACTOR])
def test_factor_gradients_are_torchs(name, fn, inputs):
    _check_grads(fn, inputs, name)


def test_cholesky_gradient_against_finite_differences_along_a_symmetric_direction():
    """The derivative is that of a function of the symmetric matrix: along a symmetric perturbation (where it is
    defined whichever triangle the factorization reads) it is the finite difference."""
    A, W = spd(3, 3, seed=6), rect(3, 3, seed=7)
    E = rect(3, 3, seed=8)
    E = (E + E.T) / 2
    g = aotjax.grad(lambda a: (aotjax.linalg.cholesky(a) * aotjax.tensor(W)).sum())(aotjax.tensor(A)).numpy()
    fd = central_difference(lambda a: (aotjax.linalg.cholesky(aotjax.tensor(a)) * aotjax.tensor(W)).sum().numpy(),
                            [A], [E])
    np.testing.assert_allclose((g * E).sum(), fd, rtol=by_mode(1e-5, 2e-3), atol=by_mode(1e-6, 1e-3))


SECOND = [  # (name, fn(lib, X), input): the derivative of a weighted first gradient, against torch's double backward
    ("cholesky", lambda L, A: L.linalg.cholesky(A), spd(3, 3)),
    ("cholesky_solve", lambda L, F: L.cholesky_solve(_t(rect(3, 2)) if L is torch else aotjax.tensor(rect(3, 2)),
                                                     F), chol(3, 3)),
    ("pinv_hermitian", lambda L, A: L.linalg.pinv(A, hermitian=True), rect(3, 3, seed=1)),
]


@pytest.mark.parametrize("name, fn, X", SECOND, ids=[c[0] for c in SECOND])
def test_second_derivatives_keep_torchs_convention(name, fn, X):
    W, V = _weights(_outs(fn(torch, _t(X))))[0], rect(3, 3, seed=9)
    x = _t(X).requires_grad_(True)
    (g,) = torch.autograd.grad((fn(torch, x) * _t(W)).sum(), x, create_graph=True)
    (want,) = torch.autograd.grad((g * _t(V)).sum(), x)

    def first(a):
        return aotjax.grad(lambda a: (fn(aotjax, a) * aotjax.tensor(W)).sum())(a)
    got = aotjax.grad(lambda a: (first(a) * aotjax.tensor(V)).sum())(aotjax.tensor(X))
    _close(got.numpy(), want.numpy(), f"{name}: second derivative", TOL * 10)


def test_pinv_hermitian_reads_the_lower_triangle_as_torch():
    A = rect(3, 3, seed=2)  # not symmetric: torch reads its lower triangle (its eigh)
    _check_grads(lambda L, A: L.linalg.pinv(A, hermitian=True), [A], "pinv(hermitian=True) of a non-symmetric A")
    with pytest.raises(ShapeError, match="linalg.pinv: a batch of square matrices"):
        aotjax.linalg.pinv(aotjax.ones(2, 3), hermitian=True)


def test_cholesky_solve_batches_under_vmap_and_checks_its_operands():
    Fs, B = np.stack([chol(3, 3, seed=s) for s in range(3)]), rect(3, 2)
    per = [aotjax.grad(lambda f: aotjax.cholesky_solve(aotjax.tensor(B), f).sum())(aotjax.tensor(f)).numpy()
           for f in Fs]
    vm = aotjax.vmap(aotjax.grad(lambda f: aotjax.cholesky_solve(aotjax.tensor(B), f).sum()))(aotjax.tensor(Fs))
    np.testing.assert_allclose(vm.numpy(), np.stack(per), rtol=TOL, atol=TOL)
    assert "cholesky_solve" in str(aotjax.make_jaxpr(lambda f: aotjax.cholesky_solve(aotjax.tensor(B), f))(
        aotjax.tensor(Fs[0])))
    with pytest.raises(ShapeError, match="cholesky_solve: B of shape \\[2, 2\\] and L of shape \\[3, 3\\]"):
        aotjax.cholesky_solve(aotjax.ones(2, 2), aotjax.eye(3))
    with pytest.raises(DTypeError, match="cholesky_solve: expected operands of one dtype"):
        aotjax.cholesky_solve(aotjax.ones(3, 1, dtype=aotjax.float16), aotjax.eye(3))


# -- 4. derivatives at special points ---------------------------------------------------------------------------
S = aotjax.special
NAN, INF = float("nan"), float("inf")
POINTS = [  # (name, fn(lib, x), points): torch's derivative (and value) at each
    ("i0", lambda L, x: L.i0(x), [0.0, -0.0, 1e-30, 1e-3, -2.5, 30.0]),
    ("special.i0e", lambda L, x: L.special.i0e(x), [0.0, -0.0, 1e-3, -2.5]),
    ("special.i1", lambda L, x: L.special.i1(x), [0.0, -0.0, 1e-3, -2.5]),
    ("special.i1e", lambda L, x: L.special.i1e(x), [0.0, -0.0, 1e-3, -2.5]),
    ("sinc", lambda L, x: L.sinc(x), [0.0, -0.0, 0.25, 1.0, -1.5]),
    ("special.entr", lambda L, x: L.special.entr(x), [0.0, 0.5, -1.0, INF, NAN, 1.0]),
    ("logit", lambda L, x: L.logit(x), [0.0, 1.0, -1.0, 2.0, 0.3, NAN]),
    ("logit_eps", lambda L, x: L.logit(x, eps=0.25), [0.0, 0.25, 0.75, 0.5, 1.0]),
]


@pytest.mark.parametrize("name, fn, points", POINTS, ids=[c[0] for c in POINTS])
def test_derivatives_at_special_points_are_torchs(name, fn, points):
    x = np.array(points, FLOAT)
    t = _t(x).requires_grad_(True)
    want = fn(torch, t)
    want.sum().backward()
    got = fn(aotjax, aotjax.tensor(x))
    g = aotjax.grad(lambda v: fn(aotjax, v).sum())(aotjax.tensor(x))
    np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=TOL, atol=TOL, err_msg=f"{name}: value")
    np.testing.assert_allclose(g.numpy(), t.grad.numpy(), rtol=TOL, atol=TOL, err_msg=f"{name}: derivative")


def test_bessel_i_derivatives_are_i1_and_have_no_cancellation_near_zero():
    """d/dx i0 = i1 (0 at 0): as a composition `exp(|x|) i0e(x)` its derivative was 1 at 0 and lost digits near 0;
    `special.modified_bessel_i0/i1` (no derivative in torch) share it."""
    x = np.array([0.0, 1e-4, -1e-3, 0.5, 7.0], FLOAT)
    x64 = _t(x.astype(np.float64))
    for fn in (aotjax.i0, S.modified_bessel_i0):
        g = aotjax.grad(lambda v, fn=fn: fn(v).sum())(aotjax.tensor(x)).numpy()
        np.testing.assert_allclose(g, torch.special.i1(x64).numpy(), rtol=by_mode(1e-12, 1e-6), atol=0,
                                   err_msg=fn.__name__)
    d_i1 = torch.special.i0(x64[1:]) - torch.special.i1(x64[1:]) / x64[1:]
    g = aotjax.grad(lambda v: S.modified_bessel_i1(v).sum())(aotjax.tensor(x)).numpy()
    np.testing.assert_allclose(g, np.concatenate([[0.5], d_i1.numpy()]), rtol=by_mode(1e-12, 1e-5))
    y = aotjax.tensor(x.copy())
    assert y.i0_() is y
    np.testing.assert_allclose(y.numpy(), torch.i0(_t(x)).numpy(), rtol=TOL)


def _d_sin_over(y):
    """d/dy sin(y) / y in float64: its series near 0 (where the closed form cancels), the closed form beyond."""
    small = np.abs(y) < 0.5
    safe = np.where(small, 1.0, y)
    series = sum((-1) ** k * 2 * k * y ** (2 * k - 1) / math.factorial(2 * k + 1) for k in range(1, 12))
    return np.where(small, series, (safe * np.cos(safe) - np.sin(safe)) / safe ** 2)


def test_sin_over_x_derivatives_keep_their_precision_near_zero():
    """`sinc` and `special.spherical_bessel_j0` near 0: the quotient's derivative (a difference of two terms near
    1 / x) lost every digit (torch's sinc loses ~1% at 1e-3 in float32, 1e-5 at 1e-6 in float64)."""
    x = np.array([1e-20, 1e-6, -1e-3, 0.05, 0.3, 0.999 / np.pi, 2.0], FLOAT)
    x64 = x.astype(np.float64)
    g = aotjax.grad(lambda v: aotjax.sinc(v).sum())(aotjax.tensor(x)).numpy()
    np.testing.assert_allclose(g, np.pi * _d_sin_over(np.pi * x64), rtol=by_mode(1e-12, 1e-6))
    g = aotjax.grad(lambda v: S.spherical_bessel_j0(v).sum())(aotjax.tensor(x)).numpy()
    np.testing.assert_allclose(g, _d_sin_over(x64), rtol=by_mode(1e-12, 1e-6))
    np.testing.assert_allclose(S.spherical_bessel_j0(aotjax.tensor(x)).numpy(), np.sin(x64) / x64,
                               rtol=by_mode(1e-15, 1e-6))


GRID = [0.0, -0.0, 1.0, -1.0, 2.0, 0.5, NAN, INF, -INF, 1e-30, -2.0]


@pytest.mark.parametrize("name", ["xlogy", "xlog1py"])
def test_xlogy_xlog1py_at_every_pair_of_special_points(name):
    """torch's values and derivatives on every pair of special points: in x `log(other)` (0 where x == 0 and other
    is not in the log's domain), in other `x / other` (NaN at 0 / 0, as torch)."""
    fa, ft = (aotjax.xlogy, torch.xlogy) if name == "xlogy" else (S.xlog1py, torch.special.xlog1py)
    X = np.array([a for a in GRID for _ in GRID], FLOAT)
    Y = np.array([b for _ in GRID for b in GRID], FLOAT)
    tx, ty = _t(X).requires_grad_(True), _t(Y).requires_grad_(True)
    want = ft(tx, ty)
    want.sum().backward()
    gx, gy = aotjax.grad(lambda x, y: fa(x, y).sum(), argnums=(0, 1))(aotjax.tensor(X), aotjax.tensor(Y))
    for got, w, what in ((fa(aotjax.tensor(X), aotjax.tensor(Y)), want.detach(), "value"), (gx, tx.grad, "d/dx"),
                         (gy, ty.grad, "d/dother")):
        np.testing.assert_allclose(got.numpy(), w.numpy(), rtol=TOL, atol=TOL, err_msg=f"{name}: {what}")
    x = aotjax.tensor([0.0, 2.0])  # NOTE: float32, the default dtype, in both modes
    assert x.xlogy_(3.0) is x
    np.testing.assert_allclose(x.numpy(), [0.0, 2 * np.log(3.0)], rtol=1e-6)
    np.testing.assert_allclose(aotjax.xlogy(2, aotjax.tensor([3, 0])).numpy(), torch.xlogy(2, _t([3, 0])).numpy())
    with pytest.raises(DTypeError, match="cannot be cast"):
        aotjax.tensor([1, 2]).xlogy_(2.0)


# -- 5. matrix_exp's accuracy -------------------------------------------------------------------------------------
def _normwise_errors(got, ref):
    return np.abs(got - ref).max(axis=(-2, -1)) / np.abs(ref).max(axis=(-2, -1))


def test_matrix_exp_float32_is_as_accurate_as_torchs():
    """OpInfo's samples are 5 x 5 in [-9, 9] (1-norms ~20-30, about 4 squarings); some larger and bigger ones too.
    The worst error of a batch against a float64 reference, not above torch's float32 one (jax's `expm`, a
    degree-7 Pade in float32, erred 1.3-3x torch's)."""
    rng = _rng(3)
    A = np.concatenate([rng.uniform(-9, 9, (24, 5, 5)), rng.uniform(-30, 30, (24, 5, 5))]).astype(np.float32)
    ref = torch.linalg.matrix_exp(_t(A).double()).numpy()
    got = aotjax.linalg.matrix_exp(aotjax.tensor(A))
    assert got.dtype == np.float32
    ours = _normwise_errors(got.numpy().astype(np.float64), ref)
    theirs = _normwise_errors(torch.linalg.matrix_exp(_t(A)).numpy().astype(np.float64), ref)
    for part in (slice(0, 24), slice(24, 48)):
        assert ours[part].max() <= 1.25 * theirs[part].max(), (ours[part].max(), theirs[part].max())
    B = _rng(4).uniform(-9, 9, (10, 10)).astype(np.float32)
    ref = torch.linalg.matrix_exp(_t(B).double()).numpy()
    err = _normwise_errors(aotjax.matrix_exp(aotjax.tensor(B)).numpy().astype(np.float64), ref)
    assert err <= 1.25 * _normwise_errors(torch.linalg.matrix_exp(_t(B)).numpy().astype(np.float64), ref)


def test_matrix_exp_of_large_norms_low_precision_and_float64():
    """Past a 1-norm of 3.9 * 2^16 jax's expm gave NaNs (torch squares as often as needed); float16 was refused."""
    A = np.diag([-1e6, -2e6, 0.5]).astype(np.float32)  # NOTE: exp(A)[0, 2] = 3e5 (e^0.5 - e^-1e6) / (0.5 + 1e6)
    A[0, 2] = 3e5
    want = np.zeros((3, 3))
    want[0, 2], want[2, 2] = 3e5 * np.exp(0.5) / (0.5 + 1e6), np.exp(0.5)  # NOTE: torch's float32 errs by 13%
    np.testing.assert_allclose(aotjax.linalg.matrix_exp(aotjax.tensor(A)).numpy(), want, rtol=1e-3, atol=1e-6)
    H = np.array([[1.0, 2.0], [-3.0, 0.5]], np.float16)
    got = aotjax.linalg.matrix_exp(aotjax.tensor(H))
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.numpy().astype(np.float64), torch.linalg.matrix_exp(_t(H).double()).numpy(),
                               rtol=2e-3, atol=2e-3)
    assert aotjax.linalg.matrix_exp(aotjax.zeros(2, 0, 0)).shape == (2, 0, 0)
    if X64:
        C = _rng(5).uniform(-9, 9, (4, 5, 5))
        ref = torch.linalg.matrix_exp(_t(C)).numpy()
        err = _normwise_errors(aotjax.linalg.matrix_exp(aotjax.tensor(C)).numpy(), ref)
        assert err.max() < 1e-12, err


def test_matrix_exp_vmap_jit_and_gradient_match_torch():
    A = _rng(6).uniform(-3, 3, (2, 4, 4)).astype(FLOAT)
    want = torch.linalg.matrix_exp(_t(A)).numpy()
    _close(aotjax.vmap(aotjax.linalg.matrix_exp)(aotjax.tensor(A)).numpy(), want, "vmap")
    _close(aotjax.jit(aotjax.linalg.matrix_exp)(aotjax.tensor(A)).numpy(), want, "jit")
    _check_grads(lambda L, A: L.linalg.matrix_exp(A), [A], "matrix_exp")


# -- 9. addbmm_ resizes self, as torch ----------------------------------------------------------------------------
B1, B2 = rect(5, 5, 5, seed=1), rect(5, 5, 10, seed=2)


@pytest.mark.parametrize("shape", [(1,), (), (10,), (1, 10), (5, 10)], ids=str)
def test_addbmm_inplace_resizes_self_as_torch(shape):
    s = rect(*shape, seed=3)
    want = torch.tensor(s).addbmm_(_t(B1), _t(B2), beta=0.5, alpha=2.0)  # NOTE: torch.tensor: a resizable storage
    x = aotjax.tensor(s)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # NOTE: torch's addbmm_ does not warn (its out= does)
        assert x.addbmm_(aotjax.tensor(B1), aotjax.tensor(B2), beta=0.5, alpha=2.0) is x
    assert x.shape == tuple(want.shape) == (5, 10)
    _close(x.numpy(), want.numpy(), f"addbmm_ of a self of shape {list(shape)}")


def test_addbmm_inplace_resize_records_for_autograd_as_torch():
    def run(lib, x, b):
        s = x * 1
        s.addbmm_(b, _t(B2) if lib is torch else aotjax.tensor(B2), beta=0.5)
        return s

    xt, bt = torch.tensor([2.0], dtype=torch.float64 if X64 else torch.float32, requires_grad=True), \
        _t(B1).requires_grad_(True)
    run(torch, xt, bt).pow(2).sum().backward()
    xa, ba = aotjax.tensor(np.array([2.0], FLOAT)).requires_grad_(), aotjax.tensor(B1).requires_grad_()
    run(aotjax, xa, ba).pow(2).sum().backward()
    _close(xa.grad.numpy(), xt.grad.numpy(), "d/dself")
    _close(ba.grad.numpy(), bt.grad.numpy(), "d/dbatch1")
    leaf = aotjax.tensor(np.array([2.0], FLOAT)).requires_grad_()
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        leaf.addbmm_(aotjax.tensor(B1), aotjax.tensor(B2))
    assert leaf.shape == (1,)  # NOTE: refused before any change, as torch
    with aotjax.no_grad():  # NOTE: allowed under no_grad, as torch: still a leaf that requires grad
        leaf.addbmm_(aotjax.tensor(B1), aotjax.tensor(B2))
    (leaf * 2).sum().backward()
    assert leaf.is_leaf and leaf.requires_grad and leaf.grad.shape == (5, 10)
    np.testing.assert_array_equal(leaf.grad.numpy(), np.full((5, 10), 2.0))


def test_addbmm_inplace_resize_refuses_views_and_transforms():
    with pytest.raises(ShapeError, match="addbmm_: .* aotjax cannot resize a view"):
        aotjax.zeros(3, dtype=FLOAT)[:1].addbmm_(aotjax.tensor(B1), aotjax.tensor(B2))

    def f(b):
        s = aotjax.zeros(1, dtype=b.dtype)
        return s.addbmm_(b, aotjax.tensor(B2)) * 1

    for transform, name in ((aotjax.jit, "jit"), (aotjax.func.functionalize, "functionalize"),
                            (aotjax.vmap, "vmap"), (lambda f: aotjax.grad(lambda b: f(b).sum()), "grad")):
        arg = aotjax.tensor(np.stack([B1, B1]) if name == "vmap" else B1)
        with pytest.raises(UnsupportedError, match=f"addbmm_: .* under {name}.* cannot change its shape"):
            transform(f)(arg)
    got = aotjax.jit(lambda s, b: s.addbmm_(b, aotjax.tensor(B2)))(aotjax.zeros(5, 10, dtype=FLOAT),
                                                                      aotjax.tensor(B1))
    _close(got.numpy(), torch.zeros(5, 10, dtype=_t(B1).dtype).addbmm_(_t(B1), _t(B2)).numpy(), "jit, no resize")


SIBLINGS = [  # (method, self shape that broadcasts to the result, operands): torch refuses all (only addbmm_ resizes)
    ("addmm_", (1, 3), [rect(2, 4), rect(4, 3)]),
    ("addmm_", (), [rect(2, 4), rect(4, 3)]),
    ("addmv_", (1,), [rect(2, 4), rect(4)]),
    ("addr_", (2, 1), [rect(2), rect(3)]),
    ("baddbmm_", (1, 2, 3), [rect(5, 2, 4), rect(5, 4, 3)]),
    ("baddbmm_", (2, 3), [rect(5, 2, 4), rect(5, 4, 3)]),
]


@pytest.mark.parametrize("method, shape, operands", SIBLINGS, ids=[f"{m}{list(s)}" for m, s, _ in SIBLINGS])
def test_other_inplace_products_do_not_resize_self(method, shape, operands):
    with pytest.raises(RuntimeError):
        getattr(torch.zeros(shape, dtype=_t(operands[0]).dtype), method)(*[_t(o) for o in operands])
    with pytest.raises(ShapeError, match=f"{method}: .*does not fit the tensor written in place"):
        getattr(aotjax.zeros(shape, dtype=FLOAT), method)(*[aotjax.tensor(o) for o in operands])


OUT_OF_PLACE = [  # (op, input of more dims than the result, operands): torch's input expands one way only
    ("addmm", (1, 2, 3), [rect(2, 4), rect(4, 3)]),
    ("addmv", (1, 2), [rect(2, 4), rect(4)]),
    ("addbmm", (1, 1, 1), [rect(3, 2, 4), rect(3, 4, 3)]),
    ("baddbmm", (1, 5, 2, 3), [rect(5, 2, 4), rect(5, 4, 3)]),
    ("addr", (3, 1, 1), [rect(2), rect(3)]),
    ("addbmm", (2,), [rect(3, 2, 4), rect(3, 4, 3)]),
]


@pytest.mark.parametrize("op, shape, operands", OUT_OF_PLACE, ids=[f"{o}{list(s)}" for o, s, _ in OUT_OF_PLACE])
def test_products_input_expands_to_the_result_one_way_only(op, shape, operands):
    with pytest.raises(RuntimeError):
        getattr(torch, op)(torch.zeros(shape, dtype=_t(operands[0]).dtype), *[_t(o) for o in operands])
    with pytest.raises(ShapeError, match=re.escape(f"{op}: input of shape {list(shape)} cannot be expanded")):
        getattr(aotjax, op)(aotjax.zeros(shape, dtype=FLOAT), *[aotjax.tensor(o) for o in operands])
