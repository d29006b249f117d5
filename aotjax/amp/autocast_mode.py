"""The `autocast` context manager and decorator (see `aotjax.amp`)."""
from __future__ import annotations

import functools
import warnings

import numpy as np

from aotjax.core import call_epoch
from aotjax.core.interpreter import _state
from aotjax.core.source_info import user_stacklevel
from aotjax.ops.base.autocast import region as autocast_region
from aotjax.ops.base.frontend import to_dtype

__all__ = ["autocast", "is_autocast_enabled", "get_autocast_dtype", "is_autocast_available"]

_LOW = (np.dtype(np.float16), np.dtype("bfloat16"))
_DEFAULT = {"cuda": np.dtype(np.float16)}  # NOTE: every other device type: bfloat16, as torch's CPU/XLA autocast


class autocast:  # noqa: N801  (torch's name)
    """Run the region (a `with` block, or a function decorated with it) in mixed precision: the ops of autocast's
    lists cast their floating-point operands to `dtype` (matrix products, convolutions, attention) or to float32
    (losses; on 'cuda' also softmax and the normalizations: torch's two policies); see `aotjax.ops.base.autocast`.
    `device_type` is torch's ('cuda', 'cpu', 'xla', ...; aotjax runs every op where jax placed its operands):
    'cuda' defaults to float16, the others to bfloat16. `enabled=False` turns autocast off inside an enclosing
    region. A dtype other than float16 and bfloat16 disables the region with torch's warning. `cache_enabled` is
    accepted (XLA keeps no weight cache to turn off).

    Regions nest and are per thread; a function compiled with `aotjax.jit` traces once per autocast region it is
    called under.

    >>> lin = aotjax.nn.Linear(4, 2)
    >>> with aotjax.autocast("cpu"):
    ...     y = lin(aotjax.ones(3, 4))
    ...     loss = aotjax.nn.functional.mse_loss(y, aotjax.zeros(3, 2))
    >>> y.dtype, loss.dtype, lin.weight.dtype
    (dtype(bfloat16), dtype('float32'), dtype('float32'))
    """

    def __init__(self, device_type: str = "cuda", dtype=None, enabled: bool = True, cache_enabled=None):
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        self.device_type = device_type
        self.fast_dtype = _DEFAULT.get(device_type, np.dtype("bfloat16")) if dtype is None else to_dtype(
            dtype, "autocast")
        self._enabled = bool(enabled)
        if self._enabled and self.fast_dtype not in _LOW:
            warnings.warn(f"In {device_type} autocast, but the target dtype is not supported. Disabling autocast.\n"
                          f"{device_type} Autocast only supports dtypes of torch.bfloat16, torch.float16 currently.",
                          UserWarning, stacklevel=user_stacklevel())
            self._enabled = False
        self._prev: list = []

    def __enter__(self):
        region = autocast_region((self.fast_dtype, "cuda" if self.device_type == "cuda" else "other")
                                 if self._enabled else None)
        region.__enter__()
        self._prev.append(region)
        call_epoch.advance()  # NOTE: a compiled call's fast path looks again (`FastCall.refit` misses under autocast)
        return self

    def __exit__(self, *exc):
        self._prev.pop().__exit__()
        call_epoch.advance()
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def decorated(*args, **kwargs):
            with autocast(self.device_type, self.fast_dtype, self._enabled):
                return fn(*args, **kwargs)
        return decorated


def is_autocast_enabled(device_type: str | None = None) -> bool:
    """Whether an autocast region is active in this thread (one for every device type)."""
    return _state.autocast is not None


def get_autocast_dtype(device_type: str = "cuda"):
    """The dtype of the active region, or the default of `device_type` outside one."""
    return _state.autocast[0] if _state.autocast is not None else _DEFAULT.get(device_type, np.dtype("bfloat16"))


def is_autocast_available(device_type: str) -> bool:
    """True: aotjax autocasts on every device jax has."""
    return True
