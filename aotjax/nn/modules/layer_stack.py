"""`LayerStack`: a `ModuleList` of alike layers whose parameters and buffers are stored stacked, one tensor per name
with a leading layer axis, each layer's tensors views of them. `aotjax.nn.scan_layers` runs it as one `scan` over the
stacked tensors as they are (no re-stacking per call), and an optimizer built on `parameters()` updates each stacked
tensor in place: a compiled training step is one layer's program whatever the depth."""
from __future__ import annotations

import copy
from typing import Iterable, Iterator

import jax

from aotjax.core import call_epoch
from aotjax.core.interpreter import grad_mode
from aotjax.core.source_info import where
from aotjax.nn.module import Module, _attrs, _ModuleDef
from aotjax.nn.modules.container import ModuleList
from aotjax.nn.parameter import Parameter
from aotjax.nn.scan_layers import check_alike, scan_layers
from aotjax.ops.shape.copies import stack
from aotjax.tensor import Tensor

__all__ = ["LayerStack"]


class LayerStack(ModuleList):
    """A `ModuleList` of layers of one class and one configuration whose parameters and buffers are stored stacked:
    `parameters()` gives one tensor per parameter name of a layer, of shape `[len(stack), *shape]`, and every layer's
    `weight` is a view `stacked[i]` of it. So:

    - `nn.scan_layers(stack, x)` (or `stack(x)`) scans over the stacked tensors themselves, and the optimizer updates
      them in place: `jit` of a training step compiles one layer, with no re-stacking, whatever the depth;
    - the layers still work as layers: `for layer in stack: x = layer(x)` runs them one by one, a write through a
      layer's tensor (`nn.init.normal_(stack[3].fc.weight)`, `load_state_dict`) writes the stacked tensor, and
      `state_dict()` keys stay per layer (`'3.fc.weight'`), so checkpoints load into a `ModuleList` and back.

    Mark a model's list as stacked before building its optimizer, in its `__init__` or after:
    `model.blocks = nn.LayerStack(model.blocks)`. What differs from a `ModuleList`:

    - `named_parameters()` names a stacked tensor by its path in a layer with `/` for `.` (`'blocks.fc/weight'`),
      and its shape has the layer axis: a `p.dim() >= 2` rule for weight decay counts a stacked bias as a matrix
      (select by name instead);
    - a layer's tensors are views, not leaves: gradients accumulate into the stacked tensors' `.grad`, and
      `requires_grad` is set on the stacked tensors (all layers together);
    - appending, inserting, replacing or deleting a layer stacks the tensors again (new tensors: build the optimizer
      after), as does `load_state_dict(..., assign=True)`; assigning a new tensor to one layer's attribute is refused
      by `scan_layers`, which names it.

    >>> stack = aotjax.nn.LayerStack([aotjax.nn.Linear(2, 2) for _ in range(3)])
    >>> [(name, tuple(p.shape)) for name, p in stack.named_parameters()]
    [('weight', (3, 2, 2)), ('bias', (3, 2))]
    >>> list(stack.state_dict())[:2], stack[1].weight.grad_fn.name()
    (['0.weight', '0.bias'], 'SelectBackward0')
    """

    _stacked_state = True

    def __init__(self, modules: Iterable[Module] | None = None):
        Module.__init__(self)
        self.__dict__["_stacked_views"] = _Views((), ())
        if modules is not None:
            self.extend(modules)

    # -- the list: every change stacks again -----------------------------------------------------------------------
    def append(self, module: Module) -> "LayerStack":
        """Add `module` at the end and stack again; returns self."""
        self._restack(list(self._modules.values()) + [module])
        return self

    def extend(self, modules: Iterable[Module]) -> "LayerStack":
        """Append each of `modules` and stack again (once); returns self."""
        if isinstance(modules, str) or not hasattr(modules, "__iter__") or (
                isinstance(modules, Module) and not hasattr(type(modules), "__iter__")):
            raise TypeError(f"LayerStack.extend should be called with an iterable of modules (a list, a ModuleList), "
                            f"but got {type(modules).__name__}")
        self._restack(list(self._modules.values()) + list(modules))
        return self

    def insert(self, index: int, module: Module) -> None:
        """Insert `module` before position `index` and stack again."""
        layers = list(self._modules.values())
        layers.insert(index, module)
        self._restack(layers)

    def __setitem__(self, idx, module: Module) -> None:
        layers = list(self._modules.values())
        layers[idx] = module
        self._restack(layers)

    def __delitem__(self, idx) -> None:
        layers = list(self._modules.values())
        del layers[idx]
        self._restack(layers)

    def __getitem__(self, idx):
        if isinstance(idx, slice):  # NOTE: a plain list of the layers, which stay views of this stack's tensors
            return ModuleList(list(self._modules.values())[idx])
        self._view_layers_if_stale()
        return super().__getitem__(idx)

    def __iter__(self) -> Iterator[Module]:
        self._view_layers_if_stale()
        return super().__iter__()

    def forward(self, x):
        """`nn.scan_layers(self, x)`: the layers applied in order, as one scan over the stacked tensors."""
        return scan_layers(self, x)

    # -- stacking ---------------------------------------------------------------------------------------------------
    def stacked_tensors(self) -> tuple[dict, dict]:
        """`(parameters, buffers)`: dicts from a layer's dotted names to the stacked tensors (what `scan_layers` scans
        over).

        >>> params, buffers = aotjax.nn.LayerStack([aotjax.nn.BatchNorm1d(2) for _ in range(4)]).stacked_tensors()
        >>> tuple(params["weight"].shape), list(buffers)
        ((4, 2), ['running_mean', 'running_var', 'num_batches_tracked'])
        """
        state = self.__dict__
        out: tuple[dict, dict] = ({}, {})
        for kind, key, path in self._stacked_views.entries:
            out[kind == "_buffers"][path] = state[kind][key]
        return out

    def _restack(self, layers: list) -> None:
        """Make `layers` this list's layers, their tensors stacked into new tensors here and viewed by each layer."""
        call_epoch.module_changed()
        state = self.__dict__
        state["_modules"] = {str(i): layer for i, layer in enumerate(layers)}
        state["_parameters"], state["_buffers"], state["_non_persistent_buffers_set"] = {}, {}, set()
        state["_stacked_views"] = _Views((), ())
        if not layers:
            return
        for k, layer in enumerate(layers):
            if not isinstance(layer, Module):
                raise TypeError(f"LayerStack: element {k} is a {type(layer).__name__}, not an aotjax.nn.Module"
                                f"{where()}")
        first = layers[0]
        check_alike(layers, "LayerStack", "Keep unlike layers in a ModuleList")
        named = list(first.named_parameters(remove_duplicate=False)) + list(first.named_buffers(remove_duplicate=False))
        if len({id(t) for _, t in named}) < len(named):
            raise ValueError(f"LayerStack: a {type(first).__name__} layer holds one tensor under several names (tied "
                             f"weights){where()}; its tensors cannot be stacked one per name. Keep it in a ModuleList")
        entries = []
        with grad_mode(False):
            for kind, named in (("_parameters", "named_parameters"), ("_buffers", "named_buffers")):
                for path, t in getattr(first, named)(remove_duplicate=False):
                    values = [_tensor_at(layer, kind, path) for layer in layers]
                    stacked = stack([v.detach() for v in values])
                    key = path.replace(".", "/")
                    if kind == "_parameters":
                        stacked = Parameter(stacked, requires_grad=t.requires_grad)
                    else:
                        owner, attr = _owner(first, path)
                        if attr in owner._non_persistent_buffers_set:
                            state["_non_persistent_buffers_set"].add(key)
                    state[kind][key] = stacked
                    entries.append((kind, key, path))
        state["_stacked_views"] = _Views(tuple(entries), ())
        self._view_layers()

    def _view_layers(self) -> None:
        """Make every layer's tensors views of the stacked tensors as they are now."""
        state = self.__dict__
        entries = self._stacked_views.entries
        stacked = tuple(state[kind][key] for kind, key, _ in entries)
        with grad_mode(True):  # NOTE: so that a layer's use reaches the stacked tensor in backward
            for i, layer in enumerate(state["_modules"].values()):
                for (kind, _, path), t in zip(entries, stacked):
                    owner, attr = _owner(layer, path)
                    owner.__dict__[kind][attr] = _layer_view(t, i)
        state["_stacked_views"] = _Views(entries, stacked)

    def _view_layers_if_stale(self) -> None:
        """View the stacked tensors again where one was replaced in this list's table (`functional_call`)."""
        state = self.__dict__
        views = state["_stacked_views"]
        for (kind, key, _), t in zip(views.entries, views.stacked):
            if state[kind].get(key) is not t:
                self._view_layers()
                return

    def check_views(self, what: str) -> None:
        """Raise, naming the layer and tensor, where a layer's tensor is no longer a view of the stacked tensor (an
        attribute of one layer was assigned a new tensor)."""
        self._view_layers_if_stale()
        state = self.__dict__
        for i, layer in enumerate(state["_modules"].values()):
            for kind, key, path in self._stacked_views.entries:
                t, storage = _tensor_at(layer, kind, path), getattr(state[kind][key], "_storage", None)
                if not isinstance(t, Tensor) or storage is not None and getattr(t, "_storage", None) is not storage:
                    raise ValueError(f"{what}: layer {i}'s '{path}' is not a view of the LayerStack's stacked "
                                     f"'{key}' any more (a new tensor was assigned to it){where()}; write into it "
                                     f"in place instead (`.copy_(...)` under `no_grad()`), or stack again "
                                     f"(`stack[{i}] = layer`)")

    # -- state dicts, copies ----------------------------------------------------------------------------------------
    def _load(self, state_dict: dict, prefix: str, assign: bool, missing: list, unexpected: list,
              errors: list) -> None:
        super()._load(state_dict, prefix, assign, missing, unexpected, errors)
        if assign and not errors:  # NOTE: the layers now hold the given tensors: stack those
            self._restack(list(self._modules.values()))

    def __deepcopy__(self, memo):
        views = [id(_tensor_at(layer, kind, path)) for layer in self._modules.values()
                 for kind, _, path in self._stacked_views.entries]
        for v in views:  # NOTE: the copy's layers view the copy's stacked tensors, made once below
            memo[v] = None
        new = object.__new__(type(self))
        memo[id(self)] = new
        for k, v in self.__dict__.items():
            new.__dict__[k] = copy.deepcopy(v, memo)
        new._view_layers()
        return new

    # -- the pytree: the stacked tensors are the children; the layers are rebuilt around views of them ---------------
    @staticmethod
    def _tree_flatten(stack: "LayerStack"):
        stack._view_layers_if_stale()
        state = stack.__dict__
        entries = stack._stacked_views.entries
        children = [state[kind][key] for kind, key, _ in entries]
        position = {}
        layers = []
        for layer in state["_modules"].values():
            for k, (kind, _, path) in enumerate(entries):
                position[id(_tensor_at(layer, kind, path))] = k
            leaves, treedef = jax.tree_util.tree_flatten(layer)
            if any(id(v) not in position for v in leaves):
                stack.check_views("LayerStack")
            layers.append((treedef, tuple(position[id(v)] for v in leaves)))
        attrs = {k: v for k, v in _attrs(state).items() if k not in _OWN}
        return children, _StackDef(type(stack), entries, frozenset(state["_non_persistent_buffers_set"]),
                                   _ModuleDef(type(stack), ((), (), ()), attrs), tuple(layers))

    @staticmethod
    def _tree_flatten_with_keys(stack: "LayerStack"):
        children, definition = LayerStack._tree_flatten(stack)
        return [(jax.tree_util.GetAttrKey(key), c) for (_, key, _), c in zip(definition.entries, children)], \
            definition

    @staticmethod
    def _tree_unflatten(definition: "_StackDef", children) -> "LayerStack":
        stack = object.__new__(definition.cls)
        state = stack.__dict__
        state.update(definition.attrs.attrs)
        state["_parameters"], state["_buffers"] = {}, {}
        state["_non_persistent_buffers_set"] = set(definition.non_persistent)
        children = list(children)
        for (kind, key, _), c in zip(definition.entries, children):
            state[kind][key] = c
        with grad_mode(True):
            state["_modules"] = {str(i): treedef.unflatten([_layer_view(children[k], i) for k in order])
                                 for i, (treedef, order) in enumerate(definition.layers)}
        state["_stacked_views"] = _Views(definition.entries, tuple(children))
        return stack



# -- helpers ---------------------------------------------------------------------------------------------------------
_OWN = frozenset({"_stacked_views", "_non_persistent_buffers_set"})


class _Views:
    """What the layers view: `entries`, `(table, key in it, dotted path in a layer)` per stacked tensor, and the
    stacked tensors the layers' views were made of (to see when one was replaced)."""

    __slots__ = ("entries", "stacked")

    def __init__(self, entries: tuple, stacked: tuple):
        self.entries, self.stacked = entries, stacked

    def __deepcopy__(self, memo):
        return _Views(self.entries, ())  # NOTE: the copy views its own stacked tensors (`_view_layers`)


class _StackDef:
    """A LayerStack's static pytree part: its class, its stacked entries, its other attributes (Module's static part)
    and per layer the layer's pytree structure and which stacked tensor each of its leaves views."""

    __slots__ = ("cls", "entries", "non_persistent", "attrs", "layers", "_key")

    def __init__(self, cls, entries, non_persistent, attrs, layers):
        self.cls, self.entries, self.non_persistent, self.attrs, self.layers = \
            cls, entries, non_persistent, attrs, layers
        self._key = (cls, entries, non_persistent, attrs, layers)

    def __eq__(self, other) -> bool:
        return isinstance(other, _StackDef) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        return f"{self.cls.__name__}({len(self.layers)} layers: {', '.join(k for _, k, _ in self.entries)})"


def _owner(module: Module, path: str):
    *parts, attr = path.split(".")
    for part in parts:
        module = module._modules[part]
    return module, attr


def _tensor_at(layer: Module, kind: str, path: str):
    owner, attr = _owner(layer, path)
    return owner.__dict__[kind].get(attr)


def _layer_view(t, i: int):
    """Layer `i`'s view of the stacked `t` (anything else, a pytree's stand-in leaf, as it is)."""
    return t[i] if isinstance(t, Tensor) else t
