"""`min_cut_partition`: choose saved vs recomputed values by max-flow/min-cut over the joint program.

Each forward value `v` is an edge `v.in -> v.out` whose capacity is the bytes saving it costs; an
equation links each operand's `out` to each result's `in` (infinite capacity); values the backward
reads link to the sink; values that must be computed in the forward (primal inputs, constants, and
the results of equations that are never recomputed: matmuls, reductions, random numbers, calls) hang
from the source. The minimum cut is the cheapest set of values to save such that the backward can
recompute everything else it needs from them. Primal inputs cost nothing to save (they exist
anyway), so chains of cheap elementwise and view ops are recomputed from the inputs.

A `memory_budget` below 1 trades recomputation for memory: saved values are given up for
recomputation in order of least FLOPs per byte, each time cutting again, down to 0 where only inputs
are saved. The saved bytes never grow as the budget falls.
"""
from __future__ import annotations

import math
from typing import Callable

import networkx as nx

from aotjax.core.ir import Var
from aotjax.core.primitive import Kind
from aotjax.partition.split import JointInfo, Partitioned, classify, needed_by_backward, split

# Primitives cheap enough to recompute in the backward rather than save: elementwise and data movement.
RECOMPUTABLE = frozenset("""
neg abs exp log log1p expm1 sqrt rsqrt sin cos tan tanh sigmoid relu silu erf floor ceil sign reciprocal square isnan
isfinite logical_not bitwise_not gelu round add sub mul remainder pow maximum minimum atan2 eq ne lt le gt ge
logical_and logical_or bitwise_and bitwise_or bitwise_xor div where clamp lerp convert_element_type select_scatter
slice_scatter diagonal_scatter clone cat flip roll repeat tril triu full fill copy masked_fill checkpoint_name
integer_pow
""".split())

_INF = math.inf


def recomputable(eqn) -> bool:
    """Whether the min-cut partitioner may recompute `eqn` in the backward."""
    return eqn.primitive.kind is Kind.VIEW or eqn.primitive.name in RECOMPUTABLE


def flops(eqn) -> float:
    """A rough FLOP count of `eqn` (what recomputing it costs)."""
    out = max((v.aval.size for v in eqn.outputs), default=1)
    if eqn.primitive.name == "matmul":
        return 2.0 * out * eqn.inputs[0].aval.shape[-1]
    if eqn.primitive.name == "einsum":
        a, b = (x.aval.size for x in eqn.inputs[:2])
        return 2.0 * out * max(1.0, math.sqrt(a * b / max(out, 1)))
    return float(max([out] + [a.aval.size for a in eqn.inputs if isinstance(a, Var)]))


def min_cut_partition(memory_budget: float = 1.0) -> Callable[[JointInfo], Partitioned]:
    """A partitioner that saves the fewest bytes the backward can recompute the rest from (see the
    module docstring); `memory_budget` in [0, 1] scales the saved bytes between that (1) and the
    inputs alone (0), recomputing more as it falls.

    >>> from aotjax.partition import min_cut_partition
    >>> lowered = aotjax.aot(lambda x: x.cos().cos().sum(), partition=min_cut_partition()).lower(aotjax.ones(3))
    >>> [r.why for r in lowered.residuals]
    ['argument x']
    """
    if not 0.0 <= memory_budget <= 1.0:
        raise ValueError(f"min_cut_partition: memory_budget must be in [0, 1], got {memory_budget}")

    def partition(joint: JointInfo) -> Partitioned:
        return split(joint, choose_saved(joint, memory_budget))

    partition.__name__ = f"min_cut_partition(memory_budget={memory_budget})"
    return partition


def choose_saved(joint: JointInfo, memory_budget: float = 1.0) -> list[Var]:
    """The values to save under `memory_budget` (see the module docstring)."""
    graph = _Graph(joint)
    best = graph.cut(frozenset())
    inputs_only = graph.cut(frozenset(graph.values), allow_all=True)
    if memory_budget >= 1.0 or graph.nbytes(best) <= graph.nbytes(inputs_only):
        return best
    cuts, recompute = [best], set()
    while True:
        candidates = [v for v in cuts[-1] if id(v) in graph.producer and id(v) not in recompute]
        if not candidates:
            break
        v = min(candidates, key=lambda v: flops(graph.producer[id(v)]) / max(v.aval.nbytes, 1))
        recompute.add(id(v))
        cuts.append(graph.cut(frozenset(recompute)))
    cuts.append(inputs_only)
    low, high = graph.nbytes(inputs_only), graph.nbytes(best)
    allowed = low + memory_budget * (high - low)
    fitting = [c for c in cuts if graph.nbytes(c) <= allowed + 1e-9]
    return max(fitting, key=graph.nbytes)


class _Graph:
    """The flow network of a joint program's forward values."""

    def __init__(self, joint: JointInfo):
        fwd, _, _ = classify(joint)
        self.fwd = fwd
        self.primal_ids = {id(v) for v in joint.primals}
        self.producer = {id(v): e for e in fwd for v in e.outputs if e.inputs}
        self.values = {id(v): v for v in joint.primals}
        self.values.update({id(v): v for e in fwd for v in e.outputs})
        self.needed = needed_by_backward(joint)

    def nbytes(self, saved) -> int:
        return int(sum(v.aval.nbytes for v in saved))

    def cut(self, recompute: frozenset, allow_all: bool = False) -> list[Var]:
        """The min cut, with the values in `recompute` (ids) forbidden to be saved; with `allow_all`,
        every equation may be recomputed (so only inputs are saved)."""
        g = nx.DiGraph()
        for key, v in self.values.items():
            free = key in self.primal_ids or key not in self.producer  # inputs and constants
            cap = 0.0 if free else (_INF if (key in recompute or allow_all) else float(v.aval.nbytes))
            g.add_edge(("in", key), ("out", key), capacity=cap)
            if free:
                g.add_edge("source", ("in", key), capacity=_INF)
        for e in self.fwd:
            banned = not (allow_all or recomputable(e)) and not any(id(v) in recompute for v in e.outputs)
            for v in e.outputs:
                if banned and e.inputs:
                    g.add_edge("source", ("in", id(v)), capacity=_INF)
                for a in e.inputs:
                    if isinstance(a, Var) and id(a) in self.values:
                        g.add_edge(("out", id(a)), ("in", id(v)), capacity=_INF)
        for v in self.needed:
            g.add_edge(("out", id(v)), "sink", capacity=_INF)
        if not self.needed:
            return []
        _, (reachable, _) = nx.minimum_cut(g, "source", "sink")
        return [v for key, v in self.values.items()
                if ("in", key) in reachable and ("out", key) not in reachable]

