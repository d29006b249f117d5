"""Gradient clipping, as `torch.nn.utils.clip_grad`: scale or clamp the `.grad` of parameters in place, after
`backward()` and before `optimizer.step()`.

Everything here is tensor ops (no value is read on the host), so a training step compiled whole with `aotjax.jit`
clips inside its one program: `error_if_nonfinite=True` is the exception, it must read the norm (see
`get_total_norm`).

>>> w = aotjax.nn.Parameter(aotjax.tensor([3.0, 4.0]))
>>> (w * w).sum().backward()
>>> aotjax.nn.utils.clip_grad_norm_([w], max_norm=1.0)
tensor(10.)
>>> [round(g, 4) for g in w.grad.tolist()]
[0.6, 0.8]
"""
from __future__ import annotations

import warnings
from collections.abc import Iterable

from aotjax.core.checks import checks_emitted
from aotjax.core.errors import ConcretizationError
from aotjax.core.interpreter import Tracer, grad_mode
from aotjax.core.source_info import user_stacklevel, where
from aotjax.ops.base.data import as_tensor, tensor
from aotjax.ops.indexing.subscripts import check_index_p
from aotjax.ops.linalg.norms import vector_norm
from aotjax.ops.shape.copies import stack
from aotjax.tensor import Tensor

__all__ = ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "get_total_norm", "clip_grads_with_norm_"]

TensorOrTensors = Tensor | Iterable[Tensor]

_NONFINITE = ("The total norm of order {} for gradients from `parameters` is non-finite, so it cannot be clipped. To "
              "disable this error and scale the gradients by the non-finite norm anyway, set "
              "`error_if_nonfinite=False`")


def _tensors(tensors: TensorOrTensors) -> list[Tensor]:
    """One tensor, or the tensors of an iterable (a generator such as `model.parameters()` is read once)."""
    return [tensors] if isinstance(tensors, Tensor) else list(tensors)


def _grads(parameters: TensorOrTensors) -> list[Tensor]:
    return [p.grad for p in _tensors(parameters) if p.grad is not None]


def get_total_norm(tensors: TensorOrTensors, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                   foreach: bool | None = None) -> Tensor:
    """The `norm_type`-norm of all `tensors` together, as if concatenated into one vector (`inf`: the largest
    absolute entry), as a 0-d tensor: the norm of their norms. No tensors: `tensor(0.)`. `foreach` is accepted for
    PyTorch's signature: XLA fuses the per-tensor norms anyway.

    `error_if_nonfinite=True` raises PyTorch's RuntimeError when the norm is nan or inf. That needs its value: inside
    a compiled step (`aotjax.jit`) the check is staged as a run-time check when the step is compiled with
    `checks=True` (the program raises the error when it runs); without, tracing raises an error saying so.

    >>> aotjax.nn.utils.get_total_norm([aotjax.tensor([3.0]), aotjax.tensor([[4.0]])])
    tensor(5.)
    >>> aotjax.nn.utils.get_total_norm([aotjax.tensor([3.0]), aotjax.tensor([-4.0])], norm_type=float("inf"))
    tensor(4.)
    """
    return _total_norm("get_total_norm", _tensors(tensors), float(norm_type), error_if_nonfinite)


def _total_norm(op: str, tensors: list[Tensor], norm_type: float, error_if_nonfinite: bool) -> Tensor:
    if not tensors:
        return tensor(0.0)
    with grad_mode(False):
        total = vector_norm(stack([vector_norm(t, norm_type) for t in tensors]), norm_type)
        return _check_finite(op, total, norm_type) if error_if_nonfinite else total


def _check_finite(op: str, total: Tensor, norm_type: float) -> Tensor:
    """`total`, once known to be finite; otherwise PyTorch's RuntimeError (staged as a run-time check in a program
    compiled with checks)."""
    message = f"{op}: {_NONFINITE.format(norm_type)}"
    if not isinstance(total, Tracer):
        if not bool(total.isfinite()):
            raise RuntimeError(message + where())
        return total
    if not checks_emitted():
        raise ConcretizationError(
            f"{op}: error_if_nonfinite=True must read the total norm, but it is abstract here "
            f"({total.aval.str_short()}, traced by {type(total._trace).__name__}){where()}, so whether it is finite "
            f"cannot be checked while the step is traced. Compile the step with run-time checks "
            f"(`aotjax.jit(step, checks=True)`, or `aotjax.config.checks = True`) to raise the error when the program "
            f"runs, or pass error_if_nonfinite=False and test the returned norm after the step "
            f"(`if not norm.isfinite(): ...`).")
    # NOTE: the staged range check of `check_index` is the run-time check aotjax has: "isfinite as an int lies in
    # [1, 2)" is "finite". The result is read (`+ 0 * ok`) so the check lives as long as the norm does.
    template = (message + where()).replace("{", "{{").replace("}", "}}")  # NOTE: the check formats it
    ok = check_index_p.bind(total.isfinite().int(), lo=1, hi=2, error=RuntimeError, message=template)
    return total + 0 * ok


def clip_grads_with_norm_(parameters: TensorOrTensors, max_norm: float, total_norm: Tensor,
                          foreach: bool | None = None) -> None:
    """Scale the `.grad` of `parameters` in place by `max_norm / (total_norm + 1e-6)` when that is below 1 (PyTorch's
    coefficient): with `total_norm` from `get_total_norm` of the grads, their norm becomes at most `max_norm`.
    Parameters whose `.grad` is None are skipped.

    >>> w = aotjax.nn.Parameter(aotjax.zeros(2))
    >>> w.grad = aotjax.tensor([3.0, 4.0])
    >>> aotjax.nn.utils.clip_grads_with_norm_([w], 1.0, aotjax.tensor(5.0))
    >>> [round(g, 4) for g in w.grad.tolist()]
    [0.6, 0.8]
    """
    grads = _grads(parameters)
    if not grads:
        return
    with grad_mode(False):
        coef = (float(max_norm) / (as_tensor(total_norm) + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(coef)


def clip_grad_norm_(parameters: TensorOrTensors, max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False, foreach: bool | None = None) -> Tensor:
    """Scale the gradients (`.grad`) of `parameters` in place so that their `norm_type`-norm, taken together as one
    vector, is at most `max_norm`; returns that norm before clipping (a 0-d tensor). PyTorch's formulas:
    `get_total_norm` of the grads, then `clip_grads_with_norm_`. `parameters`: one tensor or an iterable of them
    (`model.parameters()`); those whose `.grad` is None are skipped. Runs inside a compiled training step too; see
    `get_total_norm` for `error_if_nonfinite` there.

    >>> w = aotjax.nn.Parameter(aotjax.tensor([1.0, -2.0]))
    >>> w.grad = aotjax.tensor([1.0, -2.0])
    >>> aotjax.nn.utils.clip_grad_norm_(w, max_norm=1.0, norm_type=1)
    tensor(3.)
    >>> [round(g, 4) for g in w.grad.tolist()]
    [0.3333, -0.6667]
    """
    parameters = _tensors(parameters)
    total_norm = _total_norm("clip_grad_norm_", _grads(parameters), float(norm_type), error_if_nonfinite)
    clip_grads_with_norm_(parameters, max_norm, total_norm, foreach)
    return total_norm


def clip_grad_norm(parameters: TensorOrTensors, max_norm: float, norm_type: float = 2.0,
                   error_if_nonfinite: bool = False, foreach: bool | None = None) -> Tensor:
    """`clip_grad_norm_`, under its deprecated name (a FutureWarning, as in PyTorch).

    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     aotjax.nn.utils.clip_grad_norm([], 1.0)
    tensor(0.)
    """
    warnings.warn("`torch.nn.utils.clip_grad_norm` is now deprecated in favor of `torch.nn.utils.clip_grad_norm_`.",
                  FutureWarning, stacklevel=user_stacklevel())
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(parameters: TensorOrTensors, clip_value: float, foreach: bool | None = None) -> None:
    """Clamp the gradients (`.grad`) of `parameters` in place to [-clip_value, clip_value]. Parameters whose `.grad`
    is None are skipped.

    >>> w = aotjax.nn.Parameter(aotjax.zeros(3))
    >>> w.grad = aotjax.tensor([-2.0, 0.5, 3.0])
    >>> aotjax.nn.utils.clip_grad_value_(w, 1.0)
    >>> w.grad
    tensor([-1. ,  0.5,  1. ])
    """
    clip_value = float(clip_value)
    with grad_mode(False):
        for g in _grads(parameters):
            g.clamp_(-clip_value, clip_value)
