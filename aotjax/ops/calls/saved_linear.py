"""`saved_linear`: a recorded loop whose forward already computed what its backward reads.

The imperative backward (`aotjax.autograd.engine`) replays a recording and linearizes each op at the values its
forward read. For straight-line ops the replayed forward is dead code or merged with the forward by the compiler;
a loop's linearization, though, runs the whole loop again to compute what its backward reads (its residuals), and
no compiler merges two loops: a jitted training step over an `nn.LayerStack` ran its forward scan twice.

So a loop is recorded linearized (`aotjax.autograd.saved_loops`), keeping its residuals as PyTorch's autograd node
keeps its saved tensors, and the first-order backward replays its node as `saved_linear(*residuals, *operands,
saved)`: its value is never read (the recording pins every value a node read: zeros), its derivative is the
linearization's linear program on the kept residuals (the residuals' own tangents are not read); transposed, the
loop's backward.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import jax.numpy as jnp

from aotjax.core.avals import get_aval
from aotjax.core.eval_jaxpr import eval_jaxpr
from aotjax.core.ir import ClosedJaxpr
from aotjax.core.primitive import Primitive, Recompute, jaxpr_flops
from aotjax.interpreters.ad_util import Zero, instantiate
from aotjax.interpreters.batching import batching_rules, not_mapped
from aotjax.interpreters.jvp import jvp_rules
from aotjax.interpreters.lowering import register_lowering

__all__ = ["saved_linear_p", "SavedLinearization"]


@dataclass(eq=False)  # NOTE: a primitive's param: hashed, by identity (one per cached linearization)
class SavedLinearization:
    """One op's linearization (`aotjax.transforms.joint.LinearizedProgram`): `forward` (operands -> outputs,
    residuals) and `linear` (residuals, one tangent per operand marked `diff_in` -> the tangents of the outputs
    whose tangent is not a known zero, `tangent_known`)."""

    forward: ClosedJaxpr
    linear: ClosedJaxpr
    diff_in: Sequence[bool]
    tangent_known: Sequence[bool]
    n_outputs: int

    @property
    def out_avals(self) -> list:
        return list(self.forward.out_avals[:self.n_outputs])

    @property
    def n_residuals(self) -> int:
        return len(self.forward.out_avals) - self.n_outputs


saved_linear_p = Primitive("saved_linear", multiple_results=True, recompute=Recompute.EXPENSIVE,
                           flops=lambda in_avals, out_avals, *, saved: jaxpr_flops(saved.linear.jaxpr))
saved_linear_p.abstract_eval = lambda *avals, saved: saved.out_avals
register_lowering(saved_linear_p, lambda *args, saved: [jnp.zeros(a.shape, a.dtype) for a in saved.out_avals])


def _saved_linear_jvp(primals, tangents, *, saved: SavedLinearization):
    n_res = saved.n_residuals
    outs = saved_linear_p.bind(*primals, saved=saved)
    # NOTE: the residuals' tangents are not read: the op's derivative is the linear program at the kept residuals
    ts = [instantiate(t, get_aval(p))
          for t, p, d in zip(tangents[n_res:], primals[n_res:], saved.diff_in, strict=True) if d]
    t_out = iter(eval_jaxpr(saved.linear, *primals[:n_res], *ts))
    return outs, [Zero(get_aval(o)) if known else next(t_out) for o, known in zip(outs, saved.tangent_known)]


def _saved_linear_batch(axis_size, vals, bdims, *, saved: SavedLinearization):
    return [instantiate(Zero(a)) for a in saved.out_avals], [not_mapped] * saved.n_outputs


jvp_rules[saved_linear_p] = _saved_linear_jvp
batching_rules[saved_linear_p] = _saved_linear_batch
