"""The count a compiled call's fast path (`aotjax.runtime.fast_call`) compares with the one it saw when it last
checked its arguments: while the two are equal, what it checked still holds, and the same tensor objects as the
last call's need no look. The count advances after anything that could change what it checked:

- a tensor's storage or layout slots set again on an existing object (`Tensor._init_slots`, `Tensor._review`: a
  metadata mutation such as `t_()`, `Module.to(dtype)`, an `out=` resized);
- an interpreter pushed or popped (`aotjax.core.interpreter.new_main`): while any transform runs, in any thread,
  the fast path checks every call (`transforms_running`), since an eager call inside a staging transform is staged;
- `aotjax.config` set (its `checks` decides which program a call runs).
"""
from __future__ import annotations

import threading

__all__ = ["epoch", "running", "modules", "module_changed", "advance", "transform_entered", "transform_left",
           "transforms_running"]

epoch = [0]
# NOTE: a count of its own: `aotjax.nn.Module` attribute, parameter, buffer or submodule set (`module_changed`); the
# guards of a compiled program read from modules again only when it moved (`aotjax.runtime.trace_reads`)
modules = [0]
running = [0]  # how many interpreters other than eager evaluation are active, all threads together

_lock = threading.Lock()


def advance() -> None:
    """After a change the fast path must see."""
    epoch[0] += 1


def module_changed() -> None:
    """After a module's attribute, parameter, buffer or submodule was set or deleted."""
    modules[0] += 1


def transform_entered() -> None:
    with _lock:
        running[0] += 1
        epoch[0] += 1


def transform_left() -> None:
    with _lock:
        running[0] -= 1
        epoch[0] += 1


def transforms_running() -> bool:
    """Whether an interpreter other than eager evaluation is active in some thread."""
    return running[0] > 0
