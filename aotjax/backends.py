"""`torch.backends` as training scripts set it: `cuda.matmul.allow_tf32`, `cudnn.allow_tf32`, `cudnn.benchmark`,
`cudnn.deterministic`, `mps.is_available()`. The float32 matmul precision flags map onto jax's one setting,
`jax_default_matmul_precision` (as `aotjax.set_float32_matmul_precision` does): `allow_tf32 = True` is "high"
(TF32 on GPUs that have it), False is "highest" (full float32). The cuDNN flags are kept and read back (XLA picks
its own convolution algorithms; `deterministic` maps to XLA's deterministic-ops flag only where the user sets it in
`XLA_FLAGS`).

>>> aotjax.backends.cuda.matmul.allow_tf32 = True
>>> aotjax.get_float32_matmul_precision()
'high'
>>> aotjax.backends.cuda.matmul.allow_tf32 = False
>>> aotjax.get_float32_matmul_precision()
'highest'
"""
from __future__ import annotations

import os
import sys

import jax

from aotjax.core.source_info import where

__all__ = ["cuda", "cudnn", "mps", "set_float32_matmul_precision", "get_float32_matmul_precision",
           "use_deterministic_algorithms", "are_deterministic_algorithms_enabled",
           "is_deterministic_algorithms_warn_only_enabled", "set_num_threads", "get_num_threads",
           "set_num_interop_threads", "get_num_interop_threads"]

_JAX_PRECISION = {"highest": "float32", "high": "tensorfloat32", "medium": "bfloat16"}
_TORCH_PRECISION = {v: k for k, v in _JAX_PRECISION.items()}


def set_float32_matmul_precision(precision: str) -> None:
    """`torch.set_float32_matmul_precision`: "highest" (full float32), "high" (TF32 where the GPU has it) or
    "medium" (bfloat16 passes), as jax's `jax_default_matmul_precision`; programs compiled after it use it."""
    if precision not in _JAX_PRECISION:
        raise RuntimeError(f"set_float32_matmul_precision: invalid precision {precision!r}{where()}; expected "
                           f"'highest', 'high' or 'medium'")
    jax.config.update("jax_default_matmul_precision", _JAX_PRECISION[precision])


def get_float32_matmul_precision() -> str:
    """The precision `set_float32_matmul_precision` set ("highest" until then, as torch)."""
    return _TORCH_PRECISION.get(jax.config.jax_default_matmul_precision, "highest")


# -- process settings scripts make, read back as set ------------------------------------------------------------------
_settings = {"deterministic": False, "warn_only": False, "threads": None, "interop_threads": None}


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """`torch.use_deterministic_algorithms`: recorded and read back. XLA's CPU ops are deterministic already; on a
    GPU, XLA's scatter-adds are not unless the process starts with `XLA_FLAGS=--xla_gpu_deterministic_ops=true`
    (aotjax does not change the flags of a running backend)."""
    if not isinstance(mode, bool) or not isinstance(warn_only, bool):
        raise TypeError(f"use_deterministic_algorithms(): mode and warn_only must be bool, got "
                        f"{type(mode).__name__} and {type(warn_only).__name__}{where()}")
    _settings["deterministic"], _settings["warn_only"] = mode, warn_only and mode


def are_deterministic_algorithms_enabled() -> bool:
    return _settings["deterministic"]


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    return _settings["warn_only"]


def _positive(n, what: str) -> int:
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"{what}(): argument 'int' must be int, not {type(n).__name__}{where()}")
    if n <= 0:
        raise RuntimeError(f"{what}: Number of threads must be positive, got {n}{where()}")
    return n


def set_num_threads(n: int) -> None:
    """`torch.set_num_threads`: recorded and read back by `get_num_threads`. XLA sizes its CPU thread pool when the
    backend starts (`XLA_FLAGS=--xla_cpu_multi_thread_eigen=false` for one thread), so a running process keeps it."""
    _settings["threads"] = _positive(n, "set_num_threads")


def get_num_threads() -> int:
    """What `set_num_threads` set, else the number of CPUs this process may use."""
    if _settings["threads"]:
        return _settings["threads"]
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def set_num_interop_threads(n: int) -> None:
    """`torch.set_num_interop_threads`: recorded and read back (XLA's thread pools are its own)."""
    _settings["interop_threads"] = _positive(n, "set_num_interop_threads")


def get_num_interop_threads() -> int:
    return _settings["interop_threads"] or get_num_threads()


class _Matmul:
    @property
    def allow_tf32(self) -> bool:
        return get_float32_matmul_precision() != "highest"

    @allow_tf32.setter
    def allow_tf32(self, value: bool) -> None:
        set_float32_matmul_precision("high" if value else "highest")

    @property
    def allow_bf16_reduced_precision_reduction(self) -> bool:
        return True

    @allow_bf16_reduced_precision_reduction.setter
    def allow_bf16_reduced_precision_reduction(self, value: bool) -> None:
        pass  # NOTE: XLA decides how a bfloat16 dot accumulates

    allow_fp16_reduced_precision_reduction = allow_bf16_reduced_precision_reduction


class _Cuda:
    matmul = _Matmul()

    @staticmethod
    def is_built() -> bool:
        from aotjax import cuda as aotjax_cuda
        return aotjax_cuda.is_available()

    @staticmethod
    def flash_sdp_enabled() -> bool:
        return True

    @staticmethod
    def enable_flash_sdp(enabled: bool) -> None:
        pass  # NOTE: XLA picks the attention kernel

    enable_mem_efficient_sdp = enable_math_sdp = enable_flash_sdp


class _Cudnn:
    """Flags kept as set (see the module docstring)."""

    enabled = True
    benchmark = False
    deterministic = False
    allow_tf32 = True

    @staticmethod
    def is_available() -> bool:
        from aotjax import cuda as aotjax_cuda
        return aotjax_cuda.is_available()

    @staticmethod
    def version():
        return None


class _Mps:
    @staticmethod
    def is_available() -> bool:
        return False

    @staticmethod
    def is_built() -> bool:
        return False


cuda, cudnn, mps = _Cuda(), _Cudnn(), _Mps()
# NOTE: torch.backends is a package, so scripts write `import torch.backends.cudnn as cudnn`: the import system
# finds these objects under their module names
sys.modules.update({f"{__name__}.{name}": flags for name, flags in (("cuda", cuda), ("cudnn", cudnn), ("mps", mps))})
