"""`custom_jvp` and `custom_vjp`: functions whose derivatives the user defines, as in JAX.

Called eagerly, a decorated function simply runs. Called under a transform (`grad`, `jvp`, `vjp`,
`jit`, `make_jaxpr`, ...), it is traced once per call into a pure jaxpr and bound as one
`custom_jvp_call` / `custom_vjp_call` primitive (`aotjax.ops.calls.custom_derivatives`), so every transform
sees it as a single equation; only the derivative interpreters use the rules. The function may write
into tensors it creates, but not into its arguments (its derivative would then be ill-defined).

The rules are called on the transforms' tracers, functionalized (they may use in-place ops on what
they create), and must not read traced tensors from their enclosing scope: pass those as arguments.
"""
from __future__ import annotations

import collections
import functools
import inspect
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import jax
import numpy as np

from aotjax.autograd import graph
from aotjax.core.avals import PYTHON_SCALARS as _SCALARS
from aotjax.core.avals import ShapedArray, get_aval
from aotjax.core.errors import AliasingError, ShapeError
from aotjax.core.interpreter import Tracer, below, find_top_trace, full_raise, new_main
from aotjax.core.ir import ClosedJaxpr, Jaxpr, JaxprMeta, Literal
from aotjax.core.primitive import Kind
from aotjax.core.source_info import where
from aotjax.core.typecheck import typecheck, typecheck_enabled
from aotjax.interpreters.ad_util import Zero, is_differentiable
from aotjax.interpreters.functionalize import FunctionalizeTrace, FunctionalTensor, current_value
from aotjax.interpreters.trace import JaxprBuilder, JaxprTrace
from aotjax.ops.base.data import as_tensor
from aotjax.ops.calls.custom_derivatives import custom_jvp_call_p, custom_vjp_call_p
from aotjax.tensor import Tensor
from aotjax.transforms.make_jaxpr import input_aval

__all__ = ["custom_jvp", "custom_vjp"]


# -- the call: arguments, tracing, binding ----------------------------------------------------------
def _resolve_args(fun: Callable, args: tuple, kwargs: dict, what: str) -> tuple:
    """Keyword arguments moved to their positions (the rules take positional arguments only)."""
    if not kwargs:
        return args
    try:
        bound = inspect.signature(fun).bind(*args, **kwargs)
    except TypeError as e:
        raise TypeError(f"{what}: {e}") from None
    bound.apply_defaults()
    if bound.kwargs:
        raise TypeError(f"{what}: keyword-only arguments {sorted(bound.kwargs)} cannot be given positions; "
                        f"make them positional parameters")
    return bound.args


def _split_nondiff(args: tuple, nondiff_argnums: tuple[int, ...], what: str):
    nondiff = []
    for i in nondiff_argnums:
        if i >= len(args):
            raise TypeError(f"{what}: nondiff_argnums has {i}, but the function got {len(args)} arguments")
        v = args[i]
        if any(isinstance(x, (Tensor, np.ndarray, jax.Array)) for x in jax.tree_util.tree_leaves(v)):
            raise TypeError(f"{what}: argument {i} is in nondiff_argnums but holds a tensor; nondiff_argnums are "
                            f"for Python values (functions, numbers, strings). Pass tensors as ordinary arguments "
                            f"(their tangents may be zero).")
        try:
            hash(v)
        except TypeError:
            raise TypeError(f"{what}: argument {i} is in nondiff_argnums, so it must be hashable, got "
                            f"{type(v).__name__}; use a tuple instead of a list") from None
        nondiff.append((i, v))
    diff = tuple(a for i, a in enumerate(args) if i not in nondiff_argnums)
    return tuple(nondiff), diff


def _merge(nondiff: tuple, diff: Sequence) -> list:
    """The full positional arguments from the nondiff `(index, value)` pairs and the other arguments."""
    out, it = [], iter(diff)
    positions = dict(nondiff)
    for i in range(len(nondiff) + len(diff)):
        out.append(positions[i] if i in positions else next(it))
    return out


def _as_leaf(x, what: str):
    if isinstance(x, Tensor):
        return x
    if isinstance(x, _SCALARS) or hasattr(x, "shape"):
        return as_tensor(x)
    raise TypeError(f"{what}: an argument leaf of type {type(x).__name__} is not a tensor, an array or a "
                    f"scalar; pass Python values with nondiff_argnums")


class _PureBodyTrace(FunctionalizeTrace):
    """Functionalize, with writes into the function's arguments forbidden (`global_data` names the
    function, for the error)."""

    def process_primitive(self, prim, tracers, params):
        if prim.kind is Kind.MUTATION:
            for i in prim.mutates:
                t = tracers[i]
                if isinstance(t, FunctionalTensor) and t._storage.origin is _ARGUMENT:
                    raise AliasingError(
                        f"{prim.name}: {self.main.global_data} writes into its argument in place{where()}; a "
                        f"function with a custom derivative and its rules must not mutate their inputs. Compute a "
                        f"new tensor instead (`x = x * 2` rather than `x.mul_(2)`), or clone the argument first.")
        return super().process_primitive(prim, tracers, params)


_ARGUMENT = object()  # the origin of the storages of a pure body's arguments


@contextmanager
def _pure_body(who: str):
    """Run a body functionalized: yields `(enter, leave)`; `enter(x)` makes an argument leaf a tracer
    of the body, `leave(y)` turns an output leaf into a value of the levels below."""
    with new_main(_PureBodyTrace, who, dynamic=True) as main:
        trace = main.trace

        def enter(x):
            if not isinstance(x, Tensor):
                return x
            return trace.new_tensor(x, origin=_ARGUMENT, strides=x._strides, offset=x._offset)

        def leave(y):
            if not (isinstance(y, FunctionalTensor) and y._trace is trace):
                return y
            with below(main):  # NOTE: a view's value is read by the levels below, not staged at the body's own
                return current_value(y)

        yield enter, leave


def _run_pure(fn: Callable, args: tuple, who: str):
    """`fn(*args)`, functionalized: it may write into tensors it creates, not into `args`."""
    leaves, tree = jax.tree_util.tree_flatten(args)
    with _pure_body(who) as (enter, leave):
        out = fn(*jax.tree_util.tree_unflatten(tree, [enter(x) for x in leaves]))
        out_leaves, out_tree = jax.tree_util.tree_flatten(out)
        # NOTE: read the outputs' values while the body's level is still there
        values = [leave(y) for y in out_leaves]
    return jax.tree_util.tree_unflatten(out_tree, values)


def _trace_pure(fun: Callable, nondiff: tuple, leaves: list, in_tree, who: str, name: str):
    """`fun` traced into a pure jaxpr whose first inputs are the values it reads from its enclosing scope
    (returned as `consts`), then its flat arguments; and its output structure."""
    with new_main(JaxprTrace, JaxprBuilder(), dynamic=True) as jmain:
        jtrace = jmain.trace
        in_tracers = [jtrace.builder.new_arg(jtrace, *input_aval(x)) for x in leaves]
        with _pure_body(who) as (enter, leave):
            args = jax.tree_util.tree_unflatten(in_tree, [enter(t) for t in in_tracers])
            out = fun(*_merge(nondiff, args))
            out_leaves, out_tree = jax.tree_util.tree_flatten(out)
            values = [leave(y) for y in out_leaves]
        closed = jtrace.builder.build([t._var for t in in_tracers], [full_raise(jtrace, v) for v in values])
    jaxpr = closed.jaxpr
    hoisted = Jaxpr([], jaxpr.constvars + jaxpr.invars, jaxpr.eqns, jaxpr.outvars)
    call = ClosedJaxpr(hoisted, [], meta=JaxprMeta(name=name))
    if typecheck_enabled():
        typecheck(call)
    return _intern(call), closed.consts, out_tree


# NOTE: a call is traced anew each time (its closure may have changed), giving a new jaxpr; equal jaxprs
# are shared so that params stay equal across calls and the eager evaluator's compile cache hits.
_interned: collections.OrderedDict = collections.OrderedDict()
_INTERN_SIZE = 512
_intern_lock = threading.Lock()  # NOTE: threads: a lookup, its move to the end and an eviction are one step


def _intern(call: ClosedJaxpr) -> ClosedJaxpr:
    try:
        key = _jaxpr_key(call.jaxpr)
    except TypeError:  # an unhashable param: keep this jaxpr to itself
        return call
    with _intern_lock:
        found = _interned.get(key)
        if found is not None:
            _interned.move_to_end(key)
            return found
        _interned[key] = call
        if len(_interned) > _INTERN_SIZE:
            _interned.popitem(last=False)
    return call


def _jaxpr_key(jaxpr: Jaxpr) -> tuple:
    """A hashable key equal for jaxprs that compute the same thing the same way (source lines aside)."""
    numbers: dict = {}

    def atom(a):
        if isinstance(a, Literal):
            v = np.asarray(a.val)
            return ("lit", v.dtype.str, v.tobytes())  # NOTE: bytes, so 0.0 and -0.0 differ
        return numbers.setdefault(a, len(numbers))

    ins = tuple((atom(v), v.aval) for v in jaxpr.invars)
    eqns = tuple((e.primitive, tuple(map(atom, e.inputs)), tuple((atom(v), v.aval) for v in e.outputs),
                  tuple(e.params.items())) for e in jaxpr.eqns)
    key = (ins, eqns, tuple(map(atom, jaxpr.outvars)))
    hash(key)
    return key


def _call(custom, kind: str, prim, args: tuple, kwargs: dict, make_rule: Callable):
    """Run `custom` on `args`: eagerly, the function itself; under a transform, one `prim` equation."""
    name = custom.__name__
    what = f"{kind} function '{name}'"
    if custom._rules_missing():
        raise TypeError(f"{what} is called, but its derivative rule is not defined: call "
                        f"`{name}.{'defjvp' if kind == 'custom_jvp' else 'defvjp'}(...)` first")
    all_leaves = jax.tree_util.tree_leaves((args, kwargs))
    if find_top_trace([x for x in all_leaves if isinstance(x, Tracer)]).main.level == 0 and not graph.records(
            all_leaves):
        return custom.fun(*args, **kwargs)  # NOTE: eager, nothing recorded to differentiate: just run it
    args = _resolve_args(custom.fun, args, kwargs, what)
    nondiff, diff = _split_nondiff(args, custom.nondiff_argnums, what)
    leaves, in_tree = jax.tree_util.tree_flatten(diff)
    leaves = [_as_leaf(x, what) for x in leaves]
    call, consts, out_tree = _trace_pure(custom.fun, nondiff, leaves, in_tree, f"the {what}", name)
    rule = make_rule(_Structure(custom, nondiff, in_tree, out_tree))
    outs = prim.bind(*consts, *leaves, call=call, num_consts=len(consts), name=name, **rule)
    return jax.tree_util.tree_unflatten(out_tree, outs)


@dataclass(frozen=True)
class _Structure:
    """What the rules of one call need besides values: the decorated function, its nondiff arguments
    (`(index, value)` pairs) and the pytree structures of its other arguments and of its output.
    Compared by value, so that equal calls give equal params."""

    custom: Any
    nondiff: tuple
    in_tree: Any
    out_tree: Any

    def args(self, flat: Sequence) -> tuple:
        return tuple(jax.tree_util.tree_unflatten(self.in_tree, list(flat)))

    def flat_out(self, out, what: str) -> list:
        leaves, tree = jax.tree_util.tree_flatten(out)
        if tree != self.out_tree:
            raise TypeError(f"{self.custom._kind} rule of '{self.custom.__name__}': {what} has structure {tree}, "
                            f"but the function's output has {self.out_tree}{where()}")
        return leaves

    @property
    def nondiff_values(self) -> list:
        return [v for _, v in self.nondiff]


def _pair(out, kind: str, name: str, what: str) -> tuple:
    if not (isinstance(out, (tuple, list)) and len(out) == 2):
        raise TypeError(f"{kind} rule of '{name}': {what} must return a pair, got {type(out).__name__}{where()}")
    return tuple(out)


# -- custom_jvp --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _JvpRule:
    """The user's jvp rule on flat lists (`aotjax.ops.calls.custom_derivatives.CustomJvpRule`)."""

    s: _Structure

    def __call__(self, primals: list, tangents: list) -> tuple[list, list]:
        c = self.s.custom
        rule = functools.partial(c.jvp, *self.s.nondiff_values)
        out = _run_pure(rule, (self.s.args(primals), self.s.args(tangents)), f"the jvp rule of '{c.__name__}'")
        primal_out, tangent_out = _pair(out, "custom_jvp", c.__name__, "the jvp rule")
        return self.s.flat_out(primal_out, "the primal output"), self.s.flat_out(tangent_out, "the tangent output")

    def __str__(self) -> str:
        return getattr(self.s.custom.jvp, "__name__", "jvp")


class custom_jvp:
    """`fun` with a forward-mode derivative rule of your own (JAX's `jax.custom_jvp`); reverse mode
    (`grad`, `vjp`) transposes the rule, so the rule must be linear in the tangents.

    Define the rule with `f.defjvp(rule)`, where `rule(primals, tangents) -> (primal_out, tangent_out)`:
    `primals` and `tangents` are tuples with one entry per argument (pytrees of tensors; integer
    arguments get zero tangents) and the outputs have `fun`'s output structure. Arguments listed in
    `nondiff_argnums` (Python values: functions, numbers) are not differentiated and are passed to the
    rule first: `rule(*nondiff, primals, tangents)`. `fun` must not write into its arguments.

    >>> @aotjax.custom_jvp
    ... def log1pexp(x):
    ...     return aotjax.log(1.0 + aotjax.exp(x))
    >>> @log1pexp.defjvp
    ... def log1pexp_jvp(primals, tangents):
    ...     (x,), (t,) = primals, tangents
    ...     return log1pexp(x), t * aotjax.sigmoid(x)      # stable where exp(x) overflows
    >>> aotjax.grad(lambda x: log1pexp(x).sum())(aotjax.tensor([0.0, 100.0]))
    tensor([0.5, 1. ])
    """

    _kind = "custom_jvp"

    def __init__(self, fun: Callable, nondiff_argnums: int | Sequence[int] = ()):
        functools.update_wrapper(self, fun, updated=())
        self.fun = fun
        self.nondiff_argnums = _argnums(nondiff_argnums)
        self.jvp: Callable | None = None

    def defjvp(self, jvp: Callable) -> Callable:
        """Set the jvp rule (usable as a decorator); returns it."""
        self.jvp = jvp
        return jvp

    def _rules_missing(self) -> bool:
        return self.jvp is None

    def __call__(self, *args, **kwargs):
        return _call(self, "custom_jvp", custom_jvp_call_p, args, kwargs, lambda s: {"jvp": _JvpRule(s)})


# -- custom_vjp --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _FwdRule:
    """The user's `fwd` on flat lists (`aotjax.ops.calls.custom_derivatives.CustomFwdRule`)."""

    s: _Structure

    def __call__(self, primals: list):
        c = self.s.custom
        nondiff = self.s.nondiff
        out = _run_pure(lambda *a: c.fwd(*_merge(nondiff, a)), self.s.args(primals), f"the fwd of '{c.__name__}'")
        primal_out, res = _pair(out, "custom_vjp", c.__name__, "fwd")
        res_leaves, res_tree = jax.tree_util.tree_flatten(res)
        for x in res_leaves:
            if not isinstance(x, (Tensor, *_SCALARS)) and not hasattr(x, "shape"):
                raise TypeError(f"custom_vjp rule of '{c.__name__}': fwd returned a residual of type "
                                f"{type(x).__name__}; residuals must be tensors, arrays or scalars (keep Python "
                                f"values in nondiff_argnums){where()}")
        bwd = _BwdRule(self.s, res_tree, tuple(get_aval(p) for p in primals))
        return self.s.flat_out(primal_out, "the output of fwd"), res_leaves, bwd

    def __str__(self) -> str:
        return getattr(self.s.custom.fwd, "__name__", "fwd")


@dataclass(frozen=True)
class _BwdRule:
    """The user's `bwd` on flat lists (`aotjax.ops.calls.custom_derivatives.CustomBwdRule`)."""

    s: _Structure
    res_tree: Any
    in_avals: tuple[ShapedArray, ...]

    def __call__(self, residuals: list, cts: list) -> list:
        c = self.s.custom
        rule = functools.partial(c.bwd, *self.s.nondiff_values)
        res = jax.tree_util.tree_unflatten(self.res_tree, residuals)
        ct = jax.tree_util.tree_unflatten(self.s.out_tree, cts)
        out = _run_pure(rule, (res, ct), f"the bwd of '{c.__name__}'")
        return self._flat_cts(out)

    def _flat_cts(self, out) -> list:
        name, arg_trees = self.s.custom.__name__, jax.tree_util.treedef_children(self.s.in_tree)
        if not isinstance(out, (tuple, list)) or len(out) != len(arg_trees):
            got = f"a {type(out).__name__} of {len(out)}" if isinstance(out, (tuple, list)) else type(out).__name__
            raise TypeError(f"custom_vjp rule of '{name}': bwd must return a tuple with one cotangent per argument "
                            f"({len(arg_trees)}, nondiff_argnums excluded; None for a zero), got {got}{where()}")
        flat = []
        for i, (ct, tree) in enumerate(zip(out, arg_trees)):
            if ct is None:
                flat.extend([None] * tree.num_leaves)
                continue
            try:
                flat.extend(tree.flatten_up_to(ct))
            except (TypeError, ValueError):
                raise TypeError(f"custom_vjp rule of '{name}': bwd's cotangent {i} does not have the structure of "
                                f"argument {i} ({tree}){where()}") from None
        return [self._check(i, ct, aval) for i, (ct, aval) in enumerate(zip(flat, self.in_avals))]

    def _check(self, i: int, ct, aval: ShapedArray):
        if ct is None or isinstance(ct, Zero) or not is_differentiable(aval.dtype):
            return Zero(aval)
        got = get_aval(ct) if not isinstance(ct, _SCALARS) else None
        if got is None or got.shape != aval.shape or got.dtype != aval.dtype:
            got_s = got.str_short() if got is not None else type(ct).__name__
            raise ShapeError(f"custom_vjp rule of '{self.s.custom.__name__}': bwd returned a cotangent {got_s} for "
                             f"an argument leaf {aval.str_short()} (leaf {i}){where()}; a cotangent must have its "
                             f"argument's shape and dtype")
        return ct

    def __str__(self) -> str:
        return getattr(self.s.custom.bwd, "__name__", "bwd")


class custom_vjp:
    """`fun` with a reverse-mode derivative rule of your own (JAX's `jax.custom_vjp`): `grad`, `vjp` and
    `jacrev` use it; forward mode (`jvp`, `jacfwd`) is an error.

    Define the rule with `f.defvjp(fwd, bwd)`: `fwd(*args) -> (out, residuals)` computes the output and
    what the backward pass needs (a pytree of tensors); `bwd(residuals, out_ct) -> cts` returns a tuple
    with one cotangent per argument (a pytree like the argument, or None for a zero). Arguments listed
    in `nondiff_argnums` (Python values) are not differentiated: `fwd` gets all arguments, `bwd` gets
    them first, `bwd(*nondiff, residuals, out_ct)`, and returns cotangents for the others only.

    >>> @aotjax.custom_vjp
    ... def clip_gradient(x):
    ...     return x
    >>> def fwd(x):
    ...     return x, None
    >>> def bwd(_, g):
    ...     return (aotjax.clamp(g, -1.0, 1.0),)
    >>> clip_gradient.defvjp(fwd, bwd)
    >>> aotjax.grad(lambda x: (3.0 * clip_gradient(x)).sum())(aotjax.tensor([1.0, 2.0]))
    tensor([1., 1.])
    """

    _kind = "custom_vjp"

    def __init__(self, fun: Callable, nondiff_argnums: int | Sequence[int] = ()):
        functools.update_wrapper(self, fun, updated=())
        self.fun = fun
        self.nondiff_argnums = _argnums(nondiff_argnums)
        self.fwd: Callable | None = None
        self.bwd: Callable | None = None

    def defvjp(self, fwd: Callable, bwd: Callable) -> None:
        """Set the forward function `fwd(*args) -> (out, residuals)` and the backward function
        `bwd(residuals, out_ct) -> tuple of cotangents`."""
        self.fwd, self.bwd = fwd, bwd

    def _rules_missing(self) -> bool:
        return self.fwd is None or self.bwd is None

    def __call__(self, *args, **kwargs):
        return _call(self, "custom_vjp", custom_vjp_call_p, args, kwargs, lambda s: {"fwd": _FwdRule(s)})


def _argnums(argnums) -> tuple[int, ...]:
    return tuple(sorted({argnums} if isinstance(argnums, int) else set(argnums)))
