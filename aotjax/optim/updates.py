"""The update math, one function per algorithm, shared by the torch-style optimizers (`SGD`, `Adam`, `AdamW`)
and the optax-style transforms (`sgd`, `adam`, `adamw`).

Each function takes one parameter's values (aotjax Tensors, or jax arrays) and returns new values: the
update to ADD to the parameter (the negated step, as optax's `updates`) and the new state. It writes
nothing; the torch-style classes write the results in place, the transforms return them. Hyperparameters
may be Python numbers, 0-d Tensors or 0-d jax arrays. The formulas are PyTorch's single-tensor ones
(`torch/optim/sgd.py`, `adam.py`), which optax's `sgd`/`adam`/`adamw` agree with where both exist.
"""
from __future__ import annotations

import jax.numpy as jnp

from aotjax.ops.math.elementwise import maximum, sqrt, where
from aotjax.tensor import Tensor

__all__ = ["sgd_update", "adam_update"]


def _is_zero(x) -> bool:
    """A Python number equal to zero: the term it scales is skipped statically, as torch's `if wd != 0`."""
    return isinstance(x, (int, float)) and x == 0


def _ops(*values):
    """`(where, sqrt, maximum)` for these values: aotjax's ops if any is a Tensor, jax.numpy's otherwise."""
    if any(isinstance(v, Tensor) for v in values):
        return where, sqrt, maximum
    return jnp.where, jnp.sqrt, jnp.maximum


def _plus_scaled(x, scale, param):
    """`x + scale * param`, skipped where `scale` is zero: statically for a Python number, else by a select,
    so that a zero weight decay held in a tensor leaves an inf or nan parameter's update as torch's
    (which skips it) would, and not `0 * inf = nan`."""
    if _is_zero(scale):
        return x
    if isinstance(scale, (int, float)):
        return x + scale * param
    where_, _, _ = _ops(x, scale)
    return where_(scale == 0, x, x + scale * param)


def _as_float(count, like):
    """An integer step count (optax's int32) in `like`'s float dtype, so `beta ** count` is computed in the
    parameters' precision (an int Tensor would give the default float32 under torch's promotion rules)."""
    if count.dtype.kind not in "iu":
        return count
    return count.type_as(like) if isinstance(count, Tensor) else count.astype(like.dtype)


def sgd_update(param, grad, buf, step, *, lr, momentum, dampening, weight_decay, nesterov: bool,
               maximize: bool):
    """One step of SGD for one parameter, as `torch.optim.SGD`: returns `(update, new_buf)`.

    `buf` is the momentum buffer (`None`: no momentum, and `new_buf` is `None`); `step` counts the steps
    this parameter has taken (before this one): on its first step the buffer becomes the gradient itself,
    undampened, as torch's lazily created buffer does.

    >>> update, buf = sgd_update(aotjax.tensor([1.0]), aotjax.tensor([2.0]), None, 0, lr=0.1, momentum=0,
    ...                          dampening=0, weight_decay=0, nesterov=False, maximize=False)
    >>> update
    tensor([-0.2])
    """
    g = _plus_scaled(-grad if maximize else grad, weight_decay, param)
    if buf is not None:
        where_, _, _ = _ops(g, buf, step)
        buf = where_(step == 0, g, buf * momentum + (1 - dampening) * g)
        g = g + momentum * buf if nesterov else buf
    return -lr * g, buf


def adam_update(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step, *, lr, beta1, beta2, eps, weight_decay,
                decoupled: bool, amsgrad: bool, maximize: bool):
    """One step of Adam (AdamW with `decoupled`) for one parameter, as `torch.optim.Adam`: returns
    `(update, exp_avg, exp_avg_sq, max_exp_avg_sq, step)`, the state after this step (`step` counts it;
    `max_exp_avg_sq` is `None` unless `amsgrad`). Coupled weight decay adds `weight_decay * param` to the
    gradient; decoupled decay shrinks the parameter by `lr * weight_decay` (torch's AdamW, optax's adamw).

    >>> out = adam_update(aotjax.tensor([1.0]), aotjax.tensor([2.0]), aotjax.zeros(1), aotjax.zeros(1), None,
    ...                   aotjax.tensor(0.0), lr=0.1, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0,
    ...                   decoupled=False, amsgrad=False, maximize=False)
    >>> round(out[0].item(), 4), out[4]
    (-0.1, tensor(1.))
    """
    g = -grad if maximize else grad
    step = step + 1
    if not decoupled:
        g = _plus_scaled(g, weight_decay, param)
    _, sqrt_, maximum_ = _ops(g, exp_avg, step)
    exp_avg = exp_avg + (1 - beta1) * (g - exp_avg)  # torch's lerp_(g, 1 - beta1)
    exp_avg_sq = exp_avg_sq * beta2 + (1 - beta2) * (g * g)
    power = _as_float(step, exp_avg)
    bias_correction1 = 1 - beta1 ** power
    bias_correction2 = 1 - beta2 ** power
    if amsgrad:
        max_exp_avg_sq = maximum_(max_exp_avg_sq, exp_avg_sq)
    second = max_exp_avg_sq if amsgrad else exp_avg_sq
    denom = sqrt_(second) / sqrt_(bias_correction2) + eps
    update = -(lr / bias_correction1) * exp_avg / denom
    if decoupled:
        update = _plus_scaled(update, -(lr * weight_decay), param)
    return update, exp_avg, exp_avg_sq, max_exp_avg_sq, step
