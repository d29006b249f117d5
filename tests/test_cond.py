"""`cond` and `switch` against the same programs written with a Python `if`: eager cond behaves as the `if`
(outputs, writes into operands and captured tensors, aliasing), every transform (functionalize, jit, eval_jaxpr
of make_jaxpr, aot) as eager cond, every way of differentiating (grad, jit(grad), grad(aot), aot(grad), ...) as
eager grad, which must give the `if`'s gradient and the finite differences; jvp agrees with the `if`'s. Then
the rules one by one: the dot-product test of cond's transpose, the merged residuals of partial evaluation,
dead-code elimination, printing, and the errors.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

import jax
import numpy as np
import pytest

import aotjax
from aotjax import Tensor
from aotjax.core.errors import DTypeError, ShapeError, UnsupportedError
from aotjax.core.ir import dce_jaxpr
from aotjax.interpreters.partial_eval import PartialVal, partial_eval_flat
from aotjax.interpreters.transpose import UndefinedPrimal, transpose_flat
from tests.helpers import (
    FD_ATOL,
    FD_RTOL,
    FLOAT,
    assert_trees_close,
    by_mode,
    central_difference,
    check_aot_boundary_agrees,
    check_boundary_agrees,
    check_call_agrees,
    check_grads_agree,
    check_traced_agrees,
)

# NOTE: eager cond runs its branch compiled while the Python `if` runs op by op, and jit fuses: values agree to
# rounding, not bit for bit.
RTOL, ATOL = by_mode((1e-10, 1e-10), (2e-5, 2e-5))


# -- the Python `if`: cond's eager meaning, spelled out -----------------------------------------------------------
def _fresh(tree):
    """Copies of the tensors of `tree`: cond's results are values, never views of its operands."""
    return jax.tree_util.tree_map(lambda t: t.clone() if isinstance(t, Tensor) else t, tree)


class PythonIf:
    """`cond`, `switch` and `scan` as a PyTorch user writes them: a Python `if` (or an index into a list) on the
    concrete predicate, the branch called on the caller's tensors, a Python loop.

    Under a transform the predicate is not concrete: `PythonIf(decisions)` then takes the branches an eager run
    took (`PythonIf().decisions`), in order, so that it is still the same program on the same data."""

    def __init__(self, decisions=None):
        self.decisions: list[int] = []
        self._replay = iter(decisions) if decisions is not None else None

    def _taken(self, index: Callable[[], int]) -> int:
        if self._replay is not None:
            return next(self._replay)
        self.decisions.append(index())
        return self.decisions[-1]

    def cond(self, pred, true_fun, false_fun, *operands):
        return _fresh((false_fun, true_fun)[self._taken(lambda: int(bool(pred)))](*operands))

    def switch(self, index, branches, *operands):
        return _fresh(branches[self._taken(lambda: min(max(int(index), 0), len(branches) - 1))](*operands))

    @staticmethod
    def scan(f, init, xs):
        carry, ys = _fresh(init), []
        for i in range(xs.shape[0]):
            carry, y = f(carry, xs[i])
            carry = _fresh(carry)
            ys.append(_fresh(y))
        return carry, aotjax.stack(ys)


def _python_if_on_the_same_data(p) -> PythonIf:
    """A `PythonIf` that takes the branches eager `p` takes on `p.make()`'s data, under any transform."""
    eager = PythonIf()
    p.run(eager)(*p.make()[0])
    return PythonIf(eager.decisions)


# -- the programs -----------------------------------------------------------------------------------------------
def reads_captured(L, p, x, w):
    """Branches of different math reading a captured weight."""
    return L.cond(p, lambda x: (x * w).sin(), lambda x: x.cos() * w.sum(), x)


def data_pred(L, x, W):
    """The predicate computed from the data; the branches leave residuals of different shapes and numbers."""
    return L.cond(x.sum() > 0, lambda x: (W @ x).tanh(), lambda x: x.exp() * x.sum(), x)


def writes_operand(L, p, x, y):
    """One branch writes into its operand in place (also through a view); the other writes nothing."""
    def true_fun(x, y):
        x.mul_(y.sin())
        x[1:].add_(y[0])
        return x.sum(), y * 2.0

    return L.cond(p, true_fun, lambda x, y: ((x * y).sum(), y.exp()), x, y)


def writes_captured(L, p, acc, x):
    """One branch writes a tensor it captures (an argument of the enclosing function) and returns it."""
    def true_fun(x):
        acc.mul_(x.tanh())
        acc[0].add_(1.0)
        return acc

    return L.cond(p, true_fun, lambda x: x * 3.0, x)


def writes_in_both(L, p, acc, x, y):
    """Each branch writes something different: an operand in one, a captured tensor in the other."""
    def true_fun(x):
        x.add_(y.cos())
        return x * y

    def false_fun(x):
        acc.sub_(x * y)
        return x.sin()

    return L.cond(p, true_fun, false_fun, x)


def writes_strided_operand(L, p, a):
    """The operand is a transposed view of an argument: the branch's write goes through into the argument."""
    def true_fun(t):
        t.mul_(2.0)
        t[0].add_(t[1])
        return t.sum(1)

    return L.cond(p, true_fun, lambda t: t.sum(1) * 2.0, a.t())


def pytrees(L, p, x, y, z):
    """Pytree operands and outputs."""
    def true_fun(d, t):
        return {"a": d["x"] * t[0], "b": (t[1].sin(), d["y"].sum())}

    def false_fun(d, t):
        return {"a": d["x"] - t[1], "b": (t[0] * d["y"].mean(), d["x"].sum())}

    return L.cond(p, true_fun, false_fun, {"x": x, "y": y}, (z, z * 2.0))


def int_output(L, p, x):
    """A branch output that is an integer (no tangent) next to a float one."""
    return L.cond(p, lambda x: (x.sin(), x.argmax()), lambda x: (x * 2.0, x.argmin()), x)


def switch3(L, i, x, w):
    """`switch` with three branches; the index is an argument (out-of-range values are clamped)."""
    branches = [lambda x: x.sin() * w, lambda x: (x * w).cos(), lambda x: x.exp() - w]
    return L.switch(i, branches, x)


def cond_in_scan(L, W, h0, xs):
    """A cond in a scan body, on a predicate of the iteration's data; one branch writes the carry in place."""
    def step(h, x):
        def grow(h):
            h.add_((W @ x).tanh())
            return h

        h = L.cond(x.sum() > 0, grow, lambda h: h * 0.5, h)
        return h, h.sum()

    return L.scan(step, h0, xs)


def scan_in_branch(L, p, W, h0, xs):
    """A scan in a branch."""
    def rnn(h, xs):
        return L.scan(lambda h, x: ((W @ h + x).tanh(),) * 2, h, xs)[0]

    return L.cond(p, rnn, lambda h, xs: h.sin() + xs.sum(0), h0, xs)


def nested(L, p, q, x, acc):
    """A cond in a cond; the inner one writes a tensor captured from the outermost level."""
    def inner_true(x):
        acc.add_(x)
        return x.sin()

    def outer_true(x):
        return L.cond(q, inner_true, lambda x: x.cos(), x * 2.0)

    return L.cond(p, outer_true, lambda x: x.exp(), x)


def _floats(rng, *shapes):
    return [aotjax.tensor((rng.standard_normal(s) * 0.5).astype(FLOAT)) for s in shapes]


@dataclass(frozen=True)
class Program:
    """`fn(L, *args)`: `preds` are its leading non-float arguments (a bool tensor, an int index), `shapes` the float
    ones (it is differentiated in those)."""

    fn: Callable
    preds: tuple
    shapes: tuple

    def run(self, L):
        return functools.partial(self.fn, L)

    def make(self):
        """Fresh arguments: `(args, extra observed tensors)` as tests/helpers.py wants them."""
        floats = _floats(np.random.default_rng(len(self.shapes)), *self.shapes)
        return [aotjax.tensor(p) for p in self.preds] + floats, []

    @property
    def argnums(self) -> tuple:
        return tuple(range(len(self.preds), len(self.preds) + len(self.shapes)))


PROGRAMS = {
    **{f"reads-captured-{p}": Program(reads_captured, (p,), ((3,), (3,))) for p in (True, False)},
    "data-pred": Program(data_pred, (), ((3,), (3, 3))),
    **{f"writes-operand-{p}": Program(writes_operand, (p,), ((3,), (3,))) for p in (True, False)},
    **{f"writes-captured-{p}": Program(writes_captured, (p,), ((2,), (2,))) for p in (True, False)},
    **{f"writes-in-both-{p}": Program(writes_in_both, (p,), ((2,), (2,), (2,))) for p in (True, False)},
    "writes-strided-operand": Program(writes_strided_operand, (True,), ((3, 2),)),
    **{f"pytrees-{p}": Program(pytrees, (p,), ((2,), (3,), (2,))) for p in (True, False)},
    "int-output": Program(int_output, (False,), ((4,),)),
    **{f"switch-{i}": Program(switch3, (i,), ((3,), (3,))) for i in (1, 5, 0, 2, -1)},
    "cond-in-scan": Program(cond_in_scan, (), ((2, 2), (2,), (4, 2))),
    **{f"scan-in-branch-{p}": Program(scan_in_branch, (p,), ((2, 2), (2,), (3, 2))) for p in (True, False)},
    **{f"nested-{p}{q}": Program(nested, (p, q), ((2,), (2,))) for p, q in ((True, True), (True, False))},
}
# NOTE: the other branch of a program, and the other indices of switch, run everywhere but in the slowest tests
# (the transforms and the gradients), which run them in CI (slow).
SECOND_BRANCHES = {"reads-captured-False", "writes-operand-False", "writes-captured-False", "writes-in-both-False",
                   "pytrees-False", "switch-0", "switch-2", "switch--1", "scan-in-branch-False", "nested-TrueFalse"}
program = pytest.mark.parametrize("p", PROGRAMS.values(), ids=PROGRAMS.keys())
program_slow_second_branches = pytest.mark.parametrize(
    "p", [pytest.param(p, id=name, marks=[pytest.mark.slow] if name in SECOND_BRANCHES else [])
          for name, p in PROGRAMS.items()])


def _loss(fn):
    """A scalar of every float output of `fn`, nonlinear so that each has its own cotangent."""
    def loss(*args):
        floats = [o for o in jax.tree_util.tree_leaves(fn(*args)) if np.issubdtype(o.dtype, np.floating)]
        return sum((o.tanh() * (k + 1.0)).sum() for k, o in enumerate(floats))
    return loss


# -- the matrix --------------------------------------------------------------------------------------------------
@program
def test_eager_cond_behaves_as_the_python_if(p):
    check_call_agrees(p.run(PythonIf()), p.run(aotjax.lax), p.make, "eager cond vs the Python if", RTOL, ATOL)


@program_slow_second_branches
def test_every_transform_behaves_as_eager_cond(p):
    f = p.run(aotjax.lax)
    check_boundary_agrees(f, p.make, RTOL, ATOL)  # functionalize, jit, eval_jaxpr of the functionalized jaxpr
    check_traced_agrees(f, p.make, RTOL, ATOL)  # eval_jaxpr(make_jaxpr(f)) on eager tensors
    check_aot_boundary_agrees(f, p.make, RTOL, ATOL)


@program_slow_second_branches
def test_gradients_agree_with_the_python_if_and_finite_differences(p):
    loss = _loss(p.run(aotjax.lax))
    got = check_grads_agree(loss, p.make, p.argnums, rtol=RTOL, atol=ATOL)  # every way vs eager grad
    args, _ = p.make()
    expected = aotjax.grad(_loss(p.run(_python_if_on_the_same_data(p))), p.argnums)(*args)
    assert_trees_close(expected, got, RTOL, ATOL, "grad of cond vs grad of the Python if")
    _check_finite_differences(loss, p, got)


def _check_finite_differences(loss, p, grads):
    args, _ = p.make()
    preds, arrays = args[:len(p.preds)], [np.asarray(a) for a in args[len(p.preds):]]
    rng = np.random.default_rng(1)
    directions = [rng.standard_normal(a.shape).astype(a.dtype) for a in arrays]
    fd = central_difference(lambda *a: loss(*preds, *map(aotjax.tensor, a)), arrays, directions)
    analytic = sum(float(np.vdot(np.asarray(g, np.float64), d)) for g, d in zip(grads, directions, strict=True))
    np.testing.assert_allclose(analytic, fd, rtol=FD_RTOL, atol=FD_ATOL)


@program
def test_jvp_agrees_with_the_python_if(p):
    args, _ = p.make()
    rng = np.random.default_rng(2)
    tangents = _floats(rng, *p.shapes)

    def jvp(L):
        fresh, _ = p.make()
        preds = fresh[:len(p.preds)]
        return aotjax.jvp(lambda *floats: p.run(L)(*preds, *floats), fresh[len(p.preds):], tangents)

    expected = jvp(_python_if_on_the_same_data(p))
    assert_trees_close(expected, jvp(aotjax.lax), RTOL, ATOL, "jvp of cond vs jvp of the Python if")


def test_one_compiled_program_takes_either_branch():
    p = PROGRAMS["writes-operand-True"]
    f = aotjax.jit(p.run(aotjax.lax))
    for pred in (True, False, True):
        def make(pred=pred):
            args, extra = p.make()
            return [aotjax.tensor(pred), *args[1:]], extra
        check_call_agrees(p.run(PythonIf()), f, make, f"jit, pred={pred}", RTOL, ATOL)


# -- semantics ---------------------------------------------------------------------------------------------------
def test_predicates_are_scalars_meaning_nonzero():
    x = aotjax.tensor([1.0, 2.0])
    for pred, taken in ((True, 1), (0, 0), (3, 1), (-0.5, 1), (0.0, 0), (np.bool_(False), 0), (aotjax.tensor(2), 1)):
        out = aotjax.cond(pred, lambda x: x + 1.0, lambda x: x - 1.0, x)
        np.testing.assert_array_equal(out.numpy(), x.numpy() + (1.0 if taken else -1.0), err_msg=repr(pred))


def test_outputs_are_values_never_views_of_the_operands():
    x = aotjax.tensor([1.0, 2.0, 3.0])
    for pred in (True, False):
        out = aotjax.cond(pred, lambda x: x, lambda x: x[:], x)
        out.add_(10.0)
        np.testing.assert_array_equal(x.numpy(), [1.0, 2.0, 3.0])


def test_a_captured_eager_tensor_is_written_eagerly():
    acc = aotjax.zeros(2)

    def bump(x):
        acc.add_(x)
        return x

    x = aotjax.tensor([1.0, 2.0])
    aotjax.cond(True, bump, lambda x: x, x)
    aotjax.cond(False, bump, lambda x: x, x)
    np.testing.assert_array_equal(acc.numpy(), [1.0, 2.0])


def test_both_branches_are_traced_once_each():
    calls = []

    def branch(k):
        def fn(x):
            calls.append(k)
            return x * float(k)
        return fn

    aotjax.switch(1, [branch(0), branch(1), branch(2)], aotjax.ones(2))
    assert sorted(calls) == [0, 1, 2]


# -- the rules one by one ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("pred", [True, False])
def test_transpose_of_a_linear_cond_is_its_adjoint(pred):
    """<f(x, y), ct> == <(x, y), f^T(ct)> for a cond linear in its operands, with a captured matrix (a known
    value) in one branch and a slice and a flip in the other."""
    rng = np.random.default_rng(0)
    W, x, y, ct_a, ct_b = _floats(rng, (3, 3), (3,), (3,), (3,), ())

    def f(x, y):
        a, b = aotjax.cond(pred, lambda x, y: (W @ x + y * 2.0, y.sum()),
                           lambda x, y: (x.flip(0) - y, x[1:].sum() * 3.0), x, y)
        return [a, b]

    avals = [UndefinedPrimal(aotjax.ShapedArray((3,), FLOAT))] * 2
    ct_x, ct_y = transpose_flat(f, avals, [ct_a, ct_b])
    a, b = f(x, y)
    lhs = float((a * ct_a).sum() + b * ct_b)
    rhs = float((x * ct_x).sum() + (y * ct_y).sum())
    np.testing.assert_allclose(lhs, rhs, rtol=by_mode(1e-12, 1e-5))


def _conds(jaxpr):
    return [e for e in jaxpr.eqns if e.primitive.name == "cond"]


def test_partial_eval_merges_the_branches_residuals_by_type_and_forwards_operands():
    """Each branch of the forward cond leaves one f32[3] residual (cos x, exp x): they share one slot; the
    operand `w` read by the backward is forwarded, never returned by the cond."""
    x, w = aotjax.ones(3), aotjax.ones(3)

    def loss(x, w):
        return aotjax.cond(x.sum() > 0, lambda x: (x.sin() * w).sum(), lambda x: x.exp().sum(), x)

    jaxpr = aotjax.make_jaxpr(aotjax.grad(loss))(x, w)
    forward, backward = _conds(jaxpr)
    assert len(forward.outputs) == 2, forward  # the primal output and one residual slot
    assert backward.inputs[1:3] == [jaxpr.jaxpr.invars[1], forward.outputs[1]], backward  # w, the slot


def test_partial_eval_with_an_unknown_index_records_the_whole_cond():
    x = aotjax.tensor([0.5, 1.0])

    def f(i, x):
        return aotjax.switch(i, [lambda x: x.sin(), lambda x: x.cos() * 2.0], x)

    i = aotjax.tensor(1)
    jaxpr, pvals_out, residuals = partial_eval_flat(f, [PartialVal.unknown(i.aval), PartialVal.known(x)])
    (eqn,) = _conds(jaxpr)
    assert not pvals_out[0].is_known and len(eqn.params["branches"]) == 2
    assert [len(b.eqns) for b in eqn.params["branches"]] == [1, 2]  # the branches whole
    np.testing.assert_allclose(aotjax.eval_jaxpr(jaxpr, *residuals, i)[0].numpy(), np.cos(x.numpy()) * 2.0)


def test_linearize_runs_the_known_cond_now_and_the_linear_cond_later():
    x = aotjax.tensor([0.5, 1.0])
    primal, f_lin = aotjax.linearize(lambda x: aotjax.cond(x.sum() > 0, lambda x: x.sin(), lambda x: x * 2.0, x), x)
    np.testing.assert_allclose(primal.numpy(), np.sin(x.numpy()), rtol=1e-6)
    np.testing.assert_allclose(f_lin(aotjax.ones(2)).numpy(), np.cos(x.numpy()), rtol=1e-6)


@pytest.mark.parametrize("name", ["data-pred", "writes-operand-True", "switch-1", "nested-TrueTrue"])
def test_grad_of_grad_agrees_with_the_python_if(name):
    p = PROGRAMS[name]

    def hvp(L):
        grads = aotjax.grad(_loss(p.run(L)), p.argnums)
        args, _ = p.make()
        return aotjax.grad(lambda *a: sum(g.sin().sum() for g in grads(*a)), p.argnums)(*args)

    expected = hvp(_python_if_on_the_same_data(p))
    assert_trees_close(expected, hvp(aotjax.lax), RTOL, ATOL, "grad(grad) of cond vs of the Python if")


def test_dead_outputs_and_operands_leave_every_branch():
    def f(p, x, y):
        a, _ = aotjax.cond(p, lambda x, y: (x.sin(), y.cos()), lambda x, y: (x * 2.0, y.exp()), x, y)
        return a

    jaxpr = dce_jaxpr(aotjax.make_jaxpr(f)(True, aotjax.ones(2), aotjax.ones(2)))
    (eqn,) = _conds(jaxpr)
    assert len(eqn.outputs) == 1 and len(eqn.inputs) == 2  # the index and x: y is read by no branch now
    names = {e.primitive.name for b in eqn.params["branches"] for e in b.eqns}
    assert names == {"sin", "mul"}


def test_flops_are_the_costliest_branch():
    from aotjax.partition.min_cut import flops

    def f(p, x):
        return aotjax.cond(p, lambda x: x.sin().sin().sin(), lambda x: x.cos(), x)

    (eqn,) = _conds(aotjax.make_jaxpr(f)(True, aotjax.ones(4)))
    assert flops(eqn) == 12


def test_printed_with_its_branches_nested():
    text = str(aotjax.make_jaxpr(lambda p, x: aotjax.cond(p, lambda x: x.sin(), lambda x: x.cos(), x))(
        True, aotjax.ones(3)))
    assert text == """\
{ lambda ; a:bool[] b:f32[3]. let
    c:i32[] = convert_element_type[new_dtype=int32] a
    h:f32[3] = cond[branches=(
          { lambda ; d:f32[3]. let
              e:f32[3] = cos d
            in (e,) }
          { lambda ; f:f32[3]. let
              g:f32[3] = sin f
            in (g,) }
        )] c b
  in (h,) }"""


def test_lowers_to_one_conditional():
    def f(p, x):
        return aotjax.cond(p, lambda x: x.sin(), lambda x: x.cos(), x)

    text = aotjax.jit(f).lower(aotjax.tensor(True), aotjax.ones(3)).as_text()
    assert "stablehlo.case" in text or "mhlo.case" in text, text


# -- errors ------------------------------------------------------------------------------------------------------
def test_mismatched_branch_outputs_name_the_path():
    x = aotjax.ones(3)
    with pytest.raises(ShapeError, match=r"output \['b'\]\[1\] is f32\[3\] in false_fun and f32\[\] in true_fun"):
        aotjax.cond(True, lambda x: {"a": x, "b": (x, x.sum())}, lambda x: {"a": x, "b": (x, x)}, x)
    with pytest.raises(DTypeError, match=r"output \[0\] is f32\[3\] in branches\[0\] and i32\[3\] in branches\[2\]"):
        aotjax.switch(0, [lambda x: [x], lambda x: [x], lambda x: [x.int()]], x)
    with pytest.raises(TypeError, match="same pytree structure"):
        aotjax.cond(True, lambda x: (x, x), lambda x: [x, x], x)


def test_a_predicate_must_be_a_scalar():
    with pytest.raises(ShapeError, match=r"cond: pred must be a scalar, got a tensor of shape \[2\]"):
        aotjax.cond(aotjax.tensor([True, False]), lambda x: x, lambda x: x, aotjax.ones(2))
    with pytest.raises(ShapeError, match=r"switch: the branch index must be a scalar"):
        aotjax.switch(aotjax.tensor([0, 1]), [lambda x: x], aotjax.ones(2))
    with pytest.raises(DTypeError, match="switch: the branch index must be an integer, got float32"):
        aotjax.switch(aotjax.tensor(1.0), [lambda x: x, lambda x: x], aotjax.ones(2))


def test_wrong_number_of_operands():
    with pytest.raises(TypeError, match=r"cond: true_fun cannot be called on the 2 operands given"):
        aotjax.cond(True, lambda x: x, lambda x, y: x, aotjax.ones(2), aotjax.ones(2))
    with pytest.raises(TypeError, match=r"switch: branches\[0\] cannot be called on the 1 operand given"):
        aotjax.switch(0, [lambda x, y: x], aotjax.ones(2))
    with pytest.raises(ValueError, match="switch: branches is empty"):
        aotjax.switch(0, [], aotjax.ones(2))
    with pytest.raises(TypeError, match="switch: branches must be a sequence of functions, got function"):
        aotjax.switch(0, lambda x: x, aotjax.ones(2))


def test_a_written_operand_sharing_memory_with_another_is_refused():
    x = aotjax.ones(3)
    with pytest.raises(UnsupportedError, match="operand 1 shares memory with operand 0"):
        aotjax.cond(True, lambda a, b: a.add_(b), lambda a, b: a, x, x[:])

    def reads_x_writes_operand(a):
        a.add_(x)
        return a

    with pytest.raises(UnsupportedError, match="operand 0 shares memory with a tensor the branches capture"):
        aotjax.cond(True, reads_x_writes_operand, lambda a: a, x)


def test_changing_an_operands_view_in_place_is_refused():
    with pytest.raises(UnsupportedError, match="changes the view of its operand 0 in place"):
        aotjax.cond(True, lambda x: x.t_(), lambda x: x, aotjax.ones(2, 3))
