"""`Linear` and `Identity`, as `torch.nn`'s."""
from __future__ import annotations

import math

from aotjax.nn import init
from aotjax.nn.module import Module
from aotjax.nn.parameter import Parameter
from aotjax.ops.creation.factories import empty
from aotjax.ops.linalg.matmul import linear
from aotjax.ops.nn.linear import bilinear

__all__ = ["Bilinear", "Identity", "Linear"]


class Identity(Module):
    """Returns its input; any constructor arguments are ignored (a placeholder, as PyTorch's).

    >>> aotjax.nn.Identity(54, unused="x")(aotjax.ones(2))
    tensor([1., 1.])
    """

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """`y = x @ weight.T + bias`, `weight` of shape `[out_features, in_features]`. Initialized as PyTorch's:
    `weight` by `kaiming_uniform_(a=sqrt(5))` (uniform on ±1/sqrt(in_features)), `bias` uniform on
    ±1/sqrt(in_features). `device` is accepted and ignored (arrays live where jax puts them).

    >>> fc = aotjax.nn.Linear(3, 2)
    >>> fc(aotjax.ones(4, 3)).shape, fc
    ((4, 2), Linear(in_features=3, out_features=2, bias=True))
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(empty(out_features, in_features, dtype=dtype))
        if bias:
            self.bias = Parameter(empty(out_features, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw the weight and bias anew (PyTorch's default initialization)."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.in_features
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        return linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Bilinear(Module):
    """`y = x1^T W x2 + b`, `weight` of shape `[out_features, in1_features, in2_features]`; weight and bias
    initialized uniform on ±1/sqrt(in1_features), as `torch.nn.Bilinear`.

    >>> m = aotjax.nn.Bilinear(3, 2, 4)
    >>> m(aotjax.ones(5, 3), aotjax.ones(5, 2)).shape, m
    ((5, 4), Bilinear(in1_features=3, in2_features=2, out_features=4, bias=True))
    """

    def __init__(self, in1_features: int, in2_features: int, out_features: int, bias: bool = True, device=None,
                 dtype=None):
        super().__init__()
        self.in1_features, self.in2_features, self.out_features = in1_features, in2_features, out_features
        self.weight = Parameter(empty(out_features, in1_features, in2_features, dtype=dtype))
        if bias:
            self.bias = Parameter(empty(out_features, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw the weight and bias anew (PyTorch's default initialization)."""
        bound = 1 / math.sqrt(self.weight.shape[1]) if self.weight.shape[1] else 0.0
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        return bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")
