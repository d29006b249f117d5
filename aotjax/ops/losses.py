"""The losses of `torch.nn.functional` beyond `cross_entropy` and `mse_loss` (in aotjax/ops/nn.py), and the
distances they build on (`cosine_similarity`, `pairwise_distance`): compositions of existing ops, with
PyTorch's arguments, defaults, and `reduction='mean' | 'sum' | 'none'`.
"""
from __future__ import annotations

import math

from aotjax.core.errors import DTypeError, ShapeError
from aotjax.core.source_info import where
from aotjax.ops._frontend import as_tensor
from aotjax.ops.creation import arange
from aotjax.ops.elementwise import where as select
from aotjax.ops.indexing import check_index, gather_p, index_p
from aotjax.ops.nn import _check_reduction, _reduce
from aotjax.ops.promotion import category, is_float

__all__ = ["cosine_similarity", "pairwise_distance"]
FUNCTIONAL = __all__ + ["nll_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits", "l1_loss",
                        "smooth_l1_loss", "huber_loss", "kl_div", "cosine_embedding_loss", "margin_ranking_loss",
                        "hinge_embedding_loss", "triplet_margin_loss", "soft_margin_loss",
                        "multilabel_soft_margin_loss", "multi_margin_loss", "poisson_nll_loss", "gaussian_nll_loss"]


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
    if category(target.dtype) != 1:
        raise DTypeError(f"nll_loss: target must hold class indices (an integer tensor), got "
                         f"{target.aval.str_short()}{where()}")
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


def l1_loss(input, target, reduction: str = "mean", weight=None):
    """The absolute error `|input - target|`, times `weight` (of the input's shape) if given.

    >>> aotjax.nn.functional.l1_loss(aotjax.tensor([1.0, 2.0]), aotjax.tensor([1.0, 4.0]))
    tensor(1.)
    """
    _check_reduction("l1_loss", reduction)
    return _reduce(_weighted("l1_loss", (as_tensor(input) - target).abs(), weight), reduction)


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
    if input.ndim == 1:  # unbatched: one sample, a 0-d or one-element target
        loss = multi_margin_loss(input.unsqueeze(0), target.reshape(1), p, margin, weight, reduction)
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

