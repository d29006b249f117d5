"""Where in the user's code an equation came from: the first stack frame outside aotjax."""
from __future__ import annotations

import functools
import os
import sys
import sysconfig
import threading
from contextlib import contextmanager
from dataclasses import dataclass

import jax
import jaxlib

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_STDLIB_DIR = os.path.abspath(sysconfig.get_paths()["stdlib"]) + os.sep
_JAX_DIRS = tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep for m in (jax, jaxlib))
_SKIP_PREFIXES = (_PACKAGE_DIR, _STDLIB_DIR, *_JAX_DIRS)


def in_package(filename: str, *parts: str) -> bool:
    """Whether `filename` is inside aotjax's own package, under `parts` (`in_package(f, "ops")`)."""
    return os.path.abspath(filename).startswith(os.path.join(_PACKAGE_DIR, *parts))


@dataclass(frozen=True, slots=True)
class SourceInfo:
    """A user source location: file, line and the enclosing function's name."""

    file: str
    line: int
    function: str

    def __str__(self) -> str:
        return f"{os.path.basename(self.file)}:{self.line} ({self.function})"


# NOTE: lru_cache is thread-safe (two threads may compute one entry twice, same answer).
@functools.lru_cache(maxsize=4096)
def is_internal(filename: str) -> bool:
    """Whether frames of `filename` (as code objects name it) are aotjax's, jax's or the stdlib's (by the installed
    packages' directories: a user's folder named `aotjax` is the user's)."""
    if filename.startswith("<aotjax"):  # NOTE: source aotjax generates (`fast_call`, out variants) is named so
        return True
    if not filename.startswith("<"):
        filename = os.path.abspath(filename)
    if filename.startswith(_SKIP_PREFIXES):
        # NOTE: tests and examples live outside the package dir, so they count as user code.
        return True
    return filename.startswith("<frozen")


class _Overrides(threading.local):
    """The current thread's stack of `source_info_of` attributions."""

    def __init__(self):
        self.stack: list[SourceInfo | None] = []


_override = _Overrides()


@contextmanager
def source_info_of(info: SourceInfo | None):
    """Attribute what is bound inside to `info` (the backward pass credits each equation it emits to
    the forward equation it differentiates, not to the line that called `grad`)."""
    stack = _override.stack
    stack.append(info)
    try:
        yield
    finally:
        stack.pop()


def user_source_info() -> SourceInfo | None:
    """The innermost frame of the call stack that is user code (not aotjax, jax or the stdlib loader)."""
    overrides = _override.stack
    if overrides and overrides[-1] is not None:
        return overrides[-1]
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not is_internal(filename):
            return SourceInfo(filename, frame.f_lineno, frame.f_code.co_name)
        frame = frame.f_back
    return None


def user_stacklevel() -> int:
    """The `stacklevel` that makes a `warnings.warn` in the caller point at the innermost user frame."""
    frame, level = sys._getframe(1), 1
    while frame is not None and is_internal(frame.f_code.co_filename):
        frame, level = frame.f_back, level + 1
    return level


def where() -> str:
    """' (at file.py:12 (fn))', or '' when no user frame is on the stack; for error messages."""
    info = user_source_info()
    return f" (at {info})" if info is not None else ""
