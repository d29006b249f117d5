"""Anomaly detection, as `torch.autograd.detect_anomaly` / `set_detect_anomaly`: while it is on (with `check_nan`), an
eager `backward()` or `autograd.grad` whose gradients hold a NaN raises naming the node whose backward made it
(`Function 'SqrtBackward0' returned nan values in its 0th output.`), found by running the recorded graph's backward
again with every node's output probed, then the suspect nodes' own backwards alone. Gradients are read on the host,
so it costs a device read per backward (and more programs when a NaN appears): a debugging mode, as torch's. Inside
a compiled step the gradients are traced values and are not checked.

>>> x = aotjax.tensor([0.0], requires_grad=True)
>>> with aotjax.autograd.detect_anomaly():
...     (x.sqrt() * 0).sum().backward()
Traceback (most recent call last):
...
RuntimeError: Function 'SqrtBackward0' returned nan values in its 0th output...
"""
from __future__ import annotations

import functools
import warnings

__all__ = ["detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled", "is_anomaly_check_nan_enabled"]

_mode = {"enabled": False, "check_nan": True}


def is_anomaly_enabled() -> bool:
    return _mode["enabled"]


def is_anomaly_check_nan_enabled() -> bool:
    return _mode["check_nan"]


def checking_nan() -> bool:
    """Whether a backward checks its gradients for NaN now."""
    return _mode["enabled"] and _mode["check_nan"]


class set_detect_anomaly:
    """Turn anomaly detection on or off (`mode`), now; as a context manager, back to what it was on exit."""

    def __init__(self, mode: bool, check_nan: bool = True):
        self.previous = dict(_mode)
        _mode["enabled"], _mode["check_nan"] = bool(mode), bool(check_nan)

    def __enter__(self) -> "set_detect_anomaly":
        return self

    def __exit__(self, *exc) -> None:
        _mode.update(self.previous)


class detect_anomaly:
    """Anomaly detection on inside a `with` block or a decorated function (it warns that it slows the backward)."""

    def __init__(self, check_nan: bool = True):
        self.check_nan = check_nan
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the runtime and should only be "
                      "enabled for debugging.", stacklevel=2)

    def __enter__(self) -> None:
        self.previous = dict(_mode)
        _mode["enabled"], _mode["check_nan"] = True, self.check_nan

    def __exit__(self, *exc) -> None:
        _mode.update(self.previous)

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)
        return wrapped
