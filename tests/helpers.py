"""Shared checks: run a program eagerly and through its traced jaxpr and compare everything; the test
suite's precision mode (jax's default 32-bit mode or x64) and what it means for dtypes, tolerances and
finite differences."""
from __future__ import annotations

import functools

import jax
import numpy as np
import pytest

import aotjax
from aotjax import Tensor
from aotjax.core.errors import AliasingError
from aotjax.ops.base.promotion import default_int_dtype

# -- the mode: conftest.py sets it from AOTJAX_TEST_X64 before any test module is imported ----------
X64 = bool(jax.config.jax_enable_x64)
FLOAT = np.dtype(np.float64 if X64 else np.float32)  # the widest float the mode computes in
INT = default_int_dtype()  # the default int: int64 with x64 (PyTorch's), int32 without


def by_mode(x64, x32):
    """`x64` when the suite runs in jax's x64 mode, `x32` in its default 32-bit mode."""
    return x64 if X64 else x32


# A test that asks for float64 or int64 on purpose: without x64 it gets the 32-bit dtype, and a warning
# (tests/ops/test_dtype_truncation.py checks that warning) that says nothing about the test.
asks_for_64_bits = pytest.mark.filterwarnings("ignore::aotjax.core.errors.DTypeTruncationWarning")


# NOTE: a central difference errs by ~step**2 (truncation) plus ~eps * |f| / step (rounding): float64
# balances them near 1e-6; float32 (eps 1.2e-7) near 1e-3, where it can still err by ~1e-4 relative.
FD_STEP = by_mode(1e-6, 1e-3)
FD_RTOL, FD_ATOL = by_mode((1e-5, 1e-6), (2e-3, 1e-3))  # a wrong rule (a factor 2, a sign) still fails


def run_on(lib, fn, arrays):
    """`fn(lib, *tensors)`, each array made a tensor of `lib` (aotjax or torch): one program run by both libraries."""
    return fn(lib, *(lib.tensor(a) for a in arrays))


def dtype_in_mode(torch_dtype) -> np.dtype:
    """The dtype aotjax gives where torch gives `torch_dtype`, in this suite's mode: int64 is the default int, and
    without x64 the 64-bit floats and complexes are 32-bit."""
    d = np.dtype(str(torch_dtype).removeprefix("torch."))
    if d == np.int64:
        return INT
    if not X64 and d in (np.float64, np.complex128):
        return np.dtype(np.float32 if d == np.float64 else np.complex64)
    return d


def assert_matches_torch(out, ref, how: str) -> None:
    """aotjax's results `out` (a tensor, or a sequence of them) against torch's `ref`: types, shapes, dtypes as this
    mode gives them (`dtype_in_mode`) and values, complex ones included."""
    if isinstance(ref, (tuple, list)):
        assert len(out) == len(ref), f"{how}: {len(out)} results, torch has {len(ref)}"
        for i, (o, r) in enumerate(zip(out, ref)):
            assert_matches_torch(o, r, f"{how}[{i}]")
        return
    assert isinstance(out, Tensor), f"{how}: got {type(out).__name__}"
    assert tuple(out.shape) == tuple(ref.shape), f"{how}: shape {tuple(out.shape)} != torch's {tuple(ref.shape)}"
    assert out.dtype == dtype_in_mode(ref.dtype), f"{how}: dtype {out.dtype} != torch's {ref.dtype}"
    tol = 1e-9 if out.dtype in (np.float64, np.complex128) else 1e-5
    np.testing.assert_allclose(np.asarray(out).astype(np.complex128), ref.detach().numpy().astype(np.complex128),
                               rtol=tol, atol=tol, err_msg=how)


def central_difference(f, xs, directions, step: float = FD_STEP):
    """`d/ds f(*(x + s * d for x, d in zip(xs, directions)))` at 0, by a central difference computed in
    float64 from `f`'s values (a pytree of arrays or Tensors, in `f`'s own precision: the mode's). Each
    perturbed point is rounded to its `x`'s dtype before `f` sees it."""
    def at(s):
        out = f(*[(x + s * d).astype(x.dtype) for x, d in zip(xs, directions, strict=True)])
        return jax.tree_util.tree_map(lambda v: np.asarray(v, np.float64), out)
    return jax.tree_util.tree_map(lambda hi, lo: (hi - lo) / (2 * step), at(step), at(-step))


def copy_tree(tree):
    """Fresh, independent eager tensors with the same values (leaves that are not Tensors are kept)."""
    return jax.tree_util.tree_map(lambda x: aotjax.tensor(np.array(x)) if isinstance(x, Tensor) else x, tree)


def to_numpy(tree):
    return jax.tree_util.tree_map(lambda x: np.asarray(x) if isinstance(x, Tensor) else x, tree)


def assert_trees_close(a, b, rtol=1e-6, atol=1e-6, how=""):
    la, ta = jax.tree_util.tree_flatten(to_numpy(a))
    lb, tb = jax.tree_util.tree_flatten(to_numpy(b))
    assert ta == tb, f"{how}: structures differ: {ta} vs {tb}"
    for x, y in zip(la, lb):
        x, y = np.asarray(x), np.asarray(y)
        assert x.shape == y.shape, f"{how}: shapes differ: {x.shape} vs {y.shape}"
        assert x.dtype == y.dtype, f"{how}: dtypes differ: {x.dtype} vs {y.dtype}"
        np.testing.assert_allclose(x, y, rtol=rtol, atol=atol, err_msg=how)


def check_traced_matches_eager(f, *args, rtol=1e-6, atol=1e-6):
    """`eval_jaxpr(make_jaxpr(f))` equals eager `f`: outputs and the arguments afterwards."""
    eager_args = copy_tree(args)
    eager_out = f(*eager_args)
    jaxpr = aotjax.make_jaxpr(f)(*copy_tree(args))
    traced_args = copy_tree(args)
    flat_args = jax.tree_util.tree_leaves(traced_args)
    traced_out = jax.tree_util.tree_unflatten(jaxpr.out_tree, aotjax.eval_jaxpr(jaxpr, *flat_args))
    assert_trees_close(eager_out, traced_out, rtol, atol)
    assert_trees_close(eager_args, traced_args, rtol, atol)
    return eager_out, jaxpr


# -- the boundary: eager vs functionalize vs jit, by behaviour ------------------------------------
def _observed(args, extra, out):
    """Every tensor whose state the comparison covers, in a fixed order."""
    leaves = [x for x in jax.tree_util.tree_leaves((args, extra, out)) if isinstance(x, aotjax.Tensor)]
    return leaves


def _state(tensors):
    return [(tuple(t.shape), t.stride(), np.asarray(t).copy()) for t in tensors]


def _outputs(out):
    return [x for x in jax.tree_util.tree_leaves(out) if isinstance(x, aotjax.Tensor)]


def _behaviour(run, make):
    """What a call does: the outputs, the observed state after it, and after writing each output."""
    args, extra = make()
    out = run(*args)
    history = [_state(_observed(args, extra, out))]
    for o in _outputs(out):
        try:
            _poke(o)
            history.append(_state(_observed(args, extra, out)))
        except AliasingError:
            history.append("error")
    return history


def _poke(o):
    """Write into an output, to see what it aliases."""
    if o.dtype == np.bool_:
        o.logical_not_()
    else:
        o.add_(1000)


def _assert_same(expected, got, how, rtol, atol):
    assert len(expected) == len(got), how
    for step, (e, g) in enumerate(zip(expected, got)):
        if isinstance(e, str) or isinstance(g, str):
            assert e == g, f"{how}: step {step}"
            continue
        assert len(e) == len(g), f"{how}: step {step}: {len(e)} tensors observed in eager, {len(g)} here"
        for k, ((es, est, ev), (gs, gst, gv)) in enumerate(zip(e, g)):
            assert es == gs, f"{how}: step {step}, tensor {k}: shape {gs}, eager {es}"
            assert est == gst, f"{how}: step {step}, tensor {k}: strides {gst}, eager {est}"
            np.testing.assert_allclose(gv, ev, rtol=rtol, atol=atol, err_msg=f"{how}: step {step}, tensor {k}")


def check_boundary_agrees(f, make, rtol=0.0, atol=0.0, static_argnums=()):
    """`f` run eagerly, under functionalize, under jit (first and cached call) and through its
    functionalized jaxpr interpreted: the same outputs, input effects and aliasing. `make()` returns
    fresh `(args, extra_observed_tensors)`. Returns the jitted function."""
    expected = _behaviour(f, make)
    jitted = aotjax.jit(f, static_argnums=static_argnums)
    ways = {"functionalize": aotjax.functionalize(f, static_argnums), "jit (first call)": jitted,
            "jit (cached call)": jitted,
            "eval_jaxpr of the functionalized jaxpr": aotjax.jit(f, static_argnums).lower(*make()[0]).eval}
    for how, run in ways.items():
        _assert_same(expected, _behaviour(run, make), how, rtol, atol)
    return jitted


def check_aot_boundary_agrees(f, make, rtol=0.0, atol=0.0, **aot_kwargs):
    """`aot(f)` called plainly, first and cached call: the same outputs, input effects and aliasing as
    eager `f` (see `check_boundary_agrees`; `static_argnums` among `aot_kwargs`). Returns the aot function."""
    expected = _behaviour(f, make)
    compiled = aotjax.aot(f, **aot_kwargs)
    for how in ("aot (first call)", "aot (cached call)"):
        _assert_same(expected, _behaviour(compiled, make), how, rtol, atol)
    return compiled


def check_call_agrees(f, run, make, how, rtol=0.0, atol=0.0):
    """`run` (a transformed `f`) behaves as eager `f` on arguments from `make()` (see `check_boundary_agrees`)."""
    _assert_same(_behaviour(f, make), _behaviour(run, make), how, rtol, atol)


def check_traced_agrees(f, make, rtol=0.0, atol=0.0, static_argnums=()):
    """`eval_jaxpr(make_jaxpr(f))` on eager tensors (reference semantics) behaves as eager `f`: outputs, input
    effects, strides and aliasing, for arguments from `make()` (see `check_boundary_agrees`)."""
    expected = _behaviour(f, make)
    args, _ = make()
    jaxpr = aotjax.make_jaxpr(f, static_argnums)(*args)

    def run(*args):
        dyn = [a for i, a in enumerate(args) if i not in static_argnums]
        return jax.tree_util.tree_unflatten(jaxpr.out_tree, aotjax.eval_jaxpr(jaxpr, *jax.tree_util.tree_leaves(dyn)))

    _assert_same(expected, _behaviour(run, make), "eval_jaxpr of make_jaxpr", rtol, atol)
    return jaxpr


# -- derivatives: every way of taking them agrees with eager grad ----------------------------------
def grad_ways(loss, argnums=0, static_argnums=()) -> dict:
    """`name -> function returning (value or None, gradient)`: grad, value_and_grad, jit(grad), grad(jit),
    grad(aot) with the default and the min-cut partitioner, aot(grad)."""
    from aotjax.partition import min_cut_partition

    grad = aotjax.grad(loss, argnums)
    jit, aot = functools.partial(aotjax.jit, static_argnums=static_argnums), functools.partial(
        aotjax.aot, static_argnums=static_argnums)
    without_value = lambda g: lambda *a: (None, g(*a))  # noqa: E731
    return {"grad": without_value(grad), "value_and_grad": aotjax.value_and_grad(loss, argnums),
            "jit(grad)": without_value(jit(grad)), "grad(jit)": without_value(aotjax.grad(jit(loss), argnums)),
            "grad(aot)": without_value(aotjax.grad(aot(loss), argnums)),
            "grad(aot, min-cut)": without_value(aotjax.grad(aot(loss, partition=min_cut_partition()), argnums)),
            "aot(grad)": without_value(aot(grad))}


def check_grads_agree(loss, make, argnums=0, static_argnums=(), rtol=1e-6, atol=1e-6):
    """Every way of `grad_ways` gives eager grad's gradient (and value), and leaves the arguments as
    eager `loss` does (its writes happen, once). `make()` returns fresh `(args, extra_observed_tensors)`.
    Returns eager grad's gradient."""
    args, extra = make()
    value = loss(*args)
    after = _state(_observed(args, extra, ()))
    args, _ = make()
    expected = aotjax.grad(loss, argnums)(*args)
    for how, run in grad_ways(loss, argnums, static_argnums).items():
        args, extra = make()
        got_value, got = run(*args)
        assert_trees_close(expected, got, rtol, atol, f"{how}: gradient")
        if got_value is not None:
            assert_trees_close(value, got_value, rtol, atol, f"{how}: value")
        _assert_same([after], [_state(_observed(args, extra, ()))], f"{how}: the arguments afterwards", rtol, atol)
    return expected


def directional_derivative(fn, bases, direction, eps):
    """`(fn(bases + eps * direction) - fn(bases - eps * direction)) / (2 eps)`, `bases` a list of arrays."""
    plus = fn([b + eps * d for b, d in zip(bases, direction)])
    minus = fn([b - eps * d for b, d in zip(bases, direction)])
    return (float(plus) - float(minus)) / (2 * eps)


def training_step(loss_of, opt):
    """A PyTorch training step: `loss_of(*args).backward()`, `opt.step()`, `opt.zero_grad()`; returns the loss,
    detached (a program's output)."""
    def step(*args):
        loss = loss_of(*args)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss.detach()
    return step


def run_on_eight_devices(program: str) -> None:
    """Run `program` (Python source ending by printing "ok") in a fresh process with 8 simulated CPU devices (the
    device count is fixed when jax starts) and check that it got there."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().endswith("ok"), proc.stdout
