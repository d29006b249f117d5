"""Error types raised by aotjax. Messages name the op, what was expected and got, and the user's line."""
from __future__ import annotations


class AotjaxError(Exception):
    """Base class of aotjax's own errors."""


class ShapeError(AotjaxError, ValueError, RuntimeError):
    """An op got operands whose shapes do not fit together. Also a RuntimeError: torch raises one for a shape
    mismatch in an op (`view`, `matmul`, broadcasting), and scripts catch it so."""


class DTypeError(AotjaxError, TypeError, RuntimeError):
    """An op got an unsupported or unknown dtype. Also a RuntimeError, as torch's dtype errors in an op are
    (`add_` of a float into an integer tensor, integer indices expected)."""


class ConcretizationError(AotjaxError, TypeError):
    """A traced (abstract) value was used where Python needs a concrete one."""


class UnsupportedError(AotjaxError, NotImplementedError):
    """An op or combination of op and transform that aotjax does not support."""


class AliasingError(AotjaxError, RuntimeError):
    """A write that PyTorch semantics forbid (through overlapping memory, on a captured tensor, ...)."""


class CompilerError(AotjaxError, RuntimeError):
    """A compiler given to `aot` broke its contract (returned no callable, or a callable whose outputs do not
    match the program's), or raised."""


class DTypeTruncationWarning(UserWarning):
    """A 64-bit dtype was asked for without jax's x64 mode: the data gets its 32-bit form."""
