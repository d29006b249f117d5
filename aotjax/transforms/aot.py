"""`aot`: AOTAutograd made of interpreters. A function's forward and backward as separate compiled
programs with a stable, documented signature, restored eager semantics at the call, and transforms
that compose both ways (`grad(aot(f))`, `aot(grad(f))`, `grad(grad(aot(f)))`).

The pipeline, per input signature (the guards of `jit`):

    trace -> functionalize             the pure program (`Staged`, as jit's) and the call boundary
    -> joint                           linearize (jvp + partial_eval) and transpose, traced as one program
    -> partition                       forward + backward (`aotjax.partition`)
    -> fw_compiler / bw_compiler       callables (the default lowers through XLA)

**The signature.** Forward inputs: one primal per input group (the arguments' leaves in
`jax.tree_util` flatten order; arguments sharing a storage share one synthetic base). Forward outputs:
the user's new output values, then the written inputs' new values, then the intermediate bases
that outputs view (jit's layout), then the residuals that are not primal inputs. Backward inputs:
the residuals (primal inputs among them, passed by the caller as they are: never copied through the
forward; `saved_inputs` says which), then one cotangent per floating-point forward output (before
the residuals), in order. Backward outputs: one cotangent per differentiated floating-point forward
input, in order. Programs are specialized on which inputs are differentiated (`grad(f,
argnums=0)` computes no other cotangent). Every input and output has a descriptor.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import jax

from aotjax.core.errors import UnsupportedError
from aotjax.core.eval_jaxpr import eval_jaxpr
from aotjax.core.interpreter import Tracer
from aotjax.core.ir import ClosedJaxpr, dce_jaxpr
from aotjax.core.source_info import where
from aotjax.interpreters.ad_util import Zero, is_differentiable
from aotjax.interpreters.trace import trace_flat
from aotjax.interpreters.transpose import UndefinedPrimal, backward_pass
from aotjax.lowering.to_jax import avals_to_structs, flat_function
from aotjax.ops.calls import Program, aot_call_p
from aotjax.partition import JointInfo, default_partition
from aotjax.runtime import boundary, guards
from aotjax.transforms.autodiff import linearize_flat
from aotjax.transforms.functionalize import Staged, stage_functionalized
from aotjax.transforms.jit import Jitted, _Entry


# -- compilers -----------------------------------------------------------------------------------------
def xla_compiler(jaxpr: ClosedJaxpr, example_avals: Sequence) -> Callable:
    """The default compiler: lower `jaxpr` through XLA (`jax.jit(...).lower(...).compile()`); inputs
    listed in `jaxpr.meta["donate"]` are donated. Returns a callable on flat arrays."""
    donate = tuple(jaxpr.meta.get("donate", ()))
    return jax.jit(flat_function(jaxpr), donate_argnums=donate).lower(*avals_to_structs(example_avals)).compile()


# -- the joint program -----------------------------------------------------------------------------------
def build_joint(jaxpr: ClosedJaxpr, wanted: Sequence[bool] | None = None) -> tuple[JointInfo, list[bool], list[bool]]:
    """The joint program of a pure flat program: `(primals, cotangents) -> (outputs, input cotangents)`,
    its forward part computing the outputs and what the backward needs (linearize), its backward part
    the transposed linear program. `wanted` marks the inputs to differentiate (default: every
    floating-point one). Returns it with which inputs and outputs are differentiated."""
    in_avals, out_avals = list(jaxpr.in_avals), list(jaxpr.out_avals)
    wanted = [True] * len(in_avals) if wanted is None else list(wanted)
    diff_in = [w and is_differentiable(a.dtype) for a, w in zip(in_avals, wanted, strict=True)]
    diff_out = [is_differentiable(a.dtype) for a in out_avals]
    n = len(in_avals)
    state: dict = {}

    def joint(*args):
        primals, cts = args[:n], iter(args[n:])
        ct_of = [next(cts) if d else None for d in diff_out]
        outs, lin, residuals, known, t_avals = linearize_flat(lambda *a: eval_jaxpr(jaxpr, *a), list(primals), diff_in)
        if args:  # NOTE: where the forward ends: what follows is the backward pass
            state["n_fwd"] = len(args[0]._trace.builder.eqns)
        lin_cts = [ct_of[k] if ct_of[k] is not None else Zero(out_avals[k]) for k, kn in enumerate(known) if not kn]
        in_cts = backward_pass(lin, [], [*residuals, *map(UndefinedPrimal, t_avals)], lin_cts, instantiate=True)
        return [*outs, *in_cts]

    traced = trace_flat(joint, in_avals + [a for a, d in zip(out_avals, diff_out) if d])
    forward_ids = {id(e) for e in traced.eqns[:state.get("n_fwd", len(traced.eqns))]}
    closed = dce_jaxpr(traced)
    closed.meta["name"] = jaxpr.meta.get("name", "fn") + "_joint"
    n_fwd = sum(id(e) in forward_ids for e in closed.eqns)
    return JointInfo(closed, n, len(out_avals), n_fwd), diff_in, diff_out


def apply_decompositions(jaxpr: ClosedJaxpr, decompositions: dict) -> ClosedJaxpr:
    """`jaxpr` traced again with each primitive in `decompositions` (keys: primitives or their names)
    replaced by its function `(*operands, **params) -> result`, written with aotjax ops."""
    table = {getattr(k, "name", k): v for k, v in decompositions.items()}
    out = trace_flat(lambda *args: eval_jaxpr(jaxpr, *args, overrides=table), list(jaxpr.in_avals))
    out.meta.update(jaxpr.meta)
    return out


# -- per-signature state ---------------------------------------------------------------------------------
class _AotEntry:
    """An aot function's state for one input signature: the staged program and boundary, the inference
    program (plain calls), and on first differentiation the joint, the partition and the compiled
    forward and backward programs."""

    def __init__(self, staged: Staged, aot: "Aot"):
        self.staged = staged
        self.aot = aot
        jaxpr = staged.jaxpr
        if aot.decompositions:
            jaxpr = apply_decompositions(jaxpr, aot.decompositions)
        jaxpr.meta["donate"] = tuple(staged.meta.mutated)
        self.pure = jaxpr
        self.inference = Program(jaxpr, aot.inference_compiler or aot.fw_compiler, "inference")
        self.plain = _Entry(staged, donate=True)
        if aot.inference_compiler is not None or aot.fw_compiler is not xla_compiler:
            self.plain.fn = self.inference  # NOTE: a user compiler runs plain calls too
        self._vjps: dict = {}

    def vjp(self, wanted: tuple | None = None) -> "_AotVJP":
        """The forward and backward programs differentiating the inputs marked in `wanted` (default:
        every floating-point input): cached per pattern, as `grad(f, argnums=...)` needs only some."""
        key = tuple(wanted) if wanted is not None else None
        v = self._vjps.get(key)
        if v is None:
            v = self._vjps[key] = _AotVJP(self, wanted)
        return v


class _AotVJP:
    """The joint, the partition and the compiled forward and backward of an aot function for one
    signature and one set of differentiated inputs. What `aot_call`'s jvp and `aot_lin`'s transpose
    run (see `aotjax.ops.calls`)."""

    def __init__(self, entry: _AotEntry, wanted):
        self.entry = entry
        self.joint, self.diff_in, self.diff_out = build_joint(entry.pure, wanted)
        self.partitioned = entry.aot.partition(self.joint)
        name = entry.pure.meta.get("name", "fn")
        self.partitioned.forward.meta["name"] = name + "_forward"
        self.partitioned.backward.meta["name"] = name + "_backward"
        self.forward = Program(self.partitioned.forward, entry.aot.fw_compiler, "forward")
        self.backward = Program(self.partitioned.backward, entry.aot.bw_compiler, "backward")
        self.saved_inputs = self.partitioned.saved_inputs
        self.n_residuals = len(self.saved_inputs)
        self.out_avals = list(entry.inference.jaxpr.out_avals)


# -- the transform ----------------------------------------------------------------------------------------
class Aot(Jitted):
    """An aot-compiled function (see `aot`)."""

    what = "aot"

    def __init__(self, fun, fw_compiler, bw_compiler, partition, decompositions, static_argnums,
                 inference_compiler=None):
        super().__init__(fun, static_argnums, donate=True)
        self.fw_compiler = fw_compiler or xla_compiler
        self.bw_compiler = bw_compiler or self.fw_compiler
        self.inference_compiler = inference_compiler
        self.partition = partition or default_partition
        self.decompositions = dict(decompositions or {})

    def _stage(self, args, kwargs) -> _AotEntry:
        self.trace_count += 1
        staged = stage_functionalized(self.fun, args, kwargs, self.static_argnums, "aot").release()
        if any(isinstance(c, Tracer) for c in staged.jaxpr.consts):
            raise UnsupportedError(
                f"aot: the function reads a traced value it closes over{where()}; aot compiles it on its own, so "
                f"pass that value as an argument instead")
        return _AotEntry(staged, self)

    def _entry(self, args, kwargs, key) -> _AotEntry:
        entry = self._cache.get(key)
        if entry is None:
            entry = self._cache[key] = self._stage(args, kwargs)
        return entry

    def __call__(self, *args, **kwargs):
        leaves, in_tree, statics = self._split(args, kwargs)
        statics = guards.hashable_statics(statics) if statics else ()
        signature = guards.call_key(leaves)
        if signature is not None:  # eager arguments: the inference program, boundary restored
            entry = self._entry(args, kwargs, (in_tree, statics, signature))
            return entry.plain.run(leaves, entry.plain.fn)
        entry = self._entry(args, kwargs, (in_tree, statics, guards.abstract_key(leaves)))
        meta = entry.staged.meta
        bases = [_operand(b, g) for b, g in zip(boundary.entry_bases(meta.groups, leaves), meta.groups, strict=True)]
        outs = aot_call_p.bind(*bases, entry=entry)
        by_slot = dict(zip(meta.layout, outs, strict=True))
        return boundary.apply(meta, leaves, [by_slot[("mutated", g)] for g in meta.mutated],
                              [by_slot[("base", k)] for k in range(meta.n_bases)])

    def lower(self, *args, **kwargs) -> "AotLowered":
        """Trace, functionalize, build the joint and partition it for these arguments; nothing runs and
        nothing is compiled. See `AotLowered`."""
        return AotLowered(self._stage(args, kwargs))


def _operand(base, group):
    if isinstance(base, (bool, int, float, complex)):
        import numpy as np

        return np.asarray(base, dtype=group.base_aval().dtype)
    return base


def aot(fun: Callable, fw_compiler: Callable | None = None, bw_compiler: Callable | None = None,
        partition: Callable | None = None, decompositions: dict | None = None,
        static_argnums: int | Sequence[int] = ()) -> Aot:
    """Compile `fun`'s forward and backward as separate programs, AOTAutograd-style.

    Called plainly, it runs a compiled program with eager semantics at the boundary (written inputs
    updated in place, aliasing outputs returned as views). Under `grad`/`vjp` it runs its compiled
    forward (keeping the residuals) and its compiled backward for the cotangents, never tracing
    `fun` again; the backward is itself differentiable (`grad(grad(aot(f)))`). `aot(grad(f))`
    compiles the whole gradient computation as one program.

    A compiler is `compiler(closed_jaxpr, example_avals) -> callable` on flat arrays (default:
    `xla_compiler`); `bw_compiler` defaults to `fw_compiler`, and runs at the latest when the backward
    first runs. `partition` is a partitioner (`aotjax.partition`); `decompositions` maps primitives
    to functions that replace them. The signature of the programs is in this module's docstring.

    >>> f = aotjax.aot(lambda x, w: (x @ w).tanh().sum())
    >>> x, w = aotjax.ones(2, 3), aotjax.ones(3, 2) * 0.1
    >>> aotjax.grad(f, argnums=1)(x, w)
    tensor([[1.830274, 1.830274],
            [1.830274, 1.830274],
            [1.830274, 1.830274]])
    >>> lowered = f.lower(x, w)
    >>> lowered.forward_inputs, lowered.backward_outputs
    (['primal[x]', 'primal[w]'], ['cotangent[x]', 'cotangent[w]'])
    """
    return Aot(fun, fw_compiler, bw_compiler, partition, decompositions, static_argnums)


# -- stages -------------------------------------------------------------------------------------------------
class AotLowered:
    """An aot function lowered for one signature: `.jaxpr` (functionalized), `.joint`, `.forward`,
    `.backward` (printable ClosedJaxprs), `.residuals` (descriptor, aval, bytes, why saved), `.meta`
    (the boundary), the descriptors of every program input and output, `.as_text()` (StableHLO of
    the forward and backward) and `.compile()`."""

    def __init__(self, entry: _AotEntry):
        self._entry = entry
        self._vjp = entry.vjp()

    @property
    def jaxpr(self) -> ClosedJaxpr:
        return self._entry.pure

    @property
    def joint(self) -> ClosedJaxpr:
        return self._vjp.joint.jaxpr

    @property
    def forward(self) -> ClosedJaxpr:
        return self._vjp.partitioned.forward

    @property
    def backward(self) -> ClosedJaxpr:
        return self._vjp.partitioned.backward

    @property
    def meta(self) -> boundary.BoundaryMeta:
        return self._entry.staged.meta

    @functools.cached_property
    def _names(self) -> "_Descriptors":
        return _describe(self._entry, self._vjp)

    @property
    def residuals(self) -> list[Residual]:
        return self._names.residuals

    @property
    def residual_bytes(self) -> int:
        return sum(r.nbytes for r in self.residuals)

    @property
    def forward_inputs(self) -> list[str]:
        return self._names.primals

    @property
    def joint_inputs(self) -> list[str]:
        """Descriptors of the joint program's inputs: the primals, then the output cotangents."""
        return self.forward_inputs + self.backward_inputs[len(self.residuals):]

    @property
    def joint_outputs(self) -> list[str]:
        """Descriptors of the joint program's outputs: the forward's outputs, then the input cotangents."""
        return self._names.outputs + self.backward_outputs

    @property
    def saved_inputs(self) -> list[int | None]:
        """Per residual: the index of the primal input it is (the caller passes that input to the
        backward itself), or None (the forward returns it)."""
        return list(self._vjp.saved_inputs)

    def residuals_from(self, primals: Sequence, forward_outputs: Sequence) -> list:
        """The backward's residual inputs, from the forward's inputs and outputs (a helper for running
        the two programs by hand)."""
        returned = iter(forward_outputs[len(self._names.outputs):])
        return [primals[i] if i is not None else next(returned) for i in self._vjp.saved_inputs]

    @property
    def forward_outputs(self) -> list[str]:
        """The user's outputs, updated inputs and intermediate bases, then the residuals that are not
        primal inputs (those the caller passes to the backward itself)."""
        returned = [r.descriptor for r, i in zip(self.residuals, self._vjp.saved_inputs) if i is None]
        return self._names.outputs + returned

    @property
    def backward_inputs(self) -> list[str]:
        return [r.descriptor for r in self.residuals] + [f"cotangent[{n}]" for n, d in
                                                          zip(self._names.outputs, self._vjp.diff_out) if d]

    @property
    def backward_outputs(self) -> list[str]:
        return [f"cotangent[{n[len('primal['):-1]}]" for n, d in zip(self._names.primals, self._vjp.diff_in) if d]

    def as_text(self) -> str:
        """The StableHLO of the forward and of the backward program."""
        def text(j):
            return jax.jit(flat_function(j)).lower(*avals_to_structs(j.in_avals)).as_text()

        return f"// forward\n{text(self.forward)}\n// backward\n{text(self.backward)}"

    def compile(self) -> "AotCompiled":
        """Compile both programs now (with the aot function's compilers)."""
        vjp = self._vjp
        vjp.forward.executable, vjp.backward.executable  # noqa: B018  (compiles both)
        return AotCompiled(vjp)

    def __str__(self) -> str:
        def sig(names, avals):
            return "\n".join(f"    {i:2}  {a.str_short():14} {n}" for i, (n, a) in enumerate(zip(names, avals)))

        return "\n".join(["forward:", self.forward.pretty(source_info=True),
                          "  inputs:", sig(self.forward_inputs, self.forward.in_avals),
                          "  outputs:", sig(self.forward_outputs, self.forward.out_avals),
                          "backward:", self.backward.pretty(source_info=True),
                          "  inputs:", sig(self.backward_inputs, self.backward.in_avals),
                          "  outputs:", sig(self.backward_outputs, self.backward.out_avals)])

    def _repr_pretty_(self, p, cycle):
        p.text(str(self))


class AotCompiled:
    """The compiled forward and backward of an aot function for one signature; `cost_analysis()` and
    `memory_analysis()` give XLA's analyses per program (`{"forward": ..., "backward": ...}`) when
    the compiler is XLA's."""

    def __init__(self, vjp: _AotVJP):
        self._vjp = vjp

    def _per_program(self, what: str) -> dict:
        out = {}
        for name, prog in (("forward", self._vjp.forward), ("backward", self._vjp.backward)):
            fn = getattr(prog.executable, what, None)
            out[name] = fn() if fn is not None else None
        return out

    def cost_analysis(self) -> dict:
        return self._per_program("cost_analysis")

    def memory_analysis(self) -> dict:
        return self._per_program("memory_analysis")


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
class _Descriptors:
    primals: list[str]
    outputs: list[str]
    residuals: list[Residual]


def _describe(entry: _AotEntry, vjp: _AotVJP) -> _Descriptors:
    meta = entry.staged.meta
    primals = [f"primal[{meta._group_name(gi)}]" for gi in range(len(meta.groups))]
    user_bases = {spec.index: k for k, spec in enumerate(meta.outputs) if spec.kind == "base" and not spec.chain}
    outputs = []
    for kind, k in meta.layout:
        if kind == "mutated":
            outputs.append(f"updated[{meta._group_name(k)}]")
        elif k in user_bases:
            outputs.append(meta.output_names[user_bases[k]] if user_bases[k] < len(meta.output_names) else f"out[{k}]")
        else:
            outputs.append(f"base[{k}]")
    joint = vjp.joint
    producers = {id(v): e for e in joint.jaxpr.eqns for v in e.outputs}
    primal_index = {id(v): i for i, v in enumerate(joint.primals)}
    residuals = []
    for r, v in enumerate(vjp.partitioned.saved):
        if id(v) in primal_index:
            name = meta._group_name(primal_index[id(v)])
            desc, why = f"residual[{r}] primal[{name}]", f"argument {name}"
        else:
            eqn = producers.get(id(v))
            prim = eqn.primitive.name if eqn is not None else "constant"
            at = f" at {eqn.source_info}" if eqn is not None and eqn.source_info is not None else ""
            desc, why = f"residual[{r}] {prim}{at}", f"{prim}{at}"
        residuals.append(Residual(desc, v.aval, v.aval.nbytes, why))
    return _Descriptors(primals, outputs, residuals)


# -- AOTAutograd's names, for porting --------------------------------------------------------------------------
def aot_function(fn: Callable, fw_compiler: Callable | None = None, bw_compiler: Callable | None = None,
                 partition_fn: Callable | None = None, decompositions: dict | None = None,
                 inference_compiler: Callable | None = None, **unused: Any) -> Aot:
    """`aot` with AOTAutograd's argument names (`partition_fn`, `inference_compiler`); other
    AOTAutograd options (`num_params_buffers`, `keep_inference_input_mutations`, `dynamic`, ...) are
    accepted and have no effect: aotjax always keeps input mutations and specializes on shapes.

    >>> f = aotjax.aot_function(lambda x: x.sin().sum(), fw_compiler=lambda j, avals: aotjax.to_jax(j))
    >>> aotjax.grad(f)(aotjax.zeros(2))
    tensor([1., 1.])
    """
    a = Aot(fn, fw_compiler, bw_compiler, partition_fn, decompositions, (), inference_compiler)
    return a


def aot_module(mod: Any, fw_compiler: Callable | None = None, bw_compiler: Callable | None = None,
               partition_fn: Callable | None = None, decompositions: dict | None = None, **unused: Any) -> Callable:
    """Compile a module's call with its parameters and buffers lifted to inputs (AOTAutograd's
    `aot_module`). A module is any object with a `params` attribute (a pytree of Tensors), optionally
    `buffers` (a pytree of Tensors it may update in place, e.g. running statistics), and a `forward`
    method or `__call__`. Buffers written in place are written back to the module's tensors.

    >>> class Scale:
    ...     def __init__(self):
    ...         self.params = {"w": aotjax.ones(2)}
    ...         self.buffers = {"calls": aotjax.zeros(())}
    ...     def forward(self, x):
    ...         self.buffers["calls"].add_(1)
    ...         return (x * self.params["w"]).sum()
    >>> m = Scale()
    >>> f = aotjax.aot_module(m)
    >>> f(aotjax.ones(2)), m.buffers["calls"]
    (tensor(2.), tensor(1.))
    """
    forward = getattr(mod, "forward", None) or mod.__call__

    def functional_call(params, buffers, *args, **kwargs):
        saved = mod.params, getattr(mod, "buffers", None)
        mod.params = params
        if saved[1] is not None:
            mod.buffers = buffers
        try:
            return forward(*args, **kwargs)
        finally:
            mod.params = saved[0]
            if saved[1] is not None:
                mod.buffers = saved[1]

    compiled = aot_function(functional_call, fw_compiler, bw_compiler, partition_fn, decompositions)

    @functools.wraps(forward)
    def call(*args, **kwargs):
        return compiled(mod.params, getattr(mod, "buffers", None), *args, **kwargs)

    call.compiled = compiled
    return call

