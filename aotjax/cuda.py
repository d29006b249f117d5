"""`torch.cuda` as a script touches it, on jax's GPU platform: whether there is a GPU, how many, their names and
memory, seeding, synchronising. A script written for CUDA (`device = "cuda" if torch.cuda.is_available() else
"cpu"`) runs unchanged on any machine. aotjax keeps arrays where jax puts them (on the first GPU when there is one),
so there is no per-device state beyond what jax's devices report.

>>> aotjax.cuda.is_available() == bool(aotjax.cuda.device_count())
True
"""
from __future__ import annotations

import jax

from aotjax.core.source_info import where
from aotjax.ops.base.frontend import gpus, require_gpus

__all__ = ["is_available", "device_count", "current_device", "get_device_name", "get_device_capability",
           "get_device_properties", "is_bf16_supported", "manual_seed", "manual_seed_all", "seed", "seed_all",
           "synchronize", "empty_cache", "memory_allocated", "max_memory_allocated", "memory_reserved",
           "reset_peak_memory_stats", "set_device", "device"]  # and `amp` (`__getattr__`)


def is_available() -> bool:
    """Whether jax has a GPU here."""
    return bool(gpus())


def device_count() -> int:
    """How many GPUs jax has (0 without one)."""
    return len(gpus())


def _gpu(index=None) -> jax.Device:
    found = require_gpus()
    if index is None:
        return found[0]
    if isinstance(index, jax.Device):
        return index
    i = int(str(index).rpartition(":")[2] or 0) if not isinstance(index, int) else index
    if not 0 <= i < len(found):
        raise RuntimeError(f"Invalid device ordinal {i}{where()}: jax has {len(found)} GPU(s)")
    return found[i]


def current_device() -> int:
    """The index of the GPU arrays go to: 0 (jax's default device). Raises without a GPU, as torch does."""
    _gpu()
    return 0


def set_device(device) -> None:
    """Accepted for the GPU jax uses by default (index 0); any other raises: place tensors with `.to(device)`."""
    if _gpu(device) != _gpu():
        raise NotImplementedError(f"aotjax.cuda.set_device: aotjax places new arrays on jax's default device{where()};"
                                  f" move tensors with x.to('cuda:1') or aotjax.device_put instead")


def get_device_name(device=None) -> str:
    """The GPU's name as jax reports it (`device_kind`, e.g. 'NVIDIA H100 80GB HBM3')."""
    return _gpu(device).device_kind


def get_device_capability(device=None) -> tuple[int, int]:
    """The GPU's compute capability `(major, minor)` where jax reports it, else (0, 0)."""
    capability = str(getattr(_gpu(device), "compute_capability", "0.0"))
    major, _, minor = capability.partition(".")
    return int(major or 0), int(minor or 0)


def get_device_properties(device=None):
    """The GPU's name, compute capability and memory (`total_memory` in bytes, where jax reports it)."""
    from types import SimpleNamespace
    d = _gpu(device)
    major, minor = get_device_capability(d)
    stats = d.memory_stats() or {}
    return SimpleNamespace(name=d.device_kind, major=major, minor=minor, total_memory=stats.get("bytes_limit", 0),
                           multi_processor_count=getattr(d, "core_count", 0))


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """Whether the GPU computes in bfloat16 (compute capability 8.0 or later); False without a GPU."""
    if not is_available():
        return False
    return get_device_capability()[0] >= 8 or including_emulation


def manual_seed(seed: int) -> None:
    """Seed aotjax's generator (one for every device: `aotjax.manual_seed`)."""
    from aotjax.ops.random.generator import manual_seed as seed_all_devices
    seed_all_devices(seed)


manual_seed_all = manual_seed


def seed() -> None:
    """Seed aotjax's generator from a random number (`aotjax.seed`)."""
    from aotjax.ops.random.generator import seed as reseed
    reseed()


seed_all = seed


def synchronize(device=None) -> None:
    """Wait until every array jax holds on the GPU (all of them: `device` is accepted) is computed."""
    for array in jax.live_arrays():
        if any(d.platform == "gpu" for d in array.devices()):
            array.block_until_ready()


def empty_cache() -> None:
    """Accepted: XLA's allocator keeps its pool (set XLA_PYTHON_CLIENT_ALLOCATOR=platform to free eagerly)."""


def _stats(device) -> dict:
    if not is_available():
        return {}
    return _gpu(device).memory_stats() or {}


def memory_allocated(device=None) -> int:
    """Bytes the GPU's arrays use now, as jax reports it (0 without a GPU)."""
    return int(_stats(device).get("bytes_in_use", 0))


def max_memory_allocated(device=None) -> int:
    """The most bytes the GPU's arrays used at once, as jax reports it (0 without a GPU)."""
    return int(_stats(device).get("peak_bytes_in_use", 0))


def memory_reserved(device=None) -> int:
    """Bytes XLA's allocator holds on the GPU (0 without a GPU)."""
    stats = _stats(device)
    return int(stats.get("pool_bytes", stats.get("bytes_reserved", stats.get("bytes_in_use", 0))))


def reset_peak_memory_stats(device=None) -> None:
    """Accepted: jax's peak counter cannot be reset."""


def device(index):
    """`torch.cuda.device(i)` as a context manager: accepted for the default GPU (see `set_device`)."""
    import contextlib
    set_device(index)
    return contextlib.nullcontext()


def __getattr__(name: str):
    if name == "amp":  # NOTE: `torch.cuda.amp` (autocast with float16, GradScaler): loaded when first named
        from aotjax.amp import cuda_amp
        return cuda_amp
    raise AttributeError(f"module 'aotjax.cuda' has no attribute {name!r}")
