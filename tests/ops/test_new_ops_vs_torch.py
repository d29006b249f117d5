"""Ops from torch's OpInfo database that aotjax lacked, against the installed torch: `fft.hfft2/hfftn/ihfft2/ihfftn`,
`fractional_max_pool2d/3d` (and the modules), `lu_unpack`, `geqrf`/`orgqr`/`ormqr`, `linalg.ldl_factor(_ex)`/
`ldl_solve`, `histogramdd`, `svd_lowrank`/`pca_lowrank` and `multi_head_attention_forward`: values, dtypes and shapes
eagerly and under one `jit`, gradients against torch's autograd where torch differentiates, vmap where cheap."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import aotjax
import aotjax.nn.functional as F
from aotjax.core.errors import DTypeError, ShapeError, UnsupportedError
from tests.helpers import FLOAT, INT, X64

T = aotjax.tensor
TOL = 1e-9 if X64 else 2e-5
TORCH_FLOAT = torch.float64 if X64 else torch.float32


def _x(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(FLOAT)


def _z(*shape, seed=0):
    return (_x(*shape, seed=seed) + 1j * _x(*shape, seed=seed + 1)).astype(np.complex128 if X64 else np.complex64)


def _np(x):
    if isinstance(x, torch.Tensor):
        x = x.detach().resolve_conj().numpy()
        return x.astype(INT) if x.dtype == np.int64 else x  # NOTE: torch's indices are int64, aotjax's the default int
    return x.numpy() if isinstance(x, aotjax.Tensor) else np.asarray(x)


def _close(got, want, tol=TOL):
    got, want = _np(got), _np(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape, got.dtype, want.dtype)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * 10)


def _equal(got, want):
    got, want = _np(got), _np(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape, got.dtype, want.dtype)
    np.testing.assert_array_equal(got, want)


# -- fft.hfft2 / hfftn / ihfft2 / ihfftn ---------------------------------------------------------------------------
FFT_CASES = [("hfft2", _z, {}), ("hfft2", _z, {"s": (3, 6), "norm": "ortho"}), ("hfftn", _z, {"dim": (0,)}),
             ("hfftn", _z, {"s": (2, 5), "norm": "forward"}), ("ihfft2", _x, {"norm": "forward"}),
             ("ihfft2", _x, {"s": (3, 6)}), ("ihfftn", _x, {}), ("ihfftn", _x, {"s": (5,), "dim": 0, "norm": "ortho"})]


def test_hermitian_fft_eager_and_jit_against_torch():
    inputs = [make(4, 5, seed=i) for i, (_, make, _) in enumerate(FFT_CASES)]
    jitted = aotjax.jit(lambda *xs: [getattr(aotjax.fft, n)(x, **kw) for (n, _, kw), x in zip(FFT_CASES, xs)])(
        *map(T, inputs))
    for (name, _, kw), x, j in zip(FFT_CASES, inputs, jitted):
        want = getattr(torch.fft, name)(torch.tensor(x), **kw)
        _close(getattr(aotjax.fft, name)(T(x), **kw), want)
        _close(j, want)
    with pytest.raises(DTypeError, match="ihfftn expects a real input"):
        aotjax.fft.ihfftn(T(_z(2, 2)))
    _close(aotjax.fft.hfftn(T(_x(3, 3))), torch.fft.hfftn(torch.tensor(_x(3, 3))))  # real input: made complex


def test_hermitian_fft_grad_against_torch_and_vmap():
    def loss(m, x):
        return (m.fft.hfft2(m.fft.ihfftn(x, norm="ortho"), s=x.shape[-2:]) * x).sum() \
            + m.fft.ihfft2(x).abs().pow(2).sum() + m.fft.hfftn(m.fft.ihfft2(x), dim=(0, 1)).pow(2).mean()
    x = _x(3, 4)
    tx = torch.tensor(x, requires_grad=True)
    loss(torch, tx).backward()
    _close(aotjax.grad(lambda x: loss(aotjax, x))(T(x)), tx.grad, 1e-8 if X64 else 1e-4)
    xs = _x(2, 3, 4)
    _close(aotjax.vmap(lambda a: aotjax.fft.ihfft2(a, norm="ortho"))(T(xs)),
           torch.fft.ihfft2(torch.tensor(xs), norm="ortho"))


# -- fractional max pooling ----------------------------------------------------------------------------------------
def _pool_case(n, batch=2, seed=0):
    sizes = (7, 6) if n == 2 else (5, 6, 5)
    x = _x(batch, 3, *sizes, seed=seed)
    x[0, 0].flat[:5] = 1.0  # NOTE: ties: torch keeps the first maximum of a window
    x[1, 2].flat[7] = np.nan  # a NaN wins its windows
    u = np.random.default_rng(seed + 1).random((batch, 3, n)).astype(FLOAT)
    return x, u


@pytest.mark.parametrize("n", [2, 3])
def test_fractional_max_pool_with_samples_equals_torch(n):
    x, u = _pool_case(n)
    kernel, outs = (2, 3) if n == 2 else (2, 1, 2), (4, 3) if n == 2 else (3, 5, 2)
    ours, theirs = getattr(F, f"fractional_max_pool{n}d"), getattr(TF, f"fractional_max_pool{n}d")
    want = theirs(torch.tensor(x), kernel, output_size=outs, return_indices=True, _random_samples=torch.tensor(u))
    for got in (ours(T(x), kernel, output_size=outs, return_indices=True, _random_samples=T(u)),
                aotjax.jit(lambda x, u: ours(x, kernel, output_size=outs, return_indices=True, _random_samples=u))(
                    T(x), T(u))):
        _equal(got[0], want[0])
        _equal(got[1], want[1])
    ratio = (0.5, 0.5) if n == 2 else (0.6, 0.5, 0.5)
    _equal(ours(T(x[0]), 2, output_ratio=ratio, _random_samples=T(u[:1])),  # unbatched: samples [1, C, n]
           theirs(torch.tensor(x[0]), 2, output_ratio=ratio, _random_samples=torch.tensor(u[:1])))


def test_fractional_max_pool_grad_against_torch_and_vmap():
    x, u = _pool_case(2)
    x = np.nan_to_num(x)
    tx = torch.tensor(x, requires_grad=True)
    (TF.fractional_max_pool2d(tx, 3, output_size=3, _random_samples=torch.tensor(u)) ** 2).sum().backward()
    got = aotjax.grad(lambda x: (F.fractional_max_pool2d(x, 3, output_size=3, _random_samples=T(u)) ** 2).sum())(T(x))
    _close(got, tx.grad)
    pooled = aotjax.vmap(lambda x, u: F.fractional_max_pool2d(x, 2, output_size=(4, 3), _random_samples=u[None]))(
        T(x), T(u))
    _equal(pooled, TF.fractional_max_pool2d(torch.tensor(x), 2, output_size=(4, 3), _random_samples=torch.tensor(u)))


def test_fractional_max_pool_draws_from_the_generator_and_modules():
    x = T(_x(2, 3, 9, 8))
    g = aotjax.Generator().manual_seed(0)
    draw = lambda: F.fractional_max_pool2d(x, 2, output_ratio=0.5, return_indices=True, generator=g)  # noqa: E731
    (a, ia), (_, ib) = draw(), draw()
    g.manual_seed(0)
    _equal(draw()[1], ia)  # the same seed, the same windows
    assert a.shape == (2, 3, 4, 4) and ia.dtype == INT and not bool((ia == ib).all())
    _equal(x.flatten(-2).gather(-1, ia.flatten(-2)).reshape(a.shape), a)  # each maximum sits at its index
    key, v = aotjax.random.key(3), T(_x(1, 2, 5, 5, 5))
    _equal(F.fractional_max_pool3d(v, 2, output_size=2, key=key), F.fractional_max_pool3d(v, 2, output_size=2, key=key))
    u = _x(2, 3, 2) * 0 + 0.3
    ours = aotjax.nn.FractionalMaxPool2d((2, 3), output_size=(4, 3), return_indices=True, _random_samples=T(u))
    theirs = torch.nn.FractionalMaxPool2d((2, 3), output_size=(4, 3), return_indices=True,
                                          _random_samples=torch.tensor(u))
    for got, want in zip(ours(x), theirs(torch.tensor(x.numpy()))):
        _equal(got, want)
    assert "_random_samples" in dict(ours.named_buffers())
    assert aotjax.nn.FractionalMaxPool3d(2, output_ratio=0.5)(T(_x(1, 2, 6, 6, 6))).shape == (1, 2, 3, 3, 3)
    with pytest.raises(ValueError, match="output_ratio must be between 0 and 1"):
        aotjax.nn.FractionalMaxPool2d(2, output_ratio=1.5)
    with pytest.raises(ValueError, match="either an output_size or an output_ratio"):
        F.fractional_max_pool2d(x, 2)
    with pytest.raises(ValueError, match="too large"):
        F.fractional_max_pool3d(v, 2, output_size=(2, 4, 2))
    with pytest.raises(ShapeError, match="_random_samples"):
        F.fractional_max_pool2d(x, 2, output_size=3, _random_samples=aotjax.rand(1, 3, 2))


# -- lu_unpack, geqrf, orgqr, ormqr --------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(2, 4, 3), (3, 5)], ids=["tall_batched", "wide"])
def test_lu_unpack_against_torch(shape):
    a = _x(*shape)
    LU, piv = torch.linalg.lu_factor(torch.tensor(a))
    got = aotjax.jit(aotjax.lu_unpack)(T(LU.numpy()), T(piv.numpy()))
    for g, w in zip(got, torch.lu_unpack(LU, piv)):
        _close(g, w)
    for flags in ({"unpack_data": False}, {"unpack_pivots": False}):
        for g, w in zip(aotjax.lu_unpack(T(LU.numpy()), T(piv.numpy()), **flags), torch.lu_unpack(LU, piv, **flags)):
            _close(g, w)
    tLU = LU.clone().requires_grad_(True)
    P, L, U = torch.lu_unpack(tLU, piv)
    ((L * L).sum() + (U ** 3).sum()).backward()
    grad = aotjax.grad(lambda lu: (lambda P, L, U: (L * L).sum() + (U ** 3).sum())(*aotjax.lu_unpack(lu, T(
        piv.numpy()))))(T(LU.numpy()))
    _close(grad, tLU.grad)


def test_geqrf_orgqr_ormqr_against_torch():
    a, tol = _x(2, 5, 3), 1e-9 if X64 else 1e-5
    ta, ttau = torch.geqrf(torch.tensor(a))
    ga, gtau = aotjax.jit(aotjax.geqrf)(T(a))
    _close(ga, ta, tol)
    _close(gtau, ttau, tol)
    _close(aotjax.orgqr(ga, gtau), torch.orgqr(ta, ttau), tol)
    _close(ga.orgqr(gtau), torch.orgqr(ta, ttau), tol)
    for left in (True, False):
        for transpose in (True, False):
            c = _x(2, 5, 2) if left else _x(2, 4, 5)
            _close(aotjax.ormqr(ga, gtau, T(c), left=left, transpose=transpose),
                   torch.ormqr(ta, ttau, torch.tensor(c), left=left, transpose=transpose), tol)
    leaves = [torch.tensor(v.numpy(), requires_grad=True) for v in (ta, ttau)] + [torch.tensor(
        _x(2, 5, 2), requires_grad=True)]
    (torch.ormqr(*leaves) ** 2).sum().backward()
    grads = aotjax.grad(lambda *xs: (aotjax.ormqr(*xs) ** 2).sum(), argnums=(0, 1, 2))(
        *(T(v.detach().numpy()) for v in leaves))
    for g, t in zip(grads, leaves):
        _close(g, t.grad, 1e-8 if X64 else 1e-4)
    with pytest.raises(UnsupportedError, match="geqrf: the derivative is not implemented"):
        aotjax.grad(lambda a: aotjax.geqrf(a).a.sum())(T(a))
    with pytest.raises(ShapeError, match="ormqr"):
        aotjax.ormqr(ga, gtau, T(_x(5, 2)))
    _close(aotjax.vmap(lambda a: aotjax.geqrf(a).tau)(T(a)), ttau, tol)


# -- linalg.ldl_factor / ldl_factor_ex / ldl_solve -----------------------------------------------------------------
def _symmetric(n, seed=0):
    """Three symmetric matrices: one random, one with a zero diagonal (2x2 pivots), one with a tiny first column."""
    a = np.random.default_rng(seed).standard_normal((3, n, n))
    a[1] -= np.diag(np.diag(a[1]))
    a[2, :, 0] *= 1e-3
    return (a + np.swapaxes(a, -1, -2)).astype(FLOAT)


def test_ldl_factor_and_solve_against_torch():
    tol = 1e-9 if X64 else 1e-4
    singular = np.zeros((3, 3, 3), FLOAT)  # a zero matrix; a 2x2 block, then a zero; a 1x1 pivot, then zeros
    singular[1, :2, :2], singular[2, 0, 0] = [[0.0, 1.0], [1.0, 0.0]], 2.0
    cases = [(_symmetric(5), True), (singular, False)]
    for a, jit in cases:
        want = torch.linalg.ldl_factor_ex(torch.tensor(a))
        for got in [aotjax.linalg.ldl_factor_ex(T(a))] + ([aotjax.jit(aotjax.linalg.ldl_factor_ex)(T(a))] if jit
                                                          else []):
            _close(got.LD, want.LD, tol)
            _equal(got.pivots, want.pivots)
            _equal(got.info, want.info)
    assert bool((want.info > 0).all()) and bool((torch.linalg.ldl_factor(torch.tensor(cases[0][0])).pivots < 0).any())
    a, b = cases[0][0], _x(3, 5, 2, seed=1)
    LD, pivots = aotjax.linalg.ldl_factor(T(a))
    want = torch.linalg.ldl_solve(*torch.linalg.ldl_factor(torch.tensor(a)), torch.tensor(b))
    _close(aotjax.linalg.ldl_solve(LD, pivots, T(b)), want, tol * 10)
    _close(aotjax.vmap(aotjax.linalg.ldl_solve, in_dims=(0, 0, None))(LD, pivots, T(b[0])),
           torch.linalg.solve(torch.tensor(a), torch.tensor(b[0])), tol * 10)
    with pytest.raises(UnsupportedError, match="ldl_factor: the derivative is not implemented"):
        aotjax.grad(lambda a: aotjax.linalg.ldl_factor(a).LD.sum())(T(a))
    with pytest.raises(ShapeError, match="ldl_solve"):
        aotjax.linalg.ldl_solve(LD, pivots[..., :2], T(b))


# -- histogramdd ---------------------------------------------------------------------------------------------------
def test_histogramdd_against_torch():
    x, w = _x(2, 7, 3), np.random.default_rng(1).random((2, 7)).astype(FLOAT)
    edges = [np.array(e, FLOAT) for e in ([-1.0, 0.0, 1.0], [-2.0, 0.0, 0.5, 2.0], [-3.0, 3.0])]
    cases = [{"bins": 3}, {"bins": [2, 3, 4], "density": True}, {"bins": 2, "range": [-1, 1, -1, 1, 0, 1],
                                                                   "weight": w}, {"bins": edges}]

    def args(lib, kw):
        wrap = T if lib is aotjax else torch.tensor
        return {k: ([wrap(e) for e in v] if k == "bins" and isinstance(v, list) and isinstance(v[0], np.ndarray)
                    else wrap(v) if isinstance(v, np.ndarray) else v) for k, v in kw.items()}
    jitted = aotjax.jit(lambda x, w: [aotjax.histogramdd(x, **args(aotjax, dict(kw, weight=w) if "weight" in kw
                                                                   else kw)) for kw in cases])(T(x), T(w))
    for kw, j in zip(cases, jitted):
        want = torch.histogramdd(torch.tensor(x), **args(torch, kw))
        for got in (aotjax.histogramdd(T(x), **args(aotjax, kw)), j):
            _close(got.hist, want.hist)
            assert len(got.bin_edges) == len(want.bin_edges) == 3
            for g, e in zip(got.bin_edges, want.bin_edges):
                _close(g, e)
    with pytest.raises(ValueError, match="range should have 6 elements"):
        aotjax.histogramdd(T(x), bins=2, range=[0, 1])


# -- svd_lowrank / pca_lowrank -------------------------------------------------------------------------------------
def _low_rank(rank=3, seed=0):
    return (_x(2, 9, rank, seed=seed) @ _x(2, rank, 7, seed=seed + 1)).astype(FLOAT)


def test_svd_lowrank_reconstructs_and_matches_torchs_exact_svd():
    a, tol = _low_rank(), 1e-9 if X64 else 1e-4
    exact = torch.linalg.svdvals(torch.tensor(a))
    for A, M in ((a, None), (np.swapaxes(a, -1, -2), None), (a + 1.0, np.ones((9, 1), FLOAT))):
        U, S, V = aotjax.svd_lowrank(T(A), q=4, M=None if M is None else T(M))
        assert U.shape == (*A.shape[:-1], 4) and S.shape == (2, 4) and V.shape == (2, A.shape[-1], 4)
        target = A if M is None else A - M
        np.testing.assert_allclose(((U * S.unsqueeze(-2)) @ V.mT).numpy(), target, atol=tol * 10)
        _close(S[..., :3], exact[..., :3], tol)
    U, S, V = aotjax.jit(lambda a: aotjax.svd_lowrank(a, q=3, niter=1))(T(a))
    _close(S, exact[..., :3], tol)
    ta = torch.tensor(a, requires_grad=True)
    torch.linalg.svdvals(ta)[..., :3].sum().backward()
    _close(aotjax.grad(lambda a: aotjax.svd_lowrank(a, q=3)[1].sum())(T(a)), ta.grad, 1e-7 if X64 else 1e-3)


def test_pca_lowrank_against_torchs_exact_svd():
    a, tol = _low_rank(seed=2)[0], 1e-9 if X64 else 1e-4
    centered = a - a.mean(0, keepdims=True)
    U, S, V = aotjax.pca_lowrank(T(a))
    assert (U.shape, S.shape, V.shape) == ((9, 6), (6,), (7, 6))
    _close(S[:3], torch.linalg.svdvals(torch.tensor(centered))[:3], tol)
    np.testing.assert_allclose(((U * S) @ V.mT).numpy(), centered, atol=tol * 10)
    U, S, V = aotjax.pca_lowrank(T(a), q=3, center=False)
    _close(S, torch.linalg.svdvals(torch.tensor(a))[:3], tol)
    g = aotjax.Generator().manual_seed(5)
    first = aotjax.pca_lowrank(T(a), q=3, generator=g)[0]
    _equal(aotjax.pca_lowrank(T(a), q=3, generator=g.manual_seed(5))[0], first)
    with pytest.raises(ValueError, match="q\\(=8\\)"):
        aotjax.pca_lowrank(T(a), q=8)


# -- multi_head_attention_forward ----------------------------------------------------------------------------------
E, H, L, S, N = 8, 2, 3, 4, 2


def _mha_args(case):
    """Positional and keyword arguments of `multi_head_attention_forward` for `case`, as NumPy arrays."""
    kdim = 6 if case == "separate" else E
    q, k, v = _x(L, N, E, seed=1), _x(S, N, kdim, seed=2), _x(S, N, kdim, seed=3)
    w_in, b_in, w_out, b_out = _x(3 * E, E, seed=4), _x(3 * E, seed=5), _x(E, E, seed=6), _x(E, seed=7)
    bias_kv = (_x(1, 1, E, seed=8), _x(1, 1, E, seed=9)) if case == "bias_kv" else (None, None)
    args = [q, k, v, E, H, None if case == "separate" else w_in, b_in, *bias_kv, case == "zero_attn", 0.0, w_out,
            b_out]
    kw = {"training": False}
    if case == "separate":
        kw.update(use_separate_proj_weight=True, q_proj_weight=_x(E, E, seed=10), k_proj_weight=_x(E, kdim, seed=11),
                  v_proj_weight=_x(E, kdim, seed=12))
    if case in ("bias_kv", "zero_attn", "masks"):
        padding = np.zeros((N, S), bool)
        padding[:, -1] = True
        kw.update(key_padding_mask=padding, attn_mask=_x(N * H, L, S, seed=13), average_attn_weights=False)
    if case == "static":
        kw.update(static_k=_x(N * H, 5, E // H, seed=14), static_v=_x(N * H, 5, E // H, seed=15))
    if case == "no_weights":
        kw.update(need_weights=False, attn_mask=np.triu(np.ones((L, S), bool), 1))
    if case == "unbatched":
        args[:3] = [a[:, 0] for a in args[:3]]
        kw.update(attn_mask=_x(H, L, S, seed=16))
    return args, kw


MHA_CASES = ["plain", "separate", "bias_kv", "zero_attn", "masks", "static", "no_weights", "unbatched"]


@pytest.mark.filterwarnings("ignore:Support for mismatched key_padding_mask and attn_mask")
@pytest.mark.parametrize("case", MHA_CASES)
def test_multi_head_attention_forward_against_torch(case):
    args, kw = _mha_args(case)
    wrap = lambda lib: lambda v: (T if lib is aotjax else torch.tensor)(v) if isinstance(v, np.ndarray) else v  # noqa
    want = TF.multi_head_attention_forward(*map(wrap(torch), args), **{k: wrap(torch)(v) for k, v in kw.items()})
    got = F.multi_head_attention_forward(*map(wrap(aotjax), args), **{k: wrap(aotjax)(v) for k, v in kw.items()})
    tol = 1e-9 if X64 else 1e-5
    _close(got[0], want[0], tol)
    if want[1] is None:
        assert got[1] is None
    else:
        _close(got[1], want[1], tol)


@pytest.mark.filterwarnings("ignore:Support for mismatched key_padding_mask and attn_mask")
def test_multi_head_attention_forward_grad_jit_and_module():
    args, kw = _mha_args("bias_kv")
    leaves = [0, 1, 2, 5, 7, 11]  # query, key, value, in_proj_weight, bias_k, out_proj_weight

    def loss(lib, *xs):
        a = list(args)
        for i, x in zip(leaves, xs):
            a[i] = x
        wrap = T if lib is aotjax else torch.tensor
        rest = [wrap(v) if isinstance(v, np.ndarray) and i not in leaves else v for i, v in enumerate(a)]
        out, w = lib.nn.functional.multi_head_attention_forward(
            *rest, **{k: wrap(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()})
        return (out ** 2).sum() + (w * w).sum()
    tx = [torch.tensor(args[i], requires_grad=True) for i in leaves]
    loss(torch, *tx).backward()
    grads = aotjax.jit(aotjax.grad(lambda *xs: loss(aotjax, *xs), argnums=tuple(range(len(leaves)))))(
        *(T(args[i]) for i in leaves))
    for g, t in zip(grads, tx):
        _close(g, t.grad, 1e-8 if X64 else 1e-4)
    with pytest.raises(RuntimeError, match="2D attn_mask"):
        F.multi_head_attention_forward(*(T(a) if isinstance(a, np.ndarray) else a for a in args),
                                       attn_mask=aotjax.zeros(L, S + 1))
    # the module computes the functional form, as torch's does: dropout in training draws from the generator
    mha = aotjax.nn.MultiheadAttention(E, H, dropout=0.5, batch_first=True)
    x = T(_x(N, L, E).astype(np.float32))
    aotjax.manual_seed(0)
    first = mha(x, x, x)
    aotjax.manual_seed(0)
    _equal(mha(x, x, x)[0], first[0])
    assert not bool((mha(x, x, x)[1] == first[1]).all())
