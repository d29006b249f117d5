"""Calls of compiled programs, and the call of an `aot` function: the primitives through which
`grad(aot(f))` runs f's own compiled forward and backward programs.

- `compiled_call` runs a `Program` (a jaxpr and the callable a compiler made of it). Eagerly it
  calls that callable; inside another compiled program it is the jaxpr inlined; differentiated,
  its jaxpr is differentiated (so a compiled backward can itself be differentiated again).
- `aot_call` is the call of an aot-compiled function. Eagerly it runs the inference program. Its
  jvp runs the compiled **forward** program (outputs and residuals) and binds `aot_lin` on the
  residuals and the input tangents; `aot_lin`'s transpose runs the compiled **backward** program.
  So under `grad`/`vjp`, the forward executes when the primal is computed and the backward when the
  cotangents are: the function is never traced again.

Under `vmap`, each is one call of batched programs (`batch_jaxpr` of the program, compiled by the program's
compiler on first use and cached per program, batched operands and axis, so a second call reuses it): the
inference, forward and backward programs of an aot function are batched consistently (the backward's
residuals batched as the forward returns them), and a cotangent of an input that is the same for every
example is the sum of the examples' cotangents. A batched program donates nothing: its inputs are values
the batching level still holds.
"""
from __future__ import annotations

import functools
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence

import jax.numpy as jnp
import numpy as np

from aotjax.autograd import graph
from aotjax.core.avals import ShapedArray, get_aval
from aotjax.core.errors import AotjaxError, CompilerError, UnsupportedError
from aotjax.core.eval_jaxpr import eval_jaxpr
from aotjax.core.interpreter import grad_enabled
from aotjax.core.ir import ClosedJaxpr
from aotjax.core.primitive import Primitive, Recompute, jaxpr_flops
from aotjax.core.source_info import where
from aotjax.interpreters import hooks
from aotjax.interpreters.ad_util import Zero, instantiate
from aotjax.interpreters.batching import (
    BatchAxis,
    at_front,
    batch_jaxpr,
    batched_aval,
    batching_rules,
    current_axis,
    front_dims,
)
from aotjax.interpreters.jvp import jvp_flat, jvp_rules
from aotjax.interpreters.lowering import eval_jaxpr_jax, register_lowering
from aotjax.interpreters.trace import trace_flat
from aotjax.interpreters.transpose import backward_pass, is_undefined, transpose_rules
from aotjax.tensor import Tensor

__all__ = ["Program", "AotEntry", "AotVJP", "compiled_call_p", "aot_call_p", "aot_lin_p", "aot_saved_p", "run_recorded"]


class Program:
    """A pure flat jaxpr and a compiler; the compiled callable is made on first use (so a backward
    program is compiled at the latest when the backward first runs).

    The compiler's contract is checked, and a breach is a `CompilerError` naming the compiler
    (`compiler_name`), the program (`name`, `forward`/`backward`/`inference`, of `function`) and the
    mismatch: when it compiles, the compiler must return a callable; when `check_calls`, each call of that
    callable must return a list or tuple of arrays of the program's `out_avals` (count, shapes, dtypes),
    `output_names()` naming each output in the message. An exception a compiler or its callable raises
    is wrapped the same way (an aotjax error keeps its type, with a note)."""

    def __init__(self, jaxpr: ClosedJaxpr, compiler: Callable, name: str, *, function: str = "fn",
                 compiler_name: str = "the compiler", check_calls: bool = False,
                 output_names: Callable[[], Sequence[str]] | None = None, node_name: str | None = None):
        self.jaxpr, self.compiler, self.name = jaxpr, compiler, name
        self.node_name = node_name  # NOTE: the `grad_fn.name()` of its recorded call (a fused op's torch name)
        self.function, self.compiler_name, self.check_calls = function, compiler_name, check_calls
        self.output_names = output_names or (lambda: [f"output {i}" for i in range(len(jaxpr.out_avals))])
        self._executable = None

    @property
    def compiled(self) -> bool:
        return self._executable is not None

    @property
    def executable(self) -> Callable:
        if self._executable is None:
            with self._blaming(", raised"):
                fn = self.compiler(self.jaxpr, list(self.jaxpr.in_avals))
            if not callable(fn):
                raise CompilerError(f"{self._who()}, returned {_a(fn)}, which is not callable. A compiler is "
                                    f"`compiler(closed_jaxpr, example_avals) -> callable`: return a function of the "
                                    f"program's {len(self.jaxpr.in_avals)} flat input arrays (`aotjax.to_jax(jaxpr)` "
                                    f"or `aotjax.xla_compiler(jaxpr, avals)`, for example).")
            self._executable = fn  # NOTE: threads: a race compiles twice, each result whole
        return self._executable

    def __call__(self, *vals):
        if not self.check_calls:  # NOTE: XLA's executables: jax fixed their output types from these avals
            return list(self.executable(*vals))
        fn = self.executable
        with self._blaming(", returned a callable that raised"):
            outs = fn(*vals)
        self._check_outputs(outs)
        return list(outs)

    def _who(self) -> str:
        return f"{self.compiler_name}, compiling the {self.name} program of `{self.function}`{where()}"

    @contextmanager
    def _blaming(self, what: str):
        """Exceptions raised inside, attributed to this program's compiler."""
        try:
            yield
        except AotjaxError as e:
            e.add_note(f"(in {self._who()})")
            raise
        except Exception as e:
            raise CompilerError(f"{self._who()}{what}: {type(e).__name__}: {e}") from e

    def _check_outputs(self, outs) -> None:
        avals = self.jaxpr.out_avals
        if not isinstance(outs, (list, tuple)):
            got = f"a single array ({_aval_str(outs)})" if hasattr(outs, "shape") else _a(outs)
            raise CompilerError(f"{self._who()}, returned a callable that returned {got}; expected a list or "
                                f"tuple of {len(avals)} arrays ({_avals_str(avals)}), one per program output")
        if len(outs) != len(avals):
            expected = ", ".join(f"{a.str_short()} {n}" for a, n in zip(avals, self.output_names()))
            raise CompilerError(f"{self._who()}, returned a callable that returned {_n(len(outs), 'output')}; expected "
                                f"{len(avals)}: {expected}")
        bad = [i for i, (o, aval) in enumerate(zip(outs, avals)) if not _matches(o, aval)]
        if bad:  # NOTE: the names are worked out on an error only
            names = self.output_names()
            bad = [f"output {i} ({names[i]}): expected {avals[i].str_short()}, got {_aval_str(outs[i])}" for i in bad]
            raise CompilerError(f"{self._who()}, returned a callable whose outputs do not match the program's: "
                                f"{'; '.join(bad)}. Return one array per program output, with the shapes and "
                                f"dtypes of `closed_jaxpr.out_avals`.")

    def batched(self, jaxpr: ClosedJaxpr) -> "Program":
        """`jaxpr` (this program batched), compiled by this program's compiler."""
        return Program(jaxpr.with_meta(name=self.jaxpr.meta.name), self.compiler, self.name, function=self.function,
                       compiler_name=self.compiler_name, check_calls=self.check_calls,
                       output_names=self.output_names)

    def __repr__(self) -> str:
        return f"<{self.name} program, {len(self.jaxpr.eqns)} equations>"


def _matches(out, aval: ShapedArray) -> bool:
    shape, dtype = getattr(out, "shape", None), getattr(out, "dtype", None)
    return shape is not None and dtype is not None and tuple(shape) == aval.shape and np.dtype(dtype) == aval.dtype


def _aval_str(out) -> str:
    try:
        return ShapedArray(tuple(out.shape), np.dtype(out.dtype)).str_short()
    except (AttributeError, TypeError):
        return _a(out)


def _avals_str(avals) -> str:
    return ", ".join(a.str_short() for a in avals)


def _n(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def _a(value) -> str:
    """`value` in words for an error: `None`, `42 (an int)`, `a list`."""
    if value is None:
        return "None"
    kind = type(value).__name__
    kind = f"{'an' if kind[0] in 'aeiouAEIOU' else 'a'} {kind}"
    text = repr(value)
    return f"{text} ({kind})" if len(text) <= 40 else kind


def _inline_jvp(jaxpr: ClosedJaxpr, primals, tangents):
    """The program's jvp, staged on its own (a jaxpr of primals and nonzero tangents) and then evaluated
    here, below the jvp trace that called this rule."""
    nonzero = tuple(not isinstance(t, Zero) for t in tangents)
    jvp_jaxpr = _jvp_jaxpr(jaxpr, nonzero)
    outs = eval_jaxpr(jvp_jaxpr, *primals, *[t for t, nz in zip(tangents, nonzero) if nz])
    m = len(jaxpr.out_avals)
    return outs[:m], outs[m:]


@functools.lru_cache(maxsize=256)
def _jvp_jaxpr(jaxpr: ClosedJaxpr, nonzero: tuple) -> ClosedJaxpr:
    n = len(nonzero)

    def jvp_of(*args):
        ts = iter(args[n:])
        p_out, t_out = jvp_flat(lambda *a: eval_jaxpr(jaxpr, *a), list(args[:n]), [next(ts) if nz else None
                                                                                  for nz in nonzero])
        return [*p_out, *t_out]

    avals = list(jaxpr.in_avals)
    return trace_flat(jvp_of, avals + [a for a, nz in zip(avals, nonzero) if nz])


def _inline_transpose(jaxpr: ClosedJaxpr, cts, args):
    cts_in = iter(backward_pass(jaxpr, [], list(args), list(cts)))
    return [next(cts_in) if is_undefined(a) else None for a in args]


# -- compiled_call ----------------------------------------------------------------------------------
# NOTE: calls are saved rather than recomputed, at the cost of their body; a call is linear in the operands its
# body is linear in.
compiled_call_p = Primitive("compiled_call", multiple_results=True, recompute=Recompute.EXPENSIVE, linear=True,
                            flops=lambda in_avals, out_avals, *, program: jaxpr_flops(program.jaxpr))
compiled_call_p.abstract_eval = lambda *avals, program: list(program.jaxpr.out_avals)
compiled_call_p.eager_impl = lambda program: program
register_lowering(compiled_call_p, lambda *args, program: eval_jaxpr_jax(program.jaxpr.jaxpr, program.jaxpr.consts,
                                                                       args))
jvp_rules[compiled_call_p] = lambda primals, tangents, *, program: _inline_jvp(program.jaxpr, primals, tangents)
transpose_rules[compiled_call_p] = lambda cts, *args, program: _inline_transpose(program.jaxpr, cts, args)


@functools.lru_cache(maxsize=256)
def _batched_program(program: Program, axis: BatchAxis, in_batched: tuple[bool, ...],
                     instantiate: tuple[bool, ...] | bool = False) -> tuple[Program, tuple[bool, ...]]:
    """`program` batched (its inputs marked `in_batched` at axis 0; outputs at 0 where they vary, or where
    `instantiate` asks) and which outputs are batched."""
    jaxpr, out_batched = batch_jaxpr(program.jaxpr, axis, in_batched, instantiate)
    return program.batched(jaxpr), tuple(out_batched)


@functools.lru_cache(maxsize=256)
def _batched_backward(program: Program, axis: BatchAxis, in_batched: tuple[bool, ...],
                      wanted: tuple[bool, ...]) -> Program:
    """Backward `program` batched: its outputs, cotangents of inputs, batched at 0 where `wanted` (the input is
    batched); where not, the examples' cotangents summed (the input is the same for every example)."""
    batched, out_batched = batch_jaxpr(program.jaxpr, axis, in_batched, instantiate=wanted)
    if not any(b and not w for b, w in zip(out_batched, wanted)):
        return program.batched(batched)

    def summed(*args):
        outs = eval_jaxpr(batched, *args)
        return [hooks.reduce_sum(o, (0,)) if b and not w else o for o, b, w in zip(outs, out_batched, wanted)]

    return program.batched(trace_flat(summed, list(batched.in_avals)))


def _compiled_call_batch(axis_size, vals, bdims, *, program):
    vals, in_batched = at_front(vals, bdims)
    batched, out_batched = _batched_program(program, current_axis(), in_batched)
    return compiled_call_p.bind(*vals, program=batched), front_dims(out_batched)


batching_rules[compiled_call_p] = _compiled_call_batch


# -- aot_call and aot_lin -------------------------------------------------------------------------------
class AotVJP(Protocol):
    """An aot function's forward and backward for one signature and one set of differentiated inputs:
    `aot_lin`'s param `vjp`.

    `forward` computes, from one primal per input, the outputs then the residuals that are not primal
    inputs; `backward` computes, from the `n_residuals` residuals then one cotangent per output marked in
    `diff_out`, one cotangent per input marked in `diff_in`. `saved_inputs[r]` is the primal input
    residual `r` is (the caller passes it to the backward as it is), or None (the forward returns it).
    `out_avals` are the outputs' abstract values. As a param it is hashed (by identity, as an `AotEntry`)."""

    forward: Program
    backward: Program
    diff_in: Sequence[bool]
    diff_out: Sequence[bool]
    out_avals: Sequence[ShapedArray]

    @property
    def saved_inputs(self) -> Sequence[int | None]: ...

    @property
    def n_residuals(self) -> int: ...


class AotEntry(Protocol):
    """An aot function's state for one input signature: `aot_call`'s param `entry` (implemented in
    `aotjax.transforms.aot`). `inference` computes the outputs from one primal per input; `vjp(wanted)`
    is the forward and backward differentiating the inputs marked in `wanted` (None: every
    floating-point input)."""

    inference: Program

    def vjp(self, wanted: tuple[bool, ...] | None = None) -> AotVJP: ...


aot_call_p = Primitive("aot_call", multiple_results=True, recompute=Recompute.EXPENSIVE,
                       flops=lambda in_avals, out_avals, *, entry: jaxpr_flops(entry.inference.jaxpr))
aot_call_p.abstract_eval = lambda *avals, entry: list(entry.inference.jaxpr.out_avals)
aot_call_p.eager_impl = lambda entry: functools.partial(_run_on_copies_of_donated, entry.inference)


def _run_on_copies_of_donated(program: Program, *vals):
    # NOTE: bound under a transform, aot_call reads values its caller still holds (the snapshots of arguments
    # share their buffers): the inference program must not delete them, so what it donates is a copy. Only the
    # plain call of an aot function (transforms/aot.py, the jit boundary) donates buffers aotjax owns alone.
    donated = set(program.jaxpr.meta.donate)
    return program(*(jnp.copy(v) if i in donated else v for i, v in enumerate(vals)))
register_lowering(aot_call_p, lambda *args, entry: eval_jaxpr_jax(entry.inference.jaxpr.jaxpr,
                                                                  entry.inference.jaxpr.consts, args))


def _aot_call_jvp(primals, tangents, *, entry):
    if all(isinstance(t, Zero) for t in tangents):
        outs = aot_call_p.bind(*primals, entry=entry)
        return outs, [Zero(get_aval(o)) for o in outs]
    vjp = entry.vjp(tuple(not isinstance(t, Zero) for t in tangents))
    outs_and_res = compiled_call_p.bind(*primals, program=vjp.forward)
    n_out = len(vjp.diff_out)
    outs, returned = outs_and_res[:n_out], iter(outs_and_res[n_out:])
    # NOTE: a residual that is a primal input is passed on as it is, never returned by the forward.
    residuals = [primals[i] if i is not None else next(returned) for i in vjp.saved_inputs]
    ts = [instantiate(t, get_aval(p)) for t, p, d in zip(tangents, primals, vjp.diff_in, strict=True) if d]
    t_out = iter(aot_lin_p.bind(*residuals, *ts, vjp=vjp))
    return outs, [next(t_out) if d else Zero(get_aval(o)) for o, d in zip(outs, vjp.diff_out, strict=True)]


jvp_rules[aot_call_p] = _aot_call_jvp


# -- aot_saved: an aot call whose forward already ran, in an imperative autograd recording -------------------------
# `aot_saved(*residuals, *inputs, vjp)` stands for the outputs of an aot function called eagerly on tensors that
# require grad: the call ran `vjp.forward` once and the recording kept its residuals (as torch.compile's autograd
# node keeps its saved tensors). Its value is never read (the recording pins every value a node read), so it
# evaluates to zeros; its derivative is `aot_lin` on the kept residuals, whose transpose is the compiled backward.
aot_saved_p = Primitive("aot_saved", multiple_results=True, recompute=Recompute.EXPENSIVE,
                        flops=lambda in_avals, out_avals, *, vjp: jaxpr_flops(vjp.forward.jaxpr))
aot_saved_p.abstract_eval = lambda *avals, vjp: list(vjp.out_avals)
register_lowering(aot_saved_p, lambda *args, vjp: [jnp.zeros(a.shape, a.dtype) for a in vjp.out_avals])


def _aot_saved_jvp(primals, tangents, *, vjp):
    n_res = vjp.n_residuals
    outs = aot_saved_p.bind(*primals, vjp=vjp)
    ts = [instantiate(t, get_aval(p))
          for t, p, d in zip(tangents[n_res:], primals[n_res:], vjp.diff_in, strict=True) if d]
    t_out = iter(aot_lin_p.bind(*primals[:n_res], *ts, vjp=vjp))
    return outs, [next(t_out) if d else Zero(get_aval(o)) for o, d in zip(outs, vjp.diff_out, strict=True)]


jvp_rules[aot_saved_p] = _aot_saved_jvp


def run_recorded(entry: AotEntry, *bases) -> list:
    """An eager call of an aot function on `bases` (its input groups' bases), some of which require grad: the
    forward program differentiating those runs once, and the call is recorded as one `aot_saved` node keeping its
    residuals, whose backward is the compiled backward program (torch.compile's autograd node)."""
    wanted = tuple(graph.requires_grad(b) and graph.differentiable_dtype(b.dtype) for b in bases)
    vjp = entry.vjp(wanted)
    vals = [b._read() if isinstance(b, Tensor) else b for b in bases]
    outs_and_res = _run_on_copies_of_donated(vjp.forward, *vals)
    n_out = len(vjp.diff_out)
    returned = iter(outs_and_res[n_out:])
    residuals = [vals[i] if i is not None else next(returned) for i in vjp.saved_inputs]
    outs = [Tensor._wrap(o) for o in outs_and_res[:n_out]]
    if grad_enabled():
        graph.record_functional(aot_saved_p, {"vjp": vjp}, [*residuals, *bases], [*residuals, *vals], outs)
    return outs


def _aot_saved_batch(axis_size, vals, bdims, *, vjp):
    raise UnsupportedError(f"aot_saved: the recorded call of an aot-compiled function cannot be vmapped{where()}; "
                           f"call its backward outside vmap")


batching_rules[aot_saved_p] = _aot_saved_batch

aot_lin_p = Primitive("aot_lin", multiple_results=True, recompute=Recompute.EXPENSIVE,
                      flops=lambda in_avals, out_avals, *, vjp: jaxpr_flops(vjp.backward.jaxpr),
                      linear=True)  # in its tangent operands, after the residuals
aot_lin_p.abstract_eval = lambda *avals, vjp: [a for a, d in zip(vjp.out_avals, vjp.diff_out) if d]


def _aot_lin_forward(*args: Any, vjp):
    raise UnsupportedError(f"aot_lin: forward-mode differentiation (jvp, jacfwd, linearize) of an aot-compiled "
                           f"function is not supported{where()}: aot compiles a forward and a backward program. "
                           f"Use jvp on the function itself, or reverse mode (grad, vjp, jacrev).")


register_lowering(aot_lin_p, _aot_lin_forward)
jvp_rules[aot_lin_p] = lambda primals, tangents, *, vjp: _aot_lin_forward(vjp=vjp)


def _aot_lin_transpose(cts, *args, vjp):
    n_res = vjp.n_residuals
    cts = [instantiate(c) for c in (cts if isinstance(cts, (list, tuple)) else [cts])]
    in_cts = compiled_call_p.bind(*args[:n_res], *cts, program=vjp.backward)
    return [None] * n_res + list(in_cts)


transpose_rules[aot_lin_p] = _aot_lin_transpose


# -- aot_call and aot_lin under vmap ---------------------------------------------------------------------------
@dataclass(eq=False)  # NOTE: a primitive's param: hashed, by identity
class _BatchedVJP:
    """An `AotVJP` batched: `backward` takes the residuals and cotangents batched at 0 as the batched `forward`
    returns them (None in `aot_lin`'s batched form, which only transposes)."""

    forward: Program | None
    backward: Program
    diff_in: Sequence[bool]
    diff_out: Sequence[bool]
    out_avals: Sequence[ShapedArray]
    saved_inputs: Sequence[int | None]

    @property
    def n_residuals(self) -> int:
        return len(self.saved_inputs)


class _BatchedAotEntry:
    """An `AotEntry` for operands batched at 0 where `in_batched`: its programs batched on first use, per set of
    differentiated inputs; `out_batched` says which outputs are."""

    def __init__(self, entry: AotEntry, axis: BatchAxis, in_batched: tuple[bool, ...]):
        self.entry, self.axis, self.in_batched = entry, axis, in_batched
        self.inference, self.out_batched = _batched_program(entry.inference, axis, in_batched)
        self._vjps: dict = {}

    def vjp(self, wanted: tuple[bool, ...] | None = None) -> _BatchedVJP:
        v = self._vjps.get(wanted)
        if v is None:
            v = self._vjps.setdefault(wanted, self._batched_vjp(self.entry.vjp(wanted)))  # NOTE: threads: as `Jitted`
        return v

    def _batched_vjp(self, vjp: AotVJP) -> _BatchedVJP:
        n_out = len(vjp.diff_out)
        n_returned = len(vjp.forward.jaxpr.out_avals) - n_out
        forward, fw_batched = _batched_program(vjp.forward, self.axis, self.in_batched,
                                               self.out_batched + (False,) * n_returned)
        if fw_batched[:n_out] != self.out_batched:
            raise UnsupportedError(f"aot_call: under vmap, the forward program of `{vjp.forward.function}` has "
                                   f"outputs that vary over the examples where the inference program's do not"
                                   f"{where()}; vmap the function before aot (`aot(vmap(f))`) instead")
        returned = iter(fw_batched[n_out:])
        res_batched = tuple(self.in_batched[i] if i is not None else next(returned) for i in vjp.saved_inputs)
        cts_batched = tuple(b for b, d in zip(self.out_batched, vjp.diff_out, strict=True) if d)
        wanted = tuple(b for b, d in zip(self.in_batched, vjp.diff_in, strict=True) if d)
        backward = _batched_backward(vjp.backward, self.axis, res_batched + cts_batched, wanted)
        out_avals = [batched_aval(a, self.axis.size, b) for a, b in zip(vjp.out_avals, self.out_batched)]
        return _BatchedVJP(forward, backward, vjp.diff_in, vjp.diff_out, out_avals, vjp.saved_inputs)

    def __repr__(self) -> str:
        return f"<{self.entry!r} batched>"


@functools.lru_cache(maxsize=256)
def _batched_entry(entry: AotEntry, axis: BatchAxis, in_batched: tuple[bool, ...]) -> _BatchedAotEntry:
    return _BatchedAotEntry(entry, axis, in_batched)


def _aot_call_batch(axis_size, vals, bdims, *, entry):
    vals, in_batched = at_front(vals, bdims)
    batched = _batched_entry(entry, current_axis(), in_batched)
    return aot_call_p.bind(*vals, entry=batched), front_dims(batched.out_batched)


batching_rules[aot_call_p] = _aot_call_batch


def _aot_lin_batch(axis_size, vals, bdims, *, vjp):
    # NOTE: every output batched: a tangent may vary over the examples through the residuals alone.
    vals, batched = at_front(vals, bdims)
    n_res, n_ct = vjp.n_residuals, sum(vjp.diff_out)
    backward = _batched_backward(vjp.backward, current_axis(), batched[:n_res] + (True,) * n_ct, batched[n_res:])
    out_avals = [batched_aval(a, axis_size, True) for a in vjp.out_avals]
    rule = _BatchedVJP(None, backward, vjp.diff_in, vjp.diff_out, out_avals, vjp.saved_inputs)
    outs = aot_lin_p.bind(*vals, vjp=rule)
    return outs, [0] * len(outs)


batching_rules[aot_lin_p] = _aot_lin_batch
