"""The recording of imperative autograd: which eager tensors require grad, and the nodes their values come from.

A tensor that requires grad records: an eager op with such an operand (and grad enabled) computes its value as
usual and appends one `Node` to the recording. Recording is per storage, as a tensor's value is its storage's base
read through its view chain: each storage that records names the node its base is output `grad_index` of
(`Storage.grad_node`), and a tensor's place in the graph is that node, that output and its own chain. So

- a view records nothing (it is its base's node and a longer chain); a view of a tensor that requires grad
  requires grad, unless the step detaches (`detach`, `.data`) or grad is disabled;
- a functional op makes a node whose operands are `Input`s (the operand's node, output and chain, and the base
  value the op read) or constants (the value read);
- an in-place write into a tensor that requires grad, or of a value that requires grad, makes a node whose
  written operand is the storage's previous base (`Input` with the written tensor's chain): the storage's new
  base is that node's output. A write under `no_grad()` or through a detached view changes the value and leaves
  the graph as it was, as in PyTorch.

Each node keeps the values its operands held when it ran (immutable jax arrays): the backward linearizes every op
at the values its forward saw, so a value saved for backward and overwritten in place later gives the correct
gradient (PyTorch raises instead: aotjax never needs to, its saved values are immutable). `aotjax.autograd.engine`
turns a recording into a program and differentiates it with the transforms' own rules.
"""
from __future__ import annotations

import functools
import sys
import weakref
from typing import Callable

from aotjax.core.call_epoch import epoch as call_epoch
from aotjax.core.interpreter import _state
from aotjax.core.primitive import Primitive
from aotjax.core.source_info import where
from aotjax.tensor import Storage, Tensor, recording_tensor, view_records

__all__ = ["Node", "Input", "Leaf", "RecordingTensor", "NONLEAF", "records", "requires_grad", "mark_leaf"]


class RecordingTensor(Tensor):
    """The class of a plain eager tensor that requires grad (slot-compatible with `Tensor`: a tensor switches
    class in place when it starts or stops requiring grad). The ops' eager fast paths check `type(x) is Tensor`,
    so every op on it goes through `bind`, which records."""

    __slots__ = ()


recording_tensor[0] = RecordingTensor


class AutogradMeta:
    """A tensor's autograd state beyond requiring grad: its `.grad`, hooks and `retain_grad()`; also the leaf
    node of a leaf tensor. One per tensor that needs one (`NONLEAF` is shared by the rest)."""

    __slots__ = ("grad", "hooks", "retains_grad", "leaf", "post_accumulate_hooks")

    def __init__(self):
        self.grad = None
        self.hooks: list = []
        self.retains_grad = False
        self.leaf: Leaf | None = None
        self.post_accumulate_hooks: list = []


NONLEAF = AutogradMeta()  # NOTE: shared and never written: `meta_of` gives a tensor its own before a write


def meta_of(t: Tensor) -> AutogradMeta:
    """`t`'s own AutogradMeta (made on first need)."""
    ag = t._ag
    if ag is None or ag is NONLEAF:
        ag = t._ag = AutogradMeta()
    return ag


class Input:
    """An operand of a node that requires grad: output `index` of node `node` (the operand's storage), read
    through `chain`, whose base held `value` when the op ran."""

    __slots__ = ("node", "index", "chain", "value")

    def __init__(self, node: "Node", index: int, chain: tuple, value):
        self.node, self.index, self.chain, self.value = node, index, chain, value


class Node:
    """One recorded op: `prim` with `params` on `operands` (per operand an `Input`, or the constant value it read).
    For a data mutation, `written` lists the operands it writes: output k is the new base of operand
    `written[k]`'s storage. `outputs` holds the values it made (bases). `freed` after a backward that did not
    retain the graph."""

    __slots__ = ("prim", "params", "operands", "written", "outputs", "freed", "watchers", "saved", "__weakref__")

    def __init__(self, prim: Primitive | None, params: dict, operands: tuple, written: tuple, outputs: tuple,
                 saved: tuple | None = None):
        self.prim, self.params, self.operands, self.written, self.outputs = prim, params, operands, written, outputs
        self.freed = False
        self.saved = saved  # a loop's linearization and residuals, kept when it ran (`register_saving`)
        self.watchers: list | None = None  # weak references to the non-leaf tensors of this node with hooks or
        # `retain_grad()`: a backward through the node has a gradient to give them

    def inputs(self):
        """The nodes this one reads."""
        return [op.node for op in self.operands if type(op) is Input]


class Leaf(Node):
    """The node of a leaf tensor that requires grad: its output is the leaf's storage base; the backward
    accumulates into the `.grad` of `tensor` (held weakly: a leaf nobody holds gets no gradient)."""

    __slots__ = ("tensor",)

    def __init__(self, tensor: Tensor):
        super().__init__(None, {}, (), (), ())
        self.tensor = weakref.ref(tensor)


saving_rules: dict = {}  # primitives recorded linearized (`register_saving`): prim -> how to run it


def register_saving(prim: Primitive, run: Callable) -> None:
    """Record `prim` linearized when it runs with an operand that requires grad (a loop, whose linearization in the
    backward would run it a second time): `run(prim, params, args, vals, eager) -> (outputs, saved)` computes its
    outputs and what its node keeps (`aotjax.autograd.saved_loops`)."""
    saving_rules[prim] = run


# -- which tensors record ----------------------------------------------------------------------------------------
_detaching: set = set()  # primitives whose result does not require grad (`detach`, a view; `stop_gradient`, which
# cuts a result computed under `no_grad()` inside a transform): `register_detaching`


def register_detaching(prim: Primitive) -> None:
    _detaching.add(prim)


def view_step_records(step) -> bool:
    """Whether a view of a tensor that requires grad through `step` requires grad."""
    return step.prim not in _detaching and _state.grad_enabled


view_records[0] = view_step_records
view_records[1] = NONLEAF


def is_detached(t: Tensor) -> bool:
    """Whether `t` views its storage through a detaching step (`detach()`, `.data`)."""
    return any(step.prim in _detaching for step in t._chain)


def requires_grad(x) -> bool:
    """Whether `x` is an eager tensor that requires grad."""
    return isinstance(x, Tensor) and x._ag is not None


def joins_graph(t: Tensor) -> bool:
    """Whether `t`, which did not require grad, does now: its storage was written in place with a value that
    requires grad (through another tensor: `buf[1:3] = w * 2` writes a view of `buf`), so reading it reads the
    graph, as PyTorch's views and base see. A detached view does not join, nor a tensor sharing a leaf's memory
    without viewing it (the data a `Parameter` was made from). If it joins, it becomes a non-leaf that requires
    grad."""
    if t._ag is not None:
        return True
    node = getattr(t._storage, "grad_node", None)
    if node is None or type(node) is Leaf or not _state.grad_enabled:
        return False
    for step in t._chain:
        if step.prim in _detaching:
            return False
    start_recording(t, NONLEAF)
    call_epoch[0] += 1  # NOTE: as in `mark_leaf`
    return True


def records(args) -> bool:
    """Whether an op on `args` records now: grad is enabled and an operand requires grad."""
    if not _state.grad_enabled:
        return False
    for a in args:
        if isinstance(a, Tensor) and (a._ag is not None or joins_graph(a)):
            return True
    return False


def differentiable_dtype(dtype) -> bool:
    return dtype.kind in "fc" or dtype.name == "bfloat16"


def start_recording(t: Tensor, ag) -> None:
    """`t` requires grad from now on (its class becomes `RecordingTensor` if it is a plain Tensor)."""
    if type(t) is Tensor:
        t.__class__ = RecordingTensor
    t._ag = ag


def stop_recording(t: Tensor) -> None:
    """`t` no longer requires grad (`detach_()`, `requires_grad_(False)` of a leaf)."""
    if type(t) is RecordingTensor:
        t.__class__ = Tensor
    t._ag = None


def mark_leaf(t: Tensor) -> None:
    """Make eager tensor `t` a leaf that requires grad (`requires_grad_()`): its storage's base is a `Leaf`."""
    if t._chain:
        if sys.getrefcount(t._storage) > 2:  # NOTE: `t`'s slot and the call's argument: nothing else holds the data
            raise RuntimeError(
                f"requires_grad_: this tensor is a view of another tensor's data, which is still in use{where()}; "
                f"aotjax records per storage, so only a whole tensor (or a view of data nothing else holds, as in "
                f"`torch.arange(6.).view(2, 3).requires_grad_()`) can become a leaf. Use x.clone().requires_grad_() "
                f"(a leaf of its own) or set requires_grad on the base tensor.")
        _own_storage(t)
    if not differentiable_dtype(t.dtype):
        raise RuntimeError(f"only Tensors of floating point and complex dtype can require gradients (got "
                           f"{t.dtype.name}){where()}")
    if t._ag is None:
        meta = (take_kept_meta(t) if _kept else None) or AutogradMeta()  # NOTE: its `.grad` from before
    else:
        meta = AutogradMeta() if t._ag is NONLEAF else t._ag
    leaf = meta.leaf = Leaf(t)
    storage = t._storage
    storage.grad_node, storage.grad_index = leaf, 0
    start_recording(t, meta)
    call_epoch[0] += 1  # NOTE: a compiled call's fast path checks its tensors again (`FastCall.refit`)


def _own_storage(t: Tensor) -> None:
    """View `t`, whose storage nothing else holds, made a whole tensor of its value: no one can observe the aliasing
    it gives up. Its strides stay where they describe dense data of its size (`randn(4, 3).t()`)."""
    from aotjax.ops.base.layout import is_non_overlapping_and_dense  # NOTE: ops sit above autograd; rare path
    value = Tensor._read(t)
    strides = t._strides if t._strides is not None and is_non_overlapping_and_dense(t.shape, t._strides) else None
    t._storage = Storage(value)
    t._chain, t._strides, t._offset, t._cache = (), strides, 0, None


def factory(fn: Callable) -> Callable:
    """Factory `fn` (`zeros`, `tensor`, `randn`, ...) with PyTorch's `requires_grad=` keyword: the tensor it makes is
    a leaf that requires grad when it is True."""
    @functools.wraps(fn)
    def make(*args, requires_grad: bool = False, **kwargs):
        t = fn(*args, **kwargs)
        if requires_grad:
            mark_leaf(t)
        return t
    return make


# The storages (by id, held weakly through their tensors' `.grad`) of the `.grad`s a `backward()` inside a loop body
# adds to: the loop's write-back of them is a gradient, not a recorded write (`aotjax.ops.control_flow._body`).
gradient_buffers: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def link_lifted(inner: Tensor, outer) -> None:
    """`inner`, a tensor of a staged function standing for `outer` (an argument or a captured tensor, viewing all of
    its storage, or the same view of it), requires grad if `outer` does, at the same place in the graph (a leaf stays
    that leaf; a view of a leaf, a layer's weight in a stacked parameter, stays a view of it)."""
    if not isinstance(outer, Tensor) or outer._ag is None or inner._chain != outer._chain:
        return
    inner._ag = outer._ag if not outer._chain else NONLEAF
    storage = inner._storage
    if storage.grad_node is None:
        storage.grad_node, storage.grad_index = outer._storage.grad_node, outer._storage.grad_index


def grad_of(t: Tensor):
    """`t.grad` as it is stored (no warning, no staging)."""
    ag = t._ag
    if ag is None:
        ag = kept_meta(t) if _kept else None
        return None if ag is None else ag.grad
    return None if ag is NONLEAF else ag.grad


# The autograd state of tensors that do not require grad but hold a `.grad`, as torch's: a leaf whose requires_grad
# was turned off (a frozen discriminator) keeps its `.grad` and hooks, an optimizer still steps it, and turning
# requires_grad on again accumulates into it; a `.grad` may be assigned to any tensor. By id, while the tensor lives.
_kept: dict = {}  # id(tensor) -> (weak reference to it, its AutogradMeta)


def kept_meta(t: Tensor) -> AutogradMeta | None:
    """The autograd state `t` kept when it stopped requiring grad (or got a `.grad` without requiring grad)."""
    entry = _kept.get(id(t))
    return entry[1] if entry is not None and entry[0]() is t else None


def keep_meta(t: Tensor, meta: AutogradMeta) -> None:
    key = id(t)
    meta.leaf = None
    _kept[key] = (weakref.ref(t, lambda _, key=key: _kept.pop(key, None)), meta)


def take_kept_meta(t: Tensor) -> AutogradMeta | None:
    """`kept_meta(t)`, no longer kept (`t` requires grad again: its own `_ag`)."""
    meta = kept_meta(t)
    if meta is not None:
        del _kept[id(t)]
    return meta


def leaf_of(t: Tensor) -> Leaf | None:
    """The leaf node of `t` if `t` is a leaf that requires grad (its storage's base is still that leaf and it views
    all of it), else None."""
    ag = t._ag
    if ag is None or t._chain:
        return None
    node = t._storage.grad_node
    return node if type(node) is Leaf else None


# -- recording ---------------------------------------------------------------------------------------------------
def record_functional(prim: Primitive, params: dict, args, vals, outs: list, saved: tuple | None = None) -> None:
    """Record functional `prim`'s eager application on `args` (read as `vals`), which made `outs`: each result of
    a differentiable dtype requires grad, a non-leaf whose storage is output i of the new node (which keeps
    `saved`, see `register_saving`)."""
    # NOTE: runs once per recorded op that binds: loops, not generators (about a microsecond less)
    if prim in _detaching:
        return
    operands = []
    for a, v in zip(args, vals):
        if isinstance(a, Tensor) and a._ag is not None:
            storage = a._storage
            operands.append(Input(storage.grad_node, storage.grad_index, a._chain, storage.base))
        else:
            operands.append(v)
    bases = [o._storage.base for o in outs]
    node = Node(prim, params, tuple(operands), (), tuple(bases), saved)
    for i, o in enumerate(outs):
        if differentiable_dtype(bases[i].dtype):
            storage = o._storage
            storage.grad_node, storage.grad_index = node, i
            start_recording(o, NONLEAF)


def fast_operand(a) -> bool:
    """Whether `a` is an operand of the recording fast path (`record_result`): an eager tensor without a view
    chain or strides, which requires grad (a `RecordingTensor`) or is plain and not part of a graph."""
    t = type(a)
    if t is RecordingTensor:
        return not a._chain and a._strides is None
    return t is Tensor and not a._chain and a._strides is None and a._storage.grad_node is None


_new = object.__new__


def record_result(prim: Primitive, params: dict, args, vals, out) -> Tensor:
    """The eager fast path's result of functional `prim` (`params`, one result) on `fast_operand`s `args` (read as
    `vals`), one or more of which requires grad, with grad enabled: `out` wrapped, recorded as `record_functional`
    records it, without the dispatch."""
    # NOTE: once per recorded eager op on the fast path: objects are made and filled inline (`Node.__init__`,
    # `Input.__init__` and `Tensor._wrap` as calls cost about 0.3 µs more)
    storage = _new(Storage)
    storage.base, storage.version, storage.owned = out, 0, True
    dtype = out.dtype
    if dtype.kind not in "fc" and dtype.name != "bfloat16":
        storage.grad_node = None
        t = _new(Tensor)
        t._ag = None
    else:
        if len(args) == 2:  # NOTE: a binary op, the common case: no list
            operands = (_operand(args[0], vals[0]), _operand(args[1], vals[1]))
        else:
            operands = tuple([_operand(a, v) for a, v in zip(args, vals)])
        node = _new(Node)
        node.prim, node.params, node.operands, node.written, node.outputs = prim, params, operands, (), (out,)
        node.freed, node.watchers, node.saved = False, None, None
        storage.grad_node, storage.grad_index = node, 0
        t = _new(RecordingTensor)
        t._ag = NONLEAF
    t._storage, t._chain, t._aval, t._strides, t._offset, t._cache = storage, (), None, None, 0, None
    return t


def _operand(a, v):
    """What a recorded node holds of operand `a` (a `fast_operand`, read as `v`): an `Input` if it requires grad,
    else the value."""
    if type(a) is not RecordingTensor:
        return v
    source = a._storage
    op = _new(Input)
    op.node, op.index, op.chain, op.value = source.grad_node, source.grad_index, (), v
    return op


def check_write(prim: Primitive, args) -> bool:
    """Before an eager data mutation `prim` writes `args[i]` for i in `prim.mutates`: whether it records (grad is
    enabled and the written tensor or an operand requires grad); raises PyTorch's error for an in-place write to
    a leaf that requires grad (or a view of one), before anything is written."""
    if not records(args):
        return False
    for i in prim.mutates:
        t = args[i]
        if not isinstance(t, Tensor):
            return False  # NOTE: the write raises
        if t._ag is not None and type(t._storage.grad_node) is Leaf:
            what = "a view of a leaf Variable" if t._chain else "a leaf Variable"
            raise RuntimeError(f"{what} that requires grad is being used in an in-place operation "
                               f"({prim.name}){where()}. Write it under `with aotjax.no_grad():` (an optimizer "
                               f"update), or write into a clone.")
    written = [id(args[i]._storage) for i in prim.mutates]
    if len(set(written)) != len(written):
        raise RuntimeError(f"{prim.name}: two operands it writes share memory{where()}, which autograd cannot "
                           f"record; write them one at a time")
    return True


def record_write(prim: Primitive, params: dict, args, vals, old_bases: list) -> None:
    """Record data mutation `prim`'s eager application on `args` (read as `vals`; the written operands' storages
    held `old_bases` before): each written storage's base is now an output of the new node."""
    written = prim.mutates
    operands = []
    for k, (a, v) in enumerate(zip(args, vals)):
        if k in written:  # NOTE: the written tensor's value before the write
            storage = a._storage
            old = old_bases[written.index(k)]
            operands.append(Input(storage.grad_node, storage.grad_index, a._chain, old)
                            if storage.grad_node is not None else Written(a._chain, old))
        elif isinstance(a, Tensor) and a._ag is not None:  # NOTE: an operand on the graph: where it is read from
            storage = a._storage
            operands.append(Input(storage.grad_node, storage.grad_index, a._chain, storage.base))
        else:
            operands.append(v)
    node = Node(prim, params, tuple(operands), written, tuple(args[i]._storage.base for i in written))
    for k, i in enumerate(written):
        t = args[i]
        storage = t._storage
        storage.grad_node, storage.grad_index = node, k
        if t._ag is None:
            start_recording(t, NONLEAF)
            call_epoch[0] += 1  # NOTE: as in `mark_leaf`


class Written:
    """A written operand whose storage did not record before: its previous base (a constant) read through
    `chain`."""

    __slots__ = ("chain", "value")

    def __init__(self, chain: tuple, value):
        self.chain, self.value = chain, value

