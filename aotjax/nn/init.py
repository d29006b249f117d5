"""Parameter initializations, as `torch.nn.init`: each fills a tensor in place (and returns it), drawing from
a stateful generator (`generator=`, default: the default generator, `aotjax.manual_seed`).

PyTorch's numbers cannot be reproduced (another random number generator); the distributions are PyTorch's.

>>> w = aotjax.empty(3, 5)
>>> _ = aotjax.nn.init.xavier_uniform_(w)
>>> bool(w.abs().max() <= (6 / (3 + 5)) ** 0.5)
True
"""
from __future__ import annotations

import functools
import math
import warnings

import numpy as np

from aotjax.core.interpreter import grad_mode
from aotjax.core.source_info import where
from aotjax.ops.creation.factories import empty, eye
from aotjax.ops.linalg.decompositions import qr
from aotjax.ops.random.generator import Generator
from aotjax.tensor import Tensor

__all__ = ["calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_", "eye_",
           "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "orthogonal_", "dirac_",
           "sparse_"]

_LINEAR_GAIN = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
                "sigmoid")


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for `nonlinearity` (`'linear'`, `'conv2d'`, `'sigmoid'`: 1, `'tanh'`: 5/3,
    `'relu'`: sqrt(2), `'leaky_relu'`: sqrt(2 / (1 + slope**2)) with `param` the slope (0.01 by default),
    `'selu'`: 3/4).

    >>> aotjax.nn.init.calculate_gain("tanh")
    1.6666666666666667
    """
    if nonlinearity in _LINEAR_GAIN:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    if tensor.ndim < 2:
        raise ValueError(f"Fan in and fan out can not be computed for tensor with fewer than 2 dimensions (got "
                         f"shape {list(tensor.shape)}){where()}")
    receptive = math.prod(tensor.shape[2:])
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _fan(tensor: Tensor, mode: str) -> int:
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator: Generator | None = None) -> Tensor:
    """Fill `tensor` with values drawn uniformly from [a, b).

    >>> w = aotjax.nn.init.uniform_(aotjax.empty(100), -1.0, 1.0)
    >>> bool((w >= -1).all() and (w < 1).all())
    True
    """
    return tensor.uniform_(a, b, generator=generator)


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator: Generator | None = None) -> Tensor:
    """Fill `tensor` with values drawn from the normal distribution N(mean, std**2).

    >>> aotjax.nn.init.normal_(aotjax.empty(2, 3), std=0.02).shape
    (2, 3)
    """
    return tensor.normal_(mean, std, generator=generator)


def _erfinv(y: Tensor) -> Tensor:
    """The inverse error function on (-1, 1): Winitzki's closed-form approximation (relative error ~2e-3)
    refined by two Newton steps on `erf(x) = y` (to the float's precision)."""
    a = 0.147
    log_term = (1 - y * y).log()
    first = 2 / (math.pi * a) + log_term / 2
    x = y.sign() * ((first * first - log_term / a).sqrt() - first).sqrt()
    for _ in range(2):
        x = x - (x.erf() - y) / ((-(x * x)).exp() * (2 / math.sqrt(math.pi)))
    return x


def trunc_normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0,
                  generator: Generator | None = None) -> Tensor:
    """Fill `tensor` with values drawn from N(mean, std**2) truncated to [a, b] (by inverting the normal
    distribution function on uniform draws, as PyTorch).

    >>> w = aotjax.nn.init.trunc_normal_(aotjax.empty(1000), std=1.0, a=-0.5, b=0.5)
    >>> bool((w.abs() <= 0.5).all())
    True
    """
    def cdf(v):
        return (1.0 + math.erf(v / math.sqrt(2.0))) / 2.0

    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The distribution of values "
                      "may be incorrect.", stacklevel=2)
    lo, hi = cdf((a - mean) / std), cdf((b - mean) / std)
    u = empty(*tensor.shape, dtype=np.float32).uniform_(2 * lo - 1, 2 * hi - 1, generator=generator)
    eps = 1e-7  # NOTE: keeps erfinv's argument inside (-1, 1) in float32
    x = _erfinv(u.clamp(-1 + eps, 1 - eps)) * (std * math.sqrt(2.0)) + mean
    return tensor.copy_(x.clamp(a, b))


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Fill `tensor` with `val`.

    >>> aotjax.nn.init.constant_(aotjax.empty(2), 0.5)
    tensor([0.5, 0.5])
    """
    return tensor.fill_(val)


def ones_(tensor: Tensor) -> Tensor:
    """Fill `tensor` with ones.

    >>> aotjax.nn.init.ones_(aotjax.empty(2))
    tensor([1., 1.])
    """
    return tensor.fill_(1)


def zeros_(tensor: Tensor) -> Tensor:
    """Fill `tensor` with zeros.

    >>> aotjax.nn.init.zeros_(aotjax.ones(2))
    tensor([0., 0.])
    """
    return tensor.zero_()


def eye_(tensor: Tensor) -> Tensor:
    """Fill the 2-D `tensor` with the identity matrix (ones on the diagonal, zeros elsewhere).

    >>> aotjax.nn.init.eye_(aotjax.empty(2, 3))
    tensor([[1., 0., 0.],
            [0., 1., 0.]])
    """
    if tensor.ndim != 2:
        raise ValueError(f"Only tensors with 2 dimensions are supported, got shape {list(tensor.shape)}{where()}")
    return tensor.copy_(eye(*tensor.shape, dtype=tensor.dtype))


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator: Generator | None = None) -> Tensor:
    """Glorot initialization: uniform on [-bound, bound], `bound = gain * sqrt(6 / (fan_in + fan_out))`.

    >>> w = aotjax.nn.init.xavier_uniform_(aotjax.empty(4, 4))
    >>> bool(w.abs().max() <= 3 ** 0.5 / 2)
    True
    """
    fan_in, fan_out = _fan_in_and_fan_out(tensor)
    bound = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return tensor.uniform_(-bound, bound, generator=generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator: Generator | None = None) -> Tensor:
    """Glorot initialization: N(0, std**2), `std = gain * sqrt(2 / (fan_in + fan_out))`.

    >>> aotjax.nn.init.xavier_normal_(aotjax.empty(4, 4)).shape
    (4, 4)
    """
    fan_in, fan_out = _fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return tensor.normal_(0.0, std, generator=generator)


def _kaiming_std(tensor: Tensor, a: float, mode: str, nonlinearity: str) -> float | None:
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=3)
        return None
    return calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode))


def kaiming_uniform_(tensor: Tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                     generator: Generator | None = None) -> Tensor:
    """He initialization: uniform on [-bound, bound], `bound = gain * sqrt(3 / fan)` with `gain =
    calculate_gain(nonlinearity, a)` and `fan` the fan-in or fan-out (`mode`). `Linear`'s weight default is
    `kaiming_uniform_(w, a=math.sqrt(5))`.

    >>> w = aotjax.nn.init.kaiming_uniform_(aotjax.empty(8, 6), nonlinearity="relu")
    >>> bool(w.abs().max() <= (6 / 6) ** 0.5)
    True
    """
    std = _kaiming_std(tensor, a, mode, nonlinearity)
    if std is None:
        return tensor
    bound = math.sqrt(3.0) * std
    return tensor.uniform_(-bound, bound, generator=generator)


def kaiming_normal_(tensor: Tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                    generator: Generator | None = None) -> Tensor:
    """He initialization: N(0, std**2), `std = gain / sqrt(fan)` (see `kaiming_uniform_`).

    >>> aotjax.nn.init.kaiming_normal_(aotjax.empty(8, 6), mode="fan_out").shape
    (8, 6)
    """
    std = _kaiming_std(tensor, a, mode, nonlinearity)
    if std is None:
        return tensor
    return tensor.normal_(0.0, std, generator=generator)


def orthogonal_(tensor: Tensor, gain: float = 1.0, generator: Generator | None = None) -> Tensor:
    """Fill `tensor` (2 or more dims, the trailing ones flattened) with a (semi-)orthogonal matrix times `gain`:
    the Q of the QR decomposition of a standard normal draw, its columns' signs fixed by R's diagonal (Saxe et al.
    2013), as torch does.

    >>> w = aotjax.nn.init.orthogonal_(aotjax.empty(3, 5))
    >>> bool(((w @ w.T) - aotjax.eye(3)).abs().max() < 1e-5)
    True
    """
    if tensor.ndim < 2:
        raise ValueError(f"Only tensors with 2 or more dimensions are supported, got shape {list(tensor.shape)}"
                         f"{where()}")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    flat = empty(rows, cols, dtype=tensor.dtype).normal_(0.0, 1.0, generator=generator)
    q, r = qr(flat.T if rows < cols else flat)
    q = q * r.diagonal().sign()
    return tensor.copy_((q.T if rows < cols else q).reshape(tensor.shape) * gain)


def dirac_(tensor: Tensor, groups: int = 1) -> Tensor:
    """Fill the 3-, 4- or 5-D convolution weight `tensor` with the Dirac delta: a convolution that keeps as many
    input channels as it can, in each of `groups` groups of output channels.

    >>> aotjax.nn.init.dirac_(aotjax.empty(2, 2, 3))
    tensor([[[0., 1., 0.],
             [0., 0., 0.]],
    <BLANKLINE>
            [[0., 0., 0.],
             [0., 1., 0.]]])
    """
    if tensor.ndim not in (3, 4, 5):
        raise ValueError(f"Only tensors with 3, 4, or 5 dimensions are supported, got shape {list(tensor.shape)}"
                         f"{where()}")
    if tensor.shape[0] % groups != 0:
        raise ValueError(f"dim 0 must be divisible by groups, got shape {list(tensor.shape)} and groups={groups}"
                         f"{where()}")
    out_per_group = tensor.shape[0] // groups
    delta = np.zeros(tensor.shape, dtype=np.float32)
    centre = tuple(k // 2 for k in tensor.shape[2:])
    for g in range(groups):
        for d in range(min(out_per_group, tensor.shape[1])):
            delta[(g * out_per_group + d, d) + centre] = 1.0
    return tensor.copy_(tensor.new_tensor(delta))


def sparse_(tensor: Tensor, sparsity: float, std: float = 0.01, generator: Generator | None = None) -> Tensor:
    """Fill the 2-D `tensor` from N(0, std**2), then zero `ceil(sparsity * rows)` randomly chosen rows of each
    column (Martens 2010), as torch does.

    >>> w = aotjax.nn.init.sparse_(aotjax.empty(4, 3), sparsity=0.5)
    >>> (w == 0).sum(0).tolist()
    [2, 2, 2]
    """
    if tensor.ndim != 2:
        raise ValueError(f"Only tensors with 2 dimensions are supported, got shape {list(tensor.shape)}{where()}")
    rows, cols = tensor.shape
    tensor.normal_(0.0, std, generator=generator)
    ranks = empty(rows, cols).uniform_(generator=generator).argsort(dim=0).argsort(dim=0)
    return tensor.masked_fill_(ranks < math.ceil(sparsity * rows), 0.0)


def _without_grad(fn):
    """`fn` run under `no_grad()`: initializing a parameter in place is not part of any graph (as torch's)."""
    @functools.wraps(fn)
    def init(*args, **kwargs):
        with grad_mode(False):
            return fn(*args, **kwargs)
    return init


for _name in __all__:
    if _name.endswith("_"):
        globals()[_name] = _without_grad(globals()[_name])
del _name
