"""Training utilities, as `torch.nn.utils`: gradient clipping (`clip_grad`), parameters as one vector
(`convert_parameters`) and variable-length sequences (`rnn`: `PackedSequence`, packing and padding).
`parametrize`, `weight_norm` and `spectral_norm` are not provided.

>>> w = aotjax.nn.Parameter(aotjax.zeros(2))
>>> w.grad = aotjax.tensor([30.0, 40.0])
>>> aotjax.nn.utils.clip_grad_norm_(w, 5.0), w.grad
(tensor(50.), tensor([3., 4.]))
"""
from aotjax.nn.utils import clip_grad, convert_parameters, rnn  # noqa: F401
from aotjax.nn.utils.clip_grad import (
    clip_grad_norm,
    clip_grad_norm_,
    clip_grad_value_,
    clip_grads_with_norm_,
    get_total_norm,
)
from aotjax.nn.utils.convert_parameters import parameters_to_vector, vector_to_parameters

__all__ = ["clip_grad", "convert_parameters", "rnn", "clip_grad_norm_", "clip_grad_norm", "clip_grad_value_",
           "get_total_norm", "clip_grads_with_norm_", "parameters_to_vector", "vector_to_parameters"]
