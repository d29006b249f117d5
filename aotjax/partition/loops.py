"""Partitioning inside loop bodies: a partitioner applied to one iteration of a loop.

A loop split by partial evaluation (`aotjax.ops.control_flow.scan`) has a known body (one iteration of the
forward: known inputs -> known outputs, residuals) and an unknown body (residuals, tangents -> output
tangents; transposed, it becomes one iteration of the backward's reverse loop). Joined at the residuals they are
a joint program of one iteration, which any partitioner can split: the values it saves are what each iteration
of the forward loop emits (stacked along the loop's axis); what it does not save the backward loop recomputes
from them and from the iteration's inputs. So `aot(..., partition=min_cut_partition(budget))` decides per
iteration what a scan over 48 layers saves, honouring the memory budget and the primitives' recompute classes,
and the programs stay one loop each whatever the depth.
"""
from __future__ import annotations

from typing import Callable, Sequence

from aotjax.core.ir import ClosedJaxpr, Jaxpr, JaxprMeta, Var, rename_inputs
from aotjax.interpreters.partial_eval import ResidualSource, SplitJaxpr
from aotjax.partition.split import JointInfo, Partitioned

__all__ = ["body_joint", "repartition_loop_bodies"]


def body_joint(split: SplitJaxpr) -> JointInfo:
    """One iteration's joint program: the known body, then the unknown body reading the known body's residuals
    directly (its primals are the known inputs, its "cotangents" the unknown inputs)."""
    kj, uj = split.known.jaxpr, split.unknown.jaxpr
    n_res = split.num_res
    n_kout = len(kj.outvars) - n_res
    to_known = {id(r): v for r, v in zip(uj.invars[:n_res], kj.outvars[n_kout:], strict=True)}

    joint = Jaxpr([*kj.constvars, *uj.constvars], [*kj.invars, *uj.invars[n_res:]],
                  [*kj.eqns, *rename_inputs(uj.eqns, to_known)],
                  [*kj.outvars[:n_kout], *(to_known.get(id(a), a) if isinstance(a, Var) else a for a in uj.outvars)])
    closed = ClosedJaxpr(joint, [*split.known.consts, *split.unknown.consts])
    return JointInfo(closed, len(kj.invars), n_kout, len(kj.eqns))


def repartition_loop_bodies(partition: Callable[[JointInfo], Partitioned]
                            ) -> Callable[[SplitJaxpr, Sequence[bool]], SplitJaxpr]:
    """A `repartition(split, unknowns)` for `aotjax.interpreters.partial_eval.partitioning_loop_bodies` that
    splits each loop body with `partition`: the residuals become the values `partition` saves (a saved known
    input of the body is a residual too: a loop forwards its constants and `xs` and stacks its carries)."""

    def repartition(split: SplitJaxpr, unknowns: Sequence[bool]) -> SplitJaxpr:
        joint = body_joint(split)
        parts = partition(joint)
        fwd = parts.forward.jaxpr
        known_index = [i for i, u in enumerate(unknowns) if not u]
        n_kout = joint.num_outputs
        returned = iter(fwd.outvars[n_kout:])
        residuals, residual_inputs = [], []
        for i in parts.saved_inputs:
            residuals.append(next(returned) if i is None else fwd.invars[i])
            residual_inputs.append(None if i is None else known_index[i])
        producers = {id(v): e for e in joint.jaxpr.eqns[:joint.num_forward_eqns] for v in e.outputs}
        sources = tuple(ResidualSource(e.primitive.name, e.source_info) if (e := producers.get(id(v))) is not None
                        else ResidualSource(None, None) for v in parts.saved)
        known = ClosedJaxpr(Jaxpr(fwd.constvars, fwd.invars, fwd.eqns, [*fwd.outvars[:n_kout], *residuals]),
                            parts.forward.consts)
        unknown = ClosedJaxpr(parts.backward.jaxpr, parts.backward.consts, meta=JaxprMeta(residual_sources=sources))
        return SplitJaxpr(known, unknown, split.out_unknowns, residual_inputs)

    return repartition
