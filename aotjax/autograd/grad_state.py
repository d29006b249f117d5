"""`.grad` while a function is staged (`jit`, `aot`): state the compiled program reads and writes.

A parameter's `.grad` is a Python attribute holding an eager tensor or None. While `jit` traces a step that calls
`backward()`, `zero_grad()` or `opt.step()`, what those do to `.grad` is recorded here instead of done
(`Staging`): a gradient assigned while tracing is a traced value, which must become an output of the program and be
assigned by every call, and `zero_grad(set_to_none=True)` must set None at every call, not once. Reading a `.grad`
that the trace has not assigned reads the eager tensor, which the trace then captures as live state (an accumulation
into it is a write in place, written back by the program); whether it was None is a guard of the compiled program
(`consulted`): a call where that changed traces again.
"""
from __future__ import annotations

import threading
import weakref

__all__ = ["Staging", "active", "staging_grads"]


class Staging:
    """The `.grad`s one staged function assigns (`assigned`: id -> (parameter, value or None)) and the ones it read
    as they were at entry (`consulted`: id -> (weak parameter, whether it was None); `read`: id -> the eager tensor
    it read, which the program captures: a later call reads the parameter's `.grad` then in its place)."""

    def __init__(self):
        self.assigned: dict = {}
        self.consulted: dict = {}
        self.read_values: dict = {}

    def read(self, t, eager_value):
        """`t.grad` as the staged function sees it."""
        entry = self.assigned.get(id(t))
        if entry is not None:
            return entry[1]
        if id(t) not in self.consulted:
            self.consulted[id(t)] = (weakref.ref(t), eager_value is None)
            if eager_value is not None:
                self.read_values[id(t)] = eager_value
        return eager_value

    def assign(self, t, value) -> None:
        self.assigned[id(t)] = (t, value)


class _Local(threading.local):
    def __init__(self):
        self.stack: list[Staging] = []


_local = _Local()


def active() -> Staging | None:
    """The innermost staging of this thread, if a staged function is being traced."""
    stack = _local.stack
    return stack[-1] if stack else None


class staging_grads:
    """A context in which `.grad` reads and writes go to a fresh `Staging` (the value of the `with`)."""

    def __enter__(self) -> Staging:
        s = Staging()
        _local.stack.append(s)
        return s

    def __exit__(self, *exc):
        _local.stack.pop()
