"""View chains: how a view is read from its base and how a write to it becomes a new base.

A view is its base plus a chain of view steps (view primitives with their params). Reading applies
the chain; writing a new value `y` to the view walks the chain backwards through each step's
`view_inverse` rule. The same code serves eager tensors (with `apply` evaluating on concrete
arrays) and functionalization (with `apply` = `bind`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from aotjax.core.primitive import Kind, Primitive

Apply = Callable[..., Any]  # apply(prim, *operands, **params) -> value


@dataclass(frozen=True, slots=True)
class ViewStep:
    """One view primitive applied with fixed params."""

    prim: Primitive
    params: tuple[tuple[str, Any], ...]

    @staticmethod
    def make(prim: Primitive, params: dict) -> "ViewStep":
        assert prim.kind is Kind.VIEW, prim
        return ViewStep(prim, tuple(params.items()))

    def apply(self, apply: Apply, x):
        return apply(self.prim, x, **dict(self.params))

    def __str__(self) -> str:
        ps = ", ".join(f"{k}={v}" for k, v in self.params)
        return f"{self.prim.name}({ps})"


Chain = tuple[ViewStep, ...]


def apply_chain(apply: Apply, base, chain: Chain):
    """The view's value: the chain applied to the base."""
    for step in chain:
        base = step.apply(apply, base)
    return base


def chain_values(apply: Apply, base, chain: Chain) -> list:
    """`[base, step 1 of base, ..., the view]`: every intermediate of reading the view."""
    vals = [base]
    for step in chain:
        vals.append(step.apply(apply, vals[-1]))
    return vals


def write_through(apply: Apply, base, chain: Chain, y, values: list | None = None):
    """The new base after the view `chain` of `base` is overwritten with `y`. `values` may give the
    intermediates of reading the view (`chain_values`), so they are not computed again."""
    if not chain:
        return y
    bases = values[:-1] if values is not None else chain_values(apply, base, chain[:-1])
    for step, b in zip(reversed(chain), reversed(bases)):
        y = step.prim.view_inverse(apply, b, y, **dict(step.params))
    return y


def relative_chain(chain: Chain, base_chain: Chain) -> Chain | None:
    """`chain` (a view of a storage) relative to `base_chain` (a view of the same storage), if the first is the
    second followed by more steps; else None."""
    n = len(base_chain)
    return chain[n:] if chain[:n] == base_chain else None


def storage_key(x) -> int:
    """What tensors sharing memory have in common: their storage (the object itself, if it has none)."""
    storage = getattr(x, "_storage", None)
    return id(storage) if storage is not None else id(x)


def chain_str(chain: Chain) -> str:
    return " -> ".join(map(str, chain)) if chain else "(base)"
