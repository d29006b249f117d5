"""Loops recorded with their residuals: imperative autograd's answer to a loop's backward running its forward twice.

The backward (`aotjax.autograd.engine`) replays a recording and linearizes each op at the values its forward read;
for a loop that linearization runs the loop again to compute the residuals its backward reads, and no compiler
merges two loops (XLA merges the replayed straight-line ops with the forward's). So a `scan` run with an operand that
requires grad is linearized when it runs, as PyTorch's autograd node keeps its saved tensors: the linearization's
forward program (jvp, then partial evaluation's known part: the outputs, then the residuals) computes its outputs in
place of the op, and its node keeps the linearization and the residuals (`graph.Node.saved`). The first-order
backward replays that node as `aotjax.ops.calls.saved_linear` on the kept residuals; a backward with `create_graph`
replays the op itself (the derivative of the backward must see how the residuals depend on the operands).

What each iteration saves is min-cut's choice (`aotjax.partition.min_cut`, torch.compile's default): the fewest
bytes, the cheap rest recomputed by the backward loop. Linearizations are cached per primitive, params
(sub-programs by structure), operand avals and differentiated operands: a training loop traces one per loop.
"""
from __future__ import annotations

import threading

from aotjax.autograd import graph
from aotjax.core.avals import get_aval
from aotjax.core.eval_jaxpr import eval_jaxpr
from aotjax.core.ir import ClosedJaxpr, Literal, param_key
from aotjax.core.primitive import Primitive
from aotjax.interpreters.eval import executable
from aotjax.interpreters.partial_eval import partitioning_loop_bodies
from aotjax.interpreters.trace import trace_flat
from aotjax.ops.calls.saved_linear import SavedLinearization
from aotjax.ops.control_flow.scan import scan_p
from aotjax.partition.loops import repartition_loop_bodies
from aotjax.partition.min_cut import min_cut_partition
from aotjax.tensor import Tensor
from aotjax.transforms.joint import linearize_program

__all__: list[str] = []

_MIN_CUT_IN_LOOPS = repartition_loop_bodies(min_cut_partition())
_cache: dict = {}
_cache_lock = threading.Lock()


def _linearization(prim: Primitive, params: dict, avals: list, wanted: tuple) -> SavedLinearization:
    key = (prim, tuple((k, param_key(v)) for k, v in params.items()), tuple((a.shape, a.dtype) for a in avals),
           wanted)
    saved = _cache.get(key)
    if saved is None:
        op = trace_flat(lambda *args: prim.bind(*args, **params), avals)
        with partitioning_loop_bodies(_MIN_CUT_IN_LOOPS):
            lin = linearize_program(op, wanted)
        saved = SavedLinearization(lin.forward, lin.linear, lin.diff_in, lin.tangent_known, lin.n_outputs)
        with _cache_lock:
            saved = _cache.setdefault(key, saved)
    return saved


def _eval_eagerly(closed: ClosedJaxpr, vals: list) -> list:
    """`closed` on arrays, each equation by eager mode's executable (a loop compiled once per body structure)."""
    env = {id(v): c for v, c in zip(closed.jaxpr.constvars, closed.consts, strict=True)}
    env.update((id(v), x) for v, x in zip(closed.jaxpr.invars, vals, strict=True))

    def read(a):
        return a.val if isinstance(a, Literal) else env[id(a)]

    for eqn in closed.jaxpr.eqns:
        outs = executable(eqn.primitive, eqn.params)(*map(read, eqn.inputs))
        env.update((id(v), o) for v, o in zip(eqn.outputs, outs if eqn.primitive.multiple_results else [outs]))
    return [read(a) for a in closed.jaxpr.outvars]


def _run_saving(prim: Primitive, params: dict, args: list, vals: list, eager: bool) -> tuple[list, tuple]:
    """`prim` on `vals` (read from `args`, some of which require grad) by its linearization's forward program:
    its outputs, and what its recorded node keeps (`graph.Node.saved`): the linearization and the residuals."""
    wanted = tuple(isinstance(a, Tensor) and a._ag is not None for a in args)
    saved = _linearization(prim, params, [get_aval(v) for v in vals], wanted)
    outs = _eval_eagerly(saved.forward, vals) if eager else eval_jaxpr(saved.forward, *vals)
    return outs[:saved.n_outputs], (saved, tuple(outs[saved.n_outputs:]))


graph.register_saving(scan_p, _run_saving)
