"""Containers: `Sequential`, `ModuleList`, `ModuleDict`, as `torch.nn`'s. The numbered children of
`Sequential` and `ModuleList` are `SequenceKey(i)` in pytree paths (`.layers[0].weight`), `ModuleDict`'s are
`DictKey(name)` (`.heads['a'].weight`)."""
from __future__ import annotations

import operator
from collections import OrderedDict
from typing import Iterable, Iterator

import jax

from aotjax.core import call_epoch
from aotjax.nn.module import Module

__all__ = ["Sequential", "ModuleList", "ModuleDict"]


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
        if isinstance(modules, (Module, str)) or not hasattr(modules, "__iter__"):
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
            return "ModuleList()"
        lines, start = [], 0
        for i in range(1, len(reprs) + 1):
            if i == len(reprs) or reprs[i] != reprs[start]:
                body = reprs[start].replace("\n", "\n  ")
                count = i - start
                lines.append(f"({start}): {body}" if count == 1 else f"({start}-{i - 1}): {count} x {body}")
                start = i
        return "ModuleList(\n  " + "\n  ".join(lines) + "\n)"


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
