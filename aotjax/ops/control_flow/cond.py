"""`cond` and `switch`: run one of several functions, chosen by a value computed at run time, as one higher-order
primitive.

`cond_p` has operands `index, *ops` and param `branches`, a tuple of pure programs (no constants), each taking
all of `ops` (the tensors the branches capture from outside first, then the operands the user passed) and
returning values of the same types; the result is `branches[index](*ops)`. The index is an int32 scalar in
`[0, len(branches))` (the frontends clamp it). JAX's `lax.cond`/`lax.switch` are the model; the rules, all here:

- lowering: `jax.lax.switch` (eager mode runs one compiled conditional, both branches compiled once);
- jvp: the branches' jvps, their output tangents nonzero where any branch makes them nonzero;
- partial evaluation (how `grad` and `aot` split it): with an unknown index the whole cond is recorded; with a
  known one, each branch is split, the unknown outputs the union over branches; a **known** cond computes the
  known outputs and the residuals, and an **unknown** cond reads them. The branches' residuals are merged so
  that every known branch returns the same list: residuals of one shape and dtype share a slot, and a branch
  that makes fewer fills the rest with zeros; a residual that is a known operand is read from the operand
  itself (forwarded), never returned;
- transpose: a cond, on the same index, of the branches' transposes;
- dead-code elimination: outputs nothing reads, and the operands no branch then reads, go from every branch;
- batching (vmap): with an unbatched index, a cond of the batched branches, each output batched where any
  branch's is. With a batched index the examples may take different branches: every branch runs on every example
  and each example's outputs are selected by its index. A branch sees its own operands only in the examples that
  take it: elsewhere they are detached (no NaN of a branch not taken reaches a gradient, JAX's issue 1052), and a
  branch with run-time checks runs only if some example takes it, the others given that example's operands
  (`stand_in`), so that a check fails only for an example that takes it.

The frontends trace each branch once, functionalized (`aotjax.ops.control_flow._body`), and restore PyTorch's
eager meaning around the pure primitive, as for a Python `if`: a branch may write into its operands or into
tensors it captures, and the caller sees the writes of the branch taken (every branch returns the new value of
what any branch writes, its input unchanged where it writes nothing); outputs are values, never views of the
operands.
"""
from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from aotjax.core import views
from aotjax.core.avals import ShapedArray, get_aval
from aotjax.core.checks import check_record
from aotjax.core.errors import DTypeError, ShapeError, UnsupportedError
from aotjax.core.eval_jaxpr import eval_jaxpr
from aotjax.core.ir import ClosedJaxpr, Eqn, Jaxpr, Var, dce, dce_rules, used_inputs, uses_primitive
from aotjax.core.primitive import Primitive, Recompute, jaxpr_flops
from aotjax.core.source_info import user_source_info, where
from aotjax.core.typecheck import typecheck, typecheck_enabled
from aotjax.interpreters.ad_util import Zero, instantiate, is_differentiable
from aotjax.interpreters.batching import (
    batch_jaxpr,
    batching_rules,
    bdim_at_front,
    current_axis,
    front_dims,
    moveaxis,
    not_mapped,
)
from aotjax.interpreters.jvp import jvp_jaxpr, jvp_rules
from aotjax.interpreters.lowering import eval_sub_jaxpr, register_lowering
from aotjax.interpreters.partial_eval import ResidualSource, SplitJaxpr, partial_eval_jaxpr, partial_eval_rules
from aotjax.interpreters.trace import trace_flat
from aotjax.interpreters.transpose import UndefinedPrimal, backward_pass, is_undefined, transpose_rules
from aotjax.ops.base.casts import convert_element_type_p
from aotjax.ops.base.data import as_tensor
from aotjax.ops.control_flow._body import Body, describe_path, trace_body, write_back
from aotjax.ops.control_flow._common import select_examples, stand_in
from aotjax.ops.creation.factories import zeros
from aotjax.ops.indexing.subscripts import check_index_p
from aotjax.ops.math.elementwise import eq_p
from aotjax.ops.reduce.reductions import reduce_or_p
from aotjax.ops.shape.views import detach_p
from aotjax.tensor import Tensor

__all__ = ["cond", "switch", "cond_p"]


# NOTE: a conditional is saved rather than recomputed (its cost is its costliest branch); it is linear in the
# operands its branches are all linear in (never in the index).
cond_p = Primitive("cond", multiple_results=True, recompute=Recompute.EXPENSIVE, linear=True, higher_order=True,
                   flops=lambda in_avals, out_avals, *, branches: max(jaxpr_flops(b) for b in branches))


def _types(avals) -> str:
    return ", ".join(a.str_short() for a in avals) or "nothing"


def _same_types(a: Sequence[ShapedArray], b: Sequence[ShapedArray]) -> bool:
    return len(a) == len(b) and all(x.shape == y.shape and x.dtype == y.dtype for x, y in zip(a, b))


def _cond_abstract_eval(index, *ops, branches: tuple):
    if not branches:
        raise TypeError("cond: no branch to run")
    if index.shape != () or index.dtype != np.int32:
        raise TypeError(f"cond: the branch index must be an int32 scalar, got {index.str_short()}")
    for k, b in enumerate(branches):
        if not _same_types(b.in_avals, ops):
            raise TypeError(f"cond: branch {k} takes {_types(b.in_avals)} but the operands are {_types(ops)}")
        if not _same_types(b.out_avals, branches[0].out_avals):
            raise TypeError(f"cond: branch {k} returns {_types(b.out_avals)} but branch 0 returns "
                            f"{_types(branches[0].out_avals)}; the branches must return the same types")
    return list(branches[0].out_avals)


def _run_branch(branch: ClosedJaxpr, checked: bool, *ops):
    outs, ok = eval_sub_jaxpr(branch, ops)
    # NOTE: a checked program: the branch's checks pass out of it as one more output (see scan's lowering)
    return [*outs, ok] if checked else outs


def _cond_lower(index, *ops, branches: tuple):
    ops = [jnp.asarray(x, dtype=a.dtype) for x, a in zip(ops, branches[0].in_avals, strict=True)]
    checked = check_record() is not None
    fns = [functools.partial(_run_branch, b, checked) for b in branches]
    outs = list(jax.lax.switch(jnp.asarray(index, jnp.int32), fns, *ops))
    if checked:
        check_record().predicates.append(outs.pop())
    return outs


# -- jvp ---------------------------------------------------------------------------------------------------
def _cond_jvp(primals, tangents, *, branches: tuple):
    index, ops = primals[0], primals[1:]
    op_avals = branches[0].in_avals
    nz = [not isinstance(t, Zero) and is_differentiable(a.dtype) for t, a in zip(tangents[1:], op_avals, strict=True)]
    first = [jvp_jaxpr(b, nz) for b in branches]
    out_nz = [any(flags) for flags in zip(*(f for _, f in first))]
    jvps = [j if f == out_nz else jvp_jaxpr(b, nz, instantiate=out_nz)[0] for b, (j, f) in zip(branches, first)]
    tangents_in = [t for t, f in zip(tangents[1:], nz) if f]
    outs = cond_p.bind(index, *ops, *tangents_in, branches=tuple(jvps))
    out_avals = branches[0].out_avals
    primals_out, tangents_out = outs[:len(out_avals)], iter(outs[len(out_avals):])
    return primals_out, [next(tangents_out) if f else Zero(a) for f, a in zip(out_nz, out_avals)]


# -- partial evaluation -----------------------------------------------------------------------------------
@dataclass
class _MergedResiduals:
    """The residuals of all branches as one list, the unknown cond's residual inputs: the operands `forwarded`
    (indices: the unknown cond reads those operands themselves), then the slots the known cond returns
    (`slot_avals`). `position[k][r]` is where residual r of branch k is in that list."""

    forwarded: list[int]
    slot_avals: list[ShapedArray]
    position: list[list[int]]

    def slot(self, p: int) -> int | None:
        """The slot at position `p` of the list (None for a forwarded operand)."""
        return p - len(self.forwarded) if p >= len(self.forwarded) else None


def _merge_residuals(splits: Sequence[SplitJaxpr], n_known_out: int) -> _MergedResiduals:
    forwarded = list(dict.fromkeys(j for split in splits for j in split.residual_inputs if j is not None))
    slot_avals: list[ShapedArray] = []
    position = []
    for split in splits:
        taken: set[int] = set()
        where_r = []
        for aval, j in zip(split.known.out_avals[n_known_out:], split.residual_inputs, strict=True):
            if j is not None:
                where_r.append(forwarded.index(j))
                continue
            # NOTE: residuals of one type share a slot across branches (only one branch runs)
            s = next((s for s, a in enumerate(slot_avals) if s not in taken and _same_types([a], [aval])), None)
            if s is None:
                s = len(slot_avals)
                slot_avals.append(aval)
            taken.add(s)
            where_r.append(len(forwarded) + s)
        position.append(where_r)
    return _MergedResiduals(forwarded, slot_avals, position)


def _known_branch(split: SplitJaxpr, n_known_out: int, position, merged: _MergedResiduals) -> ClosedJaxpr:
    """The known part of a branch returning its known outputs then every slot of the merged residuals (zeros in
    the slots the branch does not fill)."""
    def padded(*known_ops):
        outs = eval_jaxpr(split.known, *known_ops)
        slots: list = [Zero(a) for a in merged.slot_avals]
        for p, v in zip(position, outs[n_known_out:], strict=True):
            if merged.slot(p) is not None:
                slots[merged.slot(p)] = v
        return [*outs[:n_known_out], *map(instantiate, slots)]
    return trace_flat(padded, split.known.in_avals)


def _unknown_branch(split: SplitJaxpr, position, merged: _MergedResiduals, op_avals) -> ClosedJaxpr:
    """The unknown part of a branch taking the merged residuals (forwarded operands, slots), then the unknown
    operands."""
    U = split.unknown.jaxpr
    res_vars, uk_vars = U.invars[:split.num_res], U.invars[split.num_res:]
    res_in = [Var(op_avals[j]) for j in merged.forwarded] + [Var(a) for a in merged.slot_avals]
    for p, v in zip(position, res_vars, strict=True):
        res_in[p] = v
    return ClosedJaxpr(Jaxpr(U.constvars, [*res_in, *uk_vars], U.eqns, U.outvars), split.unknown.consts)


def _split_branches(branches, ops_uk) -> list[SplitJaxpr]:
    """Each branch split on `ops_uk`, every branch's unknown outputs the union over branches."""
    first = [partial_eval_jaxpr(b, ops_uk) for b in branches]
    out_uk = [any(flags) for flags in zip(*(s.out_unknowns for s in first))]
    return [s if s.out_unknowns == out_uk else partial_eval_jaxpr(b, ops_uk, instantiate=out_uk)
            for b, s in zip(branches, first)]


def _cond_partial_eval(trace, tracers, *, branches: tuple):
    index, ops = tracers[0], tracers[1:]
    if not index.pval.is_known:
        return trace.record(cond_p, [trace.instantiate(t) for t in tracers], dict(branches=branches))
    ops_uk = [not t.pval.is_known for t in ops]
    splits = _split_branches(branches, ops_uk)
    out_uk = splits[0].out_unknowns
    n_known_out = out_uk.count(False)
    merged = _merge_residuals(splits, n_known_out)
    source = user_source_info()

    known_branches = tuple(_known_branch(s, n_known_out, p, merged) for s, p in zip(splits, merged.position))
    known_vals = [t.pval.const for t, u in zip(ops, ops_uk) if not u]
    k_outs = []
    if known_branches[0].out_avals:
        k_outs = cond_p.bind(index.pval.const, *known_vals, branches=known_branches)
    known_results, slot_vals = k_outs[:n_known_out], k_outs[n_known_out:]

    u_outs = []
    if any(out_uk):
        op_avals = branches[0].in_avals
        unknown_branches = tuple(_unknown_branch(s, p, merged, op_avals) for s, p in zip(splits, merged.position))
        slot_sources = _slot_sources(splits, merged, source)
        residuals = [ops[j] for j in merged.forwarded]
        residuals += [trace.known(v, src) for v, src in zip(slot_vals, slot_sources)]
        unknown_ops = [trace.instantiate(t) for t, u in zip(ops, ops_uk) if u]
        u_outs = trace.record(cond_p, [index, *residuals, *unknown_ops], dict(branches=unknown_branches))
    k_it, u_it = iter(known_results), iter(u_outs)
    known_source = ResidualSource("cond", source)
    return [next(u_it) if u else trace.known(next(k_it), known_source) for u in out_uk]


def _slot_sources(splits, merged: _MergedResiduals, source) -> list[ResidualSource]:
    """What computed each residual slot, in words: the primitive of each branch that fills it."""
    made: list[list[str]] = [[] for _ in merged.slot_avals]
    lines: list = [None] * len(merged.slot_avals)
    for k, (split, position) in enumerate(zip(splits, merged.position)):
        for p, src in zip(position, split.residual_sources):
            s = merged.slot(p)
            if s is not None:
                made[s].append(f"{src.primitive or 'value'} in branch {k}")
                lines[s] = lines[s] or src.source_info
    return [ResidualSource(f"{', '.join(m)} (cond residual)", line or source) for m, line in zip(made, lines)]


# -- transpose --------------------------------------------------------------------------------------------
def _cond_transpose(cts, index, *ops, branches: tuple):
    if is_undefined(index):
        raise ValueError("transpose: primitive 'cond' is not linear in its branch index")
    op_avals, out_avals = branches[0].in_avals, branches[0].out_avals
    linear = [is_undefined(x) for x in ops]
    residuals = [x for x, lin in zip(ops, linear) if not lin]
    ct_nz = [not isinstance(c, Zero) for c in cts]

    def transposed(branch):
        def backward(*vals):
            res, cts_in = iter(vals[:len(residuals)]), iter(vals[len(residuals):])
            args = [UndefinedPrimal(a) if lin else next(res) for a, lin in zip(op_avals, linear)]
            cts_out = [next(cts_in) if nz else Zero(a) for a, nz in zip(out_avals, ct_nz)]
            return backward_pass(branch, [], args, cts_out, instantiate=True)
        in_avals = [a for a, lin in zip(op_avals, linear) if not lin] + [a for a, nz in zip(out_avals, ct_nz) if nz]
        return trace_flat(backward, in_avals)

    outs = iter(cond_p.bind(index, *residuals, *(c for c in cts if not isinstance(c, Zero)),
                            branches=tuple(transposed(b) for b in branches)))
    return [None, *(next(outs) if lin else None for lin in linear)]


# -- dead code --------------------------------------------------------------------------------------------
def _cond_dce(eqn: Eqn, used_outputs: list[bool]) -> Eqn:
    branches = eqn.params["branches"]
    used_in = [any(flags) for flags in zip(*(used_inputs(b.jaxpr, used_outputs) for b in branches))]
    if all(used_in) and all(used_outputs):
        return eqn

    def pruned(b: ClosedJaxpr) -> ClosedJaxpr:
        j = b.jaxpr
        outvars = [v for v, u in zip(j.outvars, used_outputs) if u]
        invars = [v for v, u in zip(j.invars, used_in) if u]
        return ClosedJaxpr(Jaxpr(j.constvars, invars, dce(j.eqns, outvars), outvars), b.consts)

    inputs = [eqn.inputs[0], *(a for a, u in zip(eqn.inputs[1:], used_in) if u)]
    outputs = [v for v, u in zip(eqn.outputs, used_outputs) if u]
    return Eqn(cond_p, inputs, outputs, dict(eqn.params, branches=tuple(pruned(b) for b in branches)),
               eqn.source_info)


# -- batching ---------------------------------------------------------------------------------------------
def _cond_batch(axis_size, vals, bdims, *, branches: tuple):
    axis = current_axis()
    (index, *ops), (index_d, *op_dims) = vals, bdims
    if index_d is not_mapped:
        ops = [x if d is not_mapped else moveaxis(x, d, 0) for x, d in zip(ops, op_dims)]
        in_b = [d is not not_mapped for d in op_dims]
        first = [batch_jaxpr(b, axis, in_b) for b in branches]
        out_b = [any(flags) for flags in zip(*(f for _, f in first))]
        batched = tuple(j if f == out_b else batch_jaxpr(b, axis, in_b, instantiate=out_b)[0]
                        for b, (j, f) in zip(branches, first))
        return cond_p.bind(index, *ops, branches=batched), front_dims(out_b)
    index = moveaxis(index, index_d, 0)
    ops = [bdim_at_front(x, d, axis_size) for x, d in zip(ops, op_dims)]
    run = _guarded_branch if any(uses_primitive(b, check_index_p) for b in branches) else _masked_branch
    taken = [eq_p.bind(index, np.int32(k)) for k in range(len(branches))]
    outs = [run(t, batch_jaxpr(b, axis, [True] * len(ops), instantiate=True)[0], ops)
            for t, b in zip(taken, branches)]
    selected = outs[-1]
    for t, branch_outs in zip(taken[-2::-1], outs[-2::-1]):
        selected = [select_examples(t, o, s) for o, s in zip(branch_outs, selected)]
    return selected, [0] * len(selected)


def _masked_branch(taken, branch: ClosedJaxpr, ops) -> list:
    """`branch` (batched) run on every example, its operands detached in the examples that do not take it."""
    masked = [select_examples(taken, x, detach_p.bind(x)) if is_differentiable(get_aval(x).dtype) else x
              for x in ops]
    return eval_jaxpr(branch, *masked)


def _guarded_branch(taken, branch: ClosedJaxpr, ops) -> list:
    """`branch` (batched, with run-time checks) run if some example takes it, the others given that example's
    operands; zeros otherwise."""
    def run(taken, *ops):
        return eval_jaxpr(branch, *(stand_in(taken, x) for x in ops))

    def skip(taken, *ops):
        return [zeros(*a.shape, dtype=a.dtype) for a in branch.out_avals]

    avals = [get_aval(x) for x in (taken, *ops)]
    some = convert_element_type_p.bind(reduce_or_p.bind(taken, axes=(0,), keepdims=False),
                                       new_dtype=np.dtype(np.int32))
    return cond_p.bind(some, taken, *ops, branches=(trace_flat(skip, avals), trace_flat(run, avals)))


cond_p.abstract_eval = _cond_abstract_eval
register_lowering(cond_p, _cond_lower)
jvp_rules[cond_p] = _cond_jvp
partial_eval_rules[cond_p] = _cond_partial_eval
transpose_rules[cond_p] = _cond_transpose
dce_rules[cond_p] = _cond_dce
batching_rules[cond_p] = _cond_batch


# -- the frontends ----------------------------------------------------------------------------------------
def cond(pred, true_fun: Callable, false_fun: Callable, *operands):
    """`true_fun(*operands)` if `pred` else `false_fun(*operands)`, chosen at run time: JAX's `lax.cond`. `pred`
    is a scalar (a bool, or a number meaning `pred != 0`); `operands` and the results are pytrees of tensors.
    Both branches are traced once and compiled; they must return the same structure, shapes and dtypes. It
    differentiates (the gradient flows through the branch taken) and compiles (`jit`, `aot`) as one conditional.

    PyTorch's eager meaning holds, as for a Python `if`: a branch may write into its operands, or into tensors it
    captures, in place, and the caller sees the writes of the branch taken. The results are new tensors, never
    views of the operands.

    >>> x = aotjax.tensor([1.0, 2.0])
    >>> aotjax.cond(x.sum() > 2, lambda x: x * 10, lambda x: x.neg(), x)
    tensor([10., 20.])
    >>> _ = aotjax.cond(x.sum() > 2, lambda x: x.add_(1), lambda x: x, x)
    >>> x
    tensor([2., 3.])
    """
    return _bind_branches(_pred_index(pred), (false_fun, true_fun), ("false_fun", "true_fun"), operands, "cond")


def switch(index, branches: Sequence[Callable], *operands):
    """`branches[index](*operands)`, chosen at run time: JAX's `lax.switch`. `index` is an integer scalar,
    clamped to `[0, len(branches) - 1]`; otherwise as `cond` (every branch traced once, the same output types,
    the writes of the branch taken seen by the caller).

    >>> fs = [lambda x: x + 1, lambda x: x * 2, lambda x: x.neg()]
    >>> x = aotjax.tensor([1.0, 2.0])
    >>> aotjax.switch(1, fs, x), aotjax.switch(7, fs, x)
    (tensor([2., 4.]), tensor([-1., -2.]))
    """
    if callable(branches) or not isinstance(branches, Sequence):
        raise TypeError(f"switch: branches must be a sequence of functions, got {type(branches).__name__}{where()}")
    branches = list(branches)
    if not branches:
        raise ValueError(f"switch: branches is empty{where()}; give at least one function")
    names = tuple(f"branches[{k}]" for k in range(len(branches)))
    return _bind_branches(_branch_index(index, len(branches)), branches, names, operands, "switch")


def _pred_index(pred) -> Tensor:
    p = _scalar(pred, "cond", "pred", "(`pred.any()`, `pred.all()`)")
    if p.dtype != np.bool_:
        p = p != 0
    return p.to(np.int32)


def _branch_index(index, n: int) -> Tensor:
    i = _scalar(index, "switch", "the branch index", "(`index.reshape(())`)")
    if not np.issubdtype(i.dtype, np.integer):
        raise DTypeError(f"switch: the branch index must be an integer, got {i.dtype.name}{where()}; convert it "
                         f"(`index.int()`)")
    return i.clamp(0, n - 1).to(np.int32)


def _scalar(x, op: str, what: str, fix: str) -> Tensor:
    if x is None or isinstance(x, str):
        raise TypeError(f"{op}: {what} must be a scalar tensor, bool or number, got {type(x).__name__}{where()}")
    t = as_tensor(x)
    if t.shape != ():
        raise ShapeError(f"{op}: {what} must be a scalar, got a tensor of shape {list(t.shape)}{where()}; make it "
                         f"0-d first {fix}")
    return t


def _bind_branches(index: Tensor, funs: Sequence[Callable], names: Sequence[str], operands: tuple, op: str):
    """Trace each branch on the operands, bind `cond_p`, write back what the branches write; the outputs."""
    for fun, name in zip(funs, names):
        _check_arity(fun, name, len(operands), op)
    leaves, tree = jax.tree_util.tree_flatten(operands)
    leaves = [_operand(x, op) for x in leaves]
    avals = [get_aval(x) for x in leaves]
    strides = [getattr(x, "_strides", None) for x in leaves]
    bodies = [_trace_branch(fun, tree, avals, strides, f"{op} {name}") for fun, name in zip(funs, names)]
    out_tree = _check_outputs(bodies, names, op)
    merged = _merge_bodies(bodies, len(leaves))
    _check_aliasing(merged, leaves, op)
    results = cond_p.bind(index, *merged.captured, *leaves, branches=merged.branches)
    n_out = bodies[0].num_outputs
    outs, new_ops, new_caps = (results[:n_out], results[n_out:n_out + len(merged.written_ops)],
                               results[n_out + len(merged.written_ops):])
    for i, v in zip(merged.written_ops, new_ops, strict=True):
        write_back(leaves[i], v)
    for c, v in zip(merged.written_captured, new_caps, strict=True):
        write_back(merged.captured[c], v)
    return jax.tree_util.tree_unflatten(out_tree, outs)


def _check_arity(fun, name: str, n: int, op: str) -> None:
    if not callable(fun):
        raise TypeError(f"{op}: {name} must be a function, got {type(fun).__name__}{where()}")
    try:
        sig = inspect.signature(fun)
    except (TypeError, ValueError):
        return  # NOTE: a builtin without a signature: calling it says what is wrong
    try:
        sig.bind(*range(n))
    except TypeError as e:
        raise TypeError(f"{op}: {name} cannot be called on the {n} operand{'s' * (n != 1)} given ({e}){where()}; "
                        f"every branch is called as `branch(*operands)`") from None


def _operand(x, op: str):
    if isinstance(x, Tensor):
        return x
    if x is None:
        raise TypeError(f"{op}: an operand holds None{where()}; operands must be tensors")
    return as_tensor(x)


def _trace_branch(fun, tree, avals, strides, what: str) -> Body:
    def flat(*args):
        out = fun(*jax.tree_util.tree_unflatten(tree, args))
        moved = [i for i, a in enumerate(args) if a._chain]
        if moved:
            raise UnsupportedError(
                f"{what}: the branch changes the view of its operand {moved[0]} in place (`t_`, `unsqueeze_`, ...)"
                f"{where()}; a conditional cannot replay that on the caller's tensor. Use the out-of-place op "
                f"(`x.t()`) and return the result.")
        return jax.tree_util.tree_map(lambda v: v if isinstance(v, Tensor) else as_tensor(v), out)
    return trace_body(flat, avals, what, strides)


def _check_outputs(bodies: Sequence[Body], names: Sequence[str], op: str):
    """The branches' common output structure; an error naming the first output where two branches differ."""
    first = bodies[0]
    for body, name in zip(bodies[1:], names[1:]):
        if body.out_tree != first.out_tree:
            raise TypeError(f"{op}: the branches must return the same pytree structure, but {names[0]} returns "
                            f"{first.out_tree} and {name} returns {body.out_tree}{where()}")
        expected = first.jaxpr.out_avals[:first.num_outputs]
        got = body.jaxpr.out_avals[:body.num_outputs]
        for path, a, b in zip(_paths(first.out_tree), expected, got):
            if not _same_types([a], [b]):
                error = ShapeError if a.shape != b.shape else DTypeError
                what = f"output {describe_path(path)}" if path else "the output"
                raise error(f"{op}: the branches must return the same shapes and dtypes, but {what} is "
                            f"{a.str_short()} in {names[0]} and {b.str_short()} in {name}"
                            f"{where()}; convert one of them (`.to(...)`, `.reshape(...)`, `.expand(...)`)")
    return first.out_tree


def _paths(tree) -> list:
    leaves = jax.tree_util.tree_unflatten(tree, range(tree.num_leaves))
    return [p for p, _ in jax.tree_util.tree_flatten_with_path(leaves)[0]]


@dataclass
class _MergedBodies:
    """The traced branches as `cond_p`'s: each takes the union of the captured values (`captured`, matched by
    storage), then the operands, and returns its outputs, the new values of the operands any branch writes
    (`written_ops`), then of the captured tensors any branch writes (`written_captured`, indices into
    `captured`); a branch that does not write one returns its input unchanged."""

    branches: tuple
    captured: list
    captured_keys: list
    written_ops: list[int]
    written_captured: list[int]


def _merge_bodies(bodies: Sequence[Body], n_ops: int) -> _MergedBodies:
    captured, keys, position = [], [], {}
    for body in bodies:
        for value, key in zip(body.captured, body.captured_keys, strict=True):
            if key not in position:
                position[key] = len(captured)
                captured.append(value)
                keys.append(key)
    written_ops = sorted({i for b in bodies for i in b.written_inputs})
    written_captured = sorted({position[b.captured_keys[k]] for b in bodies for k in b.written_captured})
    cap_avals = [get_aval(c) for c in captured]
    branches = tuple(_aligned(b, [position[k] for k in b.captured_keys], cap_avals, written_ops, written_captured)
                     for b in bodies)
    return _MergedBodies(branches, captured, keys, written_ops, written_captured)


def _aligned(body: Body, cap_positions, cap_avals, written_ops, written_captured) -> ClosedJaxpr:
    j = body.jaxpr.jaxpr
    n_cap = body.num_captured
    own_caps, op_in = j.invars[:n_cap], j.invars[n_cap:]
    cap_in = [Var(a) for a in cap_avals]
    for p, v in zip(cap_positions, own_caps, strict=True):
        cap_in[p] = v
    n_out, n_wi = body.num_outputs, len(body.written_inputs)
    outs, new_ops, new_caps = j.outvars[:n_out], j.outvars[n_out:n_out + n_wi], j.outvars[n_out + n_wi:]
    new_op = dict(zip(body.written_inputs, new_ops, strict=True))
    new_cap = {cap_positions[k]: v for k, v in zip(body.written_captured, new_caps, strict=True)}
    outvars = [*outs, *(new_op.get(i, op_in[i]) for i in written_ops),
               *(new_cap.get(c, cap_in[c]) for c in written_captured)]
    closed = ClosedJaxpr(Jaxpr([], [*cap_in, *op_in], j.eqns, outvars), [])
    if typecheck_enabled():
        typecheck(closed)
    return closed


def _check_aliasing(merged: _MergedBodies, leaves, op: str) -> None:
    """A branch sees its operands and captured tensors as independent values: an error where two of them share
    memory and a branch writes into one (the write would have to show through the other)."""
    seen: dict[int, tuple[str, bool]] = {}  # storage key -> (what it is, in words; whether a branch writes it)
    for c, (value, key) in enumerate(zip(merged.captured, merged.captured_keys, strict=True)):
        if isinstance(value, Tensor):
            seen[key] = ("a tensor the branches capture", c in merged.written_captured)
    for i, x in enumerate(leaves):
        key, written = views.storage_key(x), i in merged.written_ops
        other = seen.get(key)
        if other is not None and (written or other[1]):
            raise UnsupportedError(
                f"{op}: operand {i} shares memory with {other[0]}, and a branch writes into one of them{where()}; "
                f"inside a branch they are separate values, so the write would not show through the other. Pass "
                f"the tensor once, or pass a copy (`x.clone()`).")
        seen.setdefault(key, (f"operand {i}", written))
