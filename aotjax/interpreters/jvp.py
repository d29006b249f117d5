"""The jvp interpreter: forward-mode autodiff with symbolic zero tangents.

A `JVPTracer` carries a primal value and its tangent (a real tensor, or a symbolic `Zero`). For
each primitive bound at its level, `JVPTrace` looks up the primitive's rule in `jvp_rules` and
binds, one level down, whatever the rule computes, so rules are themselves traceable and
differentiable again: `jvp` of `jvp` works, and each level keeps its own perturbation apart.

Only functional and view primitives have rules: every transform that needs purity runs
functionalize first, so a mutation reaching this interpreter is an error.

The rules live beside each primitive in its family file under `aotjax/ops/`, made with the
combinators below (`defjvp`, `defjvp2`, `deflinear`, `defjvp_zero`).
"""
from __future__ import annotations

from typing import Any, Callable, Protocol, Sequence

from aotjax.core.avals import PYTHON_SCALARS, ShapedArray, get_aval, scalar_literal
from aotjax.core.errors import DTypeError, ShapeError, UnsupportedError
from aotjax.core.eval_jaxpr import eval_jaxpr
from aotjax.core.interpreter import Trace, Tracer, full_raise, new_main, rules_of
from aotjax.core.primitive import Kind, Primitive
from aotjax.core.source_info import where
from aotjax.interpreters import hooks
from aotjax.interpreters.ad_util import Zero, add_tangents, instantiate, is_differentiable
from aotjax.interpreters.trace import trace_flat
from aotjax.tensor import Tensor

__all__ = ["JvpRule", "jvp_rules", "JVPTracer", "JVPTrace", "jvp_flat", "defjvp", "defjvp2", "deflinear",
           "defjvp_zero", "zeros_like_aval", "broadcast_tangent", "sum_tangents", "jvp_jaxpr"]


class JvpRule(Protocol):
    """`rule(primals, tangents, **params) -> (primal_outs, tangent_outs)`, both lists (one entry per
    result of the primitive).

    `primals` are the operands (tensors of a lower level, eager tensors or NumPy scalars); `tangents`
    has one entry per operand, each a tensor of the operand's shape and dtype or a symbolic `Zero`.
    A rule computes only with op functions or `prim.bind`, so that what it computes is traced by the
    interpreters below (and can be differentiated again); it should skip the work for a `Zero`
    tangent and may return `Zero(aval)` for an output whose tangent is zero. Tangent outputs of
    integer and bool results are replaced by `Zero` whatever the rule returns.
    """

    def __call__(self, primals: Sequence[Any], tangents: Sequence[Any], **params: Any) -> tuple[list, list]: ...


jvp_rules: dict[Primitive, JvpRule] = {}


class JVPTracer(Tracer, Tensor):
    __slots__ = ("_trace", "primal", "tangent")

    def __init__(self, trace: "JVPTrace", primal, tangent):
        self._trace = trace
        self.primal = primal
        self.tangent = tangent
        # NOTE: the primal's layout: the level below recorded it when it computed the primal.
        self._init_slots(get_aval(primal), getattr(primal, "_strides", None), getattr(primal, "_offset", 0))


class JVPTrace(Trace):
    enables_grad = True  # NOTE: `grad` inside `no_grad` still differentiates (torch.func.grad does)

    def pure(self, val):
        if isinstance(val, PYTHON_SCALARS):
            val = scalar_literal(val)
        return JVPTracer(self, val, Zero(get_aval(val)))

    lift = pure

    def process_primitive(self, prim, tracers, params):
        if prim.kind is Kind.MUTATION:
            raise UnsupportedError(
                f"jvp: the in-place primitive '{prim.name}' reached the jvp interpreter{where()}. Differentiation "
                f"needs a pure program: run functionalize first (the jvp/grad transforms do), or use the "
                f"out-of-place op instead of '{prim.name}'.")
        rule = jvp_rules.get(prim)
        if rule is None:
            raise NotImplementedError(f"jvp rule for primitive '{prim.name}' is not implemented")
        with rules_of(self.main):
            primal_outs, tangent_outs = rule([t.primal for t in tracers], [t.tangent for t in tracers], **params)
        return [JVPTracer(self, p, _output_tangent(p, t)) for p, t in zip(primal_outs, tangent_outs, strict=True)]


def _output_tangent(primal, tangent):
    aval = get_aval(primal)
    if not is_differentiable(aval.dtype):
        return Zero(aval)
    return tangent


def jvp_flat(fun: Callable[..., list], primals: list, tangents: list) -> tuple[list, list]:
    """`fun`'s outputs at `primals` and their directional derivatives along `tangents`.

    `fun` takes the primals positionally and returns a flat list of tensors. A tangent may be a tensor
    of its primal's shape and dtype, or None / `Zero` for a zero tangent (then no tangent work is done
    for it). Output tangents are real tensors (zeros where the tangent is symbolically zero; integer
    and bool outputs get zero tangents).

    >>> from aotjax.interpreters.jvp import jvp_flat
    >>> jvp_flat(lambda x: [aotjax.sin(x)], [aotjax.tensor([0.0])], [aotjax.tensor([2.0])])
    ([tensor([0.])], [tensor([2.])])
    """
    if len(primals) != len(tangents):
        raise ValueError(f"jvp: got {len(primals)} primals but {len(tangents)} tangents{where()}; pass one "
                         f"tangent per primal (None for a zero tangent)")
    with new_main(JVPTrace) as main:
        trace = main.trace
        in_tracers = [JVPTracer(trace, p, _input_tangent(i, p, t))
                      for i, (p, t) in enumerate(zip(primals, tangents))]
        outs = fun(*in_tracers)
        out_tracers = [full_raise(trace, o) for o in outs]
        primals_out = [t.primal for t in out_tracers]
        tangents_out = [instantiate(t.tangent) for t in out_tracers]
    return primals_out, tangents_out


def _input_tangent(i: int, primal, tangent):
    aval = get_aval(primal)
    if tangent is None or isinstance(tangent, Zero) or not is_differentiable(aval.dtype):
        return Zero(aval)
    if not isinstance(tangent, Tensor):
        tangent = hooks.as_tensor(tangent)
    if tuple(tangent.shape) != aval.shape:
        raise ShapeError(f"jvp: tangent {i} has shape {list(tangent.shape)} but its primal has shape "
                         f"{list(aval.shape)}{where()}; a tangent must have its primal's shape")
    if tangent.dtype != aval.dtype:
        raise DTypeError(f"jvp: tangent {i} has dtype {tangent.dtype.name} but its primal has dtype "
                         f"{aval.dtype.name}{where()}; convert it (`t.to(primal.dtype)`)")
    return tangent


# -- combinators ---------------------------------------------------------------------------------
def zeros_like_aval(aval: ShapedArray):
    """A real zero tensor of `aval`."""
    return instantiate(Zero(aval))


def broadcast_tangent(t, aval: ShapedArray):
    """`t` broadcast to `aval`'s shape (an operand's tangent contribution to a broadcasting op's output)."""
    if isinstance(t, Zero):
        return Zero(aval)
    if tuple(t.shape) == aval.shape:
        return t
    return hooks.expand(t, aval.shape)


def sum_tangents(out_aval: ShapedArray, contributions) -> Any:
    """The sum of tangent `contributions` (symbolic zeros skipped), each broadcast to `out_aval`'s shape."""
    total = Zero(out_aval)
    for c in contributions:
        total = add_tangents(total, broadcast_tangent(c, out_aval))
    return total


def defjvp(prim: Primitive, *jvp_fns: Callable | None) -> None:
    """The jvp rule of a single-result `prim` from one function per operand: `fn(t, *primals, **params)`
    is operand i's tangent contribution (None: the operand is not differentiable). Zero tangents are
    skipped, contributions are broadcast to the output's shape and summed."""
    def rule(primals, tangents, **params):
        out = prim.bind(*primals, **params)
        contributions = (fn(t, *primals, **params) for fn, t in zip(jvp_fns, tangents)
                         if fn is not None and not isinstance(t, Zero))
        return [out], [sum_tangents(get_aval(out), contributions)]
    jvp_rules[prim] = rule


def defjvp2(prim: Primitive, *jvp_fns: Callable | None) -> None:
    """As `defjvp`, but each `fn(t, ans, *primals, **params)` also gets the primal output `ans` (for
    rules that reuse it: the derivative of `exp` is `exp`)."""
    def rule(primals, tangents, **params):
        out = prim.bind(*primals, **params)
        contributions = (fn(t, out, *primals, **params) for fn, t in zip(jvp_fns, tangents)
                         if fn is not None and not isinstance(t, Zero))
        return [out], [sum_tangents(get_aval(out), contributions)]
    jvp_rules[prim] = rule


def deflinear(prim: Primitive, argnums: Sequence[int] | None = None) -> None:
    """The jvp rule of a primitive linear (jointly) in the operands `argnums` (default: all): the
    tangent is the primitive applied to their tangents (zeros instantiated where some are symbolic),
    the other operands (indices, masks) passed as they are. All-zero tangents bind nothing."""
    def rule(primals, tangents, **params):
        out = prim.bind(*primals, **params)
        outs = out if prim.multiple_results else [out]
        linear = range(len(primals)) if argnums is None else argnums
        if all(isinstance(tangents[i], Zero) for i in linear):
            return outs, [Zero(get_aval(o)) for o in outs]
        operands = [instantiate(tangents[i]) if i in linear else p for i, p in enumerate(primals)]
        t_out = prim.bind(*operands, **params)
        return outs, t_out if prim.multiple_results else [t_out]
    jvp_rules[prim] = rule


def defjvp_zero(prim: Primitive) -> None:
    """The jvp rule of a primitive with no derivative (integer and bool results, comparisons, random
    numbers, rounding): its outputs' tangents are symbolic zeros."""
    def rule(primals, tangents, **params):
        out = prim.bind(*primals, **params)
        outs = out if prim.multiple_results else [out]
        return outs, [Zero(get_aval(o)) for o in outs]
    jvp_rules[prim] = rule


# -- sub-programs (the rules of higher-order primitives) -------------------------------------------------
_instantiate = instantiate  # NOTE: `jvp_jaxpr`'s parameter of that name (JAX's) shadows it there


def jvp_jaxpr(jaxpr, nonzeros: Sequence[bool], instantiate: bool | Sequence[bool] = False):
    """The jvp of pure program `jaxpr` (a `ClosedJaxpr`) with nonzero tangents for the inputs marked `nonzeros`:
    `(jvp_jaxpr, out_nonzeros)`. `jvp_jaxpr` takes the primals then the tangents of the marked inputs and returns
    the primal outputs then the tangents of the outputs marked in `out_nonzeros` (those whose tangent is not a
    known zero, or that `instantiate` asks for: one flag, or one per output). What loops and branches build their
    jvp from (`aotjax.ops.control_flow`); integer and bool inputs and outputs never have a tangent."""
    n = len(nonzeros)
    avals = list(jaxpr.in_avals)
    nonzeros = [nz and is_differentiable(a.dtype) for nz, a in zip(nonzeros, avals, strict=True)]
    m = len(jaxpr.out_avals)
    inst = [instantiate] * m if isinstance(instantiate, bool) else list(instantiate)
    out_nonzeros: list[bool] = []

    def fun(*args):
        tangents = iter(args[n:])
        with new_main(JVPTrace) as main:
            trace = main.trace
            in_tracers = [JVPTracer(trace, p, next(tangents) if nz else Zero(a))
                          for p, nz, a in zip(args[:n], nonzeros, avals)]
            outs = [full_raise(trace, o) for o in eval_jaxpr(jaxpr, *in_tracers)]
            primals = [t.primal for t in outs]
            tangents_out = [t.tangent for t in outs]
        tangents_out = [_instantiate(t) if i and is_differentiable(t.aval.dtype) else t
                        for t, i in zip(tangents_out, inst, strict=True)]
        out_nonzeros[:] = [not isinstance(t, Zero) for t in tangents_out]
        return [*primals, *(t for t in tangents_out if not isinstance(t, Zero))]

    closed = trace_flat(fun, avals + [a for a, nz in zip(avals, nonzeros) if nz])
    return closed, list(out_nonzeros)

