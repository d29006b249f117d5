"""The partition made visible: a function's forward and backward programs, with labelled signatures.

`forward_backward(f, *args)` linearizes `f` (functionalized, `jvp + partial_eval`) while tracing, and
transposes the linear part while tracing again, giving two jaxprs:

- **forward**: the inputs are the primals, one per input group (flatten order of the arguments; the
  primal inputs); the outputs are the user's outputs, then the written inputs' new values, then the
  intermediate bases that outputs view, then the residuals;
- **backward**: the inputs are the residuals (in forward-output order), then one cotangent per user
  output whose derivative depends on the inputs; the outputs are one cotangent per primal input.

Every input and output carries a descriptor: its role, its pytree path and, for residuals, the
primitive and user source line that computed it. `print_saved_residuals` lists the residuals.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import jax

from aotjax.core.interpreter import get_aval
from aotjax.core.ir import ClosedJaxpr
from aotjax.interpreters.ad_util import Zero, is_differentiable
from aotjax.interpreters.trace import trace_flat
from aotjax.interpreters.transpose import UndefinedPrimal, backward_pass
from aotjax.transforms.autodiff import _Boundary, linearize_flat


@dataclass(frozen=True)
class Residual:
    """A value the forward saves for the backward: its descriptor, abstract value and size, and why
    it is saved (the primitive and source line that computed it, or the input it is)."""

    descriptor: str
    aval: object
    nbytes: int
    why: str

    def __str__(self) -> str:
        return f"{self.aval.str_short()}  {self.nbytes} bytes  {self.why}"


@dataclass
class ForwardBackward:
    """The forward and backward programs of a function, with a descriptor per input and output."""

    forward: ClosedJaxpr
    backward: ClosedJaxpr
    residuals: list[Residual]
    forward_inputs: list[str]
    forward_outputs: list[str]
    backward_inputs: list[str]
    backward_outputs: list[str]

    @property
    def residual_bytes(self) -> int:
        """Bytes the forward saves for the backward (inputs that are residuals count: they are kept)."""
        return sum(r.nbytes for r in self.residuals)

    def __str__(self) -> str:
        def sig(names, avals):
            return "\n".join(f"    {i:2}  {a.str_short():14} {n}" for i, (n, a) in enumerate(zip(names, avals)))

        return "\n".join([
            "forward:", self.forward.pretty(source_info=True),
            "  inputs:", sig(self.forward_inputs, self.forward.in_avals),
            "  outputs:", sig(self.forward_outputs, self.forward.out_avals),
            "backward:", self.backward.pretty(source_info=True),
            "  inputs:", sig(self.backward_inputs, self.backward.in_avals),
            "  outputs:", sig(self.backward_outputs, self.backward.out_avals)])

    def _repr_pretty_(self, p, cycle):
        p.text(str(self))


def forward_backward(fun: Callable, *args) -> ForwardBackward:
    """The forward program (primals -> outputs, written inputs, intermediate bases, residuals) and the
    backward program (residuals, output cotangents -> input cotangents) of `fun` at `args`. Nothing
    runs: both are traced; `fun`'s writes into `args` do not happen.

    >>> fb = aotjax.forward_backward(lambda x, w: (x @ w).tanh().sum(), aotjax.ones(2, 3), aotjax.ones(3, 4))
    >>> fb.forward_inputs, fb.backward_outputs
    (['primal[x]', 'primal[w]'], ['cotangent[x]', 'cotangent[w]'])
    >>> [r.descriptor for r in fb.residuals]
    ['residual[0] primal[w]', 'residual[1] primal[x]', 'residual[2] sub']
    """
    call = _Boundary(fun, args, {}, False, "forward_backward")
    names = _group_names(fun, call, args)
    avals = [get_aval(b) for b in call.bases]
    diff = [is_differentiable(a.dtype) for a in avals]
    state: dict = {}

    def forward(*bases):
        primal_outs, lin, residuals, known, t_avals = linearize_flat(call.pure, list(bases), diff)
        ids = {id(b): k for k, b in enumerate(bases)}
        # NOTE: an intermediate base that is itself a user output is returned once, as the output.
        n_keep = call.n_main + call.n_new
        main_ids = {id(o) for o in primal_outs[:call.n_main]}
        kept_bases = [k for k in range(call.n_bases) if id(primal_outs[n_keep + k]) not in main_ids]
        state.update(lin=lin, known=known, t_avals=t_avals, kept_bases=kept_bases,
                     res_inputs=[ids.get(id(r)) for r in residuals], res_avals=[get_aval(r) for r in residuals])
        return [*primal_outs[:n_keep], *[primal_outs[n_keep + k] for k in kept_bases], *residuals]

    fwd = trace_flat(forward, avals)
    lin, known = state["lin"], state["known"]
    n_main = call.n_main
    ct_positions = [k for k in range(n_main) if not known[k]]

    def backward(*res_and_cts):
        n_res = len(state["res_avals"])
        res, cts_in = res_and_cts[:n_res], iter(res_and_cts[n_res:])
        cts = [next(cts_in) if k in ct_positions else Zero(fwd.out_avals[k]) for k, kn in enumerate(known) if not kn]
        undefined = [UndefinedPrimal(a) for a in state["t_avals"]]
        base_cts = iter(backward_pass(lin, [], [*res, *undefined], cts, instantiate=True))
        return [next(base_cts) for d in diff if d]

    bwd = trace_flat(backward, [*state["res_avals"], *[fwd.out_avals[k] for k in ct_positions]])
    residuals = _residuals(lin, state, names)
    out_names = _output_names(call, state["kept_bases"])
    return ForwardBackward(
        fwd, bwd, residuals,
        forward_inputs=[f"primal[{n}]" for n in names],
        forward_outputs=out_names + [r.descriptor for r in residuals],
        backward_inputs=[r.descriptor for r in residuals] + [f"cotangent[{out_names[k]}]" for k in ct_positions],
        backward_outputs=[f"cotangent[{n}]" for n, d in zip(names, diff) if d])


def _group_names(fun, call: _Boundary, args) -> list[str]:
    from aotjax.transforms.functionalize import _input_names

    path_leaves, _ = jax.tree_util.tree_flatten_with_path((list(args), {}))
    leaf_names = _input_names(fun, path_leaves, len(args), ())
    return [" = ".join(leaf_names[idxs[0]] for idxs in g.leaves) for g in call.groups]


def _output_names(call: _Boundary, kept_bases: list[int]) -> list[str]:
    meta = call.meta
    paths = jax.tree_util.tree_flatten_with_path(jax.tree_util.tree_unflatten(call.main_tree, range(call.n_main)))[0]
    names = ["out" + jax.tree_util.keystr(p) for p, _ in paths]
    names += [f"updated[{meta._group_name(g)}]" for g in meta.mutated]
    return names + [f"base[{k}]" for k in kept_bases]


def _residuals(lin: ClosedJaxpr, state: dict, names: list[str]) -> list[Residual]:
    sources = lin.meta.get("residual_sources", [])
    out = []
    for k, (aval, inp) in enumerate(zip(state["res_avals"], state["res_inputs"])):
        src = sources[k] if k < len(sources) else None
        if inp is not None:
            desc, why = f"residual[{k}] primal[{names[inp]}]", f"argument {names[inp]}"
        elif src is not None and src.primitive is not None:
            at = f" at {src.source_info}" if src.source_info is not None else ""
            desc, why = f"residual[{k}] {src.primitive}", f"{src.primitive}{at}"
        else:
            desc, why = f"residual[{k}]", "a constant"
        out.append(Residual(desc, aval, aval.nbytes, why))
    return out


def saved_residuals(fun: Callable, *args) -> list[Residual]:
    """The residuals the forward of `fun` saves for its backward (see `forward_backward`)."""
    return forward_backward(fun, *args).residuals


def print_saved_residuals(fun: Callable, *args) -> None:
    """Print each residual the forward of `fun` at `args` saves for the backward: shape and dtype,
    bytes, and the primitive and source line that made it (or the argument it is).

    >>> aotjax.print_saved_residuals(lambda x: (x.sin() * 2).sum(), aotjax.ones(3))
    f32[3]  12 bytes  cos at <doctest ...>:1 (<lambda>)
    """
    for r in saved_residuals(fun, *args):
        print(r)
