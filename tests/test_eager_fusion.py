"""Composite ops (layer_norm, rms_norm, softmax, log_softmax, scaled_dot_product_attention, linear) called eagerly run
as one compiled program each (`aotjax.ops.calls.eager_fusion`): the same values, gradients (first and second order),
node names, layouts and errors as the composition run primitive by primitive, and as torch."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import aotjax
from aotjax.core.errors import ShapeError
from aotjax.ops.calls.eager_fusion import fusion_enabled
from aotjax.ops.linalg.matmul import linear
from aotjax.ops.nn.normalization import layer_norm
from tests.helpers import FLOAT

RTOL, ATOL = (1e-5, 1e-5) if FLOAT == np.float32 else (1e-10, 1e-10)


def _layer_norm(T, x, w, b):
    return T.nn.functional.layer_norm(x, (x.shape[-1],), w, b, eps=1e-5)


def _rms_norm(T, x, w, b):
    return T.nn.functional.rms_norm(x, (x.shape[-1],), w, eps=1e-6) + b


def _softmax(T, x, w, b):
    return T.softmax(x * w, -1) + T.log_softmax(x + b, 1)


def _linear_3d(T, x, w, b):
    return T.nn.functional.linear(x, w.reshape(1, -1).expand(3, 4), b[:3])


def _linear_2d_no_bias(T, x, w, b):
    return T.nn.functional.linear(x[0], w.reshape(1, -1).expand(3, 4))


def _attention(T, x, w, b):
    q = (x * w).reshape(2, 3, 2, 2).transpose(1, 2)  # NOTE: operands that are views, as a model's heads are
    k = (x + b).reshape(2, 3, 2, 2).transpose(1, 2)
    causal = T.nn.functional.scaled_dot_product_attention(q, k, q, is_causal=True)
    mask = T.tensor([[True, False, True], [True, True, False], [False, True, True]])
    masked = T.nn.functional.scaled_dot_product_attention(q, k, k, attn_mask=mask, scale=0.3)
    return causal + masked


CASES = {"layer_norm": _layer_norm, "rms_norm": _rms_norm, "softmax": _softmax, "linear_3d": _linear_3d,
         "linear_2d_no_bias": _linear_2d_no_bias, "attention": _attention}


def _inputs(T):
    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(s).astype(FLOAT) for s in ((2, 3, 4), (4,), (4,)))
    return [T.tensor(a, requires_grad=True) for a in (x, w, b)]


def _run(T, case):
    x, w, b = _inputs(T)
    y = case(T, x, w, b)
    (y * y).sum().backward()
    return y, [t.grad for t in (x, w, b)], y.grad_fn.name()


@pytest.mark.parametrize("name", list(CASES))
def test_fused_composites_match_the_composition_and_torch(name):
    case = CASES[name]
    fused = _run(aotjax, case)
    with fusion_enabled(False):
        composed = _run(aotjax, case)
    theirs = _run(torch, case)
    for ours in (fused, composed):
        np.testing.assert_allclose(ours[0].detach().numpy(), theirs[0].detach().numpy(), rtol=RTOL, atol=ATOL)
        for g, tg in zip(ours[1], theirs[1]):
            assert (g is None) == (tg is None)
            if g is not None:
                np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=RTOL, atol=ATOL)
    assert fused[0].stride() == composed[0].stride()
    if name != "attention":  # NOTE: torch's CPU flash kernel lays out its result [B, L, H, E], viewed as [B, H, L, E]
        assert fused[0].stride() == theirs[0].stride()


def test_a_fused_op_is_one_node_with_torchs_name():
    def names(T):
        x, w, b = _inputs(T)
        outs = (T.nn.functional.layer_norm(x, (4,), w, b), T.softmax(x, 1), T.log_softmax(x, -1),
                T.nn.functional.linear(x, w.reshape(1, 4), b[:1]), T.nn.functional.linear(x[0], w.reshape(1, 4), b[:1]),
                T.nn.functional.linear(x[0], w.reshape(1, 4)))
        return [o.grad_fn.name() for o in outs], [len(o.grad_fn.next_functions) for o in outs[:1]]
    assert names(aotjax) == names(torch)


def test_one_program_per_signature():
    x = aotjax.ones(2, 5, requires_grad=True)
    before = len(layer_norm.__wrapped__.eager_programs)
    for _ in range(3):
        layer_norm(x, (5,), eps=1e-3)
    layer_norm(aotjax.ones(2, 5), (5,), eps=1e-3)  # NOTE: the same signature without requires_grad
    assert len(layer_norm.__wrapped__.eager_programs) == before + 1
    layer_norm(x, (5,), eps=1e-4)  # NOTE: another eps is another program
    layer_norm(aotjax.ones(3, 5), (5,), eps=1e-3)  # NOTE: another shape too
    assert len(layer_norm.__wrapped__.eager_programs) == before + 3


def test_second_order_through_fused_ops_matches_torch():
    def run(T):
        x, w, b = _inputs(T)
        y = T.nn.functional.layer_norm(x, (4,), w, b)
        y = T.softmax(T.nn.functional.linear(y, w.reshape(1, 4).expand(4, 4), b), -1)
        (g,) = T.autograd.grad((y * y * y).sum(), w, create_graph=True)
        (g * g).sum().backward()
        return g.detach(), x.grad, b.grad
    for ours, theirs in zip(run(aotjax), run(torch)):
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-4, atol=1e-5)


def test_no_grad_and_plain_tensors_record_nothing():
    x, w, b = _inputs(aotjax)
    with aotjax.no_grad():
        y = aotjax.nn.functional.layer_norm(x, (4,), w, b)
    assert not y.requires_grad and y.grad_fn is None
    z = linear(x.detach(), w.detach().reshape(1, 4))
    assert not z.requires_grad
    with fusion_enabled(False):
        np.testing.assert_allclose(z.numpy(), linear(x.detach(), w.detach().reshape(1, 4)).numpy(), rtol=RTOL)


def test_a_fused_op_raises_as_the_composition_at_every_call():
    x = aotjax.ones(2, 3)
    for _ in range(2):  # NOTE: a signature that failed is not cached as a program
        with pytest.raises(ShapeError, match=r"layer_norm: normalized_shape \[4\].*test_eager_fusion.py"):
            aotjax.nn.functional.layer_norm(x, (4,))
    with pytest.raises(ValueError, match="either attn_mask or is_causal"):
        aotjax.nn.functional.scaled_dot_product_attention(x, x, x, attn_mask=aotjax.ones(2, 2), is_causal=True)


def test_under_transforms_the_composition_is_traced_as_it_was():
    x, w = aotjax.ones(2, 4), aotjax.ones(4)
    jaxpr = str(aotjax.make_jaxpr(lambda x, w: aotjax.nn.functional.layer_norm(x, (4,), w))(x, w))
    assert "compiled_call" not in jaxpr and "rsqrt" in jaxpr
    g = aotjax.grad(lambda x: aotjax.softmax(x, -1)[:, 0].sum())(aotjax.tensor([[1.0, 2.0, 3.0]]))
    tx = torch.tensor([[1.0, 2.0, 3.0]], requires_grad=True)
    torch.softmax(tx, -1)[:, 0].sum().backward()
    np.testing.assert_allclose(g.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_in_an_autocast_region_fused_ops_take_its_dtypes():
    def dtypes(T):
        x, w, b = _inputs(T)
        with T.autocast("cpu", dtype=T.bfloat16):
            y = T.nn.functional.linear(x, w.reshape(1, 4), b[:1])
            z = T.nn.functional.layer_norm(y, (1,))
        z.float().sum().backward()
        return str(y.dtype), str(z.dtype), str(w.grad.dtype)
    assert dtypes(aotjax) == tuple(s.replace("torch.", "") for s in dtypes(torch))
