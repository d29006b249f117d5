"""The IR, the interpreter stack, make_jaxpr's pytree handling, typecheck and eval_jaxpr."""
import jax
import numpy as np
import pytest

import aotjax
from aotjax.core import (
    AliasingError,
    AotjaxError,
    ConcretizationError,
    Eqn,
    Jaxpr,
    JaxprTypeError,
    ShapedArray,
    Var,
    typecheck,
)


def test_shaped_array_prints_short_and_hashes():
    a = ShapedArray((2, 3), np.float32)
    assert str(a) == "f32[2,3]"
    assert a == ShapedArray([2, 3], "float32") and hash(a) == hash(ShapedArray((2, 3), np.float32))
    assert a.nbytes == 24


def test_make_jaxpr_pytrees_kwargs_and_out_tree():
    def f(params, x, *, scale):
        return {"y": x * params["w"] + params["b"], "z": (x.sin(), scale * 2)}

    params = {"w": aotjax.tensor([1.0, 2.0]), "b": aotjax.tensor([0.5, 0.5])}
    x = aotjax.tensor([3.0, 4.0])
    closed = aotjax.make_jaxpr(f)(params, x, scale=aotjax.tensor(2.0))
    assert len(closed.jaxpr.invars) == 4  # b, w (dict keys sorted), x, scale
    out = aotjax.eval_jaxpr(closed, params["b"], params["w"], x, aotjax.tensor(2.0))
    tree = jax.tree_util.tree_unflatten(closed.out_tree, out)
    np.testing.assert_allclose(tree["y"].numpy(), [3.5, 8.5])
    np.testing.assert_allclose(tree["z"][1].numpy(), 4.0)


def test_static_argnums_are_python_values_and_scalars_are_traced():
    def f(x, n, s):
        for _ in range(n):  # a static int may drive Python control flow
            x = x * s
        return x

    closed = aotjax.make_jaxpr(f, static_argnums=1)(aotjax.ones(2), 3, 2.0)
    assert [e.primitive.name for e in closed.eqns] == ["mul"] * 3
    assert [v.aval for v in closed.jaxpr.invars] == [ShapedArray((2,), np.float32), ShapedArray((), np.float32)]


def test_return_shape():
    closed, shape = aotjax.make_jaxpr(lambda x: (x, x.t()), return_shape=True)(aotjax.ones(2, 3))
    assert shape[1].shape == (3, 2) and shape[1].dtype == np.float32
    assert closed.out_tree.num_leaves == 2


def test_python_control_flow_on_tracer_raises_with_source_line():
    def f(x):
        if x.sum() > 0:  # line under test
            return x
        return -x

    with pytest.raises(ConcretizationError, match=r"test_core.py:\d+ \(f\).*aotjax.where"):
        aotjax.make_jaxpr(f)(aotjax.ones(3))


def test_closed_over_tensor_is_a_constant_and_cannot_be_mutated():
    w = aotjax.tensor([1.0, 2.0])
    closed = aotjax.make_jaxpr(lambda x: x * w)(aotjax.ones(2))
    assert len(closed.jaxpr.constvars) == 1
    with pytest.raises(AliasingError, match=r"add_: in-place write to a tensor captured.*test_core.py"):
        aotjax.make_jaxpr(lambda x: w.add_(x))(aotjax.ones(2))
    np.testing.assert_allclose(w.numpy(), [1.0, 2.0])


@pytest.mark.parametrize("how", ["eager", "make_jaxpr", "functionalize", "jit", "grad"])
def test_bind_refuses_an_unhashable_param_under_every_interpreter(how):
    from aotjax.ops.shape.views import permute_p

    def f(x):
        return permute_p.bind(x, perm=[1, 0]).sum()  # a list: params must be hashable

    run = {"eager": f, "make_jaxpr": aotjax.make_jaxpr(f), "functionalize": aotjax.functionalize(f),
           "jit": aotjax.jit(f), "grad": aotjax.grad(f)}[how]
    with pytest.raises(TypeError, match=r"permute: parameters must be hashable .* 'perm' \(list\) is not "
                                        r"\(at test_core.py:\d+"):
        run(aotjax.ones(2, 3))


def test_escaped_tracer_is_reported():
    leaked = []
    aotjax.make_jaxpr(lambda x: leaked.append(x) or x)(aotjax.ones(2))
    with pytest.raises(AotjaxError, match="escaped"):
        aotjax.make_jaxpr(lambda y: y + leaked[0])(aotjax.ones(2))


def test_a_tensor_a_compiled_forward_stores_on_self_is_refused_when_used_eagerly():
    class Cached(aotjax.nn.Module):
        def forward(self, x):
            self.cache = x * 2  # NOTE: a traced value kept past the call
            return x + 1
    m = Cached()
    aotjax.jit(m)(aotjax.ones(2))
    for use in (lambda: m.cache + 1, lambda: m.cache.exp(), lambda: aotjax.ones(2) * m.cache):
        with pytest.raises(AotjaxError, match=r"escaped its transform: .* \(at test_core.py:\d+.*an attribute"):
            use()


def test_nested_make_jaxpr_captures_outer_tracers_as_constants():
    def outer(x):
        inner = aotjax.make_jaxpr(lambda y: y * x)(x)
        assert len(inner.jaxpr.constvars) == 1  # the outer tracer x, captured
        return aotjax.eval_jaxpr(inner, x)[0]

    closed = aotjax.make_jaxpr(outer)(aotjax.tensor([2.0, 3.0]))
    out = aotjax.eval_jaxpr(closed, aotjax.tensor([2.0, 3.0]))[0]
    np.testing.assert_allclose(out.numpy(), [4.0, 9.0])


def test_mutation_equations_rebind_the_written_variable():
    def f(a):
        a.mul_(2)
        return a + 1

    closed = aotjax.make_jaxpr(f)(aotjax.ones(3))
    mul_eqn, add_eqn = closed.eqns
    assert mul_eqn.primitive.name == "mul_"
    assert add_eqn.inputs[0] is mul_eqn.outputs[0]  # the tensor after the write
    x = aotjax.ones(3)
    out = aotjax.eval_jaxpr(closed, x)[0]
    np.testing.assert_allclose(x.numpy(), 2.0)  # reference semantics: the argument is written
    np.testing.assert_allclose(out.numpy(), 3.0)


def test_metadata_mutation_changes_shape_in_the_trace():
    def f(a):
        a.t_()
        return a

    closed = aotjax.make_jaxpr(f)(aotjax.zeros(2, 3))
    assert closed.out_avals == [ShapedArray((3, 2), np.float32)]
    x = aotjax.zeros(2, 3)
    (out,) = aotjax.eval_jaxpr(closed, x)
    assert out is x and x.shape == (3, 2) and x.stride() == (1, 3)


def test_typecheck_rejects_malformed_jaxprs():
    closed = aotjax.make_jaxpr(lambda x: x.sin() + x)(aotjax.ones(2))
    typecheck(closed)
    jaxpr = closed.jaxpr
    swapped = Jaxpr(jaxpr.constvars, jaxpr.invars, list(reversed(jaxpr.eqns)), jaxpr.outvars)
    with pytest.raises(JaxprTypeError, match="used before it is bound"):
        typecheck(swapped)
    sin_eqn = jaxpr.eqns[0]
    bad = Eqn(sin_eqn.primitive, sin_eqn.inputs, [Var(ShapedArray((5,), np.float32))], {})
    with pytest.raises(JaxprTypeError, match="sin"):
        typecheck(Jaxpr([], jaxpr.invars, [bad], bad.outputs))


def test_eager_views_share_storage_and_reads_are_cached_per_version():
    x = aotjax.tensor([[1.0, 2.0], [3.0, 4.0]])
    v = x.t()
    first = np.asarray(v)
    x.select(0, 0).mul_(10)
    np.testing.assert_allclose(first, [[1, 3], [2, 4]])
    np.testing.assert_allclose(v.numpy(), [[10, 3], [20, 4]])
