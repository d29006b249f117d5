"""`functionalize`: run a function with views and in-place ops as a pure program, with the same
effects on its arguments; and `stage_functionalized`, the same traced into a pure jaxpr plus the
boundary record that replays the effects (what `jit`, `grad` and `aot` build on)."""
from __future__ import annotations

import functools
import inspect
import types
import weakref
from dataclasses import dataclass, field
from typing import Callable, Sequence

import jax

from aotjax.autograd import grad_state, graph
from aotjax.core.avals import get_aval
from aotjax.core.interpreter import _state, full_raise, grad_mode, new_main
from aotjax.core.ir import ClosedJaxpr, JaxprMeta
from aotjax.interpreters.functionalize import FunctionalizeTrace
from aotjax.interpreters.trace import JaxprBuilder, JaxprTrace
from aotjax.ops.base.frontend import constants_made_inside
from aotjax.ops.random.generator import Generator, default_generator
from aotjax.runtime import boundary
from aotjax.runtime.boundary import BoundaryMeta, InputGroup, OutKind, Slot
from aotjax.runtime.guards import call_key
from aotjax.runtime.trace_reads import Guards
from aotjax.tensor import Tensor
from aotjax.transforms.argnums import normalize_argnums
from aotjax.transforms.make_jaxpr import split_static


def functionalize(fun: Callable, static_argnums: int | Sequence[int] = ()) -> Callable:
    """`fun`, run as a pure program: the same outputs, the same mutations of its arguments and the
    same aliasing of outputs with inputs, but nothing below it sees a write.

    Under `make_jaxpr`, the body is pure (a write through a view becomes a scatter into the base
    through the view's inverse); the effects on the arguments follow it, as one `copy_` per written
    argument and the view changes of arguments (`t_`), the form `torch.func.functionalize` gives.
    `jit(fun).lower(*args).jaxpr` is the fully pure program, the write-backs as explicit outputs.

    >>> def f(x):
    ...     x[1:].mul_(2)
    ...     return x.sum()
    >>> x = aotjax.ones(3)
    >>> aotjax.functionalize(f)(x), x
    (tensor(5.), tensor([1., 2., 2.]))
    >>> print(aotjax.make_jaxpr(aotjax.functionalize(f))(aotjax.ones(3)))
    { lambda ; a:f32[3]. let
        b:f32[2] = slice[dim=0 start=1 stop=3 step=1] a
        c:f32[2] = mul b 2.0
        d:f32[3] = slice_scatter[dim=0 start=1 stop=3 step=1] a c
        e:f32[] = reduce_sum[axes=(0,) keepdims=False] d
        f:f32[3] = copy_ a d
      in (e,) }
    """
    static_argnums = normalize_argnums(fun, static_argnums, "functionalize", "static_argnums")

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        dyn, _, merge = split_static(args, static_argnums, kwargs, "functionalize", fun)
        leaves, in_tree = jax.tree_util.tree_flatten((dyn, kwargs))
        n_explicit = len(leaves)
        groups = boundary.group_inputs(leaves)
        bases = boundary.entry_bases(groups, leaves)  # NOTE: read at the caller's level, before the new one
        with new_main(FunctionalizeTrace, dynamic=True) as main:
            inner = boundary.enter(main.trace, groups, bases, leaves)
            # NOTE: inside another transform, a captured tensor is read where it is and its write written back to it
            # after the call, so that the transform outside decides (live state, or the error of make_jaxpr).
            main.trace.capture = functools.partial(capture_live, main.trace, groups, leaves, inner,
                                                   boundary.snapshot if main.level == 1 else as_it_is)
            inner_args, inner_kwargs = jax.tree_util.tree_unflatten(in_tree, inner[:n_explicit])
            out = fun(*merge(inner_args), **inner_kwargs)
            out_leaves, out_tree = jax.tree_util.tree_flatten(out)
            body = boundary.collect(main.trace, groups, inner, out_leaves, out_tree)
        return boundary.apply(body.meta, leaves, body.new_bases, body.bases)

    return wrapped


@dataclass
class Staged:
    """A function traced through functionalize: the pure program (flat: one input per input group,
    outputs in `meta.layout` order) and the boundary record. `leaves` are the traced call's arguments
    until `release` (a cached program keeps only `key`, the call signature it was traced for)."""

    jaxpr: ClosedJaxpr
    meta: BoundaryMeta
    groups: list[InputGroup]
    leaves: list
    key: tuple | None = None
    implicit: list = field(default_factory=list)  # the captured tensors that are implicit inputs, after the others
    # imperative autograd: the `.grad`s the function assigned, `(weak parameter, whether it is an output)` (None
    # otherwise), in the order of the extra outputs (`finish_call`); and the ones it read as they were at entry,
    # `(weak parameter, whether it was None)`: a call where that changed traces again
    grad_effects: list = field(default_factory=list)
    grad_guards: list = field(default_factory=list)
    # `(weak parameter, k)`: implicit input k is the `.grad` of that parameter the trace read (an accumulation reads
    # and writes it): each call passes the parameter's `.grad` of then, which may be another tensor
    grad_inputs: list = field(default_factory=list)
    # the Python values the trace read, and where it found its captured tensors (`aotjax.runtime.trace_reads`): set
    # by a transform that caches the program
    guards: Guards | None = None
    # `(flat argument, storage offset)`: the arguments whose offset the program depends on (it returns an alias of
    # them, whose layout it computed, or changes their view); `call_key` leaves offsets out
    offsets: list = field(default_factory=list)

    def refresh(self) -> str | None:
        """None if the program may run now (its guards hold; a captured tensor rebound where the trace found it is
        the implicit input now), else what changed, in words."""
        return self.guards.check(self.implicit) if self.guards else None

    def call_leaves(self, leaves: list) -> list | None:
        """A call's flat arguments followed by the implicit inputs (their current values are read), or None when
        the program no longer fits them (a captured tensor changed shape or dtype, or the call passes it as an
        argument too, or a `.grad` the function read became or stopped being None): then it is traced again."""
        for ref, was_none in self.grad_guards:
            p = ref()
            if p is not None and (graph.grad_of(p) is None) != was_none:
                return None
        full = leaves
        if self.implicit:
            implicit = self.implicit
            if self.grad_inputs:
                implicit = list(implicit)
                for ref, k in self.grad_inputs:
                    p = ref()
                    if p is not None:
                        implicit[k] = graph.grad_of(p)
            full = [*leaves, *implicit]
            if call_key(full) != self.key:
                return None
        for i, offset in self.offsets:
            if full[i]._offset != offset:
                return None
        return full

    def release(self) -> "Staged":
        """Drop the references to the traced call's arguments; returns self."""
        self.key = call_key(self.leaves)
        meta = self.meta
        aliased = {s.index for s in meta.outputs if s.kind is OutKind.ALIAS} | {g for g, _, _ in meta.metadata}
        self.offsets = [(i, self.leaves[i]._offset) for g in sorted(aliased) for idxs in self.groups[g].leaves
                        for i in idxs if isinstance(self.leaves[i], Tensor)]
        self.leaves = []
        for g in self.groups:
            g.release()
        return self


def stage_functionalized(fun: Callable, args: Sequence, kwargs: dict, static_argnums: Sequence[int] = (),
                         what: str = "jit", live: bool = True) -> Staged:
    """Trace `fun(*args, **kwargs)` through functionalize into a pure ClosedJaxpr (inputs: the input
    groups' bases; outputs: new values, then the new bases of written inputs, then the intermediate
    bases that outputs view) and the BoundaryMeta that maps its results back onto the call: the
    `functionalize` pass of `jit`, `aot` and `checkpoint`."""
    dyn, static, merge = split_static(args, static_argnums, kwargs, what, fun)
    path_leaves, in_tree = jax.tree_util.tree_flatten_with_path((dyn, kwargs))
    leaves = [x for _, x in path_leaves]
    n_explicit = len(leaves)
    groups = boundary.group_inputs(leaves, scalars=True)
    caller_grad = _state.grad_enabled  # NOTE: the function runs in its caller's grad mode (part of the cache key)
    with new_main(JaxprTrace, JaxprBuilder(), dynamic=True) as jmain:
        jtrace = jmain.trace
        base_tracers = [jtrace.builder.new_arg(jtrace, g.base_aval()) for g in groups]

        def new_input(base):
            base_tracers.append(jtrace.builder.new_arg(jtrace, get_aval(base)))
            return base_tracers[-1]

        with new_main(FunctionalizeTrace, dynamic=True) as fmain:
            inner = boundary.enter(fmain.trace, groups, base_tracers, leaves)
            fmain.trace.links_autograd = True
            for t, x in zip(inner, leaves):
                graph.link_lifted(t, x)
            if live:
                fmain.trace.capture = functools.partial(capture_live, fmain.trace, groups, leaves, inner, new_input)
            inner_args, inner_kwargs = jax.tree_util.tree_unflatten(in_tree, inner[:n_explicit])
            with grad_state.staging_grads() as grads, grad_mode(caller_grad):
                out = fun(*merge(inner_args), **inner_kwargs)
            effects = [(weakref.ref(t), v is not None) for t, v in grads.assigned.values()]
            if effects:  # NOTE: `.grad`s the function assigned: extra outputs, assigned by every call
                out = (out, tuple(v for _, v in grads.assigned.values() if v is not None))
            out_paths, out_tree = jax.tree_util.tree_flatten_with_path(out)
            body = boundary.collect(fmain.trace, groups, inner, [o for _, o in out_paths], out_tree)
        meta = body.meta
        meta.layout = _output_layout(meta)
        values = [body.bases[k] if slot is Slot.BASE else body.new_bases[meta.mutated.index(k)]
                  for slot, k in meta.layout]
        out_tracers = [full_raise(jtrace, v) for v in values]
        closed = jtrace.builder.build([t._var for t in base_tracers], out_tracers)
    implicit = leaves[n_explicit:]
    meta.input_names = _input_names(fun, path_leaves, len(args), static) + _captured_names(fun, implicit)
    meta.output_names = ["out" + jax.tree_util.keystr(p) for p, _ in out_paths]
    closed.meta = JaxprMeta(name=getattr(fun, "__name__", "fn"))
    staged = Staged(closed, meta, groups, leaves, implicit=implicit)
    staged.grad_effects = effects
    staged.grad_guards = list(grads.consulted.values())
    staged.grad_inputs = [(grads.consulted[key][0], k) for key, value in grads.read_values.items()
                          for k, x in enumerate(implicit) if x is value]
    return staged


def finish_call(staged: Staged, out):
    """The output of a call of `staged` as its function returned it, after assigning the `.grad`s the function
    assigned (its extra outputs, `grad_effects`)."""
    if not staged.grad_effects:
        return out
    out, values = out
    values = iter(values)
    for ref, is_output in staged.grad_effects:
        p = ref()
        value = next(values) if is_output else None
        if value is not None and value._ag is not None:  # NOTE: an eager call the recording saw (checkpoint's):
            value = value.detach()  # a `.grad` records nothing
        if p is not None and p._ag is not None:
            graph.meta_of(p).grad = value
    return out


def as_it_is(base):
    """A captured tensor's base as it is (read where it lives; a transform outside captures it in turn)."""
    return base


def capture_live(trace, groups, leaves, inner, new_input, val):
    """`FunctionalizeTrace.capture` at a staging boundary: a captured eager tensor becomes an implicit input of the
    program (`boundary.capture`), unless it is a constant `aotjax.tensor(...)` made inside the function."""
    if val._storage in constants_made_inside:
        return None
    return boundary.capture(trace, groups, leaves, inner, val, new_input)


def _captured_names(fun: Callable, implicit: list) -> list[str]:
    """`captured[w]` for each implicit input: the name the function reads it by (a closure variable, a global, an
    attribute of `self` or a leaf of a module or other pytree it reads, as `captured[model.bn.running_mean]`; a random
    generator's key as `captured[default_generator]`), else its position (`captured[0]`)."""
    names = []
    for k, base in enumerate(implicit):
        names.append(f"captured[{_name_in(fun, base) or k}]")
    return names


def _name_in(fun: Callable, x) -> str | None:
    """The name of `x` (or of a tensor sharing its storage) as `fun` reaches it, if any (see `_captured_names`)."""
    key = id(x._storage)
    if id(default_generator.state._storage) == key:
        return "default_generator"
    for name, value in _names_read_by(fun):
        found = _path_to(value, key)
        if found is not None:
            return name + found
    return None


def _names_read_by(fun: Callable):
    """`(name, value)` for what `fun` reads by name: its `self` (a bound method), closure variables, globals."""
    self = getattr(fun, "__self__", None)
    if self is not None:
        yield "self", self
    fun = inspect.unwrap(getattr(fun, "__func__", fun))
    code = getattr(fun, "__code__", None)
    if code is None:
        return
    for name, cell in zip(code.co_freevars, fun.__closure__ or ()):
        try:
            yield name, cell.cell_contents
        except ValueError:  # NOTE: an empty cell (a variable assigned later)
            continue
    for name in code.co_names:
        if name in fun.__globals__:
            yield name, fun.__globals__[name]


def _path_to(value, key: int, depth: int = 3) -> str | None:
    """The path (`''`, `.bn.running_mean`, `['w']`) from `value` to a Tensor whose storage is `key`, or to a
    generator's `.state`; None if `value` holds none within `depth` objects. Modules, optimizers and containers are
    searched as pytrees, other objects by their attributes."""
    if isinstance(value, Tensor):
        return "" if id(value._storage) == key else None
    if isinstance(value, Generator):
        return ".state" if id(value.state._storage) == key else None
    if depth == 0 or isinstance(value, (type, types.ModuleType)) or inspect.isroutine(value):
        return None
    try:
        paths = jax.tree_util.tree_flatten_with_path(value, is_leaf=lambda v: v is not value and isinstance(
            v, (Tensor, Generator)))[0]
    except Exception:  # NOTE: a pytree whose flattening fails is no place to name a tensor by
        return None
    if len(paths) == 1 and paths[0][1] is value:  # NOTE: not a pytree: look through its attributes
        attrs = getattr(value, "__dict__", None)
        paths = [((jax.tree_util.GetAttrKey(k),), v) for k, v in attrs.items()] if isinstance(attrs, dict) else []
    for path, leaf in paths:
        found = _path_to(leaf, key, depth - 1)
        if found is not None:
            return jax.tree_util.keystr(path) + found
    return None


def _output_layout(meta: BoundaryMeta) -> list[tuple[Slot, int]]:
    """New values first (in output order), then written inputs' new bases, then the other bases."""
    fresh = []
    for spec in meta.outputs:
        if spec.kind is OutKind.BASE and not spec.chain and spec.index not in fresh:
            fresh.append(spec.index)
    rest = [k for k in range(meta.n_bases) if k not in fresh]
    return ([(Slot.BASE, k) for k in fresh] + [(Slot.MUTATED, g) for g in meta.mutated]
            + [(Slot.BASE, k) for k in rest])


def _input_names(fun: Callable, path_leaves, n_args: int, static: Sequence[int]) -> list[str]:
    """`x`, `params['w']`, ... for each flat argument: the parameter name and the pytree path."""
    try:
        params = [p.name for p in inspect.signature(fun).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    dynamic_positions = [i for i in range(n_args) if i not in static]
    names = []
    for path, _ in path_leaves:
        if path[0].idx == 0:  # positional
            pos = dynamic_positions[path[1].idx]
            head = params[pos] if pos < len(params) else f"args[{pos}]"
            names.append(head + jax.tree_util.keystr(path[2:]))
        else:
            names.append(str(path[1].key) + jax.tree_util.keystr(path[2:]))
    return names
