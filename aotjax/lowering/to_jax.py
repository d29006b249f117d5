"""Lowering a jaxpr: to a plain `jax` function (`to_jax`) and through XLA to an executable (`compile`).

Each equation runs its primitive's lowering rule (`aotjax.interpreters.lowering`) on `jax` values, so the
function built here can be traced by `jax.jit`, `jax.grad` and `jax.vmap` like any jax code. Only
programs without writes lower: a view equation then simply computes the view's value, but a
mutation equation needs functionalization first (the jaxpr as written has reference semantics).

Higher-order primitives (scan, cond, checkpoint, ...) carry sub-jaxprs in their params; their lowering rules
evaluate those with `eval_jaxpr_jax` (`eval_sub_jaxpr`, which passes a sub-program's run-time checks out of it),
and `check_lowerable` walks into them.
"""
from __future__ import annotations

import functools
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import checkify

from aotjax.core.avals import ShapedArray
from aotjax.core.checks import lowering_checks
from aotjax.core.errors import UnsupportedError
from aotjax.core.ir import ClosedJaxpr, Jaxpr, sub_jaxprs, uses_primitive
from aotjax.core.primitive import Kind
from aotjax.interpreters.eval import read
from aotjax.interpreters.lowering import check_failure, eval_jaxpr_jax
from aotjax.ops.indexing.subscripts import check_index_p
from aotjax.tensor import Tensor

__all__ = ["to_jax", "compile", "Compiled", "eval_jaxpr_jax", "check_lowerable", "flat_function", "avals_to_structs",
           "has_checks", "CheckedProgram", "compile_checked", "xla_compiler"]


# -- checking ----------------------------------------------------------------------------------
def check_lowerable(jaxpr: Jaxpr | ClosedJaxpr, what: str = "to_jax") -> None:
    """Raise `UnsupportedError` if `jaxpr` (or a sub-jaxpr) writes in place, naming the primitive
    and the user's source line of the first such equation."""
    jaxpr = jaxpr.jaxpr if isinstance(jaxpr, ClosedJaxpr) else jaxpr
    for eqn in jaxpr.eqns:
        if eqn.primitive.kind is Kind.MUTATION:
            at = f" (at {eqn.source_info})" if eqn.source_info is not None else ""
            kind = "changes the view of a tensor in place" if eqn.primitive.is_metadata_mutation else "writes in place"
            raise UnsupportedError(
                f"{what}: the program contains '{eqn.primitive.name}', which {kind}{at}, and a jaxpr with "
                f"in-place ops cannot be lowered as written: functionalize it first, or trace a version of "
                f"the function without in-place ops (e.g. `y = x.relu()` instead of `x.relu_()`).")
        for sub in sub_jaxprs(eqn):
            check_lowerable(sub, what)


def _const_value(c):
    if isinstance(c, Tensor):
        return read(c)
    return c


def _flat_input(x, aval: ShapedArray, i: int, what: str):
    """A leaf of the user's arguments as a jax value of the jaxpr's input type (Tensors are read)."""
    if isinstance(x, Tensor):
        x = read(x)
    if isinstance(x, (bool, int, float, complex)):
        return jnp.asarray(x, dtype=aval.dtype)
    shape, dtype = tuple(np.shape(x)), getattr(x, "dtype", None)
    if shape != aval.shape or (dtype is not None and np.dtype(dtype) != aval.dtype):
        got = ShapedArray(shape, dtype).str_short() if dtype is not None else f"{type(x).__name__} {list(shape)}"
        raise TypeError(f"{what}: input {i} should be {aval.str_short()} as traced, got {got}; trace the "
                        f"function again (make_jaxpr) for new shapes or dtypes")
    return x


def _flatten_args(closed: ClosedJaxpr, args: tuple, kwargs: dict, what: str) -> list:
    if closed.in_tree is None:
        if kwargs:
            raise TypeError(f"{what}: this jaxpr has no argument structure (in_tree); pass its inputs "
                            f"positionally, flat")
        leaves = list(args)
    else:
        leaves, tree = jax.tree_util.tree_flatten((list(args), kwargs))
        if tree != closed.in_tree:
            expected_args, expected_kwargs = jax.tree_util.tree_unflatten(closed.in_tree,
                                                                          [0] * closed.in_tree.num_leaves)
            raise TypeError(f"{what}: the arguments do not have the structure the function was traced with: "
                            f"expected args {_shape_of(expected_args)} and kwargs {_shape_of(expected_kwargs)} "
                            f"(static arguments excluded), got {tree}")
    avals = closed.in_avals
    if len(leaves) != len(avals):
        raise TypeError(f"{what}: the jaxpr takes {len(avals)} inputs, got {len(leaves)}")
    return [_flat_input(x, a, i, what) for i, (x, a) in enumerate(zip(leaves, avals, strict=True))]


def _shape_of(tree) -> str:
    return str(jax.tree_util.tree_map(lambda _: "*", tree))


def _unflatten_outs(closed: ClosedJaxpr, outs: list):
    return outs if closed.out_tree is None else jax.tree_util.tree_unflatten(closed.out_tree, outs)


def _as_closed(jaxpr: Jaxpr | ClosedJaxpr) -> ClosedJaxpr:
    return jaxpr if isinstance(jaxpr, ClosedJaxpr) else ClosedJaxpr(jaxpr, [])


def to_jax(closed_jaxpr: ClosedJaxpr | Jaxpr) -> Callable:
    """A plain Python function on `jax.Array`s that computes `closed_jaxpr`.

    It composes with jax's own transforms (`jax.jit`, `jax.grad`, `jax.vmap`, ...). When the jaxpr
    comes from `make_jaxpr` it takes the traced function's (dynamic) arguments in the same pytree
    structure and returns its output structure; otherwise it takes the flat inputs and returns the
    list of outputs. Tensors are accepted as inputs; outputs are jax arrays. A jaxpr with in-place
    equations raises `UnsupportedError`: functionalize it first.

    >>> import jax, jax.numpy as jnp
    >>> jaxpr = aotjax.make_jaxpr(lambda x: (x.sin() * x).t())(aotjax.ones(2, 3))
    >>> f = aotjax.to_jax(jaxpr)
    >>> f(jnp.ones((2, 3), jnp.float32)).shape
    (3, 2)
    >>> g = jax.grad(lambda x: f(x).sum())(jnp.zeros((2, 3), jnp.float32))   # d/dx x sin x = 0 at 0
    >>> float(jnp.abs(g).max())
    0.0
    """
    closed = _as_closed(closed_jaxpr)
    check_lowerable(closed, "to_jax")
    jaxpr = closed.jaxpr
    consts = [_const_value(c) for c in closed.consts]

    def fn(*args, **kwargs):
        flat = _flatten_args(closed, args, kwargs, "to_jax")
        return _unflatten_outs(closed, eval_jaxpr_jax(jaxpr, consts, flat))

    fn.__name__ = fn.__qualname__ = "to_jax_fn"
    fn.__doc__ = f"The jax function of this jaxpr:\n\n{closed.pretty()}"
    return fn


# -- compilation -------------------------------------------------------------------------------
def _donated_leaves(closed: ClosedJaxpr, donate_argnums: Sequence[int]) -> tuple[int, ...]:
    """Flat input indices of the leaves of the positional arguments in `donate_argnums`."""
    if not donate_argnums:
        return ()
    if closed.in_tree is None:
        return tuple(sorted({i % len(closed.in_avals) for i in donate_argnums}))
    args, _ = jax.tree_util.tree_unflatten(closed.in_tree, list(range(closed.in_tree.num_leaves)))
    out = []
    for i in donate_argnums:
        if not -len(args) <= i < len(args):
            raise ValueError(f"compile: donate_argnums entry {i} is out of range for {len(args)} positional "
                             f"arguments")
        out.extend(jax.tree_util.tree_leaves(args[i]))
    return tuple(sorted(set(out)))


class Compiled:
    """A jaxpr compiled by XLA, callable on Tensors and arrays (returns Tensors in the traced output
    structure). Built by `aotjax.compile`.

    Attributes: `jaxpr` (the ClosedJaxpr), `donated` (the flat input indices whose buffers the call
    consumes). Methods: `as_text()` (StableHLO), `cost_analysis()`, `memory_analysis()`.
    """

    def __init__(self, closed: ClosedJaxpr, lowered, executable, donated: tuple[int, ...]):
        self.jaxpr = closed
        self.donated = donated
        self._lowered = lowered
        self._executable = executable

    def __call__(self, *args, **kwargs):
        flat = _flatten_args(self.jaxpr, args, kwargs, "Compiled")
        leaves = list(args) if self.jaxpr.in_tree is None else jax.tree_util.tree_leaves((list(args), kwargs))
        for i in self.donated:
            if isinstance(leaves[i], Tensor) and not leaves[i]._storage.owned:
                # NOTE: this buffer belongs to the user (wrapped without a copy): donate a copy instead.
                flat[i] = jnp.copy(flat[i])
        outs = self._executable(*flat)
        return _unflatten_outs(self.jaxpr, [Tensor._wrap(o) for o in outs])

    def as_text(self) -> str:
        """The lowered program as StableHLO text (an MLIR module with `func.func public @main`)."""
        return self._lowered.as_text()

    def cost_analysis(self):
        """XLA's cost estimate of the compiled program (flops, bytes accessed, ...)."""
        return self._executable.cost_analysis()

    def memory_analysis(self):
        """XLA's memory statistics of the compiled program (argument, output and temp sizes)."""
        return self._executable.memory_analysis()

    def __repr__(self) -> str:
        ins = ", ".join(a.str_short() for a in self.jaxpr.in_avals)
        outs = ", ".join(a.str_short() for a in self.jaxpr.out_avals)
        return f"Compiled(({ins}) -> ({outs}))"


def compile(closed_jaxpr: ClosedJaxpr | Jaxpr, donate_argnums: int | Sequence[int] = ()) -> Compiled:
    """Lower `closed_jaxpr` through XLA and compile it: `jax.jit(to_jax(...)).lower(...).compile()`.

    The result is called like the traced function (its dynamic arguments, same pytree structure) and
    returns Tensors. `donate_argnums` names positional arguments whose buffers the call may reuse for
    its outputs (after the call those arguments are deleted, as with `jax.jit`; a Tensor wrapping the
    user's own `jax.Array` donates a copy instead).

    >>> x = aotjax.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> c = aotjax.compile(aotjax.make_jaxpr(lambda x: x.t() * 2 + 1)(x))
    >>> c(x)
    tensor([[3., 7.],
            [5., 9.]])
    >>> "stablehlo" in c.as_text()
    True
    """
    closed = _as_closed(closed_jaxpr)
    check_lowerable(closed, "compile")
    donate_argnums = (donate_argnums,) if isinstance(donate_argnums, int) else tuple(donate_argnums)
    donated = _donated_leaves(closed, donate_argnums)
    lowered = jax.jit(flat_function(closed), donate_argnums=donated).lower(*avals_to_structs(closed.in_avals))
    return Compiled(closed, lowered, lowered.compile(), donated)


def flat_function(closed: ClosedJaxpr) -> Callable:
    """`closed` as a function of its flat inputs returning the list of its outputs, named after the
    program (the StableHLO module's name): what `compile`, `jit` and `aot` hand to `jax.jit`."""
    jaxpr, consts = closed.jaxpr, [_const_value(c) for c in closed.consts]

    def flat_fn(*flat):
        return eval_jaxpr_jax(jaxpr, consts, flat)

    flat_fn.__name__ = closed.meta.name or "aotjax_program"
    return flat_fn


def avals_to_structs(avals) -> list:
    return [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in avals]


# -- run-time checks -----------------------------------------------------------------------------
def has_checks(jaxpr: Jaxpr | ClosedJaxpr) -> bool:
    """Whether `jaxpr` (or a sub-jaxpr) stages run-time checks (`jit(f, checks=True)`)."""
    return uses_primitive(jaxpr, check_index_p)


class CheckedProgram:
    """A program's flat function (`flat_function`) with its run-time checks lowered through
    `jax.experimental.checkify`: `function` returns `(error, outs)`, and `failure(error)` is the
    exception of the first check that failed (the class and message the op raises eagerly, the
    user's line included), or None.

    `guard` pairs `(output, input)`: an output that takes the place of a donated input (its new
    value, written into its buffer). When a check fails, such an output is the input as it came in,
    so that the caller can put it back: a failed call leaves every input as it was."""

    def __init__(self, flat_fn: Callable, guard: Sequence[tuple[int, int]] = ()):
        self.guard = tuple(guard)
        self.errors: dict[str, type] = {}  # message -> exception class, filled as jax traces `function`
        checked = checkify.checkify(functools.partial(self._guarded, flat_fn), errors=checkify.user_checks)

        def function(*flat):
            return checked(*flat)

        function.__name__ = flat_fn.__name__
        self.function = function

    def _guarded(self, flat_fn: Callable, *flat):
        with lowering_checks() as record:
            outs = list(flat_fn(*flat))
        self.errors.update(record.errors)
        if self.guard and record.predicates:
            # NOTE: the checks' predicates are values of this trace: a loop or branch passes its own out
            # (`aotjax.interpreters.lowering.eval_sub_jaxpr`).
            ok = functools.reduce(jnp.logical_and, record.predicates)
            for out, i in self.guard:
                outs[out] = jnp.where(ok, outs[out], flat[i])
        return outs

    def failure(self, error: checkify.Error) -> Exception | None:
        return check_failure(error, self.errors)


class _CheckedExecutable:
    """A compiled checked program as a compiler's callable: returns the outputs, or raises the failed check."""

    def __init__(self, program: CheckedProgram, executable):
        self._program, self._executable = program, executable

    def __call__(self, *vals):
        error, outs = self._executable(*vals)
        failure = self._program.failure(error)
        if failure is not None:
            raise failure
        return outs

    def __getattr__(self, name):  # as_text, cost_analysis, memory_analysis: the executable's
        return getattr(self._executable, name)


def compile_checked(closed: ClosedJaxpr, example_avals: Sequence) -> Callable:
    """`closed` compiled with its run-time checks (see `CheckedProgram`): a callable on flat arrays that
    raises the first failed check. It donates nothing: without the boundary's record of which outputs
    replace which inputs, a failed call could not give a donated input back."""
    program = CheckedProgram(flat_function(closed))
    return _CheckedExecutable(program, jax.jit(program.function).lower(*avals_to_structs(example_avals)).compile())


def xla_compiler(jaxpr: ClosedJaxpr, example_avals: Sequence) -> Callable:
    """The default compiler of `aot`'s programs and of calls of compiled programs: lower `jaxpr` through XLA
    (`jax.jit(...).lower(...).compile()`); inputs listed in `jaxpr.meta.donate` are donated. Returns a callable
    on flat arrays. A program with run-time checks (`aot(f, checks=True)`) raises its first failed check, and
    donates nothing."""
    if has_checks(jaxpr):
        return compile_checked(jaxpr, example_avals)
    return jax.jit(flat_function(jaxpr), donate_argnums=jaxpr.meta.donate).lower(
        *avals_to_structs(example_avals)).compile()
