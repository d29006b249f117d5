"""Elementwise ops against NumPy references, one row per op in the op table (tests/op_records.py, families
UNARY and BINARY): values and result dtypes (PyTorch's promotion), broadcasting, 0-d tensors, the in-place
variant written through a view into its base, the traced program against eager, and errors that name the
op. NumPy references keep the tests fast (jax's eager ops compile once per shape)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import aotjax
from aotjax.core.errors import DTypeError, ShapeError
from tests.helpers import FLOAT, INT, asks_for_64_bits, by_mode, check_traced_matches_eager
from tests.op_records import BOOL, F16, F32, I32, Family, OpRecord, Result, dtype_id, records, sample

T = aotjax.tensor


def close(out, expected, tol):
    expected = np.asarray(expected)
    assert out.shape == expected.shape, (out.shape, expected.shape)
    assert out.dtype == expected.dtype, (out.dtype, expected.dtype)
    np.testing.assert_allclose(np.asarray(out.numpy(), np.float64), np.asarray(expected, np.float64),
                               rtol=tol, atol=tol, equal_nan=True)


def is_float(dtype) -> bool:
    return np.issubdtype(dtype, np.floating)


# -- unary -----------------------------------------------------------------------------------------
UNARY = records(family=Family.UNARY)
UNARY_IDS = [u.name for u in UNARY]
UNARY_INPLACE = [u for u in UNARY if u.inplace]


def unary_expected(u: OpRecord, a):
    out_dt = u.out_dtype(a.dtype)
    ref_in = a.astype(np.float64) if is_float(out_dt) or is_float(a.dtype) else a
    return np.asarray(u.numpy(ref_in)).astype(out_dt)


@pytest.mark.parametrize("u", UNARY, ids=UNARY_IDS)
@pytest.mark.parametrize("dtype", [F32, INT], ids=dtype_id)
def test_unary_values_and_dtype(u, dtype):
    a = sample(u.domain_of(0), (2, 3), dtype)
    close(u.fn(T(a)), unary_expected(u, a), u.tol)


@pytest.mark.parametrize("u", [u for u in UNARY if u.result is not Result.KEEP],
                         ids=[u.name for u in UNARY if u.result is not Result.KEEP])
def test_unary_float16_0d(u):
    a = sample(u.domain_of(0), (), F16, seed=1)
    out = u.fn(T(a))
    assert out.dtype == u.out_dtype(F16) and out.shape == ()  # float16 stays float16
    close(out, unary_expected(u, a.astype(F32)).astype(out.dtype), 2e-2)


@pytest.mark.parametrize("u", UNARY_INPLACE, ids=[u.name for u in UNARY_INPLACE])
def test_unary_inplace_through_a_view(u):
    a = sample(u.domain_of(0), (2, 3), F32)
    x = T(a)
    row = x.select(0, 0)
    assert u.inplace(row) is row
    expected = a.copy()
    expected[0] = unary_expected(u, a[0]).astype(F32)
    close(x, expected, u.tol)  # the write went through the view into the base


@pytest.mark.parametrize("u", UNARY, ids=UNARY_IDS)
def test_unary_traced_matches_eager(u):
    a = sample(u.domain_of(0), (2, 3), F32)
    if u.inplace:
        _, jaxpr = check_traced_matches_eager(lambda x: (u.fn(x), u.inplace(x.select(0, 1))), T(a), rtol=1e-5)
        names = [e.primitive.name for e in jaxpr.jaxpr.eqns]
        assert names[0] == names[-1].rstrip("_") and names[-1].endswith("_"), names  # `sin` ... `sin_`
    else:
        check_traced_matches_eager(u.fn, T(a))


@pytest.mark.parametrize("u", [u for u in UNARY_INPLACE if u.result is Result.FLOAT],
                         ids=[u.name for u in UNARY_INPLACE if u.result is Result.FLOAT])
def test_float_inplace_on_integers_raises(u):
    with pytest.raises(DTypeError, match=rf"{u.name.split('_')[0]}_: the result type float32 cannot be cast"):
        u.inplace(T([1, 2]))


def test_keep_dtype_ops_on_integers():
    a = np.array([-3, 0, 4], INT)
    assert aotjax.floor(T(a)).dtype == INT and aotjax.round(T(a)).tolist() == [-3, 0, 4]
    assert aotjax.square(T([True, False])).tolist() == [1, 0] and aotjax.square(T([True])).dtype == INT
    assert aotjax.sign(T([True, False])).dtype == BOOL
    assert aotjax.abs(T(a, dtype=aotjax.int32)).dtype == I32


def test_bitwise_not():
    assert aotjax.bitwise_not(T([0, 5])).tolist() == [-1, -6]
    assert (~T([True, False])).tolist() == [False, True]
    x = T([1, 2])
    aotjax.bitwise_not_(x)
    assert x.tolist() == [-2, -3]
    with pytest.raises(DTypeError, match="bitwise_not: expected integer or bool"):
        ~T([1.0])


# -- binary ----------------------------------------------------------------------------------------
BINARY = records(family=Family.BINARY)
BINARY_IDS = [b.name for b in BINARY]
BINARY_INPLACE = [b for b in BINARY if b.inplace]


def binary_expected(b: OpRecord, x, y):
    out_dt = b.out_dtype(np.result_type(x, y))
    if is_float(out_dt) or is_float(x.dtype):
        x, y = x.astype(np.float64), y.astype(np.float64)
    return np.asarray(b.numpy(x, y)).astype(out_dt)


def binary_cases():
    return [(b, dt) for b in BINARY for dt in b.dtypes]


@pytest.mark.parametrize("b,dtype", binary_cases(), ids=[f"{b.name}-{dtype_id(dt)}" for b, dt in binary_cases()])
def test_binary_broadcasting(b, dtype):
    x, y = sample(b.domain_of(0), (2, 3), dtype, 0), sample(b.domain_of(1), (3,), dtype, 1)
    close(b.fn(T(x), T(y)), binary_expected(b, x, y), b.tol)


@pytest.mark.parametrize("b", BINARY, ids=BINARY_IDS)
def test_binary_with_python_scalars(b):
    dtype = b.dtypes[0]
    x = sample(b.domain_of(0), (2, 3), dtype)
    s = {F32: 1.5, INT: 2, BOOL: True}[dtype]
    if b.name == "pow" and dtype == F32:
        s = 2.0
    xs = np.asarray(s, dtype)
    close(b.fn(T(x), s), binary_expected(b, x, xs), b.tol)  # (on the left: see PROMOTION)
    close(b.fn(T(x), T(xs)), binary_expected(b, x, xs), b.tol)  # a 0-d tensor of the same dtype


@pytest.mark.parametrize("b", BINARY_INPLACE, ids=[b.name for b in BINARY_INPLACE])
def test_binary_inplace_through_a_view(b):
    dtype = b.dtypes[0]
    x, y = sample(b.domain_of(0), (2, 3), dtype, 0), sample(b.domain_of(1), (3,), dtype, 1)
    t = T(x)
    row = t.select(0, 1)
    assert b.inplace(row, T(y)) is row
    expected = x.copy()
    expected[1] = binary_expected(b, x[1], y).astype(dtype)
    close(t, expected, b.tol)


@pytest.mark.parametrize("b", BINARY, ids=BINARY_IDS)
def test_binary_traced_matches_eager(b):
    dtype = b.dtypes[0]
    x, y = sample(b.domain_of(0), (2, 3), dtype, 0), sample(b.domain_of(1), (3,), dtype, 1)
    if not b.inplace:
        check_traced_matches_eager(b.fn, T(x), T(y))
        return
    _, jaxpr = check_traced_matches_eager(lambda x, y: (b.fn(x, y), b.inplace(x.select(0, 0), y)), T(x), T(y))
    names = [e.primitive.name for e in jaxpr.jaxpr.eqns]
    assert names[-1].endswith("_"), names  # the in-place op stays one `add_`-style equation


def test_inplace_jaxpr_shows_the_underscore_equation():
    jaxpr = aotjax.make_jaxpr(lambda x: x.add_(1).sin_().clamp_(0.0, 1.0))(T([1.0, 2.0]))
    assert [e.primitive.name for e in jaxpr.jaxpr.eqns] == ["add_", "sin_", "clamp_"]
    text = str(jaxpr)
    assert "add_ a 1.0" in text.replace("b:f32[2] = ", "") or "add_" in text


@pytest.mark.parametrize("op", ["add_", "mul_", "sub_"])
def test_operator_inplace_keeps_identity(op):
    x = T([1.0, 2.0])
    x_id = id(x)
    x += 1
    x *= 2
    x -= 1
    assert id(x) == x_id and x.tolist() == [3.0, 5.0]


# -- integer_pow: `x ** n` for a Python int n -------------------------------------------------------
@pytest.mark.parametrize("n", [0, 1, 2, 3, 5, -1, -2])
def test_integer_pow_derivative_is_n_x_to_the_n_minus_1(n):
    x = np.array([0.5, -1.5, 2.0, 3.0], FLOAT)
    g = aotjax.grad(lambda x: (x ** n).sum())(T(x))
    ref = jax.grad(lambda x: (x ** n).sum())(jnp.asarray(x))
    np.testing.assert_allclose(g.numpy(), np.asarray(ref), rtol=by_mode(1e-12, 1e-6))
    eps, x = 1e-6, x.astype(np.float64)  # the reference in float64 whatever the mode
    fd = ((x + eps) ** n - (x - eps) ** n) / (2 * eps)
    np.testing.assert_allclose(g.numpy(), fd, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("f", [lambda x: x ** 2, lambda x: aotjax.pow(x, 3), lambda x: x.clone().pow_(2),
                               lambda x: x ** -1], ids=["x**2", "pow(x,3)", "pow_", "x**-1"])
def test_integer_pow_gradient_has_no_zero_branch(f):
    x = T([1.0, 2.0])
    names = {e.primitive.name for e in aotjax.make_jaxpr(aotjax.grad(lambda x: f(x).sum()))(x).eqns}
    assert "integer_pow" in names or "integer_pow_" in names
    assert not names & {"where", "eq", "pow"}, names


def test_a_float_or_tensor_exponent_keeps_the_general_pow():
    names = [e.primitive.name for e in aotjax.make_jaxpr(lambda x, y: (x ** 2.0, x ** y, 2 ** x))(T([1.0]), T([2.0]))
             .eqns]
    assert names.count("pow") == 3 and "integer_pow" not in names


# -- promotion through the ops -----------------------------------------------------------------------
PROMOTION = [
    ("int * float scalar", lambda: T([1, 2]) * 2.5, F32, [2.5, 5.0]),
    ("half + float scalar", lambda: T([1.0, 2.0], dtype=aotjax.float16) + 2.5, F16, [3.5, 4.5]),
    ("int + float 0-d", lambda: T([1, 2]) + T(0.5), F32, [1.5, 2.5]),
    ("half + float32 0-d", lambda: T([1.0], dtype=aotjax.float16) + T(0.5), F16, [1.5]),
    ("int32 + default int 0-d", lambda: T([1], dtype=aotjax.int32) + T(2), I32, [3]),
    ("int32 + int scalar", lambda: T([1], dtype=aotjax.int32) * 3, I32, [3]),
    ("int32 + default int tensor", lambda: T([1], dtype=aotjax.int32) + T([2]), INT, [3]),
    ("float32 + float64 tensor", lambda: T([1.0]) + T([2.0], dtype=aotjax.float64), FLOAT, [3.0]),
    ("bool + bool", lambda: T([True, False]) + T([True, False]), BOOL, [True, False]),
    ("bool + int scalar", lambda: T([True, False]) + 1, INT, [2, 1]),
    ("int8 + uint8", lambda: T([1], dtype=aotjax.int8) + T([2], dtype=aotjax.uint8), np.dtype(np.int16), [3]),
    ("int / int", lambda: T([3, 4]) / T([2, 2]), F32, [1.5, 2.0]),
    ("int // int", lambda: T([3, -3]) // 2, INT, [1, -2]),
    ("int % int", lambda: T([3, -3]) % 2, INT, [1, 1]),
    ("float % negative", lambda: T([3.0, -3.0]) % -2, F32, [-1.0, -1.0]),
    ("int ** int", lambda: T([2, 3]) ** 2, INT, [4, 9]),
    ("int ** float", lambda: T([4, 9]) ** 0.5, F32, [2.0, 3.0]),
    ("bool ** int", lambda: T([True, False]) ** 2, INT, [1, 0]),
    ("int8 0-d ** int", lambda: T(3, dtype=aotjax.int8) ** 2, np.dtype(np.int8), [9]),
    ("half ** int", lambda: T([3.0], dtype=aotjax.float16) ** 2, F16, [9.0]),
    ("float ** negative int", lambda: T([2.0, 4.0]) ** -1, F32, [0.5, 0.25]),
    ("int ** numpy int", lambda: T([2, 3]) ** np.int64(3), INT, [8, 27]),
    ("float scalar ** int tensor", lambda: 2.0 ** T([1, 2]), F32, [2.0, 4.0]),
    ("scalar - tensor", lambda: 10 - T([1, 2]), INT, [9, 8]),
    ("int < float scalar", lambda: T([2, 3]) < 2.5, BOOL, [True, False]),
    ("int sin", lambda: aotjax.sin(T([0, 0])), F32, [0.0, 0.0]),
    ("bool exp", lambda: aotjax.exp(T([False])), F32, [1.0]),
    ("where int/float", lambda: aotjax.where(T([True, False]), T([1, 2]), 0.5), F32, [1.0, 0.5]),
    ("where scalars", lambda: aotjax.where(T([True, False]), 1, 0), INT, [1, 0]),
    ("clamp int by float", lambda: aotjax.clamp(T([0, 5]), 0.5), F32, [0.5, 5.0]),
    ("lerp of ints", lambda: aotjax.lerp(T([0, 10]), T([10, 20]), 0.5), F32, [5.0, 15.0]),
    ("atan2 ints", lambda: aotjax.atan2(T([0]), T([1])), F32, [0.0]),
]


@asks_for_64_bits
@pytest.mark.parametrize("name,thunk,dtype,values", PROMOTION, ids=[p[0] for p in PROMOTION])
def test_promotion(name, thunk, dtype, values):
    out = thunk()
    assert out.dtype == dtype, (out.dtype, dtype)
    np.testing.assert_allclose(np.asarray(out.numpy(), np.float64), np.asarray(values, np.float64), rtol=1e-6)


INPLACE_CASTS = [
    ("float32 += float64", lambda x: x.add_(T([1.0], dtype=aotjax.float64)), [1.5], F32, [2.5]),
    ("int.lt_(float) compares as float", lambda x: x.lt_(2.5), [2, 3], INT, [1, 0]),
    ("float.eq_(int)", lambda x: x.eq_(T([2])), [2.0, 3.0], F32, [1.0, 0.0]),
    ("int.logical_and_(0.5)", lambda x: x.logical_and_(0.5), [0, 3], INT, [0, 1]),
    ("int.mul_(bool)", lambda x: x.mul_(T([True, False])), [2, 3], INT, [2, 0]),
    ("int32 += default int 0-d", lambda x: x.add_(T(5)), np.array([1], np.int32), I32, [6]),
    ("bool |= bool", lambda x: x.bitwise_or_(T([True, False])), [False, False], BOOL, [True, False]),
    ("int.clamp_(int)", lambda x: x.clamp_(max=1), [0, 5], INT, [0, 1]),
    ("int.floor_divide_", lambda x: x.floor_divide_(-2), [3, 4], INT, [-2, -2]),
    ("int **= int", lambda x: x.pow_(2), [2, 3], INT, [4, 9]),
]


@asks_for_64_bits
@pytest.mark.parametrize("name,op,data,dtype,values", INPLACE_CASTS, ids=[c[0] for c in INPLACE_CASTS])
def test_inplace_result_cast_into_self(name, op, data, dtype, values):
    x = T(data)
    assert op(x) is x
    assert x.dtype == dtype and x.numpy().tolist() == values


INPLACE_ERRORS = [
    ("int.add_(float)", lambda: T([1, 2]).add_(1.5), "add_"),
    ("int /= int", lambda: T([1, 2]).div_(2), "div_"),
    ("int.sqrt_()", lambda: T([1, 2]).sqrt_(), "sqrt_"),
    ("bool.add_(int)", lambda: T([True]).add_(1), "add_"),
    ("int.clamp_(float)", lambda: T([1]).clamp_(0.5), "clamp_"),
    ("int.lerp_", lambda: T([1]).lerp_(T([2]), 0.5), "lerp_"),
    ("int.atan2_", lambda: T([1]).atan2_(T([1])), "atan2_"),
    ("bool.square_()", lambda: T([True]).square_(), "square_"),
    ("bool.pow_(int)", lambda: T([True]).pow_(2), "pow_"),
]


@pytest.mark.parametrize("name,thunk,op", INPLACE_ERRORS, ids=[c[0] for c in INPLACE_ERRORS])
def test_inplace_cast_errors(name, thunk, op):
    with pytest.raises(DTypeError, match=rf"^{op}: the result type \w+ cannot be cast .*\(at test_elementwise"):
        thunk()


def test_inplace_cannot_broadcast_self():
    with pytest.raises(ShapeError, match=r"add_: the result of shape \[2, 3\] does not fit .* \[3\]"):
        T([1.0, 2.0, 3.0]).add_(aotjax.ones(2, 3))


# -- where, clamp, lerp ------------------------------------------------------------------------------
def test_where():
    c, x, y = sample("any", (3, 1), BOOL), sample("any", (1, 4), F32, 1), sample("any", (4,), F32, 2)
    close(aotjax.where(T(c), T(x), T(y)), np.where(c, x, y), 0)
    check_traced_matches_eager(lambda c, x, y: aotjax.where(c, x, y), T(c), T(x), T(y))
    close(aotjax.where(T(c), T(x), 2.0), np.where(c, x, np.float32(2.0)), 0)


CLAMP = [
    ("both", dict(min=-1.0, max=1.0), lambda a: np.clip(a, -1, 1)),
    ("min only", dict(min=0.5), lambda a: np.maximum(a, 0.5)),
    ("max only", dict(max=-0.5), lambda a: np.minimum(a, -0.5)),
    ("min > max", dict(min=1.0, max=0.0), lambda a: np.where(np.isnan(a), a, 0.0)),
    ("tensor bounds", dict(min=T([-1.0, 0.0, -2.0, 0.5]), max=T(1.0)),
     lambda a: np.minimum(np.maximum(a, np.array([-1.0, 0.0, -2.0, 0.5], np.float32)), 1.0)),
]


@pytest.mark.parametrize("name,kwargs,ref", CLAMP, ids=[c[0] for c in CLAMP])
def test_clamp(name, kwargs, ref):
    a = sample("special", (3, 4), F32)
    close(aotjax.clamp(T(a), **kwargs), ref(a).astype(F32), 0)
    close(T(a).clip(**kwargs), ref(a).astype(F32), 0)
    x = T(a)
    x.select(0, 2).clamp_(**kwargs)
    expected = a.copy()
    expected[2] = ref(a)[2]
    close(x, expected, 0)
    check_traced_matches_eager(lambda x: (x.clamp(**kwargs), x.select(0, 1).clip_(**kwargs)), T(a))


def test_clamp_integers_keep_their_dtype():
    out = aotjax.clamp(T([-5, 0, 5], dtype=aotjax.int32), min=-1)
    assert out.dtype == I32 and out.tolist() == [-1, 0, 5]


def test_lerp():
    s, e, w = sample("any", (2, 3), F32, 0), sample("any", (3,), F32, 1), sample("unit", (2, 1), F32, 2) + 0.5
    ref = (s.astype(np.float64) + w * (e.astype(np.float64) - s)).astype(F32)
    close(aotjax.lerp(T(s), T(e), T(w)), ref, 1e-5)
    close(aotjax.lerp(T(s), T(e), 1.0), np.broadcast_to(e, s.shape), 0)  # exact at weight 1
    x = T(s)
    x.select(0, 0).lerp_(T(e), 0.25)
    assert np.allclose(x.numpy()[0], s[0] + 0.25 * (e - s[0]), rtol=1e-6) and np.all(x.numpy()[1] == s[1])
    check_traced_matches_eager(lambda a, b: (a.lerp(b, 0.3), a.lerp_(b, T(0.7))), T(s), T(e))


def test_to_converts():
    x = T([1.7, -1.7])
    assert x.to(aotjax.int32).tolist() == [1, -1] and x.to(x) is x and x.to(aotjax.float32) is x


# -- errors ----------------------------------------------------------------------------------------
ERRORS = [
    ("broadcast", lambda: T([1, 2, 3]) + T([1, 2]), ShapeError, r"add: shapes \[3\] and \[2\] cannot be broadcast"),
    ("neg bool", lambda: -T([True]), DTypeError, r"neg: expected numeric \(non-bool\) operands, got bool"),
    ("sub bool", lambda: T([True]) - T([False]), DTypeError, "sub: expected numeric"),
    ("bitwise float", lambda: T([1.0]) & 1, DTypeError, "bitwise_and: expected integer or bool operands, got float32"),
    ("rounding mode", lambda: aotjax.div(T([1.0]), 2, rounding_mode="round"), ValueError, "div: rounding_mode"),
    ("where cond", lambda: aotjax.where(T([1]), 1.0, 2.0), DTypeError, "where: the condition must be a bool"),
    ("clamp no bounds", lambda: aotjax.clamp(T([1.0])), ValueError, "clamp: at least one of min and max"),
    ("int ** -1", lambda: T([2]) ** -1, ValueError, "pow: integers to negative integer powers"),
    ("gelu approximate", lambda: aotjax.gelu(T([1.0]), approximate="fast"), ValueError, "gelu: approximate"),
    ("round int decimals", lambda: aotjax.round(T([15]), decimals=-1), DTypeError, "round: decimals=-1"),
]


@pytest.mark.parametrize("name,thunk,exc,match", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_name_the_op_and_the_line(name, thunk, exc, match):
    with pytest.raises(exc, match=match) as info:
        thunk()
    assert "test_elementwise.py" in str(info.value)


def test_traced_errors_name_the_op():
    with pytest.raises(ShapeError, match=r"mul: shapes \[2\] and \[3\] cannot be broadcast.*test_elementwise"):
        aotjax.make_jaxpr(lambda x, y: x * y)(T([1.0, 2.0]), T([1.0, 2.0, 3.0]))


def test_the_eager_fast_path_agrees_with_bind_and_leaves_errors_to_it():
    """Plain eager operands take the ops' fast path (`aotjax.interpreters.eval.apply_plain`); its results equal
    the dispatched ones (under jit), views and strided tensors still read and write through, and a bad call
    raises the same error as the general path."""
    import pytest

    from aotjax.core.errors import ShapeError

    x = aotjax.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    y = aotjax.tensor(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3))
    for f in (lambda a, b: a + b, lambda a, b: a.exp() * b, lambda a, b: a @ b.t(), lambda a, b: a.sin() - b,
              lambda a, b: (2.5 - a) / 3 + b * 2, lambda a, b: (a > 1.5) * b, lambda a, b: a.sum(dim=1) + b.sum(),
              lambda a, b: a.sum((0, 1), keepdim=True) - b.half().sum(-1).float().sum()):
        np.testing.assert_allclose(f(x, y).numpy(), aotjax.jit(f)(x, y).numpy(), rtol=1e-6)
        np.testing.assert_allclose(f(x.t().contiguous().t(), y).numpy(), f(x, y).numpy(), rtol=1e-6)  # strided
    w = x.clone()
    w.t().add_(y.t())  # a view: written through into w
    np.testing.assert_allclose(w.numpy(), (x + y).numpy())
    w.add_(y)
    np.testing.assert_allclose(w.numpy(), (x + 2 * y).numpy())
    with pytest.raises(ShapeError):
        aotjax.ones(3) + aotjax.ones(4)
    with pytest.raises(ShapeError):
        aotjax.ones(3).add_(aotjax.ones(2, 3))  # an in-place op cannot broadcast its result
    with pytest.raises(ShapeError):
        aotjax.ones(2, 3) @ aotjax.ones(2, 3)
    with pytest.raises(IndexError):
        aotjax.ones(2, 3).sum(dim=2)
    half = aotjax.ones(3, dtype=aotjax.float16)
    assert (half * 2.5).dtype == aotjax.float16 and (2 - half).dtype == aotjax.float16  # the tensor's dtype wins
    assert (aotjax.ones(3, dtype=aotjax.int32) * 2.5).is_floating_point()
