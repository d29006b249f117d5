"""Imports point one way: core <- tensor <- interpreters <- ops <- lowering/runtime/transforms/partition <-
nn/cli/the package. Every module's imports are read from its AST (imports inside functions included); an
import of a higher layer must be lazy (inside a function) and carry a `# NOTE:` comment, on its line or

pytestmark = pytest.mark.x32_only  # NOTE: independent of the float width: not run again in the x64 pass
the line before, that says why it must run back up."""
import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import aotjax

PACKAGE = Path(aotjax.__file__).parent
ROOT = PACKAGE.parent

# Module prefix -> rank. A module may import its own rank and below.
LAYERS = {
    "aotjax.core": 0,
    "aotjax.dtypes": 0,
    "aotjax.tensor": 1,
    "aotjax.interpreters": 2,
    "aotjax.ops": 3,
    "aotjax.lowering": 4,
    "aotjax.runtime": 4,
    "aotjax.transforms": 4,
    "aotjax.partition": 4,
    "aotjax.nn": 5,
    "aotjax.optim": 5,
    "aotjax.func": 5,
    "aotjax.cli": 5,
    "aotjax.__main__": 5,
    "aotjax": 5,  # the package itself: its public API
}

NOTE = re.compile(r"#\s*NOTE:\s*\S.{8,}")


def rank(module: str) -> int:
    best = max((p for p in LAYERS if module == p or module.startswith(p + ".")), key=len, default=None)
    if best is None:
        raise AssertionError(f"module {module} is in no layer of LAYERS: add its prefix")
    return LAYERS[best]


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str) -> bool:
    rel = Path(*name.split("."))
    return (ROOT / rel).with_suffix(".py").exists() or (ROOT / rel / "__init__.py").exists()


def imported_modules(node: ast.AST, module: str, is_package: bool) -> list[str]:
    """The aotjax modules an import statement loads (`from aotjax import ops` loads `aotjax.ops`; `from
    aotjax import Tensor` loads the package `aotjax`)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "aotjax"]
    base = node.module or ""
    if node.level:
        anchor = module.split(".") if is_package else module.split(".")[:-1]
        anchor = anchor[:len(anchor) - node.level + 1]
        base = ".".join(anchor + ([base] if base else []))
    if base.split(".")[0] != "aotjax":
        return []
    return [f"{base}.{a.name}" if is_module(f"{base}.{a.name}") else base for a in node.names]


def function_lines(tree: ast.AST) -> set[int]:
    """The line numbers of import statements that run inside a function (lazily)."""
    lazy = set()
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            lazy.update(n.lineno for n in ast.walk(fn) if isinstance(n, (ast.Import, ast.ImportFrom)))
    return lazy


def upward_imports(path: Path) -> list[str]:
    """Every import in `path` that runs against the layers, unless it is lazy and explained by a NOTE."""
    source = path.read_text()
    lines = source.splitlines()
    tree = ast.parse(source)
    module = module_name(path)
    lazy = function_lines(tree)
    bad = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        for target in imported_modules(node, module, path.name == "__init__.py"):
            if rank(target) <= rank(module):
                continue
            near = lines[node.lineno - 2: node.end_lineno]
            explained = node.lineno in lazy and any(NOTE.search(line) for line in near)
            if not explained:
                where = "at module level" if node.lineno not in lazy else "without a '# NOTE: why' comment"
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: {module} (layer {rank(module)}) imports "
                           f"{target} (layer {rank(target)}) {where}")
    return bad


MODULES = sorted(PACKAGE.rglob("*.py"))


def test_every_module_is_in_a_layer():
    for path in MODULES:
        rank(module_name(path))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_point_one_way(path):
    assert upward_imports(path) == []


def test_the_check_finds_an_upward_import(tmp_path):
    core = tmp_path / "aotjax" / "core"
    core.mkdir(parents=True)
    bad = core / "bad.py"
    bad.write_text("from aotjax.ops import add\n\n\ndef f():\n    from aotjax.tensor import Tensor\n\n\n"
                   "def g():\n    # NOTE: the tensor layer sits above the core; only called once it is loaded\n"
                   "    from aotjax.tensor import Tensor\n")
    global ROOT
    root, ROOT = ROOT, tmp_path
    try:
        found = upward_imports(bad)
    finally:
        ROOT = root
    assert [f.split(": ", 1)[0] for f in found] == ["aotjax/core/bad.py:1", "aotjax/core/bad.py:5"]
    assert "at module level" in found[0] and "NOTE" in found[1]


def _loaded_after_importing(modules: list[str]) -> set[str]:
    """The aotjax modules loaded by importing `modules` in a fresh interpreter, with the package's
    `__init__` (which imports everything) left out."""
    code = ("import importlib, sys, types\n"
            f"pkg = types.ModuleType('aotjax'); pkg.__path__ = [{str(PACKAGE)!r}]; sys.modules['aotjax'] = pkg\n"
            f"for m in {modules!r}:\n    importlib.import_module(m)\n"
            "print(' '.join(m for m in sys.modules if m.startswith('aotjax.')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    return set(out.stdout.split())


@pytest.mark.parametrize("layer", ["aotjax.core", "aotjax.tensor", "aotjax.interpreters", "aotjax.ops"])
def test_a_layer_loads_only_the_layers_below(layer):
    modules = sorted({module_name(p) for p in MODULES if module_name(p) == layer
                      or module_name(p).startswith(layer + ".")})
    above = {m for m in _loaded_after_importing(modules) if rank(m) > LAYERS[layer]}
    assert above == set(), f"importing {layer} loads {sorted(above)}"


def test_importing_the_tensor_module_first_works():
    code = "import aotjax.tensor; from aotjax.tensor import Tensor; import aotjax; print(Tensor is aotjax.Tensor)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"
