"""Padding and resampling, as PyTorch's `F.pad` (constant, reflect, replicate, circular), `F.interpolate`
(nearest, nearest-exact, linear/bilinear/trilinear, bicubic, area; `align_corners`), `pixel_shuffle` and
`pixel_unshuffle`: compositions of existing ops (concatenation, `index_select` at a table of source positions,
and, for the interpolating modes, a product with the `[out, in]` matrix of interpolation weights along each dim).
"""
from __future__ import annotations

import math

import numpy as np

from aotjax.core.errors import ShapeError
from aotjax.core.source_info import where
from aotjax.ops._frontend import as_tensor
from aotjax.ops.creation import full, tensor
from aotjax.ops.indexing import index_select
from aotjax.ops.linalg import matmul
from aotjax.ops.pooling import adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d
from aotjax.ops.promotion import default_int_dtype, is_float
from aotjax.ops.shape import cat

__all__ = ["pixel_shuffle", "pixel_unshuffle"]
FUNCTIONAL = __all__ + ["pad", "interpolate", "upsample"]


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
