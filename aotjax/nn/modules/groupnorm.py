"""`GroupNorm`, `InstanceNorm1d/2d/3d`, `LocalResponseNorm` and the channel-wise dropouts (`Dropout1d/2d/3d`,
`AlphaDropout`, `FeatureAlphaDropout`), as `torch.nn`'s."""
from __future__ import annotations

from aotjax.core.errors import ShapeError
from aotjax.nn import init
from aotjax.nn.module import Module
from aotjax.nn.modules.batchnorm import _BatchNorm
from aotjax.nn.parameter import Parameter
from aotjax.ops.creation.factories import empty
from aotjax.ops.nn import normalization as N

__all__ = ["GroupNorm", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "LocalResponseNorm", "Dropout1d",
           "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout"]


class GroupNorm(Module):
    """Normalizes each of `num_groups` groups of channels of each sample, then applies the per-channel affine
    `weight` (ones) and `bias` (zeros) when `affine`.

    >>> aotjax.nn.GroupNorm(1, 2, eps=0.0)(aotjax.tensor([[1.0, 3.0]]))
    tensor([[-1.,  1.]], grad_fn=<AddBackward0>)
    """

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True, device=None,
                 dtype=None, *, bias: bool = True):
        super().__init__()
        if num_channels % num_groups:
            raise ValueError("num_channels must be divisible by num_groups")
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine
        if affine:
            self.weight = Parameter(empty(num_channels, dtype=dtype))
            if bias:
                self.bias = Parameter(empty(num_channels, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Weight to ones, bias to zeros."""
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def forward(self, input):
        return N.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")


class _InstanceNorm(_BatchNorm):
    """`_BatchNorm`'s parameters and buffers (other defaults: no affine, no running statistics) with instance
    statistics: see `InstanceNorm1d`."""

    _spatial = 0

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = False,
                 track_running_stats: bool = False, device=None, dtype=None, *, bias: bool = True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)

    def forward(self, input):
        name = type(self).__name__
        if input.ndim not in (self._spatial + 1, self._spatial + 2):
            raise ShapeError(f"{name}: expected {self._spatial + 1}D (unbatched) or {self._spatial + 2}D (batched) "
                             f"input, got {input.ndim}D input of shape {list(input.shape)}")
        unbatched = input.ndim == self._spatial + 1
        x = input.unsqueeze(0) if unbatched else input
        if x.shape[1] != self.num_features and self.affine:
            raise ShapeError(f"{name}: expected input's size at dim=1 to match num_features ({self.num_features}), "
                             f"but got: {x.shape[1]}.")
        use_input_stats = self.training or not self.track_running_stats
        y = N.instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias, use_input_stats,
                            self.momentum if self.momentum is not None else 0.0, self.eps)
        return y.squeeze(0) if unbatched else y


class InstanceNorm1d(_InstanceNorm):
    """Normalizes each channel of each sample of an `[N, C, L]` (or `[C, L]`) input over `L`; `affine` adds a
    per-channel weight and bias, `track_running_stats` keeps running estimates used in evaluation.

    >>> aotjax.nn.InstanceNorm1d(1, eps=0.0)(aotjax.tensor([[[1.0, 3.0]]]))
    tensor([[[-1.,  1.]]])
    """

    _spatial = 1


class InstanceNorm2d(_InstanceNorm):
    """`InstanceNorm1d` for `[N, C, H, W]` (or `[C, H, W]`) inputs.

    >>> aotjax.nn.InstanceNorm2d(1, eps=0.0)(aotjax.tensor([[[[1.0, 3.0]]]]))
    tensor([[[[-1.,  1.]]]])
    """

    _spatial = 2


class InstanceNorm3d(_InstanceNorm):
    """`InstanceNorm1d` for `[N, C, D, H, W]` (or `[C, D, H, W]`) inputs.

    >>> aotjax.nn.InstanceNorm3d(1, eps=0.0)(aotjax.tensor([[[[[1.0, 3.0]]]]]))
    tensor([[[[[-1.,  1.]]]]])
    """

    _spatial = 3


class LocalResponseNorm(Module):
    """`local_response_norm` over `size` neighbouring channels.

    >>> aotjax.nn.LocalResponseNorm(2, alpha=1.0, beta=1.0, k=0.0)(aotjax.ones(1, 2, 1)).flatten()
    tensor([2., 1.])
    """

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input):
        return N.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


class _DropoutNd(Module):
    _fn = staticmethod(N.dropout1d)

    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, input):
        return type(self)._fn(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout1d(_DropoutNd):
    """In training, zeroes whole channels of an `[N, C, L]` (or `[C, L]`) input with probability `p`, scaling
    the rest by `1 / (1 - p)`; the identity in evaluation.

    >>> aotjax.nn.Dropout1d().eval()(aotjax.ones(1, 2, 2)).shape
    (1, 2, 2)
    """

    _fn = staticmethod(N.dropout1d)


class Dropout2d(_DropoutNd):
    """`Dropout1d` for `[N, C, H, W]` (or `[C, H, W]`) inputs.

    >>> aotjax.nn.Dropout2d().eval()(aotjax.ones(1, 2, 2, 2)).shape
    (1, 2, 2, 2)
    """

    _fn = staticmethod(N.dropout2d)


class Dropout3d(_DropoutNd):
    """`Dropout1d` for `[N, C, D, H, W]` (or `[C, D, H, W]`) inputs.

    >>> aotjax.nn.Dropout3d().eval()(aotjax.ones(1, 2, 1, 1, 1)).shape
    (1, 2, 1, 1, 1)
    """

    _fn = staticmethod(N.dropout3d)


class AlphaDropout(_DropoutNd):
    """`alpha_dropout` in training (keeps SELU's self-normalization), the identity in evaluation.

    >>> aotjax.nn.AlphaDropout().eval()(aotjax.ones(2))
    tensor([1., 1.])
    """

    _fn = staticmethod(N.alpha_dropout)


class FeatureAlphaDropout(_DropoutNd):
    """`feature_alpha_dropout` (whole channels) in training, the identity in evaluation.

    >>> aotjax.nn.FeatureAlphaDropout().eval()(aotjax.ones(1, 2)).shape
    (1, 2)
    """

    _fn = staticmethod(N.feature_alpha_dropout)
