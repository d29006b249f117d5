"""`ChannelShuffle`, the layer of `torch.nn.functional.channel_shuffle`, as `torch.nn.ChannelShuffle`."""
from __future__ import annotations

from aotjax.nn.module import Module
from aotjax.ops.nn.resampling import channel_shuffle

__all__ = ["ChannelShuffle"]


class ChannelShuffle(Module):
    """`channel_shuffle(input, groups)`.

    >>> aotjax.nn.ChannelShuffle(2)(aotjax.arange(4.0).reshape(1, 4, 1)).flatten()
    tensor([0., 2., 1., 3.])
    """

    def __init__(self, groups: int):
        super().__init__()
        self.groups = groups

    def forward(self, input):
        return channel_shuffle(input, self.groups)

    def extra_repr(self) -> str:
        return f"groups={self.groups}"
