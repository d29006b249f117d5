"""`no_grad`, `enable_grad`, `inference_mode`, `set_grad_enabled`: values computed inside `no_grad()` have no
derivative under every transform (grad, jit around or inside it, aot, vjp/jvp, vmap, loop bodies, checkpoint),
checked against PyTorch's gradients of the same programs and against JAX with `stop_gradient` placed by hand."""
from __future__ import annotations

import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

import aotjax
from tests.helpers import assert_trees_close, grad_ways
from tests.op_records import as_np

X = np.array([0.5, -1.5, 2.0], np.float32)


# -- programs with a no_grad block, and the same math in torch ----------------------------------------
def stat_scaled(lib, x):
    y = x * x
    with lib.no_grad():
        s = y.sum() * 2 + x.exp().mean()
    return (y * s).sum()


def nested_enable(lib, x):
    with lib.no_grad():
        a = x.sin()
        with lib.enable_grad():
            b = x.cos() * a
        c = b * x
    return (a * x + b + c).sum()


def set_mode(lib, x):
    with lib.set_grad_enabled(False):
        a = x.tanh()
    return (a * x).sum() + (x * x).sum()


def decorated(lib, x):
    @lib.no_grad()
    def frozen(v):
        return v * v

    return (frozen(x) * x).sum()


def inference(lib, x):
    with lib.inference_mode():
        a = x * 3
    return (a + x * x).sum()


PROGRAMS = [stat_scaled, nested_enable, set_mode, decorated, inference]


def _torch_grad(program, x):
    t = torch.tensor(x, requires_grad=True)
    program(torch, t).backward()
    return t.grad.numpy()


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_gradients_agree_with_torch_under_every_gradient_way(program):
    expected = _torch_grad(program, X)
    for how, way in grad_ways(lambda x: program(aotjax, x)).items():
        _, got = way(aotjax.tensor(X))
        np.testing.assert_allclose(as_np(got), expected, rtol=1e-5, atol=1e-6, err_msg=how)


def test_forward_mode_vjp_and_vmap_see_no_derivative_inside():
    def f(x):
        with aotjax.no_grad():
            a = x * x
        return a * x

    def jf(x):
        return jax.lax.stop_gradient(x * x) * x

    x, t = np.array([1.0, 2.0], np.float32), np.array([0.3, -0.7], np.float32)
    _, tan = aotjax.jvp(f, (aotjax.tensor(x),), (aotjax.tensor(t),))
    np.testing.assert_allclose(as_np(tan), jax.jvp(jf, (x,), (t,))[1], rtol=1e-6)
    _, pull = aotjax.vjp(f, aotjax.tensor(x))
    np.testing.assert_allclose(as_np(pull(aotjax.tensor(t))[0]), jax.vjp(jf, x)[1](t)[0], rtol=1e-6)
    xs = np.arange(6, dtype=np.float32).reshape(3, 2)
    got = aotjax.vmap(aotjax.grad(lambda x: f(x).sum()))(aotjax.tensor(xs))
    np.testing.assert_allclose(as_np(got), jax.vmap(jax.grad(lambda x: jf(x).sum()))(xs), rtol=1e-6)


def test_a_write_in_place_inside_no_grad_writes_a_value_without_derivative_and_keeps_the_rest():
    # NOTE: torch leaves the written tensor's derivative as it was (the write is not recorded); aotjax cuts the
    # derivative of the written elements only, as `x.at[i].set(stop_gradient(v))` in JAX (the README says so).
    def f(x):
        w = x * 1.0
        with aotjax.no_grad():
            w[1:].mul_(3.0)
        return (w * x).sum()

    def jf(x):
        w = x * 1.0
        w = w.at[1:].set(jax.lax.stop_gradient(w[1:] * 3.0))
        return (w * x).sum()

    expected = jax.grad(jf)(X)
    for how, way in grad_ways(f).items():
        np.testing.assert_allclose(as_np(way(aotjax.tensor(X))[1]), expected, rtol=1e-6, err_msg=how)


def test_an_optimizer_style_update_inside_no_grad_then_a_loss_through_the_updated_parameter():
    def step_then_loss(p, g):
        with aotjax.no_grad():
            p.sub_(0.1 * g)
        return (p * p).sum()

    p, g = aotjax.tensor(X), aotjax.tensor(np.ones(3, np.float32))
    got = aotjax.grad(step_then_loss)(p.clone(), g)
    # the loss reads the written value, which has no derivative with respect to p
    np.testing.assert_allclose(as_np(got), np.zeros(3), atol=0)
    grads = aotjax.grad(step_then_loss, argnums=1)(p.clone(), g)
    np.testing.assert_allclose(as_np(grads), np.zeros(3), atol=0)


def test_grad_inside_no_grad_still_differentiates_its_function():
    f = lambda x: (x ** 3).sum()  # noqa: E731
    with aotjax.no_grad():
        inner = aotjax.grad(f)(aotjax.tensor(X))
        assert not aotjax.is_grad_enabled()
    np.testing.assert_allclose(as_np(inner), 3 * X ** 2, rtol=1e-6)

    def outer(x):
        with aotjax.no_grad():
            g = aotjax.grad(f)(x)  # computed inside no_grad: a constant to the outer grad
        return (g * x).sum()

    np.testing.assert_allclose(as_np(aotjax.grad(outer)(aotjax.tensor(X))), 3 * X ** 2, rtol=1e-6)


def test_a_compiled_function_called_inside_no_grad_shares_its_program_and_is_cut_as_a_whole():
    jf = aotjax.jit(lambda x: x * x)
    with aotjax.no_grad():
        jf(aotjax.tensor(X))  # traced here, with grad enabled inside it

    def loss(x, cut):
        if cut:
            with aotjax.no_grad():
                return (jf(x) * x).sum()
        return (jf(x) * x).sum()

    got = aotjax.grad(loss)(aotjax.tensor(X), False)
    np.testing.assert_allclose(as_np(got), 3 * X ** 2, rtol=1e-6)
    got = aotjax.grad(lambda x: x.sum() + loss(x, True))(aotjax.tensor(X))
    np.testing.assert_allclose(as_np(got), np.ones(3), rtol=1e-6)
    assert jf.trace_count == 1


def test_loop_bodies_and_checkpoint_respect_no_grad_inside_them():
    def body(c, x):
        with aotjax.no_grad():
            frozen = c * x
        return c * x + frozen, None

    def loss(c0, xs):
        return aotjax.scan(body, c0, xs)[0].sum()

    def jloss(c0, xs):
        return jax.lax.scan(lambda c, x: (c * x + jax.lax.stop_gradient(c * x), None), c0, xs)[0].sum()

    c0, xs = np.array([1.0, 2.0], np.float32), np.array([[0.5, 1.5], [2.0, -1.0]], np.float32)
    expected = jax.grad(jloss)(c0, xs)
    np.testing.assert_allclose(as_np(aotjax.grad(loss)(aotjax.tensor(c0), aotjax.tensor(xs))), expected, rtol=1e-6)
    ck = aotjax.checkpoint(lambda c: body(c, aotjax.tensor(xs[0]))[0])
    got = aotjax.grad(lambda c: ck(c).sum())(aotjax.tensor(c0))
    np.testing.assert_allclose(as_np(got), xs[0], rtol=1e-6)


def test_modes_nest_restore_and_belong_to_their_thread():
    assert aotjax.is_grad_enabled()
    with aotjax.no_grad():
        with aotjax.enable_grad():
            assert aotjax.is_grad_enabled()
        assert not aotjax.is_grad_enabled()
        seen = []
        t = threading.Thread(target=lambda: seen.append(aotjax.is_grad_enabled()))
        t.start()
        t.join()
        assert seen == [True]
    assert aotjax.is_grad_enabled()
    aotjax.set_grad_enabled(False)
    try:
        assert not aotjax.is_grad_enabled()
    finally:
        aotjax.set_grad_enabled(True)
    with aotjax.inference_mode(False):
        assert aotjax.is_grad_enabled()
    bare = aotjax.no_grad(lambda: aotjax.is_grad_enabled())
    assert bare() is False and aotjax.is_grad_enabled()


def test_eager_code_inside_no_grad_computes_as_usual():
    x = aotjax.tensor(X)
    with aotjax.no_grad():
        y = x * 2
        x.add_(1)
    assert_trees_close(as_np(y), 2 * X)
    assert_trees_close(as_np(x), X + 1)
    assert jnp.allclose(jnp.asarray(as_np(y)), 2 * X)
