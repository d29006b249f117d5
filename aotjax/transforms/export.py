"""`export`: a function's pure program serialized with `jax.export`, beside the boundary table that restores eager
semantics when the program is called again, in this process or another.

`aotjax.export(f)(*args)` traces `f` for arguments like `args` (functionalized, as `jit` does) and returns an
`Exported`: the StableHLO program (a `jax.export.Exported`) and the boundary record (which inputs the program
writes, which outputs are inputs or views of them, the pytrees of the arguments and results). `exp.call(*args)`
runs it with PyTorch's semantics: written inputs are written in place, aliasing outputs are real views.
`exp.serialize()` gives bytes; `aotjax.deserialize(blob)` gives the `Exported` back, in a process that never saw
`f`. Tensors `f` captures are baked into the program as constants (an exported program has no caller's state to
read): a write into a captured tensor is refused.

**Symbolic shapes.** An argument may be a `jax.ShapeDtypeStruct` instead of a tensor: the program is traced for its
shape and dtype only, and its shape may hold symbolic dimensions (`jax.export.symbolic_shape("b, 4")`), so that one
export accepts every batch size (`aot(f).lower(*specs).export()` too). aotjax traces with the symbolic dimensions
in its abstract values: elementwise ops, matmuls, reductions (`mean` included), `nn.Linear`, softmax and
`cross_entropy`/`mse_loss`, `reshape`/`view` with -1, and transposes support them, with their derivatives; an op that
needs a dimension's value (slicing, `flatten` of a symbolic size) raises, naming the op. A symbolic-shaped tensor is
taken as contiguous where its PyTorch strides cannot be decided. An output that is a view of a symbolic-shaped
argument is refused (return a copy). Symbolic dimensions that appear in several arguments must come from one
`symbolic_shape` call (one `jax.export.SymbolicScope`), as in `jax.export`.
"""
from __future__ import annotations

import contextlib
import traceback
from typing import Any, Callable

import jax

from aotjax.core.avals import ShapedArray, canonicalize_dtype
from aotjax.core.errors import UnsupportedError
from aotjax.core.source_info import in_package, is_internal
from aotjax.interpreters.eval import read
from aotjax.lowering.to_jax import avals_to_structs, flat_function
from aotjax.runtime import boundary
from aotjax.runtime.boundary import BoundaryMeta, Slot
from aotjax.tensor import Tensor
from aotjax.transforms import export_format as fmt
from aotjax.transforms.argnums import fun_name
from aotjax.transforms.functionalize import stage_functionalized
from aotjax.transforms.jit import _reader

__all__ = ["export", "deserialize", "Exported", "AotExport"]

class Exported:
    """An exported program and its boundary table. `call(*args, **kwargs)` runs it on arguments with the
    traced structure, shapes, dtypes and aliasing; `serialize()` gives bytes for `aotjax.deserialize`.
    `in_avals`/`out_avals` are the pure program's; `input_names` name the call's flat arguments;
    `mlir_module()` is the StableHLO text."""

    def __init__(self, program: jax.export.Exported, meta: BoundaryMeta | None, in_tree, name: str,
                 names: tuple[list[str], list[str]] | None = None):
        self.program, self.meta, self.in_tree, self.name = program, meta, in_tree, name
        self._names = names
        if meta is not None:
            positions = {entry: i for i, entry in enumerate(meta.layout)}
            self._base_pos = [positions[(Slot.BASE, k)] for k in range(meta.n_bases)]
            self._mutated_pos = [positions[(Slot.MUTATED, g)] for g in meta.mutated]

    @property
    def in_avals(self):
        return self.program.in_avals

    @property
    def out_avals(self):
        return self.program.out_avals

    @property
    def input_names(self) -> list[str]:
        """The call's flat arguments (a pure program's inputs: their descriptors, `residual[0] ...`)."""
        return list(self.meta.input_names) if self.meta is not None else list(self._names[0])

    @property
    def output_names(self) -> list[str]:
        return list(self.meta.output_names) if self.meta is not None else list(self._names[1])

    def mlir_module(self) -> str:
        return self.program.mlir_module()

    def call(self, *args, **kwargs) -> Any:
        """Run the program on `args` with eager semantics restored (see the module's docstring). A pure program
        (a forward or backward of `aot`) takes its flat inputs in order and returns the list of its outputs."""
        if self.meta is None:
            return self._call_pure(args)
        leaves, in_tree = jax.tree_util.tree_flatten((list(args), kwargs))
        if in_tree != self.in_tree:
            raise TypeError(f"export: {self.name} {_arguments_mismatch(self.in_tree, in_tree)}")
        self._check_pattern(leaves)
        vals = [read(leaves[i]) for i, read in (_reader(g, False) for g in self.meta.groups)]
        for k, (v, aval) in enumerate(zip(vals, self.program.in_avals, strict=True)):
            _check_input(self.name, self.meta.group_name(k), v, aval)
        outs = self._run(vals, [self.meta.group_name(k) for k in range(len(vals))])
        return boundary.apply(self.meta, leaves, [outs[i] for i in self._mutated_pos],
                              [outs[i] for i in self._base_pos], wrap=Tensor._wrap)

    def _call_pure(self, args) -> list:
        if len(args) != len(self.program.in_avals):
            raise TypeError(f"export: {self.name} takes {len(self.program.in_avals)} inputs "
                            f"({', '.join(self.input_names)}), got {len(args)}")
        vals = []
        for name, a, aval in zip(self.input_names, args, self.program.in_avals, strict=True):
            v = read_value(a)
            _check_input(self.name, name, v, aval)
            vals.append(v)
        return [Tensor._wrap(o) for o in self._run(vals, self.input_names)]

    def _run(self, vals: list, names: list[str]):
        """The program called on `vals`; a symbolic dimension that the arguments give two values (or a value its
        constraints refuse) is an error naming the arguments."""
        try:
            return self.program.call(*vals)
        except ValueError as e:
            if not self.symbolic:
                raise
            shapes = ", ".join(f"{n}: {_shape_str(v)}" for n, v in zip(names, vals))
            raise TypeError(f"export: {self.name} was exported for the shapes "
                            f"{', '.join(f'{n}: {_shape_str(a)}' for n, a in zip(names, self.program.in_avals))}; "
                            f"the call's ({shapes}) do not fit them: {e}") from None

    @property
    def symbolic(self) -> bool:
        """Whether the program's input shapes hold symbolic dimensions (it accepts several sizes)."""
        return any(not isinstance(d, int) for a in self.program.in_avals for d in a.shape)

    def _check_pattern(self, leaves: list) -> None:
        """The call's aliasing between arguments must be the traced one (the program's inputs are per storage)."""
        groups = boundary.group_inputs(leaves, scalars=True)
        want = [(g.leaves, g.chains, g.synthetic) for g in self.meta.groups]
        if [(g.leaves, g.chains, g.synthetic) for g in groups] != want:
            raise TypeError(f"export: {self.name} was exported for arguments that share memory in another way "
                            f"(which tensors are views of which); pass arguments aliased as when exported")

    def serialize(self) -> bytes:
        """Bytes holding the StableHLO program and the boundary table, as data only (`aotjax.deserialize` reads
        them back without running code from them; see `aotjax/transforms/export_format.py`)."""
        table = {"name": self.name, "meta": fmt.encode(self.meta), "in_tree": fmt.encode(self.in_tree),
                 "names": fmt.encode(self._names)}
        return fmt.pack(bytes(self.program.serialize()), table)

    def __repr__(self) -> str:
        if self.meta is None:
            return f"Exported({self.name}: {len(self.in_avals)} inputs, {len(self.out_avals)} outputs)"
        return f"Exported({self.name}: {len(self.meta.groups)} inputs, {len(self.meta.outputs)} outputs)"


def deserialize(blob: bytes) -> "Exported | AotExport":
    """An `Exported` from `Exported.serialize()`'s bytes (an `AotExport` from `AotExport.serialize()`'s).

    Loading runs no code from the bytes: the boundary table is plain data, checked against the program; bytes that
    are truncated, corrupted, of another version or made to attack raise a `ValueError` saying what is wrong.
    (The StableHLO program itself is compiled by XLA when first called: load programs from sources you trust to
    compute what they say; loading one cannot run Python code.)

    >>> f = lambda x: x.mul_(2).sum()
    >>> blob = aotjax.export(f)(aotjax.ones(3)).serialize()
    >>> x = aotjax.ones(3)
    >>> aotjax.deserialize(blob).call(x), x
    (tensor(6.), tensor([2., 2., 2.]))
    """
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        raise TypeError(f"deserialize: expects the bytes `serialize()` gave, got a {type(blob).__name__}")
    blob = bytes(blob)
    if blob.startswith(fmt.PAIR_MAGIC):
        return _pair_from(*fmt.unpack_pair(blob))
    if not blob.startswith(fmt.MAGIC):
        raise ValueError("deserialize: these bytes are not an aotjax export (Exported.serialize() makes them)")
    program_bytes, table = fmt.unpack(blob)
    try:
        program = jax.export.deserialize(bytearray(program_bytes))
    except Exception as e:  # NOTE: jax's flatbuffer reader raises what it meets (IndexError, struct.error, ...)
        raise fmt.FormatError(f"deserialize: the program's bytes are not a jax export ({type(e).__name__}: "
                              f"{str(e)[:200]})") from None
    return _exported_from(program, table)


def _exported_from(program: jax.export.Exported, table: dict) -> Exported:
    """The `Exported` a table (read from bytes) describes, checked against its program."""
    decode = fmt.Decoder()
    if set(table) != {"name", "meta", "in_tree", "names"}:
        raise fmt.FormatError(f"deserialize: the boundary table's entries are {sorted(table)[:8]}, not an export's")
    name, meta, in_tree, names = (decode(table[k]) for k in ("name", "meta", "in_tree", "names"))
    if not isinstance(name, str):
        raise fmt.FormatError("deserialize: the export's name is not a string")
    if meta is None:  # a pure program: its inputs' and outputs' names only
        if not (isinstance(names, tuple) and len(names) == 2 and in_tree is None
                and [len(n) if isinstance(n, list) else -1 for n in names]
                == [len(program.in_avals), len(program.out_avals)]
                and all(isinstance(s, str) for n in names for s in n)):
            raise fmt.FormatError("deserialize: the boundary table does not match the program: its input and "
                                  "output names are not one per input and output")
        return Exported(program, None, None, name, names)
    if not isinstance(in_tree, jax.tree_util.PyTreeDef) or names is not None:
        raise fmt.FormatError("deserialize: the boundary table's argument structure is malformed")
    fmt.check_meta(meta, in_tree, program.in_avals, program.out_avals)
    return Exported(program, meta, in_tree, name)


def _pair_from(forward: bytes, backward: bytes, table: dict) -> "AotExport":
    fwd, bwd = deserialize(forward), deserialize(backward)
    num_outputs, saved = table.get("num_outputs"), table.get("saved_inputs")
    if not (isinstance(fwd, Exported) and isinstance(bwd, Exported) and fwd.meta is None and bwd.meta is None):
        raise fmt.FormatError("deserialize: an aot export's halves must be pure programs")
    if not (set(table) == {"num_outputs", "saved_inputs"} and type(num_outputs) is int
            and 0 <= num_outputs <= len(fwd.out_avals) and isinstance(saved, list) and len(saved) <= len(bwd.in_avals)
            and all(i is None or (type(i) is int and 0 <= i < len(fwd.in_avals)) for i in saved)
            and sum(i is None for i in saved) == len(fwd.out_avals) - num_outputs):
        raise fmt.FormatError("deserialize: the aot export's table does not match its forward and backward programs")
    return AotExport(fwd, bwd, num_outputs, saved)


def export(fun: Callable, *, platforms: tuple[str, ...] | None = None) -> Callable[..., Exported]:
    """`export(f)(*args, **kwargs)`: trace `f` for arguments like these and export its program (see the module's
    docstring). `platforms` as `jax.export.export`'s (default: this machine's backend). An argument may be a
    `jax.ShapeDtypeStruct`, its shape symbolic (`jax.export.symbolic_shape`): one export for every batch size.

    >>> b, = jax.export.symbolic_shape("b")
    >>> exp = aotjax.export(lambda x, w: (x @ w).relu().mean())(
    ...     jax.ShapeDtypeStruct((b, 3), aotjax.float32), aotjax.ones(3, 2))
    >>> exp.call(aotjax.ones(4, 3), aotjax.ones(3, 2)), exp.call(aotjax.ones(8, 3), aotjax.ones(3, 2))
    (tensor(3.), tensor(3.))

    >>> def step(x, buf):
    ...     buf.add_(x)
    ...     return buf[0]
    >>> exp = aotjax.export(step)(aotjax.ones(2), aotjax.zeros(2))
    >>> buf = aotjax.zeros(2)
    >>> first = exp.call(aotjax.ones(2), buf)
    >>> buf, first
    (tensor([1., 1.]), tensor(1.))
    >>> buf[0] is not first, float(buf[0]) == float(first)   # an output viewing an input is a view of it
    (True, True)
    """
    def exporter(*args, **kwargs) -> Exported:
        args, kwargs = abstract_arguments(args, kwargs)
        with symbolic_errors("export"):
            staged = stage_functionalized(fun, args, kwargs, (), "export", live=False)
        meta = staged.meta
        n_explicit = len(meta.groups) - len(staged.implicit)
        if any(_symbolic_in(step.params) for spec in meta.outputs for step in spec.chain):
            raise UnsupportedError(f"export: {fun_name(fun)} returns a view of an argument whose shape is symbolic; "
                                   f"the view could not be replayed on a call's arguments: return a copy (`.clone()`)")
        if any(g >= n_explicit for g in meta.mutated):
            raise UnsupportedError(f"export: {fun_name(fun)} writes a tensor it captures; an exported program has no "
                                   f"caller's state to write back: pass that tensor as an argument")
        staged.release()
        program = jax.export.export(jax.jit(flat_function(staged.jaxpr)), platforms=platforms)(
            *avals_to_structs(staged.jaxpr.in_avals))
        in_tree = jax.tree_util.tree_structure((list(args), kwargs))
        return Exported(program, meta, in_tree, fun_name(fun))

    return exporter


class AotExport:
    """`aot(f).lower(*args).export()`: the forward and the backward as `Exported` pure programs. `num_outputs`
    forward outputs come before the residuals it returns; `saved_inputs[k]` is the index of the primal input that
    residual k is (passed to the backward by the caller), or None (the forward returns it). `residuals_from(
    primals, forward_outputs)` gives the backward's residual inputs; `serialize()` gives bytes for
    `aotjax.deserialize`."""

    def __init__(self, forward: Exported, backward: Exported, num_outputs: int, saved_inputs: list):
        self.forward, self.backward = forward, backward
        self.num_outputs, self.saved_inputs = num_outputs, list(saved_inputs)

    def residuals_from(self, primals, forward_outputs) -> list:
        returned = iter(forward_outputs[self.num_outputs:])
        return [primals[i] if i is not None else next(returned) for i in self.saved_inputs]

    def serialize(self) -> bytes:
        """Bytes holding both programs and the residual table, as data only (`aotjax.deserialize` reads them)."""
        return fmt.pack_pair(self.forward.serialize(), self.backward.serialize(),
                             {"num_outputs": self.num_outputs, "saved_inputs": list(self.saved_inputs)})

    def __repr__(self) -> str:
        return f"AotExport({self.forward.name}, {self.backward.name})"


def export_program(closed, name: str, input_names: list[str], output_names: list[str],
                   platforms: tuple[str, ...] | None = None) -> Exported:
    """A pure program (a ClosedJaxpr: `aot`'s forward or backward) exported, its inputs and outputs named by
    their descriptors."""
    program = jax.export.export(jax.jit(flat_function(closed)), platforms=platforms)(*avals_to_structs(closed.in_avals))
    return Exported(program, None, None, name, (list(input_names), list(output_names)))


def abstract_arguments(args, kwargs) -> tuple:
    """`(args, kwargs)` with each `jax.ShapeDtypeStruct` leaf replaced by a tensor that has only its shape and dtype
    (its shape may be symbolic): something to trace a program for, never to read."""
    def placeholder(x):
        if not isinstance(x, jax.ShapeDtypeStruct):
            return x
        t = Tensor._wrap(None)
        t._aval = ShapedArray(tuple(x.shape), canonicalize_dtype(x.dtype))
        return t

    if not any(isinstance(x, jax.ShapeDtypeStruct) for x in jax.tree_util.tree_leaves((args, kwargs))):
        return args, kwargs  # NOTE: as they are: a pytree rebuilt (a module, say) would be another object
    return jax.tree_util.tree_map(placeholder, (tuple(args), dict(kwargs)))


@contextlib.contextmanager
def symbolic_errors(what: str):
    """An op that cannot take a symbolic dimension (it compares one with a number, or needs its value) raises, inside,
    an error naming the op and the user's line."""
    try:
        yield
    except Exception as e:
        if not _about_symbolic_dims(e):
            raise
        op = _op_of(e)
        raise UnsupportedError(f"{what}: `{op}` does not support symbolic dimensions (a batch-polymorphic shape) "
                               f"{_user_frame(e)}: it needs a dimension's value ({type(e).__name__}: "
                               f"{str(e).splitlines()[0]}). Export with concrete shapes, or write the computation "
                               f"with ops that keep a symbolic size (elementwise ops, matmuls, reductions, "
                               f"reshape(-1)).") from None


def _about_symbolic_dims(e: Exception) -> bool:
    return type(e).__name__ == "InconclusiveDimensionOperation" or "_DimExpr" in str(e)


def _frames(e: Exception) -> list:
    return traceback.extract_tb(e.__traceback__)


def _user_index(frames) -> int:
    """The index of the last frame outside aotjax and jax, before the error's frames inside them."""
    inside = [is_internal(f.filename) for f in frames]
    k = len(frames) - 1
    while k >= 0 and inside[k]:
        k -= 1
    return k


def _op_of(e: Exception) -> str:
    """The op the user's code called when `e` was raised (`view`, `getitem`), or the rule of an op that a transform
    ran (`indexing.py:224`)."""
    frames = _frames(e)
    ops = [f for f in frames[_user_index(frames) + 1:] if in_package(f.filename, "ops", "")
           or in_package(f.filename, "tensor.py")]
    if not ops:
        return "an op"
    f = ops[0]
    return f.name if f.name.isidentifier() else f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno}"


def _user_frame(e: Exception) -> str:
    frames = _frames(e)
    k = _user_index(frames)
    return f"(at {frames[k].filename.rsplit('/', 1)[-1]}:{frames[k].lineno} ({frames[k].name}))" if k >= 0 else ""


def _symbolic_in(params) -> bool:
    if isinstance(params, (tuple, list)):
        return any(_symbolic_in(p) for p in params)
    return jax.export.is_symbolic_dim(params)


def _arguments_mismatch(want, got) -> str:
    """How a call's arguments (`got`, the structure of `(list(args), kwargs)`) differ from the exported ones."""
    def described(tree) -> tuple[int, list]:
        args, kwargs = tree.children()
        return len(args.children()), sorted(kwargs.node_data()[1] or [])

    (n_want, kw_want), (n_got, kw_got) = described(want), described(got)
    if n_want != n_got or kw_want != kw_got:
        kws = lambda kw: f" and keywords {', '.join(map(str, kw))}" if kw else ""  # noqa: E731
        return (f"was exported for {n_want} positional argument(s){kws(kw_want)}; the call gave {n_got}"
                f"{kws(kw_got)}")
    return (f"was exported for arguments structured as {want.children()}, but the call's are structured as "
            f"{got.children()} (the same nesting of lists, tuples and dicts is needed)")


def _check_input(name: str, arg: str, v, aval) -> None:
    """A call's input `arg` against the exported abstract value (a symbolic dimension takes any size here; the
    program checks that the sizes agree)."""
    ok = len(v.shape) == len(aval.shape) and all(not isinstance(d, int) or d == n for d, n in zip(aval.shape, v.shape))
    if not ok or v.dtype != aval.dtype:
        raise TypeError(f"export: {name}'s input {arg} must be {_shape_str(aval)} as exported, got {_shape_str(v)}")


def _shape_str(x) -> str:
    return f"{np_dtype_name(x.dtype)}[{', '.join(map(str, x.shape))}]"


def np_dtype_name(dtype) -> str:
    return str(getattr(dtype, "name", dtype))


def read_value(x):
    """A call argument's value: a Tensor's array, or an array as it is."""
    return read(x) if isinstance(x, Tensor) else jax.numpy.asarray(x)
