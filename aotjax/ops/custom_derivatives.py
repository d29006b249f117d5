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
"""
from __future__ import annotations

from typing import Protocol, Sequence

from aotjax.core.avals import ShapedArray, get_aval
from aotjax.core.errors import ShapeError, UnsupportedError
from aotjax.core.interpreter import Tracer, find_top_trace
from aotjax.core.primitive import Primitive, Recompute, jaxpr_flops, largest_array_flops
from aotjax.core.source_info import where
from aotjax.interpreters.ad_util import Zero, instantiate
from aotjax.interpreters.jvp import jvp_rules
from aotjax.interpreters.lowering import eval_jaxpr_jax, register_lowering
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

