"""Why a compiled function traced again, said where a user looks.

Each trace of a `jit`/`aot`/`compile`d function after its first has a reason: a new input signature (which
argument changed shape, dtype or layout), or a guard that failed (`aotjax.runtime.trace_reads`: "`SCALE` changed
from 2.0 to 3.0"). It is logged on the `aotjax.recompiles` logger (INFO; `AOTJAX_LOG=recompiles` prints it to
stderr), kept on the function (`cache_info()`), and past `aotjax.config.recompile_limit` traces (torch's default: 8)
a `RecompileWarning` says, once per function, what changed each time: a loop that traces at every step is slow, and
the reason names the value to make a tensor or a static argument. With `aotjax.config.fail_on_recompile_limit_hit`
the trace past the limit raises `RecompileLimitError` instead.
"""
from __future__ import annotations

import logging
import os
import sys
from collections import deque

import numpy as np

from aotjax.core.checks import config
from aotjax.core.source_info import where

__all__ = ["RecompileWarning", "RecompileLimitError", "logger", "note_trace", "signature_change"]

logger = logging.getLogger("aotjax.recompiles")
if "recompiles" in os.environ.get("AOTJAX_LOG", "").replace(" ", "").split(","):
    _handler = logging.StreamHandler(sys.stderr)
    _handler.setFormatter(logging.Formatter("aotjax: %(message)s"))
    logger.addHandler(_handler)
    logger.setLevel(logging.INFO)


class RecompileWarning(UserWarning):
    """A compiled function traced more often than `aotjax.config.recompile_limit`."""


class RecompileLimitError(RuntimeError):
    """A compiled function would trace past `aotjax.config.recompile_limit`, with
    `aotjax.config.fail_on_recompile_limit_hit` set."""


class TraceLog:
    """A compiled function's traces: how many, the reasons of the recent ones, whether it warned."""

    __slots__ = ("reasons", "warned")

    def __init__(self):
        self.reasons: deque = deque(maxlen=8)
        self.warned = False


def note_trace(what: str, name: str, log: TraceLog, count: int, reason: str | None, limited: bool = True) -> None:
    """Before trace number `count` of `what(name)` (1 for the first), `reason` saying why it traces again: logged,
    kept in `log`, and past the limit warned about (once) or raised, unless not `limited` (a library's cache of
    programs, one per structure it is given: a new structure is not the same function tracing again)."""
    if count == 1:
        return
    line = where()
    reason = reason or "a new input signature"
    log.reasons.append(f"{reason}{line}")
    logger.info("%s(%s) traces again (trace %d)%s: %s", what, name, count, line, reason)
    limit = config.recompile_limit
    if count <= limit or not limited:
        return
    reasons = "\n".join(f"  - {r}" for r in log.reasons)
    message = (f"{what}({name}) has traced {count} times, past aotjax.config.recompile_limit = {limit}; each "
               f"trace compiles again, which is slow. Recent reasons:\n{reasons}\nA Python value that changes at "
               f"every call (a learning rate, a step count) belongs in a tensor argument; one with few values, in a "
               f"static argument.")
    if config.fail_on_recompile_limit_hit:
        raise RecompileLimitError(message)
    if not log.warned:
        log.warned = True
        import warnings

        warnings.warn(message, RecompileWarning, stacklevel=2)


def signature_change(old: tuple, new: tuple, names: list[str]) -> str:
    """What differs between two cache keys `(pytree, statics, signature, checks, modes)` of one function, in words
    (`names`: the input names of the program cached for `old`)."""
    old_tree, old_statics, old_sig, old_checks, old_modes = old
    tree, statics, sig, checks, modes = new
    if old_modes != modes:
        (old_autocast, old_grad), (autocast, grad) = old_modes, modes
        if old_grad != grad:
            return f"grad mode is {'on' if grad else 'off'} now (no_grad / enable_grad)"
        now, was = (a[0] if a else "off" for a in (autocast, old_autocast))
        return f"autocast is {now} now (was {was})"
    if old_checks != checks:
        return f"run-time checks are {'on' if checks else 'off'} now"
    if old_tree != tree:
        return f"the arguments' structure changed: {_tree(tree)} (was {_tree(old_tree)})"
    if old_statics != statics:
        return f"a static argument changed: {_statics(statics)} (was {_statics(old_statics)})"
    if old_sig is None or sig is None or len(old_sig) != len(sig):
        return "a new input signature"
    for i, (a, b) in enumerate(zip(old_sig, sig)):
        if a != b:
            name = names[i] if i < len(names) else f"input {i}"
            now, was = _leaf(b), _leaf(a)
            return f"{name} is {now} now (was {was})" if now != was else f"{name} shares memory differently"
    return "the inputs share memory differently"


def _tree(tree) -> str:
    text = str(tree)
    return text if len(text) < 80 else text[:77] + "..."


def _statics(statics) -> str:
    """`guards.hashable_statics`' key (`(type, value)` pairs, tuples as `(tuple, items)`) as the values."""
    if isinstance(statics, tuple) and len(statics) == 2 and isinstance(statics[0], type):
        kind, value = statics
        if kind is tuple:
            return ", ".join(text for text in map(_statics, value) if text)
        return "" if kind is type else repr(value)  # NOTE: a nested key's type tag
    return repr(statics)


def _leaf(entry) -> str:
    """A signature entry of `guards.call_key` (or `abstract_key`) in words."""
    if isinstance(entry, type):
        return f"a Python {entry.__name__}"
    try:
        text = f"{np.dtype(entry[1]).name}{list(entry[0])}"
    except (TypeError, IndexError):
        return "views of one storage taken differently"  # NOTE: the chains of arguments sharing a storage
    if isinstance(entry[2], tuple):
        text += f" (strides {entry[2]})"
    return text
