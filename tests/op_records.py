"""The op table: one record per op under test. Adding an op to the tests is adding one row here.

A record says how to call the op (`fn`, on aotjax tensors), what it must compute (`numpy`: a NumPy
reference for the forward tests; `jax`: the same math in `jax.numpy` for the derivative tests), on which
inputs, with what tolerance, and what else to check. The tests that read it:

- forward (tests/ops/test_elementwise.py, tests/ops/test_views.py): records of family `UNARY` and `BINARY`
  (values and result dtypes against `numpy` over `dtypes`, broadcasting, 0-d, Python scalars, traced
  against eager), and `VIEW` (values against `numpy`, traced against eager, lowered under `jax.jit`);
- in-place (tests/ops/test_elementwise.py): records with an `inplace` form, written through a view;
  a view record with `write` checks its inverse (a write through the view, under `jax.jit`);
- jvp and vjp (tests/interpreters/test_jvp.py, tests/test_vjp_ops.py): every record with a `jax`
  reference, against `jax.jvp`/`jax.vjp` and (unless `fd=False`) central finite differences;
- transpose (tests/interpreters/test_transpose.py): every operand set in `linear`, by the dot-product test
  `<A x, y> == <x, A^T y>`, which also checks that the primitive `prim` is in the linear program.

Derivative and transpose inputs are of `diff_dtype` (default: the widest float of the suite's mode, float64
with x64, float32 without) and `shapes`, drawn from `grad_domain` (default `domain`); forward inputs come
from the family's own generator (`sample`, `rand`). Integer forward inputs are of the default int (`INT`:
int64 with x64, int32 without), named `int` in test ids so that ids are the same in both modes.
"""
from __future__ import annotations

import enum
import functools
import math
from dataclasses import dataclass
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import aotjax
from aotjax.ops.calls.compiled import Program, compiled_call_p
from aotjax.ops.calls.remat import optimization_barrier_p
from aotjax.ops.indexing.subscripts import copy_p, fill_p
from aotjax.ops.shape.views import diagonal_scatter_p, select_scatter_p, slice_scatter_p
from aotjax.transforms.aot import xla_compiler
from tests.helpers import FLOAT, INT, X64, by_mode

T = aotjax.tensor
F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
I32, I64, BOOL = np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.bool_)


class Family(enum.Enum):
    """Which forward tests a record runs."""

    UNARY = "unary"  # elementwise, one operand: tests/ops/test_elementwise.py
    BINARY = "binary"  # elementwise, two operands: tests/ops/test_elementwise.py
    VIEW = "view"  # views and other data movement, checked exactly: tests/ops/test_views.py
    OTHER = "other"  # no table-driven forward test (checked in its family's own tests)


class Result(enum.Enum):
    """The result dtype of an elementwise op, from its operands' (promoted) dtype."""

    KEEP = "keep"  # the operands' dtype
    FLOAT = "float"  # floats kept, integers and bools give float32
    BOOL = "bool"  # bool


@dataclass(frozen=True)
class OpRecord:
    name: str  # the test id
    fn: Callable  # the op on aotjax tensors: a tensor, or a tuple of tensors, out
    shapes: tuple = ((3, 4),)  # derivative and transpose inputs (view forward inputs too): one shape per operand
    numpy: Callable | None = None  # forward reference on NumPy arrays (float64 for float elementwise inputs)
    jax: Callable | None = None  # the same math in jax.numpy: the derivative reference (None: not differentiated)
    family: Family = Family.OTHER
    result: Result = Result.KEEP  # elementwise: the result dtype
    dtypes: tuple = (F32, INT)  # elementwise: forward input dtypes
    domain: str | tuple = "any"  # forward inputs, one per operand or one for all (see `sample`)
    grad_domain: str | tuple | None = None  # derivative inputs (default: `domain`)
    inputs: Callable | None = None  # custom derivative inputs (a list of float64 arrays, cast to `diff_dtype`)
    inplace: Callable | None = None  # the in-place form `fn_(x, *others)`, which returns x
    write: Callable | None = None  # views: the writable NumPy view of a base the op reads (the inverse test)
    fd: bool = True  # derivatives: also against finite differences (off where the op is not smooth there)
    linear: tuple = ()  # operand sets the op is linear in, the others held fixed: a dot-product test each
    prim: str | None = None  # the primitive the transpose test must find in the linear program
    diff_dtype: np.dtype = FLOAT  # dtype of the derivative and transpose inputs
    needs_x64: bool = False  # float64 arithmetic: its derivative and transpose tests run in the x64 pass only
    tol: float = 1e-5  # elementwise forward tolerance

    def __repr__(self) -> str:
        return self.name

    @property
    def arity(self) -> int:
        return len(self.shapes)

    def domain_of(self, i: int, grad: bool = False) -> str:
        d = self.grad_domain if grad and self.grad_domain is not None else self.domain
        return d[i] if isinstance(d, tuple) else d

    def out_dtype(self, dt) -> np.dtype:
        if self.result is Result.BOOL:
            return BOOL
        if self.result is Result.FLOAT and not np.issubdtype(dt, np.floating):
            return F32
        return dt


# -- input generators ----------------------------------------------------------------------------------
def sample(domain: str, shape, dtype, seed=0):
    """Forward inputs of `dtype` in `domain`: any, pos (> 0), unit (|x| < 1), nonzero, small (ints in [0, 4)),
    special (with nan/inf)."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype == BOOL:
        return rng.integers(0, 2, shape).astype(bool)
    if np.issubdtype(dtype, np.integer):
        lo, hi = {"pos": (1, 6), "nonzero": (1, 6), "small": (0, 4)}.get(domain, (-5, 6))
        v = rng.integers(lo, hi, shape)
        if domain == "nonzero":
            v = v * rng.choice([-1, 1], shape)
        return v.astype(dtype)
    v = rng.standard_normal(shape) * 2
    if domain == "pos":
        v = np.abs(v) + 0.1
    elif domain == "unit":
        v = np.tanh(v) * 0.9
    elif domain == "nonzero":
        v = np.where(np.abs(v) < 0.1, 0.5, v)
    elif domain == "special" and v.size >= 3:
        v.flat[:3] = [np.nan, np.inf, -np.inf]
    return v.astype(dtype)


def sample_f64(domain: str, shape, seed: int):
    """Derivative inputs (float64) in `domain`: any, pos (>= 0.5), unit (|x| < 1), nonzero (|x| >= 0.2)."""
    rng = np.random.default_rng(seed)
    v = rng.standard_normal(shape)
    if domain == "pos":
        v = np.abs(v) + 0.5
    elif domain == "unit":
        v = np.tanh(v) * 0.9
    elif domain == "nonzero":
        v = np.where(np.abs(v) < 0.2, 0.7, v)
    return v.astype(F64)


def rand(*shape, seed=0):
    """View inputs: float32 normal samples."""
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


def derivative_inputs(record: OpRecord) -> list[np.ndarray]:
    """The inputs of `record`'s derivative and transpose tests."""
    if record.inputs is not None:
        return [a.astype(record.diff_dtype) for a in record.inputs()]
    return [sample_f64(record.domain_of(i, grad=True), s, seed=i).astype(record.diff_dtype)
            for i, s in enumerate(record.shapes)]


def flat(out) -> list:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def as_np(x) -> np.ndarray:
    return np.asarray(x.numpy() if isinstance(x, aotjax.Tensor) else x)


def dtype_id(dtype) -> str:
    """A dtype in test ids: `int` for the default int, so that ids are the same in both modes."""
    return "int" if np.dtype(dtype) == INT else np.dtype(dtype).name


def skip_without_x64(record: OpRecord) -> None:
    """Skip a derivative or transpose test of `record` in jax's 32-bit mode if its math is float64's."""
    if record.needs_x64 and not X64:
        pytest.skip(f"{record.name}: float64 does not exist in jax's default 32-bit mode; the x64 pass "
                    f"(AOTJAX_TEST_X64=1) runs this test")


# -- row builders ----------------------------------------------------------------------------------------
def unary(name: str, numpy: Callable, jax: Callable | None = None, *, inplace: bool = True, fn=None, fn_=None,
          result: Result = Result.FLOAT, **kw) -> OpRecord:
    """An elementwise unary op: `aotjax.<name>` and `x.<name>_()` unless given."""
    fn = fn or getattr(aotjax, name)
    fn_ = (fn_ or (lambda x: getattr(x, name + "_")())) if inplace else None
    return OpRecord(name, fn, numpy=numpy, jax=jax, family=Family.UNARY, result=result, inplace=fn_, **kw)


def binary(name: str, numpy: Callable, jax: Callable | None = None, *, inplace: bool = True, fn=None, fn_=None,
           shapes=((3, 4), (4,)), **kw) -> OpRecord:
    """An elementwise binary op: `aotjax.<name>` and `x.<name>_(y)` unless given."""
    fn = fn or getattr(aotjax, name)
    fn_ = (fn_ or (lambda x, y: getattr(x, name + "_")(y))) if inplace else None
    return OpRecord(name, fn, shapes, numpy=numpy, jax=jax, family=Family.BINARY, inplace=fn_, **kw)


def view(name: str, shapes, fn: Callable, numpy: Callable, jax: Callable | None = None, **kw) -> OpRecord:
    """A view (or data-movement) op checked exactly against `numpy` on float32 inputs of `shapes`."""
    return OpRecord(name, fn, tuple(shapes), numpy=numpy, jax=jax, family=Family.VIEW, **kw)


def op(name: str, fn: Callable, jax: Callable | None, shapes=((3, 4),), **kw) -> OpRecord:
    """An op checked by its derivatives (and transpose) only: its forward has tests of its own."""
    return OpRecord(name, fn, tuple(shapes), jax=jax, **kw)


# -- references and constants ----------------------------------------------------------------------------
_erf = np.vectorize(math.erf, otypes=[np.float64])


def _gelu(x):
    return 0.5 * x * (1 + _erf(x / math.sqrt(2)))


def _gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def _jax_gelu(approximate):
    return lambda x: jax.nn.gelu(x, approximate=approximate)


def _trunc_div(x, y):
    out = np.trunc(x / y)
    return out.astype(x.dtype) if not np.issubdtype(x.dtype, np.floating) else out


def _lerp(s, e, w):
    return s + w * (e - s)


IDX = np.array([2, 0, 2])
GATHER_IDX = np.array([[0, 2, 1], [1, 1, 0]])
SCATTER_IDX = np.array([[0, 2, 1], [3, 1, 0]])
MASK = np.array([[True, False, True, False], [False, False, True, True], [True, True, False, False]])


def _scatter_add_ref(x, src):
    rows = np.broadcast_to(np.arange(2)[:, None], GATHER_IDX.shape)
    return x.at[rows, GATHER_IDX].add(src[:, :3])


def _inputs_with_zeros():
    x = sample_f64("any", (3, 4), 0)
    x[0, 1] = 0.0
    x[1, 0] = x[1, 3] = 0.0
    return [x]


def _inputs_on_the_hundredths():
    """Inputs of `round(x, decimals=2)` halfway between its jumps, where a finite difference crosses none."""
    return [np.round(sample_f64("any", (3, 4), 0), 2)]


def _inputs_with_ties():
    return [np.array([[1.0, 3.0, 3.0, -1.0], [2.0, 2.0, 2.0, 2.0], [0.5, -4.0, 0.1, -4.0]])]


def _affine(x, y):
    return x * 2.0 + y.sum()


@functools.cache
def _affine_program() -> Program:
    """`_affine` on `[2, 3]` and `[3]` of the derivative dtype, staged as a compiled program (what `aot` calls)."""
    x, y = aotjax.zeros(2, 3, dtype=FLOAT), aotjax.zeros(3, dtype=FLOAT)
    return Program(aotjax.make_jaxpr(_affine)(x, y), xla_compiler, "affine")


def _lin(*sets) -> tuple:
    return tuple(tuple(s) for s in sets)


L0, L1, L01 = _lin((0,)), _lin((1,)), _lin((0, 1))
L0_1 = _lin((0,), (1,))  # linear in each operand, the other fixed (a product)

K, FL, B = Result.KEEP, Result.FLOAT, Result.BOOL

_ONE_DEVICE = jax.sharding.SingleDeviceSharding(jax.devices()[0])

RECORDS: list[OpRecord] = [
    # -- elementwise unary --------------------------------------------------------------------------------
    unary("neg", np.negative, jnp.negative, result=K, linear=L0, prim="neg"),
    unary("abs", np.abs, jnp.abs, result=K, grad_domain="nonzero"),
    unary("exp", np.exp, jnp.exp),
    unary("log", np.log, jnp.log, domain="pos"),
    unary("log1p", np.log1p, jnp.log1p, domain="pos"),
    unary("expm1", np.expm1, jnp.expm1),
    unary("sqrt", np.sqrt, jnp.sqrt, domain="pos"),
    unary("rsqrt", lambda x: 1 / np.sqrt(x), jax.lax.rsqrt, domain="pos"),
    unary("sin", np.sin, jnp.sin),
    unary("cos", np.cos, jnp.cos),
    unary("tan", np.tan, jnp.tan, domain="unit"),
    unary("tanh", np.tanh, jnp.tanh),
    unary("sigmoid", lambda x: 1 / (1 + np.exp(-x)), jax.nn.sigmoid),
    unary("relu", lambda x: np.maximum(x, 0), jax.nn.relu, result=K, grad_domain="nonzero"),
    unary("gelu", _gelu, _jax_gelu(False)),
    unary("gelu_tanh", _gelu_tanh, _jax_gelu(True), fn=lambda x: aotjax.gelu(x, approximate="tanh"),
          fn_=lambda x: x.gelu_(approximate="tanh")),
    unary("silu", lambda x: x / (1 + np.exp(-x)), jax.nn.silu),
    unary("erf", _erf, jax.lax.erf),
    unary("floor", np.floor, jnp.floor, result=K),
    unary("ceil", np.ceil, jnp.ceil, result=K),
    unary("round", np.round, jnp.round, result=K),
    unary("round_decimals", lambda x: np.round(x, 2), lambda x: jnp.round(x, 2), result=K,
          fn=lambda x: aotjax.round(x, decimals=2), fn_=lambda x: x.round_(decimals=2),
          inputs=_inputs_on_the_hundredths),
    unary("sign", np.sign, jnp.sign, result=K),
    unary("reciprocal", lambda x: 1 / x, jnp.reciprocal, domain="nonzero"),
    unary("square", np.square, jnp.square, result=K),
    unary("integer_pow", lambda x: x ** 3, lambda x: x ** 3, result=K, fn=lambda x: x ** 3,
          fn_=lambda x: x.pow_(3)),
    unary("isnan", np.isnan, domain="special", result=B, inplace=False),
    unary("isfinite", np.isfinite, domain="special", result=B, inplace=False),
    unary("logical_not", np.logical_not, result=B),
    # -- casts ----------------------------------------------------------------------------------------------
    op("to_float32", lambda x: aotjax.to(x, aotjax.float32), lambda x: x.astype(jnp.float32), fd=False, linear=L0,
       diff_dtype=by_mode(F64, F16), prim="convert_element_type"),  # from another float in either mode
    op("to_float64", lambda x: x.to(aotjax.float64), lambda x: x.astype(jnp.float64), ((3, 2),), fd=False,
       diff_dtype=F32, linear=L0, prim="convert_element_type", needs_x64=True),
    op("to_int", lambda x: aotjax.to(x, aotjax.int32), lambda x: x.astype(jnp.int32)),
    # -- elementwise binary, broadcasting ---------------------------------------------------------------------
    binary("add", np.add, jnp.add, shapes=((3, 1), (4,)), linear=_lin((0, 1), (0,)), prim="add"),
    binary("add_alpha", lambda x, y: x + 3 * y, lambda x, y: x + 3 * y, shapes=((3, 1), (1, 4)),
           fn=lambda x, y: aotjax.add(x, y, alpha=3), fn_=lambda x, y: x.add_(y, alpha=3)),
    binary("sub", np.subtract, jnp.subtract, shapes=((3, 1), (1, 4)), linear=L01, prim="sub"),
    binary("sub_alpha", lambda x, y: x - 2 * y, fn=lambda x, y: aotjax.sub(x, y, alpha=2),
           fn_=lambda x, y: x.sub_(y, alpha=2)),
    binary("mul", np.multiply, jnp.multiply, shapes=((2, 3, 4), (3, 1)), linear=L0_1, prim="mul"),
    op("mul_scalar", lambda x: x * 2.5, lambda x: x * 2.5, linear=L0, prim="mul"),
    binary("div", np.true_divide, jnp.divide, domain=("any", "nonzero"), result=FL, dtypes=(F32,), linear=L0,
           prim="div"),
    binary("div_trunc", _trunc_div, domain=("any", "nonzero"),
           fn=lambda x, y: aotjax.div(x, y, rounding_mode="trunc"), fn_=lambda x, y: x.div_(y, rounding_mode="trunc")),
    binary("div_floor", np.floor_divide, domain=("any", "nonzero"),
           fn=lambda x, y: aotjax.div(x, y, rounding_mode="floor"), fn_=lambda x, y: x.div_(y, rounding_mode="floor")),
    op("rdiv_scalar", lambda x: 2.0 / x, lambda x: 2.0 / x, grad_domain="nonzero"),
    binary("floor_divide", np.floor_divide, jnp.floor_divide, domain=("any", "nonzero"), grad_domain=("any", "pos")),
    binary("remainder", np.remainder, jnp.remainder, domain=("any", "nonzero"), grad_domain=("any", "pos")),
    binary("pow", np.power, jnp.power, domain=("pos", "small"), grad_domain=("pos", "any")),
    op("pow_scalar", lambda x: x ** 3.0, lambda x: x ** 3.0),
    op("rpow_scalar", lambda x: 2.0 ** x, lambda x: 2.0 ** x),
    binary("maximum", np.maximum, jnp.maximum, inplace=False),
    binary("minimum", np.minimum, jnp.minimum, inplace=False, shapes=((3, 1), (1, 4))),
    binary("atan2", np.arctan2, jnp.arctan2, result=FL, dtypes=(F32,), shapes=((3, 4), (3, 4)),
           grad_domain=("any", "nonzero")),
    binary("eq", np.equal, result=B),
    binary("ne", np.not_equal, result=B),
    binary("lt", np.less, result=B),
    binary("le", np.less_equal, result=B),
    binary("gt", np.greater, result=B),
    binary("ge", np.greater_equal, result=B),
    binary("logical_and", np.logical_and, result=B),
    binary("logical_or", np.logical_or, result=B),
    binary("bitwise_and", np.bitwise_and, dtypes=(INT, BOOL)),
    binary("bitwise_or", np.bitwise_or, dtypes=(INT, BOOL)),
    binary("bitwise_xor", np.bitwise_xor, dtypes=(INT, BOOL)),
    # -- where, clamp, lerp (forward: test_elementwise.py's own tests) ---------------------------------------
    op("where", lambda x, y: aotjax.where(T(MASK), x, y), lambda x, y: jnp.where(MASK, x, y), ((3, 4), (4,)),
       linear=L01, prim="where"),
    op("where_literal", lambda x: aotjax.where(T(MASK), x, 0.0), lambda x: jnp.where(MASK, x, 0.0), linear=L0,
       prim="where"),
    op("clamp", aotjax.clamp, jnp.clip, ((3, 4), (4,), (3, 1)), grad_domain=("any", "any", "pos")),
    op("clamp_scalar", lambda x: aotjax.clamp(x, -0.5, 0.5), lambda x: jnp.clip(x, -0.5, 0.5)),
    op("lerp", aotjax.lerp, _lerp, ((3, 4), (4,), (3, 4)), grad_domain=("any", "any", "unit")),
    op("lerp_scalar", lambda s, e: aotjax.lerp(s, e, 0.25), lambda s, e: _lerp(s, e, 0.25), ((3, 4), (3, 4))),
    # -- views -----------------------------------------------------------------------------------------------
    view("select", [(3, 4)], lambda x: x.select(-1, 2), lambda a: a[:, 2], lambda a: a[:, 2], write=lambda a: a[:, 2],
         linear=L0, prim="select"),
    view("select_getitem", [(3, 4)], lambda x: x[1], lambda a: a[1], lambda a: a[1]),
    view("narrow", [(3, 5)], lambda x: x.narrow(-1, -3, 2), lambda a: a[:, 2:4], lambda a: a[:, 2:4]),
    view("slice", [(3, 4)], lambda x: x[:, 1:3], lambda a: a[:, 1:3], lambda a: a[:, 1:3], linear=L0, prim="slice"),
    view("slice_rows", [(5, 3)], lambda x: x[1:4], lambda a: a[1:4], lambda a: a[1:4], write=lambda a: a[1:4]),
    view("slice_step", [(5, 2)], lambda x: x[1::2], lambda a: a[1::2], lambda a: a[1::2], linear=L0, prim="slice"),
    view("slice_strided", [(3, 7)], lambda x: x[:, 1::3], lambda a: a[:, 1::3], lambda a: a[:, 1::3],
         write=lambda a: a[:, 1::3]),
    view("diagonal", [(4, 3)], lambda x: x.diagonal(), np.diagonal, jnp.diagonal,
         write=lambda a: np.einsum("ii->i", a[:3])),
    view("diagonal_offset", [(3, 4)], lambda x: aotjax.diagonal(x, 1), lambda a: np.diagonal(a, 1),
         lambda a: jnp.diagonal(a, 1), linear=L0, prim="diagonal"),
    view("diagonal_below", [(3, 4)], lambda x: x.diagonal(-1), lambda a: np.diagonal(a, -1),
         lambda a: jnp.diagonal(a, -1), write=lambda a: np.einsum("ii->i", a[1:, :2])),
    view("diagonal_offset_dims", [(2, 4, 3)], lambda x: x.diagonal(1, -1, 1), lambda a: np.diagonal(a, 1, -1, 1),
         lambda a: jnp.diagonal(a, 1, -1, 1), linear=L0, prim="diagonal"),
    view("diagonal_3d", [(3, 2, 3)], lambda x: aotjax.diagonal(x, 0, -1, 0), lambda a: np.diagonal(a, 0, -1, 0),
         lambda a: jnp.diagonal(a, 0, -1, 0)),
    view("diagonal_empty", [(2, 3)], lambda x: x.diagonal(-5), lambda a: np.diagonal(a, -5)),
    view("permute", [(2, 3, 4)], lambda x: x.permute(-1, 0, 1), lambda a: a.transpose(2, 0, 1),
         lambda a: a.transpose(2, 0, 1), write=lambda a: a.transpose(2, 0, 1), linear=L0, prim="permute"),
    view("permute_tuple", [(2, 3, 4)], lambda x: x.permute((1, 2, 0)), lambda a: a.transpose(1, 2, 0),
         lambda a: a.transpose(1, 2, 0), write=lambda a: a.transpose(1, 2, 0)),
    view("transpose", [(2, 3, 4)], lambda x: x.transpose(0, -2), lambda a: a.swapaxes(0, 1),
         lambda a: a.swapaxes(0, 1)),
    view("transpose_neg", [(2, 3, 4)], lambda x: x.transpose(-1, -3), lambda a: a.swapaxes(-1, -3),
         lambda a: a.swapaxes(-1, -3)),
    view("t", [(2, 3)], lambda x: x.t(), lambda a: a.T, lambda a: a.T),
    view("t_1d", [(3,)], lambda x: x.t(), lambda a: a, lambda a: a),
    view("movedim", [(2, 3, 4)], lambda x: x.movedim((0, 1), (-1, 0)), lambda a: np.moveaxis(a, (0, 1), (-1, 0)),
         lambda a: jnp.moveaxis(a, (0, 1), (-1, 0))),
    view("view", [(2, 6)], lambda x: x.view(-1, 4), lambda a: a.reshape(-1, 4), lambda a: a.reshape(-1, 4),
         write=lambda a: a.reshape(-1, 4), linear=L0, prim="view"),
    view("view_tuple", [(2, 6)], lambda x: x.view((3, 2, 2)), lambda a: a.reshape(3, 2, 2),
         lambda a: a.reshape(3, 2, 2), linear=L0, prim="view"),
    view("view_3d", [(2, 3, 2)], lambda x: x.view(4, -1), lambda a: a.reshape(4, -1), lambda a: a.reshape(4, -1)),
    view("view_scalar", [()], lambda x: x.view(1, 1), lambda a: a.reshape(1, 1)),
    view("view_empty", [(0, 3)], lambda x: x.view(3, 0), lambda a: a.reshape(3, 0)),
    view("view_as", [(6,)], lambda x: x.view_as(aotjax.zeros(2, 3)), lambda a: a.reshape(2, 3),
         lambda a: a.reshape(2, 3)),
    view("reshape", [(2, 3)], lambda x: x.reshape(3, 2), lambda a: a.reshape(3, 2), lambda a: a.reshape(3, 2)),
    view("reshape_copy", [(2, 3)], lambda x: x.t().reshape(-1), lambda a: a.T.reshape(-1), lambda a: a.T.reshape(-1)),
    view("reshape_function", [(2, 3)], lambda x: aotjax.reshape(x, (6,)), lambda a: a.reshape(6)),
    view("reshape_as", [(2, 3)], lambda x: x.t().reshape_as(aotjax.zeros(6)), lambda a: a.T.reshape(6)),
    view("flatten", [(2, 3, 4)], lambda x: x.flatten(), lambda a: a.reshape(-1), lambda a: a.reshape(-1)),
    view("flatten_range", [(2, 3, 4, 5)], lambda x: x.flatten(1, -2), lambda a: a.reshape(2, 12, 5)),
    view("flatten_scalar", [()], lambda x: x.flatten(), lambda a: a.reshape(1)),
    view("contiguous", [(2, 3)], lambda x: x.t().contiguous(), lambda a: a.T),
    view("squeeze_all", [(1, 3, 1)], lambda x: x.squeeze(), lambda a: a.squeeze(), lambda a: a.squeeze(),
         write=lambda a: a.squeeze()),
    view("squeeze_dim", [(1, 3, 1)], lambda x: x.squeeze(-1), lambda a: a.squeeze(-1), lambda a: a.squeeze(-1),
         linear=L0, prim="squeeze"),
    view("squeeze_middle", [(3, 1, 4)], lambda x: x.squeeze(1), lambda a: a.squeeze(1), lambda a: a.squeeze(1),
         linear=L0, prim="squeeze"),
    view("squeeze_tuple", [(1, 3, 1)], lambda x: x.squeeze((0, 2)), lambda a: a.squeeze((0, 2))),
    view("squeeze_noop", [(2, 3)], lambda x: x.squeeze(0), lambda a: a),
    view("unsqueeze", [(2, 3)], lambda x: x.unsqueeze(-1), lambda a: a[..., None], lambda a: a[..., None],
         write=lambda a: a[..., None], linear=L0, prim="unsqueeze"),
    view("unsqueeze_middle", [(2, 3)], lambda x: x.unsqueeze(1), lambda a: a[:, None], write=lambda a: a[:, None]),
    view("unsqueeze_front", [(2, 3)], lambda x: x.unsqueeze(-3), lambda a: a[None]),
    view("expand", [(3, 1)], lambda x: x.expand(2, -1, 4), lambda a: np.broadcast_to(a, (2, 3, 4)),
         lambda a: jnp.broadcast_to(a, (2, 3, 4)), linear=L0, prim="expand"),
    view("expand_noop", [(2, 3)], lambda x: x.expand(1, 2, 3), lambda a: a[None], write=lambda a: a[None]),
    view("expand_as", [(3,)], lambda x: x.expand_as(aotjax.zeros(2, 3)), lambda a: np.broadcast_to(a, (2, 3))),
    view("broadcast_to", [(1, 3)], lambda x: aotjax.broadcast_to(x, (4, 3)), lambda a: np.broadcast_to(a, (4, 3))),
    view("unbind", [(3, 2)], lambda x: x.unbind(-1), lambda a: tuple(a[:, i] for i in range(2))),
    view("split", [(5, 2)], lambda x: x.split(2), lambda a: tuple(np.split(a, [2, 4]))),
    view("split_last", [(3, 4)], lambda x: x.split(1, dim=-1), lambda a: tuple(np.split(a, 4, axis=-1)),
         lambda a: tuple(jnp.split(a, 4, axis=-1))),
    view("split_sections", [(2, 6)], lambda x: x.split([1, 0, 5], -1), lambda a: tuple(np.split(a, [1, 1], 1))),
    view("chunk", [(7,)], lambda x: x.chunk(3), lambda a: (a[:3], a[3:6], a[6:])),
    view("chunk_fewer", [(4,)], lambda x: x.chunk(3), lambda a: (a[:2], a[2:])),
    view("detach", [(2, 3)], lambda x: x.detach(), lambda a: a, write=lambda a: a[...]),
    op("detach_mul", lambda x: x.detach() * x, lambda x: jax.lax.stop_gradient(x) * x, fd=False),
    view("alias", [(3, 4)], lambda x: x[...], lambda a: a[...], lambda a: a[...], linear=L0, prim="alias"),
    view("T", [(2, 3, 4)], lambda x: x.T, lambda a: a.T),
    view("mT", [(2, 3, 4)], lambda x: x.mT, lambda a: a.swapaxes(-1, -2)),
    view("swapaxes", [(2, 3, 4)], lambda x: aotjax.swapaxes(x, 0, 2), lambda a: a.swapaxes(0, 2)),
    view("view_chain", [(4, 6)], lambda x: x.t()[1::2].unsqueeze(0)[0, :, 1:3], lambda a: a.T[1::2][:, 1:3],
         lambda a: a.T[1::2][:, 1:3], write=lambda a: a.T[1::2][:, 1:3]),
    # -- writes into a view of a base (the functional form of a write through a view) ------------------------
    op("select_scatter", lambda b, y: select_scatter_p.bind(b, y, dim=1, index=2), lambda b, y: b.at[:, 2].set(y),
       ((3, 4), (3,)), linear=L01, prim="select_scatter"),
    op("slice_scatter", lambda b, y: slice_scatter_p.bind(b, y, dim=1, start=0, stop=4, step=2),
       lambda b, y: b.at[:, 0:4:2].set(y), ((3, 4), (3, 2)), linear=L01, prim="slice_scatter"),
    op("diagonal_scatter", lambda b, y: diagonal_scatter_p.bind(b, y, offset=0, dim1=0, dim2=1),
       lambda b, y: b.at[jnp.arange(3), jnp.arange(3)].set(y), ((3, 4), (3,)), linear=L01, prim="diagonal_scatter"),
    # -- indexing ----------------------------------------------------------------------------------------------
    op("index", lambda x: x[T(IDX)], lambda x: x[IDX], linear=L0, prim="index"),
    op("index_two_dims", lambda x: x[T([0, 1, 0]), :, T([3, 3, -4])],
       lambda x: x[np.array([0, 1, 0]), :, np.array([3, 3, -4])], ((3, 2, 4),), linear=L0, prim="index"),
    op("index_list", lambda x: x[:, [3, 0]], lambda x: x[:, jnp.array([3, 0])]),
    op("index_select", lambda x: x.index_select(-1, T(IDX)), lambda x: x[:, IDX]),
    op("index_put", lambda x, v: x.index_put((T(np.array([0, 2])),), v),
       lambda x, v: x.at[np.array([0, 2])].set(v), ((3, 4), (4,)), linear=L01, prim="index_put",
       inplace=lambda x, v: x.index_put_((T([0, 2]),), v)),
    op("index_put_rows", lambda x, v: x.index_put((T(np.array([2, 0])),), v),
       lambda x, v: x.at[np.array([2, 0])].set(v), ((4, 3), (2, 3)), linear=L01, prim="index_put",
       inplace=lambda x, v: x.index_put_((T([2, 0]),), v)),
    # NOTE: repeated indices: which write lands is unspecified, so no jax reference; the transpose is checked
    op("index_put_repeated", lambda x, v: x.index_put((T(np.array([1, 3, 1, 1])),), v), None, ((4, 3), (4, 3)),
       linear=L01, prim="index_put"),
    op("index_put_acc", lambda x, v: x.index_put((T(IDX),), v, accumulate=True), lambda x, v: x.at[IDX].add(v),
       ((3, 4), (3, 4)), linear=L01, prim="index_put",
       inplace=lambda x, v: x.index_put_((T(IDX),), v, accumulate=True)),
    op("index_put_acc_broadcast", lambda x, v: x.index_put((T(np.array([1, 3, 1])),), v, accumulate=True),
       lambda x, v: x.at[np.array([1, 3, 1])].add(v), ((4, 3), (3, 1)), linear=L01, prim="index_put",
       inplace=lambda x, v: x.index_put_((T([1, 3, 1]),), v, accumulate=True)),
    op("gather", lambda x: x.gather(1, T(GATHER_IDX)), lambda x: jnp.take_along_axis(x[:2], GATHER_IDX, 1),
       linear=L0, prim="gather"),
    op("scatter", lambda x, s: x.scatter(1, T(SCATTER_IDX), s),
       lambda x, s: x.at[np.arange(2)[:, None], SCATTER_IDX].set(s[:, :3]), ((2, 4), (2, 4)), linear=L01,
       prim="scatter", inplace=lambda x, s: x.scatter_(1, T(SCATTER_IDX), s)),
    op("scatter_repeated", lambda x, s: x.scatter(1, T(np.array([[0, 0], [3, 1]])), s), None, ((3, 4), (3, 3)),
       linear=L01, prim="scatter"),
    op("scatter_scalar_src", lambda x, s: x.scatter(0, T(np.array([[2, 0]])), s), None, ((3, 2), ()), linear=L01,
       prim="scatter", inplace=lambda x, s: x.scatter_(0, T([[2, 0]]), s)),
    op("scatter_add", lambda x, s: x.scatter_add(1, T(GATHER_IDX), s), _scatter_add_ref, ((2, 4), (2, 4)),
       linear=L01, prim="scatter_add", inplace=lambda x, s: x.scatter_add_(1, T(GATHER_IDX), s)),
    op("masked_fill", lambda x, v: x.masked_fill(T(MASK), v), lambda x, v: jnp.where(MASK, v, x), ((3, 4), ()),
       linear=L01, prim="masked_fill", inplace=lambda x, v: x.masked_fill_(T(MASK), v)),
    op("masked_fill_scalar", lambda x: x.masked_fill(T(MASK), 2.0), lambda x: jnp.where(MASK, 2.0, x), linear=L0,
       prim="masked_fill", inplace=lambda x: x.masked_fill_(T(MASK), 2.0)),
    op("index_add", lambda x, s: x.index_add(0, T(IDX), s, alpha=2), lambda x, s: x.at[IDX].add(2 * s),
       ((3, 4), (3, 4)), linear=L01, prim="index_add", inplace=lambda x, s: x.index_add_(0, T(IDX), s, alpha=2)),
    op("index_add_dim1", lambda x, s: x.index_add(1, T(np.array([3, 0, 3])), s, alpha=2.0),
       lambda x, s: x.at[:, np.array([3, 0, 3])].add(2.0 * s), ((2, 4), (2, 3)), linear=L01, prim="index_add",
       inplace=lambda x, s: x.index_add_(1, T([3, 0, 3]), s, alpha=2.0)),
    op("copy", lambda d, s: copy_p.bind(d, s), lambda d, s: jnp.broadcast_to(s, d.shape), ((3, 4), (4,)),
       linear=L01, prim="copy", inplace=lambda d, s: d.copy_(s)),
    op("fill", lambda x, v: fill_p.bind(x, v), lambda x, v: jnp.broadcast_to(v, x.shape), ((3, 4), ()), linear=L01,
       prim="fill", inplace=lambda x, v: x.fill_(v)),
    # -- linalg --------------------------------------------------------------------------------------------
    op("matmul", aotjax.matmul, jnp.matmul, ((2, 3), (3, 4)), linear=L0_1, prim="matmul"),
    op("matmul_batch_vec", aotjax.matmul, jnp.matmul, ((2, 1, 3, 4), (5, 4, 2)), linear=L0_1, prim="matmul"),
    op("matmul_vec", aotjax.matmul, jnp.matmul, ((2, 3, 4), (4,)), linear=L0_1, prim="matmul"),
    op("matmul_vec_mat", aotjax.matmul, jnp.matmul, ((3,), (2, 3, 4)), linear=L0_1, prim="matmul"),
    op("matmul_mat_vec", aotjax.matmul, jnp.matmul, ((2, 3), (3,)), linear=L1, prim="matmul"),
    op("matmul_dot", aotjax.matmul, jnp.matmul, ((3,), (3,)), linear=L0, prim="matmul"),
    op("matmul_3d_2d", aotjax.matmul, jnp.matmul, ((2, 4, 3), (3, 5)), linear=L0_1, prim="matmul"),
    op("matmul_4d_2d", aotjax.matmul, jnp.matmul, ((2, 3, 4, 3), (3, 5)), linear=L1, prim="matmul"),
    op("matmul_2d_4d", aotjax.matmul, jnp.matmul, ((4, 3), (2, 3, 3, 5)), linear=L0, prim="matmul"),
    op("matmul_size1_batch", aotjax.matmul, jnp.matmul, ((2, 3, 4, 3), (1, 1, 3, 5)), linear=L1, prim="matmul"),
    op("matmul_bcast_batch", aotjax.matmul, jnp.matmul, ((1, 3, 4, 3), (2, 1, 3, 5)), linear=L0_1, prim="matmul"),
    op("matmul_vec_batch", aotjax.matmul, jnp.matmul, ((3,), (1, 2, 3, 4)), linear=L0, prim="matmul"),
    op("einsum", lambda a, b: aotjax.einsum("ij,kj->ik", a, b), lambda a, b: jnp.einsum("ij,kj->ik", a, b),
       ((2, 3), (4, 3)), linear=L0_1, prim="einsum"),
    op("einsum_mm", lambda a, b: aotjax.einsum("ij,jk->ik", a, b), lambda a, b: jnp.einsum("ij,jk->ik", a, b),
       ((2, 3), (3, 4)), linear=L1, prim="einsum"),
    op("einsum_diag", lambda a: aotjax.einsum("ii->i", a), lambda a: jnp.einsum("ii->i", a), ((3, 3),), linear=L0,
       prim="einsum"),
    op("einsum_trace_outer", lambda a, b: aotjax.einsum("ii,j->j", a, b), lambda a, b: jnp.einsum("ii,j->j", a, b),
       ((3, 3), (2,)), linear=L0, prim="einsum"),
    op("einsum_sum_only_here", lambda a, b: aotjax.einsum("ij,k->i", a, b), lambda a, b: jnp.einsum("ij,k->i", a, b),
       ((2, 3), (4,)), linear=L1, prim="einsum"),
    op("einsum_implicit", lambda a, b: aotjax.einsum("ij,jk", a, b), lambda a, b: jnp.einsum("ij,jk", a, b),
       ((2, 3), (3, 4)), linear=L0, prim="einsum"),
    op("einsum_ellipsis", lambda a, b: aotjax.einsum("...ij,...jk->...ik", a, b),
       lambda a, b: jnp.einsum("...ij,...jk->...ik", a, b), ((1, 2, 3), (4, 3, 2)), linear=L0_1, prim="einsum"),
    op("einsum_3", lambda a, b, c: aotjax.einsum("i,ij,j->", a, b, c), lambda a, b, c: jnp.einsum("i,ij,j->", a, b, c),
       ((3,), (3, 4), (4,))),
    op("linear", aotjax.linear, lambda x, w, b: x @ w.T + b, ((2, 3), (4, 3), (4,))),
    # -- reductions ------------------------------------------------------------------------------------------
    op("sum", lambda x: x.sum(), jnp.sum, linear=L0, prim="reduce_sum"),
    op("sum_dim", lambda x: x.sum(1), lambda x: x.sum(1), ((2, 3, 4),), linear=L0, prim="reduce_sum"),
    op("sum_dim_keepdim", lambda x: x.sum(-1, keepdim=True), lambda x: x.sum(-1, keepdims=True), linear=L0,
       prim="reduce_sum"),
    op("sum_dims_keepdim", lambda x: x.sum((0, 2), keepdim=True), lambda x: x.sum((0, 2), keepdims=True),
       ((2, 3, 4),), linear=L0, prim="reduce_sum"),
    op("mean", lambda x: x.mean((0, 2)), lambda x: x.mean((0, 2)), ((2, 3, 4),)),
    op("var", lambda x: x.var(1), lambda x: x.var(1, ddof=1)),
    op("std", lambda x: x.std(), lambda x: x.std(ddof=1)),
    op("prod", lambda x: x.prod(1), lambda x: x.prod(1), ((3, 5),)),
    op("prod_all", lambda x: x.prod(), jnp.prod, ((3, 3),), grad_domain="unit"),
    op("prod_zeros", lambda x: x.prod(-1, keepdim=True), lambda x: x.prod(-1, keepdims=True),
       inputs=_inputs_with_zeros),
    op("amax", lambda x: x.amax(-1), lambda x: x.max(-1)),
    op("amin_keepdim", lambda x: x.amin(0, keepdim=True), lambda x: x.min(0, keepdims=True)),
    op("max_all", lambda x: aotjax.max(x), jnp.max),
    op("max_dim", lambda x: aotjax.max(x, 1), lambda x: (x.max(1), x.argmax(1))),
    op("amax_ties", lambda x: x.amax(-1), lambda x: x.max(-1), fd=False, inputs=_inputs_with_ties),
    op("amin_ties", lambda x: x.amin(), jnp.min, fd=False, inputs=_inputs_with_ties),
    op("logsumexp", lambda x: aotjax.logsumexp(x, -1), lambda x: jax.nn.logsumexp(x, -1)),
    op("cumsum", lambda x: x.cumsum(-1), lambda x: jnp.cumsum(x, -1), linear=L0, prim="cumsum"),
    # -- shape ops with new values ---------------------------------------------------------------------------
    op("clone", lambda x: x.t().clone(), lambda x: x.T, linear=L0, prim="clone"),
    op("cat", lambda x, y: aotjax.cat([x, y], -1), lambda x, y: jnp.concatenate([x, y], -1), ((3, 2), (3, 4)),
       linear=L01, prim="cat"),
    op("cat_three", lambda x, y, z: aotjax.cat([x, y, z], dim=1), lambda x, y, z: jnp.concatenate([x, y, z], 1),
       ((2, 1), (2, 3), (2, 2)), linear=_lin((0, 2)), prim="cat"),
    op("stack", lambda x, y: aotjax.stack([x, y], 1), lambda x, y: jnp.stack([x, y], 1), ((3, 4), (3, 4))),
    op("flip", lambda x: x.flip(-1, 0), lambda x: jnp.flip(x, (-1, 0)), linear=L0, prim="flip"),
    op("roll", lambda x: x.roll(1, -1), lambda x: jnp.roll(x, 1, -1), linear=L0, prim="roll"),
    op("roll_dims", lambda x: x.roll((1, -2), (0, 1)), lambda x: jnp.roll(x, (1, -2), (0, 1)), linear=L0,
       prim="roll"),
    op("roll_flat", lambda x: x.roll(2), lambda x: jnp.roll(x, 2), linear=L0, prim="roll"),
    op("repeat", lambda x: x.repeat(2, 1, 2), lambda x: jnp.tile(x, (2, 1, 2)), linear=L0, prim="repeat"),
    op("tril", lambda x: x.tril(), jnp.tril, linear=L0, prim="tril"),
    op("tril_3d", lambda x: x.tril(1), lambda x: jnp.tril(x, 1), ((2, 3, 4),), linear=L0, prim="tril"),
    op("triu", lambda x: x.triu(1), lambda x: jnp.triu(x, 1), ((2, 3, 4),), linear=L0, prim="triu"),
    op("triu_below", lambda x: x.triu(-1), lambda x: jnp.triu(x, -1), ((3, 3),), linear=L0, prim="triu"),
    # -- compositions ----------------------------------------------------------------------------------------
    op("softmax", lambda x: aotjax.softmax(x, -1), lambda x: jax.nn.softmax(x, -1)),
    op("log_softmax", lambda x: aotjax.log_softmax(x, 0), lambda x: jax.nn.log_softmax(x, 0)),
    # -- rematerialization markers (identities) ----------------------------------------------------------------
    op("checkpoint_name", lambda x: aotjax.checkpoint_name(x, "h"), lambda x: x, linear=L0, prim="checkpoint_name"),
    op("sharding_constraint", lambda x: aotjax.lax.with_sharding_constraint(x, _ONE_DEVICE), lambda x: x, linear=L0,
       prim="sharding_constraint"),
    op("optimization_barrier", lambda x, y: optimization_barrier_p.bind(x, y)[0] * 2.0 + y, lambda x, y: x * 2.0 + y,
       ((2, 3), (3,)), linear=L01, prim="optimization_barrier"),
    # -- calls ------------------------------------------------------------------------------------------------
    op("compiled_call", lambda x, y: compiled_call_p.bind(x, y, program=_affine_program())[0], _affine,
       ((2, 3), (3,)), linear=L01, prim="compiled_call"),
]


def records(*, family: Family | None = None, differentiated: bool = False, linear: bool = False,
            inplace: bool = False, write: bool = False) -> list[OpRecord]:
    """The records a test reads: of `family`, with a `jax` reference, declared linear, with an in-place form,
    with a view write check."""
    return [r for r in RECORDS if (family is None or r.family is family) and (not differentiated or r.jax)
            and (not linear or r.linear) and (not inplace or r.inplace) and (not write or r.write)]
from tests.op_records_linalg import RECORDS as _LINALG; RECORDS += _LINALG  # noqa: E402,E702,I001
from tests.op_records_conv import RECORDS as _CONV; RECORDS += _CONV  # noqa: E402, E702, I001
from tests.op_records_pointwise import RECORDS as _POINTWISE; RECORDS += _POINTWISE  # noqa: E402, E702, I001
from tests.op_records_shape import RECORDS as _SHAPE; RECORDS += _SHAPE  # noqa: E402, E702, I001
from tests.op_records_extra import RECORDS as _EXTRA; RECORDS += _EXTRA  # noqa: E402, E702, I001
from tests.op_records_fft import RECORDS as _FFT; RECORDS += _FFT  # noqa: E402, E702, I001
