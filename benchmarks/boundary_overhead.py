"""Per-call overhead of the jit boundary: aotjax.jit vs jax.jit of the same pure math, same run.

    python benchmarks/boundary_overhead.py [--args 1,10,100] [--number 2000] [--repeat 7] [--size 4]
                                           [--cpu] [--profile N] [--no-block]

For each argument count N the function takes N tensors f32[size] and updates the first two (the first, for
N = 1) in place (an optimizer-like step), returning one new value read from all of them; the JAX side is
`jax.jit` of the equivalent pure function returning the updated values (donating them, as aotjax does), the
caller rebinding its variables. Both results are blocked on, so each call is dispatched and finished; the
kernels are tiny, so this measures the boundary: flattening, guards, cache lookup, write-back and output
wrapping. The targets (issue 15) are ratios of at most 1.2x / 1.2x / 1.3x for 1 / 10 / 100 arguments. The
runs of the two sides are interleaved, so that drift in the machine's load hits both alike.
`--no-block` times dispatch alone (both sides asynchronous); `--cpu` times the process's CPU time instead of
the wall clock (steadier on a shared machine); `--profile N` prints a cProfile of the aotjax side with N
arguments instead.
"""
from __future__ import annotations

import argparse
import cProfile
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import aotjax

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import interleaved  # noqa: E402

TARGETS = {1: 1.2, 10: 1.2, 100: 1.3}


def n_written(n: int) -> int:
    return min(2, n)


def make_step(n: int):
    """aotjax's step on `n` tensors (the first `n_written(n)` written in place) and JAX's pure equivalent."""
    k = n_written(n)

    def step(*xs):
        for w in xs[:k]:
            w.mul_(0.99)
        out = xs[0] * 2.0
        for x in xs[1:]:
            out = out + x
        return out

    def step_jnp(*xs):
        new = [w * 0.99 for w in xs[:k]]
        out = new[0] * 2.0
        for x in [*new[1:], *xs[k:]]:
            out = out + x
        return (*new, out)

    return step, step_jnp


def runners(n: int, size: int, block: bool):
    rng = np.random.default_rng(0)
    arrays = [rng.normal(size=(size,)).astype(np.float32) for _ in range(n)]
    tensors = [aotjax.tensor(np.array(a)) for a in arrays]
    state = [jnp.asarray(a) for a in arrays]
    k = n_written(n)
    step, step_jnp = make_step(n)
    jstep = aotjax.jit(step)
    jax_step = jax.jit(step_jnp, donate_argnums=tuple(range(k)))

    def run_aotjax():
        out = jstep(*tensors)
        if block:
            out.block_until_ready()

    def run_jax():
        *state[:k], out = jax_step(*state)
        if block:
            out.block_until_ready()

    for fn in (run_aotjax, run_jax):
        fn()
        fn()
    return run_aotjax, run_jax


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--args", default="1,10,100", help="comma-separated argument counts")
    p.add_argument("--number", type=int, default=2000)
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--size", type=int, default=4)
    p.add_argument("--profile", type=int, metavar="N", help="print a cProfile of the aotjax side with N arguments")
    p.add_argument("--no-block", action="store_true", help="do not wait for the results")
    p.add_argument("--cpu", action="store_true", help="time CPU time, not the wall clock")
    args = p.parse_args()

    if args.profile:
        run_aotjax, _ = runners(args.profile, args.size, not args.no_block)
        cProfile.runctx(f"for _ in range({args.number}): run_aotjax()", globals(), locals(), sort="tottime")
        return
    print(f"jit boundary, N inputs f32[{args.size}], 2 written in place (1 when N = 1); "
          f"{jax.devices()[0].platform}; min of {args.repeat} x {args.number} calls"
          f"{'; dispatch only' if args.no_block else ''}{'; CPU time' if args.cpu else ''}\n")
    print(f"{'args':>5}{'aotjax.jit µs':>15}{'jax.jit µs':>12}{'ratio':>8}{'target':>8}")
    for n in (int(s) for s in args.args.split(",")):
        run_aotjax, run_jax = runners(n, args.size, not args.no_block)
        times = interleaved({"aotjax": run_aotjax, "jax": run_jax}, args.number, args.repeat,
                            time.process_time if args.cpu else time.perf_counter)
        t_ours, t_jax = times["aotjax"] * 1e6, times["jax"] * 1e6
        target = f"{TARGETS[n]:.1f}x" if n in TARGETS else ""
        print(f"{n:>5}{t_ours:>15.1f}{t_jax:>12.1f}{t_ours / t_jax:>7.2f}x{target:>8}")


if __name__ == "__main__":
    main()
