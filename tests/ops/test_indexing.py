"""Indexing: getitem/setitem against NumPy (with PyTorch's placement when ints mix with advanced
indices), views vs copies, boolean masks eager and traced, the gather/scatter family, and errors."""
import numpy as np
import pytest

import aotjax
from aotjax.core.errors import ShapeError, UnsupportedError
from tests.helpers import check_traced_matches_eager

RNG = np.random.default_rng(0)
A = RNG.normal(size=(4, 5, 6)).astype(np.float32)
MASK = RNG.normal(size=(4, 5, 6)) > 0
ROWS = np.array([True, False, True, True])
COLS = RNG.normal(size=(5, 6)) > 0


def T(a):
    return aotjax.tensor(a)


# name, index (built fresh per use: it may hold tensors), NumPy reference of x[index], is a view
GETITEM = [
    ("int", lambda: 1, lambda a: a[1], True),
    ("neg_int", lambda: -1, lambda a: a[-1], True),
    ("slice", lambda: slice(1, 3), lambda a: a[1:3], True),
    ("slice_step", lambda: (slice(None), slice(None, None, 2)), lambda a: a[:, ::2], True),
    ("slice_clipped", lambda: slice(-10, 10), lambda a: a[-10:10], True),
    ("slice_empty", lambda: slice(3, 1), lambda a: a[3:1], True),
    ("int_slice", lambda: (1, slice(2, None)), lambda a: a[1, 2:], True),
    ("ellipsis", lambda: (Ellipsis, 0), lambda a: a[..., 0], True),
    ("ellipsis_only", lambda: Ellipsis, lambda a: a[...], True),
    ("none", lambda: None, lambda a: a[None], True),
    ("none_mixed", lambda: (slice(None), None, 1, Ellipsis, None), lambda a: a[:, None, 1, ..., None], True),
    ("zero_d_tensor", lambda: T(np.array(2)), lambda a: a[2], True),
    ("list", lambda: [0, 2], lambda a: a[[0, 2]], False),
    ("tensor_2d", lambda: T(np.array([[0], [3]])), lambda a: a[np.array([[0], [3]])], False),
    ("numpy_index", lambda: np.array([3, -1]), lambda a: a[np.array([3, -1])], False),
    ("second_dim", lambda: (slice(None), [4, 0, 1]), lambda a: a[:, [4, 0, 1]], False),
    ("paired", lambda: ([0, 1], [1, 2]), lambda a: a[[0, 1], [1, 2]], False),
    ("broadcast_pair", lambda: (T(np.array([[0], [1]])), slice(None), [1, 2, 3]),
     lambda a: a[np.array([[0], [1]]), :, [1, 2, 3]], False),
    ("adjacent_last", lambda: (slice(None), [0, 1], [1, 2]), lambda a: a[:, [0, 1], [1, 2]], False),
    ("slice_then_adv", lambda: (slice(1, None), [0, 2]), lambda a: a[1:, [0, 2]], False),
    # PyTorch: the int is a select first, so [1, 2] stays in place (NumPy would move it to the front)
    ("int_then_adv_split", lambda: (0, slice(None), [1, 2]), lambda a: a[0][:, [1, 2]], False),
    ("ellipsis_adv", lambda: (Ellipsis, [5, 0]), lambda a: a[..., [5, 0]], False),
    ("mask_full", lambda: T(MASK), lambda a: a[MASK], False),
    ("mask_rows", lambda: T(ROWS), lambda a: a[ROWS], False),
    ("mask_after_slice", lambda: (slice(None), T(COLS)), lambda a: a[:, COLS], False),
    ("mask_and_int", lambda: (T(ROWS), 1), lambda a: a[ROWS][:, 1], False),
    ("list_of_lists_is_a_tuple", lambda: [[0, 1], [1, 2]], lambda a: a[[0, 1], [1, 2]], False),
    ("list_with_slice_is_a_tuple", lambda: [slice(None), 1], lambda a: a[:, 1], True),
    ("bool_list", lambda: [True, False, False, True], lambda a: a[[True, False, False, True]], False),
    ("python_true", lambda: (Ellipsis, True), lambda a: a[..., None], True),
]


@pytest.mark.parametrize("name,index,ref,is_view", GETITEM, ids=[c[0] for c in GETITEM])
def test_getitem_matches_numpy(name, index, ref, is_view):
    x = T(A)
    out = x[index()]
    expected = ref(A)
    assert out.shape == expected.shape
    np.testing.assert_array_equal(out.numpy(), expected)
    assert (out._storage is x._storage) is is_view
    if out.numel():
        out.add_(1)  # a view writes through, a copy does not
        np.testing.assert_array_equal(x.numpy() != A, np.isin(A, expected) if is_view else np.zeros_like(A, bool))


@pytest.mark.parametrize("name,index,ref,is_view", [c for c in GETITEM if "mask" not in c[0] and "bool" not in c[0]],
                         ids=lambda c: c if isinstance(c, str) else "")
def test_getitem_traced(name, index, ref, is_view):
    idx = index()
    check_traced_matches_eager(lambda x: x[idx], T(A))


def test_getitem_with_traced_index_tensor():
    def prog(x, i):
        return x[i, 1:], x[:, i]

    check_traced_matches_eager(prog, T(A), T(np.array([3, 0, -1])))
    check_traced_matches_eager(lambda x, i: x[i], T(A), T(np.array(2)))  # a traced 0-d index: a gather


def test_full_slice_is_an_alias_not_the_tensor():
    x = T(A)
    y = x[:]
    assert y is not x and y._storage is x._storage


# name, index, value, NumPy reference of x[index] = value (in place on a copy)
SETITEM = [
    ("int_scalar", lambda: 1, lambda: 5.0, None),
    ("slice_tensor", lambda: slice(1, 3), lambda: T(np.ones((2, 5, 6), np.float32)), None),
    ("slice_broadcast", lambda: (slice(None), 0, slice(None, None, 2)), lambda: T(np.arange(3.0, dtype=np.float32)),
     None),
    ("ellipsis_0d", lambda: (Ellipsis, -1), lambda: T(np.array(7.0, np.float32)), None),
    ("cast", lambda: 0, lambda: T(np.arange(6, dtype=np.int32)), None),
    ("everything", lambda: Ellipsis, lambda: 0.5, None),
    ("list_scalar", lambda: [0, 2], lambda: 5.0, None),
    ("adv_pair_tensor", lambda: ([0, 2], slice(None), [1, 3]), lambda: T(np.ones((2, 5), np.float32)), None),
    ("int_then_adv", lambda: (0, [1, 2]), lambda: T(np.full((2, 6), 3.0, np.float32)), None),
    ("adv_broadcast_value", lambda: (slice(None), [4, 0]), lambda: T(np.arange(6, dtype=np.float32)), None),
    ("mask_scalar", lambda: T(MASK), lambda: -1.0, MASK),
    ("mask_rows_row", lambda: T(ROWS), lambda: T(np.arange(6, dtype=np.float32)), ROWS),
    ("mask_cols_0d", lambda: (slice(None), T(COLS)), lambda: T(np.array(2.0, np.float32)), (slice(None), COLS)),
    ("mask_values", lambda: T(ROWS), lambda: T(np.zeros((3, 5, 6), np.float32)), ROWS),
]


def _np_index(index):
    def conv(i):
        return np.asarray(i.numpy()) if isinstance(i, aotjax.Tensor) else i
    return tuple(map(conv, index)) if isinstance(index, tuple) else conv(index)


def _np_setitem(index, value, np_index):
    expected = A.copy()
    expected[np_index if np_index is not None else _np_index(index)] = np.asarray(value)
    return expected


@pytest.mark.parametrize("name,index,value,np_index", SETITEM, ids=[c[0] for c in SETITEM])
def test_setitem_matches_numpy(name, index, value, np_index):
    x = T(A)
    v = value()
    x[index()] = v
    expected = _np_setitem(index(), v.numpy() if isinstance(v, aotjax.Tensor) else v, np_index)
    np.testing.assert_array_equal(x.numpy(), expected)


@pytest.mark.parametrize("name,index,value,np_index", [c for c in SETITEM if c[0] != "mask_values"],
                         ids=lambda c: c if isinstance(c, str) else "")
def test_setitem_traced(name, index, value, np_index):
    idx, val = index(), value()

    def prog(x):
        x[idx] = val
        return x.sum()

    check_traced_matches_eager(prog, T(A))


def test_masked_setitem_under_tracing():
    def prog(x, mask, rows, row):
        x[mask] = 0.0
        x[rows] = row
        x[:, 1][rows] = -1.0
        return x * 2

    _, jaxpr = check_traced_matches_eager(prog, T(A), T(MASK), T(ROWS), T(np.arange(6.0, dtype=np.float32)))
    assert [e.primitive.name for e in jaxpr.eqns].count("masked_fill_") == 3


def test_setitem_writes_through_a_view_into_the_base():
    x = T(A)
    v = x.permute(2, 0, 1)[1]
    v[[0, 2], 1:3] = 9.0
    expected = A.copy()
    expected.transpose(2, 0, 1)[1][[0, 2], 1:3] = 9.0
    np.testing.assert_array_equal(x.numpy(), expected)


def test_boolean_mask_getitem_under_tracing_is_a_clear_error():
    with pytest.raises(UnsupportedError, match=r"getitem: boolean mask .* depends on the mask's values.*"
                                               r"test_indexing.py"):
        aotjax.make_jaxpr(lambda x, m: x[m])(T(A), T(MASK))
    with pytest.raises(UnsupportedError, match=r"setitem: boolean mask"):
        aotjax.make_jaxpr(lambda x, m, v: x.__setitem__(m, v))(T(A), T(ROWS), T(np.zeros((3, 5, 6), np.float32)))


# -- the gather/scatter family ----------------------------------------------------------------------
X = RNG.normal(size=(3, 4)).astype(np.float32)
IDX_ROWS = np.array([2, 0, 2])
GATHER_IDX = np.array([[1, 0, 3], [2, 2, 0]])  # smaller than X in the non-gathered dim
SRC = RNG.normal(size=(3, 4)).astype(np.float32)
ZERO_D_BOOL = np.array(True)


def _np_scatter(x, dim, index, src, add=False):
    out = x.copy()
    for pos in np.ndindex(*index.shape):
        tgt = list(pos)
        tgt[dim] = index[pos]
        val = src if np.ndim(src) == 0 else src[pos]
        out[tuple(tgt)] = out[tuple(tgt)] + val if add else val
    return out


def _np_index_add(x, dim, index, src, alpha=1):
    out = x.copy()
    for i, j in enumerate(index):
        sl = [slice(None)] * x.ndim
        sl[dim] = j
        src_sl = [slice(None)] * x.ndim
        src_sl[dim] = i
        out[tuple(sl)] += alpha * src[tuple(src_sl)]
    return out


def _np_index_put(x, idx, values, accumulate=False):
    out = x.copy()
    if accumulate:
        np.add.at(out, idx, values)
    else:
        out[idx] = values
    return out


# name, op on (x tensor), NumPy reference on x array, primitive staged for in-place forms (or None)
OPS = [
    ("index_select", lambda x: x.index_select(0, T(IDX_ROWS)), lambda a: a[IDX_ROWS], None),
    ("index_select_neg_dim", lambda x: x.index_select(-1, T(np.array([3, 3]))), lambda a: a[:, [3, 3]], None),
    ("gather", lambda x: x.gather(1, T(GATHER_IDX)), lambda a: np.take_along_axis(a[:2], GATHER_IDX, 1), None),
    ("gather_dim0", lambda x: x.gather(0, T(GATHER_IDX % 3)), lambda a: np.take_along_axis(a[:, :3], GATHER_IDX % 3, 0),
     None),
    ("scatter", lambda x: x.scatter(1, T(GATHER_IDX[:, :2]), T(SRC)),
     lambda a: _np_scatter(a, 1, GATHER_IDX[:, :2], SRC), None),
    ("scatter_value", lambda x: x.scatter(0, T(GATHER_IDX % 3), 1.5), lambda a: _np_scatter(a, 0, GATHER_IDX % 3, 1.5),
     None),
    ("scatter_", lambda x: x.scatter_(-1, T(GATHER_IDX[:, :1]), T(SRC)),
     lambda a: _np_scatter(a, 1, GATHER_IDX[:, :1], SRC), "scatter_"),
    ("scatter_add", lambda x: x.scatter_add(0, T(GATHER_IDX % 3), T(SRC)),
     lambda a: _np_scatter(a, 0, GATHER_IDX % 3, SRC, add=True), None),
    ("scatter_add_", lambda x: x.scatter_add_(1, T(GATHER_IDX), T(SRC)),
     lambda a: _np_scatter(a, 1, GATHER_IDX, SRC, add=True), "scatter_add_"),
    ("masked_fill", lambda x: x.masked_fill(T(X > 0), -1.0), lambda a: np.where(X > 0, -1.0, a).astype(np.float32),
     None),
    ("masked_fill_bcast", lambda x: x.masked_fill(T(X[0] > 0), T(np.array(2.0))),
     lambda a: np.where(X[0] > 0, 2.0, a).astype(np.float32), None),
    ("masked_fill_", lambda x: x.masked_fill_(T(X > 0), 0.0), lambda a: np.where(X > 0, 0.0, a).astype(np.float32),
     "masked_fill_"),
    ("index_put", lambda x: x.index_put((T(IDX_ROWS),), T(SRC[0])),
     lambda a: _np_index_put(a, (IDX_ROWS,), SRC[0]), None),
    ("index_put_accumulate", lambda x: x.index_put((T(IDX_ROWS), T(np.array([0, 1, 0]))), T(np.float32(1.0)),
                                                   accumulate=True),
     lambda a: _np_index_put(a, (IDX_ROWS, np.array([0, 1, 0])), 1.0, True), None),
    ("index_put_", lambda x: x.index_put_((T(np.array([1])), T(np.array([-1]))), T(np.float32(3.0))),
     lambda a: _np_index_put(a, (np.array([1]), np.array([-1])), 3.0), "index_put_"),
    ("index_put_bool", lambda x: x.index_put_((T(X > 0),), T(np.float32(0.0))),
     lambda a: _np_index_put(a, (X > 0,), 0.0), "index_put_"),
    ("index_add", lambda x: x.index_add(0, T(IDX_ROWS), T(SRC)), lambda a: _np_index_add(a, 0, IDX_ROWS, SRC), None),
    ("index_add_alpha", lambda x: x.index_add(1, T(np.array([3, 0])), T(SRC[:, :2]), alpha=2),
     lambda a: _np_index_add(a, 1, [3, 0], SRC[:, :2], 2), None),
    ("index_add_", lambda x: x.index_add_(-1, T(np.array([1])), T(SRC[:, :1])),
     lambda a: _np_index_add(a, 1, [1], SRC[:, :1]), "index_add_"),
    ("copy_", lambda x: x.copy_(T(SRC)), lambda a: SRC, "copy_"),
    ("copy_broadcast_cast", lambda x: x.copy_(T(np.arange(4))), lambda a: np.broadcast_to(
        np.arange(4, dtype=np.float32), (3, 4)), "copy_"),
    ("copy_into_view", lambda x: x[1:].copy_(T(SRC[0])), lambda a: np.concatenate([a[:1], SRC[[0, 0]]]), "copy_"),
    ("fill_", lambda x: x.fill_(2), lambda a: np.full_like(a, 2), "fill_"),
    ("fill_0d_tensor", lambda x: x[0].fill_(T(np.array(4.0))), lambda a: np.concatenate([np.full((1, 4), 4.0), a[1:]]),
     "fill_"),
    ("zero_", lambda x: x.zero_(), lambda a: np.zeros_like(a), "fill_"),
]


@pytest.mark.parametrize("name,f,ref,prim", OPS, ids=[c[0] for c in OPS])
def test_ops_match_numpy(name, f, ref, prim):
    x = T(X)
    out = f(x)
    expected = ref(X)
    if prim is None:  # functional: x is unchanged
        np.testing.assert_allclose(out.numpy(), expected, rtol=1e-6)
        np.testing.assert_array_equal(x.numpy(), X)
    else:
        np.testing.assert_allclose(x.numpy(), expected, rtol=1e-6)
        assert out.dtype == x.dtype


@pytest.mark.parametrize("name,f,ref,prim", OPS, ids=[c[0] for c in OPS])
def test_ops_traced(name, f, ref, prim):
    _, jaxpr = check_traced_matches_eager(f, T(X))
    if prim is not None:
        assert jaxpr.eqns[-1].primitive.name == prim
        assert jaxpr.eqns[-1].primitive.mutates == (0,)


@pytest.mark.parametrize("f,exc,match", [
    (lambda x: x[5], IndexError, r"getitem: index 5 is out of bounds for dimension 0 with size 3"),
    (lambda x: x[[0, 3]], IndexError, r"getitem: index 3 is out of bounds for dimension 0 with size 3"),
    (lambda x: x[:, [-5]], IndexError, r"getitem: index -5 is out of bounds for dimension 1 with size 4"),
    (lambda x: x[0, 0, 0], IndexError, r"getitem: too many indices for a tensor of dimension 2 \(got 3\)"),
    (lambda x: x[..., ...], IndexError, r"getitem: an index can only have a single ellipsis"),
    (lambda x: x[::-1], ValueError, r"getitem: slice step must be positive, got -1.*flip"),
    (lambda x: x[T(np.array([0.5]))], IndexError, r"tensors used as indices must be integer or bool tensors"),
    (lambda x: x["a"], IndexError, r"getitem: only integers, slices"),
    (lambda x: x[T(np.array([True, False]))], IndexError, r"the shape of the mask \[2\] does not match .* \[3\]"),
    (lambda x: x.gather(0, T(np.array([0]))), ShapeError, r"gather: index must be an integer tensor with as many dims"),
    (lambda x: x.gather(0, T(np.zeros((1, 5), np.int64))), ShapeError, r"gather: index of shape \[1, 5\] must be"),
    (lambda x: x.gather(1, T(np.array([[4]]))), RuntimeError, r"gather: index 4 is out of bounds for dimension 1"),
    (lambda x: x.index_select(0, T(np.zeros((1, 1), np.int64))), IndexError, r"index_select: index must be a 1-d"),
    (lambda x: x.index_add(0, T(np.array([0])), T(SRC)), ShapeError, r"index_add: source must have shape \[1, 4\]"),
    (lambda x: x.copy_(T(np.zeros(3))), ShapeError, r"copy_: shapes \[3, 4\] and \[3\] cannot be broadcast"),
    (lambda x: x[0].copy_(T(np.zeros((2, 4)))), ShapeError, r"copy_: the source of shape \[2, 4\] cannot be broadcast"),
    (lambda x: x.masked_fill(T(X), 0.0), TypeError, r"masked_fill: the mask must be a bool tensor"),
    (lambda x: x.fill_(T(np.zeros(2))), ShapeError, r"fill_: the fill value must be a number or a 0-d tensor"),
    (lambda x: x.scatter(0, T(GATHER_IDX % 3), T(SRC), reduce="max"), ValueError, r"scatter: reduce must be 'add' or"),
    (lambda x: x.index_put_([T(np.array([0]))] * 3, 1.0), IndexError, r"index_put_: too many indices \(3\)"),
])
def test_errors(f, exc, match):
    with pytest.raises(exc, match=match) as info:
        f(T(X))
    assert "test_indexing.py" in str(info.value)


def test_in_place_ops_write_through_views():
    x = T(X)
    x.t()[1:].index_put_((T(np.array([0])),), T(np.float32(0.0)))
    x[:, 0].scatter_add_(0, T(np.array([2])), T(np.array([1.0], np.float32)))
    expected = X.copy()
    expected[:, 1] = 0.0
    expected[2, 0] += 1.0
    np.testing.assert_array_equal(x.numpy(), expected)


def test_traced_boolean_index_put_is_a_masked_write():
    def f(x):
        x.index_put_((x > 0,), T(np.float32(2.0)))  # the mask depends on a traced value: a masked write
        return x

    np.testing.assert_array_equal(aotjax.jit(f)(T(X)).numpy(), np.where(X > 0, 2.0, X))

    def g(x):  # a value that does not broadcast over the selected elements needs their number
        return x.index_put_((x > 0,), T(np.ones(5, np.float32)))

    with pytest.raises(UnsupportedError, match=r"index_put_: boolean mask.*where\(mask"):
        aotjax.make_jaxpr(g)(T(X))
