"""The losses of `torch.nn.functional` (`cross_entropy`, `mse_loss`, `nll_loss`, the binary, margin, embedding and
distribution losses, `ctc_loss`: the forward recursion over time as one `scan`, its derivative by differentiating
through the loop) and the distances they build on (`cosine_similarity`, `pairwise_distance`, `pdist`): compositions
of existing ops, with PyTorch's arguments, defaults, and `reduction='mean' | 'sum' | 'none'`.
"""
from __future__ import annotations

import math

import numpy as np

from aotjax.core.errors import DTypeError, ShapeError
from aotjax.core.source_info import where
from aotjax.ops.base import autocast
from aotjax.ops.base.data import as_tensor, tensor
from aotjax.ops.base.promotion import category, default_int_dtype, is_float
from aotjax.ops.control_flow.scan import scan
from aotjax.ops.creation.factories import arange, full, zeros
from aotjax.ops.indexing.subscripts import check_index, gather_p, index_p
from aotjax.ops.math.elementwise import where as select
from aotjax.ops.nn.activations import log_softmax
from aotjax.ops.shape.copies import cat, stack

__all__ = ["pdist", "cosine_similarity", "pairwise_distance"]
FUNCTIONAL = __all__ + ["cross_entropy", "mse_loss", "ctc_loss", "triplet_margin_with_distance_loss",
                        "multilabel_margin_loss", "nll_loss", "binary_cross_entropy",
                        "binary_cross_entropy_with_logits", "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div",
                        "cosine_embedding_loss", "margin_ranking_loss", "hinge_embedding_loss", "triplet_margin_loss",
                        "soft_margin_loss", "multilabel_soft_margin_loss", "multi_margin_loss", "poisson_nll_loss",
                        "gaussian_nll_loss"]


def _same_shape(op: str, input, target):
    input, target = as_tensor(input), as_tensor(target)
    if tuple(input.shape) != tuple(target.shape):
        raise ShapeError(f"{op}: target size ({list(target.shape)}) must be the same as input size "
                         f"({list(input.shape)}){where()}")
    return input, target


def _softplus(z):
    """`log(1 + exp(z))`, stably."""
    return z.clamp(min=0) + (-z.abs()).exp().log1p()


# -- classification --------------------------------------------------------------------------------
@autocast.float32
def nll_loss(input, target, weight=None, ignore_index: int = -100, reduction: str = "mean"):
    """The negative log likelihood: `-weight[t] * input[n, t]` for log-probabilities `input` (classes on
    dim 1, or dim 0 when unbatched) and class indices `target`; entries equal to `ignore_index` are skipped,
    and `'mean'` divides by the summed weights of the others. As `torch.nn.functional.nll_loss`.

    >>> logp = aotjax.tensor([[-1.0, -2.0], [-3.0, -4.0]])
    >>> aotjax.nn.functional.nll_loss(logp, aotjax.tensor([0, 1]))
    tensor(2.5)
    """
    _check_reduction("nll_loss", reduction)
    input, target = as_tensor(input), as_tensor(target)
    _class_indices("nll_loss", target)
    if input.ndim == 0:
        raise ShapeError(f"nll_loss: input must have a class dimension, got a 0-d tensor{where()}")
    if input.ndim == 1:  # unbatched: one sample
        loss = nll_loss(input.unsqueeze(0), target.unsqueeze(0), weight, ignore_index, reduction)
        return loss.squeeze(0) if reduction == "none" else loss
    n_classes = input.shape[1]
    expected = (input.shape[0],) + tuple(input.shape[2:])
    if tuple(target.shape) != expected:
        raise ShapeError(f"nll_loss: targets for input of shape {list(input.shape)} must have shape "
                         f"{list(expected)}, got {list(target.shape)}{where()}")
    valid = target != ignore_index
    safe = check_index("nll_loss", target.masked_fill(valid.logical_not(), 0), n_classes, 1, negative=False,
                       message=f"nll_loss: target {{}} is out of bounds: a class index must be in [0, {n_classes}) "
                       f"or equal to ignore_index ({ignore_index})")
    picked = gather_p.bind(input, safe.unsqueeze(1), dim=1).squeeze(1)
    if weight is not None:
        weight = as_tensor(weight)
        if tuple(weight.shape) != (n_classes,):
            raise ShapeError(f"nll_loss: weight must have one entry per class, shape [{n_classes}], got "
                             f"{list(weight.shape)}{where()}")
        w = index_p.bind(weight, safe.reshape(-1), dims=(0,)).reshape(safe.shape) * valid
    else:
        w = valid.to(input.dtype)
    loss = -(picked * w)
    if reduction == "mean":
        return loss.sum() / w.sum()
    return _reduce(loss, reduction)


def binary_cross_entropy(input, target, weight=None, reduction: str = "mean"):
    """`-weight * (t * log(x) + (1 - t) * log(1 - x))` for probabilities `input`, each log clamped to `>= -100`
    (as PyTorch, so a 0 or 1 probability gives a finite loss).

    >>> round(aotjax.nn.functional.binary_cross_entropy(aotjax.tensor([0.5]), aotjax.tensor([1.0])).item(), 4)
    0.6931
    """
    _check_reduction("binary_cross_entropy", reduction)
    input, target = _same_shape("binary_cross_entropy", input, target)
    if not is_float(input.dtype):
        raise DTypeError(f"binary_cross_entropy: expected a floating-point input, got {input.aval.str_short()}"
                         f"{where()}")
    loss = -(target * input.log().clamp(min=-100) + (1 - target) * (1 - input).log().clamp(min=-100))
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


@autocast.float32
def binary_cross_entropy_with_logits(input, target, weight=None, reduction: str = "mean", pos_weight=None):
    """`binary_cross_entropy(sigmoid(input), target)` computed stably from the logits; `pos_weight` (one per
    class, broadcast along the last dim) weighs the positive term.

    >>> F = aotjax.nn.functional
    >>> round(F.binary_cross_entropy_with_logits(aotjax.tensor([0.0]), aotjax.tensor([1.0])).item(), 4)
    0.6931
    """
    _check_reduction("binary_cross_entropy_with_logits", reduction)
    input, target = _same_shape("binary_cross_entropy_with_logits", input, target)
    if pos_weight is None:
        loss = (1 - target) * input + _softplus(-input)
    else:
        loss = (1 - target) * input + ((pos_weight - 1) * target + 1) * _softplus(-input)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


# -- regression ------------------------------------------------------------------------------------
def _weighted(op: str, loss, weight):
    """`loss * weight` (a weight of the input's shape, as torch requires; `'mean'` then still divides by the
    number of elements)."""
    if weight is None:
        return loss
    weight = as_tensor(weight)
    if tuple(weight.shape) != tuple(loss.shape):
        raise ShapeError(f"{op}: weights and input must have the same size, got {list(weight.shape)} and "
                         f"{list(loss.shape)}{where()}")
    return loss * weight


@autocast.float32
def l1_loss(input, target, reduction: str = "mean", weight=None):
    """The absolute error `|input - target|`, times `weight` (of the input's shape) if given.

    >>> aotjax.nn.functional.l1_loss(aotjax.tensor([1.0, 2.0]), aotjax.tensor([1.0, 4.0]))
    tensor(1.)
    """
    _check_reduction("l1_loss", reduction)
    return _reduce(_weighted("l1_loss", (as_tensor(input) - target).abs(), weight), reduction)


@autocast.float32
def smooth_l1_loss(input, target, reduction: str = "mean", beta: float = 1.0):
    """`0.5 * d**2 / beta` where `|d| < beta`, `|d| - 0.5 * beta` elsewhere (`d = input - target`); `beta=0`
    is the L1 loss.

    >>> aotjax.nn.functional.smooth_l1_loss(aotjax.tensor([0.0, 0.0]), aotjax.tensor([0.5, 3.0]), reduction="none")
    tensor([0.125, 2.5  ])
    """
    _check_reduction("smooth_l1_loss", reduction)
    if beta < 0:
        raise ValueError(f"smooth_l1_loss: beta must not be negative, got {beta}{where()}")
    d = as_tensor(input) - target
    a = d.abs()
    if beta == 0:
        return _reduce(a, reduction)
    return _reduce(select(a < beta, d * d * (0.5 / beta), a - 0.5 * beta), reduction)


def huber_loss(input, target, reduction: str = "mean", delta: float = 1.0, weight=None):
    """`0.5 * d**2` where `|d| < delta`, `delta * (|d| - 0.5 * delta)` elsewhere (`d = input - target`), times
    `weight` (of the input's shape) if given.

    >>> aotjax.nn.functional.huber_loss(aotjax.tensor([0.0, 0.0]), aotjax.tensor([0.5, 3.0]), reduction="none")
    tensor([0.125, 2.5  ])
    """
    _check_reduction("huber_loss", reduction)
    if delta <= 0:
        raise ValueError(f"huber_loss: delta must be positive, got {delta}{where()}")
    d = as_tensor(input) - target
    a = d.abs()
    return _reduce(_weighted("huber_loss", select(a < delta, d * d * 0.5, (a - 0.5 * delta) * delta), weight),
                   reduction)


@autocast.float32
def kl_div(input, target, reduction: str = "mean", log_target: bool = False):
    """The pointwise KL divergence `target * (log(target) - input)` for log-probabilities `input` (and
    log-probabilities `target` with `log_target=True`); `reduction='batchmean'` divides the sum by the batch
    size (the mathematically correct KL divergence; `'mean'` averages over all elements, as PyTorch).

    >>> aotjax.nn.functional.kl_div(aotjax.tensor([0.0]), aotjax.tensor([1.0]), reduction="sum")
    tensor(0.)
    """
    if reduction not in ("mean", "sum", "none", "batchmean"):
        raise ValueError(f"kl_div: reduction must be one of ('mean', 'sum', 'none', 'batchmean'), got "
                         f"{reduction!r}{where()}")
    input, target = as_tensor(input), as_tensor(target)
    if log_target:
        loss = target.exp() * (target - input)
    else:
        positive = target > 0
        xlogx = select(positive, target * select(positive, target, target * 0 + 1).log(), target * 0)
        loss = xlogx - target * input
    if reduction == "batchmean":
        return loss.sum() / input.shape[0] if input.ndim else loss.sum()
    return _reduce(loss, reduction)


def poisson_nll_loss(input, target, log_input: bool = True, full: bool = False, eps: float = 1e-8,
                     reduction: str = "mean"):
    """The Poisson negative log likelihood: `exp(input) - target * input` (`log_input=True`), or
    `input - target * log(input + eps)`; `full=True` adds Stirling's approximation of `log(target!)` where
    `target > 1`.

    >>> aotjax.nn.functional.poisson_nll_loss(aotjax.tensor([0.0]), aotjax.tensor([1.0]))
    tensor(1.)
    """
    _check_reduction("poisson_nll_loss", reduction)
    input, target = as_tensor(input), as_tensor(target)
    loss = input.exp() - target * input if log_input else input - target * (input + eps).log()
    if full:
        big = target > 1
        t = select(big, target, target * 0 + 1)
        stirling = t * t.log() - t + (t * (2 * math.pi)).log() * 0.5
        loss = loss + select(big, stirling, stirling * 0)
    return _reduce(loss, reduction)


def gaussian_nll_loss(input, target, var, full: bool = False, eps: float = 1e-6, reduction: str = "mean"):
    """The Gaussian negative log likelihood `0.5 * (log(var) + (input - target)**2 / var)` (plus
    `0.5 * log(2 pi)` with `full=True`); `var` is clamped to `>= eps` (the clamp is not differentiated, as in
    PyTorch) and may have one dim less than `input`, or a last dim of 1 (one variance for all of it).

    >>> aotjax.nn.functional.gaussian_nll_loss(aotjax.tensor([1.0]), aotjax.tensor([1.0]), aotjax.tensor([1.0]))
    tensor(0.)
    """
    _check_reduction("gaussian_nll_loss", reduction)
    input, target, var = as_tensor(input), as_tensor(target), as_tensor(var)
    if tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = var.unsqueeze(-1)
        elif not (input.ndim and var.ndim and tuple(input.shape[:-1]) == tuple(var.shape[:-1]) and var.shape[-1] == 1):
            raise ShapeError(f"gaussian_nll_loss: var of shape {list(var.shape)} does not match the input of shape "
                             f"{list(input.shape)}: give it the input's shape, that shape with a last dim of 1, or "
                             f"that shape without its last dim{where()}")
    var = var + (var.clamp(min=eps) - var).detach()  # NOTE: clamped, the clamp's derivative taken as 1
    d = input - target
    loss = (var.log() + d * d / var) * 0.5
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


# -- distances and margins -------------------------------------------------------------------------
def cosine_similarity(x1, x2, dim: int = 1, eps: float = 1e-8):
    """`x1 . x2 / (max(|x1|, eps) * max(|x2|, eps))` along `dim` (the inputs broadcast against each other).

    >>> aotjax.nn.functional.cosine_similarity(aotjax.tensor([[1.0, 0.0]]), aotjax.tensor([[2.0, 0.0]]))
    tensor([1.])
    """
    x1, x2 = as_tensor(x1), as_tensor(x2)
    n1 = (x1 * x1).sum(dim, keepdim=True).sqrt().clamp(min=eps)
    n2 = (x2 * x2).sum(dim, keepdim=True).sqrt().clamp(min=eps)
    return ((x1 / n1) * (x2 / n2)).sum(dim)


def _norm_last(d, p: float, keepdim: bool):
    if p == math.inf:
        return d.abs().amax(-1, keepdim=keepdim)
    if p == 0:
        return (d != 0).to(d.dtype).sum(-1, keepdim=keepdim)
    if p == 2:
        return (d * d).sum(-1, keepdim=keepdim).sqrt()
    if p == 1:
        return d.abs().sum(-1, keepdim=keepdim)
    # NOTE: the root as exp(log(s) / p): the jvp of `s ** (1 / p)` loses precision in x64 mode (a core bug)
    return ((d.abs() ** p).sum(-1, keepdim=keepdim).log() / p).exp()


def pairwise_distance(x1, x2, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False):
    """The `p`-norm of `x1 - x2 + eps` along the last dim.

    >>> aotjax.nn.functional.pairwise_distance(aotjax.tensor([[3.0, 0.0]]), aotjax.tensor([[0.0, 4.0]]), eps=0.0)
    tensor([5.])
    """
    if p < 0:
        raise ValueError(f"pairwise_distance: p must be non-negative, got {p}{where()}")
    x1, x2 = as_tensor(x1), as_tensor(x2)
    d = x1 - x2 + eps
    if d.ndim == 0:
        d = d.reshape(1)
    return _norm_last(d, p, keepdim)


def cosine_embedding_loss(input1, input2, target, margin: float = 0.0, reduction: str = "mean"):
    """`1 - cos(x1, x2)` where `target == 1`, `max(0, cos(x1, x2) - margin)` where `target == -1` (cos along
    dim 1 of batched `[N, D]` inputs, dim 0 of `[D]` ones).

    >>> aotjax.nn.functional.cosine_embedding_loss(aotjax.tensor([[1.0, 0.0]]), aotjax.tensor([[0.0, 1.0]]),
    ...                                            aotjax.tensor([1]))
    tensor(1.)
    """
    _check_reduction("cosine_embedding_loss", reduction)
    x1, x2, y = as_tensor(input1), as_tensor(input2), as_tensor(target)
    if x1.ndim not in (1, 2) or tuple(x1.shape) != tuple(x2.shape):
        raise ShapeError(f"cosine_embedding_loss: expected inputs of one shape, [N, D] or [D], got "
                         f"{list(x1.shape)} and {list(x2.shape)}{where()}")
    dim = x1.ndim - 1
    eps = 1e-12
    cos = (x1 * x2).sum(dim) / (((x1 * x1).sum(dim) + eps) * ((x2 * x2).sum(dim) + eps)).sqrt()
    pos = select(y == 1, 1 - cos, cos * 0)
    neg = select(y == -1, (cos - margin).clamp(min=0), cos * 0)
    return _reduce(pos + neg, reduction)


def margin_ranking_loss(input1, input2, target, margin: float = 0.0, reduction: str = "mean"):
    """`max(0, -target * (input1 - input2) + margin)`.

    >>> aotjax.nn.functional.margin_ranking_loss(aotjax.tensor([1.0]), aotjax.tensor([2.0]), aotjax.tensor([1.0]))
    tensor(1.)
    """
    _check_reduction("margin_ranking_loss", reduction)
    return _reduce((-as_tensor(target) * (as_tensor(input1) - input2) + margin).clamp(min=0), reduction)


def hinge_embedding_loss(input, target, margin: float = 1.0, reduction: str = "mean"):
    """`input` where `target == 1`, `max(0, margin - input)` where `target == -1`.

    >>> aotjax.nn.functional.hinge_embedding_loss(aotjax.tensor([0.3, 0.3]), aotjax.tensor([1.0, -1.0]))
    tensor(0.5)
    """
    _check_reduction("hinge_embedding_loss", reduction)
    input, target = as_tensor(input), as_tensor(target)
    zeros = input * 0
    loss = select(target != 1, (margin - input).clamp(min=0), zeros) + select(target != -1, input, zeros)
    return _reduce(loss, reduction)


def triplet_margin_loss(anchor, positive, negative, margin: float = 1.0, p: float = 2, eps: float = 1e-6,
                        swap: bool = False, reduction: str = "mean"):
    """`max(0, margin + d(anchor, positive) - d(anchor, negative))`, `d` the `pairwise_distance`; `swap=True`
    takes the smaller of `d(anchor, negative)` and `d(positive, negative)`.

    >>> a = aotjax.tensor([[0.0, 0.0]])
    >>> aotjax.nn.functional.triplet_margin_loss(a, a, aotjax.tensor([[3.0, 4.0]]), eps=0.0)
    tensor(0.)
    """
    _check_reduction("triplet_margin_loss", reduction)
    anchor, positive, negative = as_tensor(anchor), as_tensor(positive), as_tensor(negative)
    if not (anchor.ndim == positive.ndim == negative.ndim) or anchor.ndim not in (1, 2):
        raise ShapeError(f"triplet_margin_loss: expected anchor, positive and negative all [N, D] or all [D], got "
                         f"{list(anchor.shape)}, {list(positive.shape)}, {list(negative.shape)}{where()}")
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = d_neg.minimum(pairwise_distance(positive, negative, p, eps))
    return _reduce((d_pos - d_neg + margin).clamp(min=0), reduction)


def soft_margin_loss(input, target, reduction: str = "mean"):
    """The logistic loss `log(1 + exp(-target * input))` for targets in {1, -1}.

    >>> round(aotjax.nn.functional.soft_margin_loss(aotjax.tensor([0.0]), aotjax.tensor([1.0])).item(), 4)
    0.6931
    """
    _check_reduction("soft_margin_loss", reduction)
    input, target = _same_shape("soft_margin_loss", input, target)
    return _reduce(_softplus(-input * target), reduction)


def multilabel_soft_margin_loss(input, target, weight=None, reduction: str = "mean"):
    """The binary cross entropy of `sigmoid(input)` against 0/1 `target`, averaged over the classes (the last
    dim), each class weighed by `weight` if given; one loss per sample.

    >>> F = aotjax.nn.functional
    >>> round(F.multilabel_soft_margin_loss(aotjax.tensor([[0.0, 0.0]]), aotjax.tensor([[1.0, 0.0]])).item(), 4)
    0.6931
    """
    _check_reduction("multilabel_soft_margin_loss", reduction)
    input, target = _same_shape("multilabel_soft_margin_loss", input, target)
    loss = target * _softplus(-input) + (1 - target) * _softplus(input)
    if weight is not None:
        loss = loss * weight
    n_classes = input.shape[-1] if input.ndim else 1
    loss = loss.sum(-1) / n_classes if input.ndim else loss
    return _reduce(loss, reduction)


def multi_margin_loss(input, target, p: int = 1, margin: float = 1.0, weight=None, reduction: str = "mean"):
    """The multi-class hinge loss: per sample, `sum_{i != y} max(0, margin - x[y] + x[i]) ** p / C`
    (times `weight[y]` if given), for scores `input` `[N, C]` (or `[C]`) and class indices `target`.

    >>> aotjax.nn.functional.multi_margin_loss(aotjax.tensor([[0.0, 1.0]]), aotjax.tensor([1]))
    tensor(0.)
    """
    _check_reduction("multi_margin_loss", reduction)
    if p not in (1, 2):
        raise ValueError(f"multi_margin_loss: only p == 1 and p == 2 are supported, got {p}{where()}")
    input, target = as_tensor(input), as_tensor(target)
    if input.ndim <= 1:  # unbatched: one sample, a 0-d or one-element target (a 0-d input: one class, as torch)
        loss = multi_margin_loss(input.reshape(1, -1), target.reshape(1), p, margin, weight, reduction)
        return loss.reshape(()) if reduction == "none" else loss
    if input.ndim != 2 or tuple(target.shape) != (input.shape[0],):
        raise ShapeError(f"multi_margin_loss: expected input [N, C] (or [C]) and target [N], got "
                         f"{list(input.shape)} and {list(target.shape)}{where()}")
    n_classes = input.shape[1]
    safe = check_index("multi_margin_loss", target, n_classes, 1, negative=False,
                       message=f"multi_margin_loss: target {{}} is out of bounds: a class index must be in "
                       f"[0, {n_classes})")
    picked = gather_p.bind(input, safe.unsqueeze(1), dim=1)
    z = (input - picked + margin).clamp(min=0)
    if p == 2:
        z = z * z
    if weight is not None:
        z = z * index_p.bind(as_tensor(weight), safe, dims=(0,)).unsqueeze(1)
    others = arange(n_classes, dtype=safe.dtype).unsqueeze(0) != safe.unsqueeze(1)
    return _reduce((z * others).sum(1) / n_classes, reduction)


# -- cross_entropy, mse_loss -----------------------------------------------------------------------
_REDUCTIONS = ("mean", "sum", "none")


def _class_indices(op: str, target) -> None:
    """A DTypeError naming `op` unless `target` holds class indices (an integer tensor)."""
    if category(target.dtype) != 1:
        raise DTypeError(f"{op}: target must hold class indices (an integer tensor), got "
                         f"{target.aval.str_short()}{where()}")


def _check_reduction(op: str, reduction: str) -> None:
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{op}: reduction must be one of {_REDUCTIONS}, got {reduction!r}{where()}")


def _reduce(loss, reduction: str):
    return loss.mean() if reduction == "mean" else loss.sum() if reduction == "sum" else loss


@autocast.float32
def mse_loss(input, target, reduction: str = "mean", weight=None):
    """The squared error `(input - target) ** 2`, averaged (`'mean'`), summed (`'sum'`) or not (`'none'`); with
    `weight` (of the input's shape), each error times its weight, and the mean divided by the weights' sum (torch's).

    >>> aotjax.nn.functional.mse_loss(aotjax.tensor([1.0, 2.0]), aotjax.tensor([1.0, 4.0]))
    tensor(2.)
    """
    _check_reduction("mse_loss", reduction)
    diff = as_tensor(input) - target
    if weight is None:
        return _reduce(diff * diff, reduction)
    weight = as_tensor(weight)
    if tuple(weight.shape) != tuple(as_tensor(input).shape):
        raise ValueError(f"mse_loss: weight must have the input's shape {list(as_tensor(input).shape)}, got "
                         f"{list(weight.shape)}{where()}")
    weighted = diff * diff * weight
    return weighted.sum() / weight.sum() if reduction == "mean" else _reduce(weighted, reduction)


@autocast.float32
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


# -- ctc_loss --------------------------------------------------------------------------------------------------------
def _logaddexp3(a, b, c):
    """`log(exp(a) + exp(b) + exp(c))`, -inf (with zero derivatives) where all three are -inf."""
    m = a.maximum(b).maximum(c).detach()
    finite = m.isfinite()
    m = select(finite, m, 0.0)
    s = (a - m).exp() + (b - m).exp() + (c - m).exp()
    ok = s > 0
    return select(ok, select(ok, s, 1.0).log() + m, -math.inf)


def _lengths(op: str, what: str, lengths, n: int):
    t = as_tensor(lengths if not isinstance(lengths, (list, tuple)) else tensor(list(lengths)))
    if category(t.dtype) != 1 or t.ndim > 1 or (t.ndim == 1 and t.shape[0] != n):
        raise ShapeError(f"{op}: {what} must be {n} integer length(s) (one per batch entry), got "
                         f"{t.aval.str_short()}{where()}")
    return t.reshape(n).to(default_int_dtype())


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank: int = 0, reduction: str = "mean",
             zero_infinity: bool = False):
    """The Connectionist Temporal Classification loss, as `torch.nn.functional.ctc_loss`: minus the log of the
    probability, summed over every alignment, that `log_probs` (`[T, N, C]` log-probabilities, or `[T, C]`
    unbatched) emit the target sequence. `targets` are padded (`[N, S]`) or concatenated (1-D, of
    `sum(target_lengths)` entries); `'mean'` divides each loss by its target length, then averages.

    The gradient in `log_probs` is PyTorch's, not this function's exact derivative: PyTorch's backward assumes
    `log_probs` came out of `log_softmax` and adds `exp(log_probs)` at every step within `input_lengths` (a term a
    `log_softmax`'s backward cancels: through one, the two agree). Torch is the reference here.

    >>> lp = aotjax.tensor([[[0.5, 0.5]], [[0.5, 0.5]]]).log()
    >>> aotjax.nn.functional.ctc_loss(lp, aotjax.tensor([[1]]), [2], [1], reduction="sum")
    tensor(0.2876821)
    """
    _check_reduction("ctc_loss", reduction)
    lp = as_tensor(log_probs)
    if not is_float(lp.dtype):
        raise DTypeError(f"ctc_loss: log_probs must be floating point, got {lp.aval.str_short()}{where()}")
    if lp.ndim == 2:  # unbatched
        tg = as_tensor(targets)
        loss = ctc_loss(lp.unsqueeze(1), tg.unsqueeze(0) if tg.ndim == 1 else tg,
                        _lengths("ctc_loss", "input_lengths", input_lengths, 1),
                        _lengths("ctc_loss", "target_lengths", target_lengths, 1), blank, reduction, zero_infinity)
        return loss.squeeze(0) if reduction == "none" else loss
    if lp.ndim != 3:
        raise ShapeError(f"ctc_loss: log_probs must be [T, N, C] (or [T, C] unbatched), got shape "
                         f"{list(lp.shape)}{where()}")
    T, N, C = lp.shape
    if not 0 <= blank < C:
        raise ValueError(f"ctc_loss: blank must be a class index in [0, {C}), got {blank}{where()}")
    in_len = _lengths("ctc_loss", "input_lengths", input_lengths, N)
    tg_len = _lengths("ctc_loss", "target_lengths", target_lengths, N)
    tg = as_tensor(targets)
    if category(tg.dtype) != 1:
        raise DTypeError(f"ctc_loss: targets must be integer class indices, got {tg.aval.str_short()}{where()}")
    if tg.ndim == 1:  # concatenated: pad to [N, total]
        S = tg.shape[0]
        starts = tg_len.cumsum(0) - tg_len
        pos = (starts.unsqueeze(1) + arange(max(S, 1), dtype=tg_len.dtype)).clamp(0, max(S - 1, 0))
        tg = tg[pos] if S else zeros(N, 1, dtype=tg.dtype)
    elif tg.ndim != 2 or tg.shape[0] != N:
        raise ShapeError(f"ctc_loss: targets must be [N, S] padded or 1-D concatenated, got shape "
                         f"{list(tg.shape)} for a batch of {N}{where()}")
    S = max(tg.shape[1], 1)
    if tg.shape[1] == 0:
        tg = zeros(N, 1, dtype=tg.dtype)
    in_target = arange(S, dtype=tg_len.dtype) < tg_len.unsqueeze(1)
    labels = select(in_target, tg.to(default_int_dtype()), blank)  # padding never indexes out of range
    L = 2 * S + 1
    blanks = full((N, S), blank, dtype=labels.dtype)
    ext = cat([stack([blanks, labels], 2).reshape(N, 2 * S), blanks[:, :1]], 1)  # [blank, l1, blank, ..., blank]
    # a path may skip the blank before a label that differs from the label two states back
    prev2 = ext.roll(2, 1)
    skip = (ext != blank) & (ext != prev2) & tensor(np.arange(L) >= 2)
    emit = lp.gather(2, ext.unsqueeze(0).expand(T, N, L))  # [T, N, L]
    alive = arange(T, dtype=in_len.dtype).unsqueeze(1) < in_len  # [T, N]
    init = select(tensor(np.arange(L) == 0), 0.0, -math.inf).to(lp.dtype).expand(N, L)
    neg_inf = full((N, 1), -math.inf, dtype=lp.dtype)

    def step(alpha, x):
        e, live = x
        a1 = _shift(alpha, 1, neg_inf)
        a2 = select(skip, _shift(alpha, 2, neg_inf), -math.inf)
        new = _logaddexp3(alpha, a1, a2) + e
        return select(live.unsqueeze(1), new, alpha), None

    alpha, _ = scan(step, init, (emit, alive))
    last = (2 * tg_len).unsqueeze(1)
    end_blank = alpha.gather(1, last).squeeze(1)
    end_label = select(tg_len > 0, alpha.gather(1, (last - 1).clamp(min=0)).squeeze(1), -math.inf)
    loss = -_logaddexp3(end_blank, end_label, full((N,), -math.inf, dtype=lp.dtype))
    # NOTE: torch's gradient adds exp(log_probs) over the live steps (its backward assumes log_softmax outputs): a
    # term of value 0 whose derivative is that
    mass = (lp.exp() * alive.unsqueeze(2)).sum((0, 2))
    loss = loss + (mass - mass.detach())
    if zero_infinity:
        loss = select(loss.isinf(), 0.0, loss)
    if reduction == "mean":
        return (loss / tg_len.clamp(min=1).to(lp.dtype)).mean()
    return _reduce(loss, reduction)


def _shift(alpha, k, neg_inf):
    """`alpha` moved `k` states right along dim 1, -inf entering on the left."""
    return cat([neg_inf.expand(alpha.shape[0], k), alpha[:, :-k]], 1)


# -- pdist -----------------------------------------------------------------------------------------------------------
def pdist(input, p: float = 2.0):
    """The `p`-norm distance between each pair of rows of the `[N, M]` `input`: the `N * (N - 1) / 2` entries
    above the diagonal of `cdist(input, input)`, row by row, as `torch.nn.functional.pdist`.

    >>> aotjax.pdist(aotjax.tensor([[0.0, 0.0], [3.0, 4.0], [0.0, 1.0]]))
    tensor([5.       , 1.       , 4.2426405])
    """
    x = as_tensor(input)
    if x.ndim != 2:
        raise ShapeError(f"pdist: input must be 2-D [N, M], got shape {list(x.shape)}{where()}")
    if not is_float(x.dtype):
        raise DTypeError(f"pdist: input must be floating point, got {x.aval.str_short()}{where()}")
    if p < 0:
        raise ValueError(f"pdist: p must be non-negative, got {p}{where()}")
    i, j = (k.astype(np.int32) for k in np.triu_indices(x.shape[0], 1))
    if i.size == 0:
        return zeros(0, dtype=x.dtype)
    d = x[tensor(i)] - x[tensor(j)]
    if p == 0:
        return _norm_last(d, p, False)
    # NOTE: as torch's, the derivative at a zero entry of `d` (and at a zero distance: equal rows) is 0 (jax's abs
    # has derivative 1 at 0; the root's would be nan)
    a = select(d != 0, d.abs(), 0.0)
    if p == 1:
        return a.sum(-1)
    if p == math.inf:  # torch's derivative: sign(d) at every entry tied for the max (not shared among them)
        if d.shape[-1] == 0:  # NOTE: vectors of no entries are 0 apart, as torch's (a max over nothing has none)
            return zeros(d.shape[:-1], dtype=d.dtype)
        m = a.amax(-1).detach()
        ties = select((a == m.unsqueeze(-1)) & (d != 0), a, 0.0).sum(-1)
        return m + (ties - ties.detach())
    s = (d * d).sum(-1) if p == 2 else (a ** p).sum(-1)
    nonzero = s > 0
    safe = select(nonzero, s, 1.0)
    return select(nonzero, safe.sqrt() if p == 2 else (safe.log() / p).exp(), 0.0)


# -- margin losses: with a distance function, multilabel -------------------------------------------------------------
def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None, margin: float = 1.0,
                                      swap: bool = False, reduction: str = "mean"):
    """`max(0, margin + d(anchor, positive) - d(anchor, negative))` for any distance `d` (by default
    `pairwise_distance`); `swap` uses `min(d(anchor, negative), d(positive, negative))`, as
    `torch.nn.functional.triplet_margin_with_distance_loss`.

    >>> a = aotjax.tensor([[0.0, 0.0]])
    >>> round(aotjax.nn.functional.triplet_margin_with_distance_loss(a, a, a + 0.5, margin=1.0).item(), 4)
    0.2929
    """
    _check_reduction("triplet_margin_with_distance_loss", reduction)
    if margin <= 0:
        raise ValueError(f"triplet_margin_with_distance_loss: margin must be greater than 0, got {margin}{where()}")
    a, p, n = as_tensor(anchor), as_tensor(positive), as_tensor(negative)
    if not (a.ndim == p.ndim == n.ndim):
        raise ShapeError(f"triplet_margin_with_distance_loss: anchor, positive and negative must have the same "
                         f"number of dims, got {a.ndim}, {p.ndim} and {n.ndim}{where()}")
    d = distance_function if distance_function is not None else pairwise_distance
    d_pos, d_neg = as_tensor(d(a, p)), as_tensor(d(a, n))
    if swap:
        d_neg = d_neg.minimum(as_tensor(d(p, n)))
    return _reduce((d_pos - d_neg + margin).clamp(min=0), reduction)


def multilabel_margin_loss(input, target, reduction: str = "mean"):
    """The multi-class multi-label hinge loss, as `torch.nn.functional.multilabel_margin_loss`: for each sample,
    `sum_{j target, i not target} max(0, 1 - (x[j] - x[i])) / C`; `target` holds class indices, the first `-1`
    ending each sample's list.

    >>> aotjax.nn.functional.multilabel_margin_loss(aotjax.tensor([[0.125, 0.25, 0.5, 1.0]]),
    ...                                             aotjax.tensor([[3, 0, -1, 1]]))
    tensor(0.8125)
    """
    _check_reduction("multilabel_margin_loss", reduction)
    x, y = as_tensor(input), as_tensor(target)
    _class_indices("multilabel_margin_loss", y)
    if x.ndim > 2 or tuple(x.shape) != tuple(y.shape):
        raise ShapeError(f"multilabel_margin_loss: expected input [C] or [N, C] and a target of the same shape, "
                         f"got {list(x.shape)} and {list(y.shape)}{where()}")
    squeeze = x.ndim < 2
    x2 = x.reshape(1, -1) if squeeze else x
    y2 = y.reshape(1, -1).to(default_int_dtype()) if squeeze else y.to(default_int_dtype())
    C = x2.shape[1]
    if C == 0:
        loss = zeros(x2.shape[0], dtype=x.dtype)
    else:
        valid = (y2 >= 0).to(default_int_dtype()).cumprod(1) > 0  # [N, C]: the entries before the first -1
        idx = select(valid, y2, 0)
        is_target = ((idx.unsqueeze(2) == arange(C, dtype=idx.dtype)) & valid.unsqueeze(2)).any(1)  # [N, C]
        x_t = x2.gather(1, idx)  # [N, C]: x at each listed target
        hinge = (1 - x_t.unsqueeze(2) + x2.unsqueeze(1)).clamp(min=0)  # [N, j, i]
        keep = valid.unsqueeze(2) & is_target.logical_not().unsqueeze(1)
        loss = select(keep, hinge, 0.0).sum((1, 2)) / C
    if squeeze:
        loss = loss.reshape(())
    return _reduce(loss, reduction)
