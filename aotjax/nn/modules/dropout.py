"""`Dropout`, as `torch.nn`'s: masks drawn from the stateful default generator."""
from __future__ import annotations

from aotjax.nn.module import Module
from aotjax.ops.nn.normalization import dropout

__all__ = ["Dropout"]


class Dropout(Module):
    """In training, zeroes each element with probability `p` and scales the others by `1 / (1 - p)`; in
    evaluation, the identity. The mask is drawn from the default generator (`aotjax.manual_seed`), whose state
    each call advances, also under `jit`.

    >>> drop = aotjax.nn.Dropout(0.5)
    >>> sorted(set(drop(aotjax.ones(100)).tolist()))
    [0.0, 2.0]
    >>> drop.eval()(aotjax.ones(2))
    tensor([1., 1.])
    """

    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def forward(self, input):
        return dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"
