"""The per-batch cycles, which also move the momentum (or Adam's beta1) inversely to the lr: `OneCycleLR` (the
1cycle policy, with its phases and annealing functions) and `CyclicLR` (cyclical learning rates, with its scale
modes).
"""
from __future__ import annotations

import math
import types
from collections.abc import Callable

from aotjax.optim.lr_scheduler.base import (
    LRScheduler,
    _assign,
    _check_momentum,
    _check_optimizer,
    _error,
    _per_group,
    _set_momentum,
)


def _anneal_cos(start: float, end: float, pct: float) -> float:
    return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)


def _anneal_linear(start: float, end: float, pct: float) -> float:
    return (end - start) * pct + start


class OneCycleLR(LRScheduler):
    """The 1cycle policy, as `torch.optim.lr_scheduler.OneCycleLR`: the lr rises from `max_lr / div_factor` to
    `max_lr` over the first `pct_start` of `total_steps` (or `epochs * steps_per_epoch`), then falls to
    `initial_lr / final_div_factor` (in two phases, or three with `three_phase=True`); with `cycle_momentum`, the
    momentum (or Adam's beta1) moves inversely between `max_momentum` and `base_momentum`. Step it after every batch.

    >>> opt = aotjax.optim.SGD([aotjax.zeros(1)], lr=0.1, momentum=0.9)
    >>> sched = aotjax.optim.lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=5, pct_start=0.4,
    ...                                              anneal_strategy='linear')
    >>> lrs, momenta = sched.get_last_lr(), []
    >>> for _ in range(4):
    ...     sched.step()
    ...     lrs += [round(lr, 6) for lr in sched.get_last_lr()]
    ...     momenta.append(round(float(opt.param_groups[0]['momentum']), 6))
    >>> lrs, momenta
    ([0.04, 1.0, 0.666668, 0.333336, 4e-06], [0.85, 0.883333, 0.916667, 0.95])
    """

    def __init__(self, optimizer, max_lr, total_steps: int | None = None, epochs: int | None = None,
                 steps_per_epoch: int | None = None, pct_start: float = 0.3, anneal_strategy: str = "cos",
                 cycle_momentum: bool = True, base_momentum=0.85, max_momentum=0.95, div_factor: float = 25.0,
                 final_div_factor: float = 1e4, three_phase: bool = False, last_epoch: int = -1):
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        self.total_steps = _total_steps(total_steps, epochs, steps_per_epoch)
        self._schedule_phases = _one_cycle_phases(self.total_steps, pct_start, three_phase)
        if anneal_strategy not in ("cos", "linear"):
            raise _error(ValueError, f"anneal_strategy must be one of 'cos' or 'linear', instead got "
                                     f"{anneal_strategy}")
        self._anneal_func_type = anneal_strategy
        max_lrs = _per_group("max_lr", optimizer, max_lr)
        if last_epoch == -1:
            for group, lr in zip(optimizer.param_groups, max_lrs):
                group["initial_lr"] = lr / div_factor
                group["max_lr"] = lr
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.use_beta1 = _check_momentum("OneCycleLR", optimizer)
            max_momentums = _per_group("max_momentum", optimizer, max_momentum)
            base_momentums = _per_group("base_momentum", optimizer, base_momentum)
            if last_epoch == -1:
                for group, high, low in zip(optimizer.param_groups, max_momentums, base_momentums):
                    _set_momentum(group, high, self.use_beta1)
                    group["max_momentum"], group["base_momentum"] = high, low
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        self._warn_outside_step()
        step = self.last_epoch
        if step > self.total_steps:
            raise _error(ValueError, f"Tried to step {step} times. The specified number of total steps is "
                                     f"{self.total_steps}")
        anneal = _anneal_cos if self._anneal_func_type == "cos" else _anneal_linear
        lrs = []
        for group in self.optimizer.param_groups:
            start = 0.0
            for i, phase in enumerate(self._schedule_phases):
                end = phase["end_step"]
                if step <= end or i == len(self._schedule_phases) - 1:
                    pct = (step - start) / (end - start)
                    lrs.append(anneal(group[phase["start_lr"]], group[phase["end_lr"]], pct))
                    if self.cycle_momentum:
                        momentum = anneal(group[phase["start_momentum"]], group[phase["end_momentum"]], pct)
                        _set_momentum(group, momentum, self.use_beta1)
                    break
                start = end
        return lrs


def _total_steps(total_steps, epochs, steps_per_epoch) -> int:
    if total_steps is not None:
        if total_steps <= 0 or not isinstance(total_steps, int):
            raise _error(ValueError, f"Expected positive integer total_steps, but got {total_steps}")
        return total_steps
    if epochs is None or steps_per_epoch is None:
        raise _error(ValueError, "You must define either total_steps OR (epochs AND steps_per_epoch)")
    for name, value in (("epochs", epochs), ("steps_per_epoch", steps_per_epoch)):
        if value <= 0 or not isinstance(value, int):
            raise _error(ValueError, f"Expected positive integer {name}, but got {value}")
    return epochs * steps_per_epoch


def _one_cycle_phases(total_steps: int, pct_start: float, three_phase: bool) -> list[dict]:
    if pct_start < 0 or pct_start > 1 or not isinstance(pct_start, float):
        raise _error(ValueError, f"Expected float between 0 and 1 pct_start, but got {pct_start}")

    def phase(end_step, start_lr, end_lr, start_momentum, end_momentum):
        return dict(end_step=end_step, start_lr=start_lr, end_lr=end_lr, start_momentum=start_momentum,
                    end_momentum=end_momentum)

    rise = phase(float(pct_start * total_steps) - 1, "initial_lr", "max_lr", "max_momentum", "base_momentum")
    if not three_phase:
        return [rise, phase(total_steps - 1, "max_lr", "min_lr", "base_momentum", "max_momentum")]
    return [rise, phase(float(2 * pct_start * total_steps) - 2, "max_lr", "initial_lr", "base_momentum",
                        "max_momentum"),
            phase(total_steps - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum")]


class CyclicLR(LRScheduler):
    """Cyclical learning rates (CLR), as `torch.optim.lr_scheduler.CyclicLR`: each group's lr cycles between
    `base_lr` and `max_lr`, `step_size_up` steps up and `step_size_down` (default: the same) down, the amplitude
    scaled by `mode` ('triangular': constant, 'triangular2': halved each cycle, 'exp_range': `gamma ** step`) or by
    `scale_fn(x)` (of the cycle, or of the step with `scale_mode='iterations'`); with `cycle_momentum`, the momentum
    (or Adam's beta1) cycles inversely between `max_momentum` and `base_momentum`. Step it after every batch.

    >>> opt = aotjax.optim.SGD([aotjax.zeros(1)], lr=0.1, momentum=0.9)
    >>> sched = aotjax.optim.lr_scheduler.CyclicLR(opt, base_lr=0.1, max_lr=0.5, step_size_up=2)
    >>> lrs = []
    >>> for _ in range(4):
    ...     sched.step()
    ...     lrs += [round(lr, 6) for lr in sched.get_last_lr()]
    >>> lrs
    [0.3, 0.5, 0.3, 0.1]
    """

    def __init__(self, optimizer, base_lr, max_lr, step_size_up: int = 2000, step_size_down: int | None = None,
                 mode: str = "triangular", gamma: float = 1.0, scale_fn: Callable[[float], float] | None = None,
                 scale_mode: str = "cycle", cycle_momentum: bool = True, base_momentum=0.8, max_momentum=0.9,
                 last_epoch: int = -1):
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        base_lrs = _per_group("base_lr", optimizer, base_lr)
        if last_epoch == -1:
            for group, lr in zip(optimizer.param_groups, base_lrs):
                _assign(group, "lr", lr)
        self.max_lrs = _per_group("max_lr", optimizer, max_lr)
        up = float(step_size_up)
        down = float(step_size_down) if step_size_down is not None else up
        self.total_size = up + down
        self.step_ratio = up / self.total_size
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise _error(ValueError, "mode is invalid and scale_fn is None")
        self.mode, self.gamma = mode, gamma
        self._scale_fn_custom = scale_fn
        self.scale_mode = scale_mode if scale_fn is not None else _BUILTIN_SCALE_MODES.get(mode, scale_mode)
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.use_beta1 = _check_momentum("CyclicLR", optimizer)
            self.base_momentums = _per_group("base_momentum", optimizer, base_momentum)
            self.max_momentums = _per_group("max_momentum", optimizer, max_momentum)
            if last_epoch == -1:
                for group, high, low in zip(optimizer.param_groups, self.max_momentums, self.base_momentums):
                    _set_momentum(group, high, self.use_beta1)
                    group["max_momentum"], group["base_momentum"] = high, low
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def scale_fn(self, x: float) -> float:
        """The amplitude's scale at `x` (the cycle number, or the step with `scale_mode='iterations'`)."""
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        if self.mode == "triangular2":
            return 1 / (2.0 ** (x - 1))
        if self.mode == "exp_range":
            return self.gamma ** x
        return 1.0

    def get_lr(self) -> list:
        self._warn_outside_step()
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        rise = x / self.step_ratio if x <= self.step_ratio else (x - 1) / (self.step_ratio - 1)
        scale = self.scale_fn(cycle if self.scale_mode == "cycle" else self.last_epoch)
        lrs = [base_lr + (max_lr - base_lr) * rise * scale for base_lr, max_lr in zip(self.base_lrs, self.max_lrs)]
        if self.cycle_momentum:
            for group, low, high in zip(self.optimizer.param_groups, self.base_momentums, self.max_momentums):
                _set_momentum(group, high - (high - low) * rise * scale, self.use_beta1)
        return lrs

    def state_dict(self) -> dict:
        """The state; `_scale_fn_custom` holds None for a function or lambda, a callable object's `__dict__`."""
        state = super().state_dict()
        fn = state.pop("_scale_fn_custom")
        has_state = fn is not None and not isinstance(fn, types.FunctionType) and hasattr(fn, "__dict__")
        state["_scale_fn_custom"] = dict(vars(fn)) if has_state else None
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        """Load a `state_dict()`; the `scale_fn` stays the constructor's (a callable object's attributes load)."""
        state = dict(state_dict)
        fn_state = state.pop("_scale_fn_custom", None)
        super().load_state_dict(state)
        if fn_state is not None and self._scale_fn_custom is not None:
            vars(self._scale_fn_custom).update(fn_state)


_BUILTIN_SCALE_MODES = {"triangular": "cycle", "triangular2": "cycle", "exp_range": "iterations"}
