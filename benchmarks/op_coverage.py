"""How much of PyTorch's operator database aotjax implements.

Reads the public op names of `torch.testing._internal.common_methods_invocations.op_db` (internal ones set aside:
names starting with `_`, the `jiterator_*` CUDA tests, `torch._*` and `torch.ops.aten.*`), and counts one as
implemented when aotjax has it under the same name: `nn.functional.X` as `aotjax.nn.functional.X`, `linalg.X`,
`special.X`, `fft.X` (any dotted name) under `aotjax`, a plain `X` as `aotjax.X` or a Tensor method or property (or,
for op_db's in-place-only entries such as `uniform`, `Tensor.X_`). Ops aotjax rejects on purpose
(`aotjax.ops.unsupported`, e.g. `as_strided`) count as missing. Prints the count and the missing names by namespace.

    python benchmarks/op_coverage.py            # needs torch: pip install ".[test]" (the test extra)
    python benchmarks/op_coverage.py --list     # also the implemented names
"""
from __future__ import annotations

import argparse
import sys
import types
import unittest

import aotjax
from aotjax.ops.unsupported import UNSUPPORTED

REJECTED = {n for u in UNSUPPORTED for n in u.functions + u.methods}


def load_op_db() -> list:
    """torch's op_db (its OpInfo entries)."""
    try:
        import expecttest  # noqa: F401  (torch's test utilities import it; a stand-in is enough to read op_db)
    except ImportError:
        stub = types.ModuleType("expecttest")
        stub.TestCase = unittest.TestCase
        sys.modules["expecttest"] = stub
    from torch.testing._internal.common_methods_invocations import op_db
    return op_db


def op_db_names() -> list[str]:
    """The public op names of torch's op_db, sorted."""
    names = {op.name for op in load_op_db()}
    return sorted(n for n in names if not n.startswith(("_", "jiterator_", "torch.")))


def aotjax_op(name: str):
    """aotjax's callable for op_db's `name` (see the module docstring for the mapping), or None: a function, or for a
    Tensor method, property or in-place-only method a function of the tensor and the rest (`x.name(*args)`).

    >>> aotjax_op("add") is aotjax.add, aotjax_op("T")(aotjax.ones(2, 3)).shape, aotjax_op("as_strided")
    (True, (3, 2), None)
    """
    if name.split(".")[-1] in REJECTED:
        return None
    *path, leaf = name.split(".")
    owner = aotjax
    for part in path:
        owner = getattr(owner, part, None)
        if owner is None:
            return None
    if path:
        fn = getattr(owner, leaf, None)
        return fn if callable(fn) else None
    if callable(getattr(aotjax, leaf, None)):
        return getattr(aotjax, leaf)
    for method in (leaf, leaf + "_"):
        if isinstance(getattr(aotjax.Tensor, method, None), property):
            return lambda x, *args, _m=method: getattr(x, _m)
        if hasattr(aotjax.Tensor, method):
            return lambda x, *args, _m=method, **kwargs: getattr(x, _m)(*args, **kwargs)
    return None


def implemented(name: str) -> bool:
    """Whether aotjax has op_db's `name` (see the module docstring for the mapping).

    >>> implemented("add"), implemented("nn.functional.conv2d"), implemented("uniform"), implemented("as_strided")
    (True, True, True, False)
    """
    return aotjax_op(name) is not None


def torch_missing() -> str | None:
    """Why this script cannot run (torch is not installed), or None."""
    try:
        import torch  # noqa: F401  (only for op_db: aotjax itself never imports torch)
    except ImportError:
        return ("op_coverage: this script reads PyTorch's operator database (op_db), so it needs torch, which "
                "aotjax itself does not install. Install the test extra, which pins it, from the repository root: "
                "pip install \".[test]\"; then run python benchmarks/op_coverage.py again.")
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--list", action="store_true", help="also print the implemented names")
    args = parser.parse_args(argv)
    if (why := torch_missing()) is not None:
        print(why, file=sys.stderr)
        return 2
    names = op_db_names()
    have = [n for n in names if implemented(n)]
    missing = [n for n in names if not implemented(n)]
    print(f"aotjax implements {len(have)} of {len(names)} public op_db ops ({100 * len(have) / len(names):.0f}%)")
    groups: dict[str, list[str]] = {}
    for n in missing:
        groups.setdefault(n.rsplit(".", 1)[0] if "." in n else "torch / Tensor", []).append(n.rsplit(".", 1)[-1])
    print(f"\nmissing ({len(missing)}):")
    for group, items in sorted(groups.items(), key=lambda g: -len(g[1])):
        print(f"  {group} ({len(items)}): {' '.join(items)}")
    if args.list:
        print(f"\nimplemented ({len(have)}): {' '.join(have)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
