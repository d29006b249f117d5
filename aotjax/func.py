"""`torch.func`: the transforms under the names PyTorch gives them (`grad`, `grad_and_value`, `vjp`, `jvp`, `jacrev`,
`jacfwd`, `hessian`, `vmap`, `linearize`, `functionalize`: aotjax's own, composable with imperative autograd: a
gradient computed by `func.grad` of a function that reads a tensor requiring grad is itself differentiable by
`backward()`), and the module utilities `functional_call` and `stack_module_state`.

`functional_call(module, params_and_buffers, args)` runs `module` with some or all of its parameters and buffers
replaced by the tensors of a dict, so a loss can be differentiated with respect to a dict of parameters
(`aotjax.grad(loss)(dict(model.named_parameters()), x)`), or the same module run with another layer's state (as
`aotjax.nn.scan_layers` does). As in torch: the module's own tensors are untouched; a write in place into a
parameter or buffer lands in the dict's tensor, and an attribute reassigned by `forward` (`self.n = self.n + 1`) is
reassigned in the dict; tied weights (one tensor under two names) follow a replacement given for either name.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from aotjax.ops.shape.copies import stack
from aotjax.transforms.autodiff import grad, hessian, jacfwd, jacrev, jvp, linearize, value_and_grad, vjp
from aotjax.transforms.functionalize import functionalize
from aotjax.transforms.vmap import vmap

__all__ = ["functional_call", "stack_module_state", "grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd",
           "hessian", "vmap", "linearize", "functionalize"]


def grad_and_value(func, argnums=0, has_aux: bool = False):
    """`torch.func.grad_and_value`: `(gradient, value)` of `func` (with `has_aux`, `(gradient, (value, aux))`);
    aotjax's `value_and_grad` in PyTorch's order.

    >>> aotjax.func.grad_and_value(lambda x: (x ** 2).sum())(aotjax.tensor([1.0, 2.0]))
    (tensor([2., 4.]), tensor(5.))
    """
    both = value_and_grad(func, argnums, has_aux)

    def run(*args, **kwargs):
        value, g = both(*args, **kwargs)
        return g, value

    return run


def functional_call(module, parameter_and_buffer_dicts: Mapping | Sequence[Mapping], args: Any = None,
                    kwargs: dict | None = None, *, tie_weights: bool = True, strict: bool = False) -> Any:
    """`module(*args, **kwargs)` with the parameters and buffers named in `parameter_and_buffer_dicts` (a dict
    from dotted names to tensors, or a sequence of such dicts with no key in two) in place of the module's own,
    for the duration of the call; returns what `module` returns.

    - `tie_weights`: a tensor the module holds under several names (tied weights) is replaced under all of them
      when the dict names one (giving two different tensors for tied names raises). With `False`, only the names
      given are replaced.
    - `strict`: every parameter and buffer must be given, and nothing else; otherwise names the module lacks are
      set as attributes for the call, and names not given keep the module's tensors.

    Writes in place into a replaced tensor write the dict's tensor; a reassigned attribute is reassigned in the
    dict (torch's documented behaviour).

    >>> lin = aotjax.nn.Linear(2, 1, bias=False)
    >>> aotjax.func.functional_call(lin, {"weight": aotjax.ones(1, 2)}, (aotjax.tensor([1.0, 2.0]),))
    tensor([3.])
    >>> aotjax.grad(lambda p: aotjax.func.functional_call(lin, p, aotjax.ones(2)).sum())({"weight": aotjax.ones(1, 2)})
    {'weight': tensor([[1., 1.]])}
    """
    given = _merged(parameter_and_buffer_dicts)
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    state = _named_state(module)
    if strict:
        missing = [n for n in state if n not in given]
        unexpected = [n for n in given if n not in state]
        if missing or unexpected:
            parts = ([f"missing key(s): {', '.join(map(repr, missing))}"] if missing else []) + (
                [f"unexpected key(s): {', '.join(map(repr, unexpected))}"] if unexpected else [])
            raise RuntimeError(f"functional_call: with strict=True every parameter and buffer of "
                               f"{type(module).__name__} must be given, and nothing else; {'; '.join(parts)}")
    replacements = dict(given)
    if tie_weights:
        replacements = _follow_ties(module, state, replacements)
    saved = {}
    try:
        for name, value in replacements.items():
            saved[name] = _swap(module, name, value)
        out = module(*args, **(kwargs or {}))
    finally:
        for name in reversed(list(saved)):
            current = _swap(module, name, saved[name])
            if name in given and current is not replacements[name]:
                _write_into(parameter_and_buffer_dicts, name, current)  # NOTE: `self.foo = ...` in forward
    return out


def stack_module_state(models) -> tuple[dict, dict]:
    """The parameters and the buffers of `models` (modules of one structure), each stacked along a new leading
    axis: `(params, buffers)`, dicts from names to stacked tensors, for `vmap` over an ensemble with
    `functional_call`, and for `aotjax.nn.scan_layers`.

    >>> models = [aotjax.nn.Linear(3, 2) for _ in range(4)]
    >>> params, buffers = aotjax.func.stack_module_state(models)
    >>> params["weight"].shape, buffers
    ((4, 2, 3), {})
    """
    models = list(models)
    if not models:
        raise ValueError("stack_module_state: expected at least one module, got none")
    first = models[0]
    names = ([n for n, _ in first.named_parameters()], [n for n, _ in first.named_buffers()])
    for k, m in enumerate(models[1:], 1):
        if type(m) is not type(first) or ([n for n, _ in m.named_parameters()], [n for n, _ in m.named_buffers()]) \
                != names:
            raise ValueError(f"stack_module_state: every module must have the structure of the first "
                             f"({type(first).__name__}); module {k} ({type(m).__name__}) differs in its class or in "
                             f"the names of its parameters and buffers")

    return _stacked(models, lambda m: m.named_parameters(), True), _stacked(models, lambda m: m.named_buffers(), True)


def _stacked(models: list, named, detach: bool) -> dict:
    """Name -> the tensors `named(model)` gives under that name in each of `models`, stacked along a new axis 0."""
    per_model = [dict(named(m)) for m in models]
    out = {}
    for name in per_model[0]:
        values = [d[name] for d in per_model]
        shapes = {tuple(v.shape) for v in values}
        if len(shapes) != 1:
            raise ValueError(f"stack_module_state: '{name}' has different shapes in the modules: {sorted(shapes)}")
        out[name] = stack([v.detach() for v in values] if detach else values)
    return out


# -- internals -----------------------------------------------------------------------------------------
def _merged(dicts) -> dict:
    if isinstance(dicts, Mapping):
        return dict(dicts)
    merged: dict = {}
    for d in dicts:
        for name, value in d.items():
            if name in merged:
                raise ValueError(f"functional_call: '{name}' appears in more than one of the dicts passed")
            merged[name] = value
    return merged


def _named_state(module) -> dict:
    """Every parameter and buffer under every name it has (tied tensors under each of theirs)."""
    state = dict(module.named_parameters(remove_duplicate=False))
    state.update(module.named_buffers(remove_duplicate=False))
    return state


def _follow_ties(module, state: dict, given: dict) -> dict:
    """`given`, with every other name of a tensor the module holds under several names set to the tensor given
    for one of them."""
    names_of: dict[int, list[str]] = {}
    for name, t in state.items():
        if t is not None:
            names_of.setdefault(id(t), []).append(name)
    out = dict(given)
    for names in names_of.values():
        if len(names) < 2:
            continue
        named = [n for n in names if n in given]
        if not named:
            continue
        values = {id(given[n]) for n in named}
        if len(values) > 1:
            raise ValueError(f"functional_call: {', '.join(map(repr, named))} are tied weights (one tensor) in "
                             f"the module, but different tensors were given for them; give one, or pass "
                             f"tie_weights=False")
        for n in names:
            out.setdefault(n, given[named[0]])
    return out


def _owner(module, name: str):
    *path, attr = name.split(".")
    owner = module
    for part in path:
        owner = owner.get_submodule(part) if hasattr(owner, "get_submodule") else getattr(owner, part)
    return owner, attr


def _swap(module, name: str, value):
    """Put `value` under `name` (a dotted path) without the checks of `Module.__setattr__` (a plain tensor may
    stand in for a parameter); returns what was there (`_MISSING` if nothing was)."""
    owner, attr = _owner(module, name)
    for table in ("_parameters", "_buffers"):
        d = owner.__dict__.get(table)
        if d is not None and attr in d:
            previous = d[attr]
            if value is _MISSING:
                del d[attr]
            else:
                d[attr] = value
            return previous
    previous = owner.__dict__.get(attr, _MISSING)
    if value is _MISSING:
        owner.__dict__.pop(attr, None)
    else:
        owner.__dict__[attr] = value
    return previous


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING = _Missing()


def _write_into(dicts, name: str, value) -> None:
    if isinstance(dicts, Mapping):
        dicts[name] = value
        return
    for d in dicts:
        if name in d:
            d[name] = value
            return

