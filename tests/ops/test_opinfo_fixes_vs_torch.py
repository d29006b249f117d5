"""Ops that PyTorch's OpInfo samples found wrong, against torch: `cov`/`corrcoef` of one variable and
`quantile`/`nanquantile` of a 0-d input with a number `q` (0-d results), `diff` with `prepend`/`append`, any `n`
and empty dims, `cdist` of empty inputs for every `p`, `gradient`'s `spacing` and `dim` forms, `masked_scatter` with
a mask and a self that broadcast, and `linspace`/`logspace` with traced 0-d tensor ends (and integer dtypes).

Each case runs eagerly in both libraries (values, dtypes, shapes), then every sample under one `aotjax.jit`, and the
first sample of the cases marked `vjp` under `aotjax.vjp` in its float inputs against torch's autograd. Where torch
raises, aotjax must raise too."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import aotjax
from tests.helpers import FLOAT, INT, X64, assert_matches_torch, run_on

TOL = 1e-9 if X64 else 1e-5
INF = float("inf")

pytestmark = pytest.mark.filterwarnings("ignore:masked_scatter_ received a mask with dtype torch.uint8:UserWarning")


def _f(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(FLOAT)


def _c(*shape, seed=0):
    cdt = np.complex128 if X64 else np.complex64
    return (_f(*shape, seed=seed) + 1j * _f(*shape, seed=seed + 1)).astype(cdt)


def _mask(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape) > 0


def _quantiles(m, x, q0):
    """A number and a 0-d `q`, with and without `dim` and `keepdim`, and a 1-d `q`."""
    return [m.quantile(x, 0.3), m.nanquantile(x, q0, keepdim=True), m.quantile(x, 0.3, dim=0, keepdim=True),
            m.nanquantile(x, q0, -1, False), m.quantile(x, q0, dim=-1, keepdim=True, interpolation="midpoint"),
            m.quantile(x, m.stack([q0, q0 / 2]), dim=0, keepdim=True)]


def _diffs(m, x, dim, p=None, a=None, ns=(0, 1, 3)):
    return [m.diff(x, n, dim, p, a) for n in ns]


def _gradients(m, x, c0, c1):
    return [*m.gradient(x, spacing=None), *m.gradient(x, spacing=2.0, dim=None, edge_order=2),
            *m.gradient(x, spacing=[2.0, 0.5], edge_order=2), *m.gradient(x, spacing=(3, 1.5)),
            *m.gradient(x, spacing=[c0, c1]), *m.gradient(x, spacing=(c0, c1), edge_order=2),
            *m.gradient(x, spacing=(c1,), dim=1), *m.gradient(x, dim=-1, edge_order=2),
            *m.gradient(x, spacing=[1.5], dim=(0,)), *m.gradient(x, spacing=[c1, c0], dim=[1, 0], edge_order=2)]


def _cdists(m, x1, x2):
    return [m.cdist(x1, x2, p) for p in (0.0, 1.0, 2.0, 3.5, INF)]


def _masked_scatters(m, x, mask, src):
    return [m.masked_scatter(x, mask, src), x.masked_scatter(mask, src)]


# name: (fn(m, *tensors), [samples], flags); flags: "vjp" (the first sample's vjp in its float inputs)
CASES = {
    # 1. one variable: cov and corrcoef are 0-d; quantile of a 0-d input is 0-d for a number q
    "cov_one_variable": (lambda m, x: (m.cov(x), m.corrcoef(x), m.cov(x, correction=0), m.cov(x[0]),
                                       m.corrcoef(x[0])), [[_f(1, 5)]], "vjp"),
    "cov_one_variable_weights": (lambda m, x, fw, aw: (m.cov(x, fweights=fw), m.cov(x, aweights=aw),
                                                       m.cov(x, correction=2, fweights=fw, aweights=aw)),
                                 [[_f(1, 4), np.array([1, 3, 2, 1], INT), np.abs(_f(4, seed=1))]], "vjp"),
    "cov_corrcoef_opinfo_shapes": (lambda m, x: (m.cov(x), m.corrcoef(x)), [[_f(3, 2)], [_f(2)], [_f(2, 3)]], "vjp"),
    "cov_corrcoef_complex": (lambda m, x, aw: (m.cov(x), m.corrcoef(x), m.cov(x, aweights=aw), m.cov(x[:1])),
                             [[_c(2, 4), np.abs(_f(4, seed=2))]], ""),
    "cov_int_input": (lambda m, x: m.cov(x), [[np.array([[1, 2, 4], [3, 1, 0]], INT)]], ""),
    "cov_bool_raises": (lambda m, x: m.cov(x), [[np.array([True, False, True])]], ""),
    "cov_float_fweights_raise": (lambda m, x, fw: m.cov(x, fweights=fw), [[_f(2, 3), np.ones(3, FLOAT)]], ""),
    "cov_int_aweights_raise": (lambda m, x, aw: m.cov(x, aweights=aw), [[_f(2, 3), np.ones(3, INT)]], ""),
    "cov_weights_wrong_length_raise": (lambda m, x, fw: m.cov(x, fweights=fw), [[_f(2, 3), np.ones(4, INT)]], ""),
    "quantile_0d_input": (_quantiles, [[np.array(0.7, FLOAT), np.array(0.4, FLOAT)]], "vjp"),
    "quantile_number_q": (_quantiles, [[_f(3, 4), np.array(0.4, FLOAT)]], "vjp"),
    "quantile_2d_q_raises": (lambda m, x, q: m.quantile(x, q), [[_f(4), np.full((1, 1), 0.5, FLOAT)]], ""),
    "quantile_empty_raises": (lambda m, x: m.quantile(x, 0.5, dim=1), [[np.zeros((0, 3), FLOAT)]], ""),
    # 2. diff: prepend/append (n = 0 ignores them), n past the size, empty dims, bool and mixed dtypes
    "diff_prepend_append": (lambda m, x, p, a: _diffs(m, x, 0, p, a, (0, 1, 3, 8, 9)),
                            [[_f(5, 5), _f(1, 5, seed=1), _f(2, 5, seed=2)]], "vjp"),
    "diff_prepend_or_append": (lambda m, x, p: (*_diffs(m, x, 1, p, None), *_diffs(m, x, -1, None, x[..., :1])),
                               [[_f(2, 3, 2), _f(2, 1, 2, seed=1)]], "vjp"),
    "diff_3d_dims": (lambda m, x, p: (*_diffs(m, x, 1, p, p), *_diffs(m, x, 2), m.diff(x, 6, 1)),
                     [[_f(2, 2, 2), _f(2, 1, 2, seed=1)]], "vjp"),
    "diff_size_0_prepend": (lambda m, x, p: _diffs(m, x, 0, p, p), [[_f(3, 2), np.zeros((0, 2), FLOAT)]], "vjp"),
    "diff_empty": (lambda m, x: (*_diffs(m, x, 0), *_diffs(m, x, 1), *_diffs(m, x, -1, x, x)),
                   [[np.zeros((0, 3), FLOAT)], [np.zeros((2, 0), FLOAT)]], ""),
    "diff_empty_1d": (lambda m, x: (*_diffs(m, x, 0), *_diffs(m, x, -1, x, x)), [[np.zeros((0,), FLOAT)]], ""),
    "diff_bool": (lambda m, b, p: (*_diffs(m, b, 1), *_diffs(m, b, 0, p[:1], p)),
                  [[_mask(3, 4), _mask(2, 4, seed=1)]], ""),
    "diff_mixed_dtypes": (lambda m, i, f: (*_diffs(m, i, 0, f[:1]), *_diffs(m, i, 1, None, i[:, :1])),
                          [[np.array([[1, 5, 2], [0, -3, 7]], INT), _f(2, 3)]], ""),
    "diff_0d_prepend_raises": (lambda m, x, p: m.diff(x, prepend=p), [[_f(4), np.array(1.0, FLOAT)]], ""),
    "diff_prepend_shape_raises": (lambda m, x, p: m.diff(x, dim=0, prepend=p), [[_f(3, 2), _f(1, 3)]], ""),
    "diff_negative_n_raises": (lambda m, x: m.diff(x, -1), [[_f(4)]], ""),
    "diff_0d_raises": (lambda m, x: m.diff(x), [[np.array(1.0, FLOAT)]], ""),
    # 6. cdist with no pairs, or vectors of size 0 (zeros), for every p
    "cdist_empty": (_cdists, [[np.zeros((0, 5), FLOAT), _f(4, 5)], [_f(4, 5), np.zeros((0, 5), FLOAT)],
                              [np.zeros((0, 4, 5), FLOAT), _f(3, 5)], [_f(1, 4, 5), np.zeros((0, 3, 5), FLOAT)]], ""),
    "cdist_size_0_vectors": (_cdists, [[np.zeros((3, 0), FLOAT), np.zeros((2, 0), FLOAT)]], "vjp"),
    "cdist_nonempty": (_cdists, [[_f(2, 3, 2), _f(2, 4, 2, seed=1)]], "vjp"),
    # 7. gradient: spacing None, numbers, coordinates (list or tuple); dim None, int, negative, list, tuple
    "gradient_forms": (_gradients, [[_f(4, 5), np.array([0.0, 1.0, 1.5, 3.5], FLOAT),
                                     np.array([-1.0, 0.5, 1.5, 2.0, 4.0], FLOAT)]], "vjp"),
    "gradient_opinfo": (lambda m, x: (*m.gradient(x, spacing=[2.0, 1.0], dim=(0, 1), edge_order=2),
                                      *m.gradient(x, dim=(0, -1))), [[_f(4, 4, 4)]], "vjp"),
    "gradient_complex": (lambda m, x: m.gradient(x, spacing=2.0, edge_order=2), [[_c(3, 4)]], ""),
    "gradient_int_input": (lambda m, x, c: (*m.gradient(x), *m.gradient(x, spacing=[c], dim=0)),
                           [[np.array([1, 4, 9, 16], INT), np.array([0, 1, 3, 4], INT)]], ""),
    "gradient_coordinates_length_raises": (lambda m, x, c: m.gradient(x, spacing=[c], dim=0),
                                           [[_f(4, 3), np.arange(5, dtype=FLOAT)]], ""),
    "gradient_coordinates_2d_raise": (lambda m, x, c: m.gradient(x, spacing=[c, c]), [[_f(3, 3), _f(1, 3)]], ""),
    "gradient_spacing_count_raises": (lambda m, x: m.gradient(x, spacing=[1.0, 2.0, 3.0]), [[_f(3, 3)]], ""),
    "gradient_repeated_dim_raises": (lambda m, x: m.gradient(x, dim=(0, 0)), [[_f(3, 3)]], ""),
    "gradient_uint8_raises": (lambda m, x: m.gradient(x), [[np.array([1, 2, 3], np.uint8)]], ""),
    # 8. masked_scatter: the mask broadcasts with self (out of place: both ways), in place to self's shape
    "masked_scatter_broadcasts": (_masked_scatters, [[_f(5, 5), _mask(5, 5), _f(5, 5, seed=1)],
                                                     [_f(5, 5), _mask(5), _f(5, 5, seed=1)],
                                                     [_f(5, 5), np.array(True), _f(5, 5, seed=1)],
                                                     [_f(5), _mask(5, 5), _f(5, 5, seed=1)]], "vjp"),
    "masked_scatter_inplace": (lambda m, x, mask, src: (x.clone().masked_scatter_(mask, src),
                                                        x.clone().masked_scatter_(mask[0], src)),
                               [[_f(3, 4), _mask(3, 4), _f(12, seed=1)]], "vjp"),
    "masked_scatter_inplace_grow_raises": (lambda m, x, mask, src: x.clone().masked_scatter_(mask, src),
                                           [[_f(4), _mask(3, 4), _f(12)]], ""),
    "masked_scatter_uint8_mask_raises": (lambda m, x, mask, src: x.masked_scatter(mask, src),
                                         [[_f(4), np.array([1, 0, 1, 1], np.uint8), _f(4)]], ""),
    "masked_scatter_dtype_raises": (lambda m, x, mask, src: x.masked_scatter(mask, src),
                                    [[_f(4), _mask(4), np.arange(4, dtype=INT)]], ""),
    "masked_scatter_short_source_raises": (lambda m, x, mask, src: x.masked_scatter(mask, src),
                                           [[_f(4), np.array([True, False, True, True]), _f(2)]], ""),
}

# cases where torch raises and aotjax must, and which are not jitted (their samples compile nothing)
_RAISES = tuple(n for n in CASES if n.endswith(("raises", "raise")))


def _flat(out):
    return [out] if isinstance(out, (torch.Tensor, aotjax.Tensor)) else [v for o in out for v in _flat(o)]


@pytest.mark.parametrize("name", list(CASES))
def test_matches_torch(name):
    fn, samples, flags = CASES[name]
    for k, arrays in enumerate(samples):
        try:
            ref = run_on(torch, fn, arrays)
        except (RuntimeError, IndexError, TypeError, ValueError):
            assert name in _RAISES, f"{name} sample {k}: torch raised"
            with pytest.raises((RuntimeError, IndexError, TypeError, ValueError)):
                run_on(aotjax, fn, arrays)
            continue
        assert name not in _RAISES, f"{name} sample {k}: torch did not raise"
        assert_matches_torch(run_on(aotjax, fn, arrays), ref, f"{name} sample {k}")
        args = [aotjax.tensor(a) for a in arrays]
        assert_matches_torch(aotjax.jit(lambda *xs: fn(aotjax, *xs))(*args), ref, f"{name} sample {k} jit")
        if "vjp" in flags and k == 0:
            _check_vjp(f"{name} sample {k}", fn, arrays)


def _check_vjp(how, fn, arrays):
    """The vjp in the float inputs, with cotangents 1, 2, 3, ... (one per output), against torch's autograd."""
    float_pos = [i for i, a in enumerate(arrays) if a.dtype == FLOAT]
    t_args = [torch.tensor(a, requires_grad=i in float_pos) for i, a in enumerate(arrays)]
    t_outs = [o for o in _flat(fn(torch, *t_args)) if o.dtype.is_floating_point and o.requires_grad]
    t_cts = [torch.full_like(o, k + 1.0) for k, o in enumerate(t_outs)]
    t_grads = torch.autograd.grad(t_outs, [t_args[i] for i in float_pos], t_cts, allow_unused=True)

    def f(*floats):
        args = [aotjax.tensor(a) for a in arrays]
        for i, v in zip(float_pos, floats):
            args[i] = v
        return [o for o in _flat(fn(aotjax, *args)) if o.is_floating_point()]

    outs, pullback = aotjax.vjp(f, *[aotjax.tensor(arrays[i]) for i in float_pos])
    assert len(outs) == len(t_outs), how
    grads = pullback([aotjax.full_like(o, k + 1.0) for k, o in enumerate(outs)])
    for i, g, tg in zip(float_pos, grads, t_grads):
        expected = np.zeros(arrays[i].shape) if tg is None else tg.double().numpy()
        np.testing.assert_allclose(np.asarray(g, np.float64), expected, rtol=10 * TOL, atol=10 * TOL,
                                   err_msg=f"{how}: vjp of input {i}")


def test_backward_of_one_variable_cov_and_number_quantile():
    """`backward()` through the 0-d results, as torch's (they were [1, 1] and [1], whose backward needs a gradient)."""
    x, t = aotjax.tensor(_f(1, 5), requires_grad=True), torch.tensor(_f(1, 5), requires_grad=True)
    s, ts = aotjax.tensor(np.array(0.7, FLOAT), requires_grad=True), torch.tensor(np.array(0.7, FLOAT),
                                                                                   requires_grad=True)
    y = aotjax.cov(x) + aotjax.corrcoef(x) + aotjax.quantile(s, 0.3, dim=0, keepdim=True)
    assert y.shape == ()
    y.backward()
    (torch.cov(t) + torch.corrcoef(t) + torch.quantile(ts, 0.3, dim=0, keepdim=True)).backward()
    np.testing.assert_allclose(np.asarray(x.grad), t.grad.numpy(), rtol=TOL, atol=TOL)
    np.testing.assert_allclose(np.asarray(s.grad), ts.grad.numpy(), rtol=TOL, atol=TOL)


# -- 10. linspace / logspace with 0-d tensor ends, traced under jit ----------------------------------------------------
_ENDS = [(-2.0, 4), (0, -3), (4.3, 50), (50, 1)]
_STEPS = (0, 1, 2, 50)
_DTYPES = ("float32", "float64", "int64")


def _spaces(m, start, end):
    out = []
    for dtype in _DTYPES:
        dt = getattr(m, dtype)
        out += [m.linspace(start, end, steps, dtype=dt) for steps in _STEPS]
        out += [m.logspace(start * 0.5, end * 0.5, steps, base=2.0, dtype=dt) for steps in (0, 1, 4)]
    return out + [m.linspace(start, 3.5, 7), m.linspace(-1, end, 7), m.logspace(start * 0.5, 1.2, 4)]


@pytest.mark.filterwarnings("ignore::aotjax.core.errors.DTypeTruncationWarning")
def test_linspace_logspace_traced_ends_match_torch():
    """OpInfo's tensor overloads: 0-d float or int tensor ends, traced under one `jit` per dtype pair, values and
    dtypes as torch's (the shape depends on `steps` only)."""
    spaces = aotjax.jit(lambda s, e: _spaces(aotjax, s, e))
    for start, end in _ENDS:
        ref = _spaces(torch, torch.tensor(start), torch.tensor(end))
        assert_matches_torch(spaces(aotjax.tensor(start), aotjax.tensor(end)), ref, f"linspace ends {start}, {end}")
        assert_matches_torch(_spaces(aotjax, aotjax.tensor(start), aotjax.tensor(end)), ref, f"eager {start}, {end}")


@pytest.mark.filterwarnings("ignore::aotjax.core.errors.DTypeTruncationWarning")
def test_linspace_logspace_integer_dtype_truncate_the_ends():
    """An integer dtype truncates the ends first, as torch (logspace: but with one step)."""
    for dtype in ("int64", "int8"):
        ref = [torch.linspace(4.3, 50, 50, dtype=getattr(torch, dtype)), torch.linspace(-2.7, 4, 5, dtype=getattr(
            torch, dtype)), torch.logspace(0, 1.2, 4, dtype=getattr(torch, dtype)), torch.logspace(
            1.5, 1.2, 1, base=2.0, dtype=getattr(torch, dtype))]
        out = [aotjax.linspace(4.3, 50, 50, dtype=getattr(aotjax, dtype)), aotjax.linspace(-2.7, 4, 5, dtype=getattr(
            aotjax, dtype)), aotjax.logspace(0, 1.2, 4, dtype=getattr(aotjax, dtype)), aotjax.logspace(
            1.5, 1.2, 1, base=2.0, dtype=getattr(aotjax, dtype))]
        assert_matches_torch(out, ref, dtype)


def test_linspace_traced_end_under_grad_and_vmap():
    """Under `grad` the ends are read as numbers (torch's `.item()`): no derivative through linspace, but the rest
    of the function differentiates; under `vmap` each row gets its own ends."""
    s, ts = aotjax.tensor(1.5), torch.tensor(1.5, requires_grad=True)
    g = aotjax.grad(lambda s: (aotjax.linspace(s, 4.0, 5) * s).sum() + aotjax.logspace(0.0, s, 3).sum())(s)
    tg, = torch.autograd.grad((torch.linspace(ts, 4.0, 5) * ts).sum() + torch.logspace(0.0, ts, 3).sum(), ts)
    np.testing.assert_allclose(np.asarray(g), tg.numpy(), rtol=1e-6)
    rows = aotjax.vmap(lambda e: aotjax.linspace(0.0, e, 3))(aotjax.tensor([1.0, 2.0]))
    np.testing.assert_allclose(np.asarray(rows), [[0.0, 0.5, 1.0], [0.0, 1.0, 2.0]])


def test_linspace_refuses_ends_of_more_dims():
    with pytest.raises(ValueError, match="linspace: expected start and end to be numbers or 0-d tensors"):
        aotjax.linspace(aotjax.tensor([1.0]), 2.0, 3)
    with pytest.raises(ValueError, match="logspace: expected start and end to be numbers or 0-d tensors"):
        aotjax.jit(lambda e: aotjax.logspace(0.0, e, 3))(aotjax.tensor([2.0]))


def test_gradient_refuses_coordinates_of_another_length():
    """torch computes garbage for 3 coordinates along 4 points (its broadcasting happens to fit); aotjax says so."""
    with pytest.raises(ValueError, match="gradient: expected the coordinates along dim 0 to be a 1-D tensor of 4"):
        aotjax.gradient(aotjax.tensor(_f(4, 3)), spacing=[aotjax.arange(3.0)], dim=0)
