"""Scan over layers: a stack of L identical layers as one `aotjax.scan` vs the unrolled Python loop vs JAX's
`jax.lax.scan`, same math, same run, over depths.

    python benchmarks/scan_layers.py [--depths 2,6,12,24,48] [--number 5] [--repeat 5] [--quick]

Two models, each a stack of L identical layers applied to `x` then an MSE loss, the gradient taken with
respect to the layers' weights:

- an MLP block, `h = h + (h @ w1 + b1).tanh() @ w2` (batch 64, width 128, hidden 512);
- a pre-norm transformer block (batch 4 x seq 64 x width 128, 4 heads, causal attention, GELU MLP x4,
  two layer norms), as in `grad_step.py`.

Three contenders per depth:

- **scanned**: `aotjax.aot(aotjax.grad(loss))`, the weights stacked along axis 0 (a dict of `[L, ...]`
  tensors) and the layers run as `aotjax.scan(layer, x, stacked)`;
- **unrolled**: `aotjax.aot(aotjax.grad(loss))` of the Python loop `for w in layers: x = layer(x, w)`
  over a list of per-layer weight dicts (how a model without scan holds its layers: one parameter per
  layer, as a PyTorch `nn.ModuleList`);
- **jax**: `jax.jit(jax.grad(loss_jnp))` of the same math with `jax.lax.scan` over the stacked weights.

Why `aot(grad(loss))`: a training step wants the gradient, and one compiled program computing it is what a
user runs per step (`jax.jit(jax.grad)` is the same shape on JAX's side). `grad(aot(loss))`, which runs
aot's separate forward and backward programs, adds the boundary between them; `aot_step.py` measures
that. Here the separate programs' size is reported instead: the equations of `aot(loss).lower()`'s forward
and backward, counted recursively (a scan counts one, plus its body's), which stay flat in depth for the
scanned stack and grow with it for the unrolled one.

Printed per model and depth: compile time (the first call minus a warm call, on every side: trace,
functionalize, linearize, transpose, XLA compile), step time (the least of `repeat` runs of `number` calls,
interleaved across the contenders, every gradient leaf blocked on) and the ratios to JAX (aim: step <=
1.05x; compile time flat in depth for the scanned stack), the program sizes, and the largest difference of
each gradient from JAX's. Compile times are one-shot, noisier than steps.

(An unrolled loop indexing the stacked weights, `layer(x, stacked[i])`, is not a contender: its backward
accumulates each layer's weight gradient into the whole stack, L scatters of an `[L, ...]` array, so its
step grows as L^2 in both libraries: 4x the scan's step at L=48 for the MLP, with `jax.jit` too.)
`--quick` uses tiny sizes and depths 2 and 4 (a smoke test of the script).
"""
from __future__ import annotations

import argparse
import math

import jax
import jax.numpy as jnp
import numpy as np
from timing import block_all, interleaved, once

import aotjax
import aotjax.nn.functional as F


# -- model 1: an MLP block ----------------------------------------------------------------------------
def mlp_layer(h, p):
    return h + (h @ p["w1"] + p["b1"]).tanh() @ p["w2"]


def mlp_layer_jnp(h, p):
    return h + jnp.tanh(h @ p["w1"] + p["b1"]) @ p["w2"]


def mlp_params(rng, depth: int, width: int, hidden: int) -> dict:
    return {"w1": rng.normal(size=(depth, width, hidden)).astype(np.float32) / math.sqrt(width),
            "b1": np.zeros((depth, hidden), np.float32),
            "w2": rng.normal(size=(depth, hidden, width)).astype(np.float32) / (2 * math.sqrt(hidden * depth))}


# -- model 2: a pre-norm transformer block -----------------------------------------------------------
def block_layer(x, p, heads: int):
    b, s, w = x.shape

    def split(t):  # [b, s, w] -> [b, heads, s, d]
        return t.reshape(b, s, heads, w // heads).transpose(1, 2)

    h = F.layer_norm(x, (w,), p["ln1_w"], p["ln1_b"])
    att = F.scaled_dot_product_attention(split(h @ p["wq"]), split(h @ p["wk"]), split(h @ p["wv"]), is_causal=True)
    x = x + att.transpose(1, 2).reshape(b, s, w) @ p["wo"]
    h = F.layer_norm(x, (w,), p["ln2_w"], p["ln2_b"])
    return x + (h @ p["w1"] + p["b1"]).gelu() @ p["w2"]


def _layer_norm_jnp(x, weight, bias, eps=1e-5):
    centered = x - x.mean(-1, keepdims=True)
    return centered * jax.lax.rsqrt((centered * centered).mean(-1, keepdims=True) + eps) * weight + bias


def block_layer_jnp(x, p, heads: int):
    b, s, w = x.shape
    d = w // heads

    def split(t):
        return t.reshape(b, s, heads, d).transpose(0, 2, 1, 3)

    h = _layer_norm_jnp(x, p["ln1_w"], p["ln1_b"])
    q, k, v = split(h @ p["wq"]), split(h @ p["wk"]), split(h @ p["wv"])
    scores = (q @ k.transpose(0, 1, 3, 2)) * (1.0 / math.sqrt(d))
    scores = jnp.where(jnp.tril(jnp.ones((s, s), bool)), scores, -jnp.inf)
    att = jax.nn.softmax(scores, axis=-1) @ v
    x = x + att.transpose(0, 2, 1, 3).reshape(b, s, w) @ p["wo"]
    h = _layer_norm_jnp(x, p["ln2_w"], p["ln2_b"])
    return x + jax.nn.gelu(h @ p["w1"] + p["b1"], approximate=False) @ p["w2"]


def block_params(rng, depth: int, width: int) -> dict:
    def dense(m, n, scale=1.0):
        return rng.normal(size=(depth, m, n)).astype(np.float32) * scale / math.sqrt(m)

    out_scale = 1 / math.sqrt(2 * depth)  # NOTE: keeps the residual stream's size flat in depth
    return {"ln1_w": np.ones((depth, width), np.float32), "ln1_b": np.zeros((depth, width), np.float32),
            "wq": dense(width, width), "wk": dense(width, width), "wv": dense(width, width),
            "wo": dense(width, width, out_scale),
            "ln2_w": np.ones((depth, width), np.float32), "ln2_b": np.zeros((depth, width), np.float32),
            "w1": dense(width, 4 * width), "b1": np.zeros((depth, 4 * width), np.float32),
            "w2": dense(4 * width, width, out_scale)}


# -- the three losses of one layer function ------------------------------------------------------------
def scanned_loss(layer):
    """The stack as one scan over the stacked weights (a dict of `[L, ...]` tensors)."""
    def loss(stacked, x, y):
        h, _ = aotjax.scan(lambda h, p: (layer(h, p), None), x, stacked)
        return ((h - y) ** 2).mean()
    return loss


def unrolled_loss(layer):
    """The stack as a Python loop over a list of per-layer weight dicts."""
    def loss(layers, x, y):
        for p in layers:
            x = layer(x, p)
        return ((x - y) ** 2).mean()
    return loss


def jax_loss(layer_jnp):
    """The same math in JAX: `jax.lax.scan` over the stacked weights."""
    def loss(stacked, x, y):
        h, _ = jax.lax.scan(lambda h, p: (layer_jnp(h, p), None), x, stacked)
        return ((h - y) ** 2).mean()
    return loss


# -- measuring --------------------------------------------------------------------------------------
def _compile_time(step, args) -> float:
    """The first call of `step` minus a warm call: tracing, transforming and compiling."""
    first = once(lambda: block_all(step(*args)))
    return first - min(once(lambda: block_all(step(*args))) for _ in range(3))


def count_eqns(jaxpr) -> int:
    """Equations of a program, counted recursively: a scan counts one, plus the equations of its body."""
    jaxpr = getattr(jaxpr, "jaxpr", jaxpr)
    n = 0
    for eqn in jaxpr.eqns:
        n += 1
        for v in eqn.params.values():
            for sub in v if isinstance(v, (tuple, list)) else (v,):
                if hasattr(sub, "eqns"):
                    n += count_eqns(sub)
    return n


def _program_sizes(loss, args) -> str:
    lowered = aotjax.aot(loss).lower(*args)
    return f"{count_eqns(lowered.forward):4}/{count_eqns(lowered.backward):<4}"


def _max_diff(g, g_ref) -> float:
    return max(float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
               for a, b in zip(jax.tree_util.tree_leaves(g), jax.tree_util.tree_leaves(g_ref), strict=True))


def _unstack(stacked: dict, depth: int) -> list[dict]:
    return [{k: np.array(v[i]) for k, v in stacked.items()} for i in range(depth)]


def _stack(layers: list[dict]) -> dict:
    return {k: np.stack([np.asarray(p[k]) for p in layers]) for k in layers[0]}


# -- the benchmark ----------------------------------------------------------------------------------
def bench(name: str, layer, layer_jnp, make_params, x, y, depths, number: int, repeat: int) -> None:
    loss_scan, loss_unrolled, loss_jnp = scanned_loss(layer), unrolled_loss(layer), jax_loss(layer_jnp)
    print(f"\n{name}")
    print("  depth | compile (first call - warm call)        | step                                      | "
          "ratio to jax    | eqns fw/bw of aot(loss) | max |grad - jax's|")
    print("        | scanned   unrolled  jax                  | scanned    unrolled   jax                 | "
          "scan   unrolled | scanned    unrolled     | scanned  unrolled")
    rng = np.random.default_rng(0)
    for depth in depths:
        stacked = make_params(rng, depth)
        tensor = lambda a: aotjax.tensor(np.array(a))  # noqa: E731
        scan_args = (jax.tree_util.tree_map(tensor, stacked), tensor(x), tensor(y))
        unrolled_args = (jax.tree_util.tree_map(tensor, _unstack(stacked, depth)), tensor(x), tensor(y))
        jax_args = jax.tree_util.tree_map(jnp.asarray, (stacked, x, y))
        steps = {"scanned": (aotjax.aot(aotjax.grad(loss_scan)), scan_args),
                 "unrolled": (aotjax.aot(aotjax.grad(loss_unrolled)), unrolled_args),
                 "jax": (jax.jit(jax.grad(loss_jnp)), jax_args)}
        compile_s = {k: _compile_time(fn, args) for k, (fn, args) in steps.items()}
        g_ref = steps["jax"][0](*jax_args)
        diff_scan = _max_diff(steps["scanned"][0](*scan_args), g_ref)
        diff_unrolled = _max_diff(_stack(steps["unrolled"][0](*unrolled_args)), g_ref)
        t = interleaved({k: (lambda fn=fn, args=args: block_all(fn(*args))) for k, (fn, args) in steps.items()},
                         number, repeat)
        sizes = _program_sizes(loss_scan, scan_args), _program_sizes(loss_unrolled, unrolled_args)
        print(f"  {depth:5} | {compile_s['scanned']:6.3f} s  {compile_s['unrolled']:6.3f} s  {compile_s['jax']:6.3f} s"
              f"           | {t['scanned'] * 1e3:7.3f} ms {t['unrolled'] * 1e3:7.3f} ms {t['jax'] * 1e3:7.3f} ms"
              f"          | {t['scanned'] / t['jax']:5.2f}x {t['unrolled'] / t['jax']:5.2f}x   | {sizes[0]}  "
              f"{sizes[1]:11}  | {diff_scan:7.2g}  {diff_unrolled:7.2g}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--depths", default="2,6,12,24,48", help="comma-separated numbers of layers")
    parser.add_argument("--number", type=int, default=5, help="calls per timing run")
    parser.add_argument("--repeat", type=int, default=5, help="timing runs (the minimum counts)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, depths 2 and 4: a smoke test")
    args = parser.parse_args()
    if args.quick:
        depths, (batch, width, hidden), (b, seq, w, heads) = [2, 4], (4, 8, 16), (2, 4, 8, 2)
    else:
        depths, (batch, width, hidden), (b, seq, w, heads) = [int(d) for d in args.depths.split(",")], \
            (64, 128, 512), (4, 64, 128, 4)
    rng = np.random.default_rng(0)
    # NOTE: the first lowering and compilation in a process pay jax's one-time setup; pay it here, so
    # that it is charged to no contender.
    jax.jit(lambda a: a + 1).lower(jnp.ones(2)).compile()
    print(f"scan over layers: aot(grad(loss)) scanned vs unrolled vs jax.jit(jax.grad) with jax.lax.scan, float32, "
          f"{jax.devices()[0].platform}; steps: min of {args.repeat} x {args.number} calls")
    bench(f"MLP block h + tanh(h @ w1 + b1) @ w2: h f32[{batch},{width}], hidden {hidden}, mse loss",
          mlp_layer, mlp_layer_jnp, lambda r, d: mlp_params(r, d, width, hidden),
          rng.normal(size=(batch, width)).astype(np.float32), rng.normal(size=(batch, width)).astype(np.float32),
          depths, args.number, args.repeat)
    bench(f"pre-norm transformer block: x f32[{b},{seq},{w}], {heads} heads, causal, mlp x4, mse loss",
          lambda x, p: block_layer(x, p, heads), lambda x, p: block_layer_jnp(x, p, heads),
          lambda r, d: block_params(r, d, w),
          rng.normal(size=(b, seq, w)).astype(np.float32), rng.normal(size=(b, seq, w)).astype(np.float32),
          depths, args.number, args.repeat)


if __name__ == "__main__":
    main()
