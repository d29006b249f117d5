"""`PixelShuffle` and `PixelUnshuffle`, the layers of `F.pixel_shuffle` / `F.pixel_unshuffle`, as `torch.nn`'s."""
from __future__ import annotations

from aotjax.nn.module import Module
from aotjax.ops.nn.resampling import pixel_shuffle, pixel_unshuffle

__all__ = ["PixelShuffle", "PixelUnshuffle"]


class PixelShuffle(Module):
    """Rearranges `[*, C * r * r, H, W]` into `[*, C, H * r, W * r]` (`r = upscale_factor`).

    >>> aotjax.nn.PixelShuffle(2)(aotjax.ones(1, 8, 3, 3)).shape
    (1, 2, 6, 6)
    """

    def __init__(self, upscale_factor: int):
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input):
        return pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """The inverse of `PixelShuffle`: `[*, C, H * r, W * r]` into `[*, C * r * r, H, W]`.

    >>> aotjax.nn.PixelUnshuffle(2)(aotjax.ones(1, 2, 6, 6)).shape
    (1, 8, 3, 3)
    """

    def __init__(self, downscale_factor: int):
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input):
        return pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"
