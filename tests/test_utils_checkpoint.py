"""`aotjax.utils.checkpoint` (torch.utils.checkpoint) against torch: the same gradients as torch's checkpointing and as
no checkpointing, random numbers replayed, eagerly and inside a compiled step."""
import numpy as np
import pytest
import torch

import aotjax
from aotjax.core.errors import UnsupportedError


def _weights(lib, module, seed):
    rng = np.random.default_rng(seed)
    with lib.no_grad():
        for p in module.parameters():
            p.copy_(lib.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32) * 0.5))
    return module


def _blocks(lib):
    nn = lib.nn
    return [_weights(lib, nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.LayerNorm(4)), k) for k in range(3)]


def _checkpointed_model(lib, scale=2.0):
    blocks, head = _blocks(lib), _weights(lib, lib.nn.Linear(4, 2), 9)
    x = lib.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4), requires_grad=True)
    h = x
    for b in blocks:  # NOTE: a non-tensor positional argument and a keyword argument pass through
        h = h + lib.utils.checkpoint.checkpoint(lambda t, s, shift=0.0, b=b: b(t) * s + shift, h, scale, shift=0.1,
                                                use_reentrant=False)
    head(h).pow(2).sum().backward()
    return [x.grad] + [p.grad for b in blocks for p in b.parameters()] + [p.grad for p in head.parameters()]


def test_checkpoint_gives_torchs_gradients():
    for ours, theirs in zip(_checkpointed_model(aotjax), _checkpointed_model(torch), strict=True):
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=2e-5, atol=2e-6)


def _sequential(lib, segments):
    nn = lib.nn
    model = _weights(lib, nn.Sequential(*[nn.Linear(3, 3) if i % 2 == 0 else nn.SiLU() for i in range(7)]), 4)
    x = lib.tensor(np.arange(6, dtype=np.float32).reshape(2, 3) / 6, requires_grad=True)
    out = lib.utils.checkpoint.checkpoint_sequential(model, segments, x, use_reentrant=False)
    out.sum().backward()
    return [out, x.grad] + [p.grad for p in model.parameters()]


@pytest.mark.parametrize("segments", [1, 2, 3])
def test_checkpoint_sequential_gives_torchs_outputs_and_gradients(segments):
    for ours, theirs in zip(_sequential(aotjax, segments), _sequential(torch, segments), strict=True):
        np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=2e-5, atol=2e-6)


def _dropout_run(checkpointed: bool):
    aotjax.manual_seed(3)
    lin = _weights(aotjax, aotjax.nn.Linear(8, 8), 1)
    drop = aotjax.nn.Dropout(0.5)
    x = aotjax.ones(4, 8, requires_grad=True)
    f = lambda t: drop(lin(t)).tanh()  # noqa: E731
    y = aotjax.utils.checkpoint.checkpoint(f, x, use_reentrant=True) if checkpointed else f(x)
    y.sum().backward()
    return y, x.grad, lin.weight.grad


def test_the_recomputation_draws_the_forwards_random_numbers():
    # NOTE: torch's preserve_rng_state=True: the same values and gradients as without checkpointing
    for a, b in zip(_dropout_run(True), _dropout_run(False), strict=True):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6, atol=1e-7)


def test_checkpoint_inside_a_compiled_step_matches_eager():
    lin = _weights(aotjax, aotjax.nn.Linear(4, 4), 2)

    def step(x):
        h = aotjax.utils.checkpoint.checkpoint(lambda t: lin(t).sin(), x, use_reentrant=False)
        loss = lin(h).sum()
        loss.backward()
        return loss.detach()

    x = aotjax.linspace(-1, 1, 8).reshape(2, 4)
    eager = step(x)
    eager_grad = lin.weight.grad.clone()
    lin.weight.grad = None
    compiled = aotjax.jit(step)(x)
    np.testing.assert_allclose(compiled.numpy(), eager.numpy(), rtol=1e-6)
    np.testing.assert_allclose(lin.weight.grad.numpy(), eager_grad.numpy(), rtol=1e-5, atol=1e-6)


def test_a_missing_use_reentrant_warns_and_context_fn_is_refused():
    x = aotjax.ones(2, requires_grad=True)
    with pytest.warns(UserWarning, match="use_reentrant parameter should be passed explicitly"):
        aotjax.utils.checkpoint.checkpoint(lambda t: t * 2, x)
    with pytest.raises(UnsupportedError, match="context_fn .* not supported.*checkpoint_policies"):
        aotjax.utils.checkpoint.checkpoint(lambda t: t * 2, x, use_reentrant=False, context_fn=lambda: None)
