"""The update math, one function per algorithm, shared by the torch-style optimizers (`SGD`, `Adam`, `RMSprop`,
...) and the optax-style transforms (`sgd`, `adam`, `adamw`).

Each function takes one parameter's values (aotjax Tensors, or jax arrays) and returns new values: the
update to ADD to the parameter (the negated step, as optax's `updates`) and the new state. It writes
nothing; the torch-style classes write the results in place, the transforms return them. Hyperparameters
may be Python numbers, 0-d Tensors or 0-d jax arrays. The formulas are PyTorch's documented algorithms
(`help(torch.optim.NAdam)`), which optax's `sgd`/`adam`/`adamw` agree with where both exist.

`sgd_update` and `adam_update` take their state as arguments; the others take `state`, a dict named as torch's
`state_dict()` names it (`'step'`, `'square_avg'`, ...; `'step'` counts the steps taken before this one), and
return `(update, new_state)` with the same keys. An optional entry present in `state` selects its variant (RMSprop's
`'momentum_buffer'`: momentum; `'grad_avg'`: centered).
"""
from __future__ import annotations

import math
from typing import Callable, NamedTuple

import jax.numpy as jnp

from aotjax.ops.math.elementwise import abs as abs_
from aotjax.ops.math.elementwise import clamp, expm1, log, log1p, maximum, sign, sqrt, where
from aotjax.tensor import Tensor

__all__ = ["sgd_update", "adam_update", "adamax_update", "nadam_update", "radam_update", "asgd_update",
           "rmsprop_update", "adagrad_update", "adadelta_update", "rprop_update"]


class _Ops(NamedTuple):
    """The elementwise functions the formulas use, for one kind of value."""
    where: Callable
    sqrt: Callable
    maximum: Callable
    abs: Callable
    sign: Callable
    log: Callable
    log1p: Callable
    expm1: Callable
    clip: Callable


_TENSOR_OPS = _Ops(where, sqrt, maximum, abs_, sign, log, log1p, expm1, clamp)
_JAX_OPS = _Ops(jnp.where, jnp.sqrt, jnp.maximum, jnp.abs, jnp.sign, jnp.log, jnp.log1p, jnp.expm1, jnp.clip)


def _is_zero(x) -> bool:
    """A Python number equal to zero: the term it scales is skipped statically, as torch's `if wd != 0`."""
    return isinstance(x, (int, float)) and x == 0


def _ops(*values) -> _Ops:
    """The functions for these values: aotjax's ops if any is a Tensor, jax.numpy's otherwise."""
    return _TENSOR_OPS if any(isinstance(v, Tensor) for v in values) else _JAX_OPS


def _plus_scaled(x, scale, param):
    """`x + scale * param`, skipped where `scale` is zero: statically for a Python number, else by a select,
    so that a zero weight decay held in a tensor leaves an inf or nan parameter's update as torch's
    (which skips it) would, and not `0 * inf = nan`."""
    if _is_zero(scale):
        return x
    if isinstance(scale, (int, float)):
        return x + scale * param
    return _ops(x, scale).where(scale == 0, x, x + scale * param)


def _as_float(count, like):
    """An integer step count (optax's int32) in `like`'s float dtype, so `beta ** count` is computed in the
    parameters' precision (an int Tensor would give the default float32 under torch's promotion rules)."""
    if count.dtype.kind not in "iu":
        return count
    return count.type_as(like) if isinstance(count, Tensor) else count.astype(like.dtype)


def _cast(x, like):
    """`x` in `like`'s dtype (a Python number is left as it is)."""
    if isinstance(x, (int, float)) or x.dtype == like.dtype:
        return x
    return x.type_as(like) if isinstance(x, Tensor) else x.astype(like.dtype)


def _one_minus_power(beta, count, ops: _Ops):
    """`1 - beta ** count` (a bias correction), as `-expm1(count * log(beta))`: for beta near 1, `beta ** count` is
    near 1 and `1 - beta ** count` would lose most of its digits in float32."""
    log_beta = (math.log(beta) if beta > 0 else -math.inf) if isinstance(beta, (int, float)) else ops.log(beta)
    return -ops.expm1(count * log_beta)


def _coupled_decay(g, param, weight_decay, decoupled: bool):
    """Coupled (L2) weight decay: `weight_decay * param` added to the gradient; nothing if `decoupled`."""
    return g if decoupled else _plus_scaled(g, weight_decay, param)


def _decoupled_decay(update, param, lr, weight_decay, decoupled: bool):
    """Decoupled weight decay: the parameter shrinks by `lr * weight_decay` (torch's `param.mul_(1 - lr *
    weight_decay)` before the step); nothing unless `decoupled`."""
    return _plus_scaled(update, -(lr * weight_decay), param) if decoupled else update


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
        buf = _ops(g, buf, step).where(step == 0, g, buf * momentum + (1 - dampening) * g)
        g = g + momentum * buf if nesterov else buf
    return -lr * g, buf


def adam_update(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step, *, lr, beta1, beta2, eps, weight_decay,
                decoupled: bool, amsgrad: bool, maximize: bool, scalars: "AdamScalars | None" = None):
    """One step of Adam (AdamW with `decoupled`) for one parameter, as `torch.optim.Adam`: returns
    `(update, exp_avg, exp_avg_sq, max_exp_avg_sq, step)`, the state after this step (`step` counts it;
    `max_exp_avg_sq` is `None` unless `amsgrad`; `scalars`: this parameter's `adam_scalars`, when computed for
    many at once). Coupled weight decay adds `weight_decay * param` to the
    gradient; decoupled decay shrinks the parameter by `lr * weight_decay` (torch's AdamW, optax's adamw).

    >>> out = adam_update(aotjax.tensor([1.0]), aotjax.tensor([2.0]), aotjax.zeros(1), aotjax.zeros(1), None,
    ...                   aotjax.tensor(0.0), lr=0.1, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0,
    ...                   decoupled=False, amsgrad=False, maximize=False)
    >>> round(out[0].item(), 4), out[4]
    (-0.1, tensor(1.))
    """
    s = scalars if scalars is not None else adam_scalars(step, lr=lr, beta1=beta1, beta2=beta2, like=exp_avg)
    g = _coupled_decay(-grad if maximize else grad, param, weight_decay, decoupled)
    ops = _ops(g, exp_avg, s.step)
    exp_avg = exp_avg + (1 - beta1) * (g - exp_avg)  # torch's lerp_(g, 1 - beta1)
    exp_avg_sq = exp_avg_sq * beta2 + (1 - beta2) * (g * g)
    if amsgrad:
        max_exp_avg_sq = ops.maximum(max_exp_avg_sq, exp_avg_sq)
    second = max_exp_avg_sq if amsgrad else exp_avg_sq
    root = ops.sqrt(second)
    inverse = s.inverse_bias_correction2_sqrt
    denom = (root / s.bias_correction2_sqrt if inverse is None else root * inverse) + eps
    update = -s.step_size * exp_avg / denom
    return _decoupled_decay(update, param, lr, weight_decay, decoupled), exp_avg, exp_avg_sq, max_exp_avg_sq, s.step


class AdamScalars(NamedTuple):
    """What a step of Adam computes from the step count alone: the count after the step, `lr / (1 - beta1 **
    step)` and `sqrt(1 - beta2 ** step)` (one parameter's, or a vector of many parameters' at once); computed for
    many parameters at once, also the reciprocal of the last, which the update multiplies by (what XLA makes of the
    division by a scalar anyway: computed once for all, not in a kernel of its own per parameter)."""
    step: object
    step_size: object
    bias_correction2_sqrt: object
    inverse_bias_correction2_sqrt: object = None


def adam_scalars(step, *, lr, beta1, beta2, like) -> AdamScalars:
    """`AdamScalars` for the count `step` before this step (`like`: a value in the parameters' float dtype). Given
    the stacked counts of a group's parameters, one vector computation replaces a chain of scalar ops per
    parameter (in a compiled step, a few fused kernels instead of several per parameter).

    >>> adam_scalars(aotjax.tensor([0.0, 1.0]), lr=0.1, beta1=0.5, beta2=0.75, like=aotjax.zeros(1)).step.tolist()
    [1.0, 2.0]
    """
    step = step + 1
    ops = _ops(step)
    power = _as_float(step, like)
    return AdamScalars(step, lr / _one_minus_power(beta1, power, ops), ops.sqrt(_one_minus_power(beta2, power, ops)))


def _lerp(start, end, weight):
    """torch's `start.lerp_(end, weight)` for a moving average."""
    return start + weight * (end - start)


def adamax_update(param, grad, state, *, lr, beta1, beta2, eps, weight_decay, maximize: bool):
    """One step of Adamax for one parameter, as `torch.optim.Adamax`: Adam with the infinity norm; `state` is
    `{'step', 'exp_avg', 'exp_inf'}`.

    >>> update, new = adamax_update(aotjax.tensor([1.0]), aotjax.tensor([2.0]), {'step': aotjax.tensor(0.0),
    ...     'exp_avg': aotjax.zeros(1), 'exp_inf': aotjax.zeros(1)}, lr=0.1, beta1=0.9, beta2=0.999, eps=1e-8,
    ...     weight_decay=0, maximize=False)
    >>> round(update.item(), 4), new['step']
    (-0.1, tensor(1.))
    """
    ops = _ops(param, grad)
    step = state["step"] + 1
    g = _plus_scaled(-grad if maximize else grad, weight_decay, param)
    exp_avg = _lerp(state["exp_avg"], g, 1 - beta1)
    exp_inf = ops.maximum(state["exp_inf"] * beta2, ops.abs(g) + eps)
    bias_correction = _one_minus_power(beta1, _as_float(step, param), ops)
    update = -(lr / bias_correction) * exp_avg / exp_inf
    return update, {"step": step, "exp_avg": exp_avg, "exp_inf": exp_inf}


def nadam_update(param, grad, state, *, lr, beta1, beta2, eps, weight_decay, momentum_decay, decoupled: bool,
                 maximize: bool):
    """One step of NAdam for one parameter, as `torch.optim.NAdam` (Adam with Nesterov momentum, its momentum
    warmed up by `momentum_decay`); `state` is `{'step', 'mu_product', 'exp_avg', 'exp_avg_sq'}`, `mu_product`
    starting at 1.

    >>> update, new = nadam_update(aotjax.tensor([1.0]), aotjax.tensor([2.0]), {'step': aotjax.tensor(0.0),
    ...     'mu_product': aotjax.tensor(1.0), 'exp_avg': aotjax.zeros(1), 'exp_avg_sq': aotjax.zeros(1)}, lr=0.1,
    ...     beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0, momentum_decay=4e-3, decoupled=False, maximize=False)
    >>> round(update.item(), 4), round(new['mu_product'].item(), 4)
    (-0.1056, 0.4501)
    """
    ops = _ops(param, grad)
    step = state["step"] + 1
    g = _coupled_decay(-grad if maximize else grad, param, weight_decay, decoupled)
    t = _as_float(step, param)
    mu = beta1 * (1 - 0.5 * 0.96 ** (t * momentum_decay))
    mu_next = beta1 * (1 - 0.5 * 0.96 ** ((t + 1) * momentum_decay))
    mu_product = state["mu_product"] * _cast(mu, state["mu_product"])  # NOTE: in the state's dtype, as torch's
    exp_avg = _lerp(state["exp_avg"], g, 1 - beta1)
    exp_avg_sq = state["exp_avg_sq"] * beta2 + (1 - beta2) * (g * g)
    denom = ops.sqrt(exp_avg_sq / _one_minus_power(beta2, t, ops)) + eps
    product = _cast(mu_product, mu)  # NOTE: the coefficients in the hyperparameters' precision, as torch's doubles
    update = (-lr * (1 - mu) / (1 - product)) * g / denom
    update = update + (-lr * mu_next / (1 - product * mu_next)) * exp_avg / denom
    new = {"step": step, "mu_product": mu_product, "exp_avg": exp_avg, "exp_avg_sq": exp_avg_sq}
    return _decoupled_decay(update, param, lr, weight_decay, decoupled), new


def radam_update(param, grad, state, *, lr, beta1, beta2, eps, weight_decay, decoupled: bool, maximize: bool):
    """One step of RAdam for one parameter, as `torch.optim.RAdam`: Adam whose adaptive term is rectified, and
    left out while the variance of its estimate is intractable (`rho_t <= 5`); `state` is `{'step', 'exp_avg',
    'exp_avg_sq'}`.

    >>> update, new = radam_update(aotjax.tensor([1.0]), aotjax.tensor([2.0]), {'step': aotjax.tensor(0.0),
    ...     'exp_avg': aotjax.zeros(1), 'exp_avg_sq': aotjax.zeros(1)}, lr=0.1, beta1=0.9, beta2=0.999, eps=1e-8,
    ...     weight_decay=0, decoupled=False, maximize=False)
    >>> round(update.item(), 4)
    -0.2
    """
    ops = _ops(param, grad)
    step = state["step"] + 1
    g = _coupled_decay(-grad if maximize else grad, param, weight_decay, decoupled)
    t = _as_float(step, param)
    exp_avg = _lerp(state["exp_avg"], g, 1 - beta1)
    exp_avg_sq = state["exp_avg_sq"] * beta2 + (1 - beta2) * (g * g)
    bias_corrected = exp_avg * (lr / _one_minus_power(beta1, t, ops))
    rho_inf = 2 / (1 - beta2) - 1
    rho_t = _radam_rho(beta2, t, ops)
    rect = ops.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
    adaptive = ops.sqrt(_one_minus_power(beta2, t, ops)) / (ops.sqrt(exp_avg_sq) + eps)
    # NOTE: the unused side of the select may be nan (rect of rho_t <= 4): it is not differentiated
    update = ops.where(rho_t > 5, -(bias_corrected * adaptive * rect), -bias_corrected)
    new = {"step": step, "exp_avg": exp_avg, "exp_avg_sq": exp_avg_sq}
    return _decoupled_decay(update, param, lr, weight_decay, decoupled), new


def _radam_rho(beta2, t, ops: _Ops):
    """RAdam's `rho_t = rho_inf - 2 t beta2^t / (1 - beta2^t)`, with `rho_inf = 2 / (1 - beta2) - 1`.

    NOTE: for beta2 near 1 and small t the two terms are ~2/(1 - beta2) each and rho_t ~ t: computed as written,
    float32 loses ~0.01 of it (enough to move the `rho_t > 5` switch a step). With c = 1 - beta2, L = log(beta2),
    x = t L, m = -L / c and h(x) = x / (1 - e^-x), rho_t = (2 (m - 1) - c m - 2 (h(x) - 1)) / (c m), where m - 1 and
    h - 1 are summed as series when small. For beta2 <= 1/2 rho_t <= rho_inf <= 3: the plain formula serves."""
    c = (1 - beta2) + 0 * t  # NOTE: a value of t's kind, also for a Python number beta2
    small = ops.clip(c, 1e-30, 0.5)  # NOTE: keeps the stable side finite where the plain one is selected
    log_beta = ops.log1p(-small)
    m1 = ops.where(small < 0.1, small * _series(small, [1 / k for k in range(2, 14)]), -log_beta / small - 1)
    x = t * log_beta
    h1 = ops.where(-x < 0.5, x * _series(x, [1 / 2, 1 / 12, 0, -1 / 720, 0, 1 / 30240, 0, -1 / 1209600]),
                   x / -ops.expm1(-x) - 1)
    stable = (2 * m1 - small * (1 + m1) - 2 * h1) / (small * (1 + m1))
    power = beta2 ** t
    plain = 2 / c - 1 - 2 * t * power / (1 - power)
    return ops.where(c <= 0.5, stable, plain)


def _series(x, coefficients):
    """`sum(coefficients[k] * x ** k)`, by Horner's rule."""
    out = 0 * x + coefficients[-1]
    for a in coefficients[-2::-1]:
        out = out * x + a
    return out


def asgd_update(param, grad, state, *, lr, lambd, alpha, t0, weight_decay, maximize: bool):
    """One step of averaged SGD for one parameter, as `torch.optim.ASGD`; `state` is `{'step', 'eta', 'mu',
    'ax'}`: the step size `eta` (`lr` at the first step), the averaging rate `mu` and the average `ax`.

    >>> update, new = asgd_update(aotjax.tensor([1.0]), aotjax.tensor([2.0]), {'step': aotjax.tensor(0.0),
    ...     'eta': aotjax.tensor(0.1), 'mu': aotjax.tensor(1.0), 'ax': aotjax.zeros(1)}, lr=0.1, lambd=0.0,
    ...     alpha=0.75, t0=1e6, weight_decay=0, maximize=False)
    >>> round(update.item(), 4), new['ax']
    (-0.2, tensor([0.8]))
    """
    ops = _ops(param, grad)
    g = _plus_scaled(-grad if maximize else grad, weight_decay, param)
    eta = ops.where(state["step"] == 0, _cast(lr, state["eta"]), state["eta"])  # NOTE: torch's eta is lr at first
    step = state["step"] + 1
    update = -(lambd * eta) * param - eta * g
    new_param = param + update  # NOTE: what `param.add_(update)` will hold: ax averages the updated parameter
    ax = ops.where(state["mu"] == 1, new_param, state["ax"] + (new_param - state["ax"]) * state["mu"])
    t = _as_float(step, param)
    new = {"step": step, "eta": lr / (1 + lambd * lr * t) ** alpha, "mu": 1 / ops.clip(t - t0, 1, None), "ax": ax}
    return update, new


def rmsprop_update(param, grad, state, *, lr, alpha, eps, weight_decay, momentum, maximize: bool):
    """One step of RMSprop for one parameter, as `torch.optim.RMSprop`; `state` is `{'step', 'square_avg'}`,
    with `'momentum_buffer'` for momentum and `'grad_avg'` for the centered variant.

    >>> update, new = rmsprop_update(aotjax.tensor([1.0]), aotjax.tensor([2.0]), {'step': aotjax.tensor(0.0),
    ...     'square_avg': aotjax.zeros(1)}, lr=0.01, alpha=0.75, eps=1e-8, weight_decay=0, momentum=0,
    ...     maximize=False)
    >>> round(update.item(), 4), new['square_avg']
    (-0.02, tensor([1.]))
    """
    ops = _ops(param, grad)
    g = _plus_scaled(-grad if maximize else grad, weight_decay, param)
    square_avg = state["square_avg"] * alpha + (1 - alpha) * (g * g)
    new = {"step": state["step"] + 1, "square_avg": square_avg}
    if "grad_avg" in state:
        new["grad_avg"] = _lerp(state["grad_avg"], g, 1 - alpha)
        avg = ops.sqrt(square_avg - new["grad_avg"] * new["grad_avg"]) + eps
    else:
        avg = ops.sqrt(square_avg) + eps
    if "momentum_buffer" not in state:
        return -lr * (g / avg), new
    new["momentum_buffer"] = state["momentum_buffer"] * momentum + g / avg
    return -lr * new["momentum_buffer"], new


def adagrad_update(param, grad, state, *, lr, lr_decay, weight_decay, eps, maximize: bool):
    """One step of Adagrad for one parameter, as `torch.optim.Adagrad`; `state` is `{'step', 'sum'}`, `sum`
    starting at `initial_accumulator_value`.

    >>> update, new = adagrad_update(aotjax.tensor([1.0]), aotjax.tensor([2.0]), {'step': aotjax.tensor(0.0),
    ...     'sum': aotjax.zeros(1)}, lr=0.1, lr_decay=0, weight_decay=0, eps=1e-10, maximize=False)
    >>> round(update.item(), 4), new['sum']
    (-0.1, tensor([4.]))
    """
    ops = _ops(param, grad)
    step = state["step"] + 1
    g = _plus_scaled(-grad if maximize else grad, weight_decay, param)
    total = state["sum"] + g * g
    learning_rate = lr / (1 + (_as_float(step, param) - 1) * lr_decay)
    return -learning_rate * (g / (ops.sqrt(total) + eps)), {"step": step, "sum": total}


def adadelta_update(param, grad, state, *, lr, rho, eps, weight_decay, maximize: bool):
    """One step of Adadelta for one parameter, as `torch.optim.Adadelta`; `state` is `{'step', 'square_avg',
    'acc_delta'}`.

    >>> update, new = adadelta_update(aotjax.tensor([1.0]), aotjax.tensor([2.0]), {'step': aotjax.tensor(0.0),
    ...     'square_avg': aotjax.zeros(1), 'acc_delta': aotjax.zeros(1)}, lr=1.0, rho=0.9, eps=1e-6,
    ...     weight_decay=0, maximize=False)
    >>> round(update.item(), 5)
    -0.00316
    """
    ops = _ops(param, grad)
    g = _plus_scaled(-grad if maximize else grad, weight_decay, param)
    square_avg = state["square_avg"] * rho + (1 - rho) * (g * g)
    delta = ops.sqrt(state["acc_delta"] + eps) / ops.sqrt(square_avg + eps) * g
    acc_delta = state["acc_delta"] * rho + (1 - rho) * (delta * delta)
    return -lr * delta, {"step": state["step"] + 1, "square_avg": square_avg, "acc_delta": acc_delta}


def rprop_update(param, grad, state, *, lr, etaminus, etaplus, step_size_min, step_size_max, maximize: bool):
    """One step of Rprop for one parameter, as `torch.optim.Rprop`: each entry moves by its own step size
    against the gradient's sign, the step size growing by `etaplus` while the sign holds and shrinking by
    `etaminus` when it flips (that entry then pauses a step); `state` is `{'step', 'prev', 'step_size'}`, the step
    size `lr` at the first step.

    >>> update, new = rprop_update(aotjax.tensor([1.0, 1.0]), aotjax.tensor([2.0, -1.0]),
    ...     {'step': aotjax.tensor(1.0), 'prev': aotjax.tensor([1.0, 1.0]), 'step_size': aotjax.tensor([0.1, 0.1])},
    ...     lr=0.1, etaminus=0.5, etaplus=1.2, step_size_min=1e-6, step_size_max=50, maximize=False)
    >>> update, new['step_size'], new['prev']
    (tensor([-0.12, -0.  ]), tensor([0.12, 0.05]), tensor([2., 0.]))
    """
    ops = _ops(param, grad)
    g = -grad if maximize else grad
    step_size = ops.where(state["step"] == 0, lr, state["step_size"])  # NOTE: torch makes it lr at the first step
    product = g * state["prev"]
    factor = ops.where(product > 0, etaplus, ops.where(product < 0, etaminus, 1.0))
    step_size = ops.clip(step_size * factor, step_size_min, step_size_max)
    g = ops.where(factor == etaminus, 0.0, g)
    return -ops.sign(g) * step_size, {"step": state["step"] + 1, "prev": g, "step_size": step_size}
