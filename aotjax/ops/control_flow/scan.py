"""`scan`: a loop over the leading axis of its `xs`, carrying state, as one higher-order primitive.

`scan_p` has operands `consts, init, xs` (`num_consts`, `num_carry`, the rest) and param `jaxpr`, the body
`(consts, carry, x) -> (carry, y)` (pure, no constants); its results are the final carry then the `ys`, each
stacked along a new leading axis of `length`. JAX's `lax.scan` is the model; its rules, all here:

- lowering: `jax.lax.scan` (so eager mode runs one compiled loop, not a Python loop), honouring `unroll`;
- jvp: a fixed point on which carries have nonzero tangents, then one scan of the body's jvp;
- partial evaluation (how `grad` and `aot` split the loop): a fixed point on which carries are unknown, then a
  **known** scan computing the known results and the residuals of each iteration, stacked along the leading
  axis, and an **unknown** scan reading them. A residual that is a loop constant or an `xs` slice is
  forwarded (the unknown scan reads the operand itself: no stacked copy of a weight the body captures), a
  residual computed from loop constants alone is hoisted out of the loop and computed once, and one computed from
  `xs` slices by cheap ops (`Recompute.CHEAP`: a layer's transposed weight) is recomputed by the unknown scan;
  imperative autograd records a scan with its residuals (`aotjax.autograd.saved_loops`);
- transpose: a scan in the other direction whose carry accumulates the constants' cotangents;
- dead-code elimination: a fixed point on the carries something reads; unused results and operands go;
- batching (vmap): a fixed point on which carries are batched, then one scan of the batched body. Inside the body
  every batched value has its batch axis at 0; outside, a batched `xs` or `ys` has it at 1 (0 is the scanned axis).

The frontend (`scan`) traces the body once, functionalized (`aotjax.ops.control_flow._body`), and restores
PyTorch's eager meaning around the pure primitive: the carry is fresh (the caller's `init` is never written),
the body's `x` is a view of `xs[i]` (a write into it goes through to the caller's `xs`), and a tensor the
body captures and writes is carried through the loop and written back to the caller.
"""
from __future__ import annotations

import operator
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from aotjax.core.avals import PYTHON_SCALARS, ShapedArray, get_aval
from aotjax.core.checks import check_record
from aotjax.core.errors import ShapeError, UnsupportedError
from aotjax.core.eval_jaxpr import eval_jaxpr
from aotjax.core.interpreter import Tracer
from aotjax.core.ir import ClosedJaxpr, Eqn, Jaxpr, Var, dce, dce_rules, rename_inputs, split_rules, used_inputs
from aotjax.core.primitive import Primitive, Recompute, jaxpr_flops
from aotjax.core.source_info import user_source_info, where
from aotjax.interpreters.ad_util import Zero, add_tangents, instantiate
from aotjax.interpreters.batching import (
    batch_jaxpr,
    batching_rules,
    current_axis,
    front_dims,
    matchaxis,
    moveaxis,
    not_mapped,
)
from aotjax.interpreters.jvp import jvp_jaxpr, jvp_rules
from aotjax.interpreters.lowering import eval_sub_jaxpr, register_lowering
from aotjax.interpreters.partial_eval import (
    ResidualSource,
    loop_body_repartition,
    partial_eval_jaxpr,
    partial_eval_rules,
)
from aotjax.interpreters.trace import trace_flat
from aotjax.interpreters.transpose import UndefinedPrimal, backward_pass, is_undefined, transpose_rules
from aotjax.ops.base.data import as_tensor
from aotjax.ops.control_flow._body import memory_key, trace_body, write_back
from aotjax.ops.control_flow._common import (
    check_carry,
    differentiable,
    fixed_point,
    kind_of,
    loop_operand,
    permute,
    split_list,
    trace_promoting,
)

__all__ = ["scan", "scan_p"]


# NOTE: a loop is saved rather than recomputed (its cost is `length` bodies); it is linear in the operands its
# body is linear in.
scan_p = Primitive("scan", multiple_results=True, recompute=Recompute.EXPENSIVE, linear=True, higher_order=True,
                   flops=lambda in_avals, out_avals, *, jaxpr, length, **_: length * jaxpr_flops(jaxpr))


def _scan_abstract_eval(*avals, jaxpr: ClosedJaxpr, num_consts: int, num_carry: int, length: int, reverse: bool,
                        unroll: int):
    consts, init, xs = split_list(avals, num_consts, num_carry)
    body_in = jaxpr.in_avals
    expected = [*body_in[:num_consts + num_carry], *(ShapedArray((length, *a.shape), a.dtype)
                                                      for a in body_in[num_consts + num_carry:])]
    got = [*consts, *init, *xs]
    if len(got) != len(expected) or any(g.shape != e.shape or g.dtype != e.dtype for g, e in zip(got, expected)):
        raise TypeError(f"scan: operands {', '.join(a.str_short() for a in got)} do not match the body's inputs "
                        f"{', '.join(a.str_short() for a in expected)}")
    outs = jaxpr.out_avals
    return [*outs[:num_carry], *(ShapedArray((length, *a.shape), a.dtype) for a in outs[num_carry:])]


def _scan_lower(*args, jaxpr: ClosedJaxpr, num_consts: int, num_carry: int, length: int, reverse: bool,
                unroll: int):
    in_avals = jaxpr.in_avals
    args = [jnp.asarray(a, dtype=aval.dtype) for a, aval in zip(args, in_avals[:num_consts + num_carry], strict=False)
            ] + [jnp.asarray(a) for a in args[num_consts + num_carry:]]
    consts, init, xs = split_list(args, num_consts, num_carry)
    checked = check_record() is not None

    def body(carry, x):
        if not checked:
            outs, _ = eval_sub_jaxpr(jaxpr, [*consts, *carry, *x])
            return outs[:num_carry], outs[num_carry:]
        # NOTE: a checked program (`jit(f, checks=True)`, eager mode): the body's checks pass out of the loop as one
        # more carry, every iteration's and-ed, so that a failure in any iteration is seen.
        outs, ok = eval_sub_jaxpr(jaxpr, [*consts, *carry[:-1], *x])
        return [*outs[:num_carry], jnp.logical_and(carry[-1], ok)], outs[num_carry:]

    carry, ys = jax.lax.scan(body, [*init, jnp.asarray(True)] if checked else init, xs, length=length,
                             reverse=reverse, unroll=unroll)
    if checked:
        check_record().predicates.append(carry[-1])
        carry = carry[:-1]
    return [*carry, *ys]


# -- jvp ---------------------------------------------------------------------------------------------------
def _scan_jvp(primals, tangents, *, jaxpr: ClosedJaxpr, num_consts: int, num_carry: int, length: int, reverse: bool,
              unroll: int):
    in_avals = jaxpr.in_avals
    nz = differentiable([not isinstance(t, Zero) for t in tangents], in_avals)
    const_nz, init_nz, xs_nz = split_list(nz, num_consts, num_carry)
    num_ys = len(jaxpr.out_avals) - num_carry
    carry_nz = init_nz
    for _ in range(num_carry + 1):
        _, out_nz = jvp_jaxpr(jaxpr, const_nz + carry_nz + xs_nz, instantiate=carry_nz + [False] * num_ys)
        new = differentiable([a or b for a, b in zip(carry_nz, out_nz[:num_carry])],
                             in_avals[num_consts:num_consts + num_carry])
        if new == carry_nz:
            break
        carry_nz = new
    jj, out_nz = jvp_jaxpr(jaxpr, const_nz + carry_nz + xs_nz, instantiate=carry_nz + [False] * num_ys)
    ys_nz = out_nz[num_carry:]
    n_in = len(primals)
    nzs = const_nz + carry_nz + xs_nz
    tangent_pos = {}
    for i, f in enumerate(nzs):
        if f:
            tangent_pos[i] = n_in + len(tangent_pos)
    groups = [range(0, num_consts), range(num_consts, num_consts + num_carry), range(num_consts + num_carry, n_in)]
    in_order = []
    for g in groups:
        in_order += list(g) + [tangent_pos[i] for i in g if i in tangent_pos]
    m = len(jaxpr.out_avals)
    n_ct = sum(carry_nz)
    out_order = [*range(num_carry), *range(m, m + n_ct), *range(num_carry, m), *range(m + n_ct, m + n_ct + sum(ys_nz))]
    body = permute(jj, in_order, out_order)

    def tangent(i):
        t = tangents[i]
        return instantiate(t, in_avals[i]) if isinstance(t, Zero) else t

    operands = []
    for g in groups:
        operands += [primals[i] for i in g] + [tangent(i) for i in g if nzs[i]]
    outs = scan_p.bind(*operands, jaxpr=body, num_consts=num_consts + sum(const_nz), num_carry=num_carry + n_ct,
                       length=length, reverse=reverse, unroll=unroll)
    carry, carry_t, ys, ys_t = split_list(outs, num_carry, n_ct, num_ys)
    carry_t, ys_t = iter(carry_t), iter(ys_t)
    out_avals = [*jaxpr.out_avals[:num_carry], *(ShapedArray((length, *a.shape), a.dtype)
                                                  for a in jaxpr.out_avals[num_carry:])]
    t_out = [next(carry_t) if f else Zero(out_avals[k]) for k, f in enumerate(carry_nz)]
    t_out += [next(ys_t) if f else Zero(out_avals[num_carry + k]) for k, f in enumerate(ys_nz)]
    return [*carry, *ys], t_out


# -- partial evaluation -----------------------------------------------------------------------------------
def _scan_partial_eval(trace, tracers, *, jaxpr: ClosedJaxpr, num_consts: int, num_carry: int, length: int,
                       reverse: bool, unroll: int):
    params = dict(jaxpr=jaxpr, num_consts=num_consts, num_carry=num_carry, length=length, reverse=reverse,
                  unroll=unroll)
    uk = [not t.pval.is_known for t in tracers]
    const_uk, init_uk, xs_uk = split_list(uk, num_consts, num_carry)
    num_ys = len(jaxpr.out_avals) - num_carry
    carry_uk = init_uk
    for _ in range(num_carry + 1):
        split = partial_eval_jaxpr(jaxpr, const_uk + carry_uk + xs_uk, instantiate=carry_uk + [False] * num_ys)
        new = [a or b for a, b in zip(carry_uk, split.out_unknowns[:num_carry])]
        if new == carry_uk:
            break
        carry_uk = new
    if all(const_uk + carry_uk + xs_uk):
        return trace.record(scan_p, [trace.instantiate(t) for t in tracers], params)
    repartition = loop_body_repartition()  # NOTE: aot's partitioner choosing what each iteration saves
    if repartition is not None:
        split = repartition(split, const_uk + carry_uk + xs_uk)
    ys_uk = split.out_unknowns[num_carry:]
    n_known_out = sum(1 for u in split.out_unknowns if not u)
    K = split.known.jaxpr
    kin_consts = K.invars[:sum(1 for u in const_uk if not u)]
    res_vars = K.outvars[n_known_out:]
    source = user_source_info()

    # classify the residuals: forwarded operands, loop invariants (hoisted), recomputed from xs, stacked
    invariant = _invariant_vars(K, kin_consts)
    n_kcarry = sum(1 for u in carry_uk if not u)
    kin_xs = K.invars[len(kin_consts) + n_kcarry:]
    from_xs = _recomputable_vars(K, kin_xs, invariant | {id(v) for v in kin_consts})
    kinds = []
    for v, j in zip(res_vars, split.residual_inputs, strict=True):
        if j is not None and j < num_consts:
            kinds.append(("const", j))
        elif j is not None and j >= num_consts + num_carry:
            kinds.append(("xs", j))
        elif isinstance(v, Var) and id(v) in invariant:
            kinds.append(("hoisted", None))
        elif isinstance(v, Var) and id(v) in from_xs:
            kinds.append(("recomputed", None))
        else:
            kinds.append(("stacked", None))
    known_tracers = [t for t, u in zip(tracers, const_uk + carry_uk + xs_uk) if not u]
    known_vals = [t.pval.const for t in known_tracers]
    n_kc = sum(1 for u in const_uk if not u)
    sources = split.residual_sources

    recomputed = _recomputation(K, [v for v, (k, _) in zip(res_vars, kinds) if k == "recomputed"], from_xs, kin_xs)
    hoisted_vars = [v for v, (k, _) in zip(res_vars, kinds) if k == "hoisted"] + recomputed.invariant_inputs
    hoisted_vals = []
    if hoisted_vars:
        H = ClosedJaxpr(Jaxpr(K.constvars, kin_consts, dce(K.eqns, hoisted_vars), hoisted_vars), split.known.consts)
        hoisted_vals = eval_jaxpr(H, *known_vals[:n_kc])
    stacked_vars = [v for v, (k, _) in zip(res_vars, kinds) if k == "stacked"]
    known_outs = K.outvars[:n_known_out]
    for k, v in enumerate(stacked_vars):
        if isinstance(v, Var):
            v.hint = v.hint or f"residual[{k}]"
    K2 = ClosedJaxpr(Jaxpr(K.constvars, K.invars, dce(K.eqns, known_outs + stacked_vars), known_outs + stacked_vars),
                     split.known.consts)
    if known_outs or stacked_vars:
        k_outs = scan_p.bind(*known_vals, jaxpr=K2, num_consts=n_kc, num_carry=n_kcarry, length=length,
                             reverse=reverse, unroll=unroll)
    else:
        k_outs = []
    known_results, stacked_vals = k_outs[:n_known_out], k_outs[n_known_out:]

    # the unknown scan: [intensive residuals, unknown consts] [unknown carry] [unknown xs, extensive residuals];
    # its body first recomputes the recomputed residuals from their inputs (intensive or extensive residuals too)
    U = split.unknown.jaxpr
    n_res = split.num_res
    res_in, rest_in = U.invars[:n_res], U.invars[n_res:]
    uk_consts_in, uk_carry_in, uk_xs_in = split_list(rest_in, sum(const_uk), sum(carry_uk))
    intensive, extensive, int_vals, ext_vals = [], [], [], []
    h_it, s_it = iter(hoisted_vals), iter(stacked_vals)
    known_xs = [t for t, u in zip(tracers[num_consts + num_carry:], xs_uk) if not u]
    for v, k in zip(recomputed.xs_inputs, recomputed.xs_positions):
        extensive.append(v)
        ext_vals.append(known_xs[k])
    rec_out = iter(recomputed.outputs)
    renamed = {}
    for r, (kind, j) in enumerate(kinds):
        src = sources[r] if r < len(sources) else ResidualSource(None, None)
        if kind == "recomputed":
            renamed[id(res_in[r])] = next(rec_out)
        elif kind == "const":
            intensive.append(res_in[r])
            int_vals.append(tracers[j])
        elif kind == "hoisted":
            intensive.append(res_in[r])
            int_vals.append(trace.known(next(h_it), ResidualSource(src.primitive, src.source_info)))
        elif kind == "xs":
            extensive.append(res_in[r])
            ext_vals.append(tracers[j])
        else:
            extensive.append(res_in[r])
            what = f"{src.primitive or 'value'} (scan residual, stacked over {length} iterations)"
            ext_vals.append(trace.known(next(s_it), ResidualSource(what, src.source_info or source)))
    for v in recomputed.invariant_vars:
        intensive.append(v)
        int_vals.append(trace.known(next(h_it), ResidualSource(None, source)))
    u_eqns = recomputed.eqns + rename_inputs(U.eqns, renamed)
    U2 = ClosedJaxpr(Jaxpr(U.constvars, [*intensive, *uk_consts_in, *uk_carry_in, *uk_xs_in, *extensive], u_eqns,
                           [renamed.get(id(v), v) for v in U.outvars]), split.unknown.consts)
    uk_tracers = [trace.instantiate(t) for t, u in zip(tracers, const_uk + carry_uk + xs_uk) if u]
    uc, ucarry, uxs = split_list(uk_tracers, sum(const_uk), sum(carry_uk))
    u_outs = trace.record(scan_p, [*int_vals, *uc, *ucarry, *uxs, *ext_vals],
                          dict(jaxpr=U2, num_consts=len(int_vals) + len(uc), num_carry=len(ucarry), length=length,
                               reverse=reverse, unroll=unroll))
    k_it, u_it = iter(known_results), iter(u_outs)
    out_uk = carry_uk + ys_uk
    known_source = ResidualSource("scan", source)
    return [next(u_it) if u else trace.known(next(k_it), known_source) for u in out_uk]


def _invariant_vars(jaxpr: Jaxpr, const_vars) -> set:
    """Ids of the variables of `jaxpr` computed from `const_vars` (and literals) alone: loop invariants.
    An equation with no operands (`full`, `arange`: a causal mask) is one too."""
    # NOTE: an equation without operands is a constant (random draws take a key operand): computing it once
    # outside the loop saves stacking `length` copies of it as residuals.
    inv = {id(v) for v in const_vars} | {id(v) for v in jaxpr.constvars}
    for eqn in jaxpr.eqns:
        if all(not isinstance(a, Var) or id(a) in inv for a in eqn.inputs):
            inv.update(id(v) for v in eqn.outputs)
    return inv - {id(v) for v in const_vars}


def _recomputable_vars(jaxpr: Jaxpr, xs_vars, invariant: set) -> set:
    """Ids of the variables of the known body computed from its `xs` slices (and loop invariants, `invariant`) by
    `Recompute.CHEAP` equations alone: a transposed weight slice, a dtype conversion of one. Stacking such a
    residual writes a copy of it per iteration that the backward reads back; the unknown body recomputes it from
    the slices it reads anyway (where XLA folds a transpose into the product that reads it: free)."""
    found = {id(v) for v in xs_vars}
    for eqn in jaxpr.eqns:
        if eqn.primitive.recompute is not Recompute.CHEAP:
            continue
        ins = [id(a) for a in eqn.inputs if isinstance(a, Var)]
        if any(i in found for i in ins) and all(i in found or i in invariant for i in ins):
            found.update(id(v) for v in eqn.outputs)
    return found - {id(v) for v in xs_vars}


class _Recomputation(NamedTuple):
    """How the unknown body recomputes residuals (`_recomputable_vars`): `eqns` (the known body's, computing
    `outputs`, one per recomputed residual) read the known `xs` slices `xs_inputs` (at `xs_positions` among the
    known `xs`) and the loop invariants `invariant_inputs` (variables of the known body, computed once outside
    the loop and read as `invariant_vars`)."""

    eqns: list
    outputs: list
    xs_inputs: list
    xs_positions: list
    invariant_inputs: list
    invariant_vars: list


def _recomputation(jaxpr: Jaxpr, residuals: list, recomputable: set, xs_vars) -> _Recomputation:
    live = {id(v) for v in residuals}
    eqns = []
    for eqn in reversed(jaxpr.eqns):
        if any(id(v) in live for v in eqn.outputs):
            eqns.append(eqn)
            live.update(id(a) for a in eqn.inputs if isinstance(a, Var) and id(a) in recomputable)
    eqns.reverse()
    made = {id(v) for e in eqns for v in e.outputs}
    xs_position = {id(v): k for k, v in enumerate(xs_vars)}
    free = list({id(a): a for e in eqns for a in e.inputs if isinstance(a, Var) and id(a) not in made}.values())
    xs_inputs = [v for v in free if id(v) in xs_position]
    invariant_inputs = [v for v in free if id(v) not in xs_position]
    # NOTE: an invariant is read under a fresh variable (it may be a constvar of the known body, which the
    # unknown body does not have)
    invariant_vars = [Var(v.aval) for v in invariant_inputs]
    renamed = {id(v): w for v, w in zip(invariant_inputs, invariant_vars)}
    return _Recomputation(rename_inputs(eqns, renamed), residuals, xs_inputs, [xs_position[id(v)] for v in xs_inputs],
                          invariant_inputs, invariant_vars)


# -- transpose --------------------------------------------------------------------------------------------
def _scan_transpose(cts, *args, jaxpr: ClosedJaxpr, num_consts: int, num_carry: int, length: int, reverse: bool,
                    unroll: int):
    in_avals = jaxpr.in_avals
    consts, init, xs = split_list(args, num_consts, num_carry)
    const_lin = [is_undefined(a) for a in consts]
    xs_lin = [is_undefined(a) for a in xs]
    x_avals = in_avals[num_consts + num_carry:]
    c_avals = in_avals[:num_consts]
    carry_avals = in_avals[num_consts:num_consts + num_carry]
    y_avals = jaxpr.out_avals[num_carry:]
    out_avals = [*jaxpr.out_avals[:num_carry], *(ShapedArray((length, *a.shape), a.dtype) for a in y_avals)]
    cts = list(cts)
    ct_carry = [instantiate(c, a) for c, a in zip(cts[:num_carry], out_avals[:num_carry])]
    ct_ys = [instantiate(c, a) for c, a in zip(cts[num_carry:], out_avals[num_carry:])]
    ires = [a for a, lin in zip(consts, const_lin) if not lin]
    eres = [a for a, lin in zip(xs, xs_lin) if not lin]
    lin_c_avals = [a for a, lin in zip(c_avals, const_lin) if lin]
    n_ires, n_lc = len(ires), len(lin_c_avals)

    def transposed_body(*vals):
        ires_v, ct_consts, ct_c, ct_y, eres_v = split_list(vals, n_ires, n_lc, num_carry, len(y_avals))
        ir, er = iter(ires_v), iter(eres_v)
        body_args = [UndefinedPrimal(a) if lin else next(ir) for a, lin in zip(c_avals, const_lin)]
        body_args += [UndefinedPrimal(a) for a in carry_avals]
        body_args += [UndefinedPrimal(a) if lin else next(er) for a, lin in zip(x_avals, xs_lin)]
        cts_in = backward_pass(jaxpr, [], body_args, [*ct_c, *ct_y], instantiate=True)
        c_lin, c_carry, c_xs = split_list(cts_in, n_lc, num_carry)
        return [*(add_tangents(a, b) for a, b in zip(ct_consts, c_lin, strict=True)), *c_carry, *c_xs]

    t_avals = [get_aval(a) for a in ires] + lin_c_avals + carry_avals + list(y_avals) + [
        a for a, lin in zip(x_avals, xs_lin) if not lin]
    tj = trace_flat(transposed_body, t_avals)
    zeros = [instantiate(Zero(a)) for a in lin_c_avals]
    outs = scan_p.bind(*ires, *zeros, *ct_carry, *ct_ys, *eres, jaxpr=tj, num_consts=n_ires,
                       num_carry=n_lc + num_carry, length=length, reverse=not reverse, unroll=unroll)
    ct_consts, ct_init, ct_xs = split_list(outs, n_lc, num_carry)
    cc, cx = iter(ct_consts), iter(ct_xs)
    result = [next(cc) if lin else None for lin in const_lin]
    result += [ct if is_undefined(a) else None for a, ct in zip(init, ct_init)]
    result += [next(cx) if lin else None for lin in xs_lin]
    return result


# -- dead code --------------------------------------------------------------------------------------------
def _scan_dce(eqn: Eqn, used_outputs: list[bool]) -> Eqn:
    p = eqn.params
    jaxpr, num_consts, num_carry = p["jaxpr"], p["num_consts"], p["num_carry"]
    j = jaxpr.jaxpr
    used_carry, used_ys = _needed_carries(j, num_consts, num_carry, used_outputs), list(used_outputs[num_carry:])
    used_in = used_inputs(j, used_carry + used_ys)
    used_consts, _, used_xs = split_list(used_in, num_consts, num_carry)
    keep_in = used_consts + used_carry + used_xs
    keep_out = used_carry + used_ys
    if all(keep_in) and all(keep_out):
        return eqn
    outvars = [v for v, k in zip(j.outvars, keep_out) if k]
    body = ClosedJaxpr(Jaxpr(j.constvars, [v for v, k in zip(j.invars, keep_in) if k], dce(j.eqns, outvars), outvars),
                       jaxpr.consts)
    params = dict(p, jaxpr=body, num_consts=sum(used_consts), num_carry=sum(used_carry))
    return Eqn(scan_p, [a for a, k in zip(eqn.inputs, keep_in) if k], [v for v, k in zip(eqn.outputs, keep_out) if k],
               params, eqn.source_info)


def _needed_carries(j: Jaxpr, num_consts: int, num_carry: int, used_outputs: list[bool],
                    given=None) -> list[bool]:
    """Which carries the outputs marked in `used_outputs` need, over all iterations (a fixed point); carries marked in
    `given` are computed elsewhere (read, not carried, by these outputs)."""
    given = given or [False] * num_carry
    carry = [u and not g for u, g in zip(used_outputs[:num_carry], given)]
    for _ in range(num_carry + 1):
        read = used_inputs(j, carry + list(used_outputs[num_carry:]))[num_consts:num_consts + num_carry]
        new = [c or (r and not g) for c, r, g in zip(carry, read, given)]
        if new == carry:
            break
        carry = new
    return carry


def _scan_split(eqn: Eqn, first: list[bool], second: list[bool]):
    """The scan as two scans (`aotjax.core.ir.SplitRule`): the first runs the body's part for the outputs `first`
    marks and also returns, stacked over the iterations, the body's values the rest reads (a carried cotangent as it
    enters each iteration, an intermediate product); the second runs the rest of the body on those, carrying only its
    own carries (a tied weight's summed cotangent)."""
    p = eqn.params
    closed, num_consts, num_carry, length = p["jaxpr"], p["num_consts"], p["num_carry"], p["length"]
    j = closed.jaxpr
    carry1 = _needed_carries(j, num_consts, num_carry, first)
    out1 = carry1 + list(first[num_carry:])
    want = [s and not f for s, f in zip(second, out1)]
    if not any(want):
        return None
    carry2 = _needed_carries(j, num_consts, num_carry, want, given=carry1)
    out2 = carry2 + want[num_carry:]
    origin = {id(v): i for i, e in enumerate(j.eqns) for v in e.outputs}
    outvars1 = [v for v, k in zip(j.outvars, out1) if k]
    firsts = {origin[id(e.outputs[0])] for e in dce(j.eqns, outvars1) if e.outputs}
    outvars2 = [v for v, k in zip(j.outvars, out2) if k]
    eqns2 = [e for e in dce(j.eqns, outvars2) if not e.outputs or origin[id(e.outputs[0])] not in firsts]
    # what the second part reads from outside itself: its own carries, the scan's consts and xs, or the first's values
    position = {id(v): i for i, v in enumerate(j.invars)}
    defined2 = {id(v) for e in eqns2 for v in e.outputs}
    constvars = {id(v) for v in j.constvars}
    reads, stacked, seen = set(), [], set()
    for a in [a for e in eqns2 for a in e.inputs] + outvars2:
        if not isinstance(a, Var) or id(a) in defined2 or id(a) in constvars or id(a) in seen:
            continue
        seen.add(id(a))
        i = position.get(id(a))
        if i is not None and (i < num_consts or i >= num_consts + num_carry or carry2[i - num_consts]):
            reads.add(i)  # a const, an xs slice or the second's own carry: passed to it as the scan had it
        else:
            stacked.append(a)  # made by the first part (or a carry it carries, as it enters the iteration)
    # the first scan: its outputs, then the stacked values the second reads
    body1_out = outvars1 + stacked
    eqns1 = dce(j.eqns, body1_out)
    read1 = used_inputs(Jaxpr(j.constvars, j.invars, eqns1, body1_out), [True] * len(body1_out))
    keep1 = read1[:num_consts] + carry1 + read1[num_consts + num_carry:]
    body1 = ClosedJaxpr(Jaxpr(j.constvars, [v for v, k in zip(j.invars, keep1) if k], eqns1, body1_out),
                        closed.consts)
    stacked_out = [Var(ShapedArray((length, *v.aval.shape), v.aval.dtype)) for v in stacked]
    first_eqn = Eqn(scan_p, [a for a, k in zip(eqn.inputs, keep1) if k],
                    [v for v, k in zip(eqn.outputs, out1) if k] + stacked_out,
                    dict(p, jaxpr=body1, num_consts=sum(keep1[:num_consts]), num_carry=sum(carry1)), eqn.source_info)
    # the second scan: the consts and carries it reads, then its xs: the scan's it reads and the stacked values
    keep2 = [i in reads for i in range(len(j.invars))]
    keep2[num_consts:num_consts + num_carry] = carry2
    body2_in = [v for v, k in zip(j.invars, keep2) if k] + stacked
    body2 = ClosedJaxpr(Jaxpr(j.constvars, body2_in, eqns2, outvars2), closed.consts)
    second_eqn = Eqn(scan_p, [a for a, k in zip(eqn.inputs, keep2) if k] + stacked_out,
                     [v for v, k in zip(eqn.outputs, out2) if k],
                     dict(p, jaxpr=body2, num_consts=sum(keep2[:num_consts]), num_carry=sum(carry2)), eqn.source_info)
    return first_eqn, second_eqn


def _scan_describe_output(eqn: Eqn, k: int) -> str:
    """Output `k` of a scan in words: a carry after the last iteration, or what the body computes for a `y`
    (a stacked residual of a split loop: `tanh at model.py:14 (layer), stacked over 48 iterations`)."""
    p = eqn.params
    jaxpr, num_consts, num_carry, length = p["jaxpr"], p["num_consts"], p["num_carry"], p["length"]
    if k < num_carry:
        return f"carry {k} after {length} iterations"
    v = jaxpr.jaxpr.outvars[k]
    invars = jaxpr.jaxpr.invars
    producer = next((e for e in jaxpr.jaxpr.eqns if any(o is v for o in e.outputs)), None)
    if producer is not None:
        at = f" at {producer.source_info}" if producer.source_info is not None else ""
        what = f"{producer.primitive.name}{at}"
    elif any(v is c for c in invars[num_consts:num_consts + num_carry]):
        what = f"the carry {next(i for i, c in enumerate(invars[num_consts:]) if c is v)} entering each iteration"
    else:
        what = "a value of the body"
    return f"{what}, stacked over {length} iterations"


# -- batching ---------------------------------------------------------------------------------------------
def _scan_batch(axis_size, vals, bdims, *, jaxpr: ClosedJaxpr, num_consts: int, num_carry: int, length: int,
                reverse: bool, unroll: int):
    axis = current_axis()
    const_b, init_b, xs_b = split_list([d is not not_mapped for d in bdims], num_consts, num_carry)
    num_ys = len(jaxpr.out_avals) - num_carry

    def batched_body(carry_b):
        return batch_jaxpr(jaxpr, axis, const_b + carry_b + xs_b, instantiate=carry_b + [False] * num_ys)

    carry_b = fixed_point(init_b, lambda carry_b: batched_body(carry_b)[1][:num_carry], "scan")
    body, out_b = batched_body(carry_b)
    consts, init, xs = split_list(vals, num_consts, num_carry)
    const_d, init_d, xs_d = split_list(bdims, num_consts, num_carry)
    consts = [x if d is not_mapped else moveaxis(x, d, 0) for x, d in zip(consts, const_d)]
    init = [matchaxis(d, 0, axis_size, x) if b else x for x, d, b in zip(init, init_d, carry_b)]
    xs = [x if d is not_mapped else moveaxis(x, d, 1) for x, d in zip(xs, xs_d)]
    outs = scan_p.bind(*consts, *init, *xs, jaxpr=body, num_consts=num_consts, num_carry=num_carry, length=length,
                       reverse=reverse, unroll=unroll)
    return outs, front_dims(carry_b) + [1 if b else not_mapped for b in out_b[num_carry:]]


scan_p.describe_output = _scan_describe_output
scan_p.abstract_eval = _scan_abstract_eval
register_lowering(scan_p, _scan_lower)
jvp_rules[scan_p] = _scan_jvp
partial_eval_rules[scan_p] = _scan_partial_eval
transpose_rules[scan_p] = _scan_transpose
dce_rules[scan_p] = _scan_dce
split_rules[scan_p] = _scan_split
batching_rules[scan_p] = _scan_batch


# -- the frontend -----------------------------------------------------------------------------------------
def scan(f: Callable, init: Any, xs: Any = None, length: int | None = None, reverse: bool = False,
         unroll: int | bool = 1):
    """Loop `f: (carry, x) -> (carry, y)` over the leading axis of `xs`, as JAX's `lax.scan`: returns the final
    carry and the `y`s stacked. `init`, `xs` and the results are pytrees of tensors; the body is traced once,
    so a 48-layer `scan(layer, h, stacked_weights)` is one compiled layer run 48 times, and differentiates and
    compiles (`aot`) as a loop.

    PyTorch's eager meaning holds inside the body, as for the Python loop `for i in range(n): carry, ys[i] =
    f(carry, xs[i])`: the carry is the body's own (in-place ops on it are fine; the caller's `init` is never
    written); `x` is a view of `xs[i]` (writing into it writes the caller's `xs`); a tensor the body captures
    and writes in place is written with every iteration's effect.

    >>> def step(h, x):
    ...     h.mul_(0.5).add_(x)
    ...     return h, h.sum()
    >>> h, ys = aotjax.scan(step, aotjax.zeros(2), aotjax.ones(3, 2))
    >>> h, ys
    (tensor([1.75, 1.75]), tensor([2. , 3. , 3.5]))
    """
    init_paths, init_tree = jax.tree_util.tree_flatten_with_path(init)
    init_leaves = [loop_operand(x, "scan", "init") for _, x in init_paths]
    xs_leaves, xs_tree = jax.tree_util.tree_flatten(xs)
    xs_leaves = [loop_operand(x, "scan", "xs") for x in xs_leaves]
    length = _length(xs_leaves, length)
    unroll = _unroll(unroll, length)
    weak = [isinstance(x, PYTHON_SCALARS) for _, x in init_paths]  # NOTE: promoted if the body widens them
    carry_avals = []
    x_avals = [ShapedArray(x.shape[1:], x.dtype) for x in xs_leaves]
    nc = len(init_leaves)
    y_tree = []

    def flat_body(*args):
        carry = jax.tree_util.tree_unflatten(init_tree, args[:nc])
        x = jax.tree_util.tree_unflatten(xs_tree, args[nc:])
        out = f(carry, x)
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise TypeError(f"scan: the body must return a pair (carry, y), got {kind_of(out)}{where()}")
        new_carry, y = out
        leaves = check_carry(new_carry, init_tree, init_paths, carry_avals, op="scan", body="the body", init="init",
                             weak=weak)
        y_leaves, tree = jax.tree_util.tree_flatten(y)
        y_tree.append(tree)
        return [*leaves, *(as_tensor(v) for v in y_leaves)]

    def trace():
        carry_avals[:] = [get_aval(x) for x in init_leaves]
        y_tree.clear()
        strides = [getattr(x, "_strides", None) for x in init_leaves] + [_slice_strides(x) for x in xs_leaves]
        return trace_body(flat_body, carry_avals + x_avals, "scan body", strides)

    body = trace_promoting(trace, init_leaves, weak)
    written_x = [i - nc for i in body.written_inputs if i >= nc]
    _check_captured_aliasing(body, xs_leaves, written_x)
    _check_xs_aliasing(xs_leaves, written_x)

    # the pure primitive: the written captures become carries (each iteration sees the last one's writes)
    n_cap = body.num_captured
    wc = body.written_captured
    ro = [k for k in range(n_cap) if k not in wc]
    j = body.jaxpr.jaxpr
    cap_in, carry_in, x_in = split_list(j.invars, n_cap, nc)
    n_out = body.num_outputs
    outs, new_x, new_caps = split_list(j.outvars, n_out, len(body.written_inputs))
    new_x = [v for i, v in zip(body.written_inputs, new_x) if i >= nc]
    jaxpr = ClosedJaxpr(Jaxpr([], [*(cap_in[k] for k in ro), *(cap_in[k] for k in wc), *carry_in, *x_in], j.eqns,
                              [*new_caps, *outs[:nc], *outs[nc:], *new_x]), [])
    operands = [*(body.captured[k] for k in ro), *(body.captured[k] for k in wc), *init_leaves, *xs_leaves]
    results = scan_p.bind(*operands, jaxpr=jaxpr, num_consts=len(ro), num_carry=len(wc) + nc, length=length,
                          reverse=reverse, unroll=unroll)
    cap_out, carry_out, rest = split_list(results, len(wc), nc)
    ys, xs_out = rest[:len(rest) - len(written_x)], rest[len(rest) - len(written_x):]
    for k, v in zip(wc, cap_out):
        write_back(body.captured[k], v)
    for i, v in zip(written_x, xs_out):
        write_back(xs_leaves[i], v)
    return (jax.tree_util.tree_unflatten(init_tree, carry_out), jax.tree_util.tree_unflatten(y_tree[0], ys))


def _static_int(value, what: str) -> int:
    """`value` as a Python int (a scan's shape is static), or a TypeError naming `what` (`length`, `unroll`)."""
    try:
        return operator.index(value)
    except TypeError:
        traced = ("; it fixes the shape of the loop, so it cannot be a traced value (pass it with static_argnums)"
                  if isinstance(value, Tracer) else "")
        raise TypeError(f"scan: {what} must be a Python int, got {kind_of(value)}{where()}{traced}") from None


def _length(xs_leaves, length) -> int:
    lengths = set()
    for x in xs_leaves:
        if not x.shape:
            raise ShapeError(f"scan got value with no leading axis to scan over: an xs leaf of shape [] (0-d)"
                             f"{where()}")
        lengths.add(x.shape[0])
    if length is not None:
        length = _static_int(length, "length")
        if lengths and lengths != {length}:
            raise ShapeError(f"scan: length={length} but the xs have leading axes {sorted(lengths)}{where()}")
        if length < 0:
            raise ValueError(f"scan: length must be >= 0, got {length}{where()}")
        return length
    if not lengths:
        raise ValueError(f"scan: with no xs, the number of iterations must be given (length=...){where()}")
    if len(lengths) > 1:
        raise ShapeError(f"scan: the xs leaves have different leading axes {sorted(lengths)}; each must have the "
                         f"scan's length{where()}")
    return lengths.pop()


def _unroll(unroll, length: int) -> int:
    if isinstance(unroll, (bool, np.bool_)):
        return max(length, 1) if unroll else 1
    unroll = _static_int(unroll, "unroll")
    if unroll < 1:
        raise ValueError(f"scan: unroll must be a positive int or a bool, got {unroll}{where()}")
    return unroll


def _slice_strides(x):
    s = getattr(x, "_strides", None)
    return tuple(s[1:]) if s is not None else None


def _check_captured_aliasing(body, xs_leaves, written_x) -> None:
    xs_keys = {memory_key(x): i for i, x in enumerate(xs_leaves)}
    for k, key in enumerate(body.captured_keys[:len(body.captured)]):
        i = xs_keys.get(key)
        if i is not None and (written_x or k in body.written_captured):
            raise UnsupportedError(
                f"scan: the body reads a tensor captured from outside that shares memory with xs leaf {i}, and writes "
                f"into {'its x' if written_x else 'the captured tensor'}{where()}; the writes of one iteration would "
                f"have to show through the other's view. Read x (the view of xs[i]) instead of the captured tensor, "
                f"or scan over a copy (`xs.clone()`).")


def _check_xs_aliasing(xs_leaves, written_x) -> None:
    if not written_x:
        return
    seen = {}
    for i, x in enumerate(xs_leaves):
        key = memory_key(x)
        if key in seen and (i in written_x or seen[key] in written_x):
            raise UnsupportedError(
                f"scan: xs leaves {seen[key]} and {i} share memory and the body writes into its x{where()}; scan over "
                f"one of them, or over copies.")
        seen.setdefault(key, i)
