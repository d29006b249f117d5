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
    least = _Graph(joint).cut(frozenset(graph.values), allow_all=True)  # inputs and what is never recomputed
    if memory_budget >= 1.0 or graph.nbytes(best) <= graph.nbytes(least):
        return best
    # NOTE: each step forces one more value to be recomputed; `graph` keeps its maximum flow from the step before
    # and only repairs and augments it (a few paths), instead of solving the whole network again.
    cuts, recompute = [best], set()
    cost: dict = {}  # FLOPs per byte of recomputing a value instead of saving it

    def flops_per_byte(v):
        c = cost.get(id(v))
        if c is None:
            c = cost[id(v)] = flops(graph.producer[id(v)]) / max(graph.bytes[id(v)], 1)
        return c

    while True:
        candidates = [v for v in cuts[-1] if id(v) in graph.producer and id(v) not in recompute
                      and not _never_recomputed(graph.producer[id(v)])]
        if not candidates:
            break
        v = min(candidates, key=flops_per_byte)
        recompute.add(id(v))
        cuts.append(graph.cut(frozenset(recompute)))
    cuts.append(least)
    low, high = graph.nbytes(least), graph.nbytes(best)
    allowed = low + memory_budget * (high - low)
    fitting = [c for c in cuts if graph.nbytes(c) <= allowed + 1e-9]
    return max(fitting, key=graph.nbytes)


class _Graph:
    """The flow network of a joint program's forward values: per value `v` a node `in` and a node `out` joined by
    an edge of capacity its bytes (0 for inputs and constants, infinite when it must be recomputed); edges of
    infinite capacity from each operand's `out` to each result's `in`, from the source to the `in` of what must be
    computed in the forward, and from the `out` of what the backward reads to the sink. `cut(recompute)` sets the
    capacities for `recompute` and returns the minimum cut; the network keeps its flow from one cut to the next."""

    def __init__(self, joint: JointInfo):
        fwd, _, _ = classify(joint)
        self.fwd = fwd
        self.primal_ids = {id(v) for v in joint.primals}
        self.producer = {id(v): e for e in fwd for v in e.outputs if e.inputs}
        self.values = {id(v): v for v in joint.primals}
        self.values.update({id(v): v for e in fwd for v in e.outputs})
        self.needed = needed_by_backward(joint)
        # NOTE: a capacity larger than any cut stands for infinity: no maximum flow saturates it, so the cut is the
        # one infinite capacities give (and flows stay exact integers)
        self.bytes = {key: int(v.aval.nbytes) for key, v in self.values.items()}
        self.inf = 1 + sum(self.bytes.values())
        self._last = None  # the `cut` the network's flow is for: (recompute, allow_all)
        self.net = _FlowNetwork(2 + 2 * len(self.values))
        self.node = {key: 2 + 2 * k for k, key in enumerate(self.values)}  # `in`; `out` is `in + 1`
        source, sink = 0, 1
        net, node, inf = self.net, self.node, self.inf
        self.value_edge, self.source_edge = {}, {}
        for key in self.values:
            self.value_edge[key] = net.add(node[key], node[key] + 1)
            if self._free(key):
                net.set_capacity(net.add(source, node[key]), inf)
        for e in fwd:
            for v in e.outputs:
                if e.inputs:
                    self.source_edge[id(v)] = net.add(source, node[id(v)])
                for a in e.inputs:
                    if isinstance(a, Var) and id(a) in self.values:
                        net.set_capacity(net.add(node[id(a)] + 1, node[id(v)]), inf)
        for v in self.needed:
            net.set_capacity(net.add(node[id(v)] + 1, sink), inf)

    def _free(self, key) -> bool:
        return key in self.primal_ids or key not in self.producer  # inputs and constants

    def nbytes(self, saved) -> int:
        return int(sum(self.bytes[id(v)] for v in saved))

    def cut(self, recompute: frozenset, allow_all: bool = False) -> list[Var]:
        """The min cut, with the values in `recompute` (ids) forbidden to be saved; with `allow_all`,
        every equation may be recomputed (so only inputs are saved). A `Recompute.NEVER` equation is
        never recomputed: its results are saved whatever `recompute` and `allow_all` say. Of the minimum cuts, the
        one nearest the sink (the values that can still reach the sink in the residual network are not saved)."""
        if not self.needed:
            return []
        last = self._last
        if last is not None and last[1] == allow_all and last[0] <= recompute:  # NOTE: what changed since, only
            keys = recompute - last[0]
            eqns = {id(e): e for key in keys if (e := self.producer.get(key)) is not None}.values()
        else:
            keys, eqns = self.values, [e for e in self.fwd if e.inputs]
        self._last = (recompute, allow_all)
        net, inf = self.net, self.inf
        for key in keys:
            free = self._free(key)
            forced = (key in recompute or allow_all) and not free and not _never_recomputed(self.producer[key])
            net.set_capacity(self.value_edge[key], 0 if free else (inf if forced else self.bytes[key]))
        for e in eqns:
            forced = any(id(v) in recompute for v in e.outputs)
            banned = _never_recomputed(e) or not (allow_all or forced or recomputable(e))
            for v in e.outputs:
                net.set_capacity(self.source_edge[id(v)], inf if banned else 0)
        net.max_flow()
        to_sink = net.reaching()
        node = self.node
        return [v for key, v in self.values.items() if not to_sink[node[key]] and to_sink[node[key] + 1]]


class _FlowNetwork:
    """A flow network on nodes `0..n-1` (0 the source, 1 the sink) that keeps its flow as capacities change:
    `set_capacity` lowers an edge's flow with its capacity (the flow it carried withdrawn along its paths from the
    source and to the sink), `max_flow` augments the
    current flow to a maximum one (Dinic's algorithm). Edge `2k` is the k-th edge added, `2k + 1` its reverse."""

    def __init__(self, n: int):
        self.adjacent: list[list[int]] = [[] for _ in range(n)]
        self.head: list[int] = []  # the node each edge points to
        self.capacity: list[int] = []
        self.flow: list[int] = []
        self.source, self.sink = 0, 1

    def add(self, u: int, v: int) -> int:
        """A new edge `u -> v` of capacity 0; returns its index."""
        e = len(self.head)
        self.adjacent[u].append(e)
        self.adjacent[v].append(e + 1)
        self.head += [v, u]
        self.capacity += [0, 0]
        self.flow += [0, 0]
        return e

    def set_capacity(self, e: int, capacity: int) -> None:
        self.capacity[e] = capacity
        excess = self.flow[e] - capacity
        if excess > 0:
            self._push(e, -excess)
            self._withdraw(self.head[e], excess, self.sink, 0)
            self._withdraw(self.head[e ^ 1], excess, self.source, 1)

    def _push(self, e: int, amount: int) -> None:
        self.flow[e] += amount
        self.flow[e ^ 1] -= amount

    def _withdraw(self, node: int, amount: int, end: int, parity: int) -> None:
        """Take `amount` of flow off paths between `node` and `end`: onwards to the sink (`parity` 0: along edges
        leaving each node) or back to the source (`parity` 1: along the reverses of edges entering it). The network
        has no flow cycle: it is a forward program's graph."""
        if node == end:
            return
        flow, head = self.flow, self.head
        while amount > 0:
            path, u = [], node
            while u != end:
                r = next(r for r in self.adjacent[u] if r & 1 == parity and flow[r ^ parity] > 0)
                path.append(r ^ parity)  # the edge itself, carrying flow
                u = head[r]
            step = min(amount, *(flow[e] for e in path))
            for e in path:
                self._push(e, -step)
            amount -= step

    def max_flow(self) -> None:
        """Augment the flow from node 0 (the source) to node 1 (the sink) until it is maximum."""
        adjacent, head, capacity, flow = self.adjacent, self.head, self.capacity, self.flow
        source, sink = self.source, self.sink
        n = len(adjacent)
        while True:
            level = [-1] * n
            level[source] = 0
            queue = [source]
            for u in queue:
                for e in adjacent[u]:
                    v = head[e]
                    if level[v] < 0 and capacity[e] > flow[e]:
                        level[v] = level[u] + 1
                        queue.append(v)
            if level[sink] < 0:
                return
            cursor = [0] * n
            while self._blocking_path(source, sink, level, cursor, adjacent, head, capacity, flow):
                pass

    def _blocking_path(self, source, sink, level, cursor, adjacent, head, capacity, flow) -> bool:
        """Push one augmenting path of the level graph (advancing the per-node edge cursors); False if none is left."""
        path, u = [], source
        while u != sink:
            edges = adjacent[u]
            while cursor[u] < len(edges):
                e = edges[cursor[u]]
                v = head[e]
                if level[v] == level[u] + 1 and capacity[e] > flow[e]:
                    break
                cursor[u] += 1
            else:
                if u == source:
                    return False
                level[u] = -1  # a dead end: never entered again in this phase
                e = path.pop()
                u = head[e ^ 1]
                cursor[u] += 1
                continue
            path.append(e)
            u = v
        step = min(capacity[e] - flow[e] for e in path)
        for e in path:
            self._push(e, step)
        return True

    def reaching(self) -> list[bool]:
        """Per node, whether it reaches the sink through edges with capacity left."""
        adjacent, head, capacity, flow, sink = self.adjacent, self.head, self.capacity, self.flow, self.sink
        seen = [False] * len(adjacent)
        seen[sink] = True
        stack = [sink]
        while stack:
            v = stack.pop()
            for r in adjacent[v]:  # `r` leaves v; its reverse `r ^ 1` enters v from `head[r]`
                u = head[r]
                if not seen[u] and capacity[r ^ 1] > flow[r ^ 1]:
                    seen[u] = True
                    stack.append(u)
        return seen
