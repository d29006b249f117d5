"""Per-call overhead of the jit boundary: aotjax.jit vs jax.jit of the same pure math, same run.

    python benchmarks/boundary_overhead.py [--number 2000] [--repeat 7] [--size 16] [--profile]

The function takes 10 small tensors and updates two of them in place (an optimizer-like step); the
JAX side is `jax.jit` of the equivalent pure function that returns the updated values (donating
them, as aotjax does), the caller rebinding its variables. Both results are blocked on, so each
call is dispatched and finished; the kernels are tiny, so this measures the boundary: flattening,
guards, cache lookup, write-back and output wrapping. The target is a ratio of at most 1.5x.
`--no-block` times dispatch alone (both sides asynchronous).
"""
from __future__ import annotations

import argparse
import cProfile
import timeit

import jax
import jax.numpy as jnp
import numpy as np

import aotjax


def step(w1, w2, g1, g2, a, b, c, d, e, f):
    w1.sub_(0.1 * g1)
    w2.sub_(0.1 * g2)
    return (a + b) * (c - d) + e * f


def step_jnp(w1, w2, g1, g2, a, b, c, d, e, f):
    return w1 - 0.1 * g1, w2 - 0.1 * g2, (a + b) * (c - d) + e * f


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--number", type=int, default=2000)
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--size", type=int, default=16)
    p.add_argument("--profile", action="store_true", help="print a cProfile of the aotjax side")
    p.add_argument("--no-block", action="store_true", help="do not wait for the results")
    args = p.parse_args()

    rng = np.random.default_rng(0)
    arrays = [rng.normal(size=(args.size, args.size)).astype(np.float32) for _ in range(10)]
    tensors = [aotjax.tensor(np.array(a)) for a in arrays]
    state = [jnp.asarray(a) for a in arrays]

    jstep = aotjax.jit(step)
    jax_step = jax.jit(step_jnp, donate_argnums=(0, 1))

    def run_aotjax():
        out = jstep(*tensors)
        if not args.no_block:
            out.block_until_ready()

    def run_jax():
        state[0], state[1], out = jax_step(*state)
        if not args.no_block:
            out.block_until_ready()

    for fn in (run_aotjax, run_jax):
        fn()
        fn()
    if args.profile:
        cProfile.runctx("for _ in range(2000): run_aotjax()", globals(), locals(), sort="cumulative")
        return
    t_ours = min(timeit.repeat(run_aotjax, number=args.number, repeat=args.repeat)) / args.number * 1e6
    t_jax = min(timeit.repeat(run_jax, number=args.number, repeat=args.repeat)) / args.number * 1e6
    print(f"jit boundary, 10 inputs f32[{args.size},{args.size}], 2 written in place; "
          f"{jax.devices()[0].platform}; min of {args.repeat} x {args.number} calls"
          f"{'; dispatch only' if args.no_block else ''}")
    print(f"aotjax.jit   {t_ours:8.1f} µs/call")
    print(f"jax.jit      {t_jax:8.1f} µs/call")
    print(f"ratio        {t_ours / t_jax:8.2f}x (target <= 1.5x)")


if __name__ == "__main__":
    main()
