"""Primitives: the operations jaxprs are made of, each declaring its kind and carrying its core rules.

A primitive is `functional` (a pure function of its operands), a `view` (its output aliases its
first operand: reading applies it to the base, writing goes back through `view_inverse`), or a
`mutation` (it writes the operands listed in `mutates`; a metadata mutation such as `t_` instead
re-views operand 0 through `metadata_view`). Interpreter-specific rules (lowering, jvp, transpose,
batching) live in each interpreter's own table; the rules every interpreter needs live here.

What the partitioner and the coverage tests know about a primitive is declared on it too, never kept in
a list of op names elsewhere: its `recompute` class, its `flops` cost rule, the operands it is `linear`
in, and whether it `is_dot` (a matrix product, for the `dots_saveable` checkpoint policy).
"""
from __future__ import annotations

import enum
import math
from typing import Any, Callable, Protocol, Sequence

from aotjax.core.avals import ShapedArray
from aotjax.core.errors import AotjaxError, ShapeError
from aotjax.core.ir import ClosedJaxpr, Eqn, Jaxpr
from aotjax.core.source_info import where


class Kind(enum.Enum):
    FUNCTIONAL = "functional"
    VIEW = "view"
    MUTATION = "mutation"


class Recompute(enum.Enum):
    """What the min-cut partitioner (`aotjax.partition.min_cut`) may do with a primitive's results that the
    backward needs: recompute them there from other saved values, or save them.

    - `CHEAP`: elementwise arithmetic and data movement (views, copies, creation): recomputed freely.
    - `EXPENSIVE`: matrix products, reductions, scans, gathers and scatters, calls: saved, unless a memory
      budget below 1 forces recomputation.
    - `NEVER`: random draws, and anything whose recomputation would change the result or cost too much:
      always saved, whatever the memory budget (even 0).

    A primitive made with a family combinator gets its class from it; others declare it
    (`Primitive(..., recompute=Recompute.EXPENSIVE)`). `None` means undeclared: the coverage test fails.
    """

    CHEAP = "cheap"
    EXPENSIVE = "expensive"
    NEVER = "never"


class FlopsRule(Protocol):
    """`(in_avals, out_avals, **params) -> float`: a rough count of the arithmetic operations one
    application costs, which the min-cut partitioner weighs against the bytes a recomputation saves.
    `in_avals` has one aval per operand (literals included), `out_avals` one per result. The common ones:
    `output_size_flops` (the `elementwise` combinator and views), `largest_array_flops` (reductions,
    gathers), the body's `jaxpr_flops` (calls); matrix products declare their own beside their
    definitions (`aotjax/ops/linalg/matmul.py`)."""

    def __call__(self, in_avals: Sequence[ShapedArray], out_avals: Sequence[ShapedArray], **params: Any) -> float: ...


def output_size_flops(in_avals: Sequence[ShapedArray], out_avals: Sequence[ShapedArray], **params: Any) -> float:
    """One operation per result element: elementwise arithmetic, views and other data movement (a view
    counts what materializing it would copy), creation, random draws."""
    return float(sum(a.size for a in out_avals))


def largest_array_flops(in_avals: Sequence[ShapedArray], out_avals: Sequence[ShapedArray], **params: Any) -> float:
    """One operation per element of the largest operand or result: reductions, scans, gathers and scatters
    (each element read or written about once)."""
    return float(max((a.size for a in (*in_avals, *out_avals)), default=0))


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


class LayoutRule(Protocol):
    """`(operands, shape, **params) -> strides | None`: the PyTorch strides of a functional primitive's result
    of shape `shape`, from its operands (tensors of any interpreter, each with `.shape` and `._strides`, None
    meaning contiguous; or scalars). None means contiguous. Metadata only: data is never strided. The rules
    live in `aotjax.ops.base.layout`; each interpreter applies them through `aotjax.tensor.record_layout`."""

    def __call__(self, operands: Sequence[Any], shape: tuple, /, **params: Any) -> tuple | None: ...


_registry: list["Primitive"] = []


def all_primitives() -> list["Primitive"]:
    """Every primitive defined so far (the op families register theirs when imported)."""
    return list(_registry)


class Primitive:
    """An operation of the IR. `bind` applies it under the current interpreter stack.

    Declared properties, beside the kind:

    - `recompute`: a `Recompute` class (`None`: undeclared). A view is `CHEAP` unless it says otherwise; a
      mutation has the class of the primitive computing what it writes (`functional` or `metadata_view`).
    - `flops`: a `FlopsRule` (`None`: undeclared), defaulted as `recompute` is (views: `output_size_flops`).
    - `linear`: the operands the primitive is linear in, the others held fixed (a tuple of operand
      indices; `True` when they depend on the params: all of `cat`'s, a call's where its body is linear,
      a tangent map's after its residuals; `False`: none). Jointly linear (`add`) and multilinear (`mul`,
      linear in one operand at a time) are not told apart here: the transpose rule knows. The transpose
      combinators (`aotjax.interpreters.transpose.deflinear_transpose`, `deflinear2_transpose`,
      `defview_transpose`) set it, so the transpose rule is its one source of truth; a primitive whose
      transpose rule is written by hand declares it in its definition (`Primitive(..., linear=True)`).
    - `is_dot`: a matrix product (`matmul`, `einsum`), what the `dots_saveable` checkpoint policy saves.
    - `higher_order`: its params carry sub-programs it runs (a loop body, branches, a checkpointed region), so
      besides the rules every primitive has, it needs its own partial-evaluation and DCE rules (the coverage
      test checks them).
    """

    def __init__(self, name: str, *, kind: Kind = Kind.FUNCTIONAL, multiple_results: bool = False,
                 mutates: tuple[int, ...] = (), metadata_view: "Primitive | None" = None,
                 functional: "Primitive | None" = None, recompute: Recompute | None = None,
                 flops: FlopsRule | None = None, linear: tuple[int, ...] | bool = False, is_dot: bool = False,
                 higher_order: bool = False):
        self.name = name
        self.kind = kind
        self.multiple_results = multiple_results
        self.mutates = tuple(mutates)  # operands a mutation writes
        self.metadata_view = metadata_view  # for metadata mutations: the view applied to operand 0
        self.functional = functional  # for data mutations: the pure primitive computing the new values
        computes = functional or metadata_view
        if kind is Kind.VIEW:
            recompute, flops = recompute or Recompute.CHEAP, flops or output_size_flops
        elif computes is not None:
            recompute, flops = recompute or computes.recompute, flops or computes.flops
        self.recompute = recompute
        self.flops = flops
        self.linear = tuple(linear) if isinstance(linear, (tuple, list)) else bool(linear)
        self.is_dot = is_dot
        self.higher_order = higher_order
        self.abstract_eval: AbstractEvalRule | None = None
        self.view_inverse: ViewInverseRule | None = None
        self.view_strides: ViewStridesRule | None = None
        self.layout_rule: LayoutRule | None = None  # functional primitives whose result keeps a layout
        self.print_rule: Callable[[dict], dict] | None = None
        # `(eqn, k) -> str | None`: what output k of an equation is, in words, for a primitive whose outputs are
        # not one value each (a loop's stacked residuals: `tanh at model.py:14 (layer), stacked over 48 iterations`)
        self.describe_output: Callable[[Eqn, int], str | None] | None = None
        # `(**params) -> callable on arrays`: how eager mode runs it, when not by jitting its lowering rule
        self.eager_impl: Callable[..., Callable] | None = None
        if kind is Kind.MUTATION and not mutates:
            raise ValueError(f"mutation primitive '{name}' must declare the operands it writes")
        _registry.append(self)

    def bind(self, *args, **params):
        """Apply this primitive under the interpreter stack (`aotjax.core.interpreter.bind`)."""
        raise NotImplementedError  # NOTE: replaced by interpreter.bind itself when that module loads

    def __copy__(self) -> "Primitive":
        return self  # NOTE: a primitive is its identity (rule tables are keyed by it): copying a tensor's view chain

    def __deepcopy__(self, memo) -> "Primitive":  # (`copy.deepcopy` of a state dict) keeps the primitives
        return self

    def __repr__(self) -> str:
        return self.name

    @property
    def is_metadata_mutation(self) -> bool:
        return self.metadata_view is not None


def eqn_flops(eqn: Eqn) -> float:
    """The FLOPs of equation `eqn` by its primitive's cost rule (`Primitive.flops`)."""
    prim = eqn.primitive
    if prim.flops is None:
        raise NotImplementedError(f"cost rule (flops) for primitive '{prim.name}' is not implemented; declare "
                                  f"one: Primitive('{prim.name}', flops=...), or make it with a family combinator")
    return float(prim.flops([a.aval for a in eqn.inputs], [v.aval for v in eqn.outputs], **eqn.params))


def jaxpr_flops(jaxpr: Jaxpr | ClosedJaxpr) -> float:
    """The FLOPs of every equation of `jaxpr` (a `Jaxpr` or `ClosedJaxpr`): the cost rule of the primitives
    that call a sub-program."""
    eqns = jaxpr.jaxpr.eqns if isinstance(jaxpr, ClosedJaxpr) else jaxpr.eqns
    return math.fsum(eqn_flops(e) for e in eqns)


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
    new = abstract_eval(prim.functional, avals, params)
    written = [avals[i] for i in prim.mutates]
    for w, n in zip(written, new):
        if w.shape != n.shape:
            raise ShapeError(f"{prim.name}: the result of shape {list(n.shape)} does not fit the tensor written "
                             f"in place, of shape {list(w.shape)}; in-place ops cannot broadcast their output")
    return written
