"""Lowering: `to_jax` of traced pure programs equals eager under jax.jit, jax.grad and jax.vmap;
`compile` equals eager and exposes StableHLO and XLA's analyses; in-place programs are refused."""
import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import aotjax
from aotjax.core.errors import UnsupportedError
from tests.helpers import assert_trees_close, copy_tree, to_numpy


def _t(*shape, seed=0):
    return aotjax.tensor(np.random.default_rng(seed).normal(size=shape).astype(np.float32))


def _arrays(tree):
    return jax.tree_util.tree_map(lambda x: jnp.asarray(x.numpy()) if isinstance(x, aotjax.Tensor) else x, tree)


# -- pure programs, as a table: (name, function, argument factory) -----------------------------------
def p_chain(x):
    return (x.sin() * x + 1.0).t()


def p_views(x, y):
    return x.t().select(0, 1) * 2 + y.permute(1, 0)[1]


def p_pytree(params, x):
    return {"out": x * params["w"] + params["b"], "aux": (x.sin(), x.t())}


def p_mlp(x, w1, w2):
    return (x @ w1).relu() @ w2


def p_reduce_reshape(x):
    return x.reshape(3, 4).sum(dim=1) + x.view(-1)[:3]


def p_index(x):
    return x[1:, ::2] * x[0, 0] + x[:, None].sum()


_C = aotjax.tensor([1.0, -2.0, 3.0])


def p_const(x):
    return x * _C + 0.5  # a captured tensor becomes a constant of the program


PURE = [
    ("chain", p_chain, lambda: (_t(2, 3),)),
    ("views", p_views, lambda: (_t(3, 2), _t(3, 2, seed=1))),
    ("pytree", p_pytree, lambda: ({"w": _t(3), "b": _t(3, seed=1)}, _t(3, seed=2))),
    ("mlp", p_mlp, lambda: (_t(4, 8), _t(8, 16, seed=1), _t(16, 3, seed=2))),
    ("reduce_reshape", p_reduce_reshape, lambda: (_t(12),)),
    ("index", p_index, lambda: (_t(3, 4),)),
    ("const", p_const, lambda: (_t(3),)),
]


@pytest.fixture(params=PURE, ids=[row[0] for row in PURE])
def program(request):
    _, f, make_args = request.param
    args = make_args()
    return f, args, aotjax.make_jaxpr(f)(*copy_tree(args))


def test_to_jax_equals_eager(program):
    f, args, jaxpr = program
    expected = f(*copy_tree(args))
    got = aotjax.to_jax(jaxpr)(*_arrays(args))
    assert all(isinstance(x, jax.Array) for x in jax.tree_util.tree_leaves(got))
    assert_trees_close(to_numpy(expected), jax.tree_util.tree_map(np.asarray, got), rtol=1e-5, atol=1e-5)


def test_to_jax_inside_jit(program):
    f, args, jaxpr = program
    got = jax.jit(aotjax.to_jax(jaxpr))(*_arrays(args))
    assert_trees_close(to_numpy(f(*copy_tree(args))), jax.tree_util.tree_map(np.asarray, got), rtol=1e-5, atol=1e-5)


def test_to_jax_accepts_tensors(program):
    f, args, jaxpr = program
    got = aotjax.to_jax(jaxpr)(*copy_tree(args))
    assert_trees_close(to_numpy(f(*copy_tree(args))), jax.tree_util.tree_map(np.asarray, got), rtol=1e-5, atol=1e-5)


def test_compile_equals_eager(program):
    f, args, jaxpr = program
    compiled = aotjax.compile(jaxpr)
    got = compiled(*copy_tree(args))
    assert all(isinstance(x, aotjax.Tensor) for x in jax.tree_util.tree_leaves(got))
    assert_trees_close(f(*copy_tree(args)), got, rtol=1e-5, atol=1e-5)


def test_grad_of_to_jax_matches_jax_numpy():
    x, w1, w2 = _t(4, 8), _t(8, 16, seed=1), _t(16, 3, seed=2)
    f = aotjax.to_jax(aotjax.make_jaxpr(p_mlp)(x, w1, w2))

    def reference(x, w1, w2):
        return jnp.maximum(x @ w1, 0) @ w2

    args = _arrays((x, w1, w2))
    got = jax.grad(lambda *a: f(*a).sum(), argnums=(0, 1, 2))(*args)
    expected = jax.grad(lambda *a: reference(*a).sum(), argnums=(0, 1, 2))(*args)
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)


def test_grad_of_to_jax_through_views_and_pytrees():
    params, x = {"w": _t(3), "b": _t(3, seed=1)}, _t(3, seed=2)
    f = aotjax.to_jax(aotjax.make_jaxpr(p_pytree)(params, x))

    def loss(fn, params, x):
        out = fn(params, x)
        return (out["out"] ** 2).sum() + out["aux"][0].sum() + out["aux"][1][1].sum()

    def reference(params, x):
        return {"out": x * params["w"] + params["b"], "aux": (jnp.sin(x), x.T)}

    got = jax.grad(lambda p, x: loss(f, p, x), argnums=(0, 1))(*_arrays((params, x)))
    expected = jax.grad(lambda p, x: loss(reference, p, x), argnums=(0, 1))(*_arrays((params, x)))
    jax.tree_util.tree_map(lambda g, e: np.testing.assert_allclose(g, e, rtol=1e-6), got, expected)


def test_vmap_of_to_jax():
    x = _t(5, 2, 3)
    f = aotjax.to_jax(aotjax.make_jaxpr(p_chain)(aotjax.ones(2, 3)))
    got = jax.vmap(f)(jnp.asarray(x.numpy()))
    expected = np.stack([p_chain(aotjax.tensor(x.numpy()[i])).numpy() for i in range(5)])
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_flat_jaxpr_takes_flat_inputs_and_returns_a_list():
    closed = aotjax.make_jaxpr(p_pytree)({"w": _t(3), "b": _t(3)}, _t(3))
    flat = aotjax.ClosedJaxpr(closed.jaxpr, closed.consts)
    outs = aotjax.to_jax(flat)(*[jnp.ones(3, jnp.float32)] * 3)
    assert isinstance(outs, list) and len(outs) == 3  # x.t() of a 1-d x is x itself


def test_literal_and_scalar_outputs_and_python_scalar_inputs():
    closed = aotjax.make_jaxpr(lambda x, s: (x * s, 1.5))(aotjax.ones(2), 2.0)
    y, lit = aotjax.to_jax(closed)(jnp.ones(2, jnp.float32), 3.0)
    np.testing.assert_allclose(y, [3.0, 3.0])
    assert float(lit) == 1.5


def test_wrong_structure_or_type_is_a_clear_error():
    f = aotjax.to_jax(aotjax.make_jaxpr(p_views)(_t(3, 2), _t(3, 2)))
    with pytest.raises(TypeError, match="structure"):
        f(jnp.ones((3, 2), jnp.float32))
    with pytest.raises(TypeError, match=r"input 1 should be f32\[3,2\] as traced, got f32\[2,2\]"):
        f(jnp.ones((3, 2), jnp.float32), jnp.ones((2, 2), jnp.float32))


def _next_line() -> int:
    return inspect.currentframe().f_back.f_lineno + 1


def test_mutation_jaxpr_raises_naming_primitive_and_line():
    def f(x):
        y = x.t()
        line[0] = _next_line()
        y.sin_()
        return y

    line = [0]
    closed = aotjax.make_jaxpr(f)(aotjax.ones(2, 3))
    for lower in (aotjax.to_jax, aotjax.compile):
        with pytest.raises(UnsupportedError, match=rf"'sin_'.*test_lowering.py:{line[0]} \(f\).*functionalize"):
            lower(closed)


def test_metadata_mutation_is_refused_too():
    closed = aotjax.make_jaxpr(lambda x: x.t_())(aotjax.ones(2, 3))
    with pytest.raises(UnsupportedError, match="'permute_'"):
        aotjax.to_jax(closed)


def test_view_only_programs_lower():
    closed = aotjax.make_jaxpr(lambda x: x.t()[0])(aotjax.tensor([[1.0, 2.0], [3.0, 4.0]]))
    np.testing.assert_allclose(aotjax.to_jax(closed)(jnp.array([[1.0, 2.0], [3.0, 4.0]], jnp.float32)), [1.0, 3.0])


def test_compiled_stages_text_and_analyses():
    x, w1, w2 = _t(4, 8), _t(8, 16, seed=1), _t(16, 3, seed=2)
    compiled = aotjax.compile(aotjax.make_jaxpr(p_mlp)(x, w1, w2))
    text = compiled.as_text()
    assert "stablehlo" in text and "func.func" in text and "tensor<4x8xf32>" in text
    cost = compiled.cost_analysis()
    assert cost["flops"] >= 2 * 4 * 8 * 16
    assert compiled.memory_analysis().argument_size_in_bytes == (4 * 8 + 8 * 16 + 16 * 3) * 4
    assert compiled.jaxpr.in_avals[0].shape == (4, 8)
    assert "f32[4,8]" in repr(compiled)


def test_compiled_accepts_jax_and_numpy_arrays():
    compiled = aotjax.compile(aotjax.make_jaxpr(p_chain)(aotjax.ones(2, 3)))
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(compiled(a).numpy(), compiled(jnp.asarray(a)).numpy())
    np.testing.assert_allclose(compiled(a).numpy(), p_chain(aotjax.tensor(a)).numpy(), rtol=1e-6)


def test_donation_never_deletes_the_users_array():
    closed = aotjax.make_jaxpr(lambda x, y: x * 2 + y)(aotjax.ones(3), aotjax.ones(3))
    compiled = aotjax.compile(closed, donate_argnums=0)
    assert compiled.donated == (0,)
    user = jnp.arange(3.0, dtype=jnp.float32)
    t = aotjax.tensor(user)  # wraps the user's array without a copy: a copy is donated instead
    out = compiled(t, aotjax.ones(3))
    np.testing.assert_allclose(out.numpy(), [1.0, 3.0, 5.0])
    np.testing.assert_allclose(np.asarray(user), [0.0, 1.0, 2.0])
    np.testing.assert_allclose(t.numpy(), [0.0, 1.0, 2.0])


def test_donate_argnums_out_of_range():
    closed = aotjax.make_jaxpr(lambda x: x * 2)(aotjax.ones(3))
    with pytest.raises(ValueError, match="donate_argnums"):
        aotjax.compile(closed, donate_argnums=3)


def test_sub_jaxprs_are_checked_for_mutation():
    from aotjax.core.ir import Eqn
    from aotjax.lowering import check_lowerable

    inner = aotjax.make_jaxpr(lambda x: x.sin_())(aotjax.ones(2))
    outer = aotjax.make_jaxpr(lambda x: x.sin())(aotjax.ones(2))
    eqn = outer.eqns[0]
    outer.jaxpr.eqns[0] = Eqn(eqn.primitive, eqn.inputs, eqn.outputs, {"body": inner}, eqn.source_info)
    with pytest.raises(UnsupportedError, match="'sin_'"):
        check_lowerable(outer)


def _located_loss(x, w):
    h = (x @ w).tanh()  # the line the locations must name
    return (h * h).sum()


def test_stablehlo_locations_name_the_users_lines_forward_and_backward():
    import inspect

    line = inspect.getsourcelines(_located_loss)[1] + 1
    x, w = aotjax.ones(2, 3), aotjax.ones(3, 4)
    jit_text = aotjax.jit(_located_loss).lower(x, w).as_text(debug_info=True)
    assert f"matmul@test_lowering.py:{line} (_located_loss)" in jit_text
    assert f"tanh@test_lowering.py:{line} (_located_loss)" in jit_text
    aot_text = aotjax.aot(_located_loss).lower(x, w).as_text(debug_info=True)
    backward = aot_text.split("// backward")[1]
    assert f"@test_lowering.py:{line} (_located_loss)" in backward  # the backward's ops point at the forward's line
