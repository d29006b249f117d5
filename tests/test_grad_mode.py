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


def _torch_grad(program, *values, argnum=0):
    args = [torch.tensor(v, requires_grad=True) for v in values]
    program(torch, *args).backward()
    return args[argnum].grad.numpy()


def write_under_no_grad(lib, x):
    w = x * 1.0
    with lib.no_grad():
        w[1:].mul_(3.0)
    return (w * x).sum()


def write_through_detach(lib, x):
    w = x * 2.0
    w.detach()[:2].add_(1.0)
    return (w * x).sum()


def step_then_loss(lib, p, g):
    p = p * 1.0  # NOTE: torch refuses an in-place write to a leaf that requires grad outside no_grad; inside is fine
    with lib.no_grad():
        p.sub_(0.1 * g)
    return (p * p).sum()


# PyTorch's own AOTAutograd tests (test_aotdispatch.py): input mutations under no_grad and through detach
def aotdispatch_requires_grad_detach(lib, a):
    a.detach().mul_(2)
    return (a + 3).sum()


def aotdispatch_requires_grad_no_grad(lib, a):
    with lib.no_grad():
        a.mul_(2)
    return (a + 3).sum()


def aotdispatch_no_grad_detach_mixed(lib, a):
    a.detach().mul_(2)
    a.mul_(3)
    with lib.no_grad():
        a.mul_(4)
    return (a + 5).sum()


def _through_clone(program):
    """`program` on a non-leaf copy of its argument: torch refuses `a.mul_(3)` on a leaf that requires grad (its
    AOTAutograd tests mutate a graph input, which is no leaf there)."""
    return lambda lib, a: program(lib, a * 1.0)


@pytest.mark.parametrize("program", [write_under_no_grad, write_through_detach, aotdispatch_requires_grad_detach,
                                     aotdispatch_requires_grad_no_grad, aotdispatch_no_grad_detach_mixed],
                         ids=lambda p: p.__name__)
def test_a_write_under_no_grad_or_through_detach_keeps_the_written_tensors_derivative_as_torch(program):
    # NOTE: torch records nothing for such a write: the tensor's graph stays as it was, its value changes
    program = _through_clone(program)
    expected = _torch_grad(program, X)
    for how, way in grad_ways(lambda x: program(aotjax, x)).items():
        np.testing.assert_allclose(as_np(way(aotjax.tensor(X))[1]), expected, rtol=1e-6, err_msg=how)
    x = aotjax.tensor(X, requires_grad=True)  # and imperatively, as written
    program(aotjax, x).backward()
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-6)


def test_an_optimizer_style_update_inside_no_grad_then_a_loss_through_the_updated_parameter():
    g = np.ones(3, np.float32)
    for argnum in (0, 1):
        expected = _torch_grad(step_then_loss, X, g, argnum=argnum) if argnum == 0 else np.zeros(3)
        got = aotjax.grad(lambda p, g: step_then_loss(aotjax, p, g), argnums=argnum)(aotjax.tensor(X),
                                                                                      aotjax.tensor(g))
        np.testing.assert_allclose(as_np(got), expected, rtol=1e-6, atol=0)


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
