"""custom_jvp and custom_vjp: the user's rules are used by every derivative transform, inside and
around jit and make_jaxpr, and agree with jax.custom_jvp / jax.custom_vjp on the same math."""
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import aotjax
from aotjax.core.errors import AliasingError, ShapeError, UnsupportedError


def T(x, dtype=aotjax.float32):
    return aotjax.tensor(np.asarray(x), dtype=dtype)


def close(a, b, rtol=1e-6, atol=1e-6):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol)


X = [-3.0, 0.0, 1.5, 50.0, 100.0]


# -- a numerically stable log(1 + exp(x)): custom_jvp ------------------------------------------------
@aotjax.custom_jvp
def log1pexp(x):
    return aotjax.log(1.0 + aotjax.exp(x))


@log1pexp.defjvp
def log1pexp_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return log1pexp(x), t * aotjax.sigmoid(x)


@jax.custom_jvp
def jax_log1pexp(x):
    return jnp.log(1.0 + jnp.exp(x))


@jax_log1pexp.defjvp
def jax_log1pexp_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return jax_log1pexp(x), t * jax.nn.sigmoid(x)


def _loss(x):
    return log1pexp(x).sum()


def _jax_grad():
    return jax.grad(lambda x: jax_log1pexp(x).sum())(jnp.asarray(X, jnp.float32))


def test_eager_call_is_the_primal_function():
    x = T(X)
    close(log1pexp(x)[:3], np.logaddexp(0.0, X[:3]), rtol=1e-6)
    assert not np.isfinite(log1pexp(x).numpy()[-1])  # the naive primal overflows, as in jax


@pytest.mark.parametrize("transform", [
    lambda f: aotjax.grad(f),
    lambda f: aotjax.jit(aotjax.grad(f)),
    lambda f: aotjax.grad(aotjax.jit(f)),
], ids=["grad", "jit_grad", "grad_jit"])
def test_custom_jvp_grad_matches_jax(transform):
    g = transform(_loss)(T(X))
    assert np.all(np.isfinite(g.numpy()))  # the naive derivative would be nan at 100
    close(g, _jax_grad())


def test_custom_jvp_jvp_and_vjp_match_jax():
    x, t = T(X), T([1.0, 2.0, 3.0, 4.0, 5.0])
    out, t_out = aotjax.jvp(log1pexp, (x,), (t,))
    ref_out, ref_t = jax.jvp(jax_log1pexp, (jnp.asarray(X, jnp.float32),), (jnp.asarray(t.numpy()),))
    close(out, ref_out)
    close(t_out, ref_t)
    out, f_vjp = aotjax.vjp(log1pexp, x)
    (ct,) = f_vjp(t)
    _, ref_vjp = jax.vjp(jax_log1pexp, jnp.asarray(X, jnp.float32))
    close(ct, ref_vjp(jnp.asarray(t.numpy()))[0])


def test_custom_jvp_second_derivative_matches_jax():
    d2 = aotjax.grad(aotjax.grad(lambda x: log1pexp(x)))
    ref = jax.grad(jax.grad(jax_log1pexp))
    for v in [0.0, 1.0, 30.0]:
        close(d2(T(v)), ref(jnp.float32(v)), rtol=1e-5)


def test_custom_jvp_jacfwd_and_jacrev():
    x = T([0.0, 100.0])
    expected = np.diag([0.5, 1.0])
    close(aotjax.jacfwd(log1pexp)(x), expected)
    close(aotjax.jacrev(log1pexp)(x), expected)


def test_make_jaxpr_shows_one_call_and_grad_uses_the_rule():
    text = str(aotjax.make_jaxpr(_loss)(T(X)))
    assert "custom_jvp_call[name=log1pexp jvp=log1pexp_jvp call=" in text and "exp" in text
    g_text = str(aotjax.make_jaxpr(aotjax.grad(_loss))(T(X)))
    assert "sigmoid" in g_text


def test_traced_program_evaluates_and_compiles():
    jaxpr = aotjax.make_jaxpr(_loss)(T([0.0, 1.0]))
    (out,) = aotjax.eval_jaxpr(jaxpr, T([0.0, 1.0]))
    close(out, np.log(2.0) + np.log1p(np.e), rtol=1e-6)
    close(aotjax.compile(jaxpr)(T([0.0, 1.0])), out)
    close(aotjax.jit(_loss)(T([0.0, 1.0])), out)


def test_zero_tangent_keeps_the_call_and_repeated_calls_share_one_jaxpr():
    def f(x, y):
        return (x * log1pexp(y)).sum()
    for _ in range(2):
        g = aotjax.grad(f)(T([1.0, 2.0]), T([0.0, 2.0]))  # y is not differentiated
        close(g, np.logaddexp(0.0, [0.0, 2.0]))
    calls = [e.params["call"] for e in aotjax.make_jaxpr(_loss)(T(X)).eqns if e.primitive.name == "custom_jvp_call"]
    again = [e.params["call"] for e in aotjax.make_jaxpr(_loss)(T(X)).eqns if e.primitive.name == "custom_jvp_call"]
    assert calls[0] is again[0]


# -- custom_vjp: a backward rule that is not the true derivative -------------------------------------
@aotjax.custom_vjp
def double_grad(x):
    return x


double_grad.defvjp(lambda x: (x, None), lambda _, ct: (2.0 * ct,))


@jax.custom_vjp
def jax_double_grad(x):
    return x


jax_double_grad.defvjp(lambda x: (x, None), lambda _, ct: (2.0 * ct,))


def _dg_loss(x):
    return (double_grad(x) * x).sum()


def _jax_dg_loss(x):
    return (jax_double_grad(x) * x).sum()


@pytest.mark.parametrize("transform", [
    lambda f: aotjax.grad(f),
    lambda f: aotjax.jit(aotjax.grad(f)),
    lambda f: aotjax.grad(aotjax.jit(f)),
], ids=["grad", "jit_grad", "grad_jit"])
def test_custom_vjp_grad_uses_the_rule(transform):
    x = T([1.0, -2.0, 3.0])
    close(transform(_dg_loss)(x), jax.grad(_jax_dg_loss)(jnp.asarray([1.0, -2.0, 3.0], jnp.float32)))
    close(transform(_dg_loss)(x), 3 * x.numpy())  # 2x through the rule + x directly, not 2x
    assert np.array_equal(double_grad(x).numpy(), x.numpy())


def test_custom_vjp_under_vjp_make_jaxpr_and_jacrev():
    x = T([1.0, 2.0])
    out, f_vjp = aotjax.vjp(double_grad, x)
    close(out, x)
    close(f_vjp(T([1.0, 10.0]))[0], [2.0, 20.0])
    text = str(aotjax.make_jaxpr(aotjax.grad(_dg_loss))(x))
    assert "custom_vjp_call" not in text and "mul 2.0" in text
    assert "custom_vjp_call[name=double_grad" in str(aotjax.make_jaxpr(_dg_loss)(x))
    close(aotjax.jacrev(double_grad)(x), 2 * np.eye(2))


@aotjax.custom_vjp
def clip_gradient(lo, hi, x):
    return x


clip_gradient.defvjp(lambda lo, hi, x: (x, (lo, hi)),
                     lambda res, g: (None, None, aotjax.clamp(g, res[0], res[1])))


@jax.custom_vjp
def jax_clip_gradient(lo, hi, x):
    return x


jax_clip_gradient.defvjp(lambda lo, hi, x: (x, (lo, hi)),
                         lambda res, g: (None, None, jnp.clip(g, res[0], res[1])))


def test_clipped_gradient_matches_jax():
    x = np.array([0.5, -1.0, 2.0], np.float32)
    scale = np.array([3.0, 0.1, -5.0], np.float32)
    g = aotjax.grad(lambda x: (T(scale) * clip_gradient(T(-1.0), T(1.0), x)).sum())(T(x))
    ref = jax.grad(lambda x: (scale * jax_clip_gradient(jnp.float32(-1.0), jnp.float32(1.0), x)).sum())(x)
    close(g, ref)
    close(g, [1.0, 0.1, -1.0])


def test_custom_vjp_second_derivative_differentiates_bwd_like_jax():
    @aotjax.custom_vjp
    def s(x):
        return aotjax.sin(x)
    s.defvjp(lambda x: (aotjax.sin(x), aotjax.cos(x)), lambda c, g: (c * g,))

    @jax.custom_vjp
    def js(x):
        return jnp.sin(x)
    js.defvjp(lambda x: (jnp.sin(x), jnp.cos(x)), lambda c, g: (c * g,))
    close(aotjax.grad(aotjax.grad(lambda x: s(x)))(T(0.7)), jax.grad(jax.grad(js))(jnp.float32(0.7)))
    x = np.array([0.3, 0.7], np.float32)  # forward over reverse differentiates fwd and bwd, as in jax
    close(aotjax.hessian(lambda x: s(x).sum())(T(x)), jax.hessian(lambda x: js(x).sum())(x))


def test_bwd_may_return_none_and_integer_args_get_no_cotangent():
    @aotjax.custom_vjp
    def scale(x, n, y):
        return x * n.to(x.dtype) + y
    scale.defvjp(lambda x, n, y: (scale(x, n, y), n), lambda n, g: (g * n.to(g.dtype), None, None))
    gx, gy = aotjax.grad(lambda x, y: scale(x, T([3], aotjax.int64), y).sum(), argnums=(0, 1))(T([1.0]), T([2.0]))
    close(gx, [3.0])
    close(gy, [0.0])


# -- pytrees, nondiff_argnums, in-place ops ----------------------------------------------------------
def test_pytree_arguments_and_outputs():
    @aotjax.custom_vjp
    def f(params, x):
        return {"y": params["w"] * x, "z": (params["b"] + x,)}

    def fwd(params, x):
        return f(params, x), (params["w"], x)

    def bwd(res, ct):
        w, x = res
        return {"w": ct["y"] * x * 10.0, "b": ct["z"][0]}, ct["y"] * w + ct["z"][0]
    f.defvjp(fwd, bwd)

    @aotjax.custom_jvp
    def h(params, x):
        return {"y": params["w"] * x, "z": (params["b"] + x,)}

    @h.defjvp
    def h_jvp(primals, tangents):
        (p, x), (tp, tx) = primals, tangents
        return h(p, x), {"y": tp["w"] * x + p["w"] * tx, "z": (tp["b"] + tx,)}

    params, x = {"w": T([2.0]), "b": T([1.0])}, T([3.0])

    def loss(fn):
        return lambda p, x: (fn(p, x)["y"] + fn(p, x)["z"][0] * 2.0).sum()
    gp, gx = aotjax.grad(loss(f), argnums=(0, 1))(params, x)
    close(gp["w"], [30.0])
    close(gp["b"], [2.0])
    close(gx, [4.0])
    gp, gx = aotjax.grad(loss(h), argnums=(0, 1))(params, x)
    close(gp["w"], [3.0])
    close(gp["b"], [2.0])
    close(gx, [4.0])
    out = aotjax.jit(lambda p, x: f(p, x))(params, x)
    close(out["y"], [6.0])
    close(out["z"][0], [4.0])


def test_nondiff_argnums():
    @partial(aotjax.custom_jvp, nondiff_argnums=(0,))
    def apply(fn, x):
        return fn(x)

    @apply.defjvp
    def apply_jvp(fn, primals, tangents):
        (x,), (t,) = primals, tangents
        return apply(fn, x), 7.0 * t
    close(aotjax.grad(lambda x: apply(aotjax.sin, x).sum())(T([0.0, 1.0])), [7.0, 7.0])

    @partial(aotjax.custom_vjp, nondiff_argnums=(1,))
    def power(x, n):
        return x ** n
    power.defvjp(lambda x, n: (x ** n, x), lambda n, x, g: (n * x ** (n - 1) * g * 100.0,))
    g = aotjax.grad(lambda x: power(x, 3).sum())(T([1.0, 2.0]))
    close(g, [300.0, 1200.0])
    g = aotjax.jit(aotjax.grad(lambda x: power(x, 2).sum()))(T([1.0, 2.0]))
    close(g, [200.0, 400.0])


def test_keyword_arguments_are_resolved_to_positions():
    @aotjax.custom_vjp
    def f(x, y):
        return x * y
    f.defvjp(lambda x, y: (x * y, (x, y)), lambda r, g: (g * r[1], g * r[0]))
    close(aotjax.grad(lambda x: f(x, y=T([5.0])).sum())(T([2.0])), [5.0])


def test_in_place_ops_on_new_tensors_are_allowed_in_the_function_and_its_rules():
    @aotjax.custom_jvp
    def f(x):
        y = x * 2.0
        y.add_(1.0)
        return y

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        out_t = t.clone()
        out_t.mul_(2.0)
        return f(x), out_t
    x = T([1.0, 2.0])
    close(aotjax.jit(f)(x), [3.0, 5.0])
    close(aotjax.grad(lambda x: f(x).sum())(x), [2.0, 2.0])
    close(aotjax.jvp(f, (x,), (T([1.0, 1.0]),))[1], [2.0, 2.0])


# -- errors ------------------------------------------------------------------------------------------
def test_forward_mode_of_custom_vjp_is_a_clear_error():
    with pytest.raises(UnsupportedError, match="custom_vjp function 'double_grad': forward-mode differentiation"):
        aotjax.jvp(double_grad, (T([1.0]),), (T([1.0]),))
    with pytest.raises(UnsupportedError, match="forward-mode"):
        aotjax.jacfwd(double_grad)(T([1.0, 2.0]))


def test_writing_into_an_argument_names_the_op_and_line():
    @aotjax.custom_vjp
    def bad(x):
        x.mul_(2.0)
        return x
    bad.defvjp(lambda x: (x, None), lambda _, g: (g,))
    with pytest.raises(AliasingError, match=r"mul_: the custom_vjp function 'bad' writes into its argument in place "
                                            r"\(at test_custom_derivatives.py:\d+ \(bad\)\)"):
        aotjax.grad(lambda x: bad(x).sum())(T([1.0]))


def test_rule_errors():
    @aotjax.custom_vjp
    def f(x):
        return x
    with pytest.raises(TypeError, match=r"derivative rule is not defined: call `f.defvjp\(...\)`"):
        aotjax.grad(lambda x: f(x).sum())(T([1.0]))
    f.defvjp(lambda x: (x, None), lambda _, g: (g, g))
    with pytest.raises(TypeError, match="bwd must return a tuple with one cotangent per argument"):
        aotjax.grad(lambda x: f(x).sum())(T([1.0]))
    f.defvjp(lambda x: (x, None), lambda _, g: (g.sum(),))
    with pytest.raises(ShapeError, match=r"bwd returned a cotangent f32\[\] for an argument leaf f32\[2\]"):
        aotjax.grad(lambda x: f(x).sum())(T([1.0, 2.0]))

    @aotjax.custom_jvp
    def h(x):
        return x
    h.defjvp(lambda p, t: (p[0], t[0].sum()))
    with pytest.raises(ShapeError, match=r"the tangent output 0 is f32\[\], but the function's output 0 is f32\[2\]"):
        aotjax.grad(lambda x: h(x).sum())(T([1.0, 2.0]))
    k = aotjax.custom_jvp(lambda x, y: x, nondiff_argnums=(1,))
    k.defjvp(lambda y, p, t: (p[0], t[0]))
    with pytest.raises(TypeError, match="nondiff_argnums are for Python values"):
        aotjax.grad(lambda x: k(x, T([1.0])).sum())(T([1.0]))


def test_differentiating_a_closed_over_value_is_an_error():
    def loss(w, s):
        @aotjax.custom_jvp
        def f(x):
            return x * w

        f.defjvp(lambda p, t: (f(p[0]), t[0] * w))
        return f(T([1.0])).sum()
    with pytest.raises(UnsupportedError, match="with respect to a value it reads from its enclosing scope"):
        aotjax.grad(loss)(T([2.0]), T([3.0]))

    def loss2(x, s):
        @aotjax.custom_jvp
        def f(x):
            return x * s

        f.defjvp(lambda p, t: (p[0] * s, t[0] * s))
        return f(x).sum()
    with pytest.raises(UnsupportedError, match="returned a value traced by an enclosing transform"):
        aotjax.grad(loss2)(T([2.0]), T([3.0]))
    close(aotjax.grad(loss2, argnums=0)(T([2.0]), 3.0), [3.0])  # a constant closure is fine
