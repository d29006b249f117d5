"""Primitives of functions with user-defined derivatives: `custom_jvp_call`, `custom_vjp_call`, `custom_lin`.

Each call primitive carries the traced primal function (`call`: a ClosedJaxpr without consts, whose first
`num_consts` inputs are the values the function reads from its enclosing scope) and the user's rule, as
a hashable callable on flat lists (built by `aotjax.transforms.custom_derivatives`, which deals with
pytrees, `nondiff_argnums` and the user's errors). Evaluation and lowering run `call`; only the jvp rule
differs from an ordinary call:

- `custom_jvp_call`: the tangents come from the user's jvp rule, called on the primals and tangents;
- `custom_vjp_call`: the user's `fwd` computes the outputs and residuals, and the tangents are a
  `custom_lin` of (residuals, tangents): an opaque linear function whose transpose is the user's `bwd`.
  Reverse mode (grad, vjp) transposes it; forward mode would have to evaluate it, which is an error, as
  in JAX: a custom_vjp function has no forward-mode derivative.

Closed-over values are explicit operands (so every interpreter sees them), but the rules cover only the
arguments: differentiating with respect to a closed-over value is an error naming the function.

Under `vmap`, a call binds once with `call` batched (`batch_jaxpr`) and the user's rules batched alongside:
each batched rule runs the user's rule on one example under a batching level of its own (as `vmap` would),
so differentiating the batched call uses the user's rule per example. Every output of a batched call is
batched: a rule may make a tangent vary over the examples where the function's output does not, and the
call's outputs and the rule's must have one shape.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

from aotjax.core.avals import ShapedArray, get_aval
from aotjax.core.errors import ShapeError, UnsupportedError
from aotjax.core.eval_jaxpr import eval_jaxpr
from aotjax.core.interpreter import Tracer, find_top_trace
from aotjax.core.ir import ClosedJaxpr, Jaxpr
from aotjax.core.primitive import Primitive, Recompute, jaxpr_flops, largest_array_flops
from aotjax.core.source_info import where
from aotjax.interpreters import hooks
from aotjax.interpreters.ad_util import Zero, instantiate
from aotjax.interpreters.batching import (
    BatchAxis,
    at_front,
    batch_flat_dims,
    batch_jaxpr,
    batched_aval,
    batching_rules,
    broadcast,
    current_axis,
    front_dims,
    moveaxis,
    not_mapped,
)
from aotjax.interpreters.jvp import jvp_rules
from aotjax.interpreters.lowering import eval_jaxpr_jax, register_lowering
from aotjax.interpreters.trace import trace_flat
from aotjax.interpreters.transpose import is_undefined, transpose_rules

__all__ = ["custom_jvp_call_p", "custom_vjp_call_p", "custom_lin_p", "CustomJvpRule", "CustomFwdRule",
           "CustomBwdRule"]


class CustomJvpRule(Protocol):
    """`rule(primals, tangents) -> (primal_outs, tangent_outs)`, all flat lists. `primals` are the call's
    operands without its consts; `tangents` one real tensor per primal (zeros instantiated). Outputs
    match `call.out_avals`. Hashable (params are cache keys); `str(rule)` names it when printing."""

    def __call__(self, primals: list, tangents: list) -> tuple[list, list]: ...


class CustomBwdRule(Protocol):
    """`bwd(residuals, cts) -> cts_in`: `cts` one real tensor per output of the call; `cts_in` one entry
    per primal (the call's operands without its consts), a tensor of the primal's aval or a `Zero`."""

    def __call__(self, residuals: list, cts: list) -> list: ...


class CustomFwdRule(Protocol):
    """`fwd(primals) -> (primal_outs, residuals, bwd)`: flat lists, and the `CustomBwdRule` that maps the
    residuals and output cotangents to the primals' cotangents. Hashable, like `CustomJvpRule`."""

    def __call__(self, primals: list) -> tuple[list, list, CustomBwdRule]: ...


def _check_consts_not_differentiated(kind: str, name: str, const_tangents: Sequence) -> None:
    if any(not isinstance(t, Zero) for t in const_tangents):
        raise UnsupportedError(
            f"{kind} function '{name}' is differentiated with respect to a value it reads from its enclosing "
            f"scope (a closure or a global){where()}. Its custom rule only covers its arguments: pass that value "
            f"to the function as an argument instead.")


def _check_rule_outputs(kind: str, name: str, what: str, outs: Sequence, avals: Sequence[ShapedArray],
                        ins: Sequence) -> None:
    """The user's rule gave one value of the right shape and dtype per output, and none of them is traced
    by a transform above the one running the rule (what reading a traced value from a closure does)."""
    if len(outs) != len(avals):
        raise ShapeError(f"{kind} rule of '{name}': {what} has {len(outs)} values, the function has "
                         f"{len(avals)} outputs{where()}")
    for i, (o, a) in enumerate(zip(outs, avals)):
        got = get_aval(o)
        if got.shape != a.shape or got.dtype != a.dtype:
            raise ShapeError(f"{kind} rule of '{name}': {what} {i} is {got.str_short()}, but the function's "
                             f"output {i} is {a.str_short()}{where()}; the rule must return values of the same "
                             f"shapes and dtypes as the function")
    top = find_top_trace([x for x in ins if isinstance(x, Tracer)]).main.level
    if any(isinstance(o, Tracer) and o._trace.main.level > top for o in outs):
        raise UnsupportedError(
            f"{kind} rule of '{name}' returned a value traced by an enclosing transform{where()}: the rule reads a "
            f"traced tensor from its enclosing scope. Pass that tensor to the function as an argument instead.")


def _call_abstract_eval(*avals, call, num_consts, name, **_):
    expected = call.in_avals
    if [(a.shape, a.dtype) for a in avals] != [(a.shape, a.dtype) for a in expected]:
        got = ", ".join(a.str_short() for a in avals)
        raise ShapeError(f"{name}: operands {got} do not match the traced function's inputs "
                         f"{', '.join(a.str_short() for a in expected)}")
    return list(call.out_avals)


def _call_lower(*vals, call, **_):
    return eval_jaxpr_jax(call.jaxpr, (), vals)


def _call_print(params: dict) -> dict:
    shown = {k: v for k, v in params.items() if k not in ("call", "num_consts")}
    if params["num_consts"]:
        shown["num_consts"] = params["num_consts"]
    shown["call"] = params["call"]
    return shown


# -- custom_jvp_call ---------------------------------------------------------------------------------
custom_jvp_call_p = Primitive("custom_jvp_call", multiple_results=True, recompute=Recompute.EXPENSIVE,
                              flops=lambda in_avals, out_avals, *, call, **_: jaxpr_flops(call))
custom_jvp_call_p.abstract_eval = _call_abstract_eval
custom_jvp_call_p.print_rule = _call_print
register_lowering(custom_jvp_call_p, _call_lower)


def _custom_jvp_call_jvp(primals, tangents, *, call, jvp, num_consts, name):
    _check_consts_not_differentiated("custom_jvp", name, tangents[:num_consts])
    args, arg_tangents = list(primals[num_consts:]), tangents[num_consts:]
    if all(isinstance(t, Zero) for t in arg_tangents):  # NOTE: nothing to differentiate: stay one call
        outs = custom_jvp_call_p.bind(*primals, call=call, jvp=jvp, num_consts=num_consts, name=name)
        return outs, [Zero(a) for a in call.out_avals]
    arg_tangents = [instantiate(t) for t in arg_tangents]
    primal_outs, tangent_outs = jvp(args, arg_tangents)
    ins = [*args, *arg_tangents]
    _check_rule_outputs("custom_jvp", name, "the primal output", primal_outs, call.out_avals, ins)
    _check_rule_outputs("custom_jvp", name, "the tangent output", tangent_outs, call.out_avals, ins)
    return list(primal_outs), list(tangent_outs)


jvp_rules[custom_jvp_call_p] = _custom_jvp_call_jvp


# -- custom_vjp_call ---------------------------------------------------------------------------------
custom_vjp_call_p = Primitive("custom_vjp_call", multiple_results=True, recompute=Recompute.EXPENSIVE,
                              flops=lambda in_avals, out_avals, *, call, **_: jaxpr_flops(call))
custom_vjp_call_p.abstract_eval = _call_abstract_eval
custom_vjp_call_p.print_rule = _call_print
register_lowering(custom_vjp_call_p, _call_lower)


def _custom_vjp_call_jvp(primals, tangents, *, call, fwd, num_consts, name):
    _check_consts_not_differentiated("custom_vjp", name, tangents[:num_consts])
    args, arg_tangents = list(primals[num_consts:]), tangents[num_consts:]
    if all(isinstance(t, Zero) for t in arg_tangents):
        outs = custom_vjp_call_p.bind(*primals, call=call, fwd=fwd, num_consts=num_consts, name=name)
        return outs, [Zero(a) for a in call.out_avals]
    primal_outs, residuals, bwd = fwd(args)
    _check_rule_outputs("custom_vjp", name, "the output of fwd", primal_outs, call.out_avals, args)
    linear = [t for t in arg_tangents if not isinstance(t, Zero)]
    mask = tuple(not isinstance(t, Zero) for t in arg_tangents)
    tangent_outs = custom_lin_p.bind(*residuals, *linear, num_res=len(residuals), bwd=bwd, mask=mask,
                                     out_avals=tuple(call.out_avals), name=name)
    return list(primal_outs), tangent_outs


jvp_rules[custom_vjp_call_p] = _custom_vjp_call_jvp


# -- custom_lin: the tangent map of a custom_vjp function, known only through its transpose ----------
# NOTE: `bwd` is a Python function, with no program to count: one operation per element is a guess.
custom_lin_p = Primitive("custom_lin", multiple_results=True, recompute=Recompute.EXPENSIVE,
                         flops=largest_array_flops, linear=True)  # in its tangent operands, after `num_res`
custom_lin_p.abstract_eval = lambda *avals, out_avals, **_: list(out_avals)
custom_lin_p.print_rule = lambda params: {"name": params["name"], "bwd": params["bwd"], "num_res": params["num_res"]}


def _forward_mode_error(name: str) -> UnsupportedError:
    return UnsupportedError(
        f"custom_vjp function '{name}': forward-mode differentiation (jvp, jacfwd, linearize's jvp function) is "
        f"not supported{where()}. custom_vjp defines only a reverse-mode rule: use grad, vjp or "
        f"jacrev, or define the derivative with custom_jvp, which serves both modes.")


def _custom_lin_lower(*vals, name, **_):
    raise _forward_mode_error(name)


register_lowering(custom_lin_p, _custom_lin_lower)


def _custom_lin_jvp(primals, tangents, *, name, **_):
    raise _forward_mode_error(name)


jvp_rules[custom_lin_p] = _custom_lin_jvp


def _custom_lin_transpose(cts, *args, num_res, bwd, mask, out_avals, name):
    residuals, linear = args[:num_res], args[num_res:]
    if any(is_undefined(r) for r in residuals):
        raise ValueError(f"transpose: primitive 'custom_lin' of '{name}' is not linear in its residuals; only "
                         f"its tangent operands can be transposed")
    cts_in = bwd(list(residuals), [instantiate(ct) for ct in cts])
    picked = [ct for ct, m in zip(cts_in, mask, strict=True) if m]
    return [None] * num_res + [ct if is_undefined(a) else None for ct, a in zip(picked, linear, strict=True)]


transpose_rules[custom_lin_p] = _custom_lin_transpose



# -- batching -------------------------------------------------------------------------------------------
def _per_example(fun, vals: list, batched: Sequence[bool], axis: BatchAxis) -> tuple[list, list[bool]]:
    """`fun` (flat lists in and out) applied to each example of `vals` (batched at 0 where `batched`): its outputs,
    at 0 where they are batched, and which are."""
    out_batched: list[bool] = []

    def batched_fun(*args):
        outs, dims = batch_flat_dims(fun, list(args), front_dims(batched), axis)
        out_batched[:] = [d is not not_mapped for d in dims]
        return [o if d is not_mapped else moveaxis(o, d, 0) for o, d in zip(outs, dims, strict=True)]

    # NOTE: traced, then evaluated here. Run directly, the batching level would be pushed while the rule of a level
    # below it runs, and would bind what it computes at the level under it on the stack, not at this rule's level.
    closed = trace_flat(batched_fun, [get_aval(v) for v in vals])
    return eval_jaxpr(closed, *vals), out_batched


def _batched_call(call: ClosedJaxpr, axis: BatchAxis, in_batched: tuple[bool, ...]) -> tuple[ClosedJaxpr, list]:
    """`call` batched, every output batched; the constants the batched program made hoisted into inputs (a call's
    program has none), returned to be passed first."""
    batched, _ = batch_jaxpr(call, axis, in_batched, instantiate=True)
    j = batched.jaxpr
    return ClosedJaxpr(Jaxpr([], j.constvars + j.invars, j.eqns, j.outvars), []), list(batched.consts)


def _defcall_batching(prim: Primitive, rule_param: str, batched_rule: type) -> None:
    """The batching rule of call `prim`: its program batched, and its user's rule (param `rule_param`) made
    `batched_rule(rule, axis, in_batched)`, the rule on the batched operands."""
    def rule(axis_size, vals, bdims, *, call, num_consts, name, **params):
        vals, in_batched = at_front(vals, bdims)
        axis = current_axis()
        batched, consts = _batched_call(call, axis, in_batched)
        user_rule = batched_rule(params[rule_param], axis, in_batched[num_consts:])
        outs = prim.bind(*consts, *vals, call=batched, num_consts=num_consts + len(consts), name=name,
                         **{rule_param: user_rule})
        return outs, [0] * len(outs)
    batching_rules[prim] = rule


@dataclass(frozen=True)
class _BatchedJvp:
    """The user's jvp rule (`CustomJvpRule`) on batched primals and tangents (at axis 0 where `in_batched`), run per
    example; its outputs batched at 0."""

    jvp: CustomJvpRule
    axis: BatchAxis
    in_batched: tuple[bool, ...]

    def __call__(self, primals: list, tangents: list) -> tuple[list, list]:
        n, counts = len(primals), []

        def per_example(*args):
            p_out, t_out = self.jvp(list(args[:n]), list(args[n:]))
            counts[:] = [len(p_out)]
            return [*p_out, *t_out]

        outs, out_batched = _per_example(per_example, [*primals, *tangents], self.in_batched * 2, self.axis)
        outs = [o if b else broadcast(o, self.axis.size, 0) for o, b in zip(outs, out_batched, strict=True)]
        return outs[:counts[0]], outs[counts[0]:]

    def __str__(self) -> str:
        return str(self.jvp)


_defcall_batching(custom_jvp_call_p, "jvp", _BatchedJvp)


@dataclass(frozen=True)
class _BatchedFwd:
    """The user's `fwd` (`CustomFwdRule`) on batched primals (at axis 0 where `in_batched`), run per example: the
    outputs batched at 0, the residuals at 0 or unbatched, and `bwd` batched to match."""

    fwd: CustomFwdRule
    axis: BatchAxis
    in_batched: tuple[bool, ...]

    def __call__(self, primals: list) -> tuple[list, list, CustomBwdRule]:
        found = []

        def per_example(*args):
            outs, residuals, bwd = self.fwd(list(args))
            found[:] = [len(outs), bwd]
            return [*outs, *residuals]

        vals, out_batched = _per_example(per_example, list(primals), self.in_batched, self.axis)
        m, bwd = found
        outs = [o if b else broadcast(o, self.axis.size, 0) for o, b in zip(vals[:m], out_batched)]
        res_batched = tuple(out_batched[m:])
        return outs, vals[m:], _BatchedBwd(bwd, self.axis, res_batched, (True,) * m, self.in_batched)

    def __str__(self) -> str:
        return str(self.fwd)


@dataclass(frozen=True)
class _BatchedBwd:
    """The user's `bwd` (`CustomBwdRule`) on batched residuals and cotangents (at axis 0 where `res_batched` and
    `cts_batched`), run per example. Each primal's cotangent is batched at 0 if the primal is (`in_batched`);
    the cotangent of an unbatched primal, shared by the examples, is the sum of theirs."""

    bwd: CustomBwdRule
    axis: BatchAxis
    res_batched: tuple[bool, ...]
    cts_batched: tuple[bool, ...]
    in_batched: tuple[bool, ...]

    def __call__(self, residuals: list, cts: list) -> list:
        n, zeros = len(residuals), []

        def per_example(*args):
            cts_in = self.bwd(list(args[:n]), list(args[n:]))
            zeros[:] = [ct if isinstance(ct, Zero) else None for ct in cts_in]
            return [ct for ct in cts_in if not isinstance(ct, Zero)]

        vals, out_batched = _per_example(per_example, [*residuals, *cts], self.res_batched + self.cts_batched,
                                         self.axis)
        found = iter(zip(vals, out_batched, strict=True))
        return [self._matched(*next(found), b) if z is None else Zero(batched_aval(z.aval, self.axis.size) if b
                                                                        else z.aval)
                for z, b in zip(zeros, self.in_batched, strict=True)]

    def _matched(self, ct, ct_batched: bool, batched: bool):
        if ct_batched == batched:
            return ct
        return broadcast(ct, self.axis.size, 0) if batched else hooks.reduce_sum(ct, (0,))

    def __str__(self) -> str:
        return str(self.bwd)


_defcall_batching(custom_vjp_call_p, "fwd", _BatchedFwd)


def _custom_lin_batch(axis_size, vals, bdims, *, num_res, bwd, mask, out_avals, name):
    vals, batched = at_front(vals, bdims)
    linear = iter(batched[num_res:])
    in_batched = tuple(next(linear) if m else False for m in mask)
    axis = current_axis()
    rule = _BatchedBwd(bwd, axis, batched[:num_res], (True,) * len(out_avals), in_batched)
    outs = custom_lin_p.bind(*vals, num_res=num_res, bwd=rule, mask=mask, name=name,
                             out_avals=tuple(batched_aval(a, axis_size) for a in out_avals))
    return outs, [0] * len(outs)


batching_rules[custom_lin_p] = _custom_lin_batch
