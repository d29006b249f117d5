"""The layers of these `torch.nn.functional` ops: `Bilinear`, `CTCLoss`, `ChannelShuffle`,
`TripletMarginWithDistanceLoss`, `MultiLabelMarginLoss`, `MaxUnpool1d/2d/3d`, as `torch.nn`'s."""
from __future__ import annotations

import math

from aotjax.nn import functional as E
from aotjax.nn import init
from aotjax.nn.module import Module
from aotjax.nn.modules.loss import _Loss
from aotjax.nn.parameter import Parameter
from aotjax.ops.creation.factories import empty

__all__ = ["Bilinear", "CTCLoss", "ChannelShuffle", "TripletMarginWithDistanceLoss", "MultiLabelMarginLoss",
           "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d"]


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
        return E.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")


class CTCLoss(_Loss):
    """`ctc_loss(log_probs, targets, input_lengths, target_lengths, blank, reduction, zero_infinity)`.

    >>> lp = aotjax.tensor([[[0.5, 0.5]], [[0.5, 0.5]]]).log()
    >>> aotjax.nn.CTCLoss(reduction="sum")(lp, aotjax.tensor([[1]]), [2], [1])
    tensor(0.2876821)
    """

    def __init__(self, blank: int = 0, reduction: str = "mean", zero_infinity: bool = False):
        super().__init__(reduction)
        self.blank, self.zero_infinity = blank, zero_infinity

    def forward(self, log_probs, targets, input_lengths, target_lengths):
        return E.ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank, self.reduction,
                          self.zero_infinity)


class ChannelShuffle(Module):
    """`channel_shuffle(input, groups)`.

    >>> aotjax.nn.ChannelShuffle(2)(aotjax.arange(4.0).reshape(1, 4, 1)).flatten()
    tensor([0., 2., 1., 3.])
    """

    def __init__(self, groups: int):
        super().__init__()
        self.groups = groups

    def forward(self, input):
        return E.channel_shuffle(input, self.groups)

    def extra_repr(self) -> str:
        return f"groups={self.groups}"


class TripletMarginWithDistanceLoss(_Loss):
    """`triplet_margin_with_distance_loss(anchor, positive, negative, ...)` with a distance function.

    >>> a = aotjax.tensor([[0.0, 0.0]])
    >>> aotjax.nn.TripletMarginWithDistanceLoss(distance_function=lambda x, y: (x - y).abs().sum(-1))(a, a, a + 2)
    tensor(0.)
    """

    def __init__(self, *, distance_function=None, margin: float = 1.0, swap: bool = False, reduction: str = "mean"):
        super().__init__(reduction)
        self.distance_function, self.margin, self.swap = distance_function, margin, swap

    def forward(self, anchor, positive, negative):
        return E.triplet_margin_with_distance_loss(anchor, positive, negative, distance_function=self.distance_function,
                                                   margin=self.margin, swap=self.swap, reduction=self.reduction)


class MultiLabelMarginLoss(_Loss):
    """`multilabel_margin_loss(input, target, reduction)`.

    >>> aotjax.nn.MultiLabelMarginLoss()(aotjax.tensor([[0.125, 0.25, 0.5, 1.0]]), aotjax.tensor([[3, 0, -1, 1]]))
    tensor(0.8125)
    """

    def forward(self, input, target):
        return E.multilabel_margin_loss(input, target, self.reduction)


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

    _fn = staticmethod(E.max_unpool1d)


class MaxUnpool2d(_MaxUnpool):
    """`max_unpool2d(input, indices, kernel_size, stride, padding, output_size)`.

    >>> aotjax.nn.MaxUnpool2d(2)(aotjax.tensor([[[5.0]]]), aotjax.tensor([[[3]]])).shape
    (1, 2, 2)
    """

    _fn = staticmethod(E.max_unpool2d)


class MaxUnpool3d(_MaxUnpool):
    """`max_unpool3d(input, indices, kernel_size, stride, padding, output_size)`.

    >>> aotjax.nn.MaxUnpool3d(2)(aotjax.tensor([[[[5.0]]]]), aotjax.tensor([[[[7]]]])).shape
    (1, 2, 2, 2)
    """

    _fn = staticmethod(E.max_unpool3d)
