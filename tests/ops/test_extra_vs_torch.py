"""`F.bilinear ctc_loss pdist channel_shuffle max_unpool* affine_grid grid_sample` and friends (aotjax/ops/nn/),
torch.linalg's solvers (aotjax/ops/linalg/solvers.py) and `igamma nextafter frexp` (aotjax/ops/math/special.py)
against PyTorch: values and dtypes eagerly, one compiled program per family, and gradients against torch's
autograd; the layers; torch's errors."""
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
ROWS[3] = ROWS[1]  # equal rows: a zero distance, whose derivative is 0 (torch's)
IMG = _r(1, 4, 2, 3)
A, P, N = _r(3, 4), _r(3, 4), _r(3, 4)
ML_X = _r(3, 4)
ML_Y = np.array([[3, 0, -1, 1], [1, 2, 3, 0], [-1, 1, 2, 0]], np.int64)
THETA = (np.eye(2, 3)[None] * 1.4 + RNG.standard_normal((1, 2, 3)) * 0.3).astype(FLOAT)  # samples outside too
THETA3, VOL = (np.eye(3, 4)[None] * 1.3 + RNG.standard_normal((1, 3, 4)) * 0.3).astype(FLOAT), _r(1, 2, 2, 3, 2)
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


def _nn_program(lib, Fn, x1, x2, w, b, rows, img, a, p, n, mlx, *pooled):
    """Every differentiable nn op once, for values and gradients."""
    ml_y = lib.tensor(ML_Y) if lib is torch else aotjax.tensor(ML_Y.astype(np.int32))
    outs = [
        Fn.bilinear(x1, x2, w, b),
        Fn.bilinear(x1[0], x2[0], w),
        Fn.pdist(rows),
        Fn.pdist(rows, p=1.0),
        Fn.pdist(rows, p=math.inf),
        Fn.pdist(rows, p=3.0),
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


def _grid_program(lib, Fn, img, theta, theta3, vol):
    outs = [Fn.affine_grid(theta, (1, 4, 3, 2), align_corners=True)]
    grid = Fn.affine_grid(theta, (1, 4, 3, 4), align_corners=False)
    for mode, pad, ac in (("bilinear", "zeros", False), ("bilinear", "border", True), ("bilinear", "reflection", False),
                          ("nearest", "zeros", True), ("nearest", "reflection", True)):
        outs.append(Fn.grid_sample(img, grid, mode=mode, padding_mode=pad, align_corners=ac))
    grid3 = Fn.affine_grid(theta3, (1, 2, 2, 2, 3), align_corners=True)
    return outs + [Fn.grid_sample(vol, grid3, padding_mode="border", align_corners=True),
                   Fn.grid_sample(vol, grid3, mode="nearest", align_corners=False)]


def _vs_torch(program, arrays):
    """`program` on torch and, as one compiled program, on aotjax: every result, the weighted sum of them all, and
    its gradient in every input."""
    ts = [_t(a, True) for a in arrays]
    want = program(torch, TF, *ts)
    weights = [_r(*w.shape) for w in want]

    def total(lib, Fn, *args):
        outs = program(lib, Fn, *args)
        c = (lambda a: torch.tensor(a)) if lib is torch else aotjax.tensor
        return sum((o * c(w)).sum() for o, w in zip(outs, weights)), outs

    (value, got), grads = aotjax.jit(aotjax.value_and_grad(lambda *args: total(aotjax, F, *args),
                                                           argnums=tuple(range(len(arrays))), has_aux=True))(
        *[aotjax.tensor(a) for a in arrays])
    _check(got, want)
    want_total = total(torch, TF, *ts)[0]
    np.testing.assert_allclose(as_np(value), want_total.item(), rtol=GTOL)
    for g, w in zip(grads, torch.autograd.grad(want_total, ts)):
        np.testing.assert_allclose(as_np(g), w.numpy(), rtol=GTOL, atol=GTOL)


def test_nn_ops_match_torch_eager_jit_and_vjp():
    # eagerly: bilinear (each eager op compiles on its own; the layers' test and the doctests run the rest eagerly)
    _check(F.bilinear(*map(aotjax.tensor, (X1, X2, W, BIAS))), TF.bilinear(*map(_t, (X1, X2, W, BIAS))))
    _vs_torch(_nn_program, [X1, X2, W, BIAS, ROWS, IMG, A, P, N, ML_X] + [u[1] for u in UNPOOL])


@pytest.mark.slow
def test_grid_sample_and_affine_grid_match_torch():
    _vs_torch(_grid_program, [IMG, THETA, THETA3, VOL])


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
        (torch.nn if lib is torch else aotjax.nn).CTCLoss()(lp, tg, lengths(IN_LEN), lengths(TG_LEN)),  # the layer
        Fn.ctc_loss(lp, flat, IN_LEN, TG_LEN, reduction="sum"),
        Fn.ctc_loss(lp, tg, impossible, TG_LEN, reduction="none", zero_infinity=True),
        Fn.ctc_loss(lp, (tg + 1) % C_, IN_LEN, TG_LEN, blank=1, reduction="none"),
        Fn.ctc_loss(lp[:, 0], tg[0], IN_LEN[:1], TG_LEN[:1], reduction="none"),
        Fn.ctc_loss(lp, tg, IN_LEN, [0, 2, 1], reduction="none"),  # an empty target: all blanks
    ]


def test_ctc_loss_matches_torch_eager_jit_and_vjp():
    x = _t(LOGITS, True)
    want = _ctc_program(torch, TF, x)
    # one compiled program, with the derivative in the logits (torch's backward in log_probs assumes a log_softmax
    # before it); eagerly: the doctests (an eager scan compiles its body: seconds)
    weights = [_r(*w.shape) for w in want]

    def total(lib, Fn, logits):
        outs = _ctc_program(lib, Fn, logits)
        c = (lambda a: torch.tensor(a)) if lib is torch else aotjax.tensor
        return sum((o * c(w)).sum() for o, w in zip(outs, weights)), outs

    (value, got), grad = aotjax.jit(aotjax.value_and_grad(lambda lg: total(aotjax, F, lg), has_aux=True))(
        aotjax.tensor(LOGITS))
    _check(got, want)
    want_total = total(torch, TF, x)[0]
    (want_grad,) = torch.autograd.grad(want_total, [x])
    np.testing.assert_allclose(as_np(value), want_total.item(), rtol=GTOL)
    np.testing.assert_allclose(as_np(grad), want_grad.numpy(), rtol=GTOL, atol=GTOL)


def test_layers_match_torch():
    m, tm = aotjax.nn.Bilinear(3, 4, 5, dtype=FLOAT), torch.nn.Bilinear(3, 4, 5)
    assert m.weight.shape == tuple(tm.weight.shape) and m.bias.shape == tuple(tm.bias.shape)
    assert np.abs(as_np(m.weight)).max() <= 1 / math.sqrt(3)
    assert aotjax.nn.Bilinear(3, 4, 5, bias=False).bias is None
    m.load_state_dict({k: aotjax.tensor(v.detach().numpy().astype(FLOAT)) for k, v in tm.state_dict().items()})
    tm = tm.to(torch.float64 if X64 else torch.float32)
    layers = {
        "Bilinear": (m, tm, (X1, X2)),
        "ChannelShuffle": (aotjax.nn.ChannelShuffle(2), torch.nn.ChannelShuffle(2), (IMG,)),
        "TripletMarginWithDistanceLoss": (aotjax.nn.TripletMarginWithDistanceLoss(swap=True),
                                          torch.nn.TripletMarginWithDistanceLoss(swap=True), (A, P, N)),
        "MultiLabelMarginLoss": (aotjax.nn.MultiLabelMarginLoss(reduction="sum"),
                                 torch.nn.MultiLabelMarginLoss(reduction="sum"), (ML_X, ML_Y)),
    }
    for (_, v, i, kw, _), name in zip(UNPOOL, ("MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d")):
        layers[name] = (getattr(aotjax.nn, name)(**kw), getattr(torch.nn, name)(**kw), (v, i))

    def convert(a, lib):
        if not isinstance(a, np.ndarray):
            return a
        return torch.tensor(a) if lib is torch else aotjax.tensor(a.astype(np.int32) if a.dtype == np.int64 else a)

    # one compiled program runs every layer (the ops ran eagerly in their doctests)
    run = aotjax.jit(lambda args: [layer(*a) for (layer, _, _), a in zip(layers.values(), args)])
    got = run([[convert(a, aotjax) for a in args] for _, _, args in layers.values()])
    _check(got, [t_layer(*[convert(a, torch) for a in args]) for _, t_layer, args in layers.values()])
    assert not hasattr(aotjax.Tensor, "channel_shuffle") and "bilinear" in F.__all__  # as torch
    assert "kernel_size=2" in repr(layers["MaxUnpool1d"][0]) and "groups=2" in repr(layers["ChannelShuffle"][0])


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
    with pytest.raises(ShapeError, match="affine_grid: expected theta"):
        F.affine_grid(aotjax.ones(1, 2, 3), (1, 1, 2))
    with pytest.raises(ValueError, match="grid_sample: mode must be"):
        F.grid_sample(aotjax.ones(1, 1, 2, 2), aotjax.zeros(1, 1, 1, 2), mode="bicubic")
    with pytest.raises(ShapeError, match="upsample_bilinear: expected a 4-D input"):
        F.upsample_bilinear(aotjax.ones(1, 1, 2), scale_factor=2)


# -- linalg ----------------------------------------------------------------------------------------------------------
SQ = _r(3, 3) + 3 * np.eye(3, dtype=FLOAT)
RHS = _r(3, 2)
T4 = _r(4, 2, 2) + np.eye(4, dtype=FLOAT).reshape(4, 2, 2) * 3
T6, B6 = _r(2, 3, 6) + np.eye(6, dtype=FLOAT).reshape(2, 3, 6) * 3, _r(2, 3)
HH, TAU = _r(2, 4, 3), _r(2, 2)
VX = np.array([0.5, -1.5, 2.0], FLOAT)


def _torch_cond(A, p=None):
    """torch's cond, its backward in the norms other than 2 composed (torch's own fails: an in-place inv_ex)."""
    if p in (None, 2, -2):
        return torch.linalg.cond(A, p)
    return torch.linalg.matrix_norm(A, p) * torch.linalg.matrix_norm(torch.linalg.inv(A), p)


def _linalg_program(L, sq, rhs, t4, t6, b6, hh, tau, vx, cond=None):
    cond = cond or L.cond
    return [
        L.diagonal(sq, offset=1), L.diagonal(t4, dim1=0, dim2=2),
        L.vander(vx), L.vander(vx, N=5),
        L.solve_ex(sq, rhs).result, L.solve_ex(sq, rhs[:, 0], left=True).result,
        L.lu_factor_ex(sq).LU,
        L.tensorinv(t4, ind=1), L.tensorinv(t4.reshape(2, 2, 2, 2)),
        L.tensorsolve(t6, b6), L.tensorsolve(t6.permute(2, 0, 1), b6, dims=(0,)),
        *[cond(sq, p) for p in (None, 2, -2, "fro", "nuc", math.inf, -math.inf, 1, -1)],
        L.householder_product(hh, tau),
    ]


def test_linalg_matches_torch_eager_jit_and_vjp():
    arrays = [SQ, RHS, T4, T6, B6, HH, TAU, VX]
    ts = [_t(a, True) for a in arrays]
    want = _linalg_program(torch.linalg, *ts)
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

    def total(lib, L, args):
        c = (lambda a: torch.tensor(a)) if lib is torch else aotjax.tensor
        outs = _linalg_program(L, *args, cond=_torch_cond if lib is torch else None)
        return sum((o * c(w)).sum() for o, w in zip(outs, weights)), outs

    (value, got), grads = aotjax.jit(aotjax.value_and_grad(lambda args: total(aotjax, aotjax.linalg, args),
                                                           has_aux=True))([aotjax.tensor(a) for a in arrays])
    _check(got, want, tol=1e-9 if X64 else 2e-5)
    want_total = total(torch, torch.linalg, ts)[0]
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
    for x, n in ((aotjax.tensor(1.0), None), (aotjax.tensor([1.0, 2.0]), 1), (aotjax.tensor([1.0, 2.0]), 0)):
        with pytest.raises(ValueError, match="linalg.vander: N must be greater than 1"):  # NOTE: torch's rule
            aotjax.linalg.vander(x, N=n)
    with pytest.raises(ShapeError, match="linalg.householder_product: expected A"):
        aotjax.linalg.householder_product(aotjax.ones(2, 3), aotjax.ones(2))


# -- special ---------------------------------------------------------------------------------------------------------
GA = np.array([[0.5, 1.0, 2.0, 3.5], [4.0, 0.25, 1.5, 10.0]], FLOAT)
GX = np.array([[0.3, 1.0, 2.5, 4.0], [0.1, 2.0, 0.7, 12.0]], FLOAT)


def test_special_matches_torch():
    a, x, ta, tx = aotjax.tensor(GA), aotjax.tensor(GX), _t(GA), _t(GX, True)
    weights = _r(*GA.shape)

    def program(lib, a, x):
        outs = [lib.igamma(a, x), lib.igammac(a, x), lib.nextafter(a, x.detach()),
                lib.special.gammainc(a, lib.tensor(2.0, dtype=a.dtype)), *lib.frexp(x * 100)]
        c = torch.tensor(weights) if lib is torch else aotjax.tensor(weights)
        return ((outs[0] - 2 * outs[1] + outs[4]) * c).sum(), outs

    (value, got), grad = aotjax.jit(aotjax.value_and_grad(lambda x: program(aotjax, a, x), has_aux=True))(x)
    want_value, want = program(torch, ta, tx)
    _check(got, want)
    (want_grad,) = torch.autograd.grad(want_value, [tx])  # in x only: torch has no derivative in a
    np.testing.assert_allclose(as_np(value), want_value.item(), rtol=GTOL)
    np.testing.assert_allclose(as_np(grad), want_grad.numpy(), rtol=GTOL, atol=GTOL)
    # eagerly, the Tensor methods and the in-place forms (through a view)
    _check(x.igamma(a), torch.igamma(tx, ta))
    _check(aotjax.frexp(aotjax.tensor([0.0, -3.0, 0.125])), torch.frexp(torch.tensor([0.0, -3.0, 0.125])))
    y, ty = aotjax.tensor(GA), _t(GA)
    assert y[0].igammac_(x[0]) is not None and y.nextafter_(x) is y
    ty[0].igammac_(tx[0].detach())
    ty.nextafter_(tx.detach())
    _check(y, ty)
    with pytest.raises(UnsupportedError, match="igamma: the derivative in input"):
        aotjax.grad(lambda a: aotjax.igamma(a, x).sum())(a)
    # nextafter's derivative is torch's: 1 in input, 0 in other
    tx2, ta2 = _t(GX, True), _t(GA, True)
    want = torch.autograd.grad(torch.nextafter(tx2, ta2).sum(), [tx2, ta2])
    got = aotjax.grad(lambda x, a: aotjax.nextafter(x, a).sum(), argnums=(0, 1))(x, a)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(as_np(g), w.numpy())
    with pytest.raises(DTypeError, match="frexp: expected a floating-point tensor"):
        aotjax.frexp(aotjax.tensor([1, 2]))


# -- signal.windows --------------------------------------------------------------------------------------------------
WINDOWS = [("bartlett", {}), ("blackman", {}), ("cosine", {}), ("exponential", dict(tau=2.0)),
           ("gaussian", dict(std=0.7)), ("general_cosine", dict(a=[0.4, 0.3, 0.3])),
           ("general_hamming", dict(alpha=0.6)), ("hamming", {}), ("hann", {}), ("kaiser", dict(beta=5.0)),
           ("kaiser", {}), ("nuttall", {})]


def test_signal_windows_match_torch():
    dt = aotjax.float64 if X64 else aotjax.float32
    tdt = torch.float64 if X64 else torch.float32
    for name, kw in WINDOWS:
        for M in (0, 1, 2, 5, 6):
            for sym in (True, False):
                _check(getattr(aotjax.signal.windows, name)(M, sym=sym, dtype=dt, **kw),
                       getattr(torch.signal.windows, name)(M, sym=sym, dtype=tdt, **kw), tol=1e-6)
    _check(aotjax.signal.windows.exponential(5, sym=False, center=1.0),
           torch.signal.windows.exponential(5, sym=False, center=1.0), tol=1e-6)
    assert aotjax.signal.windows.hann(4).dtype == aotjax.ones(1).dtype  # the default float dtype
    with pytest.raises(ValueError, match="signal.windows.hann: M must be a non-negative integer"):
        aotjax.signal.windows.hann(-1)
    with pytest.raises(ValueError, match="center must be None for symmetric windows"):
        aotjax.signal.windows.exponential(3, center=1.0)
    with pytest.raises(DTypeError, match="dtype must be a floating point type"):
        aotjax.signal.windows.hann(3, dtype=aotjax.int32)
