"""Imports point one way: core <- tensor <- interpreters <- ops <- lowering/runtime/transforms/partition <-
nn/cli/the package. Every module's imports are read from its AST (imports inside functions included); an
import of a higher layer must be lazy (inside a function) and carry a `# NOTE:` comment, on its line or
the line before, that says why it must run back up. Inside `aotjax/ops/` the families stand on floors (base, then
the data and shape primitives, math, reductions and products, indexing, the compositions), and no import, at module
level or lazy, closes a circle anywhere in the package."""
import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

import aotjax

pytestmark = pytest.mark.x32_only  # NOTE: independent of the float width: not run again in the x64 pass

PACKAGE = Path(aotjax.__file__).parent
ROOT = PACKAGE.parent

# Module prefix -> rank. A module may import its own rank and below.
LAYERS = {
    "aotjax.core": 0,
    "aotjax.dtypes": 0,
    "aotjax.tensor": 1,
    "aotjax.autograd": 1,  # the package's `__init__` only (its names load lazily)
    "aotjax.autograd.graph": 1,  # the recording of imperative autograd: eager evaluation records
    "aotjax.interpreters": 2,
    "aotjax.ops": 3,
    "aotjax.lowering": 4,
    "aotjax.runtime": 4,
    "aotjax.transforms": 4,
    "aotjax.partition": 4,
    # the processes' runtime and the check that they compile one program, which jit and aot call
    "aotjax.distributed.runtime": 4,
    "aotjax.distributed.program_check": 4,
    "aotjax.distributed": 5,  # global tensors, torch.distributed's names
    "aotjax.checkpointing": 5,  # aotjax.save / aotjax.load
    "aotjax.nn": 5,
    "aotjax.optim": 5,
    "aotjax.autograd.engine": 5,
    "aotjax.autograd.saved_loops": 5,
    "aotjax.autograd.tensor_methods": 5,
    "aotjax.autograd.function": 5,
    "aotjax.autograd.functional": 5,
    "aotjax.func": 5,
    "aotjax.utils": 5,  # torch.utils.data
    "aotjax.amp": 5,  # autocast, GradScaler
    "aotjax.cuda": 5,
    "aotjax.accelerator": 5,
    "aotjax.onnx": 5,
    "aotjax.backends": 5,
    "aotjax.cli": 5,
    "aotjax.__main__": 5,
    "aotjax": 5,  # the package itself: its public API
}

# Floors inside aotjax.ops (module prefix -> floor): a module imports its own floor and below. Families on one floor
# may import each other; `test_no_import_circle` keeps that acyclic.
OPS_FLOORS = {
    "aotjax.ops.base": 0,  # promotion, layouts, combinators, argument helpers, casts, tensors from data: no family
    # the call of a compiled program (no family), and composites run eagerly as one (`fused_when_eager`, on any floor)
    "aotjax.ops.calls.compiled": 0,
    "aotjax.ops.calls.eager_fusion": 0,
    "aotjax.ops.creation": 1,  # the data and shape primitives every family builds with
    "aotjax.ops.shape.clone": 1,
    "aotjax.ops.shape.views": 1,
    "aotjax.ops.shape.copies": 1,
    "aotjax.ops.random.keys": 1,
    "aotjax.ops.random.generator": 1,
    "aotjax.ops.math": 2,  # elementwise math
    "aotjax.ops.reduce.reductions": 3,  # reduction and product primitives
    "aotjax.ops.linalg.matmul": 3,
    "aotjax.ops.indexing": 4,  # getitem/setitem, gather/scatter
    "aotjax.ops": 5,  # compositions: nn, linalg, statistics, sorting, fft, control flow, distributions, calls, ...
}

NOTE = re.compile(r"#\s*NOTE:\s*\S.{8,}")


def floor(module: str) -> int | None:
    """The floor of a module of `aotjax.ops` (None for the package `aotjax.ops` itself and modules outside it)."""
    if module == "aotjax.ops" or not module.startswith("aotjax.ops."):
        return None
    return OPS_FLOORS[max((p for p in OPS_FLOORS if module == p or module.startswith(p + ".")), key=len)]


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


def import_graph(root: Path = PACKAGE) -> nx.DiGraph:
    """Module -> the aotjax modules it imports, from every import statement in its AST (module level, inside
    functions, under `if TYPE_CHECKING`)."""
    graph = nx.DiGraph()
    for path in sorted(root.rglob("*.py")):
        module = module_name(path)
        graph.add_node(module)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in imported_modules(node, module, path.name == "__init__.py"):
                    if target != module:
                        graph.add_edge(module, target)
    return graph


def test_no_import_circle():
    graph = import_graph()
    cycles = list(nx.simple_cycles(graph, length_bound=6))
    assert cycles == [], "import circles: " + "; ".join(" -> ".join(c + c[:1]) for c in cycles[:5])


def test_the_circle_check_finds_a_lazy_circle(tmp_path):
    ops = tmp_path / "aotjax" / "ops"
    ops.mkdir(parents=True)
    (ops / "a.py").write_text("from aotjax.ops.b import g\n")
    (ops / "b.py").write_text("def g():\n    from aotjax.ops.a import f  # NOTE: lazy, still a circle\n")
    global ROOT
    root, ROOT = ROOT, tmp_path
    try:
        graph = import_graph(tmp_path / "aotjax")
    finally:
        ROOT = root
    assert [sorted(c) for c in nx.simple_cycles(graph)] == [["aotjax.ops.a", "aotjax.ops.b"]]


@pytest.mark.parametrize("path", [p for p in MODULES if module_name(p).startswith("aotjax.ops.")],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_ops_families_import_their_floor_and_below(path):
    module = module_name(path)
    bad = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for target in imported_modules(node, module, path.name == "__init__.py"):
                if target == "aotjax.ops" or (floor(target) or 0) > floor(module):
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: {module} (floor {floor(module)}) imports "
                               f"{target} (floor {floor(target)})")
    assert bad == []


def test_ops_has_subject_folders_and_no_grab_bags():
    ops = PACKAGE / "ops"
    assert sorted(p.name for p in ops.glob("*.py")) == ["__init__.py", "unsupported.py"]
    folders = {p.name for p in ops.iterdir() if (p / "__init__.py").exists()}
    assert {"base", "math", "shape", "indexing", "reduce", "linalg", "fft", "nn", "random", "control_flow",
            "distributed", "calls", "creation"} <= folders
    grab_bags = [str(p.relative_to(ROOT)) for p in ops.rglob("*.py")
                 if re.match(r"(extra|misc|more)_", p.stem) or re.search(r"\(more\)", p.read_text().split("\n")[0])]
    assert grab_bags == []
