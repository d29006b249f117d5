"""`scan` and `lax.map` against the same programs written as Python loops.

Each program of the matrix is written once against a loop implementation (`L.scan`, `L.map`) and run two ways:
with `aotjax.lax` (the `scan_p` primitive) and with `PythonLoops`, a Python loop that spells out the eager
meaning scan promises (a fresh carry each iteration, `x` a view of `xs[i]`, captured tensors written as the
body writes them). Eager scan must behave as the loop (outputs, writes into arguments, aliasing), every
transform (functionalize, jit, eval_jaxpr of make_jaxpr, aot) as eager scan, every way of differentiating
(grad, jit(grad), grad(aot), aot(grad), ...) as eager grad, which must give the loop's gradient and the finite
differences; jvp and grad(grad) agree with the loop's. Then what the issue names: the StableHLO of `unroll`,
no stacked copy of a captured weight among aot's residuals, the dot-product test of scan's transpose,
`checkpoint(body)` saving only the carry, and the errors.
"""
from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

import aotjax
from aotjax import Tensor
from aotjax.core.errors import DTypeError, ShapeError, UnsupportedError
from aotjax.interpreters.transpose import UndefinedPrimal, transpose_flat
from tests.helpers import (
    FD_ATOL,
    FD_RTOL,
    FLOAT,
    INT,
    X64,
    assert_trees_close,
    by_mode,
    central_difference,
    check_aot_boundary_agrees,
    check_boundary_agrees,
    check_call_agrees,
    check_grads_agree,
    check_traced_agrees,
)

# NOTE: eager scan runs its body compiled (one XLA loop) while the Python loop runs op by op, and jit fuses:
# values agree to rounding, not bit for bit.
RTOL, ATOL = by_mode((1e-10, 1e-10), (2e-5, 2e-5))


# -- the Python loop: scan's eager meaning, spelled out ------------------------------------------------------
def _fresh(tree):
    """Copies of the tensors of `tree`: a value that crosses an iteration boundary aliases nothing."""
    return jax.tree_util.tree_map(lambda t: t.clone() if isinstance(t, Tensor) else t, tree)


class PythonLoops:
    """`scan` and `map` as Python loops over views, as a PyTorch user writes them: `for i in range(n): carry,
    ys[i] = f(carry, xs[i])`, the carry copied at each iteration boundary (the body owns its carry)."""

    @staticmethod
    def scan(f, init, xs=None, length=None, reverse=False, unroll=1):
        leaves, tree = jax.tree_util.tree_flatten(xs)
        n = length if length is not None else leaves[0].shape[0]
        carry, ys = _fresh(init), []
        for i in reversed(range(n)) if reverse else range(n):
            carry, y = f(carry, jax.tree_util.tree_unflatten(tree, [leaf[i] for leaf in leaves]))
            carry = _fresh(carry)
            ys.append(_fresh(y))
        if reverse:
            ys.reverse()
        if not ys:  # NOTE: the structure of y comes from a throwaway call on zeros (the bodies here write nothing)
            x = [aotjax.zeros(*leaf.shape[1:], dtype=leaf.dtype) for leaf in leaves]
            y = f(_fresh(init), jax.tree_util.tree_unflatten(tree, x))[1]
            return carry, jax.tree_util.tree_map(lambda t: aotjax.zeros(0, *t.shape, dtype=t.dtype), y)
        return carry, jax.tree_util.tree_map(lambda *ts: aotjax.stack(ts), *ys)

    @staticmethod
    def map(f, xs):
        return PythonLoops.scan(lambda c, x: (c, f(x)), (), xs)[1]


# -- the programs -----------------------------------------------------------------------------------------------
def rnn(L, W, h0, xs, reverse=False, unroll=1):
    """An RNN reading a captured weight: h <- tanh(W h + x)."""
    def step(h, x):
        h = (W @ h + x).tanh()
        return h, h * 2.0
    return L.scan(step, h0, xs, reverse=reverse, unroll=unroll)


def pytree_carry(L, h0, xs, zs):
    """A dict-and-tuple carry, tuple xs, no ys."""
    def step(c, x):
        (u, z), (b, s) = x, c["bs"]
        a = c["a"] * u.sin() + b * z
        return {"a": a, "bs": (b.cos() * a.mean(), s + (a * b).sum())}, None
    return L.scan(step, {"a": h0, "bs": (h0 * 0.5, h0.sum())}, (xs, zs))


def no_xs(L, h0):
    """No xs: the number of iterations is `length`."""
    return L.scan(lambda h, _: (h.sin() * 1.5 + 0.1, h.sum()), h0, length=4)


def zero_length(L, h0, xs):
    """Zero iterations: the carry is init, ys are empty."""
    return L.scan(lambda h, x: ((h * x).tanh() + h, h.sin() * x), h0, xs)


def inplace_carry(L, m, xs):
    """In-place ops on the carry, which starts as a view of an argument: the caller's tensor is never written;
    y is the carry itself (materialized at the iteration boundary)."""
    def step(h, x):
        h.mul_(0.5).add_(x)
        h[0].mul_(x[1])
        return h, h
    return L.scan(step, m[1], xs)


def writes_x(L, c0, xs):
    """Writes into `x`, a view of `xs[i]`, go through to the caller's xs; y aliases x."""
    def step(c, x):
        x.mul_(c.tanh() + 1.0)
        x[0].add_(1.0)
        return c + x, x
    return L.scan(step, c0, xs)


def writes_strided_x(L, c0, a):
    """xs is a transposed view of an argument: each `x` is a strided column, written through."""
    def step(c, x):
        x.add_(c.sin())
        return c * 0.5 + x.sum(), None
    return L.scan(step, c0, a.t())


def writes_captured(L, acc, h0, xs):
    """A tensor the body captures (an argument of the enclosing function) written in every iteration, also
    through a view; y is the captured tensor itself."""
    def step(h, x):
        acc.mul_(0.9).add_(x * h)
        acc[1:].add_(h[0])
        return h + acc.sum() * 0.1, acc
    return L.scan(step, h0, xs)


def nested(L, W, acc, h0, xss):
    """A scan in a scan; the inner body reads a weight and writes a tensor captured from the outermost level."""
    def inner(h, x):
        h = (W @ h + x).tanh()
        acc.add_(h * 0.5)
        return h, h.sum()

    def outer(h, xs):
        h, ys = L.scan(inner, h, xs)
        return h * 0.9, ys
    return L.scan(outer, h0, xss)


def checkpointed(L, W, h0, xs):
    """`checkpoint(body)` inside scan."""
    def step(h, x):
        return (W @ h + x).sin().tanh(), None
    return L.scan(aotjax.checkpoint(step), h0, xs)


def mapped(L, W, xs):
    """`lax.map`."""
    return L.map(lambda x: (W @ x).sin(), xs)


def counter(L, h0, xs):
    """An int carry (a counter) next to a float one, and int ys."""
    def step(c, x):
        i, h = c
        h = h * x.cos() + i * 0.5
        return (i + 1, h), i * 2
    return L.scan(step, (aotjax.tensor(0), h0), xs)


def embedding(L, E, h0, ids):
    """Integer xs: each iteration gathers a row of a captured table."""
    return L.scan(lambda h, i: ((h + E[i]).tanh(), h.sum()), h0, ids)


def carry_from_x(L, h0, xs):
    """The carry out is `x` itself, written in place by the next iteration: the caller's xs is not written."""
    def step(h, x):
        h.add_(1.0)
        return x, h.sum()
    return L.scan(step, h0, xs)


def captured_views(L, acc, xs):
    """The body captures two views of one tensor made outside it, writes both and reads the whole."""
    a0, a1 = acc[0], acc[1]

    def step(c, x):
        a0.add_(x * c)
        a1.mul_(a0.sin())
        return c + acc.sum() * 0.1, None
    return L.scan(step, aotjax.ones((), dtype=acc.dtype), xs)


def init_is_captured(L, acc, xs):
    """The carry starts from a tensor the body also captures and writes: the carry is a copy."""
    def step(h, x):
        acc.add_(x)
        h.mul_(0.5)
        return h + acc, acc.sum()
    return L.scan(step, acc, xs)


def reads_xs_whole(L, xs):
    """The body reads the whole of xs (captured) beside its slice x, writing neither."""
    return L.scan(lambda h, x: (h * 0.5 + xs.mean() * x, None), aotjax.zeros(xs.shape[1], dtype=xs.dtype), xs)


def reverse_writes(L, acc, a):
    """A reverse scan, unrolled by 2 over an odd length, over an offset view, writing x and a captured tensor:
    the writes land in reverse order."""
    def step(h, x):
        x.mul_(h.cos())
        acc.mul_(0.5).add_(x)
        return h + x.sum(), x.sum()
    return L.scan(step, aotjax.zeros((), dtype=a.dtype), a[1:, 1:], reverse=True, unroll=2)


def nested_writes(L, c0, xss, zs):
    """The inner body writes the outer body's `x` (captured) and its own `x`: both reach the caller's xss, zs."""
    def outer(c, row):
        def inner(d, z):
            row.mul_(z.sum().tanh())
            z.add_(d)
            return d + row.sum(), None
        d, _ = L.scan(inner, c, zs)
        return d * 0.5, row.sum()
    return L.scan(outer, c0, xss)


def checkpoint_around(L, W, h0, xs):
    """`checkpoint` around a scan: the backward re-runs the loop."""
    return aotjax.checkpoint(functools.partial(rnn, L))(W, h0, xs)


def jit_in_body(L, W, h0, xs):
    """A jitted function called in the body is traced into it."""
    return L.scan(lambda h, x: (_cell(W, h, x), h.sum()), h0, xs)


_cell = aotjax.jit(lambda W, h, x: (W @ h + x).tanh())


def policy_in_body(L, W, h0, xs):
    """A checkpoint policy inside the body: only the named value is saved."""
    def step(h, x):
        a = aotjax.checkpoint_name((W @ h).sin(), "a")
        return (W @ a + x).tanh(), None
    policy = aotjax.checkpoint_policies.save_only_these_names("a")
    return L.scan(aotjax.checkpoint(step, policy=policy), h0, xs)


@dataclass(frozen=True)
class Ints:
    """An integer argument: `shape`, entries in [0, high)."""

    shape: tuple
    high: int


@dataclass(frozen=True)
class Program:
    """A program of the matrix: `fn(L, *args, **kwargs)`, its arguments (a shape for a float one, `Ints`), the
    float ones it is differentiated in. `slow`: only its eager run against the loop is among the fast tests."""

    fn: Callable
    args: tuple
    kwargs: tuple = ()
    slow: bool = False

    @property
    def argnums(self) -> tuple:
        return tuple(i for i, a in enumerate(self.args) if not isinstance(a, Ints))

    def run(self, L):
        return functools.partial(self.fn, L, **dict(self.kwargs))

    def make(self):
        """Fresh arguments: `(args, extra observed tensors)` as tests/helpers.py wants them."""
        rng = np.random.default_rng(len(self.args))
        return [aotjax.tensor(rng.integers(0, a.high, a.shape).astype(INT)) if isinstance(a, Ints) else
                aotjax.tensor((rng.standard_normal(a) * 0.5).astype(FLOAT)) for a in self.args], []


RNN = ((3, 3), (3,), (5, 3))
PROGRAMS = {
    "rnn": Program(rnn, RNN),
    "rnn-reverse": Program(rnn, RNN, (("reverse", True),), slow=True),
    "rnn-unroll2": Program(rnn, RNN, (("unroll", 2),), slow=True),
    "rnn-unroll-all": Program(rnn, RNN, (("unroll", True),), slow=True),
    "rnn-unroll-past-length": Program(rnn, RNN, (("unroll", 7),), slow=True),
    "pytree-carry": Program(pytree_carry, ((3,), (4, 3), (4, 3)), slow=True),
    "no-xs": Program(no_xs, ((3,),), slow=True),
    "zero-length": Program(zero_length, ((3,), (0, 3))),
    "inplace-carry": Program(inplace_carry, ((2, 3), (4, 3))),
    "writes-x": Program(writes_x, ((2,), (3, 2))),
    "writes-strided-x": Program(writes_strided_x, ((), (3, 4)), slow=True),
    "writes-captured": Program(writes_captured, ((3,), (3,), (4, 3))),
    "nested": Program(nested, ((2, 2), (2,), (2,), (3, 2, 2))),
    "checkpointed": Program(checkpointed, ((3, 3), (3,), (4, 3))),
    "map": Program(mapped, ((3, 2), (4, 2)), slow=True),
    "counter": Program(counter, ((2,), (3, 2))),
    "embedding": Program(embedding, ((4, 2), (2,), Ints((5,), 4)), slow=True),
    "carry-from-x": Program(carry_from_x, ((2,), (3, 2)), slow=True),
    "captured-views": Program(captured_views, ((2, 3), (4, 3))),
    "init-is-captured": Program(init_is_captured, ((2,), (3, 2)), slow=True),
    "reads-xs-whole": Program(reads_xs_whole, ((3, 2),), slow=True),
    "reverse-writes": Program(reverse_writes, ((3,), (6, 4))),
    "nested-writes": Program(nested_writes, ((), (3, 2, 3), (4, 2)), slow=True),
    "checkpoint-around": Program(checkpoint_around, RNN, slow=True),
    "jit-in-body": Program(jit_in_body, RNN, slow=True),
    "policy-in-body": Program(policy_in_body, RNN, slow=True),
}
program = pytest.mark.parametrize("p", PROGRAMS.values(), ids=PROGRAMS.keys())
program_slow_marked = pytest.mark.parametrize(
    "p", [pytest.param(p, marks=pytest.mark.slow) if p.slow else p for p in PROGRAMS.values()], ids=PROGRAMS.keys())


def _loss(fn):
    """A scalar of every float output of `fn`, nonlinear so that each has its own cotangent."""
    def loss(*args):
        floats = [o for o in jax.tree_util.tree_leaves(fn(*args)) if np.issubdtype(o.dtype, np.floating)]
        return sum((o.tanh() * (k + 1.0)).sum() for k, o in enumerate(floats))
    return loss


# -- the matrix --------------------------------------------------------------------------------------------------
@program
def test_eager_scan_behaves_as_the_python_loop(p):
    check_call_agrees(p.run(PythonLoops), p.run(aotjax.lax), p.make, "eager scan vs the Python loop", RTOL, ATOL)


@program_slow_marked
def test_every_transform_behaves_as_eager_scan(p):
    f = p.run(aotjax.lax)
    check_boundary_agrees(f, p.make, RTOL, ATOL)  # functionalize, jit, eval_jaxpr of the functionalized jaxpr
    check_traced_agrees(f, p.make, RTOL, ATOL)  # eval_jaxpr(make_jaxpr(f)) on eager tensors
    check_aot_boundary_agrees(f, p.make, RTOL, ATOL)


@program_slow_marked
def test_gradients_agree_with_the_loop_and_finite_differences(p):
    loss = _loss(p.run(aotjax.lax))
    args, _ = p.make()
    got = aotjax.grad(loss, p.argnums)(*args)
    args, _ = p.make()
    expected = aotjax.grad(_loss(p.run(PythonLoops)), p.argnums)(*args)
    assert_trees_close(expected, got, RTOL, ATOL, "grad of scan vs grad of the Python loop")
    _check_finite_differences(loss, p, got)


def _check_finite_differences(loss, p, grads):
    args, _ = p.make()
    arrays = [np.asarray(a) for a in args]
    rng = np.random.default_rng(1)
    directions = [rng.standard_normal(a.shape).astype(a.dtype) if i in p.argnums else np.zeros_like(a)
                  for i, a in enumerate(arrays)]
    fd = central_difference(lambda *a: loss(*map(aotjax.tensor, a)), arrays, directions)
    analytic = sum(float(np.vdot(np.asarray(g, np.float64), directions[i]))
                   for i, g in zip(p.argnums, grads, strict=True))
    np.testing.assert_allclose(analytic, fd, rtol=FD_RTOL, atol=FD_ATOL)


@program_slow_marked
def test_every_way_of_differentiating_agrees_with_eager_grad(p):
    # grad, value_and_grad, jit(grad), grad(jit), grad(aot) (default and min-cut partitions), aot(grad): the
    # gradient, the value and the writes into the arguments
    check_grads_agree(_loss(p.run(aotjax.lax)), p.make, p.argnums, rtol=RTOL, atol=ATOL)


SUBSETS = [pytest.param(name, argnums, id=f"{name}-{''.join(map(str, argnums))}",
                        marks=[pytest.mark.slow] if (name, k) != ("rnn", 1) else [])
           for name in ("rnn", "writes-captured") for k in (1, 2)
           for argnums in itertools.combinations(PROGRAMS[name].argnums, k)]


@pytest.mark.parametrize("name, argnums", SUBSETS)
def test_gradients_in_some_arguments_agree_with_the_loop(name, argnums):
    # which operands are differentiated decides which carries are known: each pattern splits the loop differently
    p = PROGRAMS[name]
    expected = aotjax.grad(_loss(p.run(PythonLoops)), argnums)(*p.make()[0])
    for how, grad in {"grad": aotjax.grad(_loss(p.run(aotjax.lax)), argnums),
                      "grad(aot)": aotjax.grad(aotjax.aot(_loss(p.run(aotjax.lax))), argnums)}.items():
        assert_trees_close(expected, grad(*p.make()[0]), RTOL, ATOL, f"{how} of scan vs grad of the Python loop")


def _with_floats(p, L):
    """`p`'s function of its float arguments alone (its integer ones fixed)."""
    args, _ = p.make()

    def f(*floats):
        full = list(args)
        for i, x in zip(p.argnums, floats, strict=True):
            full[i] = x
        return p.run(L)(*full)
    return f, [args[i] for i in p.argnums]


@program_slow_marked
def test_jvp_agrees_with_the_loop(p):
    def jvp(L):
        f, primals = _with_floats(p, L)
        tangents = [aotjax.tensor(np.random.default_rng(2).standard_normal(x.shape).astype(FLOAT)) for x in primals]
        return aotjax.jvp(f, primals, tangents)

    assert_trees_close(jvp(PythonLoops), jvp(aotjax.lax), RTOL, ATOL, "jvp of scan vs jvp of the Python loop")


@program_slow_marked
def test_grad_of_grad_agrees_with_the_loop(p):
    def grad_of_grad(L):
        f, primals = _with_floats(p, L)
        grads = aotjax.grad(_loss(f), tuple(range(len(primals))))
        return aotjax.grad(lambda *a: sum(g.sin().sum() for g in grads(*a)), tuple(range(len(primals))))(*primals)

    assert_trees_close(grad_of_grad(PythonLoops), grad_of_grad(aotjax.lax), RTOL, ATOL,
                       "grad(grad) of scan vs of the Python loop")


# -- against jax.lax.scan on the same math -----------------------------------------------------------------------
def _rnn_jax(W, h0, xs):
    def step(h, x):
        h = jnp.tanh(W @ h + x)
        return h, h * 2.0
    return jax.lax.scan(step, h0, xs)


def test_the_rnn_and_its_gradient_agree_with_jax_lax_scan():
    args, _ = PROGRAMS["rnn"].make()
    arrays = [jnp.asarray(np.asarray(a)) for a in args]
    assert_trees_close(_rnn_jax(*arrays), rnn(aotjax.lax, *args), RTOL, ATOL, "rnn vs jax.lax.scan")

    def loss_jax(*a):
        return sum(jnp.sum(jnp.tanh(o) * (k + 1.0)) for k, o in enumerate(_rnn_jax(*a)))
    expected = jax.grad(loss_jax, (0, 1, 2))(*arrays)
    assert_trees_close(expected, aotjax.grad(_loss(functools.partial(rnn, aotjax.lax)), (0, 1, 2))(*args), RTOL,
                       ATOL, "grad of the rnn vs jax.grad of jax.lax.scan")


# -- what eager scan is -------------------------------------------------------------------------------------------
def test_the_body_is_traced_once_not_per_iteration():
    calls = []

    def step(h, x):
        calls.append(None)
        return h + x, None
    aotjax.scan(step, aotjax.zeros(2), aotjax.ones(6, 2))
    assert len(calls) == 1


def test_a_global_tensor_written_in_the_body_gets_every_iteration_write_eagerly():
    def run(L):
        total = aotjax.zeros(2)
        def step(c, x):
            total.mul_(0.5).add_(x)
            return c, None
        L.scan(step, aotjax.zeros(()), aotjax.arange(6.0).view(3, 2))
        return total
    assert_trees_close(run(PythonLoops), run(aotjax.lax), how="a captured global written in the body")


# -- the StableHLO of unroll -------------------------------------------------------------------------------------
@pytest.mark.parametrize("unroll, loops", [(1, True), (2, True), (True, False)], ids=["1", "2", "True"])
def test_the_stablehlo_holds_a_while_unless_fully_unrolled(unroll, loops):
    args, _ = PROGRAMS["rnn"].make()
    text = aotjax.jit(functools.partial(rnn, aotjax.lax, unroll=unroll)).lower(*args).as_text()
    assert ("stablehlo.while" in text) == loops


# -- residuals -------------------------------------------------------------------------------------------------
def _sum(fn):
    """The sum of `fn`'s float outputs: a loss whose backward needs no residual outside the loop."""
    def loss(*args):
        return sum(o.sum() for o in jax.tree_util.tree_leaves(fn(*args)) if np.issubdtype(o.dtype, np.floating))
    return loss


def _stacked_residuals(lowered):
    """The residuals the forward computes (not primal inputs passed as they are)."""
    return [r for r, i in zip(lowered.residuals, lowered.saved_inputs, strict=True) if i is None]


def test_a_captured_weight_is_passed_to_the_backward_as_the_primal_input_never_stacked():
    W, h0, xs = PROGRAMS["rnn"].make()[0]
    lowered = aotjax.aot(_sum(functools.partial(rnn, aotjax.lax))).lower(W, h0, xs)
    assert 0 in lowered.saved_inputs  # W itself is a residual: the caller's input
    shapes = [r.aval.shape for r in lowered.residuals]
    assert (xs.shape[0], *W.shape) not in shapes, shapes
    assert all(r.aval.shape[0] == xs.shape[0] for r in _stacked_residuals(lowered))  # the rest are per iteration


def test_stacked_weights_scanned_over_are_forwarded_not_copied():
    rng = np.random.default_rng(0)
    Ws, h0 = (aotjax.tensor(rng.standard_normal(s).astype(FLOAT)) for s in ((4, 3, 3), (3,)))

    def layers(Ws, h0):
        return aotjax.scan(lambda h, w: ((w @ h).tanh(), None), h0, Ws)[0].sum()
    lowered = aotjax.aot(layers).lower(Ws, h0)
    assert 0 in lowered.saved_inputs
    assert Ws.shape not in [r.aval.shape for r in _stacked_residuals(lowered)]


def test_a_cheap_function_of_a_scanned_weight_is_recomputed_by_the_backward_not_stacked():
    rng = np.random.default_rng(0)
    Ws, h0, scale = (aotjax.tensor(rng.standard_normal(s).astype(FLOAT)) for s in ((4, 3, 5), (2, 3), (5,)))

    def layers(T, Ws, h0, scale):
        def layer(h, w):  # a transposed slice, scaled by a loop constant (a function of it, recomputed too)
            return (h @ (w * scale.exp()).t().t().t().t()).tanh() @ w.t(), None
        if T is torch:
            h = h0
            for w in Ws:
                h = layer(h, w)[0]
            return h.square().sum()
        return aotjax.scan(layer, h0, Ws)[0].square().sum()
    lowered = aotjax.aot(functools.partial(layers, aotjax)).lower(Ws, h0, scale)
    shapes = [r.aval.shape for r in _stacked_residuals(lowered)]
    assert (4, 3, 5) not in shapes and (4, 5, 3) not in shapes, shapes  # not the slice, its transpose or product
    theirs = [torch.tensor(np.asarray(t), requires_grad=True) for t in (Ws, h0, scale)]
    layers(torch, *theirs).backward()
    for ours, their in zip(aotjax.grad(functools.partial(layers, aotjax), argnums=(0, 1, 2))(Ws, h0, scale), theirs):
        np.testing.assert_allclose(np.asarray(ours), their.grad.numpy(), rtol=1e-4, atol=1e-4)


def test_a_residual_of_the_loop_constants_alone_is_computed_once_outside_the_loop():
    W, h0, xs = PROGRAMS["rnn"].make()[0]

    def f(W, h0, xs):
        return aotjax.scan(lambda h, x: (W.sin() @ h + x, None), h0, xs)[0].sum()
    lowered = aotjax.aot(f).lower(W, h0, xs)
    shapes = [r.aval.shape for r in _stacked_residuals(lowered)]
    assert W.shape in shapes and (xs.shape[0], *W.shape) not in shapes, shapes  # cos(W): once, not per iteration


def _scan_bodies(jaxpr):
    return [e.params["jaxpr"].jaxpr for e in jaxpr.eqns if e.primitive.name == "scan"]


def test_checkpoint_inside_scan_saves_only_the_carry_and_recomputes_the_body_backward():
    args, _ = PROGRAMS["checkpointed"].make()
    W, h0, xs = args
    saved = aotjax.aot(_sum(functools.partial(checkpointed, aotjax.lax))).lower(*args)
    assert [r.aval.shape for r in _stacked_residuals(saved)] == [(xs.shape[0], *h0.shape)]  # the carry per iteration
    (backward_body,) = _scan_bodies(saved.backward)
    assert {"sin", "tanh"} <= {e.primitive.name for e in backward_body.eqns}  # the body, recomputed
    plain = aotjax.aot(_sum(lambda W, h0, xs: aotjax.scan(lambda h, x: ((W @ h + x).sin().tanh(), None), h0, xs)))
    assert len(_stacked_residuals(plain.lower(*args))) > 1  # without checkpoint, more is saved per iteration


def test_a_policy_inside_the_body_saves_what_it_names():
    args, _ = PROGRAMS["policy-in-body"].make()
    lowered = aotjax.aot(_sum(functools.partial(policy_in_body, aotjax.lax))).lower(*args)
    assert len(_stacked_residuals(lowered)) == 2  # the carry and the named value, per iteration
    (backward_body,) = _scan_bodies(lowered.backward)
    assert "sin" not in {e.primitive.name for e in backward_body.eqns}  # the named value is not recomputed


def test_carries_and_ys_nothing_reads_are_pruned_from_the_loop():
    def f(h0, xs):
        def step(c, x):
            a, b = c
            return (a * x.cos(), b + a.sin()), (a.sum(), b.sum())
        (a, _), _ = aotjax.scan(step, (h0, h0 * 2.0), xs)
        return a.sum()
    forward = aotjax.aot(f).lower(aotjax.ones(3), aotjax.ones(4, 3)).forward
    (eqn,) = [e for e in forward.eqns if e.primitive.name == "scan"]
    assert eqn.params["num_carry"] == 1  # `b` is gone
    assert "reduce_sum" not in {e.primitive.name for e in eqn.params["jaxpr"].jaxpr.eqns}  # and so are the ys


# -- the transpose: a dot-product test ------------------------------------------------------------------------------
def _vdot(a, b) -> float:
    return float(np.vdot(np.asarray(a, np.float64), np.asarray(b, np.float64)))


def test_the_transpose_of_a_linear_scan_is_its_adjoint():
    """<L x, ct> == <x, L^T ct> for a scan linear in a loop constant `b`, its carry and its xs, with known
    operands (a matrix A among the constants, coefficients cs among the xs) it is not linear in."""
    rng = np.random.default_rng(0)
    b, h0, xs, A, cs = (aotjax.tensor(rng.standard_normal(s).astype(FLOAT)) for s in ((3,), (3,), (4, 3), (3, 3),
                                                                                        (4, 3)))

    def linear(b, h0, xs, A, cs):
        def step(h, x_c):
            x, c = x_c
            h = A @ h + x * c + b
            return h, (h * c).sum()
        h, ys = aotjax.scan(step, h0, (xs, cs))
        return [h, ys]

    lin = (b, h0, xs)
    out = linear(*lin, A, cs)
    cts = [aotjax.tensor(rng.standard_normal(o.shape).astype(FLOAT)) for o in out]
    marked = [UndefinedPrimal(x.aval) for x in lin] + [A, cs]
    cts_in = transpose_flat(linear, marked, cts)
    for x, c in zip(lin, cts_in, strict=True):
        assert c.shape == x.shape and c.dtype == x.dtype
    tol = by_mode(1e-10, 1e-5)
    np.testing.assert_allclose(sum(_vdot(o, c) for o, c in zip(out, cts)),
                               sum(_vdot(x, c) for x, c in zip(lin, cts_in)), rtol=tol, atol=tol)
    transposed = aotjax.make_jaxpr(lambda *cts: transpose_flat(linear, marked, list(cts)))(*cts)
    (eqn,) = [e for e in transposed.eqns if e.primitive.name == "scan"]
    assert eqn.params["reverse"]  # the transpose of a forward scan runs backwards


# -- errors ------------------------------------------------------------------------------------------------------
def _scan_over(body, init=None, xs=None, **kwargs):
    xs = aotjax.ones(3, 2) if xs is None else xs
    return lambda: aotjax.scan(body, aotjax.zeros(()) if init is None else init, xs, **kwargs)


def _writes_captured_xs():
    xs = aotjax.ones(3, 2)

    def step(c, x):
        xs[0].add_(1.0)
        return c + x.sum(), None
    return aotjax.scan(step, aotjax.zeros(()), xs[1:])


def _writes_x_reads_captured_xs():
    xs = aotjax.ones(3, 2)
    return aotjax.scan(lambda c, x: (c + x.add_(1.0).sum() + xs.sum(), None), aotjax.zeros(()), xs)


ERRORS = {
    "carry-shape": (_scan_over(lambda c, x: ({"a": c["a"], "b": [c["b"][0], x.sum()]}, None),
                               {"a": aotjax.zeros(2), "b": [aotjax.zeros(()), aotjax.zeros(2)]}),
                    ShapeError, r"the carry \['b'\]\[1\] enters the body as f32\[2\] but the body returns f32\[\]"),
    "carry-dtype": (_scan_over(lambda c, x: ((c[0], c[1] + 0.5), None), (aotjax.zeros(2), aotjax.tensor(0))),
                    DTypeError, r"the carry \[1\] enters the body as i(32|64)\[\] but the body returns f(32|64)"),
    "carry-structure": (_scan_over(lambda c, x: ((c[0], c[1], c[1]), None), (aotjax.zeros(2), aotjax.zeros(()))),
                        TypeError, r"init has leaves at \[0\], \[1\]; the body's carry has leaves at \[0\], \[1\], "
                                   r"\[2\]"),
    "not-a-pair": (_scan_over(lambda c, x: c + x.sum()), TypeError,
                   r"must return a pair \(carry, y\), got a traced tensor f32\[\]"),
    "a-triple": (_scan_over(lambda c, x: (c, x, x)), TypeError, r"must return a pair \(carry, y\), got a tuple of 3"),
    "no-leading-axis": (_scan_over(lambda c, x: (c, None), xs=(aotjax.ones(3), aotjax.tensor(1.0))), ShapeError,
                        "no leading axis to scan over"),
    "lengths-differ": (_scan_over(lambda c, x: (c, None), xs=(aotjax.ones(3), aotjax.ones(4))), ShapeError,
                       r"different leading axes \[3, 4\]"),
    "length-not-xs": (_scan_over(lambda c, x: (c, None), length=4), ShapeError,
                      r"length=4 but the xs have leading axes \[3\]"),
    "no-xs-no-length": (lambda: aotjax.scan(lambda c, x: (c, None), aotjax.zeros(())), ValueError, "length="),
    "length-not-int": (_scan_over(lambda c, x: (c, None), xs=(), length=2.5), TypeError,
                       "length must be a Python int, got float 2.5"),
    "unroll-negative": (_scan_over(lambda c, x: (c, None), unroll=-1), ValueError, "unroll must be a positive int"),
    "unroll-zero": (_scan_over(lambda c, x: (c, None), unroll=0), ValueError, "unroll must be a positive int"),
    "captured-shares-xs-and-is-written": (_writes_captured_xs, UnsupportedError,
                                          "captured from outside that shares memory with xs leaf 0, and writes into "
                                          "the captured tensor"),
    "x-written-while-xs-is-captured": (_writes_x_reads_captured_xs, UnsupportedError,
                                       "shares memory with xs leaf 0, and writes into its x"),
}


@pytest.mark.parametrize("run, error, match", ERRORS.values(), ids=ERRORS.keys())
def test_errors_say_what_is_wrong(run, error, match):
    with pytest.raises(error, match=match) as info:
        run()
    assert "test_scan.py" in str(info.value)  # the user's line


def test_a_traced_length_is_an_error_that_says_it_must_be_static():
    f = aotjax.jit(lambda n: aotjax.scan(lambda c, x: (c + 1.0, None), aotjax.zeros(()), length=n))
    with pytest.raises(TypeError, match="length must be a Python int, got a traced tensor .*static_argnums"):
        f(aotjax.tensor(3))


def test_a_python_scalar_init_is_promoted_as_jax_promotes_a_weakly_typed_one():
    """A Python number in the initial carry takes the type the body makes of it (JAX traces again with the weakly
    typed init promoted); a tensor init keeps its dtype, and a body that changes it is an error."""
    xs = aotjax.tensor([1.5, 2.5, 3.5])

    def total(xs):
        return aotjax.scan(lambda c, x: (c + x, None), 0, xs)[0]

    for run in (total, aotjax.jit(total)):
        out = run(xs)
        assert out.dtype == xs.dtype and float(out) == 7.5
    assert float(aotjax.grad(lambda xs: total(xs) * 2)(xs).sum()) == 6.0
    assert float(aotjax.while_loop(lambda c: c < 3.0, lambda c: c + xs[0], 0)) == 3.0
    i, c = aotjax.fori_loop(0, 3, lambda i, c: (c[0] + i, c[1] + xs[i]), (0, 0))
    assert (i.dtype, float(i), float(c)) == (np.dtype(np.int32) if not X64 else np.dtype(np.int64), 3.0, 7.5)
    with pytest.raises(DTypeError, match="enters the body as i(32|64)"):
        aotjax.scan(lambda c, x: (c + x, None), aotjax.tensor(0), xs)
