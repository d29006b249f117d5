"""Weight normalization the older way, as `torch.nn.utils.weight_norm`: a parameter `weight` replaced by a magnitude
`weight_g` and a direction `weight_v`, with `weight = weight_g * weight_v / ||weight_v||` (the norm over every dimension
but `dim`). The newer `aotjax.nn.utils.parametrizations.weight_norm` does the same through `parametrize`.

PyTorch recomputes `weight` in a forward pre-hook and stores it as a plain attribute. aotjax modules have no hooks:
here the module's class is swapped for a generated subclass (of the same name) in which `weight` is a property
computed from `weight_g` and `weight_v` at each read. The parameters and `state_dict` keys are PyTorch's. As in
PyTorch, `weight_norm` warns that it is deprecated (a FutureWarning).

>>> import warnings
>>> with warnings.catch_warnings(action="ignore", category=FutureWarning):
...     m = weight_norm(aotjax.nn.Linear(3, 2))
>>> [n for n, _ in m.named_parameters()], m.weight_g.shape
(['bias', 'weight_g', 'weight_v'], (2, 1))
>>> _ = remove_weight_norm(m)
>>> [n for n, _ in m.named_parameters()]
['bias', 'weight']
"""
from __future__ import annotations

import warnings

from aotjax.core.interpreter import grad_mode
from aotjax.core.source_info import user_stacklevel
from aotjax.nn.module import Module
from aotjax.nn.parameter import Parameter
from aotjax.nn.utils.parametrize import computed_layer, set_computed_layer
from aotjax.ops.linalg.norms import vector_norm
from aotjax.tensor import Tensor

__all__ = ["weight_norm", "remove_weight_norm", "norm_except_dim"]


def norm_except_dim(v: Tensor, pow: float = 2, dim: int = 0) -> Tensor:
    """The `pow`-norm of `v` over every dimension but `dim`, keeping them as size 1 (so it broadcasts against `v`),
    as `torch.norm_except_dim`; `dim=-1` means the norm of the whole tensor (a 0-d tensor), not the last dimension.

    >>> norm_except_dim(aotjax.tensor([[3.0, 4.0], [6.0, 8.0]]), 2, 0)
    tensor([[ 5.],
            [10.]])
    """
    if dim == -1:
        return vector_norm(v, pow)
    dim = dim % v.ndim
    others = tuple(d for d in range(v.ndim) if d != dim)
    if not others:  # NOTE: a 1-d `v`: the norm of each single element (an empty `dim=()` would mean all of them)
        return v.abs()
    return vector_norm(v, pow, dim=others, keepdim=True)


def weight_normalized(v: Tensor, g: Tensor, dim: int) -> Tensor:
    """`g * v / norm_except_dim(v, 2, dim)`: the weight that magnitude `g` and direction `v` stand for (PyTorch's
    `torch._weight_norm`)."""
    return v * (g / norm_except_dim(v, 2, dim))


def _weight_norm_layer(base: type, specs: tuple) -> tuple[str, dict]:
    """The layer computing each `name` of `specs`, `(name, dim)` pairs; it keeps its class's name, as a module
    with PyTorch's hook keeps its class."""
    return base.__name__, {name: _normalized_property(name, dim) for name, dim in specs}


def _normalized_property(name: str, dim: int) -> property:
    def get(self) -> Tensor:
        return weight_normalized(getattr(self, name + "_v"), getattr(self, name + "_g"), dim)

    def set_(self, value) -> None:
        raise AttributeError(f"{type(self).__name__}.{name} is computed by weight_norm from {name}_g and {name}_v, so "
                             f"it cannot be assigned: write into those (`module.{name}_v.copy_(value)` under no_grad), "
                             f"or call remove_weight_norm(module, '{name}') first")

    return property(get, set_, doc=f"`{name}_g * {name}_v / norm_except_dim({name}_v, 2, {dim})`")


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Replace the parameter `name` of `module` by `name_g` (its norm over every dimension but `dim`; `dim=None`:
    the whole tensor's norm) and `name_v` (its value), as `torch.nn.utils.weight_norm`; `module.<name>` is then
    computed from the two at each read. Returns `module`. Warns that it is deprecated (a FutureWarning), as PyTorch.

    >>> import warnings
    >>> with warnings.catch_warnings(action="ignore", category=FutureWarning):
    ...     m = weight_norm(aotjax.nn.Linear(4, 3), dim=None)
    >>> m.weight_g.shape, m.weight.shape
    ((), (3, 4))
    """
    warnings.warn("`torch.nn.utils.weight_norm` is deprecated in favor of "
                  "`torch.nn.utils.parametrizations.weight_norm`.", FutureWarning, stacklevel=user_stacklevel())
    specs = computed_layer(module, _weight_norm_layer)
    if any(n == name for n, _ in specs):
        raise RuntimeError(f"Cannot register two weight_norm hooks on the same parameter {name}")
    dim = -1 if dim is None else dim
    weight = parameter_to_replace(module, name, "weight_norm")
    with grad_mode(False):
        g = Parameter(norm_except_dim(weight, 2, dim))
        v = Parameter(weight.clone())
    delattr(module, name)
    module.register_parameter(name + "_g", g)
    module.register_parameter(name + "_v", v)
    set_computed_layer(module, _weight_norm_layer, specs + ((name, dim),))
    return module


def parameter_to_replace(module: Module, name: str, op: str) -> Parameter:
    """`module`'s parameter `name`, which `op` replaces; an error when it has none such (None, a buffer, or a
    tensor another parametrization computes)."""
    weight = module._parameters.get(name)
    if weight is None:
        what = "is None" if name in module._parameters else "is not one of its parameters"
        raise ValueError(f"{op}: '{name}' of {type(module).__name__} {what}; {op} works on a parameter. When a "
                         f"parametrization computes '{name}' (parametrize, weight_norm or spectral_norm), remove that "
                         f"first")
    return weight


def remove_weight_norm(module: Module, name: str = "weight") -> Module:
    """Undo `weight_norm`: `name` is a parameter again, holding the weight `name_g` and `name_v` stood for, as
    `torch.nn.utils.remove_weight_norm`. Returns `module`.

    >>> import warnings
    >>> with warnings.catch_warnings(action="ignore", category=FutureWarning):
    ...     m = weight_norm(aotjax.nn.Linear(2, 2))
    >>> type(remove_weight_norm(m).weight).__name__
    'Parameter'
    """
    specs = computed_layer(module, _weight_norm_layer)
    if all(n != name for n, _ in specs):
        raise ValueError(f"weight_norm of '{name}' not found in {module}")
    for part in (name + "_g", name + "_v"):
        parameter_to_replace(module, part, "remove_weight_norm")
    with grad_mode(False):
        weight = getattr(module, name)
    set_computed_layer(module, _weight_norm_layer, tuple(s for s in specs if s[0] != name))
    delattr(module, name + "_g")
    delattr(module, name + "_v")
    module.register_parameter(name, Parameter(weight))
    return module
