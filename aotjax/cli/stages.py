"""The stages a command can print for a program: each a name, a title and a function of the program.

A `Program` is a function with example arguments; its jaxprs are computed on first use. Later
passes (functionalize, joint, forward/backward) each register one stage here with `stage(...)`.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable

import jax

import aotjax


class Program:
    """A function and the example arguments it is traced with."""

    def __init__(self, fn: Callable, args: tuple, name: str | None = None):
        self.fn = fn
        self.args = tuple(args)
        self.name = name or getattr(fn, "__name__", "fn")

    @functools.cached_property
    def jaxpr(self) -> aotjax.ClosedJaxpr:
        """The jaxpr as written (views and in-place ops included)."""
        return aotjax.make_jaxpr(self.fn)(*self.args)

    @functools.cached_property
    def forward_backward(self):
        """The forward and backward programs of the function's vjp (`aotjax.forward_backward`)."""
        return aotjax.forward_backward(self.fn, *self.args)

    @functools.cached_property
    def lowered(self):
        """`jit(fn).lower(*args)`: the functionalized program and its boundary record."""
        return aotjax.jit(self.fn).lower(*self.args)

    @functools.cached_property
    def aot_lowered(self):
        """`aot(fn).lower(*args)`: the joint program, and the forward and backward it is split into."""
        return aotjax.aot(self.fn).lower(*self.args)


@dataclass(frozen=True)
class Stage:
    name: str
    title: str
    render: Callable[[Program], str]


STAGES: dict[str, Stage] = {}


def stage(name: str, title: str):
    """Register `render(program) -> str` as the stage `name`."""
    def register(render: Callable[[Program], str]) -> Callable[[Program], str]:
        STAGES[name] = Stage(name, title, render)
        return render
    return register


def render(names: list[str], program: Program) -> str:
    """The named stages of `program`, each under a header line."""
    return "\n\n".join(f"--- {STAGES[n].title} ---\n{STAGES[n].render(program)}" for n in names)


@stage("jaxpr", "the jaxpr as written, with source lines")
def _jaxpr(program: Program) -> str:
    return program.jaxpr.pretty(source_info=True)


@stage("functionalized", "the functionalized program: pure, writes as explicit outputs")
def _functionalized(program: Program) -> str:
    return program.lowered.jaxpr.pretty(source_info=True)


@stage("boundary", "the call boundary: what is written, what aliases what")
def _boundary(program: Program) -> str:
    return program.lowered.meta.describe()


def _partition_stages(prefix: str, whose: str, lowered_of: Callable[[Program], Any]) -> None:
    """Register the forward, backward and residuals stages of a lowering (`--grad`: forward_backward;
    `--aot`: aot's, which adds the joint)."""
    stage(prefix + "forward", f"{whose}forward program: primals -> outputs, written inputs, residuals")(
        lambda p: _with_signature(lowered_of(p).forward, lowered_of(p).forward_inputs, lowered_of(p).forward_outputs))
    stage(prefix + "backward", f"{whose}backward program: residuals, output cotangents -> input cotangents")(
        lambda p: _with_signature(lowered_of(p).backward, lowered_of(p).backward_inputs,
                                  lowered_of(p).backward_outputs))
    stage(prefix + "residuals", f"what {whose}forward saves for {'its' if prefix else 'the'} backward")(
        lambda p: _residual_table(lowered_of(p).residuals, lowered_of(p).residual_bytes))


_partition_stages("", "the ", lambda p: p.forward_backward)
_partition_stages("aot_", "aot's ", lambda p: p.aot_lowered)


@stage("aot_joint", "aot's joint program: primals, output cotangents -> outputs, input cotangents")
def _aot_joint(program: Program) -> str:
    lowered = program.aot_lowered
    return _with_signature(lowered.joint, lowered.joint_inputs, lowered.joint_outputs)


def _residual_table(residuals: list, total: int) -> str:
    lines = [f"  {r.descriptor:28} {r}" for r in residuals]
    return "\n".join(lines + [f"  total: {total} bytes"])


def _with_signature(jaxpr, ins: list[str], outs: list[str]) -> str:
    sig = [f"  in  {i:2}  {a.str_short():14} {n}" for i, (n, a) in enumerate(zip(ins, jaxpr.in_avals))]
    sig += [f"  out {i:2}  {a.str_short():14} {n}" for i, (n, a) in enumerate(zip(outs, jaxpr.out_avals))]
    return jaxpr.pretty(source_info=True) + "\n" + "\n".join(sig)


@stage("stablehlo", "StableHLO of the functionalized program, as lowered through XLA")
def _stablehlo(program: Program) -> str:
    return program.lowered.as_text()


def describe(value: Any) -> str:
    """`f32[4,3]` for a Tensor or array; the pytree of those for a structure."""
    leaves, tree = jax.tree_util.tree_flatten(value)
    shapes = [aotjax.ShapedArray(x.shape, x.dtype).str_short() if hasattr(x, "dtype") else repr(x) for x in leaves]
    return str(jax.tree_util.tree_unflatten(tree, shapes)).replace("'", "") if len(leaves) != 1 else shapes[0]
