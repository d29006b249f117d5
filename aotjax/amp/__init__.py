"""`torch.amp`: automatic mixed precision. `autocast` runs the ops of a region in low precision where that gains
speed (matrix products, convolutions, attention in bfloat16 or float16) and in float32 where it would lose
accuracy (softmax, normalizations, losses): see `aotjax.ops.base.autocast` for the policy. `GradScaler` scales a
float16 loss so its gradients do not underflow, and skips the optimizer step whose gradients overflowed: eagerly as
torch does, and inside a step compiled whole with `aotjax.jit` as data (no host synchronisation).

`aotjax.autocast`, `aotjax.amp.autocast`, `aotjax.cuda.amp.autocast` (float16 by default) and
`aotjax.cpu.amp.autocast` (bfloat16 by default) are the same context manager and decorator.
"""
from __future__ import annotations

import sys
from types import SimpleNamespace

from aotjax.amp.autocast_mode import autocast, get_autocast_dtype, is_autocast_available, is_autocast_enabled
from aotjax.amp.grad_scaler import GradScaler

__all__ = ["autocast", "GradScaler", "is_autocast_available", "is_autocast_enabled", "get_autocast_dtype",
           "custom_fwd", "custom_bwd"]


def custom_fwd(fwd=None, *, device_type: str = "cuda", cast_inputs=None):
    """`torch.amp.custom_fwd` for an `autograd.Function`'s `forward`: with `cast_inputs`, the forward runs outside
    autocast on its floating-point inputs cast to that dtype; without, as it is."""
    import functools

    from aotjax.ops.base.autocast import cast_operands
    from aotjax.ops.base.frontend import to_dtype

    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def forward(*args, **kwargs):
        if cast_inputs is None or not is_autocast_enabled():
            return fwd(*args, **kwargs)
        args, kwargs = cast_operands(args, kwargs, to_dtype(cast_inputs, "custom_fwd"))
        with autocast(device_type, enabled=False):
            return fwd(*args, **kwargs)

    return forward


def custom_bwd(bwd=None, *, device_type: str = "cuda"):
    """`torch.amp.custom_bwd` for an `autograd.Function`'s `backward`: accepted (the backward runs as it is)."""
    if bwd is None:
        return lambda fn: fn
    return bwd


def _cuda_autocast(enabled: bool = True, dtype=None, cache_enabled: bool = True):
    """`torch.cuda.amp.autocast`: `autocast("cuda", ...)` (float16 unless `dtype` says otherwise)."""
    return autocast("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


def _cpu_autocast(enabled: bool = True, dtype=None, cache_enabled: bool = True):
    """`torch.cpu.amp.autocast`: `autocast("cpu", ...)` (bfloat16 unless `dtype` says otherwise)."""
    return autocast("cpu", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


def _cuda_grad_scaler(init_scale: float = 2.0 ** 16, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                      growth_interval: int = 2000, enabled: bool = True) -> GradScaler:
    """`torch.cuda.amp.GradScaler`: `GradScaler("cuda", ...)`."""
    return GradScaler("cuda", init_scale, growth_factor, backoff_factor, growth_interval, enabled)


cuda_amp = SimpleNamespace(autocast=_cuda_autocast, GradScaler=_cuda_grad_scaler, custom_fwd=custom_fwd,
                           custom_bwd=custom_bwd)
cpu_amp = SimpleNamespace(autocast=_cpu_autocast, GradScaler=GradScaler)
# NOTE: `from torch.cuda.amp import autocast, GradScaler` (and `torch.cpu.amp`) imports them as modules: the
# import system finds these namespaces under those names
sys.modules.update({"aotjax.cuda.amp": cuda_amp, "aotjax.cpu.amp": cpu_amp})
