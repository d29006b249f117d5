"""`torch.special`'s orthogonal polynomials and Bessel functions, `torch.masked`'s reductions, `sgn`, `resolve_neg`
and `chalf` against torch: values eagerly and under one `jit` per family, dtypes, the special values (negative
degrees, |x| > 1, 0, inf, fully masked rows), and derivatives (torch autograd for the masked ops; the Bessel
functions' derivative identities, which torch does not implement)."""
import math

import numpy as np
import pytest
import torch

import aotjax
from aotjax.core.errors import DTypeError
from aotjax.ops.unsupported import UnsupportedOpError
from tests.helpers import FLOAT, INT, X64

T = aotjax.tensor
TOL = 1e-10 if X64 else 1e-5
INF, NAN = math.inf, math.nan


def _np(v):
    if isinstance(v, torch.Tensor):
        v = v.detach().numpy()
        return v.astype(INT) if v.dtype == np.int64 else v  # NOTE: torch's int64 is the mode's default int
    return np.asarray(v.numpy() if isinstance(v, aotjax.Tensor) else v)


def _close(got, want, rtol=TOL, atol=TOL, how=""):
    got, want = _np(got), _np(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (how, got.dtype, want.dtype, got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True, err_msg=how)


# -- polynomials --------------------------------------------------------------------------------------------------
POLYNOMIALS = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
               "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
               "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
               "laguerre_polynomial_l", "legendre_polynomial_p"]
XS = np.array([-2.0, -1.0, -0.5, 0.0, 0.3, 0.5, 1.0, 1.5], FLOAT)[:, None]
NS = np.array([-2, 0, 1, 2, 5, 9], INT)


VARIANTS = [  # NOTE: each new shape compiles eagerly: one variant per op (all in the slow test)
    ("n=3", lambda f, x: f(x, 3), lambda g, tx: g(tx, 3)),
    ("n=2.7 (truncated)", lambda f, x: f(x, 2.7), lambda g, tx: g(tx, 2.7)),
    ("int operands", lambda f, x: f(T([1, 2]), T([2, 3])), lambda g, tx: g(torch.tensor([1, 2]), torch.tensor([2, 3]))),
    ("0-d", lambda f, x: f(T(0.25), 4), lambda g, tx: g(torch.tensor(0.25), 4)),
]


def test_polynomials_jit_match_torch():
    n, tx, tn = T(NS), torch.tensor(XS), torch.tensor(NS.astype(np.int64))
    with_nan = T(np.concatenate([XS, [[NAN]]]).astype(FLOAT))
    jitted = aotjax.jit(lambda x, n: tuple(getattr(aotjax.special, f)(x, n) for f in POLYNOMIALS))(with_nan, n)
    for name, traced in zip(POLYNOMIALS, jitted):
        _close(traced[:-1], getattr(torch.special, name)(tx, tn), rtol=1e-5 if not X64 else 1e-9, how=name)
        # NOTE: NaN for degrees >= 1 (torch's CPU kernels give garbage for NaN here)
        assert np.isnan(traced[-1].numpy()[2:]).all() and traced[-1].numpy()[:2].tolist() == [0, 1], name
    for name, (what, f, g) in zip(POLYNOMIALS[::3], VARIANTS):  # eagerly: four ops, one variant each
        ours, theirs = getattr(aotjax.special, name), getattr(torch.special, name)
        _close(f(ours, T(XS)), g(theirs, tx), rtol=1e-5, how=f"{name} {what}")
    assert aotjax.special.chebyshev_polynomial_t(T(np.zeros((0, 3), FLOAT)), 2).shape == (0, 3)


@pytest.mark.slow
def test_polynomials_eager_match_torch():
    x, n, tx, tn = T(XS), T(NS), torch.tensor(XS), torch.tensor(NS.astype(np.int64))
    for name in POLYNOMIALS:
        ours, theirs = getattr(aotjax.special, name), getattr(torch.special, name)
        _close(ours(x, n), theirs(tx, tn), rtol=1e-5 if not X64 else 1e-9, how=name)
        for what, f, g in VARIANTS:
            _close(f(ours, x), g(theirs, tx), rtol=1e-5, how=f"{name} {what}")


def test_polynomials_have_no_derivative_like_torch_and_vmap():
    g = aotjax.grad(lambda x: aotjax.special.legendre_polynomial_p(x, 3).sum())(T([0.5, 2.0]))
    assert np.all(g.numpy() == 0)  # torch's result carries no grad_fn: no derivative
    out = aotjax.vmap(aotjax.special.hermite_polynomial_he)(T([0.5, 2.0]), T([3, 4]))
    _close(out, torch.special.hermite_polynomial_he(torch.tensor([0.5, 2.0]), torch.tensor([3, 4])), how="vmap")


# -- Bessel functions and airy_ai -----------------------------------------------------------------------------------
BESSELS = ["modified_bessel_i0", "modified_bessel_i1", "modified_bessel_k0", "modified_bessel_k1",
           "scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "bessel_y0", "bessel_y1", "spherical_bessel_j0",
           "airy_ai"]
BX = np.array([0.0, 1e-3, 0.5, 1.0, 1.99, 2.0, 2.5, 5.0, 7.9, 8.1, 20.0, 60.0, 120.0, -1.0, -3.0, -7.5, INF, NAN],
              FLOAT)


def _bessel_tolerances(name):
    # NOTE: torch's own airy_ai is off by ~3e-6 near x = -2.1 (float64, against mpmath)
    atol = (5e-5 if name == "airy_ai" else 1e-5) if not X64 else (1e-5 if name == "airy_ai" else 1e-9)
    return {"rtol": 1e-4 if not X64 else 1e-6, "atol": atol}


def test_bessel_functions_jit_match_torch():
    x, tx = T(BX), torch.tensor(BX)
    jitted = aotjax.jit(lambda x: tuple(getattr(aotjax.special, f)(x) for f in BESSELS))(x)
    for name, traced in zip(BESSELS, jitted):
        _close(traced, getattr(torch.special, name)(tx), how=name + " (jit)", **_bessel_tolerances(name))
    _close(aotjax.special.bessel_y0(T([1, 2])), torch.special.bessel_y0(torch.tensor([1, 2])), rtol=1e-5, how="int")
    _close(aotjax.special.airy_ai(x), torch.special.airy_ai(tx), how="airy_ai eager", **_bessel_tolerances("airy_ai"))


@pytest.mark.slow
def test_bessel_functions_eager_match_torch():
    x, tx = T(BX), torch.tensor(BX)
    for name in BESSELS:
        _close(getattr(aotjax.special, name)(x), getattr(torch.special, name)(tx), how=name, **_bessel_tolerances(name))


def test_bessel_second_kind_derivatives():
    xs = np.array([0.3, 1.5, 4.0, 10.0], FLOAT)
    tx = torch.tensor(xs)
    S = torch.special
    k0, k1, y0, y1 = S.modified_bessel_k0(tx), S.modified_bessel_k1(tx), S.bessel_y0(tx), S.bessel_y1(tx)
    e = torch.exp(tx)
    want = {"modified_bessel_k0": -k1, "modified_bessel_k1": -k0 - k1 / tx, "bessel_y0": -y1,
            "bessel_y1": y0 - y1 / tx, "scaled_modified_bessel_k0": e * (k0 - k1),
            "scaled_modified_bessel_k1": e * (k1 - k0 - k1 / tx)}
    grads = aotjax.jit(lambda x: {name: aotjax.grad(lambda x, name=name: getattr(aotjax.special, name)(x).sum())(x)
                                  for name in want})(T(xs))
    for name, w in want.items():
        _close(grads[name], w, rtol=1e-4 if not X64 else 1e-7, atol=1e-6, how=name)


# -- sgn, resolve_neg, chalf ------------------------------------------------------------------------------------------
def test_sgn_resolve_neg_and_chalf():
    cdt = np.complex128 if X64 else np.complex64
    for v in [np.array([3 + 4j, 0j, -1j], cdt), np.array([-2.0, 0.0, 5.0], FLOAT), np.array([-3, 0, 7], INT),
              np.array(-2.5, FLOAT), np.array([True, False])]:
        _close(aotjax.sgn(T(v)), torch.sgn(torch.tensor(v)), how=str(v))
        _close(T(v).sgn(), torch.tensor(v).sgn(), how=str(v))
    z, tz = T(np.array([3 + 4j, 0j], cdt)), torch.tensor(np.array([3 + 4j, 0j], cdt))
    assert z.sgn_() is z
    _close(z, tz.sgn_())
    x = T([1.0, 2.0])
    assert aotjax.resolve_neg(x) is x and x.resolve_neg() is x
    # real derivative: 0 as torch; complex: torch's autograd of |sgn(z) . w|^2 style loss (real, so conventions agree
    # up to the conjugate aotjax gives complex leaves)
    w = np.array([0.5 - 1j, 2 + 0.5j], cdt)
    tz = torch.tensor(np.array([3 + 4j, 1 - 2j], cdt), requires_grad=True)
    (torch.sgn(tz) * torch.tensor(w)).real.sum().backward()
    g = aotjax.grad(lambda z: aotjax.real(aotjax.sgn(z) * T(w)).sum())(T(np.array([3 + 4j, 1 - 2j], cdt)))
    _close(aotjax.conj(g), tz.grad, rtol=1e-5, atol=1e-6)
    _close(aotjax.grad(lambda x: aotjax.sgn(x).sum())(T([1.0, -2.0])), torch.zeros(2, dtype=torch.float32))
    with pytest.raises(UnsupportedOpError, match="complex32"):
        T([1.0]).chalf()


# -- torch.masked ---------------------------------------------------------------------------------------------------
RNG = np.random.default_rng(0)
MX = RNG.standard_normal((3, 4)).astype(FLOAT)
MASK = np.array([[1, 0, 1, 1], [0, 0, 0, 0], [1, 1, 0, 1]], bool)  # row 1 fully masked
REDUCTIONS = ["sum", "prod", "mean", "amax", "amin", "logsumexp", "norm", "var", "std"]
ALONG = ["cumsum", "cumprod", "softmax", "log_softmax", "softmin"]


def _masked_calls(m, x, mask):
    """(name, thunk) for every masked op on `x`, of module `m` (aotjax or torch)."""
    M = m.masked
    out = []
    for name in REDUCTIONS:
        for kw in [{}, {"dim": 1}, {"dim": 0, "keepdim": True}, {"dim": (0, 1)}]:
            out.append((f"{name}{kw}", lambda name=name, kw=kw: getattr(M, name)(x, mask=mask, **kw)))
    for name in ["argmax", "argmin"]:
        for kw in [{}, {"dim": 1}, {"dim": 0, "keepdim": True}]:
            out.append((f"{name}{kw}", lambda name=name, kw=kw: getattr(M, name)(x, mask=mask, **kw)))
    for name in ALONG:
        out.append((name, lambda name=name: getattr(M, name)(x, 1, mask=mask)))
    out += [
        ("median1", lambda: M.median(x, 1, mask=mask)), ("median0", lambda: M.median(x, 0, keepdim=True, mask=mask)),
        ("normalize", lambda: M.normalize(x, 2.0, 1, mask=mask)),
        ("normalize1", lambda: M.normalize(x, 1.0, 0, eps=1e-3, mask=mask)),
        ("norm-inf", lambda: M.norm(x, -INF, 1, mask=mask)), ("norm inf", lambda: M.norm(x, INF, 1, mask=mask)),
        ("var biased", lambda: M.var(x, 1, unbiased=False, mask=mask)),
        ("var correction", lambda: M.var(x, 1, correction=2, keepdim=True, mask=mask)),
        ("logaddexp", lambda: M.logaddexp(x, x * 2, input_mask=mask, other_mask=mask.flip(0))),
        ("no mask", lambda: M.sum(x, 1)),
        ("broadcast mask", lambda: M.amax(x, 1, mask=mask[2])),
    ]
    return out


def test_masked_ops_jit_match_torch():
    x, mask, tx, tmask = T(MX), T(MASK), torch.tensor(MX), torch.tensor(MASK)
    calls = _masked_calls(aotjax, x, mask)
    jitted = aotjax.jit(lambda x, mask: tuple(f() for _, f in _masked_calls(aotjax, x, mask)))(x, mask)
    assert len(jitted) == len(calls)
    for (name, _), (_, theirs), traced in zip(calls, _masked_calls(torch, tx, tmask), jitted):
        _close(traced, theirs(), how=name + " (jit)")
    _close(aotjax.masked.softmax(x, 1, mask=mask), torch.masked.softmax(tx, 1, mask=tmask), how="softmax eager")
    _close(aotjax.masked.var(x, 1, mask=mask), torch.masked.var(tx, 1, mask=tmask), how="var eager")


@pytest.mark.slow
def test_masked_ops_eager_match_torch():
    x, mask, tx, tmask = T(MX), T(MASK), torch.tensor(MX), torch.tensor(MASK)
    for (name, ours), (_, theirs) in zip(_masked_calls(aotjax, x, mask), _masked_calls(torch, tx, tmask)):
        _close(ours(), theirs(), how=name)


def test_masked_integer_inputs_and_errors():
    xi, mask = RNG.integers(-5, 5, (3, 4)).astype(INT), T(MASK)
    for name in ["sum", "prod", "amax", "amin", "argmax", "argmin"]:
        _close(getattr(aotjax.masked, name)(T(xi), 1, mask=mask),
               getattr(torch.masked, name)(torch.tensor(xi), 1, mask=torch.tensor(MASK)), how=name)
    _close(aotjax.masked.cumsum(T(xi), 1, mask=mask), torch.masked.cumsum(torch.tensor(xi), 1, mask=torch.tensor(MASK)))
    _close(aotjax.masked.mean(T(xi), 1, mask=mask, dtype=aotjax.float32),
           torch.masked.mean(torch.tensor(xi), 1, mask=torch.tensor(MASK), dtype=torch.float32))
    with pytest.raises(DTypeError, match="floating-point"):
        aotjax.masked.mean(T(xi), mask=mask)
    with pytest.raises(DTypeError, match="bool"):
        aotjax.masked.sum(T(MX), mask=T(MASK.astype(INT)))


VJP_OPS = {
    "sum": lambda M, x, m: M.sum(x, 1, mask=m), "prod": lambda M, x, m: M.prod(x, 1, mask=m),
    "mean": lambda M, x, m: M.mean(x, 1, mask=m), "amax": lambda M, x, m: M.amax(x, 1, mask=m),
    "logsumexp": lambda M, x, m: M.logsumexp(x, 1, mask=m), "norm": lambda M, x, m: M.norm(x, 2.0, 1, mask=m),
    "var": lambda M, x, m: M.var(x, 1, mask=m), "std": lambda M, x, m: M.std(x, (0, 1), mask=m),
    "cumsum": lambda M, x, m: M.cumsum(x, 1, mask=m), "cumprod": lambda M, x, m: M.cumprod(x, 1, mask=m),
    "softmax": lambda M, x, m: M.softmax(x, 1, mask=m), "log_softmax": lambda M, x, m: M.log_softmax(x, 1, mask=m),
    "normalize": lambda M, x, m: M.normalize(x, 2.0, 1, mask=m), "median": lambda M, x, m: M.median(x, 1, mask=m),
    "logaddexp": lambda M, x, m: M.logaddexp(x, x * 0.5, input_mask=m, other_mask=m.flip(1)),
}


def test_masked_vjp_matches_torch_autograd():
    mask_np = MASK.copy()
    mask_np[1, 2] = True  # NOTE: no fully masked row here: torch's derivative there is NaN
    want, cts = {}, {}
    for name, f in VJP_OPS.items():
        tx = torch.tensor(MX, requires_grad=True)
        out = f(torch.masked, tx, torch.tensor(mask_np))
        cts[name] = np.random.default_rng(1).standard_normal(tuple(out.shape)).astype(FLOAT)
        want[name] = (out, torch.autograd.grad(out, tx, torch.tensor(cts[name]))[0])

    def pullbacks(x, mask, cts):  # NOTE: every op's vjp in one jit (one compile)
        out = {}
        for name, f in VJP_OPS.items():
            value, pullback = aotjax.vjp(lambda x, f=f: f(aotjax.masked, x, mask), x)
            out[name] = (value, pullback(cts[name])[0])
        return out
    got = aotjax.jit(pullbacks)(T(MX), T(mask_np), {k: T(v) for k, v in cts.items()})
    for name, (value, g) in got.items():
        _close(value, want[name][0], how=name)
        _close(g, want[name][1], rtol=1e-5 if not X64 else 1e-9, atol=1e-6 if not X64 else 1e-10, how=name + " vjp")
    value, pullback = aotjax.vjp(lambda x: aotjax.masked.softmax(x, 1, mask=T(mask_np)), T(MX))  # and eagerly
    _close(pullback(T(cts["softmax"]))[0], want["softmax"][1], rtol=1e-5, atol=1e-6, how="softmax vjp eager")
