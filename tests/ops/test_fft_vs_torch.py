"""aotjax.fft, stft/istft and linalg.eig against torch: values eagerly and under one jit, vjp against torch's
autograd through complex intermediates (real leaves, where the conventions agree), vmap, 0-d/empty and argument
errors."""
import numpy as np
import pytest
import torch

import aotjax
from tests.helpers import FLOAT, X64

T = aotjax.tensor
TOL = 1e-9 if X64 else 2e-5


def _x(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(FLOAT)


def _z(*shape, seed=0):
    return (_x(*shape, seed=seed) + 1j * _x(*shape, seed=seed + 1)).astype(np.complex128 if X64 else np.complex64)


def _close(got, want, tol=TOL):
    want = want.resolve_conj().detach().numpy() if isinstance(want, torch.Tensor) else np.asarray(want)
    got = got.numpy() if isinstance(got, aotjax.Tensor) else np.asarray(got)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.dtype, want.dtype, got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * 10)


# (name, input maker, kwargs): each case runs eagerly and (all together) under one jit
CASES = [
    ("fft", _x, {}), ("fft", _z, {"n": 6, "dim": 0, "norm": "ortho"}), ("ifft", _z, {"n": 3, "norm": "forward"}),
    ("rfft", _x, {"n": 7, "dim": 0}), ("irfft", _z, {"n": 5, "norm": "ortho"}), ("fft2", _x, {}),
    ("ifft2", _z, {"s": (3, 2)}), ("rfft2", _x, {"norm": "forward"}), ("irfft2", _z, {}), ("fftn", _z, {"s": (2, 6)}),
    ("ifftn", _z, {"dim": (0,)}), ("irfftn", _z, {"s": (4, 4)}), ("hfft", _z, {"n": 5}),
    ("ihfft", _x, {"n": 3, "norm": "ortho"}), ("fftshift", _x, {}), ("ifftshift", _x, {"dim": 1}),
]


def _run(m, name, x, kw):
    return getattr(m.fft, name)(x, **kw)


def test_transforms_eager_and_jit_against_torch():
    inputs = [make(4, 5, seed=i) for i, (_, make, _) in enumerate(CASES)]
    jitted = aotjax.jit(lambda *xs: [_run(aotjax, n, x, kw) for (n, _, kw), x in zip(CASES, xs)])(*map(T, inputs))
    for (name, _, kw), x, j in zip(CASES, inputs, jitted):
        want = _run(torch, name, torch.tensor(x), kw)
        _close(_run(aotjax, name, T(x), kw), want)
        _close(j, want)


def test_integer_input_frequencies_and_errors():
    _close(aotjax.fft.fft(T([1, 2, 3])), torch.fft.fft(torch.tensor([1, 2, 3])).to(torch.complex64))
    for n, d in [(5, 1.0), (4, 0.5)]:
        _close(aotjax.fft.fftfreq(n, d), torch.fft.fftfreq(n, d))
        _close(aotjax.fft.rfftfreq(n, d), torch.fft.rfftfreq(n, d))
    with pytest.raises(IndexError):
        aotjax.fft.fft(T(1.0))
    with pytest.raises(ValueError, match="data points"):
        aotjax.fft.fft(aotjax.zeros(0))
    with pytest.raises(ValueError, match="normalization"):
        aotjax.fft.fft(aotjax.ones(2), norm="bad")
    with pytest.raises(aotjax.core.errors.DTypeError, match="real input"):
        aotjax.fft.rfft(T([1j]))
    assert aotjax.fft.fftshift(T(3.0)).item() == 3.0


def _loss(m, x):
    z = m.fft.rfft(x)
    y = m.fft.irfft(z * m.fft.rfftfreq(x.shape[-1]).to(z.dtype), n=x.shape[-1])
    return (m.fft.fft2(x).abs() ** 2).sum() * 0.01 + m.fft.ifft(x, norm="ortho").imag.sum() + (y * x).sum() \
        + m.fft.hfft(m.fft.ihfft(x)).pow(2).mean() + m.fft.fftshift(m.fft.fftn(x, dim=0)).real.sum()


def test_vjp_against_torch_autograd():
    x = _x(3, 6)
    tx = torch.tensor(x, requires_grad=True)
    want = _loss(torch, tx)
    want.backward()
    out, grad = aotjax.jit(lambda x: (_loss(aotjax, x), aotjax.grad(lambda x: _loss(aotjax, x))(x)))(T(x))
    _close(out, want)
    _close(grad, tx.grad)


def test_vmap_matches_a_loop():
    x = _x(3, 4, 6)
    got = aotjax.vmap(lambda a: aotjax.fft.rfft2(a, norm="ortho"), in_dims=1)(T(x))
    _close(got, np.stack([aotjax.fft.rfft2(T(x[:, i]), norm="ortho").numpy() for i in range(4)]))


@pytest.mark.slow
def test_stft_istft_against_torch():
    x, w = _x(2, 20), torch.hann_window(8, dtype=torch.float64 if X64 else torch.float32)
    for kw in [{"n_fft": 8, "hop_length": 2, "window": w}, {"n_fft": 8, "win_length": 6, "window": w[:6],
                                                             "normalized": True, "center": False},
               {"n_fft": 6, "pad_mode": "constant", "onesided": False}]:
        a_kw = {k: T(v.numpy()) if isinstance(v, torch.Tensor) else v for k, v in kw.items()}
        spec = aotjax.stft(T(x), return_complex=True, **a_kw)
        want = torch.stft(torch.tensor(x), return_complex=True, **kw)
        _close(spec, want)
    _close(aotjax.stft(T(x[0]), return_complex=True, **a_kw), want[0])  # 1-D input: no batch dim
    spec = torch.stft(torch.tensor(x), 8, hop_length=2, window=w, return_complex=True)
    _close(aotjax.istft(T(spec.numpy()), 8, hop_length=2, window=T(w.numpy())),
           torch.istft(spec, 8, hop_length=2, window=w))
    _close(aotjax.istft(T(spec.numpy()), 8, hop_length=2, window=T(w.numpy()), length=15),
           torch.istft(spec, 8, hop_length=2, window=w, length=15))
    g = aotjax.grad(lambda x: aotjax.stft(x, 8, hop_length=2, window=T(w.numpy()), return_complex=True).abs().sum())
    tx = torch.tensor(x, requires_grad=True)
    torch.stft(tx, 8, hop_length=2, window=w, return_complex=True).abs().sum().backward()
    _close(g(T(x)), tx.grad)
    with pytest.raises(ValueError, match="return_complex"):
        aotjax.stft(T(x), 8)


@pytest.mark.slow
def test_eig_against_torch():
    a = _x(3, 3) + np.diag([0.0, 2.0, 4.0]).astype(FLOAT)
    ta = torch.tensor(a, requires_grad=True)
    w, v = torch.linalg.eig(ta)
    got_w, got_v = aotjax.jit(aotjax.linalg.eig)(T(a))
    _close(got_w, w)
    _close(got_v.abs(), v.abs())  # eigenvectors are defined up to a phase: LAPACK's choice is the same here
    _close(aotjax.linalg.eigvals(T(a)), torch.linalg.eigvals(ta))

    def loss(m, w, v):
        return m.abs(v).sum() + m.real(w).pow(2).sum() + m.imag(w).pow(2).sum() * 0.5
    loss(torch, w, v).backward()
    _close(aotjax.grad(lambda a: loss(aotjax, *aotjax.linalg.eig(a)))(T(a)), ta.grad, 1e-8 if X64 else 1e-4)
