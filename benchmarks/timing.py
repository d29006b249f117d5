"""Timing helpers the benchmarks share: wait for results, time one call, time several functions interleaved."""
from __future__ import annotations

import math
import time
import timeit

import jax


def block_all(tree) -> None:
    """Wait until every array of `tree` is computed (jax and aotjax dispatch asynchronously)."""
    for leaf in jax.tree_util.tree_leaves(tree):
        leaf.block_until_ready()


def once(fn) -> float:
    """Seconds one call of `fn` takes."""
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def interleaved(fns: dict, number: int, repeat: int, timer=time.perf_counter) -> dict:
    """Seconds per call of each function: the least of `repeat` runs of `number` calls, the runs of
    the functions interleaved so that drift in the machine's load hits all alike. `timer`:
    `time.process_time` counts the process's CPU time alone (steadier on a shared machine)."""
    times = {k: math.inf for k in fns}
    for _ in range(repeat):
        for k, fn in fns.items():
            times[k] = min(times[k], timeit.timeit(fn, number=number, timer=timer) / number)
    return times


def step_parser(doc: str, number: int, repeat: int):
    """An `argparse` parser with the options every step benchmark takes (`--number`, `--repeat`, `--quick`,
    `--all-threads`); add a script's own before `parse_step_args`."""
    import argparse

    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--number", type=int, default=number)
    parser.add_argument("--repeat", type=int, default=repeat)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, few calls: a smoke test of the script")
    parser.add_argument("--all-threads", action="store_true", help="the libraries' default compute threads")
    return parser


def parse_step_args(parser):
    """The parsed options; each library on one compute thread unless `--all-threads` (before any jax array)."""
    args = parser.parse_args()
    if not args.all_threads:
        one_compute_thread()
    return args


def one_compute_thread() -> None:
    """Run each library's ops on one compute thread (XLA's CPU client, torch's intra-op pool): what a step costs,
    rather than how two thread pools share a small machine. Call it before the first jax array is made (XLA reads
    its flags when it starts its CPU client)."""
    import os

    import torch
    flags = os.environ.get("XLA_FLAGS", "")
    os.environ["XLA_FLAGS"] = f"{flags} --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1".strip()
    torch.set_num_threads(1)
