"""Scan over layers: a stack of L identical layers whose weights are stacked along axis 0, run as
`aotjax.scan(layer, h, stacked_weights)`.

It is the Python loop over the layers (outputs, gradients, under every transform), and it compiles as one
layer: `aot`'s forward and backward programs are as large for 2 layers as for 48 (a scan over the stacked
weights, its body one layer), where the unrolled loop's grow with the depth. No compile is timed here:
`benchmarks/scan_layers.py` times them."""
from __future__ import annotations

import math

import jax
import numpy as np
import pytest

import aotjax
import aotjax.nn.functional as F
from aotjax.partition import default_partition, min_cut_partition
from tests.helpers import (
    FD_ATOL,
    FD_RTOL,
    FLOAT,
    assert_trees_close,
    by_mode,
    central_difference,
    check_call_agrees,
    grad_ways,
)

RTOL, ATOL = by_mode((1e-10, 1e-10), (2e-5, 2e-5))  # the same math; compiled programs may fuse differently


# -- two layers: an MLP block and a pre-norm transformer block ------------------------------------------
def mlp_layer(h, p):
    """PyTorch style: the block's output added in place to the residual stream (the body's own carry)."""
    h += (h @ p["w1"] + p["b1"]).tanh() @ p["w2"]
    return h


def mlp_weights(rng, depth: int, width: int = 8, hidden: int = 16) -> dict:
    return {"w1": rng.normal(size=(depth, width, hidden)) / math.sqrt(width),
            "b1": 0.1 * rng.normal(size=(depth, hidden)),
            "w2": rng.normal(size=(depth, hidden, width)) / math.sqrt(hidden)}


HEADS = 2


def transformer_layer(x, p):
    b, s, w = x.shape

    def split(t):  # [b, s, w] -> [b, heads, s, w / heads]
        return t.reshape(b, s, HEADS, w // HEADS).transpose(1, 2)

    h = F.layer_norm(x, (w,), p["ln1_w"], p["ln1_b"])
    att = F.scaled_dot_product_attention(split(h @ p["wq"]), split(h @ p["wk"]), split(h @ p["wv"]), is_causal=True)
    x = x + att.transpose(1, 2).reshape(b, s, w) @ p["wo"]
    h = F.layer_norm(x, (w,), p["ln2_w"], p["ln2_b"])
    return x + (h @ p["w1"] + p["b1"]).gelu() @ p["w2"]


def transformer_weights(rng, depth: int, width: int = 8) -> dict:
    def dense(m, n):
        return rng.normal(size=(depth, m, n)) / math.sqrt(m)

    def near(value, n):
        return value + 0.1 * rng.normal(size=(depth, n))

    return {"ln1_w": near(1, width), "ln1_b": near(0, width), "wq": dense(width, width), "wk": dense(width, width),
            "wv": dense(width, width), "wo": dense(width, width), "ln2_w": near(1, width), "ln2_b": near(0, width),
            "w1": dense(width, 4 * width), "b1": near(0, 4 * width), "w2": dense(4 * width, width)}


MODELS = {"mlp": (mlp_layer, mlp_weights, (4, 8)), "transformer": (transformer_layer, transformer_weights, (2, 4, 8))}


def scanned(layer):
    def stack(weights, x):
        h, _ = aotjax.scan(lambda h, p: (layer(h, p), None), x, weights)
        return h
    return stack


def unrolled(layer):
    def stack(weights, x):
        h = x.clone()  # NOTE: the scan's carry is its own; the loop's first in-place add must not write x
        for i in range(depth_of(weights)):
            h = layer(h, {k: w[i] for k, w in weights.items()})
        return h
    return stack


def depth_of(weights: dict) -> int:
    return next(iter(weights.values())).shape[0]


def as_loss(stack):
    def loss(weights, x):
        return (stack(weights, x) ** 2).mean()
    return loss


def inputs(model: str, depth: int, seed: int = 0):
    _, weights, x_shape = MODELS[model]
    rng = np.random.default_rng(seed)
    tensor = lambda a: aotjax.tensor(np.asarray(a, FLOAT))  # noqa: E731
    return jax.tree_util.tree_map(tensor, weights(rng, depth)), tensor(rng.normal(size=x_shape))


# -- the scanned stack is the Python loop --------------------------------------------------------------
FORWARD_MODES = {"eager": lambda f: f, "functionalize": aotjax.functionalize, "jit": aotjax.jit, "aot": aotjax.aot}


@pytest.mark.parametrize("mode", FORWARD_MODES)
@pytest.mark.parametrize("model", MODELS)
def test_outputs_are_the_unrolled_loops(model, mode):
    layer = MODELS[model][0]
    make = lambda: (inputs(model, depth=3), [])  # noqa: E731
    # outputs, the arguments afterwards (x is never written), and what writing the output touches
    check_call_agrees(unrolled(layer), FORWARD_MODES[mode](scanned(layer)), make, f"{model} under {mode}",
                      rtol=RTOL, atol=ATOL)


# NOTE: every way for the MLP; the transformer's compiles cost seconds each, so the ways that differ most
GRAD_WAYS = {"mlp": None, "transformer": ("grad", "jit(grad)", "grad(aot, min-cut)", "aot(grad)")}


@pytest.mark.parametrize("model", MODELS)
def test_gradients_are_the_unrolled_loops(model):
    layer = MODELS[model][0]
    expected = aotjax.grad(as_loss(unrolled(layer)), argnums=(0, 1))(*inputs(model, depth=3))
    ways = grad_ways(as_loss(scanned(layer)), argnums=(0, 1))
    for how in GRAD_WAYS[model] or ways:
        run = ways[how]
        _, got = run(*inputs(model, depth=3))
        assert_trees_close(expected, got, RTOL, ATOL, f"{model}: {how}")


@pytest.mark.parametrize("model", MODELS)
def test_jvp_is_the_unrolled_loops(model):
    layer = MODELS[model][0]
    primals = inputs(model, depth=3)
    tangents = inputs(model, depth=3, seed=1)
    expected = aotjax.jvp(as_loss(unrolled(layer)), primals, tangents)
    got = aotjax.jvp(as_loss(scanned(layer)), primals, tangents)
    assert_trees_close(expected, got, RTOL, ATOL, f"{model}: jvp")


def test_gradient_matches_finite_differences():
    loss = as_loss(scanned(mlp_layer))
    weights, x = inputs("mlp", depth=4)
    g_weights, g_x = aotjax.grad(loss, argnums=(0, 1))(weights, x)
    rng = np.random.default_rng(2)
    leaves, tree = jax.tree_util.tree_flatten((weights, x))
    directions = [rng.normal(size=leaf.shape).astype(FLOAT) for leaf in leaves]

    def loss_at(*arrays):
        return loss(*jax.tree_util.tree_unflatten(tree, [aotjax.tensor(a) for a in arrays]))

    numeric = central_difference(loss_at, [np.asarray(leaf) for leaf in leaves], directions)
    analytic = sum(float(np.vdot(np.asarray(g, np.float64), d))
                   for g, d in zip(jax.tree_util.tree_leaves((g_weights, g_x)), directions))
    np.testing.assert_allclose(analytic, numeric, rtol=FD_RTOL, atol=FD_ATOL)


# -- the programs do not grow with depth ---------------------------------------------------------------
def count_eqns(jaxpr, recursive: bool) -> int:
    """The equations of a program: its own (`recursive=False`), or with those of every sub-program (a scan's
    body) counted too."""
    n = 0
    for eqn in getattr(jaxpr, "jaxpr", jaxpr).eqns:
        n += 1
        if recursive:
            for v in eqn.params.values():
                n += sum(count_eqns(sub, True) for sub in (v if isinstance(v, (tuple, list)) else (v,))
                         if hasattr(sub, "eqns"))
    return n


def program_sizes(lowered) -> dict:
    return {(program, recursive): count_eqns(getattr(lowered, program), recursive)
            for program in ("forward", "backward") for recursive in (False, True)}


PARTITIONS = {"default": default_partition, "min-cut": min_cut_partition()}


@pytest.mark.parametrize("partition", PARTITIONS)
@pytest.mark.parametrize("model", MODELS)
def test_aot_programs_are_as_large_for_2_layers_as_for_48(model, partition):
    loss = as_loss(scanned(MODELS[model][0]))
    shallow = aotjax.aot(loss, partition=PARTITIONS[partition]).lower(*inputs(model, depth=2))
    deep = aotjax.aot(loss, partition=PARTITIONS[partition]).lower(*inputs(model, depth=48))
    # the same equations, top-level and counting the loop bodies, in the forward and the backward
    assert program_sizes(shallow) == program_sizes(deep)
    assert len(shallow.residuals) == len(deep.residuals)
    assert "scan" in {e.primitive.name for e in deep.forward.eqns} & {e.primitive.name for e in deep.backward.eqns}


def test_unrolled_programs_grow_with_depth():
    loss_unrolled, loss_scanned = as_loss(unrolled(mlp_layer)), as_loss(scanned(mlp_layer))
    sizes = [program_sizes(aotjax.aot(loss_unrolled).lower(*inputs("mlp", depth))) for depth in (2, 3, 4)]
    scan_sizes = program_sizes(aotjax.aot(loss_scanned).lower(*inputs("mlp", depth=4)))
    for key in sizes[0]:
        per_layer = sizes[1][key] - sizes[0][key]
        assert per_layer > 0 and sizes[2][key] - sizes[1][key] == per_layer, (key, [s[key] for s in sizes])
        assert scan_sizes[key] < sizes[2][key], key


@pytest.mark.parametrize("model", MODELS)
def test_residuals_are_stacked_activations_never_weights(model):
    """The forward saves each layer's activations, stacked over the layers: what the unrolled loop saves (less
    what every layer computes alike, as the causal mask: computed once); a weight is read by the backward from
    the caller's tensor, never copied (the unrolled loop saves each layer's slice of it)."""
    weights, x = inputs(model, depth=3)
    weight_shapes = {tuple(w.shape) for w in weights.values()} | {tuple(w.shape[1:]) for w in weights.values()}

    def computed(lowered, of_weight_shape):
        return [r for r, i in zip(lowered.residuals, lowered.saved_inputs)
                if i is None and (tuple(r.aval.shape) in weight_shapes) == of_weight_shape]

    scan_lowered = aotjax.aot(as_loss(scanned(MODELS[model][0]))).lower(weights, x)
    loop_lowered = aotjax.aot(as_loss(unrolled(MODELS[model][0]))).lower(weights, x)
    assert not computed(scan_lowered, of_weight_shape=True), [str(r) for r in scan_lowered.residuals]
    scan_bytes, loop_bytes = (sum(r.nbytes for r in computed(lowered, of_weight_shape=False))
                              for lowered in (scan_lowered, loop_lowered))
    assert scan_bytes == loop_bytes if model == "mlp" else scan_bytes <= loop_bytes


def test_what_every_layer_computes_alike_is_saved_once():
    """The causal mask, computed from no operand, is computed once outside the loop and saved once: not
    stacked over the layers."""
    lowered = aotjax.aot(as_loss(scanned(transformer_layer))).lower(*inputs("transformer", depth=48))
    masks = [r for r in lowered.residuals if r.aval.dtype == np.bool_]
    assert [tuple(r.aval.shape) for r in masks] == [(4, 4)], [str(r) for r in lowered.residuals]


# -- layers with state -------------------------------------------------------------------------------
def test_a_buffer_the_layers_update_is_written_with_every_layers_effect():
    """A layer updating a captured buffer in place (a running statistic, a call counter) writes it once per
    layer, as the loop does, eagerly and under jit, grad and aot."""
    def make():
        weights, x = inputs("mlp", depth=3)
        return (weights, x, aotjax.zeros(8, dtype=FLOAT), aotjax.zeros((), dtype=aotjax.int32)), []

    def with_buffers(stack):
        def loss(weights, x, stats, calls):
            def layer(h, p):
                stats.mul_(0.5).add_(h.mean(0).detach())
                calls.add_(1)
                return mlp_layer(h, p)
            return (stack(layer)(weights, x) ** 2).mean()
        return loss

    loss_unrolled, loss_scanned = with_buffers(unrolled), with_buffers(scanned)
    for how, run in {"eager": loss_scanned, "jit": aotjax.jit(loss_scanned), "aot": aotjax.aot(loss_scanned),
                     "grad": aotjax.grad(loss_scanned), "aot(grad)": aotjax.aot(aotjax.grad(loss_scanned)),
                     "grad(aot)": aotjax.grad(aotjax.aot(loss_scanned))}.items():
        expected = aotjax.grad(loss_unrolled) if "grad" in how else loss_unrolled
        check_call_agrees(expected, run, make, how, rtol=RTOL, atol=ATOL)
