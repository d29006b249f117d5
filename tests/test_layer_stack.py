"""`nn.LayerStack`: layers whose tensors are stored stacked, each layer's a view. Checked against torch's
`ModuleList` of the same layers (per-layer storage): values, `state_dict`, training steps eager and under `jit`,
eager writes through a layer, BatchNorm buffers; and that a compiled step is one layer's program at any depth."""
from __future__ import annotations

import copy

import jax
import numpy as np
import pytest
import torch

import aotjax
from aotjax import nn
from tests.helpers import training_step

pytestmark = pytest.mark.x32_only  # NOTE: float32 modules in both modes: not run again in the x64 pass

RTOL, ATOL = 1e-4, 1e-5


def block_class(T, norm: str = "ln"):
    class Block(T.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = T.nn.Linear(4, 4)
            self.norm = T.nn.LayerNorm(4) if norm == "ln" else T.nn.BatchNorm1d(4)

        def forward(self, x):
            return x + T.tanh(self.fc(self.norm(x)))
    return Block


def pair(depth: int = 3, norm: str = "ln"):
    """torch's ModuleList of `depth` blocks and aotjax's LayerStack of the same weights."""
    torch.manual_seed(0)
    theirs_block, our_block = block_class(torch, norm), block_class(aotjax, norm)
    theirs = torch.nn.ModuleList([theirs_block() for _ in range(depth)])
    ours = nn.ModuleList([our_block() for _ in range(depth)])
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    return theirs, nn.LayerStack(ours)


def close(ours, theirs):
    np.testing.assert_allclose(np.asarray(ours.detach()), theirs.detach().numpy(), rtol=RTOL, atol=ATOL)


def same_state(stack, theirs):
    ours = stack.state_dict()
    assert list(ours) == list(theirs.state_dict())
    for k, v in theirs.state_dict().items():
        close(ours[k], v)


def test_storage_is_stacked_and_layers_are_views_of_it():
    theirs, stack = pair()
    assert [(n, tuple(p.shape)) for n, p in stack.named_parameters()] == [
        ("fc/weight", (3, 4, 4)), ("fc/bias", (3, 4)), ("norm/weight", (3, 4)), ("norm/bias", (3, 4))]
    same_state(stack, theirs)
    x = np.random.default_rng(0).normal(size=(2, 4)).astype(np.float32)
    ref = torch.tensor(x)
    for block in theirs:
        ref = block(ref)
    loop = aotjax.tensor(x)
    for block in stack:
        loop = block(loop)
    close(loop, ref)
    close(stack(aotjax.tensor(x)), ref)  # one scan over the stacked tensors
    close(nn.scan_layers(stack, aotjax.tensor(x)), ref)


def test_writes_through_a_layer_write_the_stacked_tensor():
    theirs, stack = pair()
    with aotjax.no_grad():
        stack[1].fc.weight.mul_(2)
    with torch.no_grad():
        theirs[1].fc.weight.mul_(2)
    close(stack.stacked_tensors()[0]["fc.weight"][1], theirs[1].fc.weight)
    same_state(stack, theirs)

    def init(m):  # an `apply` initializer, as models write them
        if isinstance(m, (nn.Linear, torch.nn.Linear)):
            (aotjax if isinstance(m, nn.Linear) else torch).nn.init.constant_(m.bias, 0.5)
    stack.apply(init)
    theirs.apply(init)
    same_state(stack, theirs)
    # the state dict loads back in place, through the views
    stack.load_state_dict({k: v.detach().numpy() * 3 for k, v in theirs.state_dict().items()})
    close(stack.stacked_tensors()[0]["fc.bias"], torch.stack([b.fc.bias for b in theirs]) * 3)


@pytest.mark.parametrize("way", ["loop", "scan", "jit loop", "jit scan"])
def test_training_steps_match_torch_per_layer_storage(way):
    theirs, stack = pair()
    opt_t = torch.optim.AdamW(theirs.parameters(), lr=1e-2)
    opt = aotjax.optim.AdamW(stack.parameters(), lr=1e-2)
    assert len(opt.param_groups[0]["params"]) == 4  # the stacked tensors, once each
    x = np.random.default_rng(1).normal(size=(2, 4)).astype(np.float32)

    def forward(layers, h):
        if "scan" in way and isinstance(layers, nn.LayerStack):
            return layers(h)
        for block in layers:
            h = block(h)
        return h

    step = training_step(lambda h: forward(stack, h).square().mean(), opt)
    step = aotjax.jit(step) if "jit" in way else step
    for _ in range(3):
        loss = step(aotjax.tensor(x))
        ref = forward(theirs, torch.tensor(x)).square().mean()
        ref.backward()
        opt_t.step()
        opt_t.zero_grad()
        close(loss, ref)
    same_state(stack, theirs)
    if "jit" in way:
        assert step.cache_info().traces == 1


def test_batchnorm_buffers_are_written_into_the_stacked_buffers():
    theirs, stack = pair(norm="bn")
    x = np.random.default_rng(2).normal(size=(5, 4)).astype(np.float32)
    ref = torch.tensor(x)
    for block in theirs:
        ref = block(ref)
    close(aotjax.jit(lambda h: stack(h))(aotjax.tensor(x)), ref)
    same_state(stack, theirs)  # running statistics and counts, per layer
    assert stack.stacked_tensors()[1]["norm.num_batches_tracked"].tolist() == [1, 1, 1]


def test_a_compiled_step_is_one_layers_program_at_any_depth():
    def program_size(depth):
        block = block_class(aotjax)
        stack = nn.LayerStack([block() for _ in range(depth)])
        opt = aotjax.optim.SGD(stack.parameters(), lr=0.1, momentum=0.9)

        jitted = aotjax.jit(training_step(lambda h: stack(h).square().mean(), opt))
        return len(str(jitted.lower(aotjax.ones(2, 4)).jaxpr).splitlines())
    assert program_size(2) == program_size(5)


def test_pytree_passes_the_stacked_tensors():
    _, stack = pair()
    leaves = jax.tree_util.tree_leaves(stack)
    assert [tuple(t.shape) for t in leaves] == [(3, 4, 4), (3, 4), (3, 4), (3, 4)]
    x = aotjax.ones(2, 4)
    grads = aotjax.grad(lambda s: s(x).sum())(stack)
    assert isinstance(grads, nn.LayerStack) and tuple(grads.stacked_tensors()[0]["fc.weight"].shape) == (3, 4, 4)
    loop = aotjax.grad(lambda s: sum(b(x).sum() for b in s))  # the layers of an unflattened stack view its tensors
    assert tuple(loop(stack).stacked_tensors()[0]["fc.bias"].shape) == (3, 4)
    close(aotjax.jit(lambda s, h: s(h))(stack, x), torch.tensor(np.asarray(stack(x).detach())))
    # functional_call swaps the stacked tensors; the layers read the swapped ones
    zeros = {n: aotjax.zeros_like(p) for n, p in stack.named_parameters()}
    out = aotjax.func.functional_call(stack, zeros, (x,))

    class Loop(nn.Module):  # the layers one by one, not the scan
        def __init__(self, layers):
            super().__init__()
            self.layers = layers

        def forward(self, h):
            for block in self.layers:
                h = block(h)
            return h
    loop_out = aotjax.func.functional_call(Loop(stack), {f"layers.{n}": z for n, z in zeros.items()}, (x,))
    assert float(out.abs().sum()) == float(loop_out.abs().sum()) == float(x.abs().sum())
    assert float(stack[0].fc.weight.abs().sum()) > 0  # and the stack's own views are back


def test_copies_conversions_and_restacking():
    theirs, stack = pair()
    clone = copy.deepcopy(stack)
    with aotjax.no_grad():
        clone[0].fc.weight.zero_()
    assert float(clone.stacked_tensors()[0]["fc.weight"][0].abs().sum()) == 0
    same_state(stack, theirs)  # the original is untouched
    stack.to(aotjax.float16)
    assert stack[2].fc.weight.dtype == aotjax.float16
    with aotjax.no_grad():
        stack[2].fc.weight.zero_()
    assert float(stack.stacked_tensors()[0]["fc.weight"][2].abs().sum()) == 0
    stack.append(type(stack[0])().to(aotjax.float16))
    assert tuple(stack.stacked_tensors()[0]["fc.weight"].shape) == (4, 4, 4)
    assert float(stack[2].fc.weight.abs().sum()) == 0
    assert type(stack[1:]) is nn.ModuleList and len(stack[1:]) == 3


def test_errors_name_what_to_do():
    with pytest.raises(ValueError, match="every layer must be like the first"):
        nn.LayerStack([nn.Linear(2, 2), nn.Linear(2, 3)])

    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(2, 2)
            self.b = self.a

    with pytest.raises(ValueError, match="tied weights"):
        nn.LayerStack([Tied(), Tied()])
    stack = nn.LayerStack([nn.Linear(2, 2) for _ in range(2)])
    stack[1].weight = nn.Parameter(aotjax.ones(2, 2))
    with pytest.raises(ValueError, match="layer 1's 'weight' is not a view"):
        stack(aotjax.ones(1, 2))
