"""User errors: each message names the op, what was wrong and the user's source line (this file's
name and the line number of the offending call)."""
import inspect
import re

import numpy as np
import pytest

import aotjax
from aotjax.core.errors import AliasingError, ConcretizationError, DTypeError, ShapeError, UnsupportedError

pytestmark = pytest.mark.x32_only  # NOTE: independent of the float width: not run again in the x64 pass


def _next_line() -> int:
    """The line number after the caller's current line: where the statement under test is."""
    return inspect.currentframe().f_back.f_lineno + 1


def _assert_at(message: str, line: int, function: str) -> None:
    assert re.search(rf"test_errors\.py:{line} \({function}\)", message), message


def test_python_if_on_a_traced_value():
    where = []

    def f(x):
        where.append(_next_line())
        if x.sum() > 0:
            return x
        return -x

    with pytest.raises(ConcretizationError) as info:
        aotjax.make_jaxpr(f)(aotjax.ones(3))
    message = str(info.value)
    assert "__bool__" in message and "abstract" in message and "aotjax.where" in message
    _assert_at(message, where[0], "f")


def test_matmul_shape_mismatch_eager():
    a, b = aotjax.ones(2, 3), aotjax.ones(4, 5)
    with pytest.raises(ShapeError, match=r"matmul") as info:
        line = _next_line()
        a @ b
    message = str(info.value)
    assert "[2, 3]" in message.replace("(", "[").replace(")", "]") or "f32[2,3]" in message, message
    _assert_at(message, line, "test_matmul_shape_mismatch_eager")


def test_matmul_shape_mismatch_traced():
    where = []

    def f(a, b):
        where.append(_next_line())
        return a.matmul(b)

    with pytest.raises(ShapeError, match=r"matmul") as info:
        aotjax.make_jaxpr(f)(aotjax.ones(2, 3), aotjax.ones(4, 5))
    _assert_at(str(info.value), where[0], "f")


def test_unknown_dtype_in_tensor():
    with pytest.raises(DTypeError, match=r"tensor.*unknown dtype 'float128x'") as info:
        line = _next_line()
        aotjax.tensor([1], dtype="float128x")
    message = str(info.value)
    _assert_at(message, line, "test_unknown_dtype_in_tensor")
    assert "float32" in message  # says what to use instead


def test_unknown_dtype_in_to():
    x = aotjax.ones(2)
    with pytest.raises(DTypeError, match=r"to.*unknown dtype 'nope'") as info:
        line = _next_line()
        x.to(dtype="nope")
    _assert_at(str(info.value), line, "test_unknown_dtype_in_to")
    with pytest.raises(ValueError, match=r"to: unknown device 'nope'.*devices jax has here are cpu") as info:
        line = _next_line()
        x.to("nope")  # NOTE: as in torch, a string is a device
    _assert_at(str(info.value), line, "test_unknown_dtype_in_to")


def test_as_strided_is_rejected():
    x = aotjax.ones(4)
    with pytest.raises(UnsupportedError, match=r"as_strided") as info:
        line = _next_line()
        x.as_strided((2, 2), (1, 1))
    _assert_at(str(info.value), line, "test_as_strided_is_rejected")


@pytest.mark.parametrize("write", ["row", "whole"])
def test_write_through_an_expanded_view(write):
    x = aotjax.tensor(np.arange(4.0, dtype=np.float32))
    with pytest.raises(AliasingError) as info:
        line = _next_line()
        x.expand(3, 4)[0].add_(1) if write == "row" else x.expand(3, 4).add_(1)
    message = str(info.value)
    assert "add_" in message and "expand" in message, message
    _assert_at(message, line, "test_write_through_an_expanded_view")
    np.testing.assert_array_equal(x.numpy(), [0.0, 1.0, 2.0, 3.0])  # nothing was written


def test_write_through_an_expanded_view_traced():
    where = []

    def f(x):
        where.append(_next_line())
        x.expand(3, 4).add_(1)
        return x

    with pytest.raises(AliasingError) as info:
        aotjax.make_jaxpr(f)(aotjax.ones(4))
    _assert_at(str(info.value), where[0], "f")


def test_lowering_an_in_place_program():
    where = []

    def f(x):
        where.append(_next_line())
        x.sin_()
        return x

    closed = aotjax.make_jaxpr(f)(aotjax.ones(3))
    with pytest.raises(UnsupportedError, match=r"to_jax: .*'sin_'") as info:
        aotjax.to_jax(closed)
    _assert_at(str(info.value), where[0], "f")
