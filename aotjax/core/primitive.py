"""Primitives: the operations jaxprs are made of, each declaring its kind and carrying its core rules.

A primitive is `functional` (a pure function of its operands), a `view` (its output aliases its
first operand: reading applies it to the base, writing goes back through `view_inverse`), or a
`mutation` (it writes the operands listed in `mutates`; a metadata mutation such as `t_` instead
re-views operand 0 through `metadata_view`). Interpreter-specific rules (lowering, jvp, transpose,
batching) live in each interpreter's own table; the rules every interpreter needs live here.
"""
from __future__ import annotations

import enum
from typing import Any, Callable, Protocol

from aotjax.core.avals import ShapedArray
from aotjax.core.errors import AotjaxError
from aotjax.core.source_info import where


class Kind(enum.Enum):
    FUNCTIONAL = "functional"
    VIEW = "view"
    MUTATION = "mutation"


class AbstractEvalRule(Protocol):
    """`(*avals, **params) -> aval` (or a list of avals when `multiple_results`). Raises a
    ShapeError/DTypeError whose message starts with the op name and shows the shapes."""

    def __call__(self, *avals: ShapedArray, **params: Any) -> ShapedArray | list[ShapedArray]: ...


class ViewInverseRule(Protocol):
    """`(apply, base, new_view_value, **params) -> new_base`: the base after the view's elements are
    replaced by `new_view_value`. `apply(prim, *operands, **params)` evaluates a primitive: on
    concrete arrays in eager mode, by `bind` under functionalize."""

    def __call__(self, apply: Callable, base: Any, y: Any, **params: Any) -> Any: ...


class ViewStridesRule(Protocol):
    """`(shape, strides, offset, **params) -> (strides, offset)`: the PyTorch strides and storage
    offset the view would have. Metadata only: data is never strided."""

    def __call__(self, shape: tuple, strides: tuple, offset: int, **params: Any) -> tuple[tuple, int]: ...


_registry: list["Primitive"] = []


def all_primitives() -> list["Primitive"]:
    """Every primitive defined so far (the op families register theirs when imported)."""
    return list(_registry)


class Primitive:
    """An operation of the IR. `bind` applies it under the current interpreter stack."""

    def __init__(self, name: str, *, kind: Kind = Kind.FUNCTIONAL, multiple_results: bool = False,
                 mutates: tuple[int, ...] = (), metadata_view: "Primitive | None" = None,
                 functional: "Primitive | None" = None):
        self.name = name
        self.kind = kind
        self.multiple_results = multiple_results
        self.mutates = tuple(mutates)  # operands a mutation writes
        self.metadata_view = metadata_view  # for metadata mutations: the view applied to operand 0
        self.functional = functional  # for data mutations: the pure primitive computing the new values
        self.abstract_eval: AbstractEvalRule | None = None
        self.view_inverse: ViewInverseRule | None = None
        self.view_strides: ViewStridesRule | None = None
        self.print_rule: Callable[[dict], dict] | None = None
        # `(**params) -> callable on arrays`: how eager mode runs it, when not by jitting its lowering rule
        self.eager_impl: Callable[..., Callable] | None = None
        if kind is Kind.MUTATION and not mutates:
            raise ValueError(f"mutation primitive '{name}' must declare the operands it writes")
        _registry.append(self)

    def bind(self, *args, **params):
        """Apply this primitive under the interpreter stack (`aotjax.core.interpreter.bind`)."""
        raise NotImplementedError  # NOTE: replaced by interpreter.bind itself when that module loads

    def __repr__(self) -> str:
        return self.name

    @property
    def is_metadata_mutation(self) -> bool:
        return self.metadata_view is not None


_fallback_abstract_eval: Callable | None = None


def set_fallback_abstract_eval(fn: Callable) -> None:
    """Register the shape inference used by primitives without an `abstract_eval` rule (the lowering
    layer provides one that traces the lowering rule with `jax.eval_shape`)."""
    global _fallback_abstract_eval
    _fallback_abstract_eval = fn


def abstract_eval(prim: Primitive, avals: list[ShapedArray], params: dict) -> list[ShapedArray]:
    """Output avals of `prim` on `avals`; errors carry the user's source line."""
    try:
        if prim.is_metadata_mutation:
            out = abstract_eval(prim.metadata_view, avals, params)
        elif prim.abstract_eval is not None:
            out = prim.abstract_eval(*avals, **params)
        elif prim.kind is Kind.MUTATION:
            out = _mutation_abstract_eval(prim, avals, params)
        elif _fallback_abstract_eval is not None:
            out = _fallback_abstract_eval(prim, avals, params)
        else:
            raise NotImplementedError(f"abstract evaluation rule for primitive '{prim.name}' is not implemented")
    except AotjaxError as e:
        msg = str(e)
        if "(at " not in msg:
            raise type(e)(msg + where()) from None
        raise
    return list(out) if prim.multiple_results or prim.kind is Kind.MUTATION else [out]


def _mutation_abstract_eval(prim: Primitive, avals, params) -> list[ShapedArray]:
    from aotjax.core.errors import ShapeError

    new = abstract_eval(prim.functional, avals, params)
    written = [avals[i] for i in prim.mutates]
    for w, n in zip(written, new):
        if w.shape != n.shape:
            raise ShapeError(f"{prim.name}: the result of shape {list(n.shape)} does not fit the tensor written "
                             f"in place, of shape {list(w.shape)}; in-place ops cannot broadcast their output")
    return written
