"""The `shard_map` primitive: a program run once per device of a mesh on each device's block of its operands
(`aotjax.shard_map` stages the user's function into it; see `aotjax.transforms.shard_map`).

`shard_map` carries the body's pure jaxpr (block shapes in and out, no consts: closed-over values are operands), the
`mesh` and a `PartitionSpec` per operand and per output, saying which mesh axes split which dims. Its rules:

- abstract evaluation (and typechecking): the global shapes from the block shapes and the specs; the operands'
  blocks must be the body's inputs;
- lowering: `jax.shard_map` of the body evaluated with jax (the collectives inside lower to `jax.lax`'s); eagerly,
  that compiled with `jax.jit`;
- jvp: a `shard_map` of the body's jvp, the tangents split as their primals;
- partial evaluation: a `shard_map` of the known part, returning the residuals each device's unknown part needs (a
  leading axis of one per device, split over every mesh axis), and a `shard_map` of the unknown part;
- transpose: a `shard_map` of the body run backwards, with JAX's convention for programs without replication
  checking: the cotangent of an output replicated over some mesh axes is divided by its number of copies, and an
  input replicated over mesh axes gets the sum of the devices' cotangents (`psum`);
- batching: a `shard_map` of the batched body, the batch axis leading and not split.
"""
from __future__ import annotations

import functools
import math

import jax
from jax.sharding import PartitionSpec

from aotjax.core.avals import ShapedArray, get_aval
from aotjax.core.errors import ShapeError
from aotjax.core.eval_jaxpr import eval_jaxpr
from aotjax.core.ir import ClosedJaxpr, Eqn, dce_rules, prune_jaxpr
from aotjax.core.primitive import Primitive, Recompute, jaxpr_flops
from aotjax.core.source_info import where
from aotjax.interpreters.ad_util import Zero, is_differentiable
from aotjax.interpreters.batching import at_front, batch_jaxpr, batching_rules, current_axis, front_dims
from aotjax.interpreters.jvp import jvp_jaxpr, jvp_rules
from aotjax.interpreters.lowering import eval_jaxpr_jax, lowering_rule, register_lowering
from aotjax.interpreters.partial_eval import partial_eval_jaxpr, partial_eval_rules
from aotjax.interpreters.trace import trace_flat
from aotjax.interpreters.transpose import UndefinedPrimal, backward_pass, is_undefined, transpose_rules
from aotjax.ops.distributed.collectives import psum_p
from aotjax.ops.math.elementwise import div
from aotjax.ops.shape.views import reshape

__all__ = ["shard_map_p", "spec_axes", "block_aval", "global_aval", "unmentioned"]

shard_map_p = Primitive("shard_map", multiple_results=True, recompute=Recompute.EXPENSIVE, linear=True,
                        higher_order=True,
                        flops=lambda in_avals, out_avals, *, jaxpr, mesh, **_: jaxpr_flops(jaxpr) * mesh.size)


# -- specs -----------------------------------------------------------------------------------------------
def spec_axes(entry) -> tuple:
    """The mesh axes one entry of a `PartitionSpec` splits its dim over (None: none; a name; a tuple of names)."""
    if entry is None:
        return ()
    return tuple(entry) if isinstance(entry, (tuple, list)) else (entry,)


def _split(spec, mesh) -> list[int]:
    return [math.prod(mesh.shape[a] for a in spec_axes(e)) for e in spec]


def block_aval(aval: ShapedArray, spec, mesh, what: str = "operand") -> ShapedArray:
    """Each device's block of a global value of `aval` split by `spec` over `mesh`; an error if it does not split."""
    if len(spec) > len(aval.shape):
        raise ShapeError(f"shard_map: the spec {spec} of {what} {aval.str_short()} names more dims than it has "
                         f"{where()}")
    shape = list(aval.shape)
    for d, n in enumerate(_split(spec, mesh)):
        if shape[d] % n:
            raise ShapeError(f"shard_map: dim {d} of {what} {aval.str_short()} (size {shape[d]}) does not split into "
                             f"{n} equal blocks over the mesh axes {spec_axes(spec[d])} of its spec {spec}{where()}")
        shape[d] //= n
    return ShapedArray(tuple(shape), aval.dtype)


def global_aval(aval: ShapedArray, spec, mesh) -> ShapedArray:
    """The global value whose blocks split by `spec` over `mesh` are of `aval`."""
    shape = list(aval.shape)
    for d, n in enumerate(_split(spec, mesh)):
        shape[d] *= n
    return ShapedArray(tuple(shape), aval.dtype)


def unmentioned(spec, mesh) -> tuple:
    """The mesh axes `spec` splits nothing over: its value is replicated over them."""
    used = {a for e in spec for a in spec_axes(e)}
    return tuple(a for a in mesh.axis_names if a not in used)


def _residual_spec(mesh) -> PartitionSpec:
    return PartitionSpec(tuple(mesh.axis_names))


# -- abstract evaluation, lowering -----------------------------------------------------------------------
def _abstract_eval(*avals, jaxpr: ClosedJaxpr, mesh, in_specs, out_specs, check_vma: bool):
    for i, (a, spec, want) in enumerate(zip(avals, in_specs, jaxpr.in_avals, strict=True)):
        got = block_aval(a, spec, mesh, f"operand {i}")
        if (got.shape, got.dtype) != (want.shape, want.dtype):
            raise ShapeError(f"shard_map: operand {i} {a.str_short()} split by {spec} gives blocks "
                             f"{got.str_short()}, but the body takes {want.str_short()}{where()}")
    return [global_aval(a, spec, mesh) for a, spec in zip(jaxpr.out_avals, out_specs, strict=True)]


def _lower(*args, jaxpr: ClosedJaxpr, mesh, in_specs, out_specs, check_vma: bool):
    def body(*blocks):
        return tuple(eval_jaxpr_jax(jaxpr.jaxpr, jaxpr.consts, blocks))

    run = jax.shard_map(body, mesh=mesh, in_specs=tuple(in_specs), out_specs=tuple(out_specs), check_vma=check_vma)
    return list(run(*args))


def _eager(**params):
    # NOTE: eagerly, the program runs compiled: one executable per body structure (see `eval.impl`).
    return jax.jit(functools.partial(lowering_rule(shard_map_p), **params))


# -- jvp -------------------------------------------------------------------------------------------------
def _jvp(primals, tangents, *, jaxpr: ClosedJaxpr, mesh, in_specs, out_specs, check_vma: bool):
    nonzeros = [not isinstance(t, Zero) and is_differentiable(a.dtype)
                for t, a in zip(tangents, jaxpr.in_avals, strict=True)]
    jvp_body, out_nonzeros = jvp_jaxpr(jaxpr, nonzeros)
    outs = shard_map_p.bind(
        *primals, *[t for t, nz in zip(tangents, nonzeros) if nz], jaxpr=jvp_body, mesh=mesh,
        in_specs=(*in_specs, *[s for s, nz in zip(in_specs, nonzeros) if nz]),
        out_specs=(*out_specs, *[s for s, nz in zip(out_specs, out_nonzeros) if nz]), check_vma=check_vma)
    m = len(out_specs)
    it = iter(outs[m:])
    avals = _abstract_eval(*[_aval(p) for p in primals], jaxpr=jaxpr, mesh=mesh, in_specs=in_specs,
                           out_specs=out_specs, check_vma=check_vma)
    return outs[:m], [next(it) if nz else Zero(a) for nz, a in zip(out_nonzeros, avals)]


def _aval(x) -> ShapedArray:
    return get_aval(x)


# -- partial evaluation ----------------------------------------------------------------------------------
def _partial_eval(trace, tracers, *, jaxpr: ClosedJaxpr, mesh, in_specs, out_specs, check_vma: bool):
    unknowns = [not t.pval.is_known for t in tracers]
    split = partial_eval_jaxpr(jaxpr, unknowns)
    out_unknowns = split.out_unknowns
    n_kout = len(out_unknowns) - sum(out_unknowns)
    n_res = split.num_res
    res_spec = _residual_spec(mesh)

    # NOTE: a residual is each device's own value (varying or not): it leaves the known program with a leading axis
    # of one, split over every mesh axis, and the unknown program takes that axis off again.
    def known_body(*xs):
        outs = eval_jaxpr(split.known, *xs)
        return [*outs[:n_kout], *[reshape(r, (1, *_aval(r).shape)) for r in outs[n_kout:]]]

    known_body_jaxpr = trace_flat(known_body, split.known.in_avals)
    res_avals = split.known.out_avals[n_kout:]

    def unknown_body(*xs):
        res = [reshape(r, tuple(a.shape)) for r, a in zip(xs[:n_res], res_avals)]
        return eval_jaxpr(split.unknown, *res, *xs[n_res:])

    unknown_in = [ShapedArray((1, *a.shape), a.dtype) for a in res_avals] + [
        a for a, uk in zip(jaxpr.in_avals, unknowns) if uk]
    unknown_body_jaxpr = trace_flat(unknown_body, unknown_in)

    known_specs = tuple(s for s, uk in zip(in_specs, unknowns) if not uk)
    k_out_specs = tuple(s for s, uk in zip(out_specs, out_unknowns) if not uk)
    k_outs = shard_map_p.bind(*[t.pval.const for t, uk in zip(tracers, unknowns) if not uk],
                              jaxpr=known_body_jaxpr, mesh=mesh, in_specs=known_specs,
                              out_specs=(*k_out_specs, *[res_spec] * n_res), check_vma=check_vma)
    residuals = [trace.known(r) for r in k_outs[n_kout:]]
    unknown_tracers = [trace.instantiate(t) for t, uk in zip(tracers, unknowns) if uk]
    u_outs = trace.record(shard_map_p, [*residuals, *unknown_tracers], dict(
        jaxpr=unknown_body_jaxpr, mesh=mesh, in_specs=(*[res_spec] * n_res, *[s for s, uk in zip(in_specs, unknowns)
                                                                               if uk]),
        out_specs=tuple(s for s, uk in zip(out_specs, out_unknowns) if uk), check_vma=check_vma))
    k_it, u_it = iter(k_outs[:n_kout]), iter(u_outs)
    return [next(u_it) if uk else trace.known(next(k_it)) for uk in out_unknowns]


# -- transpose -------------------------------------------------------------------------------------------
def _copies(spec, mesh) -> int:
    return math.prod(mesh.shape[a] for a in unmentioned(spec, mesh))


def _transpose(cts, *args, jaxpr: ClosedJaxpr, mesh, in_specs, out_specs, check_vma: bool):
    cts = list(cts) if isinstance(cts, (list, tuple)) else [cts]
    undefined = [is_undefined(a) for a in args]
    nonzero = [not isinstance(c, Zero) for c in cts]
    known = [a for a, u in zip(args, undefined) if not u]
    # NOTE: a replicated output's cotangent reaches each of its copies; each device takes its share.
    ct_vals = [c if _copies(s, mesh) == 1 else div(c, _copies(s, mesh))
               for c, s, nz in zip(cts, out_specs, nonzero) if nz]
    n_known = len(known)

    def body(*xs):
        k_it, c_it = iter(xs[:n_known]), iter(xs[n_known:])
        ins = [UndefinedPrimal(a) if u else next(k_it) for a, u in zip(jaxpr.in_avals, undefined)]
        outs = [next(c_it) if nz else Zero(a) for a, nz in zip(jaxpr.out_avals, nonzero)]
        in_cts = iter(backward_pass(jaxpr, [], ins, outs, instantiate=True))
        result = []
        for spec, u in zip(in_specs, undefined):
            if u:
                ct, over = next(in_cts), unmentioned(spec, mesh)
                result.append(psum_p.bind(ct, axis_name=over) if over else ct)
        return result

    avals = [a for a, u in zip(jaxpr.in_avals, undefined) if not u] + [
        a for a, nz in zip(jaxpr.out_avals, nonzero) if nz]
    t_jaxpr = trace_flat(body, avals)
    outs = iter(shard_map_p.bind(
        *known, *ct_vals, jaxpr=t_jaxpr, mesh=mesh,
        in_specs=(*[s for s, u in zip(in_specs, undefined) if not u], *[s for s, nz in zip(out_specs, nonzero) if nz]),
        out_specs=tuple(s for s, u in zip(in_specs, undefined) if u), check_vma=check_vma))
    return [next(outs) if u else None for u in undefined]


# -- batching, dce ---------------------------------------------------------------------------------------
def _batch(axis_size, vals, bdims, *, jaxpr: ClosedJaxpr, mesh, in_specs, out_specs, check_vma: bool):
    vals, in_batched = at_front(vals, bdims)
    batched, out_batched = batch_jaxpr(jaxpr, current_axis(), in_batched)
    lead = lambda spec, b: PartitionSpec(None, *spec) if b else spec  # noqa: E731  (the batch axis is not split)
    outs = shard_map_p.bind(*vals, jaxpr=batched, mesh=mesh,
                            in_specs=tuple(lead(s, b) for s, b in zip(in_specs, in_batched)),
                            out_specs=tuple(lead(s, b) for s, b in zip(out_specs, out_batched)), check_vma=check_vma)
    return outs, front_dims(out_batched)


def _dce(eqn: Eqn, used_outputs: list[bool]) -> Eqn:
    """A `shard_map` computing only its used outputs, from the operands those read."""
    if all(used_outputs):
        return eqn
    body, used_inputs = prune_jaxpr(eqn.params["jaxpr"], used_outputs)
    p = eqn.params
    params = dict(p, jaxpr=body, in_specs=tuple(s for s, u in zip(p["in_specs"], used_inputs) if u),
                  out_specs=tuple(s for s, u in zip(p["out_specs"], used_outputs) if u))
    return Eqn(shard_map_p, [a for a, u in zip(eqn.inputs, used_inputs) if u],
               [v for v, u in zip(eqn.outputs, used_outputs) if u], params, eqn.source_info)


shard_map_p.abstract_eval = _abstract_eval
shard_map_p.eager_impl = _eager
register_lowering(shard_map_p, _lower)
jvp_rules[shard_map_p] = _jvp
partial_eval_rules[shard_map_p] = _partial_eval
transpose_rules[shard_map_p] = _transpose
batching_rules[shard_map_p] = _batch
dce_rules[shard_map_p] = _dce
