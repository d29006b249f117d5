"""Complex tensors against torch: construction, printing, promotion, the views `real`/`imag`/`conj`/`view_as_real`/
`view_as_complex` (values, strides, writes through them eagerly and under jit, vmap), elementwise ops on complex
values, the ops torch refuses, and derivatives. aotjax's `grad` of a real loss with respect to a complex leaf is the
conjugate of torch's `.grad` (JAX's convention, see aotjax/ops/math/complex.py); for real leaves they agree."""
import numpy as np
import pytest
import torch

import aotjax
from aotjax.core.errors import DTypeError, ShapeError
from tests.helpers import FLOAT, X64

T = aotjax.tensor
CDT = np.dtype(np.complex128 if X64 else np.complex64)
TOL = 1e-10 if X64 else 1e-5


def _z(*shape, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(CDT)


def _close(got, want, tol=TOL):
    want = want.resolve_conj().detach().numpy() if isinstance(want, torch.Tensor) else np.asarray(want)
    got = got.numpy() if isinstance(got, aotjax.Tensor) else np.asarray(got)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.dtype, want.dtype, got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_construction_printing_and_promotion():
    assert repr(T([1 + 2j, 3 - 1j])) == repr(torch.tensor([1 + 2j, 3 - 1j])) == "tensor([1.+2.j, 3.-1.j])"
    assert T(np.array([1j], np.complex64)).dtype == np.complex64 and T(1 + 2j).shape == ()
    assert aotjax.complex(T([1.0]), T([2.0])).numpy().tolist() == [1 + 2j]
    for a, b in [(T([1.0]), 2j), (T([1.0]), T([1j])), (T([1]), 1j), (T([1j]), T(2.0)), (T(1.0), T([1j]))]:
        ta, tb = (torch.tensor(v.numpy()) if isinstance(v, aotjax.Tensor) else v for v in (a, b))
        assert (a + b).dtype.name == str((ta + tb).dtype).replace("torch.", "")
    z = T(_z(3))
    np.testing.assert_array_equal(z.numpy(), _z(3))
    assert aotjax.is_complex(z) and z.is_complex() and not aotjax.is_complex(T([1.0]))
    with pytest.raises(DTypeError, match="same dtype"):
        aotjax.complex(T([1.0]), T([1]))


OPS = {
    "add": lambda m, z, w: z + w, "mul": lambda m, z, w: z * w, "div": lambda m, z, w: z / w,
    "exp": lambda m, z, w: m.exp(z), "log": lambda m, z, w: m.log(z), "sqrt": lambda m, z, w: m.sqrt(z),
    "sin": lambda m, z, w: m.sin(z), "cos": lambda m, z, w: m.cos(z), "tanh": lambda m, z, w: m.tanh(z),
    "pow": lambda m, z, w: m.pow(z, 2), "pow_complex": lambda m, z, w: m.pow(z, w),
    "reciprocal": lambda m, z, w: m.reciprocal(z), "sum": lambda m, z, w: z.sum(0), "mean": lambda m, z, w: z.mean(),
    "prod": lambda m, z, w: z.prod(1), "matmul": lambda m, z, w: z @ w.mT, "eq": lambda m, z, w: z == w,
    "ne": lambda m, z, w: z != w, "abs": lambda m, z, w: m.abs(z), "angle": lambda m, z, w: m.angle(z),
    "real": lambda m, z, w: m.real(z), "imag": lambda m, z, w: m.imag(z), "conj": lambda m, z, w: m.conj(z),
    "conj_physical": lambda m, z, w: m.conj_physical(z), "polar": lambda m, z, w: m.polar(m.abs(z), m.angle(w)),
    "view_as_real": lambda m, z, w: m.view_as_real(z), "scalar": lambda m, z, w: z * (2 - 1j) + 1.5,
    "float_plus_complex": lambda m, z, w: m.real(z) + w, "var": lambda m, z, w: z.var(1),
    "std": lambda m, z, w: z.std(),
}


@pytest.mark.parametrize("name", list(OPS))
def test_ops_eager_against_torch(name):
    z, w = _z(2, 3), _z(2, 3, seed=1)
    got = OPS[name](aotjax, T(z), T(w))
    want = OPS[name](torch, torch.tensor(z), torch.tensor(w))
    _close(got, want, 1e-9 if X64 else 2e-5)


def test_ops_under_jit_agree_with_eager():
    z, w = T(_z(2, 3)), T(_z(2, 3, seed=1))
    names = list(OPS)
    outs = aotjax.jit(lambda z, w: [OPS[n](aotjax, z, w) for n in names])(z, w)
    for n, o in zip(names, outs):
        _close(o, OPS[n](aotjax, z, w).numpy())


def test_zero_dim_and_empty():
    z = T(1 + 2j)
    assert z.real.item() == 1.0 and z.imag.item() == 2.0 and aotjax.view_as_real(z).shape == (2,)
    e = T(np.zeros((0, 3), CDT))
    assert aotjax.view_as_real(e).shape == (0, 3, 2) and e.abs().dtype == FLOAT and e.real.shape == (0, 3)


def test_views_write_through_and_strides_as_torch():
    base = _z(2, 3)
    z, tz = T(base), torch.tensor(base)
    for m, x in ((aotjax, z), (torch, tz)):
        x.real.add_(1)
        x.imag[0] = 5
        r = m.view_as_real(x)
        r[1, 2, 0] = -9
        m.view_as_complex(r)[0, 0] = 7j
        x.conj()[0, 1] = 1 + 1j
        x.mH[2, 1] = 2 - 1j
    _close(z, tz)
    for f in (lambda m, x: x.real, lambda m, x: x.imag, lambda m, x: m.view_as_real(x), lambda m, x: x[:, 1:].imag,
              lambda m, x: m.view_as_complex(m.view_as_real(x)), lambda m, x: x.t().real, lambda m, x: x.conj(),
              lambda m, x: x.mH, lambda m, x: x.H):
        a, b = f(aotjax, z), f(torch, tz)
        assert (a.stride(), a.storage_offset(), a.is_contiguous()) == (b.stride(), b.storage_offset(),
                                                                        b.is_contiguous())


def test_setting_real_and_imag_writes_the_parts():
    z, tz = T(_z(3)), torch.tensor(_z(3))
    for m, x in ((aotjax, z), (torch, tz)):
        x.real = m.ones(3, dtype=x.real.dtype)
        x.imag = x.real * 2
    _close(z, tz)


def test_view_writes_under_jit_match_eager():
    def f(z):
        z.real.mul_(2)
        z.imag[0] = 0
        aotjax.view_as_real(z)[1, 0, 1] = 3
        return aotjax.view_as_real(z)

    eager, jitted = T(_z(2, 3)), T(_z(2, 3))
    out, ref = aotjax.jit(f)(jitted), f(eager)
    _close(jitted, eager.numpy())
    _close(out, ref.numpy())
    out[0, 0, 0] = 100  # the output is a view of the input, as in eager
    assert jitted[0, 0].real.item() == 100


def test_view_as_complex_checks_like_torch():
    with pytest.raises(ShapeError, match="size 2"):
        aotjax.view_as_complex(aotjax.ones(3, 3))
    with pytest.raises(ShapeError, match="stride 1"):
        aotjax.view_as_complex(aotjax.ones(2, 3).t())
    with pytest.raises(ShapeError, match="divisible by 2"):
        aotjax.view_as_complex(aotjax.ones(3, 4)[:, 1:3])
    with pytest.raises(DTypeError, match="complex"):
        aotjax.view_as_real(aotjax.ones(2))
    with pytest.raises(DTypeError, match="non-complex"):
        aotjax.imag(aotjax.ones(2))


@pytest.mark.parametrize("op", [lambda m, z: z < z, lambda m, z: z.ge(1), lambda m, z: m.maximum(z, z),
                                lambda m, z: z.clamp(0, 1), lambda m, z: z.floor(), lambda m, z: z.sign(),
                                lambda m, z: z.max(), lambda m, z: z.min(0), lambda m, z: z.argmax(),
                                lambda m, z: m.amin(z), lambda m, z: z.abs_(), lambda m, z: z.sort(),
                                lambda m, z: z.topk(1), lambda m, z: z.median(), lambda m, z: z.cummax(0),
                                lambda m, z: z.kthvalue(1)])
def test_ops_torch_refuses_on_complex_raise(op):
    with pytest.raises(DTypeError, match="complex"):
        op(aotjax, T(_z(2, 2)))
    with pytest.raises(RuntimeError):
        op(torch, torch.tensor(_z(2, 2)))


def test_vmap_of_the_views():
    z = T(_z(4, 3))
    got = aotjax.vmap(lambda z: aotjax.view_as_complex(aotjax.view_as_real(z) * 2).imag + z.real)(z)
    _close(got, 2 * _z(4, 3).imag + _z(4, 3).real)


def _loss(m, z):
    return (m.abs(m.exp(z * z) * (1 + 2j)) + m.real(z.conj() * z.sin()) + m.angle(z) + m.imag(z / (z + 3))).sum() \
        + z.var()


def test_grad_real_leaf_equals_torch():
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(FLOAT)
    got = aotjax.grad(lambda x: _loss(aotjax, aotjax.complex(x, x * 0.5)))(T(x))
    tx = torch.tensor(x, requires_grad=True)
    _loss(torch, torch.complex(tx, tx * 0.5)).backward()
    _close(got, tx.grad)


def test_grad_complex_leaf_is_the_conjugate_of_torch():
    z = _z(2, 3)
    got = aotjax.grad(lambda z: _loss(aotjax, z))(T(z))
    tz = torch.tensor(z, requires_grad=True)
    _loss(torch, tz).backward()
    _close(got, tz.grad.conj())
    _, f_vjp = aotjax.vjp(lambda z: aotjax.view_as_real(z * z), T(z))  # a vjp through the views, against torch's
    ct = np.random.default_rng(1).standard_normal((2, 3, 2)).astype(FLOAT)
    tz.grad = None
    torch.autograd.backward(torch.view_as_real(tz * tz), torch.tensor(ct))
    _close(f_vjp(T(ct))[0], tz.grad.conj())
