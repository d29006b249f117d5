"""`aotjax.compile`: torch.compile's name and signature, on `aot`.

`aotjax.compile(model)` (or `@aotjax.compile` on a function) runs the forward through `aot`: one XLA program per
input signature. Called on tensors that require grad, the call runs the compiled forward once and is recorded as ONE
node of the imperative autograd graph, whose backward is the compiled backward program (what AOTAutograd does inside
torch.compile): `model = aotjax.compile(model); loss = model(x).sum(); loss.backward(); opt.step()` runs two compiled
programs per step. A closed jaxpr is compiled as `aotjax.lowering.compile` does (the name's older meaning).

Where torch.compile would break the graph (Python control flow on a tensor's value, `.item()`), aotjax cannot
trace: with `fullgraph=False` (the default) the call then runs eagerly, as written, with a warning the first time;
with `fullgraph=True` the error is raised, as torch's.
"""
from __future__ import annotations

import functools
import warnings
from typing import Callable

from aotjax.core.errors import ConcretizationError
from aotjax.core.ir import ClosedJaxpr, Jaxpr
from aotjax.core.source_info import where
from aotjax.lowering import compile as compile_jaxpr
from aotjax.nn.module import Module
from aotjax.transforms.aot import aot

__all__ = ["compile", "OptimizedModule"]

MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
BACKENDS = (None, "inductor", "aot_eager", "eager", "cudagraphs", "openxla", "aot_eager_decomp_partition")


class _Compiled:
    """A function compiled by `aotjax.compile`: `aot` of it, or the function itself where it cannot be traced
    (`fullgraph=False`)."""

    def __init__(self, fn: Callable, fullgraph: bool):
        self._fn, self._fullgraph = fn, fullgraph
        self._aot = aot(fn)
        self._eager = False
        functools.update_wrapper(self, fn, updated=())

    def __call__(self, *args, **kwargs):
        if self._eager:
            return self._fn(*args, **kwargs)
        try:
            return self._aot(*args, **kwargs)
        except ConcretizationError as e:
            if self._fullgraph:
                raise
            warnings.warn(f"aotjax.compile: {getattr(self._fn, '__name__', 'the function')} cannot be traced whole "
                          f"({str(e).splitlines()[0]}); it runs eagerly from now on (fullgraph=True raises instead)",
                          stacklevel=2)
            self._eager = True
            return self._fn(*args, **kwargs)

    @property
    def trace_count(self) -> int:
        return self._aot.trace_count


def _call_module(module: Module, *args, **kwargs):
    return module(*args, **kwargs)


class OptimizedModule(Module):
    """What `aotjax.compile(module)` returns (torch's class name): calling it runs `_orig_mod`'s forward compiled;
    parameters, buffers and attributes are `_orig_mod`'s (its `state_dict` keys carry the `_orig_mod.` prefix, as
    torch's)."""

    def __init__(self, mod: Module, fullgraph: bool):
        super().__init__()
        self._orig_mod = mod
        object.__setattr__(self, "_compiled_call", _Compiled(_call_module, fullgraph))

    def forward(self, *args, **kwargs):
        return self._compiled_call(self._orig_mod, *args, **kwargs)

    def __getattr__(self, name: str):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._modules["_orig_mod"], name)


def compile(model=None, *, fullgraph: bool = False, dynamic: bool | None = None, backend=None, mode: str | None = None,
            options: dict | None = None, disable: bool = False, donate_argnums=()):
    """torch.compile: a Module or function compiled through `aot` (see the module docstring); used bare, with
    arguments (`@aotjax.compile(fullgraph=True)`) or called on a closed jaxpr (`aotjax.lowering.compile`).
    `mode`, `backend` and `options` choose among torch's kernels: torch's names are accepted (aotjax compiles with
    XLA whatever they say; a name torch would not accept is an error); `dynamic` is accepted (a new input shape
    traces again, as with `dynamic=False`).

    >>> f = aotjax.compile(lambda x: (x.sin() * 2).sum())
    >>> x = aotjax.tensor([0.0, 1.0], requires_grad=True)
    >>> f(x).backward()
    >>> x.grad
    tensor([2.       , 1.0806046])
    """
    if isinstance(model, (ClosedJaxpr, Jaxpr)):
        return compile_jaxpr(model, donate_argnums)
    if mode not in MODES:
        raise RuntimeError(f"aotjax.compile: Unrecognized mode={mode!r}, should be one of: "
                           f"{', '.join(m for m in MODES if m)}{where()}")
    if isinstance(backend, str) and backend not in BACKENDS:
        raise ValueError(f"aotjax.compile: unknown backend {backend!r}{where()}; torch's are "
                         f"{', '.join(b for b in BACKENDS if b)} (aotjax compiles with XLA whichever is named)")
    if callable(backend):
        warnings.warn("aotjax.compile: a custom backend is not called: aotjax compiles with XLA (use "
                      "aotjax.aot(fn, fw_compiler=...) to give your own compiler the forward and backward programs)",
                      stacklevel=2)
    if model is None:
        return functools.partial(compile, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode,
                                 options=options, disable=disable)
    if disable:
        return model
    if isinstance(model, Module):
        return OptimizedModule(model, fullgraph)
    if not callable(model):
        raise TypeError(f"aotjax.compile: expected a Module, a function or a jaxpr, got {type(model).__name__}"
                        f"{where()}")
    return _Compiled(model, fullgraph)
