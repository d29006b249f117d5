"""Shape ops that make new values: values against NumPy, traced == eager, lowering under jax.jit, no
aliasing with their inputs, and argument errors."""
import jax
import numpy as np
import pytest

import aotjax
from aotjax.core.errors import ShapeError
from tests.helpers import check_traced_matches_eager


def rand(*shape, seed=0, dtype=np.float32):
    return (np.random.default_rng(seed).normal(size=shape) * 10).astype(dtype)


# name, input arrays, op on aotjax tensors, NumPy reference
CASES = [
    ("clone", [rand(2, 3)], lambda x: x.clone(), lambda a: a),
    ("clone_t", [rand(2, 3)], lambda x: x.t().clone(), lambda a: a.T),
    ("clone_contiguous", [rand(2, 3)], lambda x: x.t().clone(memory_format="contiguous"), lambda a: a.T),
    ("cat", [rand(2, 3), rand(1, 3, seed=1)], lambda x, y: aotjax.cat([x, y]), lambda a, b: np.concatenate([a, b])),
    ("cat_neg_dim", [rand(2, 3), rand(2, 1, seed=1)], lambda x, y: aotjax.cat((x, y, x), -1),
     lambda a, b: np.concatenate([a, b, a], -1)),
    ("cat_promote", [rand(2), rand(3, dtype=np.int32)], lambda x, y: aotjax.cat([x, y]),
     lambda a, b: np.concatenate([a, b.astype(np.float32)])),
    ("cat_legacy_empty", [rand(2, 2), rand(0)], lambda x, y: aotjax.cat([x, y]), lambda a, b: a),
    ("concat", [rand(2), rand(2, seed=1)], lambda x, y: aotjax.concat([x, y]), lambda a, b: np.concatenate([a, b])),
    ("concatenate", [rand(2)], lambda x: aotjax.concatenate([x, x]), lambda a: np.concatenate([a, a])),
    ("stack", [rand(2, 3), rand(2, 3, seed=1)], lambda x, y: aotjax.stack([x, y]), lambda a, b: np.stack([a, b])),
    ("stack_neg_dim", [rand(2, 3), rand(2, 3, seed=1)], lambda x, y: aotjax.stack([x, y], -1),
     lambda a, b: np.stack([a, b], -1)),
    ("flip", [rand(2, 3, 4)], lambda x: x.flip(0, -1), lambda a: np.flip(a, (0, 2))),
    ("flip_tuple", [rand(2, 3)], lambda x: aotjax.flip(x, (1,)), lambda a: a[:, ::-1]),
    ("roll", [rand(2, 3)], lambda x: x.roll(1, -1), lambda a: np.roll(a, 1, -1)),
    ("roll_multi", [rand(3, 4)], lambda x: x.roll((2, -1), (0, 1)), lambda a: np.roll(a, (2, -1), (0, 1))),
    ("roll_flat", [rand(2, 3)], lambda x: x.roll(-2), lambda a: np.roll(a, -2)),
    ("repeat", [rand(2, 3)], lambda x: x.repeat(2, 1), lambda a: np.tile(a, (2, 1))),
    ("repeat_new_dims", [rand(3)], lambda x: x.repeat(2, 1, 2), lambda a: np.tile(a, (2, 1, 2))),
    ("tile", [rand(2, 3)], lambda x: x.tile(3), lambda a: np.tile(a, 3)),
    ("tile_more", [rand(2)], lambda x: x.tile((2, 2)), lambda a: np.tile(a, (2, 2))),
    ("tril", [rand(3, 4)], lambda x: x.tril(), lambda a: np.tril(a)),
    ("tril_k", [rand(2, 3, 4)], lambda x: x.tril(-1), lambda a: np.tril(a, -1)),
    ("triu", [rand(3, 4)], lambda x: x.triu(1), lambda a: np.triu(a, 1)),
    ("triu_int", [rand(4, 4, dtype=np.int32)], lambda x: aotjax.triu(x, -2), lambda a: np.triu(a, -2)),
]


@pytest.mark.parametrize("name,arrays,f,ref", CASES, ids=[c[0] for c in CASES])
def test_values_match_numpy(name, arrays, f, ref):
    xs = list(map(aotjax.tensor, arrays))
    out = f(*xs)
    expected = ref(*arrays)
    assert out.shape == expected.shape and out.dtype == expected.dtype
    np.testing.assert_array_equal(out.numpy(), expected)
    assert all(out._storage is not x._storage for x in xs)  # a new value, never a view of an input


@pytest.mark.parametrize("name,arrays,f,ref", CASES, ids=[c[0] for c in CASES])
def test_traced_matches_eager_and_lowers(name, arrays, f, ref):
    _, jaxpr = check_traced_matches_eager(f, *map(aotjax.tensor, arrays))
    (out,) = jax.tree_util.tree_leaves(jax.jit(aotjax.to_jax(jaxpr))(*arrays))
    np.testing.assert_array_equal(np.asarray(out), ref(*arrays))


def test_clone_is_a_new_base_under_tracing():
    def prog(x):
        c = x.clone()
        c.add_(1)
        return c

    out, jaxpr = check_traced_matches_eager(prog, aotjax.tensor(rand(3)))
    assert [e.primitive.name for e in jaxpr.eqns][0] == "clone"


@pytest.mark.parametrize("f,match", [
    (lambda x: aotjax.cat([x, aotjax.zeros(3, 2)]), r"cat: tensors must have the same shape except in dimension 0"),
    (lambda x: aotjax.cat([x.sum()]), r"cat: zero-dimensional tensors cannot be concatenated"),
    (lambda x: aotjax.stack([x, x.t()]), r"stack: expects each tensor to be of equal shape"),
    (lambda x: x.repeat(2), r"repeat: expects at least as many non-negative repeats as dims"),
    (lambda x: x[0].tril(), r"tril: input must have at least 2 dimensions"),
    (lambda x: x.roll((1, 2), 0), r"roll: shifts \[1, 2\] and dims \[0\] must have the same length"),
])
def test_shape_errors(f, match):
    with pytest.raises(ShapeError, match=match + r".*test_shape.py"):
        f(aotjax.zeros(2, 3))


def test_cat_dim_out_of_range():
    with pytest.raises(IndexError, match="cat: dimension 2 is out of range"):
        aotjax.cat([aotjax.zeros(2, 3)], 2)
