"""`aotjax.masked`: PyTorch's `torch.masked` reductions and normalizations for plain tensors with a boolean `mask=`
(masked-out elements do not contribute; there is no `MaskedTensor` class). The ops live in the op family
`aotjax.ops.reduce.masked`.

>>> aotjax.masked.mean(aotjax.tensor([1.0, 100.0, 3.0]), mask=aotjax.tensor([True, False, True]))
tensor(2.)
"""
from aotjax.ops.reduce.masked import (  # noqa: F401
    amax,
    amin,
    argmax,
    argmin,
    cumprod,
    cumsum,
    log_softmax,
    logaddexp,
    logsumexp,
    mean,
    median,
    norm,
    normalize,
    prod,
    softmax,
    softmin,
    std,
    sum,
    var,
)

__all__ = ["amax", "amin", "argmax", "argmin", "cumprod", "cumsum", "log_softmax", "logaddexp", "logsumexp", "mean",
           "median", "norm", "normalize", "prod", "softmax", "softmin", "std", "sum", "var"]
