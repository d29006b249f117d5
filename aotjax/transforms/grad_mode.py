"""`no_grad`, `enable_grad`, `inference_mode` and `set_grad_enabled`, as in PyTorch: values computed inside
`no_grad()` are not differentiated, under every transform.

Inside `no_grad()` nothing is recorded for imperative autograd, and under the transforms every traced op's result is
cut from differentiation (`stop_gradient`; a view's result is detached, staying a view). A write in place inside
`no_grad()` (an optimizer's `p.sub_(lr * g)`), or through a detached view, changes the written tensor's value and
keeps the derivative it had, as torch's (the write is not part of the graph: `pinned` in `aotjax.ops.shape.views`).

As with `torch.func.grad`, a transform called inside `no_grad()` still differentiates its own function (an
outer `no_grad` does not reach into `grad(f)`). A compiled function (`jit`, `aot`, `compile`) is traced in its
caller's grad mode, which is part of its cache key (as torch.compile guards on it): a function reading
`is_grad_enabled()` takes the caller's branch, and a call inside `no_grad()` runs a program of its own.
"""
from __future__ import annotations

import functools
from typing import Callable

from aotjax.core import interpreter
from aotjax.core.interpreter import grad_enabled, grad_mode

__all__ = ["no_grad", "enable_grad", "inference_mode", "set_grad_enabled", "is_grad_enabled"]


def is_grad_enabled() -> bool:
    """Whether values computed now are differentiable (False inside `no_grad()`).

    >>> with aotjax.no_grad():
    ...     aotjax.is_grad_enabled()
    False
    """
    return grad_enabled()


class _GradMode:
    """A context manager that sets grad mode for its block and restores it after; used bare or called as a
    decorator (`@no_grad()` or `@no_grad`), it sets the mode for each call of the function."""

    enabled: bool = True

    def __init__(self, fn: Callable | None = None):
        self._previous: list[bool] = []
        self._fn = fn
        if fn is not None:
            functools.update_wrapper(self, fn)

    def __enter__(self):
        self._previous.append(interpreter.set_grad_enabled(self.enabled))

    def __exit__(self, *exc):
        interpreter.set_grad_enabled(self._previous.pop())

    def __call__(self, *args, **kwargs):
        if self._fn is not None:  # NOTE: `@no_grad` without parentheses: this object is the function
            with grad_mode(self.enabled):
                return self._fn(*args, **kwargs)
        (fn,) = args

        @functools.wraps(fn)
        def wrapper(*a, **k):
            with grad_mode(self.enabled):
                return fn(*a, **k)
        return wrapper


class no_grad(_GradMode):
    """Values computed inside are not differentiated: `torch.no_grad()`. Ported code updates parameters this way.

    >>> f = lambda x: (x * x).sum() + (x * x).sum().detach()
    >>> def g(x):
    ...     y = (x * x).sum()
    ...     with aotjax.no_grad():
    ...         z = (x * x).sum()
    ...     return y + z
    >>> aotjax.grad(g)(aotjax.tensor([3.0]))
    tensor([6.])
    """

    enabled = False


class enable_grad(_GradMode):
    """Values computed inside are differentiated again, inside a `no_grad()` block: `torch.enable_grad()`.

    >>> def g(x):
    ...     with aotjax.no_grad():
    ...         with aotjax.enable_grad():
    ...             return (x * x).sum()
    >>> aotjax.grad(g)(aotjax.tensor([3.0]))
    tensor([6.])
    """

    enabled = True


class inference_mode(_GradMode):
    """`torch.inference_mode(mode=True)`: as `no_grad()` when `mode` is true (aotjax tensors have no version
    counters or autograd metadata to skip, so there is nothing more to save).

    >>> with aotjax.inference_mode():
    ...     aotjax.is_grad_enabled()
    False
    """

    def __init__(self, mode: bool | Callable = True):
        if callable(mode):
            super().__init__(mode)
            self.enabled = False
        else:
            super().__init__()
            self.enabled = not mode


class set_grad_enabled(_GradMode):
    """Sets grad mode: `torch.set_grad_enabled(mode)`, called as a function (until changed again) or used as a
    context manager (for its block).

    >>> with aotjax.set_grad_enabled(False):
    ...     aotjax.is_grad_enabled()
    False
    >>> aotjax.is_grad_enabled()
    True
    """

    def __init__(self, mode: bool):
        super().__init__()
        self.enabled = bool(mode)
        self._previous.append(interpreter.set_grad_enabled(self.enabled))  # NOTE: now, as torch's; `with` restores it

    def __enter__(self):
        pass
