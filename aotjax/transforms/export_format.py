"""The bytes of an export, in a data-only format: loading bytes from anywhere runs no code from them.

An `Exported` is written as `b"AOTJAXEXP"`, then the format version (u32), the program's length and the table's
(u64 each, little-endian), then jax's serialized program (`jax.export.Exported.serialize()`, a flatbuffer), then the
boundary table as UTF-8 JSON. An `AotExport` is `b"AOTJAXPAIR"`, the version, three lengths, the forward's and the
backward's blobs (each an `Exported`'s) and a JSON table.

The table holds only data: numbers, strings, lists and tagged objects (`{"tuple": [...]}`, `{"view": [primitive
name, params]}`, `{"array": [dtype, shape, base64]}`, ...). Reading it resolves names only in fixed tables of
aotjax's own (view primitives, the boundary's enums and records, dtypes, aotjax's result namedtuples); nothing is
imported and no class is looked up by a name the bytes choose. Every length is checked against the bytes before
anything is allocated, and the table is checked against the program (its inputs, outputs and every view step,
evaluated abstractly): bad bytes raise a `ValueError` that says what is wrong, at load time.

aotjax's exports before version 2 held a pickle; they are refused (re-export them with this aotjax).
"""
from __future__ import annotations

import base64
import collections
import dataclasses
import enum
import json
import struct
import sys
from typing import Any

import jax
import numpy as np

from aotjax import dtypes
from aotjax.core.avals import ShapedArray
from aotjax.core.primitive import Kind, Primitive, abstract_eval, all_primitives
from aotjax.core.views import ViewStep
from aotjax.interpreters.lowering import lowered_avals
from aotjax.runtime.boundary import BoundaryMeta, GroupKind, InputGroup, OutKind, OutSpec, Slot
from aotjax.tensor import Tensor

MAGIC = b"AOTJAXEXP"
PAIR_MAGIC = b"AOTJAXPAIR"
VERSION = 2  # NOTE: 1 was a pickled table (refused); bump this when the table's records change shape
_HEAD = struct.Struct("<IQQ")
_PAIR_HEAD = struct.Struct("<IQQQ")

_ENUMS = {cls.__name__: cls for cls in (GroupKind, OutKind, Slot)}
_RECORDS = {cls.__name__: cls for cls in (InputGroup, OutSpec, BoundaryMeta)}
_DTYPES = {np.dtype(d).name: np.dtype(d) for d in (
    dtypes.bool, dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64, dtypes.uint8, np.uint16, dtypes.uint32,
    np.uint64, dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64, dtypes.complex64, dtypes.complex128)}


class FormatError(ValueError):
    """Bytes that are not a well-formed aotjax export."""


# -- whole blobs -------------------------------------------------------------------------------------
def pack(program: bytes, table: dict) -> bytes:
    text = _dumps(table)
    return MAGIC + _HEAD.pack(VERSION, len(program), len(text)) + program + text


def unpack(blob: bytes) -> tuple[bytes, dict]:
    """`(program bytes, table)` of an `Exported`'s blob, its header and lengths checked."""
    version, n_program, n_table = _header(blob, MAGIC, _HEAD, "an export")
    start = len(MAGIC) + _HEAD.size
    _check_lengths(blob, start, (n_program, n_table), ("program", "boundary table"))
    program = blob[start:start + n_program]
    return program, _loads(blob[start + n_program:start + n_program + n_table])


def pack_pair(forward: bytes, backward: bytes, table: dict) -> bytes:
    text = _dumps(table)
    return PAIR_MAGIC + _PAIR_HEAD.pack(VERSION, len(forward), len(backward), len(text)) + forward + backward + text


def unpack_pair(blob: bytes) -> tuple[bytes, bytes, dict]:
    """`(forward blob, backward blob, table)` of an `AotExport`'s blob."""
    version, n_fwd, n_bwd, n_table = _header(blob, PAIR_MAGIC, _PAIR_HEAD, "an aot export")
    start = len(PAIR_MAGIC) + _PAIR_HEAD.size
    _check_lengths(blob, start, (n_fwd, n_bwd, n_table), ("forward", "backward", "table"))
    mid = start + n_fwd
    return blob[start:mid], blob[mid:mid + n_bwd], _loads(blob[mid + n_bwd:mid + n_bwd + n_table])


def _header(blob: bytes, magic: bytes, head: struct.Struct, what: str) -> tuple:
    if len(blob) < len(magic) + head.size:
        if len(blob) >= len(magic) + 4 and struct.unpack_from("<I", blob, len(magic))[0] == 1:
            _refuse_version_1(what)
        raise FormatError(f"deserialize: the bytes end inside the header of {what} ({len(blob)} bytes; the header "
                          f"alone is {len(magic) + head.size}): they are truncated")
    fields = head.unpack_from(blob, len(magic))
    if fields[0] == 1 or blob[len(magic):len(magic) + 1] == b"\x80":  # NOTE: a pair's v1 table followed the magic
        _refuse_version_1(what)
    if fields[0] != VERSION:
        raise FormatError(f"deserialize: {what} in format version {fields[0]}; this aotjax reads version {VERSION} "
                          f"(re-export it with this aotjax)")
    return fields


def _refuse_version_1(what: str):
    raise FormatError(f"deserialize: {what} in format version 1, whose boundary table is a pickle: loading it could "
                      f"run code from the bytes, so it is refused. Re-export it with this aotjax "
                      f"(`aotjax.export(f)(*args).serialize()`, `aot(f).lower(*args).export().serialize()`).")


def _check_lengths(blob: bytes, start: int, lengths: tuple, names: tuple) -> None:
    at = start
    for n, name in zip(lengths, names, strict=True):
        if at + n > len(blob):
            raise FormatError(f"deserialize: the header says the {name} is {n} bytes from byte {at}, but the bytes "
                              f"end at {len(blob)}: they are truncated or corrupted")
        at += n
    if at != len(blob):
        raise FormatError(f"deserialize: {len(blob) - at} bytes follow the end the header gives ({at}): the bytes "
                          f"are corrupted")


def _dumps(table: dict) -> bytes:
    return json.dumps(table, separators=(",", ":"), allow_nan=False).encode()


def _loads(text: bytes) -> dict:
    try:
        table = json.loads(text.decode("utf-8"), parse_constant=_no_constant)
    except RecursionError:
        raise FormatError("deserialize: the boundary table is nested too deeply to be one aotjax writes") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise FormatError(f"deserialize: the boundary table is not valid JSON ({e})") from None
    if not isinstance(table, dict):
        raise FormatError(f"deserialize: the boundary table is a JSON {type(table).__name__}, not an object")
    return table


def _no_constant(name: str):
    raise FormatError(f"deserialize: the boundary table holds the non-JSON constant {name}")


# -- values ------------------------------------------------------------------------------------------
def encode(x: Any) -> Any:
    """`x` as JSON data (see the module's docstring); anything else is refused, naming its type."""
    if x is None or isinstance(x, (bool, str)):
        return x
    if isinstance(x, enum.Enum) and _ENUMS.get(type(x).__name__) is type(x):
        return {"enum": [type(x).__name__, x.value]}
    if isinstance(x, (int, np.integer)) and not isinstance(x, enum.Enum):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return {"float": float(x).hex()}
    if isinstance(x, (complex, np.complexfloating)):
        return {"complex": [float(x.real).hex(), float(x.imag).hex()]}
    if isinstance(x, list):
        return [encode(v) for v in x]
    if isinstance(x, tuple) and type(x) is tuple:
        return {"tuple": [encode(v) for v in x]}
    if isinstance(x, dict) and type(x) is dict:
        return {"dict": [[encode(k), encode(v)] for k, v in x.items()]}
    if isinstance(x, np.dtype):
        return {"dtype": x.name}
    if isinstance(x, ShapedArray):
        return {"aval": [[encode_dim(d) for d in x.shape], x.dtype.name]}
    if isinstance(x, ViewStep):
        return {"view": [x.prim.name, [[k, encode(v)] for k, v in x.params]]}
    if type(x).__name__ in _RECORDS and type(x) is _RECORDS[type(x).__name__]:
        fields = {f.name: encode(getattr(x, f.name)) for f in dataclasses.fields(x)}
        return {"record": [type(x).__name__, fields]}
    if isinstance(x, jax.tree_util.PyTreeDef):
        return {"tree": _encode_tree(x)}
    if jax.export.is_symbolic_dim(x):
        return {"dim": str(x)}
    if isinstance(x, Tensor):
        return {"tensor": _encode_array(np.asarray(x.numpy()))}
    if isinstance(x, (np.ndarray, jax.Array)):
        return {"array": _encode_array(np.asarray(x))}
    raise TypeError(f"serialize: an export's boundary holds a {type(x).__module__}.{type(x).__qualname__}, which "
                    f"the data-only export format cannot hold (it holds tensors, numbers, strings, dtypes, and "
                    f"lists, tuples, dicts and aotjax's named results of those)")


def encode_dim(d) -> Any:
    return d if type(d) is int else {"dim": str(d)}


def _encode_array(a: np.ndarray) -> list:
    if a.dtype.name not in _DTYPES:
        raise TypeError(f"serialize: an export holds an array of dtype {a.dtype}, which the format cannot hold")
    return [a.dtype.name, list(a.shape), base64.b64encode(np.ascontiguousarray(a).tobytes()).decode()]


class Decoder:
    """Reads one table's values back; symbolic dimensions share one `jax.export.SymbolicScope`, as they did when
    exported. Every malformed value raises `FormatError` naming what was expected."""

    def __init__(self):
        self.scope = jax.export.SymbolicScope()
        self._tags = {"float": self._float, "complex": self._complex, "tuple": self._tuple, "dict": self._dict,
                      "dtype": self._dtype, "enum": self._enum, "dim": self._dim, "aval": self._aval,
                      "view": self._view, "record": self._record, "tree": self._tree, "tensor": self._tensor,
                      "array": self._array}

    def __call__(self, x: Any) -> Any:
        if x is None or isinstance(x, (bool, str, int)):
            return x
        if isinstance(x, list):
            return [self(v) for v in x]
        if not (isinstance(x, dict) and len(x) == 1):
            raise FormatError(f"deserialize: the boundary table holds {_short(x)} where a value was expected")
        (tag, body), = x.items()
        if tag not in self._tags:
            raise FormatError(f"deserialize: the boundary table holds a value tagged {tag[:40]!r}, which is not one "
                              f"of the format's")
        return self._tags[tag](body)

    def _float(self, body):
        try:
            return float.fromhex(_expect(body, str, "a float's hex text"))
        except ValueError:
            raise FormatError(f"deserialize: {body[:40]!r} is not a float's hex text") from None

    def _complex(self, body):
        re, im = _pair(body, "a complex number")
        return complex(self._float(re), self._float(im))

    def _tuple(self, body):
        return tuple(self(v) for v in _expect(body, list, "a tuple's items"))

    def _dict(self, body):
        out = {}
        for item in _expect(body, list, "a dict's items"):
            k, v = _pair(item, "a dict item")
            key = self(k)
            if not isinstance(key, (str, int, float, bool, type(None))):
                raise FormatError(f"deserialize: a dict key of the boundary table is a {type(key).__name__}")
            out[key] = self(v)
        return out

    def _dtype(self, body):
        name = _expect(body, str, "a dtype name")
        if name not in _DTYPES:
            raise FormatError(f"deserialize: the boundary table names the dtype {name[:40]!r}, which is not one "
                              f"aotjax has")
        return _DTYPES[name]

    def _enum(self, body):
        name, value = _pair(body, "an enum member")
        cls = _ENUMS.get(name) if isinstance(name, str) else None
        if cls is None or not isinstance(value, str) or value not in {m.value for m in cls}:
            raise FormatError(f"deserialize: the boundary table holds the enum member {_short(body)}, which is not "
                              f"one of the format's")
        return cls(value)

    def _dim(self, text):
        text = _expect(text, str, "a symbolic dimension's text")
        try:
            return jax.export.symbolic_shape(text, scope=self.scope)[0]
        except Exception as e:
            raise FormatError(f"deserialize: the boundary table's dimension {text[:80]!r} is not one jax can read "
                              f"({type(e).__name__})") from None

    def _shape(self, dims) -> tuple:
        out = []
        for d in _expect(dims, list, "a shape"):
            if type(d) is int and d >= 0:
                out.append(d)
            elif isinstance(d, dict) and list(d) == ["dim"]:
                out.append(self._dim(d["dim"]))
            else:
                raise FormatError(f"deserialize: the boundary table holds {_short(d)} where a dimension was expected")
        return tuple(out)

    def _aval(self, body):
        shape, dtype = _pair(body, "an abstract value")
        return ShapedArray(self._shape(shape), self._dtype(dtype))

    def _view(self, body):
        name, params = _pair(body, "a view step")
        prim = _view_primitives().get(name) if isinstance(name, str) else None
        if prim is None:
            raise FormatError(f"deserialize: a view step of the boundary table names {str(name)[:80]!r}, which is "
                              f"not one of aotjax's view primitives")
        items = [_pair(p, "a view step's parameter") for p in _expect(params, list, "a view step's parameters")]
        if not all(isinstance(k, str) for k, _ in items):
            raise FormatError("deserialize: a view step's parameter names must be strings")
        return ViewStep(prim, tuple((k, self(v)) for k, v in items))

    def _record(self, body):
        name, fields = _pair(body, "a record")
        cls = _RECORDS.get(name) if isinstance(name, str) else None
        if cls is None:
            raise FormatError(f"deserialize: the boundary table holds a record named {str(name)[:80]!r}, which is "
                              f"not one of the format's")
        want = {f.name for f in dataclasses.fields(cls)}
        if not isinstance(fields, dict) or set(fields) != want:
            raise FormatError(f"deserialize: a {name} record must have the fields {sorted(want)}")
        return cls(**{k: self(v) for k, v in fields.items()})

    def _tree(self, body):
        try:
            return jax.tree_util.tree_structure(self._skeleton(body, depth=0))
        except FormatError:
            raise
        except Exception as e:
            raise FormatError(f"deserialize: a pytree structure of the boundary table is malformed "
                              f"({type(e).__name__})") from None

    def _skeleton(self, node, depth: int):
        if depth > 256:
            raise FormatError("deserialize: a pytree of the boundary table is nested too deeply")
        if node == "*":
            return _Leaf()
        if node is None:
            return None
        kind, *rest = _expect(node, list, "a pytree node") or [None]

        def children(xs):
            return [self._skeleton(c, depth + 1) for c in _expect(xs, list, "a node's children")]

        if kind == "tuple" and len(rest) == 1:
            return tuple(children(rest[0]))
        if kind == "list" and len(rest) == 1:
            return children(rest[0])
        if kind in ("dict", "ordered") and len(rest) == 2:
            keys, values = self(rest[0]), children(rest[1])
            if not (isinstance(keys, list) and len(keys) == len(values) and len(set(map(repr, keys))) == len(keys)
                    and all(isinstance(k, (str, int)) for k in keys)):
                raise FormatError("deserialize: a dict node's keys must be distinct strings or integers, one per "
                                  "child")
            return (dict if kind == "dict" else collections.OrderedDict)(zip(keys, values))
        if kind == "named" and len(rest) == 2:
            cls, values = _named_result(rest[0]), children(rest[1])
            if len(values) != len(cls._fields):
                raise FormatError(f"deserialize: a {cls.__name__} node needs {len(cls._fields)} children")
            return cls(*values)
        raise FormatError(f"deserialize: a pytree node of the boundary table is {_short(node)}, not one of the "
                          f"format's (a leaf, None, tuple, list, dict, or one of aotjax's named results)")

    def _tensor(self, body):
        return Tensor._wrap(jax.numpy.asarray(self._numpy(body)))

    def _array(self, body):
        return jax.numpy.asarray(self._numpy(body))

    def _numpy(self, body) -> np.ndarray:
        if not (isinstance(body, list) and len(body) == 3):
            raise FormatError("deserialize: an array must be [dtype, shape, base64 data]")
        dtype, shape, data = self._dtype(body[0]), self._shape(body[1]), _expect(body[2], str, "base64 data")
        if not all(type(d) is int for d in shape):
            raise FormatError("deserialize: an array's shape must be integers")
        size = int(np.prod(shape, dtype=object)) * dtype.itemsize
        held = len(data) // 4 * 3 - data[-2:].count("=") if len(data) % 4 == 0 else -1
        if held != size:  # NOTE: checked before decoding or allocating anything
            raise FormatError(f"deserialize: an array of shape {list(shape)} and dtype {dtype} needs {size} bytes; "
                              f"the table's data is {len(data)} base64 characters")
        try:
            raw = base64.b64decode(data, validate=True)
        except ValueError:
            raise FormatError("deserialize: an array's data is not valid base64") from None
        return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()


class _Leaf:
    """A leaf of a skeleton pytree (any object jax does not flatten)."""


def _encode_tree(tree) -> Any:
    if tree.num_nodes == 1 and tree.num_leaves == 1:
        return "*"
    kind, aux = tree.node_data()
    children = [_encode_tree(c) for c in tree.children()]
    if kind is type(None):
        return None
    if kind is tuple:
        return ["tuple", children]
    if kind is list:
        return ["list", children]
    if kind is dict:
        return ["dict", encode(list(aux)), children]
    if kind is collections.OrderedDict:
        return ["ordered", encode(list(aux)), children]
    if _is_named_result(kind):
        return ["named", f"{kind.__module__}:{kind.__qualname__}", children]
    raise TypeError(f"serialize: the export's arguments or results hold a {kind.__module__}.{kind.__qualname__}, "
                    f"which the data-only export format cannot name: use tuples, lists, dicts or aotjax's results")


def _is_named_result(cls) -> bool:
    return (isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields")
            and (cls.__module__ == "aotjax" or cls.__module__.startswith("aotjax.")))


def _named_result(text) -> type:
    """One of aotjax's own result namedtuples (`sort`, `topk`, ...) by `module:qualname`, looked up only among
    modules already imported: nothing is imported, and anything but such a class is refused."""
    module, _, qualname = text.partition(":") if isinstance(text, str) else ("", "", "")
    owner = sys.modules.get(module) if module.startswith("aotjax.") or module == "aotjax" else None
    # NOTE: a namedtuple's class is often bound under another name than its own (`SortResult` is `sort`)
    found = [v for v in (vars(owner).values() if owner is not None else ())
             if isinstance(v, type) and v.__qualname__ == qualname and _is_named_result(v)]
    cls = found[0] if found else None
    if cls is None:
        raise FormatError(f"deserialize: a pytree node names {str(text)[:80]!r}, which is not one of aotjax's "
                          f"named results")
    return cls


def _view_primitives() -> dict[str, Primitive]:
    return {p.name: p for p in all_primitives() if p.kind is Kind.VIEW}


def _expect(x, kind, what: str):
    if not isinstance(x, kind) or (kind is int and isinstance(x, bool)):
        raise FormatError(f"deserialize: the boundary table holds {_short(x)} where {what} was expected")
    return x


def _pair(x, what: str) -> list:
    if not (isinstance(x, list) and len(x) == 2):
        raise FormatError(f"deserialize: the boundary table holds {_short(x)} where {what} (a pair) was expected")
    return x


def _short(x) -> str:
    text = json.dumps(x) if not isinstance(x, (bytes, bytearray)) else repr(x)
    return text if len(text) <= 60 else text[:57] + "..."


# -- the table against the program ------------------------------------------------------------------
def check_meta(meta: BoundaryMeta, in_tree, in_avals, out_avals) -> None:
    """`meta` (read from bytes) against the program it came with: every index in range, every group's value the
    program's input, every view step applicable to what it views. Raises `FormatError` naming the mismatch."""
    if not isinstance(meta, BoundaryMeta):
        raise FormatError("deserialize: the boundary table's `meta` is not a boundary record")
    groups, n_leaves = meta.groups, in_tree.num_leaves
    _check(isinstance(groups, list) and all(isinstance(g, InputGroup) for g in groups), "its groups are not records")
    _check(len(groups) == len(in_avals), f"it has {len(groups)} input groups for a program of {len(in_avals)} inputs")
    seen: set[int] = set()
    for k, (g, aval) in enumerate(zip(groups, in_avals, strict=True)):
        _check(g.objects == [] and isinstance(g.kind, GroupKind) and isinstance(g.aval, ShapedArray),
               f"input group {k} is malformed")
        _check(_same_aval(g.aval, aval), f"input group {k} is {g.aval.str_short()}, the program's input {k} is "
                                         f"{aval.dtype}{list(aval.shape)}")
        _check(isinstance(g.leaves, list) and len(g.leaves) == len(g.chains) >= 1, f"input group {k} is malformed")
        for idxs, chain in zip(g.leaves, g.chains, strict=True):
            _check(isinstance(idxs, list) and idxs and all(_index(i, n_leaves) and i not in seen for i in idxs),
                   f"input group {k} names arguments out of range or twice")
            seen.update(idxs)
            _check_chain(chain, g.aval, f"input group {k}'s view")
    n_groups, mutated = len(groups), meta.mutated
    _check(isinstance(mutated, list) and all(_index(g, n_groups) for g in mutated)
           and len(set(mutated)) == len(mutated), "its written groups are out of range")
    _check(_index(meta.n_bases, len(out_avals) + 1), "its number of intermediate bases is out of range")
    want_layout = sorted([(Slot.BASE, k) for k in range(meta.n_bases)] + [(Slot.MUTATED, g) for g in mutated],
                         key=repr)
    layout = meta.layout
    _check(isinstance(layout, list) and len(layout) == len(out_avals)
           and all(isinstance(e, tuple) and len(e) == 2 for e in layout)
           and sorted(layout, key=repr) == want_layout, "its output layout does not match the program's outputs")
    out_aval = {entry: out_avals[i] for i, entry in enumerate(layout)}
    for g in mutated:
        _check(_same_aval(groups[g].aval, out_aval[(Slot.MUTATED, g)]), f"written group {g}'s new value has another "
                                                                        f"type in the program")
    _check(isinstance(meta.outputs, list) and meta.out_tree.num_leaves == len(meta.outputs),
           "its output structure and its outputs differ in number")
    for k, spec in enumerate(meta.outputs):
        _check_output(k, spec, groups, meta.n_bases, out_aval)
    _check(isinstance(meta.metadata, list), "its view changes are malformed")
    for gi, oi, steps in (e if isinstance(e, tuple) and len(e) == 3 else (None, None, None) for e in meta.metadata):
        _check(_index(gi, n_groups) and _index(oi, len(groups[gi].leaves)), "a view change names an input out of "
                                                                             "range")
        _check(isinstance(steps, tuple), f"input {gi}'s view change is malformed")
        _check_chain(groups[gi].chains[oi] + steps, groups[gi].aval, f"input {gi}'s view change")
    for names, n in ((meta.input_names, n_leaves), (meta.output_names, len(meta.outputs))):
        _check(isinstance(names, list) and len(names) in (0, n) and all(isinstance(s, str) for s in names),
               "its argument names do not match the arguments")


def _check_output(k: int, spec, groups, n_bases: int, out_aval: dict) -> None:
    _check(isinstance(spec, OutSpec) and isinstance(spec.kind, OutKind), f"output {k} is malformed")
    _check(isinstance(spec.chain, tuple) and all(isinstance(s, ViewStep) for s in spec.chain),
           f"output {k}'s view is malformed")
    _check(isinstance(spec.layout, tuple) and len(spec.layout) == 2, f"output {k}'s layout is malformed")
    if spec.kind is OutKind.INPUT:
        _check(_index(spec.index, len(groups)) and _index(spec.obj, len(groups[spec.index].leaves)),
               f"output {k} names an input out of range")
    elif spec.kind is OutKind.ALIAS:
        _check(_index(spec.index, len(groups)), f"output {k} views an input out of range")
        _check_chain(spec.chain, groups[spec.index].aval, f"output {k}'s view")
    elif spec.kind is OutKind.BASE:
        _check(_index(spec.index, n_bases), f"output {k} views an intermediate base out of range")
        _check_chain(spec.chain, out_aval[(Slot.BASE, spec.index)], f"output {k}'s view")
    elif spec.chain:
        _check(isinstance(spec.value, (jax.Array, Tensor)), f"output {k} views a constant that is not an array")
        _check_chain(spec.chain, ShapedArray(spec.value.shape, spec.value.dtype), f"output {k}'s view")


def _check_chain(chain, aval, what: str) -> None:
    _check(isinstance(chain, tuple) and all(isinstance(s, ViewStep) for s in chain), f"{what} is malformed")
    for step in chain:
        try:
            out, = abstract_eval(step.prim, [aval], dict(step.params))
            if (lowered := lowered_avals(step.prim, [aval], dict(step.params))[0]) != out:
                raise ValueError(f"its result would be {lowered.str_short()}, not {out.str_short()}")
            aval = out
        except Exception as e:
            raise FormatError(f"deserialize: the boundary table does not match the program: {what} applies "
                              f"{step.prim.name} with parameters it cannot take ({type(e).__name__}: "
                              f"{str(e).splitlines()[0][:200] if str(e) else ''})") from None


def _same_aval(a, b) -> bool:
    return isinstance(a, ShapedArray) and a.dtype == b.dtype and tuple(map(str, a.shape)) == tuple(map(str, b.shape))


def _index(i, n: int) -> bool:
    return type(i) is int and 0 <= i < n


def _check(ok: bool, what: str) -> None:
    if not ok:
        raise FormatError(f"deserialize: the boundary table does not match the program: {what}")
