"""`Transformer`, its stacks `TransformerEncoder` / `TransformerDecoder` and their layers
`TransformerEncoderLayer` / `TransformerDecoderLayer`, as `torch.nn`'s ("Attention Is All You Need", post-norm
by default, pre-norm with `norm_first=True`): same constructors, defaults, submodule and parameter names (so
PyTorch state dicts load), masks and `generate_square_subsequent_mask`.

Masks are PyTorch's: a bool mask is True where attending is NOT allowed, a float mask is added to the scores;
attention masks are `[L, S]` or `[N * nhead, L, S]`, key padding masks `[N, S]`. A key padding mask of another
type than its attention mask warns, as PyTorch (mixing them is deprecated there). The `is_causal` hints are
accepted and checked as PyTorch does (a hint needs its mask), and the given mask is always the one applied.
PyTorch's inference fast path (nested tensors, fused kernels; `enable_nested_tensor`) has no counterpart:
results agree with PyTorch's reference path (that fast path also writes zeros at padded positions).
"""
from __future__ import annotations

import copy
import warnings
from typing import Callable

import numpy as np

from aotjax.core.source_info import user_stacklevel, where
from aotjax.nn import init
from aotjax.nn.module import Module
from aotjax.nn.modules.activation import GELU, MultiheadAttention, ReLU, _additive
from aotjax.nn.modules.container import ModuleList
from aotjax.nn.modules.dropout import Dropout
from aotjax.nn.modules.linear import Linear
from aotjax.nn.modules.normalization import LayerNorm
from aotjax.ops.creation.factories import full
from aotjax.ops.math.elementwise import gelu, relu
from aotjax.ops.shape.copies import triu

__all__ = ["Transformer", "TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer",
           "TransformerDecoderLayer"]


def _activation(activation: str | Callable) -> Callable:
    """The feed-forward activation: 'relu' or 'gelu' by name, else the unary callable itself."""
    if not isinstance(activation, str):
        return activation
    if activation in ("relu", "gelu"):
        return relu if activation == "relu" else gelu
    raise RuntimeError(f"activation should be relu/gelu, not {activation}{where()}; pass another one as a unary "
                       f"callable (e.g. activation=aotjax.tanh)")


def _float_mask(mask, name: str, other, other_name: str, dtype):
    """`mask` as PyTorch's layers take it: a bool one as an additive float mask of `dtype` (-inf where True), a
    float one as is; other dtypes refused. Warns, as PyTorch, when `other` (the mask it goes with) is of
    another dtype."""
    if mask is None:
        return None
    if mask.dtype != np.bool_ and not mask.is_floating_point():
        raise AssertionError(f"only bool and floating types of {name} are supported, got {mask.dtype}{where()}; "
                             f"pass a bool mask (True: not allowed) or a float one (added to the scores)")
    if other is not None and other.dtype != mask.dtype:
        warnings.warn(f"Support for mismatched {name} and {other_name} is deprecated. Use same type for both "
                      f"instead.", stacklevel=user_stacklevel())
    return _additive(mask, dtype) if mask.dtype == np.bool_ else mask


def _causal_hint(is_causal: bool | None) -> bool:
    # NOTE: PyTorch compares a given mask with the causal one when the hint is None; the hint only selects a
    # kernel there and the mask is applied either way here, so an unknown hint is False (no data-dependent check)
    return bool(is_causal)


def _clones(module: Module, n: int) -> ModuleList:
    return ModuleList([copy.deepcopy(module) for _ in range(n)])


class TransformerEncoderLayer(Module):
    """Self-attention then a feed-forward network (`linear2(dropout(activation(linear1(x))))`), each in a
    residual branch with dropout and a `LayerNorm`: after the sum (`norm_first=False`, the paper's) or on the
    branch's input (`norm_first=True`). `activation` is 'relu', 'gelu' or a unary callable. Inputs `[S, N, E]`
    (`[N, S, E]` with `batch_first`; `[S, E]` unbatched); `forward(src, src_mask=None,
    src_key_padding_mask=None, is_causal=False)`.

    >>> layer = aotjax.nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16)
    >>> layer(aotjax.ones(5, 3, 8)).shape, [name for name, _ in layer.named_children()][:3]
    ((5, 3, 8), ['self_attn', 'linear1', 'dropout'])
    """

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: str | Callable = relu, layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device=None, dtype=None):
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first,
                                            dtype=dtype)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dtype)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        activation = _activation(activation)
        is_relu = activation is relu or isinstance(activation, ReLU)
        is_gelu = activation is gelu or isinstance(activation, GELU)
        self.activation_relu_or_gelu = 1 if is_relu else (2 if is_gelu else 0)  # PyTorch's flag, for parity
        self.activation = activation

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal: bool = False):
        src_key_padding_mask = _float_mask(src_key_padding_mask, "src_key_padding_mask", src_mask, "src_mask",
                                           src.dtype)
        src_mask = _float_mask(src_mask, "src_mask", None, "", src.dtype)
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._ff_block(self.norm2(x))
        x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._ff_block(x))

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal: bool):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=False,
                           is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerDecoderLayer(Module):
    """Self-attention over the target, attention from the target to the encoder's output (`memory`), then a
    feed-forward network; each in a residual branch with dropout and a `LayerNorm` (`norm1`..`norm3`), after the
    sum or, with `norm_first=True`, on the branch's input. `forward(tgt, memory, tgt_mask=None, memory_mask=None,
    tgt_key_padding_mask=None, memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False)`.

    >>> layer = aotjax.nn.TransformerDecoderLayer(d_model=8, nhead=2, dim_feedforward=16)
    >>> layer(aotjax.ones(5, 3, 8), aotjax.ones(5, 3, 8)).shape
    (5, 3, 8)
    """

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: str | Callable = relu, layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device=None, dtype=None):
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=batch_first, bias=bias,
                                            dtype=dtype)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=batch_first,
                                                 bias=bias, dtype=dtype)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dtype)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = _activation(activation)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal: bool = False, memory_is_causal: bool = False):
        tgt_key_padding_mask = _float_mask(tgt_key_padding_mask, "key_padding_mask", tgt_mask, "attn_mask",
                                           tgt.dtype)
        memory_key_padding_mask = _float_mask(memory_key_padding_mask, "key_padding_mask", memory_mask,
                                              "attn_mask", tgt.dtype)
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask, memory_key_padding_mask, memory_is_causal)
            return x + self._ff_block(self.norm3(x))
        x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
        x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask, memory_is_causal))
        return self.norm3(x + self._ff_block(x))

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal: bool):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=False,
                           is_causal=is_causal)[0]
        return self.dropout1(x)

    def _mha_block(self, x, memory, attn_mask, key_padding_mask, is_causal: bool):
        x = self.multihead_attn(x, memory, memory, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                                need_weights=False, is_causal=is_causal)[0]
        return self.dropout2(x)

    def _ff_block(self, x):
        return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerEncoder(Module):
    """`num_layers` deep copies of `encoder_layer` (`layers.0`, `layers.1`, ...) run in turn, then `norm` if
    given. `enable_nested_tensor` and `mask_check` are accepted and kept for PyTorch's signature (they steer its
    inference fast path, which has no counterpart here). `forward(src, mask=None, src_key_padding_mask=None,
    is_causal=None)`.

    >>> layer = aotjax.nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16)
    >>> encoder = aotjax.nn.TransformerEncoder(layer, num_layers=2, norm=aotjax.nn.LayerNorm(8))
    >>> encoder(aotjax.ones(5, 3, 8)).shape, len(encoder.layers)
    ((5, 3, 8), 2)
    """

    def __init__(self, encoder_layer: Module, num_layers: int, norm: Module | None = None,
                 enable_nested_tensor: bool = True, mask_check: bool = True):
        super().__init__()
        self.layers = _clones(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor = enable_nested_tensor
        self.use_nested_tensor = False  # NOTE: PyTorch's switch for its nested-tensor fast path: never taken here
        self.mask_check = mask_check

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal: bool | None = None):
        src_key_padding_mask = _float_mask(src_key_padding_mask, "src_key_padding_mask", mask, "mask", src.dtype)
        mask = _float_mask(mask, "mask", None, "", src.dtype)
        output = src
        for layer in self.layers:
            output = layer(output, src_mask=mask, is_causal=_causal_hint(is_causal),
                           src_key_padding_mask=src_key_padding_mask)
        return output if self.norm is None else self.norm(output)


class TransformerDecoder(Module):
    """`num_layers` deep copies of `decoder_layer` (`layers.0`, ...) run in turn on the target, each attending
    to the same `memory`, then `norm` if given. `forward(tgt, memory, tgt_mask=None, memory_mask=None,
    tgt_key_padding_mask=None, memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False)`.

    >>> layer = aotjax.nn.TransformerDecoderLayer(d_model=8, nhead=2, dim_feedforward=16)
    >>> decoder = aotjax.nn.TransformerDecoder(layer, num_layers=2)
    >>> decoder(aotjax.ones(5, 3, 8), aotjax.ones(5, 3, 8)).shape
    (5, 3, 8)
    """

    def __init__(self, decoder_layer: Module, num_layers: int, norm: Module | None = None):
        super().__init__()
        self.layers = _clones(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal: bool | None = None, memory_is_causal: bool = False):
        output = tgt
        for layer in self.layers:
            output = layer(output, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                           tgt_key_padding_mask=tgt_key_padding_mask,
                           memory_key_padding_mask=memory_key_padding_mask,
                           tgt_is_causal=_causal_hint(tgt_is_causal), memory_is_causal=memory_is_causal)
        return output if self.norm is None else self.norm(output)


class Transformer(Module):
    """An encoder-decoder transformer: `encoder` (a `TransformerEncoder` of `num_encoder_layers` layers and a
    final `LayerNorm`, or `custom_encoder`) reads `src`, `decoder` (likewise) reads `tgt` attending to the
    encoder's output. Every parameter of more than one dimension is initialized by `xavier_uniform_`, as PyTorch.
    Shapes `src` `[S, N, E]`, `tgt` `[T, N, E]`, output `[T, N, E]` (batch first with `batch_first=True`).
    `forward(src, tgt, src_mask=None, tgt_mask=None, memory_mask=None, src_key_padding_mask=None,
    tgt_key_padding_mask=None, memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
    memory_is_causal=False)`; `Transformer.generate_square_subsequent_mask(T)` is the causal `tgt_mask`.

    >>> model = aotjax.nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
    ...                               dim_feedforward=16)
    >>> src, tgt = aotjax.ones(5, 3, 8), aotjax.ones(5, 3, 8)
    >>> model(src, tgt, tgt_mask=model.generate_square_subsequent_mask(5)).shape
    (5, 3, 8)
    """

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6,
                 num_decoder_layers: int = 6, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: str | Callable = relu, custom_encoder: Module | None = None,
                 custom_decoder: Module | None = None, layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device=None, dtype=None):
        super().__init__()
        layer_args = (d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first,
                      norm_first, bias)
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            self.encoder = TransformerEncoder(TransformerEncoderLayer(*layer_args, dtype=dtype), num_encoder_layers,
                                              LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype))
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            self.decoder = TransformerDecoder(TransformerDecoderLayer(*layer_args, dtype=dtype), num_decoder_layers,
                                              LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype))
        self._reset_parameters()
        self.d_model = d_model
        self.nhead = nhead
        self.batch_first = batch_first

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None, src_key_padding_mask=None,
                tgt_key_padding_mask=None, memory_key_padding_mask=None, src_is_causal: bool | None = None,
                tgt_is_causal: bool | None = None, memory_is_causal: bool = False):
        batch = 0 if self.batch_first else 1
        if src.ndim == 3 and src.shape[batch] != tgt.shape[batch]:
            raise RuntimeError(f"the batch number of src and tgt must be equal, got src {list(src.shape)} and tgt "
                               f"{list(tgt.shape)} (batch_first={self.batch_first}){where()}")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise RuntimeError(f"the feature number of src and tgt must be equal to d_model ({self.d_model}), got "
                               f"src {list(src.shape)} and tgt {list(tgt.shape)}{where()}")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=tgt_is_causal,
                            memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device=None, dtype=None):
        """The causal mask of a length-`sz` sequence: -inf above the diagonal (a position may not attend to
        later ones), 0 elsewhere; float (`dtype`, default the default float). `device` is accepted and ignored.

        >>> aotjax.nn.Transformer.generate_square_subsequent_mask(3)
        tensor([[  0., -inf, -inf],
                [  0.,   0., -inf],
                [  0.,   0.,   0.]])
        """
        return triu(full((sz, sz), float("-inf"), dtype=dtype), diagonal=1)

    def _reset_parameters(self) -> None:
        """`xavier_uniform_` on every parameter of more than one dimension, as PyTorch."""
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)
