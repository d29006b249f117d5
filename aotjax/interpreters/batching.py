"""The batching interpreter: `vmap`'s engine, in autodidax's shape.

A `BatchTracer` carries a value of the level below and its batch axis `bdim`: the axis of the value that
runs over the examples, or `not_mapped` when the value is the same for every example. The tracer's own
shape is the per-example shape (the value's shape without the batch axis), so the traced function sees
one example. For each primitive bound at its level, `BatchTrace` looks up the primitive's rule in
`batching_rules` and binds, one level down, whatever the rule computes: rules are traceable, so `vmap`
nests (`vmap(vmap(f))`) and composes with the other transforms.

A rule is `rule(axis_size, vals, bdims, **params) -> (outs, out_dims)`: the operands' values and batch axes
in, the results' values and batch axes out (one per result). Rules keep the batch axis where it is when
they can: an elementwise op on operands batched at one axis computes at that axis, no `moveaxis` first.

Only pure primitives have rules: `vmap` functionalizes at its boundary (as `grad` does), so a mutation
reaching this interpreter is an error. The rules live beside each primitive, most of them made by the
combinators below (`defvectorized`, `defbroadcasting`, `defreducer`).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence

from aotjax.core.avals import PYTHON_SCALARS, ShapedArray, get_aval, scalar_literal
from aotjax.core.errors import UnsupportedError
from aotjax.core.eval_jaxpr import eval_jaxpr
from aotjax.core.interpreter import Trace, Tracer, full_raise, new_main, rules_of, stack_of_this_thread
from aotjax.core.primitive import Kind, Primitive
from aotjax.core.source_info import where
from aotjax.interpreters import hooks
from aotjax.interpreters.trace import trace_flat
from aotjax.tensor import Tensor

__all__ = ["not_mapped", "BatchRule", "batching_rules", "collective_rules", "BatchAxis", "BatchTracer", "BatchTrace",
           "batch_flat", "batch_flat_dims", "batch_jaxpr", "current_axis", "find_axis", "example_index",
           "vmap_running", "at_front", "front_dims", "batched_aval",
           "moveaxis", "matchaxis", "broadcast", "bdim_at_front", "defvectorized",
           "defbroadcasting", "defreducer", "defaxis", "shift_axis", "aligned"]

not_mapped = None  # the batch axis of a value that is the same for every example


class BatchRule(Protocol):
    """`rule(axis_size, vals, dims, **params) -> (outs, out_dims)`, both lists (one entry per result).

    `vals` are the operands (values of the level below: tensors, or NumPy scalars); `bdims` has one entry per
    operand, its batch axis (an int) or `not_mapped`. At least one operand is batched (the interpreter binds
    a primitive with no batched operand as it is). A rule computes only with `prim.bind` and the utilities
    below, so what it computes is traced by the interpreters below it.
    """

    def __call__(self, axis_size: int, vals: Sequence[Any], bdims: Sequence[int | None],
                 **params: Any) -> tuple[list, list]: ...


batching_rules: dict[Primitive, BatchRule] = {}

# NOTE: a collective (`psum` over a named axis) is processed by every batching level, batched operands or not: the
# level whose axis it names reduces over its batch axis, the others batch it like any op. Its rule takes the trace.
collective_rules: dict[Primitive, Callable[..., tuple[list, list]]] = {}


@dataclass(frozen=True)
class BatchAxis:
    """What one `vmap` maps over: the number of examples, the axis's name (for collectives), if it has one, and how
    draws from a stateful generator behave inside (`randomness`: "error", "same" or "different")."""

    size: int
    name: Any = None
    randomness: str = "error"


class _RuleAxes(threading.local):
    """The axes whose rules are running in this thread, innermost last (`current_axis`)."""

    def __init__(self):
        self.stack: list[BatchAxis] = []


_rule_axes = _RuleAxes()


def current_axis() -> BatchAxis:
    """The axis of the batching level whose rule is running: what a rule batching a sub-program (a loop body, a
    branch, a compiled call) passes to `batch_jaxpr`, so that collectives inside see the axis's name."""
    if not _rule_axes.stack:
        raise RuntimeError("current_axis() is only meaningful inside a batching rule")
    return _rule_axes.stack[-1]


def find_axis(name, what: str):
    """The `MainTrace` of the innermost active `vmap` whose axis is named `name`; an error naming `what` if none."""
    for main in reversed(stack_of_this_thread()):
        if main.trace_type is BatchTrace and main.global_data.name == name:
            return main
    raise NameError(f"{what}: unbound axis name {name!r}: no enclosing vmap has axis_name={name!r}{where()}; pass "
                    f"axis_name={name!r} to the vmap whose examples {what} combines")


def vmap_running() -> bool:
    """Whether a `vmap` is running in this thread (a batching level is on the interpreter stack)."""
    return any(main.trace_type is BatchTrace for main in stack_of_this_thread())


class BatchTracer(Tracer, Tensor):
    __slots__ = ("_trace", "val", "bdim")

    def __init__(self, trace: "BatchTrace", val, bdim: int | None):
        self._trace = trace
        self.val = val
        self.bdim = bdim
        aval = get_aval(val)
        if bdim is not not_mapped:
            aval = ShapedArray(aval.shape[:bdim] + aval.shape[bdim + 1:], aval.dtype)
        # NOTE: no recorded layout: the per-example strides of a batched value are not tracked in this part.
        self._init_slots(aval)


class BatchTrace(Trace):
    @property
    def axis(self) -> BatchAxis:
        return self.main.global_data

    @property
    def axis_size(self) -> int:
        return self.main.global_data.size

    def pure(self, val):
        if isinstance(val, PYTHON_SCALARS):
            val = scalar_literal(val)
        return BatchTracer(self, val, not_mapped)

    lift = pure

    def process_primitive(self, prim, tracers, params):
        if prim.kind is Kind.MUTATION:
            raise UnsupportedError(
                f"vmap: the in-place primitive '{prim.name}' reached the batching interpreter{where()}. vmap "
                f"needs a pure program: it functionalizes its function at its boundary; use the out-of-place op "
                f"instead of '{prim.name}' inside a transform that does not.")
        vals = [t.val for t in tracers]
        dims = [t.bdim for t in tracers]
        with rules_of(self.main), _running(self.axis):
            if prim in collective_rules:
                outs, out_dims = collective_rules[prim](self, vals, dims, **params)
                return [BatchTracer(self, o, d) for o, d in zip(outs, out_dims, strict=True)]
            if all(d is not_mapped for d in dims):
                out = prim.bind(*vals, **params)
                outs = out if prim.multiple_results else [out]
                return [BatchTracer(self, o, not_mapped) for o in outs]
            rule = batching_rules.get(prim)
            if rule is None:
                raise NotImplementedError(
                    f"batching rule for primitive '{prim.name}' is not implemented: vmap cannot batch it yet"
                    f"{where()}")
            outs, out_dims = rule(self.axis_size, vals, dims, **params)
        return [BatchTracer(self, o, d) for o, d in zip(outs, out_dims, strict=True)]


def example_index(main) -> "BatchTracer":
    """The index of each example of the vmap whose interpreter is `main`: an int32 0-d tensor per example."""
    with rules_of(main):
        index = hooks.arange(main.global_data.size)
    return BatchTracer(main.trace, index, 0)


class _running:
    """While a rule of `axis` runs (`current_axis`)."""

    def __init__(self, axis: BatchAxis):
        self.axis = axis

    def __enter__(self):
        _rule_axes.stack.append(self.axis)

    def __exit__(self, *exc):
        _rule_axes.stack.pop()


def _axis_of(axis: int | BatchAxis) -> BatchAxis:
    return axis if isinstance(axis, BatchAxis) else BatchAxis(axis)


def batch_flat_dims(fun: Callable[..., list], vals: list, in_dims: Sequence[int | None],
                    axis: int | BatchAxis) -> tuple[list, list]:
    """`fun` (flat tensors in, a flat list of tensors out) applied to each example of `vals` (batched at
    `in_dims`; `axis` is the batch size, or a `BatchAxis` naming it): `(outs, out_dims)`, each output with the
    batch axis its rules left it at (or `not_mapped`)."""
    with new_main(BatchTrace, global_data=_axis_of(axis)) as main:
        trace = main.trace
        in_tracers = [BatchTracer(trace, v, d) for v, d in zip(vals, in_dims, strict=True)]
        outs = [full_raise(trace, o) for o in fun(*in_tracers)]
        return [o.val for o in outs], [o.bdim for o in outs]


def batch_flat(fun: Callable[..., list], vals: list, in_dims: Sequence[int | None], axis: int | BatchAxis,
               out_dims: Sequence[int | None]) -> list:
    """`fun` applied to each example of `vals` (batched at `in_dims`), its outputs stacked at `out_dims`
    (non-negative axes; `not_mapped` for an output that must be the same for every example)."""
    axis_size = _axis_of(axis).size
    outs, dims = batch_flat_dims(fun, vals, in_dims, axis)
    result = []
    for i, (o, d, want) in enumerate(zip(outs, dims, out_dims, strict=True)):
        if want is not_mapped and d is not not_mapped:
            raise ValueError(f"vmap: output {i} varies over the examples but its out axis is None{where()}; give it "
                             f"an axis to stack the examples at")
        result.append(o if want is not_mapped else matchaxis(d, want, axis_size, o))
    return result


def batch_jaxpr(jaxpr, axis: int | BatchAxis, in_batched: Sequence[bool],
                instantiate: bool | Sequence[bool] = False):
    """The batched version of pure program `jaxpr` (a `ClosedJaxpr`): `(batched_jaxpr, out_batched)`. Its inputs
    marked `in_batched` take a leading batch axis of `axis`'s size (the others are the same for every example);
    its outputs marked in `out_batched` have one, those that vary over the examples or that `instantiate` asks
    for (one flag, or one per output). What loops, branches and calls build their batching rules from: their
    batch axes are always at 0 inside, so a carry or branch output agrees across iterations and branches."""
    axis = _axis_of(axis)
    m = len(jaxpr.out_avals)
    inst = [instantiate] * m if isinstance(instantiate, bool) else list(instantiate)
    out_batched: list[bool] = []

    def fun(*args):
        outs, dims = batch_flat_dims(lambda *xs: eval_jaxpr(jaxpr, *xs), list(args), front_dims(in_batched), axis)
        out_batched[:] = [d is not not_mapped or i for d, i in zip(dims, inst, strict=True)]
        return [matchaxis(d, 0, axis.size, o) if b else o for o, d, b in zip(outs, dims, out_batched)]

    avals = [batched_aval(a, axis.size, b) for a, b in zip(jaxpr.in_avals, in_batched, strict=True)]
    return trace_flat(fun, avals), list(out_batched)


def at_front(vals: Sequence, bdims: Sequence) -> tuple[list, tuple[bool, ...]]:
    """The operands with their batch axes at 0 (where a sub-program's batched inputs take them: `batch_jaxpr`), and
    which are batched."""
    return ([v if d is not_mapped else moveaxis(v, d, 0) for v, d in zip(vals, bdims)],
            tuple(d is not not_mapped for d in bdims))


def front_dims(batched: Sequence[bool]) -> list:
    """The batch axes of values batched at 0 where `batched` (a batched sub-program's outputs)."""
    return [0 if b else not_mapped for b in batched]


def batched_aval(aval: ShapedArray, size: int, batched: bool = True) -> ShapedArray:
    """`aval` with a leading batch axis of `size` (where `batched`)."""
    return ShapedArray((size, *aval.shape), aval.dtype) if batched else aval


# -- utilities (they bind, so they work at any level) ----------------------------------------------
def _ndim(x) -> int:
    return len(get_aval(x).shape)


def moveaxis(x, src: int, dst: int):
    """`x` with its axis `src` moved to `dst` (a `permute`; `x` itself when they are the same axis)."""
    n = _ndim(x)
    src, dst = src % n, dst % n
    if src == dst:
        return x
    perm = [i for i in range(n) if i != src]
    perm.insert(dst, src)
    return hooks.permute(x, tuple(perm))


def broadcast(x, size: int, axis: int):
    """`x` with a new axis of `size` at `axis` (the same value for every example: a view, no copy)."""
    shape = tuple(get_aval(x).shape)
    unsqueezed = shape[:axis] + (1,) + shape[axis:]
    x = hooks.reshape(hooks.as_tensor(x), unsqueezed)
    return hooks.expand(x, unsqueezed[:axis] + (size,) + unsqueezed[axis + 1:])


def matchaxis(src: int | None, dst: int, size: int, x):
    """`x`, batched at `src` (or `not_mapped`), batched at `dst` instead."""
    if src is not_mapped:
        return broadcast(x, size, dst)
    return moveaxis(x, src, dst)


def bdim_at_front(x, bdim: int | None, size: int):
    """`x` batched at axis 0 (broadcast there if it is not batched)."""
    return matchaxis(bdim, 0, size, x)


def _insert_ones(x, at: int, count: int):
    """`x` with `count` axes of size 1 inserted at `at`."""
    if count <= 0:
        return x
    shape = tuple(get_aval(x).shape)
    return hooks.reshape(hooks.as_tensor(x), shape[:at] + (1,) * count + shape[at:])


def shift_axis(axis: int, bdim: int) -> int:
    """Where logical axis `axis` of an example is in a value batched at `bdim`."""
    return axis + 1 if axis >= bdim else axis


# -- combinators -------------------------------------------------------------------------------------------------
def defvectorized(prim: Primitive) -> None:
    """The rule of a unary elementwise `prim`: the batch axis passes through."""
    def rule(axis_size, vals, bdims, **params):
        return [prim.bind(vals[0], **params)], [bdims[0]]
    batching_rules[prim] = rule


def _broadcasting_rule(prim: Primitive):
    def rule(axis_size, vals, bdims, **params):
        ranks = [_ndim(v) - (d is not not_mapped) for v, d in zip(vals, bdims)]
        out_rank = max(ranks)
        # NOTE: positions are counted in the batched output (rank `out_rank + 1`), operands aligned at their
        # last axis as broadcasting aligns them; the first batched operand's batch axis decides where the
        # output's is, and the others are moved there (a no-op when they are batched alike).
        first = next(i for i, d in enumerate(bdims) if d is not not_mapped)
        target = bdims[first] + out_rank - ranks[first]
        operands = [aligned(v, d, r, out_rank, target) for v, d, r in zip(vals, bdims, ranks)]
        return [prim.bind(*operands, **params)], [target]
    return rule


def aligned(x, bdim: int | None, rank: int, out_rank: int, target: int):
    """Operand `x` (an example's rank `rank`, batched at `bdim` or `not_mapped`) made to broadcast, right-aligned,
    against a value of an example's rank `out_rank` batched at `target`: its batch axis moved there, 1s added."""
    if bdim is not_mapped:
        # NOTE: an unbatched operand whose dims start before the batch axis gets a size-1 axis there.
        first = out_rank - rank  # the output's (an example's) dim that its first dim broadcasts with
        return _insert_ones(x, target - first, 1) if first < target else x
    want = target - (out_rank - rank)
    if want < 0:
        x, bdim, want = _insert_ones(x, 0, -want), bdim - want, 0
    return moveaxis(x, bdim, want)


def defbroadcasting(prim: Primitive) -> None:
    """The rule of an n-ary elementwise `prim` with PyTorch broadcasting (operands of any ranks)."""
    batching_rules[prim] = _broadcasting_rule(prim)


def defreducer(prim: Primitive) -> None:
    """The rule of a reduction `prim` with params `axes` (sorted non-negative axes of an example) and `keepdims`:
    the axes are shifted past the batch axis, which stays where it is (moved left by the axes dropped before it)."""
    def rule(axis_size, vals, bdims, *, axes, keepdims, **params):
        (x,), (d,) = vals, bdims
        shifted = tuple(shift_axis(a, d) for a in axes)
        out = prim.bind(x, axes=shifted, keepdims=keepdims, **params)
        return [out], [d if keepdims else d - sum(a < d for a in shifted)]
    batching_rules[prim] = rule


def defaxis(prim: Primitive, param: str = "axis") -> None:
    """The rule of a unary `prim` acting along one axis of an example (`cumsum`), its result of the operand's rank:
    the axis is shifted past the batch axis, which stays where it is."""
    def rule(axis_size, vals, bdims, **params):
        (x,), (d,) = vals, bdims
        params = {**params, param: shift_axis(params[param], d)}
        return [prim.bind(x, **params)], [d]
    batching_rules[prim] = rule
