"""The transpose interpreter: a linear program run backwards, from output cotangents to input ones.

A jaxpr is transposed with respect to its *undefined* inputs (marked `UndefinedPrimal(aval)`); the
other inputs are known values. `backward_pass` first evaluates, forward, every equation that reads no
undefined value (the non-linear part: masks, indices, residual arithmetic); then it walks the linear
equations in reverse, calling each primitive's transpose rule on the cotangent of its output.
Cotangents accumulate with `add_tangents`; a symbolic `Zero` cotangent costs nothing: an equation
whose outputs all have zero cotangents is skipped.

Rules live beside each primitive in its family file under `aotjax/ops/`, mostly made with the
combinators below (`deflinear_transpose`, `deflinear2_transpose`, `defview_transpose`). They are not
named `deflinear` because that name is the jvp interpreter's combinator, used in the same files. They
are also where a primitive's linearity is declared: each sets `Primitive.linear` to the operands it
gives a cotangent rule for (a primitive whose transpose rule is written by hand declares `linear` in
its definition).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence

from aotjax.core.avals import ShapedArray, get_aval
from aotjax.core.interpreter import bind
from aotjax.core.ir import ClosedJaxpr, Jaxpr, Literal
from aotjax.core.primitive import Primitive
from aotjax.core.source_info import source_info_of
from aotjax.interpreters.ad_util import AbstractOnly, Zero, add_tangents, instantiate
from aotjax.interpreters.partial_eval import PartialVal, partial_eval_flat

__all__ = ["UndefinedPrimal", "TransposeRule", "transpose_rules", "is_undefined", "deflinear_transpose",
           "deflinear2_transpose", "defview_transpose", "linear_operand", "backward_pass", "transpose_flat"]


@dataclass(frozen=True, slots=True, repr=False)
class UndefinedPrimal(AbstractOnly):
    """The marker of a linear operand: only its abstract value is known; its cotangent is wanted."""

    aval: ShapedArray


def is_undefined(x) -> bool:
    return isinstance(x, UndefinedPrimal)


class TransposeRule(Protocol):
    """`rule(cts, *args, **params) -> cotangents`, one entry per operand.

    `cts` is the cotangent of the output (a list with one entry per result for a primitive with
    multiple results, where entries may be `Zero`); for a single result it is never a symbolic zero:
    such equations are skipped. Each of `args` is either an `UndefinedPrimal` (a linear operand) or
    the operand's known value. The rule returns, for each `UndefinedPrimal` operand, its cotangent: a
    tensor of exactly the operand's shape and dtype, or `Zero(aval)`; for known operands, None. A rule
    computes only with op functions or `prim.bind`, so that what it computes can be traced (the backward
    program is staged when cotangents are tracers). A primitive that is not linear in the undefined
    operands it is given raises.
    """

    def __call__(self, cts: Any, *args: Any, **params: Any) -> Sequence[Any]: ...


transpose_rules: dict[Primitive, TransposeRule] = {}


def _transpose_rule(prim: Primitive) -> TransposeRule:
    rule = transpose_rules.get(prim)
    if rule is None:
        raise NotImplementedError(f"transpose rule for primitive '{prim.name}' is not implemented")
    return rule


def _not_linear(prim: Primitive, i: int, args) -> ValueError:
    operands = ", ".join("linear" if is_undefined(a) else "known" for a in args)
    return ValueError(f"transpose: primitive '{prim.name}' is not linear in operand {i} (operands: {operands}); "
                      f"only linear programs can be transposed")


def deflinear_transpose(prim: Primitive, *rules: Callable | None) -> None:
    """The transpose rule of `prim`, jointly linear in the operands that have a rule (`add`, `cat`,
    `where`'s branches): `rules[i](ct, *args, **params)` is operand i's cotangent, called only when
    operand i is undefined; it may read the values of operands without a rule (masks, indices), which
    must be known. Missing trailing rules count as None. Declares `prim` linear in the operands with a rule."""
    prim.linear = _operands_with_rules(rules)

    def rule(ct, *args, **params):
        cts = []
        for i, a in enumerate(args):
            fn = rules[i] if i < len(rules) else None
            if not is_undefined(a):
                cts.append(None)
            elif fn is None:
                raise _not_linear(prim, i, args)
            else:
                cts.append(fn(ct, *args, **params))
        return cts
    transpose_rules[prim] = rule


def _operands_with_rules(rules: Sequence[Callable | None]) -> tuple[int, ...]:
    return tuple(i for i, fn in enumerate(rules) if fn is not None)


def linear_operand(prim: Primitive, args) -> int:
    """The index of the one undefined operand of multilinear `prim` (two would make it non-linear)."""
    undefined = [i for i, a in enumerate(args) if is_undefined(a)]
    if len(undefined) != 1:
        raise _not_linear(prim, undefined[-1] if undefined else 0, args)
    return undefined[0]


def deflinear2_transpose(prim: Primitive, *rules: Callable | None) -> None:
    """The transpose rule of a multilinear `prim` (`mul`, `matmul`, `einsum`; `div` in its numerator):
    linear in each operand with a rule while the others are fixed, so exactly one operand may be
    undefined; `rules[i](ct, *args, **params)` is its cotangent and may read the other operands. Declares
    `prim` linear in the operands with a rule."""
    prim.linear = _operands_with_rules(rules)

    def rule(ct, *args, **params):
        i = linear_operand(prim, args)
        fn = rules[i] if i < len(rules) else None
        if fn is None:
            raise _not_linear(prim, i, args)
        return [fn(ct, *args, **params) if j == i else None for j in range(len(args))]
    transpose_rules[prim] = rule


def _apply(prim: Primitive, *args, **params):
    """`views.Apply` that materializes symbolic zeros (only the inverses that read the base need one)."""
    return prim.bind(*(instantiate(a) for a in args), **params)


def defview_transpose(prim: Primitive) -> None:
    """The transpose of view primitive `prim`: its inverse (`view_inverse`) writing the cotangent into
    a zero base. Inverses that do not read the base (permute, reshape, squeeze) never build the zeros.
    Declares `prim` linear in its base operand."""
    prim.linear = (0,)

    def rule(ct, x, *args, **params):
        if args and any(is_undefined(a) for a in args):
            raise _not_linear(prim, 1, (x, *args))
        return [prim.view_inverse(_apply, Zero(x.aval), ct, **params)] + [None] * len(args)
    transpose_rules[prim] = rule


def backward_pass(jaxpr: Jaxpr | ClosedJaxpr, consts: Sequence, args: Sequence, cts_out: Sequence,
                  instantiate: bool = False) -> list:
    """The cotangents of the undefined inputs of `jaxpr`, given the cotangents of its outputs.

    `args` has one entry per input: an `UndefinedPrimal(aval)` for a linear input, else its value.
    `cts_out` has one entry per output (a tensor or a `Zero`; cotangents of outputs that do not depend
    on an undefined input are ignored). Returns one cotangent per undefined input, in order: a tensor,
    or a `Zero` when nothing flows to it (a zero tensor with `instantiate=True`). Runs under the
    current interpreters: with tracer cotangents, the backward program is traced.
    """
    if isinstance(jaxpr, ClosedJaxpr):
        consts = list(consts or ()) or jaxpr.consts
        jaxpr = jaxpr.jaxpr
    if len(args) != len(jaxpr.invars) or len(cts_out) != len(jaxpr.outvars):
        raise TypeError(f"backward_pass: the jaxpr takes {len(jaxpr.invars)} inputs and has {len(jaxpr.outvars)} "
                        f"outputs, got {len(args)} arguments and {len(cts_out)} cotangents")
    primal_env: dict = dict(zip(jaxpr.constvars, consts, strict=True))
    linear = set()
    for v, a in zip(jaxpr.invars, args):
        if is_undefined(a):
            linear.add(v)
        else:
            primal_env[v] = a

    def read_primal(a):
        if isinstance(a, Literal):
            return a.val
        return UndefinedPrimal(a.aval) if a in linear else primal_env[a]

    linear_eqns = []
    for eqn in jaxpr.eqns:
        if any(not isinstance(a, Literal) and a in linear for a in eqn.inputs):
            linear.update(eqn.outputs)
            linear_eqns.append(eqn)
        else:
            with source_info_of(eqn.source_info):
                outs = bind(eqn.primitive, *map(read_primal, eqn.inputs), **eqn.params)
            primal_env.update(zip(eqn.outputs, outs if eqn.primitive.multiple_results else [outs]))

    ct_env: dict = {}

    def write_ct(v, ct, prim=None):
        if isinstance(v, Literal) or v not in linear or ct is None or isinstance(ct, Zero):
            return
        if prim is not None:
            _check_ct(prim, v.aval, ct)
        ct_env[v] = add_tangents(ct_env[v], ct) if v in ct_env else ct

    for v, ct in zip(jaxpr.outvars, cts_out):
        write_ct(v, ct)
    for eqn in reversed(linear_eqns):
        cts = [ct_env.pop(v) if v in ct_env else Zero(v.aval) for v in eqn.outputs]
        if all(isinstance(c, Zero) for c in cts):
            continue
        rule = _transpose_rule(eqn.primitive)
        with source_info_of(eqn.source_info):
            cts_in = rule(cts if eqn.primitive.multiple_results else cts[0], *map(read_primal, eqn.inputs),
                          **eqn.params)
            for a, ct in zip(eqn.inputs, cts_in, strict=True):
                write_ct(a, ct, eqn.primitive)
    out = [ct_env.get(v, Zero(v.aval)) for v, a in zip(jaxpr.invars, args) if is_undefined(a)]
    return [_instantiate(c) for c in out] if instantiate else out


def _instantiate(ct):
    return instantiate(ct) if isinstance(ct, Zero) else ct


def _check_ct(prim: Primitive, aval: ShapedArray, ct) -> None:
    got = get_aval(ct)
    if got.shape != aval.shape or got.dtype != aval.dtype:
        raise TypeError(f"transpose rule for primitive '{prim.name}' returned a cotangent {got.str_short()} for an "
                        f"operand {aval.str_short()}; a cotangent must have its operand's shape and dtype")


def transpose_flat(fun: Callable[..., Sequence], args: Sequence, cts_out: Sequence, instantiate: bool = True) -> list:
    """The transpose of `fun` (flat inputs, a flat list of outputs) in its linear inputs.

    `args[i]` is an `UndefinedPrimal(aval)` for a linear input, else a known value. `fun` is partially
    evaluated (the known part runs now), and the unknown jaxpr is run backwards from `cts_out` (one per
    output; cotangents of outputs that do not depend on a linear input are ignored). Returns the
    cotangents of the linear inputs, in order.

    >>> import aotjax
    >>> w = aotjax.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> transpose_flat(lambda x: [w @ x], [UndefinedPrimal(aotjax.ShapedArray((2,), 'float32'))],
    ...                [aotjax.tensor([1.0, 0.0])])
    [tensor([1., 2.])]
    """
    pvals = [PartialVal.unknown(a.aval) if is_undefined(a) else PartialVal.known(a) for a in args]
    jaxpr, pvals_out, residuals = partial_eval_flat(fun, pvals)
    cts = [ct for ct, pv in zip(cts_out, pvals_out, strict=True) if not pv.is_known]
    undefined = [a for a in args if is_undefined(a)]
    return backward_pass(jaxpr, [], [*residuals, *undefined], cts, instantiate=instantiate)
