"""The transpose interpreter: the dot-product test `<A x, y> == <x, A^T y>` for every linear primitive
(tests/test_rule_coverage.py checks that each primitive declared linear has a row), and the backward
pass's handling of known equations, symbolic zeros and missing rules."""
from __future__ import annotations

import numpy as np
import pytest

import aotjax
from aotjax.core import all_primitives
from aotjax.interpreters.ad_util import Zero
from aotjax.interpreters.partial_eval import PartialVal, partial_eval_flat
from aotjax.interpreters.transpose import UndefinedPrimal, backward_pass, transpose_flat, transpose_rules
from aotjax.ops.indexing import copy_p, fill_p
from aotjax.ops.remat import optimization_barrier_p
from aotjax.ops.views import diagonal_scatter_p, select_scatter_p, slice_scatter_p


def f64(*shape):
    return ("f64", shape)


def f32(*shape):
    return ("f32", shape)


def idx(*values):
    return ("int", values)


def mask(*values):
    return ("bool", values)


def _make(spec, rng):
    kind, v = spec
    if kind == "f64":
        return aotjax.tensor(rng.standard_normal(v))
    if kind == "f32":
        return aotjax.tensor(rng.standard_normal(v).astype(np.float32))
    if kind == "int":
        return aotjax.tensor(np.array(v, np.int64))
    return aotjax.tensor(np.array(v, bool))


# (id, primitive, function of the tensors, input specs, the linear inputs)
T = [
    ("convert_element_type", "convert_element_type", lambda x: x.to(aotjax.float64), [f32(3, 2)], (0,)),
    ("neg", "neg", lambda x: -x, [f64(2, 3)], (0,)),
    ("add_broadcast", "add", lambda x, y: x + y, [f64(3, 1), f64(4)], (0, 1)),
    ("add_affine", "add", lambda x, y: x + y, [f64(2, 3), f64(3)], (0,)),
    ("sub_broadcast", "sub", lambda x, y: x - y, [f64(2, 1, 3), f64(4, 1)], (0, 1)),
    ("mul_lhs", "mul", lambda x, y: x * y, [f64(2, 3), f64(3)], (0,)),
    ("mul_rhs", "mul", lambda x, y: x * y, [f64(2, 1), f64(2, 3)], (0,)),
    ("mul_scalar", "mul", lambda x: x * 2.5, [f64(4)], (0,)),
    ("div", "div", lambda x, y: x / (y.abs() + 1), [f64(2, 3), f64(3)], (0,)),
    ("where", "where", lambda c, x, y: aotjax.where(c, x, y), [mask(True, False, True), f64(2, 3), f64(2, 1)],
     (1, 2)),
    ("where_literal", "where", lambda c, x: aotjax.where(c, x, 0.0), [mask(False, True), f64(3, 2)], (1,)),
    ("reduce_sum_dim", "reduce_sum", lambda x: x.sum(1), [f64(2, 3, 4)], (0,)),
    ("reduce_sum_keepdim", "reduce_sum", lambda x: x.sum((0, 2), keepdim=True), [f64(2, 3, 4)], (0,)),
    ("reduce_sum_all", "reduce_sum", lambda x: x.sum(), [f64(2, 3)], (0,)),
    ("cumsum", "cumsum", lambda x: x.cumsum(1), [f64(2, 4)], (0,)),
    ("matmul_a", "matmul", lambda a, b: a @ b, [f64(2, 3), f64(3, 4)], (0,)),
    ("matmul_b", "matmul", lambda a, b: a @ b, [f64(2, 3), f64(3, 4)], (1,)),
    ("matmul_batch_a", "matmul", lambda a, b: a @ b, [f64(5, 1, 2, 3), f64(4, 3, 2)], (0,)),
    ("matmul_batch_b", "matmul", lambda a, b: a @ b, [f64(5, 1, 2, 3), f64(4, 3, 2)], (1,)),
    ("matmul_vec_mat", "matmul", lambda a, b: a @ b, [f64(3), f64(2, 3, 4)], (0,)),
    ("matmul_vec_mat_b", "matmul", lambda a, b: a @ b, [f64(3), f64(2, 3, 4)], (1,)),
    ("matmul_mat_vec", "matmul", lambda a, b: a @ b, [f64(2, 3), f64(3)], (1,)),
    ("matmul_dot", "matmul", lambda a, b: a @ b, [f64(3), f64(3)], (0,)),
    ("matmul_3d_2d_b", "matmul", lambda a, b: a @ b, [f64(2, 4, 3), f64(3, 5)], (1,)),
    ("matmul_3d_2d_a", "matmul", lambda a, b: a @ b, [f64(2, 4, 3), f64(3, 5)], (0,)),
    ("matmul_4d_2d_b", "matmul", lambda a, b: a @ b, [f64(2, 3, 4, 3), f64(3, 5)], (1,)),
    ("matmul_2d_4d_a", "matmul", lambda a, b: a @ b, [f64(4, 3), f64(2, 3, 3, 5)], (0,)),
    ("matmul_size1_batch_b", "matmul", lambda a, b: a @ b, [f64(2, 3, 4, 3), f64(1, 1, 3, 5)], (1,)),
    ("matmul_bcast_batch_a", "matmul", lambda a, b: a @ b, [f64(1, 3, 4, 3), f64(2, 1, 3, 5)], (0,)),
    ("matmul_bcast_batch_b", "matmul", lambda a, b: a @ b, [f64(1, 3, 4, 3), f64(2, 1, 3, 5)], (1,)),
    ("matmul_batch_vec_b", "matmul", lambda a, b: a @ b, [f64(2, 4, 3), f64(3)], (1,)),
    ("matmul_vec_batch_a", "matmul", lambda a, b: a @ b, [f64(3), f64(1, 2, 3, 4)], (0,)),
    ("einsum_mm", "einsum", lambda a, b: aotjax.einsum("ij,jk->ik", a, b), [f64(2, 3), f64(3, 4)], (1,)),
    ("einsum_diag", "einsum", lambda a: aotjax.einsum("ii->i", a), [f64(3, 3)], (0,)),
    ("einsum_trace_outer", "einsum", lambda a, b: aotjax.einsum("ii,j->j", a, b), [f64(3, 3), f64(2)], (0,)),
    ("einsum_sum_only_here", "einsum", lambda a, b: aotjax.einsum("ij,k->i", a, b), [f64(2, 3), f64(4)], (1,)),
    ("einsum_implicit", "einsum", lambda a, b: aotjax.einsum("ij,jk", a, b), [f64(2, 3), f64(3, 4)], (0,)),
    ("einsum_ellipsis_bcast", "einsum", lambda a, b: aotjax.einsum("...ij,...jk->...ik", a, b),
     [f64(1, 2, 3), f64(4, 3, 2)], (0,)),
    ("einsum_ellipsis_rhs", "einsum", lambda a, b: aotjax.einsum("...ij,...jk->...ik", a, b),
     [f64(1, 2, 3), f64(4, 3, 2)], (1,)),
    ("select", "select", lambda x: x.select(1, 2), [f64(2, 3, 4)], (0,)),
    ("slice", "slice", lambda x: x[:, 1:3], [f64(2, 4)], (0,)),
    ("slice_step", "slice", lambda x: x[1::2], [f64(5, 2)], (0,)),
    ("diagonal", "diagonal", lambda x: x.diagonal(1), [f64(3, 4)], (0,)),
    ("diagonal_3d", "diagonal", lambda x: x.diagonal(-1, 0, 2), [f64(3, 2, 4)], (0,)),
    ("permute", "permute", lambda x: x.permute(2, 0, 1), [f64(2, 3, 4)], (0,)),
    ("view", "view", lambda x: x.view(3, 2, 2), [f64(2, 6)], (0,)),
    ("squeeze", "squeeze", lambda x: x.squeeze(1), [f64(2, 1, 3)], (0,)),
    ("unsqueeze", "unsqueeze", lambda x: x.unsqueeze(-1), [f64(2, 3)], (0,)),
    ("expand", "expand", lambda x: x.expand(2, 3, 4), [f64(3, 1)], (0,)),
    ("alias", "alias", lambda x: x[...], [f64(2, 3)], (0,)),
    ("select_scatter", "select_scatter", lambda b, y: select_scatter_p.bind(b, y, dim=1, index=2),
     [f64(2, 3, 4), f64(2, 4)], (0, 1)),
    ("slice_scatter", "slice_scatter", lambda b, y: slice_scatter_p.bind(b, y, dim=0, start=1, stop=5, step=2),
     [f64(5, 3), f64(2, 3)], (0, 1)),
    ("diagonal_scatter", "diagonal_scatter",
     lambda b, y: diagonal_scatter_p.bind(b, y, offset=-1, dim1=0, dim2=1), [f64(3, 4), f64(2)], (0, 1)),
    ("index", "index", lambda x, i: x[i], [f64(3, 2), idx(0, 2, 0, -1)], (0,)),
    ("index_two_dims", "index", lambda x, i, j: x[i, :, j], [f64(3, 2, 4), idx(0, 1, 0), idx(3, 3, -4)], (0,)),
    ("index_put_set", "index_put", lambda x, i, v: x.index_put((i,), v), [f64(4, 3), idx(2, 0), f64(2, 3)],
     (0, 2)),
    ("index_put_set_repeated", "index_put", lambda x, i, v: x.index_put((i,), v),
     [f64(4, 3), idx(1, 3, 1, 1), f64(4, 3)], (0, 2)),
    ("index_put_broadcast_value", "index_put", lambda x, i, v: x.index_put((i,), v),
     [f64(4, 3), idx(1, 2), f64(3)], (0, 2)),
    ("index_put_accumulate", "index_put", lambda x, i, v: x.index_put((i,), v, accumulate=True),
     [f64(4, 3), idx(1, 3, 1), f64(3, 1)], (0, 2)),
    ("gather", "gather", lambda x, i: x.gather(1, i), [f64(3, 4), idx([0, 3], [1, 1])], (0,)),
    ("scatter", "scatter", lambda x, i, s: x.scatter(1, i, s), [f64(3, 4), idx([0, 0], [3, 1]), f64(3, 3)],
     (0, 2)),
    ("scatter_scalar_src", "scatter", lambda x, i, s: x.scatter(0, i, s), [f64(3, 2), idx([2, 0]), f64()],
     (0, 2)),
    ("scatter_add", "scatter_add", lambda x, i, s: x.scatter_add(1, i, s),
     [f64(3, 4), idx([0, 0], [3, 1]), f64(2, 3)], (0, 2)),
    ("masked_fill", "masked_fill", lambda x, m, v: x.masked_fill(m, v), [f64(2, 3), mask(True, False, True), f64()],
     (0, 2)),
    ("masked_fill_constant", "masked_fill", lambda x, m: x.masked_fill(m, 1.5), [f64(2, 3), mask(False, True, True)],
     (0,)),
    ("index_add", "index_add", lambda x, i, s: x.index_add(1, i, s, alpha=2.0),
     [f64(2, 4), idx(3, 0, 3), f64(2, 3)], (0, 2)),
    ("copy", "copy", lambda d, s: copy_p.bind(d, s), [f64(2, 3), f64(3)], (0, 1)),
    ("fill", "fill", lambda x, v: fill_p.bind(x, v), [f64(2, 3), f64()], (0, 1)),
    ("cat", "cat", lambda x, y, z: aotjax.cat([x, y, z], dim=1), [f64(2, 1), f64(2, 3), f64(2, 2)], (0, 2)),
    ("flip", "flip", lambda x: x.flip(0, 2), [f64(2, 3, 4)], (0,)),
    ("roll", "roll", lambda x: x.roll((1, -2), (0, 1)), [f64(3, 4)], (0,)),
    ("roll_flat", "roll", lambda x: x.roll(5), [f64(3, 4)], (0,)),
    ("repeat", "repeat", lambda x: x.repeat(2, 1, 3), [f64(2, 3)], (0,)),
    ("tril", "tril", lambda x: x.tril(1), [f64(2, 3, 4)], (0,)),
    ("triu", "triu", lambda x: x.triu(-1), [f64(3, 3)], (0,)),
    ("clone", "clone", lambda x: x.clone(), [f64(2, 3)], (0,)),
    ("checkpoint_name", "checkpoint_name", lambda x: aotjax.checkpoint_name(x, "h"), [f64(2, 3)], (0,)),
    ("optimization_barrier", "optimization_barrier", lambda x, y: optimization_barrier_p.bind(x, y)[0] * 2.0 + y,
     [f64(2, 3), f64(3)], (0, 1)),
]


def _vdot(a, b) -> float:
    return float(np.vdot(np.asarray(a, np.float64), np.asarray(b, np.float64)))


@pytest.mark.parametrize("prim_name, fn, specs, linear", [row[1:] for row in T], ids=[row[0] for row in T])
def test_dot_product(prim_name, fn, specs, linear):
    rng = np.random.default_rng(0)
    args = [_make(s, rng) for s in specs]

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
    x = aotjax.ones(3, dtype=aotjax.float64)
    (ct,) = transpose_flat(lambda x: [x.detach() * 2.0], [UndefinedPrimal(x.aval)], [x], instantiate=False)
    assert isinstance(ct, Zero)
    (ct,) = transpose_flat(lambda x: [x.detach() + x], [UndefinedPrimal(x.aval)], [x])
    np.testing.assert_array_equal(ct.numpy(), np.ones(3))


def test_overwrite_with_repeated_indices_reads_back_only_the_update_that_landed():
    x, v = aotjax.zeros(3, dtype=aotjax.float64), aotjax.tensor([1.0, 2.0, 3.0], dtype=aotjax.float64)
    i = aotjax.tensor([1, 1, 0])
    out = x.index_put((i,), v)
    winner = int(np.flatnonzero(v.numpy() == out.numpy()[1])[0])
    (ct_v,) = transpose_flat(lambda v: [x.index_put((i,), v)], [UndefinedPrimal(v.aval)],
                             [aotjax.tensor([10.0, 20.0, 30.0], dtype=aotjax.float64)])
    expected = np.array([0.0, 0.0, 10.0])
    expected[winner] = 20.0
    np.testing.assert_array_equal(ct_v.numpy(), expected)


def test_backward_pass_evaluates_the_nonlinear_equations_forward():
    w = aotjax.tensor([0.5, 1.0, 2.0], dtype=aotjax.float64)
    jaxpr = aotjax.make_jaxpr(lambda x, w: x * w.sin() + x.sum())(w, w)
    assert [e.primitive.name for e in jaxpr.eqns] == ["sin", "mul", "reduce_sum", "add"]
    ct = aotjax.tensor([1.0, -1.0, 2.0], dtype=aotjax.float64)
    (ct_x,) = backward_pass(jaxpr, [], [UndefinedPrimal(w.aval), w], [ct])
    np.testing.assert_allclose(ct_x.numpy(), ct.numpy() * np.sin(w.numpy()) + ct.numpy().sum())


def test_cotangents_accumulate_over_every_use():
    x = aotjax.ones(2, 2, dtype=aotjax.float64)
    (ct,) = transpose_flat(lambda x: [x + x.t() - x * 3.0, x], [UndefinedPrimal(x.aval)],
                           [aotjax.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=aotjax.float64), Zero(x.aval)])
    np.testing.assert_allclose(ct.numpy(), np.array([[1.0, 2.0], [3.0, 4.0]]).T - 2 * np.array([[1, 2], [3, 4]]))


def test_symbolic_zeros():
    x = aotjax.ones(3, dtype=aotjax.float64)
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
