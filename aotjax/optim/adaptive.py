"""The torch-style optimizers with a step size per entry, adapted from the gradients seen so far: `RMSprop`,
`Adagrad`, `Adadelta` and `Rprop`, with PyTorch's arguments and update formulas (the math is
`aotjax.optim.updates`). See `Optimizer` for what differs from torch: state made in the constructor,
hyperparameters as 0-d Tensors, gradients also passed to `step(grads)`."""
from __future__ import annotations

from aotjax.ops.creation.factories import zeros, zeros_like
from aotjax.optim.optimizer import Optimizer, _as_number, _check_nonnegative, _invalid
from aotjax.optim.updates import adadelta_update, adagrad_update, rmsprop_update, rprop_update

__all__ = ["RMSprop", "Adagrad", "Adadelta", "Rprop"]


class RMSprop(Optimizer):
    """RMSprop, as `torch.optim.RMSprop`: the gradient divided by the root of a moving average of its square
    (minus the square of its moving average with `centered=True`), with optional momentum and L2 weight decay.
    Each parameter's state `{'step', 'square_avg'}`, with `'momentum_buffer'` when `momentum > 0` and
    `'grad_avg'` when centered, is made now; whether momentum is zero is fixed at construction. `capturable`,
    `foreach` and `differentiable` are accepted and change nothing.

    >>> w = aotjax.tensor([1.0, 2.0])
    >>> opt = aotjax.optim.RMSprop([w], lr=0.01, alpha=0.75)
    >>> opt.step([aotjax.tensor([1.0, -2.0])])
    >>> [round(v, 5) for v in w.tolist()], sorted(opt.state[w])
    ([0.98, 2.02], ['square_avg', 'step'])
    """

    hyperparameters = ("lr", "momentum", "alpha", "eps", "weight_decay")
    flags = ("centered", "maximize")
    zero_fixed = {"momentum": "momentum buffers"}

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        super().__init__(params, dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                                      weight_decay=weight_decay, capturable=capturable, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable))

    @classmethod
    def _validate(cls, v):
        _check_nonnegative(cls, v, "lr", "eps", "momentum", "weight_decay", "alpha")

    def _init_state(self, group, param):
        state = {"step": zeros(()), "square_avg": zeros_like(param)}
        if _as_number(group["momentum"]) != 0:
            state["momentum_buffer"] = zeros_like(param)
        if group["centered"]:
            state["grad_avg"] = zeros_like(param)
        return state

    def _rule(self, param, grad, state, hyper, group):
        return rmsprop_update(param, grad, state, lr=hyper["lr"], alpha=hyper["alpha"], eps=hyper["eps"],
                              weight_decay=hyper["weight_decay"], momentum=hyper["momentum"],
                              maximize=group["maximize"])


class Adagrad(Optimizer):
    """Adagrad, as `torch.optim.Adagrad`: the gradient divided by the root of the sum of its squares so far,
    with a learning rate decaying as `lr / (1 + (step - 1) * lr_decay)` and L2 weight decay. Each parameter's
    state `{'step', 'sum'}` is made now, `sum` filled with `initial_accumulator_value`; as torch's, it shows in
    `state_dict()` from the start. `foreach`, `differentiable` and `fused` are accepted and change nothing.

    >>> w = aotjax.tensor([1.0, 2.0])
    >>> opt = aotjax.optim.Adagrad([w], lr=0.1)
    >>> opt.step([aotjax.tensor([1.0, -2.0])])
    >>> [round(v, 5) for v in w.tolist()], opt.state[w]['sum']
    ([0.9, 2.1], tensor([1., 4.]))
    """

    hyperparameters = ("lr", "lr_decay", "eps", "weight_decay", "initial_accumulator_value")
    flags = ("maximize",)

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10,
                 foreach=None, *, maximize=False, differentiable=False, fused=None):
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable, fused=fused))

    @classmethod
    def _validate(cls, v):
        _check_nonnegative(cls, v, "lr", "lr_decay", "weight_decay", "initial_accumulator_value", "eps")

    def _init_state(self, group, param):
        total = zeros_like(param)
        total.copy_(group["initial_accumulator_value"])
        return {"step": zeros(()), "sum": total}

    def _export_state(self, state):
        return dict(state)  # NOTE: torch makes Adagrad's state in its constructor: it shows before any step

    def _rule(self, param, grad, state, hyper, group):
        return adagrad_update(param, grad, state, lr=hyper["lr"], lr_decay=hyper["lr_decay"],
                              weight_decay=hyper["weight_decay"], eps=hyper["eps"], maximize=group["maximize"])


class Adadelta(Optimizer):
    """Adadelta, as `torch.optim.Adadelta`: the gradient scaled by the ratio of the roots of the moving averages
    of the squared updates and of the squared gradients, times `lr`. Each parameter's state `{'step',
    'square_avg', 'acc_delta'}` is made now. `foreach`, `capturable` and `differentiable` are accepted and change
    nothing.

    >>> w = aotjax.tensor([1.0, 2.0])
    >>> opt = aotjax.optim.Adadelta([w], lr=1.0)
    >>> opt.step([aotjax.tensor([1.0, -2.0])])
    >>> [round(v, 5) for v in w.tolist()]
    [0.99684, 2.00316]
    """

    hyperparameters = ("lr", "rho", "eps", "weight_decay")
    flags = ("maximize",)

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *, capturable=False,
                 maximize=False, differentiable=False):
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize,
                                      capturable=capturable, foreach=foreach, differentiable=differentiable))

    @classmethod
    def _validate(cls, v):
        _check_nonnegative(cls, v, "lr")
        rho = v["rho"]
        if rho is not None and not 0 <= rho <= 1:
            raise _invalid(cls, f"Invalid rho value: {rho}", "rho", "in [0, 1]")
        _check_nonnegative(cls, v, "eps", "weight_decay")

    def _init_state(self, group, param):
        return {"step": zeros(()), "square_avg": zeros_like(param), "acc_delta": zeros_like(param)}

    def _rule(self, param, grad, state, hyper, group):
        return adadelta_update(param, grad, state, lr=hyper["lr"], rho=hyper["rho"], eps=hyper["eps"],
                               weight_decay=hyper["weight_decay"], maximize=group["maximize"])


class Rprop(Optimizer):
    """Rprop (resilient backpropagation), as `torch.optim.Rprop`: each entry moves by its own step size against
    the sign of its gradient; the step size grows by `etas[1]` while the sign holds and shrinks by `etas[0]`
    when it flips, within `step_sizes`. Each parameter's state `{'step', 'prev', 'step_size'}` is made now, the
    step size starting at `lr` (the value at the parameter's first step, as torch's). `capturable`, `foreach`
    and `differentiable` are accepted and change nothing.

    >>> w = aotjax.tensor([1.0, 2.0])
    >>> opt = aotjax.optim.Rprop([w], lr=0.1)
    >>> for g in ([1.0, -2.0], [1.0, 2.0]):
    ...     opt.step([aotjax.tensor(g)])
    >>> w, opt.state[w]['step_size']
    (tensor([0.78, 2.1 ]), tensor([0.12, 0.05]))
    """

    hyperparameters = ("lr", "etas", "step_sizes")
    pairs = ("etas", "step_sizes")
    flags = ("maximize",)

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *, capturable=False,
                 foreach=None, maximize=False, differentiable=False):
        super().__init__(params, dict(lr=lr, etas=etas, step_sizes=step_sizes, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable, capturable=capturable))

    @classmethod
    def _validate(cls, v):
        _check_nonnegative(cls, v, "lr")
        etaminus, etaplus = v["etas"]
        if etaminus is not None and etaplus is not None and not 0 < etaminus < 1 < etaplus:
            raise _invalid(cls, f"Invalid eta values: {etaminus}, {etaplus}", "etas",
                           "(etaminus, etaplus) with 0 < etaminus < 1 < etaplus")

    def _init_state(self, group, param):
        step_size = zeros_like(param)
        step_size.copy_(group["lr"])
        return {"step": zeros(()), "prev": zeros_like(param), "step_size": step_size}

    def _rule(self, param, grad, state, hyper, group):
        (etaminus, etaplus), (step_size_min, step_size_max) = hyper["etas"], hyper["step_sizes"]
        return rprop_update(param, grad, state, lr=hyper["lr"], etaminus=etaminus, etaplus=etaplus,
                            step_size_min=step_size_min, step_size_max=step_size_max, maximize=group["maximize"])
