"""Edge cases against PyTorch (issue 12, item 3): 0-d tensors with dim 0/-1, empty tensors and empty reduction
dims, negative dims, integer and bool inputs with torch's type promotion, NaN propagation in the extrema and sorts.
Each case runs eagerly in both libraries (values, dtypes, shapes); the cases marked `jit` also run under one
`aotjax.jit` each, and those marked `vjp` under `aotjax.vjp` against torch's autograd. Where torch raises, aotjax
must raise too."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import aotjax
from tests.helpers import FLOAT, INT, X64, assert_matches_torch, run_on

TOL = 1e-9 if X64 else 1e-5
NAN = float("nan")


def _f(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(FLOAT)


S = np.array(2.5, FLOAT)  # a 0-d float
E = np.zeros((0,), FLOAT)
E2 = np.zeros((2, 0), FLOAT)
I2 = np.array([[1, -2], [3, 4]], INT)
B = np.array([[True, False], [True, True]])
N = np.array([1.0, NAN, 3.0, -1.0], FLOAT)
N2 = np.array([[1.0, NAN], [3.0, 0.0]], FLOAT)
IX0 = np.array(0, INT)  # a 0-d index


def _ix(m, t):
    """An index tensor as each library wants it: torch's int64, aotjax's default int."""
    return t.long() if m is torch else t


# name: (fn(m, *tensors), [samples], flags); flags: "jit" (the first sample under aotjax.jit), "vjp" (its vjp)
CASES = {
    # 0-d tensors take dim 0 and -1
    "gather_0d": (lambda m, x, i: m.gather(x, -1, _ix(m, i)), [[S, IX0]], "vjp"),
    "scatter_0d": (lambda m, x, i, s: m.scatter(x, 0, _ix(m, i), s), [[S, IX0, np.array(7.0, FLOAT)]], "jit"),
    "scatter_0d_inplace": (lambda m, x, i: x.clone().scatter_(-1, _ix(m, i), 4.0), [[S, IX0]], ""),
    "scatter_add_0d": (lambda m, x, i, s: x.scatter_add(0, _ix(m, i), s), [[S, IX0, np.array(1.5, FLOAT)]], ""),
    "scatter_reduce_0d": (lambda m, x, i, s: x.scatter_reduce(-1, _ix(m, i), s, "amax"),
                          [[S, IX0, np.array(3.0, FLOAT)]], ""),
    "squeeze_0d": (lambda m, x: (x.squeeze(0), x.squeeze(-1), m.squeeze(x, (0,))), [[S]], "jit"),
    "transpose_0d": (lambda m, x: (x.transpose(0, -1), m.swapaxes(x, -1, -1)), [[S]], "vjp"),
    "flip_0d": (lambda m, x: m.flip(x, (-1,)), [[S]], ""),
    "index_select_0d": (lambda m, x, i: x.index_select(-1, _ix(m, i)), [[S, np.array([0], INT)]], "vjp"),
    "index_add_0d": (lambda m, x, i, s: x.index_add(0, _ix(m, i), s), [[S, np.array([0], INT), np.array([2.0], FLOAT)]],
                     ""),
    "reductions_0d": (lambda m, x: (x.sum(0), x.mean(-1), x.prod(0), x.amax(-1), x.argmax(0), x.cumsum(-1),
                                    m.logsumexp(x, 0), x.max(-1).values), [[S]], "jit"),
    "softmax_0d": (lambda m, x: (m.softmax(x, 0), m.log_softmax(x, -1)), [[S]], "vjp"),
    "sort_topk_0d": (lambda m, x: (m.sort(x, -1).values, m.topk(x, 1, 0).values, m.argsort(x, 0)), [[S]], ""),
    "unsqueeze_select_0d": (lambda m, x: (x.unsqueeze(-1), x.unsqueeze(0).select(-1, 0)), [[S]], ""),
    # empty tensors and empty reduction dims
    "softmax_empty_dim": (lambda m, x: (m.softmax(x, 1), m.log_softmax(x, -1), m.softmax(x, 0)), [[E2]], "jit vjp"),
    "median_empty": (lambda m, x: (m.median(x), m.nanmedian(x)), [[E]], "jit"),
    "median_empty_dim": (lambda m, x: m.median(x, 1).values, [[E2]], ""),
    "nan_to_num_keeps_int_and_bool": (lambda m, x, b: (m.nan_to_num(x), m.nan_to_num(b)), [[I2, B]], ""),
    "logsumexp_empty_dim": (lambda m, x: (m.logsumexp(x, 1), m.logsumexp(x, -1, keepdim=True)), [[E2]], "jit"),
    "reductions_empty": (lambda m, x: (x.sum(), x.prod(), x.mean(), x.nansum(), x.all(), x.any(),
                                       m.count_nonzero(x)), [[E], [E2]], "jit"),
    "reductions_empty_dim": (lambda m, x: (x.sum(1), x.prod(-1), x.mean(1), x.amax(0), x.std(1), x.var(-1),
                                           x.cumsum(1), x.cumprod(-1), x.norm(dim=1)), [[E2]], ""),
    "std_var_empty": (lambda m, x: (x.std(), x.var(unbiased=False)), [[E]], ""),
    "amax_empty": (lambda m, x: x.amax(), [[E]], ""),  # torch raises
    "argmax_empty": (lambda m, x: x.argmax(), [[E]], ""),  # torch raises
    "max_empty_dim": (lambda m, x: x.max(1), [[E2]], ""),  # torch raises
    # negative dims
    "negative_dims": (lambda m, x: (x.sum((-1, -3)), x.transpose(-1, -2), x.movedim(-1, 0), x.flatten(-2),
                                    m.cat([x, x], -2), x.softmax(-2), x.cumsum(-3), x.select(-2, 1), x.argmax(-1)),
                      [[_f(2, 3, 4)]], "vjp"),
    # integer and bool inputs: torch's dtypes
    "bool_reductions": (lambda m, x: (x.sum(), x.sum(-1), x.prod(0), x.cumsum(1), x.cumprod(0), x.amax(),
                                      x.all(-1), m.count_nonzero(x)), [[B]], "jit"),
    "int_reductions": (lambda m, x: (x.sum(0), x.prod(), x.cumsum(-1), x.amax(1), x.argmin(), x.max(0).values,
                                     x.float().mean(), x.sum(dtype=m.float32)), [[I2]], ""),
    "int_mean_raises": (lambda m, x: x.mean(), [[I2]], ""),
    "promotion": (lambda m, b, i, f: (b + b, b + i, i * 2.5, i + f, b * True, i / 2, i // 2, b & b, f > i,
                                      m.where(b, i, 0.5), m.maximum(i, f), i.sum() + f),
                  [[B, I2, _f(2, 2)]], ""),
    "int_float_0d_promotion": (lambda m, i, s: (i + s, i * s.double(), s + 1), [[I2, S]], ""),
    # NaN propagation
    "nan_extrema": (lambda m, x: (x.max(), x.min(), x.amax(), x.amin(), x.argmax(), x.argmin(),
                                  m.max(x, 0).values, m.max(x, 0).indices, m.maximum(x, x.flip(0)),
                                  m.minimum(x, x.flip(0)), x.clamp(0, 2)), [[N]], "jit"),
    "nan_dim_extrema": (lambda m, x: (x.amax(1), x.amin(0), x.argmax(1), x.max(1).values, x.min(-1).indices,
                                      x.cummax(1).values, x.cummin(0).values), [[N2]], ""),
    "nan_sort": (lambda m, x: (m.sort(x).values, m.sort(x).indices, m.sort(x, descending=True).values,
                               m.argsort(x), m.topk(x, 2).values, m.topk(x, 2).indices,
                               m.topk(x, 2, largest=False).values, m.msort(x)), [[N]], "jit"),
    "nan_reductions": (lambda m, x: (x.sum(), x.mean(), x.nansum(), m.nanmean(x), x.prod(), x.logsumexp(0),
                                     x.sign(), x.isnan()), [[N]], ""),
}


@pytest.mark.parametrize("name", list(CASES))
def test_edge_case_matches_torch(name):
    fn, samples, flags = CASES[name]
    for k, arrays in enumerate(samples):
        try:
            ref = run_on(torch, fn, arrays)
        except (RuntimeError, IndexError, TypeError, ValueError):
            with pytest.raises((RuntimeError, IndexError, TypeError, ValueError)):
                run_on(aotjax, fn, arrays)
            continue
        assert_matches_torch(run_on(aotjax, fn, arrays), ref, f"{name} sample {k}")
    if "jit" in flags:
        args = [aotjax.tensor(a) for a in samples[0]]
        jitted = aotjax.jit(lambda *xs: fn(aotjax, *xs))(*args)
        assert_matches_torch(jitted, run_on(torch, fn, samples[0]), f"{name} jit")
    if "vjp" in flags:
        _check_vjp(name, fn, samples[0])


def _flat(out):
    return [out] if isinstance(out, (torch.Tensor, aotjax.Tensor)) else [v for o in out for v in _flat(o)]


def _check_vjp(name, fn, arrays):
    """The vjp in the float inputs (the first is always float), with cotangents of ones, against torch's."""
    float_pos = [i for i, a in enumerate(arrays) if a.dtype == FLOAT]
    t_args = [torch.tensor(a, requires_grad=i in float_pos) for i, a in enumerate(arrays)]
    t_outs = [o for o in _flat(fn(torch, *t_args)) if o.dtype.is_floating_point]
    t_grads = torch.autograd.grad(t_outs, [t_args[i] for i in float_pos], [torch.ones_like(o) for o in t_outs],
                                  allow_unused=True)

    def f(*floats):
        args = [aotjax.tensor(a) for a in arrays]
        for i, v in zip(float_pos, floats):
            args[i] = v
        return [o for o in _flat(fn(aotjax, *args)) if o.is_floating_point()]

    outs, pullback = aotjax.vjp(f, *[aotjax.tensor(arrays[i]) for i in float_pos])
    grads = pullback([aotjax.ones_like(o) for o in outs])
    for i, g, tg in zip(float_pos, grads, t_grads):
        expected = np.zeros(arrays[i].shape) if tg is None else tg.double().numpy()
        np.testing.assert_allclose(np.asarray(g, np.float64), expected, rtol=TOL, atol=TOL,
                                   err_msg=f"{name}: vjp of input {i}")


def test_tensor_where_is_torch_s_method_form():
    # x.where(condition, y) is where(condition, x, y), broadcasting, y a tensor or a number
    for lib in (aotjax, torch):
        x = lib.tensor([[1.0, -2.0], [3.0, -4.0]])
        got = x.where(x > 0, lib.tensor([10.0, 20.0])), x.where(lib.tensor([True, False]), 0.5)
        if lib is aotjax:
            ours = got
    for a, b in zip(ours, got, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
