"""Reductions against NumPy, one table row per op: values and dtypes over dim=None, negative dims, tuple
dims and keepdim, 0-d tensors, the traced program against eager, the `(values, indices)` forms of
max/min, PyTorch's dtype rules (integer sums give the default int, integer means raise) and errors. The
default int is `INT`: int64 with x64 (PyTorch's), int32 in jax's default 32-bit mode."""
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest

import aotjax
from aotjax.core.errors import DTypeError
from tests.helpers import FLOAT, INT, asks_for_64_bits, by_mode, check_traced_matches_eager
from tests.op_records import dtype_id

T = aotjax.tensor
F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
I32, BOOL = np.dtype(np.int32), np.dtype(np.bool_)


def sample(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    if dtype == BOOL:
        return rng.integers(0, 2, shape).astype(bool)
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-3, 4, shape).astype(dtype)
    return (rng.standard_normal(shape) * 2).astype(dtype)


def close(out, expected, tol=1e-5):
    expected = np.asarray(expected)
    assert out.shape == expected.shape, (out.shape, expected.shape)
    assert out.dtype == expected.dtype, (out.dtype, expected.dtype)
    np.testing.assert_allclose(np.asarray(out.numpy(), np.float64), np.asarray(expected, np.float64),
                               rtol=tol, atol=tol)


def _np_logsumexp(a, axis, keepdims):
    m = np.max(a, axis, keepdims=True)
    out = np.log(np.sum(np.exp(a - m), axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis)


def _np_axis(dim):
    return tuple(dim) if isinstance(dim, tuple) else dim


@dataclass
class Reduction:
    name: str
    ref: Callable  # (float64 or integer array, axis, keepdims) -> array
    out_dtype: Callable = lambda dt: dt
    dtypes: tuple = (F32, INT)
    tuple_dims: bool = True  # dim may be a tuple
    fn: Callable | None = None

    def __post_init__(self):
        self.fn = self.fn or (lambda x, dim, keepdim: getattr(aotjax, self.name)(x, dim, keepdim))


def _int_to_default(dt):
    return INT if not np.issubdtype(dt, np.floating) else dt


REDUCTIONS = [
    Reduction("sum", lambda a, ax, kd: np.sum(a, ax, keepdims=kd), _int_to_default, (F32, INT, BOOL)),
    Reduction("mean", lambda a, ax, kd: np.mean(a, ax, keepdims=kd), dtypes=(F32,)),
    Reduction("prod", lambda a, ax, kd: np.prod(a, ax, keepdims=kd), _int_to_default, tuple_dims=False),
    Reduction("amax", lambda a, ax, kd: np.amax(a, ax, keepdims=kd), dtypes=(F32, INT, BOOL)),
    Reduction("amin", lambda a, ax, kd: np.amin(a, ax, keepdims=kd)),
    Reduction("all", lambda a, ax, kd: np.all(a, ax, keepdims=kd), lambda dt: BOOL, (F32, BOOL)),
    Reduction("any", lambda a, ax, kd: np.any(a, ax, keepdims=kd), lambda dt: BOOL, (INT, BOOL)),
    Reduction("var", lambda a, ax, kd: np.var(a, ax, ddof=1, keepdims=kd), dtypes=(F32,),
              fn=lambda x, dim, keepdim: aotjax.var(x, dim, keepdim=keepdim)),
    Reduction("var_correction0", lambda a, ax, kd: np.var(a, ax, keepdims=kd), dtypes=(F32,),
              fn=lambda x, dim, keepdim: x.var(dim, keepdim=keepdim, correction=0)),
    Reduction("std", lambda a, ax, kd: np.std(a, ax, ddof=1, keepdims=kd), dtypes=(F32,),
              fn=lambda x, dim, keepdim: aotjax.std(x, dim, keepdim=keepdim)),
    Reduction("std_unbiased_false", lambda a, ax, kd: np.std(a, ax, keepdims=kd), dtypes=(F32,),
              fn=lambda x, dim, keepdim: x.std(dim, False, keepdim)),
    Reduction("logsumexp", _np_logsumexp, dtypes=(F32,)),
    Reduction("argmax", lambda a, ax, kd: np.argmax(a, ax, keepdims=kd), lambda dt: INT, tuple_dims=False),
    Reduction("argmin", lambda a, ax, kd: np.argmin(a, ax, keepdims=kd), lambda dt: INT, tuple_dims=False),
    Reduction("max_values", lambda a, ax, kd: np.amax(a, ax, keepdims=kd), tuple_dims=False,
              fn=lambda x, dim, keepdim: x.max() if dim is None else x.max(dim, keepdim).values),
    Reduction("min_indices", lambda a, ax, kd: np.argmin(a, ax, keepdims=kd), lambda dt: INT, tuple_dims=False,
              fn=lambda x, dim, keepdim: x.min(dim, keepdim).indices),
]


def reduction_cases():
    cases = []
    for r in REDUCTIONS:
        dims = [(None, False), ((0, -1), True) if r.tuple_dims else (-1, True)]
        if r.name in ("max_values", "min_indices"):  # (values, indices) needs a dim
            dims = [(0, False), (-1, True)]
        cases += [(r, r.dtypes[0], dim, kd) for dim, kd in dims]  # every dim form for the first dtype,
        cases += [(r, dt, *dims[-1]) for dt in r.dtypes[1:]]  # one for the others
    return cases


@pytest.mark.parametrize("r,dtype,dim,keepdim", reduction_cases(),
                         ids=[f"{r.name}-{dtype_id(dt)}-{dim}-{kd}" for r, dt, dim, kd in reduction_cases()])
def test_reduction_values(r, dtype, dim, keepdim):
    a = sample((2, 3, 4), dtype)
    ref_in = a.astype(F64) if dtype == F32 else a
    expected = np.asarray(r.ref(ref_in, _np_axis(dim), keepdim)).astype(r.out_dtype(dtype))
    close(r.fn(T(a), dim, keepdim), expected)


@pytest.mark.parametrize("r", REDUCTIONS, ids=[r.name for r in REDUCTIONS])
def test_reduction_of_0d(r):
    a = sample((), r.dtypes[0], seed=3)
    ref_in = a.astype(F64) if a.dtype == F32 else a
    for dim in (0, -1):
        out = r.fn(T(a), dim, False)
        if r.name.startswith(("var", "std")):  # one element: N - 1 = 0
            assert out.shape == () and (r.name.endswith(("0", "false")) or np.isnan(out.item()))
            continue
        expected = r.ref(ref_in[None], 0, False)
        close(out, np.asarray(expected).astype(r.out_dtype(a.dtype)))


@pytest.mark.parametrize("r", REDUCTIONS, ids=[r.name for r in REDUCTIONS])
def test_reduction_traced_matches_eager(r):
    a = sample((2, 3, 4), r.dtypes[0])
    dim = (0, -1) if r.tuple_dims else -1
    check_traced_matches_eager(lambda x: r.fn(x, dim, True), T(a), rtol=1e-5, atol=1e-5)


# -- max / min forms -------------------------------------------------------------------------------
def test_max_min_forms():
    a = np.array([[1.0, 5.0, 5.0], [7.0, 2.0, 7.0]], F32)
    x = T(a)
    assert x.max().shape == () and x.max().item() == 7.0 and aotjax.min(x).item() == 1.0
    values, indices = aotjax.max(x, 1)
    assert values.tolist() == [5.0, 7.0] and indices.tolist() == [1, 0]  # the first on ties
    out = x.min(dim=0, keepdim=True)
    assert out.values.shape == (1, 3) and out.indices.tolist() == [[0, 1, 0]] and out.indices.dtype == INT
    assert type(out).__name__ == "min" and type(x.max(0)).__name__ == "max"
    close(aotjax.max(x, T([[6.0], [0.0]])), np.maximum(a, np.array([[6.0], [0.0]], F32)))
    close(x.min(T(3.0)), np.minimum(a, 3.0).astype(F32))
    check_traced_matches_eager(lambda x: (x.max(0), x.min(-1, True), x.max(), x.max(x * 2)), x)


def test_nan_propagates_through_amax_and_argmax():
    x = T([[1.0, float("nan"), 3.0]])
    assert np.isnan(x.amax().item()) and x.argmax().item() == 1 and np.isnan(x.max(1).values.item())


def test_argmax_flattens_without_dim():
    a = sample((3, 4), F32)
    assert aotjax.argmax(T(a)).item() == np.argmax(a)
    assert aotjax.argmax(T(a), keepdim=True).shape == (1, 1)


# -- dtypes ----------------------------------------------------------------------------------------
DTYPES = [
    ("sum int32", lambda: T([1, 2], dtype=aotjax.int32).sum(), INT, 3),
    ("sum bool", lambda: T([True, True, False]).sum(), INT, 2),
    ("sum dtype", lambda: T([1, 2]).sum(dtype=aotjax.float32), F32, 3.0),
    ("sum float16 accumulates in float32", lambda: aotjax.full((4096,), 0.1, dtype=aotjax.float16).sum(), F16,
     np.float16(409.6)),
    ("mean float16 does not overflow", lambda: T([60000.0, 60000.0], dtype=aotjax.float16).mean(), F16, 60000.0),
    ("mean dtype", lambda: T([1, 2]).mean(dtype=aotjax.float64), FLOAT, 1.5),
    ("prod int8", lambda: T([2, 3], dtype=aotjax.int8).prod(), INT, 6),
    ("amax keeps int32", lambda: T([2, 3], dtype=aotjax.int32).amax(), I32, 3),
    ("logsumexp of ints", lambda: aotjax.logsumexp(T([0, 0]), 0), F32, np.log(2.0)),
    ("logsumexp of large values", lambda: T([1000.0, 1000.0]).logsumexp(0), F32, 1000.0 + np.log(2.0)),
    ("logsumexp of -inf", lambda: T([-np.inf, -np.inf]).logsumexp(0), F32, -np.inf),
    ("all of floats", lambda: T([0.5, np.nan]).all(), BOOL, True),
    ("var with unbiased=False", lambda: T([1.0, 3.0]).var(unbiased=False), F32, 1.0),
    ("var positional unbiased", lambda: T([1.0, 3.0]).var(False), F32, 1.0),
]


@asks_for_64_bits
@pytest.mark.parametrize("name,thunk,dtype,value", DTYPES, ids=[d[0] for d in DTYPES])
def test_dtypes(name, thunk, dtype, value):
    out = thunk()
    assert out.dtype == dtype and out.shape == ()
    np.testing.assert_allclose(out.item(), value, rtol=1e-5)


CUMSUM = [(F32, 0), (F32, -1), (I32, 1), (BOOL, 0)]


@asks_for_64_bits
@pytest.mark.parametrize("dtype,dim", CUMSUM, ids=[f"{d.name}-{dim}" for d, dim in CUMSUM])
def test_cumsum(dtype, dim):
    a = sample((2, 3), dtype)
    expected = np.cumsum(a.astype(F64) if dtype == F32 else a, dim).astype(_int_to_default(dtype))
    close(aotjax.cumsum(T(a), dim), expected)
    close(T(a).cumsum(dim=dim, dtype=aotjax.float64), np.cumsum(a.astype(F64), dim).astype(FLOAT))
    assert aotjax.cumsum(T(2.0), 0).item() == 2.0  # 0-d
    check_traced_matches_eager(lambda x: x.cumsum(dim), T(a))


# -- errors ----------------------------------------------------------------------------------------
ERRORS = [
    ("mean of ints", lambda: T([1, 2]).mean(), DTypeError,
     rf"mean: expected a floating-point tensor, got {by_mode('i64', 'i32')}\[2\]"),
    ("var of ints", lambda: T([1, 2]).var(), DTypeError, "var: expected a floating-point tensor"),
    ("dim out of range", lambda: aotjax.ones(2, 3).sum(2), IndexError, r"sum: dimension 2 is out of range"),
    ("tuple dim out of range", lambda: aotjax.ones(2, 3).amax((0, -3)), IndexError, "amax: dimension -3"),
    ("argmax dim", lambda: aotjax.ones(2).argmax(1), IndexError, "argmax: dimension 1"),
    ("0-d dim", lambda: aotjax.ones(()).max(1), IndexError, "max: dimension 1"),
    ("unbiased and correction", lambda: aotjax.ones(2).var(unbiased=True, correction=0), ValueError, "var: pass"),
]


@pytest.mark.parametrize("name,thunk,exc,match", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_name_the_op_and_the_line(name, thunk, exc, match):
    with pytest.raises(exc, match=match) as info:
        thunk()
    assert "test_reduction.py" in str(info.value)
