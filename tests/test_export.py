"""`aotjax.export`: a program serialized beside its boundary table, called again (in a fresh process too) with
eager semantics (written inputs written, aliasing outputs real views); `aot(f).lower(...).export()`: the forward
and backward as two exported programs with the labelled signature, whose forward-then-backward is `grad(f)`."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest

import aotjax
from tests.op_records import as_np


def step(x, buf):
    buf.add_(x.sum())
    return {"y": (x * 2).tanh(), "tail": x[1:], "x": x}


def loss(x, w):
    return ((x @ w).tanh() ** 2).sum()


def test_an_exported_call_writes_its_inputs_and_returns_views_as_the_function_does():
    exp = aotjax.export(step)(aotjax.ones(3), aotjax.zeros(()))
    again = aotjax.deserialize(exp.serialize())
    for e in (exp, again):
        x, buf = aotjax.tensor([1.0, 2.0, 3.0]), aotjax.zeros(())
        out = e.call(x, buf)
        np.testing.assert_allclose(as_np(buf), 6.0)
        np.testing.assert_allclose(as_np(out["y"]), np.tanh([2.0, 4.0, 6.0]), rtol=1e-6)
        assert out["x"] is x
        out["tail"].mul_(10)  # a real view of the caller's x
        np.testing.assert_allclose(as_np(x), [1.0, 20.0, 30.0])
    assert exp.input_names == ["x", "buf"]


def test_calls_that_do_not_fit_the_export_raise_naming_the_argument():
    exp = aotjax.export(step)(aotjax.ones(3), aotjax.zeros(()))
    with pytest.raises(TypeError, match="input x must be float32"):
        exp.call(aotjax.ones(4), aotjax.zeros(()))
    with pytest.raises(TypeError, match=r"step was exported for 2 positional argument\(s\); the call gave 1"):
        exp.call(aotjax.ones(3))
    with pytest.raises(TypeError, match="keywords buf"):
        exp.call(aotjax.ones(3), buf=aotjax.zeros(()))
    x = aotjax.ones(3)
    with pytest.raises(TypeError, match="share memory"):
        aotjax.export(lambda a, b: a + b)(aotjax.ones(3), aotjax.ones(3)).call(x, x)
    with pytest.raises(ValueError, match="not an aotjax export"):
        aotjax.deserialize(b"something else")


def test_the_aot_pair_runs_forward_then_backward_as_grad():
    x, w = aotjax.tensor(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)), aotjax.ones(3, 4) * 0.3
    pair = aotjax.aot(loss).lower(x, w).export()
    pair = aotjax.deserialize(pair.serialize())
    assert pair.forward.input_names == ["primal[x]", "primal[w]"]
    assert pair.backward.output_names == ["cotangent[x]", "cotangent[w]"]
    assert pair.backward.input_names[-1] == "cotangent[out]"
    outs = pair.forward.call(x, w)
    grads = pair.backward.call(*pair.residuals_from([x, w], outs), aotjax.tensor(1.0))
    want = aotjax.grad(loss, argnums=(0, 1))(x, w)
    np.testing.assert_allclose(as_np(outs[0]), as_np(loss(x, w)), rtol=1e-6)
    for g, e in zip(grads, want, strict=True):
        np.testing.assert_allclose(as_np(g), as_np(e), rtol=1e-5, atol=1e-7)


@pytest.mark.slow
def test_exports_load_and_run_in_a_fresh_process(tmp_path):
    x, w = aotjax.tensor(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)), aotjax.ones(3, 4) * 0.3
    (tmp_path / "step.bin").write_bytes(aotjax.export(step)(aotjax.ones(3), aotjax.zeros(())).serialize())
    (tmp_path / "pair.bin").write_bytes(aotjax.aot(loss).lower(x, w).export().serialize())
    b, = jax.export.symbolic_shape("b")
    # symbolic rows, a named result, a view change of an argument (t_) and a view output of another
    sym = aotjax.export(lambda v, buf: (v.sort(dim=1), buf.t_(), buf[0]))(
        jax.ShapeDtypeStruct((b, 3), np.float32), aotjax.ones(2, 3))
    (tmp_path / "sym.bin").write_bytes(sym.serialize())
    script = textwrap.dedent(f"""
        import numpy as np, aotjax
        exp = aotjax.deserialize(open({str(tmp_path / 'step.bin')!r}, "rb").read())
        x, buf = aotjax.tensor([1.0, 2.0, 3.0]), aotjax.zeros(())
        out = exp.call(x, buf)
        print(float(buf), out["x"] is x)
        pair = aotjax.deserialize(open({str(tmp_path / 'pair.bin')!r}, "rb").read())
        x, w = aotjax.tensor(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)), aotjax.ones(3, 4) * 0.3
        outs = pair.forward.call(x, w)
        grads = pair.backward.call(*pair.residuals_from([x, w], outs), aotjax.tensor(1.0))
        print(repr(grads[1].numpy().tolist()))
        sym = aotjax.deserialize(open({str(tmp_path / 'sym.bin')!r}, "rb").read())
        buf = aotjax.arange(6.0).reshape(2, 3)
        result, same, row = sym.call(aotjax.tensor([[3.0, 1.0, 2.0]] * 5), buf)
        row.mul_(10)
        print(type(result).__name__, result.values.shape == (5, 3), same is buf, buf.shape, buf[0].tolist())
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    first, second, third = proc.stdout.strip().splitlines()
    assert first == "6.0 True"
    want = as_np(aotjax.grad(loss, argnums=1)(x, w))
    np.testing.assert_allclose(np.array(json.loads(second)), want, rtol=1e-5, atol=1e-7)
    assert third == "sort True True (3, 2) [0.0, 30.0]"  # buf transposed in place; row 0 of it a view


_CACHE_PROBE = """
import sys, jax
events = []
jax.monitoring.register_event_listener(lambda name, **kw: events.append(name))
import aotjax
if sys.argv[1:]:  # NOTE: else AOTJAX_COMPILATION_CACHE in the environment turned it on
    aotjax.config.compilation_cache(sys.argv[1])
step = aotjax.jit(lambda x, buf: buf.add_(x.sin()).sum())
lowered = aotjax.aot(lambda x: (x.exp() * x).sum())
step(aotjax.ones(3), aotjax.zeros(3))
aotjax.grad(lowered)(aotjax.ones(3))
w = aotjax.ones(2, 3, requires_grad=True)
aotjax.nn.functional.layer_norm(w, (3,)).sin().sum().backward()  # NOTE: a fused op and an eager backward's program
print(events.count("/jax/compilation_cache/cache_hits"), events.count("/jax/compilation_cache/cache_misses"))
"""


@pytest.mark.slow
def test_a_second_process_compiles_nothing_with_the_persistent_cache(tmp_path):
    def run(by_environment: bool):
        cache = str(tmp_path / "cache")
        env = {**os.environ, "AOTJAX_COMPILATION_CACHE": cache} if by_environment else None
        proc = subprocess.run([sys.executable, "-c", _CACHE_PROBE, *([] if by_environment else [cache])],
                              capture_output=True, text=True, timeout=120, env=env)
        assert proc.returncode == 0, proc.stderr
        return [int(n) for n in proc.stdout.split()]

    hits, misses = run(by_environment=False)
    assert misses > 0 and hits == 0
    hits, misses = run(by_environment=True)
    assert hits > 0 and misses == 0  # jit's program, aot's two, eager ops, a fused op, a backward: all from disk
