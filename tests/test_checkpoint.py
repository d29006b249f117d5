"""checkpoint (remat): what the forward saves and what the backward recomputes, per policy; the
gradients stay those of the plain function (and of jax.checkpoint); the barrier reaches XLA."""
from __future__ import annotations

import contextlib
import io

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import aotjax
from aotjax import checkpoint_policies as cp


def body(x, w):
    return ((x.sin() @ w).cos() @ w).sigmoid()


def body_jnp(x, w):
    return jax.nn.sigmoid(jnp.cos(jnp.sin(x) @ w) @ w)


def _inputs():
    rng = np.random.default_rng(0)
    return rng.normal(size=(4, 3)), rng.normal(size=(3, 3)) * 0.5


def _loss(policy):
    f = aotjax.checkpoint(body, policy=policy) if policy is not False else body
    return lambda x, w: f(x, w).sum()


def _count(jaxpr, name):
    return sum(e.primitive.name == name for e in jaxpr.eqns)


def _programs(policy):
    x, w = (aotjax.tensor(a) for a in _inputs())
    return aotjax.forward_backward(_loss(policy), x, w)


def test_without_checkpoint_the_forward_saves_and_the_backward_recomputes_nothing():
    fb = _programs(False)
    assert _count(fb.backward, "sin") == 0 and _count(fb.backward, "cos") == 0
    assert _count(fb.backward, "matmul") == 4  # the transposes of the two matmuls, nothing recomputed
    whys = [r.why for r in fb.residuals]
    assert any(w.startswith("cos") for w in whys) and any(w.startswith("sin") for w in whys)


@pytest.mark.parametrize("policy", [None, cp.nothing_saveable], ids=["default", "nothing_saveable"])
def test_nothing_saveable_recomputes_the_region_from_its_inputs(policy):
    fb = _programs(policy)
    assert [r.why for r in fb.residuals] == ["argument x", "argument w"]  # only the inputs are saved
    assert _count(fb.backward, "sin") >= 1 and _count(fb.backward, "cos") >= 1  # sin(x), cos(x @ w) recomputed
    assert _count(fb.backward, "matmul") == 6  # both matmuls recomputed, plus the four transposes
    assert _count(fb.backward, "optimization_barrier") == 1
    assert _count(fb.forward, "cos") == 1  # the forward computes only what the output needs


def test_dots_saveable_saves_the_matmul_outputs():
    fb = _programs(cp.dots_saveable)
    whys = [r.why for r in fb.residuals]
    assert sum(w.startswith("matmul") for w in whys) == 2
    assert not any(w.startswith(("sin", "cos", "sigmoid")) for w in whys)
    assert _count(fb.backward, "matmul") == 4  # no matmul recomputed
    assert _count(fb.backward, "cos") >= 1  # the cheap ops are


def test_everything_saveable_recomputes_nothing():
    fb = _programs(cp.everything_saveable)
    assert _count(fb.backward, "matmul") == 4 and _count(fb.backward, "sin") == 0


def test_names_select_what_is_saved():
    def named(x, w):
        h = aotjax.checkpoint_name(x.sin() @ w, "h")
        return (h.cos() @ w).sigmoid()

    x, w = (aotjax.tensor(a) for a in _inputs())
    only_h = aotjax.forward_backward(lambda x, w: aotjax.checkpoint(named, cp.save_only_these_names("h"))(x, w).sum(),
                                     x, w)
    assert [r.why.split(" ")[0] for r in only_h.residuals if not r.why.startswith("argument")] == ["checkpoint_name"]
    all_but_h = aotjax.forward_backward(
        lambda x, w: aotjax.checkpoint(named, cp.save_anything_except_these_names("h"))(x, w).sum(), x, w)
    assert not any(r.why.startswith("checkpoint_name") for r in all_but_h.residuals)


def test_print_saved_residuals_reflects_the_policy():
    x, w = (aotjax.tensor(a) for a in _inputs())
    for policy, expected_matmuls in ((cp.nothing_saveable, 0), (cp.dots_saveable, 2)):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            aotjax.print_saved_residuals(_loss(policy), x, w)
        lines = buf.getvalue().splitlines()
        assert sum("matmul at test_checkpoint.py" in line for line in lines) == expected_matmuls
        assert f"{x.aval.str_short()}  {x.nbytes} bytes  argument x" in lines  # f64 with x64, else f32


@pytest.mark.parametrize("policy", [False, None, cp.dots_saveable, cp.everything_saveable],
                         ids=["plain", "nothing_saveable", "dots_saveable", "everything_saveable"])
def test_gradients_are_unchanged_by_the_policy(policy):
    xn, wn = _inputs()
    got = aotjax.grad(_loss(policy), argnums=(0, 1))(aotjax.tensor(xn), aotjax.tensor(wn))
    want = jax.grad(lambda x, w: jax.checkpoint(body_jnp)(x, w).sum(), argnums=(0, 1))(xn, wn)
    for g, e in zip(got, want):
        np.testing.assert_allclose(g.numpy(), np.asarray(e), rtol=1e-10)
    jitted = aotjax.jit(aotjax.grad(_loss(policy), argnums=(0, 1)))(aotjax.tensor(xn), aotjax.tensor(wn))
    for g, e in zip(jitted, want):
        np.testing.assert_allclose(g.numpy(), np.asarray(e), rtol=1e-10)


def test_compiled_program_carries_the_barrier():
    x, w = (aotjax.tensor(a) for a in _inputs())
    lowered = aotjax.jit(aotjax.value_and_grad(_loss(None), argnums=(0, 1))).lower(x, w)
    assert "optimization_barrier" in lowered.as_text()
    (value, grads), (want_value, want_grads) = lowered.compile()(x, w), aotjax.value_and_grad(
        _loss(False), argnums=(0, 1))(x, w)
    np.testing.assert_allclose(value.numpy(), want_value.numpy(), rtol=1e-12)
    for g, e in zip(grads, want_grads):
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-10)


def test_second_order_through_checkpoint():
    f = aotjax.checkpoint(lambda z: z.sin().sin())
    x = aotjax.tensor([0.5, 1.0], dtype=aotjax.float64)
    got = aotjax.grad(lambda x: aotjax.grad(lambda y: f(y).sum())(x).sum())(x)
    want = jax.grad(lambda x: jax.grad(lambda y: jax.checkpoint(lambda z: jnp.sin(jnp.sin(z)))(y).sum())(x).sum())(
        jnp.array([0.5, 1.0]))
    np.testing.assert_allclose(got.numpy(), np.asarray(want), rtol=1e-10)


def test_region_may_write_into_its_own_values_and_its_arguments():
    def region(x):
        y = x * 2
        y[0].mul_(3)  # an intermediate: fine
        return y.sin()

    g = aotjax.grad(lambda x: aotjax.checkpoint(region)(x).sum())(aotjax.tensor([0.1, 0.2], dtype=aotjax.float64))
    want = jax.grad(lambda x: jnp.sin((x * 2).at[0].multiply(3)).sum())(jnp.array([0.1, 0.2]))
    np.testing.assert_allclose(g.numpy(), np.asarray(want), rtol=1e-10)
    # a write into an argument lands in the caller's tensor once; the backward recomputes from the entry value
    def writes_arg(x, buf):
        buf.add_(x.sum())
        y = x * x
        x.mul_(2)
        return y * x

    x, buf = aotjax.tensor([0.5, 1.5], dtype=aotjax.float64), aotjax.zeros((), dtype=aotjax.float64)
    g = aotjax.grad(lambda x: aotjax.checkpoint(writes_arg)(x.clone(), buf).sum())(x)
    np.testing.assert_allclose(g.numpy(), 6 * x.numpy() ** 2, rtol=1e-10)
    np.testing.assert_allclose(buf.numpy(), 2.0, rtol=1e-10)
    x2 = x.clone()
    aotjax.checkpoint(writes_arg)(x2, buf)
    np.testing.assert_allclose(x2.numpy(), 2 * x.numpy(), rtol=1e-10)


def test_checkpoint_runs_eagerly_and_closes_over_values():
    w = aotjax.tensor([2.0, 3.0])
    f = aotjax.checkpoint(lambda x: x * w)
    np.testing.assert_array_equal(f(aotjax.ones(2)).numpy(), [2.0, 3.0])
    np.testing.assert_array_equal(aotjax.grad(lambda w: aotjax.checkpoint(lambda x: x * w)(aotjax.ones(2)).sum())(w),
                                  [1.0, 1.0])
