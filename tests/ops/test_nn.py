"""nn composites against references written from PyTorch's definitions (NumPy, and jax.nn where it
has the same op), eager and traced. NumPy references keep the tests fast: jax's eager ops compile
once per shape."""
import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import aotjax
import aotjax.nn.functional as F
from aotjax.core.errors import DTypeError, ShapeError
from tests.helpers import FLOAT, asks_for_64_bits, check_traced_matches_eager

T = aotjax.tensor
RTOL, ATOL = 2e-5, 2e-6


def rand(*shape, seed=0, dtype=np.float32):
    return (np.random.default_rng(seed).standard_normal(shape) * 2).astype(dtype)


def np_log_softmax(x, axis):
    x = np.asarray(x, np.float64)
    shifted = x - x.max(axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis, keepdims=True))


def np_softmax(x, axis):
    return np.exp(np_log_softmax(x, axis))


def close(out, expected, rtol=RTOL, atol=ATOL):
    expected = np.asarray(expected)
    assert out.shape == expected.shape, (out.shape, expected.shape)
    assert out.dtype == expected.dtype, (out.dtype, expected.dtype)
    np.testing.assert_allclose(np.asarray(out.numpy(), np.float64), np.asarray(expected, np.float64), rtol, atol)


def close_f32(out, expected, rtol=RTOL, atol=1e-5):
    """`out` is float32 and close to the float64 reference `expected`."""
    close(out, np.asarray(expected).astype(np.float32), rtol, atol)


# -- softmax ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape,dim", [((5,), 0), ((3, 4), 0), ((2, 3, 4), -1)])
def test_softmax_and_log_softmax(shape, dim):
    a = rand(*shape) * 10  # large logits: the max must be subtracted
    close_f32(aotjax.softmax(T(a), dim), np_softmax(a, dim))
    close_f32(F.log_softmax(T(a), dim), np_log_softmax(a, dim))
    close_f32(T(a).softmax(dim), np_softmax(a, dim))
    close_f32(T(a).log_softmax(dim=dim), np_log_softmax(a, dim))
    check_traced_matches_eager(lambda x: (x.softmax(dim), x.log_softmax(dim)), T(a))


def test_softmax_matches_jax_nn():
    a = rand(3, 4) * 10
    close(aotjax.softmax(T(a), 1), jax.nn.softmax(a, axis=1))
    close(aotjax.log_softmax(T(a), 1), jax.nn.log_softmax(a, axis=1), atol=1e-5)


@asks_for_64_bits
def test_softmax_is_stable_and_keeps_dtype():
    a = np.array([[1000.0, 1000.0], [-1000.0, 0.0]], np.float32)
    close_f32(aotjax.softmax(T(a), -1), np_softmax(a, -1))
    close_f32(aotjax.log_softmax(T(a), -1), np_log_softmax(a, -1))
    h = rand(2, 2).astype(np.float16)
    close(aotjax.softmax(T(h), -1), np_softmax(h, -1).astype(np.float16), 1e-3, 1e-3)
    close(aotjax.softmax(T(a), -1, dtype=aotjax.float64), np_softmax(a, -1).astype(FLOAT))


def test_softmax_rejects_integers():
    with pytest.raises(DTypeError, match="softmax: expected a floating-point tensor"):
        aotjax.softmax(T([1, 2]), 0)


# -- normalization ---------------------------------------------------------------------------------
def ref_layer_norm(x, k, w=None, b=None, eps=1e-5):
    x = x.astype(np.float64)
    axes = tuple(range(x.ndim - k, x.ndim))
    mu = x.mean(axes, keepdims=True)
    var = ((x - mu) ** 2).mean(axes, keepdims=True)
    y = (x - mu) / np.sqrt(var + eps)
    return y * (1 if w is None else w) + (0 if b is None else b)


@pytest.mark.parametrize("shape,normalized_shape", [((4, 8), 8), ((2, 3, 4), (3, 4)), ((2, 3, 4), [4])])
@pytest.mark.parametrize("affine", [False, True])
def test_layer_norm(shape, normalized_shape, affine):
    a = rand(*shape) + 3
    k = 1 if isinstance(normalized_shape, int) else len(normalized_shape)
    w, b = (rand(*shape[-k:], seed=1), rand(*shape[-k:], seed=2)) if affine else (None, None)
    args = (T(w), T(b)) if affine else (None, None)
    close_f32(aotjax.layer_norm(T(a), normalized_shape, *args), ref_layer_norm(a, k, w, b))
    close_f32(F.layer_norm(T(a), normalized_shape, *args, eps=0.1), ref_layer_norm(a, k, w, b, 0.1))
    if affine:
        check_traced_matches_eager(lambda x, w, b: F.layer_norm(x, normalized_shape, w, b), T(a), T(w), T(b),
                                   atol=1e-5)


def ref_rms_norm(x, k, w=None, eps=None):
    eps = np.finfo(x.dtype).eps if eps is None else eps
    x = x.astype(np.float64)
    axes = tuple(range(x.ndim - k, x.ndim))
    y = x / np.sqrt((x * x).mean(axes, keepdims=True) + eps)
    return y * (1 if w is None else w)


@pytest.mark.parametrize("eps", [None, 1e-3])
def test_rms_norm(eps):
    a, w = rand(3, 4, 6), rand(6, seed=1)
    close_f32(aotjax.rms_norm(T(a), 6, T(w), eps=eps), ref_rms_norm(a, 1, w, eps))
    close_f32(F.rms_norm(T(a), (4, 6), eps=eps), ref_rms_norm(a, 2, None, eps))
    a64 = a.astype(FLOAT)  # float64 where the mode has it: eps is its own
    close(F.rms_norm(T(a64), [6]), ref_rms_norm(a64, 1).astype(FLOAT))
    check_traced_matches_eager(lambda x, w: F.rms_norm(x, [6], w, eps), T(a), T(w), atol=1e-5)


def test_norm_shape_errors():
    with pytest.raises(ShapeError, match=r"layer_norm: normalized_shape \[5\] must be the trailing dimensions"):
        F.layer_norm(aotjax.ones(2, 4), 5)
    with pytest.raises(ShapeError, match="rms_norm: normalized_shape"):
        F.rms_norm(aotjax.ones(4), (2, 4))


# -- losses ----------------------------------------------------------------------------------------
def ref_cross_entropy(logits, target, weight=None, ignore_index=-100, reduction="mean", ls=0.0):
    """Per-sample loss -sum_c w_c q_c log p_c with q = (1 - ls) onehot(target) + ls / C, from PyTorch's
    definition; 'mean' divides by the summed weight of the non-ignored targets."""
    logp = np_log_softmax(logits, axis=1)
    C = logits.shape[1]
    w = np.ones(C) if weight is None else weight.astype(np.float64)
    wb = w.reshape((1, C) + (1,) * (logits.ndim - 2))
    target = np.asarray(target)
    if np.issubdtype(target.dtype, np.integer):
        valid = target != ignore_index
        t = np.where(valid, target, 0)
        q = (1 - ls) * np.moveaxis(np.eye(C)[t], -1, 1) + ls / C
        loss = -(wb * q * logp).sum(1) * valid
        if reduction == "mean":
            return loss.sum() / (w[t] * valid).sum()
    else:
        q = target * (1 - ls) + ls / C
        loss = -(wb * q * logp).sum(1)
        if reduction == "mean":
            return loss.mean()
    return loss.sum() if reduction == "sum" else loss


CE_CASES = [  # name, logits shape, target kind, kwargs
    ("basic", (6, 4), "index", {}),
    ("sum", (6, 4), "index", {"reduction": "sum"}),
    ("none", (6, 4), "index", {"reduction": "none"}),
    ("weight", (6, 4), "index", {"weight": True}),
    ("ignore", (6, 4), "index", {"ignore": True}),
    ("ignore_weight_none", (6, 4), "index", {"ignore": True, "weight": True, "reduction": "none"}),
    ("smoothing", (6, 4), "index", {"label_smoothing": 0.1}),
    ("smoothing_weight_ignore", (6, 4), "index", {"label_smoothing": 0.2, "weight": True, "ignore": True}),
    ("smoothing_sum", (6, 4), "index", {"label_smoothing": 0.2, "reduction": "sum", "ignore": True}),
    ("spatial", (2, 3, 5), "index", {"weight": True, "ignore": True}),
    ("spatial_none", (2, 3, 5), "index", {"reduction": "none", "label_smoothing": 0.3}),
    ("unbatched", (4,), "index", {}),
    ("probs", (6, 4), "probs", {}),
    ("probs_weight_smoothing", (6, 4), "probs", {"weight": True, "label_smoothing": 0.1}),
    ("probs_spatial_none", (2, 3, 5), "probs", {"reduction": "none"}),
    ("probs_unbatched", (4,), "probs", {"reduction": "sum"}),
]


@pytest.mark.parametrize("name,shape,kind,kw", CE_CASES, ids=[c[0] for c in CE_CASES])
def test_cross_entropy(name, shape, kind, kw):
    rng = np.random.default_rng(1)
    logits = rand(*shape)
    C = shape[1] if len(shape) > 1 else shape[0]
    tshape = (shape[0],) + shape[2:] if len(shape) > 1 else ()
    if kind == "index":
        target = rng.integers(0, C, tshape)
        if kw.get("ignore"):
            target = np.where(rng.random(tshape) < 0.3, 7, target)
            target.flat[0] = 0  # at least one counted target
    else:
        target = np_softmax(rand(*shape, seed=3), axis=0 if len(shape) == 1 else 1).astype(np.float32)
    weight = (rng.random(C) + 0.5).astype(np.float32) if kw.get("weight") else None
    args = dict(reduction=kw.get("reduction", "mean"), label_smoothing=kw.get("label_smoothing", 0.0))
    ignore = 7 if kw.get("ignore") else -100
    out = F.cross_entropy(T(logits), T(target), None if weight is None else T(weight), ignore_index=ignore, **args)
    batched = (lambda a: a[None]) if len(shape) == 1 else (lambda a: a)
    expected = ref_cross_entropy(batched(logits), batched(target), weight, ignore, args["reduction"],
                                 args["label_smoothing"])
    close_f32(out, expected[0] if len(shape) == 1 and args["reduction"] == "none" else expected)
    tensors = (T(logits), T(target)) + (() if weight is None else (T(weight),))
    check_traced_matches_eager(lambda x, t, *w: F.cross_entropy(x, t, *w, ignore_index=ignore, **args), *tensors,
                               atol=1e-5)


def test_cross_entropy_errors():
    with pytest.raises(ShapeError, match=r"cross_entropy: class-index targets .* must have shape \[3\]"):
        F.cross_entropy(aotjax.ones(3, 4), T([0, 1]))
    with pytest.raises(ShapeError, match="cross_entropy: weight must have one entry per class"):
        F.cross_entropy(aotjax.ones(3, 4), T([0, 1, 2]), weight=aotjax.ones(3))
    with pytest.raises(ValueError, match="cross_entropy: reduction must be one of"):
        F.cross_entropy(aotjax.ones(3, 4), T([0, 1, 2]), reduction="avg")
    with pytest.raises(DTypeError, match="cross_entropy: target must hold class indices"):
        F.cross_entropy(aotjax.ones(3, 4), T([True, False, True]))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss(reduction):
    a, b = rand(3, 4), rand(3, 4, seed=1)
    sq = (a.astype(np.float64) - b) ** 2
    expected = {"mean": sq.mean(), "sum": sq.sum(), "none": sq}[reduction]
    close_f32(F.mse_loss(T(a), T(b), reduction=reduction), expected)
    check_traced_matches_eager(lambda x, y: F.mse_loss(x, y, reduction), T(a), T(b))


# -- dropout ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_dropout_matches_bernoulli_mask(p):
    a, key = rand(4, 5), aotjax.random.key(3)
    mask = aotjax.random.bernoulli(key, 1 - p, (4, 5)).numpy()  # equal to jax.random's (test_random.py)
    close(aotjax.dropout(T(a), p, key=key), np.where(mask, a / np.float32(1 - p), 0).astype(np.float32))
    check_traced_matches_eager(lambda x, k: F.dropout(x, p, key=k), T(a), key)


def test_dropout_identity_and_edges():
    x = T(rand(3))
    assert F.dropout(x, 0.5, training=False) is x
    assert F.dropout(x, 0.0, key=aotjax.random.key(0)) is x
    close(F.dropout(x, 1.0, key=aotjax.random.key(0)), np.zeros(3, np.float32))
    kept = F.dropout(aotjax.ones(10000), 0.25, key=aotjax.random.key(1)).numpy()
    assert set(np.unique(kept).tolist()) <= {0.0, np.float32(1 / 0.75)}
    assert abs((kept > 0).mean() - 0.75) < 0.03
    aotjax.manual_seed(3)
    first = F.dropout(aotjax.ones(100), 0.5)  # no key: the default generator draws, and advances
    aotjax.manual_seed(3)
    assert F.dropout(aotjax.ones(100), 0.5).tolist() == first.tolist() != F.dropout(aotjax.ones(100), 0.5).tolist()
    with pytest.raises(ValueError, match="dropout: p must be a probability"):
        F.dropout(x, 1.5, key=aotjax.random.key(0))


# -- embedding -------------------------------------------------------------------------------------
@pytest.mark.parametrize("idx_shape", [(), (5,), (2, 3)])
def test_embedding(idx_shape):
    w = rand(7, 4)
    idx = np.random.default_rng(0).integers(0, 7, idx_shape)
    close(F.embedding(T(idx), T(w)), w[idx])
    check_traced_matches_eager(F.embedding, T(idx), T(w))


def test_embedding_errors():
    with pytest.raises(DTypeError, match="embedding: indices must be an integer tensor"):
        F.embedding(aotjax.ones(2), aotjax.ones(3, 2))
    with pytest.raises(ShapeError, match="embedding: weight must be 2-d"):
        F.embedding(T([0]), aotjax.ones(3))


# -- attention -------------------------------------------------------------------------------------
def ref_sdpa(q, k, v, mask=None, is_causal=False, scale=None):
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = (q @ np.swapaxes(k, -1, -2)) * scale
    if is_causal:
        mask = np.tril(np.ones((q.shape[-2], k.shape[-2]), bool))
    if mask is not None:
        s = np.where(mask, s, -np.inf) if mask.dtype == bool else s + mask
    return np_softmax(s, axis=-1) @ v


SDPA_CASES = [  # name, (batch..., heads), L, S, E, Ev, kwargs
    ("plain", (2, 2), 4, 5, 8, 6, {}),
    ("unbatched", (), 4, 5, 8, 6, {}),
    ("causal", (2, 2), 4, 4, 8, 6, {"is_causal": True}),
    ("causal_rect", (2, 2), 4, 5, 8, 6, {"is_causal": True}),
    ("bool_mask", (2, 2), 4, 5, 8, 6, {"mask": "bool"}),
    ("float_mask", (2, 2), 4, 5, 8, 6, {"mask": "float"}),
    ("scale", (2, 2), 4, 5, 8, 6, {"scale": 0.5}),
]


@pytest.mark.parametrize("name,batch,L,S,E,Ev,kw", SDPA_CASES, ids=[c[0] for c in SDPA_CASES])
def test_scaled_dot_product_attention(name, batch, L, S, E, Ev, kw):
    q, k, v = rand(*batch, L, E), rand(*batch, S, E, seed=1), rand(*batch, S, Ev, seed=2)
    mask = None
    if kw.get("mask") == "bool":
        mask = np.random.default_rng(3).random((L, S)) < 0.7
        mask[:, 0] = True  # no fully masked row
    elif kw.get("mask") == "float":
        mask = rand(*batch, L, S, seed=4)
    expected = ref_sdpa(q, k, v, mask, kw.get("is_causal", False), kw.get("scale"))
    fn = lambda q, k, v, *m: F.scaled_dot_product_attention(  # noqa: E731
        q, k, v, *m, is_causal=kw.get("is_causal", False), scale=kw.get("scale"))
    tensors = (T(q), T(k), T(v)) + (() if mask is None else (T(mask),))
    close_f32(fn(*tensors), expected)
    check_traced_matches_eager(fn, *tensors, atol=1e-5)


def test_sdpa_matches_jax_nn():
    # jax.nn.dot_product_attention takes [batch, seq, heads, dim]; PyTorch (and aotjax) [batch, heads, seq, dim]
    q, k, v = rand(2, 2, 4, 8), rand(2, 2, 4, 8, seed=1), rand(2, 2, 4, 8, seed=2)
    bhsd = lambda a: jnp.swapaxes(a, 1, 2)  # noqa: E731
    sdpa = jax.jit(lambda q, k, v: bhsd(jax.nn.dot_product_attention(bhsd(q), bhsd(k), bhsd(v), is_causal=True)))
    expected = sdpa(q, k, v)
    close(F.scaled_dot_product_attention(T(q), T(k), T(v), is_causal=True), expected, atol=1e-5)


def test_sdpa_dropout():
    q, k, v = rand(2, 2, 4, 8), rand(2, 2, 5, 8, seed=1), rand(2, 2, 5, 6, seed=2)
    key = aotjax.random.key(0)
    out = F.scaled_dot_product_attention(T(q), T(k), T(v), dropout_p=0.5, dropout_key=key)
    weights = np_softmax((q.astype(np.float64) @ np.swapaxes(k, -1, -2)) / math.sqrt(8), axis=-1)
    keep = aotjax.random.bernoulli(key, 0.5, weights.shape).numpy()
    close_f32(out, np.where(keep, weights * 2, 0) @ v)
    with pytest.raises(TypeError, match="dropout_p > 0 needs dropout_key"):
        F.scaled_dot_product_attention(T(q), T(q), T(q), dropout_p=0.5)
    with pytest.raises(ValueError, match="either attn_mask or is_causal"):
        F.scaled_dot_product_attention(T(q), T(q), T(q), attn_mask=aotjax.ones(4, 4), is_causal=True)


def test_causal_mask_is_staged():
    q = T(rand(4, 8))
    jaxpr = aotjax.make_jaxpr(lambda q: F.scaled_dot_product_attention(q, q, q, is_causal=True))(q)
    assert "full" in [e.primitive.name for e in jaxpr.jaxpr.eqns] and not jaxpr.consts


def test_functional_namespace():
    assert set(F.__all__) >= {"softmax", "log_softmax", "layer_norm", "rms_norm", "dropout", "cross_entropy",
                              "mse_loss", "embedding", "scaled_dot_product_attention", "linear", "batch_norm",
                              "conv2d", "max_pool2d", "pad", "interpolate"}
    assert all(callable(getattr(F, name)) for name in F.__all__)
    assert aotjax.nn.functional is F and aotjax.softmax is F.softmax


@pytest.mark.parametrize("shape,channel_dims", [((40, 60), 2), ((4, 6, 50), 2), ((4, 6, 5, 5), 2), ((1, 6, 5, 5), 2)])
def test_dropout2d_reads_every_rank_torch_reads_with_its_warnings(shape, channel_dims):
    """torch's dropout2d: 4-D is (N, C, H, W); 3-D is read as (N, C, L) and 2-D elementwise, each with a warning."""
    import torch

    def run(T):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            y = T.nn.functional.dropout2d(T.ones(*shape), 0.5)
        return np.asarray(y.numpy()), [w.category for w in caught]

    (ours, our_warnings), (theirs, their_warnings) = run(aotjax), run(torch)
    assert our_warnings == their_warnings
    for y in (ours, theirs):  # NOTE: a dropped entry of the mask is zero across every dim after the channels
        flat = y.reshape(int(np.prod(shape[:channel_dims])), -1)
        assert all(len(set(row.tolist())) == 1 for row in flat)
        assert set(np.unique(y).tolist()) == {0.0, 2.0}
    with pytest.raises(Exception, match="dropout2d|Feature dropout"):
        aotjax.nn.functional.dropout2d(aotjax.ones(6), 0.5)
