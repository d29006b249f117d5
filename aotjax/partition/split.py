"""Splitting a joint program into a forward and a backward program, given what the forward saves.

The joint program (built by `aotjax.transforms.joint`) takes the primals then one cotangent per
differentiable output, and returns the outputs then the input cotangents. Its equations are
**backward** equations when they depend on a cotangent or follow an `optimization_barrier` (the
recomputation a checkpoint asks for), and **forward** equations otherwise. A partitioner chooses
which forward values the forward program saves for the backward (the residuals); `split` builds
both programs: the backward recomputes every forward value it needs that is not saved.
"""
from __future__ import annotations

from dataclasses import dataclass

from aotjax.core.ir import ClosedJaxpr, Jaxpr, Var, dce
from aotjax.ops.remat import optimization_barrier_p


@dataclass
class JointInfo:
    """The joint program and its layout: `num_primals` inputs then cotangents; `num_outputs` outputs
    then input cotangents."""

    jaxpr: ClosedJaxpr
    num_primals: int
    num_outputs: int
    num_forward_eqns: int | None = None  # equations before the backward pass began, if known

    @property
    def primals(self) -> list[Var]:
        return self.jaxpr.jaxpr.invars[:self.num_primals]

    @property
    def cotangents(self) -> list[Var]:
        return self.jaxpr.jaxpr.invars[self.num_primals:]


@dataclass
class Partitioned:
    """A partitioner's result: the two programs and, for each residual, the joint variable it is.
    `saved_inputs[r]` is the primal input residual `r` is, or None: a primal input the backward needs
    is passed to it by the caller, not returned by the forward (so it is never copied)."""

    forward: ClosedJaxpr
    backward: ClosedJaxpr
    saved: list[Var]
    saved_inputs: list[int | None]


def classify(joint: JointInfo) -> tuple[list, list, set]:
    """`(forward_eqns, backward_eqns, backward_var_ids)` in program order. What the backward pass
    emitted is backward even when it reads primals only (a transposed operand, a recomputation)."""
    backward_ids = {id(v) for v in joint.cotangents}
    fwd, bwd = [], []
    n_fwd = joint.num_forward_eqns if joint.num_forward_eqns is not None else len(joint.jaxpr.eqns)
    for i, eqn in enumerate(joint.jaxpr.eqns):
        if i >= n_fwd or eqn.primitive is optimization_barrier_p or any(id(a) in backward_ids for a in eqn.inputs
                                                          if isinstance(a, Var)):
            bwd.append(eqn)
            backward_ids.update(id(v) for v in eqn.outputs)
        else:
            fwd.append(eqn)
    return fwd, bwd, backward_ids


def needed_by_backward(joint: JointInfo) -> list[Var]:
    """Forward values (and primal inputs) that backward equations or input cotangents read directly."""
    fwd, bwd, backward_ids = classify(joint)
    seen, out = set(), []
    reads = [a for e in bwd for a in e.inputs] + list(joint.jaxpr.jaxpr.outvars[joint.num_outputs:])
    for a in reads:
        if isinstance(a, Var) and id(a) not in backward_ids and id(a) not in seen:
            seen.add(id(a))
            out.append(a)
    return out


def is_constant_eqn(eqn) -> bool:
    """An equation with no operand (a constant): recomputed wherever needed, never saved."""
    return not eqn.inputs


def split(joint: JointInfo, saved: list[Var]) -> Partitioned:
    """The forward program (primals -> outputs + `saved`) and the backward program (`saved` +
    cotangents -> input cotangents), the backward recomputing what it needs and is not saved."""
    fwd_eqns, bwd_eqns, _ = classify(joint)
    j = joint.jaxpr.jaxpr
    producers = {id(v): e for e in fwd_eqns for v in e.outputs}
    saved = [v for v in saved if not (id(v) in producers and is_constant_eqn(producers[id(v)]))]
    saved = _ordered(joint, saved, fwd_eqns)
    outs = list(j.outvars[:joint.num_outputs])
    primal_index = {id(v): i for i, v in enumerate(joint.primals)}
    saved_inputs = [primal_index.get(id(v)) for v in saved]
    returned = [v for v, i in zip(saved, saved_inputs) if i is None]
    forward = Jaxpr(j.constvars, list(joint.primals), dce(fwd_eqns, outs + returned), outs + returned)

    saved_ids = {id(v) for v in saved}
    available = saved_ids | {id(v) for v in joint.cotangents} | {id(v) for v in j.constvars}
    bwd_outs = list(j.outvars[joint.num_outputs:])
    recompute = _recompute(fwd_eqns, bwd_eqns, bwd_outs, available)
    primal_ids = {id(v) for v in joint.primals}
    missing = [v for e in recompute for v in e.inputs if isinstance(v, Var) and id(v) in primal_ids
               and id(v) not in saved_ids]
    if missing:
        raise ValueError(f"partition: the backward needs the primal input {missing[0]} but the partitioner did "
                         f"not save it")
    backward = Jaxpr(j.constvars, saved + list(joint.cotangents), dce(recompute + bwd_eqns, bwd_outs), bwd_outs)
    return Partitioned(ClosedJaxpr(forward, joint.jaxpr.consts), ClosedJaxpr(backward, joint.jaxpr.consts), saved,
                       saved_inputs)


def _ordered(joint: JointInfo, saved: list[Var], fwd_eqns) -> list[Var]:
    """Residuals in a stable order: primal inputs (in input order), then values in program order."""
    order = {id(v): i for i, v in enumerate(joint.primals)}
    n = len(order)
    for e in fwd_eqns:
        for v in e.outputs:
            order[id(v)] = n
            n += 1
    unique = list({id(v): v for v in saved}.values())
    return sorted(unique, key=lambda v: order[id(v)])


def _recompute(fwd_eqns, bwd_eqns, bwd_outs, available: set) -> list:
    """The forward equations the backward must run again: those producing values it reads that are
    neither saved nor cotangents, transitively."""
    producers = {id(v): e for e in fwd_eqns for v in e.outputs}
    need = [a for e in bwd_eqns for a in e.inputs] + list(bwd_outs)
    chosen, stack = set(), [a for a in need if isinstance(a, Var)]
    while stack:
        v = stack.pop()
        if id(v) in available:
            continue
        e = producers.get(id(v))
        if e is None or id(e) in chosen:
            continue
        chosen.add(id(e))
        stack.extend(a for a in e.inputs if isinstance(a, Var))
    return [e for e in fwd_eqns if id(e) in chosen]
