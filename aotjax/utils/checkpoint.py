"""`torch.utils.checkpoint`: `checkpoint(function, *args, use_reentrant=False)` and `checkpoint_sequential`, PyTorch's
activation checkpointing calls, on `aotjax.checkpoint` (the region's intermediates are recomputed in the backward, not
saved; the recomputation draws the same random numbers as the forward did, as torch's `preserve_rng_state=True`).

Eagerly the call is recorded as one node of the graph a `backward()` differentiates; under `jit` / `compile` /
`grad` it is a `checkpoint` region of the program. `use_reentrant=True` behaves as `False`: gradients reach the
parameters the function uses even when no input requires grad (torch's reentrant variant gives them none).

>>> lin = aotjax.nn.Linear(2, 2)
>>> x = aotjax.ones(1, 2, requires_grad=True)
>>> y = aotjax.utils.checkpoint.checkpoint(lambda t: lin(t).relu(), x, use_reentrant=False)
>>> y.sum().backward()
>>> lin.weight.grad is not None and x.grad is not None
True
"""
from __future__ import annotations

import warnings
from typing import Callable

from aotjax.core.errors import UnsupportedError
from aotjax.core.source_info import where
from aotjax.transforms.checkpoint import checkpoint as _checkpoint

__all__ = ["checkpoint", "checkpoint_sequential", "noop_context_fn", "CheckpointError"]


class CheckpointError(RuntimeError):
    """torch's error class for checkpointing (raised by torch when a recomputation differs; aotjax's recomputation is
    the same program, so it does not raise it)."""


def noop_context_fn():
    """The default `context_fn`: no context around the forward and the recomputation."""
    from contextlib import nullcontext
    return nullcontext(), nullcontext()


def _check(use_reentrant, context_fn, kwargs: dict, stacklevel: int) -> None:
    if use_reentrant is None:
        warnings.warn("torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. "
                      "use_reentrant=False is recommended (aotjax runs both the same way: see "
                      "aotjax.utils.checkpoint).", stacklevel=stacklevel)
    if context_fn is not noop_context_fn:
        raise UnsupportedError(f"torch.utils.checkpoint.checkpoint: context_fn (selective activation checkpointing) "
                               f"is not supported{where()}; choose what is saved with a policy: "
                               f"aotjax.checkpoint(function, policy=aotjax.checkpoint_policies.dots_saveable)")
    kwargs.pop("preserve_rng_state", None)  # NOTE: always so: the recomputation replays the forward's key


def checkpoint(function: Callable, *args, use_reentrant: bool | None = None, context_fn: Callable = noop_context_fn,
               determinism_check: str = "default", debug: bool = False, early_stop: bool = True, **kwargs):
    """`function(*args, **kwargs)`, its intermediates recomputed in the backward instead of saved (torch's
    signature; `preserve_rng_state`, `determinism_check`, `debug` and `early_stop` are accepted and change nothing:
    the recomputation always draws the forward's random numbers)."""
    _check(use_reentrant, context_fn, kwargs, stacklevel=3)
    return _checkpoint(function)(*args, **kwargs)


def checkpoint_sequential(functions, segments: int, input, use_reentrant: bool | None = None, **kwargs):
    """Run `functions` (a `Sequential` or a list of modules/functions) on `input` in `segments` chunks, each but the
    last checkpointed, as torch's."""
    _check(use_reentrant, noop_context_fn, kwargs, stacklevel=3)
    if kwargs:
        raise TypeError(f"checkpoint_sequential: unexpected keyword arguments {sorted(kwargs)}{where()}")
    functions = list(functions.children()) if hasattr(functions, "children") else list(functions)
    size = len(functions) // segments

    def run(start: int, end: int) -> Callable:
        def forward(x):
            for f in functions[start:end + 1]:
                x = f(x)
            return x
        return forward

    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = _checkpoint(run(start, end))(input)
    return run(end + 1, len(functions) - 1)(input)
