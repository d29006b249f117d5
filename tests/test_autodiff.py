"""The autodiff transforms (`grad value_and_grad vjp jvp linearize jacfwd jacrev hessian stop_gradient`),
checked against `jax` on the same math written in `jax.numpy` at the same precision (float64 with x64,
float32 in jax's default 32-bit mode) and against finite differences (tests/helpers.py
`central_difference`, with a step and a tolerance suited to the mode's float).

Sections: a composition matrix of base functions under every transform and their compositions with
`jit` and `make_jaxpr`; a table of programs that mutate (inputs, intermediates, views, metadata),
whose gradients must equal `jax.grad` of the equivalent pure function while the inputs end up as
eager leaves them; aliased arguments (the documented storage rule); errors; `stop_gradient`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import aotjax
import aotjax.nn.functional as F
from aotjax import Tensor
from aotjax.core.errors import DTypeError, ShapeError
from tests.helpers import FD_ATOL, FD_RTOL, FLOAT, INT, by_mode, central_difference

RTOL = ATOL = by_mode(1e-9, 1e-5)  # against jax on the same math at the same precision
FD_TOL = dict(rtol=by_mode(1e-6, FD_RTOL), atol=by_mode(1e-7, FD_ATOL))  # against finite differences


# -- helpers ----------------------------------------------------------------------------------------
def in_mode(tree):
    """The NumPy arrays of `tree` in the dtypes of the suite's mode: floats as `FLOAT`, integers as `INT`."""
    def cast(a):
        a = np.asarray(a)
        return a.astype(FLOAT if np.issubdtype(a.dtype, np.floating) else INT if a.dtype.kind in "iu" else a.dtype)
    return jax.tree_util.tree_map(cast, tree)


def to_aot(tree):
    """Fresh eager Tensors from a pytree of NumPy arrays (in the mode's dtypes: see `in_mode`)."""
    return jax.tree_util.tree_map(lambda a: aotjax.tensor(np.array(a)), in_mode(tree))


def to_jnp(tree):
    return jax.tree_util.tree_map(jnp.asarray, in_mode(tree))


def to_np(tree):
    return jax.tree_util.tree_map(lambda a: np.asarray(a), tree)


def assert_close(got, want, rtol=RTOL, atol=ATOL):
    """Same pytree structure, shapes and values (`got` may hold Tensors, `want` jax/NumPy arrays)."""
    got_leaves, got_tree = jax.tree_util.tree_flatten(to_np(got))
    want_leaves, want_tree = jax.tree_util.tree_flatten(to_np(want))
    assert got_tree == want_tree, f"structures differ: {got_tree} vs {want_tree}"
    for g, w in zip(got_leaves, want_leaves, strict=True):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape, f"shapes differ: {g.shape} vs {w.shape}"
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


def assert_same_state(got, want):
    """Tensors afterwards: the same shapes, PyTorch strides and values (exactly)."""
    got_leaves = jax.tree_util.tree_leaves(got)
    want_leaves = jax.tree_util.tree_leaves(want)
    assert len(got_leaves) == len(want_leaves)
    for k, (g, w) in enumerate(zip(got_leaves, want_leaves, strict=True)):
        if not isinstance(w, Tensor):
            continue
        assert tuple(g.shape) == tuple(w.shape), f"argument leaf {k}: shape {g.shape}, eager {w.shape}"
        assert g.stride() == w.stride(), f"argument leaf {k}: strides {g.stride()}, eager {w.stride()}"
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=by_mode(1e-12, 1e-6),
                                   atol=by_mode(1e-12, 1e-6), err_msg=f"argument leaf {k}")


def finite_diff_directional(f, args: list, i: int, direction: np.ndarray) -> float:
    """Central difference of scalar `f` (of NumPy arrays, in the mode's dtypes) along `direction` in
    argument `i`."""
    args = in_mode(args)
    return float(central_difference(lambda x: f(*args[:i], x, *args[i + 1:]), [args[i]], [direction]))


def jax_jvp(fn, primals, tangents):
    """`jax.jvp`, compiled (jax's op-by-op execution would dominate the test time)."""
    return jax.jit(lambda p, t: jax.jvp(fn, p, t))(to_jnp(primals), to_jnp(tangents))


def jax_vjp(fn, primals, ct):
    """`(fn(*primals), the vjp of ct)` by `jax.vjp`, compiled."""
    def both(p, c):
        out, f_vjp = jax.vjp(fn, *p)
        return out, f_vjp(c)
    return jax.jit(both)(to_jnp(primals), to_jnp(ct))


def inner(a, b) -> float:
    return float(sum(np.vdot(np.asarray(x), np.asarray(y))
                     for x, y in zip(jax.tree_util.tree_leaves(to_np(a)), jax.tree_util.tree_leaves(to_np(b)),
                                     strict=True)))


# -- the composition matrix -------------------------------------------------------------------------
@dataclass
class Case:
    """A base function with a tensor (or pytree) output, in aotjax and in `jax.numpy`, its arguments
    (NumPy), and which positional argument is a single tensor (for hessian / jacfwd / jacrev)."""

    name: str
    fn: Callable
    fn_jnp: Callable
    make_args: Callable[[], list]
    tensor_arg: int

    @property
    def argnums(self) -> tuple[int, ...]:
        return tuple(range(len(self.make_args())))

    def loss(self, *args):
        return self.fn(*args).sin().sum()

    def loss_jnp(self, *args):
        return jnp.sin(self.fn_jnp(*args)).sum()


def _rng(seed=0):
    return np.random.default_rng(seed)


def _elementwise(x, y):
    return (x.sin() * y.exp() + x.tanh() ** 2) / (1 + y * y)


def _elementwise_jnp(x, y):
    return (jnp.sin(x) * jnp.exp(y) + jnp.tanh(x) ** 2) / (1 + y * y)


def _mlp(p, x):
    return (x @ p["w1"] + p["b1"]).tanh() @ p["w2"] + p["b2"]


def _mlp_jnp(p, x):
    return jnp.tanh(x @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]


def _mlp_args():
    r = _rng(1)
    params = {"w1": r.normal(size=(3, 4)), "b1": r.normal(size=4), "w2": r.normal(size=(4, 2)),
              "b2": r.normal(size=2)}
    return [params, r.normal(size=(2, 3))]


def _softmax(x, y):
    return F.log_softmax(x, dim=-1) * y + F.softmax(x * 2, dim=0)


def _softmax_jnp(x, y):
    return jax.nn.log_softmax(x, axis=-1) * y + jax.nn.softmax(x * 2, axis=0)


def _reductions(x):
    return (x.sum(dim=1, keepdim=True) * x - x.mean(dim=0) + x.amax(dim=1, keepdim=True)
            + x.var(dim=0, keepdim=True) * x.sum())


def _reductions_jnp(x):
    return (x.sum(axis=1, keepdims=True) * x - x.mean(axis=0) + x.max(axis=1, keepdims=True)
            + jnp.var(x, axis=0, ddof=1, keepdims=True) * x.sum())


def _broadcast(x, y, z):
    return x.unsqueeze(1) * y + z.exp() - (x * 0.5).unsqueeze(-1)


def _broadcast_jnp(x, y, z):
    return x[:, None] * y + jnp.exp(z) - (x * 0.5)[:, None]


CASES = [
    Case("elementwise", _elementwise, _elementwise_jnp, lambda: [_rng(0).normal(size=3), _rng(1).normal(size=3)], 0),
    Case("mlp", _mlp, _mlp_jnp, _mlp_args, 1),
    Case("softmax", _softmax, _softmax_jnp, lambda: [_rng(2).normal(size=(2, 3)), _rng(3).normal(size=(2, 3))], 0),
    Case("reductions", _reductions, _reductions_jnp, lambda: [_rng(4).normal(size=(2, 3))], 0),
    Case("broadcast", _broadcast, _broadcast_jnp,
         lambda: [_rng(5).normal(size=3), _rng(6).normal(size=4), _rng(7).normal(size=(1, 4))], 2),
]
case_params = pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])


_REFERENCE_CACHE: dict = {}


def _cached(key, compute):
    """A jax reference result computed (and compiled) once per test session."""
    if key not in _REFERENCE_CACHE:
        _REFERENCE_CACHE[key] = compute()
    return _REFERENCE_CACHE[key]


def _jax_grads(case, args, argnums=None):
    argnums = case.argnums if argnums is None else argnums
    return _cached(("grads", case.name, argnums),
                   lambda: jax.jit(jax.grad(case.loss_jnp, argnums=argnums))(*to_jnp(args)))


@case_params
def test_grad_all_argnums(case):
    args = case.make_args()
    got = aotjax.grad(case.loss, argnums=case.argnums)(*to_aot(args))
    assert isinstance(got, tuple) and len(got) == len(args)
    assert_close(got, _jax_grads(case, args))


@case_params
def test_grad_argnums_int(case):
    args = case.make_args()
    for i in case.argnums:
        got = aotjax.grad(case.loss, argnums=i)(*to_aot(args))
        assert_close(got, _jax_grads(case, args, i))


@case_params
def test_grad_matches_finite_differences(case):
    args = case.make_args()
    i = case.tensor_arg
    g = aotjax.grad(case.loss, argnums=i)(*to_aot(args))
    direction = _rng(11).normal(size=np.shape(args[i]))
    loss_np = lambda *a: case.loss_jnp(*to_jnp(a))
    fd = finite_diff_directional(loss_np, args, i, direction)
    np.testing.assert_allclose(inner(g, direction), fd, **FD_TOL)


@case_params
def test_value_and_grad(case):
    args = case.make_args()
    value, g = aotjax.value_and_grad(case.loss, argnums=case.argnums)(*to_aot(args))
    want_value, want_g = jax.jit(jax.value_and_grad(case.loss_jnp, argnums=case.argnums))(*to_jnp(args))
    assert isinstance(value, Tensor) and value.shape == ()
    assert_close(value, want_value)
    assert_close(g, want_g)


@case_params
def test_has_aux(case):
    args = case.make_args()

    def loss_aux(*a):
        out = case.fn(*a)
        return out.sin().sum(), {"out": out, "n": 3}

    g, aux = aotjax.grad(loss_aux, argnums=case.argnums, has_aux=True)(*to_aot(args))
    assert_close(g, _jax_grads(case, args))
    assert aux["n"] == 3
    assert_close(aux["out"], case.fn_jnp(*to_jnp(args)))
    (value, aux2), g2 = aotjax.value_and_grad(loss_aux, argnums=0, has_aux=True)(*to_aot(args))
    assert_close(value, case.loss_jnp(*to_jnp(args)))
    assert_close(aux2["out"], aux["out"])
    assert_close(g2, _jax_grads(case, args, 0))


@case_params
def test_jit_of_grad(case):
    args = case.make_args()
    jitted = aotjax.jit(aotjax.grad(case.loss, argnums=case.argnums))
    want = _jax_grads(case, args)
    assert_close(jitted(*to_aot(args)), want)
    assert_close(jitted(*to_aot(args)), want)  # the cached program
    assert jitted.trace_count == 1


@case_params
def test_grad_of_jit(case):
    args = case.make_args()
    got = aotjax.grad(aotjax.jit(case.loss), argnums=case.argnums)(*to_aot(args))
    assert_close(got, _jax_grads(case, args))


@case_params
def test_make_jaxpr_of_grad_then_eval(case):
    args = case.make_args()
    grad_fn = aotjax.grad(case.loss, argnums=case.argnums)
    closed = aotjax.make_jaxpr(grad_fn)(*to_aot(args))
    aotjax.typecheck(closed)
    flat = jax.tree_util.tree_leaves(to_aot(args))
    got = jax.tree_util.tree_unflatten(closed.out_tree, aotjax.eval_jaxpr(closed, *flat))
    assert_close(got, _jax_grads(case, args))


@case_params
def test_hessian(case):
    args = case.make_args()
    i = case.tensor_arg
    got = aotjax.hessian(case.loss, argnums=i)(*to_aot(args))
    want = jax.jit(jax.hessian(case.loss_jnp, argnums=i))(*to_jnp(args))
    assert_close(got, want, rtol=by_mode(1e-8, RTOL), atol=by_mode(1e-8, ATOL))


@case_params
def test_jacfwd_of_jacrev(case):
    args = case.make_args()
    i = case.tensor_arg
    got = aotjax.jacfwd(aotjax.jacrev(case.loss, argnums=i), argnums=i)(*to_aot(args))
    want = jax.jit(jax.jacfwd(jax.jacrev(case.loss_jnp, argnums=i), argnums=i))(*to_jnp(args))
    assert_close(got, want, rtol=by_mode(1e-8, RTOL), atol=by_mode(1e-8, ATOL))


@case_params
def test_jacfwd_and_jacrev_of_tensor_output(case):
    args = case.make_args()
    i = case.tensor_arg
    want = jax.jit(jax.jacfwd(case.fn_jnp, argnums=i))(*to_jnp(args))
    assert_close(aotjax.jacfwd(case.fn, argnums=i)(*to_aot(args)), want)
    assert_close(aotjax.jacrev(case.fn, argnums=i)(*to_aot(args)), want)


def _tangents(args, seed=20):
    r = _rng(seed)
    return jax.tree_util.tree_map(lambda a: r.normal(size=np.shape(a)), args)


@case_params
def test_jvp(case):
    args, tangents = case.make_args(), _tangents(case.make_args())
    out, t_out = aotjax.jvp(case.fn, to_aot(args), to_aot(tangents))
    want_out, want_t = jax_jvp(case.fn_jnp, args, tangents)
    assert_close(out, want_out)
    assert_close(t_out, want_t)


@case_params
def test_linearize(case):
    args, tangents = case.make_args(), _tangents(case.make_args())
    out, f_jvp = aotjax.linearize(case.fn, *to_aot(args))
    assert_close(out, case.fn_jnp(*to_jnp(args)))
    _, want_t = jax_jvp(case.fn_jnp, args, tangents)
    assert_close(f_jvp(*to_aot(tangents)), want_t)
    other = _tangents(case.make_args(), seed=21)
    _, want_other = jax_jvp(case.fn_jnp, args, other)
    assert_close(f_jvp(*to_aot(other)), want_other)  # the same linear map, evaluated again


@case_params
def test_vjp(case):
    args = case.make_args()
    out, f_vjp = aotjax.vjp(case.fn, *to_aot(args))
    ct = _rng(30).normal(size=tuple(out.shape))
    want_out, want_cts = jax_vjp(case.fn_jnp, args, ct)
    assert_close(out, want_out)
    got = f_vjp(to_aot(ct))
    assert isinstance(got, tuple) and len(got) == len(args)
    assert_close(got, want_cts)


@case_params
def test_jvp_vjp_adjoint(case):
    args, tangents = case.make_args(), _tangents(case.make_args())
    _, t_out = aotjax.jvp(case.fn, to_aot(args), to_aot(tangents))
    out, f_vjp = aotjax.vjp(case.fn, *to_aot(args))
    ct = _rng(31).normal(size=tuple(out.shape))
    np.testing.assert_allclose(inner(t_out, ct), inner(tangents, f_vjp(to_aot(ct))), rtol=by_mode(1e-10, 1e-5))


def test_vjp_with_pytree_outputs():
    def fn(x, p):
        return {"a": x.sin() * p["s"], "b": (x.sum() * p["s"].exp(), (x * x).mean())}

    def fn_jnp(x, p):
        return {"a": jnp.sin(x) * p["s"], "b": (x.sum() * jnp.exp(p["s"]), (x * x).mean())}

    r = _rng(40)
    args = [r.normal(size=3), {"s": r.normal(size=3)}]
    out, f_vjp = aotjax.vjp(fn, *to_aot(args))
    ct = {"a": r.normal(size=3), "b": (r.normal(size=3), FLOAT.type(r.normal()))}
    want_out, want_cts = jax_vjp(fn_jnp, args, ct)
    assert_close(out, want_out)
    assert_close(f_vjp(to_aot(ct)), want_cts)
    out_t, t = aotjax.jvp(fn, to_aot(args), to_aot(_tangents(args)))
    _, want_t = jax_jvp(fn_jnp, args, _tangents(args))
    assert_close(t, want_t)


def test_vjp_has_aux():
    x = _rng(41).normal(size=3).astype(FLOAT)
    out, f_vjp, aux = aotjax.vjp(lambda a: (a.exp(), {"k": a * 2}), aotjax.tensor(x), has_aux=True)
    assert_close(aux["k"], 2 * x)
    assert_close(f_vjp(aotjax.ones(3, dtype=FLOAT)), (np.exp(x),))


# -- higher order, elementwise ----------------------------------------------------------------------
def _scalar_chain(x):
    return x.sin() * x.exp() + (x * x).tanh()


def _scalar_chain_jnp(x):
    return jnp.sin(x) * jnp.exp(x) + jnp.tanh(x * x)


@pytest.mark.parametrize("x0", [0.3, -1.2])
def test_grad_of_grad_elementwise(x0):
    x = aotjax.tensor(FLOAT.type(x0))
    g2 = aotjax.grad(aotjax.grad(_scalar_chain))(x)
    assert_close(g2, jax.jit(jax.grad(jax.grad(_scalar_chain_jnp)))(x0))
    g3 = aotjax.grad(aotjax.grad(aotjax.grad(_scalar_chain)))(x)
    assert_close(g3, jax.jit(jax.grad(jax.grad(jax.grad(_scalar_chain_jnp))))(x0))
    assert_close(aotjax.jit(aotjax.grad(aotjax.grad(_scalar_chain)))(x), g2)


def test_grad_of_grad_vector():
    x = _rng(50).normal(size=4).astype(FLOAT)

    def inner_sum(v):
        return aotjax.grad(lambda u: _scalar_chain(u).sum())(v).cos().sum()

    def inner_sum_jnp(v):
        return jnp.cos(jax.grad(lambda u: _scalar_chain_jnp(u).sum())(v)).sum()

    assert_close(aotjax.grad(inner_sum)(aotjax.tensor(x)), jax.jit(jax.grad(inner_sum_jnp))(x))
    assert_close(aotjax.hessian(lambda v: _scalar_chain(v).sum())(aotjax.tensor(x)),
                 jax.jit(jax.hessian(lambda v: _scalar_chain_jnp(v).sum()))(x))


def test_grad_of_python_scalar_and_jax_array():
    assert_close(aotjax.grad(lambda x: x * x)(3.0), np.float32(6.0))
    assert_close(aotjax.grad(lambda x: (x * x).sum())(jnp.arange(3.0)), np.array([0.0, 2.0, 4.0]))


# -- mutation under autodiff ------------------------------------------------------------------------
@dataclass
class MutationRow:
    """A program that writes into its inputs or intermediates, the pure `jax.numpy` function with
    the same value, its arguments (NumPy; integer/bool ones are indices and masks), and argnums."""

    name: str
    fn: Callable
    fn_jnp: Callable
    make_args: Callable[[], list]
    argnums: tuple[int, ...]
    expected_grad: np.ndarray | None = None  # also checked literally, where the brief states it


def _m_inplace_input(x):
    x.mul_(2)
    return (x * x).sum()


def _m_inplace_input_jnp(x):
    x = x * 2
    return (x * x).sum()


def _m_add_input(x, y):
    x.add_(y.sin())
    return (x * y).sum()


def _m_add_input_jnp(x, y):
    x = x + jnp.sin(y)
    return (x * y).sum()


def _m_mul_input_by_tensor(x, w):
    x.mul_(w)  # the backward needs x's value at entry, which the call overwrites
    return x.sum() * w.sum()


def _m_mul_input_by_tensor_jnp(x, w):
    return (x * w).sum() * w.sum()


def _m_mul_input_by_itself(x):
    x.mul_(x)
    return x.sum()


def _m_mul_input_by_itself_jnp(x):
    return (x * x).sum()


def _m_intermediate(a):
    b = a * 2
    b[1:].mul_(3)
    return b.sum()


def _m_intermediate_jnp(a):
    return (a * 2).at[1:].multiply(3).sum()


def _m_transpose_view(x, y):
    x.t()[0].add_(y)
    return (x ** 2).sum()


def _m_transpose_view_jnp(x, y):
    return (x.at[:, 0].add(y) ** 2).sum()


def _m_slice_mul(x, w):
    x[1:3].mul_(w)
    return x.sin().sum() + (x * w.sum()).sum()


def _m_slice_mul_jnp(x, w):
    x = x.at[1:3].multiply(w)
    return jnp.sin(x).sum() + (x * w.sum()).sum()


def _m_setitem_basic(a, v):
    b = a.exp()
    b[1] = v
    return (b * b).sum()


def _m_setitem_basic_jnp(a, v):
    b = jnp.exp(a).at[1].set(v)
    return (b * b).sum()


def _m_setitem_advanced(a, v, idx):
    b = a * 3
    b[idx] = v
    return b.sin().sum()


def _m_setitem_advanced_jnp(a, v, idx):
    return jnp.sin((a * 3).at[idx].set(v)).sum()


def _m_setitem_input(x, v):
    x[0] = v * 2
    return (x * x.cos()).sum()


def _m_setitem_input_jnp(x, v):
    x = x.at[0].set(v * 2)
    return (x * jnp.cos(x)).sum()


def _m_index_put_accumulate(x, v, idx):
    x.index_put_((idx,), v, accumulate=True)
    return (x ** 2).sum()


def _m_index_put_accumulate_jnp(x, v, idx):
    return (x.at[idx].add(v) ** 2).sum()


def _m_index_put_intermediate(x, v, idx):
    b = x.cos()
    b.index_put_((idx,), v * 2)
    return (b * x).sum()


def _m_index_put_intermediate_jnp(x, v, idx):
    return (jnp.cos(x).at[idx].set(v * 2) * x).sum()


def _m_masked_fill(x, y, mask):
    b = x * y
    b.masked_fill_(mask, 0.5)
    return (b ** 2).sum()


def _m_masked_fill_jnp(x, y, mask):
    return (jnp.where(mask, 0.5, x * y) ** 2).sum()


def _m_masked_fill_input_view(x, mask):
    x[1].masked_fill_(mask, 0.0)
    return (x.exp() * x).sum()


def _m_masked_fill_input_view_jnp(x, mask):
    x = x.at[1].set(jnp.where(mask, 0.0, x[1]))
    return (jnp.exp(x) * x).sum()


def _m_copy(x, y):
    x[0].copy_(y * 2)
    return (x * x.cos()).sum()


def _m_copy_jnp(x, y):
    x = x.at[0].set(y * 2)
    return (x * jnp.cos(x)).sum()


def _m_copy_broadcast(x, y):
    b = x.exp()
    b.copy_(y)
    return (b * x).sum()


def _m_copy_broadcast_jnp(x, y):
    return (jnp.broadcast_to(y, x.shape) * x).sum()


def _m_clamp(x):
    b = x * 2
    b.clamp_(-1.0, 1.0)
    return (b * x).sum()


def _m_clamp_jnp(x):
    return (jnp.clip(x * 2, -1.0, 1.0) * x).sum()


def _m_clamp_input_view(x):
    x[::2].clamp_(min=0.0)
    return (x ** 3).sum()


def _m_clamp_input_view_jnp(x):
    x = x.at[::2].set(jnp.maximum(x[::2], 0.0))
    return (x ** 3).sum()


def _m_t_(x, w):
    x.t_()
    return (x @ w).sin().sum()


def _m_t_jnp(x, w):
    return jnp.sin(x.T @ w).sum()


def _m_t_then_write(x):
    x.t_()
    x[0].mul_(3)
    return (x * x).sum()


def _m_t_then_write_jnp(x):
    xt = x.T.at[0].multiply(3)
    return (xt * xt).sum()


def _m_unsqueeze_(x, w):
    x.unsqueeze_(0)
    return (x * w).sum()


def _m_unsqueeze_jnp(x, w):
    return (x[None] * w).sum()


def _m_view_chain(x):
    x.view(2, 3).t()[1:].mul_(2)
    return (x * x.cos()).sum()


def _m_view_chain_jnp(x):
    xv = x.reshape(2, 3).T.at[1:].multiply(2)
    x = xv.T.reshape(6)
    return (x * jnp.cos(x)).sum()


def _m_output_aliases_input(x):
    x.add_(1)
    return x[1] * 1.0 + x[1]


def _m_output_aliases_input_jnp(x):
    x = x + 1
    return x[1] * 1.0 + x[1]


def _m_detach_sees_mutation(x):
    d = x.detach()
    x.mul_(2)
    return (d * x).sum()


def _m_detach_sees_mutation_jnp(x):
    x = x * 2
    return (jax.lax.stop_gradient(x) * x).sum()


def _m_write_through_detach(x):
    x.detach().mul_(2)  # a write the graph does not see (torch's): x's value doubles, its derivative stays x's
    return (x * x).sum()


def _m_write_through_detach_jnp(x):
    x = x + jax.lax.stop_gradient(x * 2 - x)
    return (x * x).sum()


def _m_detach_intermediate(x, y):
    b = x.exp()
    d = b.detach()
    b.mul_(y)
    return (d * b).sum()


def _m_detach_intermediate_jnp(x, y):
    b = jnp.exp(x) * y
    return (jax.lax.stop_gradient(b) * b).sum()


def _f(*shape, seed=0):
    return _rng(seed).normal(size=shape).astype(FLOAT)


MUTATION_ROWS = [
    MutationRow("mul_ input", _m_inplace_input, _m_inplace_input_jnp, lambda: [_f(4)], (0,)),
    MutationRow("add_ input", _m_add_input, _m_add_input_jnp, lambda: [_f(3), _f(3, seed=1)], (0, 1)),
    MutationRow("mul_ input by tensor", _m_mul_input_by_tensor, _m_mul_input_by_tensor_jnp,
                lambda: [_f(3), _f(3, seed=1)], (0, 1)),
    MutationRow("mul_ input by itself", _m_mul_input_by_itself, _m_mul_input_by_itself_jnp, lambda: [_f(3)], (0,)),
    MutationRow("intermediate slice mul_", _m_intermediate, _m_intermediate_jnp, lambda: [np.ones(4)], (0,),
                np.array([2.0, 6.0, 6.0, 6.0])),
    MutationRow("t()[0].add_", _m_transpose_view, _m_transpose_view_jnp, lambda: [_f(3, 2), _f(3, seed=1)], (0, 1)),
    MutationRow("x[1:3].mul_(w)", _m_slice_mul, _m_slice_mul_jnp, lambda: [_f(4), _f(2, seed=1)], (0, 1)),
    MutationRow("setitem basic", _m_setitem_basic, _m_setitem_basic_jnp, lambda: [_f(3, 2), _f(2, seed=1)], (0, 1)),
    MutationRow("setitem advanced", _m_setitem_advanced, _m_setitem_advanced_jnp,
                lambda: [_f(4), _f(2, seed=1), np.array([0, 2])], (0, 1)),
    MutationRow("setitem input", _m_setitem_input, _m_setitem_input_jnp, lambda: [_f(3, 2), _f(2, seed=1)], (0, 1)),
    MutationRow("index_put_ accumulate", _m_index_put_accumulate, _m_index_put_accumulate_jnp,
                lambda: [_f(4), _f(3, seed=1), np.array([0, 2, 0])], (0, 1)),
    MutationRow("index_put_ intermediate", _m_index_put_intermediate, _m_index_put_intermediate_jnp,
                lambda: [_f(4), _f(2, seed=1), np.array([3, 1])], (0, 1)),
    MutationRow("masked_fill_", _m_masked_fill, _m_masked_fill_jnp,
                lambda: [_f(2, 3), _f(2, 3, seed=1), np.array([[True, False, True], [False, False, True]])], (0, 1)),
    MutationRow("masked_fill_ input view", _m_masked_fill_input_view, _m_masked_fill_input_view_jnp,
                lambda: [_f(2, 3), np.array([True, False, True])], (0,)),
    MutationRow("copy_ into view", _m_copy, _m_copy_jnp, lambda: [_f(2, 3), _f(3, seed=1)], (0, 1)),
    MutationRow("copy_ broadcast", _m_copy_broadcast, _m_copy_broadcast_jnp, lambda: [_f(2, 3), _f(3, seed=1)],
                (0, 1)),
    MutationRow("clamp_", _m_clamp, _m_clamp_jnp, lambda: [np.array([0.1, -0.9, 0.7, 0.3])], (0,)),
    MutationRow("clamp_ input view", _m_clamp_input_view, _m_clamp_input_view_jnp,
                lambda: [np.array([0.4, -0.9, -0.7, 0.3, 1.1])], (0,)),
    MutationRow("t_", _m_t_, _m_t_jnp, lambda: [_f(2, 3), _f(2, 2, seed=1)], (0, 1)),
    MutationRow("t_ then write", _m_t_then_write, _m_t_then_write_jnp, lambda: [_f(2, 3)], (0,)),
    MutationRow("unsqueeze_", _m_unsqueeze_, _m_unsqueeze_jnp, lambda: [_f(3), _f(2, 3, seed=1)], (0, 1)),
    MutationRow("view().t()[1:].mul_", _m_view_chain, _m_view_chain_jnp, lambda: [_f(6)], (0,)),
    MutationRow("output aliases input", _m_output_aliases_input, _m_output_aliases_input_jnp, lambda: [_f(3)], (0,)),
    MutationRow("detach sees mutation", _m_detach_sees_mutation, _m_detach_sees_mutation_jnp, lambda: [_f(3)], (0,)),
    MutationRow("write through detach", _m_write_through_detach, _m_write_through_detach_jnp, lambda: [_f(3)], (0,)),
    MutationRow("detach of intermediate", _m_detach_intermediate, _m_detach_intermediate_jnp,
                lambda: [_f(3), _f(3, seed=1)], (0, 1)),
]
mutation_params = pytest.mark.parametrize("row", MUTATION_ROWS, ids=[r.name for r in MUTATION_ROWS])


def _eager(row):
    """The value `row.fn` returns eagerly and the state it leaves its arguments in."""
    args = to_aot(row.make_args())
    out = row.fn(*args)
    return np.asarray(out), args


def _check_mutation(row, transform):
    want_out, want_args = _eager(row)
    want_grads = _cached(("mutation", row.name), lambda: jax.jit(jax.grad(row.fn_jnp, argnums=row.argnums))(
        *to_jnp(row.make_args())))
    args = to_aot(row.make_args())
    out, grads = transform(*args)
    assert_close(grads, want_grads)
    if row.expected_grad is not None:
        assert_close(grads[0], row.expected_grad)
    if out is not None:
        assert_close(out, want_out)
    assert_same_state(args, want_args)


@mutation_params
def test_mutation_value_and_grad(row):
    _check_mutation(row, aotjax.value_and_grad(row.fn, argnums=row.argnums))


@pytest.mark.parametrize("row", [r for r in MUTATION_ROWS if "detach" not in r.name],
                         ids=[r.name for r in MUTATION_ROWS if "detach" not in r.name])
def test_mutation_grad_is_with_respect_to_entry_value_fd(row):
    """Finite differences of the eager program (on fresh copies each time) agree with grad (rows with
    `detach` are left out: a finite difference cannot see a stopped gradient)."""
    args = row.make_args()
    grads = aotjax.grad(row.fn, argnums=row.argnums)(*to_aot(args))
    eager_np = lambda *a: np.asarray(row.fn(*to_aot(list(a))))
    for k, i in enumerate(row.argnums):
        direction = _rng(60 + i).normal(size=np.shape(args[i]))
        fd = finite_diff_directional(eager_np, args, i, direction)
        np.testing.assert_allclose(inner(grads[k], direction), fd, **FD_TOL)


@mutation_params
def test_mutation_jit_of_grad(row):
    jitted = aotjax.jit(aotjax.grad(row.fn, argnums=row.argnums))
    for _ in range(2):  # the traced call, then the cached program
        _check_mutation(row, lambda *a: (None, jitted(*a)))
    assert jitted.trace_count == 1


@mutation_params
def test_mutation_grad_of_jit(row):
    _check_mutation(row, aotjax.value_and_grad(aotjax.jit(row.fn), argnums=row.argnums))


@mutation_params
def test_mutation_make_jaxpr_of_grad(row):
    """The jaxpr of grad(f), evaluated on fresh arguments: the same gradients and the same writes."""
    closed = aotjax.make_jaxpr(aotjax.grad(row.fn, argnums=row.argnums))(*to_aot(row.make_args()))

    def run(*args):
        return None, jax.tree_util.tree_unflatten(closed.out_tree, aotjax.eval_jaxpr(closed, *args))

    _check_mutation(row, run)


def test_mutation_output_is_view_of_input_under_grad():
    x = aotjax.tensor(_f(3))
    (out, aux), _ = aotjax.value_and_grad(lambda a: (a.mul_(2).sum(), a[1:]), has_aux=True)(x)
    aux.add_(100)  # the aux output aliases the caller's x, as in eager
    np.testing.assert_allclose(np.asarray(x)[1:], 2 * _f(3)[1:] + 100)
    np.testing.assert_allclose(np.asarray(x)[0], 2 * _f(3)[0])


def test_mutation_with_vjp_and_jvp():
    row = next(r for r in MUTATION_ROWS if r.name == "t()[0].add_")
    args = row.make_args()
    _, want_args = _eager(row)
    aot_args = to_aot(args)
    out, f_vjp = aotjax.vjp(row.fn, *aot_args)
    assert_same_state(aot_args, want_args)  # the writes happen once, at the vjp call
    want_vjp = jax_vjp(row.fn_jnp, args, FLOAT.type(1.5))[1]
    assert_close(f_vjp(aotjax.tensor(FLOAT.type(1.5))), want_vjp)
    assert_same_state(aot_args, want_args)  # and not again when the vjp function runs
    aot_args = to_aot(args)
    tangents = _tangents(args)
    _, t = aotjax.jvp(row.fn, aot_args, to_aot(tangents))
    assert_close(t, jax_jvp(row.fn_jnp, args, tangents)[1])
    assert_same_state(aot_args, want_args)


def test_error_in_body_leaves_inputs_unwritten():
    x = aotjax.tensor(_f(3))

    def bad(a):
        a.mul_(2)
        return a  # not a scalar

    with pytest.raises(ShapeError, match="grad"):
        aotjax.grad(bad)(x)
    np.testing.assert_array_equal(np.asarray(x), _f(3))


# -- aliased arguments ------------------------------------------------------------------------------
def _storage():
    return _rng(70).normal(size=(2, 3)).astype(FLOAT)


def _fd_storage_grad(f_storage, X):
    """Central differences of scalar `f_storage` (a function of the NumPy storage) in every element."""
    g = np.zeros(X.shape)
    for idx in np.ndindex(X.shape):
        e = np.zeros(X.shape)
        e[idx] = 1.0
        g[idx] = central_difference(f_storage, [X], [e])
    return g


def _f_same_row(a, b):
    return (a * b.sin()).sum()


def _f_row_and_whole(a, b):
    return (a.sin() * b[1]).sum() + (b ** 2).sum()


def test_aliased_same_view_twice():
    X = _storage()
    x = aotjax.tensor(X)
    ga, gb = aotjax.grad(_f_same_row, argnums=(0, 1))(x[0], x[0])
    G = _fd_storage_grad(lambda S: _f_same_row(*to_aot([S[0], S[0]])), X)  # total derivative via storage
    assert_close(ga, G[0], **FD_TOL)
    assert_close(gb, G[0], **FD_TOL)
    G_jax = jax.grad(lambda S: (S[0] * jnp.sin(S[0])).sum())(X)
    assert_close(ga, G_jax[0])
    assert_close(gb, G_jax[0])


def test_aliased_view_and_its_base():
    X = _storage()
    x = aotjax.tensor(X)
    ga, gb = aotjax.grad(_f_row_and_whole, argnums=(0, 1))(x[0], x)
    G = _fd_storage_grad(lambda S: np.asarray(_f_row_and_whole(*to_aot([S[0], S]))), X)
    assert_close(gb, G, **FD_TOL)
    assert_close(ga, G[0], **FD_TOL)
    G_jax = jax.grad(lambda S: (jnp.sin(S[0]) * S[1]).sum() + (S ** 2).sum())(X)
    assert_close((ga, gb), (G_jax[0], G_jax))
    np.testing.assert_array_equal(np.asarray(x), X)  # nothing written
    jitted = aotjax.jit(aotjax.grad(_f_row_and_whole, argnums=(0, 1)))
    assert_close(jitted(x[0], x), (G_jax[0], G_jax))


def test_aliased_same_object_twice():
    X = _storage()[0]
    x = aotjax.tensor(X)
    ga, gb = aotjax.grad(_f_same_row, argnums=(0, 1))(x, x)
    G = jax.grad(lambda s: (s * jnp.sin(s)).sum())(X)
    assert_close((ga, gb), (G, G))


def test_aliased_arguments_with_mutation():
    def f(a, b):
        a.mul_(2)  # b sees the write: it is the same storage
        return (b ** 2).sum() + a.sin().sum()

    def f_storage_jnp(S):
        S = S.at[0].multiply(2)
        return (S ** 2).sum() + jnp.sin(S[0]).sum()

    X = _storage()
    x = aotjax.tensor(X)
    ga, gb = aotjax.grad(f, argnums=(0, 1))(x[0], x)
    G = jax.grad(f_storage_jnp)(X)
    assert_close((ga, gb), (G[0], G))
    want = X.copy()
    want[0] *= 2
    np.testing.assert_allclose(np.asarray(x), want)
    eager = aotjax.tensor(X)
    f(eager[0], eager)
    np.testing.assert_allclose(np.asarray(x), np.asarray(eager))
    G_fd = _fd_storage_grad(lambda S: np.asarray(f(*(lambda s: (s[0], s))(aotjax.tensor(S)))), X)
    assert_close(gb, G_fd, rtol=FD_TOL["rtol"], atol=by_mode(1e-6, FD_ATOL))


def _f_alias_vec(a, b):
    return (a.unsqueeze(0) * b).sin() + b.t().sum(dim=1).unsqueeze(0) * 0 + b.exp()


def test_aliased_jvp_vjp_adjoint():
    X = _storage()
    x = aotjax.tensor(X)
    r = _rng(71)
    ta, tb = r.normal(size=3).astype(FLOAT), r.normal(size=(2, 3)).astype(FLOAT)
    out, t_out = aotjax.jvp(_f_alias_vec, (x[0], x), (aotjax.tensor(ta), aotjax.tensor(tb)))
    out2, f_vjp = aotjax.vjp(_f_alias_vec, x[0], x)
    ct = r.normal(size=tuple(out.shape)).astype(FLOAT)
    va, vb = f_vjp(aotjax.tensor(ct))
    np.testing.assert_allclose(inner(t_out, ct), inner(ta, va) + inner(tb, vb), rtol=by_mode(1e-10, 1e-5))

    # jvp: the tangents of aliased arguments are summed into the storage through their views
    def f_storage(S):
        return jnp.sin(S[0][None] * S) + jnp.exp(S)

    T_storage = tb.copy()
    T_storage[0] += ta
    _, want_t = jax_jvp(f_storage, (X,), (T_storage,))
    assert_close(t_out, want_t)
    # vjp: each argument gets the storage cotangent read through its view
    G = jax_vjp(f_storage, (X,), ct)[1][0]
    assert_close((va, vb), (G[0], G))
    _, f_lin = aotjax.linearize(_f_alias_vec, x[0], x)
    assert_close(f_lin(aotjax.tensor(ta), aotjax.tensor(tb)), want_t)


# -- errors -----------------------------------------------------------------------------------------
def test_error_grad_of_non_scalar():
    with pytest.raises(ShapeError, match=r"^grad: .*scalar"):
        aotjax.grad(lambda x: x * 2)(aotjax.tensor(_f(3)))
    with pytest.raises(ShapeError, match=r"^grad: .*scalar"):
        aotjax.value_and_grad(lambda x: (x.sum(), x.sum()))(aotjax.tensor(_f(3)))


def test_error_grad_of_integer_input():
    with pytest.raises(DTypeError, match=rf"^grad: .*floating-point.*{INT.name}"):
        aotjax.grad(lambda x: (x * 2.0).sum())(aotjax.tensor([1, 2]))
    with pytest.raises(DTypeError, match=r"^grad: "):
        aotjax.grad(lambda x, i: (x * i).sum(), argnums=(0, 1))(aotjax.tensor(_f(2)), aotjax.tensor([1, 2]))


def test_error_grad_of_integer_output():
    with pytest.raises(DTypeError, match=r"^grad: .*floating-point"):
        aotjax.grad(lambda x: (x > 0).sum())(aotjax.tensor(_f(2)))


def test_integer_input_outside_argnums_is_fine():
    g = aotjax.grad(lambda x, i: (x * i).sum())(aotjax.tensor(_f(2)), aotjax.tensor([1, 2]))
    assert_close(g, np.array([1.0, 2.0]))


def test_error_has_aux_without_a_pair():
    with pytest.raises(TypeError, match=r"^grad with has_aux=True"):
        aotjax.grad(lambda x: x.sum(), has_aux=True)(aotjax.tensor(_f(2)))


def test_error_vjp_cotangent_of_wrong_shape():
    _, f_vjp = aotjax.vjp(lambda x: x * 2, aotjax.tensor(_f(3)))
    with pytest.raises(ShapeError, match=r"^vjp: .*shape \[4\].*shape \[3\]"):
        f_vjp(aotjax.tensor(_f(4)))
    with pytest.raises(TypeError, match=r"^vjp: .*structure"):
        f_vjp((aotjax.tensor(_f(3)), aotjax.tensor(_f(3))))


def test_error_jvp_tangent_of_wrong_shape_or_structure():
    with pytest.raises(ShapeError, match=r"^jvp: "):
        aotjax.jvp(lambda x: x * 2, (aotjax.tensor(_f(3)),), (aotjax.tensor(_f(4)),))
    with pytest.raises(TypeError, match=r"^jvp: .*structure"):
        aotjax.jvp(lambda x: x * 2, (aotjax.tensor(_f(3)),), (aotjax.tensor(_f(3)), aotjax.tensor(_f(3))))


# -- stop_gradient / detach -------------------------------------------------------------------------
@pytest.mark.parametrize("stop", [aotjax.stop_gradient, Tensor.detach], ids=["stop_gradient", "detach"])
def test_stop_gradient_zeroes_derivative(stop):
    X = _f(3)
    x = aotjax.tensor(X)
    assert_close(aotjax.grad(lambda a: stop(a.sin()).sum())(x), np.zeros(3))
    assert_close(aotjax.grad(lambda a: (stop(a) * a).sum())(x), X)
    assert_close(aotjax.grad(lambda a: stop(a).sum() + a.sum())(x), np.ones(3))
    _, t = aotjax.jvp(lambda a: stop(a) * 3, (x,), (aotjax.tensor(_f(3, seed=1)),))
    assert_close(t, np.zeros(3))
    assert_close(aotjax.jit(aotjax.grad(lambda a: (stop(a) * a.sin()).sum()))(x),
                 jax.grad(lambda a: (jax.lax.stop_gradient(a) * jnp.sin(a)).sum())(X))
    assert_close(aotjax.hessian(lambda a: (stop(a) * a ** 3).sum())(x),
                 jax.jit(jax.hessian(lambda a: (jax.lax.stop_gradient(a) * a ** 3).sum()))(X))
    assert_close(aotjax.grad(aotjax.grad(lambda a: stop(a) * a.sin()))(aotjax.tensor(FLOAT.type(0.4))),
                 jax.grad(jax.grad(lambda a: jax.lax.stop_gradient(a) * jnp.sin(a)))(0.4))


def test_stop_gradient_of_pytree():
    x = aotjax.tensor(_f(3))
    tree = aotjax.stop_gradient({"a": x, "b": (x * 2, 3)})
    assert tree["b"][1] == 3
    assert_close(tree["a"], _f(3))

    def f(a):
        s = aotjax.stop_gradient({"u": a, "v": (a * a, 2.0)})
        return (s["u"] * a + s["v"][0] * s["v"][1]).sum()

    assert_close(aotjax.grad(f)(x), _f(3))


def test_stop_gradient_shares_storage():
    x = aotjax.tensor(_f(3))
    aotjax.stop_gradient(x).add_(1)
    assert_close(x, _f(3) + 1)


def test_derivative_of_a_float_exponent_is_computed_in_the_tensors_dtype():
    # the jvp rule's `y - 1` on the inlined exponent once ran in float32 while x was float64
    from tests.helpers import FLOAT, by_mode
    xs = np.array([1.3, 2.7, 0.4], dtype=FLOAT)
    for f, df in [(lambda x: x ** 1.7, lambda v: 1.7 * v ** 0.7),
                  (lambda x: aotjax.pow(x, 0.1), lambda v: 0.1 * v ** -0.9)]:
        g = aotjax.grad(lambda x, f=f: f(x).sum())(aotjax.tensor(xs))
        assert g.dtype == FLOAT
        np.testing.assert_allclose(g.numpy(), df(xs.astype(np.float64)), rtol=by_mode(1e-14, 1e-6))
