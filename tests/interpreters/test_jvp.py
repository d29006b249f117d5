"""The jvp interpreter: every op of the op table with a `jax` reference (tests/op_records.py), checking
`jvp_flat` against `jax.jvp` of the equivalent `jax.numpy` function at the same precision (float64 with
x64, float32 without) and against central finite differences of the op itself (tests/helpers.py
`central_difference`); then symbolic zeros bind no tangent work, nested jvp, and zero tangents of integer
outputs.
(That every functional and view primitive has a rule is checked in tests/test_rule_coverage.py.)"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import aotjax
from aotjax.core.errors import UnsupportedError
from aotjax.interpreters.jvp import jvp_flat, jvp_rules
from aotjax.ops.math.elementwise import sin_p
from tests.helpers import FD_ATOL, FD_RTOL, FLOAT, asks_for_64_bits, by_mode, central_difference
from tests.op_records import OpRecord, as_np, derivative_inputs, flat, records, sample_f64, skip_without_x64

T = aotjax.tensor
DIFFERENTIATED = records(differentiated=True)
RTOL, ATOL = by_mode((1e-6, 1e-9), (1e-5, 1e-6))  # against jax on the same math at the same precision


@pytest.mark.parametrize("row", DIFFERENTIATED, ids=repr)
def test_jvp(row: OpRecord):
    skip_without_x64(row)
    primals = derivative_inputs(row)
    tangents = [sample_f64("any", np.shape(p), seed=100 + i).astype(p.dtype) for i, p in enumerate(primals)]
    outs, t_outs = jvp_flat(lambda *xs: flat(row.fn(*xs)), [T(p) for p in primals], [T(t) for t in tangents])
    ref_outs, ref_t_outs = jax.jvp(lambda *xs: tuple(flat(row.jax(*xs))), tuple(map(jnp.asarray, primals)),
                                   tuple(map(jnp.asarray, tangents)))
    assert len(outs) == len(ref_outs)
    for out, t_out, ref, ref_t in zip(outs, t_outs, ref_outs, ref_t_outs, strict=True):
        np.testing.assert_allclose(as_np(out), np.asarray(ref), rtol=RTOL, atol=ATOL)
        assert t_out.shape == out.shape and t_out.dtype == out.dtype, (t_out.aval, out.aval)
        expected_t = np.zeros(ref.shape) if ref_t.dtype == jax.dtypes.float0 else np.asarray(ref_t)
        np.testing.assert_allclose(as_np(t_out), expected_t, rtol=RTOL, atol=ATOL)
    if row.fd:
        _check_finite_differences(row, primals, tangents, t_outs)


def _check_finite_differences(row: OpRecord, primals, tangents, t_outs):
    fds = central_difference(lambda *xs: flat(row.fn(*map(T, xs))), primals, tangents)
    for fd, t_out in zip(fds, t_outs, strict=True):
        if np.issubdtype(t_out.dtype, np.floating):
            np.testing.assert_allclose(as_np(t_out), fd, rtol=FD_RTOL, atol=FD_ATOL)


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
    x, y = T(np.ones((2, 3), FLOAT)), T(np.full((2, 3), 2.0, FLOAT))

    def only_x(x, y):
        return jvp_flat(lambda a, b: [a * b], [x, y], [x, None])

    def both(x, y):
        return jvp_flat(lambda a, b: [a * b], [x, y], [x, y])

    assert _prim_names(aotjax.make_jaxpr(only_x)(x, y)) == ["mul", "mul"]  # the primal and t_x * y
    assert sorted(_prim_names(aotjax.make_jaxpr(both)(x, y))) == ["add", "mul", "mul", "mul"]


def test_unused_input_and_constant_output_tangents_are_zero():
    (out, c), (t, tc) = jvp_flat(lambda a, b: [aotjax.sin(a), aotjax.ones(2, dtype=FLOAT)], [T([0.0, 1.0]), T(1.0)],
                                 [T([1.0, 1.0]), T(1.0)])
    np.testing.assert_allclose(t.numpy(), np.cos([0.0, 1.0]))
    np.testing.assert_array_equal(tc.numpy(), np.zeros(2))


def _derivative(f):
    """`x -> f'(x)` for an elementwise `f`, by `jvp_flat` with a ones tangent."""
    return lambda x: jvp_flat(lambda y: [f(y)], [x], [aotjax.ones_like(x)])[1][0]


def test_nested_jvp_second_derivative_of_sin():
    x = T(np.linspace(-2.0, 2.0, 5).astype(FLOAT))
    tol = dict(rtol=by_mode(1e-12, 1e-6), atol=by_mode(0, 1e-7))
    np.testing.assert_allclose(_derivative(_derivative(aotjax.sin))(x).numpy(), -np.sin(x.numpy()), **tol)
    np.testing.assert_allclose(_derivative(_derivative(_derivative(aotjax.sin)))(x).numpy(), -np.cos(x.numpy()),
                               **tol)


def test_nested_jvp_keeps_perturbations_apart():
    # d/dx [x * d/dy (x + y)] at x = 1 is 1; confusing the two perturbations gives 2.
    def inner(x):
        return x * _derivative(lambda y: x + y)(T(1.0))

    np.testing.assert_allclose(_derivative(inner)(T(1.0)).numpy(), 1.0)


def test_nested_jvp_of_prod_with_zeros():
    x = T(np.array([0.0, 2.0, 3.0], FLOAT))
    # prod(x + t) = t (t + 2) (t + 3) = t^3 + 5 t^2 + 6 t: the second derivative at t = 0 is 10
    second = _derivative(_derivative(lambda t: (x + t).prod()))(T(0.0))
    np.testing.assert_allclose(second.numpy(), 10.0)


@asks_for_64_bits
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
