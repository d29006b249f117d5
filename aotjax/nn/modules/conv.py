"""Convolution layers, as `torch.nn`'s: `Conv1d/2d/3d` and `ConvTranspose1d/2d/3d`."""
from __future__ import annotations

import math

from aotjax.nn import init
from aotjax.nn.module import Module
from aotjax.nn.parameter import Parameter
from aotjax.ops.creation.factories import empty
from aotjax.ops.nn import conv as F
from aotjax.ops.nn.resampling import pad

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"]


def _ntuple(value, n: int) -> tuple[int, ...]:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,) * n


class _ConvNd(Module):
    _n: int
    _transposed: bool = False

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
                 groups: int = 1, bias: bool = True, padding_mode: str = "zeros", device=None, dtype=None,
                 output_padding=0):
        super().__init__()
        name = type(self).__name__
        if groups <= 0 or in_channels % groups or out_channels % groups:
            raise ValueError(f"{name}: in_channels ({in_channels}) and out_channels ({out_channels}) must be "
                             f"divisible by groups ({groups})")
        if padding_mode not in ("zeros", "reflect", "replicate", "circular"):
            raise ValueError(f"{name}: padding_mode must be 'zeros', 'reflect', 'replicate' or 'circular', got "
                             f"{padding_mode!r}")
        if isinstance(padding, str) and padding not in ("same", "valid"):
            raise ValueError(f"{name}: padding must be 'same', 'valid', an int or a tuple, got {padding!r}")
        n = self._n
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size, self.stride = _ntuple(kernel_size, n), _ntuple(stride, n)
        self.padding = padding if isinstance(padding, str) else _ntuple(padding, n)
        self.dilation, self.output_padding = _ntuple(dilation, n), _ntuple(output_padding, n)
        self.transposed, self.padding_mode = self._transposed, padding_mode
        shape = (in_channels, out_channels // groups) if self._transposed else (out_channels, in_channels // groups)
        self.weight = Parameter(empty(*shape, *self.kernel_size, dtype=dtype))
        if bias:
            self.bias = Parameter(empty(out_channels, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw the weight and bias anew (PyTorch's default initialization: uniform on ±1/sqrt(fan_in))."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.weight.shape[1] * math.prod(self.kernel_size)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def extra_repr(self) -> str:
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * self._n:
            s += f", padding={self.padding if isinstance(self.padding, str) else self.padding}"
        if self.dilation != (1,) * self._n:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * self._n:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class _Conv(_ConvNd):
    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
                 groups: int = 1, bias: bool = True, padding_mode: str = "zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, device, dtype)

    def forward(self, input):
        fn = (F.conv1d, F.conv2d, F.conv3d)[self._n - 1]
        if self.padding_mode == "zeros":
            return fn(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)
        if isinstance(self.padding, str):
            total = [0 if self.padding == "valid" else d * (k - 1) for d, k in zip(self.dilation, self.kernel_size)]
            pads = [(t // 2, t - t // 2) for t in total]
        else:
            pads = [(p, p) for p in self.padding]
        flat = tuple(v for lo_hi in reversed(pads) for v in lo_hi)
        return fn(pad(input, flat, mode=self.padding_mode), self.weight, self.bias, self.stride, 0, self.dilation,
                  self.groups)


class Conv1d(_Conv):
    """A 1-D convolution layer (`F.conv1d` with a learned `weight` `[out, in/groups, k]` and `bias`), as
    `torch.nn.Conv1d`, with its default initialization; `padding_mode` may be `'zeros'`, `'reflect'`,
    `'replicate'` or `'circular'`.

    >>> conv = aotjax.nn.Conv1d(2, 4, 3, padding=1)
    >>> conv(aotjax.ones(5, 2, 7)).shape, conv
    ((5, 4, 7), Conv1d(2, 4, kernel_size=(3,), stride=(1,), padding=(1,)))
    """

    _n = 1


class Conv2d(_Conv):
    """A 2-D convolution layer (`F.conv2d` with a learned `weight` `[out, in/groups, kh, kw]` and `bias`), as
    `torch.nn.Conv2d`.

    >>> aotjax.nn.Conv2d(3, 8, 3, stride=2)(aotjax.ones(1, 3, 9, 9)).shape
    (1, 8, 4, 4)
    """

    _n = 2


class Conv3d(_Conv):
    """A 3-D convolution layer, as `torch.nn.Conv3d`.

    >>> aotjax.nn.Conv3d(1, 2, 2)(aotjax.ones(1, 1, 3, 3, 3)).shape
    (1, 2, 2, 2, 2)
    """

    _n = 3


class _ConvTranspose(_ConvNd):
    _transposed = True

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0,
                 groups: int = 1, bias: bool = True, dilation=1, padding_mode: str = "zeros", device=None,
                 dtype=None):
        if padding_mode != "zeros":
            raise ValueError(f"{type(self).__name__}: only padding_mode='zeros' is supported (as in PyTorch), got "
                             f"{padding_mode!r}")
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, device, dtype, output_padding)

    def forward(self, input, output_size=None):
        if output_size is not None:
            raise NotImplementedError(f"{type(self).__name__}: output_size is not supported; give output_padding "
                                      f"to the constructor instead")
        fn = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[self._n - 1]
        return fn(input, self.weight, self.bias, self.stride, self.padding, self.output_padding, self.groups,
                  self.dilation)


class ConvTranspose1d(_ConvTranspose):
    """A transposed 1-D convolution layer (`weight` `[in, out/groups, k]`), as `torch.nn.ConvTranspose1d`.

    >>> aotjax.nn.ConvTranspose1d(2, 3, 3, stride=2)(aotjax.ones(1, 2, 4)).shape
    (1, 3, 9)
    """

    _n = 1


class ConvTranspose2d(_ConvTranspose):
    """A transposed 2-D convolution layer, as `torch.nn.ConvTranspose2d`.

    >>> aotjax.nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1, output_padding=1)(aotjax.ones(1, 4, 5, 5)).shape
    (1, 2, 10, 10)
    """

    _n = 2


class ConvTranspose3d(_ConvTranspose):
    """A transposed 3-D convolution layer, as `torch.nn.ConvTranspose3d`.

    >>> aotjax.nn.ConvTranspose3d(1, 1, 2, stride=2)(aotjax.ones(1, 1, 2, 2, 2)).shape
    (1, 1, 4, 4, 4)
    """

    _n = 3
