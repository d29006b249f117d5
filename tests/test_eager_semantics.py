"""PyTorch's eager aliasing semantics on immutable XLA buffers: writes through every view reach the
base and sibling views, metadata mutations change the caller's tensor, view-or-copy decisions and
strides match PyTorch's (expected values derived by hand from PyTorch's rules)."""
import numpy as np
import pytest

import aotjax
from aotjax.core.errors import AliasingError, ShapeError, UnsupportedError
from tests.helpers import check_traced_matches_eager


def ids(*shape):
    """A float64 tensor whose elements are their own flat positions (so views show which they hold)."""
    return aotjax.tensor(np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape))


# name, base shape, the view (same code for aotjax tensors and NumPy arrays where possible), NumPy view
VIEWS = [
    ("select", (3, 4), lambda x: x.select(1, -1), lambda a: a[:, -1]),
    ("getitem_int", (3, 4), lambda x: x[1], lambda a: a[1]),
    ("slice", (5, 4), lambda x: x[1:4], lambda a: a[1:4]),
    ("slice_step", (3, 7), lambda x: x[:, 1::3], lambda a: a[:, 1::3]),
    ("slice_none_ellipsis", (2, 3, 4), lambda x: x[..., None, 1:3], lambda a: a[..., None, 1:3]),
    ("narrow", (4, 5), lambda x: x.narrow(-1, 1, 3), lambda a: a[:, 1:4]),
    ("diagonal", (3, 4), lambda x: x.diagonal(), lambda a: np.diagonal(a)),
    ("diagonal_offset", (3, 4), lambda x: x.diagonal(1), lambda a: np.diagonal(a, 1)),
    ("diagonal_neg_3d", (2, 3, 3), lambda x: x.diagonal(-1, -2, -1), lambda a: np.diagonal(a, -1, -2, -1)),
    ("permute", (2, 3, 4), lambda x: x.permute(2, 0, 1), lambda a: a.transpose(2, 0, 1)),
    ("transpose", (2, 3, 4), lambda x: x.transpose(-1, 0), lambda a: a.swapaxes(-1, 0)),
    ("t", (3, 4), lambda x: x.t(), lambda a: a.T),
    ("mT", (2, 3, 4), lambda x: x.mT, lambda a: a.swapaxes(-1, -2)),
    ("T", (2, 3, 4), lambda x: x.T, lambda a: a.T),
    ("movedim", (2, 3, 4), lambda x: x.movedim(0, -1), lambda a: np.moveaxis(a, 0, -1)),
    ("view", (2, 6), lambda x: x.view(3, -1), lambda a: a.reshape(3, 4)),
    ("view_as", (2, 6), lambda x: x.view_as(aotjax.zeros(4, 3)), lambda a: a.reshape(4, 3)),
    ("reshape_view", (2, 6), lambda x: x.reshape(-1), lambda a: a.reshape(-1)),
    ("reshape_as", (2, 6), lambda x: x.reshape_as(aotjax.zeros(3, 4)), lambda a: a.reshape(3, 4)),
    ("flatten", (2, 3, 4), lambda x: x.flatten(1), lambda a: a.reshape(2, 12)),
    ("squeeze", (3, 1, 4), lambda x: x.squeeze(), lambda a: a.squeeze()),
    ("squeeze_dim", (1, 3, 1), lambda x: x.squeeze(-1), lambda a: a.squeeze(-1)),
    ("unsqueeze", (3, 4), lambda x: x.unsqueeze(1), lambda a: a[:, None]),
    ("unbind", (3, 4), lambda x: x.unbind(1)[2], lambda a: a[:, 2]),
    ("split", (5, 2), lambda x: x.split(2)[1], lambda a: a[2:4]),
    ("split_sections", (5, 2), lambda x: x.split([1, 4])[1], lambda a: a[1:]),
    ("chunk", (2, 7), lambda x: x.chunk(3, -1)[2], lambda a: a[:, 6:]),
    ("detach", (2, 3), lambda x: x.detach(), lambda a: a),
    ("expand_noop", (2, 3), lambda x: x.expand(-1, 3), lambda a: a),
    ("expand_leading_one", (2, 3), lambda x: x.expand(1, 2, 3), lambda a: a[None]),
    ("contiguous_self", (2, 3), lambda x: x.contiguous(), lambda a: a),
    ("chained", (3, 4), lambda x: x.t()[1:, 0], lambda a: a.T[1:, 0]),
    ("chained_long", (4, 6), lambda x: x.view(2, 2, 6).permute(2, 0, 1)[1::2, 1].diagonal(),
     lambda a: np.diagonal(a.reshape(2, 2, 6).transpose(2, 0, 1)[1::2, 1])),
]


@pytest.mark.parametrize("name,shape,f,f_np", VIEWS, ids=[v[0] for v in VIEWS])
def test_write_through_view_reaches_base_and_siblings(name, shape, f, f_np):
    x = ids(*shape)
    base = x.numpy()
    sibling = x.t() if x.ndim == 2 else x.transpose(0, -1)
    v = f(x)
    np.testing.assert_array_equal(v.numpy(), f_np(base))
    v.add_(1000)
    expected = base + 1000 * np.isin(base, f_np(base))
    np.testing.assert_array_equal(x.numpy(), expected)
    np.testing.assert_array_equal(sibling.numpy(), expected.T if x.ndim == 2 else expected.swapaxes(0, -1))
    np.testing.assert_array_equal(f(x).numpy(), f_np(expected))
    np.testing.assert_array_equal(v.numpy(), f_np(expected))


@pytest.mark.parametrize("name,shape,f,f_np", VIEWS, ids=[v[0] for v in VIEWS])
def test_write_through_view_traced(name, shape, f, f_np):
    def prog(x):
        v = f(x)
        v.mul_(2)
        return v + 1

    check_traced_matches_eager(prog, ids(*shape))


def test_sibling_views_see_each_other():
    x = ids(2, 3)
    r0, r1 = x.unbind(0)
    col = x[:, 1]
    r0.copy_(r1)
    np.testing.assert_array_equal(col.numpy(), [4.0, 4.0])
    col.zero_()
    np.testing.assert_array_equal(r1.numpy(), [3.0, 0.0, 5.0])
    np.testing.assert_array_equal(x.numpy(), [[3, 0, 5], [3, 0, 5]])


def test_setitem_through_chained_view():
    x = ids(3, 4)
    x.t()[1:, 0] = aotjax.tensor([-1.0, -2.0, -3.0])
    np.testing.assert_array_equal(x.numpy()[0], [0, -1, -2, -3])


@pytest.mark.parametrize("op,shape,expected_shape,expected_stride", [
    (lambda x: x.t_(), (2, 3), (3, 2), (1, 3)),
    (lambda x: x.transpose_(0, -1), (2, 3, 4), (4, 3, 2), (1, 4, 12)),
    (lambda x: x.squeeze_(), (2, 1, 3), (2, 3), (3, 1)),
    (lambda x: x.squeeze_(0), (1, 3), (3,), (1,)),
    (lambda x: x.unsqueeze_(-1), (2, 3), (2, 3, 1), (3, 1, 1)),
    (lambda x: x.unsqueeze_(0), (2, 3), (1, 2, 3), (6, 3, 1)),
], ids=["t_", "transpose_", "squeeze_", "squeeze_dim", "unsqueeze_last", "unsqueeze_first"])
def test_metadata_mutation_changes_the_callers_tensor(op, shape, expected_shape, expected_stride):
    x = ids(*shape)
    before = x.numpy()
    out = op(x)
    assert out is x
    assert x.shape == expected_shape and x.stride() == expected_stride
    assert sorted(x.numpy().reshape(-1)) == sorted(before.reshape(-1))  # same data, new layout
    x.add_(1)  # the storage is still shared with what the tensor was
    assert x.numpy().sum() == before.sum() + before.size


def test_metadata_mutation_of_a_view_leaves_the_base():
    x = ids(2, 3)
    v = x[:]
    v.t_()
    assert x.shape == (2, 3) and v.shape == (3, 2)
    v[0].zero_()
    np.testing.assert_array_equal(x.numpy(), [[0, 1, 2], [0, 4, 5]])


def test_metadata_mutations_traced():
    def prog(x):
        x.t_()
        x.unsqueeze_(0)
        x[0, 1].add_(5)
        x.squeeze_(0)
        return x * 2

    out, jaxpr = check_traced_matches_eager(prog, ids(2, 3))
    names = [e.primitive.name for e in jaxpr.eqns]
    assert names[:2] == ["permute_", "unsqueeze_"] and "squeeze_" in names


def test_detach_aliases():
    x = ids(3)
    d = x.detach()
    assert d is not x
    x.mul_(2)
    np.testing.assert_array_equal(d.numpy(), [0, 2, 4])
    d.add_(1)
    np.testing.assert_array_equal(x.numpy(), [1, 3, 5])


# -- view or copy, as PyTorch -------------------------------------------------------------------
def _aliases(v, base) -> bool:
    """Whether writing into `v` changes `base`."""
    before = base.numpy().copy()
    v.add_(1)
    return not np.array_equal(base.numpy(), before)


@pytest.mark.parametrize("name,shape,f,is_view", [
    ("reshape_contiguous", (2, 3), lambda a: a.reshape(-1), True),
    ("reshape_t", (2, 3), lambda a: a.t().reshape(-1), False),
    ("reshape_t_split_ok", (2, 3, 4), lambda a: a.transpose(0, 1).reshape(3, 2, 2, 2), True),
    ("reshape_t_merge_bad", (2, 3, 4), lambda a: a.transpose(0, 1).reshape(3, 8), False),
    ("reshape_sliced_rows", (4, 3), lambda a: a[::2].reshape(2, 3, 1), True),
    ("reshape_sliced_cols", (4, 3), lambda a: a[:, :2].reshape(-1), False),
    ("reshape_size1_dims", (3, 1), lambda a: a.t().reshape(3), True),
    ("flatten_contiguous", (2, 3, 4), lambda a: a.flatten(), True),
    ("flatten_permuted", (2, 3, 4), lambda a: a.permute(2, 0, 1).flatten(1), True),
    ("flatten_permuted_bad", (2, 3, 4), lambda a: a.permute(1, 0, 2).flatten(1), False),
    ("flatten_permuted_all", (2, 3, 4), lambda a: a.permute(1, 0, 2).flatten(), False),
    ("flatten_same_dim", (2, 3), lambda a: a.t().flatten(1, 1), True),
    ("contiguous_t", (2, 3), lambda a: a.t().contiguous(), False),
    ("contiguous_row", (2, 3), lambda a: a[1].contiguous(), True),
    ("clone", (2, 3), lambda a: a.clone(), False),
    ("reshape_as_t", (2, 3), lambda a: a.t().reshape_as(aotjax.zeros(6)), False),
])
def test_view_or_copy_matches_pytorch(name, shape, f, is_view):
    a = ids(*shape)
    assert _aliases(f(a), a) is is_view


def test_flatten_of_the_same_dim_is_the_tensor_itself():
    a = ids(2, 3)
    assert a.flatten(0, 0) is a


def test_view_raises_like_pytorch_when_strides_do_not_allow():
    a = ids(2, 3)
    with pytest.raises(ShapeError, match=r"view: .*\[6\].*size \[3, 2\] and stride \(1, 3\).*"
                                         r"test_eager_semantics.py.*Use \.reshape\(\.\.\.\) instead"):
        a.t().view(-1)
    with pytest.raises(ShapeError, match=r"shape \[4\] is invalid for a tensor of 6 elements"):
        a.view(4)
    assert a.t().view(3, 2, 1).shape == (3, 2, 1)  # splitting and size-1 dims are fine


# -- strides and storage offsets, derived by hand from PyTorch's rules ---------------------------------
@pytest.mark.parametrize("f,stride,offset", [
    (lambda: aotjax.zeros(2, 3, 4).permute(2, 0, 1), (1, 12, 4), 0),
    (lambda: aotjax.zeros(2, 3, 4)[1], (4, 1), 12),
    (lambda: aotjax.zeros(2, 3, 4)[:, 1:, ::2], (12, 4, 2), 4),
    (lambda: aotjax.zeros(2, 3, 4)[1, ..., 2], (4,), 14),
    (lambda: aotjax.zeros(3, 4).t()[1:, 0], (1,), 1),
    (lambda: aotjax.zeros(3, 4).diagonal(), (5,), 0),
    (lambda: aotjax.zeros(3, 4).diagonal(1), (5,), 1),
    (lambda: aotjax.zeros(3, 4).diagonal(-1), (5,), 4),
    (lambda: aotjax.zeros(3, 4).diagonal(5), (5,), 0),  # empty diagonal: the offset is not moved
    (lambda: aotjax.zeros(2, 3, 4).diagonal(0, 0, 2), (4, 13), 0),
    (lambda: aotjax.zeros(2, 3).unsqueeze(0), (6, 3, 1), 0),
    (lambda: aotjax.zeros(2, 3).unsqueeze(1), (3, 3, 1), 0),
    (lambda: aotjax.zeros(2, 3).unsqueeze(2), (3, 1, 1), 0),
    (lambda: aotjax.zeros(2, 3).t().unsqueeze(1), (1, 6, 3), 0),
    (lambda: aotjax.zeros(2, 1, 3).squeeze(1), (3, 1), 0),
    (lambda: aotjax.zeros(3, 1).expand(2, 3, 4), (0, 1, 0), 0),
    (lambda: aotjax.zeros(3).expand(1, 3), (3, 1), 0),
    (lambda: aotjax.zeros(4, 6)[:, ::2].t(), (2, 6), 0),
    (lambda: aotjax.zeros(2, 3, 4).transpose(0, 1).view(3, 2, 2, 2), (4, 12, 2, 1), 0),
    (lambda: aotjax.zeros(4, 6)[1:, 2:].narrow(1, 1, 2), (6, 1), 9),
    (lambda: aotjax.zeros(5, 4).split(2)[2], (4, 1), 16),
    (lambda: aotjax.zeros(2, 3).t().clone(), (1, 3), 0),
    (lambda: aotjax.zeros(2, 3).t().contiguous(), (2, 1), 0),
    (lambda: aotjax.zeros(4, 4)[::2, ::2].clone(), (2, 1), 0),
    (lambda: aotjax.zeros(4, 4).t()[::2, ::2].clone(), (1, 2), 0),
    (lambda: aotjax.zeros(2, 3).t().reshape(-1), (1,), 0),
    (lambda: aotjax.zeros(3, 1).expand(3, 2).clone(), (2, 1), 0),
])
def test_strides_and_offsets_match_pytorch(f, stride, offset):
    t = f()
    assert t.stride() == stride and t.storage_offset() == offset


def test_strides_under_tracing_match_eager():
    def prog(x):
        v = x.permute(2, 0, 1)[1:, :, ::2]
        assert v.stride() == (1, 12, 8) and v.storage_offset() == 1
        assert not v.is_contiguous()
        return v.reshape(-1)  # not viewable: a copy

    out, jaxpr = check_traced_matches_eager(prog, ids(2, 3, 4))
    assert "clone" in [e.primitive.name for e in jaxpr.eqns]


# -- errors ------------------------------------------------------------------------------------
def test_write_through_expanded_view_raises():
    x = ids(3)
    e = x.expand(2, 3)
    np.testing.assert_array_equal(e.numpy(), [[0, 1, 2], [0, 1, 2]])
    with pytest.raises(AliasingError, match=r"add_: .*single memory location.*test_eager_semantics.py"):
        e.add_(1)
    with pytest.raises(AliasingError):
        e.copy_(aotjax.zeros(2, 3))
    np.testing.assert_array_equal(x.numpy(), [0, 1, 2])  # nothing was written
    e.clone().add_(1)  # a clone is writable
    x.expand(3).add_(1)  # a no-op expand is writable
    np.testing.assert_array_equal(x.numpy(), [1, 2, 3])


def test_write_through_expanded_view_raises_under_tracing():
    def prog(x):
        x.unsqueeze(0).expand(2, 3).mul_(2)

    with pytest.raises(AliasingError, match="mul_"):
        aotjax.make_jaxpr(prog)(ids(3))


def test_as_strided_raises():
    with pytest.raises(UnsupportedError, match=r"as_strided: .*test_eager_semantics.py.*slicing"):
        ids(4).as_strided((2,), (2,))


def test_a_tensor_made_from_a_numpy_array_owns_a_copy_even_of_an_aligned_host_buffer():
    import torch  # NOTE: torch's arrays are 64-byte aligned, which XLA's CPU client may alias without a copy

    source = torch.zeros(64)
    t = aotjax.tensor(source.numpy())
    source.add_(1)
    assert float(t.sum()) == 0.0
    array = np.zeros(64, np.float32)
    u = aotjax.tensor(array)
    array += 1
    assert float(u.sum()) == 0.0
