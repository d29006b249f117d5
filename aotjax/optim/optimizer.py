"""`Optimizer`: the base of the torch-style optimizers. What it adds to torch's design, so that a step traces
once and compiles whole:

- all state (`step` counts, moment buffers) is created in the constructor, never at the first step; a
  parameter's state starts as torch's lazily made state would (a value torch takes at the first step, such as
  Rprop's step size `lr`, is taken by the update when `step == 0`), and `state_dict()` leaves out the state of a
  parameter that has not stepped yet, as torch has none: `state_dict()` equals torch's after any number of steps;
- hyperparameters are 0-d Tensors in `param_groups[i]`; assigning `group['lr'] = 0.01` fills the existing
  tensor in place, so a jitted step sees the new value without retracing; flags (`nesterov`, `amsgrad`,
  `maximize`) are static Python values; torch's kernel selectors (`foreach`, `fused`, `capturable`,
  `differentiable`) are accepted and kept in the groups, and change nothing (torch's results do not depend on
  them);
- `step()` reads the parameters' `.grad` (eagerly: one compiled program for all parameters), or takes the
  gradients as an argument, `step(grads)`, a pytree shaped like the parameters as given;
- an optimizer is a jax pytree with keys: its leaves are the parameters, the state tensors and the
  hyperparameter tensors, so it passes through `aotjax.jit` like any argument and the in-place writes of a
  step are written back to the caller's tensors.

A subclass states its algorithm as a pure function of one parameter (`aotjax.optim.updates`), called by `_rule`.
"""
from __future__ import annotations

import contextlib
import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.tree_util import GetAttrKey

from aotjax.core.interpreter import Tracer, grad_mode, staging
from aotjax.core.source_info import where
from aotjax.nn.module import reset_grads
from aotjax.ops.base.data import tensor
from aotjax.ops.creation.factories import zeros
from aotjax.tensor import Tensor
from aotjax.transforms.jit import jit

__all__ = ["Optimizer", "ParamGroup"]

# torch's implementation selectors: they choose kernels, not results; a loaded torch state_dict's are dropped
_TORCH_ONLY_KEYS = frozenset({"foreach", "fused", "capturable", "differentiable"})


def _hyperparameter_dtype() -> np.dtype:
    """The dtype of hyperparameter tensors: the widest float the mode computes in (torch keeps them as Python
    floats, i.e. doubles)."""
    return np.dtype(np.float64 if jax.config.jax_enable_x64 else np.float32)


def _fill(dst: Tensor, value, what: str) -> None:
    """Write `value` (a number, a 0-d or same-shaped Tensor or array) into `dst` in place."""
    if isinstance(value, (bool, int, float)):
        dst.fill_(value)
        return
    if not isinstance(value, Tensor):
        value = tensor(np.asarray(value), dtype=dst.dtype)
    if dst.ndim == 0 and value.numel() == 1:
        value = value.reshape(())  # NOTE: a one-element tensor sets a 0-d hyperparameter, as torch takes it
    if tuple(value.shape) != tuple(dst.shape) and value.ndim != 0:
        raise ValueError(f"{what}: expected a value of shape {tuple(dst.shape)}, got one of shape "
                         f"{tuple(value.shape)}.")
    dst.copy_(value)


def _new_hyperparameter(value, what: str):
    """A fresh 0-d Tensor (a tuple of them for a tuple, e.g. `betas`) holding `value`."""
    if isinstance(value, (tuple, list)):
        return tuple(_new_hyperparameter(v, f"{what}[{i}]") for i, v in enumerate(value))
    out = zeros((), dtype=_hyperparameter_dtype())
    _fill(out, value, what)
    return out


def _as_number(value):
    """A number as given, or a Python float of an eager 0-d tensor (for validation and `defaults`); `None` for a
    traced value, which cannot be read."""
    if isinstance(value, Tracer):
        return None
    if isinstance(value, (tuple, list)):
        return tuple(_as_number(v) for v in value)
    if isinstance(value, (bool, int, float)):
        return value
    return float(value)


# -- validation, with torch's messages -----------------------------------------------------------------------
def _check_scalar(cls: type, label: str, value) -> None:
    """`value` is a real number or a one-element real tensor (or array), else the error torch's checks raise: a
    TypeError (its comparison `value < 0` fails), a ValueError for a tensor of more than one element."""
    if isinstance(value, numbers.Real):  # NOTE: bool, int, float and numpy's real scalars
        return
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is None or dtype is None:
        raise TypeError(f"{cls.__name__}: {label} must be a real number or a one-element tensor, got {value!r} of "
                        f"type {type(value).__name__}{where()}")
    if math.prod(shape) != 1:
        raise ValueError(f"{cls.__name__}: Tensor {label} must be 1-element, got one of shape {tuple(shape)}"
                         f"{where()}")
    if not isinstance(value, (Tensor, jax.Array)):
        dtype = np.asarray(value).dtype  # NOTE: another library's tensor (a torch state_dict's), through numpy
    if not (dtype == np.bool_ or jnp.issubdtype(dtype, jnp.integer) or jnp.issubdtype(dtype, jnp.floating)):
        raise TypeError(f"{cls.__name__}: {label} must be a real number or a one-element tensor, got a tensor of "
                        f"dtype {dtype}{where()}")


def _check_hyperparameter(cls: type, key: str, value, label: str) -> None:
    """`value` can be hyperparameter `key` of `cls`: a real number or a one-element tensor; for a pair
    (`cls.pairs`, e.g. `betas`), a tuple or list of two of them. `label` names it in the message (`lr`,
    `param_groups[1]['lr']`)."""
    if key not in cls.pairs:
        _check_scalar(cls, label, value)
        return
    if not isinstance(value, (tuple, list)):
        raise TypeError(f"{cls.__name__}: {label} must be a tuple of two numbers, got {value!r} of type "
                        f"{type(value).__name__}{where()}")
    if len(value) != 2:
        raise ValueError(f"{cls.__name__}: {label} must be a tuple of two numbers, got {len(value)}: {value!r}"
                         f"{where()}")
    for i, v in enumerate(value):
        _check_scalar(cls, f"{label}[{i}]", v)


_TORCH_LABELS = {"lr": "learning rate", "eps": "epsilon value"}  # torch's words: "Invalid {label}: {value}"


def _invalid(cls: type, torch_message: str, label: str, requirement: str) -> ValueError:
    """torch's ValueError message, prefixed with the class and followed by what is expected and the user's line."""
    return ValueError(f"{cls.__name__}: {torch_message} (invalid {label}: it must be {requirement}){where()}")


def _check_nonnegative(cls: type, values: dict, *keys: str) -> None:
    """Each of `values[key]` (a number, or None when traced) is >= 0, as torch checks them."""
    for key in keys:
        v = values[key]
        if v is not None and not v >= 0:
            raise _invalid(cls, f"Invalid {_TORCH_LABELS.get(key, key + ' value')}: {v}", key, ">= 0")


def _check_betas(cls: type, betas: tuple) -> None:
    for i, beta in enumerate(betas):
        if beta is not None and not 0 <= beta < 1:
            raise _invalid(cls, f"Invalid beta parameter at index {i}: {beta}", f"beta parameter at index {i}",
                           "in [0, 1)")


def _detach(value):
    if isinstance(value, tuple):
        return tuple(_detach(v) for v in value)
    return value.detach() if isinstance(value, Tensor) else value


class ParamGroup(dict):
    """One parameter group, a dict as torch's (`'params'`, `'lr'`, ...), whose hyperparameters are 0-d
    Tensors. Assigning a hyperparameter fills the existing tensor in place, so a jitted step never retraces
    for a new value; flags (`nesterov`, `amsgrad`, `maximize`) are fixed at construction; other keys (an
    LR scheduler's `'initial_lr'`) are stored as given.

    >>> opt = aotjax.optim.SGD([aotjax.zeros(2)], lr=0.1)
    >>> group = opt.param_groups[0]
    >>> lr = group['lr']
    >>> group['lr'] = 0.01
    >>> group['lr'] is lr, round(float(lr), 6)
    (True, 0.01)
    """

    def __init__(self, optimizer_class: type, names: tuple | None, items: dict, index: int | None = None):
        super().__init__(items)
        self.optimizer_class, self.names = optimizer_class, names
        self.index = index  # NOTE: its place in `param_groups`, for messages

    def __setitem__(self, key, value):
        cls = getattr(self, "optimizer_class", None)
        if cls is None:  # NOTE: copy and pickle fill a dict subclass's items before its attributes
            super().__setitem__(key, value)
        elif key in cls.hyperparameters and key in self:
            _check_hyperparameter(cls, key, value, f"param_groups[{getattr(self, 'index', None)}]['{key}']")
            cls._check_setting(self, key, value)
            old = self[key]
            if isinstance(old, tuple):
                if not isinstance(value, (tuple, list)) or len(value) != len(old):
                    raise ValueError(f"{cls.__name__}: param_group['{key}'] holds {len(old)} values; assign a "
                                     f"tuple of {len(old)} numbers, got {value!r}.")
                for i, (dst, v) in enumerate(zip(old, value)):
                    _fill(dst, v, f"{cls.__name__}: param_group['{key}'][{i}]")
            else:
                _fill(old, value, f"{cls.__name__}: param_group['{key}']")
        elif key in cls.flags and key in self:
            if value != self[key]:
                raise ValueError(f"{cls.__name__}: param_group['{key}'] is a static flag fixed at construction "
                                 f"(it decides which state exists and what is traced); it is {self[key]!r}, got "
                                 f"{value!r}. Build a new optimizer with {key}={value!r} instead.")
        elif key == "params" and key in self:
            raise ValueError(f"{cls.__name__}: param_group['params'] cannot be replaced (its state is created "
                             f"with it); use add_param_group to add parameters.")
        else:
            super().__setitem__(key, value)

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return self[key]

    def update(self, *args, **kwargs):
        for key, value in dict(*args, **kwargs).items():
            self[key] = value


class _State(dict):
    """Per-parameter state, keyed by parameter index (as in `state_dict()`); a parameter Tensor works as a key
    too (`opt.state[p]`, as torch)."""

    def __init__(self, items=(), params: Sequence = ()):
        super().__init__(items)
        self.params = params

    def __getitem__(self, key):
        if isinstance(key, Tensor):
            index = next((i for i, p in enumerate(self.params) if p is key), None)
            if index is None:
                raise KeyError("optimizer state: this tensor is not one of the optimizer's parameters.")
            key = index
        return super().__getitem__(key)


def _parse_params(params, where: str) -> tuple[list[Tensor], tuple | None]:
    """A group's parameters: Tensors, `(name, Tensor)` pairs or a dict name -> Tensor; `(tensors, names)`."""
    if isinstance(params, Tensor):
        return [params], None
    if isinstance(params, Mapping):
        params = list(params.items())
    else:
        params = list(params)
    if params and all(isinstance(p, tuple) and len(p) == 2 and isinstance(p[1], Tensor) for p in params):
        return [p for _, p in params], tuple(str(n) for n, _ in params)
    bad = [type(p).__name__ for p in params if not isinstance(p, Tensor)]
    if bad:
        raise TypeError(f"{where}: parameters must be Tensors, (name, Tensor) pairs or a dict name -> Tensor; "
                        f"got a {bad[0]}.")
    return params, None


class Optimizer:
    """Base class of the torch-style optimizers (`SGD`, `Adam`, `RMSprop`, ...). A subclass names its
    `hyperparameters` (held as 0-d Tensors), `flags` (static Python values) and `zero_fixed` (hyperparameters
    whose being zero decides which state exists), and defines `_validate(values)`, `_init_state(group, param)
    -> dict` and `_rule(param, grad, state, hyper, group) -> (update, new_state)` (or `_update`, which writes).

    `params` is an iterable of Tensors (`model.parameters()`), of `(name, Tensor)` pairs
    (`model.named_parameters()`), a dict name -> Tensor, or a list of group dicts
    (`[{'params': [...], 'lr': 0.1}, ...]`, the other keys defaulting to the constructor's arguments).

    >>> w = aotjax.ones(2)
    >>> opt = aotjax.optim.SGD({'w': w}, lr=0.5)
    >>> opt.step({'w': aotjax.tensor([1.0, 2.0])})
    >>> w
    tensor([0.5, 0. ])
    """

    hyperparameters: tuple[str, ...] = ()
    pairs: tuple[str, ...] = ()  # the hyperparameters that are two numbers (`betas`)
    flags: tuple[str, ...] = ()
    zero_fixed: dict[str, str] = {}  # hyperparameter -> the state that exists only when it is not zero

    def __init__(self, params, defaults: dict):
        name = type(self).__name__
        if isinstance(params, Tensor):
            raise TypeError(f"{name}: params should be an iterable of Tensors, (name, Tensor) pairs or dicts; got "
                            f"a single Tensor. Pass [tensor] instead.")
        for k in self.hyperparameters:
            _check_hyperparameter(type(self), k, defaults[k], k)
        self.defaults = {k: _as_number(v) if k in self.hyperparameters else v for k, v in defaults.items()}
        self.param_groups: list[ParamGroup] = []
        self.state = _State(params=[])
        params = list(params.items()) if isinstance(params, Mapping) else list(params)
        if not params:
            raise ValueError(f"{name}: got an empty parameter list.")
        groups = params if all(isinstance(g, Mapping) for g in params) else [{"params": params}]
        for group in groups:
            self.add_param_group(group)

    # -- groups and state ---------------------------------------------------------------------------------
    def add_param_group(self, param_group: dict) -> None:
        """Add a group of parameters (a dict with `'params'` and optional hyperparameters), creating its state
        now.

        >>> opt = aotjax.optim.SGD([aotjax.zeros(2)], lr=0.1)
        >>> opt.add_param_group({'params': [aotjax.zeros(3)], 'lr': 0.01})
        >>> len(opt.param_groups), round(float(opt.param_groups[1]['lr']), 6)
        (2, 0.01)
        """
        cls, name = type(self), type(self).__name__
        if not isinstance(param_group, Mapping) or "params" not in param_group:
            raise TypeError(f"{name}.add_param_group: expected a dict with a 'params' key, got {param_group!r}.")
        params, names = _parse_params(param_group["params"], f"{name}: param_group['params']")
        if not params:
            raise ValueError(f"{name}: a parameter group has no parameters.")
        seen = {id(p) for p in self.state.params}
        if len({id(p) for p in params}) != len(params) or any(id(p) in seen for p in params):
            raise ValueError(f"{name}: a parameter appears twice (within a group or in two groups); list each "
                             f"tensor once.")
        unknown = set(param_group) - set(self.defaults) - {"params", "param_names"} - _TORCH_ONLY_KEYS
        values = {k: param_group.get(k, v) for k, v in self.defaults.items()}
        for k in cls.hyperparameters:
            if k in param_group:
                _check_hyperparameter(cls, k, param_group[k], f"param_groups[{len(self.param_groups)}]['{k}']")
        type(self)._validate({k: _as_number(v) if k in cls.hyperparameters else v for k, v in values.items()})
        items = {"params": params}
        for k, v in values.items():
            items[k] = _new_hyperparameter(v, f"{name}: {k}") if k in cls.hyperparameters else v
        items.update({k: param_group[k] for k in unknown})
        group = ParamGroup(cls, names, items, index=len(self.param_groups))
        first = len(self.state.params)
        for i, p in enumerate(params):
            self.state[first + i] = self._init_state(group, p)
        self.state.params = [*self.state.params, *params]
        self.param_groups.append(group)

    @classmethod
    def _validate(cls, values: dict) -> None:
        """Raise ValueError for hyperparameters torch rejects (`values` holds numbers; `None` when traced)."""

    @classmethod
    def _check_setting(cls, group: ParamGroup, key: str, value) -> None:
        """Raise if assigning `value` to `group[key]` would need state or a program the optimizer lacks."""
        if key in cls.zero_fixed:
            old, new = _as_number(group[key]), _as_number(value)
            if old is not None and new is not None and (old == 0) != (new == 0):
                change = f"need {cls.zero_fixed[key]} it lacks" if old == 0 else f"drop its {cls.zero_fixed[key]}"
                raise ValueError(f"{cls.__name__}: this group was built with {key} {old:g}; setting {new:g} would "
                                 f"{change}. Build a new optimizer instead{where()}")

    def _init_state(self, group: ParamGroup, param: Tensor) -> dict:
        raise NotImplementedError

    def _rule(self, param: Tensor, grad: Tensor, state: dict, hyper: dict, group: ParamGroup):
        """One parameter's step, written nowhere: `(update to add, new state with the keys of state)`."""
        raise NotImplementedError

    def _group_scalars(self, group: ParamGroup, states: list, hyper: dict) -> list | None:
        """What the step of each stepping parameter of `group` (their `states`) computes from its state's scalars
        alone, computed for all at once and passed to `_update` (one per parameter); None (the default): each
        parameter computes its own."""
        return None

    def _update(self, param: Tensor, grad: Tensor, state: dict, hyper: dict, group: ParamGroup) -> None:
        update, new = self._rule(param.detach(), grad, {k: v.detach() for k, v in state.items()}, hyper, group)
        param.add_(update)
        for key, value in new.items():
            state[key].copy_(value)

    # -- the step -------------------------------------------------------------------------------------------
    def step(self, grads=None, closure=None):
        """Update every parameter in place, under `no_grad()`. Without `grads`, from each parameter's `.grad` (as
        torch's `step()`: a parameter whose `.grad` is None is skipped). Or from `grads`, a pytree shaped like the
        parameters as given: a list (parameters given as an iterable of Tensors), a dict keyed by name (named
        parameters or a dict), a list of lists (or dicts) per group; a flat sequence in parameter order always
        works; a `None` gradient leaves its parameter and state untouched. `closure`, if given (also as the only
        argument, torch's `step(closure)`), is called first with grad enabled and its result returned; otherwise
        returns None.

        >>> p = aotjax.tensor([1.0, 2.0])
        >>> opt = aotjax.optim.SGD([p], lr=0.5)
        >>> opt.step([aotjax.tensor([1.0, -1.0])])
        >>> p
        tensor([0.5, 2.5])
        >>> w = aotjax.tensor([1.0, 2.0], requires_grad=True)
        >>> opt = aotjax.optim.SGD([w], lr=0.5)
        >>> (w * w).sum().backward()
        >>> opt.step()
        >>> w
        tensor([0., 0.], requires_grad=True)
        """
        if callable(grads) and closure is None:
            grads, closure = None, grads
        loss = None
        if closure is not None:
            with grad_mode(True):
                loss = closure()
        # NOTE: the update runs under `no_grad()`, as torch's, where parameters are leaves that require grad (eagerly,
        # or inside a staged step); under a differentiating transform the gradients are detached instead, so
        # differentiating through a step sees its update
        eager = not any(isinstance(p, Tracer) for p in self.state.params)
        no_grad = eager or any(p._ag is not None for p in self.state.params)
        with grad_mode(False) if no_grad else contextlib.nullcontext():
            flat = self._own_grads() if grads is None else self._flat_grads(grads)
            if eager and grads is None and not staging():
                _compiled_update(self, flat)  # NOTE: the `.grad` step eagerly: one compiled program, not op by op
            else:
                _update_all(self, flat)
        return loss

    def _own_grads(self) -> list:
        """The parameters' `.grad` (None for one without)."""
        return [p.grad for p in self.state.params]  # NOTE: a frozen parameter's kept `.grad` too, as torch's

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the parameters' `.grad`: to None (default), or to zeros in place.

        >>> w = aotjax.tensor([1.0], requires_grad=True)
        >>> opt = aotjax.optim.SGD([w])
        >>> (w * 2).sum().backward()
        >>> opt.zero_grad()
        >>> w.grad is None
        True
        """
        reset_grads(self.state.params, set_to_none)

    def _flat_grads(self, grads) -> list:
        name, params = type(self).__name__, self.state.params
        groups = self.param_groups
        if isinstance(grads, Mapping) and grads and all(isinstance(k, Tensor) for k in grads):
            flat = self._grads_by_tensor(grads)
        elif isinstance(grads, Mapping):
            flat = self._grads_by_name(grads)
        elif _is_flat(grads):
            if len(grads) != len(params):
                raise ValueError(f"{name}.step: got {len(grads)} gradient{'' if len(grads) == 1 else 's'} for "
                                 f"{len(params)} parameter{'' if len(params) == 1 else 's'}{where()}; grads should be "
                                 f"a flat sequence of {len(params)} gradients (one per parameter, None to skip one) in "
                                 f"parameter order")
            flat = list(grads)
        elif isinstance(grads, Sequence) and len(grads) == len(groups):
            flat = []
            for i, (group, g) in enumerate(zip(groups, grads)):
                if isinstance(g, Mapping) and group.names is not None:
                    _check_keys(name, g, group.names)
                    flat += [g[k] for k in group.names]
                elif isinstance(g, Sequence) and len(g) == len(group["params"]):
                    flat += list(g)
                else:
                    raise ValueError(f"{name}.step: the gradients of parameter group {i} should be a sequence of "
                                     f"{len(group['params'])} arrays (or None) in parameter order, got "
                                     f"{_describe(g)}.")
        else:
            raise ValueError(f"{name}.step: grads should match the parameters as given: a flat sequence of "
                             f"{len(params)} gradients (or None) in parameter order, one sequence per group "
                             f"({len(groups)} groups), or a dict keyed by parameter name or by the parameters; got "
                             f"{_describe(grads)}.")
        return [None if g is None else self._as_grad(g, p, i) for i, (g, p) in enumerate(zip(flat, params))]

    def _grads_by_tensor(self, grads: Mapping) -> list:
        """A dict keyed by the parameters themselves (matched by identity; one missing from it gets no update):
        what works for groups built from bare tensors, which have no names."""
        params = self.state.params
        known = {id(p) for p in params}
        for k in grads:
            if id(k) not in known:
                raise ValueError(f"{type(self).__name__}.step: a key of the gradient dict is a tensor of shape "
                                 f"{tuple(k.shape)} that is none of this optimizer's parameters{where()}; key the "
                                 f"dict by the parameter tensors given to the optimizer (or by their names).")
        by_id = {id(k): g for k, g in grads.items()}
        return [by_id.get(id(p)) for p in params]

    def _grads_by_name(self, grads: Mapping) -> list:
        name = type(self).__name__
        names = [n for g in self.param_groups for n in (g.names or [None] * len(g["params"]))]
        if None in names or len(set(names)) != len(names):
            raise ValueError(f"{name}.step: got a dict of gradients, but the parameters were not all given with "
                             f"unique names; pass a sequence of gradients in parameter order instead.")
        _check_keys(name, grads, names)
        return [grads[k] for k in names]

    def _as_grad(self, grad, param: Tensor, index: int) -> Tensor:
        if not isinstance(grad, Tensor):
            array = np.asarray(grad)
            if array.dtype.kind not in "biufc":
                raise TypeError(f"{type(self).__name__}.step: the gradient of parameter {self._label(index)} is "
                                f"{grad!r} of type {type(grad).__name__}{where()}; expected a Tensor, an array or "
                                f"None")
            return self._as_grad(tensor(array, dtype=param.dtype), param, index)
        grad = grad.detach()
        if tuple(grad.shape) != tuple(param.shape):
            raise ValueError(f"{type(self).__name__}.step: the gradient of parameter {self._label(index)} has shape "
                             f"{tuple(grad.shape)}, but the parameter has shape {tuple(param.shape)}.")
        return grad

    def _label(self, index: int) -> str:
        names = [n for g in self.param_groups for n in (g.names or [None] * len(g["params"]))]
        return f"{index} ('{names[index]}')" if names[index] is not None else str(index)

    # -- state_dict -----------------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """The state in torch's format: `{'state': {index: {'step': ..., ...}}, 'param_groups': [{'lr': ...,
        ..., 'params': [indices]}]}`, with torch's keys. State tensors are the live ones (as torch's);
        hyperparameters are copies (0-d tensors where torch has numbers). A parameter that has not stepped yet has
        no entry in `'state'`, as in torch (`opt.state[p]` holds its state already).

        >>> opt = aotjax.optim.Adam([aotjax.zeros(2)], lr=0.1)
        >>> opt.state_dict()['state']
        {}
        >>> opt.step([aotjax.ones(2)])
        >>> sd = opt.state_dict()
        >>> sorted(sd['state'][0]), sd['param_groups'][0]['params']
        (['exp_avg', 'exp_avg_sq', 'step'], [0])
        """
        groups, first = [], 0
        for group in self.param_groups:
            saved = {k: (_copy(v) if k in type(self).hyperparameters else v) for k, v in group.items()
                     if k != "params"}
            saved["params"] = list(range(first, first + len(group["params"])))
            if group.names is not None:
                saved["param_names"] = list(group.names)
            groups.append(saved)
            first += len(group["params"])
        state = {i: s for i, s in ((i, self._export_state(s)) for i, s in self.state.items()) if s}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        """Load a `state_dict()` (this class's, or a torch optimizer's of the same kind with its tensors
        converted, e.g. by `aotjax.tensor(t.numpy())`), copying every value into the existing tensors in place.
        Parameters without saved state get fresh state (torch creates it at their first step).

        >>> opt = aotjax.optim.SGD([aotjax.zeros(2)], lr=0.1, momentum=0.9)
        >>> opt.load_state_dict({'state': {}, 'param_groups': [{'lr': 0.5, 'momentum': 0.9, 'params': [7]}]})
        >>> round(float(opt.param_groups[0]['lr']), 6)
        0.5
        """
        name = type(self).__name__
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(f"{name}.load_state_dict: the state dict has {len(saved_groups)} parameter groups, "
                             f"the optimizer {len(self.param_groups)}.")
        ids, first = {}, 0
        for i, (group, saved) in enumerate(zip(self.param_groups, saved_groups)):
            if len(saved["params"]) != len(group["params"]):
                raise ValueError(f"{name}.load_state_dict: parameter group {i} has {len(saved['params'])} "
                                 f"parameters in the state dict, {len(group['params'])} in the optimizer.")
            ids.update({saved_id: first + j for j, saved_id in enumerate(saved["params"])})
            first += len(group["params"])
        unknown = set(state_dict["state"]) - set(ids)
        if unknown:
            raise ValueError(f"{name}.load_state_dict: the state dict has state for parameters {sorted(unknown)}, "
                             f"which no parameter group lists.")
        for group, saved in zip(self.param_groups, saved_groups):
            for k, v in saved.items():
                if k not in ("params", "param_names") and k not in _TORCH_ONLY_KEYS:
                    group[k] = v
        saved_state = {ids[k]: v for k, v in state_dict["state"].items()}
        index = 0
        for group in self.param_groups:
            for p in group["params"]:
                self._import_state(index, group, p, saved_state.get(index, {}))
                index += 1

    def _export_state(self, state: dict) -> dict:
        """The state as torch's `state_dict()` shows it: none before the parameter's first step."""
        step = state.get("step")
        if step is not None and _as_number(step) == 0:
            return {}
        return dict(state)

    def _import_state(self, index: int, group: ParamGroup, param: Tensor, saved: dict) -> None:
        state = self.state[index]
        if not saved:  # NOTE: torch has no state for a parameter that has not stepped: start it afresh
            saved = self._init_state(group, param)
        missing = set(state) - set(saved)
        if missing:
            raise ValueError(f"{type(self).__name__}.load_state_dict: the state of parameter "
                             f"{self._label(index)} lacks {sorted(missing)}.")
        for k, t in state.items():
            _fill(t, saved[k], f"{type(self).__name__}.load_state_dict: state[{index}]['{k}']")

    # -- pytree ---------------------------------------------------------------------------------------------
    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        jax.tree_util.register_pytree_with_keys(cls, cls._flatten_with_keys, cls._unflatten,
                                                flatten_func=cls._flatten)

    def _flatten_with_keys(self):
        groups, group_aux = [], []
        for group in self.param_groups:
            tensors = {k: v for k, v in group.items() if k != "params" and _holds_tensors(v)}
            statics = tuple((k, v) for k, v in group.items() if k != "params" and k not in tensors)
            groups.append({"params": list(group["params"]), **tensors})
            group_aux.append((tuple(group), statics, group.names))
        aux = (tuple(self.defaults.items()), tuple(group_aux))
        state = {i: dict(s) for i, s in self.state.items()}
        return [(GetAttrKey("param_groups"), groups), (GetAttrKey("state"), state)], aux

    def _flatten(self):
        children, aux = self._flatten_with_keys()
        return [c for _, c in children], aux

    @classmethod
    def _unflatten(cls, aux, children):
        defaults, group_aux = aux
        groups, state = children
        opt = object.__new__(cls)
        opt.defaults = dict(defaults)
        opt.param_groups = []
        for i, (children_of_group, (order, statics, names)) in enumerate(zip(groups, group_aux)):
            values = {**children_of_group, **dict(statics)}
            opt.param_groups.append(ParamGroup(cls, names, {k: values[k] for k in order}, index=i))
        opt.state = _State(state.items(), params=[p for g in opt.param_groups for p in g["params"]])
        return opt

    def __repr__(self):
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines += [f"    {k}: {_show(v)}" for k, v in group.items() if k != "params"]
        return "\n".join(lines + [")"])


def _update_all(opt: Optimizer, flat: list) -> None:
    """Update every parameter of `opt` whose gradient in `flat` (one per parameter, in order) is not None."""
    index = 0
    for group in opt.param_groups:
        hyper = {k: _detach(group[k]) for k in type(opt).hyperparameters}
        stepping = [index + k for k in range(len(group["params"])) if flat[index + k] is not None]
        shared = opt._group_scalars(group, [opt.state[i] for i in stepping], hyper)
        for k, i in enumerate(stepping):
            p = group["params"][i - index]
            if shared is None:
                opt._update(p, flat[i], opt.state[i], hyper, group)
            else:
                opt._update(p, flat[i], opt.state[i], hyper, group, shared[k])
        index += len(group["params"])


def _update_all_without_grad(opt: Optimizer, flat: list) -> None:
    with grad_mode(False):  # NOTE: a staged function starts with grad enabled: the update is outside any graph
        _update_all(opt, flat)


_compiled_update = jit(_update_all_without_grad)  # NOTE: traced once per optimizer and pattern of missing gradients
# NOTE: shared, so that a new optimizer of the same structure reuses its program; a process's 9th optimizer of another
# structure (a sweep over model widths) is not a step tracing again: logged, but no RecompileWarning
_compiled_update.recompile_limited = False


def _holds_tensors(value) -> bool:
    return isinstance(value, Tensor) or (isinstance(value, tuple) and any(isinstance(v, Tensor) for v in value))


def _copy(value):
    if isinstance(value, tuple):
        return tuple(_copy(v) for v in value)
    return value.clone() if isinstance(value, Tensor) else value


def _show(value) -> str:
    if isinstance(value, tuple):
        return "(" + ", ".join(_show(v) for v in value) + ")"
    number = _as_number(value) if isinstance(value, Tensor) else None
    return f"{number:g}" if number is not None else repr(value)


def _describe(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return f"a {type(value).__name__} of {len(value)}"
    return f"{'an' if type(value).__name__[0] in 'aeiou' else 'a'} {type(value).__name__}"


def _is_flat(grads) -> bool:
    """Whether `grads` is a flat sequence of gradients (a gradient being an array, a number or None: no sequence of
    them, which would be a group's)."""
    return (isinstance(grads, Sequence) and not isinstance(grads, str)
            and all(g is None or isinstance(g, str) or not isinstance(g, (Sequence, Mapping)) for g in grads))


def _missing(name: str, key: str):
    raise ValueError(f"{name}.step: the gradients have no entry for parameter '{key}'; give None to skip it.")


def _check_keys(name: str, grads: Mapping, names: Iterable) -> None:
    unexpected = set(grads) - set(names)
    if unexpected:
        raise ValueError(f"{name}.step: the gradients name {sorted(map(str, unexpected))}, which are not "
                         f"parameters of the optimizer.")
    missing = set(names) - set(grads)
    if missing:
        _missing(name, sorted(missing)[0])
