"""Print the program a Python function traces to, stage by stage.

  python -m aotjax explain model.py:step --args "f32[8,16], f32[16,4]"
  python -m aotjax explain model.py:loss --args "{'w': f32[3,2], 'b': f32[2]}, f32[4,3]"

imports model.py, calls `step` on random tensors of those shapes and dtypes (dtypes: f32 f64 f16 bf16
i32 i64 i8 u8 bool; `f32[]` is a scalar) and prints the jaxpr as written, each equation with its
source line, the functionalized program and the call boundary (which inputs are written, which
outputs alias what). `--grad` adds the forward and backward programs of its vjp and the residuals
the forward saves; `--aot` adds the joint, forward and backward programs of `aot(fn)` (AOTAutograd),
each with a descriptor per input and output, and its residuals. `--stage` picks other stages (see
`--list-stages`).

An argument may be a pytree: dicts (quoted keys), lists and tuples of array types, nested; a Python
number, string, bool or None stands for itself. `--args` is read with Python's `ast`, never evaluated.
"""
from __future__ import annotations

import argparse
import ast
import importlib.util
import inspect
import os
import re
import sys
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

import aotjax
from aotjax.cli.stages import STAGES, Program, describe, render
from aotjax.core.errors import AotjaxError

DTYPES = {"f32": "float32", "f64": "float64", "f16": "float16", "bf16": "bfloat16", "i32": "int32",
          "i64": "int64", "i8": "int8", "u8": "uint8", "bool": "bool"}
DEFAULT_STAGES = ["jaxpr", "functionalized", "boundary"]
GRAD_STAGES = ["forward", "backward", "residuals"]
AOT_STAGES = ["aot_joint", "aot_forward", "aot_backward", "aot_residuals"]
_EMPTY_DIMS = re.compile(r"(\w)\s*\[\s*\]")  # `f32[]` is no Python expression: read as `f32[()]`


class UsageError(Exception):
    """A bad command line: reported in one line, exit code 2."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", nargs="?", help="path/to/file.py:function")
    parser.add_argument("--args", default="", help='argument types, e.g. "f32[8,16], f32[16,4]"')
    parser.add_argument("--stage", action="append", choices=sorted(STAGES), metavar="NAME",
                        help="a stage to print (repeatable; default: " + " ".join(DEFAULT_STAGES) + ")")
    parser.add_argument("--grad", action="store_true",
                        help="also print the forward and backward programs of the function's vjp and its residuals")
    parser.add_argument("--aot", action="store_true",
                        help="also print the joint, forward and backward programs of aot(fn) and its residuals")
    parser.add_argument("--list-stages", action="store_true", help="list the stages and exit")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs")


@dataclass(frozen=True)
class ArgSpec:
    """An array argument of the command line (`f32[8,16]`): a pytree leaf."""

    dtype: str
    shape: tuple[int, ...]


def parse_arg_types(text: str) -> list:
    """One pytree per argument, its leaves `ArgSpec`s: `"f32[8,16], {'b': i32[]}"` ->
    `[ArgSpec("float32", (8, 16)), {"b": ArgSpec("int32", ())}]`. Parsed with `ast`, never evaluated;
    an error names the argument (and the path inside it) that it is about."""
    text = text.strip()
    if not text:
        return []
    source = "[" + _EMPTY_DIMS.sub(r"\1[()]", text) + "]"
    try:
        tree = ast.parse(source, mode="eval").body
    except SyntaxError as e:
        i = _argument_at(source, (e.offset or 1) - 1)
        raise UsageError(f"cannot parse the argument types: argument {i} is not well formed ({e.msg}); expected "
                         f"e.g. f32[8,16], or a dict, list or tuple of those") from None
    return [_arg_spec(node, source, f"argument {i}") for i, node in enumerate(tree.elts)]


def _argument_at(source: str, offset: int) -> int:
    """The index of the top-level argument of `[a, b, ...]` that character `offset` of `source` is in."""
    depth, index = 0, 0
    for ch in source[1:offset]:
        depth += ch in "([{"
        depth -= ch in ")]}"
        index += ch == "," and depth == 0
    return index


def _arg_spec(node: ast.expr, source: str, path: str) -> Any:
    """An argument's pytree from its syntax: `dtype[dims]`, dicts, lists, tuples, Python constants."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        return _array_spec(node, source, path)
    if isinstance(node, ast.Dict):
        out = {}
        for k, v in zip(node.keys, node.values, strict=True):
            if not (isinstance(k, ast.Constant) and isinstance(k.value, (str, int))):
                raise UsageError(f"{path}: a dict key must be a string or an int, got "
                                 f"{ast.get_source_segment(source, k) if k is not None else '**'!r}")
            out[k.value] = _arg_spec(v, source, f"{path}[{k.value!r}]")
        return out
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [_arg_spec(e, source, f"{path}[{i}]") for i, e in enumerate(node.elts)]
        return items if isinstance(node, ast.List) else tuple(items)
    value = _constant(node)
    if value is not _NOT_CONSTANT:
        return value
    raise UsageError(f"cannot parse {path} ({ast.get_source_segment(source, node)!r}): expected an array type such as "
                     f"f32[8,16], or a dict, list or tuple of them")


def _array_spec(node: ast.Subscript, source: str, path: str) -> ArgSpec:
    name = node.value.id
    if name not in DTYPES:
        raise UsageError(f"{path}: unknown dtype {name!r} in --args; use one of {' '.join(DTYPES)}")
    dims = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    shape = [_constant(d) for d in dims]
    if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise UsageError(f"{path}: the shape in {ast.get_source_segment(source, node)!r} must be non-negative ints, "
                         f"e.g. {name}[8,16] ({name}[] for a scalar)")
    return ArgSpec(DTYPES[name], tuple(shape))


_NOT_CONSTANT = object()


def _constant(node: ast.expr) -> Any:
    """A number, bool, None or string literal (`-1` included), else `_NOT_CONSTANT`."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        value = _constant(node.operand)
        return -value if isinstance(value, (int, float)) and not isinstance(value, bool) else _NOT_CONSTANT
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, bool, str, type(None))):
        return node.value
    return _NOT_CONSTANT


def example_args(specs: list, rng: np.random.Generator) -> tuple:
    """Random tensors for the `ArgSpec` leaves of the parsed arguments; other leaves stay as they are."""
    return tuple(jax.tree_util.tree_map(
        lambda s: example_tensor(s.dtype, s.shape, rng) if isinstance(s, ArgSpec) else s, specs))


def check_arity(fn, specs: list, target: str) -> None:
    """A UsageError when `fn` cannot take as many positional arguments as `--args` describes."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    if not len(required) <= len(specs) <= len(positional):
        names = ", ".join(p.name for p in positional)
        raise UsageError(f"{target} takes {len(positional)} positional argument(s) ({names}), but --args describes "
                         f"{len(specs)}")


def example_tensor(dtype: str, shape: tuple[int, ...], rng: np.random.Generator) -> aotjax.Tensor:
    if dtype == "bool":
        return aotjax.tensor(rng.random(shape) < 0.5)
    if dtype.startswith(("int", "uint")):
        return aotjax.tensor(rng.integers(0, 10, size=shape).astype(dtype))
    return aotjax.tensor(rng.normal(size=shape).astype(np.float32), dtype=dtype)


def load_function(target: str):
    """`path/to/file.py:function` (or `file.py:Class.method`) -> the function object."""
    path, sep, name = target.rpartition(":")
    if not sep or not path or not name:
        raise UsageError(f"expected path/to/file.py:function, got {target!r}")
    if not os.path.isfile(path):
        raise UsageError(f"no such file: {path}")
    module_name = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))  # NOTE: so the file's own imports resolve
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    obj = module
    for part in name.split("."):
        if not hasattr(obj, part):
            raise UsageError(f"{path} has no function {name!r}")
        obj = getattr(obj, part)
    return obj


def run(args: argparse.Namespace) -> int:
    if args.list_stages:
        for s in STAGES.values():
            print(f"{s.name:12} {s.title}")
        return 0
    try:
        if not args.target:
            raise UsageError("missing the target: path/to/file.py:function")
        specs = parse_arg_types(args.args)
        leaves = [s for s in jax.tree_util.tree_leaves(specs) if isinstance(s, ArgSpec)]
        if any(s.dtype in ("float64", "int64") for s in leaves):
            jax.config.update("jax_enable_x64", True)  # 64-bit inputs need jax's x64 mode
        fn = load_function(args.target)
        check_arity(fn, specs, args.target)
    except UsageError as e:
        print(f"aotjax explain: error: {e}", file=sys.stderr)
        return 2
    program = Program(fn, example_args(specs, np.random.default_rng(args.seed)))
    sig = ", ".join(describe(a) for a in program.args)
    print(f"{program.name}({sig})\n")
    try:
        stages = (args.stage or DEFAULT_STAGES) + (GRAD_STAGES if args.grad else []) + (AOT_STAGES if args.aot else [])
        print(render(stages, program))
    except AotjaxError as e:
        print(f"aotjax explain: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0
