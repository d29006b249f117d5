"""`LayerNorm` and `RMSNorm`, as `torch.nn`'s."""
from __future__ import annotations

import numbers

from aotjax.nn import init
from aotjax.nn.module import Module
from aotjax.nn.parameter import Parameter
from aotjax.ops.creation.factories import empty
from aotjax.ops.nn.normalization import layer_norm, rms_norm

__all__ = ["LayerNorm", "RMSNorm"]


def _shape(normalized_shape) -> tuple[int, ...]:
    if isinstance(normalized_shape, numbers.Integral):
        return (int(normalized_shape),)
    return tuple(int(s) for s in normalized_shape)


class LayerNorm(Module):
    """Normalizes over the trailing `normalized_shape` dims (mean 0, biased variance 1, `eps` added), then
    applies the elementwise affine `weight` (ones) and `bias` (zeros) when `elementwise_affine` (`bias=False`
    drops the bias).

    >>> ln = aotjax.nn.LayerNorm(2, eps=0.0)
    >>> ln(aotjax.tensor([[1.0, 3.0]]))
    tensor([[-1.,  1.]], grad_fn=<NativeLayerNormBackward0>)
    >>> ln
    LayerNorm((2,), eps=0.0, elementwise_affine=True, bias=True)
    """

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True, bias: bool = True,
                 device=None, dtype=None):
        super().__init__()
        self.normalized_shape = _shape(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(empty(*self.normalized_shape, dtype=dtype))
            if bias:
                self.bias = Parameter(empty(*self.normalized_shape, dtype=dtype))
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
        return layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}, "
                f"bias={self.bias is not None}")


class RMSNorm(Module):
    """`x / sqrt(mean(x**2) + eps)` over the trailing `normalized_shape` dims, times `weight` (ones) when
    `elementwise_affine`; `eps=None` is the machine epsilon of the input's dtype.

    >>> aotjax.nn.RMSNorm([2], eps=0.0)(aotjax.tensor([2.0, -2.0]))
    tensor([ 1., -1.], grad_fn=<MulBackward0>)
    """

    def __init__(self, normalized_shape, eps: float | None = None, elementwise_affine: bool = True, device=None,
                 dtype=None):
        super().__init__()
        self.normalized_shape = _shape(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(empty(*self.normalized_shape, dtype=dtype))
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Weight to ones."""
        if self.weight is not None:
            init.ones_(self.weight)

    def forward(self, input):
        return rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"
