"""The base of the schedulers: `LRScheduler` (also `_LRScheduler`), `EPOCH_DEPRECATION_WARNING`, the helpers that
read a group's hyperparameters as Python doubles and write them back (remembering the doubles written into 0-d
tensors, see `_number`), and the argument checks the schedulers share (`_check_optimizer`, `_per_group`,
`_check_momentum`, `_error`).
"""
from __future__ import annotations

import contextlib
import warnings
import weakref
from collections.abc import Iterable, Sequence

import numpy as np

from aotjax.core.source_info import where
from aotjax.optim.optimizer import Optimizer
from aotjax.tensor import Tensor

EPOCH_DEPRECATION_WARNING = (
    "The epoch parameter in `scheduler.step()` was not necessary and is being deprecated where possible. Please use "
    "`scheduler.step()` to step the scheduler. During the deprecation, if epoch is different from None, the closed "
    "form is used instead of the new chainable form, where available. Please open an issue if you are unable to "
    "replicate your use case: https://github.com/pytorch/pytorch/issues/new/choose.")

# -- reading and writing hyperparameters -------------------------------------------------------------------------
# NOTE: an aotjax group holds lr as a 0-d tensor of the mode's float width (float32 by default), torch's a Python
# double. The double a scheduler writes is remembered per tensor (id -> (weakref, value)), and a later read of a
# tensor still holding that double's rounding returns the double: a schedule that scales the current lr step after
# step does not drift by a float32 rounding per step. A value written by anyone else reads as the shortest decimal
# that rounds to what the tensor holds (0.1, not 0.10000000149011612).
_written: dict[int, tuple[weakref.ref, float]] = {}


def _number(value):
    """A group's hyperparameter (a 0-d Tensor, a tuple of them, or a torch group's plain number) as Python floats."""
    if isinstance(value, tuple):
        return tuple(_number(v) for v in value)
    if not isinstance(value, Tensor):
        return value
    held = value.numpy()[()]
    known = _written.get(id(value))
    if known is not None and known[0]() is value and held.dtype.type(known[1]) == held:
        return known[1]
    return float(held) if held.dtype == np.float64 else float(str(held))


def _remember(tensor: Tensor, value: float) -> None:
    key = id(tensor)
    _written[key] = (weakref.ref(tensor, lambda _, key=key: _written.pop(key, None)), value)


def _assign(group, key: str, value) -> None:
    """`group[key] = value` (a number, or a tuple for `betas`), remembering the doubles written into tensors."""
    value = _number(value)
    group[key] = value
    held = group[key]
    for t, v in zip(held, value) if isinstance(held, tuple) else [(held, value)]:
        if isinstance(t, Tensor):
            _remember(t, float(v))


def _reclaim(groups, key: str, values: Sequence) -> None:
    """After `load_state_dict`: take the saved doubles as the exact values of tensors that hold their rounding."""
    for group, value in zip(groups, values):
        held = group.get(key)
        if isinstance(held, Tensor) and isinstance(value, (int, float)):
            stored = held.numpy()[()]
            if stored.dtype.type(value) == stored:
                _remember(held, float(value))


def _group_lrs(optimizer) -> list:
    return [_number(group["lr"]) for group in optimizer.param_groups]


def _set_momentum(group, value: float, use_beta1: bool) -> None:
    if use_beta1:
        _assign(group, "betas", (value, *_number(group["betas"])[1:]))
    else:
        _assign(group, "momentum", value)


# -- checks ----------------------------------------------------------------------------------------------------
def _error(kind: type[Exception], message: str) -> Exception:
    """`kind(message + where())`: torch's message, then the user's line."""
    return kind(f"{message}{where()}")


def _check_optimizer(optimizer) -> None:
    """An aotjax optimizer, or one with torch's protocol (`param_groups` of dicts, `step`)."""
    if isinstance(optimizer, Optimizer):
        return
    if isinstance(getattr(optimizer, "param_groups", None), list) and callable(getattr(optimizer, "step", None)):
        return
    raise _error(TypeError, f"{type(optimizer).__name__} is not an Optimizer")


def _per_group(name: str, optimizer, value) -> list:
    """One value per parameter group: a list or tuple of that length, or one value repeated."""
    n = len(optimizer.param_groups)
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise _error(ValueError, f"{name} must have the same length as optimizer.param_groups. {name} has "
                                     f"{len(value)} values, param_groups has {n}.")
        return list(value)
    return [value] * n


def _check_momentum(name: str, optimizer) -> bool:
    """For `cycle_momentum`: whether the optimizer's groups have `betas` (else `momentum`)."""
    defaults = getattr(optimizer, "defaults", {})
    if "momentum" not in defaults and "betas" not in defaults:
        raise _error(ValueError, "optimizer must support momentum or beta1 with `cycle_momentum` option enabled")
    use_beta1 = "betas" in defaults
    for i, group in enumerate(optimizer.param_groups):
        if not use_beta1 and isinstance(group["momentum"], Tensor) and _number(group["momentum"]) == 0:
            raise _error(ValueError, f"{name}: cycle_momentum=True schedules each group's momentum, but parameter "
                                     f"group {i} of {type(optimizer).__name__} was built with momentum=0 and has no "
                                     f"momentum buffers. Pass cycle_momentum=False, or build the optimizer with a "
                                     f"momentum > 0")
    return use_beta1


# -- the base class ----------------------------------------------------------------------------------------------
class LRScheduler:
    """Base class of the schedulers, as `torch.optim.lr_scheduler.LRScheduler` (also `_LRScheduler`). A subclass
    defines `get_lr()`, the lrs for `last_epoch` as numbers (an aotjax group's lr is a 0-d tensor: read it with
    `float(group['lr'])`), and optionally `_get_closed_form_lr()`, used by `step(epoch)`.

    Built with `last_epoch=-1`, a scheduler sets each group's `'initial_lr'` to its lr (unless an earlier scheduler
    did), takes `base_lrs` from them and makes its first step (epoch 0), which may change the lrs (e.g. LinearLR's
    warm-up). `step()` advances one epoch; call it after `optimizer.step()`.

    >>> opt = aotjax.optim.SGD([aotjax.zeros(2)], lr=0.1)
    >>> sched = aotjax.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    >>> for epoch in range(4):
    ...     opt.step([aotjax.ones(2)])
    ...     sched.step()
    ...     print(epoch, sched.get_last_lr())
    0 [0.1]
    1 [0.05]
    2 [0.05]
    3 [0.025]
    >>> sched.last_epoch, sched.base_lrs, round(float(opt.param_groups[0]['lr']), 6)
    (4, [0.1], 0.025)
    """

    def __init__(self, optimizer, last_epoch: int = -1):
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", _number(group["lr"]))
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise _error(KeyError, f"param 'initial_lr' is not specified in param_groups[{i}] when resuming "
                                           f"scheduler with last_epoch >= 0.\nThis typically happens when:\n1. You're "
                                           f"trying to resume training from a checkpoint but haven't properly loaded "
                                           f"the optimizer state\n2. You're using last_epoch >= 0 for a fresh "
                                           f"training run (not recommended)")
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._initial_step()

    def _initial_step(self) -> None:
        """The step a scheduler makes when built (`_is_initial` is True during it)."""
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def get_lr(self) -> list:
        """The lrs of `last_epoch`, one per parameter group (inside `step`; to read them use `get_last_lr()`)."""
        raise NotImplementedError(f"{type(self).__name__} defines no get_lr(); a scheduler subclass must.")

    def get_last_lr(self) -> list:
        """The lrs the last step set, one Python float per parameter group.

        >>> opt = aotjax.optim.SGD([aotjax.zeros(1)], lr=0.5)
        >>> aotjax.optim.lr_scheduler.ExponentialLR(opt, gamma=0.5).get_last_lr()
        [0.5]
        """
        return list(self._last_lr)

    def step(self, epoch: int | None = None) -> None:
        """Advance one epoch and set the groups' lrs. `step(epoch)` (deprecated, with torch's warning) jumps to
        `epoch`, using the closed form where the scheduler has one.

        >>> opt = aotjax.optim.SGD([aotjax.zeros(1)], lr=1.0)
        >>> sched = aotjax.optim.lr_scheduler.ExponentialLR(opt, gamma=0.5)
        >>> sched.step()
        >>> sched.get_last_lr()
        [0.5]
        """
        self._step_count += 1
        if epoch is not None:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
        self._update_lr(epoch)

    def _update_lr(self, epoch: int | None = None) -> None:
        with self._computing():
            if epoch is None:
                self.last_epoch += 1
                values = self.get_lr()
            else:
                self.last_epoch = epoch
                closed_form = getattr(self, "_get_closed_form_lr", None)
                values = closed_form() if closed_form is not None else self.get_lr()
        self._set_lrs(values)

    def _set_lrs(self, values: Iterable) -> None:
        for group, lr in zip(self.optimizer.param_groups, values):
            _assign(group, "lr", lr)
        self._last_lr = _group_lrs(self.optimizer)

    @contextlib.contextmanager
    def _computing(self):
        self._get_lr_called_within_step = True
        try:
            yield
        finally:
            self._get_lr_called_within_step = False

    def _warn_outside_step(self) -> None:
        if not getattr(self, "_get_lr_called_within_step", False):
            warnings.warn("To get the last learning rate computed by the scheduler, please use `get_last_lr()`.",
                          UserWarning, stacklevel=3)

    def state_dict(self) -> dict:
        """The scheduler's state, torch's keys: every attribute but the optimizer.

        >>> opt = aotjax.optim.SGD([aotjax.zeros(1)], lr=0.1)
        >>> sorted(aotjax.optim.lr_scheduler.StepLR(opt, 3).state_dict())  # doctest: +NORMALIZE_WHITESPACE
        ['_get_lr_called_within_step', '_is_initial', '_last_lr', '_step_count', 'base_lrs', 'gamma',
         'last_epoch', 'step_size']
        """
        return {key: value for key, value in self.__dict__.items() if key != "optimizer"}

    def load_state_dict(self, state_dict: dict) -> None:
        """Load a `state_dict()` (this library's or torch's scheduler's of the same class); load the optimizer's
        state too, as with torch.

        >>> opt = aotjax.optim.SGD([aotjax.zeros(1)], lr=0.1)
        >>> sched = aotjax.optim.lr_scheduler.StepLR(opt, 3)
        >>> sched.load_state_dict({**sched.state_dict(), 'last_epoch': 7})
        >>> sched.last_epoch
        7
        """
        self.__dict__.update(state_dict)
        _reclaim(self.optimizer.param_groups, "lr", getattr(self, "_last_lr", ()))


_LRScheduler = LRScheduler
