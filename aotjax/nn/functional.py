"""The functional forms of neural-network layers and losses, as `torch.nn.functional`.

>>> import aotjax.nn.functional as F
>>> F.softmax(aotjax.tensor([1.0, 1.0]), dim=-1)
tensor([0.5, 0.5])
"""
from aotjax import ops
from aotjax.ops.nn import activations as _activations
from aotjax.ops.nn import attention as _attention
from aotjax.ops.nn import conv as _conv
from aotjax.ops.nn import linear as _linear
from aotjax.ops.nn import losses as _losses
from aotjax.ops.nn import normalization as _normalization
from aotjax.ops.nn import pooling as _pooling
from aotjax.ops.nn import resampling as _resampling
from aotjax.ops.nn import sparse as _sparse

# NOTE: each family of aotjax/ops/nn/ lists its `torch.nn.functional` names in `FUNCTIONAL`.
_FAMILIES = (_activations, _attention, _conv, _linear, _losses, _normalization, _pooling, _resampling, _sparse)
globals().update({name: getattr(family, name) for family in _FAMILIES for name in family.FUNCTIONAL})
__all__ = [name for family in _FAMILIES for name in family.FUNCTIONAL]

# Activations are elementwise ops of `aotjax` itself; `F.relu(x)` is `aotjax.relu(x)`, as in PyTorch.
_ACTIVATIONS = ("relu", "gelu", "silu", "sigmoid", "tanh", "relu_", "silu_")


def __getattr__(name: str):
    if name in _ACTIVATIONS:
        return getattr(ops, name)
    raise AttributeError(f"module 'aotjax.nn.functional' has no attribute {name!r}")
