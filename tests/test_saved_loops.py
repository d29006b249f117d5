"""Imperative autograd through a loop: a recorded `scan` keeps its residuals (`aotjax.ops.calls.saved_linear`), so
its backward runs no second forward loop. Checked against torch's Python loop over the same math (values and
gradients, eagerly and under `jit`, `create_graph`, `retain_graph`), and on the staged step's loops."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import aotjax
from aotjax import nn
from tests.helpers import training_step

pytestmark = pytest.mark.x32_only  # NOTE: float32 modules in both modes: not run again in the x64 pass

RTOL, ATOL = 1e-4, 1e-5


def _np(t):
    return t.detach().numpy() if isinstance(t, torch.Tensor) else np.asarray(t.detach())


def _close(ours, theirs):
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(_np(a), _np(b), rtol=RTOL, atol=ATOL)


def _data(T):
    rng = np.random.default_rng(0)
    w = T.tensor(rng.standard_normal((3, 3)).astype(np.float32) * 0.5, requires_grad=True)
    h0 = T.tensor(rng.standard_normal((2, 3)).astype(np.float32), requires_grad=True)
    xs = T.tensor(rng.standard_normal((4, 2, 3)).astype(np.float32), requires_grad=True)
    scale = T.tensor(rng.integers(1, 3, (4,)).astype(np.int32))  # an integer xs: no gradient
    return w, h0, xs, scale


def _loss(T, w, h0, xs, scale):
    """A recurrence reading a captured weight, the carry, a float and an integer xs, with per-step outputs."""
    if T is torch:
        h, ys = h0, []
        for x, s in zip(xs, scale):
            h = torch.tanh(h @ w + x) * s.float()
            ys.append(h.sum(-1))
        ys = torch.stack(ys)
    else:
        def body(h, inputs):
            x, s = inputs
            h = aotjax.tanh(h @ w + x) * s.float()
            return h, h.sum(-1)
        h, ys = aotjax.scan(body, h0, (xs, scale))
    return (h.square().sum() + (ys * ys.exp()).mean())


@pytest.mark.parametrize("staged", [False, True], ids=["eager", "jit"])
def test_backward_through_a_scan_matches_torch(staged):
    def grads(T, wrap):
        w, h0, xs, scale = _data(T)

        def step(w, h0, xs, scale):
            loss = _loss(T, w, h0, xs, scale)
            loss.backward()
            return loss.detach()
        loss = wrap(step)(w, h0, xs, scale)
        return [loss, w.grad, h0.grad, xs.grad]
    _close(grads(aotjax, aotjax.jit if staged else (lambda f: f)), grads(torch, lambda f: f))


def test_a_second_derivative_through_a_scan_matches_torch():
    def grads(T):
        w, h0, xs, scale = _data(T)
        loss = _loss(T, w, h0, xs, scale)
        (gw,) = T.autograd.grad(loss, w, create_graph=True)
        (gw.square().sum() + loss).backward()
        return [gw, w.grad, h0.grad, xs.grad]
    _close(grads(aotjax), grads(torch))


def test_retain_graph_through_a_scan_matches_torch():
    def grads(T):
        w, h0, xs, scale = _data(T)
        loss = _loss(T, w, h0, xs, scale)
        loss.backward(retain_graph=True)
        loss.backward()
        return [w.grad, xs.grad]
    _close(grads(aotjax), grads(torch))
    w, h0, xs, scale = _data(aotjax)
    loss = _loss(aotjax, w, h0, xs, scale)
    loss.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()


def test_an_eager_training_loop_over_a_scan_compiles_its_backward_once():
    from aotjax.autograd import engine
    stack = nn.LayerStack([nn.Sequential(nn.Linear(3, 3), nn.Tanh()) for _ in range(3)])
    opt = aotjax.optim.SGD(stack.parameters(), lr=0.1)
    traces = []
    for i in range(3):
        loss = stack(aotjax.full((2, 3), float(i))).square().sum()
        loss.backward()
        opt.step()
        opt.zero_grad()
        traces.append(engine._programs[next(reversed(engine._programs))].trace_count)
    assert traces == [1, 1, 1]


def test_a_jitted_step_through_a_layer_stack_runs_its_forward_loop_once():
    stack = nn.LayerStack([nn.Sequential(nn.Linear(4, 4), nn.Tanh()) for _ in range(3)])
    opt = aotjax.optim.SGD(stack.parameters(), lr=0.1)

    step = training_step(lambda h: stack(h).square().mean(), opt)
    jaxpr = aotjax.jit(step).lower(aotjax.ones(2, 4)).jaxpr
    loops = [e for e in jaxpr.eqns if e.primitive.name == "scan"]
    assert len(loops) == 2  # the forward, keeping its residuals, and the backward; not the forward a second time
