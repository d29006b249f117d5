"""vmap of calls and random draws: functions with custom derivatives (the user's rule used per example), checkpoint
regions, jit and aot compiled calls (one batched compiled call), and explicit-key random draws; each against a Python
loop over the examples (and jax where it has the same math)."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import aotjax
from tests.helpers import FLOAT

pytestmark = pytest.mark.slow  # NOTE: end-to-end sweeps: once, in jax's default mode (CI time)

T = aotjax.tensor
R = aotjax.random
B = 4
TOL = dict(rtol=1e-5, atol=1e-6)


def _data(*shape, seed=0, scale=1.0):
    return T((np.random.default_rng(seed).normal(size=shape) * scale).astype(FLOAT))


def _loop(f, *args, in_axes):
    """`f` over the examples of `args` (batched at `in_axes`, None: the same for all), its outputs stacked at 0."""
    n = next(a.shape[ax] for a, ax in zip(args, in_axes) if ax is not None)
    outs = [f(*[a if ax is None else a.select(ax, i) for a, ax in zip(args, in_axes)]) for i in range(n)]
    return jax.tree_util.tree_map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *outs)


def _close(got, expected, **tol):
    for g, e in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(expected), strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), **(tol or TOL))


# -- functions with custom derivatives: rules that clip, so that using them (and not the true derivative) shows ----
@aotjax.custom_vjp
def sin_vjp(x, w):
    return aotjax.sin(x * w)


def _sin_fwd(x, w):
    return sin_vjp(x, w), (x, w)


def _sin_bwd(res, g):
    x, w = res
    c = aotjax.cos(x * w) * g
    return aotjax.clamp(c * w, -0.1, 0.1), aotjax.clamp(c * x, -0.1, 0.1)


sin_vjp.defvjp(_sin_fwd, _sin_bwd)


@aotjax.custom_jvp
def sin_jvp(x, w):
    return aotjax.sin(x * w)


@sin_jvp.defjvp
def _sin_jvp_rule(primals, tangents):
    (x, w), (tx, tw) = primals, tangents
    c = aotjax.clamp(aotjax.cos(x * w), -0.5, 0.5)
    return sin_jvp(x, w), c * (tx * w + x * tw)


def _clipped_grads(x, w, g=1.0):
    c = np.cos(x * w) * g
    return np.clip(c * w, -0.1, 0.1), np.clip(c * x, -0.1, 0.1)


@pytest.mark.parametrize("custom", [sin_vjp, sin_jvp], ids=["custom_vjp", "custom_jvp"])
def test_custom_derivative_functions_per_example(custom):
    x, w = _data(B, 3, scale=3.0), _data(3, seed=1)

    def f(x, w):
        return (custom(x, w) * 2.0).sum()

    _close(aotjax.vmap(f, in_axes=(0, None))(x, w), _loop(f, x, w, in_axes=(0, None)))
    grad_f = aotjax.grad(f, argnums=(0, 1))
    per_example = aotjax.vmap(grad_f, in_axes=(0, None))(x, w)
    loop = _loop(grad_f, x, w, in_axes=(0, None))
    _close(per_example, loop)
    if custom is sin_vjp:  # the user's (clipped) rule, not the true derivative
        _close(per_example, _clipped_grads(np.asarray(x), np.asarray(w), 2.0))
    # grad of the batched function: the rule per example, an unbatched argument's gradient summed over them
    total = aotjax.grad(lambda x, w: aotjax.vmap(f, in_axes=(0, None))(x, w).sum(), argnums=(0, 1))(x, w)
    _close(total, (loop[0], loop[1].sum(0)), rtol=1e-5, atol=1e-5)
    jac = aotjax.jacrev(lambda w: aotjax.vmap(f, in_axes=(0, None))(x, w))(w)
    _close(jac, loop[1])


def test_custom_vjp_nested_vmap_and_batched_weights():
    x, w = _data(2, B, 3, scale=3.0), _data(B, 3, seed=1)

    def f(x, w):
        return sin_vjp(x, w).sum()

    inner = aotjax.vmap(f)  # over the examples of x and w
    grads = aotjax.grad(lambda x, w: aotjax.vmap(inner, in_axes=(0, None))(x, w).sum(), argnums=1)(x, w)
    gw = sum(_clipped_grads(np.asarray(x)[i], np.asarray(w))[1] for i in range(2))
    _close(grads, gw)


def test_custom_jvp_under_forward_mode_of_the_batched_function():
    x, w = _data(B, 3, scale=3.0), _data(3, seed=1)
    t = _data(B, 3, seed=2)
    _, tangent = aotjax.jvp(lambda x: aotjax.vmap(sin_jvp, in_axes=(0, None))(x, w), (x,), (t,))
    c = np.clip(np.cos(np.asarray(x) * np.asarray(w)), -0.5, 0.5)
    _close(tangent, c * np.asarray(t) * np.asarray(w))


def test_custom_vjp_under_vmap_has_no_forward_mode():
    x = _data(B, 3)
    with pytest.raises(aotjax.core.errors.UnsupportedError, match="forward-mode"):
        aotjax.vmap(lambda x: aotjax.jvp(lambda a: sin_vjp(a, a), (x,), (x,))[1])(x)


# -- checkpoint --------------------------------------------------------------------------------------------------
def _ckpt_body(x, w):
    h = aotjax.checkpoint_name(aotjax.sin(x * w), "h")
    return (h * h).sum()


def test_checkpoint_per_example_and_its_gradient():
    x, w = _data(3, B), _data(3, seed=1)
    f = aotjax.checkpoint(_ckpt_body)
    _close(aotjax.vmap(f, in_axes=(1, None))(x, w), _loop(_ckpt_body, x, w, in_axes=(1, None)))
    gw = aotjax.grad(lambda w: aotjax.vmap(f, in_axes=(1, None))(x, w).sum())(w)
    loop = _loop(aotjax.grad(_ckpt_body, argnums=1), x, w, in_axes=(1, None))
    _close(gw, loop.sum(0), rtol=1e-5, atol=1e-5)
    _close(aotjax.vmap(aotjax.grad(f, argnums=1), in_axes=(1, None))(x, w), loop)
    jaxpr = aotjax.make_jaxpr(aotjax.vmap(f, in_axes=(1, None)))(x, w)
    assert [e.primitive.name for e in jaxpr.jaxpr.eqns].count("checkpoint") == 1


# -- jit: one batched compiled call ------------------------------------------------------------------------------
def _jit_body(x, w, b):
    return aotjax.tanh(x @ w + b), (x * x).sum()


@pytest.mark.parametrize("in_axes", [(0, None, None), (-1, None, 0), (None, 0, -1)])
def test_vmap_of_jit_is_one_compiled_call(in_axes):
    xs = {0: _data(B, 3), -1: _data(3, B), None: _data(3)}
    ws = {0: _data(B, 3, 2, seed=1), None: _data(3, 2, seed=1)}
    bs = {0: _data(B, 2, seed=2), -1: _data(2, B, seed=2), None: _data(2, seed=2)}
    args = (xs[in_axes[0]], ws[in_axes[1]], bs[in_axes[2]])
    jitted = aotjax.jit(_jit_body)
    batched = aotjax.vmap(jitted, in_axes=in_axes, out_axes=(0, 0))
    expected = _loop(_jit_body, *args, in_axes=in_axes)
    _close(batched(*args), expected)
    _close(batched(*args), expected)
    assert jitted.trace_count == 1
    names = [e.primitive.name for e in aotjax.make_jaxpr(batched)(*args).jaxpr.eqns]
    assert names.count("compiled_call") == 1 and "tanh" not in names, names


def test_vmap_of_jit_writing_its_input_writes_the_callers_tensor():
    x = _data(3, B)
    before = np.asarray(x).copy()

    @aotjax.jit
    def step(a, g):
        a.sub_(0.5 * g)
        return (a * a).sum()

    g = _data(3, seed=1)
    out = aotjax.vmap(step, in_axes=(1, None))(x, g)
    expected = before - 0.5 * np.asarray(g)[:, None]
    _close(x, expected)
    _close(out, (expected * expected).sum(0))


def test_vmap_of_jit_reading_a_traced_value_from_its_closure():
    x, w = _data(B, 3), _data(3, seed=1)
    out = aotjax.vmap(lambda a: aotjax.jit(lambda v: v * a)(w))(x)
    _close(out, np.asarray(x) * np.asarray(w))


def test_nested_vmap_of_jit_and_its_gradient():
    x, w = _data(2, B, 3), _data(3, seed=1)

    def f(a, w):
        return (aotjax.sin(a * w) ** 2).sum()

    nested = aotjax.vmap(aotjax.vmap(aotjax.jit(f), in_axes=(0, None)), in_axes=(0, None))
    _close(nested(x, w), np.stack([_loop(f, x[i], w, in_axes=(0, None)) for i in range(2)]))
    gw = aotjax.grad(lambda w: nested(x, w).sum())(w)
    _close(gw, sum(_loop(aotjax.grad(f, argnums=1), x[i], w, in_axes=(0, None)).sum(0) for i in range(2)),
           rtol=1e-5, atol=1e-5)


# -- aot ----------------------------------------------------------------------------------------------------------
def _loss(x, w):
    return (aotjax.tanh(x @ w) ** 2).sum()


def test_vmap_of_aot_forward_backward_and_per_example_gradients():
    x, w = _data(B, 3), _data(3, 2, seed=1)
    compiled = []

    def counting(jaxpr, avals):
        compiled.append(jaxpr.meta.name)
        return aotjax.xla_compiler(jaxpr, avals)

    f = aotjax.aot(_loss, fw_compiler=counting)
    batched = aotjax.vmap(f, in_axes=(0, None))
    _close(batched(x, w), _loop(_loss, x, w, in_axes=(0, None)))
    _close(batched(x, w), _loop(_loss, x, w, in_axes=(0, None)))
    assert len(compiled) == 1, compiled  # the batched inference program, once
    grad_loss = aotjax.grad(_loss, argnums=(0, 1))
    loop = _loop(grad_loss, x, w, in_axes=(0, None))
    _close(aotjax.vmap(aotjax.grad(f, argnums=(0, 1)), in_axes=(0, None))(x, w), loop, rtol=1e-5, atol=1e-6)
    total = aotjax.grad(lambda x, w: batched(x, w).sum(), argnums=(0, 1))
    _close(total(x, w), (loop[0], loop[1].sum(0)), rtol=1e-5, atol=1e-5)
    names = [e.primitive.name for e in aotjax.make_jaxpr(total)(x, w).jaxpr.eqns]
    assert names.count("compiled_call") == 2 and "tanh" not in names, names  # the batched forward and backward


def test_vmap_of_aot_writing_its_batched_input():
    x = _data(B, 3)
    before = np.asarray(x).copy()

    def scale(a):
        a.mul_(2.0)
        return a.sum()

    out = aotjax.vmap(aotjax.aot(scale))(x)
    _close(x, before * 2)
    _close(out, (before * 2).sum(1))


def test_aot_of_vmap_forward_and_backward():
    x, w = _data(B, 3), _data(3, 2, seed=1)
    f = aotjax.aot(aotjax.vmap(_loss, in_axes=(0, None)))
    _close(f(x, w), _loop(_loss, x, w, in_axes=(0, None)))
    loop = _loop(aotjax.grad(_loss, argnums=(0, 1)), x, w, in_axes=(0, None))
    _close(aotjax.grad(lambda x, w: f(x, w).sum(), argnums=(0, 1))(x, w), (loop[0], loop[1].sum(0)),
           rtol=1e-5, atol=1e-5)


# -- random ---------------------------------------------------------------------------------------------------------
def _raw(keys) -> jax.Array:
    return jnp.asarray(np.asarray(keys))


def test_batched_keys_draw_per_example_as_a_loop_and_as_jax():
    keys = R.split(R.key(0), B)
    draws = {
        "normal": (lambda k: R.normal(k, (3,)), lambda k: jax.random.normal(k, (3,), jnp.float32)),
        "uniform": (lambda k: R.uniform(k, (2, 3), low=1.0, high=2.0),
                    lambda k: jax.random.uniform(k, (2, 3), jnp.float32, minval=1.0, maxval=2.0)),
        "randint": (lambda k: R.randint(k, (5,), 0, 7, dtype=aotjax.int32),
                    lambda k: jax.random.randint(k, (5,), 0, 7, jnp.int32)),
        "split": (lambda k: R.split(k, 3), lambda k: jax.random.split(k, 3)),
        "bernoulli": (lambda k: R.bernoulli(k, 0.3, (6,)), lambda k: jax.random.bernoulli(k, jnp.float32(0.3), (6,))),
    }
    for name, (ours, theirs) in draws.items():
        got = np.asarray(aotjax.vmap(ours)(keys))
        np.testing.assert_array_equal(got, _loop(ours, keys, in_axes=(0,)), err_msg=name)
        np.testing.assert_array_equal(got, np.asarray(jax.vmap(theirs)(_raw(keys))), err_msg=name)
    assert len({tuple(r) for r in np.asarray(aotjax.vmap(draws["normal"][0])(keys))}) == B


def test_keys_batched_at_another_axis_and_nested_vmap_of_split_keys():
    keys = R.split(R.key(1), 6).reshape(2, 3, 2)
    draw = aotjax.vmap(aotjax.vmap(lambda k: R.normal(k, (2,))), in_axes=1, out_axes=1)
    got = np.asarray(draw(keys.permute(1, 0, 2)))
    expected = np.stack([np.stack([np.asarray(R.normal(keys[i, j], (2,))) for i in range(2)]) for j in range(3)])
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(got.transpose(1, 0, 2), np.asarray(jax.vmap(jax.vmap(
        lambda k: jax.random.normal(k, (2,), jnp.float32)))(_raw(keys))))


def test_an_unbatched_key_draws_the_same_for_every_example():
    x = _data(B, 3)
    out = aotjax.vmap(lambda a: a + R.normal(R.key(3), (3,)))(x)
    rows = np.asarray(out) - np.asarray(x)
    np.testing.assert_allclose(rows, np.broadcast_to(np.asarray(R.normal(R.key(3), (3,))), rows.shape), atol=1e-6)
    noise, _ = aotjax.vmap(lambda a: (R.uniform(R.key(3), (3,)), a), out_axes=(None, 0))(x)
    np.testing.assert_array_equal(np.asarray(noise), np.asarray(R.uniform(R.key(3), (3,))))


def test_batched_operands_of_bernoulli_and_fold_in():
    p = T(np.linspace(0.05, 0.95, B).astype(np.float32))
    key = R.key(4)
    got = np.asarray(aotjax.vmap(lambda p: R.bernoulli(key, p, (50,)))(p))
    np.testing.assert_array_equal(got, _loop(lambda p: R.bernoulli(key, p, (50,)), p, in_axes=(0,)))
    np.testing.assert_array_equal(got, np.asarray(jax.vmap(lambda p: jax.random.bernoulli(
        jax.random.PRNGKey(4), p, (50,)))(jnp.asarray(np.asarray(p)))))
    keys = R.split(key, B)
    both = aotjax.vmap(lambda k, p: R.bernoulli(k, p, (50,)))(keys, p)
    np.testing.assert_array_equal(np.asarray(both), _loop(lambda k, p: R.bernoulli(k, p, (50,)), keys, p,
                                                          in_axes=(0, 0)))
    data = T(np.arange(B, dtype=np.uint32))
    folded = aotjax.vmap(lambda d: R.fold_in(key, d))(data)
    np.testing.assert_array_equal(np.asarray(folded), np.stack([np.asarray(R.fold_in(key, i)) for i in range(B)]))
    per_key = aotjax.vmap(lambda k, d: R.fold_in(k, d))(keys, data)
    np.testing.assert_array_equal(np.asarray(per_key), _loop(R.fold_in, keys, data, in_axes=(0, 0)))


def test_dropout_with_per_example_keys_and_its_gradient():
    x, keys = _data(B, 8), R.split(R.key(5), B)

    def f(a, k):
        return (aotjax.dropout(a, 0.5, key=k) ** 2).sum()

    _close(aotjax.vmap(f)(x, keys), _loop(f, x, keys, in_axes=(0, 0)))
    _close(aotjax.vmap(aotjax.grad(f))(x, keys), _loop(aotjax.grad(f), x, keys, in_axes=(0, 0)))
