"""Sorting, scans, order statistics, searching, reductions and scatter-reduce against PyTorch: each op on a few
samples (0-d and empty where PyTorch allows them, a float and an int dtype, keyword arguments), eagerly (values,
indices, dtypes), under `aotjax.jit` (one compile per op, on its first sample) and, for the differentiable ones,
the gradient of a weighted sum of the float results against torch's autograd.

Each case is `(name, fn, samples, grad)`: `fn(m, *xs)` is written once for both libraries (`m` is `aotjax` or
`torch`, `xs` tensors of either), since the ops share PyTorch's names and signatures.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import aotjax
from aotjax.core.errors import UnsupportedError
from tests.helpers import FLOAT, INT

RNG = np.random.default_rng(0)
NAN = np.nan


def f(*shape):
    return RNG.standard_normal(shape).astype(FLOAT)


def ints(*shape, high=5):
    return RNG.integers(0, high, shape).astype(INT)


WITH_NAN = np.array([[3.0, 1.0, NAN, 2.0, 1.0], [0.0, 5.0, 5.0, -1.0, 2.0]], FLOAT)
TIES = np.array([[1.0, 2.0, 1.0, 3.0, 2.0, 2.0], [0.0, 0.0, 4.0, 4.0, -1.0, 4.0]], FLOAT)
IDX = np.array([[0, 1, 0, 2], [1, 1, 0, 0], [2, 2, 2, 0]])


def _idx(m, a):
    return m.tensor(a.astype(INT)) if m is aotjax else torch.tensor(a.astype(np.int64))


CASES = [
    # -- sort and order statistics
    ("sort", lambda m, x: m.sort(x), [f(3, 5), TIES, WITH_NAN, np.float32(2.0).astype(FLOAT), ints(4, 6),
                                       np.zeros((2, 0), FLOAT)], True),
    ("sort_desc_dim0", lambda m, x: m.sort(x, dim=0, descending=True, stable=True), [f(4, 3), TIES.T, WITH_NAN.T,
                                                                                     ints(5, 2)], True),
    ("argsort", lambda m, x: m.argsort(x, dim=-1, descending=True, stable=True), [TIES, ints(3, 7)], False),
    ("msort", lambda m, x: m.msort(x), [f(4, 3), ints(4, 2)], True),
    ("topk", lambda m, x: m.topk(x, 3), [f(3, 6), WITH_NAN, ints(2, 5, high=100)], True),
    ("topk_smallest", lambda m, x: m.topk(x, 2, dim=0, largest=False), [f(5, 3)], True),
    ("kthvalue", lambda m, x: m.kthvalue(x, 2, 1, keepdim=True),
     [f(3, 5), RNG.permutation(14).reshape(2, 7).astype(INT)], True),
    ("median_dim", lambda m, x: m.median(x, dim=1), [f(3, 5), WITH_NAN, ints(3, 7, high=100)], True),
    ("median_all", lambda m, x: m.median(x), [f(3, 4), WITH_NAN, np.float32(1.5).astype(FLOAT)], True),
    ("nanmedian", lambda m, x: m.nanmedian(x, 1, keepdim=True), [WITH_NAN, f(2, 4)], True),
    ("mode", lambda m, x: m.mode(x, 1), [ints(3, 8, high=3), TIES], False),
    ("quantile", lambda m, x: m.quantile(x, 0.3, dim=1, keepdim=True), [f(3, 6), WITH_NAN], True),
    ("quantile_vec", lambda m, x: m.quantile(x, m.tensor(np.array([0.0, 0.25, 0.9], FLOAT)), interpolation="midpoint"),
     [f(3, 4)], True),
    ("quantile_modes", lambda m, x: tuple(m.quantile(x, 0.4, 0, interpolation=i) for i in
                                          ("linear", "lower", "higher", "nearest")), [f(7, 2)], True),
    ("nanquantile", lambda m, x: m.nanquantile(x, 0.5, dim=1), [WITH_NAN], True),
    # -- scans
    ("cumsum_int", lambda m, x: m.cumsum(x, 0), [ints(5), ints(2, 3)], False),
    ("cumprod", lambda m, x: m.cumprod(x, 1), [f(3, 6), np.array([[2.0, 0.0, 3.0, 0.0, 4.0]], FLOAT), ints(2, 4)],
     True),
    ("cumprod_0d", lambda m, x: m.cumprod(x, 0), [np.float32(3.0).astype(FLOAT)], True),
    ("cummax", lambda m, x: m.cummax(x, 1), [f(3, 6), TIES, WITH_NAN, ints(2, 6)], True),
    ("cummin", lambda m, x: m.cummin(x, 0), [f(6, 3), TIES.T, ints(6, 2)], True),
    ("logcumsumexp", lambda m, x: m.logcumsumexp(x, -1), [f(3, 7)], True),
    ("logcumsumexp_inf", lambda m, x: m.logcumsumexp(x, 0), [np.array([-np.inf, 0.0, -np.inf, np.inf], FLOAT)], False),
    ("cumsum_", lambda m, x: x.clone().cumsum_(1), [f(2, 3)], True),
    ("cumprod_", lambda m, x: x.clone().cumprod_(0), [f(3, 2)], True),
    # -- searching
    ("searchsorted", lambda m, s, v: (m.searchsorted(s, v), m.searchsorted(s, v, right=True),
                                      m.searchsorted(s, v, side="right", out_int32=True)),
     [(np.array([1.0, 2.0, 2.0, 5.0], FLOAT), np.array([[2.0, 0.0, 9.0], [NAN, 5.0, 1.5]], FLOAT)),
      (np.sort(f(2, 5), 1), f(2, 3))], False),
    ("searchsorted_sorter", lambda m, s, v: m.searchsorted(s, v, sorter=m.argsort(s)),
     [(np.array([5.0, 1.0, 3.0], FLOAT), np.array([0.0, 2.0, 4.0, 6.0], FLOAT))], False),
    ("bucketize", lambda m, x, b: (m.bucketize(x, b), m.bucketize(x, b, right=True)),
     [(np.array([[0.5, 2.0], [9.0, 1.0]], FLOAT), np.array([1.0, 2.0, 3.0], FLOAT))], False),
    ("isin", lambda m, x, t: (m.isin(x, t), m.isin(x, t, invert=True)), [(ints(3, 4), ints(5))], False),
    # -- scatter-reduce and the gather/scatter extras
    *[(f"scatter_reduce_{r}", lambda m, x, src, r=r: tuple(m.scatter_reduce(x, 1, _idx(m, IDX), src, r, include_self=s)
                                                            for s in (True, False)),
       [(f(3, 4), f(3, 4)), (ints(3, 4), ints(3, 4))], True)
      for r in ("sum", "prod", "mean", "amax", "amin")],
    ("scatter_reduce_ties", lambda m, x, src: m.scatter_reduce(x, 0, _idx(m, np.array([0, 0, 1])), src, "amax"),
     [(np.array([1.0, 2.0], FLOAT), np.array([1.0, 1.0, 3.0], FLOAT))], True),
    ("scatter_multiply", lambda m, x, src: x.scatter(1, _idx(m, IDX), src, reduce="multiply"), [(f(3, 4), f(3, 4))],
     False),
]
# NOTE: the extras (compositions of primitives CASES already covers) run in the slow pass, to keep CI's budget.
SLOW_CASES = [
    ("index_reduce", lambda m, x, s: m.index_reduce(x, 0, _idx(m, np.array([0, 2, 0])), s, "amin",
                                                    include_self=False), [(f(3, 2), f(3, 2))], True),
    ("index_copy", lambda m, x, s: x.index_copy(1, _idx(m, np.array([2, 0])), s), [(f(2, 3), f(2, 2))], True),
    ("index_fill", lambda m, x: x.index_fill(0, _idx(m, np.array([1])), -2.0), [f(3, 2)], True),
    ("take", lambda m, x: m.take(x, _idx(m, np.array([[0, -1], [5, 2]]))), [f(2, 3)], True),
    ("take_along_dim", lambda m, x: (m.take_along_dim(x, _idx(m, np.array([[1], [0]])), dim=1),
                                     m.take_along_dim(x, _idx(m, np.array([4, 0])))), [f(2, 3)], True),
    ("put", lambda m, x, s: (x.put(_idx(m, np.array([5, 0, 5])), s, accumulate=True),
                             x.put(_idx(m, np.array([1, 4, 3])), s)), [(f(2, 3), f(3))], True),
    ("select_scatter", lambda m, x, s: m.select_scatter(x, s, 1, -1), [(f(2, 3), f(2))], True),
    ("slice_scatter", lambda m, x, s: m.slice_scatter(x, s, 0, 1, None, 2), [(f(5, 2), f(2, 2))], True),
    ("diagonal_scatter", lambda m, x, s: m.diagonal_scatter(x, s, 1), [(f(3, 3), f(2))], True),
    ("masked_scatter", lambda m, x, s: x.masked_scatter(x > 0, s), [(f(3, 4), f(12))], True),
    # -- reductions and statistics (compositions)
    ("nan_reductions", lambda m, x: (m.nansum(x, 1), m.nanmean(x, 1, keepdim=True)), [WITH_NAN], True),
    ("var_std_mean", lambda m, x: (*m.var_mean(x, 1, correction=0), *m.std_mean(x, dim=0)), [f(3, 4)], True),
    ("aminmax_count", lambda m, x: (*m.aminmax(x, dim=0), m.count_nonzero(x, 1)), [f(3, 4), ints(3, 4)], False),
    ("norm", lambda m, x: (m.norm(x), m.norm(x, 1, 1), m.norm(x, float("inf"), 0, keepdim=True), m.norm(x, 3, 1),
                           m.dist(x, x[:1], 0.5)), [f(3, 4)], True),
    ("diff", lambda m, x: (m.diff(x, 2, 1), m.diff(x, dim=0, prepend=x[:1], append=x)), [f(3, 4), ints(3, 4)], True),
    ("trace", lambda m, x: m.trace(x), [f(3, 4), ints(3, 3)], True),
    ("cov_corrcoef", lambda m, x: (m.cov(x), m.cov(x, correction=0, aweights=x[0].abs()), m.corrcoef(x)), [f(3, 5)],
     True),
    ("isclose", lambda m, x, y: (m.isclose(x, y, rtol=0.5), m.isclose(x, x, equal_nan=True)),
     [(WITH_NAN, WITH_NAN[::-1].copy())], False),
    ("bincount_histc", lambda m, x: (m.bincount(x.flatten().abs().long(), minlength=7),
                                     m.histc(x.float(), bins=4, min=-1, max=2)), [f(3, 4)], False),
]

EAGER_ONLY = [
    ("unique", lambda m, x: m.unique(x, return_inverse=True, return_counts=True), [ints(3, 4), TIES]),
    ("unique_dim", lambda m, x: m.unique(x, dim=0), [np.array([[1, 2], [0, 1], [1, 2]], INT)]),
    ("unique_consecutive", lambda m, x: m.unique_consecutive(x, return_inverse=True, return_counts=True),
     [np.array([1, 1, 2, 2, 3, 1, 1], INT), np.zeros(0, INT)]),
    ("masked_select", lambda m, x: m.masked_select(x, x > 0), [f(3, 4)]),
    ("argwhere", lambda m, x: (m.argwhere(x), x.nonzero()), [ints(3, 4, high=2)]),
]


def _torch(a):
    return torch.tensor(a) if isinstance(a, np.ndarray) else torch.tensor(np.asarray(a))


def _args(sample):
    return sample if isinstance(sample, tuple) else (sample,)


def _flat(out) -> list:
    if isinstance(out, (tuple, list)):
        return [o for item in out for o in _flat(item)]
    return [out]


def _np(t):
    return t.detach().numpy() if isinstance(t, torch.Tensor) else np.asarray(t.numpy())


def _assert_same(got, want, name):
    got, want = _flat(got), _flat(want)
    assert len(got) == len(want), name
    for g, w in zip(got, want):
        g, w = _np(g), _np(w)
        assert g.shape == w.shape, f"{name}: shape {g.shape} != torch's {w.shape}"
        assert g.dtype == w.dtype or (g.dtype.kind == w.dtype.kind and not np.issubdtype(FLOAT, np.float64)), \
            f"{name}: dtype {g.dtype} != torch's {w.dtype}"
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=name)


def _is_float(a) -> bool:
    return np.issubdtype(np.asarray(a).dtype, np.floating)


@pytest.mark.parametrize("name, fn, samples, grad", CASES, ids=[c[0] for c in CASES])
def test_matches_torch(name, fn, samples, grad):
    _check(name, fn, samples, grad)


@pytest.mark.slow
@pytest.mark.parametrize("name, fn, samples, grad", SLOW_CASES, ids=[c[0] for c in SLOW_CASES])
def test_extras_match_torch(name, fn, samples, grad):
    _check(name, fn, samples, grad)


def _check(name, fn, samples, grad):
    for sample in samples:
        args = _args(sample)
        _assert_same(fn(aotjax, *map(aotjax.tensor, args)), fn(torch, *map(_torch, args)), f"{name} eager")
    args = _args(samples[0])
    jitted = aotjax.jit(lambda *xs: fn(aotjax, *xs))
    _assert_same(jitted(*map(aotjax.tensor, args)), fn(torch, *map(_torch, args)), f"{name} jit")
    if not grad:
        return
    for sample in samples:
        args = _args(sample)
        if not all(_is_float(a) for a in args) or np.size(args[0]) == 0:
            continue
        weights = [RNG.standard_normal(np.shape(o)).astype(FLOAT)
                   for o in _flat(fn(torch, *map(_torch, args))) if o.dtype.is_floating_point]

        def loss(m, *xs, weights=weights):
            outs = [o for o in _flat(fn(m, *xs)) if o.dtype in (torch.float32, torch.float64) or
                    (m is aotjax and np.issubdtype(o.dtype, np.floating))]
            return sum(((o * m.tensor(w)).nansum() if o.ndim else o * m.tensor(w)) for o, w in zip(outs, weights))

        got = aotjax.grad(lambda *xs: loss(aotjax, *xs), argnums=tuple(range(len(args))))(*map(aotjax.tensor, args))
        ts = [_torch(a).requires_grad_() for a in args]
        loss(torch, *ts).backward()
        for g, t in zip(got, ts):
            want = np.zeros(t.shape, FLOAT) if t.grad is None else t.grad.numpy()
            np.testing.assert_allclose(_np(g), want, rtol=1e-5, atol=1e-5, err_msg=f"{name} grad")


@pytest.mark.parametrize("name, fn, samples", EAGER_ONLY, ids=[c[0] for c in EAGER_ONLY])
def test_data_dependent_shapes_match_torch_eagerly_and_refuse_tracing(name, fn, samples):
    for sample in samples:
        _assert_same(fn(aotjax, aotjax.tensor(sample)), fn(torch, _torch(sample)), name)
    with pytest.raises(UnsupportedError, match="cannot be traced"):
        aotjax.jit(lambda x: fn(aotjax, x))(aotjax.tensor(samples[0]))


def test_nonzero_with_a_size_traces_and_pads_with_the_fill_value():
    x = np.array([[0, 1, 3], [2, 0, 0]], INT)
    want = np.argwhere(x)
    got = aotjax.jit(lambda v: aotjax.nonzero(v, size=5, fill_value=-1))(aotjax.tensor(x))
    np.testing.assert_array_equal(got.numpy(), np.concatenate([want, np.full((2, 2), -1)]))
    rows, cols = aotjax.nonzero(aotjax.tensor(x), size=2, as_tuple=True)
    np.testing.assert_array_equal(rows.numpy(), want[:2, 0])
    np.testing.assert_array_equal(cols.numpy(), want[:2, 1])


def test_sort_and_scans_batch_under_vmap():
    x = f(3, 5)
    got = aotjax.vmap(lambda v: (aotjax.sort(v, descending=True).values, aotjax.cummax(v, 0).indices,
                                 aotjax.cumprod(v, 0), aotjax.logcumsumexp(v, 0)), in_axes=1)(aotjax.tensor(x))
    t = torch.tensor(x).T
    want = (torch.sort(t, 1, descending=True).values, torch.cummax(t, 1).indices, torch.cumprod(t, 1),
            torch.logcumsumexp(t, 1))
    _assert_same(got, want, "vmap")


def test_cumprod_gradient_is_exact_at_zeros_to_second_order():
    x = np.array([2.0, 0.0, 3.0, 0.0, 4.0], FLOAT)
    t = torch.tensor(x, requires_grad=True)
    (g,) = torch.autograd.grad(torch.cumprod(t, 0).sum(), t, create_graph=True)
    (h,) = torch.autograd.grad((g * torch.arange(5.0, dtype=t.dtype)).sum(), t)
    got = aotjax.grad(lambda v: (aotjax.grad(lambda u: aotjax.cumprod(u, 0).sum())(v) *
                                 aotjax.arange(5.0, dtype=FLOAT)).sum())(aotjax.tensor(x))
    np.testing.assert_allclose(got.numpy(), h.numpy(), rtol=1e-5)
