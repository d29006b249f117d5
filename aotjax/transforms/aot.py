"""`aot`: AOTAutograd made of interpreters. A function's forward and backward as separate compiled
programs with a stable, documented signature, restored eager semantics at the call, and transforms
that compose both ways (`grad(aot(f))`, `aot(grad(f))`, `grad(grad(aot(f)))`).

The pipeline is a list of named passes (`aotjax.transforms.passes`: each logged, dumped with
`AOTJAX_DUMP=1`). Per input signature (the guards of `jit`), `_aot_passes`:

    functionalize      traced through functionalize: the pure program and the call boundary (`Staged`)
    decompose          primitives replaced by their `decompositions` (only when some are given)
    lower              the plain call's program, as jit's

and per set of differentiated inputs, on first differentiation, `_vjp_passes`
(`aotjax.transforms.joint`):

    linearize          jvp + partial_eval: the forward (outputs, residuals) and the linear program
    transpose          the linear program run backwards: the backward
    joint              forward then backward as one program, the cut between them recorded
    partition          forward + backward programs (`aotjax.partition`)
    lower forward/backward   fw_compiler / bw_compiler, each when its program first runs

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

import enum
import functools
from dataclasses import dataclass, replace
from operator import attrgetter
from typing import Any, Callable, Sequence

import jax

from aotjax.core.errors import UnsupportedError
from aotjax.core.eval_jaxpr import eval_jaxpr
from aotjax.core.interpreter import Tracer
from aotjax.core.ir import ClosedJaxpr
from aotjax.core.source_info import SourceInfo, where
from aotjax.interpreters.trace import trace_flat
from aotjax.lowering.to_jax import avals_to_structs, flat_function
from aotjax.ops.calls import AotEntry, AotVJP, Program, aot_call_p
from aotjax.partition import JointInfo, Partitioned, default_partition
from aotjax.runtime import boundary, guards
from aotjax.runtime.boundary import OutKind, Slot
from aotjax.transforms.functionalize import Staged, stage_functionalized
from aotjax.transforms.jit import Jitted, _Entry, _lowered_program
from aotjax.transforms.joint import compose_joint, linearize_program, transpose_program
from aotjax.transforms.passes import run_pass


# -- compilers -----------------------------------------------------------------------------------------
def xla_compiler(jaxpr: ClosedJaxpr, example_avals: Sequence) -> Callable:
    """The default compiler: lower `jaxpr` through XLA (`jax.jit(...).lower(...).compile()`); inputs
    listed in `jaxpr.meta.donate` are donated. Returns a callable on flat arrays."""
    return jax.jit(flat_function(jaxpr), donate_argnums=jaxpr.meta.donate).lower(
        *avals_to_structs(example_avals)).compile()


def _as_pass(name: str, compiler: Callable) -> Callable:
    """`compiler`, each call of it run as the pass `name` (a program is compiled when it first runs)."""
    return functools.partial(_lower, name, compiler)


def _lower(name: str, compiler: Callable, jaxpr: ClosedJaxpr, example_avals: Sequence) -> Callable:
    return run_pass(name, compiler, jaxpr, example_avals, show=lambda _: jaxpr)


def apply_decompositions(jaxpr: ClosedJaxpr, decompositions: dict) -> ClosedJaxpr:
    """`jaxpr` traced again with each primitive in `decompositions` (keys: primitives or their names)
    replaced by its function `(*operands, **params) -> result`, written with aotjax ops."""
    table = {getattr(k, "name", k): v for k, v in decompositions.items()}
    out = trace_flat(lambda *args: eval_jaxpr(jaxpr, *args, overrides=table), list(jaxpr.in_avals))
    out.meta = jaxpr.meta
    return out


# -- the pipeline ------------------------------------------------------------------------------------------
def _aot_passes(aot: "Aot", args, kwargs) -> "_AotEntry":
    """aot's pipeline for one input signature: what a plain call runs. Differentiation adds
    `_vjp_passes`; each program is compiled (`aot: lower ...`) when it first runs."""
    staged = run_pass("aot: functionalize", stage_functionalized, aot.fun, args, kwargs,  # trace, functionalize
                      aot.static_argnums, "aot", show=attrgetter("jaxpr")).release()
    _check_no_traced_consts(staged)
    pure = staged.jaxpr.with_meta(donate=tuple(staged.meta.mutated))  # written inputs are donated
    if aot.decompositions:
        pure = run_pass("aot: decompose", apply_decompositions, pure, aot.decompositions)
    plain = run_pass("aot: lower", _Entry, staged, True, show=_lowered_program)  # jax.jit, for eager calls
    return _AotEntry(staged, pure, plain, aot)


def _vjp_passes(entry: "_AotEntry", wanted: tuple | None) -> "_AotVJP":
    """aot's pipeline under differentiation, once per signature and set of differentiated inputs."""
    aot, name = entry.aot, entry.pure.meta.name or "fn"
    lin = run_pass("aot: linearize", linearize_program, entry.pure, wanted,  # jvp + partial_eval: forward, linear
                   show=lambda lin: lin.programs())
    backward = run_pass("aot: transpose", transpose_program, lin)  # the linear program run backwards
    joint = run_pass("aot: joint", compose_joint, lin, backward, f"{name}_joint",  # forward then backward, cut kept
                     show=attrgetter("jaxpr"))
    parts = run_pass("aot: partition", _partition, aot.partition, joint, name,  # what the forward saves
                     show=lambda p: {"forward": p.forward, "backward": p.backward})
    forward = Program(parts.forward, _as_pass("aot: lower forward", aot.fw_compiler), "forward")  # compiled lazily
    backward = Program(parts.backward, _as_pass("aot: lower backward", aot.bw_compiler), "backward")
    return _AotVJP(joint, parts, lin.diff_in, lin.diff_out, forward, backward, list(entry.pure.out_avals))


def _partition(partition: Callable[[JointInfo], Partitioned], joint: JointInfo, name: str) -> Partitioned:
    """The partitioner's forward and backward, named after the function."""
    parts = partition(joint)
    return replace(parts, forward=parts.forward.with_meta(name=f"{name}_forward"),
                   backward=parts.backward.with_meta(name=f"{name}_backward"))


def _check_no_traced_consts(staged: Staged) -> None:
    if any(isinstance(c, Tracer) for c in staged.jaxpr.consts):
        raise UnsupportedError(
            f"aot: the function reads a traced value it closes over{where()}; aot compiles it on its own, so "
            f"pass that value as an argument instead")


# -- per-signature state ---------------------------------------------------------------------------------
class _AotEntry(AotEntry):
    """An aot function's state for one input signature: the staged program and boundary, the pure
    program (decomposed, written inputs donated), the plain call's program and the inference program;
    per set of differentiated inputs, the joint, the partition and the forward and backward programs."""

    def __init__(self, staged: Staged, pure: ClosedJaxpr, plain: _Entry, aot: "Aot"):
        self.staged, self.pure, self.plain, self.aot = staged, pure, plain, aot
        compiler = aot.inference_compiler or aot.fw_compiler
        self.inference = Program(pure, _as_pass("aot: lower inference", compiler), "inference")
        if aot.inference_compiler is not None or aot.fw_compiler is not xla_compiler:
            self.plain.fn = self.inference  # NOTE: a user compiler runs plain calls too
        self._vjps: dict = {}

    def vjp(self, wanted: tuple | None = None) -> "_AotVJP":
        """The forward and backward programs differentiating the inputs marked in `wanted` (default:
        every floating-point input): cached per pattern, as `grad(f, argnums=...)` needs only some."""
        key = tuple(wanted) if wanted is not None else None
        v = self._vjps.get(key)
        if v is None:
            v = self._vjps[key] = _vjp_passes(self, key)
        return v

    def __repr__(self) -> str:
        return f"<aot {self.pure.meta.name}>"


@dataclass(eq=False, repr=False)  # NOTE: a primitive's param: hashed, by identity
class _AotVJP(AotVJP):
    """The joint, the partition and the forward and backward programs of an aot function for one
    signature and one set of differentiated inputs: what `aot_call`'s jvp and `aot_lin`'s transpose
    run (see `aotjax.ops.calls`)."""

    joint: JointInfo
    partitioned: Partitioned
    diff_in: list[bool]
    diff_out: list[bool]
    forward: Program
    backward: Program
    out_avals: list

    @property
    def saved_inputs(self) -> list[int | None]:
        return self.partitioned.saved_inputs

    @property
    def n_residuals(self) -> int:
        return len(self.partitioned.saved_inputs)

    def __repr__(self) -> str:
        return f"<{self.forward.jaxpr.meta.name} and {self.backward.jaxpr.meta.name}>"


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
        return _aot_passes(self, args, kwargs)

    def _entry(self, args, kwargs, key) -> _AotEntry:
        entry = self._cache.get(key)
        if entry is None:
            entry = self._cache[key] = self._stage(args, kwargs)
        return entry

    def __call__(self, *args, **kwargs):
        leaves, in_tree, statics = self._split(args, kwargs)
        statics = guards.hashable_statics(statics) if statics else ()
        signature = guards.call_key(leaves)
        if signature is not None and not guards.under_transform():  # eager: the inference program, boundary restored
            entry = self._entry(args, kwargs, (in_tree, statics, signature))
            return entry.plain.run(leaves, entry.plain.fn)
        entry = self._entry(args, kwargs, (in_tree, statics, guards.abstract_key(leaves)))
        meta = entry.staged.meta
        bases = [_operand(b, g) for b, g in zip(boundary.entry_bases(meta.groups, leaves), meta.groups, strict=True)]
        outs = aot_call_p.bind(*bases, entry=entry)
        by_slot = dict(zip(meta.layout, outs, strict=True))
        return boundary.apply(meta, leaves, [by_slot[(Slot.MUTATED, g)] for g in meta.mutated],
                              [by_slot[(Slot.BASE, k)] for k in range(meta.n_bases)])

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
        return self._vjp.forward.jaxpr

    @property
    def backward(self) -> ClosedJaxpr:
        return self._vjp.backward.jaxpr

    @property
    def meta(self) -> boundary.BoundaryMeta:
        return self._entry.staged.meta

    @functools.cached_property
    def _signature(self) -> "_Signature":
        return _describe(self._entry, self._vjp)

    @property
    def residuals(self) -> list[Residual]:
        return self._signature.residuals

    @property
    def residual_bytes(self) -> int:
        return sum(r.nbytes for r in self.residuals)

    @property
    def forward_inputs(self) -> list[str]:
        return [str(d) for d in self._signature.primals]

    @property
    def joint_inputs(self) -> list[str]:
        """Descriptors of the joint program's inputs: the primals, then the output cotangents."""
        return [str(d) for d in self._signature.primals + self._signature.output_cotangents]

    @property
    def joint_outputs(self) -> list[str]:
        """Descriptors of the joint program's outputs: the forward's outputs, then the input cotangents."""
        return [str(d) for d in self._signature.outputs + self._signature.input_cotangents]

    @property
    def saved_inputs(self) -> list[int | None]:
        """Per residual: the index of the primal input it is (the caller passes that input to the
        backward itself), or None (the forward returns it)."""
        return list(self._vjp.saved_inputs)

    def residuals_from(self, primals: Sequence, forward_outputs: Sequence) -> list:
        """The backward's residual inputs, from the forward's inputs and outputs (a helper for running
        the two programs by hand)."""
        returned = iter(forward_outputs[len(self._signature.outputs):])
        return [primals[i] if i is not None else next(returned) for i in self._vjp.saved_inputs]

    @property
    def forward_outputs(self) -> list[str]:
        """The user's outputs, updated inputs and intermediate bases, then the residuals that are not
        primal inputs (those the caller passes to the backward itself)."""
        sig = self._signature
        returned = [d for d, i in zip(sig.residual_descriptors, self._vjp.saved_inputs, strict=True) if i is None]
        return [str(d) for d in sig.outputs + returned]

    @property
    def backward_inputs(self) -> list[str]:
        return [str(d) for d in self._signature.residual_descriptors + self._signature.output_cotangents]

    @property
    def backward_outputs(self) -> list[str]:
        return [str(d) for d in self._signature.input_cotangents]

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


class Role(enum.Enum):
    """The role of an input or output of aot's programs (see `Descriptor`)."""

    PRIMAL = "primal"  # a forward input: an input group's base
    OUTPUT = "out"  # a user output the forward returns
    UPDATED = "updated"  # the new value of a written input
    BASE = "base"  # an intermediate base that outputs view
    RESIDUAL = "residual"  # a value the forward saves for the backward
    COTANGENT = "cotangent"  # a backward input (one per output) or output (one per primal)


@dataclass(frozen=True)
class Descriptor:
    """One input or output of aot's programs: its `role`; `path`, the pytree path of the argument
    (`params['w']`; `a / b` for arguments sharing a storage) or output (`out[0]['a']`) it stands for;
    `index`, of an intermediate base or a residual; for a residual, the `primitive` and `source_info`
    (the user's line) that computed it, or `of`, the primal it is; for a cotangent, `of`, what it is the
    cotangent of. `str` gives the printed form: `primal[params['w']]`, `residual[3] sin at model.py:12
    (f)`, `cotangent[out[0]]`."""

    role: Role
    path: str = ""
    index: int | None = None
    primitive: str | None = None
    source_info: SourceInfo | None = None
    of: "Descriptor | None" = None

    def cotangent(self) -> "Descriptor":
        return Descriptor(Role.COTANGENT, self.path, of=self)

    @property
    def computed_by(self) -> str:
        """A residual's origin in words: `argument x`, or `sin at model.py:12 (f)`."""
        if self.of is not None:
            return f"argument {self.of.path}"
        at = f" at {self.source_info}" if self.source_info is not None else ""
        return f"{self.primitive or 'constant'}{at}"

    def __str__(self) -> str:
        if self.role is Role.OUTPUT:
            return self.path
        if self.role is Role.BASE:
            return f"base[{self.index}]"
        if self.role is Role.RESIDUAL:
            return f"residual[{self.index}] {self.of if self.of is not None else self.computed_by}"
        if self.role is Role.COTANGENT:
            return f"cotangent[{self.path if self.of.role is Role.PRIMAL else self.of}]"
        return f"{self.role.value}[{self.path}]"


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
class _Signature:
    """The descriptors of aot's programs for one signature: the primals (forward inputs), the forward's
    outputs before the residuals, the residuals (with their `Residual` records), the cotangents of the
    differentiated outputs (backward inputs) and of the differentiated primals (backward outputs)."""

    primals: list[Descriptor]
    outputs: list[Descriptor]
    residual_descriptors: list[Descriptor]
    residuals: list[Residual]
    output_cotangents: list[Descriptor]
    input_cotangents: list[Descriptor]


def _describe(entry: _AotEntry, vjp: _AotVJP) -> _Signature:
    meta = entry.staged.meta
    primals = [Descriptor(Role.PRIMAL, meta.group_name(gi)) for gi in range(len(meta.groups))]
    outputs = [_output_descriptor(meta, slot, k) for slot, k in meta.layout]
    producers = {id(v): e for e in vjp.joint.jaxpr.eqns for v in e.outputs}
    primal_index = {id(v): i for i, v in enumerate(vjp.joint.primals)}
    descriptors = []
    for r, v in enumerate(vjp.partitioned.saved):
        if id(v) in primal_index:
            descriptors.append(Descriptor(Role.RESIDUAL, index=r, of=primals[primal_index[id(v)]]))
        else:
            eqn = producers.get(id(v))
            descriptors.append(Descriptor(Role.RESIDUAL, index=r, primitive=eqn and eqn.primitive.name,
                                          source_info=eqn and eqn.source_info))
    residuals = [Residual(str(d), v.aval, v.aval.nbytes, d.computed_by)
                 for d, v in zip(descriptors, vjp.partitioned.saved, strict=True)]
    return _Signature(primals, outputs, descriptors, residuals,
                      [d.cotangent() for d, diff in zip(outputs, vjp.diff_out, strict=True) if diff],
                      [d.cotangent() for d, diff in zip(primals, vjp.diff_in, strict=True) if diff])


def _output_descriptor(meta: boundary.BoundaryMeta, slot: Slot, k: int) -> Descriptor:
    """The forward output at layout slot `(slot, k)`: a written input's new value, a user output (an
    intermediate base no output views), or an intermediate base."""
    if slot is Slot.MUTATED:
        return Descriptor(Role.UPDATED, meta.group_name(k))
    for i, spec in enumerate(meta.outputs):
        if spec.kind is OutKind.BASE and spec.index == k and not spec.chain:
            return Descriptor(Role.OUTPUT, meta.output_names[i] if i < len(meta.output_names) else f"out[{i}]")
    return Descriptor(Role.BASE, index=k)


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

