"""`aot(f).lower(...).split_backward(weights)`: the backward split into an input-gradient and a weight-gradient
program (zero-bubble pipeline schedules). Together they equal `grad(f)` (up to XLA's fusion's rounding); the input
part computes no weight gradient."""
from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import aotjax
from aotjax.core.errors import AotjaxError
from tests.helpers import FLOAT


def _t(*shape, seed=0):
    return aotjax.tensor(np.random.default_rng(seed + sum(shape)).standard_normal(shape).astype(FLOAT))


def _mlp(x, w1, w2, w3):
    return ((x @ w1).tanh() @ w2).relu().__matmul__(w3).square().mean()


def _check(f, args, weights):
    split = aotjax.aot(f).lower(*args).split_backward(weights=weights)
    outs, input_grads, weight_grads = split.run(*args)
    argnums = tuple(range(len(args)))
    expected = aotjax.grad(f, argnums=argnums)(*args)
    weights = (weights,) if isinstance(weights, int) else weights
    np.testing.assert_allclose(outs[0].numpy(), f(*args).numpy(), rtol=1e-6)
    ours = iter(input_grads), iter(weight_grads)
    for i, e in enumerate(expected):
        got = next(ours[1] if i in weights else ours[0])
        np.testing.assert_allclose(got.numpy(), e.numpy(), rtol=1e-5, atol=1e-6)  # NOTE: XLA may fuse differently
    return split


def _produced_shapes(jaxpr) -> set:
    out = set()
    for e in jaxpr.eqns:
        out.update(tuple(v.aval.shape) for v in e.outputs)
        for sub in e.params.values():
            if hasattr(sub, "jaxpr") and hasattr(sub, "consts"):
                out |= _produced_shapes(sub)
    return out


def test_an_mlp_split_equals_grad_and_its_input_part_computes_no_weight_gradient():
    args = (_t(4, 3), _t(3, 5), _t(5, 6), _t(6, 2))
    split = _check(_mlp, args, weights=(1, 2, 3))
    inputs_part = split.backward_inputs.jaxpr
    produced = {tuple(v.aval.shape) for e in inputs_part.eqns if e.primitive.name == "matmul" for v in e.outputs}
    assert produced.isdisjoint({(3, 5), (5, 6), (6, 2)})  # NOTE: no dW matmul
    # and none in what XLA compiles of it (jitted, as a schedule calls it): no dot gives a weight-shaped result
    bwd_in = split.backward_inputs_from(split.primals(*args), split.forward(*split.primals(*args)),
                                        [aotjax.tensor(1.0)])
    hlo = aotjax.jit(lambda *a: split.backward_inputs(*a)).lower(*bwd_in).compile().as_text()
    dots = [line for line in hlo.splitlines() if " dot(" in line]
    results = [line.split("=", 1)[1].split(" dot(")[0] for line in dots]  # `%dot.3 = f32[4,5]{1,0} dot(...)`
    assert results and not any(re.search(rf"f(32|64)\[{m},{n}\]", r) for r in results
                               for m, n in ((3, 5), (5, 6), (6, 2))), dots
    assert any(re.search(r"f(32|64)\[4,3\]", r) for r in results), dots  # NOTE: the input's cotangent is there
    assert sum(e.primitive.name == "matmul" for e in split.backward_weights.jaxpr.eqns) == 3
    assert split.backward_inputs.output_names[0] == "cotangent[x]"
    assert split.backward_weights.output_names == ["cotangent[w1]", "cotangent[w2]", "cotangent[w3]"]
    assert all(n.startswith(("residual", "cotangent", "intermediate")) for n in split.backward_weights.input_names)
    assert "backward_inputs:" in str(split) and "intermediates" in repr(split)


def test_a_tied_weight_gets_one_gradient_summed_once():
    def f(x, w, b):
        return ((x @ w).tanh() @ w.t() + b).sin().sum()
    _check(f, (_t(2, 4), _t(4, 4, seed=1), _t(4)), weights=(1, 2))
    x, w = _t(2, 3), _t(3, 3, seed=2)
    split = aotjax.aot(lambda x, a, b: (x @ a @ b).sin().sum()).lower(x, w, w).split_backward(weights=(1, 2))
    _, _, weight_grads = split.run(x, w, w)  # NOTE: one tensor passed twice is one input: one gradient, the sum
    expected = aotjax.grad(lambda x, w: (x @ w @ w).sin().sum(), argnums=1)(x, w)
    assert len(weight_grads) == 1
    np.testing.assert_allclose(weight_grads[0].numpy(), expected.numpy(), rtol=1e-5, atol=1e-6)


def test_a_transformer_block_with_a_dict_of_weights():
    def block(x, p):
        q, k, v = (x @ p["qkv"]).chunk(3, dim=-1)
        a = aotjax.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        h = aotjax.nn.functional.layer_norm(x + a @ p["proj"], (8,), p["g"], p["b"])
        return (h + (h @ p["fc"]).relu() @ p["out"]).square().mean()
    params = {"qkv": _t(8, 24), "proj": _t(8, 8, seed=3), "g": _t(8, seed=4), "b": _t(8, seed=5),
              "fc": _t(8, 16), "out": _t(16, 8)}
    x = _t(2, 5, 8)
    split = aotjax.aot(block).lower(x, params).split_backward(weights=1)
    outs, (dx,), weight_grads = split.run(x, params)
    gx, gp = aotjax.grad(block, argnums=(0, 1))(x, params)
    np.testing.assert_allclose(dx.numpy(), gx.numpy(), rtol=1e-5, atol=1e-5)
    for got, name in zip(weight_grads, split.backward_weights.output_names):
        key = name.split("'")[1]
        np.testing.assert_allclose(got.numpy(), gp[key].numpy(), rtol=1e-5, atol=1e-5)


def _matmuls(jaxpr) -> int:
    """The matrix products a program runs per pass (a loop body's counted once)."""
    n = 0
    for e in jaxpr.eqns:
        n += e.primitive.name == "matmul"
        for sub in e.params.values():
            if hasattr(sub, "jaxpr") and hasattr(sub, "consts"):
                n += _matmuls(sub)
    return n


def test_a_scanned_stack_of_layers():
    def f(x, ws):
        h, _ = aotjax.scan(lambda h, w: ((h @ w).tanh(), None), x, ws)
        return h.square().sum()
    args = (_t(3, 4), _t(5, 4, 4, seed=6))
    split = _check(f, args, weights=1)
    assert (5, 4, 4) not in _produced_shapes(split.backward_inputs.jaxpr)  # NOTE: no stacked weight gradient there
    # the loop is split, not run twice: the weights' loop carries nothing and reads the input part's stacked values
    (loop,) = [e for e in split.backward_weights.jaxpr.eqns if e.primitive.name == "scan"]
    assert loop.params["num_carry"] == 0 and _matmuls(split.backward_weights.jaxpr) == 1
    assert split.backward_weights.input_names[-1].startswith("intermediate[0] mul") and \
        split.backward_weights.input_names[-1].endswith("stacked over 5 iterations")


def test_a_scanned_stack_with_a_weight_every_layer_shares_and_layer_outputs():
    def f(x, ws, u, b):  # u: one weight every layer uses (its cotangent is carried and summed); ys: per-layer outputs
        def layer(h, w):
            h = (h @ w + b).tanh() @ u
            return h, h.sin()
        h, ys = aotjax.scan(layer, x, ws)
        return h.square().sum() + ys.cos().sum()
    args = (_t(3, 4), _t(5, 4, 4, seed=6), _t(4, 4, seed=8), _t(4, seed=9))
    split = _check(f, args, weights=(1, 2, 3))
    lowered = aotjax.aot(f).lower(*args)
    # NOTE: together the two parts run the backward's products once: none is recomputed
    assert _matmuls(split.backward_inputs.jaxpr) + _matmuls(split.backward_weights.jaxpr) == \
        _matmuls(lowered.backward)
    carried = {tuple(v.aval.shape) for e in split.backward_weights.jaxpr.eqns if e.primitive.name == "scan"
               for v in e.params["jaxpr"].jaxpr.invars[e.params["num_consts"]:][:e.params["num_carry"]]}
    assert carried <= {(4, 4), (4,)}  # only the shared weights' summed cotangents, not the layer's input cotangent
    reverse = aotjax.aot(lambda x, ws: aotjax.scan(lambda h, w: ((h @ w).sin(), h), x, ws, reverse=True)[1].sum())
    split = reverse.lower(args[0], args[1]).split_backward(weights=1)
    _check(lambda x, ws: aotjax.scan(lambda h, w: ((h @ w).sin(), h), x, ws, reverse=True)[1].sum(), args[:2], 1)
    assert _matmuls(split.backward_weights.jaxpr) == 1


def test_the_programs_run_under_jit_and_take_a_cotangent():
    f = lambda x, w: (x @ w).sin()  # noqa: E731
    x, w = _t(2, 3), _t(3, 4)
    split = aotjax.aot(f).lower(x, w).split_backward(weights=1)
    ct = _t(2, 4, seed=7)
    outs, (dx,), (dw,) = split.run(x, w, cotangent=ct)
    _, vjp = aotjax.vjp(f, x, w)
    ex, ew = vjp(ct)
    np.testing.assert_allclose(dx.numpy(), ex.numpy(), rtol=1e-6)
    np.testing.assert_allclose(dw.numpy(), ew.numpy(), rtol=1e-6)
    bwd_in = split.backward_inputs_from(split.primals(x, w), split.forward(*split.primals(x, w)), [ct])
    jitted = aotjax.jit(lambda *a: split.backward_inputs(*a))(*bwd_in)
    np.testing.assert_allclose(jitted[0].numpy(), dx.numpy(), rtol=1e-6)
    with pytest.raises(TypeError, match="pass cotangent="):
        split.run(x, w)


def test_bad_weights_are_refused():
    lowered = aotjax.aot(_mlp).lower(_t(4, 3), _t(3, 5), _t(5, 6), _t(6, 2))
    with pytest.raises(TypeError, match="positions of the function's 4 positional"):
        lowered.split_backward(weights=7)
    ints = aotjax.aot(lambda x, i: (x * i).sum()).lower(_t(3), aotjax.tensor([1, 2, 3]))
    with pytest.raises(AotjaxError, match="none of the arguments"):
        ints.split_backward(weights=1)


# -- the pipeline example built on it ------------------------------------------------------------------------------
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "pipeline_zero_bubble.py"


def _example():
    spec = importlib.util.spec_from_file_location("pipeline_zero_bubble", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_zero_bubble_schedule_has_a_third_of_1f1bs_bubble_at_equal_op_times():
    P = _example()
    stages, micro = 4, 8
    unit = {"F": [1.0] * stages, "B": [1.0] * stages, "W": [1.0] * stages, "BW": [2.0] * stages}
    one_f_one_b = P.timeline(P.one_f_one_b(stages, micro), unit)
    zero = P.zero_bubble(stages, micro, unit)
    assert one_f_one_b == (33.0, pytest.approx(3 / 11))  # NOTE: (p - 1) / (m + p - 1)
    assert P.timeline(zero, unit)[1] == pytest.approx(1 / 9)  # NOTE: ZB-H1's (p - 1) (F + B - W) over the step
    for s, order in enumerate(zero):  # NOTE: every op once, and never more forwards in flight than 1F1B
        assert sorted(order) == sorted((k, i) for k in "FBW" for i in range(micro))
        in_flight = 0
        for kind, _ in order:
            in_flight += {"F": 1, "B": -1, "W": 0}[kind]
            assert in_flight <= stages - s


@pytest.mark.slow
def test_the_pipeline_example_runs_and_its_gradients_equal_the_unpipelined_ones():
    proc = subprocess.run([sys.executable, str(EXAMPLE), "--quick"], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "XLA_FLAGS": ""})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1F1B" in proc.stdout and "zero bubble" in proc.stdout and "max |grad" in proc.stdout
