"""`from_jax`: a named primitive whose every rule is derived from a `jax` function, so that its derivatives are
JAX's own (the linear-algebra factorizations: `cholesky`, `qr`, `svd`, `eigh`, `lu`, ...).

The contract. `from_jax(name, impl)` makes two primitives:

- `name` (e.g. `cholesky`): `impl(*arrays, **params)` on `jax` arrays, returning an array (or a tuple of arrays
  with `multiple_results=True`). Its abstract value is `jax.eval_shape` of `impl` (the lowering layer's fallback);
  its lowering is `impl` itself. Operands are arrays; everything static (flags, modes, tolerances) is a param,
  hashable. `impl` must be a pure function that `jax.jvp`, `jax.vmap` and `jax.linear_transpose` can transform:
  any `jax.numpy`/`jax.scipy`/`jax.lax` code qualifies.
- `name_jvp` (e.g. `cholesky_jvp`): the companion primitive carrying every function derived from `impl` by the
  transforms below: the tangent map, its transpose, their derivatives, batched forms. It is linear in its last
  operands (the tangents, or the cotangents), which is what its transpose rule transposes.

Every primitive of the pair carries a param `chain`: the transforms applied to `impl`, in order (empty for `name`
itself as the user binds it). The rules only extend it:

- jvp: `name_jvp` with `chain + (Jvp(nonzero),)` on the primals and the nonzero tangents: `jax.jvp` of the
  function, whose results are the tangents of the floating results (integer results get symbolic zero tangents;
  integer operands never have a tangent).
- transpose (of a `name_jvp` in its linear operands): `name_jvp` with `chain + (Transpose(...),)` on the non-linear
  operands and the output cotangents: `jax.linear_transpose` of the function in the operands being transposed
  (the other linear operands, whose values are known, add a constant and are left out, as JAX does).
- batching: the same primitive with `chain + (Vmap(in_dims),)`: `jax.vmap` of the function, results at axis 0.

So `grad(grad(f))`, `jacfwd(jacrev(f))`, `vmap(grad(f))` compose to `jax`'s own transforms of `impl`, and a
printed program shows `cholesky` and `cholesky_jvp[chain=(jvp(1), T(1))]`.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from aotjax.core.avals import get_aval
from aotjax.core.primitive import Primitive, Recompute
from aotjax.interpreters.ad_util import Zero, instantiate, is_differentiable
from aotjax.interpreters.batching import batching_rules
from aotjax.interpreters.jvp import jvp_rules
from aotjax.interpreters.lowering import register_lowering
from aotjax.interpreters.transpose import is_undefined, transpose_rules

__all__ = ["from_jax", "Jvp", "Transpose", "Vmap", "cubic_flops"]


@dataclass(frozen=True)
class Jvp:
    """The tangent map: inputs `(*primals, *tangents of the operands marked in nonzero)`, results the tangents of
    the function's floating results."""

    nonzero: tuple[bool, ...]

    def __repr__(self) -> str:
        return f"jvp({''.join('1' if n else '0' for n in self.nonzero)})"


@dataclass(frozen=True)
class Transpose:
    """The transpose of a function linear in its operands `linear` (jointly) in the operands `undefined` (a
    subset): inputs `(*the operands not in linear, *one cotangent per result)`, results the cotangents of
    `undefined`. `avals` are the (shape, dtype name) of the `linear` operands."""

    linear: tuple[int, ...]
    undefined: tuple[int, ...]
    avals: tuple[tuple[tuple[int, ...], str], ...]
    n_cts: int  # the number of results of the function transposed: its cotangents are the last operands

    def __repr__(self) -> str:
        return f"T({','.join(map(str, self.undefined))})"


@dataclass(frozen=True)
class Vmap:
    """The function mapped over a batch axis: each operand's batch axis (None: not batched); results at axis 0."""

    in_dims: tuple[int | None, ...]

    def __repr__(self) -> str:
        return f"vmap({','.join('_' if d is None else str(d) for d in self.in_dims)})"


def cubic_flops(in_avals, out_avals, **params) -> float:
    """A factorization's rough cost: n^3 per matrix (`size * n` of each operand and result of 2 dims or more)."""
    return float(sum(a.size * (a.shape[-1] if len(a.shape) >= 2 else 1) for a in (*in_avals, *out_avals)))


# -- the functions the chain describes --------------------------------------------------------------------------
_impls: dict[str, Callable] = {}


@functools.lru_cache(maxsize=1024)
def _function(name: str, params: tuple, chain: tuple) -> Callable:
    """The `jax` function `chain` makes of op `name`'s `impl` with `params`: arrays in, a list of arrays out."""
    if not chain:
        impl, kw = _impls[name], dict(params)

        def base(*xs):
            out = impl(*xs, **kw)
            return list(out) if isinstance(out, (tuple, list)) else [out]
        return base
    f, step = _function(name, params, chain[:-1]), chain[-1]
    if isinstance(step, Vmap):
        return lambda *xs: list(jax.vmap(lambda *a: tuple(f(*a)), in_axes=step.in_dims, out_axes=0)(*xs))
    if isinstance(step, Jvp):
        n = len(step.nonzero)

        def tangent_map(*xs):
            primals, given = xs[:n], iter(xs[n:])
            tangents = [next(given) if nz else _zero_tangent(p) for p, nz in zip(primals, step.nonzero)]
            outs, t_outs = jax.jvp(lambda *a: tuple(f(*a)), tuple(primals), tuple(tangents))
            return [t for o, t in zip(outs, t_outs) if is_differentiable(o.dtype)]
        return tangent_map

    def transposed(*xs):
        n_known = len(xs) - step.n_cts
        known, cts = xs[:n_known], xs[n_known:]
        avals = dict(zip(step.linear, step.avals))

        def linear_part(*u):
            given, rest, args = dict(zip(step.undefined, u)), iter(known), []
            for i in range(n_known + len(step.linear)):
                if i in given:
                    args.append(given[i])
                elif i in avals:  # NOTE: a known linear operand only adds a constant: left out
                    args.append(jnp.zeros(*avals[i]))
                else:
                    args.append(next(rest))
            return tuple(f(*args))
        structs = [jax.ShapeDtypeStruct(*avals[i]) for i in step.undefined]
        return list(jax.linear_transpose(linear_part, *structs)(tuple(cts)))
    return transposed


def _zero_tangent(x):
    if is_differentiable(x.dtype):
        return jnp.zeros_like(x)
    return np.zeros(x.shape, dtype=jax.dtypes.float0)


def linear_operands(chain: tuple, n_operands: int) -> tuple[int, ...]:
    """The operands (of `n_operands`) the function `chain` describes is jointly linear in."""
    for step in reversed(chain):
        if isinstance(step, Jvp):
            return tuple(range(len(step.nonzero), n_operands))
        if isinstance(step, Transpose):
            return tuple(range(n_operands - step.n_cts, n_operands))
    return ()


# -- the primitives and their rules -----------------------------------------------------------------------------
def from_jax(name: str, impl: Callable, *, multiple_results: bool = False, flops=cubic_flops) -> Primitive:
    """The primitive `name` computing `impl` (see the module's contract), with its companion `name_jvp`; returns
    the first. Bind it with `chain=()`.

    >>> from aotjax.ops.linalg.decompositions import det_p  # made by `from_jax("det", jnp.linalg.det)`
    >>> aotjax.grad(lambda a: det_p.bind(a, chain=()))(aotjax.tensor([[2.0, 1.0], [1.0, 3.0]]))
    tensor([[ 3., -1.],
            [-1.,  2.]])
    """
    _impls[name] = impl
    prim = Primitive(name, multiple_results=multiple_results, recompute=Recompute.EXPENSIVE, flops=flops)
    derived = Primitive(name + "_jvp", multiple_results=True, recompute=Recompute.EXPENSIVE, flops=flops, linear=True)

    def lower_prim(*xs, chain, **params):
        outs = _function(name, tuple(sorted(params.items())), chain)(*xs)
        return outs if multiple_results else outs[0]

    register_lowering(prim, lower_prim)
    register_lowering(derived, lambda *xs, chain, **params: _function(name, tuple(sorted(params.items())), chain)(*xs))
    for p in (prim, derived):
        p.print_rule = _print_params
        jvp_rules[p] = functools.partial(_jvp_rule, p, derived)
        batching_rules[p] = functools.partial(_batch_rule, p)
    transpose_rules[derived] = functools.partial(_transpose_rule, derived)
    return prim


def _print_params(params: dict) -> dict:
    out = {k: v for k, v in params.items() if k != "chain"}
    if params["chain"]:
        out["chain"] = "(" + ", ".join(map(repr, params["chain"])) + ")"
    return out


def _as_list(prim: Primitive, out) -> list:
    return list(out) if prim.multiple_results else [out]


def _jvp_rule(prim: Primitive, derived: Primitive, primals, tangents, *, chain, **params):
    outs = _as_list(prim, prim.bind(*primals, chain=chain, **params))
    nonzero = tuple(not isinstance(t, Zero) and is_differentiable(get_aval(p).dtype)
                    for p, t in zip(primals, tangents))
    float_outs = [is_differentiable(get_aval(o).dtype) for o in outs]
    if not any(nonzero) or not any(float_outs):
        return outs, [Zero(get_aval(o)) for o in outs]
    given = [t for t, nz in zip(tangents, nonzero) if nz]
    t_outs = iter(derived.bind(*primals, *given, chain=chain + (Jvp(nonzero),), **params))
    return outs, [next(t_outs) if f else Zero(get_aval(o)) for o, f in zip(outs, float_outs)]


def _transpose_rule(derived: Primitive, cts, *args, chain, **params):
    linear = linear_operands(chain, len(args))
    undefined = tuple(i for i, a in enumerate(args) if is_undefined(a))
    if not set(undefined) <= set(linear):
        raise ValueError(f"transpose: primitive '{derived.name}' is not linear in operand "
                         f"{min(set(undefined) - set(linear))}; only linear programs can be transposed")
    avals = tuple((tuple(a.aval.shape), np.dtype(a.aval.dtype).name) if is_undefined(a)
                  else (tuple(a.shape), np.dtype(a.dtype).name) for a in (args[i] for i in linear))
    step = Transpose(linear, undefined, avals, len(cts))
    known = [a for i, a in enumerate(args) if i not in linear]
    cts_in = iter(derived.bind(*known, *(instantiate(c) for c in cts), chain=chain + (step,), **params))
    return [next(cts_in) if i in undefined else None for i in range(len(args))]


def _batch_rule(prim: Primitive, axis_size, vals, dims, *, chain, **params):
    outs = _as_list(prim, prim.bind(*vals, chain=chain + (Vmap(tuple(dims)),), **params))
    return outs, [0] * len(outs)
