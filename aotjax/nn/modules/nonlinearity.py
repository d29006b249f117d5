"""The activation layers of `torch.nn` beyond those in activation.py (`ReLU`, `GELU`, `SiLU`, `Tanh`,
`Sigmoid`, `Softmax`): each calls its `aotjax.nn.functional` form with the arguments it was built with."""
from __future__ import annotations

import warnings

from aotjax.nn import init as nn_init
from aotjax.nn.module import Module
from aotjax.nn.parameter import Parameter
from aotjax.ops.creation.factories import full
from aotjax.ops.nn import activations as A
from aotjax.ops.nn.activations import log_softmax

__all__ = ["LeakyReLU", "ELU", "SELU", "CELU", "Softplus", "Hardtanh", "ReLU6", "Hardswish", "Hardsigmoid", "Mish",
           "LogSigmoid", "GLU", "PReLU", "RReLU", "Softsign", "Tanhshrink", "Softshrink", "Hardshrink", "Threshold",
           "LogSoftmax", "Softmin"]


class LeakyReLU(Module):
    """`x` where positive, `negative_slope * x` elsewhere.

    >>> aotjax.nn.LeakyReLU(0.5)(aotjax.tensor([-2.0, 1.0]))
    tensor([-1.,  1.])
    """

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False):
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, input):
        return A.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class ELU(Module):
    """`x` where positive, `alpha * (exp(x) - 1)` elsewhere.

    >>> aotjax.nn.ELU()(aotjax.tensor([0.0, 1.0]))
    tensor([0., 1.])
    """

    def __init__(self, alpha: float = 1.0, inplace: bool = False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input):
        return A.elu(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class SELU(Module):
    """The scaled ELU with the self-normalizing constants.

    >>> aotjax.nn.SELU()(aotjax.tensor([0.0]))
    tensor([0.])
    """

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return A.selu(input, self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class CELU(Module):
    """`max(0, x) + min(0, alpha * (exp(x / alpha) - 1))`.

    >>> aotjax.nn.CELU(2.0)(aotjax.tensor([0.0, 1.0]))
    tensor([0., 1.])
    """

    def __init__(self, alpha: float = 1.0, inplace: bool = False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input):
        return A.celu(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class Softplus(Module):
    """`log(1 + exp(beta * x)) / beta`, linear above `threshold`.

    >>> aotjax.nn.Softplus()(aotjax.tensor([30.0]))
    tensor([30.])
    """

    def __init__(self, beta: float = 1.0, threshold: float = 20.0):
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, input):
        return A.softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class Hardtanh(Module):
    """`x` clamped to `[min_val, max_val]`.

    >>> aotjax.nn.Hardtanh()(aotjax.tensor([-3.0, 3.0]))
    tensor([-1.,  1.])
    """

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False):
        super().__init__()
        if min_val > max_val:
            raise ValueError(f"Hardtanh: min_val ({min_val}) cannot be greater than max_val ({max_val})")
        self.min_val, self.max_val, self.inplace = min_val, max_val, inplace

    def forward(self, input):
        return A.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}" + (", inplace=True" if self.inplace else "")


class ReLU6(Hardtanh):
    """`min(max(x, 0), 6)`.

    >>> aotjax.nn.ReLU6()(aotjax.tensor([-1.0, 7.0]))
    tensor([0., 6.])
    """

    def __init__(self, inplace: bool = False):
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class Hardswish(Module):
    """`x * relu6(x + 3) / 6`.

    >>> aotjax.nn.Hardswish()(aotjax.tensor([4.0]))
    tensor([4.])
    """

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return A.hardswish(input, self.inplace)


class Hardsigmoid(Module):
    """`relu6(x + 3) / 6`.

    >>> aotjax.nn.Hardsigmoid()(aotjax.tensor([0.0]))
    tensor([0.5])
    """

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return A.hardsigmoid(input, self.inplace)


class Mish(Module):
    """`x * tanh(softplus(x))`.

    >>> aotjax.nn.Mish()(aotjax.tensor([0.0]))
    tensor([0.])
    """

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return A.mish(input, self.inplace)


class LogSigmoid(Module):
    """`log(sigmoid(x))`.

    >>> aotjax.nn.LogSigmoid()(aotjax.tensor([0.0])).exp()
    tensor([0.5])
    """

    def forward(self, input):
        return A.logsigmoid(input)


class GLU(Module):
    """`a * sigmoid(b)` for the halves `a`, `b` of the input along `dim`.

    >>> aotjax.nn.GLU()(aotjax.tensor([2.0, 0.0]))
    tensor([1.])
    """

    def __init__(self, dim: int = -1):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return A.glu(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class PReLU(Module):
    """`x` where positive, `weight * x` elsewhere; `weight` a learned slope, one (`num_parameters=1`) or one per
    channel, initialized to `init`.

    >>> prelu = aotjax.nn.PReLU()
    >>> prelu(aotjax.tensor([-4.0, 1.0])).tolist(), prelu.weight.tolist()
    ([-1.0, 1.0], [0.25])
    """

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters, self.init = num_parameters, init
        self.weight = Parameter(full((num_parameters,), init, dtype=dtype))

    def reset_parameters(self) -> None:
        """Every slope to `init`."""
        nn_init.constant_(self.weight, self.init)

    def forward(self, input):
        return A.prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class RReLU(Module):
    """Randomized leaky ReLU: in training, negative elements are scaled by slopes drawn uniformly from
    `[lower, upper]` (the default generator); in evaluation, by `(lower + upper) / 2`.

    >>> aotjax.nn.RReLU(0.25, 0.75).eval()(aotjax.tensor([-2.0]))
    tensor([-1.])
    """

    def __init__(self, lower: float = 1.0 / 8, upper: float = 1.0 / 3, inplace: bool = False):
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, input):
        return A.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"lower={self.lower}, upper={self.upper}" + (", inplace=True" if self.inplace else "")


class Softsign(Module):
    """`x / (1 + |x|)`.

    >>> aotjax.nn.Softsign()(aotjax.tensor([1.0]))
    tensor([0.5])
    """

    def forward(self, input):
        return A.softsign(input)


class Tanhshrink(Module):
    """`x - tanh(x)`.

    >>> aotjax.nn.Tanhshrink()(aotjax.tensor([0.0]))
    tensor([0.])
    """

    def forward(self, input):
        return A.tanhshrink(input)


class Softshrink(Module):
    """`x - lambd` above `lambd`, `x + lambd` below `-lambd`, 0 between.

    >>> aotjax.nn.Softshrink()(aotjax.tensor([1.0, 0.2]))
    tensor([0.5, 0. ])
    """

    def __init__(self, lambd: float = 0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, input):
        return A.softshrink(input, self.lambd)

    def extra_repr(self) -> str:
        return str(self.lambd)


class Hardshrink(Module):
    """`x` where `|x| > lambd`, 0 elsewhere.

    >>> aotjax.nn.Hardshrink()(aotjax.tensor([1.0, 0.2]))
    tensor([1., 0.])
    """

    def __init__(self, lambd: float = 0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, input):
        return A.hardshrink(input, self.lambd)

    def extra_repr(self) -> str:
        return str(self.lambd)


class Threshold(Module):
    """`x` where `x > threshold`, `value` elsewhere.

    >>> aotjax.nn.Threshold(0.5, -1.0)(aotjax.tensor([1.0, 0.2]))
    tensor([ 1., -1.])
    """

    def __init__(self, threshold: float, value: float, inplace: bool = False):
        super().__init__()
        self.threshold, self.value, self.inplace = threshold, value, inplace

    def forward(self, input):
        return A.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self) -> str:
        return f"threshold={self.threshold}, value={self.value}" + (", inplace=True" if self.inplace else "")


def _implicit_dim(name: str, input, dim):
    if dim is not None:
        return dim
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call to include dim=X as "
                  f"an argument.", stacklevel=3)
    return 0 if input.ndim in (0, 1, 3) else 1


class LogSoftmax(Module):
    """`log_softmax` along `dim` (`dim=None`: PyTorch's legacy implicit dim, with a warning).

    >>> aotjax.nn.LogSoftmax(dim=0)(aotjax.tensor([0.0, 0.0])).exp()
    tensor([0.5, 0.5])
    """

    def __init__(self, dim: int | None = None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return log_softmax(input, _implicit_dim("log_softmax", input, self.dim))

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmin(Module):
    """`softmax(-x)` along `dim` (`dim=None`: PyTorch's legacy implicit dim, with a warning).

    >>> aotjax.nn.Softmin(dim=0)(aotjax.tensor([0.0, 0.0]))
    tensor([0.5, 0.5])
    """

    def __init__(self, dim: int | None = None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return A.softmin(input, _implicit_dim("softmin", input, self.dim))

    def extra_repr(self) -> str:
        return f"dim={self.dim}"
