"""`aotjax.signal`: PyTorch's `torch.signal` namespace (`windows`).

>>> aotjax.signal.windows.hann(3)
tensor([0., 1., 0.])
"""
from aotjax.signal import windows  # noqa: F401

__all__ = ["windows"]
