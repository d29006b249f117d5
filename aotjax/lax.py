"""Control flow with JAX's names and signatures (`jax.lax`), on aotjax tensors: `scan`, `cond`, `switch`,
`while_loop`, `fori_loop`, `map`. Each is one higher-order primitive (`aotjax.ops.control_flow`) that works eagerly
(one compiled loop) and under every transform, with PyTorch's meaning of in-place writes inside. And the collectives
over a named `vmap` axis or a `shard_map` mesh axis (`aotjax.ops.distributed.collectives`): `psum`, `pmean`, `pmax`,
`pmin`, `axis_index`, `all_gather`, `psum_scatter`, `ppermute`; and `with_sharding_constraint`
(`aotjax.ops.distributed.sharding`)."""
from __future__ import annotations

from typing import Any, Callable

from aotjax.ops.control_flow import cond, fori_loop, scan, switch, while_loop
from aotjax.ops.distributed.collectives import all_gather, axis_index, pmax, pmean, pmin, ppermute, psum, psum_scatter
from aotjax.ops.distributed.sharding import with_sharding_constraint

__all__ = ["scan", "cond", "switch", "while_loop", "fori_loop", "map", "psum", "pmean", "pmax", "pmin", "axis_index",
           "all_gather", "psum_scatter", "ppermute", "with_sharding_constraint"]


def map(f: Callable, xs: Any):
    """`f` applied to each slice of `xs` along its leading axis, the results stacked: JAX's `lax.map`, a `scan`
    with no carry (one compiled body, not a Python loop).

    >>> aotjax.lax.map(lambda x: x.sum(), aotjax.ones(3, 2))
    tensor([2., 2., 2.])
    """
    _, ys = scan(lambda carry, x: (carry, f(x)), (), xs)
    return ys
