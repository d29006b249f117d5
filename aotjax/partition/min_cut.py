"""`min_cut_partition`: choose saved vs recomputed values by max-flow/min-cut over the joint program.

Each forward value `v` is an edge `v.in -> v.out` whose capacity is the bytes saving it costs; an
equation links each operand's `out` to each result's `in` (infinite capacity); values the backward
reads link to the sink; values that must be computed in the forward (primal inputs, constants, and
the results of equations that are not recomputed) hang from the source. The minimum cut is the
cheapest set of values to save such that the backward can recompute everything else it needs from
them. Primal inputs cost nothing to save (they exist anyway), so chains of cheap elementwise and view
ops are recomputed from the inputs.

What may be recomputed is declared on each primitive (`aotjax.core.primitive.Recompute`): `CHEAP`
ones (elementwise, data movement) freely, `EXPENSIVE` ones (matrix products, reductions, gathers,
calls) only when a memory budget forces it, `NEVER` ones (random draws) never. A `memory_budget`
below 1 trades recomputation for memory: saved values are given up for recomputation in order of
least FLOPs per byte (each primitive's declared cost rule, `Primitive.flops`), each time cutting
again, down to 0 where only inputs and the results of `NEVER` primitives are saved. The saved bytes
never grow as the budget falls.
"""
from __future__ import annotations

import math
from typing import Callable

from aotjax.core.ir import Eqn, Var
from aotjax.core.primitive import Recompute, eqn_flops
from aotjax.partition.split import JointInfo, Partitioned, classify, needed_by_backward, split

_INF = math.inf


def recompute_class(eqn: Eqn) -> Recompute:
    """The recompute class `eqn`'s primitive declares (`Primitive.recompute`)."""
    cls = eqn.primitive.recompute
    if cls is None:
        raise NotImplementedError(
            f"min_cut_partition: primitive '{eqn.primitive.name}' declares no recompute class; declare one "
            f"(Primitive(..., recompute=Recompute.CHEAP / EXPENSIVE / NEVER)), or make it with a family combinator")
    return cls


def recomputable(eqn: Eqn) -> bool:
    """Whether the min-cut partitioner recomputes `eqn` in the backward freely (a `Recompute.CHEAP` primitive)."""
    return recompute_class(eqn) is Recompute.CHEAP


def _never_recomputed(eqn: Eqn) -> bool:
    return recompute_class(eqn) is Recompute.NEVER


def flops(eqn: Eqn) -> float:
    """A rough FLOP count of `eqn` (what recomputing it costs), by its primitive's cost rule (`Primitive.flops`)."""
    return eqn_flops(eqn)


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
    least = graph.cut(frozenset(graph.values), allow_all=True)  # inputs and what is never recomputed
    if memory_budget >= 1.0 or graph.nbytes(best) <= graph.nbytes(least):
        return best
    cuts, recompute = [best], set()
    while True:
        candidates = [v for v in cuts[-1] if id(v) in graph.producer and id(v) not in recompute
                      and not _never_recomputed(graph.producer[id(v)])]
        if not candidates:
            break
        v = min(candidates, key=lambda v: flops(graph.producer[id(v)]) / max(v.aval.nbytes, 1))
        recompute.add(id(v))
        cuts.append(graph.cut(frozenset(recompute)))
    cuts.append(least)
    low, high = graph.nbytes(least), graph.nbytes(best)
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
        every equation may be recomputed (so only inputs are saved). A `Recompute.NEVER` equation is
        never recomputed: its results are saved whatever `recompute` and `allow_all` say."""
        import networkx as nx  # NOTE: imported at the first cut: it costs `import aotjax` 0.2 s

        g = nx.DiGraph()
        for key, v in self.values.items():
            free = key in self.primal_ids or key not in self.producer  # inputs and constants
            forced = (key in recompute or allow_all) and not free and not _never_recomputed(self.producer[key])
            cap = 0.0 if free else (_INF if forced else float(v.aval.nbytes))
            g.add_edge(("in", key), ("out", key), capacity=cap)
            if free:
                g.add_edge("source", ("in", key), capacity=_INF)
        for e in self.fwd:
            forced = any(id(v) in recompute for v in e.outputs)
            banned = _never_recomputed(e) or not (allow_all or forced or recomputable(e))
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

