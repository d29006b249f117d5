"""Training utilities, as `torch.nn.utils`: gradient clipping (`clip_grad`), parameters as one vector
(`convert_parameters`) and variable-length sequences (`rnn`: `PackedSequence`, packing and padding).
Parametrizations (`parametrize`: a parameter computed at each read from stored tensors; `parametrizations.weight_norm`,
`.spectral_norm`, `.orthogonal`) and the older `weight_norm` / `spectral_norm` (with `remove_weight_norm` /
`remove_spectral_norm`), with PyTorch's parameter names and state_dict keys.

>>> w = aotjax.nn.Parameter(aotjax.zeros(2))
>>> w.grad = aotjax.tensor([30.0, 40.0])
>>> aotjax.nn.utils.clip_grad_norm_(w, 5.0), w.grad
(tensor(50.), tensor([3., 4.]))
"""
from aotjax.nn.utils import clip_grad, convert_parameters, parametrizations, parametrize, rnn  # noqa: F401
from aotjax.nn.utils.clip_grad import (
    clip_grad_norm,
    clip_grad_norm_,
    clip_grad_value_,
    clip_grads_with_norm_,
    get_total_norm,
)
from aotjax.nn.utils.convert_parameters import parameters_to_vector, vector_to_parameters
from aotjax.nn.utils.spectral_norm import remove_spectral_norm, spectral_norm
from aotjax.nn.utils.weight_norm import remove_weight_norm, weight_norm

__all__ = ["clip_grad", "convert_parameters", "rnn", "clip_grad_norm_", "clip_grad_norm", "clip_grad_value_",
           "get_total_norm", "clip_grads_with_norm_", "parameters_to_vector", "vector_to_parameters", "parametrize",
           "parametrizations", "weight_norm", "remove_weight_norm", "spectral_norm", "remove_spectral_norm"]
