"""The schedulers made of schedulers on one optimizer: `SequentialLR` (one after another, switching at milestones)
and `ChainedScheduler` (all at each step), sharing `_Combination`, whose state nests their schedulers' states.
"""
from __future__ import annotations

import bisect
from collections.abc import Sequence

from aotjax.optim.lr_scheduler.base import LRScheduler, _assign, _error, _group_lrs
from aotjax.optim.lr_scheduler.plateau import ReduceLROnPlateau


class _Combination(LRScheduler):
    """What SequentialLR and ChainedScheduler share: their state nests their schedulers' states."""

    def _check_schedulers(self, schedulers: Sequence, optimizer) -> None:
        name = type(self).__name__
        for i, scheduler in enumerate(schedulers):
            if not hasattr(scheduler, "optimizer"):
                raise _error(TypeError, f"{name} at index {i} should have `optimizer` as its attribute.")
            if isinstance(scheduler, ReduceLROnPlateau):
                raise _error(ValueError, f"{name} does not support `ReduceLROnPlateau` scheduler as it requires "
                                         f"additional kwargs to be specified when calling `step`, but got one at "
                                         f"index {i} in the given schedulers sequence.")
            if scheduler.optimizer is not optimizer:
                raise _error(ValueError, f"{name} expects all schedulers to belong to the same optimizer, but got "
                                         f"scheduler {type(scheduler).__name__} at index {i} has "
                                         f"{scheduler.optimizer}, which is different from "
                                         f"{type(optimizer).__name__}.")

    def state_dict(self) -> dict:
        """The state, with `'_schedulers'` holding each scheduler's `state_dict()`."""
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        state["_schedulers"] = [scheduler.state_dict() for scheduler in self._schedulers]
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        """Load a `state_dict()`, each scheduler's part into that scheduler."""
        state = dict(state_dict)
        saved = state.pop("_schedulers")
        self.__dict__.update(state)
        for scheduler, scheduler_state in zip(self._schedulers, saved):
            scheduler.load_state_dict(scheduler_state)


class SequentialLR(_Combination):
    """Runs `schedulers` one after another, switching at each of `milestones` (one fewer than the schedulers), as
    `torch.optim.lr_scheduler.SequentialLR`: at a milestone the next scheduler restarts from epoch 0.

    >>> opt = aotjax.optim.SGD([aotjax.zeros(1)], lr=1.0)
    >>> S = aotjax.optim.lr_scheduler
    >>> sched = S.SequentialLR(opt, [S.ConstantLR(opt, factor=0.5, total_iters=9), S.ExponentialLR(opt, gamma=0.5)],
    ...                        milestones=[2])
    >>> lrs = sched.get_last_lr()
    >>> for _ in range(4):
    ...     sched.step()
    ...     lrs += sched.get_last_lr()
    >>> lrs
    [0.5, 0.5, 1.0, 0.5, 0.25]
    """

    def __init__(self, optimizer, schedulers: list, milestones: list[int], last_epoch: int = -1):
        if len(schedulers) < 1:
            raise _error(ValueError, f"{type(self).__name__} expects at least one scheduler, but got no scheduler.")
        self._check_schedulers(schedulers, optimizer)
        if len(milestones) != len(schedulers) - 1:
            raise _error(ValueError, f"Sequential Schedulers expects number of schedulers provided to be one more "
                                     f"than the number of milestone points, but got number of schedulers "
                                     f"{len(schedulers)} and the number of milestones to be equal to "
                                     f"{len(milestones)}")
        self._schedulers, self._milestones = schedulers, milestones
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        for group in optimizer.param_groups:  # NOTE: undo what building the schedulers did to the lrs
            _assign(group, "lr", group["initial_lr"])
        self.recursive_undo()
        self._schedulers[0]._initial_step()
        self._last_lr = schedulers[0].get_last_lr()

    def recursive_undo(self, sched=None) -> None:
        """Take back the first step each scheduler made when built (its `last_epoch` goes back by one)."""
        scheds = self if sched is None else sched
        if hasattr(scheds, "_schedulers"):
            for s in scheds._schedulers:
                self.recursive_undo(s)
        elif hasattr(scheds, "last_epoch"):
            scheds.last_epoch -= 1

    def step(self) -> None:
        """Advance one epoch: step the current scheduler, or start the next one at a milestone."""
        self.last_epoch += 1
        index = bisect.bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[index]
        if index > 0 and self._milestones[index - 1] == self.last_epoch:
            scheduler._update_lr(0)
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()


class ChainedScheduler(_Combination):
    """Steps all `schedulers` at each `step()`, their changes composing (each scales the lr the previous one set),
    as `torch.optim.lr_scheduler.ChainedScheduler`.

    >>> opt = aotjax.optim.SGD([aotjax.zeros(1)], lr=1.0)
    >>> S = aotjax.optim.lr_scheduler
    >>> sched = S.ChainedScheduler([S.ConstantLR(opt, factor=0.5, total_iters=2), S.ExponentialLR(opt, gamma=0.5)])
    >>> lrs = sched.get_last_lr()
    >>> for _ in range(3):
    ...     sched.step()
    ...     lrs += sched.get_last_lr()
    >>> lrs
    [0.5, 0.25, 0.25, 0.125]
    """

    def __init__(self, schedulers: Sequence, optimizer=None):
        if len(schedulers) < 1:
            raise _error(ValueError, f"{type(self).__name__} expects at least one scheduler to be chained, but got "
                                     f"no scheduler.")
        optimizer = optimizer if optimizer is not None else schedulers[0].optimizer
        self._check_schedulers(schedulers, optimizer)
        self._schedulers = schedulers
        self.optimizer = optimizer
        self._last_lr = _group_lrs(self._schedulers[-1].optimizer)

    def step(self) -> None:
        """Step every scheduler, in order."""
        for scheduler in self._schedulers:
            scheduler.step()
        self._last_lr = _group_lrs(self._schedulers[-1].optimizer)
