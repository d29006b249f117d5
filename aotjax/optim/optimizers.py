"""The torch-style optimizers: `SGD`, `Adam`, `AdamW`, with PyTorch's arguments and update formulas (the math
is `aotjax.optim.updates`, shared with the optax-style transforms). See `Optimizer` for what differs from
torch: state made in the constructor, hyperparameters as 0-d Tensors, gradients passed to `step(grads)`."""
from __future__ import annotations

from aotjax.ops.creation.factories import zeros, zeros_like
from aotjax.optim.optimizer import Optimizer, ParamGroup, _as_number
from aotjax.optim.updates import adam_update, sgd_update

__all__ = ["SGD", "Adam", "AdamW"]


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ValueError(message)


class SGD(Optimizer):
    """Stochastic gradient descent with optional momentum, dampening, Nesterov momentum and weight decay, as
    `torch.optim.SGD` (the momentum buffer starts as the first gradient, undampened). With `momentum != 0`
    each parameter's state is `{'momentum_buffer', 'step'}`, made now; whether momentum is zero is fixed at
    construction (assigning a zero momentum to a group built with one, or the reverse, raises).

    >>> w = aotjax.tensor([1.0, 2.0])
    >>> opt = aotjax.optim.SGD([w], lr=0.1, momentum=0.9)
    >>> for _ in range(2):
    ...     opt.step([aotjax.tensor([1.0, 1.0])])
    >>> w
    tensor([0.71, 1.71])
    """

    hyperparameters = ("lr", "momentum", "dampening", "weight_decay")
    flags = ("nesterov", "maximize")

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *,
                 maximize=False):
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                                      nesterov=nesterov, maximize=maximize))

    @classmethod
    def _validate(cls, v):
        for key in ("lr", "momentum", "weight_decay"):
            _check(v[key] is None or v[key] >= 0, f"SGD: invalid {key.replace('_', ' ')}: {v[key]} (must be >= 0).")
        _check(not v["nesterov"] or (v["momentum"] != 0 and v["dampening"] == 0),
               "SGD: Nesterov momentum requires a momentum and zero dampening.")

    @classmethod
    def _check_setting(cls, group: ParamGroup, key: str, value):
        if key == "momentum":
            old, new = _as_number(group[key]), _as_number(value)
            _check(old is None or new is None or (old == 0) == (new == 0),
                   f"SGD: this group was built with momentum {old:g}; setting {new:g} would "
                   f"{'need momentum buffers it lacks' if old == 0 else 'drop its momentum buffers'}. Build a new "
                   f"optimizer instead.")

    def _init_state(self, group, param):
        if _as_number(group["momentum"]) == 0:
            return {}
        return {"momentum_buffer": zeros_like(param), "step": zeros(())}

    def _update(self, param, grad, state, hyper, group):
        buf = state.get("momentum_buffer")
        step = state.get("step")
        update, new_buf = sgd_update(
            param.detach(), grad, None if buf is None else buf.detach(), None if step is None else step.detach(),
            lr=hyper["lr"], momentum=hyper["momentum"], dampening=hyper["dampening"],
            weight_decay=hyper["weight_decay"], nesterov=group["nesterov"], maximize=group["maximize"])
        param.add_(update)
        if buf is not None:
            buf.copy_(new_buf)
            step.add_(1)

    def _export_state(self, state):
        # NOTE: torch has no buffer before a parameter's first step (its first step then starts one from the
        # gradient, undampened): a never-stepped buffer is left out so torch reads the state the same way.
        if state and _as_number(state["step"]) == 0:
            return {}
        return dict(state)

    def _import_state(self, index, state, saved):
        if saved and "momentum_buffer" in saved and "step" not in saved:  # torch's: a buffer means it stepped
            saved = {**saved, "step": 1}
        super()._import_state(index, state, {k: v for k, v in saved.items() if k in state})


class Adam(Optimizer):
    """Adam, as `torch.optim.Adam` (coupled L2 weight decay, optional AMSGrad; `decoupled_weight_decay=True` is
    AdamW). Each parameter's state `{'step', 'exp_avg', 'exp_avg_sq'}` (and `'max_exp_avg_sq'` with amsgrad)
    is made now.

    >>> w = aotjax.tensor([1.0, 2.0])
    >>> opt = aotjax.optim.Adam([w], lr=0.1)
    >>> opt.step([aotjax.tensor([1.0, -2.0])])
    >>> [round(v, 5) for v in w.tolist()], opt.state[w]['step']
    ([0.9, 2.1], tensor(1.))
    """

    hyperparameters = ("lr", "betas", "eps", "weight_decay")
    flags = ("amsgrad", "maximize", "decoupled_weight_decay")

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *,
                 maximize=False, decoupled_weight_decay=False):
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      amsgrad=amsgrad, maximize=maximize,
                                      decoupled_weight_decay=decoupled_weight_decay))

    @classmethod
    def _validate(cls, v):
        name = cls.__name__
        for key in ("lr", "eps", "weight_decay"):
            _check(v[key] is None or v[key] >= 0, f"{name}: invalid {key.replace('_', ' ')}: {v[key]} (must be >= 0).")
        for i, beta in enumerate(v["betas"]):
            _check(beta is None or 0 <= beta < 1, f"{name}: invalid beta parameter at index {i}: {beta} (must be "
                                                  f"in [0, 1)).")

    def _init_state(self, group, param):
        state = {"step": zeros(()), "exp_avg": zeros_like(param), "exp_avg_sq": zeros_like(param)}
        if group["amsgrad"]:
            state["max_exp_avg_sq"] = zeros_like(param)
        return state

    def _update(self, param, grad, state, hyper, group):
        beta1, beta2 = hyper["betas"]
        max_sq = state.get("max_exp_avg_sq")
        update, *new = adam_update(
            param.detach(), grad, state["exp_avg"].detach(), state["exp_avg_sq"].detach(),
            None if max_sq is None else max_sq.detach(), state["step"].detach(), lr=hyper["lr"], beta1=beta1,
            beta2=beta2, eps=hyper["eps"], weight_decay=hyper["weight_decay"],
            decoupled=group["decoupled_weight_decay"], amsgrad=group["amsgrad"], maximize=group["maximize"])
        param.add_(update)
        for key, value in zip(("exp_avg", "exp_avg_sq", "max_exp_avg_sq", "step"), new):
            if key in state:
                state[key].copy_(value)


class AdamW(Adam):
    """AdamW, as `torch.optim.AdamW`: Adam with decoupled weight decay (each step first shrinks the parameter
    by `lr * weight_decay`), default `weight_decay=1e-2`.

    >>> w = aotjax.tensor([1.0])
    >>> opt = aotjax.optim.AdamW([w], lr=0.1, weight_decay=0.5)
    >>> opt.step([aotjax.tensor([1.0])])
    >>> w
    tensor([0.85])
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize,
                         decoupled_weight_decay=True)
