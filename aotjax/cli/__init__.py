"""`python -m aotjax <command>`: the command-line interface.

Each command is a module with `add_arguments(parser)` and `run(args) -> exit code`, listed in
`COMMANDS`. What a command prints about a program is a list of named stages (`aotjax.cli.stages`),
so a new pass adds one stage and every command can show it.
"""
from __future__ import annotations

import argparse
import sys
from typing import Sequence

from aotjax.cli import demo, explain, optable, where

COMMANDS = {
    "demo": demo,
    "explain": explain,
    "ops": optable,
    "where": where,
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="aotjax", description="PyTorch-style mutable tensors under "
                                     "JAX-style transforms, compiled through XLA.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="command")
    for name, module in COMMANDS.items():
        doc = (module.__doc__ or "").strip().splitlines()[0]
        p = sub.add_parser(name, help=doc, description=module.__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(p)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `python -m aotjax` and of the `aotjax` console script; returns the exit code."""
    args = build_parser().parse_args(argv)
    return COMMANDS[args.command].run(args)


if __name__ == "__main__":
    sys.exit(main())
