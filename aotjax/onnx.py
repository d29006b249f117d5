"""`torch.onnx`, so that `import torch.onnx` in a script runs; aotjax exports StableHLO, not ONNX: `export` says so.

>>> import aotjax.onnx
>>> aotjax.onnx.is_in_onnx_export()
False
"""
from __future__ import annotations

from aotjax.core.errors import UnsupportedError
from aotjax.core.source_info import where

__all__ = ["export", "is_in_onnx_export"]


def export(*args, **kwargs):
    """Refused: aotjax does not write ONNX."""
    raise UnsupportedError(f"aotjax.onnx.export{where()}: aotjax does not write ONNX; export the program as "
                           f"StableHLO with aotjax.export(f)(*args).serialize() (or aot(f).lower(...).export() for "
                           f"the forward and backward pair)")


def is_in_onnx_export() -> bool:
    """False: aotjax never runs an ONNX export."""
    return False
