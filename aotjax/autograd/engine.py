"""The backward of a recording: `backward()` and `autograd.grad` as one program, differentiated by the transforms.

The recorded sub-graph between the roots and the tensors that receive gradients is replayed as a function of
the leaves' values (`Replay`): each node binds its primitive again on its operands, every operand that comes
from another node pinned to the value the node read (`pinned`: the value recorded, the derivative the graph's),
so the function's value never depends on anything but what the forward saw, and only the derivative flows
through the graph. `aotjax.vjp` of that function is the backward: the same linearize + transpose rules as every
transform, no second rule table. Eagerly it runs under `aotjax.jit`, one program compiled and cached per graph
structure (a training loop's backward compiles once); the replayed forward values are pinned, so the program
computes no forward op twice (what remains of the replay is dead code, removed before compiling). With
`create_graph=True` the same function runs op by op on tensors that record, so the backward is itself recorded
and can be differentiated again.

Non-leaf tensors that receive gradients (`retain_grad()`, `autograd.grad` of an intermediate, hooks) get a probe:
a zero added to their node's output, whose gradient is theirs. Their hooks run latest node first, as PyTorch's. While
no hook changes a gradient, the one backward is all there is. Once one does, the backward goes on in segments, as
PyTorch's engine would: from the roots again with every hooked output not yet handled *cut* (its probe stands for
the output, so no gradient passes it), then from each hooked output in turn, latest first, with the gradient its
hooks gave. So a leaf's gradient is exactly what the hooks made it (a hook that zeroes an infinite gradient gives
zero, not `inf - inf`), not the first gradient plus a propagated difference.
"""
from __future__ import annotations

from typing import Callable, Sequence

import jax

from aotjax.autograd import anomaly_mode, grad_state, graph, saved_loops  # noqa: F401  (registers the loops that save)
from aotjax.autograd.graph import Input, Leaf, Node, Written
from aotjax.core import views
from aotjax.core.avals import get_aval
from aotjax.core.call_epoch import running as transforms_running
from aotjax.core.errors import UnsupportedError
from aotjax.core.interpreter import Tracer, grad_mode
from aotjax.core.ir import param_key
from aotjax.core.source_info import where
from aotjax.interpreters.eval import read
from aotjax.ops.calls.saved_linear import saved_linear_p
from aotjax.ops.control_flow._body import BodyTrace
from aotjax.ops.shape.views import pinned_p
from aotjax.tensor import Tensor

__all__ = ["run_backward", "pinned_p"]

_wrap = Tensor._wrap

def _bind(prim, x, **params):
    return prim.bind(x, **params)


# -- the graph between roots and targets ---------------------------------------------------------------------------
def topological(roots: Sequence[Node]) -> list[Node]:
    """The nodes the `roots` depend on, each after the nodes it reads."""
    order, seen = [], set()
    stack = [(r, False) for r in roots]
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        for op in node.operands:
            if type(op) is Input and id(op.node) not in seen:
                stack.append((op.node, False))
    return order


class Root:
    """Where a backward starts: output `index` of `node`, read through `chain`, with cotangent `ct`."""

    __slots__ = ("node", "index", "chain", "ct")

    def __init__(self, node: Node, index: int, chain: tuple, ct):
        self.node, self.index, self.chain, self.ct = node, index, chain, ct


def _static(x) -> bool:
    """Whether a constant operand is a Python value the replay keeps in its structure (a number, None, ...), not an
    array it takes as an input."""
    return isinstance(x, (int, float)) or not (isinstance(x, (jax.Array, Tensor)) or hasattr(x, "__array__"))


class Replay:
    """A recorded graph's structure (no values): `key` identifies it; `__call__(leaves, probes, values)` replays it
    on tensors, returning the roots' values. `values` lists, in order, every array operand the nodes read. With
    `saved`, a node that kept its linearization (a loop: `graph.register_saving`) replays as `saved_linear` on the
    residuals it kept (first in its operands), which runs nothing again; without, as the op itself (what a
    backward with `create_graph` differentiates again)."""

    def __init__(self, order: list[Node], roots: list[Root], probes: list[tuple[Node, int]], saved: bool = False,
                 cuts: Sequence[tuple[Node, int]] = ()):
        index = {id(n): j for j, n in enumerate(order)}
        steps, key = [], []
        self.leaves = [n for n in order if type(n) is Leaf]
        self.saved = saved
        for node in order:
            if type(node) is Leaf:
                steps.append(None)
                key.append(("leaf",))
                continue
            ops, op_key = [], []
            prim, params = node.prim, node.params
            if saved and node.saved is not None:
                lin, residuals = node.saved
                prim, params = saved_linear_p, {"saved": lin}
                ops += [("c",)] * len(residuals)
                op_key += [("c", _aval_key(r)) for r in residuals]
            for op in node.operands:
                if type(op) is Input:
                    ops.append(("i", index[id(op.node)], op.index, op.chain))
                    op_key.append(("i", index[id(op.node)], op.index, op.chain, _aval_key(op.value)))
                elif type(op) is Written:
                    ops.append(("w", op.chain))
                    op_key.append(("w", op.chain, _aval_key(op.value)))
                elif _static(op):
                    ops.append(("s", op))
                    op_key.append(("s", type(op), op))
                else:
                    ops.append(("c",))
                    op_key.append(("c", _aval_key(op)))
            steps.append((prim, params, tuple(ops), node.written))
            pkey = tuple((k, param_key(v)) for k, v in params.items()) if prim.higher_order else tuple(params.items())
            key.append((prim, pkey, tuple(op_key), node.written))
        self.steps = steps
        self.roots = [(index[id(r.node)], r.index, r.chain) for r in roots]
        self.probes = [(index[id(n)], i) for n, i in probes]
        # NOTE: a cut output (a probed one) is its probe alone: the derivative stops there (every read of it is
        # pinned to the value recorded, so nothing else changes)
        self.cuts = frozenset((index[id(n)], i) for n, i in cuts if id(n) in index)
        self.key = (tuple(key), tuple(self.roots), tuple(self.probes), tuple(sorted(self.cuts)))

    def values(self, order: list[Node], read: Callable) -> list:
        """`read(operand)` of each array operand of `order`'s nodes (`Input`, `Written` or an array constant; with
        `saved`, a saving node's residuals first), in the order `__call__` takes them."""
        vals = []
        for node in order:
            if self.saved and node.saved is not None:
                vals += [read(r) for r in node.saved[1]]
            vals += [read(op) for op in node.operands if type(op) is Input or type(op) is Written or not _static(op)]
        return vals

    def __call__(self, leaves: list, probes: list, values: list) -> list:
        env: dict = {}
        leaves, values = iter(leaves), iter(values)
        probe_at = dict(zip(self.probes, probes))
        for j, step in enumerate(self.steps):
            if step is None:
                outs = [next(leaves)]
            else:
                prim, params, ops, written = step
                args, bases = [], {}
                for k, op in enumerate(ops):
                    kind = op[0]
                    if kind == "i":
                        base = pinned_p.bind(env[(op[1], op[2])], next(values))
                        bases[k] = base
                        args.append(views.apply_chain(_bind, base, op[3]))
                    elif kind == "w":
                        base = next(values).clone()
                        bases[k] = base
                        args.append(views.apply_chain(_bind, base, op[1]))
                    elif kind == "c":
                        args.append(next(values))
                    else:
                        args.append(op[1])
                res = prim.bind(*args, **params)
                if written:
                    outs = [bases[i] for i in written]
                else:
                    outs = list(res) if prim.multiple_results else [res]
            for i, o in enumerate(outs):
                p = probe_at.get((j, i))
                env[(j, i)] = o if p is None else p if (j, i) in self.cuts else o + p
        return [views.apply_chain(_bind, env[(j, i)], chain) for j, i, chain in self.roots]


def _aval_key(x):
    if isinstance(x, jax.Array):  # NOTE: the common case, without building an aval (a backward reads every operand)
        return (x.shape, x.dtype)
    a = get_aval(x)
    return (a.shape, a.dtype)


def _backward_fn(replay: Replay) -> Callable:
    """`(leaves, probes, values, cts) -> (leaf cotangents, probe cotangents)`: the vjp of `replay`."""
    from aotjax.transforms.autodiff import vjp

    def backward(leaves, probes, values, cts):
        _, pull = vjp(lambda ls, ps: replay(ls, ps, values), leaves, probes)
        return pull(list(cts))

    return backward


class CompiledBackward:
    """The backward of one graph structure as one compiled program: the vjp of its `Replay` staged once (as `jit`
    stages a function: functionalized), then called on the operands' raw arrays. Calling it through `aotjax.jit`
    would read, check and wrap every one of a large graph's thousands of operands as a tensor argument (about
    1 ms of a nanoGPT step's backward); the arrays go to `jax.jit` of the staged program as they are."""

    def __init__(self, replay: Replay):
        self.backward = _backward_fn(replay)
        self.run = None  # NOTE: jax.jit of the program, once staged by the first call
        self.staged = self.direct = None
        self.base_pos: list = []
        self.jitted = None
        self.trace_count = 0  # how many times the program was traced (once per graph structure)

    def inline(self, leaves: list, probes: list, values: list, cts: list) -> tuple[list, list]:
        """The same backward on tensors of a staging transform (a `backward()` inside `jit`): through
        `aotjax.jit`, which stages it into the function being staged."""
        if self.jitted is None:
            from aotjax.transforms.jit import jit
            self.jitted = jit(self.backward, donate=False)
        return self.jitted(leaves, probes, values, cts)

    def __call__(self, leaves: list, probes: list, values: list, cts: list) -> tuple[list, list]:
        """The cotangents of `leaves` and `probes` (arrays: the values the graph read, `cts` the roots')."""
        arrays = [*leaves, *probes, *values, *cts]
        if self.run is None:
            self._stage(arrays, (len(leaves), len(probes), len(values)))
        outs = self.run(*arrays)
        if self.direct is not None:
            grads = []
            for i, layout in self.direct:
                g = _wrap(outs[i])
                if layout is not None:
                    g._strides, g._offset = layout
                grads.append(g)
        else:
            from aotjax.runtime import boundary
            wrapped = [Tensor._wrap(a, owned=False) for a in arrays]
            grads = boundary.apply(self.staged.meta, wrapped, [], [outs[i] for i in self.base_pos], wrap=_wrap)
        return grads[:len(leaves)], grads[len(leaves):]

    def _stage(self, arrays: list, sizes: tuple) -> None:
        from aotjax.lowering.to_jax import flat_function
        from aotjax.runtime import boundary
        from aotjax.transforms.functionalize import stage_functionalized
        n_leaves, n_probes, n_values = sizes
        backward = self.backward

        def flat(*xs):
            leaves, probes = list(xs[:n_leaves]), list(xs[n_leaves:n_leaves + n_probes])
            values, cts = xs[n_leaves + n_probes:n_leaves + n_probes + n_values], xs[n_leaves + n_probes + n_values:]
            leaf_cts, probe_cts = backward(leaves, probes, list(values), list(cts))
            return [*leaf_cts, *probe_cts]

        flat.__name__ = "backward"
        args = [Tensor._wrap(a, owned=False) for a in arrays]
        staged = stage_functionalized(flat, args, {}, what="backward", live=False)
        meta = staged.meta
        if meta.mutated or meta.metadata or len(meta.groups) != len(args):  # NOTE: a backward writes no input
            raise AssertionError("the backward of a recording writes its inputs")
        self.base_pos = [k for k, (slot, _) in enumerate(meta.layout) if slot is boundary.Slot.BASE]
        plain = all(spec.kind is boundary.OutKind.BASE and not spec.chain for spec in meta.outputs)
        self.direct = [(self.base_pos[spec.index], None if spec.layout == (None, 0) else spec.layout)
                       for spec in meta.outputs] if plain else None
        self.staged = staged
        program = flat_function(staged.jaxpr)

        def traced(*xs):  # NOTE: runs when jax traces the program (`trace_count`)
            self.trace_count += 1
            return program(*xs)

        traced.__name__ = program.__name__
        self.run = jax.jit(traced)


_programs: dict = {}  # replay key -> its CompiledBackward


def _compiled(replay: Replay) -> CompiledBackward:
    fn = _programs.get(replay.key)
    if fn is None:
        if len(_programs) >= 256:
            _programs.clear()
        fn = _programs[replay.key] = CompiledBackward(replay)
    return fn


def _value(op):
    """A node operand's recorded value, as the compiled backward takes it (an array as a tensor it does not own)."""
    value = op.value if type(op) is Input or type(op) is Written else op
    return Tensor._wrap(value, owned=False) if isinstance(value, jax.Array) else value


def _array(op):
    """A node operand's recorded value as the compiled backward takes it: an array."""
    return _array_of(op.value if type(op) is Input or type(op) is Written else op)


def _array_of(x):
    """An eager value (a tensor, an array, a number) as an array."""
    return read(x) if isinstance(x, Tensor) else x if isinstance(x, jax.Array) else jax.numpy.asarray(x)


def _linked(op):
    """A node operand's recorded value as the backward with `create_graph` reads it: for an `Input`, a tensor that
    requires grad whose graph is the operand's (so the backward records)."""
    value = op.value if type(op) is Input or type(op) is Written else op
    if type(op) is not Input:
        return value
    t = Tensor._wrap(value, owned=False)
    t._storage.grad_node, t._storage.grad_index = op.node, op.index
    graph.start_recording(t, graph.NONLEAF)
    return t


def run_graph(roots: list[Root], probes: list[tuple[Node, int]], create_graph: bool, what: str,
              order: list[Node] | None = None, cuts: Sequence[tuple[Node, int]] = ()) -> tuple[dict, dict]:
    """The cotangents of every leaf of the graph behind `roots` (`order`: its nodes, `topological`, when the caller
    has them) by leaf node id: `(leaf, cotangent)`, and of every probed node output in that graph (by
    `(node id, output)`). No gradient passes the probed outputs `cuts` (none of them a root's)."""
    if order is None:
        order = topological([r.node for r in roots])
    for node in order:
        if node.freed:
            raise RuntimeError(
                f"{what}: Trying to backward through the graph a second time (or directly access saved tensors "
                f"after they have already been freed). Saved intermediate values of the graph are freed when you "
                f"call .backward() or autograd.grad(). Specify retain_graph=True if you need to backward through "
                f"the graph a second time or if you need to access saved tensors after calling backward{where()}.")
    in_graph = {id(n) for n in order}
    probes = [p for p in probes if id(p[0]) in in_graph]
    replay = Replay(order, roots, probes, saved=not create_graph, cuts=cuts)
    leaf_vals = [_leaf_value(leaf, order) for leaf in replay.leaves]
    probe_vals = [_probe_zero(node, i) for node, i in probes]
    cts = [r.ct for r in roots]
    if create_graph:
        with grad_mode(True):
            leaf_cts, probe_cts = _backward_fn(replay)(leaf_vals, probe_vals, replay.values(order, _linked), cts)
    elif transforms_running[0]:  # NOTE: a backward inside a staged function: staged into it
        with grad_mode(False):
            leaf_cts, probe_cts = _compiled(replay).inline(leaf_vals, probe_vals, replay.values(order, _value),
                                                           [c.detach() if isinstance(c, Tensor) else c for c in cts])
    else:
        with grad_mode(False):
            leaf_cts, probe_cts = _compiled(replay)([_array_of(v) for v in leaf_vals],
                                                    [_array_of(v) for v in probe_vals],
                                                    replay.values(order, _array), [_array_of(c) for c in cts])
    return ({id(leaf): (leaf, ct) for leaf, ct in zip(replay.leaves, leaf_cts)},
            {(id(n), i): ct for (n, i), ct in zip(probes, probe_cts)})


def _leaf_value(leaf: Leaf, order: list[Node]):
    """What the replay takes for `leaf`: any value of the shape the nodes read it as does (every read of it is
    pinned), so the first one a node read (inside `vmap`, one example's; the tensor itself may be gone)."""
    for node in order:
        for op in node.operands:
            if type(op) is Input and op.node is leaf:
                return op.value if isinstance(op.value, Tensor) else Tensor._wrap(op.value, owned=False)
    raise AssertionError("a leaf no node reads")


def _probe_zero(node: Node, i: int):
    from aotjax.ops.creation.factories import zeros
    out = node.outputs[i]
    return zeros(out.shape, dtype=out.dtype)


def free(order: list[Node]) -> None:
    """Drop what the nodes `order` (a graph behind a backward's roots) saved for backward (`retain_graph=False`): a
    second backward through them raises."""
    for node in order:
        if type(node) is not Leaf and not node.freed:
            node.freed = True
            operands = []
            for op in node.operands:
                if type(op) is Input:
                    op.value = None  # NOTE: each node's own: `record_*` make one per operand
                    operands.append(op)
                else:
                    operands.append(None)
            node.operands = tuple(operands)
            node.outputs = ()
            node.saved = None


def run_backward(roots: list[Root], targets: list[Tensor] | None, create_graph: bool, retain_graph: bool,
                 what: str, accumulate: bool, allow_unused: bool = False) -> list | None:
    """The backward of `roots`. With `accumulate` (`backward()`): gradients are added to the `.grad` of every leaf
    that requires grad (of `targets` only, when given) and of every non-leaf that retains its grad; returns None.
    Otherwise (`autograd.grad`): returns the gradient of each of `targets` (None for one the roots do not depend
    on, with `allow_unused`). Tensor hooks run on the way. Nothing is written before every gradient is computed."""
    order = topological([r.node for r in roots])
    watched = _watched(order, targets)
    probes = list({(id(n), i): (n, i) for _, n, i, _ in watched}.values())
    by_leaf, by_probe = run_graph(roots, probes, create_graph, what, order)
    _run_hooks(watched, probes, roots, order, by_leaf, by_probe, create_graph, what)
    if anomaly_mode.checking_nan():
        _check_nan(order, roots, by_leaf, by_probe, what)
    grads = {}  # id(tensor) -> (tensor, gradient)
    leaf_grads = {}  # id(leaf node) -> gradient: that of a tensor standing for the leaf inside a transform too
    for leaf, ct in by_leaf.values():
        t = leaf.tensor()
        if t is not None and t._ag is not None and graph.leaf_of(t) is leaf:
            for hook in t._ag.hooks:
                r = hook(ct)
                if r is not None:
                    ct = r
            grads[id(t)] = (t, ct)
        leaf_grads[id(leaf)] = ct
    for t, n, i, _ in watched:
        ct = _through_chain(by_probe.get((id(n), i)), t._chain)
        if ct is not None:
            grads[id(t)] = (t, ct)
    if targets is not None and not accumulate:
        results = []
        for t in targets:
            g = grads.get(id(t))
            if g is None and id(leaf := graph.leaf_of(t)) in leaf_grads:  # NOTE: an argument inside vmap stands for
                g = (t, leaf_grads[id(leaf)])  # the caller's leaf (`link_lifted`): one example's gradient
            if g is None and not allow_unused:
                raise RuntimeError(f"{what}: One of the differentiated Tensors appears to not have been used in the "
                                   f"graph. Set allow_unused=True if this is the desired behavior{where()}.")
            results.append(None if g is None else g[1])
    if not retain_graph:
        free(order)
    if not accumulate:
        return results
    wanted = None if targets is None else {id(t) for t in targets}
    updates = [(t, ct) for k, (t, ct) in grads.items()
               if (wanted is None or k in wanted) and (graph.leaf_of(t) is not None or _retains(t))]
    for t, ct in updates:
        _accumulate(t, ct, create_graph)
    for t, _ in updates:
        if t._ag is not graph.NONLEAF:
            for hook in t._ag.post_accumulate_hooks:
                hook(t)
    return None


def _retains(t: Tensor) -> bool:
    ag = t._ag
    return ag is not None and ag is not graph.NONLEAF and ag.retains_grad


def _through_chain(ct, chain: tuple):
    """A gradient with respect to a storage's base, read through a tensor's view chain."""
    return views.apply_chain(_bind, ct, chain) if ct is not None and chain else ct


def _watched(order: list[Node], targets) -> list:
    """`(tensor, node, index, chain)` of every non-leaf tensor that gets a probe: those of `targets` (autograd.grad),
    and the live non-leaf tensors with hooks or `retain_grad()` on the graph's nodes."""
    out = []
    if targets is not None:
        for t in targets:
            if not isinstance(t, Tensor) or t._ag is None:
                raise RuntimeError(f"One of the differentiated Tensors does not require grad{where()}")
            if graph.leaf_of(t) is None:
                out.append((t, t._storage.grad_node, t._storage.grad_index, t._chain))
    seen = {id(t) for t, *_ in out}
    for node in order:
        for ref in node.watchers or ():
            t = ref()
            if t is not None and id(t) not in seen and t._ag is not None and t._storage.grad_node is node:
                out.append((t, node, t._storage.grad_index, t._chain))
    return out


def _run_hooks(watched: list, probes: list, roots: list[Root], order: list[Node], by_leaf: dict, by_probe: dict,
               create_graph: bool, what: str) -> None:
    """Run the hooks of the watched non-leaf tensors, latest node first, on the gradients of the backward of the
    `roots` (`by_leaf`, `by_probe`: updated). The first hook that changes a gradient turns the rest of the backward
    into segments (see the module's docstring): the roots' backward again, cut at every hooked output not handled
    yet, then one backward from each hooked output, with the gradient its hooks gave, cut at the earlier ones."""
    groups: dict = {}  # (node id, output) -> (node, output, [(tensor, chain)]): the hooked tensors of one output
    for t, node, i, chain in watched:
        if t._ag is not graph.NONLEAF and t._ag.hooks:
            groups.setdefault((id(node), i), (node, i, []))[2].append((t, chain))
    if not groups:
        return
    rank = {id(n): j for j, n in enumerate(topological([g[0] for g in groups.values()]))}
    pending = sorted(groups.values(), key=lambda g: (-rank[id(g[0])], -g[1]))
    segmented = False
    for k, (node, i, hooked) in enumerate(pending):
        key = (id(node), i)
        g = by_probe.get(key)
        if g is None:
            continue
        new = _hooked(g, hooked)
        if not segmented:
            if new is g:
                continue
            segmented = True
            leaf_cts, probe_cts = run_graph(roots, probes, create_graph, what, order,
                                            cuts=[(n, j) for n, j, _ in pending[k:]])
            by_leaf.clear()
            by_leaf.update(leaf_cts)
            by_probe.clear()
            by_probe.update(probe_cts)
        by_probe[key] = new
        others = [p for p in probes if not (p[0] is node and p[1] == i)]
        more_leaf, more_probe = run_graph([Root(node, i, (), new)], others, create_graph, what,
                                          cuts=[(n, j) for n, j, _ in pending[k + 1:]])
        for lk, (leaf, ct) in more_leaf.items():
            by_leaf[lk] = (leaf, ct if lk not in by_leaf else by_leaf[lk][1] + ct)
        for pk, ct in more_probe.items():
            by_probe[pk] = ct if pk not in by_probe else by_probe[pk] + ct


node_name: list = [lambda node: "backward"]  # NOTE: a node's torch name (`SqrtBackward0`): set by tensor_methods


def _has_nan(g) -> bool:
    if g is None or isinstance(g, Tracer):  # NOTE: a compiled step's gradients are traced: not checked
        return False
    from aotjax.ops.math.elementwise import isnan  # NOTE: ops sit above autograd; anomaly mode only

    with grad_mode(False):
        return bool(isnan(g.detach() if isinstance(g, Tensor) else g).any())


def _check_nan(order: list[Node], roots: list[Root], by_leaf: dict, by_probe: dict, what: str) -> None:
    """Anomaly mode: raise if a gradient holds a NaN, naming the node whose backward made it (the latest node whose
    outputs' gradients are free of NaN but whose own backward gives one of its operands a NaN)."""
    if not any(_has_nan(ct) for _, ct in by_leaf.values()) and not any(_has_nan(g) for g in by_probe.values()):
        return
    outputs = [(n, i) for n in order if type(n) is not Leaf for i in range(len(n.outputs))]
    leaf_cts, grads = run_graph(roots, outputs, False, what, order)
    for node in reversed(order):
        if type(node) is Leaf or any(_has_nan(grads.get((id(node), i))) for i in range(len(node.outputs))):
            continue
        operands = [(k, op) for k, op in enumerate(node.operands) if type(op) is Input]
        total = [leaf_cts.get(id(op.node), (None, None))[1] if type(op.node) is Leaf
                 else grads.get((id(op.node), op.index)) for _, op in operands]
        if not any(_has_nan(g) for g in total):
            continue
        own = [Root(node, i, (), grads[(id(node), i)]) for i in range(len(node.outputs)) if (id(node), i) in grads]
        cut = [(op.node, op.index) for _, op in operands if type(op.node) is not Leaf]
        own_leaf, own_probe = run_graph(own, cut, False, what, cuts=cut)  # NOTE: this node's backward alone
        for k, op in operands:
            g = (own_leaf.get(id(op.node), (None, None))[1] if type(op.node) is Leaf
                 else own_probe.get((id(op.node), op.index)))
            if _has_nan(g):
                raise RuntimeError(f"Function '{node_name[0](node)}' returned nan values in its {k}th output."
                                   f"{where()}")
    raise RuntimeError(f"{what}: the gradients hold nan values (anomaly detection){where()}")


def _hooked(g, hooked: list):
    """The gradient `g` of a node output as the hooks of its watched tensors `(tensor, chain)` give it, in turn (a
    view's hooks see and replace its part of it): `g` itself when none changes it."""
    for t, chain in hooked:
        part = _through_chain(g, chain)
        new = part
        for hook in t._ag.hooks:
            r = hook(new)
            if r is not None:
                name = getattr(hook, "__name__", type(hook).__name__)
                if not isinstance(r, Tensor):
                    raise TypeError(f"expected Tensor, but hook '{name}' returned '{type(r).__name__}'{where()}")
                if tuple(r.shape) != tuple(part.shape):
                    raise RuntimeError(f"hook '{name}' has changed the size of value (expected shape "
                                       f"{tuple(part.shape)}, got {tuple(r.shape)}){where()}")
                new = r
        if new is part:
            continue
        if chain:  # NOTE: the view's part of a copy of the output's gradient replaced
            g = g.clone()
            views.apply_chain(_bind, g, chain).copy_(new)
        else:
            g = new
    return g


def _accumulate(t: Tensor, ct, create_graph: bool) -> None:
    """Add `ct` to `t.grad` (in place when it has one and the graph is not being made, as PyTorch)."""
    staging = grad_state.active()
    if isinstance(ct, Tracer) and not isinstance(t, Tracer) and isinstance(getattr(ct, "_trace", None), BodyTrace):
        _accumulate_in_body(t, ct, staging)
        return
    if staging is not None and isinstance(ct, Tracer) and not isinstance(t, Tracer):
        # NOTE: a staged function's backward: the gradient is a traced value, the `.grad` state (see grad_state)
        current = staging.read(t, graph.grad_of(t))
        if current is not None and not isinstance(current, Tracer):
            with grad_mode(False):
                current.add_(ct)  # NOTE: into the eager `.grad`, captured: the program writes it back
        else:
            staging.assign(t, ct if current is None else current + ct)
        return
    meta = graph.meta_of(t)
    if meta.grad is None:
        meta.grad = ct if create_graph else _owned(ct, t)
    elif create_graph:
        meta.grad = meta.grad + ct
    else:
        with grad_mode(False):
            meta.grad.add_(ct)


def _accumulate_in_body(t: Tensor, ct, staging) -> None:
    """`backward()` inside a loop body or a branch called eagerly: `t.grad` is eager state the body adds to in
    place, which the loop carries and writes back (a `.grad` that was None starts as zeros, made eagerly)."""
    if staging is not None:
        raise UnsupportedError(
            f"backward() inside a scan/cond/while body under jit or aot{where()}: the loop cannot carry the "
            f"`.grad` state of the compiled step. Compute the gradient with aotjax.autograd.grad(loss, params) "
            f"inside the body and return or accumulate it as a carry, or call backward() outside the loop.")
    meta = graph.meta_of(t)
    if meta.grad is None:
        meta.grad = Tensor._wrap(jax.numpy.zeros(t.shape, t.dtype))  # NOTE: eager, made outside the body's trace
    graph.gradient_buffers[id(meta.grad._storage)] = meta.grad._storage
    with grad_mode(False):
        meta.grad.add_(ct)


def _owned(ct, t: Tensor):
    """`ct` as `t`'s new `.grad`: a tensor of its own, laid out as `t` (PyTorch's gradient layout contract: a
    parameter's `.grad` has its strides, whatever layout the backward gave the gradient)."""
    if not isinstance(ct, Tensor) or ct._chain:
        ct = ct.clone()
    if ct._strides != t._strides and not t._chain and not isinstance(ct, Tracer):
        ct._strides, ct._offset = t._strides, t._offset  # NOTE: metadata only: a base's value has no layout
    return ct

