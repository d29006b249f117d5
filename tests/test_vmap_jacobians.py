"""Jacobians built on vmap (`jacfwd`, `jacrev`, `hessian`: no Python loop over basis vectors) against JAX on the same
math, and `chunk_size` (vmap's and the Jacobians') giving the result of one chunk."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import aotjax
from tests.helpers import FLOAT
from tests.op_records import as_np

pytestmark = pytest.mark.slow  # NOTE: end-to-end sweeps: once, in jax's default mode (CI time)

T = aotjax.tensor
X = np.random.default_rng(0).normal(size=(3, 4)).astype(FLOAT)
W = np.random.default_rng(1).normal(size=(4, 4)).astype(FLOAT)


def ours(a, w):
    h = aotjax.tanh(a @ w)
    return (h * h.sum(-1, keepdim=True)).exp()


def theirs(a, w):
    h = jnp.tanh(a @ w)
    return jnp.exp(h * h.sum(-1, keepdims=True))


def _close(got, ref):
    np.testing.assert_allclose(as_np(got), np.asarray(ref), rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("jac", ["jacfwd", "jacrev"])
@pytest.mark.parametrize("argnums", [0, 1])
@pytest.mark.parametrize("chunk_size", [None, 1, 5])
def test_jacobian_equals_jax(jac, argnums, chunk_size):
    got = getattr(aotjax, jac)(ours, argnums, chunk_size=chunk_size)(T(X), T(W))
    _close(got, getattr(jax, jac)(theirs, argnums)(X, W))


def test_hessian_equals_jax():
    def f(a):
        return (aotjax.sin(a) * a.sum()).sum()

    _close(aotjax.hessian(f)(T(X[0])), jax.hessian(lambda a: (jnp.sin(a) * a.sum()).sum())(X[0]))


def test_jacobian_traces_one_batched_program_not_a_loop():
    jaxpr = aotjax.make_jaxpr(aotjax.jacrev(ours))(T(X), T(W))
    assert [e.primitive.name for e in jaxpr.jaxpr.eqns].count("matmul") <= 4  # a loop would have one per row


def test_jacobian_of_in_place_code_and_under_jit():
    def f(a):
        out = aotjax.zeros(3)
        out[1:].copy_(a[:2] * a[1:])
        out.mul_(2.0)
        return out

    x = np.array([1.0, 2.0, 3.0], FLOAT)
    ref = jax.jacrev(lambda a: 2 * jnp.zeros(3).at[1:].set(a[:2] * a[1:]))(x)
    _close(aotjax.jacrev(f)(T(x)), ref)
    _close(aotjax.jacfwd(f)(T(x)), ref)
    _close(aotjax.jit(aotjax.jacrev(f))(T(x)), ref)


@pytest.mark.parametrize("chunk_size", [1, 2, 4, 7])
def test_vmap_chunk_size_equals_one_chunk(chunk_size):
    xs = T(np.random.default_rng(2).normal(size=(7, 3)).astype(FLOAT))

    def f(a, b):
        return {"s": (a * b).sum(), "m": a.exp() + b}, b * 2

    full = aotjax.vmap(f, in_axes=(0, None), out_axes=({"s": 0, "m": 1}, None))(xs, T(W[0, :3]))
    chunked = aotjax.vmap(f, in_axes=(0, None), out_axes=({"s": 0, "m": 1}, None),
                          chunk_size=chunk_size)(xs, T(W[0, :3]))
    for a, b in zip(jax.tree_util.tree_leaves(full), jax.tree_util.tree_leaves(chunked), strict=True):
        assert a.shape == b.shape
        _close(b, as_np(a))


def test_chunked_vmap_writes_the_callers_batched_input():
    x = T(np.zeros((5, 2), FLOAT))
    aotjax.vmap(lambda a, i: a.add_(i), in_axes=(1, 0), chunk_size=2)(x.t(), T(np.arange(5.0, dtype=FLOAT)))
    np.testing.assert_array_equal(as_np(x), np.tile(np.arange(5.0)[:, None], (1, 2)))

