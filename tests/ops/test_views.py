"""View ops, one row per op in the op table (tests/op_records.py, family VIEW): values against NumPy,
traced == eager, lowering under jax.jit, each view primitive's inverse (writing through) under jax.jit
for the rows with a `write` view; then argument errors."""
import jax
import numpy as np
import pytest

import aotjax
from aotjax.core.errors import ShapeError
from aotjax.core.views import ViewStep, write_through
from aotjax.interpreters.lowering import lowering_rule
from tests.helpers import check_traced_matches_eager
from tests.op_records import Family, rand, records

VIEWS = records(family=Family.VIEW)
WRITES = records(family=Family.VIEW, write=True)


def _check(out, expected):
    if isinstance(expected, tuple):
        assert isinstance(out, tuple) and len(out) == len(expected)
        for o, e in zip(out, expected, strict=True):
            _check(o, e)
        return
    assert out.shape == expected.shape and out.dtype == expected.dtype
    np.testing.assert_array_equal(out.numpy(), expected)


@pytest.mark.parametrize("view", VIEWS, ids=repr)
def test_values_match_numpy(view):
    arrays = [rand(*s, seed=i) for i, s in enumerate(view.shapes)]
    _check(view.fn(*map(aotjax.tensor, arrays)), view.numpy(*arrays))


@pytest.mark.parametrize("view", VIEWS, ids=repr)
def test_traced_matches_eager_and_lowers(view):
    arrays = [rand(*s, seed=i) for i, s in enumerate(view.shapes)]
    _, jaxpr = check_traced_matches_eager(view.fn, *map(aotjax.tensor, arrays))
    lowered = jax.jit(aotjax.to_jax(jaxpr))(*arrays)
    expected = jax.tree_util.tree_leaves(view.numpy(*arrays))
    for o, e in zip(jax.tree_util.tree_leaves(lowered), expected, strict=True):
        np.testing.assert_array_equal(np.asarray(o), e)


def _jax_apply(prim, *vals, **params):
    return lowering_rule(prim)(*vals, **params)


@pytest.mark.parametrize("view", WRITES, ids=repr)
def test_view_inverse_under_jit(view):
    """The view's elements of a base replaced by new values (the inverses of its chain), as NumPy writes
    them through the same view."""
    (shape,) = view.shapes
    base = rand(*shape)
    out = view.fn(aotjax.tensor(base))
    chain = out._chain
    y = rand(*out.shape, seed=1)
    new_base = jax.jit(lambda b, y: write_through(_jax_apply, b, chain, y))(base, y)
    expected = base.copy()
    written = view.write(expected)
    assert np.shares_memory(written, expected)  # a view of the base, so the write lands in it
    written[...] = y
    np.testing.assert_array_equal(np.asarray(new_base), expected)


def test_view_steps_are_what_pytorch_would_record():
    x = aotjax.zeros(3, 4)
    assert [s.prim.name for s in x.t()[1:, 0]._chain] == ["permute", "slice", "select"]
    assert [s.prim.name for s in x[:, 0]._chain] == ["select"]  # full slices are skipped
    assert isinstance(x[1]._chain[0], ViewStep)


def test_contiguous_write_lowers_to_dynamic_update_slice():
    def prog(x):
        x[1:3] = 0.0
        return x

    jaxpr = aotjax.make_jaxpr(lambda b, y: aotjax.ops.shape.views.slice_scatter_p.bind(b, y, dim=0, start=1, stop=3,
                                                                                  step=1))(rand(4), rand(2))
    hlo = jax.jit(aotjax.to_jax(jaxpr)).lower(rand(4), rand(2)).as_text()
    assert "dynamic_update_slice" in hlo and "scatter" not in hlo
    check_traced_matches_eager(prog, aotjax.tensor(rand(4)))


@pytest.mark.parametrize("f,match", [
    (lambda x: x.view(5), r"view: shape \[5\] is invalid for a tensor of 6 elements"),
    (lambda x: x.view(-1, -1), r"view: shape \[-1, -1\] is invalid"),
    (lambda x: x.reshape(0, -1), r"reshape: .*-1 is ambiguous"),
    (lambda x: x.squeeze_(0).view(4), r"view: shape \[4\] is invalid"),
    (lambda x: x.expand(3), r"expand: the number of sizes \(1\).*at least .* \(2\)"),
    (lambda x: x.expand(4, 3), r"expand: the expanded size 4 must match the existing size 2"),
    (lambda x: x.expand(-1, 2, 3), r"expand: -1 is not allowed in a new leading dim"),
    (lambda x: x.permute(0, 0), r"permute: dims \[0, 0\] are not a permutation"),
    (lambda x: x.diagonal(0, 1, -1), r"diagonal: dim1 and dim2 must differ"),
    (lambda x: x.split([1, 1], 1), r"split: the section sizes \[1, 1\] must .* sum to .* 3"),
    (lambda x: x.chunk(0), r"chunk: chunks must be positive"),
    (lambda x: x.unsqueeze(0).t(), r"t: expects a tensor with <= 2 dimensions, got 3"),
    (lambda x: x.flatten(1, 0), r"flatten: start_dim \(1\) must not come after end_dim \(0\)"),
    (lambda x: x.movedim((0, 1), 0), r"movedim: source \[0, 1\] and destination \[0\]"),
])
def test_shape_errors(f, match):
    with pytest.raises(ShapeError, match=match + r".*test_views.py"):
        f(aotjax.zeros(2, 3))


@pytest.mark.parametrize("f,exc,match", [  # PyTorch's exception classes
    (lambda x: x.select(0, 2), IndexError, r"select: index 2 is out of range for dimension 0 of size 2"),
    (lambda x: x.narrow(1, 4, 0), IndexError, r"narrow: start 4 is out of range for dimension 1 of size 3"),
    (lambda x: x.narrow(1, 2, 2), RuntimeError, r"narrow: start \(2\) \+ length \(2\) exceeds dimension 1 of size 3"),
    (lambda x: x.narrow(1, 0, -1), RuntimeError, r"narrow: length must be non-negative, got -1"),
    (lambda x: x.transpose(0, 2), IndexError, r"transpose: dimension 2 is out of range"),
])
def test_index_errors(f, exc, match):
    with pytest.raises(exc, match=match + r".*test_views.py"):
        f(aotjax.zeros(2, 3))


def test_views_of_views_share_one_storage():
    x = aotjax.zeros(2, 3)
    views = [x.t(), x[1], x.view(6)[2:], x.unsqueeze(0).squeeze(0), x.detach().diagonal()]
    assert all(v._storage is x._storage for v in views)
