"""`scan_layers`: a stack of identical layers run as one `scan` over their stacked state, so the program (and its
compile time) is one layer's, whatever the depth."""
from __future__ import annotations

from typing import Callable

from aotjax.core.source_info import where
from aotjax.func import _stacked, functional_call
from aotjax.lax import scan
from aotjax.transforms.checkpoint import checkpoint


def scan_layers(layers, x, *, policy: Callable | None = None, prevent_cse: bool = False):
    """`for layer in layers: x = layer(x)`, run as one `aotjax.scan` whose body is the first layer called with
    each layer's parameters and buffers (stacked along a new axis, `aotjax.func.functional_call`): outputs and
    gradients are the Python loop's, and `jit`/`aot` compile one layer, as torch_xla's and torchax's `scan_layers`.

    The layers must be of one class, with the same parameter and buffer names and shapes and the same mode
    (`training`); each must map `x` to a value of `x`'s shape. Buffers a layer writes in place (BatchNorm's running
    statistics) are written back to that layer's buffers after the loop.

    Given an `aotjax.nn.LayerStack`, the scan runs over its stacked tensors as they are: nothing is stacked per call
    and the gradients are the stacked tensors', so a compiled step (forward, backward, optimizer) is one layer's
    program whatever the depth. Given another list, its layers' tensors are stacked on each call (a copy, and a
    program that grows with the depth). With `policy` (an `aotjax.checkpoint`
    policy) each layer is a checkpointed region: the backward recomputes a layer's intermediates from its input
    instead of saving them for every layer.

    >>> layers = aotjax.nn.ModuleList([aotjax.nn.Linear(4, 4) for _ in range(3)])
    >>> x = aotjax.ones(2, 4)
    >>> loop = x
    >>> for layer in layers:
    ...     loop = layer(loop)
    >>> float((aotjax.nn.scan_layers(layers, x) - loop).abs().max()) < 1e-6
    True
    """
    if getattr(layers, "_stacked_state", False):  # an `aotjax.nn.LayerStack`
        return _scan_stack(layers, x, policy, prevent_cse)
    layers = list(layers)
    if not layers:
        raise ValueError("scan_layers: expected at least one layer, got none")
    first = layers[0]
    check_alike(layers, "scan_layers", "Run unlike layers in a Python loop")
    params = _stacked(layers, lambda m: m.named_parameters(), detach=False)
    buffers = _stacked(layers, lambda m: m.named_buffers(), detach=False)
    versions = {name: _version(b) for name, b in buffers.items()}
    out = _scan(first, x, params, buffers, policy, prevent_cse)
    for name, stacked in buffers.items():  # NOTE: the body wrote a layer's buffers through its slice of the stack
        if versions[name] is None or _version(stacked) != versions[name]:
            for k, layer in enumerate(layers):
                dict(layer.named_buffers())[name].copy_(stacked[k])
    return out


def _scan_stack(stack, x, policy, prevent_cse: bool):
    """`scan_layers` of a LayerStack: over its stacked tensors themselves (a layer's write into a buffer is a write
    into the stacked buffer)."""
    if len(stack) == 0:
        raise ValueError("scan_layers: expected at least one layer, got an empty LayerStack")
    stack.check_views("scan_layers")
    first = stack[0]
    if any(layer.training != first.training for layer in stack):
        raise ValueError(f"scan_layers: the layers of a LayerStack must share one training mode; set it on the stack "
                         f"(`stack.train()` / `stack.eval()`){where()}")
    params, buffers = stack.stacked_tensors()
    return _scan(first, x, params, buffers, policy, prevent_cse)


def _scan(first, x, params: dict, buffers: dict, policy, prevent_cse: bool):
    """The scan: `first` called with each layer's slice of `params` and `buffers` on the carried `x`."""

    def layer_call(h, p, b):
        return functional_call(first, (p, b), (h,))

    if policy is not None:
        layer_call = checkpoint(layer_call, policy=policy, prevent_cse=prevent_cse)

    def body(h, state):
        p, b = state
        out = layer_call(h, p, b)
        if tuple(out.shape) != tuple(h.shape):
            raise ValueError(f"scan_layers: a layer must keep the shape of its input to be scanned; "
                             f"{type(first).__name__} maps {list(h.shape)} to {list(out.shape)}")
        return out.to(h.dtype), None

    out, _ = scan(body, x, (params, buffers))
    return out


def check_alike(layers: list, what: str, instead: str) -> None:
    """Raise unless the layers can be stacked or scanned together: one class, the same parameter and buffer names,
    shapes, dtypes and `requires_grad`, one training mode."""
    structure = _structure(layers[0])
    for k, layer in enumerate(layers[1:], 1):
        if _structure(layer) != structure:
            raise ValueError(f"{what}: every layer must be like the first ({type(layers[0]).__name__}: one class, the "
                             f"same parameter and buffer names, shapes, dtypes and requires_grad, the same training "
                             f"mode); layer {k} ({type(layer).__name__}) differs{where()}. {instead}")


def _structure(layer) -> tuple:
    return (type(layer), layer.training,
            tuple((n, tuple(t.shape), t.dtype, t.requires_grad) for n, t in layer.named_parameters()),
            tuple((n, tuple(t.shape), t.dtype) for n, t in layer.named_buffers()))


def _version(t):
    """How many writes `t`'s storage has seen, where it counts them (None where it does not)."""
    return getattr(t._storage, "version", None)
