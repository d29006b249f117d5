"""`Module`: the base class of neural-network layers, with `torch.nn.Module`'s surface, and a pytree.

A Module holds its parameters (`Parameter`s, or None), buffers (plain Tensors: persistent ones are in the
`state_dict`, non-persistent ones are not) and submodules in three ordered dicts, registered by attribute
assignment or `register_parameter` / `register_buffer` / `add_module`. Everything else it holds
(hyperparameters, `training`) is an ordinary attribute.

Every Module class is a `jax.tree_util` pytree (registered when the class is defined): its children are its
parameters, then its buffers (non-persistent ones included: they are state), then its submodules, keyed
`GetAttrKey(name)` (`SequenceKey(i)` for the numbered children of `Sequential`/`ModuleList`, `DictKey(name)` for
those of `ModuleDict`), so a leaf's path reads `.layers[0].weight`. The tree's static part holds the class, the
names and every other attribute, compared by value: two modules of one class with equal hyperparameters and
mode have equal treedefs (a compiled function is reused), `model.eval()` gives another (it recompiles).
Unflattening builds a new instance without calling `__init__`. So `aotjax.jit(step)(model, x)` passes the
model's tensors as arguments, and in-place writes to them (BatchNorm's running statistics) are written back to
the caller's module.

>>> class Affine(aotjax.nn.Module):
...     def __init__(self):
...         super().__init__()
...         self.scale = aotjax.nn.Parameter(aotjax.ones(2))
...         self.register_buffer("calls", aotjax.zeros((), dtype=aotjax.int32))
...     def forward(self, x):
...         self.calls.add_(1)
...         return x * self.scale
>>> m = Affine()
>>> [name for name, _ in m.named_parameters()], list(m.state_dict())
(['scale'], ['scale', 'calls'])
>>> y = aotjax.jit(lambda m, x: m(x))(m, aotjax.ones(2))
>>> m.calls.item()
1

Hooks, as torch's: `register_forward_pre_hook`, `register_forward_hook`, `register_full_backward_pre_hook`,
`register_full_backward_hook` (and the global `register_module_*` functions), kept in the dicts torch names
(`_forward_hooks`, ...), keyed by their `RemovableHandle`'s id. A module call with no hook anywhere is `forward`
after one check. Forward hooks are plain Python: under a transform they run while the call is traced (seeing traced
values) and are baked into the program; registering or removing one makes a new dict, so the compiled program's
guard on the module sees it and traces again. Backward hooks run in an eager `backward()` (see
`aotjax.nn.modules._backward_hook`).
"""
from __future__ import annotations

import warnings
import weakref
from collections import OrderedDict, namedtuple
from typing import Any, Callable, Iterator

import jax
import numpy as np

from aotjax.autograd import graph
from aotjax.core import call_epoch
from aotjax.core.errors import UnsupportedError
from aotjax.core.interpreter import Tracer, grad_mode
from aotjax.core.source_info import where
from aotjax.nn.parameter import Parameter
from aotjax.ops.base.data import tensor
from aotjax.ops.base.frontend import to_dtype
from aotjax.ops.base.promotion import is_float
from aotjax.tensor import Tensor

__all__ = ["Module", "RemovableHandle", "register_module_forward_pre_hook", "register_module_forward_hook",
           "register_module_full_backward_pre_hook", "register_module_full_backward_hook"]

_STATE_DICTS = ("_parameters", "_buffers", "_modules")
# every module's hook dicts (torch's names): hook id -> hook, or -> True for the flags of the `_with_kwargs` and
# `_always_called` ones
_HOOK_TABLES = ("_backward_pre_hooks", "_backward_hooks", "_forward_hooks", "_forward_hooks_with_kwargs",
                "_forward_hooks_always_called", "_forward_pre_hooks", "_forward_pre_hooks_with_kwargs",
                "_state_dict_hooks", "_state_dict_pre_hooks", "_load_state_dict_pre_hooks",
                "_load_state_dict_post_hooks")

# the hooks of every module (`register_module_*`), run before each module's own
_global_backward_pre_hooks: dict = OrderedDict()
_global_backward_hooks: dict = OrderedDict()
_global_forward_pre_hooks: dict = OrderedDict()
_global_forward_hooks: dict = OrderedDict()
_global_forward_hooks_always_called: dict = OrderedDict()
_global_forward_hooks_with_kwargs: dict = OrderedDict()
_hooks_seen = False  # NOTE: set by the first hook registered anywhere: until then a module call checks nothing else


def _typename(value) -> str:
    t = type(value)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def _check_name(what: str, name, owner: "Module") -> None:
    if not isinstance(name, str):
        raise TypeError(f"{what} name should be a string. Got {_typename(name)}")
    if name == "":
        raise KeyError(f'{what} name can\'t be empty string ""')
    if "." in name:
        raise KeyError(f'{what} name can\'t contain ".", got: {name}')


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What `load_state_dict` returns: the keys the module expected but did not get, and the ones it got but
    does not have."""

    __slots__ = ()

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


class RemovableHandle:
    """What each `register_*_hook` returns: `remove()` unregisters the hook (again: nothing), as does leaving a
    `with` block; `id` is the hook's key in the module's hook dict.

    >>> fc = aotjax.nn.Linear(2, 2)
    >>> with fc.register_forward_hook(lambda m, args, out: out * 0):
    ...     fc(aotjax.ones(2)).sum().item()
    0.0
    >>> len(fc._forward_hooks)
    0
    """

    next_id = 0

    def __init__(self, module: "Module | None", tables: tuple):
        self.id = RemovableHandle.next_id
        RemovableHandle.next_id += 1
        # NOTE: a module's hooks by its table names (a registration replaces the dict), the global hooks by dict
        self._module = weakref.ref(module) if module is not None else None
        self._tables = tables

    def remove(self) -> None:
        if self._module is None:
            for table in self._tables:
                table.pop(self.id, None)
            return
        module = self._module()
        if module is not None:
            _edit_hooks(module, self._tables, lambda hooks: hooks.pop(self.id, None))

    def __enter__(self) -> "RemovableHandle":
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


def _edit_hooks(module: "Module", tables: tuple, edit: Callable[[OrderedDict], Any]) -> None:
    """Apply `edit` to copies of the module's hook dicts `tables`, which replace them.
    NOTE: new dicts, not edited in place: a compiled program guards the module's hook dicts by identity, so it sees
    a hook added or removed after it was traced (and traces again)."""
    state = module.__dict__
    for table in tables:
        hooks = OrderedDict(getattr(module, table))
        edit(hooks)
        state[table] = hooks
    call_epoch.module_changed()


def _add_hook(module: "Module", table: str, hook: Callable, prepend: bool = False,
              flags: tuple = ()) -> RemovableHandle:
    """Register `hook` in the module's dict `table` (first with `prepend`), flagged True in each of `flags`."""
    if not callable(hook):
        raise TypeError(f"register{table[:-1]}: expected a callable hook, got {_typename(hook)}{where()}")
    handle = RemovableHandle(module, (table, *flags))
    _edit_hooks(module, (table,), lambda hooks: _put(hooks, handle.id, hook, prepend))
    _edit_hooks(module, flags, lambda hooks: _put(hooks, handle.id, True, False))
    _saw_hooks()
    return handle


def _put(hooks: OrderedDict, key: int, value, prepend: bool) -> None:
    hooks[key] = value
    if prepend:
        hooks.move_to_end(key, last=False)


def _saw_hooks() -> None:
    global _hooks_seen
    _hooks_seen = True


def _add_global_hook(table: dict, hook: Callable, flags: tuple = ()) -> RemovableHandle:
    if not callable(hook):
        raise TypeError(f"register_module hook: expected a callable hook, got {_typename(hook)}{where()}")
    handle = RemovableHandle(None, (table, *flags))
    table[handle.id] = hook
    for flag in flags:
        flag[handle.id] = True
    call_epoch.module_changed()
    _saw_hooks()
    return handle


def register_module_forward_pre_hook(hook: Callable) -> RemovableHandle:
    """A forward pre-hook of every module (`Module.register_forward_pre_hook`), run before each module's own.
    NOTE: a program compiled before it was registered does not run it (its guards read the modules, not this table).

    >>> seen = []
    >>> with aotjax.nn.modules.module.register_module_forward_pre_hook(lambda m, args: seen.append(type(m))):
    ...     _ = aotjax.nn.ReLU()(aotjax.ones(1))
    >>> seen
    [<class 'aotjax.nn.modules.activation.ReLU'>]
    """
    return _add_global_hook(_global_forward_pre_hooks, hook)


def register_module_forward_hook(hook: Callable, *, with_kwargs: bool = False,
                                 always_call: bool = False) -> RemovableHandle:
    """A forward hook of every module (`Module.register_forward_hook`), run before each module's own."""
    flags = ((_global_forward_hooks_with_kwargs,) if with_kwargs else ()) + \
        ((_global_forward_hooks_always_called,) if always_call else ())
    handle = _add_global_hook(_global_forward_hooks, hook, flags)
    handle._tables = (_global_forward_hooks, _global_forward_hooks_with_kwargs, _global_forward_hooks_always_called)
    return handle


def register_module_full_backward_pre_hook(hook: Callable) -> RemovableHandle:
    """A backward pre-hook of every module (`Module.register_full_backward_pre_hook`), run before each module's
    own."""
    return _add_global_hook(_global_backward_pre_hooks, hook)


def register_module_full_backward_hook(hook: Callable) -> RemovableHandle:
    """A backward hook of every module (`Module.register_full_backward_hook`), run before each module's own."""
    return _add_global_hook(_global_backward_hooks, hook)


class _WithModule:
    """A load-state-dict pre-hook called with its module first (held weakly, as torch's)."""

    def __init__(self, hook: Callable, module: "Module"):
        self.hook, self.module = hook, weakref.ref(module)

    def __call__(self, *args):
        return self.hook(self.module(), *args)


class _HookedCall:
    """One module call with hooks (`Module._call_impl`): its arguments and result as the hooks replace them, and
    the `always_call` forward hooks that already ran."""

    __slots__ = ("module", "args", "kwargs", "result", "called")

    def __init__(self, module: "Module", args: tuple, kwargs: dict):
        self.module, self.args, self.kwargs, self.result, self.called = module, args, kwargs, None, set()

    def run(self):
        module = self.module
        backward_pre_hooks = [*_global_backward_pre_hooks.values(), *module._backward_pre_hooks.values()]
        backward_hooks = [*_global_backward_hooks.values(), *module._backward_hooks.values()]
        self.run_pre_hooks()
        backward = None
        if backward_hooks or backward_pre_hooks:
            from aotjax.nn.modules._backward_hook import BackwardHook  # NOTE: that package imports this module
            backward = BackwardHook(module, backward_hooks, backward_pre_hooks)
            self.args = backward.setup_input(self.args)
        self.result = module.forward(*self.args, **self.kwargs)
        self.run_forward_hooks()
        if backward is not None:
            self.result = backward.setup_output(self.result)
        return self.result

    def run_pre_hooks(self) -> None:
        module = self.module
        with_kwargs = module._forward_pre_hooks_with_kwargs
        for hook_id, hook in (*_global_forward_pre_hooks.items(), *module._forward_pre_hooks.items()):
            if hook_id in with_kwargs:
                result = hook(module, self.args, self.kwargs)
                if result is None:
                    continue
                if not (isinstance(result, tuple) and len(result) == 2):
                    raise RuntimeError(f"forward pre-hook must return None or a tuple of (new_args, new_kwargs), "
                                       f"but got {result}.")
                self.args, self.kwargs = result
            else:
                result = hook(module, self.args)
                if result is not None:
                    self.args = result if isinstance(result, tuple) else (result,)

    def run_forward_hooks(self) -> None:
        module = self.module
        for hook_id, hook in (*_global_forward_hooks.items(), *module._forward_hooks.items()):
            if hook_id in module._forward_hooks_always_called or hook_id in _global_forward_hooks_always_called:
                self.called.add(hook_id)
            self.call_forward_hook(hook_id, hook)

    def call_forward_hook(self, hook_id: int, hook: Callable) -> None:
        module = self.module
        if hook_id in module._forward_hooks_with_kwargs or hook_id in _global_forward_hooks_with_kwargs:
            result = hook(module, self.args, self.kwargs, self.result)
        else:
            result = hook(module, self.args, self.result)
        if result is not None:
            self.result = result

    def run_always_called(self) -> None:
        """After an error: the `always_call` forward hooks that did not run, global ones first; an error one of
        them raises is a warning (the first error propagates)."""
        module = self.module
        for hooks, flags in ((_global_forward_hooks, _global_forward_hooks_always_called),
                             (module._forward_hooks, module._forward_hooks_always_called)):
            for hook_id, hook in list(hooks.items()):
                if hook_id not in flags or hook_id in self.called:
                    continue
                try:
                    self.call_forward_hook(hook_id, hook)
                except Exception as e:
                    warnings.warn(f"module forward hook with ``always_call=True`` raised an exception that was "
                                  f"silenced as another error was raised in forward: {e}", stacklevel=4)


def reset_grads(params, set_to_none: bool) -> None:
    """Set the `.grad` of each of `params` to None, or fill it with zeros in place (`zero_grad`)."""
    with grad_mode(False):
        for p in params:
            if graph.leaf_of(p) is None and (p._ag is not None or graph.grad_of(p) is None):
                continue  # NOTE: a parameter that stopped requiring grad still has its kept `.grad` reset
            if set_to_none:
                p.grad = None  # NOTE: not read first: a staged step's `.grad` at entry is then no guard of it
                continue
            g = p.grad
            if g is not None:
                g.zero_()


class Module:
    """The base class of all neural-network modules, as `torch.nn.Module`: subclass it, create parameters,
    buffers and submodules in `__init__` (after `super().__init__()`), write `forward`, call the module.

    >>> class TwoLayer(aotjax.nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.fc1 = aotjax.nn.Linear(3, 4)
    ...         self.fc2 = aotjax.nn.Linear(4, 1)
    ...     def forward(self, x):
    ...         return self.fc2(aotjax.relu(self.fc1(x)))
    >>> model = TwoLayer()
    >>> model(aotjax.ones(5, 3)).shape
    (5, 1)
    >>> [name for name, _ in model.named_parameters()]
    ['fc1.weight', 'fc1.bias', 'fc2.weight', 'fc2.bias']
    """

    training: bool

    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got unexpected arguments {args} {kwargs}: "
                            f"Module.__init__ takes none")
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", {})
        object.__setattr__(self, "_buffers", {})
        object.__setattr__(self, "_non_persistent_buffers_set", set())
        for table in _HOOK_TABLES:
            object.__setattr__(self, table, OrderedDict())
        object.__setattr__(self, "_modules", {})

    # NOTE: True on a module whose own tables hold its descendants' tensors, stacked (`aotjax.nn.LayerStack`): the
    # descendants hold views of them. Traversals take the stacked tensors and skip the views; the state dict has
    # the views (per-layer keys), not the stacked tensors.
    _stacked_state = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        _register_pytree(cls)

    @staticmethod
    def _pytree_key(name: str):
        """The key of the child `name` in the module's pytree paths."""
        return jax.tree_util.GetAttrKey(name)

    # -- calling ---------------------------------------------------------------------------------
    def forward(self, *args, **kwargs):
        """The computation the module performs; every subclass defines it."""
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    def __call__(self, *args, **kwargs):
        if _hooks_seen and (self._forward_pre_hooks or self._forward_hooks or self._backward_pre_hooks
                            or self._backward_hooks or _global_forward_pre_hooks or _global_forward_hooks
                            or _global_backward_pre_hooks or _global_backward_hooks):
            return self._call_impl(*args, **kwargs)
        return self.forward(*args, **kwargs)

    def _call_impl(self, *args, **kwargs):
        """`forward` with the hooks around it, in torch's order: the forward pre-hooks (global ones first; a result
        that is not None replaces the positional arguments, or `(args, kwargs)` with `with_kwargs`), the backward
        hooks' setup on the inputs, `forward`, the forward hooks (a result that is not None replaces the output),
        the backward hooks' setup on the outputs. If anything raises, the forward hooks registered with
        `always_call=True` that have not run yet run before the error propagates."""
        call = _HookedCall(self, args, kwargs)
        try:
            return call.run()
        except Exception:
            call.run_always_called()
            raise

    # -- hooks -------------------------------------------------------------------------------------
    def register_forward_pre_hook(self, hook: Callable, *, prepend: bool = False,
                                  with_kwargs: bool = False) -> RemovableHandle:
        """Call `hook(module, args)` before each `forward` (`hook(module, args, kwargs)` with `with_kwargs`); a
        result that is not None replaces the positional arguments (a single value is wrapped in a tuple), or, with
        `with_kwargs`, is the pair `(args, kwargs)` replacing both. `prepend` runs it before the hooks already
        registered. Returns a `RemovableHandle`.

        >>> fc = aotjax.nn.Linear(2, 1)
        >>> h = fc.register_forward_pre_hook(lambda m, args: (args[0] * 0,))
        >>> fc(aotjax.ones(2)).item() == fc.bias.item()
        True
        >>> h.remove()
        """
        flags = ("_forward_pre_hooks_with_kwargs",) if with_kwargs else ()
        return _add_hook(self, "_forward_pre_hooks", hook, prepend, flags)

    def register_forward_hook(self, hook: Callable, *, prepend: bool = False, with_kwargs: bool = False,
                              always_call: bool = False) -> RemovableHandle:
        """Call `hook(module, args, output)` after each `forward` (`hook(module, args, kwargs, output)` with
        `with_kwargs`); a result that is not None replaces the output. `always_call` runs it even when the call
        raises. Returns a `RemovableHandle`. Under a transform the hook runs while the call is traced and sees
        traced values: return what it computes from the traced function rather than storing it.

        >>> feats = {}
        >>> net = aotjax.nn.Sequential(aotjax.nn.Linear(2, 3), aotjax.nn.ReLU())
        >>> h = net[0].register_forward_hook(lambda m, args, out: feats.update(fc=out.detach()))
        >>> _ = net(aotjax.ones(1, 2))
        >>> feats["fc"].shape
        (1, 3)
        """
        flags = (("_forward_hooks_with_kwargs",) if with_kwargs else ()) + \
            (("_forward_hooks_always_called",) if always_call else ())
        return _add_hook(self, "_forward_hooks", hook, prepend, flags)

    def register_full_backward_pre_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """Call `hook(module, grad_output)` when the gradients with respect to the module's outputs are computed
        (a tuple, one per output: None for a non-tensor output or one that got no gradient); a result that is not
        None replaces them. Runs in an eager `backward()` / `autograd.grad` (a module with backward hooks cannot
        be traced with grad enabled). Returns a `RemovableHandle`.

        >>> fc = aotjax.nn.Linear(2, 1)
        >>> h = fc.register_full_backward_pre_hook(lambda m, grad_output: (grad_output[0] * 0,))
        >>> fc(aotjax.ones(1, 2, requires_grad=True)).sum().backward()
        >>> fc.weight.grad
        tensor([[0., 0.]])
        """
        return _add_hook(self, "_backward_pre_hooks", hook, prepend)

    def register_full_backward_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """Call `hook(module, grad_input, grad_output)` when the gradients with respect to the module's positional
        inputs are computed (tuples: None for a non-tensor argument, zeros for a tensor that does not require grad,
        as torch's); a result that is not None replaces `grad_input`. If no input requires grad, it runs with the
        output gradients and `grad_input` all None. Runs in an eager `backward()` / `autograd.grad`, as
        `register_full_backward_pre_hook`. Returns a `RemovableHandle`.

        >>> fc = aotjax.nn.Linear(2, 1)
        >>> x = aotjax.ones(1, 2, requires_grad=True)
        >>> h = fc.register_full_backward_hook(lambda m, grad_input, grad_output: (grad_input[0] * 10,))
        >>> fc(x).sum().backward()
        >>> bool((x.grad == fc.weight * 10).all())
        True
        """
        return _add_hook(self, "_backward_hooks", hook, prepend)

    def register_backward_hook(self, hook: Callable):
        """Not supported: torch deprecates it; use `register_full_backward_hook`."""
        raise UnsupportedError(f"register_backward_hook: torch's deprecated non-full backward hook is not supported "
                               f"in {self._get_name()}{where()}; use register_full_backward_hook(hook), which calls "
                               f"hook(module, grad_input, grad_output) with the gradients of the module's inputs")

    def register_state_dict_pre_hook(self, hook: Callable) -> RemovableHandle:
        """Call `hook(module, prefix, keep_vars)` at the start of `state_dict` (for each module it walks)."""
        return _add_hook(self, "_state_dict_pre_hooks", hook)

    def register_state_dict_post_hook(self, hook: Callable) -> RemovableHandle:
        """Call `hook(module, state_dict, prefix, local_metadata)` at the end of `state_dict` for this module; it
        may edit `state_dict` in place and must return None."""
        hook._from_public_api = True
        return _add_hook(self, "_state_dict_hooks", hook)

    def _register_state_dict_hook(self, hook: Callable) -> RemovableHandle:
        """As `register_state_dict_post_hook`, but a result that is not None replaces the state dict (torch's
        private form)."""
        if getattr(hook, "_from_public_api", False):
            raise RuntimeError("Cannot register the same function as the state dict post hook that was previously "
                               "registered via register_state_dict_post_hook")
        return _add_hook(self, "_state_dict_hooks", hook)

    def register_load_state_dict_pre_hook(self, hook: Callable) -> RemovableHandle:
        """Call `hook(module, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
        error_msgs)` before this module loads its entries of `state_dict` (which the hook may edit in place: rename
        old keys)."""
        return self._register_load_state_dict_pre_hook(hook, with_module=True)

    def _register_load_state_dict_pre_hook(self, hook: Callable, with_module: bool = False) -> RemovableHandle:
        """As `register_load_state_dict_pre_hook`, the hook called without the module unless `with_module`."""
        return _add_hook(self, "_load_state_dict_pre_hooks", _WithModule(hook, self) if with_module else hook)

    def register_load_state_dict_post_hook(self, hook: Callable) -> RemovableHandle:
        """Call `hook(module, incompatible_keys)` after this module and its submodules loaded a state dict;
        `incompatible_keys.missing_keys` and `.unexpected_keys` are the lists so far (edit them in place: a strict
        load checks them afterwards); the hook must return None.

        >>> fc = aotjax.nn.Linear(1, 1)
        >>> _ = fc.register_load_state_dict_post_hook(lambda m, keys: keys.missing_keys.clear())
        >>> fc.load_state_dict({"weight": [[1.0]]})
        <All keys matched successfully>
        """
        return _add_hook(self, "_load_state_dict_post_hooks", hook)

    # -- registration ------------------------------------------------------------------------------
    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Add a buffer: state that is not a parameter (BatchNorm's running statistics). A persistent buffer is
        part of the `state_dict`; every buffer is a leaf of the module's pytree.

        >>> m = aotjax.nn.Module()
        >>> m.register_buffer("step", aotjax.zeros(()), persistent=False)
        >>> list(m.state_dict()), [n for n, _ in m.named_buffers()]
        ([], ['step'])
        """
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        _check_name("buffer", name, self)
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{_typename(tensor)}' object to buffer '{name}' (aotjax Tensor or None "
                            f"required)")
        self._buffers[name] = tensor
        call_epoch.module_changed()
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Add a parameter (or None: a declared but absent parameter, such as `bias=False`'s).

        >>> m = aotjax.nn.Module()
        >>> m.register_parameter("w", aotjax.nn.Parameter(aotjax.zeros(2)))
        >>> [n for n, _ in m.named_parameters()]
        ['w']
        """
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        _check_name("parameter", name, self)
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{_typename(param)}' object to parameter '{name}' "
                            f"(aotjax.nn.Parameter or None required)")
        self._parameters[name] = param
        call_epoch.module_changed()

    def add_module(self, name: str, module: "Module | None") -> None:
        """Add a submodule (or None) under `name`, as attribute assignment does.

        >>> m = aotjax.nn.Module()
        >>> m.add_module("fc", aotjax.nn.Linear(2, 2))
        >>> [n for n, _ in m.named_children()]
        ['fc']
        """
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{_typename(module)} is not a Module subclass")
        if "_modules" not in self.__dict__:
            raise AttributeError("cannot assign module before Module.__init__() call")
        _check_name("module", name, self)
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        self._modules[name] = module
        call_epoch.module_changed()

    register_module = add_module

    # -- attributes --------------------------------------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        state = self.__dict__
        for kind in _STATE_DICTS:
            table = state.get(kind)
            if table is not None and name in table:
                return table[name]
        if name in _HOOK_TABLE_SET and "_parameters" in state:  # NOTE: left out of the pytree when empty (or
            # a module pickled before it had hook dicts): made on first read
            hooks = state[name] = OrderedDict()
            return hooks
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name: str, value: Any) -> None:
        call_epoch.module_changed()  # NOTE: compiled programs' guards read from modules again
        state = self.__dict__
        params = state.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._forget(name, keep="_parameters")
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{_typename(value)}' as parameter '{name}' (aotjax.nn.Parameter or "
                                f"None expected); wrap it, `aotjax.nn.Parameter(t)`, or write into the parameter "
                                f"in place, `self.{name}.copy_(t)`")
            params[name] = None
        elif isinstance(value, Module):
            if state.get("_modules") is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._forget(name, keep="_modules")
            self._modules[name] = value
        elif name in state.get("_modules", ()):
            if value is not None:
                raise TypeError(f"cannot assign '{_typename(value)}' as child module '{name}' (aotjax.nn.Module or "
                                f"None expected)")
            self._modules[name] = None
        elif name in state.get("_buffers", ()):
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{_typename(value)}' as buffer '{name}' (aotjax Tensor or None "
                                f"expected)")
            self._buffers[name] = value
            call_epoch.module_changed()
        else:
            object.__setattr__(self, name, value)

    def _forget(self, name: str, keep: str) -> None:
        """Remove `name` from the plain attributes and every registry but `keep` (a name changes kind)."""
        self.__dict__.pop(name, None)
        for kind in _STATE_DICTS:
            if kind != keep:
                self.__dict__[kind].pop(name, None)
        self._non_persistent_buffers_set.discard(name)

    def __delattr__(self, name: str) -> None:
        call_epoch.module_changed()
        for kind in _STATE_DICTS:
            table = self.__dict__.get(kind)
            if table is not None and name in table:
                del table[name]
                self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        names = list(super().__dir__())
        for kind in _STATE_DICTS:
            names.extend(self.__dict__.get(kind, {}))
        return sorted(set(n for n in names if not n[0].isdigit()))

    # -- traversal ---------------------------------------------------------------------------------
    def named_modules(self, memo: set | None = None, prefix: str = "", remove_duplicate: bool = True):
        """`(name, module)` for this module and every submodule, depth first (each module once unless
        `remove_duplicate=False`).

        >>> [n for n, _ in aotjax.nn.Sequential(aotjax.nn.Linear(1, 1), aotjax.nn.ReLU()).named_modules()]
        ['', '0', '1']
        """
        if memo is None:
            memo = set()
        if id(self) in memo:
            return
        if remove_duplicate:
            memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is not None:
                yield from module.named_modules(memo, prefix + ("." if prefix else "") + name, remove_duplicate)

    def modules(self) -> Iterator["Module"]:
        """This module and every submodule, depth first."""
        for _, module in self.named_modules():
            yield module

    def named_children(self) -> Iterator[tuple[str, "Module"]]:
        """`(name, module)` for the direct submodules."""
        seen = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def children(self) -> Iterator["Module"]:
        """The direct submodules."""
        for _, module in self.named_children():
            yield module

    def _named_members(self, kind: str, prefix: str, recurse: bool, remove_duplicate: bool):
        modules = _state_holders(self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)) if recurse \
            else [(prefix, self)]
        seen = set()
        for module_prefix, module in modules:
            for name, value in module.__dict__[kind].items():
                if value is None or id(value) in seen:
                    continue
                if remove_duplicate:
                    seen.add(id(value))
                yield module_prefix + ("." if module_prefix else "") + name, value

    def named_parameters(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        """`(name, parameter)` pairs, this module's first, then each submodule's (depth first); a parameter
        shared by several modules comes once unless `remove_duplicate=False`.

        >>> [(n, tuple(p.shape)) for n, p in aotjax.nn.Linear(3, 2).named_parameters()]
        [('weight', (2, 3)), ('bias', (2,))]
        """
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        """The parameters, in `named_parameters` order.

        >>> sum(p.numel() for p in aotjax.nn.Linear(3, 2).parameters())
        8
        """
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        """`(name, buffer)` pairs (non-persistent buffers included), in `named_parameters`' order.

        >>> [n for n, _ in aotjax.nn.BatchNorm1d(2).named_buffers()]
        ['running_mean', 'running_var', 'num_batches_tracked']
        """
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        """The buffers, in `named_buffers` order."""
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def get_submodule(self, target: str) -> "Module":
        """The submodule at the dotted path `target` (`""` is this module).

        >>> net = aotjax.nn.Sequential(aotjax.nn.Linear(1, 1))
        >>> net.get_submodule("0") is net[0]
        True
        """
        module = self
        if target == "":
            return module
        for item in target.split("."):
            if not hasattr(module, item):
                raise AttributeError(f"{module._get_name()} has no attribute `{item}`")
            module = getattr(module, item)
            if not isinstance(module, Module):
                raise AttributeError(f"`{item}` is not an nn.Module")
        return module

    def get_parameter(self, target: str) -> Parameter:
        """The parameter at the dotted path `target`.

        >>> aotjax.nn.Sequential(aotjax.nn.Linear(2, 1)).get_parameter("0.bias").shape
        (1,)
        """
        module_path, _, name = target.rpartition(".")
        module = self.get_submodule(module_path)
        if not hasattr(module, name):
            raise AttributeError(f"{module._get_name()} has no attribute `{name}`")
        param = getattr(module, name)
        if not isinstance(param, Parameter):
            raise AttributeError(f"`{name}` is not an nn.Parameter")
        return param

    def get_buffer(self, target: str) -> Tensor:
        """The buffer at the dotted path `target`.

        >>> aotjax.nn.BatchNorm1d(3).get_buffer("running_var")
        tensor([1., 1., 1.])
        """
        module_path, _, name = target.rpartition(".")
        module = self.get_submodule(module_path)
        if not hasattr(module, name):
            raise AttributeError(f"{module._get_name()} has no attribute `{name}`")
        if name not in module._buffers:
            raise AttributeError(f"`{name}` is not a buffer")
        return module._buffers[name]

    # -- state dicts -------------------------------------------------------------------------------
    def state_dict(self, destination: dict | None = None, prefix: str = "", keep_vars: bool = False) -> dict:
        """An ordered dict of the parameters and persistent buffers by dotted name, in PyTorch's order (each
        module's parameters, then its buffers, then its submodules'). The values are detached views sharing the
        tensors' storage (as PyTorch's: writing into one writes into the module); `keep_vars=True` gives the
        tensors themselves.

        >>> list(aotjax.nn.BatchNorm1d(2).state_dict())
        ['weight', 'bias', 'running_mean', 'running_var', 'num_batches_tracked']
        """
        if destination is None:
            destination = OrderedDict()
        for hook in self._state_dict_pre_hooks.values():
            hook(self, prefix, keep_vars)
        for name, param in () if self._stacked_state else self._parameters.items():
            if param is not None:
                destination[prefix + name] = param if keep_vars else param.detach()
        for name, buf in () if self._stacked_state else self._buffers.items():
            if buf is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = buf if keep_vars else buf.detach()
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        for hook in self._state_dict_hooks.values():
            result = hook(self, destination, prefix, {"version": 1})
            if getattr(hook, "_from_public_api", False):
                if result is not None:
                    raise RuntimeError("state_dict post-hook must return None")
            elif result is not None:
                destination = result
        return destination

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False) -> _IncompatibleKeys:
        """Copy the values of `state_dict` (tensors, NumPy arrays, ... by dotted name) into the module's
        parameters and persistent buffers, in place (cast to each tensor's dtype); `assign=True` makes the
        module hold the given tensors instead. With `strict`, missing or unexpected keys are an error; a shape
        mismatch always is. Returns `(missing_keys, unexpected_keys)`.

        >>> fc = aotjax.nn.Linear(2, 1)
        >>> fc.load_state_dict({"weight": [[1.0, 2.0]], "bias": [0.5]})
        <All keys matched successfully>
        >>> fc.bias
        Parameter containing:
        tensor([0.5], requires_grad=True)
        """
        if not hasattr(state_dict, "keys") or not hasattr(state_dict, "items"):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing: list = []
        unexpected: list = []
        errors: list = []
        with grad_mode(False):  # NOTE: loading writes parameters in place, outside any graph (as torch's)
            self._load(dict(state_dict), "", assign, missing, unexpected, errors)
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in unexpected)))
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: {}. ".format(", ".join(f'"{k}"' for k in missing)))
        if errors:
            raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(
                type(self).__name__, "\n\t".join(errors)))
        return _IncompatibleKeys(missing, unexpected)

    def _load(self, state_dict: dict, prefix: str, assign: bool, missing: list, unexpected: list,
              errors: list) -> None:
        for hook in self._load_state_dict_pre_hooks.values():
            hook(state_dict, prefix, {}, True, missing, unexpected, errors)
        local = {} if self._stacked_state else {name: p for name, p in self._parameters.items() if p is not None}
        local.update((name, b) for name, b in ({} if self._stacked_state else self._buffers).items()
                     if b is not None and name not in self._non_persistent_buffers_set)
        for name, target in local.items():
            key = prefix + name
            if key not in state_dict:
                missing.append(key)
                continue
            self._load_one(name, key, target, state_dict[key], assign, errors)
        for key in state_dict:
            if key.startswith(prefix):
                head = key[len(prefix):].split(".", 1)[0]
                if head not in self._modules and head not in local:
                    unexpected.append(key)
        for name, module in self._modules.items():
            if module is not None:
                child = prefix + name + "."
                module._load({k: v for k, v in state_dict.items() if k.startswith(child)}, child, assign, missing,
                             unexpected, errors)
        for hook in self._load_state_dict_post_hooks.values():
            if hook(self, _IncompatibleKeys(missing, unexpected)) is not None:
                raise AssertionError("Hooks registered with ``register_load_state_dict_post_hook`` are not expected "
                                     "to return new values, if incompatible_keys need to be modified, it should be "
                                     "done inplace.")

    def _load_one(self, name: str, key: str, target: Tensor, value, assign: bool, errors: list) -> None:
        try:
            # NOTE: arrays are made in the target's dtype: a checkpoint's int64 count loads into an int32 buffer
            # without jax's 64-bit-truncation warning
            value = value if isinstance(value, Tensor) else tensor(value, dtype=target.dtype)
        except (TypeError, ValueError):
            errors.append(f'While copying the parameter named "{key}", expected a Tensor or an array-like object '
                          f'from checkpoint but received {type(value)}')
            return
        if tuple(value.shape) != tuple(target.shape):
            errors.append(f"size mismatch for {key}: copying a param with shape {list(value.shape)} from "
                          f"checkpoint, the shape in current model is {list(target.shape)}.")
            return
        if not assign:
            target.copy_(value)
        elif isinstance(target, Parameter):
            setattr(self, name, value if isinstance(value, Parameter) else Parameter(value, target.requires_grad))
        else:
            self._buffers[name] = value
            call_epoch.module_changed()

    # -- modes and conversions ---------------------------------------------------------------------
    def train(self, mode: bool = True) -> "Module":
        """Set training mode (`mode=True`) or evaluation mode on this module and every submodule; returns
        self. Dropout and BatchNorm behave differently in each.

        >>> aotjax.nn.Dropout().train(False).training
        False
        """
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for module in self.children():
            module.train(mode)
        return self

    def eval(self) -> "Module":
        """Evaluation mode: `train(False)`.

        >>> aotjax.nn.BatchNorm1d(2).eval().training
        False
        """
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> "Module":
        """Set `requires_grad` of every parameter (frozen parameters get no `.grad` from `backward()`); returns
        self.

        >>> all(not p.requires_grad for p in aotjax.nn.Linear(1, 1).requires_grad_(False).parameters())
        True
        """
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the `.grad` of every parameter: to None (default), or to zeros in place.

        >>> m = aotjax.nn.Linear(2, 1)
        >>> m(aotjax.ones(1, 2)).sum().backward()
        >>> m.zero_grad()
        >>> m.weight.grad is None
        True
        """
        reset_grads(self.parameters(), set_to_none)

    def apply(self, fn: Callable[["Module"], None]) -> "Module":
        """Call `fn` on every submodule (children first) and then on this module; returns self.

        >>> seen = []
        >>> _ = aotjax.nn.Sequential(aotjax.nn.ReLU()).apply(lambda m: seen.append(type(m).__name__))
        >>> seen
        ['ReLU', 'Sequential']
        """
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    def to(self, *args, **kwargs) -> "Module":
        """Convert the floating-point parameters and buffers to `dtype` (`to(dtype)` or `to(dtype=...)`), in
        place: each keeps its identity (as PyTorch's `param.data = ...`), so an optimizer holding them sees the
        conversion. A `device` (a string, or `device=`) is accepted and ignored: aotjax keeps arrays where jax
        puts them. Returns self.

        >>> fc = aotjax.nn.Linear(2, 2).to(aotjax.float16)
        >>> fc.weight.dtype
        dtype('float16')
        """
        dtype = kwargs.pop("dtype", None)
        kwargs.pop("device", None)
        kwargs.pop("non_blocking", None)
        if kwargs:
            raise TypeError(f"Module.to: unexpected keyword arguments {sorted(kwargs)}")
        for arg in args:
            if isinstance(arg, Tensor):
                dtype = arg.dtype
            elif not _is_device(arg):
                dtype = arg
        if dtype is None:
            return self
        dtype = to_dtype(dtype, "Module.to")
        if not is_float(dtype):
            raise TypeError(f"Module.to: only floating-point dtypes are accepted, got {dtype}")
        return self._convert(lambda t: is_float(t.dtype), dtype)

    def cpu(self) -> "Module":
        """Returns self: aotjax keeps arrays where jax puts them (see `to`)."""
        return self

    def cuda(self, device=None) -> "Module":
        """Returns self where jax has a GPU (arrays are on it already: jax's default device); raises where it has
        none, as torch does."""
        from aotjax import cuda  # NOTE: nn sits beside aotjax.cuda; imported when a script asks for a GPU
        cuda.current_device()
        return self

    def float(self) -> "Module":
        """Floating-point parameters and buffers to float32; returns self."""
        return self._convert(lambda t: is_float(t.dtype), np.float32)

    def double(self) -> "Module":
        """Floating-point parameters and buffers to float64 (float32 without jax's x64 mode); returns self."""
        return self._convert(lambda t: is_float(t.dtype), np.float64)

    def half(self) -> "Module":
        """Floating-point parameters and buffers to float16; returns self."""
        return self._convert(lambda t: is_float(t.dtype), np.float16)

    def bfloat16(self) -> "Module":
        """Floating-point parameters and buffers to bfloat16; returns self."""
        return self._convert(lambda t: is_float(t.dtype), "bfloat16")

    def _convert(self, which: Callable[[Tensor], bool], dtype) -> "Module":
        for _, module in _state_holders(self.named_modules()):
            for kind in ("_parameters", "_buffers"):
                table = module.__dict__[kind]
                for name, t in table.items():
                    if t is not None and which(t):
                        table[name] = _converted(t, dtype)
            if module._stacked_state:
                module._view_layers()  # NOTE: the layers view the converted stacked tensors again
        return self

    # -- printing ----------------------------------------------------------------------------------
    def _get_name(self) -> str:
        return type(self).__name__

    def extra_repr(self) -> str:
        """The module's own line in its repr (its hyperparameters); subclasses override it."""
        return ""

    def __repr__(self) -> str:
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({name}): " + _indent(repr(module), 2) for name, module in self._modules.items()]
        lines = extra_lines + child_lines
        body = ""
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                body = extra_lines[0]
            else:
                body = "\n  " + "\n  ".join(lines) + "\n"
        return f"{self._get_name()}({body})"


def _state_holders(named_modules):
    """`(prefix, module)` of `named_modules` but the descendants of a module with stacked state (their tensors are
    views of its own)."""
    skip = None
    for prefix, module in named_modules:
        if skip is not None and prefix.startswith(skip):
            continue
        skip = (prefix + "." if prefix else "") if module._stacked_state else None
        yield prefix, module


def _indent(text: str, spaces: int) -> str:
    first, *rest = text.split("\n")
    return "\n".join([first] + [" " * spaces + line for line in rest])


def _is_device(arg) -> bool:
    return isinstance(arg, str) and arg.split(":")[0] in ("cpu", "cuda", "gpu", "tpu", "mps", "xla", "meta") or \
        type(arg).__name__ in ("device", "Device")


def _converted(t: Tensor, dtype) -> Tensor:
    """`t` converted to `dtype`; an eager tensor keeps its identity (its slots take the converted value's) and, when
    it was a leaf that requires grad, stays one (its `.grad` converted too, as torch's `param.data = ...`)."""
    if isinstance(t, Tracer):
        return t.to(dtype=dtype)
    with grad_mode(False):
        new = t.to(dtype=dtype)
    if new is t:
        return t
    meta = t._ag if graph.leaf_of(t) is not None else None
    t._init_slots(new._aval, new._strides, new._offset, storage=new._storage, chain=new._chain)
    if meta is not None:
        if meta.grad is not None:
            with grad_mode(False):
                meta.grad = meta.grad.to(dtype=dtype)
        t._ag = meta
        graph.mark_leaf(t)
    return t


# -- the pytree ------------------------------------------------------------------------------------
def _frozen(value) -> Any:
    """A hashable stand-in for an attribute value, equal for equal values: lists and tuples by their items,
    dicts by their sorted items, sets as frozensets, arrays by shape, dtype and bytes; tensors and other
    unhashable objects by identity."""
    if isinstance(value, Tensor):
        return ("tensor", id(value))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__,) + tuple(_frozen(v) for v in value)
    if isinstance(value, dict):
        return ("dict",) + tuple((k, _frozen(v)) for k, v in value.items())
    if isinstance(value, (set, frozenset)):
        return ("set", frozenset(_frozen(v) for v in value))
    if isinstance(value, np.ndarray):
        return ("ndarray", value.shape, value.dtype.str, value.tobytes())
    try:
        hash(value)
    except TypeError:
        return ("id", id(value))
    return value


class _ModuleDef:
    """The static part of a module's pytree: its class, the names of its children (parameters, buffers,
    submodules) and its other attributes. Equal (and equally hashed) when all of these are equal by value."""

    __slots__ = ("cls", "names", "attrs", "_key")

    def __init__(self, cls: type, names: tuple, attrs: dict):
        self.cls, self.names, self.attrs = cls, names, attrs
        self._key = (cls, names, tuple((k, type(v), _frozen(v)) for k, v in attrs.items()))

    def __eq__(self, other) -> bool:
        return isinstance(other, _ModuleDef) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        return f"{self.cls.__name__}({', '.join(n for names in self.names for n in names)})"


_STATE_DICT_SET, _HOOK_TABLE_SET = frozenset(_STATE_DICTS), frozenset(_HOOK_TABLES)


def _attrs(state: dict) -> dict:
    """A module's attributes but its tables of state and its empty hook dicts (an unflattened module makes those
    again when read: `Module.__getattr__`), so two modules without hooks compare as cheaply as before hooks."""
    return {k: v for k, v in state.items() if k not in _STATE_DICT_SET and (k not in _HOOK_TABLE_SET or v)}


def _flatten_with_keys(module: Module):
    state = module.__dict__
    names = tuple(tuple(state[kind]) for kind in _STATE_DICTS)
    attrs = _attrs(state)
    children = [(type(module)._pytree_key(name), table[name])
                for kind, table in ((kind, state[kind]) for kind in _STATE_DICTS) for name in table]
    return children, _ModuleDef(type(module), names, attrs)


def _flatten(module: Module):
    state = module.__dict__
    names = tuple(tuple(state[kind]) for kind in _STATE_DICTS)
    attrs = _attrs(state)
    return [v for kind in _STATE_DICTS for v in state[kind].values()], _ModuleDef(type(module), names, attrs)


def _unflatten(definition: _ModuleDef, children) -> Module:
    module = object.__new__(definition.cls)
    state = module.__dict__
    state.update(definition.attrs)
    if "_non_persistent_buffers_set" in state:
        state["_non_persistent_buffers_set"] = set(state["_non_persistent_buffers_set"])
    children = iter(children)
    for kind, names in zip(_STATE_DICTS, definition.names):
        state[kind] = {name: next(children) for name in names}
    return module


def _register_pytree(cls: type) -> None:
    """Register `cls` with its own pytree functions where it defines them (`aotjax.nn.LayerStack`), else Module's."""
    jax.tree_util.register_pytree_with_keys(cls, getattr(cls, "_tree_flatten_with_keys", _flatten_with_keys),
                                            getattr(cls, "_tree_unflatten", _unflatten),
                                            getattr(cls, "_tree_flatten", _flatten))


_register_pytree(Module)
