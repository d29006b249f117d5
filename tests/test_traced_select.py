"""`x[i]` with a traced 0-d integer index (a loop's index, an argument under jit): PyTorch selects a view, aotjax
gathers a copy (a view chain holds no traced index) and writes a write into that copy back into `x`, so in-place
ops through it agree with PyTorch in every mode."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import aotjax

X = np.arange(6, dtype=np.float32).reshape(3, 2)


def _writes(x, i):
    x[i].add_(1)
    x[i][1:].mul_(3)
    x[i] += 10
    return x[i].sum()


def _torch(i):
    x = torch.tensor(X)
    out = _writes(x, torch.tensor(i))
    return out.numpy(), x.numpy()


@pytest.mark.parametrize("mode", ["eager", "jit", "functionalize"])
def test_writes_through_a_traced_select_reach_the_tensor(mode):
    f = {"eager": _writes, "jit": aotjax.jit(_writes), "functionalize": aotjax.functionalize(_writes)}[mode]
    x = aotjax.tensor(X)
    out = f(x, aotjax.tensor(np.int32(1)))
    expected_out, expected_x = _torch(1)
    np.testing.assert_allclose(out.numpy(), expected_out)
    np.testing.assert_allclose(x.numpy(), expected_x)


def test_writes_through_the_loop_index_in_a_scan_body():
    def f(x):
        def body(count, i):
            x[i].mul_(2)
            return count + x[i].sum(), None
        return aotjax.scan(body, aotjax.zeros(()), aotjax.tensor(np.array([0, 2, 0], np.int32)))[0]

    t = torch.tensor(X)
    count = sum(float(t[i].mul_(2).sum()) for i in [0, 2, 0])
    for run in (f, aotjax.jit(f)):
        x = aotjax.tensor(X)
        np.testing.assert_allclose(float(run(x)), count)
        np.testing.assert_allclose(x.numpy(), t.numpy())


def test_gradients_flow_through_the_written_select():
    def loss(x, i):
        y = x * 1.0
        y[i].mul_(x[i])
        return y.sum()

    x = aotjax.tensor(X)
    g = aotjax.grad(loss)(x, aotjax.tensor(np.int32(2)))
    t = torch.tensor(X, requires_grad=True)
    y = t * 1.0
    y[2].mul_(t[2])
    y.sum().backward()
    np.testing.assert_allclose(g.numpy(), t.grad.numpy())
