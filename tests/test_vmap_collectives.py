"""Collectives over a named vmap axis (`aotjax.lax.psum`, `pmean`, `pmax`, `pmin`, `axis_index`) against JAX's on the
same math: alone, nested (one name or a tuple of names), through jit, under grad both ways, and their errors."""
from __future__ import annotations

import jax
import numpy as np
import pytest

import aotjax
from aotjax import lax
from tests.helpers import FLOAT
from tests.op_records import as_np

T = aotjax.tensor
X = np.random.default_rng(0).normal(size=(4, 3)).astype(FLOAT)


def _close(got, ref):
    np.testing.assert_allclose(as_np(got), np.asarray(ref), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["psum", "pmean", "pmax", "pmin"])
def test_reduction_over_the_examples_equals_jax(name):
    ours, theirs = getattr(lax, name), getattr(jax.lax, name)
    _close(aotjax.vmap(lambda x: x - ours(x, "i"), axis_name="i")(T(X)),
           jax.vmap(lambda x: x - theirs(x, "i"), axis_name="i")(X))
    # a batch axis that is not the first, and an output stacked elsewhere
    _close(aotjax.vmap(lambda x: x * ours(x, "i"), in_axes=1, out_axes=1, axis_name="i")(T(X)),
           jax.vmap(lambda x: x * theirs(x, "i"), in_axes=1, out_axes=1, axis_name="i")(X))


def test_an_unbatched_value_and_a_pytree():
    c = T(np.ones(3, FLOAT))

    def f(x):
        s = lax.psum({"x": x, "c": c}, "i")
        return s["x"] + s["c"], lax.pmax(c, "i")

    total, top = aotjax.vmap(f, axis_name="i")(T(X))
    _close(total, np.broadcast_to(X.sum(0) + 4.0, X.shape))
    _close(top, np.ones((4, 3)))


def test_axis_index_numbers_the_examples():
    out = aotjax.vmap(lambda x: x.sum() * 0 + lax.axis_index("i"), axis_name="i")(T(X))
    np.testing.assert_array_equal(as_np(out), np.arange(4))
    idx = aotjax.vmap(lambda x: lax.axis_index("i"), axis_name="i")(T(X))
    assert idx.dtype == np.int32 and idx.shape == (4,)


@pytest.mark.parametrize("names", ["i", "j", ("i", "j")])
def test_nested_axes_by_name_and_by_tuple(names):
    x = np.arange(24.0, dtype=FLOAT).reshape(2, 3, 4)
    ours = aotjax.vmap(aotjax.vmap(lambda a: lax.psum(a, names), axis_name="j"), axis_name="i")
    theirs = jax.vmap(jax.vmap(lambda a: jax.lax.psum(a, names), axis_name="j"), axis_name="i")
    _close(ours(T(x)), theirs(x))
    _close(aotjax.jit(ours)(T(x)), theirs(x))


def test_inside_jit_inside_vmap_and_in_a_loop_body():
    def normalize(x):
        return (x - lax.pmean(x, "b")) / lax.psum(x * x, "b")

    ref = jax.vmap(lambda x: (x - jax.lax.pmean(x, "b")) / jax.lax.psum(x * x, "b"), axis_name="b")(X)
    _close(aotjax.vmap(normalize, axis_name="b")(T(X)), ref)
    _close(aotjax.jit(aotjax.vmap(normalize, axis_name="b"))(T(X)), ref)


def test_grad_of_vmap_and_vmap_of_grad_equal_jax():
    def ours(a):
        return aotjax.tanh(a) * lax.psum(a * a, "i")

    def theirs(a):
        return jax.numpy.tanh(a) * jax.lax.psum(a * a, "i")

    x = X[:, 0]
    _close(aotjax.grad(lambda v: aotjax.vmap(ours, axis_name="i")(v).sum())(T(x)),
           jax.grad(lambda v: jax.vmap(theirs, axis_name="i")(v).sum())(x))
    _close(aotjax.vmap(aotjax.grad(ours), axis_name="i")(T(x)), jax.vmap(jax.grad(theirs), axis_name="i")(x))


def test_psum_transpose_dot_product():
    """psum is linear: inside a named vmap, <psum(x), y> summed over the examples equals <x, psum^T(y)>."""
    x, y = T(X[:, 0]), T(X[:, 1])
    fx = aotjax.vmap(lambda a: lax.psum(a, "i"), axis_name="i")(x)
    ft_y = aotjax.vmap(lambda a, ct: aotjax.vjp(lambda v: lax.psum(v, "i"), a)[1](ct)[0], axis_name="i")(x, y)
    np.testing.assert_allclose(float((fx * y).sum()), float((x * ft_y).sum()), rtol=1e-5)


def test_pmax_gradient_goes_to_the_largest_example():
    x = T(np.array([1.0, -3.0, 2.0], FLOAT))
    g = aotjax.grad(lambda v: aotjax.vmap(lambda a: lax.pmax(a * a, "i"), axis_name="i")(v).sum())(x)
    _close(g, [0.0, 3 * 2 * -3.0, 0.0])  # three examples each read the max, 9 = (-3)**2


def test_unbound_axis_name_is_an_error():
    with pytest.raises(NameError, match=r"psum: unbound axis name 'k'.*axis_name='k'"):
        aotjax.vmap(lambda x: lax.psum(x, "k"), axis_name="i")(T(X))
    with pytest.raises(NameError, match="axis_index: unbound axis name 'i'"):
        lax.axis_index("i")
    with pytest.raises(NameError, match="unbound axis name"):
        aotjax.vmap(lambda x: lax.pmean(x, "i"))(T(X))  # the vmap has no name
