"""The joint program of `aot`: linearize's forward composed with the transposed linear program.

Three passes of aot's pipeline (`aotjax.transforms.aot`) build it from the functionalized program:

    linearize   jvp + partial_eval, traced: the **forward** (partial evaluation's known part:
                primals -> outputs, residuals) and the **linear** program (residuals, input tangents
                -> output tangents)
    transpose   the linear program run backwards, traced: the **backward** (residuals, output
                cotangents -> input cotangents)
    joint       the forward then the backward as one program, `(primals, cotangents) -> (outputs,
                input cotangents)`, the backward reading the forward's residuals directly

The cut between the two parts is recorded as data (`JointInfo.num_forward_eqns`): a partitioner
knows the backward's equations even where they read no cotangent (a checkpoint's recomputation,
arithmetic on residuals). Each part has no dead code before they are joined, and residuals the
backward does not read are dropped, so the joint has none either and the cut stays exact.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from aotjax.core.eval_jaxpr import eval_jaxpr
from aotjax.core.ir import Atom, ClosedJaxpr, Jaxpr, JaxprMeta, Var, dce, rename_inputs
from aotjax.interpreters.ad_util import is_differentiable
from aotjax.interpreters.trace import trace_flat
from aotjax.partition import JointInfo
from aotjax.transforms.autodiff import backward_program, linearize_flat

__all__ = ["LinearizedProgram", "linearize_program", "transpose_program", "compose_joint"]


@dataclass
class LinearizedProgram:
    """The linearize pass's result: `forward` (primals -> the outputs, then the residuals) and `linear`
    (the residuals, then one tangent per differentiated input -> the tangents of the outputs whose
    tangent is not a known zero, `tangent_known[k]` being True for those that are). `diff_in` marks the
    differentiated inputs, `diff_out` the outputs that take a cotangent (the floating-point ones)."""

    forward: ClosedJaxpr
    linear: ClosedJaxpr
    diff_in: list[bool]
    diff_out: list[bool]
    tangent_known: list[bool]

    @property
    def n_outputs(self) -> int:
        return len(self.diff_out)

    @property
    def n_residuals(self) -> int:
        return len(self.forward.jaxpr.outvars) - self.n_outputs

    def programs(self) -> dict[str, ClosedJaxpr]:
        """The two programs, labelled (what the pass shows)."""
        return {"forward": self.forward, "linear": self.linear}


def linearize_program(jaxpr: ClosedJaxpr, wanted: Sequence[bool] | None = None) -> LinearizedProgram:
    """The linearization of pure flat program `jaxpr` in the inputs marked `wanted` (default: every
    floating-point one), as two programs (see `LinearizedProgram`)."""
    in_avals, out_avals = list(jaxpr.in_avals), list(jaxpr.out_avals)
    wanted = [True] * len(in_avals) if wanted is None else list(wanted)
    diff_in = [w and is_differentiable(a.dtype) for a, w in zip(in_avals, wanted, strict=True)]
    linear = {}

    def forward(*primals):
        lin = linearize_flat(lambda *a: eval_jaxpr(jaxpr, *a), list(primals), diff_in)
        linear.update(jaxpr=lin.jaxpr, tangent_known=lin.tangent_known)  # NOTE: made while the forward is traced
        return [*lin.primal_outs, *lin.residuals]

    traced = trace_flat(forward, in_avals)
    return LinearizedProgram(traced, linear["jaxpr"], diff_in, [is_differentiable(a.dtype) for a in out_avals],
                             linear["tangent_known"])


def transpose_program(lin: LinearizedProgram) -> ClosedJaxpr:
    """The backward: `(residuals, one cotangent per output marked diff_out) -> one cotangent per
    differentiated input` (an output whose tangent is a known zero has an unused cotangent input)."""
    out_avals = lin.forward.out_avals[:lin.n_outputs]
    ct_avals = [a if d else None for a, d in zip(out_avals, lin.diff_out, strict=True)]
    return backward_program(lin.linear, lin.n_residuals, lin.tangent_known, ct_avals)


def compose_joint(lin: LinearizedProgram, backward: ClosedJaxpr, name: str | None = None) -> JointInfo:
    """The forward of `lin` then `backward` as one program, the backward's residual inputs replaced by
    the forward values they are; residuals the backward does not read are dropped (with the forward
    equations only they needed), and the cut is recorded."""
    fwd, bwd = lin.forward.jaxpr, backward.jaxpr
    n_out, n_res = lin.n_outputs, lin.n_residuals
    read = {id(a) for e in bwd.eqns for a in e.inputs} | {id(a) for a in bwd.outvars}
    to_forward = {id(r): v for r, v in zip(bwd.invars[:n_res], fwd.outvars[n_out:], strict=True) if id(r) in read}
    fwd_eqns = dce(fwd.eqns, [*fwd.outvars[:n_out], *to_forward.values()])
    bwd_eqns = rename_inputs(bwd.eqns, to_forward)
    outvars = [*fwd.outvars[:n_out], *(_read(a, to_forward) for a in bwd.outvars)]
    joint = Jaxpr([*fwd.constvars, *bwd.constvars], [*fwd.invars, *bwd.invars[n_res:]], [*fwd_eqns, *bwd_eqns],
                  outvars)
    closed = ClosedJaxpr(joint, [*lin.forward.consts, *backward.consts], meta=JaxprMeta(name=name))
    return JointInfo(closed, len(fwd.invars), n_out, len(fwd_eqns))


def _read(a: Atom, to_forward: dict) -> Atom:
    return to_forward.get(id(a), a) if isinstance(a, Var) else a
