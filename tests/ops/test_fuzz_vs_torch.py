"""Hypothesis fuzz of the op families with many arguments (issue 12): conv (stride, padding, dilation, groups,
transposed), max/avg pooling, interpolate (modes, align_corners, size or scale), pad (every mode) and
scatter/scatter_reduce, aotjax against PyTorch: the eager values, and the vjp (a random cotangent) against torch's
autograd for each drawn example. Bounded examples, derandomized: the whole file runs in well under 40 s."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import aotjax
import aotjax.nn.functional as F
from tests.helpers import FLOAT, INT, X64

pytestmark = pytest.mark.slow
TOL = 1e-8 if X64 else 1e-4
FUZZ = settings(max_examples=6, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))


def _arrays(data, *shapes):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    return [rng.standard_normal(s).astype(FLOAT) for s in shapes]


def _close(a, t, how):
    np.testing.assert_allclose(np.asarray(a, np.float64), t.detach().double().numpy(), rtol=TOL, atol=TOL, err_msg=how)


def check(fn, arrays, how, diff=None):
    """`fn(m, *tensors)` (m: aotjax.nn.functional or torch's) eagerly in both libraries, then its vjp in the arrays
    whose positions `diff` lists (default: all) with one random cotangent against torch's autograd. Arguments torch
    refuses, aotjax must refuse too."""
    diff = range(len(arrays)) if diff is None else diff
    t_args = [torch.tensor(a, requires_grad=i in diff and a.dtype == FLOAT) for i, a in enumerate(arrays)]
    a_args = [aotjax.tensor(a) for a in arrays]
    try:
        ref = fn(TF, *t_args)
    except RuntimeError:  # torch refuses the arguments (an empty output, a pad larger than the input): so must aotjax
        with pytest.raises((ValueError, RuntimeError, NotImplementedError, IndexError)):
            fn(F, *a_args)
        return
    out = fn(F, *a_args)
    assert tuple(out.shape) == tuple(ref.shape), f"{how}: shape {out.shape} vs torch's {tuple(ref.shape)}"
    _close(out, ref, how)
    ct = np.random.default_rng(1).standard_normal(tuple(ref.shape)).astype(FLOAT)
    wrt = [i for i in diff if arrays[i].dtype == FLOAT]
    t_grads = torch.autograd.grad(ref, [t_args[i] for i in wrt], torch.tensor(ct), allow_unused=True)

    def f(*xs):
        args = list(a_args)
        for i, x in zip(wrt, xs):
            args[i] = x
        return fn(F, *args)

    _, pullback = aotjax.vjp(f, *[a_args[i] for i in wrt])
    for i, g, tg in zip(wrt, pullback(aotjax.tensor(ct)), t_grads):
        if tg is None:
            tg = torch.zeros(arrays[i].shape, dtype=torch.float64)
        _close(g, tg, f"{how}: vjp of input {i}")


@FUZZ
@given(st.data())
def test_fuzz_conv(data):
    n = data.draw(st.integers(1, 2), "spatial dims")
    transposed = data.draw(st.booleans(), "transposed")
    k, s, d = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 2)), data.draw(st.integers(1, 2))
    g = data.draw(st.sampled_from([1, 2]), "groups")
    size = data.draw(st.integers(d * (k - 1) + 1, 6))
    p = data.draw(st.integers(0, (d * (k - 1)) // 2))
    bias = data.draw(st.booleans(), "bias")
    if transposed:
        op = f"conv_transpose{n}d"
        out_pad = data.draw(st.integers(0, max(s, d) - 1))
        kw = dict(stride=s, padding=p, output_padding=out_pad, groups=g, dilation=d)
        shapes = [(2, 2 * g, *(size,) * n), (2 * g, 2, *(k,) * n)] + ([(2 * g,)] if bias else [])
    else:
        op = f"conv{n}d"
        kw = dict(stride=s, padding=data.draw(st.sampled_from([p, "same"])) if s == 1 else p, dilation=d, groups=g)
        shapes = [(2, 2 * g, *(size,) * n), (3 * g, 2, *(k,) * n)] + ([(3 * g,)] if bias else [])
    check(lambda m, x, w, *b: getattr(m, op)(x, w, *b, **kw), _arrays(data, *shapes), f"{op} {kw}")


@FUZZ
@given(st.data())
def test_fuzz_pooling(data):
    n = data.draw(st.integers(1, 2), "spatial dims")
    k, s = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))
    p = data.draw(st.integers(0, k // 2))
    size = data.draw(st.integers(k, 6))
    ceil = data.draw(st.booleans(), "ceil_mode")
    (x,) = _arrays(data, (2, 2, *(size,) * n))
    if data.draw(st.booleans(), "max"):
        dil = data.draw(st.integers(1, 2))
        if dil * (k - 1) + 1 > size + 2 * p:
            dil = 1
        kw = dict(kernel_size=k, stride=s, padding=p, dilation=dil, ceil_mode=ceil)
        check(lambda m, x: getattr(m, f"max_pool{n}d")(x, **kw), [x], f"max_pool{n}d {kw}")
        idx = F.max_pool2d if n == 2 else F.max_pool1d
        t_idx = TF.max_pool2d if n == 2 else TF.max_pool1d
        got = idx(aotjax.tensor(x), return_indices=True, **kw)[1]
        np.testing.assert_array_equal(got.numpy(), t_idx(torch.tensor(x), return_indices=True, **kw)[1].numpy())
    else:
        kw = dict(kernel_size=k, stride=s, padding=p, ceil_mode=ceil, count_include_pad=data.draw(st.booleans()))
        check(lambda m, x: getattr(m, f"avg_pool{n}d")(x, **kw), [x], f"avg_pool{n}d {kw}")


@FUZZ
@given(st.data())
def test_fuzz_interpolate(data):
    mode = data.draw(st.sampled_from(["nearest", "nearest-exact", "linear", "bilinear", "bicubic", "area"]))
    n = 1 if mode == "linear" else 2 if mode in ("bilinear", "bicubic") else data.draw(st.integers(1, 2))
    (x,) = _arrays(data, (1, 2, *[data.draw(st.integers(1, 5)) for _ in range(n)]))
    kw = {"mode": mode}
    if data.draw(st.booleans(), "by size"):
        kw["size"] = tuple(data.draw(st.integers(1, 7)) for _ in range(n))
    else:
        kw["scale_factor"] = data.draw(st.sampled_from([0.5, 1.5, 2.0, 3.0]))
        kw["recompute_scale_factor"] = data.draw(st.sampled_from([None, True]))
    if mode in ("linear", "bilinear", "bicubic"):
        kw["align_corners"] = data.draw(st.booleans(), "align_corners")
    check(lambda m, x: m.interpolate(x, **kw), [x], f"interpolate {kw}")


@FUZZ
@given(st.data())
def test_fuzz_pad(data):
    mode = data.draw(st.sampled_from(["constant", "reflect", "replicate", "circular"]))
    n = data.draw(st.integers(1, 2), "padded dims")
    shape = [2, 2] + [data.draw(st.integers(2, 5)) for _ in range(n)]
    (x,) = _arrays(data, tuple(shape))
    lo = 0 if mode == "reflect" else -1
    pads = []
    for size in reversed(shape[2:]):
        hi = {"reflect": size - 1, "circular": size}.get(mode, 3)
        pads += [data.draw(st.integers(lo, hi)), data.draw(st.integers(lo, hi))]
    kw = {"mode": mode} | ({"value": data.draw(st.sampled_from([0.0, -1.5]))} if mode == "constant" else {})
    check(lambda m, x: m.pad(x, tuple(pads), **kw), [x], f"pad {pads} {kw}")


@FUZZ
@given(st.data())
def test_fuzz_scatter(data):
    rows, cols = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4))
    dim = data.draw(st.sampled_from([0, 1, -1, -2]))
    reduce = data.draw(st.sampled_from([None, "sum", "prod", "mean", "amax", "amin"]))
    include_self = data.draw(st.booleans(), "include_self")
    d = dim % 2
    size, other = (rows, cols)[d], (rows, cols)[1 - d]
    # a plain scatter with two writes into one slot keeps either (torch leaves it undefined): indices distinct there
    m = data.draw(st.integers(1, size if reduce is None else 5), "index length along dim")
    k = data.draw(st.integers(1, other), "index length across")
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    index = np.stack([rng.permutation(size)[:m] if reduce is None else rng.integers(0, size, m) for _ in range(k)],
                     axis=1 - d)
    x, src = _arrays(data, (rows, cols), index.shape)

    def fn(m, x, i, s):
        i = i.long() if m is TF else i
        if reduce is None:
            return x.scatter(dim, i, s)
        return x.scatter_reduce(dim, i, s, reduce, include_self=include_self)

    check(fn, [x, index.astype(INT), src], f"scatter dim={dim} reduce={reduce} include_self={include_self}")
