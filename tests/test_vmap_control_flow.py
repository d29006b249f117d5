"""vmap of `scan`, `cond`/`switch` and `while_loop`/`fori_loop` against a Python loop over the examples of the
un-vmapped call, stacked ("loops of loops"): batched and unbatched operands at any batch axis, carries that become
batched in the body, examples taking different branches or stopping at different trips, in-place writes in the
bodies, nesting, and under jit, grad and aot (gradients also against `jax.grad` of the same math in jax)."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import aotjax
from aotjax.ops.indexing.subscripts import check_index
from tests.helpers import FLOAT, INT, by_mode

pytestmark = pytest.mark.slow  # NOTE: end-to-end sweeps: once, in jax's default mode (CI time)

T = aotjax.tensor
L = aotjax.lax
B = 3  # examples
RTOL, ATOL = by_mode((1e-10, 1e-10), (2e-5, 2e-5))


def _rng(seed: int = 0):
    return np.random.default_rng(seed)


def _normal(*shape, seed: int = 0) -> np.ndarray:
    return (_rng(seed).standard_normal(shape) * 0.5).astype(FLOAT)


def _example(x: np.ndarray, axis, i: int):
    """Example `i` of `x` batched at `axis` (`x` itself when it is not batched)."""
    return x if axis is None else np.take(x, i, axis=axis)


def _loop(f, args: list[np.ndarray], in_axes: tuple) -> list[np.ndarray]:
    """`f` called on each example (fresh tensors), each output stacked at axis 0."""
    size = next(a.shape[ax] for a, ax in zip(args, in_axes) if ax is not None)
    per_example = [jax.tree_util.tree_leaves(f(*(T(_example(a, ax, i)) for a, ax in zip(args, in_axes))))
                   for i in range(size)]
    return [np.stack([np.asarray(o[k]) for o in per_example]) for k in range(len(per_example[0]))]


def _assert_vmap_is_the_loop(f, args: list[np.ndarray], in_axes: tuple, run=None, rtol=RTOL, atol=ATOL):
    """`vmap(f)` (or `run(vmap(f))`: jit, aot) on `args` equals the loop of `f` over the examples: values, dtypes."""
    batched = aotjax.vmap(f, in_axes=in_axes)
    got = jax.tree_util.tree_leaves((run or (lambda g: g))(batched)(*map(T, args)))
    expected = _loop(f, args, in_axes)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype and tuple(g.shape) == e.shape, (g.aval, e.dtype, e.shape)
        np.testing.assert_allclose(np.asarray(g), e, rtol=rtol, atol=atol)


# -- scan ---------------------------------------------------------------------------------------------------------
def _rnn(h0, xs, w):
    def step(h, x):
        h = (h * w + x).tanh()
        return h, (h * x).sum()
    return L.scan(step, h0, xs)


SCAN_AXES = [(None, 0, None), (0, None, None), (None, None, 0), (0, 0, 0), (-1, -1, None), (None, 1, -1),
             (0, -1, 0)]


@pytest.mark.parametrize("in_axes", SCAN_AXES, ids=str)
def test_scan_with_batched_or_unbatched_init_xs_and_captured_consts(in_axes):
    # (None, 0, None): the carry becomes batched only through the body (its init is the same for every example)
    args = []
    for shape, axis in zip([(4,), (5, 4), (4,)], in_axes):  # h0, xs, w
        if axis is not None:
            pos = axis % (len(shape) + 1)
            shape = shape[:pos] + (B,) + shape[pos:]
        args.append(_normal(*shape, seed=len(args)))
    _assert_vmap_is_the_loop(_rnn, args, in_axes)


@pytest.mark.parametrize("reverse, unroll", [(True, 1), (False, 2), (True, 3)])
def test_scan_reverse_and_unroll_are_kept(reverse, unroll):
    def f(h0, xs):
        return L.scan(lambda h, x: (h * 0.5 + x, h.sum() * x), h0, xs, reverse=reverse, unroll=unroll)
    _assert_vmap_is_the_loop(f, [_normal(B, 2), _normal(5, B, 2, seed=1)], (0, 1))


def test_scan_over_layers_with_unbatched_stacked_weights():
    ws, bs = _normal(4, 3, 3), _normal(4, 3, seed=1)

    def net(h, ws, bs):
        h, _ = L.scan(lambda h, wb: ((wb[0] @ h + wb[1]).tanh(), None), h, (ws, bs))
        return h
    _assert_vmap_is_the_loop(net, [_normal(B, 3, seed=2), ws, bs], (0, None, None))


def test_nested_vmap_of_scan_is_a_loop_of_loops():
    xs, h0 = _normal(2, 5, 4, 3), _normal(3, seed=1)  # [outer, length, inner, features]
    inner = aotjax.vmap(lambda h, x: L.scan(lambda c, xi: ((c * xi).sin() + xi, c.sum()), h, x), in_axes=(None, 1))
    got = aotjax.vmap(inner, in_axes=(None, 0))(T(h0), T(xs))
    for i in range(2):
        for j in range(4):
            carry, ys = L.scan(lambda c, xi: ((c * xi).sin() + xi, c.sum()), T(h0), T(xs[i, :, j]))
            np.testing.assert_allclose(np.asarray(got[0])[i, j], np.asarray(carry), rtol=RTOL, atol=ATOL)
            np.testing.assert_allclose(np.asarray(got[1])[i, j], np.asarray(ys), rtol=RTOL, atol=ATOL)


def test_vmap_of_scan_under_jit():
    _assert_vmap_is_the_loop(_rnn, [_normal(4), _normal(B, 5, 4, seed=1), _normal(4, seed=2)], (None, 0, None),
                             run=aotjax.jit)


def _jax_rnn_loss(w, h0, xs):
    def step(h, x):
        h = jnp.tanh(h * w + x)
        return h, jnp.sum(h * x)

    def one(x):
        h, ys = jax.lax.scan(step, h0, x)
        return jnp.sum(h) + jnp.sum(jnp.sin(ys))
    return jnp.sum(jax.vmap(one)(xs))


def test_grad_of_vmap_of_scan_is_the_sum_of_a_loop_of_grads_and_jaxs():
    w, h0, xs = _normal(4), _normal(4, seed=1), _normal(B, 5, 4, seed=2)

    def one(w, x):
        h, ys = _rnn(T(h0), x, w)
        return h.sum() + ys.sin().sum()

    got = aotjax.grad(lambda w: aotjax.vmap(one, in_axes=(None, 0))(w, T(xs)).sum())(T(w))
    loop = sum(np.asarray(aotjax.grad(one)(T(w), T(xs[i]))) for i in range(B))
    np.testing.assert_allclose(np.asarray(got), loop, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(np.asarray(got), jax.grad(_jax_rnn_loss)(w, h0, xs), rtol=RTOL, atol=ATOL)
    per_example = aotjax.vmap(aotjax.grad(one), in_axes=(None, 0))(T(w), T(xs))
    np.testing.assert_allclose(np.asarray(per_example), np.stack([np.asarray(aotjax.grad(one)(T(w), T(xs[i])))
                                                                  for i in range(B)]), rtol=RTOL, atol=ATOL)


# -- cond and switch ----------------------------------------------------------------------------------------------
def _branchy(p, x):
    return L.cond(p > 0, lambda x: (x.sin() * 2, (x > 0).sum()), lambda x: (x.cos(), (x < 0).sum() + 10), x)


@pytest.mark.parametrize("in_axes", [(None, 0), (0, 0), (0, None), (0, -1)], ids=str)
def test_cond_with_batched_or_unbatched_predicate_selects_per_example(in_axes):
    p = np.array([1.0, -1.0, 2.0], dtype=FLOAT) if in_axes[0] is not None else np.array(-1.0, dtype=FLOAT)
    x = _normal(B, 4, seed=1) if in_axes[1] == 0 else _normal(4, B, seed=1) if in_axes[1] == -1 else _normal(4)
    _assert_vmap_is_the_loop(_branchy, [p, x], in_axes)  # an integer output too


def test_switch_with_a_batched_index_takes_each_examples_branch():
    branches = [lambda x, k: x + k, lambda x, k: x * k.to(x.dtype), lambda x, k: -x]

    def f(i, x, k):
        return L.switch(i, branches, x, k)
    index = np.array([0, 1, 2, 7, -3], dtype=np.int32)  # clamped to the last and first branch
    _assert_vmap_is_the_loop(f, [index, _normal(5, 2), np.arange(5, dtype=np.int32)], (0, 0, 0))
    _assert_vmap_is_the_loop(f, [index, _normal(2), np.int32(3)], (0, None, None))


def test_cond_with_a_batched_predicate_under_jit():
    p, x = np.array([1.0, -1.0, 2.0], dtype=FLOAT), _normal(B, 4, seed=1)
    _assert_vmap_is_the_loop(_branchy, [p, x], (0, 0), run=aotjax.jit)


def test_grad_through_a_branch_not_taken_is_zero_not_nan():
    # JAX's issue 1052: the branch not taken must put no NaN into the gradient of the branch taken
    def f(x):
        return L.cond(x > 0, lambda x: x.sqrt(), lambda x: x * 0.0, x)

    x = np.array([-1.0, 0.0, 4.0, 9.0], dtype=FLOAT)
    got = np.asarray(aotjax.grad(lambda x: aotjax.vmap(f)(x).sum())(T(x)))
    loop = [float(np.asarray(aotjax.grad(f)(T(x[i])))) for i in range(4)]
    np.testing.assert_allclose(got, loop, rtol=RTOL)
    np.testing.assert_allclose(got, [0.0, 0.0, 0.25, 1 / 6], rtol=RTOL)
    w = np.array(2.0, dtype=FLOAT)  # an unbatched operand: each example's branch alone contributes
    got_w = aotjax.grad(lambda w: aotjax.vmap(lambda x, w: L.cond(x > 0, lambda a, b: (a * b).sqrt(),
                                                                  lambda a, b: b * 0.0, x, w),
                                               in_axes=(0, None))(T(x), w).sum())(T(w))
    np.testing.assert_allclose(float(np.asarray(got_w)), (np.sqrt(4.0 / 2) + np.sqrt(9.0 / 2)) / 2, rtol=RTOL)


def test_a_check_in_a_branch_an_example_does_not_take_does_not_raise():
    def f(i):
        return L.cond(i < 4, lambda i: check_index("lookup", i, 4, 0, negative=False) * 10, lambda i: i * 0, i)

    for run in (aotjax.vmap(f), aotjax.jit(aotjax.vmap(f), checks=True)):
        np.testing.assert_array_equal(np.asarray(run(T(np.array([1, 7, 3], np.int32)))), [10, 0, 30])
        np.testing.assert_array_equal(np.asarray(run(T(np.array([5, 7, 9], np.int32)))), [0, 0, 0])  # none takes it
        with pytest.raises(IndexError, match="lookup: index -2 is out of bounds"):
            run(T(np.array([1, -2, 3], np.int32)))


# -- while_loop and fori_loop -------------------------------------------------------------------------------------
def test_while_with_an_unbatched_predicate_and_batched_carries():
    def f(x, n):
        return L.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * 0.5 + c[0]), (aotjax.tensor(0), x))
    _assert_vmap_is_the_loop(f, [_normal(B, 3), np.int32(4)], (0, None))


def _collatz_steps(n):
    def step(c):
        n, k = c
        return aotjax.where(n % 2 == 0, n // 2, 3 * n + 1), k + 1
    return L.while_loop(lambda c: c[0] != 1, step, (n, aotjax.zeros((), dtype=n.dtype)))


def _newton_sqrt(a):
    def step(c):
        x, k = c
        return 0.5 * (x + a / x), k + 1
    return L.while_loop(lambda c: (c[0] * c[0] - a).abs() > 1e-3 * a, step, (a, aotjax.tensor(0)))


def test_while_with_a_batched_predicate_stops_each_example_at_its_own_trip():
    _assert_vmap_is_the_loop(_collatz_steps, [np.array([1, 6, 7, 27, 2], dtype=INT)], (0,))
    _assert_vmap_is_the_loop(_newton_sqrt, [np.array([1.0, 2.0, 50.0, 1e4], dtype=FLOAT)], (0,))
    steps = aotjax.vmap(_collatz_steps)(T(np.array([1, 6, 27], dtype=INT)))[1]
    np.testing.assert_array_equal(np.asarray(steps), [0, 8, 111])


def test_while_with_a_batched_predicate_under_jit():
    _assert_vmap_is_the_loop(_newton_sqrt, [np.array([1.0, 2.0, 50.0], dtype=FLOAT)], (0,), run=aotjax.jit)


def test_fori_loop_with_batched_bounds_and_static_bounds():
    def f(lo, hi, x):
        return L.fori_loop(lo, hi, lambda i, v: v * 0.9 + i.to(v.dtype), x)
    lo, hi = np.array([0, 2, 1], dtype=INT), np.array([3, 7, 1], dtype=INT)
    _assert_vmap_is_the_loop(f, [lo, hi, _normal(B, 2)], (0, 0, 0))
    _assert_vmap_is_the_loop(f, [lo, np.array(4, dtype=INT), _normal(2)], (0, None, None))
    _assert_vmap_is_the_loop(lambda x: L.fori_loop(1, 4, lambda i, v: v * v.cos() + i, x), [_normal(B, 2)], (0,))


def test_jvp_of_vmap_of_a_while_loop_with_a_batched_predicate():
    a = np.array([1.0, 2.0, 50.0], dtype=FLOAT)
    _, tangent = aotjax.jvp(lambda a: aotjax.vmap(_newton_sqrt)(a)[0], (T(a),), (T(np.ones(3, FLOAT)),))
    loop = [float(np.asarray(aotjax.jvp(lambda a: _newton_sqrt(a)[0], (T(a[i]),), (T(np.ones((), FLOAT)),))[1]))
            for i in range(3)]
    np.testing.assert_allclose(np.asarray(tangent), loop, rtol=RTOL, atol=ATOL)


def test_a_check_in_a_while_body_raises_only_for_an_example_still_looping():
    def f(step, offset):
        def body(c):
            i, acc = c
            return i + step, acc + check_index("lookup", i + offset, 5, 0, negative=False)
        return L.while_loop(lambda c: c[0] < 5, body, (aotjax.tensor(0), aotjax.tensor(0)))

    # the example stepping by 2 stops at i = 6 two trips before the other: i + 0 = 6 is never looked up
    steps = T(np.array([1, 2], dtype=INT))
    for run in (aotjax.vmap(f, in_axes=(0, None)), aotjax.jit(aotjax.vmap(f, in_axes=(0, None)), checks=True)):
        i, acc = run(steps, 0)
        np.testing.assert_array_equal(np.asarray(acc), [10, 6])
        with pytest.raises(IndexError, match="lookup: index 5 is out of bounds"):
            run(steps, 1)


def test_indexing_in_a_while_body_past_an_examples_last_trip_does_not_raise():
    table = T(np.arange(5, dtype=FLOAT) * 10)

    def f(step):
        def body(c):
            i, acc = c
            return i + step, acc + table[i]
        return L.while_loop(lambda c: c[0] < 5, body, (aotjax.tensor(0), aotjax.zeros((), dtype=FLOAT)))
    _assert_vmap_is_the_loop(f, [np.array([1, 2, 3], dtype=INT)], (0,))


# -- in-place writes in the bodies --------------------------------------------------------------------------------
def test_a_body_writing_a_tensor_made_inside_the_vmapped_function():
    def with_scan(xs):
        acc = aotjax.zeros(xs.shape[1], dtype=xs.dtype)

        def step(h, x):
            acc.add_(x)
            h.mul_(0.5).add_(acc)
            return h, acc.sum()
        h, ys = L.scan(step, aotjax.zeros(xs.shape[1], dtype=xs.dtype), xs)
        return acc, h, ys

    def with_while(n):
        acc = aotjax.zeros(2, dtype=FLOAT)

        def step(i):
            acc.add_(i.to(FLOAT))
            return i + 1
        i = L.while_loop(lambda i: i < n, step, aotjax.tensor(0, dtype=n.dtype))
        return acc, i

    def with_cond(x):
        acc = aotjax.ones(2, dtype=x.dtype)
        L.cond(x.sum() > 0, lambda x: acc.mul_(x), lambda x: acc.sub_(x), x)
        return acc

    _assert_vmap_is_the_loop(with_scan, [_normal(B, 4, 2)], (0,))
    _assert_vmap_is_the_loop(with_while, [np.array([0, 3, 5], dtype=INT)], (0,))
    _assert_vmap_is_the_loop(with_cond, [_normal(B, 2)], (0,))


# -- aot --------------------------------------------------------------------------------------------------------
def test_aot_of_vmap_of_loops_agrees_with_grad():
    w, xs = _normal(4), _normal(B, 5, 4, seed=1)

    def per_example(w, x):
        h, ys = _rnn(aotjax.zeros(4, dtype=x.dtype), x, w)
        return L.cond(h.sum() > 0, lambda h: h.exp(), lambda h: h * 2, h).sum() + ys.sum()

    batched = aotjax.vmap(per_example, in_axes=(None, 0))
    np.testing.assert_allclose(np.asarray(aotjax.aot(batched)(T(w), T(xs))), np.asarray(batched(T(w), T(xs))),
                               rtol=RTOL, atol=ATOL)
    expected = aotjax.grad(lambda w, xs: batched(w, xs).sum())(T(w), T(xs))
    got = aotjax.grad(lambda w, xs: aotjax.aot(batched)(w, xs).sum())(T(w), T(xs))
    np.testing.assert_allclose(np.asarray(got), np.asarray(expected), rtol=RTOL, atol=ATOL)
    whole = aotjax.aot(aotjax.grad(lambda w, xs: batched(w, xs).sum()))(T(w), T(xs))
    np.testing.assert_allclose(np.asarray(whole), np.asarray(expected), rtol=RTOL, atol=ATOL)
