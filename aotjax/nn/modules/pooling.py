"""Pooling and reshaping layers, as `torch.nn`'s: `MaxPool1d/2d/3d`, `AvgPool1d/2d/3d`, `LPPool1d/2d/3d`,
`AdaptiveAvgPool1d/2d/3d`, `AdaptiveMaxPool1d/2d/3d`, `FractionalMaxPool2d/3d`, `MaxUnpool1d/2d/3d`, `Fold`,
`Unfold`, `Flatten`, `Unflatten`, `Upsample`, `UpsamplingNearest2d`, `UpsamplingBilinear2d`, `ZeroPad2d`."""
from __future__ import annotations

from aotjax.nn.module import Module
from aotjax.ops.nn import pooling as P
from aotjax.ops.nn.resampling import interpolate, pad

__all__ = ["MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d", "MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d",
           "AvgPool2d", "AvgPool3d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d",
           "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d", "Flatten", "Unflatten", "Upsample",
           "ZeroPad2d", "FractionalMaxPool2d", "FractionalMaxPool3d", "LPPool1d", "LPPool2d", "LPPool3d", "Fold",
           "Unfold", "UpsamplingNearest2d", "UpsamplingBilinear2d"]


class _MaxPoolNd(Module):
    _fn = None

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices: bool = False,
                 ceil_mode: bool = False):
        super().__init__()
        self.kernel_size, self.stride = kernel_size, stride if stride is not None else kernel_size
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, input):
        return type(self)._fn(input, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode,
                              self.return_indices)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool1d(_MaxPoolNd):
    """`F.max_pool1d` as a layer, as `torch.nn.MaxPool1d`.

    >>> aotjax.nn.MaxPool1d(2)(aotjax.tensor([[[1.0, 3.0, 2.0, 5.0]]]))
    tensor([[[3., 5.]]])
    """

    _fn = staticmethod(P.max_pool1d)


class MaxPool2d(_MaxPoolNd):
    """`F.max_pool2d` as a layer, as `torch.nn.MaxPool2d`.

    >>> aotjax.nn.MaxPool2d(2)(aotjax.ones(1, 3, 4, 4)).shape
    (1, 3, 2, 2)
    """

    _fn = staticmethod(P.max_pool2d)


class MaxPool3d(_MaxPoolNd):
    """`F.max_pool3d` as a layer, as `torch.nn.MaxPool3d`.

    >>> aotjax.nn.MaxPool3d(2)(aotjax.ones(1, 1, 4, 4, 4)).shape
    (1, 1, 2, 2, 2)
    """

    _fn = staticmethod(P.max_pool3d)


class AvgPool1d(Module):
    """`F.avg_pool1d` as a layer, as `torch.nn.AvgPool1d`.

    >>> aotjax.nn.AvgPool1d(2)(aotjax.tensor([[[1.0, 3.0, 2.0, 6.0]]]))
    tensor([[[2., 4.]]])
    """

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False, count_include_pad: bool = True):
        super().__init__()
        self.kernel_size, self.stride = kernel_size, stride if stride is not None else kernel_size
        self.padding, self.ceil_mode, self.count_include_pad = padding, ceil_mode, count_include_pad

    def forward(self, input):
        return P.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class _AvgPoolNd(Module):
    _fn = None

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False, count_include_pad: bool = True,
                 divisor_override=None):
        super().__init__()
        self.kernel_size, self.stride = kernel_size, stride if stride is not None else kernel_size
        self.padding, self.ceil_mode, self.count_include_pad = padding, ceil_mode, count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input):
        return type(self)._fn(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                              self.count_include_pad, self.divisor_override)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool2d(_AvgPoolNd):
    """`F.avg_pool2d` as a layer, as `torch.nn.AvgPool2d`.

    >>> aotjax.nn.AvgPool2d(2)(aotjax.ones(1, 3, 4, 4)).shape
    (1, 3, 2, 2)
    """

    _fn = staticmethod(P.avg_pool2d)


class AvgPool3d(_AvgPoolNd):
    """`F.avg_pool3d` as a layer, as `torch.nn.AvgPool3d`.

    >>> aotjax.nn.AvgPool3d(2)(aotjax.ones(1, 1, 4, 4, 4)).shape
    (1, 1, 2, 2, 2)
    """

    _fn = staticmethod(P.avg_pool3d)


class _AdaptiveAvgPoolNd(Module):
    _fn = None

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):
        return type(self)._fn(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptiveAvgPoolNd):
    """`F.adaptive_avg_pool1d` as a layer, as `torch.nn.AdaptiveAvgPool1d`.

    >>> aotjax.nn.AdaptiveAvgPool1d(1)(aotjax.tensor([[[1.0, 3.0]]]))
    tensor([[[2.]]])
    """

    _fn = staticmethod(P.adaptive_avg_pool1d)


class AdaptiveAvgPool2d(_AdaptiveAvgPoolNd):
    """`F.adaptive_avg_pool2d` as a layer, as `torch.nn.AdaptiveAvgPool2d` (global average pooling with 1).

    >>> aotjax.nn.AdaptiveAvgPool2d(1)(aotjax.ones(2, 3, 5, 5)).shape
    (2, 3, 1, 1)
    """

    _fn = staticmethod(P.adaptive_avg_pool2d)


class AdaptiveAvgPool3d(_AdaptiveAvgPoolNd):
    """`F.adaptive_avg_pool3d` as a layer, as `torch.nn.AdaptiveAvgPool3d`.

    >>> aotjax.nn.AdaptiveAvgPool3d((1, 2, 2))(aotjax.ones(1, 1, 3, 4, 4)).shape
    (1, 1, 1, 2, 2)
    """

    _fn = staticmethod(P.adaptive_avg_pool3d)


class _AdaptiveMaxPoolNd(Module):
    _fn = None

    def __init__(self, output_size, return_indices: bool = False):
        super().__init__()
        self.output_size, self.return_indices = output_size, return_indices

    def forward(self, input):
        return type(self)._fn(input, self.output_size, self.return_indices)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveMaxPool1d(_AdaptiveMaxPoolNd):
    """`F.adaptive_max_pool1d` as a layer, as `torch.nn.AdaptiveMaxPool1d`.

    >>> aotjax.nn.AdaptiveMaxPool1d(1)(aotjax.tensor([[[1.0, 3.0]]]))
    tensor([[[3.]]])
    """

    _fn = staticmethod(P.adaptive_max_pool1d)


class AdaptiveMaxPool2d(_AdaptiveMaxPoolNd):
    """`F.adaptive_max_pool2d` as a layer, as `torch.nn.AdaptiveMaxPool2d`.

    >>> aotjax.nn.AdaptiveMaxPool2d((2, 1))(aotjax.ones(1, 3, 5, 5)).shape
    (1, 3, 2, 1)
    """

    _fn = staticmethod(P.adaptive_max_pool2d)


class AdaptiveMaxPool3d(_AdaptiveMaxPoolNd):
    """`F.adaptive_max_pool3d` as a layer, as `torch.nn.AdaptiveMaxPool3d`.

    >>> aotjax.nn.AdaptiveMaxPool3d(1)(aotjax.ones(1, 1, 3, 3, 3)).shape
    (1, 1, 1, 1, 1)
    """

    _fn = staticmethod(P.adaptive_max_pool3d)


class Flatten(Module):
    """Flattens dims `start_dim` to `end_dim` (by default all but the batch dim), as `torch.nn.Flatten`.

    >>> aotjax.nn.Flatten()(aotjax.ones(2, 3, 4)).shape
    (2, 12)
    """

    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input):
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Splits dim `dim` into `unflattened_size`, as `torch.nn.Unflatten`.

    >>> aotjax.nn.Unflatten(1, (3, 4))(aotjax.ones(2, 12)).shape
    (2, 3, 4)
    """

    def __init__(self, dim: int, unflattened_size):
        super().__init__()
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, input):
        dim = self.dim % input.ndim
        return input.reshape(*input.shape[:dim], *self.unflattened_size, *input.shape[dim + 1:])

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


class Upsample(Module):
    """`F.interpolate` as a layer, as `torch.nn.Upsample`.

    >>> aotjax.nn.Upsample(scale_factor=2, mode="nearest")(aotjax.ones(1, 1, 2, 2)).shape
    (1, 1, 4, 4)
    """

    def __init__(self, size=None, scale_factor=None, mode: str = "nearest", align_corners=None,
                 recompute_scale_factor=None):
        super().__init__()
        if scale_factor is not None:  # NOTE: PyTorch keeps scale factors as floats
            scale_factor = tuple(map(float, scale_factor)) if isinstance(scale_factor, (tuple, list)) else \
                float(scale_factor)
        self.size, self.scale_factor, self.mode = size, scale_factor, mode
        self.align_corners, self.recompute_scale_factor = align_corners, recompute_scale_factor

    def forward(self, input):
        return interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                           self.recompute_scale_factor)

    def extra_repr(self) -> str:
        what = f"scale_factor={self.scale_factor}" if self.scale_factor is not None else f"size={self.size}"
        return f"{what}, mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """`Upsample` with `mode='nearest'` (of 4-D inputs), as `torch.nn.UpsamplingNearest2d`.

    >>> aotjax.nn.UpsamplingNearest2d(scale_factor=2)(aotjax.ones(1, 1, 2, 2)).shape
    (1, 1, 4, 4)
    """

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """`Upsample` with `mode='bilinear'` and `align_corners=True` (of 4-D inputs), as
    `torch.nn.UpsamplingBilinear2d`.

    >>> aotjax.nn.UpsamplingBilinear2d(size=(1, 3))(aotjax.tensor([[[[0.0, 1.0]]]]))
    tensor([[[[0. , 0.5, 1. ]]]])
    """

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)


class ZeroPad2d(Module):
    """Pads the last two dims with zeros: `padding` an int or `(left, right, top, bottom)`, as
    `torch.nn.ZeroPad2d`.

    >>> aotjax.nn.ZeroPad2d((1, 0, 0, 2))(aotjax.ones(1, 2, 2))
    tensor([[[0., 1., 1.],
             [0., 1., 1.],
             [0., 0., 0.],
             [0., 0., 0.]]])
    """

    def __init__(self, padding):
        super().__init__()
        self.padding = tuple(padding) if isinstance(padding, (tuple, list)) else (padding,) * 4

    def forward(self, input):
        return pad(input, self.padding, "constant", 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _MaxUnpool(Module):
    _fn = None

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size, self.padding = kernel_size, padding
        self.stride = stride if stride is not None else kernel_size

    def forward(self, input, indices, output_size=None):
        return type(self)._fn(input, indices, self.kernel_size, self.stride, self.padding, output_size)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpool):
    """`max_unpool1d(input, indices, kernel_size, stride, padding, output_size)`.

    >>> aotjax.nn.MaxUnpool1d(2)(aotjax.tensor([[2.0, 4.0]]), aotjax.tensor([[1, 2]]))
    tensor([[0., 2., 4., 0.]])
    """

    _fn = staticmethod(P.max_unpool1d)


class MaxUnpool2d(_MaxUnpool):
    """`max_unpool2d(input, indices, kernel_size, stride, padding, output_size)`.

    >>> aotjax.nn.MaxUnpool2d(2)(aotjax.tensor([[[5.0]]]), aotjax.tensor([[[3]]])).shape
    (1, 2, 2)
    """

    _fn = staticmethod(P.max_unpool2d)


class MaxUnpool3d(_MaxUnpool):
    """`max_unpool3d(input, indices, kernel_size, stride, padding, output_size)`.

    >>> aotjax.nn.MaxUnpool3d(2)(aotjax.tensor([[[[5.0]]]]), aotjax.tensor([[[[7]]]])).shape
    (1, 2, 2, 2)
    """

    _fn = staticmethod(P.max_unpool3d)


class _FractionalMaxPoolNd(Module):
    _fn = None
    _n = 0

    def __init__(self, kernel_size, output_size=None, output_ratio=None, return_indices: bool = False,
                 _random_samples=None):
        super().__init__()
        name, n = type(self).__name__, type(self)._n
        self.kernel_size = tuple(kernel_size) if isinstance(kernel_size, (tuple, list)) else (kernel_size,) * n
        self.return_indices = return_indices
        self.register_buffer("_random_samples", _random_samples)
        self.output_size = None if output_size is None else (
            tuple(output_size) if isinstance(output_size, (tuple, list)) else (output_size,) * n)
        self.output_ratio = None if output_ratio is None else (
            tuple(output_ratio) if isinstance(output_ratio, (tuple, list)) else (output_ratio,) * n)
        if output_size is None and output_ratio is None:
            raise ValueError(f"{name} requires specifying either an output size, or a pooling ratio")
        if output_size is not None and output_ratio is not None:
            raise ValueError("only one of output_size and output_ratio may be specified")
        if self.output_ratio is not None and not all(0 < r < 1 for r in self.output_ratio):
            raise ValueError(f"output_ratio must be between 0 and 1 (got {output_ratio})")

    def forward(self, input):
        return type(self)._fn(input, self.kernel_size, self.output_size, self.output_ratio, self.return_indices,
                              _random_samples=self._random_samples)


class FractionalMaxPool2d(_FractionalMaxPoolNd):
    """`F.fractional_max_pool2d` as a layer, as `torch.nn.FractionalMaxPool2d`: without `_random_samples` each
    call draws new windows from the default generator.

    >>> aotjax.nn.FractionalMaxPool2d(3, output_ratio=0.5)(aotjax.ones(1, 2, 10, 8)).shape
    (1, 2, 5, 4)
    """

    _fn, _n = staticmethod(P.fractional_max_pool2d), 2


class FractionalMaxPool3d(_FractionalMaxPoolNd):
    """`F.fractional_max_pool3d` as a layer, as `torch.nn.FractionalMaxPool3d`.

    >>> aotjax.nn.FractionalMaxPool3d(2, output_size=(2, 3, 3))(aotjax.ones(1, 1, 5, 6, 6)).shape
    (1, 1, 2, 3, 3)
    """

    _fn, _n = staticmethod(P.fractional_max_pool3d), 3


class _LPPoolNd(Module):
    _fn = None

    def __init__(self, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False):
        super().__init__()
        self.norm_type, self.kernel_size, self.stride, self.ceil_mode = norm_type, kernel_size, stride, ceil_mode

    def forward(self, input):
        return type(self)._fn(input, float(self.norm_type), self.kernel_size, self.stride, self.ceil_mode)

    def extra_repr(self) -> str:
        return (f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"ceil_mode={self.ceil_mode}")


class LPPool1d(_LPPoolNd):
    """`F.lp_pool1d` as a layer, as `torch.nn.LPPool1d`: `(sum x ** p) ** (1 / p)` over each window.

    >>> aotjax.nn.LPPool1d(2, 2)(aotjax.tensor([[[3.0, 4.0]]]))
    tensor([[[5.]]])
    """

    _fn = staticmethod(P.lp_pool1d)


class LPPool2d(_LPPoolNd):
    """`F.lp_pool2d` as a layer, as `torch.nn.LPPool2d`.

    >>> aotjax.nn.LPPool2d(1, 2)(aotjax.ones(1, 1, 4, 4)).shape
    (1, 1, 2, 2)
    """

    _fn = staticmethod(P.lp_pool2d)


class LPPool3d(_LPPoolNd):
    """`F.lp_pool3d` as a layer, as `torch.nn.LPPool3d`.

    >>> aotjax.nn.LPPool3d(1, 2)(aotjax.ones(1, 1, 2, 2, 2)).flatten()
    tensor([8.])
    """

    _fn = staticmethod(P.lp_pool3d)


class Fold(Module):
    """`F.fold` as a layer (col2im: columns `[N, C * kh * kw, L]` summed back into `output_size` images), as
    `torch.nn.Fold`.

    >>> aotjax.nn.Fold((3, 3), 2)(aotjax.ones(1, 4, 4))[0, 0]
    tensor([[1., 2., 1.],
            [2., 4., 2.],
            [1., 2., 1.]])
    """

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size, self.kernel_size, self.dilation = output_size, kernel_size, dilation
        self.padding, self.stride = padding, stride

    def forward(self, input):
        return P.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")


class Unfold(Module):
    """`F.unfold` as a layer (im2col: the sliding blocks of `[N, C, H, W]` as columns `[N, C * kh * kw, L]`), as
    `torch.nn.Unfold`.

    >>> aotjax.nn.Unfold(2)(aotjax.ones(1, 3, 4, 4)).shape
    (1, 12, 9)
    """

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size, self.dilation, self.padding, self.stride = kernel_size, dilation, padding, stride

    def forward(self, input):
        return P.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, padding={self.padding}, "
                f"stride={self.stride}")
