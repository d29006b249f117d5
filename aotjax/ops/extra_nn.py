"""The rest of `torch.nn.functional`'s ops: `bilinear`, `ctc_loss` (the forward recursion over time as one
`scan`, its derivative by differentiating through the loop), `pdist`, `channel_shuffle`, the deprecated
`upsample_nearest`/`upsample_bilinear`, `triplet_margin_with_distance_loss`, `multilabel_margin_loss`,
`max_unpool1d/2d/3d`, `affine_grid` and `grid_sample` (a gather at each corner of the cell): compositions of
existing ops, with PyTorch's arguments, defaults and errors.
"""
from __future__ import annotations

import math

import numpy as np

from aotjax.core.errors import DTypeError, ShapeError
from aotjax.core.source_info import where
from aotjax.ops._frontend import as_tensor
from aotjax.ops.control_flow.scan import scan
from aotjax.ops.creation import arange, full, tensor, zeros
from aotjax.ops.elementwise import where as select
from aotjax.ops.linalg import einsum, matmul
from aotjax.ops.losses import _norm_last, pairwise_distance
from aotjax.ops.nn import _check_reduction, _reduce
from aotjax.ops.promotion import category, default_int_dtype, is_float
from aotjax.ops.resampling import interpolate
from aotjax.ops.shape import cat, stack

__all__ = ["bilinear", "pdist", "channel_shuffle"]
FUNCTIONAL = __all__ + ["ctc_loss", "upsample_nearest", "upsample_bilinear", "triplet_margin_with_distance_loss",
                        "multilabel_margin_loss", "max_unpool1d", "max_unpool2d", "max_unpool3d", "affine_grid",
                        "grid_sample"]


# -- bilinear --------------------------------------------------------------------------------------------------------
def bilinear(input1, input2, weight, bias=None):
    """`y[..., o] = sum_ij input1[..., i] * weight[o, i, j] * input2[..., j] + bias[o]`, as
    `torch.nn.functional.bilinear` (leading dims of the inputs must agree).

    >>> aotjax.bilinear(aotjax.ones(2, 3), aotjax.ones(2, 2), aotjax.ones(4, 3, 2)).shape
    (2, 4)
    """
    x1, x2, w = as_tensor(input1), as_tensor(input2), as_tensor(weight)
    if w.ndim != 3:
        raise ShapeError(f"bilinear: weight must be 3-D [out_features, in1_features, in2_features], got shape "
                         f"{list(w.shape)}{where()}")
    if x1.ndim == 0 or x2.ndim == 0 or tuple(x1.shape[:-1]) != tuple(x2.shape[:-1]):
        raise ShapeError(f"bilinear: input1 and input2 must have the same leading dims, got shapes "
                         f"{list(x1.shape)} and {list(x2.shape)}{where()}")
    if (x1.shape[-1], x2.shape[-1]) != tuple(w.shape[1:]):
        raise ShapeError(f"bilinear: the last dims of input1 and input2 ({x1.shape[-1]}, {x2.shape[-1]}) must be "
                         f"weight's dims 1 and 2 ({w.shape[1]}, {w.shape[2]}){where()}")
    y = einsum("...i,oij,...j->...o", x1, w, x2)
    if bias is not None:
        y = y + as_tensor(bias)
    return y


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

    The derivative is the exact one of this function in `log_probs` (PyTorch's backward assumes `log_probs`
    came out of `log_softmax`; through a `log_softmax` the two agree).

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
    if zero_infinity:
        loss = select(loss.isinf(), 0.0, loss)
    if reduction == "mean":
        return (loss / tg_len.clamp(min=1).to(lp.dtype)).mean()
    return _reduce(loss, reduction)


def _shift(alpha, k, neg_inf):
    """`alpha` moved `k` states right along dim 1, -inf entering on the left."""
    return cat([neg_inf.expand(alpha.shape[0], k), alpha[:, :-k]], 1)


# -- distances -------------------------------------------------------------------------------------------------------
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
        m = a.amax(-1).detach()
        ties = select((a == m.unsqueeze(-1)) & (d != 0), a, 0.0).sum(-1)
        return m + (ties - ties.detach())
    s = (d * d).sum(-1) if p == 2 else (a ** p).sum(-1)
    nonzero = s > 0
    safe = select(nonzero, s, 1.0)
    return select(nonzero, safe.sqrt() if p == 2 else (safe.log() / p).exp(), 0.0)


def channel_shuffle(input, groups: int):
    """The channels (dim 1) of `[N, C, *]` split into `groups` groups and interleaved: `[N, g, C/g, *]` transposed
    to `[N, C/g, g, *]`, as `torch.nn.functional.channel_shuffle`.

    >>> aotjax.channel_shuffle(aotjax.arange(4.0).reshape(1, 4, 1), 2).flatten()
    tensor([0., 2., 1., 3.])
    """
    x, g = as_tensor(input), int(groups)
    if g <= 0:
        raise ValueError(f"channel_shuffle: groups must be positive, got {groups}{where()}")
    if x.ndim < 3 or x.shape[1] % g:
        raise ShapeError(f"channel_shuffle: expected an input of at least 3 dims [N, C, *] whose channels are "
                         f"divisible by groups={g}, got shape {list(x.shape)}{where()}")
    n, c, *rest = x.shape
    return x.reshape(n, g, c // g, *rest).transpose(1, 2).reshape(n, c, *rest)


# -- upsampling (PyTorch's deprecated names) ------------------------------------------------------------------------
def upsample_nearest(input, size=None, scale_factor=None):
    """`interpolate(input, size, scale_factor, mode='nearest')` (PyTorch's deprecated name).

    >>> aotjax.nn.functional.upsample_nearest(aotjax.tensor([[[1.0, 2.0]]]), scale_factor=2)
    tensor([[[1., 1., 2., 2.]]])
    """
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    """`interpolate(input, size, scale_factor, mode='bilinear', align_corners=True)` of a 4-D input (PyTorch's
    deprecated name).

    >>> aotjax.nn.functional.upsample_bilinear(aotjax.tensor([[[[0.0, 1.0]]]]), size=(1, 3))
    tensor([[[[0. , 0.5, 1. ]]]])
    """
    x = as_tensor(input)
    if x.ndim != 4:
        raise ShapeError(f"upsample_bilinear: expected a 4-D input [N, C, H, W], got shape {list(x.shape)}"
                         f"{where()}; use interpolate with mode='linear' or 'trilinear' for other ranks")
    return interpolate(x, size, scale_factor, mode="bilinear", align_corners=True)


# -- losses ----------------------------------------------------------------------------------------------------------
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
    if category(y.dtype) != 1:
        raise DTypeError(f"multilabel_margin_loss: target must hold class indices (an integer tensor), got "
                         f"{y.aval.str_short()}{where()}")
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


# -- max_unpool ------------------------------------------------------------------------------------------------------
def _tuple(v, n):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n


def _max_unpool(nd: int, input, indices, kernel_size, stride, padding, output_size):
    op = f"max_unpool{nd}d"
    x, idx = as_tensor(input), as_tensor(indices)
    if x.ndim not in (nd + 1, nd + 2):
        raise ShapeError(f"{op}: expected a {nd + 1}-D or {nd + 2}-D input, got shape {list(x.shape)}{where()}")
    if tuple(idx.shape) != tuple(x.shape):
        raise ShapeError(f"{op}: indices must have the input's shape {list(x.shape)}, got {list(idx.shape)}"
                         f"{where()}")
    if category(idx.dtype) != 1:
        raise DTypeError(f"{op}: indices must be an integer tensor, got {idx.aval.str_short()}{where()}")
    k = _tuple(kernel_size, nd)
    s = _tuple(stride if stride is not None else kernel_size, nd)
    p = _tuple(padding, nd)
    spatial = tuple(x.shape[-nd:])
    if output_size is None:
        out = tuple((i - 1) * st - 2 * pd + kk for i, st, pd, kk in zip(spatial, s, p, k))
    else:
        out = tuple(output_size)[-nd:]
        default = [(i - 1) * st - 2 * pd + kk for i, st, pd, kk in zip(spatial, s, p, k)]
        if len(out) != nd or any(not d - st < o < d + st for o, d, st in zip(out, default, s)):
            raise ShapeError(f"{op}: output_size {list(output_size)} must be {nd} sizes within a stride of the "
                             f"default {default}{where()}")
    lead = tuple(x.shape[:-nd])
    flat = x.reshape(*lead, -1)
    flat_idx = idx.reshape(*lead, -1).to(default_int_dtype())
    base = zeros(*lead, math.prod(out), dtype=x.dtype)
    res = base.scatter(len(lead), flat_idx, flat)
    # NOTE: overlapping windows repeat an index (with the same value); as in PyTorch, each entry's derivative is
    # the cotangent gathered at its index (the transpose of scatter-add), not only the last write's
    added = base.scatter_add(len(lead), flat_idx, flat)
    return (res.detach() + (added - added.detach())).reshape(*lead, *out)


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of `max_pool1d`: each value written at its `indices` (from `return_indices=True`) in a
    zero tensor of the pre-pooling size, as `torch.nn.functional.max_unpool1d`.

    >>> aotjax.nn.functional.max_unpool1d(aotjax.tensor([[2.0, 4.0]]), aotjax.tensor([[1, 2]]), 2)
    tensor([[0., 2., 4., 0.]])
    """
    return _max_unpool(1, input, indices, kernel_size, stride, padding, output_size)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """`max_unpool1d` over the last two dims (indices into each flattened `H * W` plane).

    >>> aotjax.nn.functional.max_unpool2d(aotjax.tensor([[[5.0]]]), aotjax.tensor([[[3]]]), 2)
    tensor([[[0., 0.],
             [0., 5.]]])
    """
    return _max_unpool(2, input, indices, kernel_size, stride, padding, output_size)


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """`max_unpool1d` over the last three dims (indices into each flattened `D * H * W` volume).

    >>> aotjax.nn.functional.max_unpool3d(aotjax.tensor([[[[5.0]]]]), aotjax.tensor([[[[7]]]]), 2).sum((-1, -2))
    tensor([[0., 5.]])
    """
    return _max_unpool(3, input, indices, kernel_size, stride, padding, output_size)


# -- affine_grid, grid_sample ----------------------------------------------------------------------------------------
def _base_coords(n: int, align_corners: bool) -> np.ndarray:
    """The normalized [-1, 1] coordinates of `n` pixels: their centers, or the corner ones at +-1 (`align_corners`)."""
    if align_corners:
        return np.linspace(-1.0, 1.0, n) if n > 1 else np.zeros(n)
    return (np.arange(n) * 2.0 + 1.0) / n - 1.0


def affine_grid(theta, size, align_corners=None):
    """The sampling grid of the affine maps `theta` (`[N, 2, 3]` for a `[N, C, H, W]` `size`, giving `[N, H, W, 2]`;
    `[N, 3, 4]` for `[N, C, D, H, W]`, giving `[N, D, H, W, 3]`), in `grid_sample`'s normalized (x, y[, z])
    coordinates, as `torch.nn.functional.affine_grid` (`align_corners` defaults to False).

    >>> F = aotjax.nn.functional
    >>> F.affine_grid(aotjax.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]]), (1, 1, 1, 2), align_corners=True)
    tensor([[[[-1.,  0.],
              [ 1.,  0.]]]])
    """
    theta = as_tensor(theta)
    size = tuple(int(s) for s in size)
    ac = bool(align_corners)
    if not is_float(theta.dtype):
        raise DTypeError(f"affine_grid: theta must be floating point, got {theta.aval.str_short()}{where()}")
    nd = len(size) - 2
    if nd not in (2, 3) or tuple(theta.shape) != (size[0], nd, nd + 1):
        raise ShapeError(f"affine_grid: expected theta [N, 2, 3] with a 4-D size or [N, 3, 4] with a 5-D size, got "
                         f"theta of shape {list(theta.shape)} and size {list(size)}{where()}")
    spatial = size[2:][::-1]  # x (W) first
    axes = np.meshgrid(*[_base_coords(s, ac) for s in spatial[::-1]], indexing="ij")[::-1]  # [x, y(, z)] each [D, H, W]
    base = np.stack([*axes, np.ones_like(axes[0])], -1).reshape(-1, nd + 1)  # [P, nd + 1]
    grid = matmul(tensor(base.astype(np.dtype(theta.dtype))), theta.transpose(1, 2))  # [N, P, nd]
    return grid.reshape(size[0], *size[2:], nd)


def _unnormalize(g, n: int, align_corners: bool):
    return (g + 1) / 2 * (n - 1) if align_corners else ((g + 1) * n - 1) / 2


def _reflect(c, lo2: float, hi2: float):
    """`c` reflected into `[lo2 / 2, hi2 / 2]` (torch's `reflect_coordinates`)."""
    if lo2 == hi2:
        return c * 0
    lo, span = lo2 / 2, (hi2 - lo2) / 2
    c = (c - lo).abs()
    flips = (c / span).floor()
    extra = c - flips * span
    return select(flips.remainder(2) == 0, extra + lo, span - extra + lo)


def _source(g, n: int, padding_mode: str, align_corners: bool):
    c = _unnormalize(g, n, align_corners)
    if padding_mode == "border":
        c = c.clamp(0, n - 1)
    elif padding_mode == "reflection":
        c = _reflect(c, 0, 2 * (n - 1)) if align_corners else _reflect(c, -1, 2 * n - 1)
        c = c.clamp(0, n - 1)
    return c


def grid_sample(input, grid, mode: str = "bilinear", padding_mode: str = "zeros", align_corners=None):
    """`input` `[N, C, H, W]` sampled at `grid` `[N, H_out, W_out, 2]` (normalized (x, y) in [-1, 1]), or `[N, C, D,
    H, W]` at `[N, D_out, H_out, W_out, 3]` ((x, y, z)), as `torch.nn.functional.grid_sample`: `mode`
    `'bilinear'` (trilinear for volumes) or `'nearest'`, `padding_mode` `'zeros'`, `'border'` or `'reflection'`,
    `align_corners` (default False).

    >>> F = aotjax.nn.functional
    >>> F.grid_sample(aotjax.tensor([[[[0.0, 10.0]]]]), aotjax.tensor([[[[0.0, 0.0]]]]), align_corners=True)
    tensor([[[[5.]]]])
    """
    x, g = as_tensor(input), as_tensor(grid)
    if mode not in ("bilinear", "nearest"):
        raise ValueError(f"grid_sample: mode must be 'bilinear' or 'nearest', got {mode!r}{where()}"
                         + ("; 'bicubic' is not supported" if mode == "bicubic" else ""))
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"grid_sample: padding_mode must be 'zeros', 'border' or 'reflection', got "
                         f"{padding_mode!r}{where()}")
    nd = x.ndim - 2
    if nd not in (2, 3) or g.ndim != x.ndim or g.shape[-1] != nd or g.shape[0] != x.shape[0]:
        raise ShapeError(f"grid_sample: expected input [N, C, H, W] with grid [N, H_out, W_out, 2], or input "
                         f"[N, C, D, H, W] with grid [N, D_out, H_out, W_out, 3], got {list(x.shape)} and "
                         f"{list(g.shape)}{where()}")
    if not is_float(x.dtype) or g.dtype != x.dtype:
        raise DTypeError(f"grid_sample: input and grid must be floating point of one dtype, got "
                         f"{x.aval.str_short()} and {g.aval.str_short()}{where()}")
    ac = bool(align_corners)
    N, C, *sizes = x.shape
    out = tuple(g.shape[1:-1])
    P = math.prod(out)
    strides = [math.prod(sizes[k + 1:]) for k in range(nd)]
    # the source position along each input dim (D, H, W order), from grid's (x, y, z) order
    src = [_source(g[..., nd - 1 - k], sizes[k], padding_mode, ac) for k in range(nd)]
    flat = x.reshape(N, C, math.prod(sizes))

    def at(pos):  # the input at integer positions `pos` (one [N, *out] per dim), 0 outside
        inside = None
        idx = 0
        for k, p in enumerate(pos):
            ok = (p >= 0) & (p <= sizes[k] - 1)
            inside = ok if inside is None else inside & ok
            idx = idx + p.clamp(0, sizes[k] - 1) * strides[k]
        idx = idx.to(default_int_dtype()).reshape(N, 1, P)
        vals = flat.gather(2, idx.expand(N, C, P)).reshape(N, C, *out)
        return select(inside.unsqueeze(1), vals, 0.0)

    if mode == "nearest":
        return at([c.round().detach() for c in src])
    lo = [c.floor().detach() for c in src]
    frac = [c - f for c, f in zip(src, lo)]
    total = None
    for corner in np.ndindex(*(2,) * nd):
        w = None
        for k, bit in enumerate(corner):
            wk = frac[k] if bit else 1 - frac[k]
            w = wk if w is None else w * wk
        term = at([f + bit for f, bit in zip(lo, corner)]) * w.unsqueeze(1)
        total = term if total is None else total + term
    return total
