"""Derivatives: `jvp`, `linearize`, `vjp`, `grad`, `value_and_grad`, `jacfwd`, `jacrev`, `hessian`.

Every transform here functionalizes first, at the same call boundary as `jit`: the function of the
input groups' bases that functionalize computes is what is differentiated, so only pure primitives
reach the jvp, partial-evaluation and transpose interpreters. `vjp = linearize + transpose`, and
`linearize = jvp + partial_eval` (autodidax's structure): the known part runs now (it is the forward
program and computes the residuals), the unknown part is the linear tangent program, which
`transpose` runs backwards.

Semantics with mutation:

- the derivative is taken with respect to the value each argument holds at entry; the function's
  writes into its arguments and view changes (`t_`) happen to the caller, once, as in eager, and
  outputs that alias arguments are views of them;
- aliased arguments (views of one storage, passed as different arguments) are differentiated
  through their shared storage: the gradient of each is the gradient with respect to the storage,
  read through that argument's view (so `f(x[0], x[0])` gives both arguments the total derivative,
  and `jvp` sums the tangents of aliased arguments into the storage).
"""
from __future__ import annotations

import functools
import gc
from typing import Any, Callable, NamedTuple, Sequence

import jax
import numpy as np

from aotjax.core.avals import PYTHON_SCALARS as _SCALARS
from aotjax.core.avals import get_aval
from aotjax.core.errors import DTypeError, ShapeError
from aotjax.core.eval_jaxpr import eval_jaxpr
from aotjax.core.ir import ClosedJaxpr, dce_jaxpr
from aotjax.core.source_info import where
from aotjax.interpreters.ad_util import Zero, instantiate, is_differentiable
from aotjax.interpreters.jvp import jvp_flat
from aotjax.interpreters.partial_eval import PartialVal, partial_eval_flat
from aotjax.interpreters.trace import trace_flat
from aotjax.interpreters.transpose import UndefinedPrimal, backward_pass
from aotjax.ops import eye
from aotjax.ops.base.data import as_tensor
from aotjax.ops.creation.factories import ones
from aotjax.tensor import Tensor
from aotjax.transforms.argnums import call_argnums, fun_name, normalize_argnums
from aotjax.transforms.passes import run_pass
from aotjax.transforms.pure_call import PureCall, zeros_for
from aotjax.transforms.vmap import vmap


def _fresh(ct, seeds: list):
    """A gradient the user owns: a view or a seed cotangent passed through is copied."""
    if isinstance(ct, Tensor) and (ct._chain or any(ct is s for s in seeds) or ct._strides is not None):
        return ct.clone()
    return ct


def _as_tensors(args: Sequence, argnums: Sequence[int]) -> list:
    """The arguments, with Python scalars at `argnums` made 0-d tensors (so they can be differentiated)."""
    args = list(args)
    for i in argnums:
        if isinstance(args[i], Tensor):
            continue
        args[i] = jax.tree_util.tree_map(lambda x: as_tensor(x) if isinstance(x, _SCALARS) else x, args[i])
    return args


# -- linearize and transpose ----------------------------------------------------------------------------
def _gc_paused(fn: Callable) -> Callable:
    """`fn` run with Python's cyclic garbage collector paused (the collector runs again after, as before).
    NOTE: a trace makes objects that live until it ends (equations, variables, tracers, rules' closures): the
    collector's full passes rescanned them again and again, so that tracing time grew faster than the program
    (measured on `make_jaxpr(grad(f))` of elementwise chains: a third of the time at 10k equations, a growth of 7.5x
    from 2k to 10k equations instead of 5x). What the trace leaves behind is collected after it."""
    @functools.wraps(fn)
    def paused(*args, **kwargs):
        if not gc.isenabled():
            return fn(*args, **kwargs)
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            gc.enable()

    return paused


class Linearized(NamedTuple):
    """`linearize_flat`'s result: `fun`'s outputs, and its linear program `jaxpr`, which takes the
    `residuals` then one tangent per differentiated primal (of `tangent_avals`) and returns the output
    tangents that are not known zeros (`tangent_known[k]` is True for output k whose tangent is a known
    zero: not returned)."""

    primal_outs: list
    jaxpr: ClosedJaxpr
    residuals: list
    tangent_known: list[bool]
    tangent_avals: list


@_gc_paused
def linearize_flat(fun: Callable, primals: list, diff: list[bool]) -> Linearized:
    """`fun`'s outputs at `primals` and its linearization in the primals marked `diff` (jvp, partially
    evaluated with the primals known and the tangents unknown): see `Linearized`. The known part runs
    now, under the current interpreters: it is the forward."""
    n = len(primals)
    tangent_avals = [get_aval(p) for p, d in zip(primals, diff, strict=True) if d]
    pvals = [PartialVal.known(p) for p in primals] + [PartialVal.unknown(a) for a in tangent_avals]

    def f_jvp(*args):
        tangents = iter(args[n:])
        p_out, t_out = jvp_flat(fun, list(args[:n]), [next(tangents) if d else None for d in diff])
        return [*p_out, *t_out]

    jaxpr, pvals_out, residuals = partial_eval_flat(f_jvp, pvals)
    m = len(pvals_out) // 2
    primal_outs = [pv.const for pv in pvals_out[:m]]
    return Linearized(primal_outs, jaxpr, residuals, [pv.is_known for pv in pvals_out[m:]], tangent_avals)


@_gc_paused
def transpose_linear(jaxpr: ClosedJaxpr, residuals: Sequence, tangent_known: Sequence[bool], out_cts: Sequence,
                     instantiate: bool = False) -> list:
    """The cotangents of the differentiated primals of a linearization (`Linearized`), given one
    cotangent per output of the function (None: zero): the linear program run backwards, under the
    current interpreters (with tracer cotangents, the backward program is traced)."""
    n = len(residuals)
    undefined = [UndefinedPrimal(a) for a in jaxpr.in_avals[n:]]
    out_avals = iter(jaxpr.out_avals)
    cts = []
    for ct, known in zip(out_cts, tangent_known, strict=True):
        if not known:
            aval = next(out_avals)
            cts.append(Zero(aval) if ct is None else ct)
    return backward_pass(jaxpr, [], [*residuals, *undefined], cts, instantiate=instantiate)


def backward_program(jaxpr: ClosedJaxpr, n_residuals: int, tangent_known: Sequence[bool],
                     ct_avals: Sequence) -> ClosedJaxpr:
    """The backward program of linear program `jaxpr` (see `Linearized`), traced: `(residuals,
    cotangents) -> one cotangent per differentiated primal`. `ct_avals` has one entry per output of the
    function: the aval of its cotangent input, or None (no input: a zero cotangent)."""
    n = n_residuals

    def backward(*args):
        cts = iter(args[n:])
        out_cts = [next(cts) if a is not None else None for a in ct_avals]
        return transpose_linear(jaxpr, args[:n], tangent_known, out_cts, instantiate=True)

    return dce_jaxpr(trace_flat(backward, [*jaxpr.in_avals[:n], *(a for a in ct_avals if a is not None)]))


# -- grad's and vjp's passes: linearize now, transpose when the cotangents are known ----------------------
def _linearize(call: PureCall, diff: list[bool]) -> Linearized:
    """The linearize pass: functionalize (the interpreter `call.pure` runs under), jvp and partial_eval.
    The forward runs now, op by op; the pass shows the linear program it recorded."""
    return run_pass(f"{call.what}: linearize", linearize_flat, call.pure, call.bases, diff, show=_linear_program)


def _linear_program(lin: Linearized) -> dict:
    return {"linear": lin.jaxpr}


def _transpose(call: PureCall, lin: Linearized, diff: list[bool], main_cts: Sequence) -> list:
    """The transpose pass: the cotangents of the input groups' bases (None where not differentiated),
    from the cotangents of the function's outputs (`main_cts`; None: zero). It runs eagerly; the pass
    shows the backward program, traced from the linear program for the display alone."""
    out_cts = [*main_cts, *[None] * (len(lin.tangent_known) - len(main_cts))]
    base_cts = iter(run_pass(f"{call.what}: transpose", transpose_linear, lin.jaxpr, lin.residuals,
                             lin.tangent_known, out_cts, show=lambda _: _backward_of(lin, len(main_cts)),
                             display_only=True))
    return [next(base_cts) if d else None for d in diff]


def _backward_of(lin: Linearized, n_main: int) -> ClosedJaxpr:
    """The backward program of `lin` with one cotangent input per main output (of `n_main`) whose tangent
    is not a known zero (the written inputs and bases that follow get none)."""
    out_avals = iter(lin.jaxpr.out_avals)
    ct_avals = [None if known else next(out_avals) for known in lin.tangent_known]
    return backward_program(lin.jaxpr, len(lin.residuals), lin.tangent_known, ct_avals[:n_main] +
                            [None] * (len(ct_avals) - n_main))


def _check_differentiable(what: str, leaves: list, indices) -> None:
    for i in indices:
        x = leaves[i]
        dtype = get_aval(x).dtype if not isinstance(x, _SCALARS) else np.asarray(x).dtype
        if not is_differentiable(dtype):
            raise DTypeError(f"{what}: can only differentiate with respect to floating-point inputs, but argument "
                             f"leaf {i} has dtype {np.dtype(dtype).name}{where()}; convert it (`x.float()`) or leave "
                             f"it out of argnums")


def _leaf_range(in_tree_args: list, argnums: Sequence[int]) -> list[int]:
    """Flat indices of the leaves of positional arguments `argnums`."""
    counts = [len(jax.tree_util.tree_leaves(a)) for a in in_tree_args]
    starts = np.cumsum([0] + counts)
    return [i for a in argnums for i in range(starts[a], starts[a + 1])]


def vjp(fun: Callable, *primals, has_aux: bool = False):
    """`(out, vjp_fn)` or `(out, vjp_fn, aux)`: `fun(*primals)` and the function mapping a cotangent of
    `out` (same structure) to the cotangents of `primals` (a tuple, one per argument).

    `fun` runs once, now: its writes into its arguments happen (as in eager) and the derivative is
    with respect to the arguments' values at entry.

    >>> out, f_vjp = aotjax.vjp(lambda x: x.sin() * 2, aotjax.tensor([0.0, 1.0]))
    >>> f_vjp(aotjax.ones(2))
    (tensor([2.       , 1.0806046]),)
    """
    eager = getattr(fun, "_differentiate_eagerly", None)  # an aot function: its programs, no tracing
    if eager is not None and (ran := eager(tuple(primals), {}, None, has_aux)) is not None:
        return _eager_vjp(*ran, primals, has_aux)
    call = PureCall(fun, primals, {}, has_aux, "vjp")
    leaf_idx = list(range(len(call.leaves)))
    diff_leaves = [i for i in leaf_idx if is_differentiable(_leaf_dtype(call.leaves[i]))]
    diff = call.groups_of(diff_leaves)
    lin = _linearize(call, diff)
    out, aux = call.finish(lin.primal_outs)
    main_tree = call.main_tree
    arg_trees = [jax.tree_util.tree_structure(p) for p in primals]

    def vjp_fn(ct):
        ct_leaves = _cotangent_leaves(ct, main_tree, out)
        base_cts = _transpose(call, lin, diff, ct_leaves)
        leaf_cts = [_fresh(call.leaf_cotangent(i, base_cts), ct_leaves) for i in leaf_idx]
        return _per_primal(call.in_tree, arg_trees, leaf_cts)

    return (out, vjp_fn, aux) if has_aux else (out, vjp_fn)


def _cotangent_leaves(ct, main_tree, out) -> list:
    """The leaves of vjp's cotangent `ct`, checked against the output `out` (structure `main_tree`, shapes)."""
    ct_leaves, ct_tree = jax.tree_util.tree_flatten(ct)
    if ct_tree != main_tree:
        raise TypeError(f"vjp: the cotangent has structure {ct_tree}, but the output has {main_tree}{where()}")
    for c, o in zip(ct_leaves, jax.tree_util.tree_leaves(out), strict=True):
        if tuple(getattr(c, "shape", ())) != tuple(o.shape):
            raise ShapeError(f"vjp: a cotangent of shape {list(c.shape)} was given for an output of shape "
                             f"{list(o.shape)}{where()}")
    return ct_leaves


def _per_primal(in_tree, arg_trees: list, leaf_cts: list) -> tuple:
    """vjp's result: the flat arguments' cotangents as one pytree per primal, of its structure."""
    args_cts, _ = jax.tree_util.tree_unflatten(in_tree, leaf_cts)
    return tuple(jax.tree_util.tree_unflatten(t, jax.tree_util.tree_leaves(a))
                 for t, a in zip(arg_trees, args_cts, strict=True))


def _eager_vjp(finish: Callable, cotangents: Callable, primals: Sequence, has_aux: bool):
    """vjp of an aot function on its compiled programs (`aotjax.transforms.aot_grad`): the forward has run, the
    boundary is applied now, the backward runs at each call of `vjp_fn`."""
    out = finish()
    out, aux = out if has_aux else (out, None)
    leaves, in_tree = jax.tree_util.tree_flatten((list(primals), {}))
    arg_trees = [jax.tree_util.tree_structure(p) for p in primals]
    main_tree = jax.tree_util.tree_structure(out)

    def vjp_fn(ct):
        by_leaf = cotangents(_cotangent_leaves(ct, main_tree, out))
        leaf_cts = [by_leaf[i] if i in by_leaf else zeros_for(x) for i, x in enumerate(leaves)]
        return _per_primal(in_tree, arg_trees, leaf_cts)

    return (out, vjp_fn, aux) if has_aux else (out, vjp_fn)


def _leaf_dtype(x):
    return get_aval(x).dtype if not isinstance(x, _SCALARS) else np.asarray(x).dtype


def value_and_grad(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False) -> Callable:
    """A function returning `(fun(*args), gradient)` (with `has_aux`: `((out, aux), gradient)`); the
    gradient is with respect to the positional arguments `argnums` (an int: that argument's
    structure; a tuple: a tuple of them). `fun` must return a scalar floating-point tensor.

    >>> def loss(w, x):
    ...     w.mul_(2)                      # written in place: the caller's w is doubled
    ...     return (w * x).sum()
    >>> w = aotjax.ones(3)
    >>> aotjax.value_and_grad(loss)(w, aotjax.tensor([1.0, 2.0, 3.0])), w
    ((tensor(12.), tensor([2., 4., 6.])), tensor([2., 2., 2.]))
    """
    return _value_and_grad(fun, argnums, has_aux, "value_and_grad")


def _value_and_grad(fun: Callable, argnums, has_aux: bool, what: str) -> Callable:
    single = not isinstance(argnums, (tuple, list))
    argnums_given = normalize_argnums(fun, argnums, what)
    by_count: dict[int, tuple[int, ...]] = {}  # NOTE: the positions, per number of positional arguments
    eager = getattr(fun, "_differentiate_eagerly", None)  # an aot function: its programs, no tracing

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        argnums_t = by_count.get(len(args))
        if argnums_t is None:
            argnums_t = by_count[len(args)] = call_argnums(argnums_given, len(args), what, fun)
        for i in argnums_t:
            if not isinstance(args[i], Tensor):
                args = tuple(_as_tensors(args, argnums_t))
                break
        if eager is not None and (ran := eager(args, kwargs, argnums_t, has_aux)) is not None:
            finish, cotangents = ran
            grads = _per_argument(args, argnums_t, cotangents())  # NOTE: the backward before the write-back, as below
            return finish(), grads[0] if single else tuple(grads)
        call = PureCall(fun, args, kwargs, has_aux, "grad")
        diff_leaves = _leaf_range(args, argnums_t)
        _check_differentiable("grad", call.leaves, diff_leaves)
        diff = call.groups_of(diff_leaves)
        lin = _linearize(call, diff)
        primal_outs = lin.primal_outs
        if call.n_main != 1 or get_aval(primal_outs[0]).shape != ():
            shapes = [get_aval(o).str_short() for o in primal_outs[:call.n_main]]
            raise ShapeError(f"grad: the function must return a scalar (a 0-d tensor), got {', '.join(shapes)}"
                             f"{where()}; use vjp, or reduce the output (`.sum()`)")
        out_aval = get_aval(primal_outs[0])
        if not is_differentiable(out_aval.dtype):
            raise DTypeError(f"grad: the function must return a floating-point scalar, got {out_aval.str_short()}"
                             f"{where()}")
        seed = ones((), dtype=out_aval.dtype)
        base_cts = _transpose(call, lin, diff, [seed])
        leaf_cts = {i: _fresh(call.leaf_cotangent(i, base_cts), [seed]) for i in diff_leaves}
        # NOTE: the write-back comes after the backward: traced as written, a residual may be a view of
        # an argument, which the write-back overwrites.
        out, aux = call.finish(primal_outs)
        grads = []
        for a in argnums_t:
            idx = _leaf_range(args, (a,))
            grads.append(jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(args[a]),
                                                      [leaf_cts[i] for i in idx]))
        g = grads[0] if single else tuple(grads)
        return ((out, aux) if has_aux else out), g

    return wrapped


def _per_argument(args: Sequence, argnums: Sequence[int], leaf_cts: list) -> list:
    """The cotangents of the leaves of arguments `argnums` (in order) as one pytree per argument, of its structure."""
    out, start = [], 0
    for a in argnums:
        if isinstance(args[a], Tensor):
            out.append(leaf_cts[start])
            start += 1
            continue
        tree = jax.tree_util.tree_structure(args[a])
        out.append(jax.tree_util.tree_unflatten(tree, leaf_cts[start:start + tree.num_leaves]))
        start += tree.num_leaves
    return out


def grad(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False) -> Callable:
    """The gradient of scalar-valued `fun` with respect to positional arguments `argnums` (with
    `has_aux`: `(gradient, aux)`). Writes `fun` makes into its arguments happen, as in eager; the
    gradient is with respect to the values at entry. Composes: `grad(grad(f))`, `jit(grad(f))`.

    >>> b = aotjax.ones(4)
    >>> def f(a):
    ...     b = a * 2
    ...     b[1:].mul_(3)                    # written in place through a view
    ...     return b.sum()
    >>> aotjax.grad(f)(aotjax.ones(4))
    tensor([2., 6., 6., 6.])
    """
    vg = _value_and_grad(fun, argnums, has_aux, "grad")

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        (out, g) = vg(*args, **kwargs)
        return (g, out[1]) if has_aux else g

    return wrapped


def jvp(fun: Callable, primals: Sequence, tangents: Sequence, has_aux: bool = False):
    """`(fun(*primals), directional derivative along tangents)`, JAX's signature: `primals` and
    `tangents` are tuples of the same structure (a tangent per primal leaf).

    >>> aotjax.jvp(lambda x: x * x, (aotjax.tensor([3.0]),), (aotjax.tensor([1.0]),))
    (tensor([9.]), tensor([6.]))
    """
    primals, tangents = tuple(primals), tuple(tangents)
    call = PureCall(fun, primals, {}, has_aux, "jvp")
    t_leaves, t_tree = jax.tree_util.tree_flatten((list(tangents), {}))
    if t_tree != call.in_tree:
        raise TypeError(f"jvp: tangents have structure {t_tree}, but primals have {call.in_tree}{where()}")
    base_tangents = call.base_tangents({i: t for i, t in enumerate(t_leaves)
                                        if is_differentiable(_leaf_dtype(call.leaves[i]))})
    outs, out_tangents = jvp_flat(call.pure, call.bases, base_tangents)
    out, aux = call.finish(outs)
    t_out = jax.tree_util.tree_unflatten(call.main_tree, out_tangents[:call.n_main])
    return (out, t_out, aux) if has_aux else (out, t_out)


def linearize(fun: Callable, *primals):
    """`(fun(*primals), f_jvp)` where `f_jvp(*tangents)` is the linear map `jvp` would apply, evaluated
    from saved residuals without running `fun` again.

    >>> out, f_jvp = aotjax.linearize(lambda x: x.sin(), aotjax.tensor([0.0]))
    >>> f_jvp(aotjax.tensor([3.0]))
    tensor([3.])
    """
    call = PureCall(fun, primals, {}, False, "linearize")
    diff = call.groups_of([i for i, x in enumerate(call.leaves) if is_differentiable(_leaf_dtype(x))])
    primal_outs, jaxpr, residuals, known, _ = _linearize(call, diff)
    out, _ = call.finish(primal_outs)
    n_main = call.n_main

    def f_jvp(*tangents):
        t_leaves, _ = jax.tree_util.tree_flatten((list(tangents), {}))
        base_t = call.base_tangents(dict(enumerate(t_leaves)))
        ins = [instantiate(t if t is not None else Zero(get_aval(b)))
               for t, b, d in zip(base_t, call.bases, diff, strict=True) if d]
        unknown_outs = iter(eval_jaxpr(jaxpr, *residuals, *ins))
        outs = [zeros_for(primal_outs[k]) if kn else next(unknown_outs) for k, kn in enumerate(known)]
        return jax.tree_util.tree_unflatten(call.main_tree, outs[:n_main])

    return out, f_jvp


def _single_tensor(what: str, x):
    if not isinstance(x, Tensor):
        raise TypeError(f"{what}: expected a single Tensor argument and output, got {type(x).__name__}{where()}")
    return x


def _single_argnum(fun: Callable, argnums, what: str) -> tuple[int]:
    if isinstance(argnums, (tuple, list)):
        raise TypeError(f"{what} of {fun_name(fun)}: argnums must be a single int (the Jacobian with respect to "
                        f"one argument), got {argnums!r}; take one Jacobian per argument")
    return normalize_argnums(fun, argnums, what)


def jacfwd(fun: Callable, argnums: int = 0, *, chunk_size: int | None = None) -> Callable:
    """The Jacobian of `fun` with respect to argument `argnums`, by forward mode: the linearization's `jvp`
    vmapped over the input's basis vectors (`chunk_size` of them at a time, default all): shape
    `out.shape + x.shape`.

    >>> aotjax.jacfwd(lambda x: x * x)(aotjax.tensor([1.0, 2.0]))
    tensor([[2., 0.],
            [0., 4.]])
    """
    return _jacfwd(fun, argnums, "jacfwd", chunk_size)


def _jacfwd(fun: Callable, argnums, what: str, chunk_size: int | None = None) -> Callable:
    argnums_given = _single_argnum(fun, argnums, what)

    @functools.wraps(fun)
    def jac(*args):
        (argnums,) = call_argnums(argnums_given, len(args), what, fun)
        x = _single_tensor(what, args[argnums])
        out, f_jvp = linearize(lambda xi: fun(*args[:argnums], xi, *args[argnums + 1:]), x)
        out = _single_tensor(what, out)
        basis = eye(x.numel(), dtype=x.dtype).view(x.numel(), *x.shape)
        cols = vmap(f_jvp, out_axes=-1, chunk_size=chunk_size)(basis)
        return _shaped(cols, (*out.shape, *x.shape))

    return jac


def jacrev(fun: Callable, argnums: int = 0, *, chunk_size: int | None = None) -> Callable:
    """The Jacobian of `fun` with respect to argument `argnums`, by reverse mode: the `vjp` vmapped over the
    output's basis vectors (`chunk_size` of them at a time, default all, as `torch.func.jacrev`): shape
    `out.shape + x.shape`.

    >>> aotjax.jacrev(lambda x: x.sum() * x)(aotjax.tensor([1.0, 2.0]))
    tensor([[4., 1.],
            [2., 5.]])
    """
    return _jacrev(fun, argnums, "jacrev", chunk_size)


def _jacrev(fun: Callable, argnums, what: str, chunk_size: int | None = None) -> Callable:
    argnums_given = _single_argnum(fun, argnums, what)

    @functools.wraps(fun)
    def jac(*args):
        (argnums,) = call_argnums(argnums_given, len(args), what, fun)
        x = _single_tensor(what, args[argnums])
        out, f_vjp = vjp(lambda xi: fun(*args[:argnums], xi, *args[argnums + 1:]), x)
        out = _single_tensor(what, out)
        basis = eye(out.numel(), dtype=out.dtype).view(out.numel(), *out.shape)
        rows = vmap(lambda ct: f_vjp(ct)[0], chunk_size=chunk_size)(basis)
        return _shaped(rows, (*out.shape, *x.shape))

    return jac


def _shaped(jac: Tensor, shape: tuple) -> Tensor:
    """The Jacobian at its documented shape (a Jacobian already of that shape is returned as it is: no view of it
    for the caller's boundary to replay)."""
    return jac if tuple(jac.shape) == shape else jac.reshape(*shape)


def hessian(fun: Callable, argnums: int = 0) -> Callable:
    """The Hessian of scalar-valued `fun`: `jacfwd(jacrev(fun))`.

    >>> aotjax.hessian(lambda x: (x ** 3).sum())(aotjax.tensor([1.0, 2.0]))
    tensor([[ 6.,  0.],
            [ 0., 12.]])
    """
    return _jacfwd(_jacrev(fun, argnums, "hessian"), argnums, "hessian")


def stop_gradient(x: Any) -> Any:
    """`x` with a zero derivative (every Tensor leaf of a pytree detached: a view sharing its storage,
    as `Tensor.detach`).

    >>> aotjax.grad(lambda x: (x * aotjax.stop_gradient(x)).sum())(aotjax.tensor([3.0]))
    tensor([3.])
    """
    return jax.tree_util.tree_map(lambda t: t.detach() if isinstance(t, Tensor) else t, x)
