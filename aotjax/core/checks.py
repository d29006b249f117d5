"""Run-time checks: out-of-range indices raise as in PyTorch.

Eagerly every index is checked on its concrete value. A staged program (`jit`, `aot`, `make_jaxpr`)
holds no check unless asked (`jit(f, checks=True)`, or `aotjax.config.checks = True`): then the ops
taking indices stage a `check_index` equation (`aotjax.ops.indexing.subscripts`), which a checked lowering
turns into a `jax.experimental.checkify` check. This module holds the switches both sides read:

- `emit_checks(enabled)`: whether the ops bound inside stage their checks. Eager code (the outermost
  level) is always checked; each staging transform sets its own value while it traces, and keys its
  compile cache on it.
- `lowering_checks()`: while a checked program is lowered, a `CheckRecord` collects what each
  check lowered to (its predicate, and the exception and message it raises).
- `config`: the process-wide default of `jit`/`aot`'s `checks` (`AOTJAX_CHECKS=1` sets it).
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from aotjax.core import call_epoch

__all__ = ["Config", "config", "emit_checks", "checks_emitted", "CheckRecord", "lowering_checks", "check_record"]


@dataclass
class Config:
    """Process-wide settings (`aotjax.config`). `checks`: the default of `jit`/`aot`'s `checks`
    argument, read at each call (`AOTJAX_CHECKS=1` in the environment turns it on). `recompile_limit`: how
    many times one compiled function traces before a `RecompileWarning` says why (torch's name and default);
    `fail_on_recompile_limit_hit`: raise `RecompileLimitError` there instead (see `aotjax.runtime.recompiles`).

    >>> aotjax.config.checks
    False
    """

    checks: bool = field(default_factory=lambda: os.environ.get("AOTJAX_CHECKS", "0") not in ("", "0"))
    recompile_limit: int = 8
    fail_on_recompile_limit_hit: bool = False

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        call_epoch.advance()  # NOTE: a compiled call's fast path looks at its checks again

    def compilation_cache(self, directory: str | None, min_compile_time_secs: float = 0.0) -> None:
        """Keep compiled programs in `directory` (JAX's persistent compilation cache; None turns it off), so a
        later process compiles nothing for a program it has compiled before: `jit`, `aot`'s two programs and eager
        ops alike. Programs that took less than `min_compile_time_secs` to compile are cached too when it is 0 (the
        default here; JAX's own default, 1 s, leaves small programs out). The same as setting jax's
        `jax_compilation_cache_dir` (or the `JAX_COMPILATION_CACHE_DIR` environment variable) yourself.
        `AOTJAX_COMPILATION_CACHE=/path/to/dir` in the environment calls it when aotjax is imported."""
        import jax  # NOTE: core holds no jax state of its own: the cache is jax's

        jax.config.update("jax_compilation_cache_dir", directory)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_time_secs))
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


config = Config()
if os.environ.get("AOTJAX_COMPILATION_CACHE"):  # NOTE: the one-variable way to turn the persistent cache on
    config.compilation_cache(os.environ["AOTJAX_COMPILATION_CACHE"])

_emitting: list[bool] = [True]


@contextmanager
def emit_checks(enabled: bool):
    """Ops bound inside stage their run-time checks when `enabled` (eager values are always checked)."""
    _emitting.append(bool(enabled))
    try:
        yield
    finally:
        _emitting.pop()


def checks_emitted() -> bool:
    return _emitting[-1]


@dataclass
class CheckRecord:
    """What the checks of one program lowered to: `predicates` (one scalar jax bool per check, True
    when it passes, values of the trace being lowered) and `errors` (message template -> the exception
    class it raises)."""

    predicates: list[Any] = field(default_factory=list)
    errors: dict[str, type] = field(default_factory=dict)


_lowering: list[CheckRecord] = []


@contextmanager
def lowering_checks():
    """Lower the checks met inside (instead of dropping them), recording them in the yielded record."""
    record = CheckRecord()
    _lowering.append(record)
    try:
        yield record
    finally:
        _lowering.pop()


def check_record() -> CheckRecord | None:
    """The record of the checked lowering running now, or None (checks lower to nothing)."""
    return _lowering[-1] if _lowering else None
