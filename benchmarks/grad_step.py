"""A compiled gradient step: aotjax.jit(aotjax.grad(loss)) vs jax.jit(jax.grad(loss)), same math, same run.

    python benchmarks/grad_step.py [--number 10] [--repeat 7] [--quick]

Two models, each written once with aotjax Tensors and once in `jax.numpy`: (1) a 3-layer MLP with
an MSE loss and (2) a pre-norm transformer block (multi-head causal attention through
`aotjax.nn.functional.scaled_dot_product_attention`, a GELU MLP, two layer norms; batch 8 x seq
128 x width 256). The gradient is taken with respect to a dict of parameters.

Printed per model: the step time (min over `repeat` runs of `number` calls, every gradient leaf
blocked on) and the ratio (target <= 1.05x: the programs are the same math, so only the boundary and
XLA's treatment of the two jaxprs differ); the tracing time of `make_jaxpr(grad(loss))` in both
libraries; lowering (trace + StableHLO) and XLA compile times; and the largest absolute difference
between the two gradients. `--quick` uses tiny sizes (a smoke test of the script).
"""
from __future__ import annotations

import argparse
import math
import time
import timeit

import jax
import jax.numpy as jnp
import numpy as np

import aotjax
import aotjax.nn.functional as F


# -- model 1: a 3-layer MLP -------------------------------------------------------------------------
def mlp_loss(p, x, y):
    h = (x @ p["w1"] + p["b1"]).relu()
    h = (h @ p["w2"] + p["b2"]).tanh()
    out = h @ p["w3"] + p["b3"]
    return ((out - y) ** 2).mean()


def mlp_loss_jnp(p, x, y):
    h = jax.nn.relu(x @ p["w1"] + p["b1"])
    h = jnp.tanh(h @ p["w2"] + p["b2"])
    out = h @ p["w3"] + p["b3"]
    return ((out - y) ** 2).mean()


def mlp_inputs(rng, batch: int, width: int, hidden: int):
    dims = [(width, hidden), (hidden, hidden), (hidden, width)]
    params = {}
    for k, (m, n) in enumerate(dims, start=1):
        params[f"w{k}"] = rng.normal(size=(m, n)).astype(np.float32) / math.sqrt(m)
        params[f"b{k}"] = np.zeros(n, np.float32)
    x = rng.normal(size=(batch, width)).astype(np.float32)
    y = rng.normal(size=(batch, width)).astype(np.float32)
    return params, x, y


# -- model 2: a transformer block -------------------------------------------------------------------
def block(p, x, heads: int):
    """A pre-norm transformer block on x [b, s, w]."""
    b, s, w = x.shape
    d = w // heads

    def split(t):  # [b, s, w] -> [b, heads, s, d]
        return t.reshape(b, s, heads, d).transpose(1, 2)

    h = F.layer_norm(x, (w,), p["ln1_w"], p["ln1_b"])
    q, k, v = split(h @ p["wq"]), split(h @ p["wk"]), split(h @ p["wv"])
    att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    x = x + att.transpose(1, 2).reshape(b, s, w) @ p["wo"]
    h = F.layer_norm(x, (w,), p["ln2_w"], p["ln2_b"])
    return x + (h @ p["w1"] + p["b1"]).gelu() @ p["w2"] + p["b2"]


def block_loss(p, x, y, heads: int):
    return ((block(p, x, heads) - y) ** 2).mean()


def _layer_norm_jnp(x, weight, bias, eps=1e-5):
    centered = x - x.mean(-1, keepdims=True)
    return centered * jax.lax.rsqrt((centered * centered).mean(-1, keepdims=True) + eps) * weight + bias


def block_jnp(p, x, heads: int, flat: bool = False):
    """`block` in `jax.numpy`: the dense layers as 3-D matmuls ([b, s, w] @ [w, n], the obvious way), or with
    `flat` as 2-D ones on [b * s, w] (what XLA handles best on CPU)."""
    b, s, w = x.shape
    d = w // heads

    def dense(t, weight):
        if not flat:
            return t @ weight
        return (t.reshape(b * s, t.shape[-1]) @ weight).reshape(b, s, weight.shape[-1])

    def split(t):
        return t.reshape(b, s, heads, d).transpose(0, 2, 1, 3)

    h = _layer_norm_jnp(x, p["ln1_w"], p["ln1_b"])
    q, k, v = split(dense(h, p["wq"])), split(dense(h, p["wk"])), split(dense(h, p["wv"]))
    scores = (q @ k.transpose(0, 1, 3, 2)) * (1.0 / math.sqrt(d))
    scores = jnp.where(jnp.tril(jnp.ones((s, s), bool)), scores, -jnp.inf)
    att = jax.nn.softmax(scores, axis=-1) @ v
    x = x + dense(att.transpose(0, 2, 1, 3).reshape(b, s, w), p["wo"])
    h = _layer_norm_jnp(x, p["ln2_w"], p["ln2_b"])
    return x + dense(jax.nn.gelu(dense(h, p["w1"]) + p["b1"], approximate=False), p["w2"]) + p["b2"]


def block_loss_jnp(p, x, y, heads: int):
    return ((block_jnp(p, x, heads) - y) ** 2).mean()


def block_inputs(rng, batch: int, seq: int, width: int):
    def dense(m, n):
        return rng.normal(size=(m, n)).astype(np.float32) / math.sqrt(m)

    params = {"ln1_w": np.ones(width, np.float32), "ln1_b": np.zeros(width, np.float32),
              "wq": dense(width, width), "wk": dense(width, width), "wv": dense(width, width),
              "wo": dense(width, width),
              "ln2_w": np.ones(width, np.float32), "ln2_b": np.zeros(width, np.float32),
              "w1": dense(width, 4 * width), "b1": np.zeros(4 * width, np.float32),
              "w2": dense(4 * width, width), "b2": np.zeros(width, np.float32)}
    x = rng.normal(size=(batch, seq, width)).astype(np.float32)
    y = rng.normal(size=(batch, seq, width)).astype(np.float32)
    return params, x, y


# -- measuring --------------------------------------------------------------------------------------
def _block_all(tree) -> None:
    for leaf in jax.tree_util.tree_leaves(tree):
        leaf.block_until_ready()


def _best(fn, repeat: int) -> float:
    """Seconds: the least of `repeat` timed calls of `fn`."""
    best = math.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def bench(name: str, loss, loss_jnp, inputs, number: int, repeat: int) -> None:
    params, x, y = inputs
    ours_args = jax.tree_util.tree_map(lambda a: aotjax.tensor(np.array(a)), (params, x, y))
    jax_args = jax.tree_util.tree_map(jnp.asarray, (params, x, y))
    grad_ours = aotjax.jit(aotjax.grad(loss))
    grad_jax = jax.jit(jax.grad(loss_jnp))

    # tracing: the gradient's jaxpr, in each library
    t_trace_ours = _best(lambda: aotjax.make_jaxpr(aotjax.grad(loss))(*ours_args), max(repeat // 2, 1))
    t_trace_jax = _best(lambda: jax.make_jaxpr(jax.grad(loss_jnp))(*jax_args), max(repeat // 2, 1))

    # lowering (trace + StableHLO; a fresh jitted function each time, least of a few) and XLA
    # compilation (once: a one-shot time, noisier than the steps)
    lowered = {}
    t_lower_ours = _best(lambda: lowered.update(ours=aotjax.jit(aotjax.grad(loss)).lower(*ours_args)),
                         max(repeat // 2, 1))
    t_lower_jax = _best(lambda: lowered.update(jax=jax.jit(jax.grad(loss_jnp)).lower(*jax_args)),
                        max(repeat // 2, 1))
    t_compile_ours = _best(lowered["ours"].compile, 1)
    t_compile_jax = _best(lowered["jax"].compile, 1)

    g_ours, g_jax = grad_ours(*ours_args), grad_jax(*jax_args)  # warm-up: compile, caches
    _block_all(g_ours)
    _block_all(g_jax)
    diff = max(float(np.max(np.abs(np.asarray(g_ours[k]) - np.asarray(g_jax[k])))) for k in g_jax)
    scale = max(float(np.max(np.abs(np.asarray(g_jax[k])))) for k in g_jax)

    def run_ours():
        _block_all(grad_ours(*ours_args))

    def run_jax():
        _block_all(grad_jax(*jax_args))

    times_ours, times_jax = [], []
    for _ in range(repeat):  # interleaved, so that drift in the machine's load hits both alike
        times_ours.append(timeit.timeit(run_ours, number=number) / number)
        times_jax.append(timeit.timeit(run_jax, number=number) / number)
    t_ours, t_jax = min(times_ours), min(times_jax)

    print(f"\n{name}")
    print(f"  step     aotjax {t_ours * 1e3:9.3f} ms   jax {t_jax * 1e3:9.3f} ms   "
          f"ratio {t_ours / t_jax:5.2f}x (target <= 1.05x)")
    print(f"  trace    aotjax {t_trace_ours * 1e3:9.2f} ms   jax {t_trace_jax * 1e3:9.2f} ms   "
          f"ratio {t_trace_ours / t_trace_jax:5.2f}x   (make_jaxpr(grad(loss)))")
    print(f"  lower    aotjax {t_lower_ours * 1e3:9.2f} ms   jax {t_lower_jax * 1e3:9.2f} ms   "
          f"ratio {t_lower_ours / t_lower_jax:5.2f}x   (trace + StableHLO)")
    print(f"  compile  aotjax {t_compile_ours * 1e3:9.2f} ms   jax {t_compile_jax * 1e3:9.2f} ms   "
          f"ratio {t_compile_ours / t_compile_jax:5.2f}x   (XLA)")
    print(f"  gradients: max abs diff {diff:.3g} (largest gradient entry {scale:.3g})")


def main(bench_fn=None, title: str = "compiled gradient step", number: int = 10, repeat: int = 7) -> None:
    """Parse the options and run `bench_fn` (default: this script's `bench`) on both models (the aot
    benchmark reuses this with its own `bench`)."""
    bench_fn = bench_fn or bench
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--number", type=int, default=number, help="calls per timing run")
    parser.add_argument("--repeat", type=int, default=repeat, help="timing runs (the minimum counts)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test of the script")
    args = parser.parse_args()
    if args.quick:
        batch, seq, width, heads, hidden = 2, 8, 16, 2, 32
    else:
        batch, seq, width, heads, hidden = 8, 128, 256, 4, 1024
    rng = np.random.default_rng(0)
    # NOTE: the first lowering and compilation in a process pay jax's one-time setup; pay it here, so
    # that it is charged to neither side.
    jax.jit(lambda a: a + 1).lower(jnp.ones(2)).compile()
    print(f"{title}, float32, {jax.devices()[0].platform}; "
          f"min of {args.repeat} x {args.number} calls, every gradient leaf blocked on")
    bench_fn(f"3-layer MLP: x f32[{batch * seq},{width}], hidden {hidden}, mse loss", mlp_loss, mlp_loss_jnp,
             mlp_inputs(rng, batch * seq, width, hidden), args.number, args.repeat)
    bench_fn(f"transformer block: x f32[{batch},{seq},{width}], {heads} heads, causal, mlp x4, layer norm",
             lambda p, x, y: block_loss(p, x, y, heads), lambda p, x, y: block_loss_jnp(p, x, y, heads),
             block_inputs(rng, batch, seq, width), args.number, args.repeat)


if __name__ == "__main__":
    main()
