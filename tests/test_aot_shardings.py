"""Shardings on `aot` (8 simulated devices, in one subprocess: the device count is fixed when jax starts), symbolic
(batch-polymorphic) export of functions and of aot's forward/backward pair, and the errors of exported calls."""
from __future__ import annotations

import textwrap

import jax
import numpy as np
import pytest

import aotjax
from aotjax.core.errors import UnsupportedError
from tests.helpers import run_on_eight_devices
from tests.op_records import as_np

PROGRAM = textwrap.dedent("""
    import numpy as np, jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    import aotjax, aotjax.nn as nn

    assert len(jax.devices()) == 8
    mesh = Mesh(np.array(jax.devices()), ("data",))
    rows, rep = NamedSharding(mesh, P("data")), NamedSharding(mesh, P())
    rng = np.random.default_rng(0)
    X, W = rng.normal(size=(16, 3)).astype(np.float32), rng.normal(size=(3, 4)).astype(np.float32)

    def loss(x, w, calls):
        calls.add_(1)                                   # an in-place write into a sharded argument
        return ((x @ w).tanh() ** 2).sum()

    want = aotjax.grad(loss, argnums=(0, 1))(aotjax.tensor(X), aotjax.tensor(W), aotjax.zeros(8))
    close = lambda a, b: np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)

    # 1. arguments placed over the mesh, no shardings asked for: the programs compile for the arguments' shardings
    f = aotjax.aot(loss)
    x, w = aotjax.device_put(aotjax.tensor(X), rows), aotjax.device_put(aotjax.tensor(W), rep)
    calls = aotjax.device_put(aotjax.zeros(8), rows)
    gx, gw = aotjax.grad(f, argnums=(0, 1))(x, w, calls)
    close(gx, want[0]); close(gw, want[1])
    assert gx.sharding == rows and gw.sharding == rep, (gx.sharding, gw.sharding)   # the primals' shardings
    assert calls.sharding == rows and float(calls.sum()) == 8.0                    # written back, kept its sharding
    before = calls._storage.base
    f(x, w, calls)                                                                   # the plain call donates it
    assert before.is_deleted() and calls.sharding == rows and float(calls.sum()) == 16.0

    # 2. in_shardings / out_shardings: unplaced arguments are placed; the residuals go as the forward lays them out
    fs = aotjax.aot(loss, in_shardings=(rows, rep, rows), out_shardings=rep)
    calls = aotjax.zeros(8)
    gx, gw = aotjax.grad(fs, argnums=(0, 1))(aotjax.tensor(X), aotjax.tensor(W), calls)
    close(gx, want[0]); close(gw, want[1])
    assert gx.sharding == rows and gw.sharding == rep and float(calls.sum()) == 8.0
    lowered = fs.lower(aotjax.tensor(X), aotjax.tensor(W), calls)
    compiled = lowered.compile()
    fw_in, fw_out = compiled.input_shardings["forward"], compiled.output_shardings["forward"]
    bw_in, bw_out = compiled.input_shardings["backward"], compiled.output_shardings["backward"]
    specs = lambda shardings: [s.spec for s in shardings]
    assert specs(fw_in) == [P("data"), P(), P("data")], fw_in
    assert specs(fw_out[:2]) == [P(), P("data")], fw_out                  # the loss; calls' new value keeps rows
    returned = iter(fw_out[lowered.num_forward_outputs:])
    residuals = [fw_in[i] if i is not None else next(returned) for i in lowered.saved_inputs]
    n = lowered.num_forward_outputs                                       # the loss, calls' new value
    assert list(bw_in) == residuals + list(fw_out[:n]), (bw_in, residuals)  # residuals, then the cotangents
    assert specs(bw_out) == [P("data"), P(), P("data")], bw_out           # the input cotangents: the primals'

    # 3. a cotangent laid out otherwise is resharded before the backward, never an error
    g = aotjax.aot(lambda x, w: (x @ w).sin(), in_shardings=(rows, rep), out_shardings=rows)
    out, g_vjp = aotjax.vjp(g, aotjax.tensor(X), aotjax.tensor(W))
    assert out.sharding == rows
    ct = aotjax.device_put(aotjax.ones(16, 4), rep)
    cx, cw = g_vjp(ct)
    _, plain_vjp = aotjax.vjp(lambda x, w: (x @ w).sin(), aotjax.tensor(X), aotjax.tensor(W))
    px, pw = plain_vjp(aotjax.ones(16, 4))
    close(cx, px); close(cw, pw)
    assert cx.sharding == rows and cw.sharding == rep

    # 4. one aot function called on one device, then over the mesh: a program per layout, as jax.jit compiles
    h = aotjax.aot(lambda x, w: ((x @ w).tanh() ** 2).sum())
    g_one = aotjax.grad(h, argnums=(0, 1))(aotjax.tensor(X), aotjax.tensor(W))
    g_mesh = aotjax.grad(h, argnums=(0, 1))(aotjax.device_put(aotjax.tensor(X), rows),
                                            aotjax.device_put(aotjax.tensor(W), rep))
    assert len(g_one[0].devices()) == 1 and g_mesh[0].sharding == rows and g_mesh[1].sharding == rep
    close(g_one[0], g_mesh[0]); close(g_one[1], g_mesh[1])

    # 5. aot_module: parameters and buffers replicated, the batch sharded
    aotjax.manual_seed(0)
    model = nn.Linear(3, 2)
    step = aotjax.aot_module(model, in_shardings=(rep, rep, rows), out_shardings=rows)
    y = step(aotjax.tensor(X))
    assert y.sharding == rows
    np.testing.assert_allclose(y.numpy(), model(aotjax.tensor(X)).numpy(), rtol=1e-5, atol=1e-6)
    print("ok")
""")


@pytest.mark.slow
def test_aot_shardings_on_eight_devices():
    run_on_eight_devices(PROGRAM)


def test_aot_shardings_on_one_device():
    one = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    f = aotjax.aot(lambda x, buf: buf.add_(x).sum() * x, in_shardings=one, out_shardings=one)
    buf = aotjax.zeros(2)
    g = aotjax.grad(lambda x: f(x, buf).sum())(aotjax.tensor([1.0, 2.0]))
    np.testing.assert_allclose(as_np(g), [6.0, 6.0])  # d/dx of sum(buf + x) * sum(x), buf = 0 at entry
    np.testing.assert_allclose(as_np(buf), [1.0, 2.0])
    assert g.sharding.device_set == {jax.devices()[0]}


# -- symbolic (batch-polymorphic) export ------------------------------------------------------------------------
B, = jax.export.symbolic_shape("b")


def _spec(*shape, dtype=np.float32):
    return jax.ShapeDtypeStruct(shape, dtype)


def mlp_loss(x, w1, w2, y):
    return aotjax.nn.functional.mse_loss((x @ w1).tanh() @ w2, y) + (x @ w1).mean()


def _np_mlp_loss_and_grads(x, w1, w2, y):
    """`mlp_loss` and its gradient with respect to every argument, by hand in NumPy (float64)."""
    x, w1, w2, y = (np.asarray(a, np.float64) for a in (x, w1, w2, y))
    h = x @ w1
    t = np.tanh(h)
    d = t @ w2 - y
    dp = 2 * d / d.size
    dh = (dp @ w2.T) * (1 - t ** 2) + 1 / h.size
    return (d ** 2).mean() + h.mean(), (dh @ w1.T, x.T @ dh, t.T @ dp, -dp)


def _data(n):
    rng = np.random.default_rng(n)
    return (aotjax.tensor(rng.normal(size=(n, 3)).astype(np.float32)),
            aotjax.tensor(rng.normal(size=(n, 2)).astype(np.float32)))


W1, W2 = aotjax.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)), aotjax.ones(4, 2) * 0.3


def test_a_symbolic_export_accepts_two_batch_sizes_after_a_round_trip():
    def step(x, w, buf):
        buf.add_(x.sum(0))  # a written input with a constant shape, beside a polymorphic one
        return (x @ w).relu().mean(), x.reshape(-1).clone()

    exp = aotjax.deserialize(aotjax.export(step)(_spec(B, 3), aotjax.ones(3, 2), aotjax.zeros(3)).serialize())
    assert exp.symbolic and str(exp.in_avals[0].shape) == "(b, 3)"
    for n in (2, 5):
        x, buf = _data(n)[0], aotjax.zeros(3)
        mean, flat = exp.call(x, aotjax.ones(3, 2), buf)
        np.testing.assert_allclose(as_np(mean), np.maximum(as_np(x) @ np.ones((3, 2)), 0).mean(), rtol=1e-5)
        np.testing.assert_allclose(as_np(buf), as_np(x).sum(0), rtol=1e-5)
        np.testing.assert_allclose(as_np(flat), as_np(x).reshape(-1))


def test_the_aot_pair_exported_with_a_symbolic_batch_is_grad_for_two_batch_sizes():
    pair = aotjax.aot(mlp_loss).lower(_spec(B, 3), W1, W2, _spec(B, 2)).export()
    pair = aotjax.deserialize(pair.serialize())
    assert pair.forward.input_names == ["primal[x]", "primal[w1]", "primal[w2]", "primal[y]"]
    for n in (3, 6):
        x, y = _data(n)
        outs = pair.forward.call(x, W1, W2, y)
        grads = pair.backward.call(*pair.residuals_from([x, W1, W2, y], outs), aotjax.tensor(1.0))
        value, want = _np_mlp_loss_and_grads(*(as_np(a) for a in (x, W1, W2, y)))
        np.testing.assert_allclose(as_np(outs[0]), value, rtol=1e-5)
        for g, e in zip(grads, want, strict=True):
            np.testing.assert_allclose(as_np(g), as_np(e), rtol=1e-5, atol=1e-6)


def test_a_linear_network_s_cross_entropy_loss_exports_with_a_symbolic_batch():
    F = aotjax.nn.functional

    def loss(p, x, y):
        return F.cross_entropy(F.linear(F.linear(x, p["w1"], p["b1"]).relu(), p["w2"], p["b2"]), y)

    params = {"w1": W1.t(), "b1": aotjax.zeros(4), "w2": W2.t(), "b2": aotjax.zeros(2)}
    pair = aotjax.aot(loss).lower(params, _spec(B, 3), _spec(B, dtype=np.int32)).export()
    assert [str(a.shape) for a in pair.forward.in_avals] == ["(4,)", "(2,)", "(4, 3)", "(2, 4)", "(b, 3)", "(b,)"]
    assert pair.backward.output_names[-1] == "cotangent[x]" and pair.backward.out_avals[-1].shape == (B, 3)


def test_ops_that_need_a_dimension_s_value_raise_naming_the_op():
    with pytest.raises(UnsupportedError, match=r"export: `getitem` does not support symbolic dimensions .*at test_"):
        aotjax.export(lambda x: x[1:])(_spec(B, 4))
    with pytest.raises(UnsupportedError, match=r"aot: `flatten` does not support symbolic dimensions"):
        aotjax.aot(lambda x: x.flatten().sum()).lower(_spec(B, 2, 2))
    with pytest.raises(UnsupportedError, match=r"returns a view of an argument whose shape is symbolic"):
        aotjax.export(lambda x: x.reshape(-1))(_spec(B, 2))



@pytest.mark.parametrize("folder", ["aotjax", "jax", "src/aotjax/ops"])
def test_a_users_script_under_a_folder_named_like_a_library_is_still_the_users(tmp_path, folder):
    # a checkout or a project folder named `aotjax` (or `jax`) holds user code: its line is the one errors name
    script = tmp_path / folder / "train_script.py"
    script.parent.mkdir(parents=True)
    source = "def run(x):\n    return aotjax.export(lambda x: x[1:])(x)\n"
    script.write_text(source)
    scope = {"aotjax": aotjax}
    exec(compile(source, str(script), "exec"), scope)
    with pytest.raises(UnsupportedError, match=r"`getitem` does not support .*\(at train_script.py:2 \(<lambda>\)\)"):
        scope["run"](_spec(B, 4))


# -- errors of exported calls -------------------------------------------------------------------------------------
def test_exported_calls_name_the_argument_that_does_not_fit():
    exp = aotjax.export(lambda x, y: x + y)(_spec(B, 4), _spec(B, 4))
    with pytest.raises(TypeError, match=r"input y must be float32\[b, 4\] as exported, got float32\[2, 3\]"):
        exp.call(aotjax.ones(2, 4), aotjax.ones(2, 3))
    with pytest.raises(TypeError, match=r"input x must be float32\[b, 4\] as exported, got int32\[2, 4\]"):
        exp.call(aotjax.ones(2, 4, dtype=aotjax.int32), aotjax.ones(2, 4))
    with pytest.raises(TypeError, match=r"x: float32\[2, 4\], y: float32\[3, 4\]\) do not fit them.*'b'"):
        exp.call(aotjax.ones(2, 4), aotjax.ones(3, 4))
    pair = aotjax.aot(lambda x: (x * x).sum()).lower(aotjax.ones(3)).export()
    with pytest.raises(TypeError, match=r"input primal\[x\] must be float32\[3\] as exported, got float32\[4\]"):
        pair.forward.call(aotjax.ones(4))
    with pytest.raises(TypeError, match=r"input cotangent\[out\] must be float32\[\] as exported, got float32\[2\]"):
        pair.backward.call(aotjax.ones(3), aotjax.ones(2))
    with pytest.raises(TypeError, match=r"takes 2 inputs \(residual\[0\] primal\[x\], cotangent\[out\]\), got 1"):
        pair.backward.call(aotjax.ones(3))


def test_unused_inputs_stay_in_the_signature():
    exp = aotjax.deserialize(aotjax.export(lambda x, unused: x * 2)(aotjax.ones(2), aotjax.ones(3)).serialize())
    assert exp.input_names == ["x", "unused"] and len(exp.in_avals) == 2
    np.testing.assert_allclose(as_np(exp.call(aotjax.ones(2), aotjax.zeros(3))), [2.0, 2.0])
    with pytest.raises(TypeError, match=r"input unused must be float32\[3\]"):
        exp.call(aotjax.ones(2), aotjax.zeros(4))
    pair = aotjax.aot(lambda x, unused: (x * x).sum()).lower(aotjax.ones(2), aotjax.ones(3)).export()
    assert pair.forward.input_names == ["primal[x]", "primal[unused]"]
    assert pair.backward.output_names == ["cotangent[x]", "cotangent[unused]"]
    outs = pair.forward.call(aotjax.ones(2), aotjax.ones(3))
    gx, gu = pair.backward.call(*pair.residuals_from([aotjax.ones(2), aotjax.ones(3)], outs), aotjax.tensor(1.0))
    np.testing.assert_allclose(as_np(gx), [2.0, 2.0])
    np.testing.assert_allclose(as_np(gu), [0.0, 0.0, 0.0])
