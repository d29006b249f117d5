"""`scan_layers`: a stack of identical layers run as one `scan` over their stacked state, so the program (and its
compile time) is one layer's, whatever the depth."""
from __future__ import annotations

from typing import Callable

from aotjax.func import _stacked, functional_call
from aotjax.lax import scan
from aotjax.transforms.checkpoint import checkpoint


def scan_layers(layers, x, *, policy: Callable | None = None, prevent_cse: bool = False):
    """`for layer in layers: x = layer(x)`, run as one `aotjax.scan` whose body is the first layer called with
    each layer's parameters and buffers (stacked along a new axis, `aotjax.func.functional_call`): outputs and
    gradients are the Python loop's, and `jit`/`aot` compile one layer, as torch_xla's and torchax's `scan_layers`.

    The layers must be of one class, with the same parameter and buffer names and shapes and the same mode
    (`training`); each must map `x` to a value of `x`'s shape. Buffers a layer writes in place (BatchNorm's running
    statistics) are written back to that layer's buffers after the loop. With `policy` (an `aotjax.checkpoint`
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
    layers = list(layers)
    if not layers:
        raise ValueError("scan_layers: expected at least one layer, got none")
    first = layers[0]
    structure = _structure(first)
    for k, layer in enumerate(layers[1:], 1):
        if _structure(layer) != structure:
            raise ValueError(f"scan_layers: every layer must be like the first ({type(first).__name__}: one class, "
                             f"the same parameter and buffer names and shapes, the same training mode); layer {k} "
                             f"({type(layer).__name__}) differs. Run unlike layers in a Python loop")
    params = _stacked(layers, lambda m: m.named_parameters(), detach=False)
    buffers = _stacked(layers, lambda m: m.named_buffers(), detach=False)
    versions = {name: _version(b) for name, b in buffers.items()}

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
    for name, stacked in buffers.items():  # NOTE: the body wrote a layer's buffers through its slice of the stack
        if versions[name] is None or _version(stacked) != versions[name]:
            for k, layer in enumerate(layers):
                dict(layer.named_buffers())[name].copy_(stacked[k])
    return out


def _structure(layer) -> tuple:
    return (type(layer), layer.training,
            tuple((n, tuple(t.shape), t.dtype) for n, t in layer.named_parameters()),
            tuple((n, tuple(t.shape), t.dtype) for n, t in layer.named_buffers()))


def _version(t):
    """How many writes `t`'s storage has seen, where it counts them (None where it does not)."""
    return getattr(t._storage, "version", None)
