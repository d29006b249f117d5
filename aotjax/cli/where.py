"""Say where a name of aotjax is defined: the file, line and module of its code.

  python -m aotjax where Tensor.add_            # a Tensor method or property
  python -m aotjax where add linalg.svd nn.functional.relu nn.Linear
  python -m aotjax where torch.Tensor.view      # `torch.` is read as `aotjax.`, for code ported from PyTorch

Each name is looked up from the package `aotjax` (a leading `aotjax.` or `torch.` is dropped). A Tensor method is the
op function its family installs (`Tensor.exp is aotjax.exp`), so the answer is the family's module under
`aotjax/ops/`; a property prints its getter (and its setter, if any). Exit status 1 if a name does not exist.
"""
from __future__ import annotations

import argparse
import ast
import functools
import inspect
import sys
from dataclasses import dataclass
from pathlib import Path

import aotjax

ROOT = Path(aotjax.__file__).resolve().parent.parent


@dataclass(frozen=True)
class Location:
    """Where the code of one object is: its file (relative to the checkout when inside it), first line and module,
    and what kind of thing it is (`function`, `property getter`, `class`, ...)."""
    file: str
    line: int
    module: str
    kind: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line} ({self.kind} in {self.module})"


def resolve(name: str) -> object:
    """The object `name` names from the package (`"Tensor.add_"`, `"aotjax.linalg.svd"`, `"torch.nn.Linear"`);
    a property is returned as the property, not its value. AttributeError names the part that is missing.

    >>> resolve("Tensor.exp") is aotjax.exp
    True
    """
    parts = name.split(".")
    if parts[0] in ("aotjax", "torch"):
        parts = parts[1:]
    obj: object = aotjax
    for i, part in enumerate(parts):
        owner = obj
        found = next((vars(k)[part] for k in getattr(owner, "__mro__", ()) if part in vars(k)), None)
        obj = found if isinstance(found, (property, classmethod, staticmethod)) else getattr(owner, part, None)
        if obj is None:
            raise AttributeError(f"where: {'.'.join(['aotjax'] + parts[:i + 1])} does not exist")
    return obj


def _code_of(obj: object) -> list[tuple[str, object]]:
    """The (kind, function or class) pairs whose source says where `obj` is defined."""
    if isinstance(obj, property):
        return [(k, f) for k, f in (("property getter", obj.fget), ("property setter", obj.fset)) if f is not None]
    if isinstance(obj, (classmethod, staticmethod)):
        return [(type(obj).__name__, obj.__func__)]
    if isinstance(obj, functools.partial):
        return [("partial of", obj.func)]
    if inspect.ismodule(obj):
        return [("module", obj)]
    if inspect.isclass(obj):
        return [("class", obj)]
    if callable(obj):
        return [("function", inspect.unwrap(obj))]
    return []


def locate(name: str) -> list[Location]:
    """Where the code of `name` is defined (two places for a property with a setter).

    >>> [loc.module for loc in locate("Tensor.add_")]
    ['aotjax.ops.math.elementwise']
    """
    obj = resolve(name)
    found = []
    for kind, code in _code_of(obj):
        try:
            path = Path(inspect.getsourcefile(code)).resolve()
            line = 1 if inspect.ismodule(code) else inspect.getsourcelines(code)[1]
        except (TypeError, OSError):  # NOTE: a builtin or generated code: its module is all we know
            continue
        module = code.__name__ if inspect.ismodule(code) else getattr(code, "__module__", "?")
        if not inspect.ismodule(code) and not inspect.isclass(code):
            # NOTE: a function a factory made (`exp_p, exp__p, exp, exp_ = _unary("exp", ...)`) is where it is bound
            line = _binding_line(path, code.__name__) or line
        file = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
        found.append(Location(file, line, module, kind))
    if not found:
        raise TypeError(f"where: {name} is a {type(obj).__name__}, which has no source of its own "
                        f"(a constant, a dtype or a primitive); look up the function that makes it")
    return found


def _binding_line(path: Path, name: str) -> int | None:
    """The line of the module statement at `path` that binds `name` (`exp_p, exp__p, exp, exp_ = _unary(...)`), if
    one does."""
    for node in _statements(path):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name:
            return min([node.lineno] + [d.lineno for d in node.decorator_list])
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AnnAssign, ast.AugAssign)) else []
        if any(isinstance(n, ast.Name) and n.id == name for t in targets for n in ast.walk(t)):
            return node.lineno
    return None


@functools.lru_cache(maxsize=None)
def _statements(path: Path) -> list:
    """The top-level statements of the module at `path` (parsed once per run)."""
    return ast.parse(path.read_text()).body


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("names", nargs="+", metavar="NAME", help="e.g. Tensor.add_, add, linalg.svd, nn.Linear")


def run(args: argparse.Namespace) -> int:
    status = 0
    for name in args.names:
        try:
            for loc in locate(name):
                print(f"{name}: {loc}")
        except (AttributeError, TypeError) as e:
            print(e, file=sys.stderr)
            status = 1
    return status
