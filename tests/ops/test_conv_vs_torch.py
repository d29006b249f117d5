"""Convolution, pooling, padding and resampling against PyTorch: each op on a few sample inputs (keyword
arguments, unbatched inputs, groups, dilation, ceil_mode, every padding and interpolation mode), eagerly, under
`aotjax.jit` (one compiled function per op) and `aotjax.vjp` against torch's autograd; max pooling's indices;
convolutions' second derivatives and `vmap`; torch's errors; and (slow) a hypothesis fuzz over conv and pooling
arguments."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import aotjax
import aotjax.nn.functional as F
from aotjax.core.errors import DTypeError, ShapeError
from tests.helpers import FLOAT, INT, X64
from tests.op_records import as_np

TOL = 1e-9 if X64 else 1e-5
TORCH_FLOAT = torch.float64 if X64 else torch.float32


def _inputs(shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(FLOAT) for s in shapes]


def _first(out):
    return out[0] if isinstance(out, tuple) else out


def _close(got, want, tol=TOL):
    want = want.detach().numpy()
    got = as_np(got)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


# (name, [(input shapes, kwargs)]): one op of aotjax.nn.functional and of torch.nn.functional each
CASES = {
    "conv1d": [(((2, 4, 9), (6, 2, 3)), dict(stride=2, padding=2, dilation=2, groups=2)),
               (((3, 9), (4, 3, 4)), dict(padding="same"))],
    "conv2d": [(((2, 3, 7, 6), (4, 3, 3, 2)), dict(stride=(2, 1), padding=(1, 0))),
               (((2, 4, 6, 6), (4, 1, 3, 3)), dict(padding="valid", dilation=(2, 1), groups=4)),
               (((2, 3, 5, 5), (2, 3, 1, 1), (2,)), {})],
    "conv3d": [(((1, 2, 4, 5, 4), (3, 2, 2, 3, 2)), dict(stride=(1, 2, 1), padding=1))],
    "conv_transpose1d": [(((2, 4, 5), (4, 3, 3)), dict(stride=3, padding=2, output_padding=1, dilation=2))],
    "conv_transpose2d": [(((2, 4, 4, 3), (4, 3, 3, 2), (6,)), dict(stride=2, padding=1, output_padding=1, groups=2)),
                         (((4, 4, 3), (4, 2, 2, 2)), {})],
    "conv_transpose3d": [(((1, 2, 3, 2, 3), (2, 2, 2, 2, 2)), dict(stride=(2, 1, 2)))],
    "max_pool1d": [(((2, 3, 9),), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, return_indices=True))],
    "max_pool2d": [(((2, 3, 7, 6),), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, return_indices=True)),
                   (((3, 7, 6),), dict(kernel_size=(2, 3), stride=(1, 2), dilation=2, return_indices=True))],
    "max_pool3d": [(((1, 2, 5, 4, 5),), dict(kernel_size=2, padding=1, return_indices=True))],
    "avg_pool1d": [(((2, 3, 9),), dict(kernel_size=4, stride=3, padding=2, ceil_mode=True))],
    "avg_pool2d": [(((2, 3, 7, 6),), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)),
                   (((3, 7, 6),), dict(kernel_size=3, padding=1, divisor_override=5))],
    "avg_pool3d": [(((1, 2, 5, 4, 5),), dict(kernel_size=(2, 3, 2), stride=2, padding=1))],
    "adaptive_avg_pool1d": [(((2, 3, 7),), dict(output_size=5))],
    "adaptive_avg_pool2d": [(((2, 3, 7, 6),), dict(output_size=(3, None)))],
    "adaptive_avg_pool3d": [(((1, 2, 5, 4, 5),), dict(output_size=(2, 3, 4)))],
    "adaptive_max_pool1d": [(((2, 3, 7),), dict(output_size=3, return_indices=True))],
    "adaptive_max_pool2d": [(((2, 3, 7, 6),), dict(output_size=(3, 4), return_indices=True))],
    "adaptive_max_pool3d": [(((1, 2, 5, 4, 5),), dict(output_size=2, return_indices=True))],
    "pad": [(((2, 3, 5, 6),), dict(pad=(1, 2, -1, 3), value=1.5)),
            (((2, 3, 5, 6),), dict(pad=(1, 4, 3, 2), mode="reflect")),
            (((2, 3, 5),), dict(pad=(2, 3), mode="replicate")),
            (((1, 2, 3, 4, 5),), dict(pad=(1, 5, 3, 2, 0, 1), mode="circular"))],
    "interpolate": [(((2, 3, 5, 6),), dict(scale_factor=1.7, mode="nearest")),
                    (((2, 3, 5, 6),), dict(size=(7, 4), mode="nearest-exact")),
                    (((2, 3, 5, 6),), dict(size=(7, 4), mode="bilinear", align_corners=False)),
                    (((2, 3, 5, 6),), dict(scale_factor=1.5, mode="bilinear", align_corners=True)),
                    (((2, 3, 5, 6),), dict(size=(9, 4), mode="bicubic")),
                    (((2, 3, 5),), dict(size=8, mode="linear")),
                    (((1, 2, 3, 4, 5),), dict(scale_factor=2, mode="trilinear")),
                    (((2, 3, 5, 6),), dict(size=(3, 4), mode="area"))],
    "pixel_shuffle": [(((2, 12, 3, 4),), dict(upscale_factor=2))],
    "pixel_unshuffle": [(((3, 4, 6),), dict(downscale_factor=2))],
    "unfold": [(((2, 3, 7, 6),), dict(kernel_size=(2, 3), dilation=(1, 2), padding=1, stride=(2, 1)))],
    "fold": [(((2, 12, 9),), dict(output_size=(5, 6), kernel_size=2, dilation=(1, 2), padding=1, stride=2))],
}


@pytest.mark.parametrize("name", list(CASES))
def test_op_matches_torch_eagerly_jitted_and_its_vjp(name):
    _check_against_torch(name, CASES[name][:1])


@pytest.mark.slow
@pytest.mark.parametrize("name", [name for name, cases in CASES.items() if len(cases) > 1])
def test_op_matches_torch_on_its_other_samples(name):
    _check_against_torch(name, CASES[name][1:], first=1)


def _check_against_torch(name, cases, first=0):
    ours, theirs = getattr(F, name), getattr(TF, name)
    for i, (shapes, kw) in enumerate(cases, first):
        xs = _inputs(shapes, seed=i)
        txs = [torch.tensor(x, requires_grad=True) for x in xs]
        expected = theirs(*txs, **kw)
        got = ours(*map(aotjax.tensor, xs), **kw)
        if isinstance(expected, tuple):  # the indices of max pooling
            _close(got[1], expected[1])
            assert got[1].dtype == INT
        _close(_first(got), _first(expected))
        fn = (lambda kw: lambda *a: _first(ours(*a, **kw)))(kw)  # noqa: B023
        if i == 0:  # NOTE: one compiled function per op
            _close(aotjax.jit(fn)(*map(aotjax.tensor, xs)), _first(expected))
        ct = _inputs([_first(expected).shape], seed=10 + i)[0]
        want = torch.autograd.grad(_first(expected), txs, torch.tensor(ct))
        _, vjp = aotjax.vjp(fn, *map(aotjax.tensor, xs))
        for g, w in zip(vjp(aotjax.tensor(ct)), want):
            _close(g, w, 10 * TOL)


@pytest.mark.parametrize("name, kw", [
    ("conv2d", dict(stride=(2, 1), padding=1, dilation=(1, 2), groups=2)),
    pytest.param("conv_transpose2d", dict(stride=2, padding=1, output_padding=1, groups=2), marks=pytest.mark.slow)])
def test_conv_second_derivatives_match_torch(name, kw):
    x, w, ct = _inputs([(2, 4, 5, 5), (4, 2, 3, 3), (1,)])
    tx, tw = (torch.tensor(v, requires_grad=True) for v in (x, w))
    out = getattr(TF, name)(tx, tw, **kw)
    ct = _inputs([out.shape], seed=3)[0]
    gx, gw = torch.autograd.grad(out, (tx, tw), torch.tensor(ct), create_graph=True)
    want = torch.autograd.grad((gx ** 2).sum() + (gw ** 3).sum(), (tx, tw))

    def grads_norm(a, b):
        _, vjp = aotjax.vjp(lambda a, b: getattr(F, name)(a, b, **kw), a, b)
        u, v = vjp(aotjax.tensor(ct))
        return (u ** 2).sum() + (v ** 3).sum()

    got = aotjax.grad(grads_norm, argnums=(0, 1))(aotjax.tensor(x), aotjax.tensor(w))
    for g, e in zip(got, want):
        _close(g, e, 1e-8 if X64 else 2e-4)


@pytest.mark.parametrize("in_dims", [(0, 0), (0, None), (None, 0)])
def test_vmap_of_a_grouped_conv_and_its_gradient_is_the_loop_in_torch(in_dims):
    kw = dict(stride=(2, 1), padding=1, dilation=(1, 2), groups=2)
    x, w, xb, wb = _inputs([(2, 4, 5, 5), (4, 2, 3, 3), (3, 2, 4, 5, 5), (3, 4, 2, 3, 3)])
    xs, ws = (xb if in_dims[0] == 0 else x), (wb if in_dims[1] == 0 else w)

    def loss(a, b):
        return (F.conv2d(a, b, **kw) ** 2).sum()

    outs = aotjax.vmap(lambda a, b: (F.conv2d(a, b, **kw), *aotjax.grad(loss, argnums=(0, 1))(a, b)),
                       in_dims=in_dims)(aotjax.tensor(xs), aotjax.tensor(ws))
    for i in range(3):
        a = torch.tensor(xs[i] if in_dims[0] == 0 else xs, requires_grad=True)
        b = torch.tensor(ws[i] if in_dims[1] == 0 else ws, requires_grad=True)
        out = TF.conv2d(a, b, **kw)
        ga, gb = torch.autograd.grad((out ** 2).sum(), (a, b))
        for got, want in zip(outs, (out, ga, gb)):
            _close(as_np(got)[i], want, 1e-8 if X64 else 1e-4)


def test_max_pool_gradient_goes_to_the_first_maximum_as_torch():
    x = np.array([[[1.0, 3.0, 3.0, 2.0, 2.0, 0.0]]], dtype=FLOAT)
    tx = torch.tensor(x, requires_grad=True)
    TF.max_pool1d(tx, 3, stride=1).sum().backward()
    got = aotjax.grad(lambda a: F.max_pool1d(a, 3, stride=1).sum())(aotjax.tensor(x))
    _close(got, tx.grad)


@pytest.mark.slow
def test_layers_match_torch_with_the_same_weights():
    pairs = [(aotjax.nn.Conv2d(3, 4, 3, stride=2, padding=1, padding_mode="reflect", groups=1),
              torch.nn.Conv2d(3, 4, 3, stride=2, padding=1, padding_mode="reflect")),
             (aotjax.nn.Conv1d(2, 4, 3, padding="same", padding_mode="circular", groups=2, bias=False),
              torch.nn.Conv1d(2, 4, 3, padding="same", padding_mode="circular", groups=2, bias=False)),
             (aotjax.nn.ConvTranspose2d(3, 2, 3, stride=2, output_padding=1),
              torch.nn.ConvTranspose2d(3, 2, 3, stride=2, output_padding=1)),
             (aotjax.nn.AdaptiveAvgPool2d(2), torch.nn.AdaptiveAvgPool2d(2)),
             (aotjax.nn.Upsample(scale_factor=2, mode="bilinear"), torch.nn.Upsample(scale_factor=2, mode="bilinear")),
             (aotjax.nn.ZeroPad2d((1, 0, 2, 1)), torch.nn.ZeroPad2d((1, 0, 2, 1))),
             (aotjax.nn.Unflatten(1, (3, 1)), torch.nn.Unflatten(1, (3, 1)))]
    for ours, theirs in pairs:
        theirs.to(TORCH_FLOAT)
        ours.to(FLOAT)  # NOTE: as torch's (load_state_dict keeps a parameter's dtype: it does not set it)
        state = {k: v.detach().numpy() for k, v in theirs.state_dict().items()}
        ours.load_state_dict(state)
        assert [(k, tuple(v.shape)) for k, v in ours.state_dict().items()] == [(k, v.shape) for k, v in state.items()]
        x = _inputs([(2, 3, 6, 6) if not isinstance(ours, aotjax.nn.Conv1d) else (2, 2, 5)])[0]
        _close(ours(aotjax.tensor(x)), theirs(torch.tensor(x)))
        assert repr(ours) == repr(theirs)


def test_default_initialization_has_torchs_bounds_and_shapes():
    conv = aotjax.nn.Conv2d(4, 6, (3, 2), groups=2)
    assert conv.weight.shape == (6, 2, 3, 2) and conv.bias.shape == (6,)
    bound = 1 / np.sqrt(2 * 3 * 2)
    for p in (conv.weight, conv.bias):
        assert np.abs(as_np(p)).max() <= bound and np.abs(as_np(p)).max() > bound / 2
    assert aotjax.nn.ConvTranspose1d(4, 6, 3, groups=2).weight.shape == (4, 3, 3)


def test_errors_name_the_op_and_the_problem():
    x, w = aotjax.ones(1, 4, 5, 5), aotjax.ones(2, 3, 3, 3)
    with pytest.raises(ShapeError, match="conv2d: with groups=1"):
        F.conv2d(x, w)
    with pytest.raises(ValueError, match="padding='same' is not supported for strided"):
        F.conv2d(x, aotjax.ones(2, 4, 3, 3), stride=2, padding="same")
    with pytest.raises(DTypeError, match="conv2d: input, weight and bias must have one dtype"):
        F.conv2d(x, aotjax.ones(2, 4, 3, 3, dtype=aotjax.float16))
    with pytest.raises(ValueError, match="max_pool2d: padding"):
        F.max_pool2d(x, 2, padding=2)
    with pytest.raises(ValueError, match="reflect padding"):
        F.pad(x, (5, 5), mode="reflect")
    with pytest.raises(NotImplementedError, match="interpolate: mode 'bilinear' does not take a 3-D input"):
        F.interpolate(aotjax.ones(1, 2, 3), scale_factor=2, mode="bilinear")


@pytest.mark.slow
@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_fuzz_conv_and_pooling_arguments_against_torch(data):
    n = data.draw(st.integers(1, 2))
    k = data.draw(st.integers(1, 3))
    s, d = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 2))
    p = data.draw(st.integers(0, k // 2))
    size = data.draw(st.integers(d * (k - 1) + 1, 7))
    g = data.draw(st.sampled_from([1, 2]))
    x, w = _inputs([(2, 2 * g, *(size,) * n), (2 * g, 2, *(k,) * n)], seed=data.draw(st.integers(0, 99)))
    conv, pool = ("conv1d", "max_pool1d") if n == 1 else ("conv2d", "max_pool2d")
    kw = dict(stride=s, padding=p, dilation=d, groups=g)
    _close(getattr(F, conv)(aotjax.tensor(x), aotjax.tensor(w), **kw),
           getattr(TF, conv)(torch.tensor(x), torch.tensor(w), **kw), 1e-4)
    ceil = data.draw(st.booleans())
    pkw = dict(kernel_size=k, stride=s, padding=p, dilation=d, ceil_mode=ceil, return_indices=True)
    (v, i), (tv, ti) = getattr(F, pool)(aotjax.tensor(x), **pkw), getattr(TF, pool)(torch.tensor(x), **pkw)
    _close(v, tv)
    _close(i, ti)
    akw = dict(kernel_size=k, stride=s, padding=p, ceil_mode=ceil, count_include_pad=data.draw(st.booleans()))
    avg = "avg_pool1d" if n == 1 else "avg_pool2d"
    _close(getattr(F, avg)(aotjax.tensor(x), **akw), getattr(TF, avg)(torch.tensor(x), **akw))
