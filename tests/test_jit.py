"""jit: caching and guards, donation of written inputs, stages, inputs of every kind, errors."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import aotjax
from aotjax.core.errors import AliasingError


def _counting(f):
    calls = []

    def wrapped(*args, **kwargs):
        calls.append(1)
        return f(*args, **kwargs)

    return wrapped, calls


def test_cache_hit_does_not_retrace_and_new_signatures_do():
    f, calls = _counting(lambda a, b: (a.add_(1), a + b)[1])
    jf = aotjax.jit(f)
    jf(aotjax.ones(3), aotjax.ones(3))
    jf(aotjax.ones(3), aotjax.zeros(3))
    assert len(calls) == 1
    jf(aotjax.ones(4), aotjax.ones(4))  # new shape
    assert len(calls) == 2
    out = jf(aotjax.ones(3, dtype=aotjax.float16), aotjax.ones(3, dtype=aotjax.float16))  # new dtype (in x32 too)
    assert len(calls) == 3 and out.dtype == np.float16
    x = aotjax.ones(3)
    out = jf(x, x)  # new aliasing pattern: one object twice
    assert len(calls) == 4
    np.testing.assert_array_equal(out.numpy(), [4.0, 4.0, 4.0])  # both see the write, as in eager
    np.testing.assert_array_equal(x.numpy(), [2.0, 2.0, 2.0])
    base = aotjax.ones(2, 3)
    jf(base[0], base[1])  # two views of one storage: another pattern
    assert len(calls) == 5
    np.testing.assert_array_equal(base.numpy(), [[2, 2, 2], [1, 1, 1]])
    jf(aotjax.ones(3), aotjax.ones(3))
    assert len(calls) == 5 and jf.trace_count == 5


def test_aliasing_pattern_is_guarded_exactly():
    """A program compiled for unrelated inputs is never run for aliased ones, and vice versa."""
    def f(a, b):
        a.mul_(2)
        return b * 1

    jf = aotjax.jit(f)
    out = jf(aotjax.ones(3), aotjax.ones(3))
    np.testing.assert_array_equal(out.numpy(), [1, 1, 1])
    x = aotjax.ones(3)
    np.testing.assert_array_equal(jf(x, x).numpy(), [2, 2, 2])  # b is a: it sees the write
    y = aotjax.ones(2, 3)
    np.testing.assert_array_equal(jf(y[0], y[0]).numpy(), [2, 2, 2])
    np.testing.assert_array_equal(jf(y[1], y[0]).numpy(), [2, 2, 2])  # y[0] was doubled by the call before
    np.testing.assert_array_equal(y.numpy(), [[2, 2, 2], [2, 2, 2]])


def test_static_argnums():
    f, calls = _counting(lambda x, n: x * n if n > 1 else x)
    jf = aotjax.jit(f, static_argnums=1)
    np.testing.assert_array_equal(jf(aotjax.ones(2), 3).numpy(), [3, 3])
    np.testing.assert_array_equal(jf(aotjax.ones(2), 1).numpy(), [1, 1])
    jf(aotjax.ones(2), 3)
    assert len(calls) == 2
    with pytest.raises(TypeError, match="static arguments must be hashable"):
        jf(aotjax.ones(2), [3])


def test_written_input_is_donated_not_copied():
    def step(w, g):
        w.sub_(0.1 * g)
        return (w * w).sum()

    w = aotjax.tensor(np.ones((256, 256), np.float32))
    old = w._storage.base
    jstep = aotjax.jit(step)
    jstep(w, aotjax.ones(256, 256))
    assert old.is_deleted()  # the executable reused the old buffer for the new value
    np.testing.assert_allclose(w.numpy(), 0.9)
    compiled = jstep.lower(w, aotjax.ones(256, 256)).compile()
    mem = compiled.memory_analysis()
    assert mem.alias_size_in_bytes == 256 * 256 * 4  # the written input aliases its output buffer


def test_users_own_array_is_not_deleted():
    arr = jnp.ones(3)
    w = aotjax.tensor(arr)  # may wrap the user's buffer without a copy
    aotjax.jit(lambda w: w.add_(1))(w)
    assert not arr.is_deleted()
    np.testing.assert_array_equal(np.asarray(arr), [1, 1, 1])
    np.testing.assert_array_equal(w.numpy(), [2, 2, 2])


def test_inputs_of_every_kind():
    f = aotjax.jit(lambda x, a, n, s: x * a + n * s)
    out = f(aotjax.ones(2), jnp.full(2, 2.0), np.full(2, 3.0, np.float32), 4.0)
    np.testing.assert_array_equal(out.numpy(), [14.0, 14.0])
    assert isinstance(out, aotjax.Tensor)


def test_writing_into_a_jax_array_is_a_clear_error():
    def f(x):
        x.add_(1)
        return x

    for transform in (aotjax.jit, aotjax.functionalize):
        with pytest.raises(AliasingError, match=r"add_: in-place write into an argument that is a jax.Array, which "
                                                r"is immutable \(at test_jit.py:\d+ \(f\)\)"):
            transform(f)(jnp.ones(3))


def test_an_error_in_the_body_leaves_the_inputs_alone():
    def f(a, b):
        a.mul_(2)
        b.t_()
        raise ValueError("boom")

    a, b = aotjax.ones(3), aotjax.ones(2, 3)
    for transform in (aotjax.jit, aotjax.functionalize):
        with pytest.raises(ValueError, match="boom"):
            transform(f)(a, b)
        np.testing.assert_array_equal(a.numpy(), [1, 1, 1])
        assert b.shape == (2, 3) and b.is_contiguous()


def test_shape_error_at_trace_time_leaves_inputs_alone():
    def f(a, b):
        a.add_(1)
        return a @ b  # [3] @ [4, 2] does not contract

    a = aotjax.ones(3)
    with pytest.raises(aotjax.core.errors.ShapeError, match="matmul"):
        aotjax.jit(f)(a, aotjax.ones(4, 2))
    np.testing.assert_array_equal(a.numpy(), [1, 1, 1])


def test_stages():
    def f(x, y):
        x[0].add_(y)
        return x.t()

    jf = aotjax.jit(f)
    lowered = jf.lower(aotjax.ones(2, 3), aotjax.ones(3))
    text = str(lowered.meta)
    assert "x is written" in text and "a view of input [0] x: permute" in text
    assert "select_scatter" in lowered.jaxpr.pretty()
    assert "add_" in lowered.as_written.pretty()
    assert "stablehlo" in lowered.as_text() or "func.func" in lowered.as_text()
    compiled = lowered.compile()
    assert compiled.cost_analysis() is not None
    x = aotjax.ones(2, 3)
    out = compiled(x, aotjax.ones(3))
    out.mul_(10)  # a real view of x
    np.testing.assert_array_equal(x.numpy(), [[20, 20, 20], [10, 10, 10]])
    with pytest.raises(TypeError, match="do not match the signature"):
        compiled(aotjax.ones(4, 3), aotjax.ones(3))


def test_jit_under_another_transform_is_inlined():
    jf = aotjax.jit(lambda x: x.mul_(2).sin())
    jaxpr = aotjax.make_jaxpr(lambda x: jf(x) + 1)(aotjax.ones(3))
    assert [e.primitive.name for e in jaxpr.eqns] == ["mul", "sin", "copy_", "add"]


def test_pytree_arguments_and_outputs():
    def f(params, batch):
        params["w"].sub_(batch["x"])
        return {"loss": params["w"].sum(), "w": params["w"]}

    params = {"w": aotjax.ones(3), "b": aotjax.zeros(1)}
    out = aotjax.jit(f)(params, {"x": aotjax.ones(3) * 0.5})
    assert out["w"] is params["w"]
    np.testing.assert_allclose(out["loss"].numpy(), 1.5)
    np.testing.assert_allclose(params["w"].numpy(), [0.5, 0.5, 0.5])


def test_to_jax_of_the_functionalized_program_under_jax_jit():
    def f(x):
        x[1:].mul_(3)
        return x.sum()

    jaxpr = aotjax.jit(f).lower(aotjax.ones(3)).jaxpr
    out, new_x = jax.jit(aotjax.to_jax(jaxpr))(jnp.ones(3, jnp.float32))
    assert float(out) == 7.0
    np.testing.assert_array_equal(np.asarray(new_x), [1, 3, 3])


def test_a_cached_program_keeps_no_argument_alive():
    import gc
    import weakref

    x = aotjax.tensor(np.ones((64, 64), np.float32))
    ref = weakref.ref(x)
    f = aotjax.jit(lambda a: (a * 2).sum())
    f(x)
    del x
    gc.collect()
    assert ref() is None  # the cache holds the program and its signature, not the first call's tensors
    assert f(aotjax.ones(64, 64)).item() == 64 * 64 * 2 and f.trace_count == 1


SCALE = 2.0


def test_lower_after_a_call_reuses_the_program_the_call_ran():
    global SCALE
    f = aotjax.jit(lambda x: (x.sin() * SCALE).sum())
    x = aotjax.ones(3)
    f(x)
    lowered = f.lower(x)
    assert f.trace_count == 1  # NOTE: as `jax.jit(f).lower` after a call: nothing traced again
    assert float(lowered.compile()(x)) == pytest.approx(float(f(x)))
    assert "sin" in lowered.jaxpr.pretty()
    f.lower(aotjax.ones(4))  # NOTE: another signature: traced for the lowering
    assert f.trace_count == 2
    SCALE = 3.0
    try:
        changed = f.lower(x)  # NOTE: a guard no longer holds: the program is traced again, for what a call would run
        assert f.trace_count == 3
        assert float(changed.compile()(x)) == pytest.approx(3.0 * float(aotjax.ones(3).sin().sum()), rel=1e-6)
    finally:
        SCALE = 2.0
