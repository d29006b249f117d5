"""`embedding` (`torch.nn.functional.embedding`, the lookup behind `nn.Embedding`; torch files it under sparse
layers): a gather of rows, a composition of existing ops, so every transform handles it with no rules of its own."""
from __future__ import annotations

from aotjax.core.errors import DTypeError, ShapeError
from aotjax.core.source_info import where
from aotjax.ops.base.data import as_tensor
from aotjax.ops.base.promotion import category
from aotjax.ops.creation.factories import arange
from aotjax.ops.indexing.subscripts import check_index, index_p
from aotjax.ops.math.elementwise import where as select

# -- embedding and attention -----------------------------------------------------------------------
__all__: list[str] = []
FUNCTIONAL = ["embedding"]


def embedding(input, weight, padding_idx: int | None = None):
    """The rows of `weight` (shape `[num_embeddings, dim]`) at the integer indices `input`: a tensor
    of shape `input.shape + [dim]`. The row `padding_idx`, if given, gets no gradient (it is read detached).

    >>> w = aotjax.tensor([[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]])
    >>> aotjax.nn.functional.embedding(aotjax.tensor([2, 0]), w)
    tensor([[4., 5.],
            [0., 1.]])
    """
    input, weight = as_tensor(input), as_tensor(weight)
    if weight.ndim != 2:
        raise ShapeError(f"embedding: weight must be 2-d [num_embeddings, embedding_dim], got "
                         f"{list(weight.shape)}{where()}")
    if category(input.dtype) != 1:
        raise DTypeError(f"embedding: indices must be an integer tensor, got {input.aval.str_short()}{where()}")
    n = weight.shape[0]
    if padding_idx is not None:
        if not -n <= padding_idx < n:
            raise ValueError(f"embedding: padding_idx must be within num_embeddings ({n}), got {padding_idx}{where()}")
        padding_idx %= n
        is_padding = arange(n).reshape(n, 1) == padding_idx
        weight = select(is_padding, weight.detach(), weight)
    input = check_index("embedding", input, n, 0, negative=False, message=f"embedding: index {{}} is out of range "
                        f"for a weight of {n} rows (num_embeddings): indices must be in [0, {n})")
    rows = index_p.bind(weight, input.reshape(-1), dims=(0,))
    return rows.reshape(tuple(input.shape) + (weight.shape[1],))
