"""Every process compiles the same program: checked before it runs, rather than found by a hang.

Processes running one program over a global mesh each compile it themselves. When their traces differ (a branch
on the process index, a Python value read from a file that differs, a set iterated in hash order) the programs'
collectives no longer pair up and the processes wait for each other forever. So, when there are several
processes, each program `jit` or `aot` is about to compile over tensors of more than this process (a global
tensor among its inputs) is fingerprinted (a hash of its jaxpr text) and the fingerprints are compared through
JAX's key-value store: on a mismatch every process raises `ProgramMismatchError`, naming the function and the first
line at which the programs differ. With one process the check is one attribute read per trace.

The n-th program checked in one process is compared with the n-th of the others (programs over local tensors
only, which one process may compile alone, are not counted). Keys: `aotjax/program/<n>/hash/<process>`, and on a
mismatch `aotjax/program/<n>/text/<process>` (the texts to diff: the differing processes' and process 0's).
"""
from __future__ import annotations

import hashlib
import itertools
from typing import Any, Callable

import jax

from aotjax.core.errors import AotjaxError
from aotjax.core.source_info import where
from aotjax.distributed import runtime
from aotjax.tensor import Tensor

__all__ = ["ProgramMismatchError", "check_same_program", "config"]


class ProgramMismatchError(AotjaxError, RuntimeError):
    """The processes traced different programs for one compiled call (see `aotjax.distributed.program_check`)."""


class _Config:
    """`enabled`: whether programs are compared across processes; `timeout`: how long (seconds) a process waits for
    the others' fingerprints of a program before it raises."""

    enabled: bool = True
    timeout: float = 300.0


config = _Config()
_programs = itertools.count()


def check_same_program(what: str, fun: Callable, jaxpr, inputs) -> None:
    """Raise `ProgramMismatchError` unless every process traced this program (`jaxpr`, which `fun` traced to under
    the transform `what`) alike; `inputs`: the call's arguments (a pytree) and captured tensors. Nothing when this
    process runs alone, or the program takes no global tensor."""
    client = runtime.client()
    if client is None or not config.enabled:
        return
    if not any(_is_global(x) for x in jax.tree_util.tree_leaves(inputs)):
        return
    n, me, count = next(_programs), jax.process_index(), jax.process_count()
    text = jaxpr.pretty()
    digest = hashlib.sha256(text.encode()).hexdigest()
    key = f"aotjax/program/{n}"
    client.key_value_set(f"{key}/hash/{me}", digest)
    others = range(1, count) if me == 0 else (0,)
    differ = [p for p in others if _get(client, f"{key}/hash/{p}", what, fun, p) != digest]
    if not differ:
        return
    client.key_value_set(f"{key}/text/{me}", text)
    other = differ[0]
    raise ProgramMismatchError(_message(what, fun, n, me, other, jaxpr, text,
                                        _get(client, f"{key}/text/{other}", what, fun, other)))


def _is_global(x: Any) -> bool:
    sharding = x.sharding if isinstance(x, (Tensor, jax.Array)) else None
    return sharding is not None and not sharding.is_fully_addressable


def _get(client, key: str, what: str, fun: Callable, process: int) -> str:
    try:
        return client.blocking_key_value_get(key, max(1, int(config.timeout * 1000)))
    except Exception as e:  # NOTE: jax's XlaRuntimeError: the deadline passed, or the process is gone
        raise ProgramMismatchError(
            f"{what}: {_name(fun)} was traced by this process (process {jax.process_index()}), but process {process} "
            f"did not trace a program over global tensors within {config.timeout:g} s ({type(e).__name__}){where()}; "
            f"every process must compile the same programs over global tensors in the same order (is it running "
            f"another code path, or has it stopped?)") from None


def _message(what: str, fun: Callable, n: int, me: int, other: int, jaxpr, text: str, other_text: str) -> str:
    mine, theirs = text.splitlines(), other_text.splitlines()
    line = next((i for i, (a, b) in enumerate(zip(mine, theirs)) if a != b), min(len(mine), len(theirs)))
    shown = jaxpr.pretty(source_info=True).splitlines()
    here = shown[line].strip() if line < len(shown) else "(the program ends here)"
    there = theirs[line].strip() if line < len(theirs) else "(the program ends here)"
    return (f"{what}: {_name(fun)} traces to a different program in process {me} than in process {other} "
            f"(program {n + 1} compiled over global tensors){where()}; running it would leave the processes waiting "
            f"for each other. The programs first differ at line {line + 1}:\n  process {me}: {here}\n  process "
            f"{other}: {there}\nEvery process must trace the same program: make what the function reads (Python "
            f"values, shapes, branches on the process index) the same in every process, or pass it as a tensor")


def _name(fun: Callable) -> str:  # NOTE: `transforms.argnums.fun_name`, which this module (jit imports it) cannot
    return getattr(fun, "__name__", None) or type(fun).__name__
