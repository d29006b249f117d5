"""vmap: per-example gradients of an MLP and the Jacobian of a 256 -> 256 function, aotjax against JAX on the same
math, in one run.

    python benchmarks/vmap.py [--batch 64] [--width 256] [--number 10] [--repeat 5] [--quick]

Two workloads, each compiled whole on both sides:

- **per-example gradients**: `aotjax.jit(aotjax.vmap(aotjax.grad(loss), in_axes=(None, 0, 0)))` of a two-layer MLP's
  squared error on one example, against `jax.jit(jax.vmap(jax.grad(loss), in_axes=(None, 0, 0)))`;
- **jacrev**: `aotjax.jit(aotjax.jacrev(f))` of `f(x) = tanh(w2 @ tanh(w1 @ x + b))` with x of size `width`, against
  `jax.jit(jax.jacrev(f))`.

Printed per workload: the tracing and compile time (the first call minus a warm call: trace, functionalize,
differentiate, batch, XLA compile), the compiled step (the least of `repeat` runs of `number` calls, interleaved
across the contenders, every result blocked on), the ratios to JAX (aims: step <= 1.05x, tracing <= 2x) and the
largest difference from JAX's result. `--quick` uses tiny sizes (a smoke test of the script).
"""
from __future__ import annotations

import argparse
import math

import jax
import jax.numpy as jnp
import numpy as np
from timing import block_all, interleaved, once

import aotjax


def mlp_loss(p, x, y):
    h = aotjax.tanh(x @ p["w1"] + p["b1"])
    return ((h @ p["w2"] - y) ** 2).sum()


def mlp_loss_jnp(p, x, y):
    h = jnp.tanh(x @ p["w1"] + p["b1"])
    return ((h @ p["w2"] - y) ** 2).sum()


def layered(w1, w2, b):
    return lambda x: aotjax.tanh(w2 @ aotjax.tanh(w1 @ x + b))


def layered_jnp(w1, w2, b):
    return lambda x: jnp.tanh(w2 @ jnp.tanh(w1 @ x + b))


def _compile_time(step, args) -> float:
    """The first call of `step` minus a warm call: tracing, transforming and compiling."""
    first = once(lambda: block_all(step(*args)))
    return first - min(once(lambda: block_all(step(*args))) for _ in range(3))


def _max_diff(a, b) -> float:
    return max(float(np.max(np.abs(np.asarray(x) - np.asarray(y))))
               for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True))


def report(name: str, ours, theirs, our_args, their_args, number: int, repeat: int) -> None:
    compile_ours, compile_jax = _compile_time(ours, our_args), _compile_time(theirs, their_args)
    diff = _max_diff(ours(*our_args), theirs(*their_args))
    t = interleaved({"aotjax": lambda: block_all(ours(*our_args)), "jax": lambda: block_all(theirs(*their_args))},
                    number, repeat)
    print(f"  {name:38} | {compile_ours:6.3f} s {compile_jax:6.3f} s {compile_ours / compile_jax:5.2f}x | "
          f"{t['aotjax'] * 1e3:8.3f} ms {t['jax'] * 1e3:8.3f} ms {t['aotjax'] / t['jax']:5.2f}x | {diff:8.2g}",
          flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=64, help="examples for the per-example gradients")
    parser.add_argument("--width", type=int, default=256, help="the MLP's width and the Jacobian's size")
    parser.add_argument("--number", type=int, default=10, help="calls per timing run")
    parser.add_argument("--repeat", type=int, default=5, help="timing runs (the minimum counts)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test")
    args = parser.parse_args()
    batch, width = (4, 8) if args.quick else (args.batch, args.width)
    hidden = 2 * width
    rng = np.random.default_rng(0)
    jax.jit(lambda a: a + 1).lower(jnp.ones(2)).compile()  # NOTE: jax's one-time setup, charged to no contender
    print(f"vmap: aotjax vs jax on the same math, float32, {jax.devices()[0].platform}; steps: min of {args.repeat} x "
          f"{args.number} calls")
    print(f"  {'workload':38} | compile (first - warm) ratio    | step                         ratio | max |diff|")

    params = {"w1": rng.normal(size=(width, hidden)).astype(np.float32) / math.sqrt(width),
              "b1": np.zeros(hidden, np.float32),
              "w2": rng.normal(size=(hidden, width)).astype(np.float32) / math.sqrt(hidden)}
    xs = rng.normal(size=(batch, width)).astype(np.float32)
    ys = rng.normal(size=(batch, width)).astype(np.float32)
    ours = aotjax.jit(aotjax.vmap(aotjax.grad(mlp_loss), in_axes=(None, 0, 0)))
    theirs = jax.jit(jax.vmap(jax.grad(mlp_loss_jnp), in_axes=(None, 0, 0)))
    report(f"per-example grads, MLP {width}-{hidden}-{width} x{batch}", ours, theirs,
           (jax.tree_util.tree_map(aotjax.tensor, params), aotjax.tensor(xs), aotjax.tensor(ys)),
           (params, xs, ys), args.number, args.repeat)

    w1 = rng.normal(size=(width, width)).astype(np.float32) / math.sqrt(width)
    w2 = rng.normal(size=(width, width)).astype(np.float32) / math.sqrt(width)
    b = np.zeros(width, np.float32)
    x = rng.normal(size=width).astype(np.float32)
    T = aotjax.tensor
    ours = aotjax.jit(lambda w1, w2, b, x: aotjax.jacrev(layered(w1, w2, b))(x))
    theirs = jax.jit(lambda w1, w2, b, x: jax.jacrev(layered_jnp(w1, w2, b))(x))
    report(f"jacrev {width} -> {width}", ours, theirs, (T(w1), T(w2), T(b), T(x)), (w1, w2, b, x),
           args.number, args.repeat)
    print("  (ratio: aotjax / jax)")


if __name__ == "__main__":
    main()
