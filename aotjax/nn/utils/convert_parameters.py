"""Parameters as one flat vector and back, as `torch.nn.utils.convert_parameters`.

>>> net = aotjax.nn.Linear(2, 1)
>>> vec = aotjax.nn.utils.parameters_to_vector(net.parameters())
>>> vec.shape
(3,)
>>> aotjax.nn.utils.vector_to_parameters(aotjax.zeros(3), net.parameters())
>>> net.bias
Parameter containing:
tensor([0.], requires_grad=True)
"""
from __future__ import annotations

from collections.abc import Iterable

from aotjax.core.interpreter import Tracer, grad_mode, staging
from aotjax.core.source_info import where
from aotjax.ops.shape.copies import cat
from aotjax.tensor import Tensor

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """The parameters flattened and concatenated into one 1-d tensor (a copy; differentiable).

    >>> aotjax.nn.utils.parameters_to_vector([aotjax.ones(2, 2), aotjax.zeros(1)])
    tensor([1., 1., 1., 1., 0.])
    """
    return cat([p.view(-1) for p in parameters])


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Write the consecutive slices of the 1-d `vec` into `parameters` (each takes as many entries as it has, in
    its shape), as PyTorch: each parameter's `.data` is replaced, so it stays the same object (a `Parameter` of a
    module). Inside a transform (a compiled training step) each is written in place instead, under `no_grad`.

    >>> w = aotjax.nn.Parameter(aotjax.zeros(2))
    >>> aotjax.nn.utils.vector_to_parameters(aotjax.tensor([5.0, 6.0]), [w])
    >>> w
    Parameter containing:
    tensor([5., 6.], requires_grad=True)
    """
    if not isinstance(vec, Tensor):
        raise TypeError(f"vector_to_parameters: expected torch.Tensor, but got: {type(vec).__name__}{where()}")
    start = 0
    for param in parameters:
        value = vec[start:start + param.numel()].view_as(param)
        start += param.numel()
        if isinstance(param, Tracer) or isinstance(vec, Tracer) or staging():
            with grad_mode(False):  # NOTE: `.data` is eager-only: a traced program writes the value instead
                param.copy_(value)
        else:
            param.data = value
