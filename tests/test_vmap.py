"""vmap: the API and its errors, the op table batched against a Python loop of the op over the examples,
nesting and compositions (jit, grad), mutation at vmap's boundary, and the primitives without a batching rule."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import aotjax
from aotjax.core import primitive as primitive_module
from aotjax.core.primitive import Kind, Primitive, all_primitives
from aotjax.interpreters.batching import batching_rules, collective_rules
from aotjax.ops.base.combinators import elementwise
from tests.helpers import FLOAT
from tests.op_records import OpRecord, as_np, flat, records, sample_f64, skip_without_x64

T = aotjax.tensor
B = 3  # examples
TABLE = records(differentiated=True)


def _examples(row: OpRecord) -> list[list[np.ndarray]]:
    """`B` inputs of `row` (one list of operands per example), drawn from its derivative domain."""
    return [[sample_f64(row.domain_of(i, grad=True), s, seed=i + 17 * k).astype(row.diff_dtype)
             for i, s in enumerate(row.shapes)] for k in range(B)]


def _axis_combinations(n: int) -> list[tuple]:
    combos = [c for c in itertools.product((0, -1, None), repeat=n) if any(a is not None for a in c)]
    return combos if n <= 2 else combos[:6]


def _stacked(arrays: list[np.ndarray], axis):
    return T(arrays[0]) if axis is None else T(np.stack(arrays, axis=axis))


@pytest.mark.parametrize("row", TABLE, ids=repr)
def test_op_table_vmap_equals_loop(row: OpRecord):
    skip_without_x64(row)
    examples = _examples(row)
    n = len(row.shapes)
    for axes in _axis_combinations(n):
        per_example = [[ex[i] if axes[i] is not None else examples[0][i] for i in range(n)] for ex in examples]
        expected = [flat(row.fn(*map(T, ops))) for ops in per_example]
        args = [_stacked([ops[i] for ops in per_example], axes[i]) for i in range(n)]
        got = flat(aotjax.vmap(row.fn, in_axes=axes)(*args))
        for j, g in enumerate(got):
            ref = np.stack([as_np(e[j]) for e in expected])
            assert g.shape == ref.shape and g.dtype == expected[0][j].dtype, (axes, g.aval, ref.shape)
            np.testing.assert_allclose(as_np(g), ref, rtol=1e-5, atol=1e-6, err_msg=str(axes))


def test_out_axes_and_unbatched_output():
    x = T(np.arange(6.0, dtype=FLOAT).reshape(2, 3))
    out = aotjax.vmap(lambda a: (a * 2, aotjax.ones(2)), out_axes=(1, 0))(x)
    np.testing.assert_allclose(as_np(out[0]), (np.arange(6.0).reshape(2, 3) * 2).T)
    np.testing.assert_allclose(as_np(out[1]), np.ones((2, 2)))
    with pytest.raises(ValueError, match="varies over the examples"):
        aotjax.vmap(lambda a: a * 2, out_axes=None)(x)


def test_pytrees_negative_axes_and_torch_keywords():
    x = T(np.arange(6.0, dtype=FLOAT).reshape(2, 3))
    params = {"w": T(np.ones(2, dtype=FLOAT)), "b": T(np.ones((), dtype=FLOAT))}
    out = aotjax.vmap(lambda p, a: (p["w"] * a).sum() + p["b"], in_axes=({"w": None, "b": None}, -1))(params, x)
    np.testing.assert_allclose(as_np(out), np.arange(6.0).reshape(2, 3).sum(0) + 1)
    out2 = aotjax.vmap(lambda a: a.sum(), in_dims=1, out_dims=0)(x)
    np.testing.assert_allclose(as_np(out2), as_np(out) - 1)
    assert aotjax.vmap(lambda: aotjax.ones(2), axis_size=4)().shape == (4, 2)


def test_errors_name_the_argument_path():
    x, y = aotjax.ones(2, 3), aotjax.ones(4, 3)
    with pytest.raises(ValueError, match=r"different sizes.*\[0\]: 2.*\[1\]: 4"):
        aotjax.vmap(lambda a, b: a + b)(x, y)
    with pytest.raises(ValueError, match=r"in axis 2 of argument \[0\] is out of range"):
        aotjax.vmap(lambda a: a, in_axes=2)(x)
    with pytest.raises(TypeError, match=r"output \[1\] is a int"):
        aotjax.vmap(lambda a: (a, 1))(x)
    with pytest.raises(ValueError, match="no argument is batched"):
        aotjax.vmap(lambda a: a, in_axes=None)(x)
    with pytest.raises(ValueError, match="not a pytree prefix"):
        aotjax.vmap(lambda p: p["w"], in_axes=({"v": 0},))({"w": x})
    with pytest.raises(ValueError, match="randomness"):
        aotjax.vmap(lambda a: a, randomness="sometimes")


def test_missing_rule_names_the_primitive_and_vmap(monkeypatch):
    monkeypatch.setattr(primitive_module, "_registry", list(primitive_module._registry))
    prim = Primitive("fancy_op", kind=Kind.FUNCTIONAL)
    prim.abstract_eval = lambda x: x
    with pytest.raises(NotImplementedError, match="batching rule for primitive 'fancy_op'.*vmap"):
        aotjax.vmap(lambda a: prim.bind(a))(aotjax.ones(2, 3))


def _matmul_loop(a, b):
    return np.stack([np.asarray(as_np(ai)) @ np.asarray(as_np(bi)) for ai, bi in zip(a, b)])


def test_nested_vmap_of_matmul_is_one_matmul_equation():
    a = T(np.random.default_rng(0).normal(size=(2, 5, 3, 4)).astype(FLOAT))
    b = T(np.random.default_rng(1).normal(size=(5, 2, 4, 3)).astype(FLOAT))
    f = aotjax.vmap(aotjax.vmap(aotjax.matmul), in_axes=(1, 0))
    out = f(a, b)
    ref = np.einsum("ijkl,jilm->jikm", as_np(a), as_np(b))
    np.testing.assert_allclose(as_np(out), ref, rtol=1e-5, atol=1e-5)
    jaxpr = aotjax.make_jaxpr(f)(a, b)
    assert [e.primitive.name for e in jaxpr.jaxpr.eqns].count("matmul") == 1


def test_elementwise_keeps_the_batch_axis_where_it_is():
    x = aotjax.ones(3, 5)
    jaxpr = aotjax.make_jaxpr(aotjax.vmap(lambda a: aotjax.exp(a) * 2 + a, in_axes=1, out_axes=1))(x)
    assert "permute" not in {e.primitive.name for e in jaxpr.jaxpr.eqns}


def test_jit_of_vmap_and_vmap_of_jit_free_function():
    x = T(np.arange(12.0, dtype=FLOAT).reshape(3, 4))
    f = aotjax.vmap(lambda a: (aotjax.sin(a) * a).sum())
    np.testing.assert_allclose(as_np(aotjax.jit(f)(x)), as_np(f(x)), rtol=1e-6)


def test_per_example_gradients_equal_a_loop_of_grad():
    w = T(np.linspace(-1, 1, 4).astype(FLOAT))
    xs = T(np.random.default_rng(2).normal(size=(5, 4)).astype(FLOAT))

    def loss(w, x):
        return aotjax.tanh(x @ w) ** 2

    per_example = aotjax.vmap(aotjax.grad(loss), in_axes=(None, 0))(w, xs)
    loop = np.stack([as_np(aotjax.grad(loss)(w, xs[i])) for i in range(5)])
    np.testing.assert_allclose(as_np(per_example), loop, rtol=1e-5, atol=1e-6)


def test_in_place_write_into_a_batched_input_writes_the_callers_tensor():
    x = T(np.arange(6.0, dtype=FLOAT).reshape(3, 2))
    y = T(np.ones(3, dtype=FLOAT))
    out = aotjax.vmap(lambda a, b: a.add_(b) * 2, in_axes=(1, None))(x, y)
    np.testing.assert_allclose(as_np(x), np.arange(6.0).reshape(3, 2) + 1)
    np.testing.assert_allclose(as_np(out), (np.arange(6.0).reshape(3, 2) + 1).T * 2)


def test_in_place_write_into_a_view_argument_writes_through():
    base = T(np.zeros((2, 3, 2), dtype=FLOAT))
    aotjax.vmap(lambda a: a.add_(1.0))(base[:, :, 0])
    np.testing.assert_allclose(as_np(base)[:, :, 0], np.ones((2, 3)))
    np.testing.assert_allclose(as_np(base)[:, :, 1], np.zeros((2, 3)))


def test_tensor_created_inside_and_written_with_a_batched_value_is_batched():
    x = T(np.arange(6.0, dtype=FLOAT).reshape(2, 3))

    def f(a):
        z = aotjax.zeros(3)
        z.copy_(a * 2)
        return z

    np.testing.assert_allclose(as_np(aotjax.vmap(f)(x)), np.arange(6.0).reshape(2, 3) * 2)


def test_write_through_a_view_of_a_tensor_created_inside():
    x = T(np.arange(6.0, dtype=FLOAT).reshape(2, 3))

    def f(a):
        z = aotjax.zeros(2, 3)
        row = z[1]
        row[:2].copy_(a[1:])
        return z, row

    z, row = aotjax.vmap(f)(x)
    expected = np.zeros((2, 2, 3))
    expected[:, 1, :2] = np.arange(6.0).reshape(2, 3)[:, 1:]
    np.testing.assert_allclose(as_np(z), expected)
    np.testing.assert_allclose(as_np(row), expected[:, 1])


def test_a_tensor_made_inside_and_written_through_a_diagonal_view_is_batched():
    """`diag_embed` the PyTorch way, `zeros` then `diagonal().copy_(v)`: torch's vmap refuses it (a batched write into
    an unbatched tensor); here the tensor made inside becomes batched, its view seeing the write."""
    import torch

    v = np.arange(6.0, dtype=FLOAT).reshape(2, 3)

    def diag_embed(v):
        z = aotjax.zeros(3, 3)
        z.diagonal().copy_(v)
        return z

    for run in (aotjax.vmap(diag_embed), aotjax.jit(aotjax.vmap(diag_embed))):
        np.testing.assert_array_equal(as_np(run(T(v))), torch.diag_embed(torch.tensor(v)).numpy())
    x = np.arange(24.0, dtype=FLOAT).reshape(2, 3, 4)
    got = aotjax.vmap(lambda a: a.diagonal(1), in_axes=1)(T(x))
    np.testing.assert_array_equal(as_np(got), np.stack([np.diagonal(x[:, i], 1) for i in range(3)]))


NO_OPERANDS = {"arange", "eye", "full", "linspace", "random_seed",  # creation ops: never batched
               "axis_index"}  # a mesh axis's device index: the same for every example


def test_every_primitive_has_a_batching_rule():
    """Every functional primitive with operands has a batching rule (a collective, its rule of the named axis);
    creation ops with no operand need none: they are never batched."""
    missing = {p.name for p in all_primitives()
               if p.kind is not Kind.MUTATION and p not in batching_rules and p not in collective_rules}
    assert missing - NO_OPERANDS == set()


def test_a_new_elementwise_primitive_gets_a_batching_rule_with_no_registration(monkeypatch):
    monkeypatch.setattr(primitive_module, "_registry", list(primitive_module._registry))
    cube = elementwise("scratch_cube", lambda x: x ** 3)
    x = T(np.arange(6.0, dtype=FLOAT).reshape(2, 3))
    np.testing.assert_allclose(as_np(aotjax.vmap(cube.bind, in_axes=1)(x)), (np.arange(6.0).reshape(2, 3) ** 3).T)
