"""Captured tensors are live state: a tensor a compiled or functionalized function reads from a closure or a global
is an implicit input of its program, read at every call (never baked in as a constant) and, when written in place,
written back to the caller's tensor like an argument; loop bodies carry such writes through every iteration."""
from __future__ import annotations

import numpy as np
import pytest

import aotjax
from aotjax.core.errors import AliasingError


def test_jit_reads_a_captured_tensor_at_every_call():
    w = aotjax.ones(2)
    f = aotjax.jit(lambda x: x * w)
    np.testing.assert_allclose(f(aotjax.ones(2)).numpy(), [1, 1])
    w.mul_(5)
    np.testing.assert_allclose(f(aotjax.ones(2)).numpy(), [5, 5])
    assert f.trace_count == 1  # read, not traced again


@pytest.mark.parametrize("transform", ["jit", "aot", "functionalize"])
def test_a_write_into_a_captured_tensor_reaches_it(transform):
    buf = aotjax.zeros(2)

    def step(x):
        buf.add_(x)
        return (buf * 2).sum()

    f = {"jit": aotjax.jit, "aot": aotjax.aot, "functionalize": aotjax.functionalize}[transform](step)
    assert float(f(aotjax.ones(2))) == 4.0
    assert float(f(aotjax.tensor([1.0, 2.0]))) == 10.0
    np.testing.assert_allclose(buf.numpy(), [2, 3])


def test_a_write_through_a_view_of_a_captured_tensor_reaches_its_storage():
    big = aotjax.zeros(2, 3)
    row = big[1]
    f = aotjax.jit(lambda x: row.add_(x))
    f(aotjax.ones(3))
    out = f(aotjax.ones(3))
    np.testing.assert_allclose(big.numpy(), [[0, 0, 0], [2, 2, 2]])
    np.testing.assert_allclose(out.numpy(), [2, 2, 2])


def test_the_boundary_names_captured_inputs_after_the_arguments():
    buf = aotjax.zeros(2)

    def step(x):
        buf.add_(x)
        return buf.sum()

    text = str(aotjax.jit(step).lower(aotjax.ones(2)).meta)
    assert "[1] captured[buf]: f32[2]" in text
    assert "captured[buf] is written" in text


class _Counter:
    def __init__(self):
        self.scale = aotjax.ones(2)
        self.stats = {"calls": aotjax.zeros(())}

    def step(self, x):
        self.stats["calls"].add_(1)
        return x * self.scale + aotjax.rand(2)


def test_captured_inputs_are_named_by_the_path_the_function_reads_them_by():
    counter = _Counter()
    method = str(aotjax.jit(counter.step).lower(aotjax.ones(2)).meta)
    closure = str(aotjax.jit(lambda x: counter.step(x)).lower(aotjax.ones(2)).meta)
    for owner, text in (("self", method), ("counter", closure)):
        assert f"captured[{owner}.stats['calls']] is written" in text
        assert f"captured[{owner}.scale]: f32[2]" in text
        assert "captured[default_generator] is written" in text


def test_a_captured_tensor_that_changes_shape_or_becomes_an_argument_is_traced_again():
    w = aotjax.ones(2)
    f = aotjax.jit(lambda x: x + w)
    f(aotjax.ones(2))
    np.testing.assert_allclose(f(w).numpy(), [2, 2])  # now an argument too: read through it
    assert f.trace_count == 2


def test_grad_of_aot_reads_captured_tensors_as_constants():
    w = aotjax.tensor([1.0, 2.0])
    f = aotjax.aot(lambda x: (x * w).sum())
    np.testing.assert_allclose(aotjax.grad(f)(aotjax.ones(2)).numpy(), [1, 2])
    w.mul_(3)
    np.testing.assert_allclose(aotjax.grad(f)(aotjax.ones(2)).numpy(), [3, 6])


def test_a_scan_body_writes_a_tensor_captured_from_outside_jit():
    acc = aotjax.zeros(3)

    @aotjax.jit
    def total(xs):
        def body(c, x):
            acc.add_(x)
            return c + acc.sum(), None
        return aotjax.scan(body, aotjax.zeros(()), xs)[0]

    xs = aotjax.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    expected_acc, expected = np.zeros(3, np.float32), 0.0
    for x in np.arange(6, dtype=np.float32).reshape(2, 3):
        expected_acc += x
        expected += expected_acc.sum()
    np.testing.assert_allclose(float(total(xs)), expected)
    np.testing.assert_allclose(acc.numpy(), expected_acc)
    total(xs)
    np.testing.assert_allclose(acc.numpy(), 2 * expected_acc)


def test_checkpoint_reads_captured_tensors_live_under_jit():
    w = aotjax.ones(2)
    f = aotjax.jit(aotjax.checkpoint(lambda x: (x * w).sin()))
    before = f(aotjax.ones(2)).numpy()
    w.mul_(2)
    np.testing.assert_allclose(f(aotjax.ones(2)).numpy(), np.sin(2 * np.ones(2)), rtol=1e-6)
    np.testing.assert_allclose(before, np.sin(np.ones(2)), rtol=1e-6)


def test_a_constant_made_inside_is_not_an_input_and_stays_unwritable():
    def f(x):
        c = aotjax.tensor([1.0, 2.0])
        c.add_(x)
        return c

    with pytest.raises(AliasingError, match="made from data inside"):
        aotjax.jit(f)(aotjax.ones(2))


def test_a_compiled_step_differentiating_captured_tensors_then_writing_them_reads_them_at_every_call():
    # grad's entry values of captured tensors are live too: never baked in, never donated twice
    def run(transform):
        w, b = aotjax.ones(3, 2), aotjax.zeros(2)
        params = {"w": w, "b": b}
        x = aotjax.tensor(np.arange(6, dtype=np.float32).reshape(2, 3) / 6)

        def step(x):
            loss, g = aotjax.value_and_grad(lambda p, x: ((x @ p["w"] + p["b"]) ** 2).mean())(params, x)
            w.sub_(0.1 * g["w"])
            b.sub_(0.1 * g["b"])
            return loss

        step = transform(step)
        return [float(step(x)) for _ in range(3)], w.numpy(), b.numpy()

    eager = run(lambda f: f)
    for transform in (aotjax.jit, aotjax.functionalize):
        losses, w, b = run(transform)
        np.testing.assert_allclose(losses, eager[0], rtol=1e-6)
        np.testing.assert_allclose(w, eager[1], rtol=1e-6)
        np.testing.assert_allclose(b, eager[2], rtol=1e-6)
    assert len(set(eager[0])) == 3
