"""A small CNN (Conv2d, BatchNorm2d, ReLU, MaxPool2d, Dropout(p=0), Flatten, Linear, cross entropy) trained with SGD
momentum gives torch's parameters and running statistics, with the step compiled whole (`jit(train_step)`) and
with the loss compiled by `aot` (`grad(aot(loss))`)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import aotjax
import aotjax.nn as nn
import aotjax.nn.functional as F
from aotjax.func import functional_call
from tests.helpers import INT
from tests.op_records import as_np

# NOTE: modules compute in the default float (float32) in both modes: run once, in jax's default mode
pytestmark = pytest.mark.slow

RTOL, ATOL = 1e-4, 1e-4  # NOTE: modules compute in float32 (the default float) in both modes, as torch's do
STEPS = 3


def _torch_cnn():
    torch.manual_seed(0)
    T = torch.nn
    return T.Sequential(T.Conv2d(2, 3, 3, padding=1), T.BatchNorm2d(3), T.ReLU(), T.MaxPool2d(2), T.Dropout(0.0),
                        T.Flatten(), T.Linear(27, 3))


def _ours():
    return nn.Sequential(nn.Conv2d(2, 3, 3, padding=1), nn.BatchNorm2d(3), nn.ReLU(), nn.MaxPool2d(2), nn.Dropout(0.0),
                         nn.Flatten(), nn.Linear(27, 3))


def _batches():
    rng = np.random.default_rng(0)
    return [(rng.normal(size=(4, 2, 6, 6)).astype(np.float32), rng.integers(0, 3, size=4)) for _ in range(STEPS)]


def _loss(model, params, x, y):
    return F.cross_entropy(functional_call(model, params, (x,)), y)


def train_step(model, opt, x, y):
    loss, grads = aotjax.value_and_grad(lambda p: _loss(model, p, x, y))(dict(model.named_parameters()))
    opt.step(grads)
    return loss


@pytest.mark.parametrize("way", ["jit(train_step)", pytest.param("grad(aot(loss))", marks=pytest.mark.slow)])
def test_a_small_cnn_trains_as_in_torch(way):
    tm = _torch_cnn()
    model = _ours()
    dtype = as_np(aotjax.ones(1)).dtype
    model.load_state_dict({k: v.detach().numpy().astype(dtype) if v.is_floating_point() else v.numpy()
                           for k, v in tm.state_dict().items()})
    topt = torch.optim.SGD(tm.parameters(), lr=0.1, momentum=0.9)
    opt = aotjax.optim.SGD(model.named_parameters(), lr=0.1, momentum=0.9)
    if way == "jit(train_step)":
        step = aotjax.jit(train_step)
    else:
        loss = aotjax.aot(lambda p, x, y: _loss(model, p, x, y))

        def step(model, opt, x, y):
            opt.step(aotjax.grad(loss)(dict(model.named_parameters()), x, y))
    for x, y in _batches():
        topt.zero_grad()
        torch.nn.functional.cross_entropy(tm(torch.tensor(x)), torch.tensor(y)).backward()
        topt.step()
        step(model, opt, aotjax.tensor(x), aotjax.tensor(y.astype(INT)))
    got, expected = model.state_dict(), tm.state_dict()
    assert list(got) == list(expected)
    for name, value in expected.items():
        np.testing.assert_allclose(as_np(got[name]), value.numpy(), rtol=RTOL, atol=ATOL, err_msg=name)
    assert int(got["1.num_batches_tracked"]) == STEPS
    if way == "jit(train_step)":
        assert step.trace_count == 1
