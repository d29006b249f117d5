"""Activation modules (`ReLU`, `GELU`, `SiLU`, `Tanh`, `Sigmoid`, `Softmax`, `Softmax2d`) and `MultiheadAttention`,
as `torch.nn`'s."""
from __future__ import annotations

import warnings

import numpy as np

from aotjax.core.source_info import where
from aotjax.nn import init
from aotjax.nn.module import Module
from aotjax.nn.modules.linear import Linear
from aotjax.nn.parameter import Parameter
from aotjax.ops.creation.factories import empty, zeros
from aotjax.ops.math.elementwise import gelu, relu, relu_, sigmoid, silu, silu_, tanh
from aotjax.ops.nn.activations import softmax
from aotjax.ops.nn.attention import multi_head_attention_forward

__all__ = ["ReLU", "GELU", "SiLU", "Tanh", "Sigmoid", "Softmax", "Softmax2d", "MultiheadAttention"]


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


class Softmax2d(Module):
    """`softmax` over the channels of each position: dim -3 of a `[N, C, H, W]` or `[C, H, W]` input, as
    `torch.nn.Softmax2d`.

    >>> aotjax.nn.Softmax2d()(aotjax.zeros(1, 2, 1, 1)).flatten()
    tensor([0.5, 0.5])
    """

    def forward(self, input):
        if input.ndim not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {input.ndim}D instead{where()}")
        return softmax(input, -3)


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
    PyTorch). Attention dropout (training only) draws from the default generator. It computes
    `F.multi_head_attention_forward`, as torch's does. Keys and values of another size (`kdim`, `vdim`),
    `add_bias_kv` and `add_zero_attn` are not supported.

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
        swap = self.batch_first and query.ndim == 3  # NOTE: the functional form takes sequence-first inputs
        if swap:
            query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
        out, weights = multi_head_attention_forward(
            query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight, self.in_proj_bias, self.bias_k,
            self.bias_v, self.add_zero_attn, self.dropout, self.out_proj.weight, self.out_proj.bias,
            training=self.training, key_padding_mask=key_padding_mask, need_weights=need_weights,
            attn_mask=attn_mask, average_attn_weights=average_attn_weights, is_causal=is_causal)
        return (out.transpose(0, 1) if swap else out), weights

    def extra_repr(self) -> str:
        return ""


def _additive(mask, dtype):
    """A bool mask (True: not allowed) as an additive float mask (-inf there, 0 elsewhere); a float mask as is."""
    if mask.dtype == np.bool_:
        return zeros(*mask.shape, dtype=dtype).masked_fill(mask, float("-inf"))
    return mask.to(dtype)
