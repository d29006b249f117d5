"""View ops: values against NumPy, traced == eager, lowering under jax.jit, each view primitive's inverse
(writing through) under jax.jit, and argument errors."""
import jax
import numpy as np
import pytest

import aotjax
from aotjax.core.errors import ShapeError
from aotjax.core.views import ViewStep, write_through
from aotjax.interpreters.lowering import lowering_rule
from tests.helpers import check_traced_matches_eager


def rand(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


# name, input shapes, op on aotjax tensors, NumPy reference (outputs may be tuples)
CASES = [
    ("select", [(3, 4)], lambda x: x.select(-1, 2), lambda a: a[:, 2]),
    ("narrow", [(3, 5)], lambda x: x.narrow(-1, -3, 2), lambda a: a[:, 2:4]),
    ("diagonal", [(4, 3)], lambda x: x.diagonal(), lambda a: np.diagonal(a)),
    ("diagonal_offset_dims", [(2, 4, 3)], lambda x: x.diagonal(1, -1, 1), lambda a: np.diagonal(a, 1, -1, 1)),
    ("diagonal_empty", [(2, 3)], lambda x: x.diagonal(-5), lambda a: np.diagonal(a, -5)),
    ("permute", [(2, 3, 4)], lambda x: x.permute(-1, 0, 1), lambda a: a.transpose(2, 0, 1)),
    ("permute_tuple", [(2, 3, 4)], lambda x: x.permute((1, 2, 0)), lambda a: a.transpose(1, 2, 0)),
    ("transpose", [(2, 3, 4)], lambda x: x.transpose(0, -2), lambda a: a.swapaxes(0, 1)),
    ("t", [(2, 3)], lambda x: x.t(), lambda a: a.T),
    ("t_1d", [(3,)], lambda x: x.t(), lambda a: a),
    ("movedim", [(2, 3, 4)], lambda x: x.movedim((0, 1), (-1, 0)), lambda a: np.moveaxis(a, (0, 1), (-1, 0))),
    ("view", [(2, 6)], lambda x: x.view(-1, 4), lambda a: a.reshape(-1, 4)),
    ("view_tuple", [(2, 6)], lambda x: x.view((3, 2, 2)), lambda a: a.reshape(3, 2, 2)),
    ("view_scalar", [()], lambda x: x.view(1, 1), lambda a: a.reshape(1, 1)),
    ("view_empty", [(0, 3)], lambda x: x.view(3, 0), lambda a: a.reshape(3, 0)),
    ("view_as", [(6,)], lambda x: x.view_as(aotjax.zeros(2, 3)), lambda a: a.reshape(2, 3)),
    ("reshape", [(2, 3)], lambda x: x.reshape(3, 2), lambda a: a.reshape(3, 2)),
    ("reshape_copy", [(2, 3)], lambda x: x.t().reshape(-1), lambda a: a.T.reshape(-1)),
    ("reshape_function", [(2, 3)], lambda x: aotjax.reshape(x, (6,)), lambda a: a.reshape(6)),
    ("reshape_as", [(2, 3)], lambda x: x.t().reshape_as(aotjax.zeros(6)), lambda a: a.T.reshape(6)),
    ("flatten", [(2, 3, 4)], lambda x: x.flatten(), lambda a: a.reshape(-1)),
    ("flatten_range", [(2, 3, 4, 5)], lambda x: x.flatten(1, -2), lambda a: a.reshape(2, 12, 5)),
    ("flatten_scalar", [()], lambda x: x.flatten(), lambda a: a.reshape(1)),
    ("contiguous", [(2, 3)], lambda x: x.t().contiguous(), lambda a: a.T),
    ("squeeze_all", [(1, 3, 1)], lambda x: x.squeeze(), lambda a: a.squeeze()),
    ("squeeze_dim", [(1, 3, 1)], lambda x: x.squeeze(-1), lambda a: a.squeeze(-1)),
    ("squeeze_tuple", [(1, 3, 1)], lambda x: x.squeeze((0, 2)), lambda a: a.squeeze((0, 2))),
    ("squeeze_noop", [(2, 3)], lambda x: x.squeeze(0), lambda a: a),
    ("unsqueeze", [(2, 3)], lambda x: x.unsqueeze(-1), lambda a: a[..., None]),
    ("unsqueeze_front", [(2, 3)], lambda x: x.unsqueeze(-3), lambda a: a[None]),
    ("expand", [(3, 1)], lambda x: x.expand(2, -1, 4), lambda a: np.broadcast_to(a, (2, 3, 4))),
    ("expand_as", [(3,)], lambda x: x.expand_as(aotjax.zeros(2, 3)), lambda a: np.broadcast_to(a, (2, 3))),
    ("broadcast_to", [(1, 3)], lambda x: aotjax.broadcast_to(x, (4, 3)), lambda a: np.broadcast_to(a, (4, 3))),
    ("unbind", [(3, 2)], lambda x: x.unbind(-1), lambda a: tuple(a[:, i] for i in range(2))),
    ("split", [(5, 2)], lambda x: x.split(2), lambda a: tuple(np.split(a, [2, 4]))),
    ("split_sections", [(2, 6)], lambda x: x.split([1, 0, 5], -1), lambda a: tuple(np.split(a, [1, 1], 1))),
    ("chunk", [(7,)], lambda x: x.chunk(3), lambda a: (a[:3], a[3:6], a[6:])),
    ("chunk_fewer", [(4,)], lambda x: x.chunk(3), lambda a: (a[:2], a[2:])),
    ("detach", [(2, 3)], lambda x: x.detach(), lambda a: a),
    ("T", [(2, 3, 4)], lambda x: x.T, lambda a: a.T),
    ("mT", [(2, 3, 4)], lambda x: x.mT, lambda a: a.swapaxes(-1, -2)),
    ("swapaxes", [(2, 3, 4)], lambda x: aotjax.swapaxes(x, 0, 2), lambda a: a.swapaxes(0, 2)),
]


def _check(out, expected):
    if isinstance(expected, tuple):
        assert isinstance(out, tuple) and len(out) == len(expected)
        for o, e in zip(out, expected, strict=True):
            _check(o, e)
        return
    assert out.shape == expected.shape and out.dtype == expected.dtype
    np.testing.assert_array_equal(out.numpy(), expected)


@pytest.mark.parametrize("name,shapes,f,ref", CASES, ids=[c[0] for c in CASES])
def test_values_match_numpy(name, shapes, f, ref):
    arrays = [rand(*s, seed=i) for i, s in enumerate(shapes)]
    _check(f(*map(aotjax.tensor, arrays)), ref(*arrays))


@pytest.mark.parametrize("name,shapes,f,ref", CASES, ids=[c[0] for c in CASES])
def test_traced_matches_eager_and_lowers(name, shapes, f, ref):
    arrays = [rand(*s, seed=i) for i, s in enumerate(shapes)]
    _, jaxpr = check_traced_matches_eager(f, *map(aotjax.tensor, arrays))
    lowered = jax.jit(aotjax.to_jax(jaxpr))(*arrays)
    for o, e in zip(jax.tree_util.tree_leaves(lowered), jax.tree_util.tree_leaves(ref(*arrays)), strict=True):
        np.testing.assert_array_equal(np.asarray(o), e)


# A view applied to a base, the new value written to it, and the base NumPy gets with the same write.
INVERSES = [
    ("slice_contiguous", (5, 3), lambda x: x[1:4], lambda a: a[1:4]),
    ("slice_strided", (3, 7), lambda x: x[:, 1::3], lambda a: a[:, 1::3]),
    ("select", (3, 4), lambda x: x[:, -1], lambda a: a[:, -1]),
    ("diagonal", (3, 4), lambda x: x.diagonal(-1), None),
    ("permute", (2, 3, 4), lambda x: x.permute(1, 2, 0), lambda a: a.transpose(1, 2, 0)),
    ("view", (2, 6), lambda x: x.view(3, 4), lambda a: a.reshape(3, 4)),
    ("squeeze", (1, 3, 1), lambda x: x.squeeze(), lambda a: a.reshape(3)),
    ("unsqueeze", (2, 3), lambda x: x.unsqueeze(1), lambda a: a.reshape(2, 1, 3)),
    ("expand_noop", (2, 3), lambda x: x.expand(1, 2, 3), lambda a: a.reshape(1, 2, 3)),
    ("detach", (2, 3), lambda x: x.detach(), lambda a: a),
    ("chain", (4, 6), lambda x: x.t()[1::2].unsqueeze(0)[0, :, 1:3], lambda a: a.T[1::2][:, 1:3]),
]


def _jax_apply(prim, *vals, **params):
    return lowering_rule(prim)(*vals, **params)


@pytest.mark.parametrize("name,shape,f,ref", INVERSES, ids=[c[0] for c in INVERSES])
def test_view_inverse_under_jit(name, shape, f, ref):
    base = rand(*shape)
    view = f(aotjax.tensor(base))
    chain = view._chain
    y = rand(*view.shape, seed=1)
    new_base = jax.jit(lambda b, y: write_through(_jax_apply, b, chain, y))(base, y)
    expected = base.copy()
    if ref is None:  # diagonal: NumPy's diagonal views are read-only
        rows = np.arange(y.shape[-1]) + 1
        expected[rows, rows - 1] = y
    else:
        ref(expected)[...] = y
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

    jaxpr = aotjax.make_jaxpr(lambda b, y: aotjax.ops.views.slice_scatter_p.bind(b, y, dim=0, start=1, stop=3,
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


@pytest.mark.parametrize("f,match", [
    (lambda x: x.select(0, 2), r"select: index 2 is out of range for dimension 0 of size 2"),
    (lambda x: x.narrow(1, 2, 2), r"narrow: start \(2\) \+ length \(2\) exceeds dimension 1 of size 3"),
    (lambda x: x.transpose(0, 2), r"transpose: dimension 2 is out of range"),
])
def test_index_errors(f, match):
    with pytest.raises(IndexError, match=match):
        f(aotjax.zeros(2, 3))


def test_views_of_views_share_one_storage():
    x = aotjax.zeros(2, 3)
    views = [x.t(), x[1], x.view(6)[2:], x.unsqueeze(0).squeeze(0), x.detach().diagonal()]
    assert all(v._storage is x._storage for v in views)
