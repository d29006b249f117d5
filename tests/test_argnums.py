"""`argnums` and `static_argnums` of every transform that takes them (`aotjax.transforms.argnums`):
bad positions are refused with a message naming the transform, the function and the positional
arguments; negative positions count from the end; a tensor or array is never a static argument."""
import jax.numpy as jnp
import numpy as np
import pytest

import aotjax

T = aotjax.tensor


def _run_make_jaxpr(f, static_argnums):
    return aotjax.make_jaxpr(f, static_argnums=static_argnums)


# Each transform with static_argnums: (name, make(fun, static_argnums) -> callable).
STATIC_TRANSFORMS = [
    ("jit", lambda f, s: aotjax.jit(f, static_argnums=s)),
    ("aot", lambda f, s: aotjax.aot(f, static_argnums=s)),
    ("checkpoint", lambda f, s: aotjax.checkpoint(f, static_argnums=s)),
    ("make_jaxpr", _run_make_jaxpr),
    ("functionalize", lambda f, s: aotjax.functionalize(f, static_argnums=s)),
]
STATIC_IDS = [name for name, _ in STATIC_TRANSFORMS]

# Each transform with argnums: (name, make(fun, argnums) -> callable, takes a tuple of argnums).
ARGNUMS_TRANSFORMS = [
    ("grad", lambda f, a: aotjax.grad(f, argnums=a), True),
    ("value_and_grad", lambda f, a: aotjax.value_and_grad(f, argnums=a), True),
    ("jacfwd", lambda f, a: aotjax.jacfwd(f, argnums=a), False),
    ("jacrev", lambda f, a: aotjax.jacrev(f, argnums=a), False),
    ("hessian", lambda f, a: aotjax.hessian(f, argnums=a), False),
]
ARGNUMS_IDS = [name for name, _, _ in ARGNUMS_TRANSFORMS]


def scale(t, n):
    return (t * n).sum()


def scale_args(*args):
    return (args[0] * args[1]).sum()


# -- 1. static arguments holding tensors or arrays -------------------------------------------------------
BAD_STATICS = [
    ("tensor", lambda: T([1.0, 1.0]), "holds a Tensor of shape \\[2\\]"),
    ("view", lambda: T([[1.0, 1.0]])[0], "holds a Tensor of shape \\[2\\]"),
    ("0-d tensor", lambda: T(2.0), "holds a Tensor of shape \\[\\]"),
    ("tuple of tensors", lambda: (T(2.0), 3), "holds a Tensor .*inside a tuple"),
    ("dict with a tensor", lambda: {"n": T(2.0)}, "holds a Tensor .*inside a dict"),
    ("jax array", lambda: jnp.ones(2), "holds an array \\(.*\\) of shape \\[2\\]"),
    ("numpy array", lambda: np.ones(2), "holds an array \\(ndarray\\) of shape \\[2\\]"),
    ("list of arrays", lambda: [np.ones(2)], "holds an array .*inside a list"),
]


@pytest.mark.parametrize("bad", BAD_STATICS, ids=[b[0] for b in BAD_STATICS])
@pytest.mark.parametrize("name,make", STATIC_TRANSFORMS, ids=STATIC_IDS)
def test_a_static_argument_holding_an_array_is_refused(name, make, bad):
    _, value, message = bad
    f = make(scale, 1)
    with pytest.raises(TypeError, match=rf"^{name} of scale: static argument 1 {message}.*Pass it as a regular "
                                        rf"argument \(remove 1 from static_argnums\)"):
        f(T([1.0, 2.0]), value())


def test_a_static_tensor_written_in_place_is_never_served_stale():
    """The bug behind the rule: a static tensor was cached by identity, so after `t.mul_(5)` the jitted
    call returned the program traced with the old value."""
    f = aotjax.jit(lambda t, n: t * n, static_argnums=0)
    with pytest.raises(TypeError, match="static argument 0 holds a Tensor"):
        f(T([1.0, 1.0]), 2)
    g = aotjax.jit(lambda t, n: t * n)  # the fix: pass it as a regular argument
    t = T([1.0, 1.0])
    g(t, 2)
    t.mul_(5)
    np.testing.assert_array_equal(g(t, 2).numpy(), [10.0, 10.0])


@pytest.mark.parametrize("name,make", STATIC_TRANSFORMS, ids=STATIC_IDS)
def test_python_values_stay_valid_static_arguments(name, make):
    f = make(lambda t, cfg: t * cfg[0] if cfg[1] == "double" else t, 1)
    out = f(T([1.0, 2.0]), (2, "double"))
    if name != "make_jaxpr":
        np.testing.assert_array_equal(out.numpy(), [2.0, 4.0])
    else:
        assert [e.primitive.name for e in out.eqns] == ["mul"]


# -- 2. positions checked against the signature and the call ---------------------------------------------
# (argnums, error type, message), for a function of two positional parameters (t, n).
BAD_POSITIONS = [
    ("out of range", 2, ValueError, r"=2 is out of range: \w+ takes 2 positional arguments \(t, n\), so a position "
                                    r"must be in \[-2, 1\]"),
    ("negative out of range", -3, ValueError, r"=-3 is out of range: \w+ takes 2 positional arguments"),
    ("duplicate", (1, 1), ValueError, r"=\(1, 1\) repeats a position"),
    ("duplicate after normalizing", (1, -1), ValueError, r"=\(1, -1\) names one argument twice"),
    ("str", "n", TypeError, r" must be an int or a tuple of ints, got 'n'"),
    ("float", 1.0, TypeError, r" must be an int or a tuple of ints, got 1.0"),
    ("bool", True, TypeError, r" must be an int or a tuple of ints, got True"),
    ("None in a tuple", (0, None), TypeError, r" must be .*an element of type NoneType"),
]
POSITION_IDS = [b[0] for b in BAD_POSITIONS]


@pytest.mark.parametrize("bad", BAD_POSITIONS, ids=POSITION_IDS)
@pytest.mark.parametrize("name,make", STATIC_TRANSFORMS, ids=STATIC_IDS)
def test_bad_static_argnums_are_refused_when_the_transform_is_made(name, make, bad):
    _, argnums, error, message = bad
    with pytest.raises(error, match=rf"^{name} of scale: static_argnums{message}"):
        make(scale, argnums)


@pytest.mark.parametrize("bad", BAD_POSITIONS, ids=POSITION_IDS)
@pytest.mark.parametrize("name,make,tuples", ARGNUMS_TRANSFORMS, ids=ARGNUMS_IDS)
def test_bad_argnums_are_refused_when_the_transform_is_made(name, make, tuples, bad):
    _, argnums, error, message = bad
    if isinstance(argnums, tuple) and not tuples:
        error, message = TypeError, r" must be a single int"
    with pytest.raises(error, match=rf"^{name} of scale: argnums{message}"):
        make(scale, argnums)


@pytest.mark.parametrize("name,make", STATIC_TRANSFORMS, ids=STATIC_IDS)
def test_static_argnums_past_the_call_of_a_varargs_function(name, make):
    f = make(scale_args, 2)
    with pytest.raises(ValueError, match=rf"^{name} of scale_args: static_argnums has position 2, but the call passed "
                                         rf"2 positional arguments; a position must be in \[-2, 1\]"):
        f(T([1.0]), 2.0)


@pytest.mark.parametrize("name,make,tuples", ARGNUMS_TRANSFORMS, ids=ARGNUMS_IDS)
def test_argnums_past_the_call_of_a_varargs_function(name, make, tuples):
    f = make(scale_args, 2)
    with pytest.raises(ValueError, match=rf"^{name} of scale_args: argnums has position 2, but the call passed 2 "
                                         rf"positional arguments; a position must be in \[-2, 1\]"):
        f(T([1.0]), T([2.0]))


def test_grad_of_a_missing_argument_names_the_transform_not_an_index_error():
    with pytest.raises(ValueError, match=r"grad of f: argnums=1 is out of range: f takes 1 positional argument \(x\)"):
        def f(x):
            return x.sum()
        aotjax.grad(f, argnums=1)


@pytest.mark.parametrize("name,make,tuples", ARGNUMS_TRANSFORMS, ids=ARGNUMS_IDS)
def test_negative_argnums_count_from_the_last_argument(name, make, tuples):
    def f(a, b):
        return (a * a * b).sum()

    def f_args(*args):
        return f(*args)

    a, b = T([1.0, 2.0], dtype=aotjax.float64), T([3.0, 4.0], dtype=aotjax.float64)
    expected = make(f, 1)(a, b)
    for fun in (f, f_args):  # normalized from the signature, or from the call
        got = make(fun, -1)(a, b)
        got, want = (got[1], expected[1]) if name == "value_and_grad" else (got, expected)
        np.testing.assert_allclose(got.numpy(), want.numpy())


@pytest.mark.parametrize("name,make", STATIC_TRANSFORMS, ids=STATIC_IDS)
def test_negative_static_argnums_count_from_the_last_argument(name, make):
    def f(t, n):
        assert isinstance(n, int)  # static: a Python value, not traced
        return t * n

    def f_args(*args):
        return f(*args)

    for fun in (f, f_args):
        out = make(fun, -1)(T([1.0, 2.0]), 3)
        if name != "make_jaxpr":
            np.testing.assert_array_equal(out.numpy(), [3.0, 6.0])


def test_a_static_parameter_left_to_its_default_or_passed_by_keyword():
    f = aotjax.jit(lambda t, n=2: t * n, static_argnums=1)
    np.testing.assert_array_equal(f(T([1.0])).numpy(), [2.0])  # the default: nothing to specialize on
    np.testing.assert_array_equal(f(T([1.0]), 3).numpy(), [3.0])
    with pytest.raises(TypeError, match=r"argument 1 \(n\) is in static_argnums but was passed by keyword.*pass it "
                                        r"positionally"):
        f(T([1.0]), n=3)


def test_unhashable_static_argument_names_its_position():
    f = aotjax.aot(scale, static_argnums=1)
    with pytest.raises(TypeError, match=r"aot: static arguments must be hashable .*argument 1 is a list"):
        f(T([1.0]), [2])
