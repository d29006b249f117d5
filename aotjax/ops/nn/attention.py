"""`scaled_dot_product_attention` (`torch.nn.functional`), with boolean or additive masks, `is_causal`, `scale` and
attention dropout, and `multi_head_attention_forward` (what `nn.MultiheadAttention` computes: the projections, the
heads, their attention and the output projection): compositions of matmuls and `softmax`, so every transform handles
them with no rules of their own."""
from __future__ import annotations

import math

import numpy as np

from aotjax.core.errors import DTypeError, ShapeError
from aotjax.core.source_info import where
from aotjax.ops.base import autocast
from aotjax.ops.base.data import as_tensor
from aotjax.ops.base.promotion import is_float
from aotjax.ops.calls.eager_fusion import fused_when_eager
from aotjax.ops.creation.factories import ones, zeros
from aotjax.ops.linalg.matmul import linear
from aotjax.ops.nn.activations import softmax
from aotjax.ops.nn.normalization import dropout
from aotjax.ops.nn.resampling import pad
from aotjax.ops.random.generator import draw_key
from aotjax.ops.shape.copies import cat

__all__: list[str] = []
FUNCTIONAL = ["scaled_dot_product_attention", "multi_head_attention_forward"]


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
    if dropout_p > 0.0:
        return _attention(query, key, value, attn_mask, dropout_p, is_causal, scale, dropout_key)
    return _attention_fused(query, key, value, attn_mask, 0.0, is_causal, scale, None)


def _attention(query, key, value, attn_mask, dropout_p: float, is_causal: bool, scale, dropout_key):
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


# NOTE: without dropout, attention is one program eagerly (with it, the key is drawn per call)
_attention_fused = fused_when_eager("ScaledDotProductFlashAttentionForCpuBackward0")(_attention)


# -- multi-head attention -------------------------------------------------------------------------------------------
_OP = "multi_head_attention_forward"


def _check_shapes(query, key, value, key_padding_mask, attn_mask, num_heads: int) -> bool:
    """Whether the inputs are batched (3-D) or not (2-D), checking that they agree, as torch does."""
    batched = query.ndim == 3
    if query.ndim not in (2, 3) or key.ndim != query.ndim or value.ndim != query.ndim:
        raise ShapeError(f"{_OP}: query, key and value must all be 3-D (batched) or 2-D (unbatched), got shapes "
                         f"{list(query.shape)}, {list(key.shape)}, {list(value.shape)}{where()}")
    if key_padding_mask is not None and key_padding_mask.ndim != query.ndim - 1:
        raise ShapeError(f"{_OP}: expected a {query.ndim - 1}-D key_padding_mask for {query.ndim}-D query, got shape "
                         f"{list(key_padding_mask.shape)}{where()}")
    if attn_mask is not None and attn_mask.ndim not in (2, 3):
        raise RuntimeError(f"attn_mask's dimension {attn_mask.ndim} is not supported")
    heads = [num_heads, query.shape[0], key.shape[0]]
    if not batched and attn_mask is not None and attn_mask.ndim == 3 and list(attn_mask.shape) != heads:
        raise ShapeError(f"{_OP}: expected an unbatched 3-D attn_mask of shape {heads}, got "
                         f"{list(attn_mask.shape)}{where()}")
    return batched


def _additive(name: str, mask, dtype):
    """A bool mask (True: not allowed) as an additive float mask (-inf there, 0 elsewhere); a float one as it is."""
    if mask is None:
        return None
    mask = as_tensor(mask)
    if mask.dtype == np.bool_:
        return zeros(*mask.shape, dtype=dtype).masked_fill(mask, float("-inf"))
    if not is_float(mask.dtype):
        raise DTypeError(f"{_OP}: only bool and floating types of masks are supported, got {name} of "
                         f"{mask.dtype.name}{where()}")
    return mask


def _in_projection(query, key, value, E: int, in_proj_weight, in_proj_bias, separate):
    """`q, k, v`: each input through its third of the packed weight and bias, or its own weight (`separate`)."""
    weights = separate or tuple(in_proj_weight[i * E:(i + 1) * E] for i in range(3))
    biases = (None,) * 3 if in_proj_bias is None else tuple(in_proj_bias[i * E:(i + 1) * E] for i in range(3))
    return tuple(linear(x, w, b) for x, w, b in zip((query, key, value), weights, biases))


def _heads(x, static, name: str, N: int, H: int, head_dim: int):
    """`[T, N, H * head_dim]` to `[N * H, T, head_dim]`, or the given `static_k`/`static_v` (already so)."""
    if static is None:
        return x.reshape(x.shape[0], N * H, head_dim).transpose(0, 1)
    static = as_tensor(static)
    if static.ndim != 3 or static.shape[0] != N * H or static.shape[2] != head_dim:
        raise ShapeError(f"{_OP}: expected {name} of shape [{N * H}, S, {head_dim}], got {list(static.shape)}"
                         f"{where()}")
    return static


def multi_head_attention_forward(query, key, value, embed_dim_to_check: int, num_heads: int, in_proj_weight,
                                 in_proj_bias, bias_k, bias_v, add_zero_attn: bool, dropout_p: float, out_proj_weight,
                                 out_proj_bias, training: bool = True, key_padding_mask=None, need_weights: bool = True,
                                 attn_mask=None, use_separate_proj_weight: bool = False, q_proj_weight=None,
                                 k_proj_weight=None, v_proj_weight=None, static_k=None, static_v=None,
                                 average_attn_weights: bool = True, is_causal: bool = False, *, dropout_key=None,
                                 generator=None):
    """Multi-head attention as `torch.nn.functional.multi_head_attention_forward` computes it for
    `nn.MultiheadAttention`: `[L, N, E]` queries and `[S, N, E]`/`[S, N, kdim]`/`[S, N, vdim]` keys and values
    (`[L, E]`, `[S, E]` unbatched) projected by the thirds of `in_proj_weight`/`in_proj_bias` (or `q_proj_weight`,
    `k_proj_weight`, `v_proj_weight` with `use_separate_proj_weight`), split into `num_heads` heads, with `bias_k`/
    `bias_v` appended to the keys and values and a zero key and value with `add_zero_attn` (or the heads' keys and
    values given as `static_k`/`static_v`, `[N * num_heads, S, head_dim]`), attended (a bool mask is True where
    attending is NOT allowed, a float one is added to the scores), and projected by `out_proj_weight`/`out_proj_bias`.
    Returns the output and the attention weights (`[N, L, S]` averaged over heads, `[N, num_heads, L, S]` without
    `average_attn_weights`; None without `need_weights`). With `training`, attention dropout draws from
    `dropout_key` (`aotjax.random`) or `generator` (default: the default generator).

    >>> import aotjax.nn.functional as F
    >>> E, x = 4, aotjax.ones(3, 1, 4)
    >>> out, w = F.multi_head_attention_forward(x, x, x, E, 2, aotjax.eye(E).repeat(3, 1), None, None, None, False,
    ...                                         0.0, aotjax.eye(E), None)
    >>> out.shape, w.shape
    ((3, 1, 4), (1, 3, 3))
    """
    query, key, value = as_tensor(query), as_tensor(key), as_tensor(value)
    key_padding_mask = None if key_padding_mask is None else as_tensor(key_padding_mask)
    attn_mask = None if attn_mask is None else as_tensor(attn_mask)
    batched = _check_shapes(query, key, value, key_padding_mask, attn_mask, num_heads)
    if not batched:  # NOTE: one sequence: a batch of one, squeezed at the end
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        key_padding_mask = None if key_padding_mask is None else key_padding_mask.unsqueeze(0)
    L, N, E = query.shape
    key_padding_mask = _additive("key_padding_mask", key_padding_mask, query.dtype)
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the Transformer module "
                           "method `generate_square_subsequent_mask` to create this mask.")
    if is_causal and key_padding_mask is None and not need_weights:
        attn_mask = None  # NOTE: as torch: the hint alone says the mask, which scaled_dot_product_attention makes
    else:
        attn_mask = _additive("attn_mask", attn_mask, query.dtype)
        is_causal = is_causal and key_padding_mask is None
    if E != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but got {E}")
    head_dim = E // num_heads
    if head_dim * num_heads != E:
        raise AssertionError(f"embed_dim {E} not divisible by num_heads {num_heads}")
    if use_separate_proj_weight:
        if tuple(key.shape[:2]) != tuple(value.shape[:2]):
            raise ShapeError(f"{_OP}: key's sequence and batch dims {list(key.shape[:2])} do not match value's "
                             f"{list(value.shape[:2])}{where()}")
        if q_proj_weight is None or k_proj_weight is None or v_proj_weight is None:
            raise ValueError(f"{_OP}: use_separate_proj_weight=True needs q_proj_weight, k_proj_weight and "
                             f"v_proj_weight{where()}")
        separate = (q_proj_weight, k_proj_weight, v_proj_weight)
    else:
        if tuple(key.shape) != tuple(value.shape):
            raise ShapeError(f"{_OP}: key shape {list(key.shape)} does not match value shape {list(value.shape)}"
                             f"{where()}")
        if in_proj_weight is None:
            raise ValueError(f"{_OP}: use_separate_proj_weight is False but in_proj_weight is None{where()}")
        separate = None
    q, k, v = _in_projection(query, key, value, E, in_proj_weight, in_proj_bias, separate)
    if attn_mask is not None:
        want = (L, key.shape[0]) if attn_mask.ndim == 2 else (N * num_heads, L, key.shape[0])
        if tuple(attn_mask.shape) != want:
            raise RuntimeError(f"The shape of the {attn_mask.ndim}D attn_mask is {list(attn_mask.shape)}, but should "
                               f"be {list(want)}.")
        attn_mask = attn_mask.unsqueeze(0) if attn_mask.ndim == 2 else attn_mask
    if (bias_k is None) != (bias_v is None):
        raise ValueError(f"{_OP}: bias_k and bias_v must be given together{where()}")
    if bias_k is not None:
        if static_k is not None or static_v is not None:
            raise ValueError(f"{_OP}: bias_k and bias_v cannot be added to a static key or value{where()}")
        k, v = cat([k, as_tensor(bias_k).repeat(1, N, 1)]), cat([v, as_tensor(bias_v).repeat(1, N, 1)])
        attn_mask = None if attn_mask is None else pad(attn_mask, (0, 1))
        key_padding_mask = None if key_padding_mask is None else pad(key_padding_mask, (0, 1))
    q = _heads(q, None, "query", N, num_heads, head_dim)
    k = _heads(k, static_k, "static_k", N, num_heads, head_dim)
    v = _heads(v, static_v, "static_v", N, num_heads, head_dim)
    if add_zero_attn:
        k = cat([k, zeros(N * num_heads, 1, head_dim, dtype=k.dtype)], 1)
        v = cat([v, zeros(N * num_heads, 1, head_dim, dtype=v.dtype)], 1)
        attn_mask = None if attn_mask is None else pad(attn_mask, (0, 1))
        key_padding_mask = None if key_padding_mask is None else pad(key_padding_mask, (0, 1))
    S = k.shape[1]
    if key_padding_mask is not None:
        if tuple(key_padding_mask.shape) != (N, S):
            raise ShapeError(f"{_OP}: expected key_padding_mask of shape {[N, S]}, got "
                             f"{list(key_padding_mask.shape)}{where()}")
        padding = key_padding_mask.reshape(N, 1, 1, S).expand(N, num_heads, 1, S).reshape(N * num_heads, 1, S)
        attn_mask = padding if attn_mask is None else attn_mask + padding
    dropout_p = dropout_p if training else 0.0
    key_for_dropout = draw_key(_OP, generator, dropout_key) if dropout_p > 0.0 else None
    if need_weights:
        scores = (q * math.sqrt(1.0 / head_dim)) @ k.transpose(-2, -1)
        # NOTE: the mask in the scores' dtype: torch adds it in one autocast `baddbmm` (bfloat16 weights under a
        # bfloat16 autocast region, the mask cast too)
        weights = softmax(scores if attn_mask is None else attn_mask.to(scores.dtype) + scores, -1)
        if dropout_p > 0.0:
            weights = dropout(weights, dropout_p, key=key_for_dropout)
        out = (weights @ v).transpose(0, 1).reshape(L * N, E)
        out = linear(out, out_proj_weight, out_proj_bias).reshape(L, N, -1)
        weights = weights.reshape(N, num_heads, L, S)
        weights = weights.mean(1) if average_attn_weights else weights
        return (out, weights) if batched else (out.squeeze(1), weights.squeeze(0))
    if attn_mask is not None:
        attn_mask = attn_mask.unsqueeze(0) if attn_mask.shape[0] == 1 else attn_mask.reshape(N, num_heads, -1, S)
    out = scaled_dot_product_attention(q.reshape(N, num_heads, L, head_dim), k.reshape(N, num_heads, S, head_dim),
                                       v.reshape(N, num_heads, S, head_dim), attn_mask, dropout_p, is_causal,
                                       dropout_key=key_for_dropout)
    out = linear(out.permute(2, 0, 1, 3).reshape(N * L, E), out_proj_weight, out_proj_bias).reshape(L, N, -1)
    return (out if batched else out.squeeze(1)), None
