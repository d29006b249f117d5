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

import sys

import jax

from aotjax.core.source_info import where

__all__ = ["cuda", "cudnn", "mps", "set_float32_matmul_precision", "get_float32_matmul_precision"]

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
