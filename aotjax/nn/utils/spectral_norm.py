"""Spectral normalization the older way, as `torch.nn.utils.spectral_norm`: a parameter `weight` divided by its
largest singular value `sigma`, estimated by power iteration. The stored weight is the parameter `weight_orig`; the
buffers `weight_u` and `weight_v` hold the singular vectors' estimates, refined by `n_power_iterations` steps at each
call of the module in training mode. The newer `aotjax.nn.utils.parametrizations.spectral_norm` does the same
through `parametrize`.

PyTorch refines the estimates and recomputes `weight` in a forward pre-hook. aotjax modules have no hooks: here the
module's class is swapped for a generated subclass (of the same name) whose `__call__` refines the estimates before
`forward`, and in which `weight` is a property, `weight_orig / sigma` from the current estimates. The parameters,
buffers and `state_dict` keys are PyTorch's.

>>> m = spectral_norm(aotjax.nn.Linear(3, 2))
>>> list(m.state_dict())
['bias', 'weight_orig', 'weight_u', 'weight_v']
>>> _ = m(aotjax.ones(1, 3))
>>> _ = remove_spectral_norm(m)
>>> list(m.state_dict())
['bias', 'weight']
"""
from __future__ import annotations

from aotjax.core.interpreter import grad_mode
from aotjax.nn.module import Module
from aotjax.nn.modules.conv import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from aotjax.nn.parameter import Parameter
from aotjax.nn.utils.parametrize import computed_layer, set_computed_layer
from aotjax.nn.utils.weight_norm import parameter_to_replace
from aotjax.ops.nn.normalization import normalize
from aotjax.tensor import Tensor

__all__ = ["spectral_norm", "remove_spectral_norm"]


def _matrix(weight: Tensor, dim: int) -> Tensor:
    """`weight` as a matrix whose rows run along `dim`."""
    if dim != 0:
        weight = weight.movedim(dim, 0)
    return weight.reshape(weight.shape[0], -1)


def _power_iterations(module: Module, name: str, n_power_iterations: int, dim: int, eps: float) -> None:
    """Refine `module`'s `name_u` and `name_v` in place (PyTorch's order: `v` first)."""
    with grad_mode(False):
        weight_mat = _matrix(getattr(module, name + "_orig"), dim)
        u, v = getattr(module, name + "_u"), getattr(module, name + "_v")
        for _ in range(n_power_iterations):
            v.copy_(normalize(weight_mat.T.mv(u), dim=0, eps=eps))
            u.copy_(normalize(weight_mat.mv(v), dim=0, eps=eps))


def _spectral_norm_layer(base: type, specs: tuple) -> tuple[str, dict]:
    """The layer for `specs`, `(name, n_power_iterations, dim, eps)` tuples: a property for each name and a
    `__call__` that refines the estimates in training mode, as PyTorch's pre-hook. It keeps its class's name."""
    def __call__(self, *args, **kwargs):
        if self.training:
            for spec in specs:
                _power_iterations(self, *spec)
        return base.__call__(self, *args, **kwargs)

    namespace = {name: _normalized_property(name, dim) for name, _, dim, _ in specs}
    namespace["__call__"] = __call__
    return base.__name__, namespace


def _normalized_property(name: str, dim: int) -> property:
    def get(self) -> Tensor:
        weight = getattr(self, name + "_orig")
        # NOTE: copies, so that refining the estimates in place later leaves this value's recorded operands alone
        u, v = getattr(self, name + "_u").clone(), getattr(self, name + "_v").clone()
        sigma = u.dot(_matrix(weight, dim).mv(v))
        return weight / sigma

    def set_(self, value) -> None:
        raise AttributeError(f"{type(self).__name__}.{name} is computed by spectral_norm from {name}_orig, so it "
                             f"cannot be assigned: write into {name}_orig, or call remove_spectral_norm(module, "
                             f"'{name}') first")

    return property(get, set_, doc=f"`{name}_orig` divided by its largest singular value's estimate")


def spectral_norm(module: Module, name: str = "weight", n_power_iterations: int = 1, eps: float = 1e-12,
                  dim: int | None = None) -> Module:
    """Spectrally normalize the parameter `name` of `module`, as `torch.nn.utils.spectral_norm`: it is stored as
    `name_orig`, with the buffers `name_u` and `name_v` (random unit vectors at first), and `module.<name>` is
    `name_orig / sigma`. Each call of the module in training mode first refines `u` and `v` by `n_power_iterations`
    power-iteration steps. `dim` is the dimension of the output features: 1 for a `ConvTranspose`, else 0 (the
    default, None, picks it). Returns `module`.

    Unlike PyTorch, where `module.<name>` is the value computed at the last call, here it is computed from the
    current `name_orig` and estimates at each read (equal right after a call).

    >>> m = spectral_norm(aotjax.nn.Linear(4, 3))
    >>> m.weight_orig.shape, m.weight_u.shape, m.weight_v.shape
    ((3, 4), (3,), (4,))
    """
    if dim is None:
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)) else 0
    specs = computed_layer(module, _spectral_norm_layer)
    if any(spec[0] == name for spec in specs):
        raise RuntimeError(f"Cannot register two spectral_norm hooks on the same parameter {name}")
    if n_power_iterations <= 0:
        raise ValueError(f"Expected n_power_iterations to be positive, but got n_power_iterations={n_power_iterations}")
    weight = parameter_to_replace(module, name, "spectral_norm")
    dim = dim % weight.ndim
    with grad_mode(False):
        h, w = _matrix(weight, dim).shape
        u = normalize(weight.new_empty(h).normal_(0, 1), dim=0, eps=eps)
        v = normalize(weight.new_empty(w).normal_(0, 1), dim=0, eps=eps)
    delattr(module, name)
    module.register_parameter(name + "_orig", weight)
    module.register_buffer(name + "_u", u)
    module.register_buffer(name + "_v", v)
    set_computed_layer(module, _spectral_norm_layer, specs + ((name, n_power_iterations, dim, eps),))
    return module


def remove_spectral_norm(module: Module, name: str = "weight") -> Module:
    """Undo `spectral_norm`: `name` is a parameter again, holding `name_orig / sigma` from the current estimates, as
    `torch.nn.utils.remove_spectral_norm`. Returns `module`.

    >>> m = remove_spectral_norm(spectral_norm(aotjax.nn.Linear(2, 2)))
    >>> [n for n, _ in m.named_parameters()]
    ['bias', 'weight']
    """
    specs = computed_layer(module, _spectral_norm_layer)
    if all(spec[0] != name for spec in specs):
        raise ValueError(f"spectral_norm of '{name}' not found in {module}")
    with grad_mode(False):
        weight = getattr(module, name)
    set_computed_layer(module, _spectral_norm_layer, tuple(s for s in specs if s[0] != name))
    for suffix in ("_u", "_v", "_orig"):
        delattr(module, name + suffix)
    module.register_parameter(name, Parameter(weight))
    return module
