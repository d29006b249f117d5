"""The torch-style optimizers of the SGD and Adam families: `SGD`, `ASGD`, `Adam`, `AdamW`, `Adamax`, `NAdam`,
`RAdam`, with PyTorch's arguments and update formulas (the math is `aotjax.optim.updates`, shared with the
optax-style transforms). See `Optimizer` for what differs from torch: state made in the constructor,
hyperparameters as 0-d Tensors, gradients also passed to `step(grads)`."""
from __future__ import annotations

from aotjax.core.source_info import where
from aotjax.ops.base.promotion import result_type
from aotjax.ops.creation.factories import ones, zeros, zeros_like
from aotjax.ops.shape.copies import stack
from aotjax.optim.optimizer import Optimizer, _as_number, _check_betas, _check_nonnegative
from aotjax.optim.updates import (
    AdamScalars,
    adam_scalars,
    adam_update,
    adamax_update,
    asgd_update,
    nadam_update,
    radam_update,
    sgd_update,
)

__all__ = ["SGD", "ASGD", "Adam", "AdamW", "Adamax", "NAdam", "RAdam"]


class SGD(Optimizer):
    """Stochastic gradient descent with optional momentum, dampening, Nesterov momentum and weight decay, as
    `torch.optim.SGD` (the momentum buffer starts as the first gradient, undampened). With `momentum != 0`
    each parameter's state is `{'momentum_buffer', 'step'}`, made now (`state_dict()` shows the buffer alone,
    as torch's); whether momentum is zero is fixed at construction (assigning a zero momentum to a group built
    with one, or the reverse, raises). `foreach`, `differentiable` and `fused` are accepted and change nothing.

    >>> w = aotjax.tensor([1.0, 2.0])
    >>> opt = aotjax.optim.SGD([w], lr=0.1, momentum=0.9)
    >>> for _ in range(2):
    ...     opt.step([aotjax.tensor([1.0, 1.0])])
    >>> w
    tensor([0.71, 1.71])
    """

    hyperparameters = ("lr", "momentum", "dampening", "weight_decay")
    flags = ("nesterov", "maximize")
    zero_fixed = {"momentum": "momentum buffers"}

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *,
                 maximize=False, foreach=None, differentiable=False, fused=None):
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                                      nesterov=nesterov, maximize=maximize, foreach=foreach,
                                      differentiable=differentiable, fused=fused))

    @classmethod
    def _validate(cls, v):
        _check_nonnegative(cls, v, "lr", "momentum", "weight_decay")
        momentum, dampening = v["momentum"], v["dampening"]
        if v["nesterov"] and momentum is not None and dampening is not None and (momentum <= 0 or dampening != 0):
            raise ValueError(f"SGD: Nesterov momentum requires a momentum and zero dampening; got momentum "
                             f"{momentum} and dampening {dampening}{where()}")

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
        # NOTE: torch keeps the buffer alone, and has none before a parameter's first step (that step then starts
        # one from the gradient, undampened): the step count is ours, and a never-stepped buffer is left out.
        if not state or _as_number(state["step"]) == 0:
            return {}
        return {"momentum_buffer": state["momentum_buffer"]}

    def _import_state(self, index, group, param, saved):
        if saved and "momentum_buffer" in saved and "step" not in saved:  # torch's: a buffer means it stepped
            saved = {**saved, "step": 1}
        state = self.state[index]
        super()._import_state(index, group, param, {k: v for k, v in saved.items() if k in state})


class ASGD(Optimizer):
    """Averaged stochastic gradient descent, as `torch.optim.ASGD`: SGD with a decaying step size `eta = lr /
    (1 + lambd * lr * t) ** alpha` and the running average `ax` of the parameters from step `t0` on. Each
    parameter's state is `{'step', 'eta', 'mu', 'ax'}`, made now. `foreach`, `differentiable` and `capturable`
    are accepted and change nothing.

    >>> w = aotjax.tensor([1.0, 2.0])
    >>> opt = aotjax.optim.ASGD([w], lr=0.5, lambd=0.0, t0=0)
    >>> for _ in range(3):
    ...     opt.step([aotjax.tensor([1.0, 2.0])])
    >>> w, opt.state[w]['ax']
    (tensor([-0.5, -1. ]), tensor([-0.25, -0.5 ]))
    """

    hyperparameters = ("lr", "lambd", "alpha", "t0", "weight_decay")
    flags = ("maximize",)

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0, foreach=None,
                 maximize=False, differentiable=False, capturable=False):
        super().__init__(params, dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
                                      foreach=foreach, maximize=maximize, differentiable=differentiable,
                                      capturable=capturable))

    @classmethod
    def _validate(cls, v):
        _check_nonnegative(cls, v, "lr", "weight_decay")

    def _init_state(self, group, param):
        eta = zeros(())
        eta.copy_(group["lr"])
        return {"step": zeros(()), "eta": eta, "mu": ones(()), "ax": zeros_like(param)}

    def _rule(self, param, grad, state, hyper, group):
        return asgd_update(param, grad, state, lr=hyper["lr"], lambd=hyper["lambd"], alpha=hyper["alpha"],
                           t0=hyper["t0"], weight_decay=hyper["weight_decay"], maximize=group["maximize"])


class _AdamFamily(Optimizer):
    """What Adam, Adamax, NAdam and RAdam share: `lr`, `betas`, `eps`, `weight_decay` and their checks."""

    pairs = ("betas",)

    @classmethod
    def _validate(cls, v):
        _check_nonnegative(cls, v, "lr", "eps", *(k for k in ("weight_decay", "momentum_decay") if k in v))
        _check_betas(cls, v["betas"])


class Adam(_AdamFamily):
    """Adam, as `torch.optim.Adam` (coupled L2 weight decay, optional AMSGrad; `decoupled_weight_decay=True` is
    AdamW). Each parameter's state `{'step', 'exp_avg', 'exp_avg_sq'}` (and `'max_exp_avg_sq'` with amsgrad)
    is made now. `foreach`, `capturable`, `differentiable` and `fused` are accepted and change nothing.

    >>> w = aotjax.tensor([1.0, 2.0])
    >>> opt = aotjax.optim.Adam([w], lr=0.1)
    >>> opt.step([aotjax.tensor([1.0, -2.0])])
    >>> [round(v, 5) for v in w.tolist()], opt.state[w]['step']
    ([0.9, 2.1], tensor(1.))
    """

    hyperparameters = ("lr", "betas", "eps", "weight_decay")
    flags = ("amsgrad", "maximize", "decoupled_weight_decay")

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *,
                 foreach=None, maximize=False, capturable=False, differentiable=False, fused=None,
                 decoupled_weight_decay=False):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      amsgrad=amsgrad, maximize=maximize, foreach=foreach, capturable=capturable,
                                      differentiable=differentiable, fused=fused,
                                      decoupled_weight_decay=decoupled_weight_decay))

    def _init_state(self, group, param):
        state = {"step": zeros(()), "exp_avg": zeros_like(param), "exp_avg_sq": zeros_like(param)}
        if group["amsgrad"]:
            state["max_exp_avg_sq"] = zeros_like(param)
        return state

    def _group_scalars(self, group, states: list, hyper: dict):
        """The step's scalars of the group's stepping parameters (their `states`), computed for all at once from
        their stacked step counts (each parameter keeps its own count, as torch's); None to leave each parameter
        to compute its own (one parameter, or counts of different dtypes, as a loaded state may have)."""
        steps = [s["step"].detach() for s in states]
        if len(steps) < 2 or any(t.shape != () or t.dtype != steps[0].dtype for t in steps) or \
                not steps[0].is_floating_point():
            return None
        beta1, beta2 = hyper["betas"]
        # NOTE: in the dtype one parameter's 0-d ops give (a float64 `lr` tensor makes them float64, as torch's
        # Python-float bias corrections), not the vector's: a 0-d tensor does not promote a vector
        dtype = result_type(steps[0], hyper["lr"], beta1, beta2)
        s = adam_scalars(stack(steps).to(dtype), lr=hyper["lr"], beta1=beta1, beta2=beta2, like=steps[0])
        inverse = 1 / s.bias_correction2_sqrt
        return [AdamScalars(s.step[i], s.step_size[i], s.bias_correction2_sqrt[i], inverse[i])
                for i in range(len(steps))]

    def _update(self, param, grad, state, hyper, group, scalars=None):
        beta1, beta2 = hyper["betas"]
        max_sq = state.get("max_exp_avg_sq")
        update, *new = adam_update(
            param.detach(), grad, state["exp_avg"].detach(), state["exp_avg_sq"].detach(),
            None if max_sq is None else max_sq.detach(), state["step"].detach(), lr=hyper["lr"], beta1=beta1,
            beta2=beta2, eps=hyper["eps"], weight_decay=hyper["weight_decay"],
            decoupled=group["decoupled_weight_decay"], amsgrad=group["amsgrad"], maximize=group["maximize"],
            scalars=scalars)
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
                 maximize=False, foreach=None, capturable=False, differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach, maximize=maximize,
                         capturable=capturable, differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)


class Adamax(_AdamFamily):
    """Adamax, as `torch.optim.Adamax`: Adam with the infinity norm in place of the second moment. Each
    parameter's state `{'step', 'exp_avg', 'exp_inf'}` is made now. `foreach`, `differentiable` and
    `capturable` are accepted and change nothing.

    >>> w = aotjax.tensor([1.0, 2.0])
    >>> opt = aotjax.optim.Adamax([w], lr=0.1)
    >>> opt.step([aotjax.tensor([1.0, -2.0])])
    >>> [round(v, 5) for v in w.tolist()], sorted(opt.state[w])
    ([0.9, 2.1], ['exp_avg', 'exp_inf', 'step'])
    """

    hyperparameters = ("lr", "betas", "eps", "weight_decay")
    flags = ("maximize",)

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, foreach=None, *,
                 maximize=False, differentiable=False, capturable=False):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      foreach=foreach, maximize=maximize, differentiable=differentiable,
                                      capturable=capturable))

    def _init_state(self, group, param):
        return {"step": zeros(()), "exp_avg": zeros_like(param), "exp_inf": zeros_like(param)}

    def _rule(self, param, grad, state, hyper, group):
        beta1, beta2 = hyper["betas"]
        return adamax_update(param, grad, state, lr=hyper["lr"], beta1=beta1, beta2=beta2, eps=hyper["eps"],
                             weight_decay=hyper["weight_decay"], maximize=group["maximize"])


class NAdam(_AdamFamily):
    """NAdam, as `torch.optim.NAdam`: Adam with Nesterov momentum, the momentum warmed up by `momentum_decay`;
    coupled L2 weight decay, or decoupled (AdamW's) with `decoupled_weight_decay=True`. Each parameter's state
    `{'step', 'mu_product', 'exp_avg', 'exp_avg_sq'}` is made now. `foreach`, `capturable` and `differentiable`
    are accepted and change nothing.

    >>> w = aotjax.tensor([1.0, 2.0])
    >>> opt = aotjax.optim.NAdam([w], lr=0.1)
    >>> opt.step([aotjax.tensor([1.0, -2.0])])
    >>> [round(v, 4) for v in w.tolist()], sorted(opt.state[w])
    ([0.8944, 2.1056], ['exp_avg', 'exp_avg_sq', 'mu_product', 'step'])
    """

    hyperparameters = ("lr", "betas", "eps", "weight_decay", "momentum_decay")
    flags = ("decoupled_weight_decay", "maximize")

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      momentum_decay=momentum_decay, decoupled_weight_decay=decoupled_weight_decay,
                                      maximize=maximize, foreach=foreach, capturable=capturable,
                                      differentiable=differentiable))

    def _init_state(self, group, param):
        return {"step": zeros(()), "mu_product": ones(()), "exp_avg": zeros_like(param),
                "exp_avg_sq": zeros_like(param)}

    def _rule(self, param, grad, state, hyper, group):
        beta1, beta2 = hyper["betas"]
        return nadam_update(param, grad, state, lr=hyper["lr"], beta1=beta1, beta2=beta2, eps=hyper["eps"],
                            weight_decay=hyper["weight_decay"], momentum_decay=hyper["momentum_decay"],
                            decoupled=group["decoupled_weight_decay"], maximize=group["maximize"])


class RAdam(_AdamFamily):
    """RAdam, as `torch.optim.RAdam`: Adam whose adaptive term is rectified, and left out over the first steps
    (while `rho_t <= 5`); coupled L2 weight decay, or decoupled with `decoupled_weight_decay=True`. Each
    parameter's state `{'step', 'exp_avg', 'exp_avg_sq'}` is made now. `foreach`, `capturable` and
    `differentiable` are accepted and change nothing.

    >>> w = aotjax.tensor([1.0, 2.0])
    >>> opt = aotjax.optim.RAdam([w], lr=0.1)
    >>> opt.step([aotjax.tensor([1.0, -2.0])])
    >>> [round(v, 5) for v in w.tolist()]
    [0.9, 2.2]
    """

    hyperparameters = ("lr", "betas", "eps", "weight_decay")
    flags = ("maximize", "decoupled_weight_decay")

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, decoupled_weight_decay=False,
                 *, foreach=None, maximize=False, capturable=False, differentiable=False):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      maximize=maximize, foreach=foreach, capturable=capturable,
                                      decoupled_weight_decay=decoupled_weight_decay, differentiable=differentiable))

    def _init_state(self, group, param):
        return {"step": zeros(()), "exp_avg": zeros_like(param), "exp_avg_sq": zeros_like(param)}

    def _rule(self, param, grad, state, hyper, group):
        beta1, beta2 = hyper["betas"]
        return radam_update(param, grad, state, lr=hyper["lr"], beta1=beta1, beta2=beta2, eps=hyper["eps"],
                            weight_decay=hyper["weight_decay"], decoupled=group["decoupled_weight_decay"],
                            maximize=group["maximize"])
