"""Differential test against PyTorch, the semantics aotjax copies.

- The layout rules themselves (`aotjax.ops.base.layout`) against PyTorch's on random strided operands.
- Every op of the op table (tests/op_records.py), run eagerly by aotjax and by PyTorch on the same inputs:
  contiguous, transposed, permuted and sliced (non-dense) operands, 0-d and broadcasting ones. Both must
  agree on values (to a tolerance), dtype (mapped to jax's active mode: int64 is int32 without x64), shape
  and `stride()`.
- Programs whose later view-or-copy decisions (`reshape`, `flatten`, `contiguous`, `view`) depend on the
  layout of an elementwise result, run by PyTorch, by aotjax eagerly and under functionalize and jit; and
  the strides the user's function sees under make_jaxpr, grad and jvp.

The PyTorch reference of a record is `TORCH[name]`, else `torch.<name>` when the record calls
`aotjax.<name>`, else the record's own `fn` (written with Tensor methods and operators PyTorch shares).
"""
from __future__ import annotations

import functools
import itertools
import random
import warnings

import numpy as np
import pytest

import aotjax
from aotjax.core.avals import canonicalize_dtype
from aotjax.core.errors import AliasingError, AotjaxError, DTypeTruncationWarning
from aotjax.ops.base.layout import infer_dense_strides, is_non_overlapping_and_dense, tensor_iterator_strides
from tests.helpers import check_boundary_agrees
from tests.op_records import (
    BOOL,
    F32,
    GATHER_IDX,
    I64,
    IDX,
    MASK,
    RECORDS,
    SCATTER_IDX,
    Family,
    OpRecord,
    flat,
    sample,
)
from tests.op_records_conv import RECORDS as _CONV_RECORDS
from tests.op_records_extra import RECORDS as _EXTRA_RECORDS
from tests.op_records_fft import RECORDS as _FFT_RECORDS
from tests.op_records_linalg import RECORDS as _LINALG_RECORDS
from tests.op_records_pointwise import RECORDS as _POINTWISE_RECORDS
from tests.op_records_shape import RECORDS as _SHAPE_RECORDS

torch = pytest.importorskip("torch")
F = torch.nn.functional
T = aotjax.tensor


def tt(a) -> "torch.Tensor":
    return torch.from_numpy(np.array(a))


def _lib(x):
    """The library of tensor `x`: programs written once run on PyTorch and aotjax tensors."""
    return torch if isinstance(x, torch.Tensor) else aotjax


# -- the layout rules on their own ---------------------------------------------------------------------
def _random_strided(rng: random.Random, shape: tuple, buffer: "torch.Tensor") -> "torch.Tensor":
    """A tensor of `shape`: contiguous, a permuted dense one, channels-last, or arbitrary strides (0 included)."""
    kind = rng.random()
    if kind < 0.15:
        return torch.zeros(shape)
    if kind < 0.5:
        perm = list(range(len(shape)))
        rng.shuffle(perm)
        return torch.zeros([shape[p] for p in perm]).permute([perm.index(d) for d in range(len(shape))])
    if kind < 0.6 and len(shape) == 4:
        return torch.zeros(shape).to(memory_format=torch.channels_last)
    return torch.as_strided(buffer, shape, [rng.choice([0, 1, 2, 3, 4, 6, 12, 24]) for _ in shape])


def _random_shape(rng: random.Random, ndim: int) -> tuple:
    return tuple(rng.choice([0, 1, 2, 3]) if rng.random() < 0.1 else rng.choice([1, 2, 3, 4]) for _ in range(ndim))


def _operand_shape(rng: random.Random, out: tuple) -> tuple:
    """`out`, or a shape that broadcasts to it (fewer dims, size-1 dims), or 0-d."""
    r = rng.random()
    if r < 0.15:
        return ()
    if r < 0.4:
        k = rng.randint(0, len(out))
        return tuple(1 if rng.random() < 0.3 else d for d in out[len(out) - k:])
    return out


def _shape_and_strides(t) -> tuple[tuple, tuple]:
    return tuple(t.shape), tuple(t.stride())


def test_tensor_iterator_rule_matches_pytorch_on_random_strides():
    rng, buffer = random.Random(0), torch.zeros(4096)
    ops = {1: torch.neg, 2: torch.add, 3: torch.addcmul}
    checked = 0
    for _ in range(3000):
        out = _random_shape(rng, rng.randint(0, 4))
        operands = [_random_strided(rng, _operand_shape(rng, out), buffer) for _ in range(rng.randint(1, 3))]
        try:
            result = ops[len(operands)](*operands)
        except RuntimeError:  # shapes that do not broadcast
            continue
        shapes, strides = zip(*map(_shape_and_strides, operands)) if operands else ((), ())
        got = tensor_iterator_strides(list(shapes), list(strides), tuple(result.shape))
        assert got == tuple(result.stride()), f"operands {list(zip(shapes, strides))}"
        checked += 1
    assert checked > 2000


def test_preserve_format_rule_matches_pytorch_on_random_strides():
    rng, buffer = random.Random(1), torch.zeros(4096)
    for _ in range(1500):
        t = _random_strided(rng, _random_shape(rng, rng.randint(0, 4)), buffer)
        shape, strides = _shape_and_strides(t)
        expected = strides if is_non_overlapping_and_dense(shape, strides) else infer_dense_strides(shape, strides)
        for made in (t.clone(), t.double(), torch.empty_like(t), torch.zeros_like(t)):
            assert tuple(made.stride()) == expected, f"shape {shape}, strides {strides}"


# -- the op table ----------------------------------------------------------------------------------------
def _x(a):
    return torch.from_numpy(np.array(a))


TORCH = {
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": F.silu,
    "round_decimals": lambda x: torch.round(x, decimals=2),
    "to_float32": lambda x: x.to(torch.float32),
    "to_float64": lambda x: x.to(torch.float64),
    "to_int": lambda x: x.to(torch.int32),
    "add_alpha": lambda x, y: torch.add(x, y, alpha=3),
    "sub_alpha": lambda x, y: torch.sub(x, y, alpha=2),
    "div_trunc": lambda x, y: torch.div(x, y, rounding_mode="trunc"),
    "div_floor": lambda x, y: torch.div(x, y, rounding_mode="floor"),
    "where": lambda x, y: torch.where(_x(MASK), x, y),
    "where_literal": lambda x: torch.where(_x(MASK), x, 0.0),
    "clamp_scalar": lambda x: torch.clamp(x, -0.5, 0.5),
    "lerp_scalar": lambda s, e: torch.lerp(s, e, 0.25),
    "diagonal_offset": lambda x: torch.diagonal(x, 1),
    "diagonal_3d": lambda x: torch.diagonal(x, 0, -1, 0),
    "view_as": lambda x: x.view_as(torch.zeros(2, 3)),
    "reshape_function": lambda x: torch.reshape(x, (6,)),
    "reshape_as": lambda x: x.t().reshape_as(torch.zeros(6)),
    "expand_as": lambda x: x.expand_as(torch.zeros(2, 3)),
    "broadcast_to": lambda x: torch.broadcast_to(x, (4, 3)),
    "T": lambda x: x.permute(2, 1, 0),  # NOTE: PyTorch deprecates `.T` on 3-d tensors; it reverses the dims
    "swapaxes": lambda x: torch.swapaxes(x, 0, 2),
    "index": lambda x: x[_x(IDX)],
    "index_two_dims": lambda x: x[_x([0, 1, 0]), :, _x([3, 3, -4])],
    "index_select": lambda x: x.index_select(-1, _x(IDX)),
    "index_put": lambda x, v: x.index_put((_x([0, 2]),), v),
    "index_put_rows": lambda x, v: x.index_put((_x([2, 0]),), v),
    "index_put_repeated": lambda x, v: x.index_put((_x([1, 3, 1, 1]),), v),
    "index_put_acc": lambda x, v: x.index_put((_x(IDX),), v, accumulate=True),
    "index_put_acc_broadcast": lambda x, v: x.index_put((_x([1, 3, 1]),), v, accumulate=True),
    "gather": lambda x: x.gather(1, _x(GATHER_IDX)),
    "scatter": lambda x, s: x.scatter(1, _x(SCATTER_IDX), s),
    "scatter_repeated": lambda x, s: x.scatter(1, _x([[0, 0], [3, 1]]), s),
    "scatter_scalar_src": lambda x, s: x.scatter(0, _x([[2, 0]]), s.item()),
    "scatter_add": lambda x, s: x.scatter_add(1, _x(GATHER_IDX), s),
    "masked_fill": lambda x, v: x.masked_fill(_x(MASK), v),
    "masked_fill_scalar": lambda x: x.masked_fill(_x(MASK), 2.0),
    "index_add": lambda x, s: x.index_add(0, _x(IDX), s, alpha=2),
    "index_add_dim1": lambda x, s: x.index_add(1, _x([3, 0, 3]), s, alpha=2.0),
    "einsum": lambda a, b: torch.einsum("ij,kj->ik", a, b),
    "einsum_mm": lambda a, b: torch.einsum("ij,jk->ik", a, b),
    "einsum_diag": lambda a: torch.einsum("ii->i", a),
    "einsum_trace_outer": lambda a, b: torch.einsum("ii,j->j", a, b),
    "einsum_sum_only_here": lambda a, b: torch.einsum("ij,k->i", a, b),
    "einsum_implicit": lambda a, b: torch.einsum("ij,jk", a, b),
    "einsum_ellipsis": lambda a, b: torch.einsum("...ij,...jk->...ik", a, b),
    "einsum_3": lambda a, b, c: torch.einsum("i,ij,j->", a, b, c),
    "linear": F.linear,
    "max_all": torch.max,
    "max_dim": lambda x: tuple(torch.max(x, 1)),
    "logsumexp": lambda x: torch.logsumexp(x, -1),
    "cat": lambda x, y: torch.cat([x, y], -1),
    "cat_three": lambda x, y, z: torch.cat([x, y, z], dim=1),
    "stack": lambda x, y: torch.stack([x, y], 1),
    "softmax": lambda x: torch.softmax(x, -1),
    "log_softmax": lambda x: torch.log_softmax(x, 0),
}
# Primitives of aotjax's own, no public op: the functional forms of in-place writes (`copy`, `fill`, and
# the `*_scatter` inverses of views, which PyTorch has only inside its functionalization, where they clone
# the whole storage), the identities that mark values for rematerialization, and compiled calls. PyTorch's
# composition of the same math gives the values; there is no public PyTorch layout to match.
NO_PYTORCH_OP = {
    "select_scatter": lambda b, y: torch.select_scatter(b, y, 1, 2),
    "slice_scatter": lambda b, y: torch.slice_scatter(b, y, 1, 0, 4, 2),
    "diagonal_scatter": lambda b, y: torch.diagonal_scatter(b, y, 0, 0, 1),
    "copy": lambda d, s: s.expand(d.shape).clone(),
    "fill": lambda x, v: v.expand(x.shape).clone(),
    "checkpoint_name": lambda x: x,
    "sharding_constraint": lambda x: x,
    "optimization_barrier": lambda x, y: x * 2.0 + y,
    "compiled_call": lambda x, y: x * 2.0 + y.sum(),
}
# Which write lands at a repeated index is unspecified (in PyTorch and in XLA): compared on all but values.
UNSPECIFIED_VALUES = {"index_put_repeated", "scatter_repeated"}
# PyTorch's einsum returns what its contraction plan leaves: for "ii->i" a view of the operand (a write through
# it changes the operand; aotjax's einsum returns a new tensor), for batched equations a permuted product.
# aotjax's einsum result is contiguous; its values, dtype and shape are compared.
EINSUM_LAYOUT_NOT_MATCHED = {"einsum_diag", "einsum_ellipsis"}
# PyTorch refuses integer inputs to these (aotjax promotes them to float, or rounds them as the identity).
FLOAT_ONLY_IN_PYTORCH = {"gelu", "gelu_tanh", "silu", "round_decimals"}


def torch_reference(r: OpRecord):
    if r.name in TORCH:
        return TORCH[r.name]
    if r.name in NO_PYTORCH_OP:
        return NO_PYTORCH_OP[r.name]
    name = getattr(r.fn, "__name__", "")
    if getattr(aotjax, name, None) is r.fn:  # `aotjax.<name>` itself: `torch.<name>`
        return getattr(torch, name)
    return r.fn


def laid_out(a: np.ndarray, layout: str):
    """The aotjax and the PyTorch tensor holding `a`, both laid out as `layout` over a base of their own."""
    if layout == "transposed" and a.ndim >= 2:
        base = np.ascontiguousarray(np.swapaxes(a, -1, -2))
        return T(base).transpose(-1, -2), tt(base).transpose(-1, -2)
    if layout == "permuted" and a.ndim >= 2:
        perm = tuple(range(1, a.ndim)) + (0,)  # dim 0 innermost
        inverse = tuple(int(i) for i in np.argsort(perm))
        base = np.ascontiguousarray(a.transpose(perm))
        return T(base).permute(inverse), tt(base).permute(inverse)
    if layout == "sliced" and a.ndim >= 1:
        base = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)
        base[..., ::2] = a
        return T(base)[..., ::2], tt(base)[..., ::2]
    return T(a), tt(a)


def record_inputs(r: OpRecord, dtype) -> list[np.ndarray]:
    """`r`'s inputs, of `dtype` as aotjax holds it in jax's active mode (so PyTorch gets the same)."""
    dtype = canonicalize_dtype(np.dtype(dtype))
    if r.inputs is not None:
        return [a.astype(dtype) for a in r.inputs()]
    return [sample(r.domain_of(i), s, dtype, seed=i) for i, s in enumerate(r.shapes)]


def expected_dtype(t) -> np.dtype:
    """PyTorch's dtype of `t` as aotjax has it in jax's active mode (no x64: int64 -> int32, float64 -> float32)."""
    return canonicalize_dtype(np.dtype(str(t.dtype).removeprefix("torch.")))


def assert_matches_torch(got, expected, *, tol: float, values: bool = True, strides: bool = True, what: str = ""):
    got, expected = flat(got), flat(expected)
    assert len(got) == len(expected), f"{what}: {len(got)} results, PyTorch {len(expected)}"
    for k, (g, e) in enumerate(zip(got, expected)):
        where = f"{what}, result {k}"
        assert isinstance(e, torch.Tensor), f"{where}: the PyTorch reference gave a {type(e)}; add it to TORCH"
        assert tuple(g.shape) == tuple(e.shape), f"{where}: shape {tuple(g.shape)}, PyTorch {tuple(e.shape)}"
        assert g.dtype == expected_dtype(e), f"{where}: dtype {g.dtype}, PyTorch {e.dtype}"
        if values:
            np.testing.assert_allclose(np.asarray(g.numpy(), np.float64), e.double().numpy(), rtol=tol, atol=tol,
                                       equal_nan=True, err_msg=where)
        if strides:
            assert g.stride() == tuple(e.stride()), f"{where}: stride {g.stride()}, PyTorch {tuple(e.stride())}"


def _elementwise(r: OpRecord) -> bool:
    return r.family in (Family.UNARY, Family.BINARY)


def _effective(layout: str, shape: tuple) -> str:
    """What `laid_out` makes of `layout` for an operand of `shape`."""
    ndim = len(shape)
    if layout == "permuted" and ndim == 2:
        return "transposed"
    if (layout in ("transposed", "permuted") and ndim < 2) or (layout == "sliced" and ndim < 1):
        return "contiguous"
    return layout


def _cases(r: OpRecord) -> list[tuple]:
    """(dtype, layout of each operand) for record `r`: every operand laid out one way, then (for several
    operands) the first one transposed and the others not, and the other way round; each distinct once."""
    dtypes = r.dtypes if _elementwise(r) else (r.diff_dtype,)
    if r.name in FLOAT_ONLY_IN_PYTORCH:
        dtypes = tuple(dt for dt in dtypes if np.issubdtype(dt, np.floating))
    n = r.arity
    layouts = [(lay,) * n for lay in ("contiguous", "transposed", "permuted", "sliced")]
    if n > 1:
        layouts += [("transposed",) + ("contiguous",) * (n - 1), ("contiguous",) + ("transposed",) * (n - 1)]
    distinct = {tuple(_effective(lay, s) for lay, s in zip(lays, r.shapes)): None for lays in layouts}
    return [(dt, lay) for dt in dtypes for lay in distinct]


# NOTE: the family tables appended to RECORDS have differential tests of their own against torch, with torch's
# calls written out (tests/ops/test_{conv,linalg,elementwise,shape,complex,fft,extra}_vs_torch.py)
_OWN_TESTS = {id(r) for r in _CONV_RECORDS + _LINALG_RECORDS + _POINTWISE_RECORDS + _SHAPE_RECORDS + _FFT_RECORDS
               + _EXTRA_RECORDS}
CASES = [(r, dt, lay) for r in RECORDS if id(r) not in _OWN_TESTS for dt, lay in _cases(r)]


@pytest.mark.parametrize("r, dtype, layouts", CASES,
                         ids=[f"{r.name}-{np.dtype(dt).name}-{'/'.join(lay)}" for r, dt, lay in CASES])
def test_op_matches_pytorch(r, dtype, layouts):
    pairs = [laid_out(a, lay) for a, lay in zip(record_inputs(r, dtype), layouts)]
    ours = [p[0] for p in pairs]
    try:
        expected = torch_reference(r)(*[p[1] for p in pairs])
    except RuntimeError as e:  # `view` of a layout that does not allow it, ...: aotjax must refuse it too
        assert "view" in str(e), f"{r.name}: PyTorch raised {e!r}"
        with pytest.raises(AotjaxError):
            r.fn(*ours)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DTypeTruncationWarning)  # NOTE: 64-bit dtypes without jax's x64 mode
        got = r.fn(*ours)
    assert_matches_torch(got, expected, tol=max(r.tol, 1e-5), values=r.name not in UNSPECIFIED_VALUES,
                         strides=r.name not in NO_PYTORCH_OP and r.name not in EINSUM_LAYOUT_NOT_MATCHED, what=r.name)


BINARY = [r for r in RECORDS if r.family is Family.BINARY]


@pytest.mark.parametrize("r", BINARY, ids=[r.name for r in BINARY])
@pytest.mark.parametrize("zero_d", [0, 1])
def test_binary_op_with_a_0d_operand_matches_pytorch(r, zero_d):
    """A 0-d operand never decides the layout: the other, transposed one does."""
    dtype = r.dtypes[0]
    shapes = [(3, 4), (3, 4)]
    shapes[zero_d] = ()
    arrays = [sample(r.domain_of(i), s, dtype, seed=i) for i, s in enumerate(shapes)]
    pairs = [laid_out(a, "transposed") for a in arrays]
    got = r.fn(*[p[0] for p in pairs])
    assert_matches_torch(got, torch_reference(r)(*[p[1] for p in pairs]), tol=max(r.tol, 1e-5), what=r.name)


# Python scalars: PyTorch takes them as 0-d operands (`x * 2`), or as the number of a unary op (`x ** 2.5`,
# `clamp(x, 0, 1)`), or gives a contiguous result (`2 ** x`).
SCALAR_PROGRAMS = {
    "mul": lambda x: x * 2,
    "radd": lambda x: 1.5 + x,
    "rsub": lambda x: 2 - x,
    "truediv": lambda x: x / 2,
    "rtruediv": lambda x: 2.0 / x,
    "floordiv": lambda x: x // 2,
    "mod": lambda x: x % 2,
    "pow_float": lambda x: x ** 2.5,
    "pow_int": lambda x: x ** 2,
    "rpow": lambda x: 2 ** x,
    "gt": lambda x: x > 0,
    "eq": lambda x: x == 1,
    "neg": lambda x: -x,
    "abs": lambda x: abs(x),
    "clamp": lambda x: x.clamp(-1.0, 1.0),
    "clamp_min": lambda x: x.clamp(min=0.0),
    "lerp": lambda x: x.lerp(x * 2, 0.5),
    "where_scalar": lambda x: _lib(x).where(x > 1, x, 0.0),
    "add_alpha": lambda x: x.add(1, alpha=2),
    "sub_alpha": lambda x: x.sub(x, alpha=2),
    "float": lambda x: (x > 0).float(),
    "int_mul_float": lambda x: (x > 0).int() * 2.5,
    "int_true_divide": lambda x: (x > 0).long() / 2,
}


@pytest.mark.parametrize("layout", ["transposed", "permuted", "sliced"])
@pytest.mark.parametrize("name", list(SCALAR_PROGRAMS))
def test_op_with_python_scalars_matches_pytorch(name, layout):
    a = sample("pos", (2, 3, 4), F32)
    x, xt = laid_out(a, layout)
    fn = SCALAR_PROGRAMS[name]
    assert_matches_torch(fn(x), fn(xt), tol=1e-5, what=name)


# -- creation, casts, nn composites ----------------------------------------------------------------------
LIKE_PROGRAMS = {
    "zeros_like": (aotjax.zeros_like, torch.zeros_like),
    "ones_like": (aotjax.ones_like, torch.ones_like),
    "empty_like": (lambda x: aotjax.empty_like(x).zero_(), lambda x: torch.empty_like(x).zero_()),
    "full_like": (lambda x: aotjax.full_like(x, 7.0), lambda x: torch.full_like(x, 7.0)),
    "zeros_like_dtype": (lambda x: aotjax.zeros_like(x, dtype=aotjax.int32),
                         lambda x: torch.zeros_like(x, dtype=torch.int32)),
    "clone": (lambda x: x.clone(), lambda x: x.clone()),
    "clone_contiguous": (lambda x: x.clone(memory_format="contiguous"),
                         lambda x: x.clone(memory_format=torch.contiguous_format)),
    "contiguous": (lambda x: x.contiguous(), lambda x: x.contiguous()),
    "double": (lambda x: x.double(), lambda x: x.double()),
    "half": (lambda x: x.half(), lambda x: x.half()),
    "to_int": (lambda x: x.to(aotjax.int32), lambda x: x.to(torch.int32)),
    "bool": (lambda x: x.bool(), lambda x: x.bool()),
    "softmax": (lambda x: aotjax.softmax(x, 1), lambda x: torch.softmax(x, 1)),
    "log_softmax": (lambda x: aotjax.log_softmax(x, -1), lambda x: torch.log_softmax(x, -1)),
    "gelu": (aotjax.gelu, F.gelu),
    "silu": (aotjax.silu, F.silu),
    "relu": (aotjax.relu, F.relu),
    "sigmoid": (aotjax.sigmoid, torch.sigmoid),
    "dropout_eval": (lambda x: aotjax.dropout(x * 1, 0.5, training=False),
                     lambda x: F.dropout(x * 1, 0.5, training=False)),
    "layer_norm": (lambda x: aotjax.layer_norm(x, 4), lambda x: F.layer_norm(x, (4,))),
    "rms_norm": (lambda x: aotjax.rms_norm(x, [4]), lambda x: F.rms_norm(x, [4])),
    "sum_keepdim": (lambda x: x.sum(1, keepdim=True), lambda x: x.sum(1, keepdim=True)),
    "amax_keepdim": (lambda x: x.amax(0, keepdim=True), lambda x: x.amax(0, keepdim=True)),
    "mean": (lambda x: x.mean(-1), lambda x: x.mean(-1)),
    "cumsum": (lambda x: x.cumsum(1), lambda x: x.cumsum(1)),
    "matmul": (lambda x: x @ x.transpose(-1, -2), lambda x: x @ x.transpose(-1, -2)),
    "cat": (lambda x: aotjax.cat([x, x], 1), lambda x: torch.cat([x, x], 1)),
    "flip": (lambda x: x.flip(0), lambda x: x.flip(0)),
    "tril": (lambda x: x.tril(), lambda x: x.tril()),
}


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "permuted", "sliced"])
@pytest.mark.parametrize("name", list(LIKE_PROGRAMS))
def test_layout_propagating_op_matches_pytorch(name, layout):
    a = sample("pos", (2, 3, 4), F32)
    x, xt = laid_out(a, layout)
    ours, theirs = LIKE_PROGRAMS[name]
    assert_matches_torch(ours(x), theirs(xt), tol=1e-3, what=name)


def test_dropout_keeps_the_layout_of_its_input():
    x, xt = laid_out(sample("pos", (3, 4), F32), "transposed")
    y = aotjax.dropout(x, 0.5, key=aotjax.random.key(0))
    assert y.stride() == tuple(F.dropout(xt, 0.5).stride()) == (1, 3)


# -- view-or-copy decisions downstream of elementwise results ----------------------------------------------
def reshape_of_transposed_product(x):
    y = x.t() * 2
    z = y.reshape(-1)  # a copy: y is transposed
    z.add_(100)
    return y


def view_of_transposed_product(x):
    y = x.t() * 2
    return y.t().view(-1)  # a view: y.t() is contiguous


def flatten_of_sum(x):
    y = (x.t() + x.t()).t()
    return y, y.flatten()  # a view of y


def contiguous_of_cast(x):
    y = x.t().double()
    return y, y.contiguous()  # a copy


def view_of_zeros_like(x):
    y = _lib(x).zeros_like(x.t())
    y.t().view(-1)[1] = 5.0  # writes y
    return y


def view_of_comparison(x):
    m = x.t() > 2
    m.t().reshape(-1)[0] = True  # a view: writes m
    return m.float()


def reshape_of_broadcast_sum(x):
    y = x.t() + x[:, 0]  # [3, 2] + [2]: transposed
    return y, y.t().reshape(-1), y.reshape(-1)  # a view, a copy


def permuted_product(x):
    p = x.reshape(2, 3, 1).permute(2, 0, 1) * 2
    return p, p.permute(1, 2, 0).view(-1)


def view_of_softmax(x):
    return _lib(x).softmax(x.t(), 0).view(-1)  # contiguous, as PyTorch's softmax result


def view_of_where(x):
    y = _lib(x).where(x.t() > 1, x.t(), x.t() * 10)
    return y, y.t().view(3, 2)


def view_of_clone(x):
    y = x.t().clone()
    return y, y.t().view(-1)


DOWNSTREAM = [reshape_of_transposed_product, view_of_transposed_product, flatten_of_sum, contiguous_of_cast,
              view_of_zeros_like, view_of_comparison, reshape_of_broadcast_sum, permuted_product, view_of_softmax,
              view_of_where, view_of_clone]


def _torch_or_aotjax_state(tensors):
    return [(tuple(t.shape), tuple(t.stride()), np.asarray(t.numpy(), np.float64).copy()) for t in tensors]


def _behaviour(run, x):
    """The outputs and the input after a call, then after writing into each output in turn (as
    `tests.helpers.check_boundary_agrees` observes them), for PyTorch and aotjax tensors alike."""
    out = run(x)
    outs = [o for o in flat(out)]
    history = [_torch_or_aotjax_state([x, *outs])]
    for o in outs:
        try:
            o.add_(1000)
        except (AliasingError, RuntimeError):
            history.append("error")
            continue
        history.append(_torch_or_aotjax_state([x, *outs]))
    return history


def _data():
    return np.arange(6, dtype=np.float32).reshape(2, 3)


@pytest.mark.parametrize("f", DOWNSTREAM, ids=[f.__name__ for f in DOWNSTREAM])
def test_view_or_copy_after_an_elementwise_op_matches_pytorch(f):
    expected = _behaviour(f, tt(_data()))
    got = _behaviour(f, T(_data()))
    assert len(got) == len(expected)
    for step, (g, e) in enumerate(zip(got, expected)):
        if isinstance(e, str) or isinstance(g, str):
            assert g == e, f"step {step}"
            continue
        for k, ((gs, gst, gv), (es, est, ev)) in enumerate(zip(g, e)):
            assert (gs, gst) == (es, est), f"step {step}, tensor {k}: shape/stride {gs} {gst}, PyTorch {es} {est}"
            np.testing.assert_allclose(gv, ev, err_msg=f"step {step}, tensor {k}")
    check_boundary_agrees(f, lambda: ((T(_data()),), ()))


def test_the_two_programs_of_the_issue():
    x = T(_data())
    assert reshape_of_transposed_product(x).tolist() == [[0, 6], [2, 8], [4, 10]]
    assert view_of_transposed_product(x).tolist() == [0, 2, 4, 6, 8, 10]
    for transform in (aotjax.jit, aotjax.functionalize):
        assert transform(reshape_of_transposed_product)(T(_data())).tolist() == [[0, 6], [2, 8], [4, 10]]
        assert transform(view_of_transposed_product)(T(_data())).tolist() == [0, 2, 4, 6, 8, 10]


# -- every interpreter sees the same layout ------------------------------------------------------------------
def layouts_seen(x, seen: list):
    """Record the strides of elementwise, cast and `_like` results, as the user's function sees them."""
    y = x.t() * 2
    z = (y + x.t()).sin()
    c = z.to(x.dtype)
    w = aotjax.zeros_like(y) + y
    s = aotjax.where(y > 0, z, 0.0)
    seen.extend([y.stride(), z.stride(), c.stride(), w.stride(), s.stride(), y.t().view(-1).stride()])
    return (z * w + s).sum()


def test_every_interpreter_sees_the_eager_layouts():
    x = T(np.linspace(0.5, 2.0, 6, dtype=np.float32).reshape(2, 3))
    eager: list = []
    layouts_seen(x, eager)
    assert eager[:5] == [(1, 3)] * 5
    runs = {
        "make_jaxpr": lambda seen: aotjax.make_jaxpr(functools.partial(layouts_seen, seen=seen))(x),
        "functionalize": lambda seen: aotjax.functionalize(functools.partial(layouts_seen, seen=seen))(x),
        "jit": lambda seen: aotjax.jit(functools.partial(layouts_seen, seen=seen))(x),
        "grad": lambda seen: aotjax.grad(functools.partial(layouts_seen, seen=seen))(x),
        "jvp": lambda seen: aotjax.jvp(functools.partial(layouts_seen, seen=seen), (x,), (aotjax.ones_like(x),)),
        "vjp": lambda seen: aotjax.vjp(functools.partial(layouts_seen, seen=seen), x),
        "jit of grad": lambda seen: aotjax.jit(aotjax.grad(functools.partial(layouts_seen, seen=seen)))(x),
        "grad of grad": lambda seen: aotjax.grad(lambda x: aotjax.grad(
            functools.partial(layouts_seen, seen=seen))(x).sum())(x),
    }
    for how, run in runs.items():
        seen: list = []
        run(seen)
        assert seen == eager, how


OUTPUT_PROGRAMS = {
    "elementwise": lambda x: x.t() * 2,
    "cast": lambda x: x.t().to(aotjax.int32),
    "zeros_like": lambda x: aotjax.zeros_like(x.t()),
    "clone": lambda x: x.t().clone(),
    "permuted": lambda x: x.reshape(1, 2, 3).permute(2, 0, 1).exp(),
    "sliced": lambda x: x[:, ::2] + 1,
    "two outputs": lambda x: (x.t() + 1, (x.t() + 1).t()),
}


@pytest.mark.parametrize("name", list(OUTPUT_PROGRAMS))
def test_transformed_outputs_carry_the_eager_layout(name):
    f = OUTPUT_PROGRAMS[name]
    expected = [o.stride() for o in flat(f(T(_data())))]
    for transform in (aotjax.jit, aotjax.functionalize, aotjax.aot):
        fn = transform(f)
        for call in range(2):  # the first call traces, the second runs the cached program
            assert [o.stride() for o in flat(fn(T(_data())))] == expected, (transform.__name__, call)
    primals, tangents = aotjax.jvp(f, (T(_data()),), (T(np.ones((2, 3), np.float32)),))
    assert [o.stride() for o in flat(primals)] == expected
    assert [o.stride() for o in flat(aotjax.vjp(f, T(_data()))[0])] == expected


def test_elementwise_on_contiguous_operands_records_nothing():
    """The eager hot path: contiguous operands give a contiguous result, with no layout recorded."""
    x = T(_data())
    for y in (x + x, x * 2, x.sin(), aotjax.where(x > 1, x, 0.0), x.to(aotjax.int32), aotjax.zeros_like(x)):
        assert y._strides is None


def test_dims_of_equal_stride_put_the_smaller_one_inner():
    """PyTorch's tie-break: at equal strides the smaller dim goes inner."""
    for shape, view in itertools.product([(3, 1, 4), (1, 3, 4)], ["t_unsqueeze", "expand"]):
        a = sample("any", shape, F32)
        ours, theirs = T(a), tt(a)
        if view == "t_unsqueeze":
            ours, theirs = ours.transpose(0, 2).unsqueeze(1), theirs.transpose(0, 2).unsqueeze(1)
        else:
            ours, theirs = ours.expand(2, *shape), theirs.expand(2, *shape)
        assert_matches_torch(ours * 2, theirs * 2, tol=1e-6, what=f"{shape} {view}")
        assert_matches_torch(ours + ours, theirs + theirs, tol=1e-6, what=f"{shape} {view}")


def test_integer_and_bool_operands_keep_the_layout():
    for dt in (I64, BOOL):
        a = sample("small", (3, 4), dt)
        x, xt = laid_out(a, "transposed")
        assert_matches_torch(x & x if dt == BOOL else x * 3, xt & xt if dt == BOOL else xt * 3, tol=0, what=dt.name)


def test_naming_a_value_keeps_its_layout():
    """`checkpoint_name` is an identity: a later view of the named value is allowed exactly when it would be
    without the name."""
    def f(x):
        h = aotjax.checkpoint_name(x.t() * 2, "h")
        return h, h.t().view(-1)

    assert [o.stride() for o in f(T(_data()))] == [(1, 3), (1,)]
    check_boundary_agrees(f, lambda: ((T(_data()),), ()))
    assert aotjax.grad(lambda x: f(x)[1].sum())(T(_data())).tolist() == [[2.0] * 3] * 2
