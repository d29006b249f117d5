"""Convolution: one primitive, `conv` (XLA's `conv_general_dilated`: window strides, padding, input and
kernel dilation, feature and batch groups, any layout), and PyTorch's `conv1d/2d/3d` and
`conv_transpose1d/2d/3d` on it, in PyTorch's layouts (input `[N, C, *spatial]`, weight `[O, I/groups,
*kernel]`; a transposed convolution's weight `[I, O/groups, *kernel]`).

`conv` is bilinear: its jvp applies it to each tangent, and its transposes, with respect to the input and
to the weight, are convolutions again (with the roles of strides and dilations exchanged, as JAX derives
them), so derivatives of any order are convolutions. `vmap` folds the batch axis into the batch or the
feature-group dimension, never looping over examples.
"""
from __future__ import annotations

import math

import jax
import numpy as np

from aotjax.core.errors import DTypeError, ShapeError
from aotjax.core.primitive import Recompute
from aotjax.core.source_info import where
from aotjax.interpreters.ad_util import Zero
from aotjax.interpreters.batching import batching_rules, not_mapped
from aotjax.interpreters.jvp import defjvp
from aotjax.interpreters.transpose import deflinear2_transpose
from aotjax.ops.base import autocast
from aotjax.ops.base.combinators import standard_primitive
from aotjax.ops.base.data import as_tensor
from aotjax.ops.base.promotion import category, default_int_dtype, is_float
from aotjax.ops.shape.copies import flip
from aotjax.ops.shape.views import permute, reshape

__all__ = ["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"]
FUNCTIONAL = list(__all__)


# -- the primitive -------------------------------------------------------------------------------------------------
def _conv_lower(x, w, *, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers, feature_group_count,
                batch_group_count):
    return jax.lax.conv_general_dilated(
        x, w, window_strides, padding, lhs_dilation, rhs_dilation,
        jax.lax.ConvDimensionNumbers(*dimension_numbers), feature_group_count, batch_group_count)


def _conv_flops(in_avals, out_avals, *, dimension_numbers, **params) -> float:
    (_, w), (out,) = in_avals, out_avals
    per_output = w.size // max(w.shape[dimension_numbers[1][0]], 1)  # the kernel's size for one output feature
    return 2.0 * out.size * per_output


# NOTE: the shape and dtype rules are jax's (the frontends below check PyTorch's rules and raise its errors first).
conv_p = standard_primitive("conv", None, None, _conv_lower, recompute=Recompute.EXPENSIVE, flops=_conv_flops,
                            is_dot=True)
defjvp(conv_p, lambda t, x, w, **params: conv_p.bind(t, w, **params),
       lambda t, x, w, **params: conv_p.bind(x, t, **params))


def _axis_into(src: int, dst: int, x):
    """`x` with axis `src` merged into axis `dst` (numbered with `src` removed), `src` the major part."""
    perm = [i for i in range(x.ndim) if i != src]
    perm.insert(dst, src)
    shape = [n for i, n in enumerate(x.shape) if i != src]
    shape[dst] *= x.shape[src]
    return reshape(permute(x, *perm), *shape)


def _axis_out_of(src: int, size: int, x):
    """`x` with axis `src` split in two, the major of `size`."""
    shape = list(x.shape)
    shape[src:src + 1] = [size, shape[src] // size]
    return reshape(x, *shape)


def _spec_t(spec):
    """A layout with its first two (batch/feature or output/input) dims exchanged."""
    return (spec[1], spec[0]) + tuple(spec[2:])


def _dilate(shape, dilation):
    return [0 if n == 0 else 1 + d * (n - 1) for n, d in zip(shape, dilation)]


def _spatial(shape, spec):
    return [shape[i] for i in spec[2:]]


def _conv_transpose_x(ct, x, w, *, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
                      feature_group_count, batch_group_count):
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    groups = max(feature_group_count, batch_group_count)
    if groups > 1:  # NOTE: the groups move from the kernel's output features into its input features
        w = _axis_into(rhs_spec[0], rhs_spec[1], _axis_out_of(rhs_spec[0], groups, w))
    in_shape, k_shape = _spatial(x.aval.shape, lhs_spec), _spatial(w.shape, rhs_spec)
    lhs_d, rhs_d = _dilate(in_shape, lhs_dilation), _dilate(k_shape, rhs_dilation)
    out_d = _dilate(_spatial(ct.shape, out_spec), window_strides)
    before = [k - lo - 1 for k, (lo, _) in zip(rhs_d, padding)]
    pads = tuple((b, i + k - 1 - o - b) for b, i, k, o in zip(before, lhs_d, rhs_d, out_d))
    out = conv_p.bind(ct, flip(w, *rhs_spec[2:]), window_strides=tuple(lhs_dilation), padding=pads,
                      lhs_dilation=tuple(window_strides), rhs_dilation=tuple(rhs_dilation),
                      dimension_numbers=(out_spec, _spec_t(rhs_spec), lhs_spec), feature_group_count=groups,
                      batch_group_count=1)
    if batch_group_count > 1:
        out = _axis_into(lhs_spec[1], lhs_spec[0], _axis_out_of(lhs_spec[1], batch_group_count, out))
    return out


def _conv_transpose_w(ct, x, w, *, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
                      feature_group_count, batch_group_count):
    if math.prod(ct.shape) == 0:
        return Zero(w.aval)
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    in_shape, k_shape = _spatial(x.shape, lhs_spec), _spatial(w.aval.shape, rhs_spec)
    lhs_d, rhs_d = _dilate(in_shape, lhs_dilation), _dilate(k_shape, rhs_dilation)
    out_d = _dilate(_spatial(ct.shape, out_spec), window_strides)
    pads = tuple((lo, o - i + k - lo - 1) for (lo, _), i, k, o in zip(padding, lhs_d, rhs_d, out_d))
    return conv_p.bind(x, ct, window_strides=tuple(rhs_dilation), padding=pads, lhs_dilation=tuple(lhs_dilation),
                       rhs_dilation=tuple(window_strides),
                       dimension_numbers=(_spec_t(lhs_spec), _spec_t(out_spec), _spec_t(rhs_spec)),
                       feature_group_count=batch_group_count, batch_group_count=feature_group_count)


deflinear2_transpose(conv_p, _conv_transpose_x, _conv_transpose_w)


def _conv_batch(axis_size, vals, dims, **params):
    """One convolution for all examples: a batched input's examples join its batch dim, a batched kernel's join its
    output features (as groups when the input is batched too, or when the convolution is grouped)."""
    (x, w), (dx, dw) = vals, dims
    lhs_spec, rhs_spec, out_spec = params["dimension_numbers"]
    fgc, bgc = params["feature_group_count"], params["batch_group_count"]
    if dx is not_mapped and dw is not_mapped:
        return [conv_p.bind(x, w, **params)], [not_mapped]
    if dx is not not_mapped and dw is not not_mapped:
        if bgc > 1:
            x, bgc = _axis_into(dx, lhs_spec[0], x), bgc * axis_size
        else:
            x, fgc = _axis_into(dx, lhs_spec[1], x), fgc * axis_size
        out = conv_p.bind(x, _axis_into(dw, rhs_spec[0], w),
                          **{**params, "feature_group_count": fgc, "batch_group_count": bgc})
        return [_axis_out_of(out_spec[1], axis_size, out)], [out_spec[1]]
    if dx is not not_mapped:
        if bgc == 1:
            x = _axis_into(dx, lhs_spec[0], x)
        else:  # NOTE: the batch groups stay outermost in the batch dim; the examples go inside each group
            x = _axis_out_of(lhs_spec[0] + int(dx <= lhs_spec[0]), bgc, x)
            x = _axis_into(dx + int(lhs_spec[0] < dx), lhs_spec[0] + 1, x)
            x = _axis_into(lhs_spec[0], lhs_spec[0], x)
        out = conv_p.bind(x, w, **params)
        return [_axis_out_of(out_spec[0], axis_size, out)], [out_spec[0]]
    if fgc == 1 and bgc == 1:
        out = conv_p.bind(x, _axis_into(dw, rhs_spec[0], w), **params)
        return [_axis_out_of(out_spec[1], axis_size, out)], [out_spec[1]]
    groups = max(fgc, bgc)  # NOTE: groups outermost in the kernel's output features, the examples inside each
    w = _axis_out_of(rhs_spec[0] + int(dw <= rhs_spec[0]), groups, w)
    w = _axis_into(dw + int(rhs_spec[0] < dw), rhs_spec[0] + 1, w)
    w = _axis_into(rhs_spec[0], rhs_spec[0], w)
    out = conv_p.bind(x, w, **params)
    out = _axis_out_of(out_spec[1], groups, out)
    out = _axis_out_of(out_spec[1] + 1, axis_size, out)
    return [_axis_into(out_spec[1], out_spec[1] + 1, out)], [out_spec[1]]


batching_rules[conv_p] = _conv_batch


# -- PyTorch's frontends -------------------------------------------------------------------------------------------
def _tuple(op: str, name: str, value, n: int) -> tuple[int, ...]:
    values = tuple(value) if isinstance(value, (tuple, list)) else (value,) * n
    if len(values) == 1:
        values *= n
    if len(values) != n or not all(isinstance(v, (int, np.integer)) for v in values):
        raise ShapeError(f"{op}: expected {name} to be an int or a tuple of {n} ints, got {value!r}{where()}")
    return tuple(int(v) for v in values)


def _batched_input(op: str, x, n: int):
    """`x` with a batch dim (added for an unbatched input, as PyTorch allows), and whether one was added."""
    if x.ndim not in (n + 1, n + 2):
        raise ShapeError(f"{op}: expected a {n + 1}-D (unbatched) or {n + 2}-D (batched) input, got shape "
                         f"{list(x.shape)}{where()}")
    return (x.unsqueeze(0), True) if x.ndim == n + 1 else (x, False)


def _int_kernel(dtype, transposed: bool) -> bool:
    """Whether torch's CPU kernels take integers of `dtype`: every integer dtype for a convolution, only int64 (the
    default integer dtype here) for a transposed one; never bool."""
    return category(dtype) == 1 and (not transposed or np.dtype(dtype) == default_int_dtype())


def _check_operands(op: str, x, weight, bias, n: int, transposed: bool = False):
    x, weight = as_tensor(x), as_tensor(weight)
    bias = None if bias is None else as_tensor(bias)
    if weight.ndim != n + 2:
        raise ShapeError(f"{op}: expected a {n + 2}-D weight, got shape {list(weight.shape)}{where()}")
    dtypes = {t.dtype for t in (x, weight, bias) if t is not None}
    if len(dtypes) > 1:
        got = ", ".join(t.aval.str_short() for t in (x, weight, bias) if t is not None)
        raise DTypeError(f"{op}: input, weight and bias must have one dtype, got {got}{where()}; convert one first "
                         f"(e.g. `weight.to(input.dtype)`)")
    if not is_float(x.dtype) and not _int_kernel(x.dtype, transposed):
        ints = f"{default_int_dtype().name} (int64)" if transposed else "integer (not bool)"
        raise DTypeError(f"{op}: expected floating-point or {ints} operands, as torch's CPU kernels, got "
                         f"{x.aval.str_short()}{where()}; convert them first, e.g. `x.float()`")
    return x, weight, bias


def _add_bias(op: str, out, bias, n: int):
    if bias is None:
        return out
    if bias.shape != (out.shape[1],):
        raise ShapeError(f"{op}: expected a bias of shape [{out.shape[1]}], got {list(bias.shape)}{where()}")
    return out + bias.reshape(-1, *(1,) * n)


def _dims(n: int):
    spec = tuple(range(n + 2))
    return (spec, spec, spec)


def _conv(op: str, n: int, x, weight, bias, stride, padding, dilation, groups):
    x, weight, bias = _check_operands(op, x, weight, bias, n)
    x, unbatched = _batched_input(op, x, n)
    stride, dilation = _tuple(op, "stride", stride, n), _tuple(op, "dilation", dilation, n)
    kernel = tuple(weight.shape[2:])
    if groups < 1 or x.shape[1] != weight.shape[1] * groups or weight.shape[0] % groups:
        raise ShapeError(f"{op}: with groups={groups}, expected the input's {x.shape[1]} channels to be "
                         f"weight.shape[1] * groups = {weight.shape[1] * groups} and the weight's {weight.shape[0]} "
                         f"output channels to be divisible by groups (input {list(x.shape)}, weight "
                         f"{list(weight.shape)}){where()}")
    if isinstance(padding, str):
        if padding not in ("same", "valid"):
            raise ValueError(f"{op}: padding must be 'same', 'valid', an int or a tuple of ints, got {padding!r}")
        if padding == "same" and any(s != 1 for s in stride):
            raise ValueError(f"{op}: padding='same' is not supported for strided convolutions (stride={stride})"
                             f"{where()}; pad explicitly instead")
        total = [d * (k - 1) if padding == "same" else 0 for d, k in zip(dilation, kernel)]
        pads = tuple((t // 2, t - t // 2) for t in total)  # NOTE: an odd total pads one more after, as PyTorch
    else:
        pads = tuple((p, p) for p in _tuple(op, "padding", padding, n))
    spatial = [x.shape[2 + i] + lo + hi for i, (lo, hi) in enumerate(pads)]
    if any(s < d * (k - 1) + 1 for s, d, k in zip(spatial, dilation, kernel)):
        raise ShapeError(f"{op}: the (padded) input's spatial size {spatial} is smaller than the (dilated) kernel "
                         f"{[d * (k - 1) + 1 for d, k in zip(dilation, kernel)]}{where()}")
    out = conv_p.bind(x, weight, window_strides=stride, padding=pads, lhs_dilation=(1,) * n, rhs_dilation=dilation,
                      dimension_numbers=_dims(n), feature_group_count=groups, batch_group_count=1)
    out = _add_bias(op, out, bias, n)
    return out.squeeze(0) if unbatched else out


@autocast.lower
def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups: int = 1):
    """A 1-D convolution (cross-correlation, as PyTorch's) of `input` `[N, C, L]` (or `[C, L]`) with `weight`
    `[O, C/groups, k]`. `padding` is an int, a tuple, `'valid'` (none) or `'same'` (the output as long as the
    input; stride 1 only).

    >>> import aotjax.nn.functional as F
    >>> F.conv1d(aotjax.ones(1, 1, 5), aotjax.ones(1, 1, 3), padding=1)
    tensor([[[2., 3., 3., 3., 2.]]])
    """
    return _conv("conv1d", 1, input, weight, bias, stride, padding, dilation, groups)


@autocast.lower
def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups: int = 1):
    """A 2-D convolution of `input` `[N, C, H, W]` (or `[C, H, W]`) with `weight` `[O, C/groups, kh, kw]`, as
    `torch.nn.functional.conv2d` (see `conv1d` for `padding`).

    >>> import aotjax.nn.functional as F
    >>> F.conv2d(aotjax.ones(2, 3, 5, 5), aotjax.ones(4, 3, 3, 3), stride=2).shape
    (2, 4, 2, 2)
    """
    return _conv("conv2d", 2, input, weight, bias, stride, padding, dilation, groups)


@autocast.lower
def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups: int = 1):
    """A 3-D convolution of `input` `[N, C, D, H, W]` (or `[C, D, H, W]`) with `weight` `[O, C/groups, kd, kh,
    kw]`, as `torch.nn.functional.conv3d`.

    >>> import aotjax.nn.functional as F
    >>> F.conv3d(aotjax.ones(1, 2, 4, 4, 4), aotjax.ones(3, 2, 2, 2, 2), padding="same").shape
    (1, 3, 4, 4, 4)
    """
    return _conv("conv3d", 3, input, weight, bias, stride, padding, dilation, groups)


def _conv_transpose(op: str, n: int, x, weight, bias, stride, padding, output_padding, groups, dilation):
    """The gradient of a convolution with respect to its input, as a convolution: the input dilated by `stride`,
    padded by `dilation * (k - 1) - padding` (plus `output_padding` after), the kernel flipped with its input and
    output features exchanged within each group."""
    x, weight, bias = _check_operands(op, x, weight, bias, n, transposed=True)
    x, unbatched = _batched_input(op, x, n)
    if isinstance(padding, str):
        raise ValueError(f"{op}: padding must be an int or a tuple of ints, got {padding!r}{where()}")
    stride, dilation = _tuple(op, "stride", stride, n), _tuple(op, "dilation", dilation, n)
    padding, output_padding = _tuple(op, "padding", padding, n), _tuple(op, "output_padding", output_padding, n)
    if any(op_ >= max(s, d) for op_, s, d in zip(output_padding, stride, dilation)):
        raise ValueError(f"{op}: output_padding {output_padding} must be smaller than either stride {stride} or "
                         f"dilation {dilation}{where()}")
    c_in, c_out_g, kernel = weight.shape[0], weight.shape[1], tuple(weight.shape[2:])
    if groups < 1 or x.shape[1] != c_in or c_in % groups:
        raise ShapeError(f"{op}: expected the input's channels ({x.shape[1]}) to be the weight's first dim "
                         f"({c_in}), divisible by groups={groups} (input {list(x.shape)}, weight "
                         f"{list(weight.shape)}){where()}")
    w = weight.reshape(groups, c_in // groups, c_out_g, *kernel).transpose(1, 2)
    w = flip(w.reshape(groups * c_out_g, c_in // groups, *kernel), *range(2, n + 2))
    pads = tuple((d * (k - 1) - p, d * (k - 1) - p + o)
                 for d, k, p, o in zip(dilation, kernel, padding, output_padding))
    size = [(i - 1) * s - 2 * p + d * (k - 1) + o + 1
            for i, s, p, d, k, o in zip(x.shape[2:], stride, padding, dilation, kernel, output_padding)]
    if any(s <= 0 for s in size):
        raise ShapeError(f"{op}: the output's spatial size {size} is not positive (input {list(x.shape)}, weight "
                         f"{list(weight.shape)}, padding {padding}){where()}")
    out = conv_p.bind(x, w, window_strides=(1,) * n, padding=pads, lhs_dilation=stride, rhs_dilation=dilation,
                      dimension_numbers=_dims(n), feature_group_count=groups, batch_group_count=1)
    out = _add_bias(op, out, bias, n)
    return out.squeeze(0) if unbatched else out


@autocast.lower
def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups: int = 1, dilation=1):
    """The transposed 1-D convolution (the gradient of `conv1d` with respect to its input) of `input` `[N, C, L]`
    with `weight` `[C, O/groups, k]`, as `torch.nn.functional.conv_transpose1d`.

    >>> import aotjax.nn.functional as F
    >>> F.conv_transpose1d(aotjax.ones(1, 1, 3), aotjax.ones(1, 1, 2), stride=2)
    tensor([[[1., 1., 1., 1., 1., 1.]]])
    """
    return _conv_transpose("conv_transpose1d", 1, input, weight, bias, stride, padding, output_padding, groups,
                           dilation)


@autocast.lower
def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups: int = 1, dilation=1):
    """The transposed 2-D convolution of `input` `[N, C, H, W]` with `weight` `[C, O/groups, kh, kw]`, as
    `torch.nn.functional.conv_transpose2d`.

    >>> import aotjax.nn.functional as F
    >>> F.conv_transpose2d(aotjax.ones(1, 4, 3, 3), aotjax.ones(4, 2, 3, 3), stride=2, padding=1,
    ...                    output_padding=1).shape
    (1, 2, 6, 6)
    """
    return _conv_transpose("conv_transpose2d", 2, input, weight, bias, stride, padding, output_padding, groups,
                           dilation)


@autocast.lower
def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups: int = 1, dilation=1):
    """The transposed 3-D convolution of `input` `[N, C, D, H, W]` with `weight` `[C, O/groups, kd, kh, kw]`, as
    `torch.nn.functional.conv_transpose3d`.

    >>> import aotjax.nn.functional as F
    >>> F.conv_transpose3d(aotjax.ones(1, 2, 2, 2, 2), aotjax.ones(2, 1, 2, 2, 2), stride=2).shape
    (1, 1, 4, 4, 4)
    """
    return _conv_transpose("conv_transpose3d", 3, input, weight, bias, stride, padding, output_padding, groups,
                           dilation)
