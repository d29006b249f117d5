"""An aot function's backward split in two: the input-gradient program and the weight-gradient program, the
building block of zero-bubble pipeline schedules (`AotLowered.split_backward`).

A pipeline stage's backward has two consumers: the previous stage waits for the cotangents of the stage's inputs
(dI), while the cotangents of its weights (dW) are needed only at the optimizer step, so a schedule may run them
later, in what would be a bubble. The split is of aot's backward program as the partitioner made it:

- `backward_inputs` takes the backward's inputs (the residuals, then the output cotangents) and computes the
  cotangents of the non-weight inputs with only the equations they need: no weight gradient is computed there.
  It also returns the intermediate values of that computation that the weight part reads (`intermediate[k]`, each
  named after the equation that made it), so that nothing is computed twice;
- `backward_weights` takes the backward inputs it reads, then those intermediates, and computes the cotangents of
  the weights.

Their results are exactly the backward's (the same equations, run in two programs): a weight used several times
(tied) gets one cotangent, summed as the backward sums it. A loop (a `scan` over layers) whose body computes both is
split in two by its primitive's split rule (`aotjax.core.ir.split_rules`): `backward_inputs` runs the loop for the
input cotangents and stacks, per iteration, the values the weight cotangents read (the cotangent entering each
layer, ...); `backward_weights` runs a loop over those for the weight cotangents, carrying only the summed
cotangents of weights every iteration shares. Nothing is computed twice.
"""
from __future__ import annotations

from typing import Sequence

import jax
import numpy as np

from aotjax.core.errors import AotjaxError
from aotjax.core.ir import ClosedJaxpr, Jaxpr, Var, dce, split_rules
from aotjax.core.source_info import where
from aotjax.ops.calls.compiled import Program, compiled_call_p
from aotjax.ops.creation.factories import ones_like
from aotjax.runtime import boundary

__all__ = ["BackwardSplit", "split_backward"]


class SplitProgram:
    """One program of a split: its `jaxpr`, and names for each input and output (`input_names`, `output_names`),
    called with tensors in that order (`program(*tensors)`, eagerly or inside `jit`, where it is inlined)."""

    def __init__(self, program: Program, input_names: list[str], output_names: list[str]):
        self.program, self.input_names, self.output_names = program, input_names, output_names

    @property
    def jaxpr(self) -> ClosedJaxpr:
        return self.program.jaxpr

    def __call__(self, *tensors) -> list:
        if len(tensors) != len(self.input_names):
            raise TypeError(f"{self.jaxpr.meta.name}: takes {len(self.input_names)} inputs "
                            f"({', '.join(self.input_names)}), got {len(tensors)}{where()}")
        return list(compiled_call_p.bind(*tensors, program=self.program))

    def __str__(self) -> str:
        def sig(names, avals):
            return "\n".join(f"    {i:2}  {a.str_short():14} {n}" for i, (n, a) in enumerate(zip(names, avals)))
        jaxpr = self.jaxpr
        return "\n".join([jaxpr.pretty(source_info=True), "  inputs:", sig(self.input_names, jaxpr.in_avals),
                          "  outputs:", sig(self.output_names, jaxpr.out_avals)])


class BackwardSplit:
    """The three programs of an aot function split for pipeline schedules: `forward` (aot's forward: the outputs,
    then the residuals it returns), `backward_inputs` and `backward_weights` (see the module docstring). `run` runs
    the three in order: the reference path."""

    def __init__(self, lowered, weights: Sequence[int]):
        self._lowered = lowered
        self.weights = tuple(weights)
        name = lowered.jaxpr.meta.name or "fn"
        diff_groups = [gi for gi, d in enumerate(lowered._vjp.diff_in) if d]
        weight_groups = _weight_groups(lowered, self.weights)
        self.weight_groups = [gi for gi in diff_groups if gi in weight_groups]
        self.input_groups = [gi for gi in diff_groups if gi not in weight_groups]
        if not self.weight_groups:
            raise AotjaxError(f"split_backward: none of the arguments {list(self.weights)} is a differentiated "
                              f"floating-point input of `{name}`{where()}; pass the positions of its weights")
        self.forward = SplitProgram(lowered._vjp.forward, lowered.forward_inputs, lowered.forward_outputs)
        is_weight = [gi in weight_groups for gi in diff_groups]
        inputs_part, weights_part, self._reads, intermediates = _split(lowered.backward, is_weight, name)
        names, in_names = lowered.backward_outputs, lowered.backward_inputs
        compiler = lowered._vjp.backward.compiler  # NOTE: the aot function's backward compiler compiles both
        self.backward_inputs = SplitProgram(
            Program(inputs_part, compiler, "backward_inputs", function=name),
            in_names, [n for n, w in zip(names, is_weight) if not w] + intermediates)
        self.backward_weights = SplitProgram(
            Program(weights_part, compiler, "backward_weights", function=name),
            [in_names[i] for i in self._reads] + intermediates, [n for n, w in zip(names, is_weight) if w])
        self._n_inputs_out = len(self.input_groups)

    @property
    def cotangent_names(self) -> list[str]:
        """The output cotangents the backward takes, in order (`run`'s `cotangent`)."""
        return [str(d) for d in self._lowered._signature.output_cotangents]

    def run(self, *args, cotangent=None):
        """`(outputs, input_grads, weight_grads)`: the forward on `args` (the arguments the function was lowered
        for, in the same structure), then `backward_inputs`, then `backward_weights`. `cotangent`: one tensor per
        differentiated output (`cotangent_names`), or one tensor for a single one; default: 1 for a single scalar
        output (as `grad`). `input_grads` and `weight_grads` are lists in argument order."""
        primals = self.primals(*args)
        outs = self.forward(*primals)
        n_out = self._lowered.num_forward_outputs
        bwd_in = self.backward_inputs_from(primals, outs, self._cotangents(outs[:n_out], cotangent))
        input_grads, w_in = self.split_results(bwd_in, self.backward_inputs(*bwd_in))
        return outs[:n_out], input_grads, self.backward_weights(*w_in)

    def primals(self, *args) -> list:
        """`forward`'s inputs for a call with `args` (the arguments as the function takes them)."""
        lowered = self._lowered
        dynamic = tuple(a for i, a in enumerate(args) if i not in lowered._static_positions)
        leaves = jax.tree_util.tree_leaves((dynamic, {}))
        return [boundary.group_base(g, leaves) for g in lowered.meta.groups]

    def backward_inputs_from(self, primals: Sequence, forward_outputs: Sequence, cotangents: Sequence) -> list:
        """`backward_inputs`' inputs: the residuals (from `forward`'s inputs and outputs), then `cotangents`."""
        return [*self._lowered.residuals_from(primals, forward_outputs), *cotangents]

    def split_results(self, backward_in: Sequence, results: Sequence) -> tuple[list, list]:
        """`(input cotangents, backward_weights' inputs)` from `backward_inputs`' inputs and results: what a schedule
        passes back to the previous stage, and what it keeps for the deferred weight gradients."""
        n = len(self.input_groups)
        return list(results[:n]), [*(backward_in[i] for i in self._reads), *results[n:]]

    def _cotangents(self, outputs: list, cotangent) -> list:
        diff_out = self._lowered._vjp.diff_out
        wanted = [o for o, d in zip(outputs, diff_out) if d]
        if cotangent is None:
            if len(wanted) != 1 or wanted[0].shape != ():
                raise TypeError(f"split_backward.run: the function has {len(wanted)} differentiated output(s) "
                                f"{[tuple(o.shape) for o in wanted]}; pass cotangent= (one per output: "
                                f"{self.cotangent_names}){where()}")
            return [ones_like(wanted[0])]
        cts = list(cotangent) if isinstance(cotangent, (list, tuple)) else [cotangent]
        if len(cts) != len(wanted):
            raise TypeError(f"split_backward.run: expected {len(wanted)} cotangent(s) ({self.cotangent_names}), got "
                            f"{len(cts)}{where()}")
        return cts

    def __str__(self) -> str:
        return "\n".join(["forward:", str(self.forward), "backward_inputs:", str(self.backward_inputs),
                          "backward_weights:", str(self.backward_weights)])

    def __repr__(self) -> str:
        intermediates = len(self.backward_weights.input_names) - len(self._reads)
        return (f"BackwardSplit({self._lowered.jaxpr.meta.name or 'fn'}: weights {list(self.weights)}; "
                f"backward_inputs {len(self.backward_inputs.jaxpr.eqns)} equations, backward_weights "
                f"{len(self.backward_weights.jaxpr.eqns)} equations, {intermediates} intermediates)")


def split_backward(lowered, weights) -> BackwardSplit:
    """`lowered.split_backward(weights)`: see `BackwardSplit`."""
    weights = (weights,) if isinstance(weights, (int, np.integer)) else tuple(weights)
    return BackwardSplit(lowered, weights)


def _weight_groups(lowered, weights: tuple) -> set[int]:
    """The input groups of the positional arguments `weights` (a group is a weight if one of its tensors is)."""
    n_args = len(lowered._arg_leaves)
    for w in weights:
        if not isinstance(w, (int, np.integer)) or not -n_args <= w < n_args:
            raise TypeError(f"split_backward: weights must be positions of the function's {n_args} positional "
                            f"argument(s), got {w!r}{where()}")
    starts = np.cumsum([0, *lowered._arg_leaves])
    leaves = {i for w in weights for i in range(starts[w % n_args], starts[w % n_args + 1])}
    return {gi for gi, g in enumerate(lowered.meta.groups) if any(idxs[0] in leaves for idxs in g.leaves)}


def _split_loops(eqns: list, in_outs: list, w_outs: list) -> list:
    """`eqns` with each loop both parts need (a `scan` over layers computing input and weight cotangents) replaced
    by its two parts (`aotjax.core.ir.split_rules`): the first computes what the input cotangents need and stacks
    the per-iteration values the second reads, so that the weights program does not run the loop again."""
    first_used = {id(v) for e in dce(eqns, in_outs) for v in e.outputs}
    second_used = {id(v) for e in dce(eqns, w_outs) for v in e.outputs}
    out = []
    for e in eqns:
        rule = split_rules.get(e.primitive)
        first = [id(v) in first_used for v in e.outputs]
        second = [id(v) in second_used for v in e.outputs]
        parts = rule(e, first, second) if rule is not None and any(first) and any(second) else None
        out.extend(parts if parts is not None else [e])
    return out


def _describe(eqn, v: Var) -> str:
    """What made `v`: its primitive, or the primitive's words for that output (a loop's stacked value)."""
    describe = eqn.primitive.describe_output
    return (describe and describe(eqn, next(k for k, o in enumerate(eqn.outputs) if o is v))) or eqn.primitive.name


def _origins(eqns: list):
    """`origin(eqn)`: the position in `eqns` of the equation `eqn` was pruned from (by `dce`: the same outputs)."""
    position = {id(v): i for i, e in enumerate(eqns) for v in e.outputs}
    return lambda e: position[id(e.outputs[0])] if e.outputs else id(e)


def _split(backward: ClosedJaxpr, is_weight: list[bool], name: str):
    """`(inputs program, weights program, the backward inputs the weights program reads (positions), the names of the
    intermediates the inputs program returns for it)`."""
    j = backward.jaxpr
    in_outs = [v for v, w in zip(j.outvars, is_weight) if not w]
    w_outs = [v for v, w in zip(j.outvars, is_weight) if w]
    eqns = _split_loops(j.eqns, in_outs, w_outs)
    origin = _origins(eqns)
    firsts = {origin(e) for e in dce(eqns, in_outs)}  # what the input cotangents need: the inputs program runs it
    w_only = [e for e in dce(eqns, w_outs) if origin(e) not in firsts]
    defined_w = {id(v) for e in w_only for v in e.outputs}
    invar_pos = {id(v): i for i, v in enumerate(j.invars)}
    constvars = {id(v) for v in j.constvars}
    reads, intermediates, seen = [], [], set()
    for a in [x for e in w_only for x in e.inputs] + w_outs:
        if not isinstance(a, Var) or id(a) in defined_w or id(a) in seen or id(a) in constvars:
            continue
        seen.add(id(a))
        if id(a) in invar_pos:
            reads.append(invar_pos[id(a)])
        else:
            intermediates.append(a)
    reads.sort()
    inputs_eqns = dce(eqns, in_outs + intermediates)
    made_by_inputs = {id(v): e for e in inputs_eqns for v in e.outputs}
    names = [f"intermediate[{k}] {_describe(made_by_inputs[id(v)], v)}" for k, v in enumerate(intermediates)]
    inputs_part = ClosedJaxpr(Jaxpr(j.constvars, j.invars, inputs_eqns, in_outs + intermediates), backward.consts,
                              meta=backward.meta.__class__(name=f"{name}_backward_inputs"))
    weights_part = ClosedJaxpr(Jaxpr(j.constvars, [j.invars[i] for i in reads] + intermediates, w_only, w_outs),
                               backward.consts, meta=backward.meta.__class__(name=f"{name}_backward_weights"))
    return inputs_part, weights_part, reads, names
