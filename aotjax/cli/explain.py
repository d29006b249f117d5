"""Print the program a Python function traces to, stage by stage.

  python -m aotjax explain model.py:step --args "f32[8,16], f32[16,4]"

imports model.py, calls `step` on random tensors of those shapes and dtypes (dtypes: f32 f64 f16 bf16
i32 i64 i8 u8 bool; `f32[]` is a scalar) and prints the jaxpr as written, each equation with its
source line, the functionalized program and the call boundary (which inputs are written, which
outputs alias what). `--grad` adds the forward and backward programs of its vjp and the residuals
the forward saves; `--aot` adds the joint, forward and backward programs of `aot(fn)` (AOTAutograd),
each with a descriptor per input and output, and its residuals. `--stage` picks other stages (see
`--list-stages`).
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import re
import sys

import jax
import numpy as np

import aotjax
from aotjax.cli.stages import STAGES, Program, render
from aotjax.core.errors import AotjaxError

DTYPES = {"f32": "float32", "f64": "float64", "f16": "float16", "bf16": "bfloat16", "i32": "int32",
          "i64": "int64", "i8": "int8", "u8": "uint8", "bool": "bool"}
DEFAULT_STAGES = ["jaxpr", "functionalized", "boundary"]
GRAD_STAGES = ["forward", "backward", "residuals"]
AOT_STAGES = ["aot_joint", "aot_forward", "aot_backward", "aot_residuals"]
_ARG = re.compile(r"\s*(\w+)\s*\[([\d\s,]*)\]\s*(?:,|$)")


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


def parse_arg_types(text: str) -> list[tuple[str, tuple[int, ...]]]:
    """`"f32[8,16], i32[]"` -> `[("float32", (8, 16)), ("int32", ())]`."""
    out, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = _ARG.match(text, pos)
        if m is None:
            raise UsageError(f"cannot parse the argument types at {text[pos:]!r}: expected e.g. f32[8,16]")
        name, dims = m.group(1), m.group(2)
        if name not in DTYPES:
            raise UsageError(f"unknown dtype {name!r} in --args; use one of {' '.join(DTYPES)}")
        out.append((DTYPES[name], tuple(int(d) for d in dims.replace(" ", "").split(",") if d)))
        pos = m.end()
    return out


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
        types = parse_arg_types(args.args)
        if any(dt in ("float64", "int64") for dt, _ in types):
            jax.config.update("jax_enable_x64", True)  # 64-bit inputs need jax's x64 mode
        fn = load_function(args.target)
    except UsageError as e:
        print(f"aotjax explain: error: {e}", file=sys.stderr)
        return 2
    rng = np.random.default_rng(args.seed)
    program = Program(fn, tuple(example_tensor(dt, shape, rng) for dt, shape in types))
    sig = ", ".join(a.aval.str_short() for a in program.args)
    print(f"{program.name}({sig})\n")
    try:
        stages = (args.stage or DEFAULT_STAGES) + (GRAD_STAGES if args.grad else []) + (AOT_STAGES if args.aot else [])
        print(render(stages, program))
    except AotjaxError as e:
        print(f"aotjax explain: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0
