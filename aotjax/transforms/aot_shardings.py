"""Shardings on `aot`'s programs: `aot(f, in_shardings=..., out_shardings=...)`, and arguments placed over many
devices without them.

XLA's executables are compiled for the shardings of their inputs; `aot`'s default compiler gets only shapes and
dtypes, so its programs are compiled by XLA **on their first call**, for the shardings they should take
(`PlacedExecutable`):

    forward     each primal: the requested `in_shardings` entry, else the sharding of the first argument it got;
                the user's outputs: `out_shardings` (None: as XLA decides); a written input's new value: that
                input's sharding (written back, it keeps it); residuals: as XLA decides
    backward    residuals: as the compiled forward returned them (a residual that is a primal: that primal's);
                cotangents: as the forward returned their outputs; input cotangents: the primals' shardings
    inference   as the forward, for the plain program a transform's eager call runs

A later call whose inputs have other shardings gets them moved (`jax.device_put`) to the compiled ones before the
call: an incoming cotangent laid out another way (a `grad` seed on one device, say) is resharded, never an error.
"""
from __future__ import annotations

from typing import Callable, Sequence

import jax

from aotjax.core.ir import ClosedJaxpr
from aotjax.lowering.to_jax import flat_function, has_checks, xla_compiler
from aotjax.runtime.boundary import Slot
from aotjax.transforms.functionalize import Staged
from aotjax.transforms.jit import _constrained, program_shardings

__all__ = ["PlacedExecutable", "aot_shardings", "placed_programs"]


class PlacedExecutable:
    """A pure program compiled by XLA on its first call (see the module's docstring). `in_shardings(vals)` gives the
    shardings to compile for, one per input (None: the argument's own), `out_shardings(inputs)` one per output from
    the compiled inputs' shardings (None: as XLA decides). `input_shardings`/`output_shardings` are the compiled
    program's (compiling it for its requested shardings, when no call has yet)."""

    def __init__(self, jaxpr: ClosedJaxpr, in_shardings: Callable[[Sequence], list] | None = None,
                 out_shardings: Callable[[list], list] | None = None):
        self.jaxpr = jaxpr
        self._in = in_shardings or (lambda vals: [None] * len(jaxpr.in_avals))
        self._out = out_shardings or (lambda inputs: [None] * len(jaxpr.out_avals))
        self._compiled = None
        self._want: tuple = ()

    def __call__(self, *vals) -> list:
        compiled = self._compiled or self._compile(vals)
        return list(compiled(*[v if _placed(v, s) else jax.device_put(v, s) for v, s in zip(vals, self._want)]))

    def _compile(self, vals: Sequence | None):
        requested = self._in(vals)
        if vals is not None:
            requested = [s if s is not None else getattr(v, "sharding", None) for s, v in zip(requested, vals)]
        structs = [jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s)
                   for a, s in zip(self.jaxpr.in_avals, requested, strict=True)]
        fn = flat_function(self.jaxpr)
        outs = self._out(requested)
        if any(s is not None for s in outs):
            fn = _constrained(fn, outs)
        compiled = jax.jit(fn, donate_argnums=self.jaxpr.meta.donate).lower(*structs).compile()
        self._want = tuple(compiled.input_shardings[0])
        self._compiled = compiled
        return compiled

    @property
    def input_shardings(self) -> tuple:
        return tuple((self._compiled or self._compile(None)).input_shardings[0])

    @property
    def output_shardings(self) -> tuple:
        return tuple((self._compiled or self._compile(None)).output_shardings)

    @property
    def compiled(self) -> bool:
        return self._compiled is not None

    def cost_analysis(self):
        return (self._compiled or self._compile(None)).cost_analysis()

    def memory_analysis(self):
        return (self._compiled or self._compile(None)).memory_analysis()


def _placed(v, sharding) -> bool:
    """Whether `v` can be passed for an input compiled for `sharding` as it is: it is there, or it is not a `jax.Array`
    (the executable places NumPy values itself), or the input is unused (no sharding)."""
    if sharding is None or not isinstance(v, jax.Array):
        return True
    have = v.sharding
    return have == sharding or have.is_equivalent_to(sharding, v.ndim)


def aot_shardings(staged: Staged, dyn_args: tuple, in_shardings, out_shardings) -> tuple[list, list]:
    """`aot`'s `in_shardings`/`out_shardings` as its pure program's (jit's `program_shardings`: one per input group,
    one per output in `meta.layout` order), lists of None where nothing is requested. A written input's new value
    is given the input's sharding (when requested; else the one it has when the program compiles: `placed_programs`)."""
    program_in, program_out = program_shardings(staged, dyn_args, in_shardings, out_shardings) or (None, None)
    meta = staged.meta
    program_in = list(program_in or [None] * len(meta.groups))
    return program_in, _outputs_keeping(meta, list(program_out or [None] * len(meta.layout)), 0)(program_in)


def plain_shardings(shardings: tuple[list, list]) -> tuple | None:
    """`aot_shardings` as jit's `_Entry` takes them for the plain call: None where nothing is requested."""
    program_in, program_out = shardings
    if not any(s is not None for s in program_in + program_out):
        return None
    return tuple(program_in), program_out


def _outputs_keeping(meta, requested_out: list, n_returned: int) -> Callable[[list], list]:
    """Output shardings from the inputs' compiled shardings: the requested ones, a written input's new value on its
    input's sharding, `n_returned` residuals after them as XLA decides."""
    def out(inputs: list) -> list:
        shardings = list(requested_out)
        for pos, (slot, g) in enumerate(meta.layout):
            if slot is Slot.MUTATED and inputs[g] is not None:
                shardings[pos] = inputs[g]
        return shardings + [None] * n_returned

    return out


def placed_programs(entry, vjp=None) -> None:
    """Hand `entry`'s programs compiled by the default compiler (`xla_compiler`: the inference program, and `vjp`'s
    forward and backward) to `PlacedExecutable`s, for the shardings of the module's docstring. A program compiled by
    a user's compiler, or with run-time checks, is left as it is."""
    requested_in, requested_out = entry.shardings
    meta = entry.staged.meta
    if vjp is None:
        program = entry.inference
        if _default(program):
            placed = PlacedExecutable(program.jaxpr, lambda vals: list(requested_in),
                                      _outputs_keeping(meta, requested_out, 0))
            program.compiler = _as_compiler(program.compiler, placed)
        return
    forward, backward = vjp.forward, vjp.backward
    if not (_default(forward) and _default(backward)):
        return
    n_returned = len(forward.jaxpr.out_avals) - len(meta.layout)
    fw = PlacedExecutable(forward.jaxpr, lambda vals: list(requested_in),
                          _outputs_keeping(meta, requested_out, n_returned))
    forward.compiler = _as_compiler(forward.compiler, fw)
    backward.compiler = _as_compiler(backward.compiler, PlacedExecutable(
        backward.jaxpr, lambda vals: _backward_inputs(fw, vjp, vals), lambda inputs: _backward_outputs(fw, vjp)))


def _backward_inputs(fw: PlacedExecutable, vjp, vals) -> list:
    """The backward's input shardings: residuals and cotangents as the compiled forward gives them (when it ran)."""
    if not fw.compiled:
        return [None] * (vjp.n_residuals + sum(vjp.diff_out))
    ins, outs = fw.input_shardings, fw.output_shardings
    n_out = len(vjp.diff_out)
    returned = iter(outs[n_out:])
    residuals = [ins[i] if i is not None else next(returned) for i in vjp.saved_inputs]
    return residuals + [s for s, d in zip(outs[:n_out], vjp.diff_out, strict=True) if d]


def _backward_outputs(fw: PlacedExecutable, vjp) -> list:
    """The input cotangents' shardings: the primals' (when the forward ran)."""
    if not fw.compiled:
        return [None] * sum(vjp.diff_in)
    return [s for s, d in zip(fw.input_shardings, vjp.diff_in, strict=True) if d]


def _default(program) -> bool:
    compiler = getattr(program.compiler, "args", (None, None))[1]  # NOTE: `_as_pass` partials: (name, compiler)
    return compiler is xla_compiler and not has_checks(program.jaxpr)


def _as_compiler(compiler, placed: PlacedExecutable):
    """`compiler` (a pass-logged `xla_compiler`), making `placed` for its own program and compiling any other it is
    given (the program batched under `vmap`) as a `PlacedExecutable` of the arguments' shardings."""
    name = compiler.args[0]
    from aotjax.transforms.aot import _as_pass  # NOTE: aot imports this module: its pass wrapper, at use

    def compile_placed(jaxpr, example_avals):
        return placed if jaxpr is placed.jaxpr else PlacedExecutable(jaxpr)

    compile_placed.__name__ = "xla_compiler"
    return _as_pass(name, compile_placed)
