"""A sort-heavy program: aotjax.jit(aotjax.grad(f)) vs jax.jit(jax.grad(f)) on the same math, same run.

    python benchmarks/sort_ops.py [--number 20] [--repeat 7] [--quick]

`f(x)`: per row of a `[rows, n]` matrix, the mean of the top-k values, a soft ranking loss on the sorted row
(`sort` then a cumulative sum weighted by position), and the median; summed. Its gradient flows through `topk`,
`sort`, `cumsum` and `median` (gathers by the sorting indices). Printed: the step time of each, the ratio
(target <= 1.1x) and the largest difference between the two gradients.
"""
from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np
from timing import block_all, interleaved

import aotjax


def ours(x, k: int):
    top = x.topk(k, dim=-1).values.mean(-1)
    ranked = x.sort(dim=-1).values
    weights = aotjax.arange(1, x.shape[-1] + 1, dtype=x.dtype) / x.shape[-1]
    soft = (ranked.cumsum(-1) * weights).mean(-1)
    med = x.median(dim=-1).values
    return (top + soft + med).sum()


def theirs(x, k: int):
    top = jax.lax.top_k(x, k)[0].mean(-1)
    ranked = jnp.sort(x, axis=-1)
    weights = jnp.arange(1, x.shape[-1] + 1, dtype=x.dtype) / x.shape[-1]
    soft = (jnp.cumsum(ranked, -1) * weights).mean(-1)
    n = x.shape[-1]
    med = ranked[..., (n - 1) // 2]  # torch's median: the lower middle value
    return (top + soft + med).sum()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    rows, n, k = (4, 16, 3) if args.quick else (512, 1024, 32)
    x_np = np.random.default_rng(0).normal(size=(rows, n)).astype(np.float32)
    x, jx = aotjax.tensor(x_np), jnp.asarray(x_np)
    g_ours = aotjax.jit(aotjax.grad(lambda x: ours(x, k)))
    g_theirs = jax.jit(jax.grad(lambda x: theirs(x, k)))
    a, b = g_ours(x), g_theirs(jx)
    block_all([a, b])
    times = interleaved({"aotjax": lambda: g_ours(x).block_until_ready(),
                         "jax": lambda: g_theirs(jx).block_until_ready()}, args.number, args.repeat)
    diff = float(np.abs(a.numpy() - np.asarray(b)).max())
    print(f"topk + sort + cumsum + median, grad of [{rows}, {n}] (k={k})")
    print(f"  step  aotjax {times['aotjax'] * 1e3:8.3f} ms   jax {times['jax'] * 1e3:8.3f} ms   "
          f"ratio {times['aotjax'] / times['jax']:.2f}x   max abs diff of the gradients {diff:.2e}")


if __name__ == "__main__":
    main()
