"""Activation modules (`ReLU`, `GELU`, `SiLU`, `Tanh`, `Sigmoid`, `Softmax`) and `MultiheadAttention`, as
`torch.nn`'s."""
from __future__ import annotations

import math
import warnings

import numpy as np

from aotjax.core.errors import ShapeError
from aotjax.core.source_info import where
from aotjax.nn import init
from aotjax.nn.module import Module
from aotjax.nn.modules.linear import Linear
from aotjax.nn.parameter import Parameter
from aotjax.ops.creation.factories import empty, zeros
from aotjax.ops.linalg.matmul import linear
from aotjax.ops.math.elementwise import gelu, relu, relu_, sigmoid, silu, silu_, tanh
from aotjax.ops.nn.activations import softmax
from aotjax.ops.nn.normalization import dropout

__all__ = ["ReLU", "GELU", "SiLU", "Tanh", "Sigmoid", "Softmax", "MultiheadAttention"]


class ReLU(Module):
    """`max(x, 0)` elementwise (`inplace=True` writes into the input).

    >>> aotjax.nn.ReLU()(aotjax.tensor([-1.0, 2.0]))
    tensor([0., 2.])
    """

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return relu_(input) if self.inplace else relu(input)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class GELU(Module):
    """`x * Phi(x)` elementwise, `Phi` the normal distribution function (`approximate='tanh'`: its tanh
    approximation).

    >>> aotjax.nn.GELU(approximate="tanh")
    GELU(approximate='tanh')
    """

    def __init__(self, approximate: str = "none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        return gelu(input, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class SiLU(Module):
    """`x * sigmoid(x)` elementwise (`inplace=True` writes into the input).

    >>> aotjax.nn.SiLU()(aotjax.tensor([0.0]))
    tensor([0.])
    """

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return silu_(input) if self.inplace else silu(input)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class Tanh(Module):
    """`tanh(x)` elementwise.

    >>> aotjax.nn.Tanh()(aotjax.tensor([0.0]))
    tensor([0.])
    """

    def forward(self, input):
        return tanh(input)


class Sigmoid(Module):
    """`1 / (1 + exp(-x))` elementwise.

    >>> aotjax.nn.Sigmoid()(aotjax.tensor([0.0]))
    tensor([0.5])
    """

    def forward(self, input):
        return sigmoid(input)


class Softmax(Module):
    """`softmax` along `dim`. `dim=None` picks PyTorch's legacy implicit dim (0 for 0-, 1- and 3-d inputs, else
    1) with a warning, as PyTorch.

    >>> aotjax.nn.Softmax(dim=-1)(aotjax.tensor([0.0, 0.0]))
    tensor([0.5, 0.5])
    """

    def __init__(self, dim: int | None = None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        dim = self.dim
        if dim is None:
            warnings.warn("Implicit dimension choice for softmax has been deprecated. Change the call to include "
                          "dim=X as an argument.", stacklevel=2)
            dim = 0 if input.ndim in (0, 1, 3) else 1
        return softmax(input, dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class MultiheadAttention(Module):
    """Multi-head attention, as `torch.nn.MultiheadAttention` (same parameter names: `in_proj_weight`
    `[3 * embed_dim, embed_dim]`, `in_proj_bias`, `out_proj` a `Linear`; so PyTorch state dicts load).

    `forward(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
    average_attn_weights=True, is_causal=False)` takes `[L, N, E]` queries and `[S, N, E]` keys and values
    (`[N, L, E]`, `[N, S, E]` with `batch_first=True`; `[L, E]`, `[S, E]` unbatched) and returns the output and
    the attention weights (`[N, L, S]` averaged over heads, `[N, num_heads, L, S]` with
    `average_attn_weights=False`; None with `need_weights=False`). A bool `key_padding_mask` `[N, S]` or
    `attn_mask` `[L, S]` / `[N * num_heads, L, S]` is True where attending is NOT allowed; a float one is added
    to the scores. `is_causal` is a hint that `attn_mask` is the causal mask (which must still be given, as in
    PyTorch). Attention dropout (training only) draws from the default generator. Keys and values of another
    size (`kdim`, `vdim`), `add_bias_kv` and `add_zero_attn` are not supported.

    >>> mha = aotjax.nn.MultiheadAttention(8, 2, batch_first=True)
    >>> x = aotjax.ones(3, 5, 8)
    >>> out, weights = mha(x, x, x)
    >>> out.shape, weights.shape
    ((3, 5, 8), (3, 5, 5))
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim: int | None = None,
                 vdim: int | None = None, batch_first: bool = False, device=None, dtype=None):
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got embed_dim={embed_dim} and "
                             f"num_heads={num_heads} instead")
        if (kdim is not None and kdim != embed_dim) or (vdim is not None and vdim != embed_dim):
            raise NotImplementedError(f"MultiheadAttention: keys and values of another size than embed_dim "
                                      f"({embed_dim}) are not supported (got kdim={kdim}, vdim={vdim}){where()}; "
                                      f"project them to embed_dim first (e.g. with an nn.Linear)")
        if add_bias_kv or add_zero_attn:
            raise NotImplementedError(f"MultiheadAttention: add_bias_kv and add_zero_attn are not supported{where()}")
        if embed_dim % num_heads:
            raise AssertionError("embed_dim must be divisible by num_heads")
        self.embed_dim = self.kdim = self.vdim = embed_dim
        self._qkv_same_embed_dim = True
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        self.in_proj_weight = Parameter(empty(3 * embed_dim, embed_dim, dtype=dtype))
        self.register_parameter("q_proj_weight", None)
        self.register_parameter("k_proj_weight", None)
        self.register_parameter("v_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(empty(3 * embed_dim, dtype=dtype))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, dtype=dtype)
        self.bias_k = self.bias_v = None
        self.add_zero_attn = False
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        init.xavier_uniform_(self.in_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)

    def forward(self, query, key, value, key_padding_mask=None, need_weights: bool = True, attn_mask=None,
                average_attn_weights: bool = True, is_causal: bool = False):
        batched = query.ndim == 3
        if query.ndim not in (2, 3) or key.ndim != query.ndim or value.ndim != query.ndim:
            raise ShapeError(f"MultiheadAttention: query, key and value must all be 3-D (batched) or 2-D "
                             f"(unbatched), got shapes {list(query.shape)}, {list(key.shape)}, "
                             f"{list(value.shape)}{where()}")
        if is_causal and attn_mask is None:
            raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the Transformer module "
                               "method `generate_square_subsequent_mask` to create this mask.")
        if not batched:  # NOTE: one sequence: a batch of one, squeezed at the end
            query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif self.batch_first:
            query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
        L, N, E = query.shape
        S = key.shape[0]
        if E != self.embed_dim or tuple(key.shape) != (S, N, E) or tuple(value.shape) != (S, N, E):
            raise ShapeError(f"MultiheadAttention: expected queries of embed_dim {self.embed_dim} and keys and "
                             f"values of one shape [S, N, E] matching them, got {list(query.shape)}, "
                             f"{list(key.shape)}, {list(value.shape)} (sequence-first){where()}")
        w, b = self.in_proj_weight, self.in_proj_bias
        q, k, v = (linear(x, w[i * E:(i + 1) * E], None if b is None else b[i * E:(i + 1) * E])
                   for i, x in enumerate((query, key, value)))
        q, k, v = (self._heads(t, N) for t in (q, k, v))  # [N, H, L or S, head_dim]
        scores = (q * math.sqrt(1.0 / self.head_dim)) @ k.transpose(-2, -1)
        mask = self._mask(attn_mask, key_padding_mask, N, L, S, batched, scores.dtype)
        if mask is not None:
            scores = scores + mask
        weights = softmax(scores, -1)
        if self.training and self.dropout > 0.0:
            weights = dropout(weights, self.dropout)
        out = (weights @ v).permute(2, 0, 1, 3).reshape(L, N, E)
        out = self.out_proj(out)
        if not batched:
            out = out.squeeze(1)
        elif self.batch_first:
            out = out.transpose(0, 1)
        if not need_weights:
            return out, None
        if average_attn_weights:
            weights = weights.mean(1)
        return out, (weights if batched else weights.squeeze(0))

    def _heads(self, x, N: int):
        """`[T, N, E]` to `[N, num_heads, T, head_dim]`."""
        return x.reshape(x.shape[0], N, self.num_heads, self.head_dim).permute(1, 2, 0, 3)

    def _mask(self, attn_mask, key_padding_mask, N: int, L: int, S: int, batched: bool, dtype):
        """The additive mask for scores of shape `[N, H, L, S]` (None if there is none)."""
        mask = None
        if attn_mask is not None:
            attn_mask = _additive(attn_mask, dtype)
            if attn_mask.ndim == 2:
                if tuple(attn_mask.shape) != (L, S):
                    raise RuntimeError(f"The shape of the 2D attn_mask is {list(attn_mask.shape)}, but should be "
                                       f"{[L, S]}.")
            elif attn_mask.ndim == 3:
                heads = N * self.num_heads if batched else self.num_heads
                if tuple(attn_mask.shape) != (heads, L, S):
                    raise RuntimeError(f"The shape of the 3D attn_mask is {list(attn_mask.shape)}, but should be "
                                       f"{[heads, L, S]}.")
                attn_mask = attn_mask.reshape(N, self.num_heads, L, S)
            else:
                raise RuntimeError(f"attn_mask's dimension {attn_mask.ndim} is not supported")
            mask = attn_mask
        if key_padding_mask is not None:
            if tuple(key_padding_mask.shape) != (N, S):
                raise RuntimeError(f"expected key_padding_mask of shape {[N, S] if batched else [S]}, got "
                                   f"{list(key_padding_mask.shape if batched else key_padding_mask.shape[1:])}")
            padding = _additive(key_padding_mask, dtype).reshape(N, 1, 1, S)
            mask = padding if mask is None else mask + padding
        return mask

    def extra_repr(self) -> str:
        return ""


def _additive(mask, dtype):
    """A bool mask (True: not allowed) as an additive float mask (-inf there, 0 elsewhere); a float mask as is."""
    if mask.dtype == np.bool_:
        return zeros(*mask.shape, dtype=dtype).masked_fill(mask, float("-inf"))
    return mask.to(dtype)
