"""`scaled_dot_product_attention` (`torch.nn.functional`), with boolean or additive masks, `is_causal`, `scale` and
attention dropout: a composition of matmuls and `softmax`, so every transform handles it with no rules of its own."""
from __future__ import annotations

import math

import numpy as np

from aotjax.core.errors import ShapeError
from aotjax.core.source_info import where
from aotjax.ops.base import autocast
from aotjax.ops.base.data import as_tensor
from aotjax.ops.creation.factories import ones
from aotjax.ops.nn.activations import softmax
from aotjax.ops.nn.normalization import dropout

__all__: list[str] = []
FUNCTIONAL = ["scaled_dot_product_attention"]


@autocast.lower
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p: float = 0.0, is_causal: bool = False,
                                 scale: float | None = None, *, dropout_key=None):
    """`softmax(query @ key.T * scale + mask) @ value` over the last two dims (`[..., L, E]` queries,
    `[..., S, E]` keys, `[..., S, Ev]` values). A bool `attn_mask` keeps the positions where it is True;
    a float one is added to the scores; `is_causal` keeps the lower triangle. `scale` defaults to
    `1 / sqrt(E)`. With `dropout_p > 0` the attention weights are dropped out with `dropout_key`.

    >>> q = aotjax.ones(1, 2, 4)
    >>> aotjax.nn.functional.scaled_dot_product_attention(q, q, q).shape
    (1, 2, 4)
    """
    query, key, value = as_tensor(query), as_tensor(key), as_tensor(value)
    if min(query.ndim, key.ndim, value.ndim) < 2:
        raise ShapeError(f"scaled_dot_product_attention: query, key and value need at least 2 dims, got "
                         f"{list(query.shape)}, {list(key.shape)}, {list(value.shape)}{where()}")
    if is_causal and attn_mask is not None:
        raise ValueError(f"scaled_dot_product_attention: pass either attn_mask or is_causal=True, not both{where()}")
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    scores = (query @ key.transpose(-2, -1)) * scale
    if is_causal:
        attn_mask = ones(query.shape[-2], key.shape[-2], dtype=np.bool_).tril()
    if attn_mask is not None:
        attn_mask = as_tensor(attn_mask)
        if attn_mask.dtype == np.bool_:
            scores = scores.masked_fill(attn_mask.logical_not(), float("-inf"))
        else:
            scores = scores + attn_mask
    weights = softmax(scores, -1)
    if dropout_p > 0.0:
        if dropout_key is None:
            raise TypeError(f"scaled_dot_product_attention: dropout_p > 0 needs dropout_key=aotjax.random.key(...)"
                            f"{where()}; aotjax has no global RNG state")
        weights = dropout(weights, dropout_p, key=dropout_key)
    return weights @ value
