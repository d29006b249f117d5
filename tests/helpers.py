"""Shared checks: run a program eagerly and through its traced jaxpr and compare everything."""
from __future__ import annotations

import jax
import numpy as np

import aotjax
from aotjax import Tensor


def copy_tree(tree):
    """Fresh, independent eager tensors with the same values (leaves that are not Tensors are kept)."""
    return jax.tree_util.tree_map(lambda x: aotjax.tensor(np.array(x)) if isinstance(x, Tensor) else x, tree)


def to_numpy(tree):
    return jax.tree_util.tree_map(lambda x: np.asarray(x) if isinstance(x, Tensor) else x, tree)


def assert_trees_close(a, b, rtol=1e-6, atol=1e-6):
    la, ta = jax.tree_util.tree_flatten(to_numpy(a))
    lb, tb = jax.tree_util.tree_flatten(to_numpy(b))
    assert ta == tb, f"structures differ: {ta} vs {tb}"
    for x, y in zip(la, lb):
        x, y = np.asarray(x), np.asarray(y)
        assert x.shape == y.shape, f"shapes differ: {x.shape} vs {y.shape}"
        assert x.dtype == y.dtype, f"dtypes differ: {x.dtype} vs {y.dtype}"
        np.testing.assert_allclose(x, y, rtol=rtol, atol=atol)


def check_traced_matches_eager(f, *args, rtol=1e-6, atol=1e-6):
    """`eval_jaxpr(make_jaxpr(f))` equals eager `f`: outputs and the arguments afterwards."""
    eager_args = copy_tree(args)
    eager_out = f(*eager_args)
    jaxpr = aotjax.make_jaxpr(f)(*copy_tree(args))
    traced_args = copy_tree(args)
    flat_args = jax.tree_util.tree_leaves(traced_args)
    traced_out = jax.tree_util.tree_unflatten(jaxpr.out_tree, aotjax.eval_jaxpr(jaxpr, *flat_args))
    assert_trees_close(eager_out, traced_out, rtol, atol)
    assert_trees_close(eager_args, traced_args, rtol, atol)
    return eager_out, jaxpr
