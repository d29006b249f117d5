"""Pooling, as PyTorch's `max_pool1d/2d/3d`, `avg_pool1d/2d/3d`, `adaptive_avg_pool*`, `adaptive_max_pool*`,
`unfold`/`fold` (im2col and its transpose), `max_unpool1d/2d/3d` (a scatter of the values to their indices),
`fractional_max_pool2d/3d` (windows at pseudo-random starts, gathered by their flat positions) and `lp_pool1d/2d/3d`
(an average pool of `x ** p`, as PyTorch's), written as compositions, so every transform handles them with no rules
of their own.

Every op here reads windows the same way: along each pooled dim, the (padded) input is gathered at a table of
positions `[out, k]` (`index_select`, whose transpose is `index_add`), giving `[..., out_1, ..., out_n, k_1 * ...
* k_n]`; the windows are then reduced. Max pooling takes the first maximum's position (`argmax`) and gathers the
value there, so its gradient goes to that one element, as PyTorch's does; its indices are flat positions within
each input plane, as PyTorch's. Fractional max pooling's windows start at positions computed from random samples
(tensors), so it gathers each plane at flat positions computed as tensors instead of tables.
"""
from __future__ import annotations

import math

import numpy as np

from aotjax.core.errors import DTypeError, ShapeError
from aotjax.core.source_info import where
from aotjax.ops.base.casts import convert
from aotjax.ops.base.data import as_tensor, tensor
from aotjax.ops.base.promotion import category, default_int_dtype, is_float
from aotjax.ops.creation.factories import full, zeros
from aotjax.ops.indexing.subscripts import gather, index_add, index_select
from aotjax.ops.math.elementwise import where as select
from aotjax.ops.nn.conv import _tuple
from aotjax.ops.random.generator import draw_key
from aotjax.ops.random.keys import uniform
from aotjax.ops.shape.copies import cat

__all__ = ["max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "adaptive_avg_pool1d", "adaptive_max_pool1d"]
FUNCTIONAL = __all__ + ["max_unpool1d", "max_unpool2d", "max_unpool3d", "avg_pool2d", "avg_pool3d",
                        "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool2d", "adaptive_max_pool3d",
                        "unfold", "fold", "fractional_max_pool2d", "fractional_max_pool3d", "lp_pool1d", "lp_pool2d",
                        "lp_pool3d"]


# -- windows -------------------------------------------------------------------------------------------------------
def _windows(x, tables: list[np.ndarray]):
    """`x`'s last `len(tables)` dims gathered at `tables[d]` (positions `[out_d, k_d]`): `[..., out..., k...]`
    with the window dims flattened into one last dim."""
    n, lead = len(tables), x.ndim - len(tables)
    for d, table in enumerate(tables):
        dim = lead + 2 * d
        index = tensor(table.reshape(-1), dtype=default_int_dtype())
        x = index_select(x, dim, index)
        x = x.reshape(*x.shape[:dim], *table.shape, *x.shape[dim + 1:])
    perm = list(range(lead)) + [lead + 2 * d for d in range(n)] + [lead + 2 * d + 1 for d in range(n)]
    x = x.permute(*perm)
    # NOTE: the window size spelled out, not -1: a batch of 0 leaves no elements to infer it from
    return x.reshape(*x.shape[:lead + n], math.prod(t.shape[1] for t in tables))


def _combine(tables: list[np.ndarray], fn) -> np.ndarray:
    """Per-dim tables `[out_d, k_d]` combined elementwise by `fn(d, table)` products/sums into `[out..., k...]`
    flattened to `[out..., prod k]` (as `_windows` lays windows out)."""
    n = len(tables)
    total = None
    for d, table in enumerate(tables):
        shape = [1] * (2 * n)
        shape[d], shape[n + d] = table.shape
        term = fn(d, table).reshape(shape)
        total = term if total is None else total + term
    outs = tuple(t.shape[0] for t in tables)
    return np.broadcast_to(total, outs + tuple(t.shape[1] for t in tables)).reshape(*outs, -1)


def _pool_size(op: str, size: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
    out = (size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= size + p:  # NOTE: the last window must start inside the input or left padding
        out -= 1
    if out < 1:
        raise ShapeError(f"{op}: the output size {out} is too small (input size {size}, kernel {k}, stride {s}, "
                         f"padding {p}, dilation {d}){where()}")
    return out


def _pool_setup(op: str, x, n: int, kernel_size, stride, padding, dilation, ceil_mode):
    x = as_tensor(x)
    if x.ndim not in (n + 1, n + 2) or any(s == 0 for s in x.shape[x.ndim - n - 1:]):
        raise ShapeError(f"{op}: expected a {n + 1}-D or {n + 2}-D input with non-zero spatial and channel sizes "
                         f"(the batch may be 0), got shape {list(x.shape)}{where()}")
    kernel = _tuple(op, "kernel_size", kernel_size, n)
    stride = kernel if stride is None or stride == [] or stride == () else _tuple(op, "stride", stride, n)
    padding, dilation = _tuple(op, "padding", padding, n), _tuple(op, "dilation", dilation, n)
    if any(k < 1 for k in kernel) or any(s < 1 for s in stride) or any(d < 1 for d in dilation):
        raise ValueError(f"{op}: kernel_size, stride and dilation must be positive, got {kernel}, {stride}, "
                         f"{dilation}{where()}")
    if any(p < 0 or p > k // 2 for p, k in zip(padding, kernel)):
        raise ValueError(f"{op}: padding {padding} should be non-negative and at most half the kernel size "
                         f"{kernel}{where()}")
    sizes = x.shape[x.ndim - n:]
    outs = [_pool_size(op, *args, ceil_mode) for args in zip(sizes, kernel, stride, padding, dilation)]
    tables = [np.arange(o)[:, None] * s + np.arange(k)[None, :] * d
              for o, k, s, d in zip(outs, kernel, stride, dilation)]  # positions in the padded input
    return x, kernel, stride, padding, tables


def _pad_for(x, tables, padding, value):
    """`x` padded by `padding` before each pooled dim, and after as far as the last window reaches, with `value`."""
    n = len(tables)
    for d, (table, p) in enumerate(zip(tables, padding)):
        dim = x.ndim - n + d
        after = max(int(table.max()) + 1 - (x.shape[dim] + p), 0)
        parts = [full((*x.shape[:dim], w, *x.shape[dim + 1:]), value, dtype=x.dtype) for w in (p, after)]
        if p or after:
            x = cat([t for t, w in zip((parts[0], x, parts[1]), (p, 1, after)) if w], dim)
    return x


def _lowest(dtype):
    return -math.inf if is_float(dtype) else np.iinfo(dtype).min


def _max_windows(x, windows, positions, return_indices: bool):
    """The maximum of each window (the first, where several are equal) and, if asked, its flat input position."""
    arg = windows.argmax(-1, keepdim=True)
    values = gather(windows, -1, arg).squeeze(-1)
    if not return_indices:
        return values
    flat = tensor(positions, dtype=default_int_dtype()).expand(*windows.shape)
    return values, gather(flat, -1, arg).squeeze(-1)


def _flat_positions(x, n, tables, padding):
    strides = np.cumprod((x.shape[x.ndim - n:] + (1,))[::-1])[::-1][1:]
    return _combine(tables, lambda d, t: (t - padding[d]) * int(strides[d]))


def _max_pool(op: str, n: int, x, kernel_size, stride, padding, dilation, ceil_mode, return_indices):
    x, kernel, stride, padding, tables = _pool_setup(op, x, n, kernel_size, stride, padding, dilation, ceil_mode)
    windows = _windows(_pad_for(x, tables, padding, _lowest(x.dtype)), tables)
    positions = _flat_positions(x, n, tables, padding) if return_indices else None
    return _max_windows(x, windows, positions, return_indices)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
               return_indices: bool = False):
    """The maximum over each window of `kernel_size` along the last dim of `input` `[N, C, L]` (or `[C, L]`), as
    `torch.nn.functional.max_pool1d`; `stride` defaults to `kernel_size`; padding counts as `-inf`. With
    `return_indices`, also each maximum's position in its input row.

    >>> import aotjax.nn.functional as F
    >>> F.max_pool1d(aotjax.tensor([[[1.0, 3.0, 2.0, 5.0, 4.0]]]), 2, return_indices=True)
    (tensor([[[3., 5.]]]), tensor([[[1, 3]]]))
    """
    return _max_pool("max_pool1d", 1, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
               return_indices: bool = False):
    """2-D max pooling of `input` `[N, C, H, W]` (or `[C, H, W]`), as `torch.nn.functional.max_pool2d`; indices
    are flat positions `h * W + w` within each input plane.

    >>> import aotjax.nn.functional as F
    >>> F.max_pool2d(aotjax.arange(16.0).reshape(1, 1, 4, 4), 2)
    tensor([[[[ 5.,  7.],
              [13., 15.]]]])
    """
    return _max_pool("max_pool2d", 2, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
               return_indices: bool = False):
    """3-D max pooling of `input` `[N, C, D, H, W]` (or `[C, D, H, W]`), as `torch.nn.functional.max_pool3d`.

    >>> import aotjax.nn.functional as F
    >>> F.max_pool3d(aotjax.arange(8.0).reshape(1, 1, 2, 2, 2), 2, return_indices=True)
    (tensor([[[[[7.]]]]]), tensor([[[[[7]]]]]))
    """
    return _max_pool("max_pool3d", 3, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def _avg_divisor(x, n, tables, kernel, stride, padding, count_include_pad):
    """PyTorch's divisor per output: the window's size within the padded input (`count_include_pad`) or within
    the input, never counting what `ceil_mode` adds past the padding."""
    counts = []
    for d, (table, k, s, p) in enumerate(zip(tables, kernel, stride, padding)):
        size = x.shape[x.ndim - n + d]
        start = np.arange(table.shape[0]) * s - p
        end = np.minimum(start + k, size + p)
        if not count_include_pad:
            start, end = np.maximum(start, 0), np.minimum(end, size)
        counts.append(end - start)
    total = counts[0]
    for c in counts[1:]:
        total = np.multiply.outer(total, c)
    return total


def _avg_pool(op: str, n: int, x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    x, kernel, stride, padding, tables = _pool_setup(op, x, n, kernel_size, stride, padding, 1, ceil_mode)
    integer = np.dtype(x.dtype) == default_int_dtype()  # NOTE: torch's CPU kernels take int64, no other integers
    if not is_float(x.dtype) and not integer:
        raise DTypeError(f"{op}: expected a floating-point or {default_int_dtype().name} (int64) input, as torch's "
                         f"CPU kernels, got {x.aval.str_short()}{where()}; convert it first, e.g. `x.float()`")
    if divisor_override is not None and divisor_override == 0:
        raise ValueError(f"{op}: divisor_override must not be zero{where()}")
    total = _windows(_pad_for(x, tables, padding, 0), tables).sum(-1)
    divisor = divisor_override if divisor_override is not None else \
        _avg_divisor(x, n, tables, kernel, stride, padding, count_include_pad)
    if integer:  # NOTE: an integer mean is the sum divided by the count, truncated toward zero, as torch's
        return total.div(tensor(divisor, dtype=x.dtype), rounding_mode="trunc")
    if divisor_override is not None:
        return total / divisor_override
    return total / tensor(divisor.astype(np.float64), dtype=x.dtype)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode: bool = False, count_include_pad: bool = True):
    """The mean over each window of `kernel_size` along the last dim of `input` `[N, C, L]`, as
    `torch.nn.functional.avg_pool1d` (padding counts as zeros in the mean when `count_include_pad`).

    >>> import aotjax.nn.functional as F
    >>> F.avg_pool1d(aotjax.tensor([[[1.0, 3.0, 2.0, 6.0]]]), 2)
    tensor([[[2., 4.]]])
    """
    return _avg_pool("avg_pool1d", 1, input, kernel_size, stride, padding, ceil_mode, count_include_pad, None)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override=None):
    """2-D average pooling of `input` `[N, C, H, W]` (or `[C, H, W]`), as `torch.nn.functional.avg_pool2d`;
    `divisor_override` replaces each window's size as the divisor.

    >>> import aotjax.nn.functional as F
    >>> F.avg_pool2d(aotjax.ones(1, 1, 3, 3), 2, padding=1, count_include_pad=False)
    tensor([[[[1., 1.],
              [1., 1.]]]])
    """
    return _avg_pool("avg_pool2d", 2, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override)


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override=None):
    """3-D average pooling of `input` `[N, C, D, H, W]` (or `[C, D, H, W]`), as `torch.nn.functional.avg_pool3d`.

    >>> import aotjax.nn.functional as F
    >>> F.avg_pool3d(aotjax.ones(1, 1, 2, 2, 2), 2)
    tensor([[[[[1.]]]]])
    """
    return _avg_pool("avg_pool3d", 3, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override)


# -- adaptive pooling ----------------------------------------------------------------------------------------------
def _adaptive_setup(op: str, x, n: int, output_size):
    x = as_tensor(x)
    if x.ndim not in (n + 1, n + 2) or any(s == 0 for s in x.shape[x.ndim - n:]):
        raise ShapeError(f"{op}: expected a {n + 1}-D or {n + 2}-D input with non-zero spatial sizes, got shape "
                         f"{list(x.shape)}{where()}")
    sizes = x.shape[x.ndim - n:]
    sizes_out = output_size if isinstance(output_size, (tuple, list)) else (output_size,) * n
    if len(sizes_out) != n:
        raise ShapeError(f"{op}: expected output_size to be an int or a tuple of {n}, got {output_size!r}{where()}")
    outs = [size if o is None else int(o) for o, size in zip(sizes_out, sizes)]  # NOTE: None keeps the input's size
    starts = [(np.arange(o) * size) // o for o, size in zip(outs, sizes)]
    ends = [-((-(np.arange(o) + 1) * size) // o) for o, size in zip(outs, sizes)]
    lengths = [e - s for s, e in zip(starts, ends)]
    # NOTE: windows differ in length: each is read at its longest length, the positions past its end repeating
    # its last (a repeat changes no maximum; means weigh them out)
    tables = [np.minimum(s[:, None] + np.arange(int(ln.max()))[None, :], e[:, None] - 1)
              for s, e, ln in zip(starts, ends, lengths)]
    return x, tables, lengths


def _adaptive_avg(op: str, n: int, x, output_size):
    x, tables, lengths = _adaptive_setup(op, x, n, output_size)
    if not is_float(x.dtype):
        raise DTypeError(f"{op}: expected a floating-point input, got {x.aval.str_short()}{where()}")
    valid = np.exp(_combine(tables, lambda d, t: np.where(
        np.arange(t.shape[1])[None, :] < lengths[d][:, None], 0.0, -np.inf)))
    total = (_windows(x, tables) * tensor(valid, dtype=x.dtype)).sum(-1)
    return total / tensor(valid.sum(-1), dtype=x.dtype)  # NOTE: a sum then a division, as PyTorch computes it


def _adaptive_max(op: str, n: int, x, output_size, return_indices):
    x, tables, _ = _adaptive_setup(op, x, n, output_size)
    positions = _flat_positions(x, n, tables, (0,) * n) if return_indices else None
    return _max_windows(x, _windows(x, tables), positions, return_indices)


def adaptive_avg_pool1d(input, output_size):
    """Mean pooling to `output_size` along the last dim: output `i` averages input `[floor(i * L / out),
    ceil((i + 1) * L / out))`, as `torch.nn.functional.adaptive_avg_pool1d`.

    >>> aotjax.adaptive_avg_pool1d(aotjax.tensor([[[1.0, 2.0, 3.0, 4.0, 5.0]]]), 2)
    tensor([[[2., 4.]]])
    """
    return _adaptive_avg("adaptive_avg_pool1d", 1, input, output_size)


def adaptive_avg_pool2d(input, output_size):
    """Mean pooling of `input` `[N, C, H, W]` to `output_size` (an int, or a pair whose None entries keep the
    input's size), as `torch.nn.functional.adaptive_avg_pool2d`.

    >>> import aotjax.nn.functional as F
    >>> F.adaptive_avg_pool2d(aotjax.ones(1, 2, 5, 7), (2, None)).shape
    (1, 2, 2, 7)
    """
    return _adaptive_avg("adaptive_avg_pool2d", 2, input, output_size)


def adaptive_avg_pool3d(input, output_size):
    """Mean pooling of `input` `[N, C, D, H, W]` to `output_size`, as `torch.nn.functional.adaptive_avg_pool3d`.

    >>> import aotjax.nn.functional as F
    >>> F.adaptive_avg_pool3d(aotjax.ones(1, 1, 3, 3, 3), 1)
    tensor([[[[[1.]]]]])
    """
    return _adaptive_avg("adaptive_avg_pool3d", 3, input, output_size)


def adaptive_max_pool1d(input, output_size, return_indices: bool = False):
    """Max pooling to `output_size` along the last dim (windows as `adaptive_avg_pool1d`'s), as
    `torch.nn.functional.adaptive_max_pool1d`.

    >>> aotjax.adaptive_max_pool1d(aotjax.tensor([[[1.0, 5.0, 3.0, 4.0, 2.0]]]), 2, return_indices=True)
    (tensor([[[5., 4.]]]), tensor([[[1, 3]]]))
    """
    return _adaptive_max("adaptive_max_pool1d", 1, input, output_size, return_indices)


def adaptive_max_pool2d(input, output_size, return_indices: bool = False):
    """Max pooling of `input` `[N, C, H, W]` to `output_size`, as `torch.nn.functional.adaptive_max_pool2d`.

    >>> import aotjax.nn.functional as F
    >>> F.adaptive_max_pool2d(aotjax.arange(9.0).reshape(1, 1, 3, 3), 1)
    tensor([[[[8.]]]])
    """
    return _adaptive_max("adaptive_max_pool2d", 2, input, output_size, return_indices)


def adaptive_max_pool3d(input, output_size, return_indices: bool = False):
    """Max pooling of `input` `[N, C, D, H, W]` to `output_size`, as `torch.nn.functional.adaptive_max_pool3d`.

    >>> import aotjax.nn.functional as F
    >>> F.adaptive_max_pool3d(aotjax.ones(1, 1, 4, 4, 4), 2).shape
    (1, 1, 2, 2, 2)
    """
    return _adaptive_max("adaptive_max_pool3d", 3, input, output_size, return_indices)


# -- fractional max pooling ----------------------------------------------------------------------------------------
def _fractional_starts(u, size: int, out: int, k: int):
    """The windows' starts `[..., out]` along a dim for the samples `u` `[...]`, as torch draws them: `int((i + u)
    * alpha) - int(u * alpha)` with `alpha = (size - k) / (out - 1)`, the last window flush with the end."""
    last = full((*u.shape, 1), size - k, dtype=default_int_dtype())
    if out == 1:
        return last
    # NOTE: alpha and the products in the samples' dtype, as torch computes them, so that the windows are torch's
    alpha = float(np.array(size - k, u.dtype) / np.array(out - 1, u.dtype))
    steps = (tensor(np.arange(out - 1), dtype=u.dtype) + u.unsqueeze(-1)) * alpha
    starts = convert(steps, default_int_dtype()) - convert(u * alpha, default_int_dtype()).unsqueeze(-1)
    return cat([starts, last], -1)


def _fractional_sizes(op: str, n: int, sizes, kernel, output_size, output_ratio):
    if output_size is None and output_ratio is None:
        raise ValueError(f"{op} requires specifying either an output_size or an output_ratio{where()}")
    if output_size is None:
        ratio = tuple(output_ratio) if isinstance(output_ratio, (tuple, list)) else (output_ratio,) * n
        ratio = ratio * n if len(ratio) == 1 else ratio
        if len(ratio) != n:
            raise ValueError(f"{op}: expected output_ratio to be a number or a tuple of {n}, got {output_ratio!r}"
                             f"{where()}")
        output_size = tuple(int(s * r) for s, r in zip(sizes, ratio))
    outs = _tuple(op, "output_size", output_size, n)
    for name, size, o, k in zip(("time", "height", "width")[3 - n:], sizes, outs, kernel):
        # NOTE: torch's bound: the windows fit in the input (strictly, in 3-D)
        if o < 1 or k < 1 or o + k - 1 > size - (n == 3):
            raise ValueError(f"{op}: pool {name} {k} too large relative to input {name} {size} for output size {o}"
                             f"{where()}; use a smaller kernel_size or output_size")
    return outs


def _fractional_samples(op: str, n: int, x, samples, key, generator):
    """The samples `[N, C, n]`: `_random_samples` (its first `N` rows) or uniform draws from `key`/`generator`."""
    if samples is None:
        return uniform(draw_key(op, generator, key), tuple(x.shape[:2]) + (n,), x.dtype)
    samples = as_tensor(samples)
    if samples.ndim != 3 or samples.shape[0] < x.shape[0] or samples.shape[1:] != (x.shape[1], n):
        raise ShapeError(f"{op}: expected _random_samples of shape [>= {x.shape[0]}, {x.shape[1]}, {n}], got "
                         f"{list(samples.shape)}{where()}")
    if samples.dtype != x.dtype:
        raise DTypeError(f"{op}: expected _random_samples of the input's dtype {x.dtype.name}, got "
                         f"{samples.dtype.name}{where()}")
    return samples[:x.shape[0]]


def _fractional_max_pool(op: str, n: int, x, kernel_size, output_size, output_ratio, return_indices, samples, key,
                         generator):
    x = as_tensor(x)
    if x.ndim not in (n + 1, n + 2) or any(s == 0 for s in x.shape[x.ndim - n - 1:]):
        raise ShapeError(f"{op}: expected a {n + 1}-D or {n + 2}-D input with non-zero spatial and channel sizes "
                         f"(the batch may be 0), got shape {list(x.shape)}{where()}")
    if not is_float(x.dtype):
        raise DTypeError(f"{op}: expected a floating-point input, got {x.aval.str_short()}{where()}")
    batched = x.ndim == n + 2
    x = x if batched else x.unsqueeze(0)
    sizes, kernel = tuple(x.shape[2:]), _tuple(op, "kernel_size", kernel_size, n)
    outs = _fractional_sizes(op, n, sizes, kernel, output_size, output_ratio)
    u = _fractional_samples(op, n, x, samples, key, generator)
    which = (1, 0) if n == 2 else (0, 1, 2)  # NOTE: torch's order of the samples: (w, h) in 2-D, (t, h, w) in 3-D
    strides = np.cumprod((sizes + (1,))[::-1])[::-1][1:]
    index = None  # the flat position in its plane of each window element: [N, C, out..., k...]
    for d in range(n):
        start = _fractional_starts(u[..., which[d]], sizes[d], outs[d], kernel[d])
        pos = (start.unsqueeze(-1) + tensor(np.arange(kernel[d]), dtype=default_int_dtype())) * int(strides[d])
        shape = [1] * (2 * n)
        shape[d], shape[n + d] = outs[d], kernel[d]
        pos = pos.reshape(*x.shape[:2], *shape)
        index = pos if index is None else index + pos
    index = index.expand(*x.shape[:2], *outs, *kernel).reshape(*x.shape[:2], *outs, math.prod(kernel))
    flat = x.reshape(*x.shape[:2], math.prod(sizes))  # NOTE: no -1 here or below: the batch may be 0
    windows = gather(flat, -1, index.reshape(*x.shape[:2], math.prod(outs) * math.prod(kernel))).reshape(index.shape)
    # NOTE: torch keeps the first maximum, or the last NaN of a window
    nan = windows.isnan()
    last_nan = nan.shape[-1] - 1 - nan.flip(-1).to(np.int8).argmax(-1, keepdim=True)
    arg = select(nan.any(-1, keepdim=True), last_nan, windows.argmax(-1, keepdim=True))
    values, indices = gather(windows, -1, arg).squeeze(-1), gather(index, -1, arg).squeeze(-1)
    if not batched:
        values, indices = values.squeeze(0), indices.squeeze(0)
    return (values, indices) if return_indices else values


def fractional_max_pool2d(input, kernel_size, output_size=None, output_ratio=None, return_indices: bool = False,
                          _random_samples=None, *, key=None, generator=None):
    """Fractional max pooling of `input` `[N, C, H, W]` (or `[C, H, W]`) to `output_size` (or `output_ratio` times
    the input's size), as `torch.nn.functional.fractional_max_pool2d` (Graham, 2014): the maximum over windows of
    `kernel_size` whose starts advance by pseudo-random steps, drawn per plane from `_random_samples` `[N, C, 2]`
    in [0, 1) (their `(w, h)`) when given (then the result is torch's), else from `key` (`aotjax.random`) or
    `generator` (default: the default generator). With `return_indices`, also each maximum's flat position in its
    input plane.

    >>> import aotjax.nn.functional as F
    >>> x = aotjax.arange(16.0).reshape(1, 1, 4, 4)
    >>> F.fractional_max_pool2d(x, 2, output_size=2, _random_samples=aotjax.zeros(1, 1, 2))
    tensor([[[[ 5.,  7.],
              [13., 15.]]]])
    """
    return _fractional_max_pool("fractional_max_pool2d", 2, input, kernel_size, output_size, output_ratio,
                                return_indices, _random_samples, key, generator)


def fractional_max_pool3d(input, kernel_size, output_size=None, output_ratio=None, return_indices: bool = False,
                          _random_samples=None, *, key=None, generator=None):
    """Fractional max pooling of `input` `[N, C, T, H, W]` (or `[C, T, H, W]`), as
    `torch.nn.functional.fractional_max_pool3d`; `_random_samples` is `[N, C, 3]` (their `(t, h, w)`).

    >>> import aotjax.nn.functional as F
    >>> F.fractional_max_pool3d(aotjax.ones(1, 1, 5, 5, 5), 2, output_ratio=0.5).shape
    (1, 1, 2, 2, 2)
    """
    return _fractional_max_pool("fractional_max_pool3d", 3, input, kernel_size, output_size, output_ratio,
                                return_indices, _random_samples, key, generator)


# -- power-average pooling -----------------------------------------------------------------------------------------
def _lp_pool(op: str, n: int, x, norm_type, kernel_size, stride, ceil_mode):
    max_pool, avg_pool = (max_pool1d, max_pool2d, max_pool3d)[n - 1], (avg_pool1d, avg_pool2d, avg_pool3d)[n - 1]
    x = as_tensor(x)
    if isinstance(norm_type, (int, float)) and math.isinf(norm_type):
        return max_pool(x.abs(), kernel_size, stride, 0, 1, ceil_mode) if norm_type > 0 else \
            -max_pool(-x.abs(), kernel_size, stride, 0, 1, ceil_mode)
    out = avg_pool(x.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    # NOTE: PyTorch's composition, for its gradients (a window of zeros gets 0 where `pow(1 / p)` alone gives nan)
    return (out.sign() * out.abs().relu()).mul(math.prod(_tuple(op, "kernel_size", kernel_size, n))).pow(
        1.0 / norm_type)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode: bool = False):
    """The `norm_type`-power average over each window, `(sum x ** p) ** (1 / p)`, along the last dim of `input`
    `[N, C, L]`, as `torch.nn.functional.lp_pool1d` (`norm_type=inf`: the maximum of `|x|`).

    >>> import aotjax.nn.functional as F
    >>> F.lp_pool1d(aotjax.tensor([[[3.0, 4.0, 1.0, 0.0]]]), 2, 2)
    tensor([[[5., 1.]]])
    """
    return _lp_pool("lp_pool1d", 1, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode: bool = False):
    """2-D power-average pooling of `input` `[N, C, H, W]`, as `torch.nn.functional.lp_pool2d`.

    >>> import aotjax.nn.functional as F
    >>> F.lp_pool2d(aotjax.ones(1, 1, 2, 2), 1, 2)
    tensor([[[[4.]]]])
    """
    return _lp_pool("lp_pool2d", 2, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode: bool = False):
    """3-D power-average pooling of `input` `[N, C, D, H, W]`, as `torch.nn.functional.lp_pool3d`.

    >>> import aotjax.nn.functional as F
    >>> F.lp_pool3d(aotjax.ones(1, 1, 2, 2, 2), 2, 2)
    tensor([[[[[2.828...]]]]])
    """
    return _lp_pool("lp_pool3d", 3, input, norm_type, kernel_size, stride, ceil_mode)


# -- unfold / fold -------------------------------------------------------------------------------------------------
def _im2col_tables(op, sizes, kernel_size, dilation, padding, stride):
    kernel, dilation = _tuple(op, "kernel_size", kernel_size, 2), _tuple(op, "dilation", dilation, 2)
    padding, stride = _tuple(op, "padding", padding, 2), _tuple(op, "stride", stride, 2)
    outs = [(size + 2 * p - d * (k - 1) - 1) // s + 1 for size, k, d, p, s in zip(sizes, kernel, dilation, padding,
                                                                                   stride)]
    if any(o < 1 for o in outs):
        raise ShapeError(f"{op}: the blocks {outs} are empty for spatial size {list(sizes)} (kernel {kernel}, "
                         f"dilation {dilation}, padding {padding}, stride {stride}){where()}")
    tables = [np.arange(o)[:, None] * s + np.arange(k)[None, :] * d for o, k, s, d in zip(outs, kernel, stride,
                                                                                         dilation)]
    return tables, padding, kernel


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """The sliding blocks of `input` `[N, C, H, W]` (or `[C, H, W]`) as columns (im2col): `[N, C * kh * kw, L]`,
    `L` the number of blocks, as `torch.nn.functional.unfold`.

    >>> import aotjax.nn.functional as F
    >>> F.unfold(aotjax.arange(9.0).reshape(1, 1, 3, 3), 2)
    tensor([[[0., 1., 3., 4.],
             [1., 2., 4., 5.],
             [3., 4., 6., 7.],
             [4., 5., 7., 8.]]])
    """
    x = as_tensor(input)
    if x.ndim not in (3, 4) or 0 in x.shape[-3:]:
        raise ShapeError(f"unfold: expected a 3-D or 4-D input with non-zero channel and spatial sizes (the batch may "
                         f"be 0), got shape {list(x.shape)}{where()}")
    tables, padding, kernel = _im2col_tables("unfold", x.shape[-2:], kernel_size, dilation, padding, stride)
    windows = _windows(_pad_for(x, tables, padding, 0), tables)  # [..., C, oh, ow, kh * kw]
    lead = x.ndim - 3
    windows = windows.permute(*range(lead), lead, lead + 3, lead + 1, lead + 2)
    blocks = tables[0].shape[0] * tables[1].shape[0]  # NOTE: not -1: the batch may be 0
    return windows.reshape(*x.shape[:lead], x.shape[lead] * math.prod(kernel), blocks)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """The sum of the columns of `input` `[N, C * kh * kw, L]` (or `[C * kh * kw, L]`) put back at their blocks
    of an `output_size` image (col2im, the transpose of `unfold`), as `torch.nn.functional.fold`.

    >>> import aotjax.nn.functional as F
    >>> F.fold(aotjax.ones(1, 4, 4), (3, 3), 2)
    tensor([[[[1., 2., 1.],
              [2., 4., 2.],
              [1., 2., 1.]]]])
    """
    x = as_tensor(input)
    sizes = _tuple("fold", "output_size", output_size, 2)
    tables, padding, kernel = _im2col_tables("fold", sizes, kernel_size, dilation, padding, stride)
    k, blocks = math.prod(kernel), tables[0].shape[0] * tables[1].shape[0]
    if x.ndim not in (2, 3) or x.shape[-2] % k or x.shape[-1] != blocks or x.shape[-2] == 0:
        raise ShapeError(f"fold: expected an input [N, C * {k}, {blocks}] or [C * {k}, {blocks}] for kernel "
                         f"{kernel} and output_size {sizes}, got shape {list(x.shape)}{where()}")
    lead, c = x.shape[:-2], x.shape[-2] // k
    padded = (sizes[0] + 2 * padding[0], sizes[1] + 2 * padding[1])
    flat = _combine(tables, lambda d, t: t * (padded[1] if d == 0 else 1))  # [oh, ow, kh * kw] into the padded plane
    cols = x.reshape(*lead, c, k, blocks).transpose(-1, -2).reshape(*lead, c, blocks * k)  # [..., C, (oh ow) k]
    index = tensor(flat.reshape(-1), dtype=default_int_dtype())
    out = index_add(zeros(*lead, c, padded[0] * padded[1], dtype=x.dtype), -1, index, cols)
    out = out.reshape(*lead, c, *padded)
    return out[..., padding[0]:padding[0] + sizes[0], padding[1]:padding[1] + sizes[1]]


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
    k = _tuple(op, "kernel_size", kernel_size, nd)
    s = _tuple(op, "stride", stride if stride is not None else kernel_size, nd)
    p = _tuple(op, "padding", padding, nd)
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
    flat = x.reshape(*lead, math.prod(spatial))  # NOTE: not -1: the batch may be 0
    flat_idx = idx.reshape(*lead, math.prod(spatial)).to(default_int_dtype())
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
