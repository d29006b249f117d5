"""What the control-flow primitives share: cutting operand lists into their groups, rearranging a sub-program's
binders, the fixed points' bookkeeping, the frontends' checks of loop values (a carry keeps its type), and what
their batching rules compute with when the examples go different ways (a batched branch index or loop predicate)."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
import numpy as np

from aotjax.core.avals import get_aval
from aotjax.core.errors import DTypeError, ShapeError
from aotjax.core.interpreter import Tracer
from aotjax.core.ir import ClosedJaxpr, Jaxpr
from aotjax.core.source_info import where
from aotjax.interpreters import hooks
from aotjax.interpreters.ad_util import is_differentiable
from aotjax.ops.base.casts import convert, convert_element_type_p
from aotjax.ops.base.data import as_tensor
from aotjax.ops.control_flow._body import describe_path
from aotjax.ops.creation.factories import full
from aotjax.ops.math.elementwise import eq_p, where_p
from aotjax.ops.reduce.reductions import cumsum_p, reduce_or_p, reduce_sum_p
from aotjax.ops.shape.views import detach_p
from aotjax.tensor import Tensor

__all__ = ["split_list", "permute", "differentiable", "loop_operand", "kind_of", "check_carry",
           "WeakCarry", "trace_promoting", "fixed_point", "select_examples", "stand_in"]


def split_list(seq, *sizes) -> list[list]:
    """`seq` cut into consecutive groups of `sizes`, then the rest: `split_list(operands, num_consts, num_carry)` is
    `[consts, carry, xs]`."""
    out, i = [], 0
    for n in sizes:
        out.append(list(seq[i:i + n]))
        i += n
    out.append(list(seq[i:]))
    return out


def permute(closed: ClosedJaxpr, in_order, out_order) -> ClosedJaxpr:
    """`closed` with its inputs and outputs reordered: input k of the result is input `in_order[k]`."""
    j = closed.jaxpr
    return ClosedJaxpr(Jaxpr(j.constvars, [j.invars[i] for i in in_order], j.eqns, [j.outvars[i] for i in out_order]),
                       closed.consts)


def differentiable(flags, avals) -> list[bool]:
    """`flags` where the value can have a tangent (integer and bool values never have one)."""
    return [f and is_differentiable(a.dtype) for f, a in zip(flags, avals, strict=True)]


def loop_operand(x, op: str, what: str) -> Tensor:
    """A leaf of a loop value (`init`, `xs`) as a tensor; `op` and `what` name it in the error for None."""
    if isinstance(x, Tensor):
        return x
    if x is None:
        raise TypeError(f"{op}: {what} holds None{where()}; a loop value must be a tensor")
    return as_tensor(x)


def kind_of(x) -> str:
    """`x` in an error message: a tensor by its type (`a traced tensor f32[]`), a tuple or list by its length, other
    values by their type and, when short, their value."""
    if isinstance(x, Tensor):
        return f"a {'traced ' if isinstance(x, Tracer) else ''}tensor {x.aval.str_short()}"
    if isinstance(x, (tuple, list)):
        return f"a {type(x).__name__} of {len(x)}"
    return f"{type(x).__name__} {x!r}" if len(repr(x)) < 60 else type(x).__name__


class WeakCarry(Exception):
    """Raised by `check_carry` while a body is traced: carry leaf `index` was a Python scalar in the initial value
    (weakly typed, as in JAX) and the body makes it `dtype`, wider: `trace_promoting` traces the loop again with
    that leaf promoted. Never reaches the user."""

    def __init__(self, index: int, dtype):
        super().__init__(index, dtype)
        self.index, self.dtype = index, dtype


def trace_promoting(trace: Callable[[], Any], leaves: list, weak: list[bool]):
    """`trace()` (tracing a loop's body on `leaves`, checking its carry with `weak`), called again as long as a
    Python-scalar leaf comes back wider (`WeakCarry`): that leaf is converted to the body's dtype, as JAX's loops
    promote a weakly typed init. At most once per leaf."""
    while True:
        try:
            return trace()
        except WeakCarry as e:
            leaves[e.index] = convert(leaves[e.index], e.dtype)
            weak[e.index] = False


def check_carry(new_carry, init_tree, init_paths, carry_avals, *, op: str, body: str, init: str,
                weak: Sequence[bool] = ()) -> list:
    """The leaves of the carry `body` returned, as tensors, after checking that it has the structure of `init`
    (`init_tree`) and each leaf the shape and dtype it entered with (`carry_avals`); errors name the leaf's
    pytree path (`init_paths`, from `tree_flatten_with_path`). `op`, `body` and `init` name the loop, its body
    and its initial value in the errors ("scan", "the body", "init")."""
    leaves, tree = jax.tree_util.tree_flatten(new_carry)
    if tree != init_tree:
        expected = [describe_path(p) for p, _ in init_paths]
        got = [describe_path(p) for p, _ in jax.tree_util.tree_flatten_with_path(new_carry)[0]]
        detail = f" ({init} is {init_tree}, {body} returns {tree})" if expected == got else ""
        raise TypeError(f"{op}: {body}'s carry output must have the structure of {init}{where()}: {init} has "
                        f"{_leaves_at(expected)}; {body}'s carry has {_leaves_at(got)}{detail}")
    out = []
    for (path, _), leaf, aval in zip(init_paths, leaves, carry_avals, strict=True):
        if not isinstance(leaf, Tensor):
            leaf = full(aval.shape, leaf, dtype=aval.dtype) if np.ndim(leaf) == 0 else as_tensor(leaf)
        got = get_aval(leaf)
        if got.shape != aval.shape:
            raise ShapeError(f"{op}: the carry {describe_path(path)} enters {body} as {aval.str_short()} but {body} "
                             f"returns {got.str_short()}{where()}; a carry must keep its shape and dtype")
        if got.dtype != aval.dtype:
            k = len(out)
            if k < len(weak) and weak[k] and _wider(got.dtype, aval.dtype):
                raise WeakCarry(k, got.dtype)
            raise DTypeError(f"{op}: the carry {describe_path(path)} enters {body} as {aval.str_short()} but {body} "
                             f"returns {got.str_short()}{where()}; a carry must keep its shape and dtype (convert "
                             f"it: `.to({aval.dtype.name})`, or start from an {init} of the dtype it becomes)")
        out.append(leaf)
    return out



def _leaves_at(paths: list[str]) -> str:
    if not paths:
        return "no leaf"
    shown = ", ".join(paths[:6]) + (f", ... ({len(paths)} in all)" if len(paths) > 6 else "")
    return f"{'a leaf' if len(paths) == 1 else 'leaves'} at {shown}"


def _wider(dtype, than) -> bool:
    """Whether a weakly typed (Python-scalar) value of dtype `than` promotes to `dtype`: a float from a bool or an
    integer (as `1 + x` does with a float tensor), or a wider type of the same kind."""
    if than.kind in "biu" and dtype.kind in "fc":
        return True
    return np.promote_types(than, dtype) == dtype


# -- batching -------------------------------------------------------------------------------------------------
def fixed_point(flags: list[bool], step: Callable[[list[bool]], list[bool]], what: str) -> list[bool]:
    """The least flags at or above `flags` that `step` keeps: `flags | step(flags)`, until it stops changing (a
    carry is batched if its initial value is, or if the body makes it so from batched values). `what` names the
    loop in the error raised if it never stops (a bug)."""
    for _ in range(len(flags) + 1):
        new = [a or b for a, b in zip(flags, step(flags), strict=True)]
        if new == flags:
            return flags
        flags = new
    raise AssertionError(f"{what}: the fixed point was not reached")


def select_examples(mask, x, y):
    """`x` for the examples where `mask` (`bool[B]`) holds, `y` for the others: `x` is batched at axis 0, `y` too or
    the same for every example."""
    rank = len(get_aval(x).shape)
    if rank > 1:
        mask = hooks.reshape(mask, get_aval(mask).shape + (1,) * (rank - 1))
    return where_p.bind(mask, x, y)


def _first_where(mask, x):
    """The value of `x` (batched at axis 0) of the first example where `mask` holds (zeros where none does)."""
    counts = cumsum_p.bind(convert_element_type_p.bind(mask, new_dtype=np.dtype(np.int32)), axis=0)
    first = where_p.bind(eq_p.bind(counts, np.int32(1)), mask, np.bool_(False))
    dtype = get_aval(x).dtype
    picked = select_examples(first, x, dtype.type(0))
    reduce = reduce_or_p if dtype == np.bool_ else reduce_sum_p
    return reduce.bind(picked, axes=(0,), keepdims=False)


def stand_in(mask, x):
    """`x` (batched at axis 0) for the examples where `mask` holds; for the others, the value of the first example
    where it holds, detached. What a batching rule feeds a sub-program it runs for every example when only those in
    `mask` take it (a branch, a loop's next trip): the others then compute what an example taking it computes, so a
    run-time check in it fails only for an example that takes it, and no gradient flows from the others."""
    return select_examples(mask, x, detach_p.bind(_first_where(mask, x)))
