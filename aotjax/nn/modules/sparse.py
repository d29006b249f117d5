"""`Embedding`, as `torch.nn`'s."""
from __future__ import annotations

from aotjax.core.interpreter import grad_mode
from aotjax.core.source_info import where
from aotjax.nn import init
from aotjax.nn.module import Module
from aotjax.nn.parameter import Parameter
from aotjax.ops.creation.factories import empty
from aotjax.ops.nn.sparse import embedding

__all__ = ["Embedding"]


class Embedding(Module):
    """A lookup table of `num_embeddings` vectors of size `embedding_dim`: `forward(indices)` returns the rows
    at the integer `indices` (shape `indices.shape + [embedding_dim]`). The weight is drawn from N(0, 1); the
    row `padding_idx` (if given) is zeroed and gets no gradient. `max_norm`, `scale_grad_by_freq` and
    `sparse` are not supported.

    >>> emb = aotjax.nn.Embedding(10, 3, padding_idx=0)
    >>> emb(aotjax.tensor([[0, 4]])).shape, emb.weight[0]
    ((1, 2, 3), tensor([0., 0., 0.], grad_fn=<SelectBackward0>))
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None,
                 max_norm: float | None = None, norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                 sparse: bool = False, _weight=None, _freeze: bool = False, device=None, dtype=None):
        super().__init__()
        if max_norm is not None or scale_grad_by_freq or sparse:
            raise NotImplementedError("Embedding: max_norm, scale_grad_by_freq and sparse are not supported by "
                                      f"aotjax{where()}; renormalize the weight yourself (under aotjax.no_grad) "
                                      f"if you need max_norm")
        if padding_idx is not None:
            if padding_idx > 0 and padding_idx >= num_embeddings:
                raise AssertionError("Padding_idx must be within num_embeddings")
            if padding_idx < 0:
                if padding_idx < -num_embeddings:
                    raise AssertionError("Padding_idx must be within num_embeddings")
                padding_idx = num_embeddings + padding_idx
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.padding_idx = padding_idx
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.sparse = sparse
        if _weight is None:
            self.weight = Parameter(empty(num_embeddings, embedding_dim, dtype=dtype), requires_grad=not _freeze)
            self.reset_parameters()
        else:
            if tuple(_weight.shape) != (num_embeddings, embedding_dim):
                raise ValueError(f"Shape of weight {list(_weight.shape)} does not match num_embeddings and "
                                 f"embedding_dim ({num_embeddings}, {embedding_dim})")
            self.weight = Parameter(_weight, requires_grad=not _freeze)

    def reset_parameters(self) -> None:
        """Draw the weight anew from N(0, 1), the padding row zeroed."""
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with grad_mode(False):  # NOTE: initialization, outside any graph (as torch's)
                self.weight[self.padding_idx].fill_(0)

    def forward(self, input):
        return embedding(input, self.weight, self.padding_idx)

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        return s

    @classmethod
    def from_pretrained(cls, embeddings, freeze: bool = True, padding_idx: int | None = None, max_norm=None,
                        norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False):
        """An Embedding whose weight is the 2-D tensor `embeddings` (shared, not copied).

        >>> aotjax.nn.Embedding.from_pretrained(aotjax.eye(3))(aotjax.tensor([1]))
        tensor([[0., 1., 0.]])
        """
        if embeddings.ndim != 2:
            raise ValueError(f"Embeddings parameter is expected to be 2-dimensional, got shape "
                             f"{list(embeddings.shape)}")
        rows, cols = embeddings.shape
        return cls(rows, cols, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse, _weight=embeddings,
                   _freeze=freeze)
