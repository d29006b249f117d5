"""Parametrizations, as `torch.nn.utils.parametrize`: a parameter or buffer of a module that is computed, each time
it is read, by a chain of modules from the tensors actually stored.

`register_parametrization(module, "weight", p)` moves the stored tensor to `module.parametrizations.weight.original`
(or to `original0`, `original1`, ... when `p.right_inverse` splits it into several tensors) and swaps the module's
class for a generated subclass, `Parametrized<Class>`, whose `weight` is a property: reading it runs the chain on
the originals, assigning to it runs the chain's `right_inverse` and copies the result into the originals. Parameter
names and `state_dict` keys are PyTorch's. The generated class is a pytree like every `Module` class, so a
parametrized module goes through `aotjax.jit` and its parametrization is computed inside the compiled program.

>>> class Symmetric(aotjax.nn.Module):
...     def forward(self, X):
...         return X.triu() + X.triu(1).mT
>>> m = register_parametrization(aotjax.nn.Linear(3, 3), "weight", Symmetric())
>>> type(m).__name__, list(m.state_dict())
('ParametrizedLinear', ['bias', 'parametrizations.weight.original'])
>>> bool((m.weight == m.weight.T).all())
True
>>> type(remove_parametrizations(m, "weight")).__name__, list(m.state_dict())
('Linear', ['bias', 'weight'])
"""
from __future__ import annotations

import collections.abc
from contextlib import contextmanager
from typing import Callable

from aotjax.core.interpreter import grad_mode, stack_of_this_thread
from aotjax.nn.module import Module
from aotjax.nn.modules.container import ModuleDict, ModuleList
from aotjax.nn.parameter import Parameter
from aotjax.tensor import Tensor

__all__ = ["register_parametrization", "remove_parametrizations", "is_parametrized", "cached",
           "type_before_parametrizations", "transfer_parametrizations_and_params", "ParametrizationList"]


# -- generated classes -----------------------------------------------------------------------------------------------
# A module with computed attributes gets a generated subclass of its class. Each mechanism that computes attributes
# (the parametrizations here; the older `weight_norm` and `spectral_norm`) is one *layer*: a subclass made by a
# `LayerMaker` from a `spec`. A generated class is never changed: adding or removing a computed attribute builds the
# layers again on the module's own class and swaps the module's class. The classes are cached by (maker, base, spec),
# so modules changed alike share a class, hence a pytree definition (a program compiled for one serves the other).

LayerMaker = Callable[[type, tuple], "tuple[str, dict]"]
"""`make(base, spec) -> (class name, namespace)`: the class attributes of a layer on `base` (properties, methods).
`spec` is a non-empty tuple of hashable values (the names the layer computes, with their settings)."""

_layer_classes: dict[tuple, type] = {}


def _layer_class(make: LayerMaker, base: type, spec: tuple) -> type:
    key = (make, base, spec)
    cls = _layer_classes.get(key)
    if cls is None:
        name, namespace = make(base, spec)
        namespace.update(__module__=base.__module__, __qualname__=name, _computed_layer=(make, spec))
        cls = _layer_classes[key] = type(name, (base,), namespace)
    return cls


def _layers(cls: type) -> tuple[type, list]:
    """The class below every generated layer of `cls`, and the layers' `(make, spec)`, lowest first."""
    layers = []
    while "_computed_layer" in cls.__dict__:
        layers.append(cls.__dict__["_computed_layer"])
        cls = cls.__bases__[0]
    return cls, layers[::-1]


def computed_layer(module: Module, make: LayerMaker) -> tuple:
    """The spec of `module`'s layer made by `make`; `()` when it has none."""
    return next((spec for m, spec in _layers(type(module))[1] if m is make), ())


def set_computed_layer(module: Module, make: LayerMaker, spec: tuple) -> None:
    """Give `module` the layer `make` builds from `spec` in place of the one it had (on top when it had none; no
    such layer when `spec` is empty), by swapping its class."""
    cls, layers = _layers(type(module))
    if all(m is not make for m, _ in layers):
        layers.append((make, spec))
    for m, s in layers:
        s = spec if m is make else s
        if s:
            cls = _layer_class(m, cls, s)
    module.__class__ = cls


# -- the parametrized class --------------------------------------------------------------------------------------
def _parametrized_layer(base: type, names: tuple) -> tuple[str, dict]:
    return f"Parametrized{base.__name__}", {name: _parametrized_property(name) for name in names}


def _parametrized_property(tensor_name: str) -> property:
    def get(self) -> Tensor:
        return _evaluate(self, tensor_name)

    def set_(self, value: Tensor) -> None:
        self.parametrizations[tensor_name].right_inverse(value)

    return property(get, set_, doc=f"`{tensor_name}`, computed by `parametrizations.{tensor_name}` from its originals")


_cache: dict = {}
_cache_depth = [0]


def _evaluate(module: Module, tensor_name: str) -> Tensor:
    chain = module.parametrizations[tensor_name]
    if not _cache_depth[0]:
        return chain()
    # NOTE: keyed by the innermost interpreter too: a value computed eagerly is not a traced program's, nor the
    # reverse (a module a jitted function closes over is the same object in both)
    key = (id(module), tensor_name, stack_of_this_thread()[-1])
    value = _cache.get(key)
    if value is None:
        value = _cache[key] = chain()
    return value


@contextmanager
def cached():
    """Inside this context, each parametrized tensor is computed once, at its first read, and that value is read
    again after: a parametrization used several times in a forward pass (a weight shared by layers, an RNN step)
    costs one evaluation, and its gradient flows through that one. The values are dropped when the outermost
    `cached()` exits.

    >>> class Double(aotjax.nn.Module):
    ...     def forward(self, X):
    ...         return 2 * X
    >>> m = register_parametrization(aotjax.nn.Linear(2, 2), "weight", Double())
    >>> with cached():
    ...     m.weight is m.weight
    True
    >>> m.weight is m.weight
    False
    """
    _cache_depth[0] += 1
    try:
        yield
    finally:
        _cache_depth[0] -= 1
        if not _cache_depth[0]:
            _cache.clear()


# -- ParametrizationList -----------------------------------------------------------------------------------------
class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, as `torch.nn.utils.parametrize.ParametrizationList`: a `ModuleList` of
    the chain's modules that also holds the stored tensors, `original` (or `original0`, `original1`, ... when the
    chain's `right_inverse` returns a sequence). Calling it computes the parametrized tensor; `right_inverse(value)`
    writes into the originals the tensors the chain maps to `value`. `register_parametrization` makes it.

    At construction the chain's `right_inverse` (each module's, last to first; a module without one, or whose
    `right_inverse` raises `NotImplementedError`, counts as the identity) maps `original` to the stored tensors.
    One tensor of the same shape is copied into `original` in place, so the Parameter object an optimizer holds
    stays the parameter; a sequence becomes new parameters (add them to the optimizer). Unless `unsafe`, the chain
    must give back a tensor of `original`'s shape and dtype.

    >>> class Scale(aotjax.nn.Module):
    ...     def forward(self, X):
    ...         return 2 * X
    ...     def right_inverse(self, Y):
    ...         return Y / 2
    >>> chain = ParametrizationList([Scale()], aotjax.nn.Parameter(aotjax.tensor([2.0, 4.0])))
    >>> chain.original, chain()
    (Parameter containing:
    tensor([1., 2.], requires_grad=True), tensor([2., 4.], grad_fn=<MulBackward0>))
    """

    original: Tensor
    unsafe: bool

    def __init__(self, modules, original: Tensor, unsafe: bool = False) -> None:
        if len(modules) == 0:
            raise ValueError("ParametrizationList requires one or more modules.")
        super().__init__(modules)
        self.unsafe = unsafe
        shape, dtype = tuple(original.shape), original.dtype
        with grad_mode(False):
            new = original
            for module in reversed(list(self)):
                right_inverse = getattr(module, "right_inverse", None)
                if right_inverse is not None:
                    try:
                        new = right_inverse(new)
                    except NotImplementedError:
                        pass
        if not isinstance(new, (Tensor, collections.abc.Sequence)):
            raise ValueError(f"'right_inverse' must return a Tensor or a Sequence of tensors (list, tuple...). "
                             f"Got {type(new).__name__}")
        self.is_tensor = isinstance(new, Tensor)
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            self._hold_one(original, new)
        else:
            self._hold_several(original, new)
        if not unsafe:
            self._check_keeps(shape, dtype)

    def _hold_one(self, original: Tensor, new: Tensor) -> None:
        if new.dtype != original.dtype:
            raise ValueError(f"When `right_inverse` outputs one tensor, it may not change the dtype.\n"
                             f"original.dtype: {original.dtype}\nright_inverse(original).dtype: {new.dtype}")
        if new is not original:
            with grad_mode(False):
                original = _written(original, new)
        _register(self, "original", original)

    def _hold_several(self, original: Tensor, new) -> None:
        for i, tensor in enumerate(new):
            if not isinstance(tensor, Tensor):
                raise ValueError(f"'right_inverse' must return a Tensor or a Sequence of tensors (list, tuple...). "
                                 f"Got element {i} of the sequence with type {type(tensor).__name__}.")
            # NOTE: a copy: `right_inverse` may return the original itself (weight_norm's `v`), and a storage is
            # one autograd leaf, so the new parameter must not share the original's
            tensor = tensor.detach().clone()
            if isinstance(original, Parameter):
                tensor = Parameter(tensor, original.requires_grad)
            elif original.requires_grad:
                tensor.requires_grad_()
            _register(self, f"original{i}", tensor)

    def _check_keeps(self, shape: tuple, dtype) -> None:
        with grad_mode(False):
            Z = self()
        if not isinstance(Z, Tensor):
            raise ValueError(f"A parametrization must return a tensor. Got {type(Z).__name__}.")
        if Z.dtype != dtype:
            raise ValueError(f"Registering a parametrization may not change the dtype of the tensor, unless `unsafe` "
                             f"flag is enabled.\nunparametrized dtype: {dtype}\nparametrized dtype: {Z.dtype}")
        if tuple(Z.shape) != shape:
            raise ValueError(f"Registering a parametrization may not change the shape of the tensor, unless `unsafe` "
                             f"flag is enabled.\nunparametrized shape: {shape}\nparametrized shape: {tuple(Z.shape)}")

    def originals(self) -> list[Tensor]:
        """The stored tensors, in the order the first parametrization takes them."""
        if self.is_tensor:
            return [self.original]
        return [getattr(self, f"original{i}") for i in range(self.ntensors)]

    def right_inverse(self, value: Tensor) -> None:
        """Write into the originals the tensors the chain's `right_inverse`s (last to first) map `value` to, in
        place and outside autograd. Every module of the chain needs a `right_inverse`."""
        with grad_mode(False):
            for module in reversed(list(self)):
                right_inverse = getattr(module, "right_inverse", None)
                if right_inverse is None:
                    raise RuntimeError(f"parametrization {type(module).__name__} does not implement right_inverse.")
                value = right_inverse(value)
            if self.is_tensor:
                values = [value]
                if not isinstance(value, Tensor):
                    raise ValueError(f"`right_inverse` should return a tensor. Got {type(value).__name__}")
            elif not isinstance(value, collections.abc.Sequence) or len(value) != self.ntensors:
                raise ValueError(f"'right_inverse' must return a sequence of {self.ntensors} tensors, as it did "
                                 f"when the parametrization was registered. Got {type(value).__name__}")
            else:
                values = list(value)
            for original, new in zip(self.originals(), values):
                if not isinstance(new, Tensor):
                    raise ValueError(f"`right_inverse` must return a sequence of tensors. Got {type(new).__name__}")
                if new.dtype != original.dtype:
                    raise ValueError(f"The tensor returned by `right_inverse` has dtype {new.dtype} while "
                                     f"`original` has dtype {original.dtype}")
                if tuple(new.shape) != tuple(original.shape):
                    raise ValueError(f"ParametrizationList.right_inverse: `right_inverse` returned shape "
                                     f"{tuple(new.shape)} for an original of shape {tuple(original.shape)}; aotjax "
                                     f"writes into the original in place, which keeps its shape. Register the "
                                     f"parametrization again (remove_parametrizations, then register_parametrization) "
                                     f"to store a tensor of another shape")
                original.copy_(new)

    def forward(self) -> Tensor:
        first, *rest = list(self)
        x = first(*self.originals())
        for module in rest:
            x = module(x)
        return x


def _register(module: Module, name: str, tensor: Tensor) -> None:
    if isinstance(tensor, Parameter):
        module.register_parameter(name, tensor)
    else:
        module.register_buffer(name, tensor)


def _written(dest: Tensor, value: Tensor) -> Tensor:
    """`dest` holding `value` (copied in, so the object an optimizer holds stays the parameter); a new tensor of the
    same kind when the shape changes (PyTorch's `set_`, which aotjax has not, keeps the object then too)."""
    if tuple(dest.shape) == tuple(value.shape):
        return dest.copy_(value)
    value = value.detach().clone()
    return Parameter(value, dest.requires_grad) if isinstance(dest, Parameter) else value


# -- registering and removing ------------------------------------------------------------------------------------
def register_parametrization(module: Module, tensor_name: str, parametrization: Module, *,
                             unsafe: bool = False) -> Module:
    """Parametrize the parameter or buffer `tensor_name` of `module` by the module `parametrization`, as
    `torch.nn.utils.parametrize.register_parametrization`: afterwards `module.<tensor_name>` is
    `parametrization(original)`, computed at each read from `module.parametrizations[tensor_name].original`.

    `parametrization` may define `right_inverse(value)`: used now, to store the tensor that the parametrization maps
    to the current value (so `module.<tensor_name>` keeps its value), and on each assignment
    `module.<tensor_name> = value`. Returning a sequence stores it as `original0`, `original1`, ... (the forward then
    takes that many arguments). Registering on a name already parametrized appends to its chain. Unless `unsafe`,
    the parametrization must keep the tensor's shape and dtype. Returns `module`, whose class is now a generated
    subclass `Parametrized<Class>`.

    >>> class Positive(aotjax.nn.Module):
    ...     def forward(self, X):
    ...         return X.exp()
    ...     def right_inverse(self, Y):
    ...         return Y.log()
    >>> m = aotjax.nn.Linear(2, 2)
    >>> with aotjax.no_grad():
    ...     _ = m.weight.fill_(3.0)
    >>> m = register_parametrization(m, "weight", Positive())
    >>> m.weight
    tensor([[3., 3.],
            [3., 3.]], grad_fn=<ExpBackward0>)
    >>> m.weight = aotjax.ones(2, 2)
    >>> m.parametrizations.weight.original
    Parameter containing:
    tensor([[0., 0.],
            [0., 0.]], requires_grad=True)
    """
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        if not unsafe:
            _check_maps_into_itself(module, tensor_name, parametrization)
        chain = module.parametrizations[tensor_name]
        chain.append(parametrization)
        chain.unsafe |= unsafe
        return module
    if tensor_name not in module._buffers and tensor_name not in module._parameters:
        raise ValueError(f"Module '{module}' does not have a parameter, a buffer, or a parametrized element with name "
                         f"'{tensor_name}'")
    original = getattr(module, tensor_name)
    if original is None:
        raise ValueError(f"register_parametrization: the parameter or buffer '{tensor_name}' of "
                         f"{type(module).__name__} is None (such as a `bias=False` layer's bias); only a tensor can be "
                         f"parametrized")
    chain = ParametrizationList([parametrization], original, unsafe=unsafe)
    delattr(module, tensor_name)
    if not is_parametrized(module):
        module.parametrizations = ModuleDict()
    module.parametrizations[tensor_name] = chain
    set_computed_layer(module, _parametrized_layer, tuple(sorted(module.parametrizations)))
    return module


def _check_maps_into_itself(module: Module, tensor_name: str, parametrization: Module) -> None:
    """A parametrization appended to a chain must map the current tensor to one of its shape and dtype, and so must
    its `right_inverse`."""
    Y = getattr(module, tensor_name)
    X = parametrization(Y)
    _check_same("parametrization", X, Y)
    right_inverse = getattr(parametrization, "right_inverse", None)
    if right_inverse is not None:
        try:
            Z = right_inverse(X)
        except NotImplementedError:
            return
        _check_same("parametrization.right_inverse", Z, Y)


def _check_same(what: str, out, Y: Tensor) -> None:
    if not isinstance(out, Tensor):
        raise ValueError(f"A {what} must return a tensor. Got {type(out).__name__}.")
    if out.dtype != Y.dtype:
        raise ValueError(f"Registering a parametrization may not change the dtype of the tensor, unless the `unsafe` "
                         f"flag is enabled.\nunparametrized dtype: {Y.dtype}\n{what} output dtype: {out.dtype}")
    if tuple(out.shape) != tuple(Y.shape):
        raise ValueError(f"Registering a parametrization may not change the shape of the tensor, unless the `unsafe` "
                         f"flag is enabled.\nunparametrized shape: {tuple(Y.shape)}\n{what} output shape: "
                         f"{tuple(out.shape)}")


def is_parametrized(module: Module, tensor_name: str | None = None) -> bool:
    """Whether `module` has a parametrization on `tensor_name` (on any tensor when None).

    >>> is_parametrized(aotjax.nn.Linear(2, 2))
    False
    """
    parametrizations = getattr(module, "parametrizations", None)
    if not isinstance(parametrizations, ModuleDict):
        return False
    return len(parametrizations) > 0 if tensor_name is None else tensor_name in parametrizations


def remove_parametrizations(module: Module, tensor_name: str, leave_parametrized: bool = True) -> Module:
    """Remove the parametrizations of `tensor_name`, as `torch.nn.utils.parametrize.remove_parametrizations`: it is
    a plain parameter (or buffer) again, holding its current parametrized value (`leave_parametrized=True`) or the
    stored original. A single original keeps its object (written in place), so an optimizer holding it goes on
    training it. When no parametrization is left, the module gets its own class back. Returns `module`.

    >>> m = aotjax.nn.utils.parametrizations.weight_norm(aotjax.nn.Linear(2, 2))
    >>> type(remove_parametrizations(m, "weight")).__name__, [n for n, _ in m.named_parameters()]
    ('Linear', ['bias', 'weight'])
    """
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {module} does not have a parametrization on {tensor_name}")
    chain = module.parametrizations[tensor_name]
    if chain.is_tensor:
        original = chain.original
        if leave_parametrized:
            with grad_mode(False):
                original = _written(original, getattr(module, tensor_name))
    elif leave_parametrized:
        value = getattr(module, tensor_name)
        original = Parameter(value.detach(), True) if value.requires_grad else value.detach()
    else:
        raise ValueError("Cannot leave unparametrized (`leave_parametrized=False`) a tensor that is parametrized in "
                         "terms of a sequence of tensors.")
    del module.parametrizations[tensor_name]
    names = tuple(sorted(module.parametrizations))
    if not names:
        delattr(module, "parametrizations")
    set_computed_layer(module, _parametrized_layer, names)
    _register(module, tensor_name, original)
    return module


def type_before_parametrizations(module: Module) -> type:
    """The class `module` had before it was parametrized (its class when it is not).

    >>> m = aotjax.nn.utils.parametrizations.weight_norm(aotjax.nn.Linear(2, 2))
    >>> type(m).__name__, type_before_parametrizations(m).__name__
    ('ParametrizedLinear', 'Linear')
    """
    if is_parametrized(module):
        for cls in type(module).__mro__:
            if cls.__dict__.get("_computed_layer", (None,))[0] is _parametrized_layer:
                return cls.__bases__[0]
    return type(module)


def transfer_parametrizations_and_params(from_module: Module, to_module: Module,
                                         tensor_name: str | None = None) -> Module:
    """Give `to_module` the parametrizations of `from_module` on `tensor_name` (all of them when None), sharing
    their modules and their original tensors, as
    `torch.nn.utils.parametrize.transfer_parametrizations_and_params`. A tensor `to_module` lacks is created first
    (a parameter holding `from_module`'s value). Returns `to_module`.

    >>> src = aotjax.nn.utils.parametrizations.weight_norm(aotjax.nn.Linear(2, 2))
    >>> dst = transfer_parametrizations_and_params(src, aotjax.nn.Linear(2, 2))
    >>> dst.parametrizations.weight.original1 is src.parametrizations.weight.original1
    True
    """
    if not is_parametrized(from_module):
        return to_module
    names = list(from_module.parametrizations) if tensor_name is None else [tensor_name]
    for name in names:
        if not hasattr(to_module, name):
            setattr(to_module, name, Parameter(getattr(from_module, name).detach()))
        source = from_module.parametrizations[name]
        for parametrization in source:
            register_parametrization(to_module, name, parametrization)
        target = to_module.parametrizations[name]
        if source.is_tensor:
            target.original = source.original
        else:
            for i in range(source.ntensors):
                setattr(target, f"original{i}", getattr(source, f"original{i}"))
    return to_module
