"""PyTorch's type promotion (`result_type`) and in-place cast rule (`can_cast`), one row per case, with
the dtype PyTorch gives. Dimensioned tensors outrank 0-d tensors, which outrank Python scalars, unless
the lower group is of a higher category (bool < integer < floating < complex). Without jax's x64 mode a
64-bit result is its 32-bit form (the default int is int32 there)."""
import jax
import numpy as np
import pytest

import aotjax
from aotjax.core.errors import DTypeError
from aotjax.ops.base.promotion import can_cast, check_inplace_cast, default_float_dtype, default_int_dtype, result_type
from tests.helpers import by_mode

BF16 = aotjax.bfloat16


def t(dtype):
    """A dimensioned operand of `dtype` (NumPy arrays carry the dtype and shape result_type reads)."""
    return np.zeros((2,), np.dtype(dtype))


def z(dtype):
    """A 0-d operand of `dtype`."""
    return np.zeros((), np.dtype(dtype))


RESULT_TYPES = [
    ("int tensor, float scalar", (t("int64"), 2.5), "float32"),
    ("half tensor, float scalar", (t("float16"), 2.5), "float16"),
    ("bfloat16 tensor, float scalar", (t(BF16), 2.5), BF16),
    ("int32 tensor, int scalar", (t("int32"), 1), "int32"),
    ("uint8 tensor, int scalar", (t("uint8"), 1), "uint8"),
    ("bool tensor, int scalar", (t("bool"), 1), "int64"),
    ("bool tensor, bool scalar", (t("bool"), True), "bool"),
    ("bool tensor, float scalar", (t("bool"), 1.5), "float32"),
    ("int tensor, float 0-d", (t("int64"), z("float32")), "float32"),
    ("int32 tensor, int64 0-d", (t("int32"), z("int64")), "int32"),
    ("half tensor, float32 0-d", (t("float16"), z("float32")), "float16"),
    ("uint8 tensor, int8 0-d", (t("uint8"), z("int8")), "uint8"),
    ("half tensor, double tensor", (t("float16"), t("float64")), "float64"),
    ("int8 tensor, uint8 tensor", (t("int8"), t("uint8")), "int16"),
    ("int32 tensor, int64 tensor", (t("int32"), t("int64")), "int64"),
    ("int 0-d, half 0-d", (z("int32"), z("float16")), "float16"),
    ("int 0-d, float scalar", (z("int64"), 2.5), "float32"),
    ("double 0-d, float scalar", (z("float64"), 2.5), "float64"),
    ("int scalar, float scalar", (2, 2.5), "float32"),
    ("bool scalar, int scalar", (True, 2), "int64"),
    ("float tensor, complex scalar", (t("float32"), 1j), "complex64"),
    ("double tensor, complex scalar", (t("float64"), 1j), "complex128"),
    ("float tensor, complex64 0-d", (t("float32"), z("complex64")), "complex64"),
    ("three operands", (t("int32"), z("float64"), 1), "float64"),
]


@pytest.mark.parametrize("name,operands,expected", RESULT_TYPES, ids=[r[0] for r in RESULT_TYPES])
def test_result_type(name, operands, expected):
    assert result_type(*operands) == jax.dtypes.canonicalize_dtype(np.dtype(expected))


def test_ops_use_result_type():  # (more cases through the ops: tests/ops/test_elementwise.py::PROMOTION)
    assert aotjax.add(aotjax.zeros(2, dtype=BF16), 2.5).dtype == BF16
    assert aotjax.mul(aotjax.zeros(2, dtype=aotjax.uint8), aotjax.tensor(np.zeros((), np.int8))).dtype == np.uint8


CASTS = [
    ("float32", "int64", False),
    ("int64", "float32", True),
    ("bool", "int64", True),
    ("bool", "float16", True),
    ("int64", "bool", False),
    ("float64", "float16", True),
    ("complex64", "float32", False),
    ("int64", "uint8", True),
    ("float32", "complex64", True),
]


@pytest.mark.parametrize("src,dst,ok", CASTS, ids=[f"{s}->{d}" for s, d, _ in CASTS])
def test_can_cast(src, dst, ok):
    assert can_cast(np.dtype(src), np.dtype(dst)) is ok


def test_check_inplace_cast_message():
    check_inplace_cast("mul_", np.dtype("int64"), np.dtype("float32"))
    with pytest.raises(DTypeError, match=r"^add_: the result type float32 cannot be cast to the dtype of the tensor "
                                         r"written in place, int64 \(at test_promotion.py:\d+ .*x.add\(...\)"):
        check_inplace_cast("add_", np.dtype("float32"), np.dtype("int64"))


def test_default_dtypes_of_the_mode():
    assert default_float_dtype() == np.float32 and default_int_dtype() == by_mode(np.int64, np.int32)
