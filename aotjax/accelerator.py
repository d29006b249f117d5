"""`torch.accelerator`, the device-agnostic API recent PyTorch scripts use (`device =
torch.accelerator.current_accelerator() if torch.accelerator.is_available() else torch.device("cpu")`): jax's GPUs
are the accelerator; without one, `is_available()` is False and `current_accelerator()` None, as in torch on a CPU
machine, so such scripts run on the CPU unchanged.

>>> aotjax.accelerator.is_available() == aotjax.cuda.is_available()
True
"""
from __future__ import annotations

from aotjax import cuda
from aotjax.core.source_info import where
from aotjax.ops.base.frontend import gpus

__all__ = ["is_available", "current_accelerator", "device_count", "current_device_index", "current_device_idx",
           "set_device_index", "set_device_idx", "synchronize", "empty_cache", "memory_allocated",
           "max_memory_allocated", "memory_reserved", "reset_peak_memory_stats"]


def is_available() -> bool:
    """Whether jax has an accelerator (a GPU) here."""
    return bool(gpus())


def current_accelerator(check_available: bool = False):
    """The accelerator's device (jax's first GPU), or None without one (`check_available` changes nothing then:
    torch also returns None)."""
    found = gpus()
    return found[0] if found else None


def device_count() -> int:
    """How many accelerators jax has (0 without one)."""
    return len(gpus())


def _require() -> None:
    if not gpus():
        raise RuntimeError(f"Cannot access accelerator device when none is available{where()}: jax has no GPU here; "
                           f"guard with aotjax.accelerator.is_available()")


def current_device_index() -> int:
    """0, the GPU jax places arrays on; torch's error without one."""
    _require()
    return cuda.current_device()


current_device_idx = current_device_index


def set_device_index(device) -> None:
    """As `aotjax.cuda.set_device` (index 0 only); torch's error without an accelerator."""
    _require()
    cuda.set_device(device)


set_device_idx = set_device_index


def synchronize(device=None) -> None:
    """Wait until every array jax holds on an accelerator is computed (nothing to do without one)."""
    if gpus():
        cuda.synchronize(device)


empty_cache = cuda.empty_cache
memory_allocated = cuda.memory_allocated
max_memory_allocated = cuda.max_memory_allocated
memory_reserved = cuda.memory_reserved
reset_peak_memory_stats = cuda.reset_peak_memory_stats
