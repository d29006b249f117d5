"""The jvp interpreter: one table row per op, checking `jvp_flat` against `jax.jvp` of the equivalent
`jax.numpy` function and against central finite differences (float64); then every functional and view
primitive has a rule, symbolic zeros bind no tangent work, nested jvp, and zero tangents of integer
outputs."""
from dataclasses import dataclass
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import aotjax
from aotjax.core import Kind, all_primitives
from aotjax.core.errors import UnsupportedError
from aotjax.interpreters.jvp import jvp_flat, jvp_rules
from aotjax.ops.elementwise import sin_p
from aotjax.ops.indexing import copy_p, fill_p
from aotjax.ops.views import diagonal_scatter_p, select_scatter_p, slice_scatter_p

T = aotjax.tensor
F64 = np.float64


def sample(domain: str, shape, seed: int):
    rng = np.random.default_rng(seed)
    v = rng.standard_normal(shape)
    if domain == "pos":
        v = np.abs(v) + 0.5
    elif domain == "unit":
        v = np.tanh(v) * 0.9
    elif domain == "nonzero":
        v = np.where(np.abs(v) < 0.2, 0.7, v)
    return v.astype(F64)


@dataclass
class Row:
    name: str
    fn: Callable  # aotjax: tensors in, a tensor or a tuple of tensors out
    ref: Callable  # the same math in jax.numpy
    shapes: tuple  # one shape per differentiated input
    domain: str | tuple = "any"  # per input, or one for all
    fd: bool = True  # also check against finite differences (off where the op is not smooth at the inputs)
    inputs: Callable | None = None  # custom inputs (a list of float64 arrays), instead of `sample`

    def __repr__(self):
        return self.name


IDX = np.array([2, 0, 2])
GATHER_IDX = np.array([[0, 2, 1], [1, 1, 0]])
MASK = np.array([[True, False, True, False], [False, False, True, True], [True, True, False, False]])
COND = MASK


def _scatter_ref(add):
    def ref(x, src):
        rows = np.broadcast_to(np.arange(2)[:, None], GATHER_IDX.shape)
        ref_at = x.at[rows, GATHER_IDX]
        return ref_at.add(src[:, :3]) if add else ref_at.set(src[:, :3])
    return ref


def _lerp_ref(s, e, w):
    return s + w * (e - s)


def _gelu_ref(approximate):
    return lambda x: jax.nn.gelu(x, approximate=approximate)


def _inputs_with_zeros():
    x = sample("any", (3, 4), 0)
    x[0, 1] = 0.0
    x[1, 0] = x[1, 3] = 0.0
    return [x]


def _inputs_with_ties():
    return [np.array([[1.0, 3.0, 3.0, -1.0], [2.0, 2.0, 2.0, 2.0], [0.5, -4.0, 0.1, -4.0]])]


ROWS = [
    # elementwise unary
    Row("neg", aotjax.neg, jnp.negative, ((3, 4),)),
    Row("abs", aotjax.abs, jnp.abs, ((3, 4),), "nonzero"),
    Row("exp", aotjax.exp, jnp.exp, ((3, 4),)),
    Row("log", aotjax.log, jnp.log, ((3, 4),), "pos"),
    Row("log1p", aotjax.log1p, jnp.log1p, ((3, 4),), "pos"),
    Row("expm1", aotjax.expm1, jnp.expm1, ((3, 4),)),
    Row("sqrt", aotjax.sqrt, jnp.sqrt, ((3, 4),), "pos"),
    Row("rsqrt", aotjax.rsqrt, jax.lax.rsqrt, ((3, 4),), "pos"),
    Row("sin", aotjax.sin, jnp.sin, ((3, 4),)),
    Row("cos", aotjax.cos, jnp.cos, ((3, 4),)),
    Row("tan", aotjax.tan, jnp.tan, ((3, 4),), "unit"),
    Row("tanh", aotjax.tanh, jnp.tanh, ((3, 4),)),
    Row("sigmoid", aotjax.sigmoid, jax.nn.sigmoid, ((3, 4),)),
    Row("relu", aotjax.relu, jax.nn.relu, ((3, 4),), "nonzero"),
    Row("silu", aotjax.silu, jax.nn.silu, ((3, 4),)),
    Row("erf", aotjax.erf, jax.lax.erf, ((3, 4),)),
    Row("gelu", aotjax.gelu, _gelu_ref(False), ((3, 4),)),
    Row("gelu_tanh", lambda x: aotjax.gelu(x, approximate="tanh"), _gelu_ref(True), ((3, 4),)),
    Row("reciprocal", aotjax.reciprocal, jnp.reciprocal, ((3, 4),), "nonzero"),
    Row("square", aotjax.square, jnp.square, ((3, 4),)),
    Row("floor", aotjax.floor, jnp.floor, ((3, 4),)),
    Row("ceil", aotjax.ceil, jnp.ceil, ((3, 4),)),
    Row("round", lambda x: aotjax.round(x, decimals=1), lambda x: jnp.round(x, 1), ((3, 4),)),
    Row("sign", aotjax.sign, jnp.sign, ((3, 4),)),
    Row("to_float32", lambda x: aotjax.to(x, aotjax.float32), lambda x: x.astype(jnp.float32), ((3, 4),), fd=False),
    Row("to_int", lambda x: aotjax.to(x, aotjax.int32), lambda x: x.astype(jnp.int32), ((3, 4),)),
    # elementwise binary, broadcasting
    Row("add", aotjax.add, jnp.add, ((3, 4), (4,))),
    Row("add_alpha", lambda x, y: aotjax.add(x, y, alpha=3), lambda x, y: x + 3 * y, ((3, 1), (1, 4))),
    Row("sub", aotjax.sub, jnp.subtract, ((3, 1), (1, 4))),
    Row("mul", aotjax.mul, jnp.multiply, ((2, 3, 4), (3, 1))),
    Row("mul_scalar", lambda x: x * 2.5, lambda x: x * 2.5, ((3, 4),)),
    Row("div", aotjax.div, jnp.divide, ((3, 4), (4,)), ("any", "nonzero")),
    Row("rdiv_scalar", lambda x: 2.0 / x, lambda x: 2.0 / x, ((3, 4),), "nonzero"),
    Row("floor_divide", aotjax.floor_divide, jnp.floor_divide, ((3, 4), (4,)), ("any", "pos")),
    Row("remainder", aotjax.remainder, jnp.remainder, ((3, 4), (4,)), ("any", "pos")),
    Row("pow", aotjax.pow, jnp.power, ((3, 4), (4,)), ("pos", "any")),
    Row("pow_scalar", lambda x: x ** 3.0, lambda x: x ** 3.0, ((3, 4),)),
    Row("integer_pow", lambda x: x ** 3, lambda x: x ** 3, ((3, 4),)),
    Row("rpow_scalar", lambda x: 2.0 ** x, lambda x: 2.0 ** x, ((3, 4),)),
    Row("maximum", aotjax.maximum, jnp.maximum, ((3, 4), (4,))),
    Row("minimum", aotjax.minimum, jnp.minimum, ((3, 1), (1, 4))),
    Row("atan2", aotjax.atan2, jnp.arctan2, ((3, 4), (3, 4)), ("any", "nonzero")),
    Row("where", lambda x, y: aotjax.where(T(COND), x, y), lambda x, y: jnp.where(COND, x, y), ((3, 4), (4,))),
    Row("clamp", aotjax.clamp, jnp.clip, ((3, 4), (4,), (3, 1)), ("any", "any", "pos")),
    Row("clamp_scalar", lambda x: aotjax.clamp(x, -0.5, 0.5), lambda x: jnp.clip(x, -0.5, 0.5), ((3, 4),)),
    Row("lerp", aotjax.lerp, _lerp_ref, ((3, 4), (4,), (3, 4)), ("any", "any", "unit")),
    Row("lerp_scalar", lambda s, e: aotjax.lerp(s, e, 0.25), lambda s, e: _lerp_ref(s, e, 0.25), ((3, 4), (3, 4))),
    # views
    Row("select", lambda x: x[1], lambda x: x[1], ((3, 4),)),
    Row("slice", lambda x: x[:, 1:3], lambda x: x[:, 1:3], ((3, 4),)),
    Row("slice_step", lambda x: x[::2], lambda x: x[::2], ((3, 4),)),
    Row("diagonal", lambda x: aotjax.diagonal(x, 1), lambda x: jnp.diagonal(x, 1), ((3, 4),)),
    Row("diagonal_3d", lambda x: aotjax.diagonal(x, 0, -1, 0), lambda x: jnp.diagonal(x, 0, -1, 0), ((3, 2, 3),)),
    Row("permute", lambda x: x.permute(2, 0, 1), lambda x: jnp.transpose(x, (2, 0, 1)), ((2, 3, 4),)),
    Row("transpose_neg", lambda x: x.transpose(-1, -3), lambda x: jnp.swapaxes(x, -1, -3), ((2, 3, 4),)),
    Row("view", lambda x: x.view(4, -1), lambda x: x.reshape(4, -1), ((2, 3, 2),)),
    Row("reshape_copy", lambda x: x.t().reshape(-1), lambda x: x.T.reshape(-1), ((3, 4),)),
    Row("squeeze", lambda x: x.squeeze(1), lambda x: jnp.squeeze(x, 1), ((3, 1, 4),)),
    Row("unsqueeze", lambda x: x.unsqueeze(-1), lambda x: x[..., None], ((3, 4),)),
    Row("expand", lambda x: x.expand(2, 3, 4), lambda x: jnp.broadcast_to(x, (2, 3, 4)), ((3, 1),)),
    Row("alias", lambda x: x[...], lambda x: x, ((3, 4),)),
    Row("detach", lambda x: x.detach() * x, lambda x: jax.lax.stop_gradient(x) * x, ((3, 4),), fd=False),
    Row("split", lambda x: x.split(1, dim=-1), lambda x: tuple(jnp.split(x, 4, axis=-1)), ((3, 4),)),
    Row("select_scatter", lambda b, y: select_scatter_p.bind(b, y, dim=1, index=2),
        lambda b, y: b.at[:, 2].set(y), ((3, 4), (3,))),
    Row("slice_scatter", lambda b, y: slice_scatter_p.bind(b, y, dim=1, start=0, stop=4, step=2),
        lambda b, y: b.at[:, 0:4:2].set(y), ((3, 4), (3, 2))),
    Row("diagonal_scatter", lambda b, y: diagonal_scatter_p.bind(b, y, offset=0, dim1=0, dim2=1),
        lambda b, y: b.at[jnp.arange(3), jnp.arange(3)].set(y), ((3, 4), (3,))),
    # indexing
    Row("index", lambda x: x[T(IDX)], lambda x: x[IDX], ((3, 4),)),
    Row("index_list", lambda x: x[:, [3, 0]], lambda x: x[:, jnp.array([3, 0])], ((3, 4),)),
    Row("index_select", lambda x: x.index_select(-1, T(IDX)), lambda x: x[:, IDX], ((3, 4),)),
    Row("index_put", lambda x, v: x.index_put((T(np.array([0, 2])),), v),
        lambda x, v: x.at[np.array([0, 2])].set(v), ((3, 4), (4,))),
    Row("index_put_acc", lambda x, v: x.index_put((T(IDX),), v, accumulate=True),
        lambda x, v: x.at[IDX].add(v), ((3, 4), (3, 4))),
    Row("gather", lambda x: x.gather(1, T(GATHER_IDX)), lambda x: jnp.take_along_axis(x[:2], GATHER_IDX, 1),
        ((3, 4),)),
    Row("scatter", lambda x, s: x.scatter(1, T(np.array([[0, 2, 1], [3, 1, 0]])), s),
        lambda x, s: x.at[np.arange(2)[:, None], np.array([[0, 2, 1], [3, 1, 0]])].set(s[:, :3]), ((2, 4), (2, 4))),
    Row("scatter_add", lambda x, s: x.scatter_add(1, T(GATHER_IDX), s), _scatter_ref(True), ((2, 4), (2, 4))),
    Row("masked_fill", lambda x, v: x.masked_fill(T(MASK), v), lambda x, v: jnp.where(MASK, v, x), ((3, 4), ())),
    Row("masked_fill_scalar", lambda x: x.masked_fill(T(MASK), 2.0), lambda x: jnp.where(MASK, 2.0, x), ((3, 4),)),
    Row("index_add", lambda x, s: x.index_add(0, T(IDX), s, alpha=2), lambda x, s: x.at[IDX].add(2 * s),
        ((3, 4), (3, 4))),
    Row("copy", lambda d, s: copy_p.bind(d, s), lambda d, s: jnp.broadcast_to(s, d.shape), ((3, 4), (4,))),
    Row("fill", lambda x, v: fill_p.bind(x, v), lambda x, v: jnp.broadcast_to(v, x.shape), ((3, 4), ())),
    # linalg
    Row("matmul", aotjax.matmul, jnp.matmul, ((2, 3), (3, 4))),
    Row("matmul_batch_vec", aotjax.matmul, jnp.matmul, ((2, 1, 3, 4), (5, 4, 2))),
    Row("matmul_vec", aotjax.matmul, jnp.matmul, ((2, 3, 4), (4,))),
    Row("einsum", lambda a, b: aotjax.einsum("ij,kj->ik", a, b), lambda a, b: jnp.einsum("ij,kj->ik", a, b),
        ((2, 3), (4, 3))),
    Row("einsum_3", lambda a, b, c: aotjax.einsum("i,ij,j->", a, b, c), lambda a, b, c: jnp.einsum("i,ij,j->", a, b, c),
        ((3,), (3, 4), (4,))),
    Row("linear", aotjax.linear, lambda x, w, b: x @ w.T + b, ((2, 3), (4, 3), (4,))),
    # reductions
    Row("sum", lambda x: x.sum(), jnp.sum, ((3, 4),)),
    Row("sum_dim_keepdim", lambda x: x.sum(-1, keepdim=True), lambda x: x.sum(-1, keepdims=True), ((3, 4),)),
    Row("mean", lambda x: x.mean((0, 2)), lambda x: x.mean((0, 2)), ((2, 3, 4),)),
    Row("var", lambda x: x.var(1), lambda x: x.var(1, ddof=1), ((3, 4),)),
    Row("std", lambda x: x.std(), lambda x: x.std(ddof=1), ((3, 4),)),
    Row("prod", lambda x: x.prod(1), lambda x: x.prod(1), ((3, 5),)),
    Row("prod_all", lambda x: x.prod(), jnp.prod, ((3, 3),), "unit"),
    Row("prod_zeros", lambda x: x.prod(-1, keepdim=True), lambda x: x.prod(-1, keepdims=True), ((3, 4),),
        inputs=_inputs_with_zeros),
    Row("amax", lambda x: x.amax(-1), lambda x: x.max(-1), ((3, 4),)),
    Row("amin_keepdim", lambda x: x.amin(0, keepdim=True), lambda x: x.min(0, keepdims=True), ((3, 4),)),
    Row("max_all", lambda x: aotjax.max(x), jnp.max, ((3, 4),)),
    Row("max_dim", lambda x: aotjax.max(x, 1), lambda x: (x.max(1), x.argmax(1)), ((3, 4),)),
    Row("amax_ties", lambda x: x.amax(-1), lambda x: x.max(-1), ((3, 4),), fd=False, inputs=_inputs_with_ties),
    Row("amin_ties", lambda x: x.amin(), jnp.min, ((3, 4),), fd=False, inputs=_inputs_with_ties),
    Row("logsumexp", lambda x: aotjax.logsumexp(x, -1), lambda x: jax.nn.logsumexp(x, -1), ((3, 4),)),
    Row("cumsum", lambda x: x.cumsum(-1), lambda x: jnp.cumsum(x, -1), ((3, 4),)),
    # new-value shape ops
    Row("clone", lambda x: x.t().clone(), lambda x: x.T, ((3, 4),)),
    Row("cat", lambda x, y: aotjax.cat([x, y], -1), lambda x, y: jnp.concatenate([x, y], -1), ((3, 2), (3, 4))),
    Row("stack", lambda x, y: aotjax.stack([x, y], 1), lambda x, y: jnp.stack([x, y], 1), ((3, 4), (3, 4))),
    Row("flip", lambda x: x.flip(-1, 0), lambda x: jnp.flip(x, (-1, 0)), ((3, 4),)),
    Row("roll", lambda x: x.roll(1, -1), lambda x: jnp.roll(x, 1, -1), ((3, 4),)),
    Row("roll_flat", lambda x: x.roll(2), lambda x: jnp.roll(x, 2), ((3, 4),)),
    Row("repeat", lambda x: x.repeat(2, 1, 2), lambda x: jnp.tile(x, (2, 1, 2)), ((3, 4),)),
    Row("tril", lambda x: x.tril(), jnp.tril, ((3, 4),)),
    Row("triu", lambda x: x.triu(1), lambda x: jnp.triu(x, 1), ((2, 3, 4),)),
    # compositions
    Row("softmax", lambda x: aotjax.softmax(x, -1), lambda x: jax.nn.softmax(x, -1), ((3, 4),)),
    Row("log_softmax", lambda x: aotjax.log_softmax(x, 0), lambda x: jax.nn.log_softmax(x, 0), ((3, 4),)),
]


def _flat(out) -> list:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _inputs(row: Row):
    if row.inputs is not None:
        return row.inputs()
    domains = row.domain if isinstance(row.domain, tuple) else (row.domain,) * len(row.shapes)
    return [sample(d, s, seed=i) for i, (d, s) in enumerate(zip(domains, row.shapes, strict=True))]


def _as_np(x) -> np.ndarray:
    return np.asarray(x.numpy() if isinstance(x, aotjax.Tensor) else x)


@pytest.mark.parametrize("row", ROWS, ids=repr)
def test_jvp(row: Row):
    primals = _inputs(row)
    tangents = [sample("any", np.shape(p), seed=100 + i) for i, p in enumerate(primals)]
    outs, t_outs = jvp_flat(lambda *xs: _flat(row.fn(*xs)), [T(p) for p in primals], [T(t) for t in tangents])
    ref_outs, ref_t_outs = jax.jvp(lambda *xs: tuple(_flat(row.ref(*xs))), tuple(map(jnp.asarray, primals)),
                                   tuple(map(jnp.asarray, tangents)))
    assert len(outs) == len(ref_outs)
    for out, t_out, ref, ref_t in zip(outs, t_outs, ref_outs, ref_t_outs, strict=True):
        np.testing.assert_allclose(_as_np(out), np.asarray(ref), rtol=1e-6, atol=1e-9)
        assert t_out.shape == out.shape and t_out.dtype == out.dtype, (t_out.aval, out.aval)
        expected_t = np.zeros(ref.shape) if ref_t.dtype == jax.dtypes.float0 else np.asarray(ref_t)
        np.testing.assert_allclose(_as_np(t_out), expected_t, rtol=1e-6, atol=1e-9)
    if row.fd:
        _check_finite_differences(row, primals, tangents, t_outs)


def _check_finite_differences(row: Row, primals, tangents, t_outs, eps=1e-6):
    def f(sign):
        return _flat(row.fn(*(T(p + sign * eps * t) for p, t in zip(primals, tangents, strict=True))))
    for hi, lo, t_out in zip(f(1), f(-1), t_outs, strict=True):
        if not np.issubdtype(hi.dtype, np.floating):
            continue
        fd = (_as_np(hi) - _as_np(lo)) / (2 * eps)
        np.testing.assert_allclose(_as_np(t_out), fd, rtol=1e-5, atol=1e-6)


def test_every_functional_and_view_primitive_has_a_jvp_rule():
    missing = [p.name for p in all_primitives() if p.kind is not Kind.MUTATION and p not in jvp_rules]
    assert not missing, f"primitives without a jvp rule: {missing}"


def test_missing_rule_names_the_primitive(monkeypatch):
    monkeypatch.delitem(jvp_rules, sin_p)
    with pytest.raises(NotImplementedError, match="jvp rule for primitive 'sin' is not implemented"):
        jvp_flat(lambda x: [aotjax.sin(x)], [T([1.0])], [T([1.0])])


def test_mutation_reaching_jvp_says_functionalize_first():
    with pytest.raises(UnsupportedError, match="functionalize"):
        jvp_flat(lambda x: [x.add_(1.0)], [T([1.0])], [T([1.0])])


def _prim_names(jaxpr) -> list[str]:
    return [e.primitive.name for e in jaxpr.jaxpr.eqns]


def test_symbolic_zero_tangent_binds_no_tangent_work():
    x, y = T(np.ones((2, 3))), T(np.full((2, 3), 2.0))

    def only_x(x, y):
        return jvp_flat(lambda a, b: [a * b], [x, y], [x, None])

    def both(x, y):
        return jvp_flat(lambda a, b: [a * b], [x, y], [x, y])

    assert _prim_names(aotjax.make_jaxpr(only_x)(x, y)) == ["mul", "mul"]  # the primal and t_x * y
    assert sorted(_prim_names(aotjax.make_jaxpr(both)(x, y))) == ["add", "mul", "mul", "mul"]


def test_unused_input_and_constant_output_tangents_are_zero():
    (out, c), (t, tc) = jvp_flat(lambda a, b: [aotjax.sin(a), aotjax.ones(2, dtype=F64)], [T([0.0, 1.0]), T(1.0)],
                                 [T([1.0, 1.0]), T(1.0)])
    np.testing.assert_allclose(t.numpy(), np.cos([0.0, 1.0]))
    np.testing.assert_array_equal(tc.numpy(), np.zeros(2))


def _derivative(f):
    """`x -> f'(x)` for an elementwise `f`, by `jvp_flat` with a ones tangent."""
    return lambda x: jvp_flat(lambda y: [f(y)], [x], [aotjax.ones_like(x)])[1][0]


def test_nested_jvp_second_derivative_of_sin():
    x = T(np.linspace(-2.0, 2.0, 5))
    np.testing.assert_allclose(_derivative(_derivative(aotjax.sin))(x).numpy(), -np.sin(x.numpy()), rtol=1e-12)
    np.testing.assert_allclose(_derivative(_derivative(_derivative(aotjax.sin)))(x).numpy(), -np.cos(x.numpy()),
                               rtol=1e-12)


def test_nested_jvp_keeps_perturbations_apart():
    # d/dx [x * d/dy (x + y)] at x = 1 is 1; confusing the two perturbations gives 2.
    def inner(x):
        return x * _derivative(lambda y: x + y)(T(1.0))

    np.testing.assert_allclose(_derivative(inner)(T(1.0)).numpy(), 1.0)


def test_nested_jvp_of_prod_with_zeros():
    x = T(np.array([0.0, 2.0, 3.0]))
    # prod(x + t) = t (t + 2) (t + 3) = t^3 + 5 t^2 + 6 t: the second derivative at t = 0 is 10
    second = _derivative(_derivative(lambda t: (x + t).prod()))(T(0.0))
    np.testing.assert_allclose(second.numpy(), 10.0)


def test_integer_and_bool_outputs_get_zero_tangents():
    def f(x):
        return [x.argmax(), x.to(aotjax.int64), x > 0, aotjax.floor(x), (x * 2).to(aotjax.int32) + 1]
    outs, t_outs = jvp_flat(f, [T([0.5, -1.5, 2.5])], [T([1.0, 1.0, 1.0])])
    for out, t in zip(outs, t_outs, strict=True):
        assert t.shape == out.shape
        np.testing.assert_array_equal(t.numpy(), np.zeros(out.shape))


def test_integer_input_tangent_is_ignored():
    (out,), (t,) = jvp_flat(lambda i, x: [x * i], [T([1, 2]), T([1.0, 1.0])], [T([5, 5]), T([1.0, 1.0])])
    np.testing.assert_allclose(t.numpy(), [1.0, 2.0])


def test_tangent_shape_mismatch_is_an_error():
    with pytest.raises(ValueError, match="tangent 0 has shape"):
        jvp_flat(lambda x: [x], [T([1.0, 2.0])], [T([1.0])])
