"""Neural-network composites: softmax, normalization, losses, dropout, embedding and attention,
written as compositions of existing ops (so every transform handles them with no rules of their own).

The names PyTorch also has at its top level with the same signature (`softmax`, `log_softmax`,
`layer_norm`, `rms_norm`, `dropout`) are exported here; all of them, `cross_entropy` and friends
included, are in `aotjax.nn.functional`.
"""
from __future__ import annotations

import math

import numpy as np

from aotjax.core.errors import DTypeError, ShapeError
from aotjax.core.source_info import where
from aotjax.ops._frontend import as_tensor, canonical_dim, to_dtype
from aotjax.ops.creation import arange, ones
from aotjax.ops.elementwise import where as select
from aotjax.ops.indexing import check_index, gather_p, index_p
from aotjax.ops.promotion import category, is_float
from aotjax.ops.random import bernoulli
from aotjax.tensor import method

__all__ = ["softmax", "log_softmax", "layer_norm", "rms_norm", "dropout"]
FUNCTIONAL = __all__ + ["cross_entropy", "mse_loss", "embedding", "scaled_dot_product_attention", "linear",
                        "batch_norm"]

_LOW_PRECISION = (np.dtype(np.float16), to_dtype("bfloat16"))


def _float_input(op: str, x, dtype=None):
    """`x` (converted to `dtype` if given), and the dtype to compute in: float32 for float16 and
    bfloat16 inputs, whose results are cast back (as PyTorch computes them). `x` is made contiguous:
    PyTorch's kernels for these ops (softmax, log_softmax, layer_norm, rms_norm) give a contiguous result
    whatever the input's layout, and the elementwise ops computing them here keep `x`'s layout."""
    x = as_tensor(x)
    if dtype is not None:
        x = x.to(to_dtype(dtype, op))
    if not is_float(x.dtype):
        raise DTypeError(f"{op}: expected a floating-point tensor, got {x.aval.str_short()}{where()}; convert it "
                         f"first, e.g. `x.float()`")
    return (x.float() if x.dtype in _LOW_PRECISION else x).contiguous(), x.dtype


# -- softmax ---------------------------------------------------------------------------------------
def softmax(x, dim: int, dtype=None):
    """`exp(x) / sum(exp(x))` along `dim`, computed stably (the max is subtracted first).

    >>> aotjax.softmax(aotjax.tensor([0.0, 0.0]), dim=0)
    tensor([0.5, 0.5])
    """
    x, out_dtype = _float_input("softmax", x, dtype)
    dim = canonical_dim(dim, x.ndim, "softmax")
    if x.numel() == 0:  # NOTE: an empty result, as in torch (the max of an empty dim is undefined)
        return x.clone().to(out_dtype)
    # NOTE: the max is taken of `x` detached: any shift gives the same softmax, so the shift's derivative
    # is exactly zero and need not be computed (as in `jax.nn.softmax`).
    e = (x - x.detach().amax(dim, keepdim=True)).exp()
    return (e / e.sum(dim, keepdim=True)).to(out_dtype)


def log_softmax(x, dim: int, dtype=None):
    """`log(softmax(x, dim))`, computed stably as `x - max - log(sum(exp(x - max)))`.

    >>> aotjax.log_softmax(aotjax.tensor([0.0, 0.0]), dim=0).exp()
    tensor([0.5, 0.5])
    """
    x, out_dtype = _float_input("log_softmax", x, dtype)
    dim = canonical_dim(dim, x.ndim, "log_softmax")
    if x.numel() == 0:  # NOTE: an empty result, as in torch (the max of an empty dim is undefined)
        return x.clone().to(out_dtype)
    shifted = x - x.detach().amax(dim, keepdim=True)  # NOTE: detached, as in `softmax`
    return (shifted - shifted.exp().sum(dim, keepdim=True).log()).to(out_dtype)


# -- normalization ---------------------------------------------------------------------------------
def _normalized_dims(op: str, x, normalized_shape) -> tuple[int, ...]:
    shape = (normalized_shape,) if isinstance(normalized_shape, (int, np.integer)) else tuple(normalized_shape)
    k = len(shape)
    if k == 0 or k > x.ndim or tuple(x.shape[x.ndim - k:]) != tuple(int(s) for s in shape):
        raise ShapeError(f"{op}: normalized_shape {list(shape)} must be the trailing dimensions of the input, "
                         f"of shape {list(x.shape)}{where()}")
    return tuple(range(x.ndim - k, x.ndim))


def layer_norm(x, normalized_shape, weight=None, bias=None, eps: float = 1e-5):
    """Normalizes over the trailing `normalized_shape` dims to mean 0 and variance 1 (biased), then
    applies the elementwise affine `weight` and `bias` if given.

    >>> aotjax.layer_norm(aotjax.tensor([1.0, 3.0]), 2, eps=0.0)
    tensor([-1.,  1.])
    """
    x, out_dtype = _float_input("layer_norm", x)
    dims = _normalized_dims("layer_norm", x, normalized_shape)
    centered = x - x.mean(dims, keepdim=True)
    y = centered * ((centered * centered).mean(dims, keepdim=True) + eps).rsqrt()
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y.to(out_dtype)


def rms_norm(x, normalized_shape, weight=None, eps: float | None = None):
    """`x / sqrt(mean(x**2) + eps)` over the trailing `normalized_shape` dims, times `weight` if
    given; `eps` defaults to the machine epsilon of `x`'s dtype (as in PyTorch).

    >>> aotjax.rms_norm(aotjax.tensor([2.0, -2.0]), [2], eps=0.0)
    tensor([ 1., -1.])
    """
    x, out_dtype = _float_input("rms_norm", x)
    dims = _normalized_dims("rms_norm", x, normalized_shape)
    if eps is None:
        eps = float(np.finfo(out_dtype).eps)
    y = x * ((x * x).mean(dims, keepdim=True) + eps).rsqrt()
    if weight is not None:
        y = y * weight
    return y.to(out_dtype)


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training: bool = False,
               momentum=0.1, eps: float = 1e-5):
    """Normalizes each channel (dim 1 of an `[N, C, ...]` input) to mean 0 and variance 1, then applies the
    per-channel affine `weight` and `bias` if given, as `torch.nn.functional.batch_norm`.

    With `training=True` the statistics are the batch's (the biased variance normalizes), and the running
    estimates, if given, are updated in place: `running = (1 - momentum) * running + momentum * batch`, the
    unbiased variance going into `running_var` (the statistics detached: the update is not differentiated).
    `momentum` may be a 0-d tensor (a cumulative average's `1 / num_batches_tracked`). With
    `training=False` the running estimates normalize.

    >>> mean, var = aotjax.zeros(1), aotjax.ones(1)
    >>> aotjax.nn.functional.batch_norm(aotjax.tensor([[1.0], [3.0]]), mean, var, training=True, eps=0.0)
    tensor([[-1.],
            [ 1.]])
    >>> mean, var
    (tensor([0.2]), tensor([1.1]))
    """
    x, out_dtype = _float_input("batch_norm", input)
    if x.ndim < 2:
        raise ShapeError(f"batch_norm: expected an input of shape [N, C, ...] (2 or more dims), got "
                         f"{list(x.shape)}{where()}")
    channels = x.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight),
                    ("bias", bias)):
        if t is not None and tuple(t.shape) != (channels,):
            raise ShapeError(f"batch_norm: {name} should contain {channels} elements (one per channel of the "
                             f"input of shape {list(x.shape)}), not shape {list(t.shape)}{where()}")
    dims = (0,) + tuple(range(2, x.ndim))
    per_channel = (1, channels) + (1,) * (x.ndim - 2)
    if training:
        count = x.numel() // channels
        if count <= 1:
            raise ValueError(f"batch_norm: expected more than 1 value per channel when training, got input of "
                             f"shape {list(x.shape)}{where()}")
        mean = x.mean(dims)
        centered = x - mean.reshape(per_channel)
        var = (centered * centered).mean(dims)
        if running_mean is not None:
            running_mean.copy_(running_mean * (1 - momentum) + mean.detach() * momentum)
        if running_var is not None:
            running_var.copy_(running_var * (1 - momentum) + var.detach() * (momentum * count / (count - 1)))
    else:
        if running_mean is None or running_var is None:
            raise ValueError(f"batch_norm: running_mean and running_var must be given when training=False{where()}")
        mean, var = running_mean, running_var
        centered = x - mean.reshape(per_channel)
    y = centered * (var + eps).rsqrt().reshape(per_channel)
    if weight is not None:
        y = y * weight.reshape(per_channel)
    if bias is not None:
        y = y + bias.reshape(per_channel)
    return y.to(out_dtype)


# -- dropout ---------------------------------------------------------------------------------------
def dropout(x, p: float = 0.5, training: bool = True, inplace: bool = False, *, key=None, generator=None):
    """Zeroes each element with probability `p` and scales the rest by `1 / (1 - p)`, as `F.dropout`. The mask is
    drawn from `key` when given (`aotjax.random`), else from `generator` (default: the default generator, whose
    state the draw advances: under `jit` each call draws a new mask). With `p=0` or `training=False` it returns
    `x`; `inplace=True` writes the result into `x`.

    >>> x = aotjax.ones(4)
    >>> y = aotjax.dropout(x, 0.5, key=aotjax.random.key(0))
    >>> sorted(set(y.tolist())) in ([0.0], [0.0, 2.0], [2.0])
    True
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: p must be a probability in [0, 1], got {p}{where()}")
    if not training or p == 0.0:
        return x
    x = as_tensor(x)
    if key is None:
        from aotjax.ops.generator import default_generator  # NOTE: the generator draws with this module's ops

        key = (generator or default_generator).next_key("dropout")
    if p == 1.0:
        out = x * 0
    else:
        out = x * bernoulli(key, 1.0 - p, tuple(x.shape)) * (1.0 / (1.0 - p))
    return x.copy_(out) if inplace else out


# -- losses ----------------------------------------------------------------------------------------
_REDUCTIONS = ("mean", "sum", "none")


def _check_reduction(op: str, reduction: str) -> None:
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{op}: reduction must be one of {_REDUCTIONS}, got {reduction!r}{where()}")


def _reduce(loss, reduction: str):
    return loss.mean() if reduction == "mean" else loss.sum() if reduction == "sum" else loss


def mse_loss(input, target, reduction: str = "mean"):
    """The squared error `(input - target) ** 2`, averaged (`'mean'`), summed (`'sum'`) or not (`'none'`).

    >>> aotjax.nn.functional.mse_loss(aotjax.tensor([1.0, 2.0]), aotjax.tensor([1.0, 4.0]))
    tensor(2.)
    """
    _check_reduction("mse_loss", reduction)
    diff = as_tensor(input) - target
    return _reduce(diff * diff, reduction)


def cross_entropy(input, target, weight=None, ignore_index: int = -100, reduction: str = "mean",
                  label_smoothing: float = 0.0):
    """The cross entropy between the logits `input` (classes on dim 1, or dim 0 when unbatched) and
    `target`: class indices (shape `[N]` or `[N, d...]`, entries equal to `ignore_index` skipped) or
    class probabilities (the shape of `input`). `weight` rescales each class; `label_smoothing`
    mixes the target with the uniform distribution. Same semantics as
    `torch.nn.functional.cross_entropy`.

    >>> logits = aotjax.tensor([[0.0, 0.0], [0.0, 0.0]])
    >>> round(aotjax.nn.functional.cross_entropy(logits, aotjax.tensor([0, 1])).item(), 4)
    0.6931
    """
    _check_reduction("cross_entropy", reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}{where()}")
    input, target = as_tensor(input), as_tensor(target)
    if input.ndim == 0:
        raise ShapeError(f"cross_entropy: input must have a class dimension, got a 0-d tensor{where()}")
    if input.ndim == 1:  # unbatched: one sample
        loss = cross_entropy(input.unsqueeze(0), target.unsqueeze(0), weight, ignore_index, reduction,
                             label_smoothing)
        return loss.squeeze(0) if reduction == "none" else loss
    logp = log_softmax(input, 1)
    if weight is not None:
        weight = as_tensor(weight)
        if tuple(weight.shape) != (input.shape[1],):
            raise ShapeError(f"cross_entropy: weight must have one entry per class, shape [{input.shape[1]}], "
                             f"got {list(weight.shape)}{where()}")
    if category(target.dtype) == 1:
        return _cross_entropy_indices(logp, target, weight, ignore_index, reduction, label_smoothing)
    if is_float(target.dtype):
        return _cross_entropy_probs(logp, target, weight, reduction, label_smoothing)
    raise DTypeError(f"cross_entropy: target must hold class indices (an integer tensor) or class probabilities "
                     f"(a float tensor), got {target.aval.str_short()}{where()}")


def _class_weights_view(weight, ndim: int):
    """`weight` of shape [C] reshaped to broadcast against classes on dim 1 of an `ndim`-d tensor."""
    return weight.reshape((1, -1) + (1,) * (ndim - 2))


def _cross_entropy_indices(logp, target, weight, ignore_index, reduction, label_smoothing):
    n_classes = logp.shape[1]
    expected = (logp.shape[0],) + tuple(logp.shape[2:])
    if tuple(target.shape) != expected:
        raise ShapeError(f"cross_entropy: class-index targets for input of shape {list(logp.shape)} must have "
                         f"shape {list(expected)}, got {list(target.shape)}{where()}")
    valid = target != ignore_index
    safe_target = check_index("cross_entropy", target.masked_fill(valid.logical_not(), 0), n_classes, 1,
                              negative=False, message=f"cross_entropy: target {{}} is out of bounds: a class index "
                              f"must be in [0, {n_classes}) or equal to ignore_index ({ignore_index})")
    picked = gather_p.bind(logp, safe_target.unsqueeze(1), dim=1).squeeze(1)
    if weight is not None:
        w = index_p.bind(weight, safe_target.reshape(-1), dims=(0,)).reshape(safe_target.shape)
        w = w * valid
    else:
        w = valid.to(logp.dtype)
    nll = -(picked * w)
    if reduction == "mean":
        denominator = w.sum()
        nll = nll.sum() / denominator
    else:
        nll = _reduce(nll, reduction)
    if label_smoothing == 0.0:
        return nll
    lp = logp * _class_weights_view(weight, logp.ndim) if weight is not None else logp
    smooth = -(lp.sum(1) * valid)
    smooth = smooth.sum() / denominator if reduction == "mean" else _reduce(smooth, reduction)
    return nll * (1.0 - label_smoothing) + smooth * (label_smoothing / n_classes)


def _cross_entropy_probs(logp, target, weight, reduction, label_smoothing):
    if tuple(target.shape) != tuple(logp.shape):
        raise ShapeError(f"cross_entropy: probability targets must have the input's shape {list(logp.shape)}, "
                         f"got {list(target.shape)}{where()}")
    n_classes = logp.shape[1]
    if label_smoothing > 0.0:
        target = target * (1.0 - label_smoothing) + label_smoothing / n_classes
    lp = logp * _class_weights_view(weight, logp.ndim) if weight is not None else logp
    loss = -(lp * target).sum(1)
    return _reduce(loss, reduction)


# -- embedding and attention -----------------------------------------------------------------------
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


# -- Tensor methods --------------------------------------------------------------------------------
method(softmax)
method(log_softmax)
