"""Guards on the Python values a trace read: a cached program is reused only while they hold.

A compiled program bakes in every Python value its trace read: a global `SCALE`, a closure variable, a module's
`training` or `negative_slope`, a flag of a config object. Tensors are different (live state: implicit inputs read
at each call), but where a tensor is read from matters too: `lin.weight = Parameter(...)` rebinds it.

While a program is traced, `recording()` notes every Python function that runs (a profile hook: `sys.setprofile`,
which leaves debuggers' `settrace` alone). `guards_for` then walks from the traced function through what those
functions can reach: the globals their code names, the closure cells of the functions reached, the attributes of
objects and modules their code names (aotjax's own module and optimizer code counts: `Dropout` reads `self.p`),
every submodule, parameter and buffer of a module reached, the entries of dicts and the objects in lists reached.
What it finds is a `Guard`:

- a value a program depends on (a scalar, string, enum, dtype, tuple of those): compared by value (a list is not:
  see `_is_value`);
- an object the trace went through (a module, a function, any object): compared by identity (`model.fc = Linear(..)`
  or a global rebound to another function is seen);
- a tensor that is one of the program's implicit inputs: its place is a *source*, read at each call, so a rebound
  parameter of the same shape and dtype is the new input (no new trace), and one of another shape traces again.

Reads from a module (`aotjax.nn.Module`: its attributes, submodules, parameters, buffers) are checked only after some
module changed (`call_epoch.modules`, advanced by `Module.__setattr__` and the like), so a model of hundreds of
modules costs one comparison per call; other reads (globals, cells, plain objects, lists, dicts) are checked at each
call, a dictionary lookup or attribute read apiece.

What is not seen: values reached in ways Python does not show (a closure of a function held only inside a C
object, `getattr(obj, name)` with a computed name, a value behind a property of a library type), numpy arrays (read
as constants), and the contents of library objects (jax's, numpy's). Where a profiler is already installed (cProfile),
the walk does not know which functions ran and guards everything reachable instead (more guards, never fewer).
"""
from __future__ import annotations

import dis
import enum
import functools
import gc
import inspect
import sys
import types
from contextlib import contextmanager
from typing import Any, Callable

import numpy as np

from aotjax.core import call_epoch
from aotjax.tensor import Tensor

__all__ = ["recording", "guards_for", "Guards"]

MISSING = object()  # what a guard reads where the name is gone

# Top-level packages whose code holds no state a user changes between calls (their globals are not guarded, and
# their objects are not walked). aotjax's own `nn` and `optim` code still names the attributes it reads.
_LIBRARY = frozenset(sys.stdlib_module_names) | {"aotjax", "jax", "jaxlib", "numpy", "ml_dtypes", "opt_einsum",
                                                 "scipy", "_pytest", "pytest", "pluggy", "IPython", "ipykernel",
                                                 "tqdm", "torch", "optax", "flax", "chex", "typing_extensions",
                                                 "hypothesis"}
_READS_ATTRIBUTES = ("aotjax.nn", "aotjax.optim", "aotjax.amp", "aotjax.utils")
_MAX_ITEMS = 1024  # a list or dict longer than this is guarded by identity only, its items not walked
_MAX_GUARDS = 20_000

_VALUE_TYPES = (bool, int, float, complex, str, bytes, type(None), enum.Enum, np.generic, np.dtype, range, slice)


def _top(module_name: str) -> str:
    return module_name.partition(".")[0]


def _is_library(module_name: str | None) -> bool:
    return module_name is not None and _top(module_name) in _LIBRARY


# -- what ran ------------------------------------------------------------------------------------------------------

class Reads:
    """What ran while a program was traced: each Python code object with the globals it ran with. `complete` is
    False where another profiler was installed: then nothing was recorded and the walk is static."""

    __slots__ = ("codes", "complete")

    def __init__(self, complete: bool):
        self.codes: dict = {}
        self.complete = complete


def _profile(codes: dict, frame, event: str, arg) -> None:
    if event == "call":
        code = frame.f_code
        if code not in codes:
            codes[code] = frame.f_globals


@contextmanager
def recording():
    """Record the Python functions that run inside (this thread); yields the `Reads`. Nested recordings each see
    what ran inside them, and the outer one sees it too."""
    previous = sys.getprofile()
    outer = previous.args[0] if isinstance(previous, functools.partial) and previous.func is _profile else None
    reads = Reads(complete=previous is None or outer is not None)
    if reads.complete:
        sys.setprofile(functools.partial(_profile, reads.codes))
    try:
        yield reads
    finally:
        if reads.complete:
            sys.setprofile(previous)
        if outer is not None:
            outer.update(reads.codes)


@functools.lru_cache(maxsize=8192)
def _names(code: types.CodeType) -> tuple[frozenset, frozenset]:
    """The global names and the attribute names `code` reads (nested functions' code included only when they run)."""
    global_names, attributes = set(), set()
    for ins in dis.get_instructions(code):
        if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
            global_names.add(ins.argval)
        elif ins.opname in ("LOAD_ATTR", "LOAD_METHOD", "LOAD_SUPER_ATTR"):
            attributes.add(ins.argval)
    return frozenset(global_names), frozenset(attributes)


def _static_names(code: types.CodeType) -> tuple[set, set]:
    """`_names` of `code` and of the code of the functions defined in it (a static walk: every one may run)."""
    global_names, attributes = map(set, _names(code))
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            more_globals, more_attributes = _static_names(const)
            global_names |= more_globals
            attributes |= more_attributes
    return global_names, attributes


# -- how a guard reads ---------------------------------------------------------------------------------------------

def _read_item(holder, key):
    """A dict's entry (globals, a plain dict, a class's namespace) or a list's item."""
    try:
        return holder[key]
    except (KeyError, IndexError):
        return MISSING


def _read_cell(cell, _):
    try:
        return cell.cell_contents
    except ValueError:  # NOTE: an empty cell
        return MISSING


def _read_attr(holder, name):
    return getattr(holder, name, MISSING)


def _read_type(holder, _):
    return type(holder)


def _read_module(module, where: tuple):
    """A module's plain attribute (`where = ('', name)`), or its parameter, buffer or submodule
    (`('_parameters', name)`, ...), read from the module's current tables (a container may replace one)."""
    kind, name = where
    table = module.__dict__ if not kind else module.__dict__.get(kind)
    return table.get(name, MISSING) if table is not None else MISSING


class Guard:
    """One Python value a program depends on: `read(holder, key)` reads it now; it holds while that is `expected`
    (by identity when `same`, else an equal value of the same type). `path` names it (`global SCALE`,
    `model.act.negative_slope`)."""

    __slots__ = ("read", "holder", "key", "expected", "same", "path")

    def __init__(self, read: Callable, holder, key, expected, same: bool, path: str):
        self.read, self.holder, self.key = read, holder, key
        self.expected, self.same, self.path = expected, same, path

    def holds(self) -> bool:
        value = self.read(self.holder, self.key)
        return _matches(value, self.expected, self.same)

    def why(self) -> str:
        """What changed, in words."""
        value = self.read(self.holder, self.key)
        if value is MISSING:
            return f"{self.path} was deleted"
        if self.same:
            return f"{self.path} is another object now ({_short(value)}; was {_short(self.expected)})"
        return f"{self.path} changed from {_short(self.expected)} to {_short(value)}"

    def __repr__(self) -> str:
        how = "is" if self.same else "=="
        return f"{self.path} {how} {_short(self.expected)}"


def _matches(value, expected, same: bool) -> bool:
    if value is expected:
        return True
    if same or type(value) is not type(expected):
        return False
    try:
        return bool(value == expected) or (value != value and expected != expected)  # NOTE: a NaN equals itself
    except Exception:  # NOTE: a comparison that cannot say: traced again
        return False


def _short(value) -> str:
    text = repr(value) if not isinstance(value, Tensor) else f"a tensor of shape {tuple(value.shape)}"
    return text if len(text) <= 60 else text[:57] + "..."


class Source:
    """Where the trace found implicit input `k` (a tensor): read at each call, so that a tensor rebound there is the
    input of the next call."""

    __slots__ = ("read", "holder", "key", "k", "path")

    def __init__(self, read: Callable, holder, key, k: int, path: str):
        self.read, self.holder, self.key, self.k, self.path = read, holder, key, k, path


class Guards:
    """The guards of one traced program (see the module docstring). `check(implicit)` says whether the program may
    run now, updating `implicit` (its captured tensors) where a source holds another tensor; `holds(implicit)` is the
    same question without the update (a compiled call's fast path, which keeps the tensors it last ran with)."""

    __slots__ = ("always", "modular", "always_sources", "modular_sources", "seen", "holds", "source")

    def __init__(self, always: list, modular: list, always_sources: list, modular_sources: list):
        self.always, self.modular = always, modular
        self.always_sources, self.modular_sources = always_sources, modular_sources
        self.seen = [call_epoch.modules[0]]  # the module count when the module reads last held
        self.holds, self.source = self._compiled_holds()

    def __bool__(self) -> bool:
        return bool(self.always or self.modular or self.always_sources or self.modular_sources)

    def _compiled_holds(self) -> tuple[Callable, str]:
        """`holds(implicit)`: whether every guard holds and every source still holds the tensor the program last ran
        with (`implicit`, the caller's list), without updating anything but `seen`; a compiled call's fast path
        asks it at each call. Written out for these guards, one read and one identity test apiece (a value that
        is not the very object the trace read is compared by `Guard.holds`), as `fast_call` writes its calls."""
        env: dict[str, Any] = {"MISSING": MISSING, "SEEN": self.seen, "MODULES": call_epoch.modules}
        lines = ["def holds(implicit):"]

        def read(i: int, item) -> str:
            env[f"R{i}"], env[f"H{i}"], env[f"K{i}"] = item.read, item.holder, item.key
            if item.read is _read_item and type(item.holder) is dict:
                return f"H{i}.get(K{i}, MISSING)"
            if item.read is _read_attr:
                return f"getattr(H{i}, K{i}, MISSING)"
            return f"R{i}(H{i}, K{i})"

        def emit(guards: list, sources: list, indent: str, first: int) -> int:
            i = first
            for g in guards:
                env[f"E{i}"], env[f"G{i}"] = g.expected, g
                lines.append(f"{indent}if {read(i, g)} is not E{i} and not G{i}.holds():")
                lines.append(f"{indent}    return False")
                i += 1
            for src in sources:
                lines.append(f"{indent}if {read(i, src)} is not implicit[{src.k}]:")
                lines.append(f"{indent}    return False")
                i += 1
            return i

        n = emit(self.always, self.always_sources, "    ", 0)
        if self.modular or self.modular_sources:
            lines.append("    if SEEN[0] != MODULES[0]:")
            emit(self.modular, self.modular_sources, "        ", n)
            lines.append("        SEEN[0] = MODULES[0]")
        lines.append("    return True")
        source = "\n".join(lines) + "\n"
        exec(compile(source, "<aotjax: guards>", "exec"), env)
        return env["holds"], source

    def check(self, implicit: list) -> str | None:
        """None if the program may run now (a source holding another tensor makes it that implicit input: `implicit`
        is updated in place), else what changed, in words."""
        now = call_epoch.modules[0]
        modular = self.seen[0] != now
        for g in (*self.always, *self.modular) if modular else self.always:
            if not g.holds():
                return g.why()
        for s in (*self.always_sources, *self.modular_sources) if modular else self.always_sources:
            value = s.read(s.holder, s.key)
            if value is implicit[s.k]:
                continue
            if not isinstance(value, Tensor):
                return f"{s.path} is {_short(value) if value is not MISSING else 'gone'} now (was a tensor)"
            implicit[s.k] = value  # NOTE: rebound: the new tensor is the input (a new shape or dtype traces again)
        if modular:
            self.seen[0] = now
        return None

    def describe(self) -> list[str]:
        """Each guard and source, in words."""
        return ([repr(g) for g in (*self.always, *self.modular)]
                + [f"{s.path} is read at each call (captured[{s.k}])" for s in
                   (*self.always_sources, *self.modular_sources)])


# -- the walk ------------------------------------------------------------------------------------------------------

def _is_value(value, depth: int = 0) -> bool:
    """Whether `value` is compared by value: a scalar, string, enum, dtype, or a tuple or frozenset of those.
    NOTE: a list is compared by identity, its items walked but not compared: a trace that appends to a list (a log
    of traces, `calls.append(...)`) would otherwise trace again at every call. A dict's entries are compared (a
    config dict's `cfg['scale']`)."""
    if isinstance(value, _VALUE_TYPES):
        return True
    if depth < 3 and isinstance(value, (tuple, frozenset)) and len(value) <= 64:
        return all(_is_value(v, depth + 1) for v in value)
    return False


class _Walk:
    """Builds the `Guards` of one traced program (`guards_for`)."""

    def __init__(self, reads: Reads, implicit: list):
        self.executed = set(reads.codes) if reads.complete else None
        self.attributes: set | None = set() if reads.complete else None  # None: every attribute (a static walk)
        self.implicit = {id(t): k for k, t in enumerate(implicit)}
        self.always: list = []
        self.modular: list = []
        self.always_sources: list = []
        self.modular_sources: list = []
        self.sourced: set = set()
        self.visited: set = set()
        self.count = 0

    # guards and sources
    def guard(self, read, holder, key, value, same: bool, path: str, modular: bool) -> None:
        self.count += 1
        expected = value
        (self.modular if modular else self.always).append(Guard(read, holder, key, expected, same, path))

    def visit(self, value, where: tuple | None, path: str, modular: bool = False) -> None:
        """Guard `value`, read from `where` (`(read, holder, key)`; None: a place that cannot change, such as a
        bound method's `__self__`), and walk what it holds."""
        if self.count > _MAX_GUARDS:
            return
        if isinstance(value, Tensor):
            k = self.implicit.get(id(value))
            if k is not None and k not in self.sourced and where is not None:
                self.sourced.add(k)
                (self.modular_sources if modular else self.always_sources).append(Source(*where, k, path))
            return
        if _is_value(value):
            if where is not None:
                self.guard(*where, value, False, path, modular)
            return
        if isinstance(value, types.ModuleType):
            if not _is_library(value.__name__) and id(value) not in self.visited:
                self.visited.add(id(value))
                self.walk_attributes(value, vars(value), path, _read_item, vars(value))
            return
        if where is not None:
            self.guard(*where, value, True, path, modular)
        if id(value) in self.visited:
            return
        self.visited.add(id(value))
        self.walk(value, path)

    def walk(self, value, path: str) -> None:
        from aotjax.nn.module import Module  # NOTE: runtime sits below nn

        if isinstance(value, Module):
            self.walk_module(value, path)
        elif isinstance(value, types.FunctionType):
            self.walk_function(value, path)
        elif isinstance(value, types.MethodType):
            self.visit(value.__self__, None, path.rpartition(".")[0] or "self")
            self.visit(value.__func__, None, path)
        elif isinstance(value, functools.partial):
            self.visit(value.func, None, path)
            for i, a in enumerate(value.args):
                self.visit(a, None, f"{path}.args[{i}]")
            for name, a in value.keywords.items():
                self.visit(a, (_read_item, value.keywords, name), f"{path}.keywords[{name!r}]")
        elif isinstance(value, (list, tuple)):
            if len(value) <= _MAX_ITEMS:
                mutable = isinstance(value, list)
                for i, item in enumerate(value):
                    if not (mutable and _is_value(item)):
                        self.visit(item, (_read_item, value, i) if mutable else None, f"{path}[{i}]")
        elif isinstance(value, dict):
            if len(value) <= _MAX_ITEMS:
                for key, item in list(value.items()):
                    self.visit(item, (_read_item, value, key), f"{path}[{_short(key)}]")
        elif isinstance(value, type):
            if not _is_library(value.__module__):
                self.walk_attributes(value, value.__dict__, path, _read_attr, value)
        elif not _is_library(type(value).__module__) or type(value).__module__.startswith(_READS_ATTRIBUTES):
            self.walk_object(value, path)

    def walk_function(self, fn: types.FunctionType, path: str) -> None:
        code = fn.__code__
        if self.executed is not None and code not in self.executed:
            return  # NOTE: it did not run: what it would read decides nothing
        for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
            self.visit(_read_cell(cell, None), (_read_cell, cell, None), name)
        for i, default in enumerate(fn.__defaults__ or ()):
            self.visit(default, None, f"{code.co_name}.__defaults__[{i}]")
        if self.executed is None and not _is_library(fn.__module__):  # NOTE: static: its globals, as it may run
            global_names, _ = _static_names(code)
            self.walk_globals(fn.__globals__, global_names)

    def walk_globals(self, namespace: dict, names) -> None:
        for name in sorted(names):
            if name in namespace:
                self.visit(namespace[name], (_read_item, namespace, name), name)

    def walk_attributes(self, owner, namespace, path: str, read: Callable, holder) -> None:
        """The attributes of `owner` (a module or class) found in `namespace` that the code that ran names."""
        names = namespace.keys() if self.attributes is None else self.attributes & namespace.keys()
        for name in sorted(names):
            if name.startswith("__"):
                continue
            value = namespace[name]
            if isinstance(value, (types.FunctionType, staticmethod, classmethod, property)):
                continue  # NOTE: methods: their code is walked where it ran
            self.visit(value, (read, holder, name), f"{path}.{name}")

    def walk_object(self, obj, path: str) -> None:
        """An object's attributes that the code that ran names: instance attributes and slots, and class attributes
        that are plain values (methods, properties and other descriptors are not read: what their code reads is)."""
        own = getattr(obj, "__dict__", None)
        own = own if isinstance(own, dict) else {}
        slots = _slot_names(type(obj))
        names = (own.keys() | slots) if self.attributes is None else self.attributes
        for name in sorted(names):
            if name.startswith("__"):
                continue
            if name not in own and name not in slots:
                found = inspect.getattr_static(obj, name, MISSING)
                if found is MISSING or hasattr(type(found), "__get__") and not isinstance(found, types.ModuleType):
                    continue  # NOTE: a method, property or other descriptor: reading it runs code
            try:
                value = getattr(obj, name)
            except Exception:
                continue
            self.visit(value, (_read_attr, obj, name), f"{path}.{name}")

    def walk_module(self, module, path: str) -> None:
        """A module: its plain attributes the code that ran names, `training` always; every parameter, buffer and
        submodule (a container's are iterated by aotjax's code). Read only after some module changed."""
        state = module.__dict__
        # NOTE: its class too: `register_parametrization` and `weight_norm` swap it for a generated subclass
        self.guard(_read_type, module, None, type(module), True, f"type({path})", True)
        names = [n for n in state if n not in _MODULE_TABLES and not n.startswith("__")
                 and (self.attributes is None or n in self.attributes or n == "training")]
        for name in sorted(names):
            self.visit(state[name], (_read_module, module, ("", name)), f"{path}.{name}", modular=True)
        for kind in _MODULE_TABLES:
            for name, value in list(state.get(kind, {}).items()):
                self.visit(value, (_read_module, module, (kind, name)), f"{path}.{name}", modular=True)


_MODULE_TABLES = ("_parameters", "_buffers", "_modules")


def _slot_names(cls: type) -> set:
    names = set()
    for klass in cls.__mro__:
        slots = klass.__dict__.get("__slots__", ())
        names.update((slots,) if isinstance(slots, str) else slots)
    return names


def _is_user_code(module: str | None) -> bool:
    """Whether code run with globals of module `module` is the user's: not a library's, nor code generated without
    a module (`exec` with bare globals: aotjax's fast calls) or for a namedtuple."""
    return module is not None and not _is_library(module) and not module.startswith("namedtuple_")


def guards_for(fun: Callable, reads: Reads, implicit: list) -> Guards:
    """The guards of a program traced from `fun` while `reads` recorded, whose captured tensors are `implicit`."""
    walk = _Walk(reads, implicit)
    # NOTE: code that ran during the trace without being called by it: the garbage collector's callbacks (a test
    # library times collections) and finalizers
    interrupts = {getattr(callback, "__code__", None) for callback in gc.callbacks}
    user_codes = []
    for code, namespace in reads.codes.items():
        if code in interrupts or code.co_name == "__del__":
            continue
        module = namespace.get("__name__") if isinstance(namespace, dict) else None
        if _is_user_code(module):
            user_codes.append((code, namespace))
            walk.attributes.update(_names(code)[1])
        elif module is not None and module.startswith(_READS_ATTRIBUTES):
            walk.attributes.update(_names(code)[1])
    for code, namespace in user_codes:
        walk.walk_globals(namespace, _names(code)[0])
    walk.visit(fun, None, getattr(fun, "__name__", None) or type(fun).__name__)
    return Guards(walk.always, walk.modular, walk.always_sources, walk.modular_sources)
