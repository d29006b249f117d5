"""vmap's in-place rules (PyTorch's, plus the promotion of tensors made inside), each eagerly, under jit and under
grad, against a Python loop over the examples; captured tensors; outputs that alias inputs are views, as torch's."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import aotjax
from tests.helpers import FLOAT
from tests.op_records import as_np

T = aotjax.tensor
X = np.arange(12.0, dtype=FLOAT).reshape(3, 4) / 10
RUNS = {"eager": lambda f: f, "jit": aotjax.jit}


def _loop(f, xs, axis=0):
    return np.stack([as_np(f(T(np.take(xs, i, axis)))) for i in range(xs.shape[axis])])


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize("axis", [0, 1])
def test_write_into_a_batched_input_and_its_view_reaches_the_caller(run, axis):
    def f(a, b):
        a[1:].mul_(b)  # a write through a view of the input
        return a.add_(1.0).sum()

    x, w = T(X.copy()), T(np.float32(3.0))
    out = RUNS[run](aotjax.vmap(f, in_axes=(axis, None)))(x, w)
    expected = np.moveaxis(X.copy(), axis, 0)
    expected[:, 1:] *= 3
    expected += 1
    np.testing.assert_allclose(as_np(x), np.moveaxis(expected, 0, axis), rtol=1e-6)
    np.testing.assert_allclose(as_np(out), expected.sum(1), rtol=1e-6)


def test_write_into_a_batched_input_under_grad():
    def loss(w, x):
        def per_example(a):
            a.mul_(w)
            return (a * a).sum()
        return aotjax.vmap(per_example)(x).sum()

    w = T(np.float32(1.5))
    x = T(X.copy())
    g = aotjax.grad(loss)(w, x)
    np.testing.assert_allclose(float(g), (2 * 1.5 * X * X).sum(), rtol=1e-5)
    np.testing.assert_allclose(as_np(x), X * 1.5, rtol=1e-6)  # the write happened to the caller, once


@pytest.mark.parametrize("run", RUNS)
def test_batched_write_into_an_unbatched_input_or_captured_tensor_is_an_error(run):
    acc = aotjax.zeros(4)
    with pytest.raises(ValueError, match=r"vmap: add_ writes a batched value into a tensor that is not batched, "
                                         r"argument \[1\].*test_vmap_mutation.*out-of-place op"):
        RUNS[run](aotjax.vmap(lambda a, b: b.add_(a), in_axes=(0, None)))(T(X), acc)
    with pytest.raises(ValueError, match=r"vmap: mul_ writes a batched value .* captured from outside"):
        RUNS[run](aotjax.vmap(lambda a: acc.mul_(a)))(T(X))
    np.testing.assert_array_equal(as_np(acc), np.zeros(4))
    with pytest.raises(ValueError, match="writes a batched value"):
        aotjax.grad(lambda x: aotjax.vmap(lambda a, b: b.add_(a).sum(), in_axes=(0, None))(x, aotjax.zeros(4)).sum())(
            T(X))


def test_torch_refuses_the_same_writes():
    with pytest.raises(RuntimeError):
        torch.func.vmap(lambda a, b: b.add_(a), in_dims=(0, None))(torch.tensor(X), torch.zeros(4))


@pytest.mark.parametrize("run", RUNS)
def test_an_unbatched_write_into_a_captured_tensor_happens_once(run):
    counter = aotjax.zeros(())

    def f(a):
        counter.add_(1.0)  # the same for every example: Python's side effects run once, as in torch's vmap
        return a * 2

    np.testing.assert_allclose(as_np(RUNS[run](aotjax.vmap(f))(T(X))), X * 2)
    assert float(counter) == 1.0


def _local_promotion(a):
    z = aotjax.zeros(4, 4)
    diag = z.diagonal()  # a view taken before the write sees it
    row = z[0]
    z.diagonal().copy_(a)
    row.add_(a.sum())
    return z, diag


@pytest.mark.parametrize("run", RUNS)
def test_a_tensor_made_inside_and_written_with_a_batched_value_is_promoted(run):
    z, diag = RUNS[run](aotjax.vmap(_local_promotion))(T(X))
    for i in range(3):
        ref_z, ref_diag = _local_promotion(T(X[i]))
        np.testing.assert_allclose(as_np(z)[i], as_np(ref_z), rtol=1e-6)
        np.testing.assert_allclose(as_np(diag)[i], as_np(ref_diag), rtol=1e-6)
    with pytest.raises(RuntimeError):  # torch's vmap refuses it
        torch.func.vmap(lambda a: torch.zeros(4, 4).diagonal().copy_(a))(torch.tensor(X))


def test_local_promotion_under_grad_equals_a_loop_of_grad():
    def f(a):
        z, diag = _local_promotion(a)
        return (z * z).sum() + diag.sum()

    got = aotjax.vmap(aotjax.grad(f))(T(X))
    np.testing.assert_allclose(as_np(got), np.stack([as_np(aotjax.grad(f)(T(x))) for x in X]), rtol=1e-5)
    total = aotjax.grad(lambda x: aotjax.vmap(f)(x).sum())(T(X))
    np.testing.assert_allclose(as_np(total), as_np(got), rtol=1e-5)


@pytest.mark.parametrize("in_dims,index", [((0, None), lambda a, b: (b[:2], a)), ((1, 0), lambda a, b: (a[1:], b.t()))])
def test_outputs_that_alias_inputs_are_views_of_the_callers_tensors_as_torch(in_dims, index):
    def f(a, b):
        return index(a, b)

    x, y = X.copy(), np.arange(12.0, dtype=FLOAT).reshape(4, 3) if in_dims[1] == 0 else np.zeros(4, FLOAT)
    ours_x, ours_y = T(x.copy()), T(y.copy())
    theirs_x, theirs_y = torch.tensor(x.copy()), torch.tensor(y.copy())
    ours = aotjax.vmap(f, in_axes=in_dims)(ours_x, ours_y)
    theirs = torch.func.vmap(f, in_dims=in_dims)(theirs_x, theirs_y)
    for o, t in zip(ours, theirs, strict=True):
        assert o.shape == tuple(t.shape) and o.stride() == t.stride()
        np.testing.assert_array_equal(as_np(o), t.numpy())
    # a write into the contiguous output reaches the caller's tensor, as in torch
    k = 1 if in_dims[1] is None else 0
    ours[k].mul_(-1.0)
    theirs[k].mul_(-1.0)
    np.testing.assert_array_equal(as_np(ours_x), theirs_x.numpy())
    np.testing.assert_array_equal(as_np(ours_y), theirs_y.numpy())
