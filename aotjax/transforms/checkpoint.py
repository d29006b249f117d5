"""`checkpoint` (alias `remat`): rematerialization regions, with JAX's policies; `checkpoint_name`.

A checkpointed region is staged (functionalized, so it may use views and in-place ops on its own
values) into one `checkpoint` equation. Differentiated, its intermediates are saved for the
backward only where the policy allows; the rest the backward recomputes from the region's inputs
(see `aotjax.ops.calls.remat`).

Policies are `policy(prim, *avals, **params) -> bool` ("may this primitive's output be saved?"):
`nothing_saveable` (the default: save only the region's inputs), `everything_saveable`,
`dots_saveable` (matrix products: primitives declared `is_dot`), `save_only_these_names(*names)` and
`save_anything_except_these_names(*names)` (values marked with `checkpoint_name`).
"""
from __future__ import annotations

import functools
from operator import attrgetter
from typing import Callable

from aotjax.core.ir import ClosedJaxpr, Jaxpr
from aotjax.core.source_info import where
from aotjax.ops.calls.remat import checkpoint_p, name_p
from aotjax.runtime import boundary
from aotjax.runtime.boundary import Slot
from aotjax.transforms.argnums import normalize_argnums
from aotjax.transforms.functionalize import finish_call, stage_functionalized
from aotjax.transforms.jit import check_staged_outputs
from aotjax.transforms.passes import run_pass


# -- policies ------------------------------------------------------------------------------------------
def everything_saveable(prim, *avals, **params) -> bool:
    """Save every intermediate (no recomputation)."""
    return True


def nothing_saveable(prim, *avals, **params) -> bool:
    """Save nothing but the region's inputs: the backward recomputes the region."""
    return False


def dots_saveable(prim, *avals, **params) -> bool:
    """Save the outputs of matrix products (`matmul`, `einsum`: primitives declared `is_dot`); recompute the
    cheap rest."""
    return prim.is_dot


def save_only_these_names(*names: str) -> Callable:
    """Save only the values marked `checkpoint_name(x, name)` with one of `names`."""
    wanted = _names("save_only_these_names", names)

    def policy(prim, *avals, **params) -> bool:
        return prim is name_p and params["name"] in wanted

    policy.__name__ = policy.__qualname__ = _policy_name("save_only_these_names", wanted)
    return policy


def save_anything_except_these_names(*names: str) -> Callable:
    """Save everything except the values marked `checkpoint_name(x, name)` with one of `names` (and the
    computation feeding only them)."""
    unwanted = _names("save_anything_except_these_names", names)

    def policy(prim, *avals, **params) -> bool:
        return not (prim is name_p and params["name"] in unwanted)

    policy.__name__ = policy.__qualname__ = _policy_name("save_anything_except_these_names", unwanted)
    return policy


def _names(maker: str, names: tuple) -> frozenset:
    """The names a policy maker was given, each a string (`checkpoint_name`'s)."""
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"checkpoint_policies.{maker}: each name must be a string (as given to checkpoint_name), "
                            f"got {name!r} of type {type(name).__name__}{where()}; pass the names as separate "
                            f"arguments: {maker}('a', 'b')")
    return frozenset(names)


def _policy_name(maker: str, names: frozenset) -> str:
    """`save_only_these_names('a', 'b')`: how a policy made from names prints (in jaxprs too)."""
    return f"{maker}({', '.join(map(repr, sorted(names)))})"


class checkpoint_policies:  # noqa: N801  (a namespace, named as JAX's)
    """The policies, as `aotjax.checkpoint_policies.dots_saveable` etc."""

    everything_saveable = staticmethod(everything_saveable)
    nothing_saveable = staticmethod(nothing_saveable)
    dots_saveable = staticmethod(dots_saveable)
    save_only_these_names = staticmethod(save_only_these_names)
    save_anything_except_these_names = staticmethod(save_anything_except_these_names)


# -- the transform -------------------------------------------------------------------------------------
def checkpoint(fun: Callable, policy: Callable | None = None, prevent_cse: bool = True,
               static_argnums: int | tuple = ()) -> Callable:
    """`fun`, with its intermediates recomputed in the backward instead of saved, except those
    `policy` allows (default `nothing_saveable`). `prevent_cse` keeps XLA from merging the
    recomputation with the forward when both land in one program (an `optimization_barrier`).

    >>> f = aotjax.checkpoint(lambda x: x.sin().sin())
    >>> aotjax.grad(lambda x: f(x).sum())(aotjax.tensor([0.0]))
    tensor([1.])
    >>> aotjax.print_saved_residuals(lambda x: f(x).sum(), aotjax.tensor([0.0]))
    f32[1]  4 bytes  argument x
    """
    policy = _checked_policy(policy)
    static_argnums = normalize_argnums(fun, static_argnums, "checkpoint", "static_argnums")

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        staged = run_pass("checkpoint: functionalize", stage_functionalized, fun, args, kwargs, static_argnums,
                          "checkpoint", show=attrgetter("jaxpr"))
        check_staged_outputs("checkpoint", fun, staged)  # NOTE: not a string either: jax.checkpoint's rule
        meta, closed = staged.meta, staged.jaxpr
        leaves = staged.leaves
        consts, jaxpr = _closure_convert(closed)
        bases = [boundary.group_base(g, leaves) for g in meta.groups]
        outs = checkpoint_p.bind(*consts, *bases, jaxpr=jaxpr, policy=policy, prevent_cse=prevent_cse)
        by_kind = dict(zip(meta.layout, outs, strict=True))
        # NOTE: writes into arguments and captured tensors (a BatchNorm buffer, a generator's key) are outputs of the
        # region, applied to the caller like jit's; the recomputation in the backward reads the region's inputs as
        # they were at entry, so it draws the same random numbers as the forward did.
        # `.grad`s a `backward()` inside assigned are applied as jit applies them (`finish_call`).
        return finish_call(staged, boundary.apply(meta, leaves, [by_kind[(Slot.MUTATED, g)] for g in meta.mutated],
                                                  [by_kind[(Slot.BASE, k)] for k in range(meta.n_bases)]))

    return wrapped


remat = checkpoint

_POLICIES = ", ".join(f"checkpoint_policies.{name}" for name in vars(checkpoint_policies) if not name.startswith("_"))
_POLICY_MAKERS = (save_only_these_names, save_anything_except_these_names)


def _checked_policy(policy) -> Callable:
    """`policy`, or `nothing_saveable` for None; anything else than a policy function is refused here rather than
    where the first differentiation calls it."""
    if policy is None:
        return nothing_saveable
    if any(policy is maker for maker in _POLICY_MAKERS):
        raise TypeError(f"checkpoint: policy={policy.__name__} makes a policy from names; call it: "
                        f"policy=checkpoint_policies.{policy.__name__}('name', ...){where()}")
    if not callable(policy) or isinstance(policy, type):
        raise TypeError(f"checkpoint: policy must be a function `policy(prim, *avals, **params) -> bool` or None, "
                        f"got {policy!r} of type {type(policy).__name__}{where()}; use one of {_POLICIES}")
    return policy


def _closure_convert(closed):
    """The region's constants become leading operands (they may be tracers of enclosing transforms)."""
    jaxpr = closed.jaxpr
    converted = Jaxpr([], [*jaxpr.constvars, *jaxpr.invars], jaxpr.eqns, jaxpr.outvars)
    return list(closed.consts), ClosedJaxpr(converted, [])


def checkpoint_name(x, name: str):
    """`x`, marked with `name` for the checkpoint policies `save_only_these_names` and
    `save_anything_except_these_names`.

    >>> aotjax.checkpoint_name(aotjax.ones(2), "h")
    tensor([1., 1.])
    """
    if not isinstance(name, str):
        raise TypeError(f"checkpoint_name: name must be a string, got {name!r} of type {type(name).__name__}"
                        f"{where()}")
    return name_p.bind(x, name=name)
