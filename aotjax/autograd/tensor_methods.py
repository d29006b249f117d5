"""The autograd attributes of `Tensor`, as PyTorch's: `requires_grad`, `is_leaf`, `grad`, `grad_fn`, `backward()`,
`retain_grad()`, `register_hook()`, `detach_()`, `data`, `_version`; and `aotjax.autograd.backward` / `grad`.

>>> x = aotjax.tensor([1.0, 2.0], requires_grad=True)
>>> y = (x * x).sum()
>>> y.backward()
>>> x.grad
tensor([2., 4.])
"""
from __future__ import annotations

import warnings
import weakref
from typing import Callable

from aotjax import tensor as tensor_module
from aotjax.autograd import engine, grad_state, graph
from aotjax.autograd.engine import Root, run_backward
from aotjax.autograd.graph import Leaf, Node
from aotjax.core.errors import UnsupportedError
from aotjax.core.interpreter import Tracer
from aotjax.core.source_info import where
from aotjax.interpreters.batching import vmap_running
from aotjax.tensor import Storage, Tensor

__all__ = ["backward", "grad", "GradFn", "RemovableHandle"]


def _eager(t: Tensor, what: str) -> None:
    if isinstance(t, Tracer):
        raise RuntimeError(f"{what} of a traced tensor ({t.aval.str_short()}, traced by {type(t._trace).__name__})"
                           f"{where()}: imperative autograd runs on eager tensors; inside a transform use "
                           f"aotjax.grad / aotjax.vjp of a function instead.")


# -- requires_grad, is_leaf ----------------------------------------------------------------------------------------
def _get_requires_grad(self) -> bool:
    return self._ag is not None or graph.joins_graph(self)


def _set_requires_grad(self, value: bool) -> None:
    if isinstance(self, Tracer):
        if value:
            _eager(self, "requires_grad")
        return
    value = bool(value)
    if value == (self._ag is not None):
        return
    if value:
        graph.mark_leaf(self)
        return
    if graph.leaf_of(self) is None:
        raise RuntimeError("you can only change requires_grad flags of leaf variables. If you want to use a computed "
                           "variable in a subgraph that doesn't require differentiation use var_no_grad = "
                           f"var.detach(){where()}.")
    meta = self._ag
    if meta is not graph.NONLEAF and (meta.grad is not None or meta.hooks or meta.post_accumulate_hooks):
        graph.keep_meta(self, meta)  # NOTE: as torch's, a leaf that stops requiring grad keeps its `.grad`
    self._storage.grad_node = None
    graph.stop_recording(self)


def requires_grad_(self, requires_grad: bool = True) -> Tensor:
    """Set `requires_grad` (a tensor that requires grad is a leaf: its ops are recorded); returns `self`.

    >>> aotjax.ones(2).requires_grad_().requires_grad
    True
    """
    _set_requires_grad(self, requires_grad)
    return self


def _is_leaf(self) -> bool:
    return self._ag is None or graph.leaf_of(self) is not None


def _deepcopy(self, memo: dict) -> Tensor:
    """`copy.deepcopy` of a tensor, as torch's: its data copied, tensors of one storage copied together into one new
    storage (views stay views), `requires_grad` and a copy of `.grad` kept; a non-leaf that requires grad raises."""
    if id(self) in memo:
        return memo[id(self)]
    _eager(self, "copy.deepcopy")
    if not _is_leaf(self):
        raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) support the deepcopy protocol "
                           f"at the moment{where()}; deepcopy `t.detach()`, or the leaves it was computed from.")
    storage = memo.get(id(self._storage))
    if storage is None:
        import jax.numpy as jnp  # NOTE: a copy: the new storage owns (and may donate) its buffer

        storage = memo[id(self._storage)] = Storage(jnp.copy(self._storage.base))
        memo.setdefault(id(memo), []).append(self._storage)  # NOTE: copy's keep-alive: the id stays unique
    t = object.__new__(Tensor)
    t._init_slots(self._aval, self._strides, self._offset, storage=storage, chain=self._chain)
    memo[id(self)] = t
    if self._ag is not None:
        graph.mark_leaf(t)
        if graph.grad_of(self) is not None:
            t.grad = _deepcopy(graph.grad_of(self), memo)
    return t


# -- grad ------------------------------------------------------------------------------------------------------------
def _get_grad(self):
    staging, target = _staged_grad(self)
    if staging is not None:
        return staging.read(target, graph.grad_of(target))
    ag = self._ag
    if ag is None:
        return graph.grad_of(self)  # NOTE: one kept from when it required grad, or assigned
    if ag is graph.NONLEAF:
        if not _is_leaf(self):
            _warn_non_leaf_grad()
        return None
    if ag.leaf is None and not ag.retains_grad and graph.leaf_of(self) is None:
        _warn_non_leaf_grad()
    return ag.grad


def _warn_non_leaf_grad() -> None:
    warnings.warn("The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad attribute "
                  "won't be populated during autograd.backward(). If you indeed want the .grad field to be populated "
                  "for a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor.", UserWarning, stacklevel=3)


def _set_grad(self, value) -> None:
    if value is not None:
        if not isinstance(value, Tensor):
            raise TypeError(f"assigned grad expected to be a Tensor or None but got grad of type "
                            f"{type(value).__name__}{where()}")
        if tuple(value.shape) != tuple(self.shape):
            raise RuntimeError(f"assigned grad has data of a different size: {tuple(value.shape)} for a tensor of "
                               f"size {tuple(self.shape)}{where()}")
        if value.dtype != self.dtype:
            raise RuntimeError(f"assigned grad has data of a different type: {value.dtype.name} for a tensor of "
                               f"type {self.dtype.name}{where()}")
    if self._ag is None:
        if isinstance(self, Tracer):
            if value is None:
                return
            raise RuntimeError(f"grad: a traced tensor that does not require grad holds no .grad{where()}")
        meta = graph.kept_meta(self)
        if grad_state.active() is not None and (meta is not None or value is not None):
            raise UnsupportedError(
                f"grad: this tensor does not require grad, and its .grad (kept from when it did, or assigned) is "
                f"eager state a compiled step cannot write{where()}; set it (p.grad = None) before calling the "
                f"compiled step, or keep requires_grad on")
        if meta is None and value is not None:
            meta = graph.AutogradMeta()
            graph.keep_meta(self, meta)
        if meta is not None:
            meta.grad = value  # NOTE: torch lets any tensor hold a `.grad`
        return
    staging, target = _staged_grad(self)
    if staging is not None:
        staging.assign(target, value)
        return
    graph.meta_of(self).grad = value


def _staged_grad(t: Tensor):
    """`(staging, eager leaf)` when a staged function is traced and `t` is (or stands for) an eager leaf: its
    `.grad` is then the staging's (`aotjax.autograd.grad_state`); else `(None, t)`."""
    staging = grad_state.active()
    if staging is None:
        return None, t
    ag = t._ag
    if ag is None or ag is graph.NONLEAF or ag.leaf is None:
        return None, t
    target = ag.leaf.tensor()
    if target is None or isinstance(target, Tracer):
        return None, t
    return staging, target


def _del_grad(self) -> None:
    _set_grad(self, None)


# -- grad_fn -----------------------------------------------------------------------------------------------------
class GradFn:
    """The node that made a non-leaf tensor (`tensor.grad_fn`): `name()` as PyTorch's (`MulBackward0`) and
    `next_functions`, the nodes it reads ((None, 0) for an operand that does not require grad)."""

    __slots__ = ("_node", "_view")

    def __init__(self, node: Node, view=None):
        self._node, self._view = node, view

    def name(self) -> str:
        prim = self._view.prim if self._view is not None else self._node.prim
        if prim is None:
            return "torch::autograd::AccumulateGrad"
        name = prim.name.rstrip("_")
        if self._view is None and self._node.params:  # NOTE: a composite run fused names its node (`eager_fusion`)
            fused = getattr(self._node.params.get("program"), "node_name", None)
            if fused is not None:
                return fused
        exact = _TORCH_NODE_NAMES.get(name)
        if exact is not None:
            return exact
        base = _TORCH_OP_NAMES.get(name) or "".join(part.capitalize() for part in name.split("_"))
        return f"{base}Backward0"

    @property
    def next_functions(self) -> tuple:
        if self._view is not None:
            return ((GradFn(self._node) if type(self._node) is not Leaf else AccumulateGrad(self._node), 0),)
        out = []
        for op in self._node.operands:
            if type(op) is graph.Input:
                out.append((AccumulateGrad(op.node) if type(op.node) is Leaf else GradFn(op.node), op.index))
            else:
                out.append((None, 0))
        return tuple(out)

    metadata = property(lambda self: {})

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and other._node is self._node and other._view == self._view

    def __hash__(self) -> int:
        return hash((id(self._node), self._view))

    def __repr__(self) -> str:
        return f"<{self.name()} object>"


# The op a primitive is in PyTorch's node names where the two names differ (`reduce_sum` is `SumBackward0`), and the
# nodes PyTorch names otherwise (an in-place copy; a compiled function's one node).
_TORCH_OP_NAMES = {"reduce_sum": "Sum", "reduce_max": "Amax", "reduce_min": "Amin", "reduce_prod": "Prod",
                   "matmul": "Mm", "integer_pow": "Pow", "square": "Pow", "convert_element_type": "ToCopy",
                   "conv": "Convolution", "vector_norm": "LinalgVectorNorm", "matrix_norm": "LinalgMatrixNorm",
                   "custom_vjp_call": "CustomFunction"}
_TORCH_NODE_NAMES = {"copy": "torch::autograd::CopyBackwards", "compiled_call": "CompiledFunctionBackward",
                     "aot_saved": "CompiledFunctionBackward"}


class AccumulateGrad(GradFn):
    """The node of a leaf in `next_functions`: its `variable` is the leaf tensor."""

    __slots__ = ()

    def name(self) -> str:
        return "torch::autograd::AccumulateGrad"

    @property
    def variable(self):
        return self._node.tensor()

    @property
    def next_functions(self) -> tuple:
        return ()

    def __repr__(self) -> str:
        return "<AccumulateGrad object>"


def _grad_fn(self):
    if _is_leaf(self):
        return None
    node = self._storage.grad_node
    return GradFn(node, self._chain[-1] if self._chain and type(node) is Leaf else None)


# -- retain_grad, hooks, detach_, data, _version --------------------------------------------------------------------
def _watch(t: Tensor) -> None:
    """Tell `t`'s node that a backward through it has a gradient to give `t`."""
    node = t._storage.grad_node
    if node.watchers is None:
        node.watchers = []
    if not any(r() is t for r in node.watchers):
        node.watchers.append(weakref.ref(t))


def retain_grad(self) -> None:
    """Make a non-leaf tensor keep its `.grad` after `backward()` (a leaf always does).

    >>> x = aotjax.tensor([1.0], requires_grad=True)
    >>> y = x * 3
    >>> y.retain_grad()
    >>> (y * y).sum().backward()
    >>> y.grad
    tensor([6.])
    """
    _eager(self, "retain_grad")
    if self._ag is None:
        raise RuntimeError(f"can't retain_grad on Tensor that has requires_grad=False{where()}")
    if _is_leaf(self):
        return
    graph.meta_of(self).retains_grad = True
    _watch(self)


def _retains_grad(self) -> bool:
    ag = self._ag
    return ag is not None and ag is not graph.NONLEAF and ag.retains_grad


class RemovableHandle:
    """What `register_hook` returns: `remove()` unregisters the hook."""

    def __init__(self, hooks: list, hook: Callable):
        self._hooks, self._hook = hooks, hook

    def remove(self) -> None:
        if self._hook in self._hooks:
            self._hooks.remove(self._hook)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def register_hook(self, hook: Callable) -> RemovableHandle:
    """Call `hook(grad)` when the gradient of this tensor is computed; a hook that returns a tensor replaces the
    gradient.

    >>> x = aotjax.tensor([1.0, 2.0], requires_grad=True)
    >>> _ = x.register_hook(lambda g: g * 10)
    >>> x.sum().backward()
    >>> x.grad
    tensor([10., 10.])
    """
    _eager(self, "register_hook")
    if self._ag is None:
        raise RuntimeError(f"cannot register a hook on a tensor that doesn't require gradient{where()}")
    meta = graph.meta_of(self)
    meta.hooks.append(hook)
    if not _is_leaf(self):
        _watch(self)
    return RemovableHandle(meta.hooks, hook)


def register_post_accumulate_grad_hook(self, hook: Callable) -> RemovableHandle:
    """Call `hook(tensor)` after a backward accumulated into this leaf's `.grad`."""
    if graph.leaf_of(self) is None:
        raise RuntimeError(f"post accumulate grad hooks cannot be registered on non-leaf tensors{where()}")
    meta = graph.meta_of(self)
    meta.post_accumulate_hooks.append(hook)
    return RemovableHandle(meta.post_accumulate_hooks, hook)


def detach_(self) -> Tensor:
    """Stop this tensor from requiring grad, in place (its value is unchanged); returns `self`."""
    _eager(self, "detach_")
    if self._chain and self.requires_grad:
        raise RuntimeError(f"Can't detach views in-place. Use detach() instead{where()}.")
    self._storage.grad_node = None  # NOTE: the storage's value no longer comes from the graph, for every alias
    graph.stop_recording(self)
    return self


def _get_data(self) -> Tensor:
    from aotjax.ops.shape.views import detach
    return detach(self)


def _set_data(self, value) -> None:
    _eager(self, "data")
    if not isinstance(value, Tensor):
        raise TypeError(f"data: expected a Tensor, got {type(value).__name__}{where()}")
    from aotjax.interpreters.eval import read
    leaf = graph.leaf_of(self)
    storage = Storage(read(value))
    ag = self._ag
    self._init_slots(value.aval, value._strides if not value._chain else None, 0, storage=storage)
    self._ag = ag
    if leaf is not None:
        storage.grad_node = leaf


def _version(self) -> int:
    storage = self._storage
    return storage.version if isinstance(storage, Storage) else 0


# -- backward and autograd.grad -----------------------------------------------------------------------------------
def _root(t, ct, what: str, i: int) -> Root:
    from aotjax.ops.base.data import as_tensor
    from aotjax.ops.creation.factories import ones
    if not isinstance(t, Tensor):
        raise TypeError(f"{what}: expected Tensors to differentiate, got {type(t).__name__}{where()}")
    if not graph.joins_graph(t):
        raise RuntimeError(f"element {i} of tensors does not require grad and does not have a grad_fn{where()}")
    if ct is None:
        if t.numel() != 1:
            raise RuntimeError(f"grad can be implicitly created only for scalar outputs (got a tensor of shape "
                               f"{tuple(t.shape)}){where()}; pass gradient= (the cotangent of this tensor)")
        ct = ones(t.shape, dtype=t.dtype)
    else:
        ct = as_tensor(ct)
        if tuple(ct.shape) != tuple(t.shape):
            raise RuntimeError(f"Mismatch in shape: grad_output[{i}] has a shape of {tuple(ct.shape)} and output[{i}] "
                               f"has a shape of {tuple(t.shape)}{where()}.")
        if ct.dtype != t.dtype:
            ct = ct.to(t.dtype)
    return Root(t._storage.grad_node, t._storage.grad_index, t._chain, ct)


def _as_list(x) -> list:
    if x is None:
        return []
    return [x] if isinstance(x, Tensor) else list(x)


def backward(tensors, grad_tensors=None, retain_graph: bool | None = None, create_graph: bool = False,
             grad_variables=None, inputs=None) -> None:
    """Accumulate into `.grad` the gradients of `tensors` (with cotangents `grad_tensors`) with respect to the
    graph's leaves (to `inputs` only, when given): `torch.autograd.backward`."""
    tensors = _as_list(tensors)
    cts = _as_list(grad_tensors if grad_tensors is not None else grad_variables)
    if not cts:
        cts = [None] * len(tensors)
    if len(cts) != len(tensors):
        raise RuntimeError(f"backward: got {len(cts)} gradients for {len(tensors)} tensors{where()}")
    if vmap_running():
        raise RuntimeError(f"backward() called inside vmap{where()}: each example's gradient would accumulate into "
                           f"one .grad. Use aotjax.autograd.grad(loss, params) inside the function (it returns "
                           f"per-example gradients), or aotjax.func.grad / vmap(grad(f)); or call backward() "
                           f"outside vmap")
    roots = [_root(t, c, "backward", i) for i, (t, c) in enumerate(zip(tensors, cts))]
    targets = None
    if inputs is not None:
        targets = _as_list(inputs)
        if not targets:
            raise RuntimeError(f"backward: 'inputs' argument to backward() cannot be empty{where()}.")
    run_backward(roots, targets, create_graph, create_graph if retain_graph is None else retain_graph, "backward",
                 accumulate=True)


def grad(outputs, inputs, grad_outputs=None, retain_graph: bool | None = None, create_graph: bool = False,
         only_inputs: bool = True, allow_unused: bool | None = None, is_grads_batched: bool = False,
         materialize_grads: bool = False) -> tuple:
    """The gradients of `outputs` (with cotangents `grad_outputs`) with respect to `inputs`, returned, not
    accumulated: `torch.autograd.grad`.

    >>> x = aotjax.tensor([3.0], requires_grad=True)
    >>> (g,) = aotjax.autograd.grad((x ** 3).sum(), x, create_graph=True)
    >>> g, aotjax.autograd.grad(g.sum(), x)
    (tensor([27.], grad_fn=<MulBackward0>), (tensor([18.]),))
    """
    if is_grads_batched:
        raise NotImplementedError(f"autograd.grad: is_grads_batched=True is not supported{where()}; vmap a "
                                  f"function calling aotjax.vjp instead (aotjax.vmap)")
    outputs = _as_list(outputs)
    inputs = _as_list(inputs)
    cts = _as_list(grad_outputs)
    if not cts:
        cts = [None] * len(outputs)
    if len(cts) != len(outputs):
        raise RuntimeError(f"grad requires one grad_output per output: got {len(cts)} for {len(outputs)} "
                           f"outputs{where()}")
    roots = [_root(t, c, "autograd.grad", i) for i, (t, c) in enumerate(zip(outputs, cts))]
    allow = bool(allow_unused) or materialize_grads
    grads = run_backward(roots, inputs, create_graph, create_graph if retain_graph is None else retain_graph,
                         "autograd.grad", accumulate=False, allow_unused=allow)
    if materialize_grads:
        from aotjax.ops.creation.factories import zeros
        grads = [zeros(x.shape, dtype=x.dtype) if g is None else g for x, g in zip(inputs, grads)]
    return tuple(grads)


def _tensor_backward(self, gradient=None, retain_graph: bool | None = None, create_graph: bool = False,
                     inputs=None) -> None:
    """Accumulate into the leaves' `.grad` the gradient of this tensor (a scalar, or with cotangent `gradient`):
    `torch.Tensor.backward`. The graph is freed after unless `retain_graph`."""
    backward([self], None if gradient is None else [gradient], retain_graph, create_graph, inputs=inputs)


Tensor.requires_grad = property(_get_requires_grad, _set_requires_grad, doc="Whether this tensor requires grad.")
Tensor.requires_grad_ = requires_grad_
Tensor.is_leaf = property(_is_leaf, doc="Whether this tensor is a leaf of the autograd graph.")
Tensor.grad = property(_get_grad, _set_grad, _del_grad, doc="The gradient a backward accumulated (None until one).")
Tensor.grad_fn = property(_grad_fn, doc="The node that made this tensor (None for a leaf).")
Tensor.retain_grad = retain_grad
Tensor.retains_grad = property(_retains_grad)
Tensor.register_hook = register_hook
Tensor.register_post_accumulate_grad_hook = register_post_accumulate_grad_hook
Tensor.detach_ = detach_
Tensor.data = property(_get_data, _set_data, doc="A detached alias of this tensor; assigning replaces its value.")
Tensor._version = property(_version)
Tensor.backward = _tensor_backward
Tensor.__deepcopy__ = _deepcopy
engine.node_name[0] = lambda node: GradFn(node).name()  # NOTE: anomaly mode names the node that made a NaN


def _repr_suffix(t: Tensor) -> str:
    fn = _grad_fn(t)
    return ", requires_grad=True" if fn is None else f", grad_fn=<{fn.name()}>"


tensor_module.autograd_repr[0] = _repr_suffix
