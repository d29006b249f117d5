"""Many devices, simulated on the CPU (8 host devices, in a subprocess: the device count is fixed when jax starts):
`device_put` with a `NamedSharding`, a data-parallel training step (the batch sharded over a `data` axis,
parameters replicated, the gradient's all-reduce left to XLA) equal to the single-device step, its written-back
parameters keeping their sharding."""
from __future__ import annotations

import textwrap

import jax
import pytest

import aotjax
from tests.helpers import run_on_eight_devices

PROGRAM = textwrap.dedent("""
    import numpy as np, jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    import aotjax, aotjax.nn as nn, aotjax.nn.functional as F
    from aotjax.func import functional_call

    assert len(jax.devices()) == 8
    mesh = Mesh(np.array(jax.devices()), ("data",))

    def train_step(model, opt, x, y):
        loss, g = aotjax.value_and_grad(lambda p: F.cross_entropy(functional_call(model, p, (x,)), y))(
            dict(model.named_parameters()))
        opt.step(g)
        return loss

    def train(place):
        aotjax.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 3))
        opt = aotjax.optim.SGD(model.named_parameters(), lr=0.1, momentum=0.9)
        step = aotjax.jit(train_step)
        rng = np.random.default_rng(0)
        losses = []
        for _ in range(5):
            x = aotjax.tensor(rng.normal(size=(32, 4)).astype(np.float32))
            y = aotjax.tensor(rng.integers(0, 3, size=32).astype(np.int32))
            losses.append(float(step(model, opt, place(x), place(y))))
        return model, losses, step

    batch = NamedSharding(mesh, P("data"))
    one, one_losses, _ = train(lambda t: t)
    dp, dp_losses, step = train(lambda t: aotjax.device_put(t, batch))
    np.testing.assert_allclose(dp_losses, one_losses, rtol=1e-5)
    for (name, a), (_, b) in zip(one.named_parameters(), dp.named_parameters()):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6, err_msg=name)
        assert len(b.devices()) == 8, name                      # replicated over the mesh by the program
    x = aotjax.device_put(aotjax.ones(32, 4), batch)
    assert x.sharding == batch and len(x.devices()) == 8
    assert step.trace_count == 1

    # jit's in_shardings/out_shardings; a sharded argument written in place keeps its sharding and is donated
    rows, rep = NamedSharding(mesh, P("data")), NamedSharding(mesh, P())
    def scale(x, w):
        w.mul_(2)
        return {"y": x @ w, "w": w}
    jf = aotjax.jit(scale, in_shardings=(rows, rep), out_shardings={"y": rows, "w": None})
    w = aotjax.device_put(aotjax.ones(3, 2), rep)
    before = w._storage.base
    out = jf(aotjax.ones(16, 3), w)
    assert out["y"].sharding == rows and out["w"] is w and w.sharding == rep, (out["y"].sharding, w.sharding)
    assert before.is_deleted()                                   # donated: the program wrote into its buffer
    np.testing.assert_allclose(out["y"].numpy(), np.full((16, 2), 6.0))

    # with_sharding_constraint inside a program, under vmap (the batch axis left unsharded) and grad
    cols = NamedSharding(mesh, P(None, "data"))
    g = aotjax.jit(aotjax.vmap(aotjax.grad(lambda v: aotjax.lax.with_sharding_constraint(v * v, cols).sum())))
    np.testing.assert_allclose(g(aotjax.ones(2, 4, 16)).numpy(), np.full((2, 4, 16), 2.0))

    # Tensor.to(sharding); writes through views of a sharded tensor, eagerly and jitted, keep its sharding
    t = aotjax.arange(16.0).reshape(8, 2).to(rows)
    assert t.sharding == rows and t.to(rows) is t
    t[2:6].mul_(10)
    aotjax.jit(lambda a: a[1:3].add_(1))(t)
    np.testing.assert_allclose(t[:, 0].numpy(), [0, 3, 41, 60, 80, 100, 12, 14])
    assert t.sharding == rows, t.sharding

    # an eager in-place write keeps the written tensor's own placement, as torch's copy_ keeps its device
    a = aotjax.zeros(8).to(rows)
    grid = Mesh(np.array(jax.devices()).reshape(2, 4), ("x", "y"))
    b = aotjax.device_put(aotjax.arange(8.0), NamedSharding(grid, P("y")))
    a.copy_(b)
    a[:4].copy_(b[4:])
    assert a.sharding == rows and a.tolist() == [4, 5, 6, 7, 4, 5, 6, 7], (a.sharding, a.tolist())
    e = aotjax.device_put(aotjax.zeros(8), jax.devices()[3])
    e.copy_(aotjax.ones(8)); e.add_(aotjax.ones(8).to(jax.devices()[3]))
    assert e.devices() == {jax.devices()[3]} and e.tolist() == [2.0] * 8, e.devices()
    print("ok")
""")


@pytest.mark.slow
def test_a_data_parallel_step_on_eight_devices_equals_one_device():
    run_on_eight_devices(PROGRAM)


def test_jit_shardings_on_one_device_and_their_errors():
    one = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    f = aotjax.jit(lambda x, w: (x * 2, w.add_(1)), in_shardings=one, out_shardings=(one, None))
    w = aotjax.zeros(2)
    y, same = f(aotjax.ones(2), w)
    assert same is w and float(w.sum()) == 2.0 and y.sharding.device_set == {jax.devices()[0]}
    with pytest.raises(ValueError, match="out_shardings gives out\\[1\\] a sharding"):
        aotjax.jit(lambda x, w: (x * 2, w.add_(1)), out_shardings=(one, one))(aotjax.ones(2), aotjax.zeros(2))
    with pytest.raises(ValueError, match="in_shardings must be a sharding, None, or a pytree prefix"):
        aotjax.jit(lambda x: x, in_shardings=(one, one))(aotjax.ones(2))


def test_device_put_places_a_tensor_and_refuses_tracers():
    d = jax.devices()[0]
    t = aotjax.device_put({"a": aotjax.ones(2)}, d)["a"]
    assert t.devices() == {d} and t.sharding is not None
    with pytest.raises(aotjax.core.errors.UnsupportedError, match="device_put of a traced tensor"):
        aotjax.jit(lambda x: aotjax.device_put(x, d))(aotjax.ones(2))


def test_with_sharding_constraint_is_the_identity_to_every_transform():
    one = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    f = lambda x: (aotjax.lax.with_sharding_constraint(x.sin(), one) * x).sum()  # noqa: E731
    x = aotjax.tensor([0.5, 1.0])
    want = aotjax.grad(lambda x: (x.sin() * x).sum())(x)
    for g in (aotjax.grad(f), aotjax.jit(aotjax.grad(f)), aotjax.grad(aotjax.aot(f))):
        assert float((g(x) - want).abs().max()) < 1e-6
