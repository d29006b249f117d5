"""Rematerialization primitives: `checkpoint` (a region whose intermediates the backward recomputes
instead of saving, per a policy), `checkpoint_name` (a named value policies can refer to) and
`optimization_barrier` (keeps XLA from merging a recomputation with the forward computation).

`checkpoint` carries the region's jaxpr (no consts: closed-over values are explicit operands) and a
policy `policy(prim, *avals, **params) -> bool` saying which intermediates may be saved. Its rules:

- lowering: evaluate the region;
- jvp: a `checkpoint` of the region's jvp (so the region survives differentiation);
- partial evaluation (the split into forward and tangent programs): the known part computes the
  outputs and the residuals the policy lets it save; the unknown part is a `checkpoint` of a region
  that recomputes every other residual from the region's inputs, then runs the tangent program;
- transpose: run that region backwards; the recomputation happens there, in the backward program,
  behind an `optimization_barrier` (with `prevent_cse`), so that XLA cannot reuse forward values.
"""
from __future__ import annotations

import jax

from aotjax.core.avals import get_aval
from aotjax.core.eval_jaxpr import eval_jaxpr
from aotjax.core.ir import ClosedJaxpr, Eqn, Jaxpr, Var, dce_jaxpr, dce_rules, prune_jaxpr
from aotjax.core.primitive import Primitive, Recompute, jaxpr_flops, output_size_flops
from aotjax.interpreters.ad_util import Zero
from aotjax.interpreters.batching import (
    at_front,
    batch_jaxpr,
    batching_rules,
    current_axis,
    defvectorized,
    front_dims,
)
from aotjax.interpreters.jvp import jvp_flat, jvp_rules
from aotjax.interpreters.lowering import eval_jaxpr_jax, register_lowering
from aotjax.interpreters.partial_eval import PartialVal, ResidualSource, partial_eval_flat, partial_eval_rules
from aotjax.interpreters.trace import trace_flat
from aotjax.interpreters.transpose import backward_pass, is_undefined, transpose_rules
from aotjax.ops.base.layout import preserve_layout

__all__ = ["checkpoint_p", "name_p", "optimization_barrier_p"]


# -- optimization_barrier ----------------------------------------------------------------------------
# an identity: cheap, and linear in every operand
optimization_barrier_p = Primitive("optimization_barrier", multiple_results=True, recompute=Recompute.CHEAP,
                                   flops=output_size_flops, linear=True)
optimization_barrier_p.abstract_eval = lambda *avals: list(avals)
register_lowering(optimization_barrier_p, lambda *xs: list(jax.lax.optimization_barrier(tuple(xs))))
jvp_rules[optimization_barrier_p] = lambda primals, tangents: (optimization_barrier_p.bind(*primals), list(tangents))
transpose_rules[optimization_barrier_p] = lambda cts, *args: list(cts)
batching_rules[optimization_barrier_p] = lambda axis_size, vals, bdims: (
    optimization_barrier_p.bind(*vals), list(bdims))


# -- checkpoint_name -----------------------------------------------------------------------------------
name_p = Primitive("checkpoint_name", recompute=Recompute.CHEAP, flops=output_size_flops, linear=(0,))  # an identity
name_p.abstract_eval = lambda x, *, name: x
name_p.layout_rule = preserve_layout  # NOTE: naming a value keeps its layout, so view-or-copy decisions stay
register_lowering(name_p, lambda x, *, name: x)
jvp_rules[name_p] = lambda primals, tangents, *, name: ([name_p.bind(primals[0], name=name)], [tangents[0]])
transpose_rules[name_p] = lambda ct, x, *, name: [ct]
defvectorized(name_p)


# -- checkpoint ----------------------------------------------------------------------------------------
# NOTE: as one equation, a region is saved like a call (it is recomputed inside when differentiated, per its
# policy); it is linear in the operands its body is linear in.
checkpoint_p = Primitive("checkpoint", multiple_results=True, recompute=Recompute.EXPENSIVE, linear=True,
                         higher_order=True,
                         flops=lambda in_avals, out_avals, *, jaxpr, **_: jaxpr_flops(jaxpr))


def _checkpoint_abstract_eval(*avals, jaxpr: ClosedJaxpr, policy, prevent_cse: bool):
    return list(jaxpr.out_avals)


def _checkpoint_lower(*args, jaxpr: ClosedJaxpr, policy, prevent_cse: bool):
    return eval_jaxpr_jax(jaxpr.jaxpr, jaxpr.consts, args)


def _checkpoint_jvp(primals, tangents, *, jaxpr: ClosedJaxpr, policy, prevent_cse: bool):
    nonzero = [not isinstance(t, Zero) for t in tangents]
    n = len(primals)

    def region_jvp(*args):
        ts = iter(args[n:])
        p_out, t_out = jvp_flat(lambda *a: eval_jaxpr(jaxpr, *a), list(args[:n]),
                                [next(ts) if nz else None for nz in nonzero])
        return [*p_out, *t_out]

    avals = [get_aval(p) for p in primals] + [get_aval(t) for t, nz in zip(tangents, nonzero) if nz]
    jvp_jaxpr = trace_flat(region_jvp, avals)
    outs = checkpoint_p.bind(*primals, *[t for t, nz in zip(tangents, nonzero) if nz], jaxpr=jvp_jaxpr,
                             policy=policy, prevent_cse=prevent_cse)
    m = len(jaxpr.out_avals)
    return outs[:m], outs[m:]


def _producers(jaxpr: Jaxpr) -> dict:
    return {id(v): eqn for eqn in jaxpr.eqns for v in eqn.outputs}


def _saveable(policy, eqn) -> bool:
    return bool(policy(eqn.primitive, *[a.aval for a in eqn.inputs], **eqn.params))


def _checkpoint_partial_eval(trace, tracers, *, jaxpr: ClosedJaxpr, policy, prevent_cse: bool):
    known = [t.pval.is_known for t in tracers]
    known_avals = [t.aval for t, k in zip(tracers, known) if k]
    split = {}

    def known_part(*known_vals):  # known inputs -> known outputs + residuals, traced into a jaxpr
        it = iter(known_vals)
        pvals = [PartialVal.known(next(it)) if k else PartialVal.unknown(t.aval) for t, k in zip(tracers, known)]
        unknown_jaxpr, pvals_out, residuals = partial_eval_flat(lambda *a: eval_jaxpr(jaxpr, *a), pvals)
        split.update(unknown=unknown_jaxpr, out_known=[pv.is_known for pv in pvals_out])
        return [pv.const for pv in pvals_out if pv.is_known] + residuals

    K = trace_flat(known_part, known_avals)
    U, out_known = split["unknown"], split["out_known"]
    n_kout = sum(out_known)
    kj = K.jaxpr
    res_vars = kj.outvars[n_kout:]
    saved, recompute = _plan_remat(kj, res_vars, policy)

    # the forward: the known outputs and the values the policy saves, computed now (below this trace)
    known_vals = [t.pval.const for t, k in zip(tracers, known) if k]
    forward = dce_jaxpr(ClosedJaxpr(Jaxpr(kj.constvars, kj.invars, kj.eqns, [*kj.outvars[:n_kout], *saved]),
                                    K.consts))
    k_outs = eval_jaxpr(forward, *known_vals)
    producers = _producers(kj)
    saved_tracers = [trace.known(val, _source(producers.get(id(v)))) for v, val in zip(saved, k_outs[n_kout:])]

    # the tangent side: recompute the other residuals from the known inputs and the saved values, then run
    # the unknown program
    n_known, n_saved = len(known_vals), len(saved)

    # NOTE: the recomputation is the known program cut to the chosen equations: its inputs are the
    # region's known inputs and the saved values, its outputs the residuals.
    recompute_jaxpr = ClosedJaxpr(Jaxpr(kj.constvars, [*kj.invars, *saved],
                                        [e for e in kj.eqns if id(e) in recompute], res_vars), K.consts)

    def recompute_then_unknown(*args):
        res = eval_jaxpr(recompute_jaxpr, *args[:n_known + n_saved])
        return eval_jaxpr(U, *res, *args[n_known + n_saved:])

    unknown_tracers = [trace.instantiate(t) for t, k in zip(tracers, known) if not k]
    known_tracers = [t for t, k in zip(tracers, known) if k]
    r_avals = [t.aval for t in known_tracers] + [t.aval for t in saved_tracers] + [t.aval for t in unknown_tracers]
    R = dce_jaxpr(trace_flat(recompute_then_unknown, r_avals))
    u_outs = trace.record(checkpoint_p, [*known_tracers, *saved_tracers, *unknown_tracers],
                          dict(jaxpr=R, policy=policy, prevent_cse=prevent_cse))
    k_it, u_it = iter(k_outs[:n_kout]), iter(u_outs)
    return [trace.known(next(k_it)) if kn else next(u_it) for kn in out_known]


def _plan_remat(jaxpr: Jaxpr, res_vars, policy) -> tuple[list, set]:
    """Which values of the known program to save (outputs of equations the policy allows) and which
    equations the backward recomputes (the others that the residuals need), walking back from the
    residuals; the region's inputs are always available."""
    producers = _producers(jaxpr)
    saved, recompute, seen = [], set(), set()
    stack = [v for v in res_vars if isinstance(v, Var)]
    while stack:
        v = stack.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        eqn = producers.get(id(v))
        if eqn is None:
            continue  # an input (or constant) of the region
        if _saveable(policy, eqn):
            saved.append(v)
        else:
            recompute.add(id(eqn))
            stack.extend(a for a in eqn.inputs if isinstance(a, Var))
    order = {id(v): i for i, e in enumerate(jaxpr.eqns) for v in e.outputs}
    return sorted(saved, key=lambda v: order[id(v)]), recompute


def _source(eqn) -> ResidualSource:
    if eqn is None:
        return ResidualSource(None, None)
    return ResidualSource(eqn.primitive.name, eqn.source_info)


def _checkpoint_transpose(cts, *args, jaxpr: ClosedJaxpr, policy, prevent_cse: bool):
    known = [a for a in args if not is_undefined(a)]
    if prevent_cse and known:
        # NOTE: a barrier on the recomputation's inputs: without it XLA's CSE merges the recomputed
        # values with the forward's, and they are saved after all.
        arrays = [i for i, a in enumerate(known) if not isinstance(a, (bool, int, float, complex))]
        barriered = optimization_barrier_p.bind(*[known[i] for i in arrays])
        for i, b in zip(arrays, barriered):
            known[i] = b
    it = iter(known)
    ins = [a if is_undefined(a) else next(it) for a in args]
    cts = [c for c in (cts if isinstance(cts, (list, tuple)) else [cts])]
    cts_in = iter(backward_pass(jaxpr, [], ins, cts))
    return [next(cts_in) if is_undefined(a) else None for a in args]


def _checkpoint_batch(axis_size, vals, bdims, *, jaxpr: ClosedJaxpr, policy, prevent_cse: bool):
    vals, in_batched = at_front(vals, bdims)
    batched, out_batched = batch_jaxpr(jaxpr, current_axis(), in_batched)
    outs = checkpoint_p.bind(*vals, jaxpr=batched, policy=policy, prevent_cse=prevent_cse)
    return outs, front_dims(out_batched)


def _checkpoint_dce(eqn: Eqn, used_outputs: list[bool]) -> Eqn:
    """A region computing only its used outputs, from the operands those read."""
    if all(used_outputs):
        return eqn
    body, used_inputs = prune_jaxpr(eqn.params["jaxpr"], used_outputs)
    return Eqn(checkpoint_p, [a for a, u in zip(eqn.inputs, used_inputs) if u],
               [v for v, u in zip(eqn.outputs, used_outputs) if u], dict(eqn.params, jaxpr=body), eqn.source_info)


checkpoint_p.abstract_eval = _checkpoint_abstract_eval
dce_rules[checkpoint_p] = _checkpoint_dce
register_lowering(checkpoint_p, _checkpoint_lower)
jvp_rules[checkpoint_p] = _checkpoint_jvp
partial_eval_rules[checkpoint_p] = _checkpoint_partial_eval
transpose_rules[checkpoint_p] = _checkpoint_transpose
batching_rules[checkpoint_p] = _checkpoint_batch
