"""Named passes: every pipeline (`make_jaxpr`, `jit`, `grad`/`vjp`, `checkpoint`, `aot`) is a short
function of `run_pass` lines, one per pass, each one visible:

- the `aotjax` logger logs `pass <name>` at DEBUG level, with the program(s) the pass made;
- `AOTJAX_DUMP=1` prints every pass's program(s) to stdout, each under a header
  `--- aotjax pass: <name> ---` (`--- aotjax pass: <name> (<label>) ---` for a pass that makes
  several, like `aot: partition (forward)`), source lines included;
- `AOTJAX_TYPECHECK=1` typechecks them (the test suite turns it on), except a program built for the
  display alone (eager `grad`'s backward, below).

A pass is named `<pipeline>: <pass>` and shows what it made once it is done. What each pipeline
prints, in order:

    make_jaxpr(f)(x)   trace
    jit(f)(x)          jit: functionalize          the pure program (traced through functionalize)
                       jit: lower                  what `jax.jit` gets, with the donated inputs
    grad(f)(x)         grad: linearize (linear)    the linear program (residuals, tangents -> tangents)
                       grad: transpose             the backward (residuals, cotangents -> cotangents)
    aot(f)(x)          aot: functionalize, [aot: decompose,] aot: lower (the plain call's program;
                       `aot: lower inference` instead, at the first call, with a user compiler)
    grad(aot(f))(x)    aot: functionalize, [aot: decompose,] aot: lower, then
                       aot: linearize (forward)    primals -> outputs, residuals (partial_eval's known part)
                       aot: linearize (linear)     residuals, tangents -> output tangents
                       aot: transpose              the linear program run backwards
                       aot: joint                  forward then backward as one program, the cut recorded
                       aot: partition (forward)    the partitioner's forward program
                       aot: partition (backward)   and backward program
                       aot: lower forward          (the compiler, as the forward first runs)
                       aot: lower backward         (as the backward first runs)
                       On eager arguments grad runs aot's two programs directly and has no pass of its own. Where
                       it traces the call (under another transform), `grad: linearize (linear)` (its linear program,
                       one `aot_lin`) comes before `aot: lower backward`, and `grad: transpose` (the compiled
                       backward, called) after it.

`vjp` and `linearize` print grad's passes under their own names (`vjp: linearize`), `value_and_grad`
as `grad`; a `checkpoint` region prints `checkpoint: functionalize` (the region) each time it is staged.

`grad(f)` of a plain function runs eagerly, op by op, through the functionalize, jvp and partial-eval
interpreters: its forward is computed, not staged, so there is no functionalized or forward program
to print; `grad: linearize` prints the linear program partial evaluation recorded, and `grad: transpose`
the backward program, traced from that linear program for the dump (no user code runs again). Under
another transform (`make_jaxpr(grad(f))`, `aot(grad(f))`) the whole program is that transform's.
"""
from __future__ import annotations

import functools
import logging
import os
from typing import Callable, Mapping, TypeVar

from aotjax.core.ir import ClosedJaxpr
from aotjax.core.typecheck import typecheck, typecheck_enabled

__all__ = ["logger", "dump_enabled", "run_pass", "log_pass"]

logger = logging.getLogger("aotjax")

R = TypeVar("R")
Shown = ClosedJaxpr | Mapping[str, ClosedJaxpr]


def dump_enabled() -> bool:
    """Whether every pass prints the programs it makes (`AOTJAX_DUMP=1`)."""
    return os.environ.get("AOTJAX_DUMP", "0") not in ("", "0")


def _itself(result):
    return result


def run_pass(name: str, fn: Callable[..., R], *args, show: Callable[[R], Shown] = _itself,
             display_only: bool = False, **kwargs) -> R:
    """Pass `name`: `fn(*args, **kwargs)`, then its programs `show(result)` (a ClosedJaxpr, or labelled
    ones) logged, dumped and typechecked as the module docstring says. `show` runs only when one of
    those is on. With `display_only`, `show` builds a program for the display alone (the pass itself
    ran eagerly, making none): it runs for the dump and the log, not to typecheck."""
    result = fn(*args, **kwargs)
    log_pass(name, lambda: show(result), display_only)
    return result


def log_pass(name: str, shown: Callable[[], Shown] | Shown, display_only: bool = False) -> None:
    """Log `name` (DEBUG); typecheck, log and print its programs when enabled (see `run_pass`)."""
    dump, debug = dump_enabled(), logger.isEnabledFor(logging.DEBUG)
    check = typecheck_enabled() and not display_only
    if not (dump or debug or check):
        return
    programs = shown() if callable(shown) else shown
    labelled = programs.items() if isinstance(programs, Mapping) else [("", programs)]
    for label, jaxpr in labelled:
        title = f"{name} ({label})" if label else name
        if jaxpr.meta.donate:
            title += f", donating inputs {', '.join(map(str, jaxpr.meta.donate))}"
        if check:
            typecheck(jaxpr)
        if dump or debug:
            text = jaxpr.pretty(source_info=True)
            if dump:
                print(f"--- aotjax pass: {title} ---\n{text}")
            logger.debug("pass %s:\n%s", title, text)


def as_pass(name: str, compiler: Callable) -> Callable:
    """`compiler` (a closed jaxpr and example avals -> a callable), each call of it run as the pass `name` (a program
    is compiled when it first runs)."""
    return functools.partial(_lower, name, compiler)


def _lower(name: str, compiler: Callable, jaxpr: ClosedJaxpr, example_avals) -> Callable:
    return run_pass(name, compiler, jaxpr, example_avals, show=lambda _: jaxpr)
