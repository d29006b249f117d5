"""The ops of aotjax/ops/extra_nn.py, extra_linalg.py and extra_special.py against PyTorch: values and dtypes
eagerly, one compiled program per family, and gradients against torch's autograd; the layers; torch's errors."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import aotjax
import aotjax.nn.functional as F
from aotjax.core.errors import DTypeError, ShapeError, UnsupportedError
from tests.helpers import FLOAT, X64
from tests.op_records import as_np

TOL = 1e-9 if X64 else 1e-5
GTOL = 1e-8 if X64 else 1e-4
RNG = np.random.default_rng(0)


def _r(*shape):
    return RNG.standard_normal(shape).astype(FLOAT)


def _t(a, grad=False):
    return torch.tensor(a, requires_grad=grad)


def _check(got, want, tol=TOL):
    if isinstance(want, (tuple, list)):
        assert len(got) == len(want)
        return [_check(g, w, tol) for g, w in zip(got, want)]
    want = want.detach().numpy()
    got = as_np(got)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype.kind == want.dtype.kind, (got.dtype, want.dtype)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


# -- nn.functional ---------------------------------------------------------------------------------------------------
X1, X2, W, BIAS = _r(2, 3), _r(2, 4), _r(5, 3, 4), _r(5)
ROWS = _r(4, 3)
IMG = _r(1, 4, 2, 3)
A, P, N = _r(3, 4), _r(3, 4), _r(3, 4)
ML_X = _r(3, 4)
ML_Y = np.array([[3, 0, -1, 1], [1, 2, 3, 0], [-1, 1, 2, 0]], np.int64)
POOL1, POOL2, POOL3 = _r(2, 3, 8), _r(1, 2, 4, 6), _r(1, 1, 4, 4, 2)


def _unpool_cases(lib):
    """max_unpool{1,2,3}d of torch's max_pool{1,2,3}d with indices (values are the differentiable inputs)."""
    out = []
    for nd, x, kw in ((1, POOL1, dict(kernel_size=2)), (2, POOL2, dict(kernel_size=2, stride=(1, 2))),
                      (3, POOL3, dict(kernel_size=2, stride=2))):
        v, i = getattr(TF, f"max_pool{nd}d")(torch.tensor(x), return_indices=True, **kw)
        out.append((nd, v.numpy(), i.numpy(), kw, tuple(x.shape)))
    return out


UNPOOL = _unpool_cases(torch)


def _nn_program(lib, Fn, x1, x2, w, b, rows, img, a, p, n, mlx, pooled):
    """Every differentiable nn op once, for values and gradients."""
    ml_y = lib.tensor(ML_Y) if lib is torch else aotjax.tensor(ML_Y.astype(np.int32))
    outs = [
        Fn.bilinear(x1, x2, w, b),
        Fn.bilinear(x1[0], x2[0], w),
        Fn.pdist(rows),
        Fn.pdist(rows, p=1.0),
        Fn.pdist(rows, p=math.inf),
        Fn.channel_shuffle(img, 2),
        Fn.upsample_nearest(img, scale_factor=2),
        Fn.upsample_bilinear(img, size=(3, 5)),
        Fn.triplet_margin_with_distance_loss(a, p, n),
        Fn.triplet_margin_with_distance_loss(a, p, n, distance_function=lambda u, v: (u - v).abs().sum(-1),
                                             margin=2.0, swap=True, reduction="none"),
        Fn.multilabel_margin_loss(mlx, ml_y),
        Fn.multilabel_margin_loss(mlx, ml_y, reduction="none"),
        Fn.multilabel_margin_loss(mlx[0], ml_y[0], reduction="sum"),
    ]
    for (nd, _, idx, kw, shape), v in zip(UNPOOL, pooled):
        i = torch.tensor(idx) if lib is torch else aotjax.tensor(idx.astype(np.int32))
        outs.append(getattr(Fn, f"max_unpool{nd}d")(v, i, **kw))
        outs.append(getattr(Fn, f"max_unpool{nd}d")(v, i, output_size=shape[-nd:], **kw))
    return outs


def test_nn_ops_match_torch_eager_jit_and_vjp():
    arrays = [X1, X2, W, BIAS, ROWS, IMG, A, P, N, ML_X]
    pooled = [u[1] for u in UNPOOL]
    ts = [_t(a, True) for a in arrays]
    tp = [_t(a, True) for a in pooled]
    want = _nn_program(torch, TF, *ts, tp)
    got = _nn_program(aotjax, F, *[aotjax.tensor(a) for a in arrays], [aotjax.tensor(a) for a in pooled])
    _check(got, want)
    # one compiled program: the weighted sum of every result, and its gradient in every input
    weights = [_r(*w.shape) for w in want]

    def total(lib, Fn, args, pool):
        outs = _nn_program(lib, Fn, *args, pool)
        return sum((o * (torch.tensor(c) if lib is torch else aotjax.tensor(c))).sum() for o, c in zip(outs, weights))

    value, grads = aotjax.jit(aotjax.value_and_grad(lambda args, pool: total(aotjax, F, args, pool), argnums=(0, 1)))(
        [aotjax.tensor(a) for a in arrays], [aotjax.tensor(a) for a in pooled])
    want_total = total(torch, TF, ts, tp)
    want_grads = torch.autograd.grad(want_total, ts + tp)
    np.testing.assert_allclose(as_np(value), want_total.item(), rtol=GTOL)
    for g, w in zip([*grads[0], *grads[1]], want_grads):
        np.testing.assert_allclose(as_np(g), w.numpy(), rtol=GTOL, atol=GTOL)


T_, N_, C_ = 6, 3, 5
LOGITS = _r(T_, N_, C_)
TARGETS = np.array([[2, 2, 3], [1, 4, 0], [3, 0, 0]], np.int64)  # a repeated label needs a blank between
IN_LEN, TG_LEN = [6, 5, 4], [3, 2, 1]


def _ctc_program(lib, Fn, logits):
    tg = torch.tensor(TARGETS) if lib is torch else aotjax.tensor(TARGETS.astype(np.int32))
    flat = np.concatenate([TARGETS[i, :TG_LEN[i]] for i in range(N_)])
    flat = torch.tensor(flat) if lib is torch else aotjax.tensor(flat.astype(np.int32))
    lengths = (lambda v: torch.tensor(v)) if lib is torch else (lambda v: aotjax.tensor(v))
    lp = logits.log_softmax(2)
    impossible = [2, 2, 2]  # 3 labels with a repeat need 4 frames: an infinite loss
    return [
        Fn.ctc_loss(lp, tg, IN_LEN, TG_LEN, reduction="none"),
        Fn.ctc_loss(lp, tg, lengths(IN_LEN), lengths(TG_LEN)),
        Fn.ctc_loss(lp, flat, IN_LEN, TG_LEN, reduction="sum"),
        Fn.ctc_loss(lp, tg, impossible, TG_LEN, reduction="none", zero_infinity=True),
        Fn.ctc_loss(lp, (tg + 1) % C_, IN_LEN, TG_LEN, blank=1, reduction="none"),
        Fn.ctc_loss(lp[:, 0], tg[0], IN_LEN[:1], TG_LEN[:1], reduction="none"),
        Fn.ctc_loss(lp, tg, IN_LEN, [0, 2, 1], reduction="none"),  # an empty target: all blanks
    ]


def test_ctc_loss_matches_torch_eager_jit_and_vjp():
    x = _t(LOGITS, True)
    want = _ctc_program(torch, TF, x)
    got = _ctc_program(aotjax, F, aotjax.tensor(LOGITS))
    _check(got, want)
    # the derivative in the logits (torch's backward in log_probs assumes a log_softmax before it)
    weights = [_r(*w.shape) for w in want]

    def total(lib, Fn, logits):
        outs = _ctc_program(lib, Fn, logits)
        return sum((o * (torch.tensor(c) if lib is torch else aotjax.tensor(c))).sum() for o, c in zip(outs, weights))

    value, grad = aotjax.jit(aotjax.value_and_grad(lambda lg: total(aotjax, F, lg)))(aotjax.tensor(LOGITS))
    want_total = total(torch, TF, x)
    (want_grad,) = torch.autograd.grad(want_total, [x])
    np.testing.assert_allclose(as_np(value), want_total.item(), rtol=GTOL)
    np.testing.assert_allclose(as_np(grad), want_grad.numpy(), rtol=GTOL, atol=GTOL)
    assert np.isinf(as_np(F.ctc_loss(aotjax.tensor(LOGITS).log_softmax(2), aotjax.tensor(TARGETS.astype(np.int32)),
                                     [2, 2, 2], TG_LEN, reduction="none"))[0])


def test_layers_match_torch():
    m, tm = aotjax.nn.Bilinear(3, 4, 5), torch.nn.Bilinear(3, 4, 5)
    assert m.weight.shape == tuple(tm.weight.shape) and m.bias.shape == tuple(tm.bias.shape)
    assert np.abs(as_np(m.weight)).max() <= 1 / math.sqrt(3)
    m.load_state_dict({k: aotjax.tensor(v.detach().numpy().astype(FLOAT)) for k, v in tm.state_dict().items()})
    tm = tm.to(torch.float64 if X64 else torch.float32)
    _check(m(aotjax.tensor(X1), aotjax.tensor(X2)), tm(_t(X1), _t(X2)))
    assert aotjax.nn.Bilinear(3, 4, 5, bias=False).bias is None
    lp = LOGITS[:, :1].copy()
    _check(aotjax.nn.CTCLoss(blank=0, reduction="sum")(aotjax.tensor(lp).log_softmax(2),
                                                        aotjax.tensor([[1, 2]]), [6], [2]),
           torch.nn.CTCLoss(blank=0, reduction="sum")(_t(lp).log_softmax(2), torch.tensor([[1, 2]]), [6], [2]))
    _check(aotjax.nn.ChannelShuffle(2)(aotjax.tensor(IMG)), torch.nn.ChannelShuffle(2)(_t(IMG)))
    _check(aotjax.nn.TripletMarginWithDistanceLoss(swap=True)(*map(aotjax.tensor, (A, P, N))),
           torch.nn.TripletMarginWithDistanceLoss(swap=True)(*map(_t, (A, P, N))))
    _check(aotjax.nn.MultiLabelMarginLoss(reduction="sum")(aotjax.tensor(ML_X), aotjax.tensor(ML_Y.astype(np.int32))),
           torch.nn.MultiLabelMarginLoss(reduction="sum")(_t(ML_X), torch.tensor(ML_Y)))
    for (_, v, i, kw, _), layer in zip(UNPOOL, ("MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d")):
        _check(getattr(aotjax.nn, layer)(**kw)(aotjax.tensor(v), aotjax.tensor(i.astype(np.int32))),
               getattr(torch.nn, layer)(**kw)(_t(v), torch.tensor(i)))
    assert aotjax.Tensor.channel_shuffle is aotjax.channel_shuffle and "bilinear" in F.__all__


def test_nn_errors_as_torch():
    with pytest.raises(ShapeError, match="bilinear: weight must be 3-D"):
        F.bilinear(aotjax.ones(2, 3), aotjax.ones(2, 4), aotjax.ones(5, 12))
    with pytest.raises(ShapeError, match="bilinear: the last dims"):
        F.bilinear(aotjax.ones(2, 3), aotjax.ones(2, 4), aotjax.ones(5, 4, 3))
    with pytest.raises(ShapeError, match="pdist: input must be 2-D"):
        F.pdist(aotjax.ones(3))
    with pytest.raises(ShapeError, match="channel_shuffle: .*divisible by groups=3"):
        F.channel_shuffle(aotjax.ones(1, 4, 2), 3)
    with pytest.raises(ValueError, match="ctc_loss: blank must be a class index in \\[0, 5\\)"):
        F.ctc_loss(aotjax.zeros(2, 1, 5), aotjax.tensor([[1]]), [2], [1], blank=5)
    with pytest.raises(ShapeError, match="ctc_loss: input_lengths must be 2 integer length"):
        F.ctc_loss(aotjax.zeros(2, 2, 5), aotjax.tensor([[1], [1]]), [2], [1, 1])
    with pytest.raises(DTypeError, match="multilabel_margin_loss: target must hold class indices"):
        F.multilabel_margin_loss(aotjax.ones(2, 3), aotjax.ones(2, 3))
    with pytest.raises(ValueError, match="triplet_margin_with_distance_loss: margin must be greater than 0"):
        F.triplet_margin_with_distance_loss(aotjax.ones(2), aotjax.ones(2), aotjax.ones(2), margin=0.0)
    with pytest.raises(ShapeError, match="max_unpool2d: output_size"):
        F.max_unpool2d(aotjax.ones(1, 2, 2), aotjax.zeros(1, 2, 2, dtype=aotjax.int32), 2, output_size=(9, 9))
    with pytest.raises(ShapeError, match="upsample_bilinear: expected a 4-D input"):
        F.upsample_bilinear(aotjax.ones(1, 1, 2), scale_factor=2)


# -- linalg ----------------------------------------------------------------------------------------------------------
SQ = _r(3, 3) + 3 * np.eye(3, dtype=FLOAT)
RHS = _r(3, 2)
T4 = _r(4, 2, 2) + np.eye(4, dtype=FLOAT).reshape(4, 2, 2) * 3
T6, B6 = _r(2, 3, 6) + np.eye(6, dtype=FLOAT).reshape(2, 3, 6) * 3, _r(2, 3)
HH, TAU = _r(2, 4, 3), _r(2, 2)
VX = np.array([0.5, -1.5, 2.0], FLOAT)


def _linalg_program(L, sq, rhs, t4, t6, b6, hh, tau, vx,
                    norms=(None, 2, -2, "fro", "nuc", math.inf, -math.inf, 1, -1)):
    return [
        L.diagonal(sq, offset=1), L.diagonal(t4, dim1=0, dim2=2),
        L.vander(vx), L.vander(vx, N=5),
        L.solve_ex(sq, rhs).result, L.solve_ex(sq, rhs[:, 0], left=True).result,
        L.lu_factor_ex(sq).LU,
        L.tensorinv(t4, ind=1), L.tensorinv(t4.reshape(2, 2, 2, 2)),
        L.tensorsolve(t6, b6), L.tensorsolve(t6.permute(2, 0, 1), b6, dims=(0,)),
        *[L.cond(sq, p) for p in norms],
        L.householder_product(hh, tau),
    ]


def test_linalg_matches_torch_eager_jit_and_vjp():
    arrays = [SQ, RHS, T4, T6, B6, HH, TAU, VX]
    ts = [_t(a, True) for a in arrays]
    want = _linalg_program(torch.linalg, *ts)
    got = _linalg_program(aotjax.linalg, *[aotjax.tensor(a) for a in arrays])
    _check(got, want, tol=1e-9 if X64 else 2e-5)
    # integers: vander keeps the dtype; the infos are int32 zeros
    _check(aotjax.linalg.vander(aotjax.tensor([1, 2, 3])), torch.linalg.vander(torch.tensor([1, 2, 3])))
    sq = aotjax.tensor(SQ)
    for got_info, want_info in ((aotjax.linalg.solve_ex(sq, aotjax.tensor(RHS)).info,
                                 torch.linalg.solve_ex(_t(SQ), _t(RHS)).info),
                                (aotjax.linalg.lu_factor_ex(sq).info, torch.linalg.lu_factor_ex(_t(SQ)).info),
                                (aotjax.linalg.lu_factor_ex(aotjax.tensor([[1.0, 2.0], [2.0, 4.0]])).info,
                                 torch.linalg.lu_factor_ex(torch.tensor([[1.0, 2.0], [2.0, 4.0]])).info)):
        assert got_info.dtype == aotjax.int32 and got_info.tolist() == want_info.tolist()
    weights = [_r(*w.shape) for w in want]

    def total(lib, L, args):  # NOTE: torch's backward of cond in the norms other than 2 fails (an in-place inv_ex)
        return sum((o * (torch.tensor(c) if lib is torch else aotjax.tensor(c))).sum()
                   for o, c in zip(_linalg_program(L, *args, norms=(None, -2)), weights))

    value, grads = aotjax.jit(aotjax.value_and_grad(lambda args: total(aotjax, aotjax.linalg, args)))(
        [aotjax.tensor(a) for a in arrays])
    want_total = total(torch, torch.linalg, ts)
    np.testing.assert_allclose(as_np(value), want_total.item(), rtol=GTOL)
    for g, w in zip(grads, torch.autograd.grad(want_total, ts)):
        np.testing.assert_allclose(as_np(g), w.numpy(), rtol=1e-7 if X64 else 5e-4, atol=1e-7 if X64 else 5e-4)


def test_linalg_errors_as_torch():
    with pytest.raises(ShapeError, match="linalg.tensorinv: the product of the first ind=1"):
        aotjax.linalg.tensorinv(aotjax.ones(3, 2, 2), ind=1)
    with pytest.raises(ShapeError, match="linalg.tensorsolve: the product of A's trailing dims"):
        aotjax.linalg.tensorsolve(aotjax.ones(2, 3, 5), aotjax.ones(2, 3))
    with pytest.raises(ValueError, match="linalg.cond: p must be"):
        aotjax.linalg.cond(aotjax.eye(2), 3)
    with pytest.raises(ShapeError, match="linalg.vander: x must have at least one dimension"):
        aotjax.linalg.vander(aotjax.tensor(1.0))
    with pytest.raises(ShapeError, match="linalg.householder_product: expected A"):
        aotjax.linalg.householder_product(aotjax.ones(2, 3), aotjax.ones(2))


# -- special ---------------------------------------------------------------------------------------------------------
GA = np.array([[0.5, 1.0, 2.0, 3.5], [4.0, 0.25, 1.5, 10.0]], FLOAT)
GX = np.array([[0.3, 1.0, 2.5, 4.0], [0.1, 2.0, 0.7, 12.0]], FLOAT)


def test_special_matches_torch():
    a, x, ta, tx = aotjax.tensor(GA), aotjax.tensor(GX), _t(GA), _t(GX, True)
    run = aotjax.jit(lambda a, x: [aotjax.igamma(a, x), aotjax.igammac(a, x), aotjax.nextafter(a, x),
                                   aotjax.special.gammainc(a, 2.0), *aotjax.frexp(x * 100)])
    for got in (run(a, x), [aotjax.igamma(a, x), aotjax.igammac(a, x), aotjax.nextafter(a, x),
                            aotjax.special.gammainc(a, 2.0), *aotjax.frexp(x * 100)]):
        _check(got, [torch.igamma(ta, tx), torch.igammac(ta, tx), torch.nextafter(ta, tx),
                     torch.special.gammainc(ta, torch.tensor(2.0, dtype=ta.dtype)), *torch.frexp(tx * 100)])
    assert aotjax.frexp(x).exponent.dtype == aotjax.int32
    _check(aotjax.frexp(aotjax.tensor([0.0, -3.0, 0.125])), torch.frexp(torch.tensor([0.0, -3.0, 0.125])))
    # methods and in-place forms
    _check(a.igamma(x), torch.igamma(ta, tx))
    y, ty = aotjax.tensor(GA), _t(GA)
    assert y[0].igammac_(x[0]) is not None and y.nextafter_(x) is y
    ty[0].igammac_(tx[0].detach())
    ty.nextafter_(tx.detach())
    _check(y, ty)
    # derivatives in x (torch has none in a)
    weights = _r(*GA.shape)
    f = lambda lib, a, x: ((lib.igamma(a, x) - 2 * lib.igammac(a, x)) * torch.tensor(weights).numpy()).sum()
    g = aotjax.grad(lambda x: f(aotjax, a, x))(x)
    (want,) = torch.autograd.grad((torch.igamma(ta, tx) - 2 * torch.igammac(ta, tx)).mul(torch.tensor(weights)).sum(),
                                  [tx])
    np.testing.assert_allclose(as_np(g), want.numpy(), rtol=GTOL, atol=GTOL)
    np.testing.assert_array_equal(as_np(aotjax.grad(lambda x: aotjax.nextafter(x, a).sum())(x)), np.zeros_like(GX))
    with pytest.raises(UnsupportedError, match="igamma: the derivative in input"):
        aotjax.grad(lambda a: aotjax.igamma(a, x).sum())(a)
    with pytest.raises(DTypeError, match="frexp: expected a floating-point tensor"):
        aotjax.frexp(aotjax.tensor([1, 2]))
