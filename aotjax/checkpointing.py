"""`aotjax.save` and `aotjax.load`: checkpoints of what torch users save (a module's or an optimizer's `state_dict()`,
a dict bundling them with an epoch number, a tensor, a list of tensors), with torch's names.

A checkpoint is a directory (torch writes one file) of two parts:
- `arrays/`: the tensors, written and read by orbax-checkpoint: each process writes its own shards of a sharded
  array, and loading reads each shard straight into the placement asked for (another mesh, fewer devices, one
  device), so a big state never passes through one device;
- `aotjax.json`: the structure around them (dicts and their key types, lists vs tuples, Python scalars, None,
  strings) and each tensor's name, shape and dtype: plain data, checked on loading. Nothing in a checkpoint is
  executed: no pickle, no eval.

Saved to a file object (`io.BytesIO`, an open file), as torch users also do, a checkpoint is one zip archive of the
same description and each tensor's bytes (`arrays/<i>`), read back with the dtype and shape the description gives:
still nothing executed. A path to such an archive loads too.

orbax-checkpoint is imported on the first save or load to a directory (`pip install "aotjax[checkpoint]"`), never
by `import aotjax`.
"""
from __future__ import annotations

import collections
import json
import math
import os
import shutil
import zipfile
from dataclasses import dataclass, field
from typing import Any, Callable

import jax
import numpy as np

from aotjax.core.avals import canonicalize_dtype
from aotjax.core.interpreter import Tracer
from aotjax.core.source_info import where
from aotjax.interpreters.eval import read
from aotjax.ops.base.frontend import device as to_device
from aotjax.tensor import Tensor

DESCRIPTION, ARRAYS, FORMAT, VERSION = "aotjax.json", "arrays", "aotjax-checkpoint", 1
_SCALARS = (bool, int, float, str, type(None))
_CONTAINERS = {list: "list", tuple: "tuple", dict: "dict", collections.OrderedDict: "odict"}
_BUILD = {"list": list, "tuple": tuple, "dict": dict, "odict": collections.OrderedDict}


def _orbax():
    """orbax.checkpoint, imported when first needed (it is an optional dependency)."""
    try:
        import orbax.checkpoint as ocp
    except ImportError as e:
        raise ImportError(f"aotjax.save/aotjax.load write and read tensors with orbax-checkpoint, which is not "
                          f"installed ({e}); install it with `pip install \"aotjax[checkpoint]\"`.") from e
    return ocp


# -- save: the structure as JSON, the tensors for orbax --------------------------------------------------------------
@dataclass
class _Writer:
    """What `_encode` collects: each distinct tensor once (a tensor saved twice loads as one tensor twice)."""
    arrays: dict = field(default_factory=dict)  # orbax key -> jax array (zero-size tensors have none: no data)
    entries: list = field(default_factory=list)  # one description per tensor
    index: dict = field(default_factory=dict)  # id(tensor) -> its entry
    keep: list = field(default_factory=list)  # the tensors, alive while `index` holds their ids
    active: set = field(default_factory=set)  # ids of the containers being encoded (a cycle is an error)


def _encode(x, path: tuple, w: _Writer):
    """The JSON node of `x`: a JSON scalar as itself, a container as `{kind: items}`, a tensor as `{"tensor": i}`."""
    if type(x) in _SCALARS:
        return x
    if isinstance(x, Tensor):
        return {"tensor": _encode_tensor(x, path, w)}
    kind = _CONTAINERS.get(type(x))
    if kind is None:
        plain = _plain(x)
        if type(plain) in _SCALARS:
            return plain
        raise TypeError(_unsupported(x, path))
    if id(x) in w.active:
        raise TypeError(f"save: {_render(path)} contains itself (a reference cycle){where()}; save a structure "
                        f"without cycles")
    w.active.add(id(x))
    if kind in ("dict", "odict"):
        node = [[_key(k, path), _encode(v, path + (k,), w)] for k, v in x.items()]
    else:
        node = [_encode(v, path + (i,), w) for i, v in enumerate(x)]
    w.active.discard(id(x))
    return {kind: node}


def _encode_tensor(t: Tensor, path: tuple, w: _Writer) -> int:
    if isinstance(t, Tracer):
        raise TypeError(f"save: {_render(path)} is a traced tensor ({t.aval.str_short()}){where()}; save outside "
                        f"jit/grad/vmap, from the concrete tensors the call returned")
    if id(t) not in w.index:
        from aotjax.nn.parameter import Parameter  # NOTE: lazy: aotjax.nn imports far more than this module needs

        i = len(w.entries)
        w.entries.append({"name": ".".join(str(k) for k in path), "shape": list(t.shape),
                          "dtype": np.dtype(t.dtype).name, "requires_grad": bool(t.requires_grad),
                          "parameter": isinstance(t, Parameter)})
        if t.numel():  # NOTE: orbax writes no zero-size array; its shape and dtype are all there is to it
            w.arrays[str(i)] = read(t)
        w.index[id(t)] = i
        w.keep.append(t)
    return w.index[id(t)]


def _key(k, path: tuple):
    if type(k) not in _SCALARS:
        raise TypeError(f"save: {_render(path)} has a key {k!r} of type {type(k).__name__}{where()}; aotjax "
                        f"checkpoints keep dict keys that are str, int, float, bool or None")
    return k


def _plain(x):
    """A NumPy scalar or an instance of a subclass of bool/int/float/str (an IntEnum) as its Python value; else x."""
    if isinstance(x, np.generic) and not isinstance(x, (np.complexfloating, np.void)):
        return x.item()
    for t in _SCALARS[:4]:
        if isinstance(x, t):
            return t(x)
    return x


def _unsupported(x, path: tuple) -> str:
    if callable(getattr(x, "state_dict", None)):
        return (f"save: {_render(path)} is a {type(x).__name__} object{where()}; aotjax does not pickle objects: save "
                f"its `state_dict()` (`aotjax.save(model.state_dict(), path)`) and load that into a new one "
                f"(`model.load_state_dict(aotjax.load(path))`)")
    return (f"save: {_render(path)} is a {type(x).__module__}.{type(x).__qualname__}{where()}; aotjax checkpoints hold "
            f"aotjax Tensors, dicts, lists, tuples, str, int, float, bool and None (state_dict()s of modules and "
            f"optimizers), and do not pickle other objects (convert arrays with aotjax.tensor(...))")


def _render(path: tuple) -> str:
    return "obj" + "".join(f"[{k!r}]" for k in path)


def save(obj, f, pickle_module=None, pickle_protocol=None, _use_new_zipfile_serialization=True,
         _disable_byteorder_record=False) -> None:
    """Save `obj` (a `state_dict()` of a module or optimizer, a dict bundling them with an epoch number, a tensor, a
    list of tensors: aotjax Tensors in dicts, OrderedDicts, lists and tuples with str, int, float, bool and None) to
    the path `f`, as `torch.save`. Unlike torch's single file, the checkpoint is a **directory**: the tensors written
    by orbax-checkpoint (each process writes its own shards of a sharded tensor), and the structure beside them in a
    JSON description; nothing is pickled. Saving onto an existing checkpoint (or file) replaces it, as torch
    overwrites; a directory that is not an aotjax checkpoint is left alone (a ValueError). A tensor that appears
    twice is stored once and loads as one tensor in both places; distinct views of one storage are stored apart.
    `pickle_module` and `pickle_protocol` (and torch's private flags) are accepted for torch's signature and change
    nothing. Every process of a multi-process run calls `save` with the same `obj` and path. `f` may also be a file
    object opened for writing (`io.BytesIO()`, `open(name, "wb")`): the checkpoint is then one zip archive of the
    description and the tensors' bytes (each tensor gathered to this process; one sharded across processes raises).

    >>> import tempfile, os
    >>> folder = tempfile.TemporaryDirectory()
    >>> path = os.path.join(folder.name, "ckpt")
    >>> aotjax.save({"weight": aotjax.ones(2, dtype=aotjax.bfloat16), "epoch": 3}, path)
    >>> sorted(os.listdir(path))
    ['aotjax.json', 'arrays']
    >>> aotjax.load(path)
    {'weight': tensor([1., 1.], dtype=bfloat16), 'epoch': 3}
    >>> folder.cleanup()
    """
    if _is_file_object(f, "write"):
        _save_archive(obj, f)
        return
    path = _path(f, "save")
    w = _Writer()
    text = _describe(obj, w)
    _check_replaceable(path)
    staging = path + ".aotjax-saving"  # NOTE: the same name in every process; the old checkpoint stays until the end
    if _primary():
        shutil.rmtree(staging, ignore_errors=True)
    _sync("aotjax.save:staging")
    try:
        if w.arrays:
            ocp = _orbax()
            ocp.PyTreeCheckpointer().save(os.path.join(staging, ARRAYS), args=ocp.args.PyTreeSave(w.arrays))
        if _primary():
            os.makedirs(staging, exist_ok=True)
            with open(os.path.join(staging, DESCRIPTION), "w") as out:
                out.write(text)
            _remove(path)
            os.rename(staging, path)
    except BaseException:
        if _primary():
            shutil.rmtree(staging, ignore_errors=True)
        raise
    _sync("aotjax.save:done")


def _describe(obj, w: _Writer) -> str:
    """The JSON description of `obj` (its tensors collected in `w`)."""
    tree = _encode(obj, (), w)
    description = {"format": FORMAT, "version": VERSION, "arrays": w.entries, "tree": tree}
    return json.dumps(description, indent=1)  # NOTE: before any file is touched: a value JSON refuses fails here


def _is_file_object(f, method: str) -> bool:
    return not isinstance(f, (str, bytes, os.PathLike)) and callable(getattr(f, method, None))


def _path(f, op: str) -> str:
    if not isinstance(f, (str, os.PathLike)):
        raise TypeError(f"{op}: f must be a path (str or os.PathLike) or a file object, got {type(f).__name__}"
                        f"{where()}")
    return os.path.abspath(os.fspath(f))


def _save_archive(obj, f) -> None:
    """`save` to a file object: one zip archive of the description and each tensor's bytes."""
    w = _Writer()
    text = _describe(obj, w)
    blobs = {}
    for key, array in w.arrays.items():
        if not array.is_fully_addressable:
            raise ValueError(f"save: tensor {w.entries[int(key)]['name']!r} is sharded across processes{where()}; a "
                             f"file object holds what one process has: save to a path (a directory each process "
                             f"writes its shards to)")
        blobs[key] = np.ascontiguousarray(np.asarray(array)).tobytes()
    with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED) as z:
        z.writestr(DESCRIPTION, text)
        for key, blob in blobs.items():
            z.writestr(f"{ARRAYS}/{key}", blob)


def _check_replaceable(path: str) -> None:
    if os.path.isdir(path) and os.listdir(path) and not os.path.isfile(os.path.join(path, DESCRIPTION)):
        raise ValueError(f"save: {path!r} is a directory that is not an aotjax checkpoint (it has no {DESCRIPTION})"
                         f"{where()}; aotjax replaces only a checkpoint or a file there: pick a new path, or remove "
                         f"the directory first")


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.remove(path)


def _primary() -> bool:
    return jax.process_index() == 0


def _sync(name: str) -> None:
    if jax.process_count() > 1:  # NOTE: the primary process moves the files; the others wait for it
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(name)


# -- load: the description checked, the tensors restored into their placement ---------------------------------------
def load(f, map_location=None, pickle_module=None, *, weights_only=True, mmap=None, **pickle_load_args):
    """Load what `aotjax.save` wrote to the directory `f`: the same structure (dict/OrderedDict key types, tuples vs
    lists, Python scalars, None, strings) with aotjax Tensors of the saved dtypes (64-bit ones as 32-bit outside
    jax's x64 mode, as every aotjax tensor), which `model.load_state_dict(...)` and `opt.load_state_dict(...)` take.
    Where each tensor goes, `map_location`:
    - None: where it was saved (the saved sharding, if its devices are here), else the default device;
    - a device (`"cpu"`, `"cuda:0"`, a `jax.Device`): all on that device;
    - a `jax.sharding.Sharding` (`NamedSharding(mesh, PartitionSpec(...))`): every tensor laid out so (another mesh
      than the saved one is fine); each process reads only the shards it holds;
    - a callable `(name, shape, dtype) -> Sharding | Device | None` for each tensor (None: as for
      `map_location=None`); names are the dotted paths of keys (`"model.fc.weight"`, `"optim.state.0.exp_avg"`).
      To read a state straight into the placement of a model's parameters: `shardings = {k: v.sharding for k, v in
      model.state_dict().items()}`, `map_location=lambda name, shape, dtype: shardings.get(name)`.
    Nothing in the checkpoint is executed: there is no pickle, so `weights_only=False` (and `pickle_module`, `mmap`,
    other pickle arguments) are accepted for torch's signature and change nothing. A missing path raises
    FileNotFoundError; what is not an intact aotjax checkpoint (another directory, a damaged description, a PyTorch
    `.pt` file) a ValueError naming the path.

    >>> import tempfile, os, jax
    >>> folder = tempfile.TemporaryDirectory()
    >>> path = os.path.join(folder.name, "ckpt")
    >>> aotjax.save([aotjax.arange(3), (None, "adam")], path)
    >>> loaded = aotjax.load(path, map_location="cpu")
    >>> loaded
    [tensor([0, 1, 2]), (None, 'adam')]
    >>> loaded[0].device == jax.devices("cpu")[0]
    True
    >>> folder.cleanup()
    """
    if _is_file_object(f, "read"):
        return _load_archive(f, getattr(f, "name", None) or f"the {type(f).__name__}", map_location)
    path = _path(f, "load")
    if os.path.isfile(path) and zipfile.is_zipfile(path) and _is_archive(path):
        return _load_archive(path, path, map_location)
    description = _read_description(path)
    entries = _checked(description, path)
    arrays = _restore(path, entries, _placement(map_location))
    tensors = [_tensor(a, e) for a, e in zip(arrays, entries)]
    return _decode(description["tree"], tensors, path, "tree")


def _checked(description: dict, path: str) -> list:
    """The description's checked tensor entries; its tree is checked too, before any array is read."""
    entries = _check_entries(description, path)
    try:
        _decode(description["tree"], range(len(entries)), path, "tree")
    except RecursionError:
        raise _damaged(path, f"the structure in {DESCRIPTION} is nested too deeply to rebuild") from None
    return entries


def _is_archive(path: str) -> bool:
    try:
        with zipfile.ZipFile(path) as z:
            return DESCRIPTION in z.namelist()
    except (zipfile.BadZipFile, OSError):
        return False


def _load_archive(source, name: str, map_location):
    """`load` of what `save` wrote to a file object (`source`: a file object or a path; `name`: it in errors)."""
    try:
        z = zipfile.ZipFile(source)
    except (zipfile.BadZipFile, EOFError, OSError) as e:
        raise ValueError(f"load: {name!r} is not an aotjax checkpoint ({e}){where()}; aotjax.save to a file object "
                         f"writes a zip archive, to a path a directory") from None
    with z:
        members = {info.filename: info for info in z.infolist()}
        if DESCRIPTION not in members:
            if any(n.endswith("data.pkl") for n in members):
                raise ValueError(_torch_file(name))
            raise ValueError(f"load: {name!r} is a zip archive without {DESCRIPTION}, not an aotjax checkpoint"
                             f"{where()}")
        description = _parse_description(z.read(DESCRIPTION).decode("utf-8", "replace"), name)
        entries = _checked(description, name)
        placement = _placement(map_location)
        arrays = []
        for i, e in enumerate(entries):
            dtype = canonicalize_dtype(e["dtype"])
            sharding = placement(e["name"], e["shape"], dtype, None)
            _check_fits(sharding, e, name)
            size = math.prod(e["shape"]) * e["dtype"].itemsize
            info = members.get(f"{ARRAYS}/{i}")
            if size and (info is None or info.file_size != size):
                found = "no data" if info is None else f"{info.file_size} bytes"
                raise _damaged(name, f"array {i} ({e['name']!r}) is described as {e['dtype']}{list(e['shape'])} "
                                     f"({size} bytes) but the archive has {found} for it")
            data = np.frombuffer(z.read(info), e["dtype"]) if size else np.zeros(0, e["dtype"])
            arrays.append(jax.device_put(data.reshape(e["shape"]).astype(dtype, copy=False), sharding))
    tensors = [_tensor(a, e) for a, e in zip(arrays, entries)]
    return _decode(description["tree"], tensors, name, "tree")


def _read_description(path: str) -> dict:
    if not os.path.exists(path):
        raise FileNotFoundError(2, f"load: no such file or directory{where()}", path)
    if not os.path.isdir(path):
        raise ValueError(_not_a_directory(path))
    try:
        with open(os.path.join(path, DESCRIPTION)) as src:
            text = src.read()
    except FileNotFoundError:
        raise ValueError(f"load: {path!r} is not an aotjax checkpoint: the directory has no {DESCRIPTION}{where()} "
                         f"(aotjax.save writes it last: an interrupted save, or another kind of directory)") from None
    return _parse_description(text, path)


def _parse_description(text: str, path: str) -> dict:
    try:
        description = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise ValueError(f"load: {path!r} is damaged: its {DESCRIPTION} is not valid JSON ({e}){where()}") from None
    if not isinstance(description, dict) or description.get("format") != FORMAT:
        raise _damaged(path, f"{DESCRIPTION} does not describe an aotjax checkpoint (no \"format\": \"{FORMAT}\")")
    if "tree" not in description:
        raise _damaged(path, f"{DESCRIPTION} has no \"tree\" (the saved structure)")
    if description.get("version") != VERSION:
        raise _damaged(path, f"format version {description.get('version')!r}; this aotjax reads version {VERSION}")
    return description


def _not_a_directory(path: str) -> str:
    with open(path, "rb") as src:
        head = src.read(4)
    if head.startswith(b"PK\x03\x04") and zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            torch_file = any(n.endswith("data.pkl") for n in z.namelist())
    else:
        torch_file = head[:1] == b"\x80"  # NOTE: a pickle's PROTO opcode: torch's legacy format, or plain pickle
    if torch_file:
        return _torch_file(path)
    return (f"load: {path!r} is a file, not an aotjax checkpoint{where()}; aotjax.save writes a directory (with "
            f"{DESCRIPTION} and arrays/) to a path, a zip archive to a file object")


def _torch_file(path: str) -> str:
    return (f"load: {path!r} is a PyTorch file written by torch.save (pickled Python objects){where()}; aotjax "
            f"does not unpickle, because unpickling runs code from the file. Convert it once with PyTorch: "
            f"`sd = torch.load(path, weights_only=True)`, then `aotjax.save({{k: aotjax.tensor(v.numpy()) for k, "
            f"v in sd.items()}}, new_path)` (bfloat16 tensors through `aotjax.tensor(v.float().numpy())"
            f".to(aotjax.bfloat16)`)")


def _damaged(path: str, what: str) -> ValueError:
    return ValueError(f"load: {path!r} is not an intact aotjax checkpoint: {what}{where()}")


def _check_entries(description: dict, path: str) -> list:
    entries = description.get("arrays")
    if not isinstance(entries, list):
        raise _damaged(path, f"{DESCRIPTION} has no list of \"arrays\"")
    for i, e in enumerate(entries):
        ok = (isinstance(e, dict) and isinstance(e.get("name"), str) and isinstance(e.get("shape"), list)
              and all(type(n) is int and n >= 0 for n in e["shape"]) and isinstance(e.get("dtype"), str)
              and type(e.get("requires_grad")) is bool and type(e.get("parameter")) is bool)
        if not ok:
            raise _damaged(path, f"array {i} of {DESCRIPTION} is not a description of a tensor: {e!r}")
        dtype = _dtype(e["dtype"])
        if dtype is None:
            raise _damaged(path, f"array {i} ({e['name']!r}) has an unknown dtype {e['dtype']!r}")
        e["dtype"] = dtype
        e["shape"] = tuple(e["shape"])
    return entries


def _dtype(name: str) -> np.dtype | None:
    """The tensor dtype `name` spells (bool or a number type jax has, bfloat16 and float8 included), else None."""
    try:
        dtype = np.dtype(jax.numpy.dtype(name))
    except TypeError:
        return None
    return dtype if dtype == np.bool_ or jax.numpy.issubdtype(dtype, jax.numpy.number) else None


def _decode(node, tensors, path: str, at: str):
    """The object a JSON node describes; `tensors[i]` for `{"tensor": i}`. Raises naming what is malformed."""
    if type(node) in _SCALARS:
        return node
    if not isinstance(node, dict) or len(node) != 1:
        raise _damaged(path, f"the description's {at} is {_short(node)}, not a value aotjax.save writes")
    (kind, items), = node.items()
    if kind == "tensor":
        if type(items) is not int or not 0 <= items < len(tensors):
            raise _damaged(path, f"the description's {at} refers to array {items!r}, but there are {len(tensors)}")
        return tensors[items]
    if kind not in _BUILD or not isinstance(items, list):
        raise _damaged(path, f"the description's {at} is {_short(node)}, not a value aotjax.save writes")
    if kind in ("list", "tuple"):
        return _BUILD[kind](_decode(v, tensors, path, f"{at}[{i}]") for i, v in enumerate(items))
    if not all(isinstance(kv, list) and len(kv) == 2 and type(kv[0]) in _SCALARS for kv in items):
        raise _damaged(path, f"the description's {at} is a {kind} whose items are not [key, value] pairs")
    return _BUILD[kind]((k, _decode(v, tensors, path, f"{at}[{k!r}]")) for k, v in items)


def _short(node) -> str:
    text = json.dumps(node)
    return text if len(text) <= 60 else text[:57] + "..."


def _placement(map_location) -> Callable:
    """`(name, shape, dtype, saved) -> Sharding` from `map_location` (`saved`: the saved sharding, or None)."""
    def default(saved):
        return saved or jax.sharding.SingleDeviceSharding(jax.local_devices()[0])

    def one(target, saved):
        if target is None:
            return default(saved)
        if isinstance(target, jax.sharding.Sharding):
            return target
        return jax.sharding.SingleDeviceSharding(to_device(target, "load"))

    if isinstance(map_location, dict):
        raise TypeError(f"load: map_location must be None, a device, a jax.sharding.Sharding or a callable (name, "
                        f"shape, dtype) -> Sharding, got a dict{where()}; torch's dict of device names is not taken: "
                        f"pass a device or a callable")
    if callable(map_location) and not isinstance(map_location, jax.sharding.Sharding):
        return lambda name, shape, dtype, saved: one(_called(map_location, name, shape, dtype), saved)
    fixed = one(map_location, None) if map_location is not None else None  # NOTE: a device name, a torch.device, ...
    return lambda name, shape, dtype, saved: fixed or default(saved)


def _called(map_location: Callable, name: str, shape: tuple, dtype) -> Any:
    target = map_location(name, shape, dtype)
    if target is not None and not isinstance(target, (jax.sharding.Sharding, jax.Device, str)):
        raise TypeError(f"load: map_location returned {type(target).__name__} for tensor {name!r}{where()}; it "
                        f"should return a jax.sharding.Sharding, a device or None")
    return target


def _restore(path: str, entries: list, placement: Callable) -> list:
    """The saved arrays, each read straight into its placement (orbax reads each device's shards only)."""
    stored = [str(i) for i, e in enumerate(entries) if math.prod(e["shape"])]
    saved = _stored_metadata(path, stored) if stored else {}
    shardings, dtypes = [], []
    for i, e in enumerate(entries):
        meta = saved.get(str(i))
        if meta is not None and (tuple(meta.shape) != e["shape"] or np.dtype(meta.dtype) != e["dtype"]):
            raise _damaged(path, f"array {i} ({e['name']!r}) is described as {e['dtype']}{list(e['shape'])} but "
                                 f"stored as {np.dtype(meta.dtype)}{list(meta.shape)}")
        sharding = placement(e["name"], e["shape"], canonicalize_dtype(e["dtype"]), _saved_sharding(meta))
        _check_fits(sharding, e, path)
        shardings.append(sharding)
        dtypes.append(canonicalize_dtype(e["dtype"]))
    restored = {}
    if stored:
        ocp = _orbax()
        args = {k: ocp.ArrayRestoreArgs(sharding=shardings[int(k)], global_shape=entries[int(k)]["shape"],
                                        dtype=dtypes[int(k)]) for k in stored}
        restored = ocp.PyTreeCheckpointer().restore(os.path.join(path, ARRAYS),
                                                    args=ocp.args.PyTreeRestore(restore_args=args))
    return [restored[str(i)] if str(i) in restored else jax.device_put(np.zeros(e["shape"], d), s)
            for i, (e, d, s) in enumerate(zip(entries, dtypes, shardings))]


def _stored_metadata(path: str, stored: list) -> dict:
    arrays = os.path.join(path, ARRAYS)
    if not os.path.isdir(arrays):
        raise _damaged(path, f"{DESCRIPTION} describes {len(stored)} arrays, but there is no {ARRAYS}/ directory")
    try:
        tree = _orbax().PyTreeCheckpointer().metadata(arrays).item_metadata.tree
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise _damaged(path, f"orbax cannot read the arrays' metadata in {ARRAYS}/ ({e})") from None
    missing = [k for k in stored if not isinstance(tree, dict) or k not in tree]
    if missing:
        raise _damaged(path, f"{DESCRIPTION} refers to arrays {missing} that {ARRAYS}/ does not hold")
    return {k: tree[k] for k in stored}


def _saved_sharding(meta):
    """The sharding an array was saved with, if its devices are all here (else None)."""
    try:
        return meta.sharding.to_jax_sharding()
    except Exception:  # NOTE: orbax raises various errors for devices this process lacks; any means "not here"
        return None


def _check_fits(sharding, entry: dict, path: str) -> None:
    try:
        sharding.shard_shape(entry["shape"])
    except (ValueError, IndexError) as e:
        raise ValueError(f"load: tensor {entry['name']!r} of {path!r} has shape {list(entry['shape'])}, which the "
                         f"map_location sharding {sharding} cannot lay out ({e}){where()}; pass a callable "
                         f"map_location (name, shape, dtype) -> Sharding that gives such tensors a sharding that fits "
                         f"(None: the default device)") from None


def _tensor(array, entry: dict) -> Tensor:
    t = Tensor._wrap(array)
    if entry["parameter"]:
        from aotjax.nn.parameter import Parameter  # NOTE: lazy: aotjax.nn imports far more than this module needs

        return Parameter(t, requires_grad=entry["requires_grad"])
    return t.requires_grad_() if entry["requires_grad"] else t
