"""`ReduceLROnPlateau`: the scheduler driven by a metric, which reduces the lrs when the metric given to
`step(metrics)` stops improving.
"""
from __future__ import annotations

import math
import warnings

from aotjax.optim.lr_scheduler.base import (
    EPOCH_DEPRECATION_WARNING,
    LRScheduler,
    _assign,
    _check_optimizer,
    _error,
    _group_lrs,
    _number,
)


class ReduceLROnPlateau(LRScheduler):
    """Multiplies each group's lr by `factor` (not below `min_lr`) when the metric given to `step(metrics)` has not
    improved for more than `patience` steps, then waits `cooldown` steps, as
    `torch.optim.lr_scheduler.ReduceLROnPlateau`. Improving means beating the best so far by `threshold` (relative,
    or absolute with `threshold_mode='abs'`), downward with `mode='min'`, upward with `'max'`; a reduction smaller
    than `eps` is skipped.

    >>> opt = aotjax.optim.SGD([aotjax.zeros(1)], lr=1.0)
    >>> sched = aotjax.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=1)
    >>> lrs = []
    >>> for loss in [3.0, 2.0, 2.0, 2.0, 2.0, 1.0]:
    ...     sched.step(loss)
    ...     lrs += sched.get_last_lr()
    >>> lrs
    [1.0, 1.0, 1.0, 0.5, 0.5, 0.5]
    """

    def __init__(self, optimizer, mode: str = "min", factor: float = 0.1, patience: int = 10,
                 threshold: float = 1e-4, threshold_mode: str = "rel", cooldown: int = 0, min_lr=0,
                 eps: float = 1e-8):
        if factor >= 1.0:
            raise _error(ValueError, "Factor should be < 1.0.")
        self.factor = factor
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        n = len(optimizer.param_groups)
        if isinstance(min_lr, (list, tuple)):
            if len(min_lr) != n:
                raise _error(ValueError, f"expected {n} min_lrs, got {len(min_lr)}")
            self.default_min_lr, self.min_lrs = None, list(min_lr)
        else:
            self.default_min_lr, self.min_lrs = min_lr, [min_lr] * n
        self.patience, self.cooldown, self.eps = patience, cooldown, eps
        self.last_epoch = 0
        self._last_lr = _group_lrs(optimizer)
        self.mode_worse = None
        self._init_is_better(mode=mode, threshold=threshold, threshold_mode=threshold_mode)
        self._reset()

    def _init_is_better(self, mode: str, threshold: float, threshold_mode: str) -> None:
        if mode not in ("min", "max"):
            raise _error(ValueError, f"mode {mode} is unknown!")
        if threshold_mode not in ("rel", "abs"):
            raise _error(ValueError, f"threshold mode {threshold_mode} is unknown!")
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.mode, self.threshold, self.threshold_mode = mode, threshold, threshold_mode

    def _reset(self) -> None:
        self.best, self.cooldown_counter, self.num_bad_epochs = self.mode_worse, 0, 0

    def is_better(self, a: float, best: float) -> bool:
        """Whether metric `a` improves on `best` by more than the threshold."""
        if self.mode == "min":
            return a < (best * (1.0 - self.threshold) if self.threshold_mode == "rel" else best - self.threshold)
        return a > (best * (self.threshold + 1.0) if self.threshold_mode == "rel" else best + self.threshold)

    @property
    def in_cooldown(self) -> bool:
        """Whether the scheduler waits after a reduction."""
        return self.cooldown_counter > 0

    def step(self, metrics, epoch: int | None = None) -> None:
        """Record one epoch's metric (a number or a 0-d tensor) and reduce the lrs if it has plateaued."""
        current = float(metrics)
        if epoch is None:
            epoch = self.last_epoch + 1
        else:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
        self.last_epoch = epoch
        if self.is_better(current, self.best):
            self.best, self.num_bad_epochs = current, 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            self._reduce_lr(epoch)
            self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
        self._last_lr = _group_lrs(self.optimizer)

    def _reduce_lr(self, epoch: int) -> None:
        groups = self.optimizer.param_groups
        if len(groups) != len(self.min_lrs):
            if self.default_min_lr is None:
                raise _error(RuntimeError, f"The number of param groups in the `optimizer` ({len(groups)}) differs "
                                           f"from when `ReduceLROnPlateau` was initialized ({len(self.min_lrs)}), "
                                           f"usually due to a new param group being added to the optimizer. Please "
                                           f"modify the `min_lrs` field to match the length of the `optimizer` "
                                           f"param groups.")
            self.min_lrs = [self.default_min_lr] * len(groups)
        for group, min_lr in zip(groups, self.min_lrs):
            old_lr = float(_number(group["lr"]))
            new_lr = max(old_lr * self.factor, min_lr)
            if old_lr - new_lr > self.eps:
                _assign(group, "lr", new_lr)

    def load_state_dict(self, state_dict: dict) -> None:
        """Load a `state_dict()` (this library's or torch's)."""
        super().load_state_dict(state_dict)
        self._init_is_better(mode=self.mode, threshold=self.threshold, threshold_mode=self.threshold_mode)
