"""`torch.jit`'s TorchScript names, on `aotjax.jit` (which is JAX's `jit`, a function transform): model code calls
`torch.jit.is_scripting()`, decorates helpers with `@torch.jit.script` or `@torch.jit.ignore`, and scripts call
`torch.jit.trace(model, example)`. aotjax has no TorchScript: `script` and `trace` compile with `aotjax.compile`
(one XLA program per input signature; code that cannot be traced runs eagerly, with a warning), the markers return
what they mark, and `is_scripting()` is False.

>>> @aotjax.jit.script
... def gelu(x):
...     return x * 0.5 * (1.0 + aotjax.erf(x / 1.41421))
>>> gelu(aotjax.zeros(2))
tensor([0., 0.])
>>> aotjax.jit.is_scripting()
False
"""
from __future__ import annotations

from typing import Callable, Final  # noqa: F401  (torch.jit.Final: a type annotation TorchScript reads)

__all__ = ["script", "trace", "is_scripting", "is_tracing", "ignore", "unused", "export", "Final", "attach"]


def script(obj=None, optimize=None, _frames_up: int = 0, _rcb=None, example_inputs=None):
    """`torch.jit.script`: a function or module compiled with `aotjax.compile` (a class or anything else is
    returned as it is)."""
    from aotjax.torch_compile import compile

    if obj is None or isinstance(obj, type) or not callable(obj):
        return obj
    return compile(obj)


def trace(func, example_inputs=None, *args, **kwargs):
    """`torch.jit.trace`: `func` (a function or module) compiled with `aotjax.compile`; the example inputs are not
    needed (it traces at its first call, and again for a new input signature)."""
    from aotjax.torch_compile import compile

    return compile(func)


def is_scripting() -> bool:
    """False: aotjax never runs code as TorchScript."""
    return False


def is_tracing() -> bool:
    """False: `torch.jit.trace`'s tracer is not aotjax's (`aotjax.compiler.is_compiling()` says whether aotjax
    traces)."""
    return False


def ignore(drop=False, **kwargs) -> Callable:
    """`@torch.jit.ignore` / `@torch.jit.ignore(drop=True)`: the function itself."""
    return drop if callable(drop) else (lambda fn: fn)


def unused(fn: Callable) -> Callable:
    """`@torch.jit.unused`: the function itself."""
    return fn


def export(fn: Callable) -> Callable:
    """`@torch.jit.export`: the method itself."""
    return fn


def attach(jit: Callable) -> None:
    """Give `aotjax.jit` these names, as `torch.jit` has them."""
    for name in ("script", "trace", "is_scripting", "is_tracing", "ignore", "unused", "export", "Final"):
        setattr(jit, name, globals()[name])
