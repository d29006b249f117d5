"""Padding and resampling, as PyTorch's `F.pad` (constant, reflect, replicate, circular), `F.interpolate` (nearest,
nearest-exact, linear/bilinear/trilinear, bicubic, area; `align_corners`), `pixel_shuffle` and `pixel_unshuffle`,
`channel_shuffle`, the deprecated `upsample_nearest`/`upsample_bilinear`, `affine_grid` and `grid_sample` (a gather at
each corner of the cell), `constant_pad_nd`: compositions of existing ops (concatenation, `index_select` at a table of
source positions, and, for the interpolating modes, a product with the `[out, in]` matrix of interpolation weights
along each dim).
"""
from __future__ import annotations

import math

import numpy as np

from aotjax.core.errors import DTypeError, ShapeError
from aotjax.core.source_info import where
from aotjax.ops.base.data import as_tensor, tensor
from aotjax.ops.base.promotion import default_int_dtype, is_float
from aotjax.ops.creation.factories import full
from aotjax.ops.indexing.subscripts import index_select
from aotjax.ops.linalg.matmul import matmul
from aotjax.ops.math.elementwise import where as select
from aotjax.ops.nn.pooling import adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d
from aotjax.ops.shape.copies import cat

__all__ = ["constant_pad_nd", "channel_shuffle", "pixel_shuffle", "pixel_unshuffle"]
FUNCTIONAL = ["channel_shuffle", "pixel_shuffle", "pixel_unshuffle", "upsample_nearest", "upsample_bilinear",
              "affine_grid", "grid_sample", "pad", "interpolate", "upsample"]


# -- pad -----------------------------------------------------------------------------------------------------------
def _source_positions(mode: str, size: int, lo: int, hi: int) -> np.ndarray:
    """For each position of a dim padded by `lo` before and `hi` after, the input position it copies."""
    i = np.arange(-lo, size + hi)
    if mode == "reflect":
        period = 2 * (size - 1)
        i = np.abs(i) % period if period else np.zeros_like(i)
        return np.where(i >= size, period - i, i)
    if mode == "replicate":
        return np.clip(i, 0, size - 1)
    # circular: the kept part (cropped by a negative pad, as torch does first) wraps around
    start, kept = max(-lo, 0), size - max(-lo, 0) - max(-hi, 0)
    return start + (i + min(lo, 0)) % kept


def pad(input, pad, mode: str = "constant", value=None):
    """`input` padded: `pad` lists `(before, after)` sizes for the last dims, last dim first (`(left, right, top,
    bottom)` pads the last two), as `torch.nn.functional.pad`. `mode` `'constant'` fills with `value` (default 0;
    negative sizes crop), `'reflect'` mirrors without repeating the edge, `'replicate'` repeats the edge,
    `'circular'` wraps around.

    >>> import aotjax.nn.functional as F
    >>> F.pad(aotjax.tensor([[1.0, 2.0, 3.0]]), (2, 1), mode="reflect")
    tensor([[3., 2., 1., 2., 3., 2.]])
    >>> F.pad(aotjax.tensor([[1, 2]]), (1, 1), value=9)
    tensor([[9, 1, 2, 9]])
    """
    x = as_tensor(input)
    pads = tuple(int(p) for p in pad)
    if len(pads) % 2 or len(pads) // 2 > x.ndim:
        raise ValueError(f"pad: expected an even number of padding sizes, at most 2 per dim of the {x.ndim}-D "
                         f"input, got {list(pads)}{where()}")
    if mode not in ("constant", "reflect", "replicate", "circular"):
        raise NotImplementedError(f"pad: mode must be 'constant', 'reflect', 'replicate' or 'circular', got "
                                  f"{mode!r}{where()}")
    if mode != "constant" and value not in (None, 0):
        raise ValueError(f"pad: padding mode {mode!r} does not take a value (got {value!r}){where()}")
    for k in range(len(pads) // 2):
        dim, (lo, hi) = x.ndim - 1 - k, pads[2 * k:2 * k + 2]
        x = _pad_constant(x, dim, lo, hi, 0 if value is None else value) if mode == "constant" else \
            _pad_copying(x, mode, dim, lo, hi)
    return x


def _pad_constant(x, dim: int, lo: int, hi: int, value):
    size = x.shape[dim]
    if size + lo + hi < 0:
        raise ShapeError(f"pad: padding ({lo}, {hi}) leaves a negative size for dim {dim} of size {size}{where()}")
    x = x.narrow(dim, max(-lo, 0), max(size + min(lo, 0) + min(hi, 0), 0))
    parts = [full((*x.shape[:dim], w, *x.shape[dim + 1:]), value, dtype=x.dtype) if w > 0 else None
             for w in (lo, hi)]
    kept = [t for t in (parts[0], x, parts[1]) if t is not None]
    return cat(kept, dim) if len(kept) > 1 else x


def _pad_copying(x, mode: str, dim: int, lo: int, hi: int):
    size = x.shape[dim]
    limit = size - 1 if mode == "reflect" else size  # NOTE: replicate takes any size, as in torch (negative crops)
    if mode != "replicate" and (max(lo, hi) > limit or min(lo, hi) < 0 and mode != "circular"):
        raise ValueError(f"pad: {mode} padding ({lo}, {hi}) of a dim of size {size} must be non-negative and at most "
                         f"{limit}{where()}")
    return index_select(x, dim, tensor(_source_positions(mode, size, lo, hi), dtype=default_int_dtype()))


# -- interpolate ---------------------------------------------------------------------------------------------------
_MODES = {"nearest": None, "nearest-exact": None, "area": None, "linear": 1, "bilinear": 2, "bicubic": 2,
          "trilinear": 3}


def _source_coordinate(out: int, size: int, scale, align_corners: bool, cubic: bool) -> np.ndarray:
    o = np.arange(out, dtype=np.float64)
    if align_corners:
        return o * ((size - 1) / (out - 1) if out > 1 else 0.0)
    ratio = 1.0 / scale if scale is not None and scale > 0 else size / out
    src = (o + 0.5) * ratio - 0.5
    return src if cubic else np.maximum(src, 0.0)  # NOTE: PyTorch clamps the linear modes' source at 0


def _cubic(t: np.ndarray) -> list[np.ndarray]:
    a = -0.75  # PyTorch's (and Keys') cubic convolution coefficient
    def near(s):
        return ((a + 2) * s - (a + 3)) * s * s + 1

    def far(s):
        return ((a * s - 5 * a) * s + 8 * a) * s - 4 * a
    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _weights(mode: str, out: int, size: int, scale, align_corners: bool) -> np.ndarray:
    """The `[out, size]` matrix of interpolation weights along one dim."""
    cubic = mode == "bicubic"
    src = _source_coordinate(out, size, scale, align_corners, cubic)
    i0 = np.floor(src).astype(np.int64)
    t = src - i0
    matrix = np.zeros((out, size))
    rows = np.arange(out)
    taps = [(i0 - 1 + j, w) for j, w in enumerate(_cubic(t))] if cubic else [(i0, 1 - t), (i0 + 1, t)]
    for index, w in taps:
        np.add.at(matrix, (rows, np.clip(index, 0, size - 1)), w)
    return matrix


def _nearest(mode: str, out: int, size: int, scale) -> np.ndarray:
    ratio = 1.0 / scale if scale is not None and scale > 0 else size / out
    o = np.arange(out, dtype=np.float64)
    src = np.floor((o + 0.5) * ratio) if mode == "nearest-exact" else np.floor(o.astype(np.float32) * np.float32(ratio))
    return np.minimum(src.astype(np.int64), size - 1)


def _sizes(x, n: int, size, scale_factor, recompute_scale_factor):
    sizes, scales = _requested_sizes(x, n, size, scale_factor, recompute_scale_factor)
    if any(s <= 0 for s in sizes + tuple(x.shape[2:])):
        raise ValueError(f"interpolate: input and output sizes should be greater than 0, but got input "
                         f"{list(x.shape[2:])} and output {list(sizes)}{where()}; pass a larger size or scale_factor")
    return sizes, scales


def _requested_sizes(x, n: int, size, scale_factor, recompute_scale_factor):
    spatial = x.shape[2:]
    if (size is None) == (scale_factor is None):
        raise ValueError(f"interpolate: give exactly one of size and scale_factor{where()}")
    if size is not None:
        sizes = tuple(size) if isinstance(size, (tuple, list)) else (size,) * n
        if len(sizes) != n:
            raise ValueError(f"interpolate: expected size to have {n} entries for a {x.ndim}-D input, got "
                             f"{size!r}{where()}")
        return tuple(int(s) for s in sizes), (None,) * n
    scales = tuple(scale_factor) if isinstance(scale_factor, (tuple, list)) else (scale_factor,) * n
    if len(scales) != n:
        raise ValueError(f"interpolate: expected scale_factor to have {n} entries for a {x.ndim}-D input, got "
                         f"{scale_factor!r}{where()}")
    sizes = tuple(int(math.floor(s * f)) for s, f in zip(spatial, scales))
    return sizes, (None,) * n if recompute_scale_factor else scales


def interpolate(input, size=None, scale_factor=None, mode: str = "nearest", align_corners=None,
                recompute_scale_factor=None, antialias: bool = False):
    """`input` `[N, C, *spatial]` resampled to `size` (or `spatial * scale_factor`), as
    `torch.nn.functional.interpolate`: `mode` `'nearest'`, `'nearest-exact'`, `'linear'` (3-D input),
    `'bilinear'`/`'bicubic'` (4-D), `'trilinear'` (5-D) or `'area'` (adaptive average pooling).

    >>> import aotjax.nn.functional as F
    >>> F.interpolate(aotjax.tensor([[[1.0, 2.0]]]), scale_factor=2, mode="nearest")
    tensor([[[1., 1., 2., 2.]]])
    >>> F.interpolate(aotjax.tensor([[[1.0, 2.0]]]), size=3, mode="linear", align_corners=True)
    tensor([[[1. , 1.5, 2. ]]])
    """
    x = as_tensor(input)
    if mode not in _MODES:
        raise NotImplementedError(f"interpolate: mode must be one of {sorted(_MODES)}, got {mode!r}{where()}")
    n = x.ndim - 2
    if n not in (1, 2, 3) or _MODES[mode] not in (None, n):
        raise NotImplementedError(f"interpolate: mode {mode!r} does not take a {x.ndim}-D input{where()}")
    if align_corners is not None and _MODES[mode] is None:
        raise ValueError(f"interpolate: align_corners applies only to the interpolating modes, not {mode!r}{where()}")
    if antialias:
        raise NotImplementedError(f"interpolate: antialias=True is not supported{where()}")
    sizes, scales = _sizes(x, n, size, scale_factor, recompute_scale_factor)
    if mode == "area":
        return (adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d)[n - 1](x, sizes)
    for d, (out, scale) in enumerate(zip(sizes, scales)):
        dim = 2 + d
        if _MODES[mode] is None:
            index = tensor(_nearest(mode, out, x.shape[dim], scale), dtype=default_int_dtype())
            x = index_select(x, dim, index)
        else:
            if not is_float(x.dtype):
                raise NotImplementedError(f"interpolate: mode {mode!r} needs a floating-point input, got "
                                          f"{x.aval.str_short()}{where()}")
            weights = tensor(_weights(mode, out, x.shape[dim], scale, bool(align_corners)).T, dtype=x.dtype)
            x = matmul(x.movedim(dim, -1), weights).movedim(-1, dim)
    return x


def upsample(input, size=None, scale_factor=None, mode: str = "nearest", align_corners=None):
    """`interpolate` (PyTorch's deprecated name).

    >>> import aotjax.nn.functional as F
    >>> F.upsample(aotjax.ones(1, 1, 2), scale_factor=2).shape
    (1, 1, 4)
    """
    return interpolate(input, size, scale_factor, mode, align_corners)


# -- pixel shuffle -------------------------------------------------------------------------------------------------
def pixel_shuffle(input, upscale_factor: int):
    """`[..., C * r * r, H, W]` rearranged to `[..., C, H * r, W * r]`, as `torch.nn.functional.pixel_shuffle`.

    >>> aotjax.pixel_shuffle(aotjax.arange(4.0).reshape(1, 4, 1, 1), 2)
    tensor([[[[0., 1.],
              [2., 3.]]]])
    """
    x, r = as_tensor(input), int(upscale_factor)
    if x.ndim < 3 or r < 1 or x.shape[-3] % (r * r):
        raise ShapeError(f"pixel_shuffle: expected an input of at least 3 dims whose channels are divisible by "
                         f"upscale_factor ** 2 = {r * r}, got shape {list(x.shape)}{where()}")
    *lead, c, h, w = x.shape
    k = len(lead)
    y = x.reshape(*lead, c // (r * r), r, r, h, w).permute(*range(k), k, k + 3, k + 1, k + 4, k + 2)
    return y.reshape(*lead, c // (r * r), h * r, w * r)


def pixel_unshuffle(input, downscale_factor: int):
    """`[..., C, H * r, W * r]` rearranged to `[..., C * r * r, H, W]` (the inverse of `pixel_shuffle`).

    >>> aotjax.pixel_unshuffle(aotjax.arange(4.0).reshape(1, 1, 2, 2), 2).flatten()
    tensor([0., 1., 2., 3.])
    """
    x, r = as_tensor(input), int(downscale_factor)
    if x.ndim < 3 or r < 1 or x.shape[-1] % r or x.shape[-2] % r:
        raise ShapeError(f"pixel_unshuffle: expected an input of at least 3 dims whose height and width are "
                         f"divisible by downscale_factor = {r}, got shape {list(x.shape)}{where()}")
    *lead, c, h, w = x.shape
    k = len(lead)
    y = x.reshape(*lead, c, h // r, r, w // r, r).permute(*range(k), k, k + 2, k + 4, k + 1, k + 3)
    return y.reshape(*lead, c * r * r, h // r, w // r)


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


_pad = pad  # NOTE: `constant_pad_nd`'s argument `pad` (torch's name) hides the function there


def constant_pad_nd(input, pad, value=0):
    """`input` padded with `value` (`torch.nn.functional.pad` with `mode='constant'`; negative sizes crop).

    >>> aotjax.constant_pad_nd(aotjax.tensor([1.0, 2.0]), (1, 0), 9.0)
    tensor([9., 1., 2.])
    """
    return _pad(input, pad, "constant", value)
