"""The linear layers' functions of `torch.nn.functional`: `linear` (the matmul family's, aotjax/ops/linalg/matmul.py)
and `bilinear`, a composition of `einsum`."""
from __future__ import annotations

from aotjax.core.errors import ShapeError
from aotjax.core.source_info import where
from aotjax.ops.base.data import as_tensor
from aotjax.ops.linalg.matmul import (
    einsum,
    linear,  # noqa: F401  (F.linear)
    )

__all__ = ["bilinear"]
FUNCTIONAL = ["linear", "bilinear"]


# -- bilinear --------------------------------------------------------------------------------------------------------
def bilinear(input1, input2, weight, bias=None):
    """`y[..., o] = sum_ij input1[..., i] * weight[o, i, j] * input2[..., j] + bias[o]`, as
    `torch.nn.functional.bilinear` (leading dims of the inputs must agree).

    >>> aotjax.bilinear(aotjax.ones(2, 3), aotjax.ones(2, 2), aotjax.ones(4, 3, 2)).shape
    (2, 4)
    """
    x1, x2, w = as_tensor(input1), as_tensor(input2), as_tensor(weight)
    if w.ndim != 3:
        raise ShapeError(f"bilinear: weight must be 3-D [out_features, in1_features, in2_features], got shape "
                         f"{list(w.shape)}{where()}")
    if x1.ndim == 0 or x2.ndim == 0 or tuple(x1.shape[:-1]) != tuple(x2.shape[:-1]):
        raise ShapeError(f"bilinear: input1 and input2 must have the same leading dims, got shapes "
                         f"{list(x1.shape)} and {list(x2.shape)}{where()}")
    if (x1.shape[-1], x2.shape[-1]) != tuple(w.shape[1:]):
        raise ShapeError(f"bilinear: the last dims of input1 and input2 ({x1.shape[-1]}, {x2.shape[-1]}) must be "
                         f"weight's dims 1 and 2 ({w.shape[1]}, {w.shape[2]}){where()}")
    y = einsum("...i,oij,...j->...o", x1, w, x2)
    if bias is not None:
        y = y + as_tensor(bias)
    return y
