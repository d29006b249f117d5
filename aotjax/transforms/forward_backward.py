"""The partition made visible: a function's forward and backward programs, with labelled signatures.

`forward_backward(f, *args)` is `aot(f, partition=partition).lower(*args)`: the functionalized
program, linearized (`jvp + partial_eval`) and transposed into one joint program, then split by the
partitioner into

- **forward**: the primals (one per input group, in flatten order of the arguments) -> the outputs,
  the written inputs' new values, the intermediate bases that outputs view, then the residuals;
- **backward**: the residuals, then one cotangent per floating-point forward output -> one cotangent
  per floating-point primal.

Every input and output carries a descriptor: its role, its pytree path and, for residuals, the
primitive and user source line that computed it. `print_saved_residuals` lists the residuals.
"""
from __future__ import annotations

from typing import Callable

from aotjax.transforms.aot import Residual, aot


def forward_backward(fun: Callable, *args, partition: Callable | None = None):
    """The forward and backward programs of `fun` at `args` (an `AotLowered`: `.forward`, `.backward`,
    `.residuals`, `.forward_inputs`, ... ). Nothing runs: `fun`'s writes into `args` do not happen.

    >>> fb = aotjax.forward_backward(lambda x, w: (x @ w).tanh().sum(), aotjax.ones(2, 3), aotjax.ones(3, 4))
    >>> fb.forward_inputs, fb.backward_outputs
    (['primal[x]', 'primal[w]'], ['cotangent[x]', 'cotangent[w]'])
    >>> [r.why.split(" at ")[0] for r in fb.residuals]
    ['argument x', 'argument w', 'sub']
    """
    return aot(fun, partition=partition).lower(*args)


def saved_residuals(fun: Callable, *args) -> list[Residual]:
    """The residuals the forward of `fun` saves for its backward (see `forward_backward`)."""
    return forward_backward(fun, *args).residuals


def print_saved_residuals(fun: Callable, *args) -> None:
    """Print each residual the forward of `fun` at `args` saves for the backward: shape and dtype,
    bytes, and the primitive and source line that made it (or the argument it is).

    >>> aotjax.print_saved_residuals(lambda x: (x.sin() * 2).sum(), aotjax.ones(3))
    f32[3]  12 bytes  cos at <doctest ...>:1 (<lambda>)
    """
    for r in saved_residuals(fun, *args):
        print(r)
