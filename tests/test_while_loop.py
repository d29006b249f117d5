"""`while_loop` and `fori_loop` against the same programs written as Python loops: eagerly, functionalized,
jitted and under jvp/linearize (and, for `fori_loop` with static bounds, which is a `scan`, under every way of
taking a gradient), on outputs, on the writes into captured tensors and on derivatives (also by finite
differences). Reverse mode through a `while_loop` raises JAX's error; a condition must be pure."""
from __future__ import annotations

from types import SimpleNamespace

import jax
import numpy as np
import pytest

import aotjax
from aotjax.core.errors import DTypeError, ShapeError, UnsupportedError
from aotjax.core.ir import dce_jaxpr
from aotjax.interpreters.partial_eval import PartialVal, partial_eval_flat
from aotjax.partition.min_cut import flops
from tests.helpers import (
    FD_ATOL,
    FD_RTOL,
    FLOAT,
    by_mode,
    central_difference,
    check_boundary_agrees,
    check_call_agrees,
    check_grads_agree,
)

RTOL, ATOL = by_mode((1e-12, 1e-12), (2e-6, 2e-6))  # a compiled loop against eager ops: rounding only

GRAD_ERROR = ("Reverse-mode differentiation does not work for lax.while_loop or lax.fori_loop with dynamic start/stop "
              "values. Try using lax.scan, or using fori_loop with static start/stop.")


# -- the same program, written with the loops or as Python loops ------------------------------------------
def _fresh(tree):
    """The loop value's leaves as new tensors (a loop's carry is its own, and its results are values)."""
    return jax.tree_util.tree_map(lambda x: aotjax.tensor(x).clone() if not isinstance(x, aotjax.Tensor)
                                  else x.clone(), tree)


class PythonLoops:
    """The loops written as Python loops (`while`, `for i in range(...)`), with the loops' eager meaning: the
    carry is a copy of the init, the results are values. A Python `while` needs a concrete condition: under a
    transform, where it is abstract, the loops replay the trip counts an eager run of the same program recorded
    (`replaying`), which makes the same unrolled program."""

    def __init__(self):
        self.trips: list[int] = []
        self.replay: list[int] | None = None

    def replaying(self) -> "PythonLoops":
        loops = PythonLoops()
        loops.replay = list(self.trips)
        return loops

    def while_loop(self, cond_fun, body_fun, init_val):
        val = _fresh(init_val)
        if self.replay is not None:
            for _ in range(self.replay.pop(0)):
                val = body_fun(val)
            return _fresh(val)
        slot = len(self.trips)  # NOTE: in the order the loops start, as a replay meets them (nested ones after)
        self.trips.append(0)
        while bool(cond_fun(val)):
            val = body_fun(val)
            self.trips[slot] += 1
        return _fresh(val)

    @staticmethod
    def fori_loop(lower, upper, body_fun, init_val, unroll=None):
        val = _fresh(init_val)
        for i in range(int(lower), int(upper)):
            val = body_fun(aotjax.tensor(i), val)
        return _fresh(val)


AOTJAX = SimpleNamespace(while_loop=aotjax.while_loop, fori_loop=aotjax.fori_loop)
python_fori = PythonLoops.fori_loop


def python_transformed(transform, program, *args):
    """`transform(lambda *a: program(loops, *a), args)` with the Python loops, unrolled as an eager run of the
    program on copies of `args` unrolls them."""
    recorded = PythonLoops()
    program(recorded, *(a.clone() for a in args))
    return transform(lambda *a: program(recorded.replaying(), *a), tuple(a.clone() for a in args))


def grow(loops, x, w):
    """A data-dependent trip count; the body writes its carry in place and a captured `w`, which the condition
    reads."""
    def cond(c):
        v, n = c
        return ((v.abs().sum() + w.sum()) < 12.0) & (n < 20)

    def body(c):
        v, n = c
        v.mul_(1.5).add_(w)
        w.add_(v.tanh() * 0.25)
        return v, n + 1

    v, n = loops.while_loop(cond, body, (x, 0))
    return v * 2, n


def pytree_carry(loops, x, w):
    """A dict carry with a tuple inside; `w` only read."""
    def body(c):
        a, (b, k) = c["a"], c["pair"]
        return {"a": a * w + b, "pair": (b.sin(), k + 1)}

    out = loops.while_loop(lambda c: c["pair"][1] < 3, body, {"a": x, "pair": (x.cos(), 0)})
    return out["a"] + out["pair"][0], out["pair"][1]


def fori_static(loops, x, w):
    """A `fori_loop` with Python-int bounds (a `scan`): the body reads `i`, writes a captured `w`."""
    def body(i, v):
        w.mul_(0.9).add_(v * 0.1)
        return (v * w).sin() + i * 0.5

    return loops.fori_loop(1, 5, body, x).sum() + (w * w).sum()


def fori_traced(loops, x, w, n):
    """A `fori_loop` whose upper bound is an argument (a tensor): a `while_loop` under a transform."""
    def body(i, v):
        w.add_(v * 0.5)
        return v * 0.75 + i

    return loops.fori_loop(0, n, body, x) + w


def _xw(x=(0.3, -0.7, 0.2), w=(0.1, 0.4, -0.2)):
    return aotjax.tensor(np.array(x, FLOAT)), aotjax.tensor(np.array(w, FLOAT))


def _make(*tensors):
    """`make()` for the helpers: fresh copies of `tensors` each call (none observed besides them)."""
    return lambda: ([aotjax.tensor(np.array(t)) for t in tensors], ())


PROGRAMS = {"grow": grow, "pytree_carry": pytree_carry, "fori_static": fori_static}


# -- eager, functionalize, jit against the Python loop -----------------------------------------------------
@pytest.mark.parametrize("name", PROGRAMS)
def test_the_loop_computes_and_writes_as_the_python_loop(name):
    program = PROGRAMS[name]
    make = _make(*_xw())
    f = lambda x, w: program(AOTJAX, x, w)  # noqa: E731
    check_call_agrees(lambda x, w: program(PythonLoops(), x, w), f, make, "the loop vs the Python loop", RTOL, ATOL)
    check_boundary_agrees(f, make, RTOL, ATOL)  # eager, functionalize, jit, the jaxpr evaluated


@pytest.mark.parametrize("x0, trips", [(0.01, 10), (1.0, 3), (5.0, 0)])
def test_the_trip_count_depends_on_the_data(x0, trips):
    x, w = _xw((x0, x0, x0), (0.0, 0.0, 0.0))
    for run in (lambda x, w: grow(AOTJAX, x, w), aotjax.jit(lambda x, w: grow(AOTJAX, x, w))):
        _, n = run(x.clone(), w.clone())
        assert n.item() == trips
    _, n = grow(PythonLoops(), x, w)
    assert n.item() == trips


def test_a_zero_trip_loop_returns_its_init_as_a_new_value():
    x = aotjax.tensor([1.0, 2.0])
    for run in (aotjax.while_loop, aotjax.jit(lambda c, b, x: aotjax.while_loop(c, b, x), static_argnums=(0, 1))):
        out = run(lambda v: v.sum() < 0, lambda v: v.mul_(2), x)
        out.add_(100)  # a value: the caller's init is not behind it
        assert x.tolist() == [1.0, 2.0] and out.tolist() == [101.0, 102.0]
    assert aotjax.fori_loop(3, 1, lambda i, v: v * 0, x).tolist() == [1.0, 2.0]  # upper < lower: no trip


def test_the_body_writes_its_own_carry_never_the_callers_init():
    x = aotjax.tensor([1.0, 2.0])
    view = x[:]
    out = aotjax.while_loop(lambda v: v.sum() < 20, lambda v: v.mul_(2), view)
    assert out.tolist() == [8.0, 16.0] and x.tolist() == [1.0, 2.0]


def test_the_condition_reads_what_the_body_wrote_into_a_captured_view():
    counter = aotjax.zeros(4)

    def body(v):
        counter[1:].add_(1)  # a view of the captured tensor, written
        return v * 2

    out = aotjax.while_loop(lambda v: counter[3] < 3, body, aotjax.ones(2))
    assert out.tolist() == [8.0, 8.0] and counter.tolist() == [0.0, 3.0, 3.0, 3.0]


# -- forward mode: jvp and linearize -----------------------------------------------------------------------
def _tangents(*shapes, seed=1):
    rng = np.random.default_rng(seed)
    return [aotjax.tensor(rng.normal(size=s).astype(FLOAT)) for s in shapes]


def _first_output(program):
    def first(loops, *args):
        out = program(loops, *args)
        return out[0] if isinstance(out, tuple) else out
    return first


TANGENT_RTOL = TANGENT_ATOL = by_mode(1e-10, 1e-5)  # derivatives: rounding through a few more ops


@pytest.mark.parametrize("name", PROGRAMS)
def test_jvp_agrees_with_the_python_loop_and_finite_differences(name):
    program = _first_output(PROGRAMS[name])
    x, w = _xw()
    tx, tw = _tangents((3,), (3,))
    f = lambda x, w: program(AOTJAX, x, w)  # noqa: E731
    expected = python_transformed(lambda g, args: aotjax.jvp(g, args, (tx, tw)), program, x, w)
    for how, run in {"jvp": lambda: aotjax.jvp(f, (x.clone(), w.clone()), (tx, tw)),
                     "jit(jvp)": lambda: aotjax.jit(lambda x, w: aotjax.jvp(f, (x, w), (tx, tw)))(x.clone(), w.clone()),
                     "jvp(jit)": lambda: aotjax.jvp(aotjax.jit(f), (x.clone(), w.clone()), (tx, tw))}.items():
        out, t = run()
        np.testing.assert_allclose(out.numpy(), expected[0].numpy(), RTOL, ATOL, err_msg=how)
        np.testing.assert_allclose(t.numpy(), expected[1].numpy(), TANGENT_RTOL, TANGENT_ATOL, err_msg=how)
    fd = central_difference(lambda x, w: f(aotjax.tensor(x), aotjax.tensor(w)).numpy(), [x.numpy(), w.numpy()],
                            [tx.numpy(), tw.numpy()])
    np.testing.assert_allclose(expected[1].numpy(), fd, FD_RTOL, FD_ATOL)


def test_linearize_computes_the_known_carries_now_and_the_tangents_from_the_whole_loop():
    x, w = _xw()
    program = _first_output(grow)
    out, f_jvp = aotjax.linearize(lambda x, w: program(AOTJAX, x, w), x.clone(), w.clone())
    tx, tw = _tangents((3,), (3,))
    expected_out, expected_t = python_transformed(lambda g, args: aotjax.jvp(g, args, (tx, tw)), program, x, w)
    np.testing.assert_allclose(out.numpy(), expected_out.numpy(), RTOL, ATOL)
    np.testing.assert_allclose(f_jvp(tx, tw).numpy(), expected_t.numpy(), TANGENT_RTOL, TANGENT_ATOL)


def test_linearize_keeps_unknown_a_carry_the_body_resets_to_a_constant():
    def f(x):
        a, b, _ = aotjax.while_loop(lambda c: c[2] < 3, lambda c: (c[0] * 2, aotjax.ones(2, dtype=FLOAT), c[2] + 1),
                                    (x, x, 0))
        return a + b

    out, f_jvp = aotjax.linearize(f, aotjax.ones(2, dtype=FLOAT))
    assert out.tolist() == [9.0, 9.0] and f_jvp(aotjax.ones(2, dtype=FLOAT)).tolist() == [8.0, 8.0]


def test_jvp_makes_a_carry_tangent_nonzero_when_the_body_mixes_in_a_differentiated_constant():
    def f(scale):  # the carry's init has no tangent; the body multiplies it by `scale`, which has one
        return aotjax.while_loop(lambda c: c[1] < 3, lambda c: (c[0] * scale, c[1] + 1),
                                 (aotjax.ones(2, dtype=FLOAT), 0))[0]

    s = aotjax.tensor(np.array([2.0, 3.0], FLOAT))
    out, t = aotjax.jvp(f, (s,), (aotjax.ones(2, dtype=FLOAT),))
    assert out.tolist() == [8.0, 27.0] and t.tolist() == [12.0, 27.0]  # d(s^3) = 3 s^2


def test_partial_eval_with_an_unknown_condition_stages_the_whole_loop():
    def f(x, y):
        v, _ = aotjax.while_loop(lambda c: c[0].sum() < 10, lambda c: (c[0] * 2, c[1] + c[0]), (x, y))
        return [v]

    x = aotjax.ones(2)
    jaxpr, pvals, residuals = partial_eval_flat(f, [PartialVal.unknown(x.aval), PartialVal.known(x)])
    assert not pvals[0].is_known and [e.primitive.name for e in jaxpr.eqns] == ["while"]
    (out,) = aotjax.eval_jaxpr(jaxpr, *residuals, aotjax.tensor([1.0, 2.0]))
    assert out.tolist() == [4.0, 8.0]


# -- reverse mode ------------------------------------------------------------------------------------------
def _loss(program, loops):
    def loss(x, w):
        out = program(loops, x, w)
        out = out[0] if isinstance(out, tuple) else out
        return out if out.ndim == 0 else out.sum()
    return loss


def test_every_way_of_taking_the_gradient_of_a_static_fori_loop_agrees_with_the_python_loop():
    x, w = _xw()
    loss = _loss(fori_static, AOTJAX)
    got = check_grads_agree(loss, _make(x, w), argnums=(0, 1), rtol=RTOL, atol=ATOL)  # also checks w's writes
    expected = aotjax.grad(_loss(fori_static, PythonLoops()), argnums=(0, 1))(x.clone(), w.clone())
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g.numpy(), e.numpy(), TANGENT_RTOL, TANGENT_ATOL)
    d = _tangents((3,), (3,), seed=2)
    fd = central_difference(lambda x, w: loss(aotjax.tensor(x), aotjax.tensor(w)).numpy(), [x.numpy(), w.numpy()],
                            [t.numpy() for t in d])
    np.testing.assert_allclose(sum((g * t).sum().item() for g, t in zip(got, d)), fd, FD_RTOL, FD_ATOL)


@pytest.mark.parametrize("unroll", [1, 2, True])
def test_a_static_fori_loop_is_a_scan_honouring_unroll(unroll):
    x, w = _xw()
    f = lambda x, w: aotjax.fori_loop(1, 6, lambda i, v: (v * w).sin() + i, x, unroll=unroll)  # noqa: E731
    jaxpr = aotjax.make_jaxpr(f)(x, w)
    (scan,) = [e for e in jaxpr.eqns if e.primitive.name == "scan"]
    assert scan.params["length"] == 5 and scan.params["unroll"] == (5 if unroll is True else unroll)
    expected = python_fori(1, 6, lambda i, v: (v * w).sin() + i, x)
    np.testing.assert_allclose(aotjax.jit(f)(x, w).numpy(), expected.numpy(), RTOL, ATOL)
    g = aotjax.grad(lambda x: f(x, w).sum())(x)
    np.testing.assert_allclose(g.numpy(), aotjax.grad(lambda x: python_fori(1, 6, lambda i, v: (v * w).sin() + i, x)
                                                      .sum())(x).numpy(), TANGENT_RTOL, TANGENT_ATOL)


def test_concrete_tensor_bounds_make_a_scan_that_differentiates():
    x, w = _xw()
    lo, hi = aotjax.tensor(1), aotjax.tensor(4)
    g = aotjax.grad(lambda x: aotjax.fori_loop(lo, hi, lambda i, v: (v * w).sin() * i, x).sum())(x)
    expected = aotjax.grad(lambda x: python_fori(1, 4, lambda i, v: (v * w).sin() * i, x).sum())(x)
    np.testing.assert_allclose(g.numpy(), expected.numpy(), TANGENT_RTOL, TANGENT_ATOL)


@pytest.mark.parametrize("how", ["grad", "jit(grad)", "grad(jit)", "aot(grad)", "vjp"])
def test_reverse_mode_through_a_while_loop_raises_jaxs_error_at_the_users_line(how):
    loss = _loss(grow, AOTJAX)
    ways = {"grad": lambda: aotjax.grad(loss)(*_xw()), "jit(grad)": lambda: aotjax.jit(aotjax.grad(loss))(*_xw()),
            "grad(jit)": lambda: aotjax.grad(aotjax.jit(loss))(*_xw()),
            "aot(grad)": lambda: aotjax.aot(aotjax.grad(loss))(*_xw()),
            "vjp": lambda: aotjax.vjp(loss, *_xw())[1](aotjax.tensor(np.array(1.0, FLOAT)))}
    with pytest.raises(ValueError, match="Reverse-mode differentiation does not work") as info:
        ways[how]()
    assert str(info.value).startswith(GRAD_ERROR) and "test_while_loop.py" in str(info.value)


def test_reverse_mode_through_a_fori_loop_with_traced_bounds_raises_jaxs_error():
    x, w = _xw()
    with pytest.raises(ValueError, match="Reverse-mode differentiation does not work"):
        aotjax.grad(lambda x, n: fori_traced(AOTJAX, x, w.clone(), n).sum())(x, aotjax.tensor(3))


def test_a_gradient_that_does_not_flow_through_the_loop_needs_no_transpose():
    def f(x, n):  # the loop computes a scale from an integer: nothing to differentiate in it
        m = aotjax.while_loop(lambda c: c < n, lambda c: c * 2, aotjax.tensor(1))
        return (x * m).sum()

    assert aotjax.grad(f)(aotjax.ones(2), aotjax.tensor(5)).tolist() == [8.0, 8.0]


# -- fori_loop with traced bounds ---------------------------------------------------------------------------
def test_fori_loop_with_traced_bounds_is_a_while_loop_under_jit():
    x, w = _xw()
    f = lambda x, w, n: fori_traced(AOTJAX, x, w, n)  # noqa: E731
    assert "while" in [e.primitive.name for e in aotjax.make_jaxpr(f)(x, w, aotjax.tensor(3)).eqns]
    jitted = aotjax.jit(f)
    for n in (0, 3, 5):  # one program, any trip count
        w1, w2 = w.clone(), w.clone()
        got, expected = jitted(x, w1, aotjax.tensor(n)), fori_traced(PythonLoops(), x, w2, n)
        np.testing.assert_allclose(got.numpy(), expected.numpy(), RTOL, ATOL)
        np.testing.assert_allclose(w1.numpy(), w2.numpy(), RTOL, ATOL)
    tx = _tangents((3,))[0]
    _, t = aotjax.jvp(lambda x: f(x, w.clone(), aotjax.tensor(3)), (x,), (tx,))
    _, expected_t = aotjax.jvp(lambda x: fori_traced(PythonLoops(), x, w.clone(), 3), (x,), (tx,))
    np.testing.assert_allclose(t.numpy(), expected_t.numpy(), TANGENT_RTOL, TANGENT_ATOL)


def test_unroll_with_traced_bounds_raises_jaxs_error():
    f = aotjax.jit(lambda x, n: aotjax.fori_loop(0, n, lambda i, v: v + i, x, unroll=2))
    with pytest.raises(ValueError, match="Can only use unroll in fori_loop if the loop bounds are statically known"):
        f(aotjax.zeros(2), aotjax.tensor(3))
    aotjax.jit(lambda x, n: aotjax.fori_loop(0, n, lambda i, v: v + i, x, unroll=1))(aotjax.zeros(2), aotjax.tensor(3))


# -- nesting -----------------------------------------------------------------------------------------------
def while_in_scan(loops, x, w):
    """A scan whose body runs a while loop that writes a tensor captured from outside the scan."""
    def step(h, xi):
        def inner(c):
            w.add_(c[0] * 0.1)
            return c[0] * 1.5 + xi, c[1] + 1
        h, _ = loops.while_loop(lambda c: (c[0].abs().sum() < 4.0) & (c[1] < 6), inner, (h, 0))
        return h.tanh(), h.sum()

    if isinstance(loops, PythonLoops):
        ys = []
        h = x.clone()
        for xi in x.clone() * 0.5:
            h, y = step(h, xi)
            ys.append(y)
        return h, aotjax.stack(ys)
    return aotjax.scan(step, x, x * 0.5)


def while_in_while(loops, x, w):
    """A while loop whose body runs a while loop; the inner condition reads the outer carry."""
    def outer(c):
        v, k = c
        v, _ = loops.while_loop(lambda d: d[1] < k, lambda d: (d[0] * 0.9 + w, d[1] + 1), (v, 0))
        return v, k + 1

    v, _ = loops.while_loop(lambda c: c[1] < 4, outer, (x, 1))
    return v, w * 1


@pytest.mark.parametrize("program", [while_in_scan, while_in_while], ids=["while_in_scan", "while_in_while"])
def test_nested_loops_agree_with_python_loops(program):
    make = _make(*_xw())
    f = lambda x, w: program(AOTJAX, x, w)  # noqa: E731
    check_call_agrees(lambda x, w: program(PythonLoops(), x, w), f, make, "nested loops vs Python loops", RTOL, ATOL)
    check_boundary_agrees(f, make, RTOL, ATOL)
    x, w = _xw()
    tx, tw = _tangents((3,), (3,))
    first = _first_output(program)
    got = aotjax.jvp(lambda x, w: first(AOTJAX, x, w), (x.clone(), w.clone()), (tx, tw))
    expected = python_transformed(lambda g, args: aotjax.jvp(g, args, (tx, tw)), first, x, w)
    np.testing.assert_allclose(got[1].numpy(), expected[1].numpy(), TANGENT_RTOL, TANGENT_ATOL)


# -- errors ------------------------------------------------------------------------------------------------
def test_a_carry_that_changes_shape_is_named_by_its_path():
    init = {"a": aotjax.ones(2), "b": (aotjax.ones(3), aotjax.ones(3))}

    def body(c):
        return {"a": c["a"], "b": (c["b"][0], c["b"][1][:2])}

    with pytest.raises(ShapeError, match=r"while_loop: the carry \['b'\]\[1\] enters body_fun as f32\[3\] but "
                                         r"body_fun returns f32\[2\].*test_while_loop.py"):
        aotjax.while_loop(lambda c: c["a"].sum() < 0, body, init)
    with pytest.raises(ShapeError, match=r"fori_loop: the carry \[0\] enters body_fun as f32\[3\]"):
        aotjax.fori_loop(0, 2, lambda i, c: [c[0][:1]], [aotjax.ones(3)])


def test_a_carry_that_changes_dtype_or_structure_is_an_error():
    with pytest.raises(DTypeError, match=r"while_loop: the carry \(the value itself\) enters body_fun as i32\[\] "
                                         r"but body_fun returns f32\[\]"):
        aotjax.while_loop(lambda c: c < 3, lambda c: c * 1.5, aotjax.tensor(1, dtype=aotjax.int32))
    with pytest.raises(TypeError, match="while_loop: body_fun's carry output must have the structure of init_val"):
        aotjax.while_loop(lambda c: c[0] < 3, lambda c: c[0] + 1, (aotjax.tensor(0), aotjax.tensor(0)))


@pytest.mark.parametrize("cond, error, match", [
    (lambda v: v < 3, ShapeError, r"cond_fun must return a bool scalar tensor, got bool\[2\].*\(x > 0\)\.all\(\)"),
    (lambda v: v.sum(), DTypeError, r"cond_fun must return a bool scalar tensor, got f32\[\]"),
    (lambda v: (v < 3, v > 0), TypeError, r"cond_fun must return a bool scalar tensor, got a tuple of 2"),
], ids=["not_scalar", "not_bool", "not_a_tensor"])
def test_the_condition_must_return_a_bool_scalar(cond, error, match):
    with pytest.raises(error, match="while_loop: " + match):
        aotjax.while_loop(cond, lambda v: v + 1, aotjax.zeros(2))


def test_a_condition_that_writes_in_place_is_an_error():
    w = aotjax.zeros(1)
    with pytest.raises(UnsupportedError, match="cond_fun writes in place into the loop value.*must be pure"):
        aotjax.while_loop(lambda v: v.add_(1).sum() < 3, lambda v: v * 2, aotjax.zeros(2))
    with pytest.raises(UnsupportedError, match="cond_fun writes in place into a tensor captured from outside it"):
        aotjax.while_loop(lambda v: w.add_(1).sum() < 3, lambda v: v * 2, aotjax.zeros(2))
    assert w.tolist() == [0.0]
    aotjax.while_loop(lambda v: (v.clone().add_(1)).sum() < 3, lambda v: v + 1, aotjax.zeros(2))  # its own: fine


def test_fori_loop_bounds_must_be_integers_of_one_dtype():
    with pytest.raises(DTypeError, match="fori_loop: the loop bounds must be integers, got"):
        aotjax.fori_loop(0.0, 3, lambda i, v: v, aotjax.zeros(1))
    with pytest.raises(DTypeError, match="fori_loop: lower and upper must have the same dtype, got int8 and int16"):
        aotjax.fori_loop(aotjax.tensor(0, dtype=aotjax.int8), aotjax.tensor(3, dtype=aotjax.int16),
                         lambda i, v: v, aotjax.zeros(1))
    i = aotjax.fori_loop(aotjax.tensor(0, dtype=aotjax.int8), 3, lambda i, v: i, aotjax.tensor(0, dtype=aotjax.int8))
    assert i.dtype == aotjax.int8 and i.item() == 2  # a Python int takes the other bound's dtype, as in JAX


# -- the primitive: printing, dead code, cost ---------------------------------------------------------------
def _while_eqn(jaxpr):
    (eqn,) = [e for e in jaxpr.eqns if e.primitive.name == "while"]
    return eqn


def test_the_loop_prints_its_condition_and_body_nested():
    jaxpr = aotjax.make_jaxpr(lambda x: aotjax.while_loop(lambda v: v.sum() < 3, lambda v: v.sin(), x))(aotjax.ones(2))
    text = str(jaxpr)
    assert "while[cond_jaxpr=\n" in text and "body_jaxpr=\n" in text and "cond_nconsts=0 body_nconsts=0" in text
    assert text.index("reduce_sum") < text.index("body_jaxpr") < text.index("sin")


def test_dead_code_elimination_drops_unread_carries_but_keeps_what_the_condition_reads():
    def f(x, y, z):
        a, _, _ = aotjax.while_loop(lambda c: c[2] < 3, lambda c: (c[0] * 2, c[1].exp() * y, c[2] + 1), (x, y, z))
        return a

    args = (aotjax.ones(2), aotjax.ones(2), aotjax.tensor(0))
    jaxpr = dce_jaxpr(aotjax.make_jaxpr(f)(*args))
    eqn = _while_eqn(jaxpr)
    assert len(eqn.outputs) == 2 and len(eqn.params["body_jaxpr"].jaxpr.eqns) == 2  # no exp: its carry went
    assert aotjax.eval_jaxpr(jaxpr, *args)[0].tolist() == [8.0, 8.0]


def test_the_cost_rule_counts_one_trip_of_the_condition_and_the_body():
    eqn = _while_eqn(aotjax.make_jaxpr(lambda x: aotjax.while_loop(lambda v: v.sum() < 3, lambda v: v.sin(), x))(
        aotjax.ones(5)))
    assert flops(eqn) == 5 + 1 + 5  # reduce_sum reads 5, lt makes 1; sin makes 5
