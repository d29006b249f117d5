"""Activation functions of `torch.nn.functional` beyond the elementwise primitives (`relu`, `gelu`, `silu`, `sigmoid`,
`tanh`), `softmax` and `log_softmax` included: each a composition of existing ops, so every transform handles it with
no rules of its own. The in-place `_` forms write the result into their input (`x.copy_(f(x))`), as `F.elu_` and
friends.
"""
from __future__ import annotations

import numpy as np

from aotjax.core.errors import DTypeError, ShapeError
from aotjax.core.source_info import where
from aotjax.ops.base import autocast
from aotjax.ops.base.data import as_tensor
from aotjax.ops.base.frontend import canonical_dim, to_dtype
from aotjax.ops.base.promotion import is_float
from aotjax.ops.calls.eager_fusion import fused_when_eager
from aotjax.ops.math.elementwise import where as select
from aotjax.ops.random.generator import draw_key
from aotjax.ops.random.keys import uniform
from aotjax.tensor import method

# NOTE: the ones torch also has at its top level (`torch.selu`, ...) are `aotjax.X` too; all are in `F`
__all__ = ["softmax", "log_softmax", "selu", "selu_", "celu", "celu_", "prelu", "rrelu", "rrelu_", "hardshrink",
           "threshold", "threshold_"]
FUNCTIONAL = ["softmax", "log_softmax", "leaky_relu", "leaky_relu_", "elu", "elu_", "selu", "selu_", "celu", "celu_",
              "softplus", "hardtanh", "hardtanh_", "relu6", "hardswish", "hardsigmoid", "mish", "logsigmoid", "glu",
              "prelu", "softsign", "tanhshrink", "softshrink", "hardshrink", "threshold", "threshold_", "rrelu",
              "rrelu_", "softmin"]

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _out(x, y, inplace: bool):
    return x.copy_(y) if inplace else y


def _float(op: str, x):
    x = as_tensor(x)
    _float_input(op, x)  # NOTE: only the dtype check; these ops compute in the input's dtype
    return x


def leaky_relu(input, negative_slope: float = 0.01, inplace: bool = False):
    """`x` where positive, `negative_slope * x` elsewhere.

    >>> aotjax.nn.functional.leaky_relu(aotjax.tensor([-2.0, 3.0]), 0.5)
    tensor([-1.,  3.])
    """
    x = _float("leaky_relu", input)
    return _out(x, select(x > 0, x, x * negative_slope), inplace)


def leaky_relu_(input, negative_slope: float = 0.01):
    """In-place `leaky_relu`.

    >>> x = aotjax.tensor([-2.0, 3.0])
    >>> aotjax.nn.functional.leaky_relu_(x, 0.5) is x
    True
    """
    return leaky_relu(input, negative_slope, inplace=True)


def _elu(x, alpha: float, scale: float, input_scale: float):
    """torch's `elu` kernel: `scale * x` where positive, `scale * alpha * (exp(x * input_scale) - 1)` elsewhere."""
    negative = (x.clamp(max=0) * input_scale).expm1() * (alpha * scale)  # NOTE: clamped, so exp never overflows
    return select(x > 0, x * scale, negative)


def elu(input, alpha: float = 1.0, inplace: bool = False):
    """`x` where positive, `alpha * (exp(x) - 1)` elsewhere.

    >>> aotjax.nn.functional.elu(aotjax.tensor([0.0, 2.0]))
    tensor([0., 2.])
    """
    x = _float("elu", input)
    return _out(x, _elu(x, alpha, 1.0, 1.0), inplace)


def elu_(input, alpha: float = 1.0):
    """In-place `elu`.

    >>> x = aotjax.tensor([1.0])
    >>> aotjax.nn.functional.elu_(x) is x
    True
    """
    return elu(input, alpha, inplace=True)


def selu(input, inplace: bool = False):
    """`scale * elu(x, alpha)` with the self-normalizing constants `alpha ~ 1.6733`, `scale ~ 1.0507`.

    >>> aotjax.nn.functional.selu(aotjax.tensor([0.0]))
    tensor([0.])
    """
    x = _float("selu", input)
    return _out(x, _elu(x, _SELU_ALPHA, _SELU_SCALE, 1.0), inplace)


def selu_(input):
    """In-place `selu`.

    >>> x = aotjax.tensor([1.0])
    >>> aotjax.nn.functional.selu_(x) is x
    True
    """
    return selu(input, inplace=True)


def celu(input, alpha: float = 1.0, inplace: bool = False):
    """`max(0, x) + min(0, alpha * (exp(x / alpha) - 1))`.

    >>> aotjax.nn.functional.celu(aotjax.tensor([0.0, 2.0]), alpha=2.0)
    tensor([0., 2.])
    """
    if alpha == 0:
        raise ValueError(f"celu: alpha must not be zero{where()}")
    x = _float("celu", input)
    return _out(x, _elu(x, alpha, 1.0, 1.0 / alpha), inplace)


def celu_(input, alpha: float = 1.0):
    """In-place `celu`.

    >>> x = aotjax.tensor([1.0])
    >>> aotjax.nn.functional.celu_(x) is x
    True
    """
    return celu(input, alpha, inplace=True)


def softplus(input, beta: float = 1.0, threshold: float = 20.0):
    """`log(1 + exp(beta * x)) / beta`, and `x` itself where `beta * x > threshold` (for stability).

    >>> aotjax.nn.functional.softplus(aotjax.tensor([0.0, 30.0]))
    tensor([ 0.6931472, 30.       ])
    """
    x = _float("softplus", input)
    z = x * beta
    soft = z.clamp(max=threshold).exp().log1p() / beta  # NOTE: clamped: the unused branch stays finite
    return select(z > threshold, x, soft)


def hardtanh(input, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False):
    """`x` clamped to `[min_val, max_val]` (the derivative is 0 at and beyond the bounds, as in PyTorch).

    >>> aotjax.nn.functional.hardtanh(aotjax.tensor([-2.0, 0.5, 2.0]))
    tensor([-1. ,  0.5,  1. ])
    """
    if min_val > max_val:
        raise ValueError(f"hardtanh: min_val ({min_val}) cannot be greater than max_val ({max_val}){where()}")
    x = as_tensor(input)
    inside = (x > min_val).logical_and(x < max_val)
    clamped = x.detach().clamp(min_val, max_val).to(x.dtype)  # NOTE: an integer input stays integer, as in torch
    return _out(x, select(inside, x, clamped), inplace)


def hardtanh_(input, min_val: float = -1.0, max_val: float = 1.0):
    """In-place `hardtanh`.

    >>> x = aotjax.tensor([2.0])
    >>> aotjax.nn.functional.hardtanh_(x) is x
    True
    """
    return hardtanh(input, min_val, max_val, inplace=True)


def relu6(input, inplace: bool = False):
    """`min(max(x, 0), 6)`.

    >>> aotjax.nn.functional.relu6(aotjax.tensor([-1.0, 7.0]))
    tensor([0., 6.])
    """
    return hardtanh(input, 0.0, 6.0, inplace)


def hardsigmoid(input, inplace: bool = False):
    """`relu6(x + 3) / 6`, a piecewise-linear sigmoid.

    >>> aotjax.nn.functional.hardsigmoid(aotjax.tensor([-4.0, 0.0, 4.0]))
    tensor([0. , 0.5, 1. ])
    """
    x = _float("hardsigmoid", input)
    return _out(x, hardtanh(x + 3.0, 0.0, 6.0) / 6.0, inplace)


def hardswish(input, inplace: bool = False):
    """`x * relu6(x + 3) / 6`.

    >>> aotjax.nn.functional.hardswish(aotjax.tensor([-4.0, 0.0, 4.0]))
    tensor([-0.,  0.,  4.])
    """
    x = _float("hardswish", input)
    return _out(x, x * hardtanh(x + 3.0, 0.0, 6.0) / 6.0, inplace)


def mish(input, inplace: bool = False):
    """`x * tanh(softplus(x))`.

    >>> aotjax.nn.functional.mish(aotjax.tensor([0.0]))
    tensor([0.])
    """
    x = _float("mish", input)
    return _out(x, x * softplus(x).tanh(), inplace)


def logsigmoid(input):
    """`log(sigmoid(x))`, computed stably as `min(x, 0) - log(1 + exp(-|x|))`.

    >>> aotjax.nn.functional.logsigmoid(aotjax.tensor([0.0])).exp()
    tensor([0.5])
    """
    x = _float("logsigmoid", input)
    return x.clamp(max=0) - (-x.abs()).exp().log1p()


def glu(input, dim: int = -1):
    """The gated linear unit: `a * sigmoid(b)`, `a` and `b` the two halves of `input` along `dim`.

    >>> aotjax.nn.functional.glu(aotjax.tensor([2.0, 0.0]))
    tensor([1.])
    """
    x = _float("glu", input)
    if x.ndim == 0:
        raise ShapeError(f"glu does not support scalars because halving size must be even{where()}")
    d = canonical_dim(dim, x.ndim, "glu")
    n = x.shape[d]
    if n % 2:
        raise ShapeError(f"glu: Halving dimension must be even, but dimension {d} is size {n}{where()}")
    return x.narrow(d, 0, n // 2) * x.narrow(d, n // 2, n // 2).sigmoid()


def prelu(input, weight):
    """`x` where positive, `weight * x` elsewhere; `weight` holds one slope, or one per channel (dim 1 of the
    input, dim 0 of a 1-d input).

    >>> aotjax.nn.functional.prelu(aotjax.tensor([-2.0, 3.0]), aotjax.tensor([0.25]))
    tensor([-0.5,  3. ])
    """
    x, weight = _float("prelu", input), as_tensor(weight)
    if weight.numel() != 1:
        if x.ndim == 0:
            raise ShapeError(f"prelu: a 0-d input takes a single slope, got weight of shape "
                             f"{list(weight.shape)}{where()}")
        channels = x.shape[1] if x.ndim >= 2 else x.shape[0]
        if weight.ndim != 1 or weight.shape[0] != channels:
            raise ShapeError(f"prelu: mismatch of parameter numbers and input channel size: weight has "
                             f"{weight.numel()} elements (shape {list(weight.shape)}), the input ({list(x.shape)}) "
                             f"has {channels} channels{where()}")
        weight = weight.reshape((-1,) + (1,) * (x.ndim - 2)) if x.ndim >= 2 else weight
    elif weight.ndim > 0:
        weight = weight.reshape(())
    return select(x > 0, x, weight * x)


def rrelu(input, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False, inplace: bool = False,
          *, generator=None):
    """Randomized leaky ReLU: in training, each negative element is scaled by a slope drawn uniformly from
    `[lower, upper]` (from `generator`, default the default generator); in evaluation, by `(lower + upper) / 2`.

    >>> aotjax.nn.functional.rrelu(aotjax.tensor([-3.0, 1.0]), 0.25, 0.75)
    tensor([-1.5,  1. ])
    """
    x = _float("rrelu", input)
    if not training:
        return _out(x, select(x > 0, x, x * ((lower + upper) / 2)), inplace)
    key = draw_key("rrelu", generator)
    slope = uniform(key, tuple(x.shape), x.dtype, lower, upper)
    return _out(x, select(x > 0, x, x * slope), inplace)


def rrelu_(input, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False, *, generator=None):
    """In-place `rrelu`.

    >>> x = aotjax.tensor([-1.0])
    >>> aotjax.nn.functional.rrelu_(x) is x
    True
    """
    return rrelu(input, lower, upper, training, inplace=True, generator=generator)


def softsign(input):
    """`x / (1 + |x|)`.

    >>> aotjax.nn.functional.softsign(aotjax.tensor([1.0, -3.0]))
    tensor([ 0.5 , -0.75])
    """
    x = as_tensor(input)
    return x / (x.abs() + 1)


def tanhshrink(input):
    """`x - tanh(x)`.

    >>> aotjax.nn.functional.tanhshrink(aotjax.tensor([0.0]))
    tensor([0.])
    """
    x = as_tensor(input)
    return x - x.tanh()


def softshrink(input, lambd: float = 0.5):
    """`x - lambd` above `lambd`, `x + lambd` below `-lambd`, 0 between.

    >>> aotjax.nn.functional.softshrink(aotjax.tensor([-2.0, 0.1, 2.0]))
    tensor([-1.5,  0. ,  1.5])
    """
    if lambd < 0:
        raise ValueError(f"softshrink: lambda must be greater or equal to 0, but found to be {lambd}{where()}")
    x = _float("softshrink", input)
    return select(x > lambd, x - lambd, select(x < -lambd, x + lambd, x * 0))


def hardshrink(input, lambd: float = 0.5):
    """`x` where `|x| > lambd`, 0 elsewhere.

    >>> aotjax.nn.functional.hardshrink(aotjax.tensor([-2.0, 0.1, 2.0]))
    tensor([-2.,  0.,  2.])
    """
    x = _float("hardshrink", input)
    return select((x > lambd).logical_or(x < -lambd), x, x * 0)


def threshold(input, threshold: float, value: float, inplace: bool = False):
    """`x` where `x > threshold`, `value` elsewhere.

    >>> aotjax.nn.functional.threshold(aotjax.tensor([1.0, 3.0]), 2.0, -1.0)
    tensor([-1.,  3.])
    """
    x = as_tensor(input)
    return _out(x, select(x > threshold, x, x.detach() * 0 + value), inplace)


def threshold_(input, threshold: float, value: float):
    """In-place `threshold`.

    >>> x = aotjax.tensor([1.0])
    >>> aotjax.nn.functional.threshold_(x, 2.0, 0.0) is x
    True
    """
    return globals()["threshold"](input, threshold, value, inplace=True)


def softmin(input, dim: int, dtype=None):
    """`softmax(-x, dim)`.

    >>> aotjax.nn.functional.softmin(aotjax.tensor([0.0, 0.0]), dim=0)
    tensor([0.5, 0.5])
    """
    return softmax(-as_tensor(input), dim, dtype)


_LOW_PRECISION = (np.dtype(np.float16), to_dtype("bfloat16"))


def _float_input(op: str, x, dtype=None):
    """`x` (converted to `dtype` if given), and the dtype to compute in: float32 for float16 and
    bfloat16 inputs, whose results are cast back (as PyTorch computes them). `x` is made contiguous:
    PyTorch's kernels for these ops (softmax, log_softmax, layer_norm, rms_norm) give a contiguous result
    whatever the input's layout, and the elementwise ops computing them here keep `x`'s layout."""
    x = as_tensor(x)
    if dtype is not None:
        x = x.to(to_dtype(dtype, op))
    if not is_float(x.dtype):
        raise DTypeError(f"{op}: expected a floating-point tensor, got {x.aval.str_short()}{where()}; convert it "
                         f"first, e.g. `x.float()`")
    return (x.float() if x.dtype in _LOW_PRECISION else x).contiguous(), x.dtype


# -- softmax ---------------------------------------------------------------------------------------
@autocast.float32_on_gpu
@fused_when_eager("SoftmaxBackward0")
def softmax(input, dim: int, dtype=None):
    """`exp(x) / sum(exp(x))` along `dim`, computed stably (the max is subtracted first).

    >>> aotjax.softmax(aotjax.tensor([0.0, 0.0]), dim=0)
    tensor([0.5, 0.5])
    """
    input, out_dtype = _float_input("softmax", input, dtype)
    dim = canonical_dim(dim, input.ndim, "softmax")
    if input.numel() == 0:  # NOTE: an empty result, as in torch (the max of an empty dim is undefined)
        return input.clone().to(out_dtype)
    # NOTE: the max is taken of `x` detached: any shift gives the same softmax, so the shift's derivative
    # is exactly zero and need not be computed (as in `jax.nn.softmax`).
    e = (input - input.detach().amax(dim, keepdim=True)).exp()
    return (e / e.sum(dim, keepdim=True)).to(out_dtype)


@autocast.float32_on_gpu
@fused_when_eager("LogSoftmaxBackward0")
def log_softmax(input, dim: int, dtype=None):
    """`log(softmax(x, dim))`, computed stably as `x - max - log(sum(exp(x - max)))`.

    >>> aotjax.log_softmax(aotjax.tensor([0.0, 0.0]), dim=0).exp()
    tensor([0.5, 0.5])
    """
    input, out_dtype = _float_input("log_softmax", input, dtype)
    dim = canonical_dim(dim, input.ndim, "log_softmax")
    if input.numel() == 0:  # NOTE: an empty result, as in torch (the max of an empty dim is undefined)
        return input.clone().to(out_dtype)
    shifted = input - input.detach().amax(dim, keepdim=True)  # NOTE: detached, as in `softmax`
    return (shifted - shifted.exp().sum(dim, keepdim=True).log()).to(out_dtype)


# -- Tensor methods --------------------------------------------------------------------------------
method(softmax)


method(log_softmax)
