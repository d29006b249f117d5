"""The labelled signature of aot's programs: a `Descriptor` for every input and output of the forward
and backward programs (role, pytree path, source line), the residuals with why each is saved, and the
table from each user output to the forward output it comes from (`UserOutput`). The signature itself is
documented in `aotjax.transforms.aot`."""
from __future__ import annotations

import enum
from dataclasses import dataclass, replace

from aotjax.core import views
from aotjax.core.source_info import SourceInfo
from aotjax.runtime import boundary
from aotjax.runtime.boundary import OutKind, Slot


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
    detail: str | None = None  # which of the primitive's outputs, when it has many (`Primitive.describe_output`)

    def cotangent(self) -> "Descriptor":
        return Descriptor(Role.COTANGENT, self.path, of=self)

    @property
    def computed_by(self) -> str:
        """A residual's origin in words: `argument x`, or `sin at model.py:12 (f)`."""
        if self.of is not None:
            return f"argument {self.of.path}"
        at = f" at {self.source_info}" if self.source_info is not None else ""
        detail = f": {self.detail}" if self.detail else ""
        return f"{self.primitive or 'constant'}{at}{detail}"

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
    returned_residuals: list[Descriptor]  # the residuals the forward returns (not primal inputs)

    @property
    def forward_outputs(self) -> list[Descriptor]:
        return self.outputs + self.returned_residuals


def _describe(entry, vjp) -> _Signature:
    """The signature of the programs of `entry` (aot's staged function, `aot._AotEntry`) and `vjp` (its joint
    program, `aot._AotVJP`)."""
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
            describe = eqn and eqn.primitive.describe_output
            detail = describe(eqn, next(k for k, o in enumerate(eqn.outputs) if o is v)) if describe else None
            descriptors.append(Descriptor(Role.RESIDUAL, index=r, primitive=eqn and eqn.primitive.name,
                                          source_info=eqn and eqn.source_info, detail=detail))
    residuals = [Residual(str(d), v.aval, v.aval.nbytes, d.computed_by)
                 for d, v in zip(descriptors, vjp.partitioned.saved, strict=True)]
    return _Signature(primals, outputs, descriptors, residuals,
                      [d.cotangent() for d, diff in zip(outputs, vjp.diff_out, strict=True) if diff],
                      [d.cotangent() for d, diff in zip(primals, vjp.diff_in, strict=True) if diff],
                      [d for d, i in zip(descriptors, vjp.saved_inputs, strict=True) if i is None])


def _output_descriptor(meta: boundary.BoundaryMeta, slot: Slot, k: int) -> Descriptor:
    """The forward output at layout slot `(slot, k)`: a written input's new value, a user output (an
    intermediate base no output views), or an intermediate base."""
    if slot is Slot.MUTATED:
        return Descriptor(Role.UPDATED, meta.group_name(k))
    for i, spec in enumerate(meta.outputs):
        if spec.kind is OutKind.BASE and spec.index == k and not spec.chain:
            return Descriptor(Role.OUTPUT, meta.output_names[i] if i < len(meta.output_names) else f"out[{i}]")
    return Descriptor(Role.BASE, index=k)


@dataclass(frozen=True)
class UserOutput:
    """Where one output of the user's function comes from (`AotLowered.user_outputs`): `path` (`out[0]['a']`),
    `kind` (an `OutKind`: a new value, a view of one, an input, a view of an input, a constant), `source` (the
    forward output it is or views, by its descriptor: `out[0]`, `base[0]`; the input's name; a constant's
    repr), `forward_output` (the index of that forward output, or of the written input's `updated[...]`; None
    when no program output holds it), `chain` (the view steps replayed on the source, `()` for none),
    `written` (an input, or view of one, that the function writes in place) and `same_as` (other user outputs
    that are the same object)."""

    path: str
    kind: OutKind
    source: str
    forward_output: int | None = None
    chain: views.Chain = ()
    written: bool = False
    same_as: tuple[str, ...] = ()

    def __str__(self) -> str:
        same = f" (same value as {', '.join(self.same_as)})" if self.same_as else ""
        written = f"written in place (new value: forward output {self.forward_output})" if self.written else ""
        if self.kind is OutKind.INPUT:
            return f"{self.path} = input {self.source}{same}{', ' + written if written else ''}"
        if self.kind is OutKind.CONST:
            return f"{self.path} = constant {self.source} (no program output)"
        if self.kind is OutKind.ALIAS:
            written = f"; {self.source} is {written}" if written else ""
            return f"{self.path} = view of input {self.source}: {views.chain_str(self.chain)}{written}"
        if not self.chain:
            return f"{self.path} = forward output {self.forward_output}{same}"
        return (f"{self.path} = view of {self.source} (forward output {self.forward_output}): "
                f"{views.chain_str(self.chain)}")


def _user_outputs(meta: boundary.BoundaryMeta) -> list[UserOutput]:
    """The table from each user output to the forward output (or input) it comes from."""
    position = {slot: i for i, slot in enumerate(meta.layout)}
    names = [meta.output_names[i] if i < len(meta.output_names) else f"out[{i}]" for i in range(len(meta.outputs))]
    keys = [_object_key(spec) for spec in meta.outputs]
    by_object: dict = {}
    for name, key in zip(names, keys, strict=True):
        if key is not None:
            by_object.setdefault(key, []).append(name)
    return [replace(_user_output(meta, spec, name, position),
                    same_as=tuple(n for n in by_object.get(key, ()) if n != name))
            for spec, name, key in zip(meta.outputs, names, keys, strict=True)]


def _object_key(spec: boundary.OutSpec) -> tuple | None:
    """What makes outputs one object (the boundary returns it for each): the same input, or the same new value."""
    if spec.kind is OutKind.INPUT or (spec.kind is OutKind.BASE and not spec.chain):
        return spec.kind, spec.index, spec.obj
    return None


def _user_output(meta: boundary.BoundaryMeta, spec: boundary.OutSpec, name: str, position: dict) -> UserOutput:
    if spec.kind is OutKind.CONST:
        text = repr(spec.value)
        return UserOutput(name, spec.kind, text if len(text) <= 40 else f"a {type(spec.value).__name__}")
    if spec.kind is OutKind.BASE:
        k = position[(Slot.BASE, spec.index)]
        return UserOutput(name, spec.kind, str(_output_descriptor(meta, Slot.BASE, spec.index)), k, spec.chain)
    written = spec.index in meta.mutated
    updated = position[(Slot.MUTATED, spec.index)] if written else None
    if spec.kind is OutKind.INPUT:
        return UserOutput(name, spec.kind, meta.input_name(spec.index, spec.obj), updated, written=written)
    return UserOutput(name, spec.kind, meta.group_name(spec.index), updated, spec.chain, written)
