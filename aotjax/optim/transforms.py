"""Pure optimizers with optax's `GradientTransformation` protocol: `sgd`, `adam`, `adamw` return
`GradientTransformation(init, update)` where `init(params) -> state` and `update(updates, state, params=None)
-> (updates, new_state)`; the updates are the negated step, to be added to the parameters (`apply_updates`).

They work on pytrees of jax arrays (inside `jax.jit`, and in `optax.chain` with optax's own transforms) and on
pytrees of aotjax Tensors (eagerly and inside `aotjax.jit`): the state is made of the same kind of values as
the parameters. The math is `aotjax.optim.updates`, shared with the torch-style classes, so `sgd`/`adam`/`adamw`
step exactly as `SGD`/`Adam`/`AdamW`, and as optax's functions of the same names where both exist. optax itself
is not needed.
"""
from __future__ import annotations

import numbers
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from aotjax.core.source_info import where
from aotjax.ops.base.data import tensor
from aotjax.ops.creation.factories import zeros, zeros_like
from aotjax.optim.updates import adam_update, sgd_update
from aotjax.tensor import Tensor

__all__ = ["GradientTransformation", "SgdState", "AdamState", "sgd", "adam", "adamw", "apply_updates"]


class GradientTransformation(NamedTuple):
    """optax's protocol, defined here so optax is not a dependency: `init(params) -> state` and
    `update(updates, state, params=None) -> (updates, new_state)`. `optax.chain` accepts it.

    >>> tx = aotjax.optim.sgd(0.1)
    >>> state = tx.init({'w': aotjax.zeros(2)})
    >>> updates, state = tx.update({'w': aotjax.ones(2)}, state)
    >>> updates['w']
    tensor([-0.1, -0.1])
    """
    init: Callable
    update: Callable


class SgdState(NamedTuple):
    """The state of `sgd`: the step count (int32) and the momentum buffers (`None` without momentum).

    >>> state = aotjax.optim.sgd(0.1, momentum=0.9).init([aotjax.zeros(2)])
    >>> state.count.dtype, state.momentum_buffer
    (dtype('int32'), [tensor([0., 0.])])
    """
    count: Any
    momentum_buffer: Any


class AdamState(NamedTuple):
    """The state of `adam`/`adamw`: the step count (int32), the first and second moments and, with amsgrad,
    the running maximum of the second moment (else `None`).

    >>> state = aotjax.optim.adam(0.1).init([aotjax.zeros(1)])
    >>> state.exp_avg, state.exp_avg_sq, state.max_exp_avg_sq
    ([tensor([0.])], [tensor([0.])], None)
    """
    count: Any
    exp_avg: Any
    exp_avg_sq: Any
    max_exp_avg_sq: Any


def _has_tensors(tree) -> bool:
    return any(isinstance(x, Tensor) for x in jax.tree_util.tree_leaves(tree))


def _zeros_like(tree):
    return jax.tree_util.tree_map(lambda x: zeros_like(x) if isinstance(x, Tensor) else jnp.zeros_like(x), tree)


def _zero_count(tree):
    return zeros((), dtype=np.int32) if _has_tensors(tree) else jnp.zeros((), jnp.int32)


def _learning_rate(learning_rate, count, tensors: bool):
    """The learning rate of this step: a constant, or a schedule called with the step count (before it)."""
    if not callable(learning_rate):
        return learning_rate
    try:
        lr = learning_rate(count)
    except (TypeError, ValueError) as e:
        if not tensors:
            raise
        raise TypeError("aotjax.optim: the learning-rate schedule failed on the step count, an aotjax Tensor (the "
                        "state holds Tensors because the parameters are Tensors). Write the schedule with Tensor "
                        "operations (e.g. `lambda count: 0.1 * 0.99 ** count`); optax's schedules are jax.numpy "
                        "code and take jax arrays.") from e
    if tensors and not isinstance(lr, (Tensor, int, float)):
        lr = tensor(np.asarray(lr))
    return lr


def _check_numbers(what: str, **values) -> None:
    """Each hyperparameter is a real number or a scalar (a jax array, a Tensor, a tracer of either); the learning
    rate may also be a schedule. A wrong one is refused here, not at the first `update`."""
    for name, value in values.items():
        if isinstance(value, numbers.Real) or (name == "learning_rate" and callable(value)):
            continue
        shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
        if shape is None or dtype is None or tuple(shape) != () or jnp.issubdtype(dtype, jnp.complexfloating):
            kinds = ("a real number, a scalar array or a schedule `count -> lr`" if name == "learning_rate" else
                     "a real number or a scalar array")
            raise TypeError(f"aotjax.optim.{what}: {name} must be {kinds}, got {value!r} of type "
                            f"{type(value).__name__}{where()}")


def _params_or_error(params, updates, needed: bool, what: str):
    if params is not None:
        return params
    if needed:
        raise ValueError(f"aotjax.optim.{what}: weight decay needs the parameters; call "
                         f"update(updates, state, params).")
    return jax.tree_util.tree_map(lambda _: None, updates)


def _mask_tree(mask, params):
    return mask(params) if callable(mask) else mask


def sgd(learning_rate, momentum=0.0, nesterov: bool = False, weight_decay=0.0, dampening=0.0,
        maximize: bool = False) -> GradientTransformation:
    """SGD as a `GradientTransformation`, with `torch.optim.SGD`'s formulas (coupled weight decay added to the
    gradient; the momentum buffer starts as the first gradient). Without weight decay and dampening it equals
    `optax.sgd(learning_rate, momentum, nesterov)`. `learning_rate` is a number or a schedule `count -> lr`.

    >>> tx = aotjax.optim.sgd(0.1, momentum=0.9)
    >>> params = [aotjax.tensor([1.0])]
    >>> state = tx.init(params)
    >>> for _ in range(2):
    ...     updates, state = tx.update([aotjax.tensor([1.0])], state)
    ...     params = aotjax.optim.apply_updates(params, updates)
    >>> params
    [tensor([0.71])]
    """
    _check_numbers("sgd", learning_rate=learning_rate, momentum=momentum, weight_decay=weight_decay,
                   dampening=dampening)
    if nesterov and (momentum == 0 or dampening != 0):
        raise ValueError("aotjax.optim.sgd: Nesterov momentum requires a momentum and zero dampening.")

    def init(params):
        buffers = _zeros_like(params) if momentum != 0 else None
        return SgdState(_zero_count(params), buffers)

    def update(updates, state, params=None):
        tensors = _has_tensors(updates)
        lr = _learning_rate(learning_rate, state.count, tensors)
        params = _params_or_error(params, updates, weight_decay != 0, "sgd")
        grads, treedef = jax.tree_util.tree_flatten(updates)
        ps = treedef.flatten_up_to(params)
        bufs = treedef.flatten_up_to(state.momentum_buffer) if momentum != 0 else [None] * len(grads)
        out = [sgd_update(p, g, b, state.count, lr=lr, momentum=momentum, dampening=dampening,
                          weight_decay=weight_decay, nesterov=nesterov, maximize=maximize)
               for p, g, b in zip(ps, grads, bufs)]
        new_updates = treedef.unflatten([u for u, _ in out])
        new_bufs = treedef.unflatten([b for _, b in out]) if momentum != 0 else None
        return new_updates, SgdState(state.count + 1, new_bufs)

    return GradientTransformation(init, update)


def _adam(learning_rate, b1, b2, eps, weight_decay, decoupled: bool, amsgrad: bool, maximize: bool, mask,
          what: str) -> GradientTransformation:
    _check_numbers(what, learning_rate=learning_rate, b1=b1, b2=b2, eps=eps, weight_decay=weight_decay)

    def init(params):
        return AdamState(_zero_count(params), _zeros_like(params), _zeros_like(params),
                         _zeros_like(params) if amsgrad else None)

    def update(updates, state, params=None):
        tensors = _has_tensors(updates)
        lr = _learning_rate(learning_rate, state.count, tensors)
        params = _params_or_error(params, updates, weight_decay != 0, what)
        grads, treedef = jax.tree_util.tree_flatten(updates)
        ps, ms, vs = (treedef.flatten_up_to(t) for t in (params, state.exp_avg, state.exp_avg_sq))
        vmaxes = treedef.flatten_up_to(state.max_exp_avg_sq) if amsgrad else [None] * len(grads)
        decays = treedef.flatten_up_to(_mask_tree(mask, params)) if mask is not None else [True] * len(grads)
        out = [adam_update(p, g, m, v, vmax, state.count, lr=lr, beta1=b1, beta2=b2, eps=eps,
                           weight_decay=weight_decay if decay else 0.0, decoupled=decoupled, amsgrad=amsgrad,
                           maximize=maximize)
               for p, g, m, v, vmax, decay in zip(ps, grads, ms, vs, vmaxes, decays)]
        new_updates, exp_avg, exp_avg_sq, max_sq = (treedef.unflatten([o[k] for o in out]) for k in range(4))
        return new_updates, AdamState(state.count + 1, exp_avg, exp_avg_sq, max_sq if amsgrad else None)

    return GradientTransformation(init, update)


def adam(learning_rate, b1=0.9, b2=0.999, eps=1e-8, *, weight_decay=0.0, amsgrad: bool = False,
         maximize: bool = False) -> GradientTransformation:
    """Adam as a `GradientTransformation`, with `torch.optim.Adam`'s formulas (`weight_decay` is coupled L2,
    added to the gradient; `amsgrad` uses the running maximum of the second moment). Without those it equals
    `optax.adam(learning_rate, b1, b2, eps)`. `learning_rate` is a number or a schedule `count -> lr`.

    >>> import jax.numpy as jnp
    >>> tx = aotjax.optim.adam(0.1)
    >>> state = tx.init({'w': jnp.zeros(2)})
    >>> updates, state = tx.update({'w': jnp.array([1.0, -3.0])}, state)
    >>> [round(u, 4) for u in updates['w'].tolist()], int(state.count)
    ([-0.1, 0.1], 1)
    """
    return _adam(learning_rate, b1, b2, eps, weight_decay, False, amsgrad, maximize, None, "adam")


def adamw(learning_rate, b1=0.9, b2=0.999, eps=1e-8, weight_decay=1e-4, *, mask=None, amsgrad: bool = False,
          maximize: bool = False) -> GradientTransformation:
    """AdamW as a `GradientTransformation`: Adam with decoupled weight decay (`update -= lr * weight_decay *
    param`), as `torch.optim.AdamW` and `optax.adamw`. `mask` (a pytree of bools like the parameters, or a
    function of the parameters returning one) limits the decay to the leaves marked True, as optax's.

    >>> tx = aotjax.optim.adamw(0.1, weight_decay=0.5)
    >>> params = [aotjax.tensor([1.0])]
    >>> state = tx.init(params)
    >>> updates, state = tx.update([aotjax.tensor([1.0])], state, params)
    >>> round(updates[0].item(), 4)
    -0.15
    """
    return _adam(learning_rate, b1, b2, eps, weight_decay, True, amsgrad, maximize, mask, "adamw")


def apply_updates(params, updates):
    """Add `updates` to `params` (pytrees of the same structure; a `None` update leaves its parameter alone).
    A Tensor parameter is updated IN PLACE (`p.add_(u)`, so views of it and the caller's tensors through a
    `jit` boundary see it) and returned; a jax array parameter gives a new array of its dtype, as
    `optax.apply_updates`. Either way the result is the new parameter tree, so `params = apply_updates(params,
    updates)` is right for both.

    >>> p = aotjax.tensor([1.0, 2.0])
    >>> out = aotjax.optim.apply_updates([p], [aotjax.tensor([0.5, 0.5])])
    >>> out[0] is p, p
    (True, tensor([1.5, 2.5]))
    """
    def apply(p, u):
        if u is None:
            return p
        if isinstance(p, Tensor):
            return p.add_(u)
        return jnp.asarray(p + u).astype(jnp.asarray(p).dtype)

    return jax.tree_util.tree_map(apply, params, updates)
