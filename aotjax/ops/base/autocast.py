"""Autocast's op policy (`aotjax.autocast`, PyTorch's automatic mixed precision): inside an autocast region the
ops on its lists cast their floating-point operands before computing, as torch's do:

- `lower`: the ops that gain from low precision (matrix products, `linear`, convolutions, attention) compute in the
  region's dtype (bfloat16 or float16);
- `float32`: the ops that lose accuracy in it compute in float32: losses everywhere, and on GPUs (a region of device
  type 'cuda') softmax, log_softmax and the normalizations too (`float32_on_gpu`), as torch's two policies differ;
- every other op computes in its operands' dtypes (binary ops promote a low-precision operand with a float32 one to
  float32, as everywhere).

Only float16, bfloat16 and float32 operands are cast (float64 stays, as in torch). A cast is an op like any other:
it is differentiated (a parameter's gradient comes back in the parameter's dtype), staged under `jit` (whose cache
key holds the region) and batched. The region is per thread: `_state.autocast` is `(dtype, device_type)`, or None.

>>> with aotjax.autocast("cpu", dtype=aotjax.bfloat16):
...     aotjax.ones(2, 3) @ aotjax.ones(3, 2)
tensor([[3., 3.],
        [3., 3.]], dtype=bfloat16)
"""
from __future__ import annotations

import functools

import numpy as np

from aotjax.core.interpreter import _state
from aotjax.ops.base.casts import convert
from aotjax.tensor import Tensor

__all__ = ["lower", "float32", "float32_on_gpu", "cast_operands"]

_CASTABLE = frozenset({np.dtype(np.float32), np.dtype(np.float16), np.dtype("bfloat16")})
_FLOAT32 = np.dtype(np.float32)


def cast_operands(args: tuple, kwargs: dict, dtype) -> tuple[tuple, dict]:
    """`args` and `kwargs` with every castable floating-point tensor among them (lists and tuples of tensors too)
    converted to `dtype`."""
    return (tuple(_cast(a, dtype) for a in args), {k: _cast(v, dtype) for k, v in kwargs.items()})


def _cast(x, dtype):
    if isinstance(x, Tensor):
        return convert(x, dtype) if x.dtype in _CASTABLE and x.dtype != dtype else x
    if type(x) in (list, tuple):
        return type(x)(_cast(v, dtype) for v in x)
    return x


def _policy(fn, target, gpu_only: bool = False):
    @functools.wraps(fn)
    def op(*args, **kwargs):
        state = _state.autocast
        if state is not None and (not gpu_only or state[1] == "cuda"):
            args, kwargs = cast_operands(args, kwargs, state[0] if target is None else target)
            with region(None):  # NOTE: the op's own inner ops compute in the dtypes it chose
                return fn(*args, **kwargs)
        return fn(*args, **kwargs)
    return op


def lower(fn):
    """`fn` (an op of the `lower` list) computing in the autocast region's dtype."""
    return _policy(fn, None)


def float32(fn):
    """`fn` (an op of the `float32` list) computing in float32 inside an autocast region."""
    return _policy(fn, _FLOAT32)


def float32_on_gpu(fn):
    """`fn` computing in float32 inside an autocast region of device type 'cuda' (torch's CUDA policy; its CPU
    policy leaves these ops in their operands' dtype)."""
    return _policy(fn, _FLOAT32, gpu_only=True)


class region:
    """Set the thread's autocast state (`(dtype, device type)`, None: off) for a block, the previous one after it: the
    one place it is set (`aotjax.autocast` enters one; an op under a policy turns it off for its inner ops)."""

    def __init__(self, dtype):
        self.dtype = dtype

    def __enter__(self):
        self.prev, _state.autocast = _state.autocast, self.dtype

    def __exit__(self, *exc):
        _state.autocast = self.prev
