"""Module backward hooks (`register_full_backward_hook`, `register_full_backward_pre_hook`), as torch's
`BackwardHook`: identity nodes around a module call's inputs and outputs, whose gradients are the hooks' arguments.

aotjax's eager backward runs the recorded graph as one program and then the gradient hooks of the non-leaf tensors
it watches, latest node first; a hook that changes its gradient has the difference propagated by one more backward
(`aotjax.autograd.engine`). So a module call with backward hooks packs the tensors of its positional arguments that
require grad into one new tensor of the graph (a clone of one, or their flattened concatenation) and gives `forward`
views of it; likewise its outputs. The gradient of the packed outputs is `grad_output` (the pre-hooks run on it and
may replace it), that of the packed inputs is `grad_input` (the hooks run on it and may replace it): each hook runs
once per backward with every gradient at hand, after the later nodes' hooks, as torch orders them.

The hook is attached to the packing node itself (`_NodeHook` in the node's watchers), which holds it as long as
the graph holds the node: the packed tensor may be gone by the backward, as torch's `grad_fn` hooks outlive the
tensors. Backward hooks need an eager backward: a module with backward hooks called on traced values with grad
enabled is an error.
"""
from __future__ import annotations

import warnings
import weakref
from typing import Callable

from aotjax.autograd import graph
from aotjax.core.errors import UnsupportedError
from aotjax.core.interpreter import Tracer, _state
from aotjax.core.source_info import where
from aotjax.ops.creation.factories import zeros
from aotjax.ops.shape.copies import cat
from aotjax.tensor import Tensor

__all__ = ["BackwardHook"]


class _NodeHook:
    """Stands in a node's `watchers` where a weak reference to a hooked tensor would: called, it gives a tensor of
    output `index` of the node with gradient hook `hook`. Holds the node weakly (the node holds it)."""

    __slots__ = ("node", "index", "hook")

    def __init__(self, node, index: int, hook: Callable):
        self.node, self.index, self.hook = weakref.ref(node), index, hook

    def __call__(self):
        node = self.node()
        if node is None or node.freed:
            return None
        t = Tensor._wrap(node.outputs[self.index], owned=False)
        t._storage.grad_node, t._storage.grad_index = node, self.index
        meta = graph.AutogradMeta()
        meta.hooks.append(self.hook)
        graph.start_recording(t, meta)
        return t


def _hook_node_of(t: Tensor, hook: Callable) -> None:
    """Call `hook(grad)` (its result replacing the gradient) whenever a backward reaches `t`'s node, `t` a base."""
    node = t._storage.grad_node
    if node.watchers is None:
        node.watchers = []
    node.watchers.append(_NodeHook(node, t._storage.grad_index, hook))


class _Packed:
    """Tensors packed into one tensor of the graph: `tensor`, and `parts`, views of it standing for each."""

    def __init__(self, tensors: list[Tensor]):
        self.specs = [(tuple(t.shape), t.dtype, t.numel()) for t in tensors]
        if len(tensors) == 1:
            self.tensor = tensors[0].clone()
            self.parts = [self.tensor]
            return
        self.tensor = cat([t.reshape(-1) for t in tensors])  # NOTE: mixed dtypes promote; each part casts back
        self.parts = [part.to(dtype) for part, (_, dtype, _) in zip(self.unpack(self.tensor), self.specs)]

    def unpack(self, g) -> list:
        """The gradient `g` of the packed tensor as one gradient per part."""
        if len(self.specs) == 1:
            return [g]
        out, start = [], 0
        for shape, dtype, n in self.specs:
            out.append(g[start:start + n].reshape(shape).to(dtype))
            start += n
        return out

    def pack(self, grads: list, like):
        """Per-part gradients (None: zero) as a gradient of the packed tensor (`like`'s dtype)."""
        grads = [zeros(shape, dtype=like.dtype) if g is None else g for g, (shape, _, _) in zip(grads, self.specs)]
        if len(grads) == 1:
            return grads[0].to(like.dtype)
        return cat([g.reshape(-1).to(like.dtype) for g in grads])


def _differentiable(x) -> bool:
    return isinstance(x, Tensor) and x.requires_grad and graph.differentiable_dtype(x.dtype)


class BackwardHook:
    """One module call's backward hooks: `setup_input(args)` before `forward`, `setup_output(result)` after."""

    def __init__(self, module, hooks: list, pre_hooks: list):
        self.module, self.hooks, self.pre_hooks = module, hooks, pre_hooks
        self.grad_outputs = None
        self.n_inputs = self.n_outputs = 0
        self.inputs = self.outputs = None  # `(positions, _Packed)`, or None where nothing requires grad
        self.constants: list = []  # `(position, shape, dtype)` of the input tensors that do not require grad
        self.reached: set = set()  # the outputs a backward reached (several outputs: `_note_reached`)

    def _pack(self, values: tuple, what: str):
        """`values` with the tensors among them that require grad replaced by views of one packed tensor, and
        `(positions, packing)` (None when none requires grad or grad is disabled)."""
        positions = [i for i, v in enumerate(values) if _differentiable(v)]
        if not positions or not _state.grad_enabled:
            return values, None
        if any(isinstance(values[i], Tracer) for i in positions):
            names = ", ".join(getattr(h, "__qualname__", type(h).__name__) for h in (*self.pre_hooks, *self.hooks))
            raise UnsupportedError(
                f"{self.module._get_name()}: backward hooks ({names}) run in an eager backward(), but this call "
                f"of the module is traced (jit, aot, compile, grad, vmap) with grad enabled and its {what} require "
                f"grad{where()}. Call the model eagerly, trace it under aotjax.no_grad() if no gradient is needed, "
                f"remove the hooks (handle.remove()) while tracing, or compute the gradients the hooks would see "
                f"inside the traced function (aotjax.grad / vjp).")
        packed = _Packed([values[i] for i in positions])
        out = list(values)
        for i, part in zip(positions, packed.parts):
            out[i] = part
        return tuple(out), (positions, packed)

    def setup_input(self, args: tuple) -> tuple:
        self.n_inputs = len(args)
        args, self.inputs = self._pack(args, "inputs")
        if self.inputs is not None:
            _hook_node_of(self.inputs[1].tensor, self._on_grad_inputs)
            self.constants = [(i, tuple(a.shape), a.dtype) for i, a in enumerate(args)
                              if isinstance(a, Tensor) and i not in self.inputs[0]]
        return args

    def setup_output(self, result):
        if not isinstance(result, (Tensor, tuple)):
            warnings.warn(f"For backward hooks to be called, module output should be a Tensor or a tuple of Tensors "
                          f"but received {type(result)}", stacklevel=4)
            return result
        single = not isinstance(result, tuple)
        values = (result,) if single else result
        self.n_outputs = len(values)
        values, self.outputs = self._pack(values, "outputs")
        if self.outputs is None:
            return result
        _hook_node_of(self.outputs[1].tensor, self._on_grad_outputs)
        positions = self.outputs[0]
        if len(positions) > 1:
            # NOTE: each output gets a node of its own, whose hook (run before the packed node's: it is later)
            # notes that the backward reached it: the outputs it did not reach have a None gradient, as torch's
            values = list(values)
            for i in positions:
                values[i] = values[i].clone()
                _hook_node_of(values[i], lambda g, i=i: self.reached.add(i))
            values = tuple(values)
        if single or type(result) is tuple:
            return values[0] if single else values
        return type(result)(*values)  # NOTE: a namedtuple

    def _spread(self, g, where_: tuple, n: int, reached=None) -> tuple:
        """The packed gradient `g` as a tuple of `n`: None where no packed tensor was (or one `reached` lacks)."""
        positions, packed = where_
        out = [None] * n
        for i, part in zip(positions, packed.unpack(g)):
            out[i] = part if reached is None or i in reached else None
        return tuple(out)

    def _gather(self, grads: tuple, where_: tuple, g):
        """Replacement gradients (a tuple of `n`) as a gradient of the packed tensor like `g`."""
        positions, packed = where_
        return packed.pack([grads[i] for i in positions], g)

    def _on_grad_outputs(self, g):
        reached = self.reached if len(self.outputs[0]) > 1 else None
        given = self._spread(g, self.outputs, self.n_outputs, reached)
        self.reached = set()
        grad_outputs = _replaced(given, self.pre_hooks, lambda hook, grads: hook(self.module, grads),
                                 "Backward pre hook", "grad_output")
        self.grad_outputs = grad_outputs
        if self.inputs is None:
            self._hooks_without_inputs()
        return None if grad_outputs is given else self._gather(grad_outputs, self.outputs, g)

    def _hooks_without_inputs(self) -> None:
        """No input requires grad: the hooks run here, with `grad_input` all None, as torch's."""
        warnings.warn("Full backward hook is firing when gradients are computed with respect to module outputs since "
                      "no inputs require gradients. See https://docs.pytorch.org/docs/main/generated/torch.nn.Module"
                      ".html#torch.nn.Module.register_full_backward_hook for more details.", stacklevel=2)
        grad_inputs = (None,) * self.n_inputs
        for hook in self.hooks:
            result = hook(self.module, grad_inputs, self.grad_outputs)
            if result is not None and not (isinstance(result, tuple) and all(r is None for r in result)):
                raise RuntimeError("Backward hook for Modules where no input requires gradient should always return "
                                   "None or None for all gradients.")
        self.grad_outputs = None

    def _on_grad_inputs(self, g):
        if self.grad_outputs is None:  # NOTE: the gradient reached the inputs without passing through the outputs
            return None
        grad_inputs = list(self._spread(g, self.inputs, self.n_inputs))
        for i, shape, dtype in self.constants:  # NOTE: torch's gradient of an input that does not require grad
            grad_inputs[i] = zeros(shape, dtype=dtype)
        given = tuple(grad_inputs)
        grad_inputs = _replaced(given, self.hooks, lambda hook, grads: hook(self.module, grads, self.grad_outputs),
                                "Backward hook", "grad_input")
        self.grad_outputs = None
        return None if grad_inputs is given else self._gather(grad_inputs, self.inputs, g)


def _replaced(grads: tuple, hooks, call, who: str, what: str) -> tuple:
    """`grads` as the `hooks` replace them in turn (`call(hook, grads)`; None keeps them), as torch checks them."""
    for hook in hooks:
        result = call(hook, grads)
        if result is None:
            continue
        if len(result) != len(grads):
            raise RuntimeError(f"{who} returned an invalid number of {what}, got {len(result)}, but expected "
                               f"{len(grads)}")
        grads = tuple(result)
    return grads
