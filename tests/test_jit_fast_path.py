"""The fast path of a compiled call: a call repeating the last one's signature skips the full guard, and every
call that differs in what the program was traced for (shape, dtype, layout, aliasing, a captured tensor, a
static or scalar argument, a transform around it) still gets what the full path gives: eager's results."""
from __future__ import annotations

import numpy as np
import pytest

import aotjax
from aotjax.runtime import guards

from .helpers import FLOAT

pytestmark = pytest.mark.x32_only  # NOTE: independent of the float width: not run again in the x64 pass


@pytest.fixture
def full_keys(monkeypatch):
    """Counts the calls that take the full path (they compute `guards.call_key`)."""
    count = [0]
    call_key = guards.call_key

    def counting(leaves):
        count[0] += 1
        return call_key(leaves)

    monkeypatch.setattr(guards, "call_key", counting)
    return count


def _step(w, g, x):
    w.sub_(0.5 * g)
    return (w * x).sum(), x


def test_a_loop_of_repeated_calls_takes_the_fast_path_and_agrees_with_eager(full_keys):
    f = aotjax.jit(_step)
    w, w_eager = aotjax.ones(3), aotjax.ones(3)
    g = aotjax.tensor([1.0, 2.0, 3.0])
    for i in range(4):
        if i == 1:
            first = full_keys[0]
        x = aotjax.full((3,), float(i))  # a new batch each call: new storages of the same shape
        out, same = f(w, g, x)
        out_eager, _ = _step(w_eager, g, x)
        np.testing.assert_allclose(out.numpy(), out_eager.numpy())
        np.testing.assert_allclose(w.numpy(), w_eager.numpy())
        assert same is x
    assert f.trace_count == 1
    assert full_keys[0] == first  # only the first call built the full key


def test_a_changed_shape_or_dtype_misses():
    f = aotjax.jit(lambda x: x.mul_(2).sum())
    for x in (aotjax.ones(3), aotjax.ones(4), aotjax.ones(4, dtype=aotjax.int32), aotjax.ones(4)):
        expected = (x.clone() * 2).sum()
        out = f(x)
        assert out.dtype == expected.dtype and float(out) == float(expected)
        np.testing.assert_allclose(x.numpy(), 2 * np.ones(x.shape))
    assert f.trace_count == 3


def test_a_changed_layout_misses():
    def flat(x):
        return x.reshape(-1), x.is_contiguous()

    f = aotjax.jit(flat)
    a = aotjax.arange(6.0).reshape(2, 3)
    out, contiguous = f(a)
    assert contiguous
    transposed = aotjax.arange(6.0).reshape(3, 2).t()  # the same shape (2, 3), another layout
    out, contiguous = f(transposed)
    assert not contiguous
    np.testing.assert_allclose(out.numpy(), flat(transposed)[0].numpy())
    out.add_(100)  # a copy in PyTorch (and eagerly): the input is not written
    np.testing.assert_allclose(transposed.numpy(), [[0, 2, 4], [1, 3, 5]])
    out, _ = f(a)
    out.add_(100)  # a view again
    np.testing.assert_allclose(a.numpy(), np.arange(6.0).reshape(2, 3) + 100)


def _write_then_read(x, y):
    x.add_(1)
    return y * 2


@pytest.mark.parametrize("pattern", ["same object", "views of one storage"])
def test_a_changed_aliasing_pattern_misses(pattern):
    f = aotjax.jit(_write_then_read)
    f(aotjax.zeros(3), aotjax.zeros(3))
    f(aotjax.zeros(3), aotjax.zeros(3))  # the fast path's call
    base, base_eager = aotjax.zeros(2, 3), aotjax.zeros(2, 3)
    if pattern == "same object":
        args, args_eager = (base[0],) * 2, (base_eager[0],) * 2
    else:
        args, args_eager = (base[0], base[0]), (base_eager[0], base_eager[0])
    np.testing.assert_allclose(f(*args).numpy(), _write_then_read(*args_eager).numpy())
    np.testing.assert_allclose(base.numpy(), base_eager.numpy())
    assert f.trace_count == 2


def test_scalars_are_values_and_their_type_is_part_of_the_signature():
    f = aotjax.jit(lambda x, a, b: x * a + b)
    x = aotjax.arange(3)
    np.testing.assert_allclose(f(x, 1000, 1000).numpy(), [1000, 2000, 3000])
    np.testing.assert_allclose(f(x, 1000, 3).numpy(), [3, 1003, 2003])  # one int object passed twice before
    out = f(x, 2.5, 3)
    assert out.dtype == FLOAT or out.dtype == np.float32
    np.testing.assert_allclose(out.numpy(), [3, 5.5, 8])


def test_a_static_value_misses(full_keys):
    f = aotjax.jit(lambda x, k: x * k, static_argnums=1)
    x = aotjax.arange(3)
    for k in (2, 2, 2.0, 2.0, 3, True, True, 2):
        out, expected = f(x, k), x * k
        assert out.dtype == expected.dtype
        np.testing.assert_allclose(out.numpy(), expected.numpy())
    assert f.trace_count == 4
    before = full_keys[0]
    f(x, 2)  # the same static value as the last call: the fast path
    assert full_keys[0] == before


def test_captured_tensors_are_read_live_and_their_changes_miss():
    w = aotjax.ones(2)

    def step(x):
        w.add_(x)
        return w * 1

    f = aotjax.jit(step)
    f(aotjax.ones(2))
    f(aotjax.ones(2))
    np.testing.assert_allclose(w.numpy(), [3, 3])
    w.mul_(2)  # an eager write between calls is read by the next one
    np.testing.assert_allclose(f(aotjax.ones(2)).numpy(), [7, 7])
    out = f(w)  # the captured tensor is the argument too: another aliasing pattern
    np.testing.assert_allclose(out.numpy(), [14, 14])
    np.testing.assert_allclose(w.numpy(), [14, 14])
    assert f.trace_count == 2

    lin = aotjax.nn.Linear(2, 2)
    g = aotjax.jit(lambda x: lin(x))
    g(aotjax.ones(2))
    g(aotjax.ones(2))
    lin.half()  # its parameters take new storages of another dtype
    x = aotjax.ones(2, dtype=aotjax.float16)
    out = g(x)
    assert out.dtype == np.float16
    np.testing.assert_allclose(out.numpy(), lin(x).numpy())


def test_a_program_returning_an_input_as_a_written_base_keeps_both_buffers_alive():
    def assign(x, y):
        x.copy_(y)
        return x.sum()

    f = aotjax.jit(assign)
    x, y = aotjax.zeros(3), aotjax.tensor([1.0, 2.0, 3.0])
    for i in range(3):
        assert float(f(x, y)) == 6.0 + 3 * i
        y.add_(1)  # an eager write, then a call reading both again
    np.testing.assert_allclose(x.numpy(), [3, 4, 5])
    np.testing.assert_allclose(y.numpy(), [4, 5, 6])


def test_under_a_transform_the_call_is_inlined_after_fast_calls():
    f = aotjax.jit(lambda x: (x * x).sum())
    x = aotjax.tensor([1.0, 2.0])
    f(x)
    f(x)
    np.testing.assert_allclose(aotjax.grad(f)(x).numpy(), [2, 4])
    jaxpr = aotjax.make_jaxpr(lambda: f(x))()  # eager arguments only, under a staging transform
    assert "mul" in str(jaxpr)


def test_turning_checks_on_misses():
    pick = aotjax.jit(lambda x, i: x[i])
    x = aotjax.ones(3)
    pick(x, aotjax.tensor([1]))
    pick(x, aotjax.tensor([1]))
    aotjax.config.checks = True
    try:
        with pytest.raises(IndexError, match="out of bounds"):
            pick(x, aotjax.tensor([3]))
    finally:
        aotjax.config.checks = False


def test_the_fast_path_keeps_no_argument_data_alive():
    import gc
    import weakref

    f = aotjax.jit(lambda a: a.add_(1).sum())
    x = aotjax.ones(8)
    f(x)
    f(x)
    storage = weakref.ref(x._storage)
    del x
    gc.collect()
    assert storage() is None
    assert float(f(aotjax.ones(8))) == 16.0


def _scaled_rows(x):
    x.mul_(2)
    return x[0].clone(), x.is_contiguous()


@pytest.mark.parametrize("change", ["t_", "unsqueeze_", "out= resize", "Module.to(dtype)"])
def test_the_same_tensor_object_changed_in_place_between_calls_misses(change):
    """The fast path compares a repeated call's tensors by identity: a tensor whose storage, layout, shape or dtype
    changed in place since (the same object) is checked again, and the call gives eager's results."""
    f = aotjax.jit(_scaled_rows)
    if change == "Module.to(dtype)":
        lin = aotjax.nn.Linear(3, 2).requires_grad_(False)  # NOTE: written in place: not a leaf that requires grad
        x = lin.weight
    else:
        x = aotjax.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    f(x)
    f(x)
    if change == "t_":
        x.t_()
    elif change == "unsqueeze_":
        x.unsqueeze_(0)
    elif change == "out= resize":
        with pytest.warns(UserWarning, match="resized"):
            aotjax.add(aotjax.ones(4), 1, out=x)
    else:
        lin.half()
    expected_x = x.clone()
    expected_row, expected_contiguous = _scaled_rows(expected_x)
    row, contiguous = f(x)
    assert row.shape == expected_row.shape and row.dtype == expected_row.dtype
    np.testing.assert_allclose(row.numpy(), expected_row.numpy())
    np.testing.assert_allclose(x.numpy(), expected_x.numpy())
    assert contiguous == expected_contiguous
    assert x.stride() == expected_x.stride()


def test_a_call_staged_in_one_thread_while_another_thread_calls_the_same_function():
    """While one thread traces (its call on eager tensors is staged into its program), another's calls run; the
    tracing thread's call is never taken by the fast path."""
    import threading

    f = aotjax.jit(lambda x: (x * 2).sum())
    x, y = aotjax.ones(3), aotjax.full((3,), 2.0)
    f(x)
    f(x)
    tracing, called = threading.Event(), threading.Event()
    seen = []

    def traced():
        tracing.set()
        assert called.wait(10)
        return f(x)

    def other():
        assert tracing.wait(10)
        seen.extend(float(f(t)) for t in (y, y, x, x))  # calls of this thread while the other one traces
        called.set()

    thread = threading.Thread(target=other)
    thread.start()
    jaxpr = aotjax.make_jaxpr(traced)()
    thread.join()
    assert seen == [12.0, 12.0, 6.0, 6.0]
    assert "mul" in str(jaxpr)  # staged, not computed by the last call's program


def test_setting_the_config_is_seen_by_the_next_call():
    pick = aotjax.jit(lambda x, i: x[i])
    x, i = aotjax.ones(3), aotjax.tensor([3])
    pick(x, aotjax.tensor([1]))
    pick(x, i)  # unchecked: some value, no error
    aotjax.config.checks = True
    try:
        with pytest.raises(IndexError, match="out of bounds"):
            pick(x, i)  # the very same tensors as the last call
    finally:
        aotjax.config.checks = False


def test_after_fast_calls_keywords_other_argument_counts_and_errors_take_the_full_path(full_keys):
    # the last call's fast path is the jitted function's call itself: whatever it does not match goes on to the full
    # path, with the same arguments
    f = aotjax.jit(lambda x, scale=2.0: x * scale)
    x = aotjax.tensor([1.0, 2.0])
    f(x)
    f(x)
    for args, kwargs, expected in (((x,), {"scale": 3.0}, [3.0, 6.0]), ((x, 4.0), {}, [4.0, 8.0]),
                                   ((x,), {}, [2.0, 4.0])):
        before = full_keys[0]
        np.testing.assert_allclose(f(*args, **kwargs).numpy(), expected)
        assert full_keys[0] > before  # the full path
    before = full_keys[0]
    np.testing.assert_allclose(f(x).numpy(), [2.0, 4.0])
    assert full_keys[0] == before  # the fast path again
    with pytest.raises(TypeError):
        f()
    with pytest.raises(TypeError):
        f(x, 1.0, 2.0)
    np.testing.assert_allclose(f(x).numpy(), [2.0, 4.0])


def test_a_jitted_function_that_ran_fast_calls_is_freed_as_soon_as_it_is_dropped():
    import gc
    import weakref

    f = aotjax.jit(lambda a: a.add_(1).sum())
    x = aotjax.ones(3)
    f(x)
    f(x)
    gone = weakref.ref(f)
    collecting = gc.isenabled()
    gc.disable()  # NOTE: by its reference count: its fast path holds no reference back to it
    try:
        del f
        assert gone() is None
    finally:
        if collecting:
            gc.enable()
