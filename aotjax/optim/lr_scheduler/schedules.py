"""The schedules of the lr by epoch, each a subclass of `LRScheduler`: the lambdas (`LambdaLR`,
`MultiplicativeLR`, sharing `_LambdaScheduler`), the step-wise decays (`StepLR`, `MultiStepLR`, `ConstantLR`,
`LinearLR`, `ExponentialLR`, `PolynomialLR`) and cosine annealing (`CosineAnnealingLR`,
`CosineAnnealingWarmRestarts`).
"""
from __future__ import annotations

import bisect
import math
import types
from collections import Counter
from collections.abc import Iterable

from aotjax.optim.lr_scheduler.base import LRScheduler, _check_optimizer, _error, _group_lrs


# -- lambdas -----------------------------------------------------------------------------------------------------
class _LambdaScheduler(LRScheduler):
    """What LambdaLR and MultiplicativeLR share: one lambda per group; a lambda's state is saved only for a
    callable object (its `__dict__`), not for a function."""

    def __init__(self, optimizer, lr_lambda, last_epoch: int = -1):
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        n = len(optimizer.param_groups)
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != n:
                raise _error(ValueError, f"Expected {n} lr_lambdas, but got {len(lr_lambda)}")
            self.lr_lambdas = list(lr_lambda)
        else:
            self.lr_lambdas = [lr_lambda] * n
        for fn in self.lr_lambdas:
            if not callable(fn):
                raise _error(TypeError, f"lr_lambda should be a function, but got {type(fn).__name__}")
        super().__init__(optimizer, last_epoch)

    def state_dict(self) -> dict:
        """The state; `lr_lambdas` holds None for a function or lambda, a callable object's `__dict__` otherwise."""
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}
        state["lr_lambdas"] = [None if isinstance(fn, types.FunctionType) or not hasattr(fn, "__dict__")
                               else dict(vars(fn)) for fn in self.lr_lambdas]
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        """Load a `state_dict()`; the lambdas stay the constructor's (a callable object's attributes are loaded)."""
        state = dict(state_dict)
        saved = state.pop("lr_lambdas", [None] * len(self.lr_lambdas))
        super().load_state_dict(state)
        for fn, fn_state in zip(self.lr_lambdas, saved):
            if fn_state is not None:
                vars(fn).update(fn_state)


class LambdaLR(_LambdaScheduler):
    """lr = initial lr * `lr_lambda(epoch)`; `lr_lambda` is one function or a list of one per group, as
    `torch.optim.lr_scheduler.LambdaLR`. Its lambdas are not in `state_dict()` (as torch).

    >>> opt = aotjax.optim.SGD([aotjax.zeros(1)], lr=1.0)
    >>> sched = aotjax.optim.lr_scheduler.LambdaLR(opt, lambda epoch: 1 / (epoch + 1))
    >>> for _ in range(3):
    ...     sched.step()
    >>> sched.get_last_lr()
    [0.25]
    """

    def get_lr(self) -> list:
        self._warn_outside_step()
        return [base_lr * fn(self.last_epoch) for base_lr, fn in zip(self.base_lrs, self.lr_lambdas)]


class MultiplicativeLR(_LambdaScheduler):
    """Each step multiplies each group's lr by `lr_lambda(epoch)`, as `torch.optim.lr_scheduler.MultiplicativeLR`.

    >>> opt = aotjax.optim.SGD([aotjax.zeros(1)], lr=1.0)
    >>> sched = aotjax.optim.lr_scheduler.MultiplicativeLR(opt, lambda epoch: 0.5)
    >>> for _ in range(3):
    ...     sched.step()
    >>> sched.get_last_lr()
    [0.125]
    """

    def get_lr(self) -> list:
        self._warn_outside_step()
        lrs = _group_lrs(self.optimizer)
        if self._is_initial:
            return lrs
        return [lr * fn(self.last_epoch) for lr, fn in zip(lrs, self.lr_lambdas)]


# -- step-wise decays --------------------------------------------------------------------------------------------
class StepLR(LRScheduler):
    """Multiplies each group's lr by `gamma` every `step_size` epochs, as `torch.optim.lr_scheduler.StepLR`.

    >>> opt = aotjax.optim.SGD([aotjax.zeros(1)], lr=1.0)
    >>> sched = aotjax.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    >>> lrs = []
    >>> for _ in range(5):
    ...     sched.step()
    ...     lrs += sched.get_last_lr()
    >>> lrs
    [1.0, 0.5, 0.5, 0.25, 0.25]
    """

    def __init__(self, optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1):
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        self._warn_outside_step()
        lrs = _group_lrs(self.optimizer)
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return lrs
        return [lr * self.gamma for lr in lrs]

    def _get_closed_form_lr(self) -> list:
        return [base_lr * self.gamma ** (self.last_epoch // self.step_size) for base_lr in self.base_lrs]


class MultiStepLR(LRScheduler):
    """Multiplies each group's lr by `gamma` at each milestone epoch (by `gamma ** n` at one listed n times), as
    `torch.optim.lr_scheduler.MultiStepLR`.

    >>> opt = aotjax.optim.SGD([aotjax.zeros(1)], lr=1.0)
    >>> sched = aotjax.optim.lr_scheduler.MultiStepLR(opt, milestones=[1, 3], gamma=0.5)
    >>> lrs = []
    >>> for _ in range(4):
    ...     sched.step()
    ...     lrs += sched.get_last_lr()
    >>> lrs
    [0.5, 0.5, 0.25, 0.25]
    """

    def __init__(self, optimizer, milestones: Iterable[int], gamma: float = 0.1, last_epoch: int = -1):
        self.milestones, self.gamma = Counter(milestones), gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        self._warn_outside_step()
        lrs = _group_lrs(self.optimizer)
        if self.last_epoch not in self.milestones:
            return lrs
        return [lr * self.gamma ** self.milestones[self.last_epoch] for lr in lrs]

    def _get_closed_form_lr(self) -> list:
        passed = bisect.bisect_right(sorted(self.milestones.elements()), self.last_epoch)
        return [base_lr * self.gamma ** passed for base_lr in self.base_lrs]


class ConstantLR(LRScheduler):
    """lr = initial lr * `factor` until epoch `total_iters`, then the initial lr, as
    `torch.optim.lr_scheduler.ConstantLR`.

    >>> opt = aotjax.optim.SGD([aotjax.zeros(1)], lr=1.0)
    >>> sched = aotjax.optim.lr_scheduler.ConstantLR(opt, factor=0.5, total_iters=2)
    >>> lrs = sched.get_last_lr()
    >>> for _ in range(3):
    ...     sched.step()
    ...     lrs += sched.get_last_lr()
    >>> lrs
    [0.5, 0.5, 1.0, 1.0]
    """

    def __init__(self, optimizer, factor: float = 1.0 / 3, total_iters: int = 5, last_epoch: int = -1):
        if factor > 1.0 or factor < 0:
            raise _error(ValueError, "Constant multiplicative factor expected to be between 0 and 1.")
        self.factor, self.total_iters = factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        self._warn_outside_step()
        lrs = _group_lrs(self.optimizer)
        if self.last_epoch == 0:
            return [lr * self.factor for lr in lrs]
        if self.last_epoch != self.total_iters:
            return lrs
        return [lr * (1.0 / self.factor) for lr in lrs]

    def _get_closed_form_lr(self) -> list:
        done = self.last_epoch >= self.total_iters
        return [base_lr * (self.factor + done * (1 - self.factor)) for base_lr in self.base_lrs]


class LinearLR(LRScheduler):
    """lr = initial lr * a factor going linearly from `start_factor` to `end_factor` over `total_iters` epochs, as
    `torch.optim.lr_scheduler.LinearLR` (a warm-up by default).

    >>> opt = aotjax.optim.SGD([aotjax.zeros(1)], lr=1.0)
    >>> sched = aotjax.optim.lr_scheduler.LinearLR(opt, start_factor=0.25, total_iters=3)
    >>> lrs = sched.get_last_lr()
    >>> for _ in range(4):
    ...     sched.step()
    ...     lrs += sched.get_last_lr()
    >>> lrs
    [0.25, 0.5, 0.75, 1.0, 1.0]
    """

    def __init__(self, optimizer, start_factor: float = 1.0 / 3, end_factor: float = 1.0, total_iters: int = 5,
                 last_epoch: int = -1):
        if start_factor > 1.0 or start_factor <= 0:
            raise _error(ValueError, "Starting multiplicative factor expected to be greater than 0 and less or "
                                     "equal to 1.")
        if end_factor > 1.0 or end_factor < 0:
            raise _error(ValueError, "Ending multiplicative factor expected to be between 0 and 1.")
        self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        self._warn_outside_step()
        lrs = _group_lrs(self.optimizer)
        if self.last_epoch == 0:
            return [lr * self.start_factor for lr in lrs]
        if self._is_initial or self.last_epoch > self.total_iters:
            return lrs
        change = self.end_factor - self.start_factor
        ratio = 1.0 + change / (self.total_iters * self.start_factor + (self.last_epoch - 1) * change)
        return [lr * ratio for lr in lrs]

    def _get_closed_form_lr(self) -> list:
        done = min(self.total_iters, self.last_epoch) / self.total_iters
        return [base_lr * (self.start_factor + (self.end_factor - self.start_factor) * done)
                for base_lr in self.base_lrs]


class ExponentialLR(LRScheduler):
    """Multiplies each group's lr by `gamma` every epoch, as `torch.optim.lr_scheduler.ExponentialLR`.

    >>> opt = aotjax.optim.SGD([aotjax.zeros(1)], lr=1.0)
    >>> sched = aotjax.optim.lr_scheduler.ExponentialLR(opt, gamma=0.5)
    >>> sched.step(); sched.step()
    >>> sched.get_last_lr()
    [0.25]
    """

    def __init__(self, optimizer, gamma: float, last_epoch: int = -1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        self._warn_outside_step()
        lrs = _group_lrs(self.optimizer)
        return lrs if self._is_initial else [lr * self.gamma for lr in lrs]

    def _get_closed_form_lr(self) -> list:
        return [base_lr * self.gamma ** self.last_epoch for base_lr in self.base_lrs]


class PolynomialLR(LRScheduler):
    """lr = initial lr * (1 - epoch / `total_iters`) ** `power` until `total_iters`, as
    `torch.optim.lr_scheduler.PolynomialLR` (computed step to step from the current lr, as torch).

    >>> opt = aotjax.optim.SGD([aotjax.zeros(1)], lr=1.0)
    >>> sched = aotjax.optim.lr_scheduler.PolynomialLR(opt, total_iters=4, power=1.0)
    >>> lrs = []
    >>> for _ in range(5):
    ...     sched.step()
    ...     lrs += sched.get_last_lr()
    >>> lrs
    [0.75, 0.5, 0.25, 0.0, 0.0]
    """

    def __init__(self, optimizer, total_iters: int = 5, power: float = 1.0, last_epoch: int = -1):
        self.total_iters, self.power = total_iters, power
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        self._warn_outside_step()
        lrs = _group_lrs(self.optimizer)
        if self._is_initial or self.last_epoch > self.total_iters:
            return lrs
        decay = ((1.0 - self.last_epoch / self.total_iters) / (1.0 - (self.last_epoch - 1) / self.total_iters))
        return [lr * decay ** self.power for lr in lrs]

    def _get_closed_form_lr(self) -> list:
        done = min(self.total_iters, self.last_epoch) / self.total_iters
        return [base_lr * (1.0 - done) ** self.power for base_lr in self.base_lrs]


# -- cosine ------------------------------------------------------------------------------------------------------
class CosineAnnealingLR(LRScheduler):
    """Cosine annealing from the initial lr down to `eta_min` over `T_max` epochs (and back up over the next
    `T_max`, without restarts), as `torch.optim.lr_scheduler.CosineAnnealingLR`: each step rescales the current lr's
    distance to `eta_min`, so the schedule composes with other changes to the lr.

    >>> opt = aotjax.optim.SGD([aotjax.zeros(1)], lr=1.0)
    >>> sched = aotjax.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=2)
    >>> lrs = []
    >>> for _ in range(4):
    ...     sched.step()
    ...     lrs += [round(lr, 6) for lr in sched.get_last_lr()]
    >>> lrs
    [0.5, 0.0, 0.5, 1.0]
    """

    def __init__(self, optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1):
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        self._warn_outside_step()
        lrs = _group_lrs(self.optimizer)
        if self._is_initial:
            return lrs
        t, period = self.last_epoch, self.T_max
        if (t - 1 - period) % (2 * period) == 0:  # NOTE: leaving the trough, where the ratio below is 0 / 0
            return [lr + (base_lr - self.eta_min) * (1 - math.cos(math.pi / period)) / 2
                    for lr, base_lr in zip(lrs, self.base_lrs)]
        ratio = (1 + math.cos(math.pi * t / period)) / (1 + math.cos(math.pi * (t - 1) / period))
        return [ratio * (lr - self.eta_min) + self.eta_min for lr in lrs]

    def _get_closed_form_lr(self) -> list:
        return [_cosine(self.eta_min, base_lr, self.last_epoch / self.T_max) for base_lr in self.base_lrs]


def _cosine(eta_min: float, eta_max: float, fraction: float) -> float:
    return eta_min + (eta_max - eta_min) * (1 + math.cos(math.pi * fraction)) / 2


class CosineAnnealingWarmRestarts(LRScheduler):
    """Cosine annealing from the initial lr to `eta_min` over `T_0` epochs, restarting at the initial lr, each
    period `T_mult` times longer than the last (SGDR), as `torch.optim.lr_scheduler.CosineAnnealingWarmRestarts`.
    `step(epoch)` takes a fractional epoch (`epoch + i / iters` within an epoch) without a warning.

    >>> opt = aotjax.optim.SGD([aotjax.zeros(1)], lr=1.0)
    >>> sched = aotjax.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=2)
    >>> lrs = []
    >>> for _ in range(4):
    ...     sched.step()
    ...     lrs += [round(lr, 6) for lr in sched.get_last_lr()]
    >>> lrs
    [0.5, 1.0, 0.5, 1.0]
    """

    def __init__(self, optimizer, T_0: int, T_mult: int = 1, eta_min: float = 0.0, last_epoch: int = -1):
        if T_0 <= 0 or not isinstance(T_0, int):
            raise _error(ValueError, f"Expected positive integer T_0, but got {T_0}")
        if T_mult < 1 or not isinstance(T_mult, int):
            raise _error(ValueError, f"Expected integer T_mult >= 1, but got {T_mult}")
        if not isinstance(eta_min, (float, int)):
            raise _error(ValueError, f"Expected float or int eta_min, but got {eta_min} of type {type(eta_min)}")
        self.T_0, self.T_i, self.T_mult, self.eta_min, self.T_cur = T_0, T_0, T_mult, eta_min, last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        self._warn_outside_step()
        return [_cosine(self.eta_min, base_lr, self.T_cur / self.T_i) for base_lr in self.base_lrs]

    def step(self, epoch: float | None = None) -> None:
        """Advance one epoch (restarting at the end of a period), or go to `epoch`, which may be fractional.

        >>> opt = aotjax.optim.SGD([aotjax.zeros(1)], lr=1.0)
        >>> sched = aotjax.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=4)
        >>> sched.step(1.0)
        >>> round(sched.get_last_lr()[0], 6), sched.T_cur
        (0.853553, 1.0)
        """
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur = self.T_cur + 1
            if self.T_cur >= self.T_i:
                self.T_cur, self.T_i = self.T_cur % self.T_i, self.T_i * self.T_mult
        elif epoch < 0:
            raise _error(ValueError, f"Expected non-negative epoch, but got {epoch}")
        elif epoch >= self.T_0 and self.T_mult == 1:
            self.T_cur = epoch % self.T_0
        elif epoch >= self.T_0:
            n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))  # restarts before `epoch`
            self.T_cur = epoch - self.T_0 * (self.T_mult ** n - 1) / (self.T_mult - 1)
            self.T_i = self.T_0 * self.T_mult ** n
        else:
            self.T_i, self.T_cur = self.T_0, epoch
        self.last_epoch = math.floor(epoch)
        with self._computing():
            values = self.get_lr()
        self._set_lrs(values)
