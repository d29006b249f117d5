"""Without jax's x64 mode a requested 64-bit dtype becomes its 32-bit form: every op that takes a dtype
(`ops._frontend.to_dtype`, the one place dtypes are canonicalized) warns once per process per op and
dtype, as jax does, naming the op and how to enable x64. These tests set the mode around each call
(`jax.enable_x64(False)`), so they mean the same whichever mode the suite runs in."""
import warnings

import jax
import numpy as np
import pytest

import aotjax
from aotjax.core.errors import DTypeTruncationWarning
from aotjax.ops.base import frontend as _frontend

F64, I64 = aotjax.float64, aotjax.int64

# (name, a call that asks for a 64-bit dtype, the op the warning names, requested, truncated to)
REQUESTS = [
    ("ones", lambda: aotjax.ones(2, dtype=F64), "ones", "float64", "float32"),
    ("zeros int64", lambda: aotjax.zeros(2, dtype=I64), "zeros", "int64", "int32"),
    ("full", lambda: aotjax.full((2,), 1.5, dtype=F64), "full", "float64", "float32"),
    ("arange", lambda: aotjax.arange(3, dtype=F64), "arange", "float64", "float32"),
    ("zeros_like", lambda: aotjax.zeros_like(aotjax.ones(2), dtype=F64), "zeros_like", "float64", "float32"),
    ("dtype as a string", lambda: aotjax.ones(2, dtype="float64"), "ones", "float64", "float32"),
    ("tensor of a float64 numpy array", lambda: aotjax.tensor(np.ones(2)), "tensor", "float64", "float32"),
    ("tensor of an int64 numpy array", lambda: aotjax.tensor(np.arange(2)), "tensor", "int64", "int32"),
    ("tensor with dtype", lambda: aotjax.tensor([1.0], dtype=F64), "tensor", "float64", "float32"),
    ("double", lambda: aotjax.ones(2).double(), "to", "float64", "float32"),
    ("long", lambda: aotjax.ones(2).long(), "to", "int64", "int32"),
    ("to", lambda: aotjax.ones(2).to(F64), "to", "float64", "float32"),
    ("sum with dtype", lambda: aotjax.ones(2).sum(dtype=F64), "sum", "float64", "float32"),
    ("mean with dtype", lambda: aotjax.ones(2).mean(dtype=F64), "mean", "float64", "float32"),
    ("softmax with dtype", lambda: aotjax.softmax(aotjax.ones(2), 0, dtype=F64), "softmax", "float64", "float32"),
    ("random.normal", lambda: aotjax.random.normal(aotjax.random.key(0), (2,), dtype=F64), "normal", "float64",
     "float32"),
    ("random.randint", lambda: aotjax.random.randint(aotjax.random.key(0), (2,), 0, 3, dtype=I64), "randint", "int64",
     "int32"),
]


@pytest.fixture
def fresh_warnings(monkeypatch):
    """Forget which truncations this process has warned about."""
    monkeypatch.setattr(_frontend, "_truncations_warned", set())


def _record(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn()
    return out, [w for w in caught if issubclass(w.category, DTypeTruncationWarning)]


@pytest.mark.parametrize("name,request_64,op,requested,got", REQUESTS, ids=[r[0] for r in REQUESTS])
def test_a_64_bit_request_without_x64_warns_once(name, request_64, op, requested, got, fresh_warnings):
    with jax.enable_x64(False):
        out, caught = _record(request_64)
        assert out.dtype == np.dtype(got)
        assert len(caught) == 1, [str(w.message) for w in caught]
        message = str(caught[0].message)
        assert message.startswith(f"{op}: explicitly requested dtype {requested} is not available, and will be "
                                  f"truncated to dtype {got}.")
        assert "jax_enable_x64" in message and "JAX_ENABLE_X64" in message
        assert caught[0].filename == __file__  # the user's line, not aotjax's
        _, again = _record(request_64)
        assert again == []  # once per process per op and dtype


@pytest.mark.parametrize("name,request_64,op,requested,got", REQUESTS, ids=[r[0] for r in REQUESTS])
def test_with_x64_nothing_warns(name, request_64, op, requested, got, fresh_warnings):
    with jax.enable_x64(True):
        out, caught = _record(request_64)
    assert caught == [] and out.dtype == np.dtype(requested)


DEFAULTS = [  # no dtype asked for: the defaults are what the device holds
    ("int list", lambda: aotjax.tensor([1, 2])),
    ("float list", lambda: aotjax.tensor([1.5])),
    ("ones", lambda: aotjax.ones(2)),
    ("arange", lambda: aotjax.arange(3)),
    ("python float dtype", lambda: aotjax.ones(2, dtype=float)),
    ("python int dtype", lambda: aotjax.zeros(2, dtype=int)),
    ("int arithmetic", lambda: aotjax.tensor([1, 2]) * 3 + 1),
    ("float32 numpy array", lambda: aotjax.tensor(np.ones(2, np.float32))),
    ("sum of ints", lambda: aotjax.tensor([1, 2]).sum()),
]


@pytest.mark.parametrize("name,fn", DEFAULTS, ids=[d[0] for d in DEFAULTS])
def test_default_dtypes_never_warn(name, fn, fresh_warnings):
    with jax.enable_x64(False):
        _, caught = _record(fn)
    assert caught == []


def test_each_op_warns_once_for_itself(fresh_warnings):
    with jax.enable_x64(False):
        _, first = _record(lambda: (aotjax.ones(2, dtype=F64), aotjax.zeros(2, dtype=F64), aotjax.ones(2, dtype=F64),
                                    aotjax.ones(2, dtype=I64)))
    assert [str(w.message).split(":")[0] for w in first] == ["ones", "zeros", "ones"]  # ones: float64, then int64
