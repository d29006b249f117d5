"""`min_cut_partition`'s flow network keeps its maximum flow from one cut to the next (the memory budget's steps
each force one more value to be recomputed). It must choose exactly what solving each cut from scratch chose: the
reference below is that, written with networkx's `minimum_cut` (the partitioner's implementation before), on the
joints of a few programs at several budgets."""
from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest

import aotjax
import aotjax.nn.functional as F
from aotjax.core.ir import Var
from aotjax.core.primitive import Recompute
from aotjax.partition import default_partition
from aotjax.partition.min_cut import choose_saved, flops, recomputable
from aotjax.partition.split import classify, needed_by_backward
from tests.helpers import FLOAT

pytestmark = pytest.mark.x32_only  # NOTE: independent of the float width: not run again in the x64 pass


# -- the reference: every cut solved from scratch by networkx ------------------------------------------------------
def _never(e) -> bool:
    return e.primitive.recompute is Recompute.NEVER


def _reference_cut(joint, recompute: frozenset, allow_all: bool = False) -> list:
    fwd, _, _ = classify(joint)
    primal_ids = {id(v) for v in joint.primals}
    producer = {id(v): e for e in fwd for v in e.outputs if e.inputs}
    values = {id(v): v for v in joint.primals}
    values.update({id(v): v for e in fwd for v in e.outputs})
    needed = needed_by_backward(joint)
    g = nx.DiGraph()
    for key, v in values.items():
        free = key in primal_ids or key not in producer
        forced = (key in recompute or allow_all) and not free and not _never(producer[key])
        g.add_edge(("in", key), ("out", key), capacity=0.0 if free else (math.inf if forced else float(v.aval.nbytes)))
        if free:
            g.add_edge("source", ("in", key), capacity=math.inf)
    for e in fwd:
        forced = any(id(v) in recompute for v in e.outputs)
        banned = _never(e) or not (allow_all or forced or recomputable(e))
        for v in e.outputs:
            if banned and e.inputs:
                g.add_edge("source", ("in", id(v)), capacity=math.inf)
            for a in e.inputs:
                if isinstance(a, Var) and id(a) in values:
                    g.add_edge(("out", id(a)), ("in", id(v)), capacity=math.inf)
    for v in needed:
        g.add_edge(("out", id(v)), "sink", capacity=math.inf)
    if not needed:
        return []
    _, (reachable, _) = nx.minimum_cut(g, "source", "sink")
    return [v for key, v in values.items() if ("in", key) in reachable and ("out", key) not in reachable]


def _reference_saved(joint, budgets) -> dict:
    """Per budget, what the memory-budget knapsack saves, every cut solved from scratch."""
    def nbytes(cut):
        return sum(v.aval.nbytes for v in cut)

    fwd, _, _ = classify(joint)
    producer = {id(v): e for e in fwd for v in e.outputs if e.inputs}
    best = _reference_cut(joint, frozenset())
    everything = frozenset(id(v) for v in [*joint.primals, *(v for e in fwd for v in e.outputs)])
    least = _reference_cut(joint, everything, allow_all=True)
    cuts, recompute = [best], set()
    while nbytes(best) > nbytes(least):
        candidates = [v for v in cuts[-1] if id(v) in producer and id(v) not in recompute
                      and not _never(producer[id(v)])]
        if not candidates:
            break
        v = min(candidates, key=lambda v: flops(producer[id(v)]) / max(v.aval.nbytes, 1))
        recompute.add(id(v))
        cuts.append(_reference_cut(joint, frozenset(recompute)))
    cuts.append(least)
    out = {}
    for budget in budgets:
        allowed = nbytes(least) + budget * (nbytes(best) - nbytes(least))
        fits = budget >= 1.0 or nbytes(best) <= nbytes(least)
        out[budget] = best if fits else max([c for c in cuts if nbytes(c) <= allowed + 1e-9], key=nbytes)
    return out


# -- programs ---------------------------------------------------------------------------------------------------------
def _rand(*shape, seed=0):
    return aotjax.tensor(np.random.default_rng(seed).uniform(-1, 1, shape).astype(FLOAT))


def _block(p, x):
    h = F.layer_norm(x, (x.shape[-1],), p["g"], p["b"])
    q, k, v = (h @ p["wq"]).unsqueeze(1), (h @ p["wk"]).unsqueeze(1), (h @ p["wv"]).unsqueeze(1)
    x = x + F.scaled_dot_product_attention(q, k, v, is_causal=True).squeeze(1) @ p["wo"]
    return x + (x @ p["w1"]).gelu() @ p["w2"]


def _blocks(ps, x):
    for p in ps:
        x = _block(p, x)
    return (x * x).mean()


def _block_params(seed):
    w = 8
    names = {"wq": (w, w), "wk": (w, w), "wv": (w, w), "wo": (w, w), "w1": (w, 2 * w), "w2": (2 * w, w)}
    p = {k: _rand(*s, seed=seed + i) * 0.3 for i, (k, s) in enumerate(names.items())}
    p.update(g=aotjax.ones(w), b=aotjax.zeros(w))
    return p


def _mlp(w1, w2, x):
    h = (x @ w1).tanh()
    h = (h @ w2).relu() * x.sigmoid()
    return (h.exp().sin() * x.cos()).sum()


def _views(x, w):
    y = (x @ w).t().contiguous()
    y[1:].mul_(y[:-1].sigmoid())
    return y.cumsum(0).square().sum() + x.diagonal().sum()


PROGRAMS = [
    ("a transformer block", _blocks, lambda: ([_block_params(0)], _rand(2, 4, 8))),
    ("mlp", _mlp, lambda: (_rand(4, 6), _rand(6, 4, seed=1), _rand(3, 4, seed=2))),
    ("views and writes", _views, lambda: (_rand(4, 4), _rand(4, 4, seed=3))),
]


def _joint(fn, args):
    joints = []

    def keep(joint):
        joints.append(joint)
        return default_partition(joint)

    aotjax.aot(fn, partition=keep).lower(*args)
    return joints[0]


@pytest.mark.parametrize("name,fn,make", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_incremental_cuts_choose_what_cuts_from_scratch_chose(name, fn, make):
    joint = _joint(fn, make())
    budgets = (1.0, 0.75, 0.5, 0.2, 0.0)
    reference = _reference_saved(joint, budgets)
    chosen = {}
    for budget in budgets:
        saved = choose_saved(joint, budget)
        assert [id(v) for v in saved] == [id(v) for v in reference[budget]], budget
        chosen[budget] = sum(v.aval.nbytes for v in saved)
    assert chosen[0.0] < chosen[1.0], chosen  # the budget made a difference
    assert chosen[0.0] <= chosen[0.5] <= chosen[1.0]
