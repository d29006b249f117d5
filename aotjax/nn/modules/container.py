"""Containers: `Sequential`, `ModuleList`, `ModuleDict`, `ParameterList`, `ParameterDict`, as `torch.nn`'s. The
numbered children of `Sequential`, `ModuleList` and `ParameterList` are `SequenceKey(i)` in pytree paths
(`.layers[0].weight`), those of `ModuleDict` and `ParameterDict` are `DictKey(name)` (`.heads['a'].weight`)."""
from __future__ import annotations

import operator
from collections import OrderedDict
from collections.abc import Iterable as _Iterable
from collections.abc import Mapping
from typing import Any, Iterable, Iterator

import jax

from aotjax.core import call_epoch
from aotjax.core.source_info import where
from aotjax.nn.module import Module
from aotjax.nn.parameter import Parameter
from aotjax.tensor import Tensor

__all__ = ["Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict"]


def _numbered_key(name: str):
    return jax.tree_util.SequenceKey(int(name)) if name.isdigit() else jax.tree_util.GetAttrKey(name)


def _index(idx, n: int, what: str) -> int:
    idx = operator.index(idx)
    if not -n <= idx < n:
        raise IndexError(f"index {idx} is out of range for a {what} of length {n}")
    return idx % n


class Sequential(Module):
    """Runs its modules in order, each one's output the next one's input: `Sequential(m0, m1, ...)` (named
    '0', '1', ...) or `Sequential(OrderedDict(name=module, ...))`. Indexing gives a module, slicing a
    Sequential; `len`, iteration and `append` work as on a list.

    >>> net = aotjax.nn.Sequential(aotjax.nn.Linear(2, 3), aotjax.nn.ReLU())
    >>> net(aotjax.ones(4, 2)).shape, len(net), type(net[-1]).__name__
    ((4, 3), 2, 'ReLU')
    >>> net
    Sequential(
      (0): Linear(in_features=2, out_features=3, bias=True)
      (1): ReLU()
    )
    """

    _pytree_key = staticmethod(_numbered_key)

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for name, module in args[0].items():
                self.add_module(name, module)
        else:
            for i, module in enumerate(args):
                self.add_module(str(i), module)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        return list(self._modules.values())[_index(idx, len(self), "Sequential")]

    def __setitem__(self, idx, module: Module) -> None:
        key = list(self._modules)[_index(idx, len(self), "Sequential")]
        setattr(self, key, module)

    def __delitem__(self, idx) -> None:
        keys = list(self._modules)
        for key in (keys[idx] if isinstance(idx, slice) else [keys[_index(idx, len(self), "Sequential")]]):
            del self._modules[key]
        # NOTE: renumbered '0', '1', ... (named modules too), as PyTorch
        call_epoch.module_changed()
        self.__dict__["_modules"] = {str(i): m for i, m in enumerate(self._modules.values())}

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def append(self, module: Module) -> "Sequential":
        """Add `module` at the end; returns self."""
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> "Sequential":
        """Append each of `modules`; returns self."""
        for module in modules:
            self.append(module)
        return self

    def insert(self, index: int, module: Module) -> "Sequential":
        """Insert `module` before position `index` (the modules are renumbered); returns self."""
        modules = list(self._modules.values())
        modules.insert(index, module)
        call_epoch.module_changed()
        self.__dict__["_modules"] = {}
        for i, m in enumerate(modules):
            self.add_module(str(i), m)
        return self

    def forward(self, input):
        for module in self:
            input = module(input)
        return input


class ModuleList(Module):
    """A list of modules, registered as submodules ('0', '1', ...). It has no `forward`: iterate over it.

    >>> layers = aotjax.nn.ModuleList([aotjax.nn.Linear(2, 2) for _ in range(3)])
    >>> layers.append(aotjax.nn.ReLU())
    ModuleList(
      (0-2): 3 x Linear(in_features=2, out_features=2, bias=True)
      (3): ReLU()
    )
    >>> len(layers[1:]), [n for n, _ in layers.named_parameters()][:2]
    (3, ['0.weight', '0.bias'])
    """

    _pytree_key = staticmethod(_numbered_key)

    def __init__(self, modules: Iterable[Module] | None = None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[str(_index(idx, len(self), "ModuleList"))]

    def __setitem__(self, idx, module: Module) -> None:
        self.add_module(str(_index(idx, len(self), "ModuleList")), module)

    def __delitem__(self, idx) -> None:
        modules = list(self._modules.values())
        del modules[idx if isinstance(idx, slice) else _index(idx, len(self), "ModuleList")]
        call_epoch.module_changed()
        self.__dict__["_modules"] = {str(i): m for i, m in enumerate(modules)}  # NOTE: renumbered, as PyTorch

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __iadd__(self, modules: Iterable[Module]) -> "ModuleList":
        return self.extend(modules)

    def __add__(self, other: Iterable[Module]) -> "ModuleList":
        return ModuleList(list(self) + list(other))

    def append(self, module: Module) -> "ModuleList":
        """Add `module` at the end; returns self."""
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> "ModuleList":
        """Append each of `modules`; returns self."""
        if isinstance(modules, str) or not hasattr(modules, "__iter__"):  # NOTE: a ModuleList or Sequential iterates
            raise TypeError(f"ModuleList.extend should be called with an iterable, but got {type(modules).__name__}")
        for module in modules:
            self.append(module)
        return self

    def insert(self, index: int, module: Module) -> None:
        """Insert `module` before position `index` (the modules after it are renumbered)."""
        modules = list(self._modules.values())
        modules.insert(index, module)
        call_epoch.module_changed()
        self.__dict__["_modules"] = {}
        for i, m in enumerate(modules):
            self.add_module(str(i), m)

    def pop(self, idx: int = -1) -> Module:
        """Remove and return the module at `idx`."""
        module = self[idx]
        del self[idx]
        return module

    def __repr__(self) -> str:
        """PyTorch's: consecutive modules with equal reprs are one line, `(0-2): 3 x Linear(...)`."""
        reprs = [repr(m) for m in self]
        if not reprs:
            return f"{self._get_name()}()"
        lines, start = [], 0
        for i in range(1, len(reprs) + 1):
            if i == len(reprs) or reprs[i] != reprs[start]:
                body = reprs[start].replace("\n", "\n  ")
                count = i - start
                lines.append(f"({start}): {body}" if count == 1 else f"({start}-{i - 1}): {count} x {body}")
                start = i
        return f"{self._get_name()}(\n  " + "\n  ".join(lines) + "\n)"


class ModuleDict(Module):
    """A dict of modules by name, registered as submodules (insertion order kept).

    >>> heads = aotjax.nn.ModuleDict({"a": aotjax.nn.Linear(2, 1), "b": aotjax.nn.Identity()})
    >>> list(heads), type(heads["b"]).__name__, "a" in heads
    (['a', 'b'], 'Identity', True)
    """

    _pytree_key = staticmethod(jax.tree_util.DictKey)

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]
        call_epoch.module_changed()

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, key: str) -> bool:
        return key in self._modules

    def clear(self) -> None:
        """Remove every module."""
        self._modules.clear()

    def pop(self, key: str) -> Module:
        """Remove and return the module `key`."""
        module = self[key]
        del self[key]
        return module

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules) -> None:
        """Add the modules of a mapping or an iterable of `(name, module)` pairs."""
        items = modules.items() if hasattr(modules, "items") else modules
        for j, item in enumerate(items):
            if not hasattr(modules, "items") and len(item) != 2:
                raise ValueError(f"ModuleDict update sequence element #{j} has length {len(item)}; 2 is required")
            self[item[0]] = item[1]


def _as_parameter(value):
    """A tensor that is not a Parameter made one (as torch's parameter containers do); anything else as it is."""
    return Parameter(value) if isinstance(value, Tensor) and not isinstance(value, Parameter) else value


def _entry_repr(key, value, type_name) -> str:
    """One line of a parameter container's repr, as torch's (`type_name(tensor)`: how it names the tensor's type)."""
    if isinstance(value, Tensor):
        kind = "Parameter" if isinstance(value, Parameter) else "Tensor"
        return f"  ({key}): {kind} containing: [{type_name(value)} of size {'x'.join(map(str, value.shape))}]"
    return f"  ({key}): Object of type: {type(value).__name__}"


class ParameterList(Module):
    """A list of parameters, registered as the module's parameters '0', '1', ... (a tensor that is not a Parameter
    is made one; other values are kept as plain attributes). Indexing, slicing, `len`, iteration, `append`,
    `extend` and `+=` work as on a list; it has no `forward`.

    >>> params = aotjax.nn.ParameterList([aotjax.nn.Parameter(aotjax.ones(2)), aotjax.zeros(3)])
    >>> [(n, tuple(p.shape)) for n, p in params.named_parameters()]
    [('0', (2,)), ('1', (3,))]
    >>> params
    ParameterList(
        (0): Parameter containing: [torch.float32 of size 2]
        (1): Parameter containing: [torch.float32 of size 3]
    )
    """

    _pytree_key = staticmethod(_numbered_key)

    def __init__(self, values: Iterable[Any] | None = None):
        super().__init__()
        self._size = 0
        if values is not None:
            self.extend(values)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            out = type(self)()
            for i in range(*idx.indices(len(self))):
                out.append(self[i])
            return out
        return getattr(self, str(_index(idx, len(self), "ParameterList")))

    def __setitem__(self, idx, param) -> None:
        setattr(self, str(_index(idx, len(self), "ParameterList")), _as_parameter(param))

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[Any]:
        return iter([self[i] for i in range(len(self))])

    def __iadd__(self, parameters: Iterable[Any]) -> "ParameterList":
        return self.extend(parameters)

    def append(self, value) -> "ParameterList":
        """Add `value` (a Parameter, a tensor made one, or any object) at the end; returns self."""
        index = len(self)
        self._size += 1
        self[index] = value
        return self

    def extend(self, values: Iterable[Any]) -> "ParameterList":
        """Append each of `values`; returns self."""
        if not isinstance(values, _Iterable) or isinstance(values, Tensor):
            raise TypeError(f"ParameterList.extend should be called with an iterable, but got "
                            f"{type(values).__name__}{where()}")
        for value in values:
            self.append(value)
        return self

    def extra_repr(self) -> str:
        return "\n".join(_entry_repr(k, p, lambda t: f"torch.{t.dtype.name}") for k, p in enumerate(self))

    def __call__(self, *args, **kwargs):
        raise RuntimeError("ParameterList should not be called.")


class ParameterDict(Module):
    """A dict of parameters by name, registered as the module's parameters (a tensor that is not a Parameter is
    made one; other values are kept as plain attributes), in insertion order (a plain dict given to the constructor
    or `update` is added in sorted key order, as torch's). It has no `forward`.

    >>> params = aotjax.nn.ParameterDict({"b": aotjax.zeros(1), "a": aotjax.ones(2)})
    >>> list(params), "a" in params, [n for n, _ in params.named_parameters()]
    (['a', 'b'], True, ['a', 'b'])
    """

    _pytree_key = staticmethod(jax.tree_util.DictKey)

    def __init__(self, parameters=None):
        super().__init__()
        self._keys: dict = {}
        if parameters is not None:
            self.update(parameters)

    @staticmethod
    def _key(key) -> str:
        if not isinstance(key, str):
            raise TypeError(f"Index given to ParameterDict cannot be used as a key as it is not a string (type is "
                            f"'{type(key).__name__}'){where()}.")
        return key

    def __getitem__(self, key: str):
        return getattr(self, self._key(key))

    def __setitem__(self, key: str, value) -> None:
        setattr(self, self._key(key), _as_parameter(value))
        if key not in self._keys:
            # NOTE: a new dict, not an edit: modules rebuilt from this one's pytree share its attributes' objects
            self._keys = {**self._keys, key: None}

    def __delitem__(self, key: str) -> None:
        keys = dict(self._keys)
        del keys[key]
        delattr(self, key)
        self._keys = keys

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._keys))

    def __reversed__(self) -> Iterator[str]:
        return reversed(list(self._keys))

    def __contains__(self, key) -> bool:
        return key in self._keys

    def copy(self) -> "ParameterDict":
        """A new ParameterDict holding the same parameters."""
        return ParameterDict(OrderedDict((k, self[k]) for k in self._keys))

    def setdefault(self, key: str, default=None):
        """`self[key]`, set to `default` first if absent."""
        if key not in self:
            self[key] = default
        return self[key]

    def clear(self) -> None:
        """Remove every entry."""
        for key in list(self._keys):
            del self[key]

    def pop(self, key: str):
        """Remove and return the entry `key`."""
        value = self[key]
        del self[key]
        return value

    def popitem(self) -> tuple:
        """Remove and return the last `(key, value)` pair added."""
        key = next(reversed(self._keys))
        return key, self.pop(key)

    def get(self, key: str, default=None):
        return self[key] if key in self else default

    def fromkeys(self, keys: Iterable[str], default=None) -> "ParameterDict":
        """A new ParameterDict with `default` under each of `keys`."""
        return ParameterDict((k, default) for k in keys)

    def keys(self):
        return self._keys.keys()

    def items(self):
        return ((k, self[k]) for k in self._keys)

    def values(self):
        return (self[k] for k in self._keys)

    def update(self, parameters) -> None:
        """Add the entries of a mapping (a plain dict's in sorted key order), a ParameterDict, or an iterable of
        `(key, value)` pairs."""
        if not isinstance(parameters, _Iterable):
            raise TypeError(f"ParametersDict.update should be called with an iterable of key/value pairs, but got "
                            f"{type(parameters).__name__}{where()}")
        if isinstance(parameters, (OrderedDict, ParameterDict)):
            items = list(parameters.items())
        elif isinstance(parameters, Mapping):
            items = sorted(parameters.items())
        else:
            items = []
            for j, pair in enumerate(parameters):
                if not isinstance(pair, _Iterable):
                    raise TypeError(f"ParameterDict update sequence element #{j} should be Iterable; is "
                                    f"{type(pair).__name__}{where()}")
                if len(pair) != 2:
                    raise ValueError(f"ParameterDict update sequence element #{j} has length {len(pair)}; 2 is "
                                     f"required{where()}")
                items.append(tuple(pair))
        for key, value in items:
            self[key] = value

    def extra_repr(self) -> str:
        return "\n".join(_entry_repr(k, p, Tensor.type) for k, p in self.items())

    def __call__(self, input):
        raise RuntimeError("ParameterDict should not be called.")

    def __or__(self, other: "ParameterDict") -> "ParameterDict":
        out = self.copy()
        out.update(other)
        return out

    def __ror__(self, other: "ParameterDict") -> "ParameterDict":
        out = other.copy()
        out.update(self)
        return out

    def __ior__(self, other: "ParameterDict") -> "ParameterDict":
        self.update(other)
        return self
