"""`torch.compiler`: what model code asks of the compiler. `is_compiling()` is True while aotjax traces the code
(`jit`, `aot`, `compile`, and `grad` / `vmap`, whose values are traced too: what torch code guards with it, a
`.item()` or a host-side check, cannot run there either); `disable` and `allow_in_graph` return what they mark
(aotjax traces every Python function it is given; code that cannot be traced makes `aotjax.compile` run the call
eagerly).

>>> aotjax.compiler.is_compiling()
False
>>> aotjax.jit(lambda x: x + aotjax.compiler.is_compiling())(aotjax.zeros(1))
tensor([1.])
"""
from __future__ import annotations

from typing import Callable

from aotjax.core.interpreter import _state

__all__ = ["is_compiling", "is_dynamo_compiling", "disable", "allow_in_graph"]


def is_compiling() -> bool:
    """Whether this thread is tracing (any transform above eager evaluation, or a program being staged)."""
    return len(_state.stack) > 1 or (_state.dynamic is not None and _state.dynamic.level > 0)


def is_dynamo_compiling() -> bool:
    """As `is_compiling()`."""
    return is_compiling()


def disable(fn: Callable | None = None, recursive: bool = True, reason: str | None = None):
    """`@torch.compiler.disable`: the function itself (aotjax traces it like any other)."""
    return fn if fn is not None else (lambda f: f)


def allow_in_graph(fn: Callable) -> Callable:
    """`torch.compiler.allow_in_graph`: the function itself."""
    return fn
