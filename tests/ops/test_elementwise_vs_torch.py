"""The elementwise math of `aotjax.ops.math.functions` and `aotjax.special` against PyTorch: each op on a few samples
(edge values: 0, -0.0, negatives, +-inf, NaN where the op defines them; a float and an int or bool dtype; 0-d and
empty tensors), eagerly (values and dtypes), under `aotjax.jit` (one compile per op, on its first sample), and
the gradient of a weighted sum against torch's autograd on interior points; then the in-place forms, the
Tensor methods, the aliases and the errors.

Each case is `(name, fn, samples, grad_samples, tol)`: `fn(m, *xs)` is written once for both libraries (`m` is
`aotjax` or `torch`), since the ops share PyTorch's names and signatures."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import aotjax
from aotjax.core.errors import DTypeError, UnsupportedError
from tests.helpers import FLOAT, INT, X64, by_mode
from tests.ops.test_sort_vs_torch import _args, _flat, _np  # NOTE: the torch differential tests' shared helpers

RNG = np.random.default_rng(0)
NAN, INF = np.nan, np.inf
TOL = by_mode(1e-10, 1e-5)
LOOSE = by_mode(1e-8, 2e-4)  # special functions: XLA's and torch's float32 approximations differ in the last bits


def a(*values):
    return np.array(values, FLOAT)


def ints(*values):
    return np.array(values, INT)


EDGES = a(NAN, INF, -INF, 0.0, -0.0)
REAL = np.concatenate([a(-2.5, -1.0, -0.3, 0.7, 1.0, 3.0), EDGES])
UNIT = np.concatenate([a(-1.0, -0.7, -0.2, 0.4, 0.9, 1.0, 1.5, -1.5), EDGES])
POS = np.concatenate([a(0.3, 1.0, 2.5, 10.0, -0.5), EDGES])
GAMMA = np.concatenate([a(0.3, 1.0, 2.5, 10.0, -0.5, -1.0, -2.0, -2.5), EDGES])
SMALL_INTS = ints(-3, -1, 0, 1, 2, 5)
SCALAR = np.asarray(0.5, FLOAT)
EMPTY = np.zeros((2, 0), FLOAT)
INTERIOR = a(-0.8, -0.3, 0.2, 0.6)
POS_INTERIOR = a(0.3, 1.2, 2.5, 7.0)


def _unary(name, samples, grad=(INTERIOR,), tol=TOL, fn=None):
    return (name, fn or (lambda m, x: getattr(m, name)(x)), samples, list(grad), tol)


def _special(name, samples, grad=(INTERIOR,), tol=TOL):
    return (f"special.{name}", lambda m, x: getattr(m.special, name)(x), samples, list(grad), tol)


def _pair(x, y):
    return (np.asarray(x), np.asarray(y))


GRID = (RNG.standard_normal((3, 1)).astype(FLOAT), RNG.standard_normal(4).astype(FLOAT))
POS_GRID = (np.abs(GRID[0]) + 0.5, np.abs(GRID[1]) + 0.5)
EDGE_PAIRS = _pair(a(NAN, 1.0, INF, -INF, 0.0, -0.0, 2.0, INF), a(1.0, NAN, INF, -INF, -0.0, 0.0, -3.0, -INF))
INT_PAIRS = _pair(ints(5, -5, 7, 0, -4), ints(3, 3, -2, 2, -3))

CASES = [
    # -- inverse trigonometric and hyperbolic
    _unary("asin", [UNIT, SMALL_INTS, SCALAR, EMPTY]),
    _unary("acos", [UNIT, SMALL_INTS]),
    _unary("atan", [REAL, SMALL_INTS]),
    _unary("asinh", [REAL, SMALL_INTS]),
    _unary("acosh", [POS + 1, SMALL_INTS], [POS_INTERIOR + 1]),
    _unary("atanh", [UNIT, SMALL_INTS]),
    _unary("sinh", [REAL, SMALL_INTS]),
    _unary("cosh", [REAL, SMALL_INTS]),
    # -- exponentials and logarithms
    _unary("log2", [POS, SMALL_INTS], [POS_INTERIOR]),
    _unary("log10", [POS, SMALL_INTS], [POS_INTERIOR]),
    _unary("exp2", [REAL, SMALL_INTS]),
    ("logaddexp", lambda m, x, y: m.logaddexp(x, y), [GRID, EDGE_PAIRS], [GRID], TOL),
    # -- rounding and remainders
    _unary("trunc", [REAL * 1.5, SMALL_INTS], [INTERIOR]),
    _unary("fix", [REAL * 1.5, SMALL_INTS], []),
    _unary("frac", [REAL * 1.5, SCALAR]),
    ("fmod", lambda m, x, y: m.fmod(x, y), [(a(5.5, -5.5, 3.0, 0.0, 1.0), a(2.0, 2.0, -2.0, 1.0, 0.0)), INT_PAIRS,
                                           GRID], [(a(5.5, -5.5, 3.3), a(2.0, 2.0, -2.0))], TOL),
    # -- two-operand float math
    ("hypot", lambda m, x, y: m.hypot(x, y), [GRID, EDGE_PAIRS], [GRID], TOL),
    ("copysign", lambda m, x, y: m.copysign(x, y), [GRID, EDGE_PAIRS], [GRID], TOL),
    ("fmax", lambda m, x, y: m.fmax(x, y), [GRID, EDGE_PAIRS, INT_PAIRS], [GRID, (a(1.0, 2.0), a(1.0, NAN))], TOL),
    ("fmin", lambda m, x, y: m.fmin(x, y), [GRID, EDGE_PAIRS, INT_PAIRS], [GRID, (a(1.0, NAN), a(1.0, 2.0))], TOL),
    ("xlogy", lambda m, x, y: m.xlogy(x, y), [(a(0.0, 0.0, 2.0, 0.0, 3.0, NAN, 1.0), a(0.0, NAN, 0.0, 5.0, 2.0, 1.0,
                                                                                         INF)),
                                             POS_GRID, INT_PAIRS], [POS_GRID, (a(0.0, 2.0), a(3.0, 0.5))], TOL),
    _unary("sinc", [REAL, SMALL_INTS], [a(-0.8, 0.0, 0.4, 1.5)]),
    _unary("deg2rad", [REAL, SMALL_INTS]),
    _unary("logit", [UNIT * 0.5 + 0.5, SMALL_INTS], [a(0.1, 0.5, 0.8)]),
    ("nan_to_num", lambda m, x: (m.nan_to_num(x), m.nan_to_num(x, nan=1.5, posinf=7.0, neginf=-7.0)),
     [REAL, SMALL_INTS, EMPTY], [np.concatenate([INTERIOR, a(NAN, INF)])], TOL),
    ("clamp_min", lambda m, x: (m.clamp_min(x, 0.5), x.clamp_max(-0.5)), [REAL, SMALL_INTS], [INTERIOR], TOL),
    ("addcmul", lambda m, x, y: m.addcmul(x, y, x * 2, value=3), [GRID, INT_PAIRS], [GRID], TOL),
    ("addcdiv", lambda m, x, y: m.addcdiv(x, y, x + 3, value=-2), [POS_GRID], [POS_GRID], TOL),
    # -- predicates
    _unary("isinf", [REAL, SMALL_INTS, EMPTY], []),
    _unary("isposinf", [REAL, SMALL_INTS], []),
    _unary("signbit", [REAL, SMALL_INTS, np.array([True, False])], []),
    ("heaviside", lambda m, x, y: m.heaviside(x, y), [(REAL, a(0.5)), (SMALL_INTS, ints(7))], [], TOL),
    # -- integers
    ("gcd", lambda m, x, y: (m.gcd(x, y), m.lcm(x, y)), [INT_PAIRS, (ints(0, 0, 12), ints(0, 9, -18))], [], TOL),
    ("shifts", lambda m, x, y: (m.bitwise_left_shift(x, y.abs()), m.bitwise_right_shift(x, y.abs()), x << 2,
                                x >> 1, 1 << y.abs()), [INT_PAIRS, (ints(-9, 9, 1), ints(40, 70, 0))], [], TOL),
    # -- special functions
    _unary("erfc", [REAL, SMALL_INTS, a(5.0, 9.0, -4.0)], tol=LOOSE),
    _unary("erfinv", [UNIT, SMALL_INTS], tol=LOOSE),
    _unary("lgamma", [GAMMA, SMALL_INTS], [POS_INTERIOR, a(-0.5, -2.5)], LOOSE),
    _unary("digamma", [GAMMA, SMALL_INTS], [POS_INTERIOR, a(-0.5, -2.5)], LOOSE),
    ("polygamma", lambda m, x: (m.polygamma(2, x), x.polygamma(3)),
     [a(0.3, 1.0, 2.5, 10.0, -0.5, 0.0, -2.0, INF, -INF, NAN)], [POS_INTERIOR], LOOSE),
    ("trigamma", lambda m, x: m.polygamma(1, x), [a(0.3, 1.0, 2.5, 10.0, -0.5, 0.0, INF, -INF, NAN)], [POS_INTERIOR],
     LOOSE),
    _unary("i0", [REAL, SMALL_INTS], tol=LOOSE),
    _special("i1", [REAL, SMALL_INTS], [a(-0.8, 0.0, 2.0)], LOOSE),
    _special("i1e", [REAL, SMALL_INTS], [a(-0.8, 0.0, 2.0)], LOOSE),
    _special("ndtr", [REAL, SMALL_INTS], tol=LOOSE),
    ("special.xlog1py", lambda m, x, y: m.special.xlog1py(x, y), [(a(0.0, 0.0, 2.0, 1.0), a(-1.0, NAN, 0.5, -1.0))],
     [(a(2.0, 1.0), a(0.5, 3.0))], TOL),
    ("special.aliases", lambda m, x: (m.special.expit(x), m.special.gammaln(x.abs() + 0.5), m.special.psi(x.abs() + 1),
                                      m.special.multigammaln(x.abs() + 2, 2), m.special.logsumexp(x, 0),
                                      m.special.softmax(x, 0), m.special.log_softmax(x, 0), m.special.sinc(x),
                                      m.special.round(x), m.special.exp2(x), m.special.logit(x.sigmoid()),
                                      m.special.xlogy(x.abs(), 2.0), m.special.erfinv(x.tanh()),
                                      m.special.digamma(x.abs() + 1), m.special.polygamma(1, x.abs() + 1)),
     [INTERIOR], [INTERIOR], LOOSE),
]
# NOTE: the rarer ops run in the slow pass (CI runs it once), to keep the budget of the default one.
SLOW_CASES = [
    ("logaddexp2", lambda m, x, y: m.logaddexp2(x, y), [GRID, EDGE_PAIRS], [GRID], TOL),
    ("fmod_scalar", lambda m, x: m.fmod(x, 1.5), [REAL, SMALL_INTS], [], TOL),
    ("xlogy_scalar", lambda m, x: m.xlogy(x, 2.0), [REAL], [INTERIOR], TOL),
    ("float_power", lambda m, x, y: m.float_power(x, y), [POS_GRID, INT_PAIRS], [POS_GRID], TOL),
    _unary("rad2deg", [REAL, SMALL_INTS]),
    ("logit_eps", lambda m, x: m.logit(x, eps=0.2), [UNIT * 0.5 + 0.5], [a(0.1, 0.5, 0.9, 0.3)], TOL),
    ("rsub", lambda m, x, y: (m.rsub(x, y, alpha=2), m.rsub(x, 3)), [GRID, INT_PAIRS], [GRID], TOL),
    _unary("isneginf", [REAL, SMALL_INTS], []),
    _unary("isreal", [REAL, SMALL_INTS], []),
    ("mvlgamma", lambda m, x: m.mvlgamma(x, 3), [POS + 1.5], [POS_INTERIOR + 1.5], LOOSE),
    _special("i0e", [REAL, SMALL_INTS], tol=LOOSE),
    _special("ndtri", [UNIT * 0.5 + 0.5], [a(0.1, 0.5, 0.8)], LOOSE),
    _special("log_ndtr", [np.concatenate([REAL, a(-10.0, -30.0)])], [a(-10.0, -1.0, 0.5, 3.0)], LOOSE),
    _special("erfcx", [np.concatenate([REAL, a(5.0, 30.0, 1e4, -5.0)])], [a(-1.0, 0.5, 5.0, 30.0)], LOOSE),
    _special("entr", [REAL, SMALL_INTS], [POS_INTERIOR]),
    _special("bessel_j0", [REAL, a(20.0, 50.0)], [], LOOSE),
    _special("bessel_j1", [REAL, a(20.0, 50.0)], [], LOOSE),
    ("special.zeta", lambda m, x, q: m.special.zeta(x, q), [(a(2.0, 3.0, 4.5, 1.0, 0.5), a(1.0, 2.5, 0.5, 2.0, 1.0))],
     [], LOOSE),
]


def _torch(x):
    return torch.tensor(np.asarray(x))


def _assert_same(got, want, name, tol):
    got, want = _flat(got), _flat(want)
    assert len(got) == len(want), name
    for g, w in zip(got, want):
        g, w = _np(g), _np(w)
        assert g.shape == w.shape, f"{name}: shape {g.shape} != torch's {w.shape}"
        # NOTE: without x64, torch's 64-bit results (float_power, int64) are 32-bit here: the same kind
        assert g.dtype == w.dtype or (g.dtype.kind == w.dtype.kind and not X64), \
            f"{name}: dtype {g.dtype} != torch's {w.dtype}"
        if g.dtype == np.float32:  # NOTE: with x64, integer operands still give float32 results, as torch's
            tol = max(tol, 1e-5 if tol == TOL else 2e-4)
        np.testing.assert_allclose(g, w.astype(g.dtype), rtol=tol, atol=tol, err_msg=name)


def _is_float(x) -> bool:
    return np.issubdtype(np.asarray(x).dtype, np.floating)


@pytest.mark.parametrize("name, fn, samples, grad_samples, tol", CASES, ids=[c[0] for c in CASES])
def test_matches_torch(name, fn, samples, grad_samples, tol):
    _check(name, fn, samples, grad_samples, tol)


@pytest.mark.slow
@pytest.mark.parametrize("name, fn, samples, grad_samples, tol", SLOW_CASES, ids=[c[0] for c in SLOW_CASES])
def test_rarer_ops_match_torch(name, fn, samples, grad_samples, tol):
    _check(name, fn, samples, grad_samples, tol)


def _check(name, fn, samples, grad_samples, tol):
    for sample in samples:
        args = _args(sample)
        _assert_same(fn(aotjax, *map(aotjax.tensor, args)), fn(torch, *map(_torch, args)), f"{name} eager", tol)
    args = _args(samples[0])
    jitted = aotjax.jit(lambda *xs: fn(aotjax, *xs))
    _assert_same(jitted(*map(aotjax.tensor, args)), fn(torch, *map(_torch, args)), f"{name} jit", tol)
    for sample in grad_samples:
        args = _args(sample)
        assert all(_is_float(x) for x in args)
        weights = [RNG.standard_normal(np.shape(o)).astype(FLOAT) for o in _flat(fn(torch, *map(_torch, args)))]

        def loss(m, *xs, weights=weights):
            return sum((o * m.tensor(w)).sum() for o, w in zip(_flat(fn(m, *xs)), weights))

        out, pullback = aotjax.vjp(lambda *xs: loss(aotjax, *xs), *map(aotjax.tensor, args))
        got = pullback(aotjax.ones_like(out))
        ts = [_torch(x).requires_grad_() for x in args]
        loss(torch, *ts).backward()
        for g, t in zip(got, ts):
            want = np.zeros(t.shape, FLOAT) if t.grad is None else t.grad.numpy()
            np.testing.assert_allclose(_np(g), want, rtol=tol, atol=tol, err_msg=f"{name} vjp")


# -- in-place forms, methods, aliases ---------------------------------------------------------------------------------
INPLACE = [
    ("asin_", lambda x: x.asin_(), UNIT), ("acos_", lambda x: x.acos_(), UNIT), ("atan_", lambda x: x.atan_(), REAL),
    ("asinh_", lambda x: x.asinh_(), REAL), ("acosh_", lambda x: x.acosh_(), POS + 1),
    ("atanh_", lambda x: x.atanh_(), UNIT), ("arcsin_", lambda x: x.arcsin_(), UNIT),
    ("sinh_", lambda x: x.sinh_(), REAL), ("cosh_", lambda x: x.cosh_(), REAL), ("log2_", lambda x: x.log2_(), POS),
    ("log10_", lambda x: x.log10_(), POS), ("exp2_", lambda x: x.exp2_(), REAL), ("trunc_", lambda x: x.trunc_(), REAL),
    ("fix_", lambda x: x.fix_(), REAL * 1.5), ("frac_", lambda x: x.frac_(), REAL * 1.5),
    ("fmod_", lambda x: x.fmod_(1.5), REAL), ("hypot_", lambda x: x.hypot_(x * 2), REAL),
    ("copysign_", lambda x: x.copysign_(-1.0), REAL), ("xlogy_", lambda x: x.xlogy_(3.0), REAL),
    ("sinc_", lambda x: x.sinc_(), REAL), ("deg2rad_", lambda x: x.deg2rad_(), REAL),
    ("rad2deg_", lambda x: x.rad2deg_(), REAL), ("logit_", lambda x: x.logit_(0.1), UNIT * 0.5 + 0.5),
    ("nan_to_num_", lambda x: x.nan_to_num_(posinf=3.0), REAL), ("clamp_min_", lambda x: x.clamp_min_(0.2), REAL),
    ("clamp_max_", lambda x: x.clamp_max_(0.2), REAL), ("addcmul_", lambda x: x.addcmul_(x, x, value=2), REAL),
    ("addcdiv_", lambda x: x.addcdiv_(x, x + 5, value=2), POS), ("erfc_", lambda x: x.erfc_(), REAL),
    ("erfinv_", lambda x: x.erfinv_(), UNIT), ("lgamma_", lambda x: x.lgamma_(), GAMMA),
    ("digamma_", lambda x: x.digamma_(), GAMMA), ("polygamma_", lambda x: x.polygamma_(1), POS_INTERIOR),
    ("mvlgamma_", lambda x: x.mvlgamma_(2), POS + 1), ("i0_", lambda x: x.i0_(), REAL),
    ("heaviside_", lambda x: x.heaviside_(x.abs()), REAL), ("float_power_", lambda x: x.float_power_(2), REAL),
    ("gcd_", lambda x: x.gcd_(x + 4), SMALL_INTS), ("lcm_", lambda x: x.lcm_(x + 4), SMALL_INTS),
    ("lshift_", lambda x: x.bitwise_left_shift_(2), SMALL_INTS), ("rshift_", lambda x: x.bitwise_right_shift_(1),
                                                                  SMALL_INTS),
    ("ilshift", lambda x: x.__ilshift__(3), SMALL_INTS), ("irshift", lambda x: x.__irshift__(1), SMALL_INTS),
]


@pytest.mark.parametrize("name, fn, sample", INPLACE, ids=[c[0] for c in INPLACE])
def test_inplace_forms_match_torch(name, fn, sample):
    if name == "float_power_" and not X64:
        # NOTE: without x64 the widest float is float32, which float_power_ then writes into (torch: float64)
        x = aotjax.tensor(sample)
        assert fn(x) is x
        np.testing.assert_allclose(x.numpy(), torch.tensor(sample).double().float_power_(2).numpy(), rtol=TOL)
        return
    x, t = aotjax.tensor(sample), _torch(sample)
    base = aotjax.tensor(np.stack([sample, sample]))
    view = base[1]
    assert fn(x) is x
    fn(view)  # through a view, into its base
    fn(t)
    _assert_same(x, t, name, LOOSE)
    _assert_same(base[1], t, f"{name} through a view", LOOSE)
    _assert_same(base[0], _torch(sample), f"{name} leaves the rest of the base", TOL)


def test_inplace_forms_under_jit_and_grad():
    def f(x):
        y = x * 1.0
        y.asin_()
        y.hypot_(x)
        y.addcmul_(x, x)
        return y.sum()

    x = INTERIOR
    t = _torch(x).requires_grad_()
    y = torch.addcmul(torch.hypot(torch.asin(t), t), t, t)  # NOTE: torch's autograd refuses hypot_ here
    y.sum().backward()
    np.testing.assert_allclose(aotjax.jit(f)(aotjax.tensor(x)).numpy(), y.sum().detach().numpy(), rtol=TOL)
    np.testing.assert_allclose(aotjax.grad(f)(aotjax.tensor(x)).numpy(), t.grad.numpy(), rtol=TOL, atol=TOL)


def test_an_integer_tensor_cannot_take_a_float_result_in_place():
    for fn in (lambda x: x.asin_(), lambda x: x.xlogy_(2.0), lambda x: x.logit_(), lambda x: x.fmod_(1.5)):
        with pytest.raises(DTypeError, match="cannot be cast"):
            fn(aotjax.tensor(SMALL_INTS))
        with pytest.raises(RuntimeError):
            fn(_torch(SMALL_INTS))


def test_errors_match_torchs_refusals():
    with pytest.raises(DTypeError, match="hypot: expected floating-point"):
        aotjax.hypot(aotjax.tensor(SMALL_INTS), aotjax.tensor(SMALL_INTS))
    with pytest.raises(DTypeError, match="frac: expected a floating-point"):
        aotjax.frac(aotjax.tensor(SMALL_INTS))
    with pytest.raises(DTypeError, match="gcd: expected integer"):
        aotjax.gcd(aotjax.tensor(REAL), aotjax.tensor(REAL))
    with pytest.raises(DTypeError, match="addcdiv: integer division"):
        aotjax.addcdiv(aotjax.tensor(REAL), aotjax.tensor(SMALL_INTS), aotjax.tensor(SMALL_INTS))
    with pytest.raises(DTypeError, match="heaviside: x and values must have one dtype"):
        aotjax.heaviside(aotjax.tensor(REAL), aotjax.tensor(ints(1)))
    with pytest.raises(ValueError, match="polygamma: the order n"):
        aotjax.polygamma(-1, aotjax.tensor(REAL))
    with pytest.raises(UnsupportedError, match="zeta: the derivative in x"):
        aotjax.grad(lambda x: aotjax.special.zeta(x, 2.0).sum())(aotjax.tensor(a(2.0, 3.0)))


def test_aliases_methods_and_namespaces_follow_torch():
    for alias, name in (("arcsin", "asin"), ("arccos", "acos"), ("arctan", "atan"), ("arcsinh", "asinh"),
                        ("arccosh", "acosh"), ("arctanh", "atanh"), ("fix", "trunc")):
        x = aotjax.tensor(a(0.2, 1.5))
        np.testing.assert_array_equal(getattr(aotjax, alias)(x).numpy(), getattr(aotjax, name)(x).numpy())
        np.testing.assert_array_equal(getattr(x, alias)().numpy(), getattr(x, name)().numpy())
    for name in ("erfcx", "ndtri", "log_ndtr", "i0e", "i1e", "i1", "bessel_j0", "zeta", "ndtr", "entr"):
        assert not hasattr(aotjax.Tensor, name) and hasattr(torch.special, name)
    assert set(aotjax.special.__all__) <= set(dir(torch.special))


def test_vmap_of_the_new_primitives():
    x = RNG.uniform(0.2, 0.9, (3, 4)).astype(FLOAT)
    ops = ("asin", "erfinv", "lgamma", "digamma", "erfc", "log2", "i0")

    def f(v):
        return [getattr(aotjax, o)(v) for o in ops] + [aotjax.polygamma(2, v), aotjax.special.zeta(v + 1, v),
                                                       aotjax.special.i1e(v)]

    got = aotjax.vmap(f, in_axes=1)(aotjax.tensor(x))
    t = _torch(x).T
    want = [getattr(torch, o)(t) for o in ops] + [torch.polygamma(2, t), torch.special.zeta(t + 1, t),
                                                  torch.special.i1e(t)]
    _assert_same(got, want, "vmap", LOOSE)


def test_second_derivatives_of_the_special_primitives():
    """grad of grad goes through the derivative rules' own primitives (digamma -> polygamma(1) -> polygamma(2))."""
    x = POS_INTERIOR

    def second(m_fn, t_fn):
        got = aotjax.grad(lambda v: aotjax.grad(lambda u: m_fn(u).sum())(v).sum())(aotjax.tensor(x))
        t = _torch(x).requires_grad_()
        (g,) = torch.autograd.grad(t_fn(t).sum(), t, create_graph=True)
        (h,) = torch.autograd.grad(g.sum(), t)
        np.testing.assert_allclose(got.numpy(), h.numpy(), rtol=LOOSE, atol=LOOSE)

    second(aotjax.lgamma, torch.lgamma)
    second(lambda u: aotjax.erfinv(u / 10), lambda t: torch.erfinv(t / 10))
    second(lambda u: aotjax.special.i1e(u), torch.special.i1e)
    second(lambda u: aotjax.acosh(u + 1), lambda t: torch.acosh(t + 1))
