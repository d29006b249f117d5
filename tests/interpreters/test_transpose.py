"""The transpose interpreter: the dot-product test `<A x, y> == <x, A^T y>` for every operand set an op of
the op table (tests/op_records.py) is linear in (tests/test_rule_coverage.py checks that each primitive
declared linear has one), and the backward pass's handling of known equations, symbolic zeros and
missing rules."""
from __future__ import annotations

import numpy as np
import pytest

import aotjax
from aotjax.core import all_primitives
from aotjax.interpreters.ad_util import Zero
from aotjax.interpreters.partial_eval import PartialVal, partial_eval_flat
from aotjax.interpreters.transpose import UndefinedPrimal, backward_pass, transpose_flat, transpose_rules
from tests.helpers import FLOAT
from tests.op_records import derivative_inputs, records, skip_without_x64

# (record, the operands to transpose in): the others are known values
DOT_PRODUCT_CASES = [(r, lin) for r in records(linear=True) for lin in r.linear]


def _case_id(case) -> str:
    record, linear = case
    return record.name if len(record.linear) == 1 else f"{record.name}-{''.join(map(str, linear))}"


def _vdot(a, b) -> float:
    return float(np.vdot(np.asarray(a, np.float64), np.asarray(b, np.float64)))


@pytest.mark.parametrize("record, linear", DOT_PRODUCT_CASES, ids=[_case_id(c) for c in DOT_PRODUCT_CASES])
def test_dot_product(record, linear):
    skip_without_x64(record)
    fn, prim_name = record.fn, record.prim
    rng = np.random.default_rng(0)
    args = [aotjax.tensor(a) for a in derivative_inputs(record)]

    def apply(lin):
        full = list(args)
        for i, v in zip(linear, lin):
            full[i] = v
        return fn(*full)

    xs = [args[i] for i in linear]
    out = apply(xs).numpy() - apply([aotjax.zeros_like(x) for x in xs]).numpy()  # the linear part
    ct = aotjax.tensor(rng.standard_normal(out.shape).astype(out.dtype))
    marked = [UndefinedPrimal(a.aval) if i in linear else a for i, a in enumerate(args)]
    cts_in = transpose_flat(lambda *a: [fn(*a)], marked, [ct])
    for x, c in zip(xs, cts_in):
        assert c.shape == x.shape and c.dtype == x.dtype
    tol = 1e-5 if out.dtype == np.float32 or any(x.dtype == np.float32 for x in xs) else 1e-10
    np.testing.assert_allclose(_vdot(out, ct), sum(_vdot(x, c) for x, c in zip(xs, cts_in)), rtol=tol, atol=tol)
    pvals = [PartialVal.unknown(a.aval) if i in linear else PartialVal.known(a) for i, a in enumerate(args)]
    jaxpr, _, _ = partial_eval_flat(lambda *a: [fn(*a)], pvals)
    assert prim_name in {e.primitive.name for e in jaxpr.eqns}


def test_detach_has_a_zero_cotangent():
    x = aotjax.ones(3, dtype=FLOAT)
    (ct,) = transpose_flat(lambda x: [x.detach() * 2.0], [UndefinedPrimal(x.aval)], [x], instantiate=False)
    assert isinstance(ct, Zero)
    (ct,) = transpose_flat(lambda x: [x.detach() + x], [UndefinedPrimal(x.aval)], [x])
    np.testing.assert_array_equal(ct.numpy(), np.ones(3))


def test_overwrite_with_repeated_indices_reads_back_only_the_update_that_landed():
    x, v = aotjax.zeros(3, dtype=FLOAT), aotjax.tensor([1.0, 2.0, 3.0], dtype=FLOAT)
    i = aotjax.tensor([1, 1, 0])
    out = x.index_put((i,), v)
    winner = int(np.flatnonzero(v.numpy() == out.numpy()[1])[0])
    (ct_v,) = transpose_flat(lambda v: [x.index_put((i,), v)], [UndefinedPrimal(v.aval)],
                             [aotjax.tensor([10.0, 20.0, 30.0], dtype=FLOAT)])
    expected = np.array([0.0, 0.0, 10.0])
    expected[winner] = 20.0
    np.testing.assert_array_equal(ct_v.numpy(), expected)


def test_backward_pass_evaluates_the_nonlinear_equations_forward():
    w = aotjax.tensor([0.5, 1.0, 2.0], dtype=FLOAT)
    jaxpr = aotjax.make_jaxpr(lambda x, w: x * w.sin() + x.sum())(w, w)
    assert [e.primitive.name for e in jaxpr.eqns] == ["sin", "mul", "reduce_sum", "add"]
    ct = aotjax.tensor([1.0, -1.0, 2.0], dtype=FLOAT)
    (ct_x,) = backward_pass(jaxpr, [], [UndefinedPrimal(w.aval), w], [ct])
    np.testing.assert_allclose(ct_x.numpy(), ct.numpy() * np.sin(w.numpy()) + ct.numpy().sum())


def test_cotangents_accumulate_over_every_use():
    x = aotjax.ones(2, 2, dtype=FLOAT)
    (ct,) = transpose_flat(lambda x: [x + x.t() - x * 3.0, x], [UndefinedPrimal(x.aval)],
                           [aotjax.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=FLOAT), Zero(x.aval)])
    np.testing.assert_allclose(ct.numpy(), np.array([[1.0, 2.0], [3.0, 4.0]]).T - 2 * np.array([[1, 2], [3, 4]]))


def test_symbolic_zeros():
    x = aotjax.ones(3, dtype=FLOAT)
    lin = [UndefinedPrimal(x.aval), UndefinedPrimal(x.aval)]
    cts = transpose_flat(lambda x, y: [x * 2.0], lin, [Zero(x.aval)], instantiate=False)
    assert all(isinstance(c, Zero) for c in cts)
    ct_x, ct_y = transpose_flat(lambda x, y: [x * 2.0], lin, [x])
    np.testing.assert_array_equal(ct_x.numpy(), [2.0, 2.0, 2.0])
    np.testing.assert_array_equal(ct_y.numpy(), [0.0, 0.0, 0.0])


def test_the_backward_program_can_be_staged():
    w = aotjax.tensor([[1.0, 2.0], [3.0, 4.0]])
    x_aval = aotjax.ShapedArray((2,), np.float32)
    backward = aotjax.make_jaxpr(lambda ct: transpose_flat(lambda x: [w @ x * 2.0], [UndefinedPrimal(x_aval)],
                                                           [ct]))(aotjax.ones(2))
    assert [e.primitive.name for e in backward.eqns] == ["mul", "permute", "view", "matmul", "view"]
    assert len(backward.consts) == 1  # w, captured as a constant of the backward program
    (ct_x,) = aotjax.eval_jaxpr(backward, aotjax.tensor([1.0, 0.0]))
    np.testing.assert_allclose(ct_x.numpy(), [2.0, 4.0])


def test_a_missing_rule_names_the_primitive():
    x = aotjax.ones(3)
    with pytest.raises(NotImplementedError, match="transpose rule for primitive 'sin' is not implemented"):
        transpose_flat(lambda x: [x.sin()], [UndefinedPrimal(x.aval)], [x])


def test_a_product_of_two_linear_values_is_not_linear():
    x = aotjax.ones(3)
    with pytest.raises(ValueError, match="'mul' is not linear"):
        transpose_flat(lambda x: [x * x], [UndefinedPrimal(x.aval)], [x])


def test_a_rule_returning_a_wrong_shape_is_reported():
    x = aotjax.ones(3)
    neg_p = next(p for p in all_primitives() if p.name == "neg")
    rule = transpose_rules[neg_p]
    transpose_rules[neg_p] = lambda ct, x: [aotjax.ones(4)]
    try:
        with pytest.raises(TypeError, match="transpose rule for primitive 'neg' returned a cotangent f32\\[4\\]"):
            transpose_flat(lambda x: [-x], [UndefinedPrimal(x.aval)], [x])
    finally:
        transpose_rules[neg_p] = rule
