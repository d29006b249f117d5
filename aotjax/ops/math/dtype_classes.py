"""PyTorch's dtype classes of the elementwise ops: each op has one, saying how the frontend promotes its operands
(`operand`: integers to the default float for float-only math, ...) and what its primitive accepts and returns (`rule`,
the `out_dtype` of the `elementwise` combinator: comparisons return bool, `abs` of complex is real, ...). The families
of aotjax/ops/math/ make their ops with them."""
from __future__ import annotations

import numpy as np

from aotjax.core.errors import DTypeError
from aotjax.ops.base.promotion import (
    _BOOL,
    _COMPLEX,
    _FLOAT,
    _INT,
    can_cast,
    category,
    default_float_dtype,
    default_int_dtype,
)

BOOL_DTYPE = np.dtype(np.bool_)


# Each op has a dtype class: how the frontend promotes its operands (`operand`) and what its
# primitive accepts and returns (`rule`, the `out_dtype` of the `elementwise` combinator).
class DtypeClass:
    def __init__(self, operand, accepts, result, expected: str):
        self.operand, self.accepts, self.result, self.expected = operand, accepts, result, expected
        self.as_is: set = set()  # see `takes_as_is`
        self.written_as_is: set = set()  # see `writes_as_is`

    def takes_as_is(self, dtype) -> bool:
        """Whether an operand of `dtype` is used as it is: its operand rule keeps it, and it is real (nothing for the
        elementwise family's `_refuse_complex` to refuse). The ops' eager fast path; learned per dtype (the rules that
        map a dtype to a default dtype, which the x64 flag decides, never map it to itself)."""
        if dtype in self.as_is:
            return True
        if self.operand(dtype) == dtype and category(dtype) != _COMPLEX:
            self.as_is.add(dtype)
            return True
        return False

    def writes_as_is(self, dtype) -> bool:
        """Whether an in-place op on a tensor of `dtype` with an operand of `dtype` converts nothing: the operand
        is taken as it is, and the result casts to `dtype`. Learned per dtype."""
        if dtype in self.written_as_is:
            return True
        if self.takes_as_is(dtype) and can_cast(self.result(dtype), dtype):
            self.written_as_is.add(dtype)
            return True
        return False

    def rule(self, name: str):
        def out_dtype(dt):
            if not self.accepts(dt):
                raise DTypeError(f"{name}: expected {self.expected} operands, got {np.dtype(dt).name}")
            return self.result(dt)
        return out_dtype


def float_or_default(dt):
    return dt if category(dt) >= _FLOAT else default_float_dtype()


def _any(dt):
    return True


FLOATING = DtypeClass(float_or_default, lambda dt: category(dt) >= _FLOAT, lambda dt: dt, "floating-point")
NUMERIC = DtypeClass(lambda dt: dt, lambda dt: category(dt) > _BOOL, lambda dt: dt, "numeric (non-bool)")
ANY_DTYPE = DtypeClass(lambda dt: dt, _any, lambda dt: dt, "any")
PREDICATE = DtypeClass(lambda dt: dt, _any, lambda dt: BOOL_DTYPE, "any")
ORDERED = DtypeClass(lambda dt: dt, lambda dt: category(dt) != _COMPLEX, lambda dt: BOOL_DTYPE,
                       "real (complex numbers are not ordered)")
REAL = DtypeClass(lambda dt: dt, lambda dt: category(dt) != _COMPLEX, lambda dt: dt, "real (not complex)")
ABS = DtypeClass(lambda dt: dt, _any, lambda dt: np.dtype(np.finfo(dt).dtype) if category(dt) == _COMPLEX else dt,
                   "any")
INTEGRAL = DtypeClass(lambda dt: dt, lambda dt: category(dt) <= _INT, lambda dt: dt, "integer or bool")
SQUARE = DtypeClass(lambda dt: default_int_dtype() if dt == BOOL_DTYPE else dt, lambda dt: category(dt) > _BOOL,
                      lambda dt: dt, "numeric (non-bool)")


