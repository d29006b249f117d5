"""`EmbeddingBag`, as `torch.nn`'s: `embedding_bag` over a learned table."""
from __future__ import annotations

from aotjax.core.interpreter import grad_mode
from aotjax.nn import init
from aotjax.nn.module import Module
from aotjax.nn.parameter import Parameter
from aotjax.ops.creation.factories import empty
from aotjax.ops.nn.normalization import embedding_bag

__all__ = ["EmbeddingBag"]


class EmbeddingBag(Module):
    """The sums, means or maxima (`mode`) of bags of rows of a learned `[num_embeddings, embedding_dim]` table
    (initialized from a standard normal, the row `padding_idx` zeroed); `forward(input, offsets=None,
    per_sample_weights=None)` as `aotjax.nn.functional.embedding_bag`. `max_norm`, `scale_grad_by_freq` and
    `sparse` are not supported.

    >>> bag = aotjax.nn.EmbeddingBag(10, 3, mode="sum")
    >>> bag(aotjax.tensor([[1, 2], [3, 4]])).shape
    (2, 3)
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, max_norm=None, norm_type: float = 2.0,
                 scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False, _weight=None,
                 include_last_offset: bool = False, padding_idx: int | None = None, device=None, dtype=None):
        super().__init__()
        if max_norm is not None or scale_grad_by_freq or sparse:
            raise NotImplementedError("EmbeddingBag: max_norm, scale_grad_by_freq and sparse are not supported")
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise AssertionError("padding_idx must be within num_embeddings")
            padding_idx = padding_idx % num_embeddings
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.max_norm, self.norm_type, self.scale_grad_by_freq, self.sparse = max_norm, norm_type, False, False
        self.mode, self.include_last_offset, self.padding_idx = mode, include_last_offset, padding_idx
        if _weight is None:
            self.weight = Parameter(empty(num_embeddings, embedding_dim, dtype=dtype))
            self.reset_parameters()
        else:
            self.weight = Parameter(_weight)

    def reset_parameters(self) -> None:
        """The table from a standard normal, the row `padding_idx` zeroed."""
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with grad_mode(False):  # NOTE: initialization, outside any graph (as torch's)
                self.weight[self.padding_idx].fill_(0)

    def forward(self, input, offsets=None, per_sample_weights=None):
        return embedding_bag(input, self.weight, offsets, mode=self.mode, per_sample_weights=per_sample_weights,
                             include_last_offset=self.include_last_offset, padding_idx=self.padding_idx)

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}, mode='{self.mode}'"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        return s
