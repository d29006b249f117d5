"""Shardings on `aot`'s programs: `aot(f, in_shardings=..., out_shardings=...)`, and arguments placed over many
devices without them.

XLA's executables are compiled for the shardings of their inputs; `aot`'s default compiler gets only shapes and
dtypes, so its programs are compiled by XLA **when they are called**, for the shardings they should take, one
executable per layout of their inputs (`PlacedExecutable`, as `jax.jit` compiles once per input sharding):

    forward     each primal: the requested `in_shardings` entry, else the sharding of the argument it gets;
                the user's outputs: `out_shardings` (None: as XLA decides); a written input's new value: that
                input's sharding (written back, it keeps it); residuals: as XLA decides
    backward    the residuals as the compiled forward returned them (a residual that is a primal: that primal's, as
                the forward took it); each cotangent as the forward returned its output; input cotangents: the
                primals' shardings
    inference   as the forward, for the plain program a transform's eager call runs

An input whose layout is not the one the executable was compiled for (an incoming cotangent laid out another way,
a `grad` seed on one device, say; an argument against a requested sharding) is moved there with `jax.device_put`
before the call, never an error.
"""
from __future__ import annotations

from typing import Callable, Sequence

import jax

from aotjax.core.ir import ClosedJaxpr
from aotjax.lowering.to_jax import flat_function, has_checks, xla_compiler
from aotjax.runtime.boundary import Slot
from aotjax.transforms.functionalize import Staged
from aotjax.transforms.jit import _constrained, program_shardings
from aotjax.transforms.passes import as_pass

__all__ = ["PlacedExecutable", "aot_shardings", "placed_programs"]

Plan = Callable[[Sequence], tuple[list, Callable[[list], list]]]


class PlacedExecutable:
    """A pure program compiled by XLA when called, once per layout of its inputs (see the module's docstring).
    `plan(vals)` gives, for a call's values, the sharding to compile each input for (None: the value's own) and a
    function from the inputs' shardings to each output's (None: as XLA decides). `input_shardings` and
    `output_shardings` are those of the executable compiled last (compiling one for the planned shardings, on the
    default device where none is planned, when none is yet)."""

    def __init__(self, jaxpr: ClosedJaxpr, plan: Plan | None = None, generation: Callable[[], int] | None = None):
        self.jaxpr = jaxpr
        self._plan = plan or self._free
        self._generation = generation or (lambda: 0)  # changes when `plan` may answer otherwise
        self._variants: dict = {}  # the inputs' shardings -> the executable compiled for them
        self._calls: dict = {}  # (shardings, generation) -> (executable, inputs to move, their shardings)
        self._last = None

    def _free(self, vals) -> tuple[list, Callable[[list], list]]:
        return [None] * len(self.jaxpr.in_avals), lambda inputs: [None] * len(self.jaxpr.out_avals)

    def __call__(self, *vals) -> list:
        # NOTE: the plan, the executable and the inputs to move depend on the arguments' shardings only: found once
        # per layout of the arguments, a call then reads each argument's sharding and nothing else
        have = (tuple(_sharding_of(v) for v in vals), self._generation())
        found = self._calls.get(have)
        if found is None:
            found = self._calls[have] = self._resolve(vals, have[0])
        compiled, moves, want = found
        if moves:
            vals = list(vals)
            for i in moves:
                vals[i] = jax.device_put(vals[i], want[i])
        return list(compiled(*vals))

    def _resolve(self, vals, have: tuple) -> tuple:
        requested, outputs = self._plan(vals)
        key = tuple(s if s is not None else h for s, h in zip(requested, have, strict=True))
        compiled = self._variants.get(key) or self._compile(key, outputs)
        want = compiled.input_shardings[0]
        moves = tuple(i for i, (v, s) in enumerate(zip(vals, want)) if not _placed(v, s))
        return compiled, moves, want

    def _compile(self, key: tuple, outputs: Callable[[list], list]):
        structs = [jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s)
                   for a, s in zip(self.jaxpr.in_avals, key, strict=True)]
        fn = flat_function(self.jaxpr)
        out_shardings = outputs(list(key))
        if any(s is not None for s in out_shardings):
            fn = _constrained(fn, out_shardings)
        compiled = jax.jit(fn, donate_argnums=self.jaxpr.meta.donate).lower(*structs).compile()
        self._last = compiled = self._variants.setdefault(key, compiled)  # NOTE: threads: a race compiles twice
        return compiled

    def _any(self):
        if self._last is None:
            requested, outputs = self._plan(None)
            self._compile(tuple(requested), outputs)
        return self._last

    def variants(self) -> list:
        """The executables compiled so far."""
        return list(self._variants.values())

    @property
    def input_shardings(self) -> tuple:
        return tuple(self._any().input_shardings[0])

    @property
    def output_shardings(self) -> tuple:
        return tuple(self._any().output_shardings)

    def cost_analysis(self):
        return self._any().cost_analysis()

    def memory_analysis(self):
        return self._any().memory_analysis()


def _sharding_of(v):
    """The sharding a program compiles `v`'s input for: a committed array's (placed by the user: `device_put`, a
    sharded result); None for an uncommitted one (made on the default device, free to move, as `jax.jit` treats it:
    a program over a mesh, a `shard_map`, takes it where it needs it)."""
    return v.sharding if isinstance(v, jax.Array) and v.committed else None


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
    """Hand `entry`'s programs that the default compiler (`xla_compiler`) compiles, the inference program, and `vjp`'s
    forward and backward when given, to `PlacedExecutable`s, for the shardings of the module's docstring. A program
    a user's compiler compiles, or one with run-time checks, is left as it is."""
    aot, meta = entry.aot, entry.staged.meta
    requested_in, requested_out = entry.shardings or ([None] * len(meta.groups), [None] * len(meta.layout))
    if vjp is None:
        if aot.inference_compiler is None and _default(aot.fw_compiler, entry.inference):
            plan = _fixed(requested_in, _outputs_keeping(meta, requested_out, 0))
            _place(entry.inference, PlacedExecutable(entry.inference.jaxpr, plan))
        return
    forward, backward = vjp.forward, vjp.backward
    if not (_default(aot.fw_compiler, forward) and _default(aot.bw_compiler, backward)):
        return
    n_returned = len(forward.jaxpr.out_avals) - len(meta.layout)
    fw = PlacedExecutable(forward.jaxpr, _fixed(requested_in, _outputs_keeping(meta, requested_out, n_returned)))
    _place(forward, fw)
    _place(backward, PlacedExecutable(backward.jaxpr, lambda vals: _backward_plan(fw, vjp, vals),
                                      generation=lambda: len(fw._variants)))  # NOTE: a new forward may be the one


def _fixed(requested_in: list, outputs: Callable[[list], list]) -> Plan:
    return lambda vals: (list(requested_in), outputs)


def _backward_plan(fw: PlacedExecutable, vjp, vals) -> tuple[list, Callable[[list], list]]:
    """The backward's shardings, from the forward's executable that returned these residuals (the one compiled last
    when none did): residuals and cotangents as it gives them, input cotangents as it took the primals."""
    n_out = len(vjp.diff_out)
    returned = [k for k, i in enumerate(vjp.saved_inputs) if i is None]
    variant = None if vals is None else _returning(fw.variants(), [vals[k] for k in returned], n_out)
    if variant is None and fw.variants():
        variant = fw._any()
    if variant is None:  # NOTE: the backward called before any forward (by hand): as its arguments are
        return [None] * len(vjp.backward.jaxpr.in_avals), lambda inputs: [None] * sum(vjp.diff_in)
    ins, outs = variant.input_shardings[0], variant.output_shardings
    returned_outs = iter(outs[n_out:])
    residuals = [ins[i] if i is not None else next(returned_outs) for i in vjp.saved_inputs]
    cotangents = [s for s, d in zip(outs[:n_out], vjp.diff_out, strict=True) if d]
    input_cotangents = [s for s, d in zip(ins, vjp.diff_in, strict=True) if d]
    return residuals + cotangents, lambda inputs: input_cotangents


def _returning(variants: list, residuals: list, n_out: int):
    """The forward executable among `variants` whose returned residuals are laid out as `residuals` are."""
    for compiled in reversed(variants):
        outs = compiled.output_shardings[n_out:]
        if all(_placed(v, s) for v, s in zip(residuals, outs, strict=True)):
            return compiled
    return None


def _default(compiler, program) -> bool:
    return compiler is xla_compiler and not has_checks(program.jaxpr)


def _place(program, placed: PlacedExecutable) -> None:
    """`program` compiled (as the pass `aot: lower <name>`) into `placed`; a program made from it for other inputs
    (batched under `vmap`) into a `PlacedExecutable` of its arguments' shardings."""
    def xla_compiler_placed(jaxpr, example_avals):
        return placed if jaxpr is placed.jaxpr else PlacedExecutable(jaxpr)

    program.compiler = as_pass(f"aot: lower {program.name}", xla_compiler_placed)
