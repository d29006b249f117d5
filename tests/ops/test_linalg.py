"""Linear algebra against NumPy: matmul's 1-D and batch-broadcasting cases, the strict-shape forms (mm,
bmm, dot), outer, einsum and linear, traced against eager, and shape/dtype errors naming the op."""
import numpy as np
import pytest

import aotjax
from aotjax.core.errors import DTypeError, ShapeError
from tests.helpers import INT, check_traced_matches_eager

T = aotjax.tensor
F32, F64 = np.dtype(np.float32), np.dtype(np.float64)


def sample(shape, dtype=F32, seed=0):
    rng = np.random.default_rng(seed)
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-3, 4, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def close(out, expected, tol=1e-5):
    expected = np.asarray(expected)
    assert out.shape == expected.shape, (out.shape, expected.shape)
    assert out.dtype == expected.dtype, (out.dtype, expected.dtype)
    np.testing.assert_allclose(out.numpy(), expected, rtol=tol, atol=tol)


def ref_matmul(a, b):
    return np.matmul(a.astype(F64), b.astype(F64)).astype(a.dtype) if a.dtype == F32 else np.matmul(a, b)


# name, aotjax function, NumPy reference, operand shapes, dtype
CASES = [
    ("matmul vec.vec", aotjax.matmul, ref_matmul, [(3,), (3,)], F32),
    ("matmul mat.vec", aotjax.matmul, ref_matmul, [(2, 3), (3,)], F32),
    ("matmul vec.mat", aotjax.matmul, ref_matmul, [(3,), (3, 4)], F32),
    ("matmul mat.mat", aotjax.matmul, ref_matmul, [(2, 3), (3, 4)], F32),
    ("matmul batch.mat", aotjax.matmul, ref_matmul, [(5, 2, 3), (3, 4)], F32),
    ("matmul vec.batch", aotjax.matmul, ref_matmul, [(3,), (2, 3, 4)], F32),
    ("matmul broadcast batch", aotjax.matmul, ref_matmul, [(2, 1, 2, 3), (4, 3, 5)], F32),
    ("matmul int", aotjax.matmul, ref_matmul, [(2, 3), (3, 2)], INT),
    ("operator @", lambda a, b: a @ b, ref_matmul, [(2, 3), (3, 4)], F32),
    ("mm", aotjax.mm, ref_matmul, [(2, 3), (3, 4)], F32),
    ("bmm", aotjax.bmm, ref_matmul, [(5, 2, 3), (5, 3, 4)], F32),
    ("dot", aotjax.dot, ref_matmul, [(3,), (3,)], F32),
    ("dot int", lambda a, b: a.dot(b), ref_matmul, [(3,), (3,)], INT),
    ("outer", aotjax.outer, lambda a, b: np.outer(a, b), [(3,), (4,)], F32),
    ("einsum matmul", lambda a, b: aotjax.einsum("ij,jk->ik", a, b), ref_matmul, [(2, 3), (3, 4)], F32),
    ("einsum list", lambda a, b: aotjax.einsum("b i j, b j k -> b k i", [a, b]),
     lambda a, b: np.einsum("bij,bjk->bki", a, b), [(5, 2, 3), (5, 3, 4)], F32),
    ("einsum ellipsis trace", lambda a: aotjax.einsum("...ii->...", a),
     lambda a: np.einsum("...ii->...", a), [(2, 3, 3)], F32),
    ("linear", lambda x, w, b: aotjax.linear(x, w, b), lambda x, w, b: x @ w.T + b, [(2, 5, 3), (4, 3), (4,)], F32),
    ("linear no bias", aotjax.linear, lambda x, w: x @ w.T, [(2, 3), (4, 3)], F32),
]


@pytest.mark.parametrize("name,fn,ref,shapes,dtype", CASES, ids=[c[0] for c in CASES])
def test_values(name, fn, ref, shapes, dtype):
    arrays = [sample(s, dtype, seed=i) for i, s in enumerate(shapes)]
    close(fn(*map(T, arrays)), ref(*arrays))


@pytest.mark.parametrize("name,fn,ref,shapes,dtype", CASES, ids=[c[0] for c in CASES])
def test_traced_matches_eager(name, fn, ref, shapes, dtype):
    arrays = [sample(s, dtype, seed=i) for i, s in enumerate(shapes)]
    check_traced_matches_eager(fn, *map(T, arrays), rtol=1e-5, atol=1e-5)


def test_primitives_in_the_jaxpr():
    def f(a, b):
        return a @ b, aotjax.einsum("ij->ji", a), aotjax.outer(a.select(0, 0), b.select(0, 1)), aotjax.linear(a, b)

    names = [e.primitive.name for e in aotjax.make_jaxpr(f)(T(sample((2, 2))), T(sample((2, 2)))).jaxpr.eqns]
    assert names.count("matmul") == 2 and names.count("einsum") == 2 and "permute" in names, names


def test_outer_promotes():
    out = aotjax.outer(T([1, 2]), T([0.5]))
    assert out.dtype == F32 and out.tolist() == [[0.5], [1.0]]


def test_matmul_with_views():
    a = sample((3, 3))
    close(T(a).t() @ T(a), (a.T.astype(F64) @ a).astype(F32))


ERRORS = [
    ("matmul inner", lambda: aotjax.ones(3, 4) @ aotjax.ones(5, 6), ShapeError,
     r"matmul: shapes \[3, 4\] and \[5, 6\] cannot be multiplied \(4 != 5\)"),
    ("matmul vec", lambda: aotjax.ones(3) @ aotjax.ones(4), ShapeError,
     r"matmul: shapes \[3\] and \[4\] cannot be multiplied \(3 != 4\)"),
    ("matmul batch", lambda: aotjax.ones(2, 3, 4) @ aotjax.ones(3, 4, 5), ShapeError,
     r"matmul: shapes \[2\] and \[3\] cannot be broadcast"),
    ("matmul 0-d", lambda: aotjax.matmul(aotjax.ones(()), aotjax.ones(3)), ShapeError,
     "matmul: both operands need at least 1 dimension"),
    ("matmul dtypes", lambda: aotjax.ones(2, 2) @ aotjax.ones(2, 2, dtype=aotjax.float16), DTypeError,
     r"matmul: expected operands of one dtype, got f32\[2,2\] and f16\[2,2\]"),
    ("mm 1-d", lambda: aotjax.mm(aotjax.ones(3), aotjax.ones(3, 3)), ShapeError,
     r"mm: expected 2-D tensors, got shapes \[3\] and \[3, 3\]"),
    ("mm inner", lambda: aotjax.mm(aotjax.ones(2, 3), aotjax.ones(2, 3)), ShapeError, r"mm: .* \(3 != 2\)"),
    ("bmm 2-d", lambda: aotjax.bmm(aotjax.ones(2, 3), aotjax.ones(3, 2)), ShapeError, "bmm: expected 3-D tensors"),
    ("bmm batch", lambda: aotjax.bmm(aotjax.ones(2, 3, 4), aotjax.ones(1, 4, 5)), ShapeError,
     r"bmm: batch sizes differ"),
    ("dot 2-d", lambda: aotjax.dot(aotjax.ones(2, 2), aotjax.ones(2)), ShapeError, "dot: expected 1-D tensors"),
    ("dot length", lambda: aotjax.dot(aotjax.ones(2), aotjax.ones(3)), ShapeError, "dot: expected tensors of one"),
    ("outer 2-d", lambda: aotjax.outer(aotjax.ones(2, 2), aotjax.ones(2)), ShapeError, "outer: expected 1-D"),
    ("einsum labels", lambda: aotjax.einsum("ij,jk->ik", aotjax.ones(2, 3), aotjax.ones(4, 5)), ShapeError,
     r"einsum: operands f32\[2,3\], f32\[4,5\] do not fit"),
    ("einsum dtypes", lambda: aotjax.einsum("i,i->", aotjax.ones(2), T([1, 2])), DTypeError, "einsum: expected"),
    ("linear", lambda: aotjax.linear(aotjax.ones(2, 3), aotjax.ones(4, 5)), ShapeError,
     r"linear: input of shape \[2, 3\] does not fit weight of shape \[4, 5\]"),
]


@pytest.mark.parametrize("name,thunk,exc,match", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_name_the_op_and_the_line(name, thunk, exc, match):
    with pytest.raises(exc, match=match) as info:
        thunk()
    assert "test_linalg.py" in str(info.value)


def test_traced_shape_error():
    with pytest.raises(ShapeError, match=r"matmul: shapes \[3, 4\] and \[5, 6\] cannot be multiplied.*test_linalg"):
        aotjax.make_jaxpr(lambda a, b: a @ b)(aotjax.ones(3, 4), aotjax.ones(5, 6))
