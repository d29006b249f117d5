"""PyTorch's learning-rate schedulers (`torch.optim.lr_scheduler`) for aotjax's optimizers: the same classes,
arguments, lr sequences, warnings and `state_dict()` keys.

A scheduler reads each group's lr as a Python float and writes a Python float back (`group['lr'] = value`), which
an aotjax `ParamGroup` fills into the group's 0-d lr tensor in place: a training step compiled with `aotjax.jit`
reads the new lr at its next call without retracing. Schedules that scale the current lr (StepLR, ExponentialLR,
CosineAnnealingLR, ...) compute in doubles as torch does, not from the lr tensor's float32 rounding (see
`base._number`), so their sequences are torch's to the last bit in both float widths.

Where things live: the base class `LRScheduler` (also `_LRScheduler`), the helpers that read and write a group's
hyperparameters and the argument checks in `base`; the schedules of the lr by epoch (`LambdaLR`,
`MultiplicativeLR`, `StepLR`, `MultiStepLR`, `ConstantLR`, `LinearLR`, `ExponentialLR`, `PolynomialLR`,
`CosineAnnealingLR`, `CosineAnnealingWarmRestarts`) in `schedules`; the per-batch cycles that also move the
momentum (`OneCycleLR`, `CyclicLR`) in `cyclic`; the schedulers made of schedulers (`SequentialLR`,
`ChainedScheduler`) in `combined`; `ReduceLROnPlateau` in `plateau`.

Not carried over: torch's warning when `scheduler.step()` runs before `optimizer.step()` (torch wraps the
optimizer's `step` to detect it; aotjax leaves the optimizer alone).
"""
from aotjax.optim.lr_scheduler.base import EPOCH_DEPRECATION_WARNING, LRScheduler, _LRScheduler
from aotjax.optim.lr_scheduler.combined import ChainedScheduler, SequentialLR
from aotjax.optim.lr_scheduler.cyclic import CyclicLR, OneCycleLR
from aotjax.optim.lr_scheduler.plateau import ReduceLROnPlateau
from aotjax.optim.lr_scheduler.schedules import (
    ConstantLR,
    CosineAnnealingLR,
    CosineAnnealingWarmRestarts,
    ExponentialLR,
    LambdaLR,
    LinearLR,
    MultiplicativeLR,
    MultiStepLR,
    PolynomialLR,
    StepLR,
)

__all__ = ["LRScheduler", "LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR", "ConstantLR", "LinearLR",
           "ExponentialLR", "SequentialLR", "CosineAnnealingLR", "ChainedScheduler", "ReduceLROnPlateau", "CyclicLR",
           "CosineAnnealingWarmRestarts", "OneCycleLR", "PolynomialLR"]
