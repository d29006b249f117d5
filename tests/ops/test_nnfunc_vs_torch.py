"""Activations, losses and normalization of `aotjax.nn.functional` against PyTorch: each op on a few samples
(keyword arguments, reductions, `ignore_index`, class weights, 0-d and empty inputs where torch allows them),
eagerly, under `aotjax.jit` (one compiled function per op) and `aotjax.vjp` against torch's autograd; the
in-place forms; the layers with the same weights as torch's; the random channel and alpha dropouts'
statistics; errors."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import aotjax
import aotjax.nn.functional as F
from aotjax.core.errors import DTypeError, ShapeError
from tests.helpers import FLOAT, INT, X64
from tests.op_records import as_np

TOL = 1e-9 if X64 else 1e-5
TORCH_FLOAT = torch.float64 if X64 else torch.float32


class Fixed:
    """An argument that is not differentiated (class indices, +-1 labels): the same value for both libraries."""

    def __init__(self, value):
        self.value = value


def randn(*shape, scale=1.0):
    return ("randn", shape, scale)


def prob(*shape):
    return ("prob", shape, None)


def pos(*shape):
    return ("pos", shape, None)


def labels(*shape):
    return ("labels", shape, None)


def _materialize(spec, rng):
    if isinstance(spec, Fixed):
        return spec
    kind, shape, scale = spec
    if kind == "randn":
        return (rng.standard_normal(shape) * scale).astype(FLOAT)
    if kind == "prob":
        return rng.uniform(0.05, 0.95, shape).astype(FLOAT)
    if kind == "pos":
        return rng.uniform(0.2, 2.0, shape).astype(FLOAT)
    if kind == "labels":  # NOTE: +-1 labels, not differentiated
        return Fixed(np.where(rng.standard_normal(shape) > 0, 1.0, -1.0).astype(FLOAT))
    raise AssertionError(kind)


def idx(*values):
    return Fixed(np.array(values, dtype=INT))


def _w(*values):
    return Fixed(np.array(values, dtype=FLOAT))


# name: [(argument specs, kwargs)]; the first sample is also run under jit
CASES = {
    # -- activations
    "leaky_relu": [([randn(3, 4)], dict(negative_slope=0.2)), ([randn()], {}), ([randn(0, 3)], {})],
    "elu": [([randn(3, 4, scale=3)], dict(alpha=0.7)), ([randn()], {})],
    "selu": [([randn(3, 4, scale=3)], {})],
    "celu": [([randn(3, 4, scale=3)], dict(alpha=1.5))],
    "softplus": [([randn(3, 4, scale=10)], dict(beta=2.0, threshold=5.0)), ([randn(5, scale=30)], {})],
    "hardtanh": [([randn(3, 4, scale=2)], dict(min_val=-0.5, max_val=1.5))],
    "relu6": [([randn(3, 4, scale=5)], {})],
    "hardswish": [([randn(3, 4, scale=4)], {})],
    "hardsigmoid": [([randn(3, 4, scale=4)], {})],
    "mish": [([randn(3, 4, scale=3)], {})],
    "logsigmoid": [([randn(3, 4, scale=10)], {})],
    "glu": [([randn(3, 4)], {}), ([randn(4, 3)], dict(dim=0))],
    "prelu": [([randn(2, 3, 4), randn(3)], {}), ([randn(3, 4), randn(1)], {})],
    "softsign": [([randn(3, 4, scale=3)], {})],
    "tanhshrink": [([randn(3, 4)], {})],
    "softshrink": [([randn(3, 4)], dict(lambd=0.3))],
    "hardshrink": [([randn(3, 4)], dict(lambd=0.3))],
    "threshold": [([randn(3, 4)], dict(threshold=0.1, value=-2.0))],
    "rrelu": [([randn(3, 4)], dict(lower=0.1, upper=0.3))],
    "gelu": [([randn(3, 4)], dict(approximate="tanh"))],
    "softmin": [([randn(3, 4)], dict(dim=1))],
    # -- losses
    "nll_loss": [([randn(4, 5), idx(0, 3, -100, 4)], {}),
                 ([randn(4, 5), idx(0, 3, 1, 4)], dict(weight=_w(1, 2, 3, 4, 5), reduction="sum")),
                 ([randn(2, 3, 4), Fixed(np.array([[0, 2, 1, 7], [1, 1, 0, 2]], dtype=INT))],
                  dict(ignore_index=7, reduction="none")),
                 ([randn(5), Fixed(np.array(2, dtype=INT))], dict(reduction="none"))],
    "cross_entropy": [([randn(4, 5), idx(0, 3, -100, 4)], dict(label_smoothing=0.1, weight=_w(1, 2, 3, 4, 5))),
                      ([randn(4, 5), prob(4, 5)], dict(label_smoothing=0.2)),
                      ([randn(2, 3, 4), Fixed(np.array([[0, 2, 1, 1], [1, 1, 0, 2]], dtype=INT))],
                       dict(reduction="none"))],
    "binary_cross_entropy": [([prob(3, 4), prob(3, 4)], {}),
                             ([prob(3, 4), prob(3, 4)], dict(weight=_w(1, 2, 3, 4), reduction="none"))],
    "binary_cross_entropy_with_logits": [
        ([randn(3, 4, scale=3), prob(3, 4)], dict(pos_weight=_w(1, 2, 3, 0.5))),
        ([randn(3, 4), prob(3, 4)], dict(weight=_w(1, 2, 3, 4), reduction="sum"))],
    "mse_loss": [([randn(3, 4), randn(3, 4)], dict(reduction="sum"))],
    "l1_loss": [([randn(3, 4), randn(3, 4)], dict(weight=Fixed(np.linspace(0, 2, 12).reshape(3, 4).astype(FLOAT)))),
                ([randn(), randn()], dict(reduction="none"))],
    "smooth_l1_loss": [([randn(3, 4), randn(3, 4)], dict(beta=0.5)), ([randn(3, 4), randn(3, 4)], dict(beta=0.0))],
    "huber_loss": [([randn(3, 4), randn(3, 4)], dict(delta=0.5, reduction="none")),
                   ([randn(3, 4), randn(3, 4)], dict(delta=0.7, weight=Fixed(np.linspace(0, 2, 12).reshape(3, 4)
                                                                              .astype(FLOAT))))],
    "kl_div": [([randn(3, 4), prob(3, 4)], dict(reduction="batchmean")),
               ([randn(3, 4), randn(3, 4)], dict(log_target=True, reduction="sum"))],
    "cosine_similarity": [([randn(3, 4), randn(3, 4)], {}), ([randn(3, 4), randn(4)], dict(dim=-1))],
    "pairwise_distance": [([randn(3, 4), randn(3, 4)], dict(p=3.0, keepdim=True)), ([randn(4), randn(4)], {})],
    "cosine_embedding_loss": [([randn(4, 5), randn(4, 5), Fixed(np.array([1, -1, 1, -1], dtype=INT))],
                               dict(margin=0.1))],
    "margin_ranking_loss": [([randn(5), randn(5), labels(5)], dict(margin=0.2))],
    "hinge_embedding_loss": [([randn(3, 4), labels(3, 4)], dict(margin=0.5))],
    "triplet_margin_loss": [([randn(3, 4), randn(3, 4), randn(3, 4)], dict(swap=True, p=1.5))],
    "soft_margin_loss": [([randn(3, 4), labels(3, 4)], {})],
    "multilabel_soft_margin_loss": [([randn(3, 4), prob(3, 4)], dict(weight=_w(1, 2, 3, 4)))],
    "multi_margin_loss": [([randn(4, 5), idx(0, 3, 2, 4)], dict(p=2, margin=0.5, weight=_w(1, 2, 3, 4, 5))),
                          ([randn(5), Fixed(np.array(1, dtype=INT))], dict(reduction="none"))],
    "poisson_nll_loss": [([randn(3, 4), pos(3, 4)], dict(full=True)),
                         ([pos(3, 4), pos(3, 4)], dict(log_input=False, reduction="sum"))],
    "gaussian_nll_loss": [([randn(3, 4), randn(3, 4), pos(3)], dict(full=True)),
                          ([randn(3, 4), randn(3, 4), pos(3, 1)], dict(reduction="none"))],
    # -- normalization
    "group_norm": [([randn(2, 6, 5), Fixed(3), randn(6), randn(6)], {}),
                   ([randn(2, 4, 3, 2), Fixed(2)], dict(eps=1e-3))],
    "instance_norm": [([randn(2, 3, 5), Fixed(None), Fixed(None), randn(3), randn(3)], {}),
                      ([randn(2, 3, 4, 3)], dict(eps=1e-3))],
    "local_response_norm": [([randn(2, 6, 5)], dict(size=3, alpha=0.1, k=2.0)), ([randn(2, 5, 3, 2)], dict(size=4))],
    "embedding_bag": [([Fixed(np.array([0, 5, 2, 2, 1, 4, 3], dtype=INT)), randn(6, 3), idx(0, 2, 2, 5)],
                       dict(mode="max")),
                      ([Fixed(np.array([0, 5, 2, 2, 1, 4, 3], dtype=INT)), randn(6, 3), idx(0, 2, 2, 5, 6)],
                       dict(mode="mean", padding_idx=2, include_last_offset=True)),
                      ([Fixed(np.array([[0, 5, 2], [2, 1, 4]], dtype=INT)), randn(6, 3)],
                       dict(mode="sum", per_sample_weights=Fixed(np.linspace(-1, 1, 6).reshape(2, 3).astype(FLOAT))))],
    "normalize": [([randn(3, 4)], {}), ([randn(3, 4)], dict(p=1.0, dim=0)), ([randn(3, 4)], dict(p=math.inf))],
}


def _sample(specs, kw, seed):
    rng = np.random.default_rng(seed)
    args = [_materialize(s, rng) for s in specs]
    kw = {k: _materialize(v, rng) if isinstance(v, Fixed) else v for k, v in kw.items()}
    return args, kw


def _for(lib, args, kw, requires_grad=False):
    """The arguments for `lib` ('torch' or 'aotjax'): float arrays as (grad-requiring) tensors."""
    def conv(a):
        if isinstance(a, Fixed) and not isinstance(a.value, np.ndarray):
            return a.value
        if isinstance(a, Fixed):
            if lib == "torch":  # NOTE: torch's class indices are int64
                return torch.tensor(a.value.astype(np.int64) if a.value.dtype.kind == "i" else a.value)
            return aotjax.tensor(a.value)
        return torch.tensor(a, requires_grad=requires_grad) if lib == "torch" else aotjax.tensor(a)
    return [conv(a) for a in args], {k: conv(v) if isinstance(v, Fixed) else v for k, v in kw.items()}


def _close(got, want, tol=TOL):
    want = want.detach().numpy()
    got = as_np(got)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def _check_against_torch(name, cases, first: int = 0):
    ours, theirs = getattr(F, name), getattr(TF, name)
    for i, (specs, kw0) in enumerate(cases, first):
        args, kw = _sample(specs, kw0, seed=i)
        targs, tkw = _for("torch", args, kw, requires_grad=True)
        expected = theirs(*targs, **tkw)
        oargs, okw = _for("aotjax", args, kw)
        _close(ours(*oargs, **okw), expected)
        diff = [j for j, a in enumerate(args) if not isinstance(a, Fixed)]

        def fn(*d, oargs=oargs, okw=okw, diff=diff):
            full = list(oargs)
            for j, v in zip(diff, d):
                full[j] = v
            return ours(*full, **okw)

        if i == 0:  # NOTE: one compiled function per op
            _close(aotjax.jit(fn)(*[oargs[j] for j in diff]), expected)
        if expected.numel() == 0:
            continue
        ct = np.random.default_rng(10 + i).standard_normal(tuple(expected.shape)).astype(FLOAT)
        want = torch.autograd.grad(expected, [targs[j] for j in diff], torch.tensor(ct))
        _, vjp = aotjax.vjp(fn, *[oargs[j] for j in diff])
        for g, w in zip(vjp(aotjax.tensor(ct)), want):
            _close(g, w, 10 * TOL)


@pytest.mark.parametrize("name", list(CASES))
def test_op_matches_torch_eagerly_jitted_and_its_vjp(name):
    _check_against_torch(name, CASES[name][:1])


@pytest.mark.slow
@pytest.mark.parametrize("name", [name for name, cases in CASES.items() if len(cases) > 1])
def test_op_matches_torch_on_its_other_samples(name):
    _check_against_torch(name, CASES[name][1:], first=1)


INPLACE = [("relu_", {}), ("leaky_relu_", dict(negative_slope=0.3)), ("elu_", dict(alpha=0.5)), ("selu_", {}),
           ("celu_", dict(alpha=2.0)), ("hardtanh_", dict(min_val=-0.3, max_val=0.4)), ("rrelu_", {}),
           ("threshold_", dict(threshold=0.0, value=3.0))]


def test_inplace_forms_write_torchs_values_into_their_input_eagerly_and_under_jit():
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(FLOAT)

    def all_inplace(*ts):
        return [getattr(F, name)(t, **kw) for t, (name, kw) in zip(ts, INPLACE)]

    eager = [aotjax.tensor(x) for _ in INPLACE]
    jitted = [aotjax.tensor(x) for _ in INPLACE]
    outs = all_inplace(*eager)
    aotjax.jit(all_inplace)(*jitted)
    for (name, kw), e, out, j in zip(INPLACE, eager, outs, jitted):
        t = torch.tensor(x)
        getattr(TF, name)(t, **kw)
        assert out is e, name
        _close(e, t)
        _close(j, t)
    for name in ("relu6", "hardswish", "hardsigmoid", "mish", "elu", "selu", "celu", "leaky_relu", "hardtanh"):
        a, t = aotjax.tensor(x), torch.tensor(x)
        assert getattr(F, name)(a, inplace=True) is a
        getattr(TF, name)(t, inplace=True)
        _close(a, t)


def test_integer_inputs_as_torch():
    x = np.array([-3, -1, 0, 2, 5], dtype=INT)
    for name, kw in [("hardtanh", {}), ("relu6", {}), ("threshold", dict(threshold=1, value=7)), ("softsign", {})]:
        got, want = getattr(F, name)(aotjax.tensor(x), **kw), getattr(TF, name)(torch.tensor(x), **kw)
        assert got.tolist() == want.tolist() and (got.dtype == INT) == (want.dtype != torch.float32), name
    for name in ("leaky_relu", "elu", "hardshrink", "softplus", "mish"):
        with pytest.raises(DTypeError, match=f"{name}: expected a floating-point tensor"):
            getattr(F, name)(aotjax.tensor(x))


def test_one_hot_matches_torch():
    t = np.array([[0, 3], [2, 1]], dtype=INT)
    tt = torch.tensor(t.astype(np.int64))
    _close(F.one_hot(aotjax.tensor(t)), TF.one_hot(tt).to(torch.int64 if X64 else torch.int32))
    _close(F.one_hot(aotjax.tensor(t), 6), TF.one_hot(tt, 6).to(torch.int64 if X64 else torch.int32))
    got = aotjax.jit(lambda a: F.one_hot(a, 5))(aotjax.tensor(t))
    assert got.shape == (2, 2, 5) and got.dtype == INT and as_np(got).sum() == 4
    assert F.one_hot(aotjax.zeros(0, dtype=INT), 3).shape == (0, 3)
    with pytest.raises(IndexError, match="one_hot: class values must be in"):
        F.one_hot(aotjax.tensor([0, 5]), 3)
    with pytest.raises(DTypeError, match="one_hot is only applicable to index tensor"):
        F.one_hot(aotjax.tensor([0.0]), 3)


def _copy_into(ours, theirs):
    theirs.to(TORCH_FLOAT)
    with torch.no_grad():
        for p in theirs.parameters():
            p.copy_(torch.randn_like(p).float())  # NOTE: float32 values: our layers' parameters are float32
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    assert list(ours.state_dict()) == list(theirs.state_dict())


LAYERS = [
    ("LeakyReLU", (0.2,), (3, 4)), ("ELU", (0.5,), (3, 4)), ("SELU", (), (3, 4)), ("CELU", (1.5,), (3, 4)),
    ("Softplus", (2.0, 3.0), (3, 4)), ("Hardtanh", (-0.5, 0.5), (3, 4)), ("ReLU6", (), (3, 4)),
    ("Hardswish", (), (3, 4)), ("Hardsigmoid", (), (3, 4)), ("Mish", (), (3, 4)), ("LogSigmoid", (), (3, 4)),
    ("GLU", (0,), (4, 3)), ("PReLU", (3,), (2, 3, 4)), ("Softsign", (), (3, 4)), ("Tanhshrink", (), (3, 4)),
    ("Softshrink", (0.3,), (3, 4)), ("Hardshrink", (0.3,), (3, 4)), ("Threshold", (0.1, 2.0), (3, 4)),
    ("LogSoftmax", (1,), (3, 4)), ("Softmin", (1,), (3, 4)), ("RReLU", (), (3, 4)),
    ("GroupNorm", (2, 4), (2, 4, 3)), ("InstanceNorm1d", (3,), (2, 3, 5)), ("InstanceNorm2d", (3, 1e-5, 0.1, True),
                                                                            (2, 3, 4, 3)),
    ("InstanceNorm3d", (2,), (2, 2, 3, 2, 3)), ("LocalResponseNorm", (3,), (2, 5, 4)), ("CosineSimilarity", (), (3, 4)),
    ("PairwiseDistance", (), (3, 4)),
]


def test_embedding_bag_layer_matches_torch():
    ours = aotjax.nn.EmbeddingBag(6, 3, mode="max", padding_idx=1, dtype=FLOAT)
    theirs = torch.nn.EmbeddingBag(6, 3, mode="max", padding_idx=1)
    _copy_into(ours, theirs)
    inp, off = np.array([0, 1, 2, 5, 4], dtype=INT), np.array([0, 2], dtype=INT)
    _close(ours(aotjax.tensor(inp), aotjax.tensor(off)),
           theirs(torch.tensor(inp.astype(np.int64)), torch.tensor(off.astype(np.int64))))
    assert repr(ours) == repr(theirs)


@pytest.mark.parametrize("name, args, shape", LAYERS, ids=[layer[0] for layer in LAYERS])
def test_layers_match_torch_with_the_same_weights(name, args, shape):
    ours, theirs = getattr(aotjax.nn, name)(*args), getattr(torch.nn, name)(*args)
    if name == "RReLU":
        ours.eval(), theirs.eval()
    _copy_into(ours, theirs)
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(shape).astype(FLOAT) for _ in range(2 if "Distance" in name or "Cosine" in name
                                                                       else 1)]
    _close(ours(*map(aotjax.tensor, inputs)), theirs(*map(torch.tensor, inputs)))
    assert repr(ours) == repr(theirs)


def test_instance_norm_tracks_running_statistics_as_torch():
    ours = aotjax.nn.InstanceNorm1d(3, momentum=0.3, track_running_stats=True, dtype=FLOAT)
    theirs = torch.nn.InstanceNorm1d(3, momentum=0.3, track_running_stats=True).to(TORCH_FLOAT)
    x = np.random.default_rng(0).standard_normal((4, 3, 5)).astype(FLOAT) * 2 + 1
    for _ in range(2):
        _close(ours(aotjax.tensor(x)), theirs(torch.tensor(x)))
    _close(ours.running_mean, theirs.running_mean)
    _close(ours.running_var, theirs.running_var)
    ours.eval(), theirs.eval()
    _close(ours(aotjax.tensor(x[0])), theirs(torch.tensor(x[0])))


LOSS_LAYERS = [
    ("CrossEntropyLoss", dict(label_smoothing=0.1, ignore_index=1), [randn(4, 5), idx(0, 1, 2, 4)]),
    ("NLLLoss", dict(reduction="sum"), [randn(4, 5), idx(0, 1, 2, 4)]),
    ("MSELoss", {}, [randn(3, 4), randn(3, 4)]), ("L1Loss", dict(reduction="none"), [randn(3, 4), randn(3, 4)]),
    ("SmoothL1Loss", dict(beta=0.3), [randn(3, 4), randn(3, 4)]),
    ("HuberLoss", dict(delta=0.3), [randn(3, 4), randn(3, 4)]),
    ("BCELoss", {}, [prob(3, 4), prob(3, 4)]), ("BCEWithLogitsLoss", {}, [randn(3, 4), prob(3, 4)]),
    ("KLDivLoss", dict(reduction="batchmean"), [randn(3, 4), prob(3, 4)]),
    ("CosineEmbeddingLoss", dict(margin=0.2), [randn(3, 4), randn(3, 4), labels(3)]),
    ("MarginRankingLoss", {}, [randn(3), randn(3), labels(3)]), ("HingeEmbeddingLoss", {}, [randn(3, 4), labels(3, 4)]),
    ("TripletMarginLoss", dict(margin=0.5), [randn(3, 4), randn(3, 4), randn(3, 4)]),
    ("SoftMarginLoss", {}, [randn(3, 4), labels(3, 4)]), ("MultiLabelSoftMarginLoss", {}, [randn(3, 4), prob(3, 4)]),
    ("MultiMarginLoss", dict(margin=0.5), [randn(4, 5), idx(0, 1, 2, 4)]),
    ("PoissonNLLLoss", dict(full=True), [randn(3, 4), pos(3, 4)]),
    ("GaussianNLLLoss", dict(full=True), [randn(3, 4), randn(3, 4), pos(3, 4)]),
]


@pytest.mark.parametrize("name, kw, specs", LOSS_LAYERS, ids=[layer[0] for layer in LOSS_LAYERS])
def test_loss_layers_match_torch(name, kw, specs):
    args, _ = _sample(specs, {}, seed=0)
    targs, _ = _for("torch", args, {})
    oargs, _ = _for("aotjax", args, {})
    _close(getattr(aotjax.nn, name)(**kw)(*oargs), getattr(torch.nn, name)(**kw)(*targs))


def test_weighted_loss_layers_keep_the_weight_as_a_buffer():
    w = np.arange(1, 6).astype(FLOAT)
    ours, theirs = aotjax.nn.CrossEntropyLoss(weight=aotjax.tensor(w)), torch.nn.CrossEntropyLoss(torch.tensor(w))
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["weight"]
    x, t = np.random.default_rng(0).standard_normal((4, 5)).astype(FLOAT), np.array([0, 1, 4, 2], dtype=INT)
    _close(ours(aotjax.tensor(x), aotjax.tensor(t)), theirs(torch.tensor(x), torch.tensor(t.astype(np.int64))))


@pytest.mark.parametrize("name, shape", [("dropout1d", (4, 50, 6)), ("dropout2d", (4, 50, 3, 2)),
                                         ("dropout3d", (4, 50, 2, 1, 3))])
def test_channel_dropout_zeroes_whole_channels(name, shape):
    x = aotjax.ones(*shape)
    y = as_np(getattr(F, name)(x, p=0.25, key=aotjax.random.key(0)))
    lead = 2 if len(shape) == {"dropout1d": 3, "dropout2d": 4, "dropout3d": 5}[name] else 1
    per_channel = y.reshape(*shape[:lead], -1)
    assert np.isclose(y, 0.0).sum() + np.isclose(y, 1 / 0.75).sum() == y.size
    assert (per_channel == per_channel[..., :1]).all()  # one decision per channel
    assert 0.1 < (per_channel[..., 0] == 0).mean() < 0.4
    assert getattr(F, name)(x, 0.25, training=False) is x
    layer = getattr(aotjax.nn, name.capitalize())(0.25)
    per_channel = as_np(layer(x)).reshape(*shape[:lead], -1)
    assert (per_channel == per_channel[..., :1]).all() and (per_channel[..., 0] == 0).any()
    assert layer.eval()(x) is x


def test_alpha_dropout_keeps_a_standard_normal_standard():
    x = aotjax.tensor(np.random.default_rng(0).standard_normal(10000).astype(FLOAT))
    y = as_np(F.alpha_dropout(x, 0.2, training=True, key=aotjax.random.key(1)))
    assert abs(y.mean()) < 0.05 and abs(y.var() - 1) < 0.08
    dropped = -1.7580993408473766 / math.sqrt((1.7580993408473766 ** 2 * 0.2 + 1) * 0.8) + 1.7580993408473766 * 0.2 / \
        math.sqrt((1.7580993408473766 ** 2 * 0.2 + 1) * 0.8)
    assert 0.15 < np.isclose(y, dropped, atol=1e-5).mean() < 0.25
    assert F.alpha_dropout(x, 0.2) is x  # training=False by default
    feat = as_np(F.feature_alpha_dropout(aotjax.ones(2, 100, 3), 0.5, training=True))
    assert (feat == feat[..., :1]).all() and len(np.unique(feat)) == 2


def test_rrelu_in_training_draws_slopes_in_its_bounds():
    x = aotjax.full((1000,), -1.0)
    y = as_np(F.rrelu(x, 0.1, 0.3, training=True))
    assert (y <= -0.1 + 1e-6).all() and (y >= -0.3 - 1e-6).all() and y.std() > 0.03


def test_errors_name_the_op_and_the_problem():
    with pytest.raises(ShapeError, match="glu: Halving dimension must be even"):
        F.glu(aotjax.ones(3))
    with pytest.raises(ShapeError, match="group_norm: expected the number of channels"):
        F.group_norm(aotjax.ones(2, 3, 4), 2)
    with pytest.raises(IndexError, match="nll_loss: target 5 is out of bounds"):
        F.nll_loss(aotjax.ones(2, 3), aotjax.tensor([0, 5]))
    with pytest.raises(ValueError, match="reduction must be one of"):
        F.l1_loss(aotjax.ones(2), aotjax.ones(2), reduction="avg")
    with pytest.raises(ShapeError, match="binary_cross_entropy: target size"):
        F.binary_cross_entropy(aotjax.ones(2, 1), aotjax.ones(2))
    with pytest.raises(ShapeError, match="prelu: mismatch of parameter numbers"):
        F.prelu(aotjax.ones(2, 3), aotjax.ones(2))
    with pytest.raises(ValueError, match="smooth_l1_loss: beta must not be negative"):
        F.smooth_l1_loss(aotjax.ones(2), aotjax.ones(2), beta=-1.0)
    with pytest.raises(ShapeError, match="dropout2d: expected a 4-D"):
        F.dropout2d(aotjax.ones(6))  # NOTE: a 2-D input is dropped elementwise, with torch's warning
    with pytest.raises(ValueError, match="one_hot: num_classes=-1 needs the tensor's values"):
        aotjax.jit(F.one_hot)(aotjax.tensor([1]))


@pytest.mark.slow
def test_vmap_of_losses_and_their_gradients_is_the_loop_in_torch():
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((3, 4, 5)).astype(FLOAT), rng.uniform(0.1, 0.9, (3, 4, 5)).astype(FLOAT)
    t = np.array([[0, 4, 1, 2], [3, 3, 0, 1], [2, 1, 4, 0]], dtype=INT)

    def losses(a, p, c):
        return (F.nll_loss(F.log_softmax(a, 1), c, ignore_index=1) + F.binary_cross_entropy_with_logits(a, p)
                + F.group_norm(a.unsqueeze(0), 1).pow(2).mean() + F.huber_loss(a, p, delta=0.5))

    got = aotjax.vmap(lambda a, p, c: (losses(a, p, c), aotjax.grad(losses)(a, p, c)))(
        aotjax.tensor(x), aotjax.tensor(y), aotjax.tensor(t))
    for i in range(3):
        a, p, c = torch.tensor(x[i], requires_grad=True), torch.tensor(y[i]), torch.tensor(t[i].astype(np.int64))
        want = (TF.nll_loss(TF.log_softmax(a, 1), c, ignore_index=1) + TF.binary_cross_entropy_with_logits(a, p)
                + TF.group_norm(a.unsqueeze(0), 1).pow(2).mean() + TF.huber_loss(a, p, delta=0.5))
        (g,) = torch.autograd.grad(want, a)
        _close(got[0][i], want, 10 * TOL)
        _close(got[1][i], g, 10 * TOL)


def test_every_new_functional_name_is_torchs_with_torchs_argument_names():
    import inspect

    from aotjax.ops.nn import activations, losses, normalization

    for name in activations.FUNCTIONAL + losses.FUNCTIONAL + normalization.FUNCTIONAL:
        ours, theirs = getattr(F, name), getattr(TF, name)
        try:
            legacy = ("size_average", "reduce", "_stacklevel")
            want = [p for p in inspect.signature(theirs).parameters if p not in legacy]
        except ValueError:  # NOTE: a builtin without a signature
            continue
        got = list(inspect.signature(ours).parameters)
        assert got[:len(want)] == want or set(want) <= set(got), (name, got, want)


def test_every_new_layer_takes_torchs_arguments():
    import inspect

    from aotjax.nn.modules import embedding_bag, groupnorm, loss, nonlinearity

    legacy = ("self", "size_average", "reduce", "min_value", "max_value")  # NOTE: deprecated in torch
    for name in nonlinearity.__all__ + loss.__all__ + groupnorm.__all__ + embedding_bag.__all__:
        want = [p for p in inspect.signature(getattr(torch.nn, name).__init__).parameters if p not in legacy]
        assert [p for p in inspect.signature(getattr(aotjax.nn, name).__init__).parameters if p != "self"] == want, name
