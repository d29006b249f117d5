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

Differentiated on eager arguments (`grad(aot(f))(x)`, `value_and_grad`, `vjp`), an aot function runs its cached
forward and backward executables directly, with no per-call tracing (`aotjax.transforms.aot_grad`); under another
transform, or where that path does not apply, `aot_call`'s rules run them.

**The signature.** Forward inputs: one primal per input group (the arguments' leaves in
`jax.tree_util` flatten order; arguments sharing a storage share one synthetic base). Forward outputs:
the user's new output values, then the written inputs' new values, then the intermediate bases
that outputs view (jit's layout), then the residuals that are not primal inputs. Backward inputs:
the residuals (primal inputs among them, passed by the caller as they are: never copied through the
forward; `saved_inputs` says which), then one cotangent per floating-point forward output (before
the residuals), in order. Backward outputs: one cotangent per differentiated floating-point forward
input, in order. Programs are specialized on which inputs are differentiated (`grad(f,
argnums=0)` computes no other cotangent). Every input and output has a descriptor.

**The user's outputs.** Outputs that alias share one forward output: `return b, b` gives one forward
output (`out[0]`), and outputs that are all views of one new value give only its base (`base[0]`).
`AotLowered.user_outputs` is the table from each output leaf of the function (pytree path) to where it
comes from, printed by `print(lowered)` as the section `outputs of f`; for `b = a @ w; c = a + w;
a.mul_(2); return b, b, c.t()[1], a, w[0]` (forward outputs `out[0]`, `updated[a]`, `base[1]`):

    out[0] = forward output 0 (same value as out[1])
    out[1] = forward output 0 (same value as out[0])
    out[2] = view of base[1] (forward output 2): permute(perm=(1, 0)) -> select(dim=0, index=1)
    out[3] = input a, written in place (new value: forward output 1)
    out[4] = view of input w: select(dim=0, index=0)

`lowered.num_forward_outputs` is how many forward outputs come before the residuals.

**The compilers' contract.** `compiler(closed_jaxpr, example_avals)` returns a callable taking the
program's flat input arrays and returning a list or tuple of arrays, one per program output, with the
shapes and dtypes of `closed_jaxpr.out_avals`. aot checks it: a compiler returning something not
callable, or raising, is a `CompilerError` when the program is compiled; the outputs of a user compiler's
callable are checked on every call (count, shapes, dtypes), those of `xla_compiler`'s executables are not
(jax fixed them when it compiled the same abstract values). The error names the compiler (the aot option
and the function's name), the program (`forward`, `backward` or `inference`, of which function) and the
mismatch, per output with its descriptor.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Callable, Sequence

import jax

from aotjax.core.checks import emit_checks
from aotjax.core.errors import UnsupportedError
from aotjax.core.eval_jaxpr import eval_jaxpr
from aotjax.core.interpreter import Tracer
from aotjax.core.ir import ClosedJaxpr
from aotjax.core.source_info import where
from aotjax.distributed.program_check import check_same_program
from aotjax.interpreters.partial_eval import partitioning_loop_bodies
from aotjax.interpreters.trace import trace_flat
from aotjax.lowering.to_jax import avals_to_structs, flat_function, xla_compiler
from aotjax.ops.calls.compiled import AotEntry, AotVJP, Program, aot_call_p, run_recorded
from aotjax.partition import JointInfo, Partitioned, default_partition
from aotjax.partition.loops import repartition_loop_bodies
from aotjax.runtime import boundary, guards
from aotjax.transforms.aot_grad import differentiate_eagerly
from aotjax.transforms.aot_shardings import aot_shardings, placed_programs, plain_shardings
from aotjax.transforms.aot_signature import (  # noqa: F401
    Descriptor,
    Residual,
    Role,
    UserOutput,
    _describe,
    _output_descriptor,
    _Signature,
    _user_outputs,
)
from aotjax.transforms.autodiff import _gc_paused
from aotjax.transforms.export import AotExport, abstract_arguments, export_program, symbolic_errors
from aotjax.transforms.functionalize import Staged, finish_call, stage_functionalized
from aotjax.transforms.jit import (
    Jitted,
    _Entry,
    _lowered_program,
    bind_staged,
    check_staged_outputs,
    recorded_call,
    records_call,
)
from aotjax.transforms.joint import compose_joint, linearize_program, transpose_program
from aotjax.transforms.make_jaxpr import split_static
from aotjax.transforms.passes import as_pass, run_pass
from aotjax.transforms.split_backward import BackwardSplit, split_backward

if TYPE_CHECKING:
    from aotjax.transforms.export import AotExport


# -- compilers -----------------------------------------------------------------------------------------
def _program(jaxpr: ClosedJaxpr, name: str, function: str, option: str, compiler: Callable,
             output_names: Callable[[], list[str]]) -> Program:
    """The `name` program (`forward`, `backward`, `inference`) of `function`, compiled on first use by
    `compiler` (the aot option `option`) as the pass `aot: lower <name>`. A user compiler's callables
    are checked on every call against the program's outputs (`Program`); XLA's executables are not:
    jax fixed their output types when it compiled them from the same abstract values."""
    return Program(jaxpr, as_pass(f"aot: lower {name}", compiler), name, function=function,
                   compiler_name=_compiler_name(option, compiler), check_calls=compiler is not xla_compiler,
                   output_names=output_names)


def _compiler_name(option: str, compiler: Callable) -> str:
    """A compiler, for an error: "fw_compiler `my_compiler`", or "the default compiler (xla_compiler)"."""
    if compiler is xla_compiler:
        return "the default compiler (xla_compiler)"
    label = getattr(compiler, "__qualname__", None) or getattr(compiler, "__name__", None) or repr(compiler)
    return f"{option} `{label}`"


def apply_decompositions(jaxpr: ClosedJaxpr, decompositions: dict) -> ClosedJaxpr:
    """`jaxpr` traced again with each primitive in `decompositions` (keys: primitives or their names)
    replaced by its function `(*operands, **params) -> result`, written with aotjax ops."""
    table = {getattr(k, "name", k): v for k, v in decompositions.items()}
    out = trace_flat(lambda *args: eval_jaxpr(jaxpr, *args, overrides=table), list(jaxpr.in_avals))
    out.meta = jaxpr.meta
    return out


# -- the pipeline ------------------------------------------------------------------------------------------
@_gc_paused  # NOTE: a trace's objects live until it ends: see `_gc_paused`
def _aot_passes(aot: "Aot", args, kwargs) -> "_AotEntry":
    """aot's pipeline for one input signature: what a plain call runs. Differentiation adds
    `_vjp_passes`; each program is compiled (`aot: lower ...`) when it first runs."""
    checks = aot.checks_enabled
    with emit_checks(checks):
        staged = run_pass("aot: functionalize", stage_functionalized, aot.fun, args, kwargs,  # trace, functionalize
                          aot.static_argnums, "aot", show=attrgetter("jaxpr")).release()
    _check_no_traced_consts(staged)
    check_same_program("aot", aot.fun, staged.jaxpr, (args, kwargs, staged.implicit))  # many processes: one program
    pure = staged.jaxpr.with_meta(donate=tuple(staged.meta.mutated))  # written inputs are donated
    if aot.decompositions:
        pure = run_pass("aot: decompose", apply_decompositions, pure, aot.decompositions)
    shardings = aot_shardings(staged, aot._dynamic(args, kwargs), aot.in_shardings, aot.out_shardings)
    plain = run_pass("aot: lower", _Entry, staged, True, checks, plain_shardings(shardings),  # jax.jit, for eager calls
                     show=_lowered_program)
    return _AotEntry(staged, pure, plain, aot, shardings)


@_gc_paused
def _vjp_passes(entry: "_AotEntry", wanted: tuple | None) -> "_AotVJP":
    """aot's pipeline under differentiation, once per signature and set of differentiated inputs."""
    aot, name = entry.aot, entry.pure.meta.name or "fn"
    # NOTE: the partitioner also splits each loop body (what one iteration saves); the default partitioner saves what
    # the backward reads, which is what a body saves anyway.
    repartition = None if aot.partition is default_partition else repartition_loop_bodies(aot.partition)
    with partitioning_loop_bodies(repartition):
        lin = run_pass("aot: linearize", linearize_program, entry.pure, wanted,  # jvp + partial_eval: forward, linear
                       show=lambda lin: lin.programs())
    backward = run_pass("aot: transpose", transpose_program, lin)  # the linear program run backwards
    joint = run_pass("aot: joint", compose_joint, lin, backward, f"{name}_joint",  # forward then backward, cut kept
                     show=attrgetter("jaxpr"))
    parts = run_pass("aot: partition", _partition, aot.partition, joint, name,  # what the forward saves
                     show=lambda p: {"forward": p.forward, "backward": p.backward})
    bw_option = "fw_compiler" if aot.bw_compiler is aot.fw_compiler else "bw_compiler"
    # NOTE: compiled lazily; their output names are read on an error only, once `vjp` below exists
    forward = _program(parts.forward, "forward", name, "fw_compiler", aot.fw_compiler,
                       lambda: [str(d) for d in _describe(entry, vjp).forward_outputs])
    backward = _program(parts.backward, "backward", name, bw_option, aot.bw_compiler,
                        lambda: [str(d) for d in _describe(entry, vjp).input_cotangents])
    vjp = _AotVJP(joint, parts, lin.diff_in, lin.diff_out, forward, backward, list(entry.pure.out_avals))
    placed_programs(entry, vjp)  # compiled for their shardings (aot_shardings.py)
    return vjp


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

    def __init__(self, staged: Staged, pure: ClosedJaxpr, plain: _Entry, aot: "Aot", shardings: tuple | None = None):
        self.staged, self.pure, self.plain, self.aot = staged, pure, plain, aot
        self.shardings = shardings  # the requested (input, output) shardings of the pure program
        option = "inference_compiler" if aot.inference_compiler is not None else "fw_compiler"
        meta = staged.meta
        self.inference = _program(pure, "inference", pure.meta.name or "fn", option,
                                  aot.inference_compiler or aot.fw_compiler,
                                  lambda: [str(_output_descriptor(meta, slot, k)) for slot, k in meta.layout])
        if aot.inference_compiler is not None or aot.fw_compiler is not xla_compiler:
            self.plain.fn, self.plain.checks = self.inference, None  # NOTE: a user compiler runs plain calls too
        placed_programs(self)
        self._vjps: dict = {}
        self._eager_plans: dict = {}  # (argnums, has_aux) -> the plan of `aot_grad`, or None where it does not apply

    def vjp(self, wanted: tuple | None = None) -> "_AotVJP":
        """The forward and backward programs differentiating the inputs marked in `wanted` (default:
        every floating-point argument; captured tensors, the implicit inputs after the arguments, are not
        differentiated, as in JAX): cached per pattern, as `grad(f, argnums=...)` needs only some."""
        if wanted is None and self.staged.implicit:
            n = len(self.staged.meta.groups) - len(self.staged.implicit)
            wanted = (True,) * n + (False,) * len(self.staged.implicit)
        key = tuple(wanted) if wanted is not None else None
        v = self._vjps.get(key)
        if v is None:
            v = self._vjps.setdefault(key, _vjp_passes(self, key))  # NOTE: as `Jitted._publish`, for threads
        return v

    def __repr__(self) -> str:
        return f"<aot {self.pure.meta.name}>"


@dataclass(eq=False, repr=False)  # NOTE: a primitive's param: hashed, by identity
class _AotVJP(AotVJP):
    """The joint, the partition and the forward and backward programs of an aot function for one
    signature and one set of differentiated inputs: what `aot_call`'s jvp and `aot_lin`'s transpose
    run (see `aotjax.ops.calls.compiled`)."""

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
    output_constants = (str,)  # NOTE: AOTAutograd (and torch.compile) return a string output as the trace saw it

    def __init__(self, fun, fw_compiler, bw_compiler, partition, decompositions, static_argnums,
                 inference_compiler=None, checks=None, in_shardings=None, out_shardings=None):
        super().__init__(fun, static_argnums, donate=True, checks=checks, in_shardings=in_shardings,
                         out_shardings=out_shardings)
        self.fw_compiler = fw_compiler or xla_compiler
        self.bw_compiler = bw_compiler or self.fw_compiler
        self.inference_compiler = inference_compiler
        self.partition = partition or default_partition
        self.decompositions = dict(decompositions or {})
        self._eager_last: dict = {}  # (argnums, has_aux) -> the last eagerly differentiated call (`aot_grad`)

    def clear_cache(self) -> None:
        super().clear_cache()
        self._eager_last.clear()

    def _stage(self, args, kwargs) -> _AotEntry:
        self.trace_count += 1
        return _aot_passes(self, args, kwargs)

    def __call__(self, *args, **kwargs):
        leaves, in_tree, statics = self._split(args, kwargs)
        statics = guards.hashable_statics(statics) if statics else ()
        signature = guards.call_key(leaves)
        if signature is not None and not guards.under_transform():  # eager: the inference program, boundary restored
            key = (in_tree, statics, signature, self.checks_enabled, guards.modes())
            entry, leaves = self._live_entry(args, kwargs, key, leaves)
            if records_call(entry.staged, leaves):  # NOTE: imperative autograd: the forward runs, residuals kept
                return finish_call(entry.staged, recorded_call(entry.staged, leaves,
                                                               functools.partial(run_recorded, entry)))
            return finish_call(entry.staged, entry.plain.run(leaves, entry.plain.fn))
        key = (in_tree, statics, guards.abstract_key(leaves), self.checks_enabled, guards.modes())
        entry, leaves = self._live_entry(args, kwargs, key, leaves)
        return bind_staged(entry.staged, leaves, functools.partial(aot_call_p.bind, entry=entry))

    def _differentiate_eagerly(self, args, kwargs, argnums, has_aux):
        """`grad`/`value_and_grad`/`vjp` of this function on eager arguments, on its cached programs with no
        tracing; None to take the transform's general path (see `aotjax.transforms.aot_grad`)."""
        return differentiate_eagerly(self, args, kwargs, argnums, has_aux)

    def lower(self, *args, **kwargs) -> "AotLowered":
        """Trace, functionalize, build the joint and partition it for these arguments; nothing runs and
        nothing is compiled. See `AotLowered`. An argument may be a `jax.ShapeDtypeStruct`, its shape symbolic
        (`jax.export.symbolic_shape`), for a batch-polymorphic `export()`."""
        args, kwargs = abstract_arguments(args, kwargs)
        with symbolic_errors("aot"):
            entry = self._stage(args, kwargs)
        check_staged_outputs(self.what, self.fun, entry.staged, self.output_constants)
        lowered = AotLowered(entry)
        static = set(split_static(args, self.static_argnums, kwargs, self.what, self.fun)[1]) if self.static_argnums \
            else set()
        lowered._static_positions = static  # NOTE: what `split_backward` maps argument positions to input groups with
        lowered._arg_leaves = [0 if i in static else len(jax.tree_util.tree_leaves(a)) for i, a in enumerate(args)]
        return lowered


def _n(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def aot(fun: Callable, fw_compiler: Callable | None = None, bw_compiler: Callable | None = None,
        partition: Callable | None = None, decompositions: dict | None = None,
        static_argnums: int | Sequence[int] = (), checks: bool | None = None, *, in_shardings=None,
        out_shardings=None) -> Aot:
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
    `checks` checks indices as the programs run, as `jit`'s does (the default compiler lowers them).

    `in_shardings`/`out_shardings` are `jit`'s (`jax.jit`'s: a sharding, None, or a pytree prefix of the arguments /
    outputs), for the plain call and the forward; the backward takes the residuals as the compiled forward lays
    them out and gives each input's cotangent that input's sharding; a cotangent laid out otherwise is moved to the
    layout the backward was compiled for. Without them the programs are compiled for the shardings of the first
    arguments they get (`aotjax.transforms.aot_shardings`).

    >>> f = aotjax.aot(lambda x, w: (x @ w).tanh().sum())
    >>> x, w = aotjax.ones(2, 3), aotjax.ones(3, 2) * 0.1
    >>> aotjax.grad(f, argnums=1)(x, w)
    tensor([[1.83027..., 1.83027...],
            [1.83027..., 1.83027...],
            [1.83027..., 1.83027...]])
    >>> lowered = f.lower(x, w)
    >>> lowered.forward_inputs, lowered.backward_outputs
    (['primal[x]', 'primal[w]'], ['cotangent[x]', 'cotangent[w]'])
    """
    return Aot(fun, fw_compiler, bw_compiler, partition, decompositions, static_argnums, checks=checks,
               in_shardings=in_shardings, out_shardings=out_shardings)


# -- stages -------------------------------------------------------------------------------------------------
class AotLowered:
    """An aot function lowered for one signature: `.jaxpr` (functionalized), `.joint`, `.forward`,
    `.backward` (printable ClosedJaxprs), `.residuals` (descriptor, aval, bytes, why saved), `.meta`
    (the boundary), the descriptors of every program input and output, `.user_outputs` (where each of
    the function's outputs comes from), `.num_forward_outputs`, `.as_text()` (StableHLO of the forward
    and backward) and `.compile()`. `print(lowered)` shows the programs, their signatures and the
    `outputs of f` table."""

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

    def export(self, platforms: tuple[str, ...] | None = None) -> "AotExport":
        """The forward and the backward as two `aotjax.Exported` pure programs with the labelled signature
        (`forward.input_names`, `forward.output_names`: the outputs, then the residuals by descriptor;
        `backward.input_names`: the residuals, then the cotangents), each serializable on its own.

        >>> f = lambda x: (x.sin() ** 2).sum()
        >>> pair = aotjax.aot(f).lower(aotjax.ones(3)).export()
        >>> x = aotjax.ones(3)
        >>> outs = pair.forward.call(x)
        >>> grads = pair.backward.call(*pair.residuals_from([x], outs), aotjax.tensor(1.0))
        >>> bool(((grads[0] - aotjax.grad(f)(aotjax.ones(3))).abs() < 1e-6).all())
        True
        """
        name = self._entry.staged.jaxpr.meta.name or "fn"
        forward = export_program(self.forward, f"{name}_forward", self.forward_inputs, self.forward_outputs,
                                 platforms)
        backward = export_program(self.backward, f"{name}_backward", self.backward_inputs, self.backward_outputs,
                                  platforms)
        return AotExport(forward, backward, self.num_forward_outputs, self.saved_inputs)

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
    def num_forward_outputs(self) -> int:
        """How many forward outputs come before the residuals: the user's new values, the written inputs' new
        values and the intermediate bases that outputs view (`forward_outputs[:num_forward_outputs]`). The
        backward takes one cotangent per floating-point one."""
        return len(self.meta.layout)

    @functools.cached_property
    def user_outputs(self) -> list[UserOutput]:
        """Per output leaf of the user's function (pytree order), where it comes from: a forward output, a view
        of one (which base, which view steps), an input (written in place or not), a view of an input, or a
        constant. Several user outputs may come from one forward output; `str` of each is a line of
        `print(lowered)`'s `outputs of f` section."""
        return _user_outputs(self.meta)

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
        return [str(d) for d in self._signature.forward_outputs]

    @property
    def backward_inputs(self) -> list[str]:
        return [str(d) for d in self._signature.residual_descriptors + self._signature.output_cotangents]

    @property
    def backward_outputs(self) -> list[str]:
        return [str(d) for d in self._signature.input_cotangents]

    def as_text(self, debug_info: bool = False) -> str:
        """The StableHLO of the forward and of the backward program; with `debug_info`, each op's location: the
        user's line of its equation (`mul@train.py:12 (loss)`), in the backward too."""
        def text(j):
            return jax.jit(flat_function(j)).lower(*avals_to_structs(j.in_avals)).as_text(debug_info=debug_info)

        return f"// forward\n{text(self.forward)}\n// backward\n{text(self.backward)}"

    def split_backward(self, weights) -> "BackwardSplit":
        """The backward split for pipeline schedules: `forward`, `backward_inputs` (the cotangents of the inputs that
        are not weights, computing no weight gradient) and `backward_weights` (the weights' cotangents), each a program
        with named inputs and outputs; `weights`: the positions of the weight arguments. See
        `aotjax.transforms.split_backward`.

        >>> f = lambda x, w: (x @ w).tanh().sum()
        >>> split = aotjax.aot(f).lower(aotjax.ones(2, 3), aotjax.ones(3, 4)).split_backward(weights=1)
        >>> outs, (dx,), (dw,) = split.run(aotjax.ones(2, 3), aotjax.ones(3, 4))
        >>> dw.shape, split.backward_weights.output_names
        ((3, 4), ['cotangent[w]'])
        """
        return split_backward(self, weights)

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
                          f"outputs of {self._name}:", *(f"  {row}" for row in self.user_outputs),
                          "backward:", self.backward.pretty(source_info=True),
                          "  inputs:", sig(self.backward_inputs, self.backward.in_avals),
                          "  outputs:", sig(self.backward_outputs, self.backward.out_avals)])

    @property
    def _name(self) -> str:
        return self.jaxpr.meta.name or "fn"

    def __repr__(self) -> str:
        ins = ", ".join(a.str_short() for a in self.jaxpr.in_avals)
        returned = len(self.forward.out_avals) - self.num_forward_outputs
        return (f"AotLowered(aot({self._name}) ({ins}) -> {_n(len(self.user_outputs), 'output')}; forward "
                f"{_n(len(self.forward.eqns), 'equation')}, {_n(self.num_forward_outputs, 'output')} + "
                f"{_n(returned, 'residual')}; backward {_n(len(self.backward.eqns), 'equation')}; "
                f"{_n(len(self.residuals), 'residual')}, {self.residual_bytes} bytes)")

    def _repr_pretty_(self, p, cycle):  # IPython / Jupyter: the programs, their signatures, the output table
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

    @property
    def input_shardings(self) -> dict:
        """Per program, the shardings XLA compiled its inputs for (None for a user compiler's program)."""
        return {name: getattr(prog.executable, "input_shardings", None) for name, prog in self._programs()}

    @property
    def output_shardings(self) -> dict:
        """Per program, the shardings of its outputs (None for a user compiler's program)."""
        return {name: getattr(prog.executable, "output_shardings", None) for name, prog in self._programs()}

    def _programs(self):
        return (("forward", self._vjp.forward), ("backward", self._vjp.backward))

    def memory_analysis(self) -> dict:
        return self._per_program("memory_analysis")


# -- AOTAutograd's names, for porting --------------------------------------------------------------------------
def aot_function(fn: Callable, fw_compiler: Callable | None = None, bw_compiler: Callable | None = None,
                 partition_fn: Callable | None = None, decompositions: dict | None = None,
                 inference_compiler: Callable | None = None, *, in_shardings=None, out_shardings=None,
                 **unused: Any) -> Aot:
    """`aot` with AOTAutograd's argument names (`partition_fn`, `inference_compiler`); other
    AOTAutograd options (`num_params_buffers`, `keep_inference_input_mutations`, `dynamic`, ...) are
    accepted and have no effect: aotjax always keeps input mutations and specializes on shapes.

    >>> f = aotjax.aot_function(lambda x: x.sin().sum(), fw_compiler=lambda j, avals: aotjax.to_jax(j))
    >>> aotjax.grad(f)(aotjax.zeros(2))
    tensor([1., 1.])
    """
    a = Aot(fn, fw_compiler, bw_compiler, partition_fn, decompositions, (), inference_compiler,
            in_shardings=in_shardings, out_shardings=out_shardings)
    return a


def aot_module(mod: Any, fw_compiler: Callable | None = None, bw_compiler: Callable | None = None,
               partition_fn: Callable | None = None, decompositions: dict | None = None, *, in_shardings=None,
               out_shardings=None, **unused: Any) -> Callable:
    """Compile a module's call with its parameters and buffers lifted to inputs (AOTAutograd's
    `aot_module`), read at every call. The module is an `aotjax.nn.Module` (its `named_parameters()` and
    `named_buffers()`, called through `aotjax.func.functional_call`), or any object with a `params` attribute
    (a pytree of Tensors), optionally `buffers` (a pytree of Tensors it may update in place, e.g. running
    statistics), and a `forward` method or `__call__`. Buffers written in place are written back to the module's
    tensors. `in_shardings`/`out_shardings` are `aot`'s, the inputs being `(params, buffers, *args)`: e.g.
    `(replicated, replicated, batch)` places the parameters and buffers on every device and shards the batch.

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
    if hasattr(mod, "named_parameters") and hasattr(mod, "named_buffers"):
        # NOTE: aotjax.func calls modules, a layer above the transforms: imported when a module is compiled
        from aotjax.func import functional_call as call_with

        def module_call(params, buffers, *args, **kwargs):
            return call_with(mod, (params, buffers), args, kwargs)

        compiled_module = aot_function(module_call, fw_compiler, bw_compiler, partition_fn, decompositions,
                                       in_shardings=in_shardings, out_shardings=out_shardings)

        @functools.wraps(mod.forward)
        def call_module(*args, **kwargs):
            return compiled_module(dict(mod.named_parameters()), dict(mod.named_buffers()), *args, **kwargs)

        call_module.compiled = compiled_module
        return call_module

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

    compiled = aot_function(functional_call, fw_compiler, bw_compiler, partition_fn, decompositions,
                            in_shardings=in_shardings, out_shardings=out_shardings)

    @functools.wraps(forward)
    def call(*args, **kwargs):
        return compiled(mod.params, getattr(mod, "buffers", None), *args, **kwargs)

    call.compiled = compiled
    return call

