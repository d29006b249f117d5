"""Normalization and regularization of `torch.nn.functional`: `layer_norm`, `rms_norm`, `batch_norm` (running
statistics updated in place), `group_norm`, `instance_norm`, `local_response_norm`, `normalize`, `one_hot`,
`embedding_bag`, `dropout`, channel-wise dropout (`dropout1d/2d/3d`) and `alpha_dropout`; compositions of existing
ops.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from aotjax.core.errors import DTypeError, ShapeError
from aotjax.core.interpreter import Tracer
from aotjax.core.source_info import where
from aotjax.ops.base import autocast
from aotjax.ops.base.data import as_tensor
from aotjax.ops.base.frontend import canonical_dim
from aotjax.ops.base.promotion import category, default_float_dtype, default_int_dtype
from aotjax.ops.calls.eager_fusion import fused_when_eager
from aotjax.ops.creation.factories import arange, zeros
from aotjax.ops.indexing.subscripts import check_index
from aotjax.ops.math.elementwise import where as select
from aotjax.ops.nn.activations import _float_input
from aotjax.ops.nn.sparse import embedding
from aotjax.ops.random.generator import draw_key
from aotjax.ops.random.keys import bernoulli
from aotjax.ops.reduce.sorting import searchsorted
from aotjax.ops.shape.copies import cat

__all__ = ["layer_norm", "rms_norm", "dropout", "group_norm", "instance_norm", "alpha_dropout", "feature_alpha_dropout"]
FUNCTIONAL = ["layer_norm", "rms_norm", "batch_norm", "dropout", "group_norm", "instance_norm", "local_response_norm",
              "normalize", "one_hot", "embedding_bag", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout",
              "feature_alpha_dropout"]


@autocast.float32_on_gpu
def group_norm(input, num_groups: int, weight=None, bias=None, eps: float = 1e-5):
    """Splits the channels (dim 1 of an `[N, C, ...]` input) into `num_groups` groups and normalizes each
    group of each sample to mean 0 and (biased) variance 1, then applies the per-channel affine `weight` and
    `bias` if given.

    >>> aotjax.nn.functional.group_norm(aotjax.tensor([[1.0, 3.0]]), 1, eps=0.0)
    tensor([[-1.,  1.]])
    """
    x, out_dtype = _float_input("group_norm", input)
    if x.ndim < 2:
        raise ShapeError(f"group_norm: expected an input of shape [N, C, ...] (2 or more dims), got "
                         f"{list(x.shape)}{where()}")
    n, c = x.shape[0], x.shape[1]
    if num_groups <= 0 or c % num_groups:
        raise ShapeError(f"group_norm: expected the number of channels ({c}) to be divisible by num_groups "
                         f"({num_groups}){where()}")
    g = x.reshape(n, num_groups, -1)
    centered = g - g.mean(2, keepdim=True)
    y = (centered * ((centered * centered).mean(2, keepdim=True) + eps).rsqrt()).reshape(x.shape)
    per_channel = (1, c) + (1,) * (x.ndim - 2)
    if weight is not None:
        y = y * as_tensor(weight).reshape(per_channel)
    if bias is not None:
        y = y + as_tensor(bias).reshape(per_channel)
    return y.to(out_dtype)


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5):
    """Normalizes each channel of each sample (of an `[N, C, ...]` input) over its spatial dims, then applies
    the per-channel affine `weight` and `bias` if given. With `use_input_stats` the statistics are the
    instance's, and the running estimates, if given, are updated in place with their average over the batch
    (the unbiased variance, detached); otherwise the running estimates normalize.

    >>> aotjax.nn.functional.instance_norm(aotjax.tensor([[[1.0, 3.0]]]), eps=0.0)
    tensor([[[-1.,  1.]]])
    """
    x, out_dtype = _float_input("instance_norm", input)
    if x.ndim < 3:
        raise ShapeError(f"instance_norm: expected an input of shape [N, C, ...] with spatial dims (3 or more dims), "
                         f"got {list(x.shape)}{where()}")
    c = x.shape[1]
    per_channel = (1, c) + (1,) * (x.ndim - 2)
    dims = tuple(range(2, x.ndim))
    if use_input_stats:
        count = math.prod(x.shape[2:])
        mean = x.mean(dims, keepdim=True)
        centered = x - mean
        var = (centered * centered).mean(dims, keepdim=True)
        if running_mean is not None:
            running_mean.copy_(running_mean * (1 - momentum) + mean.detach().mean(0).reshape(c) * momentum)
        if running_var is not None:
            unbiased = var.detach().mean(0).reshape(c) * (count / max(count - 1, 1))
            running_var.copy_(running_var * (1 - momentum) + unbiased * momentum)
    else:
        if running_mean is None or running_var is None:
            raise ValueError(f"instance_norm: running_mean and running_var must be given when use_input_stats=False"
                             f"{where()}")
        centered = x - as_tensor(running_mean).reshape(per_channel)
        var = as_tensor(running_var).reshape(per_channel)
    y = centered * (var + eps).rsqrt()
    if weight is not None:
        y = y * as_tensor(weight).reshape(per_channel)
    if bias is not None:
        y = y + as_tensor(bias).reshape(per_channel)
    return y.to(out_dtype)


def local_response_norm(input, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0):
    """Divides each element by `(k + alpha * mean of the squares over `size` neighbouring channels) ** beta`
    (channels on dim 1, the window zero-padded at the edges), as `torch.nn.functional.local_response_norm`.

    >>> aotjax.nn.functional.local_response_norm(aotjax.ones(1, 2, 1), 2, alpha=1.0, beta=1.0, k=0.0)
    tensor([[[2.],
             [1.]]])
    """
    x = as_tensor(input)
    integer = np.dtype(x.dtype) == default_int_dtype()  # NOTE: torch's CPU kernel takes int64: a float result
    if category(x.dtype) == 1 and not integer:
        raise DTypeError(f"local_response_norm: expected a floating-point or {default_int_dtype().name} (int64) "
                         f"tensor, as torch's CPU kernel, got {x.aval.str_short()}{where()}; convert it first, e.g. "
                         f"`x.float()`")
    x, out_dtype = (x, default_float_dtype()) if integer else _float_input("local_response_norm", x)
    if x.ndim < 3:
        raise ShapeError(f"local_response_norm: expected 3D or higher dimensional input, got {list(x.shape)}"
                         f"{where()}")
    if x.numel() == 0:
        return x.to(out_dtype)
    c = x.shape[1]
    sq = x * x
    before, after = size // 2, (size - 1) // 2
    pad = [t for t in (zeros(x.shape[0], before, *x.shape[2:], dtype=x.dtype) if before else None, sq,
                       zeros(x.shape[0], after, *x.shape[2:], dtype=x.dtype) if after else None) if t is not None]
    padded = cat(pad, 1) if len(pad) > 1 else sq
    window = padded.narrow(1, 0, c)
    for i in range(1, size):
        window = window + padded.narrow(1, i, c)
    # NOTE: an integer input's mean of squares is truncated, as torch's (an integer average pool), then scaled
    mean = window.div(size, rounding_mode="trunc") * alpha if integer else window * (alpha / size)
    div = (mean + k) ** beta
    return (x / div).to(out_dtype)


def _pnorm(x, p: float, dim: int):
    if p == math.inf:
        return x.abs().amax(dim, keepdim=True)
    if p == 2:
        return (x * x).sum(dim, keepdim=True).sqrt()
    if p == 1:
        return x.abs().sum(dim, keepdim=True)
    # NOTE: the root as exp(log(s) / p): the jvp of `s ** (1 / p)` loses precision in x64 mode (a core bug)
    return ((x.abs() ** p).sum(dim, keepdim=True).log() / p).exp()


def normalize(input, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out=None):
    """`input / max(norm_p(input, dim), eps)`: each slice along `dim` scaled to unit `p`-norm.

    >>> aotjax.nn.functional.normalize(aotjax.tensor([[3.0, 4.0]]))
    tensor([[0.6, 0.8]])
    """
    if out is not None:
        raise TypeError(f"normalize: out= is not supported{where()}; use the returned tensor (or "
                        f"`out.copy_(normalize(...))`)")
    x, out_dtype = _float_input("normalize", input)
    if p <= 0:
        raise ValueError(f"normalize: p must be positive, got {p}{where()}")
    dim = canonical_dim(dim, max(x.ndim, 1), "normalize")
    if x.ndim == 0:
        return (x / _pnorm(x.reshape(1), p, 0).reshape(()).clamp(min=eps)).to(out_dtype)
    return (x / _pnorm(x, p, dim).clamp(min=eps)).to(out_dtype)


def one_hot(tensor, num_classes: int = -1):
    """An integer tensor with a last dim of `num_classes`: 1 at each entry's class index, 0 elsewhere.
    `num_classes=-1` takes the largest class plus one (which needs a concrete tensor: give it under `jit`).

    >>> aotjax.nn.functional.one_hot(aotjax.tensor([0, 2]))
    tensor([[1, 0, 0],
            [0, 0, 1]])
    """
    t = as_tensor(tensor)
    if category(t.dtype) != 1:
        raise DTypeError(f"one_hot is only applicable to index tensor (an integer tensor), got "
                         f"{t.aval.str_short()}{where()}")
    if num_classes == -1:
        if isinstance(t, Tracer):
            raise ValueError(f"one_hot: num_classes=-1 needs the tensor's values, which are not known while "
                             f"tracing{where()}; pass num_classes explicitly")
        values = t.numpy()
        if values.size == 0:
            raise RuntimeError(f"one_hot: Can not infer total number of classes from empty tensor{where()}")
        num_classes = int(values.max()) + 1
    if num_classes < 0:
        raise ValueError(f"one_hot: num_classes must be -1 or non-negative, got {num_classes}{where()}")
    t = check_index("one_hot", t, num_classes, 0, negative=False,
                    message=f"one_hot: class values must be in [0, num_classes={num_classes}), got {{}}")
    classes = arange(num_classes, dtype=t.dtype)
    return (t.unsqueeze(-1) == classes).to(default_int_dtype())


# -- channel-wise and alpha dropout ----------------------------------------------------------------
def _feature_dropout(op: str, x, p: float, training: bool, inplace: bool, spatial: int | None, alpha: bool,
                     key, generator):
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{op}: dropout probability has to be between 0 and 1, but got {p}{where()}")
    x = as_tensor(x)
    if not training or p == 0.0:
        return x
    if spatial is None:  # elementwise (alpha_dropout)
        mask_shape = tuple(x.shape)
    elif x.ndim in (spatial + 1, spatial + 2) and (spatial, x.ndim) != (2, 3):
        lead = x.ndim - spatial
        mask_shape = tuple(x.shape[:lead]) + (1,) * spatial
    elif spatial == 1 or x.ndim < 2:
        raise ShapeError(f"{op}: expected a {spatial + 2}-D (batched) or {spatial + 1}-D (unbatched) input, got "
                         f"shape {list(x.shape)}{where()}")
    else:  # NOTE: torch's deprecated readings, with its warnings: dims 0 and 1 are the batch and the channels
        if (spatial, x.ndim) == (2, 3):
            warnings.warn(f"{op}: Received a 3D input to {op} and assuming that channel-wise 1D dropout behavior is "
                          f"desired - input is interpreted as shape (N, C, L), where C is the channel dim{where()}",
                          UserWarning, stacklevel=3)
        else:
            warnings.warn(f"{op}: Received a {x.ndim}-D input to {op}, which is deprecated and will result in an "
                          f"error in a future release{where()}; use dropout instead", UserWarning, stacklevel=3)
        mask_shape = tuple(x.shape[:2]) + (1,) * (x.ndim - 2)
    k = draw_key(op, generator, key)
    if p == 1.0:
        keep = zeros(*mask_shape, dtype=x.dtype)
    else:
        keep = bernoulli(k, 1.0 - p, mask_shape).to(x.dtype)
    if alpha:
        a_ = 1.7580993408473766
        a = 1.0 / math.sqrt((a_ * a_ * p + 1) * (1 - p)) if p < 1.0 else 0.0
        out = x * (keep * a) + ((keep - 1) * (a_ * a) + a_ * a * p)
    else:
        out = x * keep * (1.0 / (1.0 - p) if p < 1.0 else 0.0)
    return x.copy_(out) if inplace else out


def dropout1d(input, p: float = 0.5, training: bool = True, inplace: bool = False, *, key=None, generator=None):
    """Zeroes whole channels (of an `[N, C, L]` or `[C, L]` input) with probability `p` and scales the rest by
    `1 / (1 - p)`; the identity with `training=False`.

    >>> aotjax.nn.functional.dropout1d(aotjax.ones(1, 2, 3), training=False).shape
    (1, 2, 3)
    """
    return _feature_dropout("dropout1d", input, p, training, inplace, 1, False, key, generator)


def dropout2d(input, p: float = 0.5, training: bool = True, inplace: bool = False, *, key=None, generator=None):
    """Zeroes whole channels (of an `[N, C, H, W]` or `[C, H, W]` input) with probability `p` and scales the
    rest by `1 / (1 - p)`; the identity with `training=False`.

    >>> aotjax.nn.functional.dropout2d(aotjax.ones(1, 2, 3, 3), training=False).shape
    (1, 2, 3, 3)
    """
    return _feature_dropout("dropout2d", input, p, training, inplace, 2, False, key, generator)


def dropout3d(input, p: float = 0.5, training: bool = True, inplace: bool = False, *, key=None, generator=None):
    """Zeroes whole channels (of an `[N, C, D, H, W]` or `[C, D, H, W]` input) with probability `p` and scales
    the rest by `1 / (1 - p)`; the identity with `training=False`.

    >>> aotjax.nn.functional.dropout3d(aotjax.ones(1, 2, 1, 1, 1), training=False).shape
    (1, 2, 1, 1, 1)
    """
    return _feature_dropout("dropout3d", input, p, training, inplace, 3, False, key, generator)


def alpha_dropout(input, p: float = 0.5, training: bool = False, inplace: bool = False, *, key=None,
                  generator=None):
    """Dropout for SELU networks: dropped elements are set to SELU's negative saturation value and the result
    is affinely rescaled so a standard-normal input keeps mean 0 and variance 1; the identity with
    `training=False` (the default, as in PyTorch).

    >>> aotjax.nn.functional.alpha_dropout(aotjax.ones(3)).tolist()
    [1.0, 1.0, 1.0]
    """
    return _feature_dropout("alpha_dropout", input, p, training, inplace, None, True, key, generator)


def feature_alpha_dropout(input, p: float = 0.5, training: bool = False, inplace: bool = False, *, key=None,
                          generator=None):
    """`alpha_dropout` of whole channels (dim 1 of an `[N, C, ...]` input).

    >>> aotjax.nn.functional.feature_alpha_dropout(aotjax.ones(1, 2, 2)).shape
    (1, 2, 2)
    """
    x = as_tensor(input)
    if x.ndim < 2:
        raise ShapeError(f"feature_alpha_dropout: expected an input with channels, [N, C, ...], got "
                         f"{list(x.shape)}{where()}")
    return _feature_dropout("feature_alpha_dropout", x, p, training, inplace, x.ndim - 2, True, key, generator)



# -- embedding bags --------------------------------------------------------------------------------
def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                  mode: str = "mean", sparse: bool = False, per_sample_weights=None, include_last_offset: bool = False,
                  padding_idx: int | None = None):
    """The sums, means or maxima (`mode`) of bags of rows of `weight`, without building the rows' tensor per bag:
    a 2-D `input` `[B, L]` holds B bags of L indices; a 1-D `input` is cut into bags at `offsets` (the start of
    each bag; with `include_last_offset` one more entry, the end of the last bag, which runs to the end of
    `input` whatever it says, as in PyTorch). `per_sample_weights`
    (`mode='sum'` only) scales each row; entries equal to `padding_idx` are left out (and out of the means'
    counts). An empty bag gives zeros. As `torch.nn.functional.embedding_bag`, without `max_norm`,
    `scale_grad_by_freq` and `sparse`.

    >>> w = aotjax.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    >>> aotjax.nn.functional.embedding_bag(aotjax.tensor([0, 1, 2]), w, aotjax.tensor([0, 2]), mode="sum")
    tensor([[4., 6.],
            [5., 6.]])
    """
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise NotImplementedError(f"embedding_bag: max_norm, scale_grad_by_freq and sparse are not supported{where()}; "
                                  f"renormalize the weight yourself (with `aotjax.no_grad`) before the call")
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"embedding_bag: mode has to be one of sum, mean or max, got {mode!r}{where()}")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                                  f"supported for mode='sum' (got mode={mode!r}){where()}")
    input, weight = as_tensor(input), as_tensor(weight)
    if category(input.dtype) != 1:
        raise DTypeError(f"embedding_bag: input must hold indices (an integer tensor), got {input.aval.str_short()}"
                         f"{where()}")
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError(f"embedding_bag: if input is 2D, then offsets has to be None, as input is treated as a "
                             f"mini-batch of fixed length sequences{where()}")
        n_bags, length = input.shape
        offsets = arange(0, n_bags * length, max(length, 1), dtype=input.dtype)[:n_bags]
        input = input.reshape(-1)
        if per_sample_weights is not None:
            per_sample_weights = as_tensor(per_sample_weights).reshape(-1)
        include_last_offset = False
    elif input.ndim == 1:
        if offsets is None or as_tensor(offsets).ndim != 1:
            raise ValueError(f"embedding_bag: a 1D input needs offsets, a 1D tensor of the bags' starts{where()}")
        offsets = as_tensor(offsets)
        n_bags = offsets.shape[0] - (1 if include_last_offset else 0)
    else:
        raise ShapeError(f"embedding_bag: input has to be 1D or 2D, got shape {list(input.shape)}{where()}")
    n, dim = input.shape[0], weight.shape[1]
    rows = embedding(input, weight)
    bag = searchsorted(offsets, arange(n, dtype=offsets.dtype), right=True) - 1
    # NOTE: as PyTorch, the last bag runs to the end of `input` whatever the last offset says
    bag = bag.clamp(0, max(n_bags - 1, 0))
    keep = input == input
    if padding_idx is not None:
        keep = input != (padding_idx + weight.shape[0] if padding_idx < 0 else padding_idx)
    if per_sample_weights is not None:
        rows = rows * as_tensor(per_sample_weights).unsqueeze(1)
    if mode == "max":
        filled = select(keep.unsqueeze(1), rows, rows.detach() * 0 - math.inf)
        out = zeros(n_bags, dim, dtype=rows.dtype).fill_(-math.inf).scatter_reduce(
            0, bag.unsqueeze(1).expand(n, dim), filled, "amax")
        return select(out == -math.inf, zeros(n_bags, dim, dtype=rows.dtype), out)  # NOTE: empty bags give 0
    out = zeros(n_bags, dim, dtype=rows.dtype).index_add(0, bag, rows * keep.unsqueeze(1))
    if mode == "mean":
        counts = zeros(n_bags, dtype=rows.dtype).index_add(0, bag, keep.to(rows.dtype))
        out = out / counts.clamp(min=1).unsqueeze(1)
    return out


# -- normalization ---------------------------------------------------------------------------------
def _normalized_dims(op: str, x, normalized_shape) -> tuple[int, ...]:
    shape = (normalized_shape,) if isinstance(normalized_shape, (int, np.integer)) else tuple(normalized_shape)
    k = len(shape)
    if k == 0 or k > x.ndim or tuple(x.shape[x.ndim - k:]) != tuple(int(s) for s in shape):
        raise ShapeError(f"{op}: normalized_shape {list(shape)} must be the trailing dimensions of the input, "
                         f"of shape {list(x.shape)}{where()}")
    return tuple(range(x.ndim - k, x.ndim))


@autocast.float32_on_gpu
@fused_when_eager("NativeLayerNormBackward0")
def layer_norm(input, normalized_shape, weight=None, bias=None, eps: float = 1e-5):
    """Normalizes over the trailing `normalized_shape` dims to mean 0 and variance 1 (biased), then
    applies the elementwise affine `weight` and `bias` if given.

    >>> aotjax.layer_norm(aotjax.tensor([1.0, 3.0]), 2, eps=0.0)
    tensor([-1.,  1.])
    """
    input, out_dtype = _float_input("layer_norm", input)
    dims = _normalized_dims("layer_norm", input, normalized_shape)
    centered = input - input.mean(dims, keepdim=True)
    y = centered * ((centered * centered).mean(dims, keepdim=True) + eps).rsqrt()
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y.to(out_dtype)


@autocast.float32_on_gpu
@fused_when_eager("MulBackward0")
def rms_norm(input, normalized_shape, weight=None, eps: float | None = None):
    """`x / sqrt(mean(x**2) + eps)` over the trailing `normalized_shape` dims, times `weight` if
    given; `eps` defaults to the machine epsilon of `x`'s dtype (as in PyTorch).

    >>> aotjax.rms_norm(aotjax.tensor([2.0, -2.0]), [2], eps=0.0)
    tensor([ 1., -1.])
    """
    input, out_dtype = _float_input("rms_norm", input)
    dims = _normalized_dims("rms_norm", input, normalized_shape)
    if eps is None:
        eps = float(np.finfo(out_dtype).eps)
    y = input * ((input * input).mean(dims, keepdim=True) + eps).rsqrt()
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
def dropout(input, p: float = 0.5, training: bool = True, inplace: bool = False, *, key=None, generator=None):
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
        return input
    input = as_tensor(input)
    key = draw_key("dropout", generator, key)
    if p == 1.0:
        out = input * 0
    else:
        out = input * bernoulli(key, 1.0 - p, tuple(input.shape)) * (1.0 / (1.0 - p))
    return input.copy_(out) if inplace else out
