"""`while_loop` and `fori_loop`: a loop that runs while a condition holds, as one higher-order primitive.

`while_p` has operands `cond_consts, body_consts, init` (`cond_nconsts`, `body_nconsts`, the rest) and params
`cond_jaxpr`, the condition `(cond_consts, carry) -> bool[]`, and `body_jaxpr`, the body `(body_consts, carry)
-> carry` (both pure, no constants); its results are the final carry. JAX's `lax.while_loop` is the model; its
rules, all here:

- lowering: `jax.lax.while_loop` (eager mode runs one compiled loop, with a data-dependent trip count);
- jvp: a fixed point on which carries have nonzero tangents, then one loop carrying the primals and those
  tangents; the condition reads the primals only;
- partial evaluation (what `linearize` needs): when the condition depends on known values only, a loop of the
  known carries computes the known results now, and the unknown results come from the **whole** loop, recorded
  on all its operands (the known ones then read as residuals). No residual is saved per iteration: the trip
  count is unknown, so there is nowhere to stack them;
- transpose: reverse mode needs each iteration's residuals, hence the trip count: it raises JAX's error,
  pointing to `scan` and to `fori_loop` with static bounds (which is a `scan`);
- dead-code elimination: a fixed point on the carries something reads; what the condition reads is always used;
- batching (vmap): a fixed point on which carries are batched. With an unbatched condition, a loop of the
  batched body. With a batched one the examples stop at different trips: every carry is batched, the loop runs
  while any example's condition holds, and a trip updates only the examples whose condition holds (the others
  keep their last value, as their own loop would). A body with run-time checks gives the examples that have
  stopped the operands of one that has not (`stand_in`), so that a check fails only for an example still looping.

The frontend (`while_loop`) traces `cond_fun` and `body_fun` once each, functionalized
(`aotjax.ops.control_flow._body`), and restores PyTorch's eager meaning, as for the Python loop `val = init_val;
while cond_fun(val): val = body_fun(val)`: the carry is the body's own (in-place ops on it are fine; the caller's
`init_val` is never written); a tensor the body captures and writes in place is carried through the loop (the
condition reads the carried value) and written back to the caller. The condition must be pure.
"""
from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from aotjax.core.avals import PYTHON_SCALARS, ShapedArray, canonicalize_dtype, default_int_dtype, get_aval
from aotjax.core.checks import check_record, lowering_checks
from aotjax.core.errors import DTypeError, ShapeError, UnsupportedError
from aotjax.core.eval_jaxpr import eval_jaxpr
from aotjax.core.interpreter import Tracer
from aotjax.core.ir import ClosedJaxpr, Eqn, Jaxpr, Var, dce, dce_rules, used_inputs, uses_primitive
from aotjax.core.primitive import Primitive, Recompute, jaxpr_flops
from aotjax.core.source_info import user_source_info, where
from aotjax.interpreters.ad_util import Zero, instantiate
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
from aotjax.interpreters.lowering import eval_jaxpr_jax, eval_sub_jaxpr, register_lowering
from aotjax.interpreters.partial_eval import ResidualSource, partial_eval_jaxpr, partial_eval_rules
from aotjax.interpreters.trace import trace_flat
from aotjax.interpreters.transpose import transpose_rules
from aotjax.ops.base.data import as_tensor
from aotjax.ops.control_flow._body import Body, trace_body, write_back
from aotjax.ops.control_flow._common import (
    WeakCarry,
    check_carry,
    differentiable,
    fixed_point,
    kind_of,
    loop_operand,
    permute,
    select_examples,
    split_list,
    stand_in,
    trace_promoting,
)
from aotjax.ops.control_flow.scan import scan
from aotjax.ops.creation.factories import full
from aotjax.ops.indexing.subscripts import check_index_p
from aotjax.ops.reduce.reductions import reduce_or_p
from aotjax.tensor import Tensor

__all__ = ["while_loop", "fori_loop", "while_p"]


def _while_flops(in_avals, out_avals, *, cond_jaxpr: ClosedJaxpr, body_jaxpr: ClosedJaxpr, **_) -> float:
    # NOTE: one trip of the condition and the body: the trip count is unknown until the loop runs.
    return jaxpr_flops(cond_jaxpr) + jaxpr_flops(body_jaxpr)


# NOTE: a loop is saved rather than recomputed (its cost is an unknown number of bodies). It is linear in the
# tangent carries of a linearized loop, but that is never transposable: its transpose rule raises.
while_p = Primitive("while", multiple_results=True, recompute=Recompute.EXPENSIVE, linear=True, flops=_while_flops,
                    higher_order=True)


def _same_types(got, expected) -> bool:
    return len(got) == len(expected) and all(g.shape == e.shape and g.dtype == e.dtype
                                             for g, e in zip(got, expected))


def _types(avals) -> str:
    return ", ".join(a.str_short() for a in avals) or "nothing"


def _while_abstract_eval(*avals, cond_jaxpr: ClosedJaxpr, body_jaxpr: ClosedJaxpr, cond_nconsts: int,
                         body_nconsts: int):
    cond_consts, body_consts, init = split_list(avals, cond_nconsts, body_nconsts)
    checks = [("the condition's inputs", cond_jaxpr.in_avals, [*cond_consts, *init]),
              ("the body's inputs", body_jaxpr.in_avals, [*body_consts, *init]),
              ("the body's outputs", body_jaxpr.out_avals, init)]
    for what, program, operands in checks:
        if not _same_types(program, operands):
            raise TypeError(f"while: {what} {_types(program)} do not match the operands {_types(operands)}")
    pred = cond_jaxpr.out_avals
    if len(pred) != 1 or pred[0].shape != () or pred[0].dtype != np.bool_:
        raise TypeError(f"while: the condition must return one bool[], got {_types(pred)}")
    return [ShapedArray(a.shape, a.dtype) for a in init]


def _while_lower(*args, cond_jaxpr: ClosedJaxpr, body_jaxpr: ClosedJaxpr, cond_nconsts: int, body_nconsts: int):
    dtypes = [a.dtype for a in (*cond_jaxpr.in_avals[:cond_nconsts], *body_jaxpr.in_avals)]
    args = [jnp.asarray(a, dtype=d) for a, d in zip(args, dtypes, strict=True)]
    cond_consts, body_consts, init = split_list(args, cond_nconsts, body_nconsts)
    carry_dtypes = [a.dtype for a in body_jaxpr.out_avals]

    checked = check_record() is not None

    def cond(carry):
        # NOTE: a checked program: the condition's own checks raise through checkify, but cannot pass a predicate
        # out of it (a while condition returns one value), so the caller's guard does not see them.
        with lowering_checks():
            (pred,) = eval_jaxpr_jax(cond_jaxpr.jaxpr, cond_jaxpr.consts, [*cond_consts, *carry[:len(init)]])
        return pred

    def body(carry):
        # NOTE: a checked program: the body's checks pass out of the loop as one more carry (see scan's lowering)
        outs, ok = eval_sub_jaxpr(body_jaxpr, [*body_consts, *carry[:len(init)]])
        outs = [jnp.asarray(o, dtype=d) for o, d in zip(outs, carry_dtypes, strict=True)]  # NOTE: no weak types
        return [*outs, jnp.logical_and(carry[-1], ok)] if checked else outs

    out = jax.lax.while_loop(cond, body, [*init, jnp.asarray(True)] if checked else list(init))
    if checked:
        check_record().predicates.append(out[-1])
        out = out[:-1]
    return list(out)


def _with_unread_inputs(closed: ClosedJaxpr, avals) -> ClosedJaxpr:
    """`closed` taking extra trailing inputs of `avals` that it does not read (a condition given the tangents)."""
    j = closed.jaxpr
    return ClosedJaxpr(Jaxpr(j.constvars, [*j.invars, *(Var(a) for a in avals)], j.eqns, j.outvars), closed.consts)


# -- jvp ---------------------------------------------------------------------------------------------------
def _nonzero_carries(body_jaxpr: ClosedJaxpr, body_const_nz: list[bool], init_nz: list[bool]) -> list[bool]:
    """The fixed point: a carry's tangent is nonzero if its init's is, or if the body makes it so from the
    nonzero tangents of the constants and the carries."""
    carry_avals = body_jaxpr.out_avals
    carry_nz = differentiable(init_nz, carry_avals)
    for _ in range(len(carry_nz) + 1):
        _, out_nz = jvp_jaxpr(body_jaxpr, body_const_nz + carry_nz, instantiate=carry_nz)
        new = differentiable([a or b for a, b in zip(carry_nz, out_nz)], carry_avals)
        if new == carry_nz:
            return carry_nz
        carry_nz = new
    raise AssertionError("while: the fixed point on nonzero tangents was not reached")


def _while_jvp(primals, tangents, *, cond_jaxpr: ClosedJaxpr, body_jaxpr: ClosedJaxpr, cond_nconsts: int,
               body_nconsts: int):
    params = dict(cond_jaxpr=cond_jaxpr, body_jaxpr=body_jaxpr, cond_nconsts=cond_nconsts, body_nconsts=body_nconsts)
    carry_avals = body_jaxpr.out_avals
    nz = [not isinstance(t, Zero) for t in tangents]
    _, body_const_nz, init_nz = split_list(nz, cond_nconsts, body_nconsts)
    body_const_nz = differentiable(body_const_nz, body_jaxpr.in_avals[:body_nconsts])
    carry_nz = _nonzero_carries(body_jaxpr, body_const_nz, init_nz)
    if not any(carry_nz):
        return while_p.bind(*primals, **params), [Zero(a) for a in carry_avals]
    body_jvp, out_nz = jvp_jaxpr(body_jaxpr, body_const_nz + carry_nz, instantiate=carry_nz)
    assert out_nz == carry_nz, (out_nz, carry_nz)
    # the body's jvp takes [consts, carry, const tangents, carry tangents]: the loop's layout is [consts, const
    # tangents] [carry, carry tangents]
    nb, nc, nbt, nct = body_nconsts, len(carry_avals), sum(body_const_nz), sum(carry_nz)
    consts_at, carry_at, const_t_at, carry_t_at = split_list(range(nb + nc + nbt + nct), nb, nc, nbt)
    body_jvp = permute(body_jvp, consts_at + const_t_at + carry_at + carry_t_at, range(nc + nct))
    cond_jvp = _with_unread_inputs(cond_jaxpr, [a for a, f in zip(carry_avals, carry_nz) if f])
    cond_consts, body_consts, init = split_list(primals, cond_nconsts, body_nconsts)
    _, body_const_t, init_t = split_list(tangents, cond_nconsts, body_nconsts)
    const_t = [t for t, f in zip(body_const_t, body_const_nz) if f]
    carry_t = [instantiate(t, a) for t, a, f in zip(init_t, carry_avals, carry_nz) if f]
    outs = while_p.bind(*cond_consts, *body_consts, *const_t, *init, *carry_t, cond_jaxpr=cond_jvp,
                        body_jaxpr=body_jvp, cond_nconsts=cond_nconsts, body_nconsts=nb + nbt)
    carry, carry_t_out = outs[:nc], iter(outs[nc:])
    return carry, [next(carry_t_out) if f else Zero(a) for f, a in zip(carry_nz, carry_avals)]


# -- partial evaluation -----------------------------------------------------------------------------------
def _unknown_carries(body_jaxpr: ClosedJaxpr, body_const_uk: list[bool], init_uk: list[bool]) -> list[bool]:
    """The fixed point: a carry is unknown if its init is, or if the body computes it from unknown values."""
    carry_uk = list(init_uk)
    for _ in range(len(carry_uk) + 1):
        split = partial_eval_jaxpr(body_jaxpr, body_const_uk + carry_uk, instantiate=carry_uk)
        new = [a or b for a, b in zip(carry_uk, split.out_unknowns)]
        if new == carry_uk:
            return carry_uk
        carry_uk = new
    raise AssertionError("while: the fixed point on unknown carries was not reached")


def _known_part(closed: ClosedJaxpr, unknowns: list[bool], instantiate: bool | list[bool] = False
                ) -> tuple[ClosedJaxpr, list[bool]]:
    """The program computing the outputs of `closed` that depend on the inputs not marked in `unknowns` alone (it
    takes those inputs) and are not marked in `instantiate`, and which outputs are unknown."""
    split = partial_eval_jaxpr(closed, unknowns, instantiate)
    n_known = split.out_unknowns.count(False)
    k = split.known.jaxpr
    outs = k.outvars[:n_known]  # NOTE: without the residuals: a loop saves none
    return ClosedJaxpr(Jaxpr(k.constvars, k.invars, dce(k.eqns, outs), outs), split.known.consts), split.out_unknowns


def _while_partial_eval(trace, tracers, *, cond_jaxpr: ClosedJaxpr, body_jaxpr: ClosedJaxpr, cond_nconsts: int,
                        body_nconsts: int):
    params = dict(cond_jaxpr=cond_jaxpr, body_jaxpr=body_jaxpr, cond_nconsts=cond_nconsts, body_nconsts=body_nconsts)
    uk = [not t.pval.is_known for t in tracers]
    cond_const_uk, body_const_uk, init_uk = split_list(uk, cond_nconsts, body_nconsts)
    carry_uk = _unknown_carries(body_jaxpr, body_const_uk, init_uk)
    known_cond, cond_uk = _known_part(cond_jaxpr, cond_const_uk + carry_uk)
    if cond_uk[0] or all(carry_uk):
        return trace.record(while_p, [trace.instantiate(t) for t in tracers], params)
    # NOTE: an unknown carry stays unknown even where the body makes it from known values alone (a constant)
    known_body, _ = _known_part(body_jaxpr, body_const_uk + carry_uk, instantiate=carry_uk)
    cond_consts, body_consts, init = split_list(tracers, cond_nconsts, body_nconsts)
    known = [[t.pval.const for t in group if t.pval.is_known] for group in (cond_consts, body_consts)]
    known_init = [t.pval.const for t, u in zip(init, carry_uk) if not u]
    known_outs = iter(while_p.bind(*known[0], *known[1], *known_init, cond_jaxpr=known_cond, body_jaxpr=known_body,
                                   cond_nconsts=len(known[0]), body_nconsts=len(known[1])))
    # NOTE: the unknown results re-run the whole loop, the known carries included (remat-like): the condition
    # needs them at every trip, and no per-iteration value can be saved for an unknown trip count.
    unknown_outs = trace.record(while_p, [trace.instantiate(t) for t in tracers], params)
    source = ResidualSource("while", user_source_info())
    return [u_out if u else trace.known(next(known_outs), source) for u_out, u in zip(unknown_outs, carry_uk)]


# -- transpose --------------------------------------------------------------------------------------------
def _while_transpose(cts, *args, **params):
    raise ValueError("Reverse-mode differentiation does not work for lax.while_loop or lax.fori_loop with dynamic "
                     "start/stop values. Try using lax.scan, or using fori_loop with static start/stop."
                     f"{where()}")


# -- dead code --------------------------------------------------------------------------------------------
def _used_carries(cond_jaxpr: ClosedJaxpr, body_jaxpr: ClosedJaxpr, cond_nconsts: int, body_nconsts: int,
                  used_outputs) -> tuple[list[bool], list[bool]]:
    """The fixed point: a carry is used if its result is, if the condition reads it, or if the body computes a
    used carry from it. Returns the used carries and the used body constants."""
    cond_reads = used_inputs(cond_jaxpr.jaxpr, [True])[cond_nconsts:]
    used_carry = [a or b for a, b in zip(used_outputs, cond_reads)]
    for _ in range(len(used_carry) + 1):
        used_in = used_inputs(body_jaxpr.jaxpr, used_carry)
        new = [a or b for a, b in zip(used_carry, used_in[body_nconsts:])]
        if new == used_carry:
            return used_carry, used_in[:body_nconsts]
        used_carry = new
    raise AssertionError("while: the fixed point on used carries was not reached")


def _pruned(closed: ClosedJaxpr, keep_in, keep_out) -> ClosedJaxpr:
    j = closed.jaxpr
    outs = [v for v, k in zip(j.outvars, keep_out) if k]
    return ClosedJaxpr(Jaxpr(j.constvars, [v for v, k in zip(j.invars, keep_in) if k], dce(j.eqns, outs), outs),
                       closed.consts)


def _while_dce(eqn: Eqn, used_outputs: list[bool]) -> Eqn:
    p = eqn.params
    cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts = (p["cond_jaxpr"], p["body_jaxpr"], p["cond_nconsts"],
                                                          p["body_nconsts"])
    used_carry, used_body_consts = _used_carries(cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts, used_outputs)
    used_cond_consts = used_inputs(cond_jaxpr.jaxpr, [True])[:cond_nconsts]
    keep = used_cond_consts + used_body_consts + used_carry
    if all(keep):
        return eqn
    cond = _pruned(cond_jaxpr, used_cond_consts + used_carry, [True])
    body = _pruned(body_jaxpr, used_body_consts + used_carry, used_carry)
    params = dict(p, cond_jaxpr=cond, body_jaxpr=body, cond_nconsts=sum(used_cond_consts),
                  body_nconsts=sum(used_body_consts))
    return Eqn(while_p, [a for a, k in zip(eqn.inputs, keep) if k],
               [v for v, k in zip(eqn.outputs, used_carry) if k], params, eqn.source_info)


# -- batching ---------------------------------------------------------------------------------------------
def _while_batch(axis_size, vals, bdims, *, cond_jaxpr: ClosedJaxpr, body_jaxpr: ClosedJaxpr, cond_nconsts: int,
                 body_nconsts: int):
    axis = current_axis()
    cond_const_b, body_const_b, init_b = split_list([d is not not_mapped for d in bdims], cond_nconsts, body_nconsts)
    carry_b = fixed_point(init_b, lambda carry_b: batch_jaxpr(body_jaxpr, axis, body_const_b + carry_b,
                                                              instantiate=carry_b)[1], "while")
    pred_b = batch_jaxpr(cond_jaxpr, axis, cond_const_b + carry_b)[1][0]
    if pred_b:
        carry_b = [True] * len(carry_b)
    cond, _ = batch_jaxpr(cond_jaxpr, axis, cond_const_b + carry_b)
    body, _ = batch_jaxpr(body_jaxpr, axis, body_const_b + carry_b, instantiate=carry_b)
    consts = [x if d is not_mapped else moveaxis(x, d, 0) for x, d in zip(vals, bdims)]
    cond_consts, body_consts, _ = split_list(consts, cond_nconsts, body_nconsts)
    init = [matchaxis(d, 0, axis_size, x) if b else x
            for x, d, b in zip(vals[cond_nconsts + body_nconsts:], bdims[cond_nconsts + body_nconsts:], carry_b)]
    if pred_b:
        outs = _while_per_example(cond, body, cond_consts, body_consts, init, body_const_b)
    else:
        outs = while_p.bind(*cond_consts, *body_consts, *init, cond_jaxpr=cond, body_jaxpr=body,
                            cond_nconsts=cond_nconsts, body_nconsts=body_nconsts)
    return outs, front_dims(carry_b)


def _while_per_example(cond: ClosedJaxpr, body: ClosedJaxpr, cond_consts, body_consts, init, body_const_b):
    """The loop of a batched condition (`cond` returns `bool[B]`, every carry batched): it runs while some example's
    condition holds; a trip updates the examples whose condition holds, recomputed from their carry, and keeps the
    others' carry."""
    n_cc, n_bc = len(cond_consts), len(body_consts)
    checked = uses_primitive(body, check_index_p)

    def some_example(*args):
        (pred,) = eval_jaxpr(cond, *args)
        return [reduce_or_p.bind(pred, axes=(0,), keepdims=False)]

    def trip(*args):
        cc, bc, carry = split_list(args, n_cc, n_bc)
        (pred,) = eval_jaxpr(cond, *cc, *carry)
        fed = carry
        if checked:
            bc = [stand_in(pred, x) if b else x for x, b in zip(bc, body_const_b)]
            fed = [stand_in(pred, x) for x in carry]
        return [select_examples(pred, new, old) for new, old in zip(eval_jaxpr(body, *bc, *fed), carry)]

    avals = [get_aval(x) for x in (*cond_consts, *body_consts, *init)]
    loop_cond = trace_flat(some_example, avals[:n_cc] + avals[n_cc + n_bc:])
    return while_p.bind(*cond_consts, *cond_consts, *body_consts, *init, cond_jaxpr=loop_cond,
                        body_jaxpr=trace_flat(trip, avals), cond_nconsts=n_cc, body_nconsts=n_cc + n_bc)


while_p.abstract_eval = _while_abstract_eval
register_lowering(while_p, _while_lower)
jvp_rules[while_p] = _while_jvp
partial_eval_rules[while_p] = _while_partial_eval
transpose_rules[while_p] = _while_transpose
dce_rules[while_p] = _while_dce
batching_rules[while_p] = _while_batch


# -- the frontends ----------------------------------------------------------------------------------------
def while_loop(cond_fun: Callable, body_fun: Callable, init_val: Any):
    """Run `val = body_fun(val)` while `cond_fun(val)` is true, starting from `init_val`, as JAX's
    `lax.while_loop`: returns the last `val`. `init_val` and `val` are pytrees of tensors, of the same structure,
    shapes and dtypes; `cond_fun` returns a bool scalar tensor. Both are traced once: the loop is one compiled
    loop with a data-dependent trip count, eagerly and under every transform. Forward-mode differentiation
    (`jvp`, `linearize`) works; reverse mode (`grad`) raises, as in JAX: use `scan`, or `fori_loop` with static
    bounds.

    PyTorch's eager meaning holds, as for the Python loop `val = init_val; while cond_fun(val): val =
    body_fun(val)`: the body's `val` is its own (in-place ops on it are fine; the caller's `init_val` is never
    written); a tensor the body captures and writes in place is written with every iteration's effect, and
    `cond_fun` reads its current value. `cond_fun` must not write in place.

    >>> def halve(x):
    ...     return x.mul_(0.5)
    >>> aotjax.while_loop(lambda x: x.sum() > 1.0, halve, aotjax.ones(3))
    tensor([0.25, 0.25, 0.25])
    """
    init_paths, init_tree = jax.tree_util.tree_flatten_with_path(init_val)
    init_leaves = [loop_operand(x, "while_loop", "init_val") for _, x in init_paths]
    weak = [isinstance(x, PYTHON_SCALARS) for _, x in init_paths]  # NOTE: promoted if the body widens them
    carry_avals = []

    def flat_body(*carry):
        out = body_fun(jax.tree_util.tree_unflatten(init_tree, carry))
        return check_carry(out, init_tree, init_paths, carry_avals, op="while_loop", body="body_fun", init="init_val",
                           weak=weak)

    def flat_cond(*carry):
        return [_predicate(cond_fun(jax.tree_util.tree_unflatten(init_tree, carry)))]

    def trace_loop():
        carry_avals[:] = [get_aval(x) for x in init_leaves]
        strides = [getattr(x, "_strides", None) for x in init_leaves]
        return (trace_body(flat_body, carry_avals, "while_loop body_fun", strides),
                trace_body(flat_cond, carry_avals, "while_loop cond_fun", strides))

    body, cond = trace_promoting(trace_loop, init_leaves, weak)
    _check_pure_condition(cond)
    return jax.tree_util.tree_unflatten(init_tree, _bind_while(cond, body, init_leaves))


def _predicate(pred) -> Tensor:
    if isinstance(pred, (bool, np.bool_)):
        pred = as_tensor(bool(pred))
    if not isinstance(pred, Tensor):
        raise TypeError(f"while_loop: cond_fun must return a bool scalar tensor, got {kind_of(pred)}{where()}")
    aval = get_aval(pred)
    if aval.shape != ():
        raise ShapeError(f"while_loop: cond_fun must return a bool scalar tensor, got {aval.str_short()}{where()}; "
                         f"reduce it to one value (`(x > 0).all()`, `(x > 0).any()`)")
    if aval.dtype != np.bool_:
        raise DTypeError(f"while_loop: cond_fun must return a bool scalar tensor, got {aval.str_short()}{where()}; "
                         f"compare it (`x != 0`) rather than relying on its truth value")
    return pred


def _check_pure_condition(cond: Body) -> None:
    if cond.written_inputs or cond.written_captured:
        what = "the loop value it is given" if cond.written_inputs else "a tensor captured from outside it"
        raise UnsupportedError(
            f"while_loop: cond_fun writes in place into {what}{where()}; a loop condition must be pure (it runs "
            f"once more than the body, and its writes would have no place in the loop). Compute it out of place "
            f"(`x.add(1)`, not `x.add_(1)`), or move the write into body_fun.")


def _bind_while(cond: Body, body: Body, init_leaves: list) -> list:
    """Bind `while_p` on the traced condition and body; the captured tensors the body writes are carried (before
    the user's carry) and written back to the caller. Returns the user's carry."""
    written = body.written_captured
    read_only = [k for k in range(body.num_captured) if k not in written]
    bj = body.jaxpr.jaxpr
    cap_in, carry_in = split_list(bj.invars, body.num_captured)
    # NOTE: the body's writes into its own carry (`written_inputs`) are dropped: what it returns is carried
    outs, _, new_caps = split_list(bj.outvars, body.num_outputs, len(body.written_inputs))
    body_jaxpr = ClosedJaxpr(Jaxpr([], [*(cap_in[k] for k in read_only), *(cap_in[k] for k in written), *carry_in],
                                   bj.eqns, [*new_caps, *outs]), [])
    cond_jaxpr, cond_consts = _cond_reading_carried(cond, body, written)
    results = while_p.bind(*cond_consts, *(body.captured[k] for k in read_only), *(body.captured[k] for k in written),
                           *init_leaves, cond_jaxpr=cond_jaxpr, body_jaxpr=body_jaxpr, cond_nconsts=len(cond_consts),
                           body_nconsts=len(read_only))
    cap_out, carry_out = split_list(results, len(written))
    for k, v in zip(written, cap_out):
        write_back(body.captured[k], v)
    return carry_out


def _cond_reading_carried(cond: Body, body: Body, written: list[int]) -> tuple[ClosedJaxpr, list]:
    """The condition over the loop's carry `[written captures, user carry]`: a tensor it captures that the body
    writes is read from the carry (its value at that trip), the others stay constants. Returns the condition and
    its constants."""
    cj = cond.jaxpr.jaxpr
    cap_in, carry_in = split_list(cj.invars, cond.num_captured)
    carried_at = {body.captured_keys[k]: i for i, k in enumerate(written)}
    carried = [Var(get_aval(body.captured[k])) for k in written]
    consts_in, consts = [], []
    for var, key, value in zip(cap_in, cond.captured_keys, cond.captured, strict=True):
        i = carried_at.get(key)
        if i is None:
            consts_in.append(var)
            consts.append(value)
        else:
            carried[i] = var
    return ClosedJaxpr(Jaxpr([], [*consts_in, *carried, *carry_in], cj.eqns, cj.outvars), []), consts


def fori_loop(lower, upper, body_fun: Callable, init_val: Any, *, unroll: int | bool | None = None):
    """Run `val = body_fun(i, val)` for `i` from `lower` to `upper - 1`, starting from `init_val`, as JAX's
    `lax.fori_loop`: returns the last `val`. With bounds known when it is called (Python ints, or concrete 0-d
    tensors) it is a `scan` of `max(upper - lower, 0)` iterations, honouring `unroll`, so it differentiates in
    reverse mode too (`grad`, `aot`); with traced bounds it is a `while_loop` (forward mode only, and `unroll`
    must be left out). `i` is a 0-d integer tensor of the bounds' dtype.

    PyTorch's eager meaning holds as in `while_loop`: `val` is the body's own, the caller's `init_val` is never
    written, and a tensor the body captures and writes in place is written with every iteration's effect.

    >>> aotjax.fori_loop(0, 4, lambda i, x: x + i, aotjax.zeros(2))
    tensor([6., 6.])
    """
    dtype = _bounds_dtype(lower, upper)
    lo, hi = _static_bound(lower), _static_bound(upper)
    body_fun = _checked_fori_body(body_fun, init_val)
    if lo is not None and hi is not None:
        return _fori_scan(lo, hi, body_fun, init_val, dtype, unroll)
    if unroll is not None and unroll is not False and unroll != 1:
        raise ValueError(f"Can only use unroll in fori_loop if the loop bounds are statically known.{where()} "
                         f"Pass Python ints (or concrete tensors) as bounds, or leave unroll out.")
    return _fori_while(_bound_tensor(lower, dtype), _bound_tensor(upper, dtype), body_fun, init_val)


def _checked_fori_body(body_fun: Callable, init_val) -> Callable:
    """`body_fun`, checking that it returns a value of `init_val`'s type: the error then names the path in the
    user's value, not in the loop's `(i, val)` carry."""
    paths, tree = jax.tree_util.tree_flatten_with_path(init_val)

    def checked(i, val):
        avals = [get_aval(x) for x in jax.tree_util.tree_leaves(val)]  # NOTE: the loop's carry, promoted or not
        weak = [isinstance(x, PYTHON_SCALARS) for _, x in paths]
        try:
            out = check_carry(body_fun(i, val), tree, paths, avals, op="fori_loop", body="body_fun", init="init_val",
                              weak=weak)
        except WeakCarry as e:  # NOTE: the loop's carry is `(i, val)`: its leaf after the index
            raise WeakCarry(e.index + 1, e.dtype) from None
        return jax.tree_util.tree_unflatten(tree, out)

    return checked


def _fori_scan(lo: int, hi: int, body_fun: Callable, init_val, dtype, unroll):
    def step(carry, _):
        i, val = carry
        next_i = i + 1  # NOTE: before body_fun, which may write into its `i` in place (a loop index is not)
        return (next_i, body_fun(i, val)), None

    i0 = full((), lo, dtype=dtype)
    (_, val), _ = scan(step, (i0, init_val), None, length=max(hi - lo, 0), unroll=1 if unroll is None else unroll)
    return val


def _fori_while(lower: Tensor, upper: Tensor, body_fun: Callable, init_val):
    def step(carry):
        i, val = carry
        next_i = i + 1  # NOTE: before body_fun, which may write into its `i` in place (a loop index is not)
        return next_i, body_fun(i, val)

    _, val = while_loop(lambda carry: carry[0] < upper, step, (lower, init_val))
    return val


def _static_bound(x) -> int | None:
    """The bound as a Python int when it is known now (the loop can then be a `scan`), else None (a tracer)."""
    if isinstance(x, (Tracer, jax.core.Tracer)):
        return None
    if np.ndim(x.numpy() if isinstance(x, Tensor) else x) != 0:
        raise ShapeError(f"fori_loop: a loop bound must be a scalar, got shape {list(np.shape(x))}{where()}")
    return int(x.item() if isinstance(x, Tensor) else x)


def _bound_dtype(x) -> np.dtype | None:
    """The dtype of a bound that has one (a tensor or array), None for a Python int (weakly typed, as in JAX)."""
    if isinstance(x, int) and not isinstance(x, bool):
        return None
    return canonicalize_dtype(getattr(x, "dtype", None) or np.result_type(x))


def _bounds_dtype(lower, upper) -> np.dtype:
    """The dtype of the loop index: the bounds', which must agree unless one is a Python int (as in JAX)."""
    lo, hi = _bound_dtype(lower), _bound_dtype(upper)
    if lo is not None and hi is not None and lo != hi:
        raise DTypeError(f"fori_loop: lower and upper must have the same dtype, got {lo.name} and {hi.name}"
                         f"{where()}; convert one (`upper.to({lo.name})`)")
    dtype = lo or hi or default_int_dtype()
    if not np.issubdtype(dtype, np.integer):
        raise DTypeError(f"fori_loop: the loop bounds must be integers, got {dtype.name}{where()}")
    return dtype


def _bound_tensor(x, dtype) -> Tensor:
    """A traced bound (or the other, static one) as a 0-d tensor of the loop index's dtype."""
    x = x if isinstance(x, Tensor) else as_tensor(np.asarray(x, dtype=dtype))
    if x.shape != ():
        raise ShapeError(f"fori_loop: a loop bound must be a scalar, got shape {list(x.shape)}{where()}")
    return x if x.dtype == dtype else x.to(dtype)
