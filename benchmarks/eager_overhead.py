"""Per-op eager dispatch time: aotjax Tensors vs plain `jax.numpy`, same machine, same run.

    python benchmarks/eager_overhead.py [--number 2000] [--repeat 7] [--size 32] [--cpu] [--profile OP]

Each op is warmed up, then timed with `timeit` (`repeat` runs of `number` calls; the minimum run
counts, as the least disturbed; the two sides' runs interleaved). Times are per call, in microseconds;
dispatch is asynchronous in both libraries, so this measures the Python and dispatch overhead, not the
kernels. The targets (issue 15): a geometric mean ratio of at most 1.1x, no op over 1.2x. In-place ops
are compared with JAX's functional form, the caller rebinding its variable. `--cpu` times the process's CPU
time instead of the wall clock (steadier on a shared machine). `--profile OP` prints a cProfile of the aotjax
side of one op.
"""
from __future__ import annotations

import argparse
import cProfile
import math
import pstats
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import aotjax

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import interleaved  # noqa: E402

# the rows of issue 15's table: add, mul by a scalar, matmul, sum, exp, add_ (the others are extra)
ISSUE_OPS = ("add(x, y)", "mul(x, 2.0)", "matmul(x, y)", "sum(x, dim=1)", "exp(x)", "x.add_(y)")


def make_cases(n: int):
    """(name, aotjax statement, jax statement): each a zero-argument callable."""
    rng = np.random.default_rng(0)
    a_np, b_np = (rng.normal(size=(n, n)).astype(np.float32) for _ in range(2))
    x, y = aotjax.tensor(a_np), aotjax.tensor(b_np)
    jx, jy = jnp.asarray(a_np), jnp.asarray(b_np)
    v = aotjax.tensor(a_np)
    w, jw = aotjax.tensor(a_np), jnp.asarray(a_np)  # written in place by the last cases
    jv = jnp.asarray(a_np)

    def jax_inplace():
        nonlocal jv
        jv = jv + jy  # jax's functional form of `w.add_(y)`
        return jv

    def jax_inplace_row():
        nonlocal jw
        jw = jw.at[0].add(1)  # jax's functional form of `w[0] += 1`
        return jw

    return [
        ("add(x, y)", lambda: x + y, lambda: jx + jy),
        ("mul(x, 2.0)", lambda: x * 2.0, lambda: jx * 2.0),
        ("sin(x)", lambda: x.sin(), lambda: jnp.sin(jx)),
        ("exp(x)", lambda: x.exp(), lambda: jnp.exp(jx)),
        ("matmul(x, y)", lambda: x @ y, lambda: jx @ jy),
        ("sum(x, dim=1)", lambda: x.sum(dim=1), lambda: jnp.sum(jx, axis=1)),
        ("x.add_(y)", lambda: v.add_(y), jax_inplace),
        ("x[0].add_(1)", lambda: w[0].add_(1), jax_inplace_row),
    ]


def warm_up(fn, number: int) -> None:
    for _ in range(max(number // 10, 50)):  # compile caches, allocator
        fn()
    jax.block_until_ready(jax.tree_util.tree_map(jnp.asarray, fn()))


def run(number: int, repeat: int, size: int, cpu: bool = False) -> None:
    print(f"eager dispatch per op, f32[{size},{size}] operands, {jax.devices()[0].platform}; "
          f"min of {repeat} x {number} calls{'; CPU time' if cpu else ''}\n")
    print(f"{'op':<16}{'aotjax µs':>12}{'jax µs':>10}{'ratio':>8}")
    ratios, table_ratios = [], []
    for name, ours, theirs in make_cases(size):
        try:
            warm_up(ours, number)
        except AttributeError as e:  # an op not implemented yet
            print(f"{name:<16}{'n/a':>12}{'':>10}{'':>8}   ({e})")
            continue
        warm_up(theirs, number)
        times = interleaved({"ours": ours, "jax": theirs}, number, repeat,
                            time.process_time if cpu else time.perf_counter)
        t_ours, t_jax = times["ours"] * 1e6, times["jax"] * 1e6
        ratios.append(t_ours / t_jax)
        if name in ISSUE_OPS:
            table_ratios.append(ratios[-1])
        print(f"{name:<16}{t_ours:>12.1f}{t_jax:>10.1f}{ratios[-1]:>7.2f}x{'' if name in ISSUE_OPS else '   (extra)'}")
    for label, rs in (("the issue's ops", table_ratios), ("all ops", ratios)):
        if rs:
            geomean = math.exp(sum(map(math.log, rs)) / len(rs))
            print(f"\n{label}: geometric mean ratio {geomean:.2f}x over {len(rs)}, worst {max(rs):.2f}x", end="")
    print("\n(targets, issue 15, for the issue's ops: geomean <= 1.1x, none over 1.2x)")


def profile(op: str, number: int, size: int) -> None:
    cases = {name: ours for name, ours, _ in make_cases(size)}
    if op not in cases:
        raise SystemExit(f"--profile: unknown op {op!r}; one of {', '.join(cases)}")
    fn = cases[op]
    warm_up(fn, 100)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(number):
        fn()
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(25)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--number", type=int, default=2000, help="calls per timing run")
    parser.add_argument("--repeat", type=int, default=7, help="timing runs (the minimum counts)")
    parser.add_argument("--size", type=int, default=32, help="operands are f32[size, size]")
    parser.add_argument("--cpu", action="store_true", help="time CPU time, not the wall clock")
    parser.add_argument("--profile", metavar="OP", help="cProfile the aotjax side of one op instead")
    args = parser.parse_args()
    if args.profile:
        profile(args.profile, args.number, args.size)
    else:
        run(args.number, args.repeat, args.size, args.cpu)


if __name__ == "__main__":
    main()
