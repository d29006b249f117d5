"""A `checkpoint` region may write in place into a tensor it captures from the enclosing scope: eagerly, under
`grad`, `jit(grad)`, `aot` and `grad(aot)` the write reaches the caller's tensor once, and the outputs and
gradients are those of the same program without checkpoint, and torch's."""
from __future__ import annotations

import numpy as np
import pytest

import aotjax

torch = pytest.importorskip("torch")
torch_checkpoint = pytest.importorskip("torch.utils.checkpoint").checkpoint

X0 = np.array([0.3, -0.7], dtype=np.float32)
BUF0 = np.array([1.0, 2.0], dtype=np.float32)


def _region(buf, kind):
    """A region of `x` that writes `buf`, captured from the enclosing scope, then reads it; the same code runs
    on aotjax and torch tensors."""
    def add_(x):
        buf.add_(x)  # the gradient flows through the written value too
        return (buf * x).sin()

    def setitem(x):
        buf[0] = x.sum()  # a write through a view of the captured tensor
        return buf.exp() * x

    return {"add_": add_, "setitem": setitem}[kind]


def _torch_reference(kind, checkpointed=False):
    """torch's (output, loss, buf afterwards, gradient) for one call of the region."""
    buf, x = torch.tensor(BUF0), torch.tensor(X0, requires_grad=True)
    region = _region(buf, kind)
    out = torch_checkpoint(region, x, use_reentrant=False) if checkpointed else region(x)
    out.sum().backward()
    return out.detach().numpy(), buf.detach().numpy(), x.grad.numpy()


def _value_and_grad(f):
    return aotjax.value_and_grad(lambda x: f(x).sum())


# Each mode runs `f` (the region, checkpointed or not) once and gives (output or loss, gradient or None).
MODES = {
    "eager": lambda f, x: (f(x), None),
    "grad": lambda f, x: _value_and_grad(f)(x),
    "jit(grad)": lambda f, x: aotjax.jit(_value_and_grad(f))(x),
    "aot": lambda f, x: (aotjax.aot(f)(x), None),
    "grad(aot)": lambda f, x: aotjax.value_and_grad(aotjax.aot(lambda x: f(x).sum()))(x),
}


def _run(kind, mode, checkpointed):
    buf = aotjax.tensor(BUF0)
    region = _region(buf, kind)
    f = aotjax.checkpoint(region) if checkpointed else region
    value, grad = MODES[mode](f, aotjax.tensor(X0))
    return value.numpy(), buf.numpy(), None if grad is None else grad.numpy()


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("kind", ["add_", "setitem"])
def test_a_region_writing_a_captured_tensor_matches_the_plain_program_and_torch(kind, mode):
    out, buf, grad = _torch_reference(kind)
    want = (out if mode in ("eager", "aot") else out.sum()), buf, (None if mode in ("eager", "aot") else grad)
    plain, checkpointed = _run(kind, mode, False), _run(kind, mode, True)
    for got, how in ((plain, "without checkpoint"), (checkpointed, "with checkpoint")):
        for g, w, what in zip(got, want, ("output", "captured tensor afterwards", "gradient"), strict=True):
            if w is None:
                assert g is None
            else:
                np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=f"{mode} {how}: {what}")


def test_torch_checkpoint_agrees_where_its_recomputation_repeats_the_same_write():
    # NOTE: torch's checkpoint replays the region in the backward, side effects included: `buf[0] = x.sum()`
    # writes the same value again (so torch agrees), `buf.add_(x)` would add twice. aotjax's recomputation
    # reads the region's inputs as they were at entry and writes nothing: the caller sees the write once.
    out, buf, grad = _torch_reference("setitem", checkpointed=True)
    value, got_buf, got_grad = _run("setitem", "grad", True)
    np.testing.assert_allclose(value, out.sum(), rtol=1e-5)
    np.testing.assert_allclose(got_buf, buf, rtol=1e-5)
    np.testing.assert_allclose(got_grad, grad, rtol=1e-5)


def test_a_compiled_region_reads_the_captured_tensor_live_and_recomputes_from_its_entry_value():
    buf = aotjax.tensor(BUF0)
    f = aotjax.checkpoint(_region(buf, "add_"))
    step = aotjax.jit(aotjax.grad(lambda x: f(x).sum()))
    x = aotjax.tensor(X0)
    step(x)
    second = step(x)  # buf now holds BUF0 + X0 at entry: the program reads it, never a baked-in constant
    b = BUF0 + X0
    np.testing.assert_allclose(buf.numpy(), BUF0 + 2 * X0, rtol=1e-6)
    np.testing.assert_allclose(second.numpy(), np.cos((b + X0) * X0) * (b + 2 * X0), rtol=1e-5)
    fb = aotjax.forward_backward(lambda x: f(x).sum(), x)
    assert [r.why for r in fb.residuals] == ["argument x", "argument captured[0]"]  # only the region's inputs
