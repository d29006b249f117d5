"""`Linear` and `Identity`, as `torch.nn`'s."""
from __future__ import annotations

import math

from aotjax.nn import init
from aotjax.nn.module import Module
from aotjax.nn.parameter import Parameter
from aotjax.ops.creation.factories import empty
from aotjax.ops.linalg.matmul import linear

__all__ = ["Identity", "Linear"]


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
