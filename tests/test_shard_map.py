"""`aotjax.shard_map` and the collectives over mesh axes (`psum`, `pmean`, `pmax`, `all_gather`, `psum_scatter`,
`ppermute`, `axis_index`): against `jax.shard_map` on the same math, under grad, jvp, jit, aot and vmap; an in-place
write of an argument inside the body; a tensor-parallel MLP trained on 8 simulated devices equal to one device. The
8-device checks run in ONE subprocess (the device count is fixed when jax starts); the errors run here, on a mesh of
the one device this process has."""
from __future__ import annotations

import textwrap

import jax
import numpy as np
import pytest
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

import aotjax
from aotjax.core.errors import ShapeError, UnsupportedError
from tests.helpers import run_on_eight_devices

PROGRAM = textwrap.dedent("""
    import numpy as np, jax, jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    import aotjax, aotjax.nn as nn, aotjax.nn.functional as F
    from aotjax.func import functional_call
    L = aotjax.lax

    assert len(jax.devices()) == 8
    mesh = Mesh(np.array(jax.devices()).reshape(4, 2), ("x", "y"))
    rng = np.random.default_rng(0)
    X = rng.normal(size=(8, 6)).astype(np.float32)
    W = rng.normal(size=(6, 4)).astype(np.float32)
    x, w = aotjax.tensor(X), aotjax.tensor(W)

    def close(got, want, what, tol=1e-5):
        np.testing.assert_allclose(np.asarray(got.numpy() if hasattr(got, "numpy") else got), np.asarray(want),
                                   rtol=tol, atol=tol, err_msg=what)

    # every collective in one body against jax.shard_map of the same body: values, the grad of a loss reading
    # all the outputs, the jvps (one compiled program each)
    ring = [(0, 1), (1, 2), (2, 3), (3, 0)]
    def bodies(lax):
        def body(a, b):  # a: a block of rows (split over x); b: a block of rows and columns (over x and y)
            return (lax.psum(a, "x"), lax.psum(b.sum(0), ("x", "y")), lax.pmean(b, "y"), a * lax.psum(1, "x"),
                    lax.all_gather(a, "x", tiled=True), lax.all_gather(b, "y", axis=1),
                    lax.psum_scatter(a, "y", scatter_dimension=1, tiled=True), lax.ppermute(a, "x", ring),
                    b * lax.axis_index("x") + lax.axis_index("y"))
        return body
    in_specs = (P("x"), P("x", "y"))
    out_specs = (P(), P(), P("x"), P("x"), P(), P("x"), P("x", "y"), P("x"), P("x", "y"))
    f = aotjax.shard_map(bodies(L), mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False)
    g = jax.shard_map(bodies(jax.lax), mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False)
    x2 = aotjax.tensor(X)
    for k, (got, want) in enumerate(zip(aotjax.jit(f)(x, x2), jax.jit(g)(X, X))):
        close(got, want, f"collective output {k}")
    weights = [1.5 + 0.25 * k for k in range(len(out_specs))]
    ours = aotjax.jit(aotjax.grad(lambda a, b: sum(((o * c).sin().sum() for o, c in zip(f(a, b), weights))),
                                  argnums=(0, 1)))(x, x2)
    theirs = jax.jit(jax.grad(lambda a, b: sum(jnp.sin(o * c).sum() for o, c in zip(g(a, b), weights)),
                              argnums=(0, 1)))(X, X)
    for got, want in zip(ours, theirs):
        close(got, want, "grad through every collective")
    ta, tb = rng.normal(size=(2, *X.shape)).astype(np.float32)
    ours = aotjax.jit(lambda a, b, u, v: aotjax.jvp(f, (a, b), (u, v))[1])(x, x2, aotjax.tensor(ta), aotjax.tensor(tb))
    for k, (got, want) in enumerate(zip(ours, jax.jit(lambda *a: jax.jvp(g, a[:2], a[2:])[1])(X, X, ta, tb))):
        close(got, want, f"jvp of collective output {k}")

    # pmax/pmin (jax has no derivative for them): values against jax, jvp against finite differences
    for ours, theirs in ((L.pmax, jax.lax.pmax), (L.pmin, jax.lax.pmin)):
        f = aotjax.shard_map(lambda a: ours(a, "x"), mesh=mesh, in_specs=P("x"), out_specs=P())
        close(f(x), jax.shard_map(lambda a: theirs(a, "x"), mesh=mesh, in_specs=P("x"), out_specs=P())(X), "pmax")
        t = rng.normal(size=X.shape).astype(np.float32)
        fd = (f(aotjax.tensor(X + 1e-2 * t)).numpy() - f(aotjax.tensor(X - 1e-2 * t)).numpy()) / 2e-2
        close(aotjax.jvp(f, (x,), (aotjax.tensor(t),))[1], fd, "pmax jvp", tol=1e-3)

    # a matmul with its contraction split over y, rows over x: under jit, grad, grad of aot, vmap, vmap of grad
    mm = aotjax.shard_map(lambda a, b: L.psum(a @ b, "y"), mesh=mesh, in_specs=(P("x", "y"), P("y")),
                          out_specs=P("x"))
    close(mm(x, w), X @ W, "matmul")
    close(aotjax.jit(mm)(x, w), X @ W, "jit")
    want = jax.grad(lambda a, b: jnp.sum(jnp.tanh(a @ b) ** 2), argnums=(0, 1))(X, W)
    loss = lambda a, b: (mm(a, b).tanh() ** 2).sum()
    for how, grad in (("jit(grad)", aotjax.jit(aotjax.grad(loss, argnums=(0, 1)))),
                      ("grad(aot)", aotjax.grad(aotjax.aot(loss), argnums=(0, 1)))):
        for got, ref in zip(grad(x, w), want):
            close(got, ref, how)
    XS = rng.normal(size=(3, 8, 6)).astype(np.float32)
    close(aotjax.vmap(mm, in_axes=(0, None))(aotjax.tensor(XS), w), XS @ W, "vmap")
    close(aotjax.vmap(aotjax.grad(lambda a, b: mm(a, b).sum(), argnums=1), in_axes=(0, None))(aotjax.tensor(XS), w),
          jax.vmap(jax.grad(lambda a, b: (a @ b).sum(), argnums=1), in_axes=(0, None))(XS, W), "vmap(grad)")
    # a captured tensor is replicated; its gradient sums the devices' contributions
    scale = aotjax.tensor([2.0])
    cap = aotjax.shard_map(lambda a: a * scale, mesh=mesh, in_specs=P("x"), out_specs=P("x"))
    close(cap(x), 2 * X, "captured")

    # an in-place write of an argument inside the body: each device's block written back into the global tensor
    def body(a, s):
        a.mul_(2)
        s.add_(L.axis_index("x").float())
        return a.sum(0)
    h = aotjax.shard_map(body, mesh=mesh, in_specs=(P("x"), P("x")), out_specs=P("x"))
    for how, run in (("eager", h), ("jit", aotjax.jit(h))):
        a, s = aotjax.tensor(X.copy()), aotjax.zeros(4)
        out = run(a, s)
        close(a, 2 * X, how + " write-back")
        close(s, np.arange(4.0), how + " write-back")
        close(out, (2 * X).reshape(4, 2, 6).sum(1).reshape(-1), how + " output")
    # ... and its gradient: a function that writes its argument's blocks is differentiated like its pure form
    def written(a):
        h(a, aotjax.zeros(4))
        return (a ** 2).sum()
    close(aotjax.grad(written)(x), 8 * X, "grad of a write")

    # a tensor-parallel MLP (hidden units split over `model`, the batch over `data`) trained 5 steps equals one device
    tp_mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))
    S = lambda *spec: NamedSharding(tp_mesh, P(*spec))
    PLACES = {"0.weight": S("model"), "0.bias": S("model"), "2.weight": S(None, "model"), "2.bias": S()}

    def batches():
        r = np.random.default_rng(1)
        return [(aotjax.tensor(r.normal(size=(32, 4)).astype(np.float32)),
                 aotjax.tensor(r.integers(0, 3, size=32).astype(np.int32))) for _ in range(5)]

    def train(loss_of, place_params, place_batch):
        aotjax.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 3))
        place_params(model)
        opt = aotjax.optim.SGD(model.named_parameters(), lr=0.1, momentum=0.9)
        def step(model, opt, x, y):
            loss, g = aotjax.value_and_grad(lambda p: loss_of(model, p, x, y))(dict(model.named_parameters()))
            opt.step(g)
            return loss
        step = aotjax.jit(step)
        losses = [float(step(model, opt, place_batch(xb), place_batch(yb))) for xb, yb in batches()]
        assert step.trace_count == 1
        return model, losses

    def plain(model, p, x, y):
        return F.cross_entropy(functional_call(model, p, (x,)), y)

    def place(model):
        with aotjax.no_grad():
            for name, p in model.named_parameters():
                p.copy_(aotjax.device_put(p, PLACES[name]))

    def tp_forward(x, w1, b1, w2, b2):
        return L.psum(F.linear(F.linear(x, w1, b1).tanh(), w2), "model") + b2

    tp = aotjax.shard_map(tp_forward, mesh=tp_mesh, in_specs=(P("data"), P("model"), P("model"), P(None, "model"), P()),
                          out_specs=P("data"))

    def sharded(model, p, x, y):
        return F.cross_entropy(tp(x, p["0.weight"], p["0.bias"], p["2.weight"], p["2.bias"]), y)

    batch = lambda t: aotjax.device_put(t, S("data"))
    one, one_losses = train(plain, lambda m: None, lambda t: t)
    for how, loss_of in (("shardings", plain), ("shard_map", sharded)):
        model, losses = train(loss_of, place, batch)
        np.testing.assert_allclose(losses, one_losses, rtol=1e-5, err_msg=how)
        for (name, a), (_, b) in zip(one.named_parameters(), model.named_parameters()):
            close(b, a.numpy(), f"{how} {name}")
            assert b.sharding.is_equivalent_to(PLACES[name], b.ndim), (how, name, b.sharding)  # kept its sharding

    # the compiled program's shardings are the requested ones
    rows, cols = S("data"), S(None, "model")
    jf = aotjax.jit(lambda a, b: a @ b, in_shardings=(rows, cols), out_shardings=S("data", "model"))
    out = jf(aotjax.ones(8, 4), aotjax.ones(4, 8))
    assert out.sharding.is_equivalent_to(S("data", "model"), 2), out.sharding
    y = tp(aotjax.ones(8, 4), *[aotjax.device_put(aotjax.ones(*s), PLACES[k]) for k, s in
                                (("0.weight", (16, 4)), ("0.bias", (16,)), ("2.weight", (3, 16)), ("2.bias", (3,)))])
    assert y.sharding.is_equivalent_to(S("data"), 2), y.sharding
    print("ok")
""")


@pytest.mark.slow
def test_shard_map_on_eight_devices():
    run_on_eight_devices(PROGRAM)


MESH = Mesh(np.array(jax.devices()[:1]), ("i",))


def _sm(f, in_specs, out_specs):
    return aotjax.shard_map(f, mesh=MESH, in_specs=in_specs, out_specs=out_specs)


def test_one_device_mesh_runs_the_body_on_the_whole_tensor_under_every_transform():
    f = _sm(lambda a, b: aotjax.lax.psum(a * b, "i") + aotjax.lax.axis_index("i"), (P("i"), P()), P("i"))
    x, w = aotjax.tensor([1.0, 2.0, 3.0]), aotjax.tensor(2.0)
    np.testing.assert_allclose(f(x, w).numpy(), [2.0, 4.0, 6.0])
    gx, gw = aotjax.grad(lambda a, b: f(a, b).sum(), argnums=(0, 1))(x, w)
    np.testing.assert_allclose(gx.numpy(), [2.0, 2.0, 2.0])
    np.testing.assert_allclose(float(gw), 6.0)
    np.testing.assert_allclose(aotjax.vmap(f, in_axes=(0, None))(aotjax.ones(2, 3), w).numpy(), np.full((2, 3), 2.0))
    text = str(aotjax.make_jaxpr(f)(x, w))
    assert "shard_map" in text and "psum[axis_name=('i',)]" in text


def test_errors_name_what_is_wrong():
    x = aotjax.ones(4, 2)
    with pytest.raises(ValueError, match="in_specs names the axis 'j' in P\\('j',\\), but the mesh has the axes"):
        _sm(lambda a: a, P("j"), P())(x)
    with pytest.raises(ValueError, match="out_specs names the axis 'k'"):
        _sm(lambda a: a, P(), P("k"))(x)
    with pytest.raises(ValueError, match="names the mesh axis 'i' twice"):
        _sm(lambda a: a, P("i", "i"), P())(x)
    with pytest.raises(ShapeError, match="names more dims than it has"):
        _sm(lambda a: a, P(None, None, "i"), P())(x)
    with pytest.raises(ValueError, match="out spec P\\(None, None, 'i'\\).*names more dims"):
        _sm(lambda a: a, P(), P(None, None, "i"))(x)
    with pytest.raises(NameError, match="psum: unbound axis name 'j'.*no enclosing shard_map has a mesh axis 'j'"):
        _sm(lambda a: aotjax.lax.psum(a, "j"), P(), P())(x)
    with pytest.raises(NameError, match="all_gather: unbound axis name 'i'"):
        aotjax.lax.all_gather(x, "i")
    with pytest.raises(ValueError, match="in_specs must be a PartitionSpec or a pytree prefix"):
        _sm(lambda a, b: a, (P(), P(), P()), P())(x, x)
    with pytest.raises(UnsupportedError, match="share memory"):
        _sm(lambda a, b: a + b, (P(), P()), P())(x[0], x[1])
    with pytest.raises(ValueError, match="ppermute: perm must be pairs"):
        _sm(lambda a: aotjax.lax.ppermute(a, "i", [(0, 1)]), P(), P())(x)
    with pytest.raises(UnsupportedError, match="all_gather over vmap axes and mesh axes at once"):
        aotjax.vmap(_sm(lambda a: aotjax.lax.all_gather(a, ("b", "i")), P(), P()), axis_name="b")(x)
    with pytest.raises(ValueError, match="a 0-d tensor has none"):
        aotjax.vmap(lambda v: aotjax.lax.all_gather(v, "i", tiled=True), axis_name="i")(aotjax.ones(3))
    with pytest.raises(UnsupportedError, match="axis_names=.*names only some of the mesh axes"):
        aotjax.shard_map(lambda a: a, mesh=MESH, in_specs=P(), out_specs=P(), axis_names={"j"})


def test_collectives_over_a_vmap_axis_equal_jax():
    xs = np.arange(24.0, dtype=np.float32).reshape(4, 3, 2)
    ring = [(0, 1), (1, 2), (2, 3), (3, 0)]

    def cases(lax):
        return lambda v: (lax.all_gather(v, "i", axis=1), lax.all_gather(v, "i", axis=1, tiled=True),
                          lax.psum_scatter(v.reshape(6)[:4].reshape(4, 1), "i", tiled=True),
                          lax.psum_scatter(v.reshape(6)[:4].reshape(1, 4), "i", scatter_dimension=1),
                          lax.ppermute(v, "i", ring))

    ours, theirs = aotjax.vmap(cases(aotjax.lax), axis_name="i"), jax.vmap(cases(jax.lax), axis_name="i")
    for got, want in zip(aotjax.jit(ours)(aotjax.tensor(xs)), jax.jit(theirs)(xs), strict=True):
        np.testing.assert_allclose(got.numpy(), want)
    # the transposes (all_gather <-> psum_scatter, ppermute <-> its inverse perm): a dot-product test of each output of
    # the per-example vjp (under the named vmap), and of a linear shard_map (one device) with collectives inside
    L = aotjax.lax
    inside = _sm(lambda v: L.psum_scatter(L.all_gather(L.ppermute(v * 3, "i", [(0, 0)]), "i"), "i"), P("i"), P("i"))
    f = cases(L)
    both = aotjax.jit(aotjax.vmap(lambda v, cts: (f(v), aotjax.vjp(f, v)[1](tuple(cts))[0]), axis_name="i"))
    rng = np.random.default_rng(0)
    u = aotjax.tensor(rng.normal(size=xs.shape).astype(np.float32))
    cts = [aotjax.tensor(rng.normal(size=o.shape).astype(np.float32)) for o in jax.eval_shape(theirs, xs)]
    for k, ct in enumerate(cts):  # one compiled program, called once per output
        outs, g = both(u, [ct if j == k else aotjax.zeros_like(c) for j, c in enumerate(cts)])
        np.testing.assert_allclose(float((g * u).sum()), float((outs[k] * ct).sum()), rtol=1e-4, err_msg=str(k))
    out, pullback = aotjax.vjp(inside, u)
    (g,) = pullback(cts[-1])
    np.testing.assert_allclose(float((g * u).sum()), float((out * cts[-1]).sum()), rtol=1e-4)
