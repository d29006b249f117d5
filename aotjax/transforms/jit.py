"""`jit`: functionalize, trace, lower and compile through XLA; every call restores eager semantics.

Stages, as in JAX: `jit(f).lower(*args)` is a `Lowered` (the functionalized jaxpr, the boundary
record, StableHLO), and `.compile()` a `Compiled`. Calls look up a compiled program by the
guards of `aotjax.runtime.guards` (shapes, dtypes, pytree structure, static arguments, aliasing
pattern) and trace again on a miss. Written inputs are donated: the program returns each written
input's new base in the buffer of the old one, and the caller's storage takes it (no copy).
With `checks=True` the program is traced with its run-time index checks and lowered through
`jax.experimental.checkify`; a failed check raises the op's own error after the call, before
anything is written back (see `jit`).

Under another transform a jitted function is inlined into what that transform traces, except under `vmap`:
there it stays one compiled call (`compiled_call` of its program, staged per example), which the batching
rule turns into one batched program, compiled once; so an eager `vmap(jit(f))` runs compiled code.
"""
from __future__ import annotations

import contextlib
import functools
import numbers
import reprlib
import weakref
from operator import attrgetter
from typing import Any, Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from aotjax.autograd import graph
from aotjax.core.checks import config, emit_checks
from aotjax.core.errors import UnsupportedError
from aotjax.core.eval_jaxpr import eval_jaxpr
from aotjax.core.interpreter import Tracer, _state
from aotjax.core.source_info import where
from aotjax.distributed.program_check import check_same_program
from aotjax.interpreters.batching import vmap_running
from aotjax.interpreters.eval import read
from aotjax.lowering.to_jax import CheckedProgram, avals_to_structs, flat_function, xla_compiler
from aotjax.ops.calls.compiled import Program, compiled_call_p
from aotjax.runtime import boundary, fast_call, guards, recompiles, trace_reads
from aotjax.runtime.boundary import GroupKind, OutKind, Slot
from aotjax.tensor import Tensor
from aotjax.transforms.argnums import fun_name, normalize_argnums
from aotjax.transforms.functionalize import Staged, finish_call, functionalize, stage_functionalized
from aotjax.transforms.make_jaxpr import make_jaxpr, split_static
from aotjax.transforms.passes import run_pass

_MISS = fast_call.MISS
_VARIANTS = 8  # earlier programs kept per cache key (`Jitted._live_entry`)


class CachedProgram(NamedTuple):
    """One program a compiled function keeps (`Jitted.cache_info`): its type, input names, guards in words."""
    signature: str
    inputs: tuple
    guards: tuple


class CacheInfo(NamedTuple):
    """What `Jitted.cache_info()` returns: how many traces, the programs kept, why it traced again lately."""
    traces: int
    programs: tuple
    reasons: tuple

    def __str__(self) -> str:
        lines = [f"{self.traces} trace{'' if self.traces == 1 else 's'}, {len(self.programs)} program"
                 f"{'' if len(self.programs) == 1 else 's'} cached"]
        for k, p in enumerate(self.programs):
            lines.append(f"[{k}] {p.signature}  inputs: {', '.join(p.inputs)}")
            lines += [f"      guard: {g}" for g in p.guards]
        lines += [f"traced again: {r}" for r in self.reasons]
        return "\n".join(lines)


class _Entry:
    """One compiled program of a jitted function: the staged program, the jax-jitted flat function
    (jax compiles it on first call), which flat inputs it donates, where each output goes, and with
    `checks`, the `CheckedProgram` whose function was jitted (it returns the checkify error first)."""

    __slots__ = ("staged", "fn", "donated", "readers", "base_pos", "mutated_pos", "checks", "_program")

    def __init__(self, staged: Staged, donate: bool, checks: bool = False, shardings: tuple | None = None):
        self.staged = staged
        meta = staged.meta
        self.donated = tuple(meta.mutated) if donate else ()
        self.readers = [_reader(g, gi in self.donated) for gi, g in enumerate(meta.groups)]
        positions = {entry: i for i, entry in enumerate(meta.layout)}
        self.base_pos = [positions[(Slot.BASE, k)] for k in range(meta.n_bases)]
        self.mutated_pos = [positions[(Slot.MUTATED, g)] for g in meta.mutated]
        fn = fast_call.guard_avals(flat_function(staged.jaxpr), staged.jaxpr.in_avals)
        in_shardings, out_shardings = shardings or (None, None)
        if out_shardings is not None:
            fn = _constrained(fn, out_shardings)
        if checks:  # NOTE: a donated input's new value is its old one when a check fails (the program's input g)
            guard = [(pos, g) for g, pos in zip(meta.mutated, self.mutated_pos, strict=True) if g in self.donated]
            self.checks = CheckedProgram(fn, guard)
            fn = self.checks.function
        else:
            self.checks = None
        options = {"in_shardings": in_shardings} if in_shardings is not None else {}
        self.fn = jax.jit(fn, donate_argnums=self.donated, **options)
        self._program = None

    @property
    def program(self) -> Program:
        """The pure program as a `compiled_call` runs it (compiled on first use; it donates nothing, as its inputs
        are values its caller still holds)."""
        if self._program is None:  # NOTE: threads: a race makes two, each whole
            self._program = Program(self.staged.jaxpr, xla_compiler, "compiled",
                                    function=self.staged.jaxpr.meta.name or "fn")
        return self._program

    def run(self, leaves: list, fn, checked: bool = True) -> Any:
        """Call `fn` (the jitted function or an executable) on this call's arguments; replay. With
        checks, `fn` returns the checkify error first (unless not `checked`): a failed check raises
        before anything is written back, once the donated inputs have their buffers back."""
        vals = [read_input(leaves[i]) for i, read_input in self.readers]
        if self.donated:
            fast_call.unshare_donated(vals, self.donated)
        outs = fn(*vals)
        if self.checks is not None and checked:
            error, outs = outs
            self._raise_failed_check(error, leaves, outs)
        return boundary.apply(self.staged.meta, leaves, [outs[i] for i in self.mutated_pos],
                              [outs[i] for i in self.base_pos], wrap=_wrap)

    def _raise_failed_check(self, error, leaves: list, outs) -> None:
        failure = self.checks.failure(error)
        if failure is None:
            return
        groups = self.staged.meta.groups
        for g, pos in zip(self.staged.meta.mutated, self.mutated_pos, strict=True):
            target = boundary.group_base(groups[g], leaves)
            if isinstance(target, Tensor) and target._storage.base.is_deleted():  # donated: its value at entry
                boundary.write_back(target, outs[pos])
        raise failure


def _constrained(fn, shardings: list):
    """`fn` with its outputs constrained to `shardings` (None: as XLA decides)."""
    def constrained(*args):
        return [o if sh is None else jax.lax.with_sharding_constraint(o, sh)
                for o, sh in zip(fn(*args), shardings, strict=True)]

    constrained.__name__ = fn.__name__
    return constrained


def _is_sharding_leaf(x) -> bool:
    return x is None or isinstance(x, jax.sharding.Sharding)


def _per_leaf(prefix, tree, what: str) -> list:
    """`prefix` (a sharding, None, or a pytree prefix of `tree` holding them) broadcast to `tree`'s leaves."""
    shape = jax.tree_util.tree_structure(prefix, is_leaf=_is_sharding_leaf)
    try:
        subtrees = shape.flatten_up_to(tree)
    except (ValueError, TypeError) as e:
        raise ValueError(f"jit: {what} must be a sharding, None, or a pytree prefix of the "
                         f"{'arguments' if what == 'in_shardings' else 'outputs'} holding them ({e})") from None
    out = []
    for sh, sub in zip(jax.tree_util.tree_leaves(prefix, is_leaf=_is_sharding_leaf), subtrees, strict=True):
        out += [sh] * len(jax.tree_util.tree_leaves(sub))
    return out


def program_shardings(staged: Staged, dyn_args: tuple, in_shardings, out_shardings) -> tuple | None:
    """jit's `in_shardings`/`out_shardings` as the pure program's: one per input group (its first argument's; None
    for captured tensors: as they are) and one per output (fresh values only: an output that is an input, or a view
    of one, has that input's sharding)."""
    if in_shardings is None and out_shardings is None:
        return None
    meta = staged.meta
    program_in = None
    if in_shardings is not None:
        per_arg = _per_leaf(tuple(in_shardings) if isinstance(in_shardings, list) else in_shardings, dyn_args,
                            "in_shardings")
        program_in = tuple(per_arg[g.leaves[0][0]] if g.leaves and g.leaves[0][0] < len(per_arg) else None
                           for g in meta.groups)
    program_out = None
    if out_shardings is not None:
        outputs = jax.tree_util.tree_unflatten(meta.out_tree, list(range(len(meta.outputs))))
        per_out = _per_leaf(out_shardings, outputs, "out_shardings")
        positions = {entry: i for i, entry in enumerate(meta.layout)}
        program_out = [None] * len(meta.layout)
        for k, (spec, sh) in enumerate(zip(meta.outputs, per_out, strict=True)):
            if sh is None:
                continue
            if spec.kind is not OutKind.BASE or spec.chain:
                name = meta.output_names[k] if k < len(meta.output_names) else f"out[{k}]"
                raise ValueError(f"jit: out_shardings gives {name} a sharding, but that output is an input of the "
                                 f"function or a view (it keeps its base's sharding); give it None")
            program_out[positions[(Slot.BASE, spec.index)]] = sh
    return program_in, program_out


def _reader(g, donated: bool):
    """`(leaf index, read)`: how the program's input for group `g` is read from a call's arguments.
    A donated input that aotjax does not own alone (the user's own array, a view's value) is copied
    first, so that only aotjax's own buffers are ever deleted."""
    if g.kind is GroupKind.TENSOR:
        if g.synthetic:
            read_input = _read_storage
        elif donated:
            read_input = _read_for_donation
        else:
            read_input = read
    elif g.kind is GroupKind.SCALAR:
        read_input = functools.partial(np.asarray, dtype=g.aval.dtype)
    else:
        read_input = jnp.copy if donated else _identity
    return g.leaves[0][0], read_input


def _read_storage(x):
    return x._storage.base


def _read_for_donation(x):
    v = read(x)
    return v if x._storage.owned and not x._chain else jnp.copy(v)


def _identity(x):
    return x


def _wrap(array) -> Tensor:
    return Tensor._wrap(array)


def _lowered_program(entry: _Entry):
    """What `jit: lower` shows: the program handed to `jax.jit`, its donated inputs in `meta.donate`."""
    return entry.staged.jaxpr.with_meta(donate=entry.donated)


class Jitted:
    """A function compiled through XLA on first call for each new input signature. See `jit`."""

    what = "jit"  # the transform's name, for messages
    output_constants: tuple[type, ...] = ()  # what may be returned besides tensors and numbers (`check_outputs`)
    recompile_limited = True  # False: a library's cache of programs, one per structure (`recompiles.note_trace`)

    def __init__(self, fun: Callable, static_argnums: int | Sequence[int], donate: bool, checks: bool | None = None,
                 in_shardings=None, out_shardings=None):
        self.fun = fun
        self.static_argnums = normalize_argnums(fun, static_argnums, self.what, "static_argnums")
        self.donate = donate
        self.checks = checks
        self.in_shardings, self.out_shardings = in_shardings, out_shardings
        self._cache: dict = {}
        self._variants: dict = {}  # key -> earlier programs of that key whose guards or captured state did not fit
        self._trace_log = recompiles.TraceLog()
        # the last compiled call with static arguments, to repeat (`_fast_static`; without them, `_invoke` is the
        # fast path): MISS for any call when none
        self._fast_run: Callable = fast_call.no_fast_call
        self.trace_count = 0
        functools.update_wrapper(self, fun, updated=())  # NOTE: not fun.__dict__: a wrapped Jitted has state

    def _split(self, args, kwargs, positions: list | None = None):
        """The call's flat dynamic arguments, their pytree structure and its static arguments as a cache key (the
        static positions of this call are appended to `positions`, when given)."""
        dyn, statics = args, ()
        if self.static_argnums:
            dyn, static, _ = split_static(args, self.static_argnums, kwargs, self.what, self.fun)
            statics = guards.hashable_statics(tuple(args[i] for i in static), static, self.what)
            if positions is not None:
                positions.extend(static)
        leaves, in_tree = jax.tree_util.tree_flatten((dyn, kwargs))
        return leaves, in_tree, statics

    @property
    def checks_enabled(self) -> bool:
        """Whether programs are traced and compiled with their run-time checks now (`checks`, or when
        that is None, `aotjax.config.checks`): part of the compile cache key."""
        return self.checks if self.checks is not None else config.checks

    def _call(self, *args, **kwargs):
        """A call: the last call's fast path when it applies (with static arguments, `_fast_run`: without, the
        call came here because `_invoke` missed), else the full path, which traces and compiles when it must."""
        if not kwargs:
            out = self._fast_run(args)
            if out is not _MISS:
                return out
        static_pos: list = []
        leaves, in_tree, statics = self._split(args, kwargs, static_pos)
        signature = guards.call_key(leaves)
        if signature is None or guards.under_transform():
            if vmap_running():
                key = (in_tree, statics, guards.abstract_key(leaves), self.checks_enabled, guards.modes())
                entry, full = self._live_entry(args, kwargs, key, leaves)
                if _self_contained(entry.staged):
                    return bind_staged(entry.staged, full, functools.partial(compiled_call_p.bind,
                                                                             program=entry.program))
                self._cache.pop(key, None)  # NOTE: a program of this call only: not kept
            # NOTE: under another transform the body is inlined into it, functionalized (checked if asked to).
            with emit_checks(self.checks) if self.checks is not None else contextlib.nullcontext():
                out = functionalize(self.fun, self.static_argnums)(*args, **kwargs)
            paths = jax.tree_util.tree_flatten_with_path(out)[0]
            check_outputs(self.what, self.fun, [("out" + jax.tree_util.keystr(p), x) for p, x in paths],
                          self.output_constants)
            return out
        key = (in_tree, statics, signature, self.checks_enabled, guards.modes())
        entry, full = self._live_entry(args, kwargs, key, leaves)
        staged = entry.staged
        if records_call(staged, full):  # NOTE: imperative autograd: one node of the recording, never fast
            return finish_call(staged, recorded_call(staged, full, functools.partial(compiled_call_p.bind,
                                                                                     program=entry.program)))
        fast_sig = None
        if (not kwargs and entry.checks is None and not staged.grad_effects and not staged.grad_guards
                and _state.autocast is None):  # NOTE: a call under autocast takes the full path (its key)
            dyn = tuple(a for i, a in enumerate(args) if i not in static_pos) if static_pos else args
            fast_sig = fast_call.signature(dyn, entry.staged.implicit)
        out = entry.run(full, entry.fn)
        self._forget_fast_call()
        if fast_sig is not None:
            slow = None if static_pos else weakref.WeakMethod(self._call)
            fast = fast_call.FastCall.build(entry.fn, entry.staged.meta, entry.staged.jaxpr, entry.donated,
                                            entry.mutated_pos, entry.base_pos, dyn, list(entry.staged.implicit),
                                            fast_sig, unless_checks=self.checks is None, slow=slow,
                                            guards=entry.staged.guards, offsets=entry.staged.offsets)
            if fast is not None:
                fast.statics = (len(args), tuple(static_pos), statics)
                if static_pos:
                    self._fast_run = functools.partial(self._fast_static, fast)
                else:
                    self._invoke = fast.run
        return finish_call(staged, out)

    # NOTE: `jitted(*args)` calls `_invoke`: `_call`, or once a call without static arguments ran, that call's fast
    # path compiled to take the arguments itself (`FastCall.build` with `slow`; where it misses it goes on to
    # `_call`). A property that returns it, rather than a `__call__` that calls it, saves a Python frame per call;
    # the class's `_invoke` is `_call` (bound when read from the object: no reference cycle).
    _invoke = _call
    __call__ = property(attrgetter("_invoke"), doc="Call the function: see `jit`.")

    def _forget_fast_call(self) -> None:
        self._fast_run = fast_call.no_fast_call
        self.__dict__.pop("_invoke", None)

    def _fast_static(self, fast: fast_call.FastCall, args: tuple) -> Any:
        """`fast.run(dynamic arguments)` for a call whose static arguments are the last call's (equal, of the same
        types), else `MISS`."""
        n, positions, statics = fast.statics
        if len(args) != n:
            return fast_call.MISS
        try:
            if guards.hashable_statics(tuple(args[i] for i in positions)) != statics:
                return fast_call.MISS
        except TypeError:  # NOTE: unhashable: the full path says so
            return fast_call.MISS
        return fast.run(tuple(a for i, a in enumerate(args) if i not in positions))

    def _live_entry(self, args, kwargs, key, leaves) -> tuple[Any, list]:
        """The entry for `key` and the call's flat inputs, captured tensors included. Traced again if none fits: the
        Python values its trace read changed (`Staged.refresh`), or a captured tensor changed shape or dtype, or is
        an argument now (`Staged.call_leaves`). Earlier programs of the key are kept and tried (a model switched
        between `train()` and `eval()`; a step alternating between `.grad`s being None and not)."""
        entry = self._cache.get(key)
        if entry is None:
            entry = self._publish(key, self._traced(args, kwargs, self._new_key_reason(key)))
            why = None
        else:
            why = entry.staged.refresh()
        full = entry.staged.call_leaves(leaves) if why is None else None
        if full is None:
            others = self._variants.setdefault(key, [])
            for k, other in enumerate(others):
                if other.staged.refresh() is None and (full := other.staged.call_leaves(leaves)) is not None:
                    others[k], entry = entry, other
                    break
            else:
                others.insert(0, entry)
                del others[_VARIANTS:]
                entry = self._traced(args, kwargs, why or "a captured tensor changed shape or dtype, or is an "
                                                          "argument now, or a .grad it read became or stopped being "
                                                          "None")
                full = entry.staged.call_leaves(leaves)
            self._cache[key] = entry
        return entry, full

    def _traced(self, args, kwargs, reason: str | None):
        """`_stage`, recording what the trace read: the entry's guards (`aotjax.runtime.trace_reads`)."""
        recompiles.note_trace(self.what, fun_name(self.fun), self._trace_log, self.trace_count + 1, reason,
                              self.recompile_limited)
        with trace_reads.recording() as reads:
            entry = self._stage(args, kwargs)
        check_staged_outputs(self.what, self.fun, entry.staged, self.output_constants)
        entry.staged.guards = trace_reads.guards_for(self.fun, reads, entry.staged.implicit)
        return entry

    def _new_key_reason(self, key) -> str | None:
        """Why a call with a key not cached traces (None: the first trace)."""
        if not self._cache:
            return None
        last_key, last = next(reversed(self._cache.items()))
        return recompiles.signature_change(last_key, key, last.staged.meta.input_names)

    def cache_info(self) -> "CacheInfo":
        """The programs cached, each with its input signature and its guards (the Python values its trace read,
        where it reads its captured tensors), and why the function traced again lately."""
        programs = []
        for key, entry in self._cache.items():
            for e in (entry, *self._variants.get(key, ())):
                staged = e.staged
                programs.append(CachedProgram(_signature(staged.jaxpr), tuple(staged.meta.input_names),
                                              tuple(staged.guards.describe() if staged.guards else ())))
        return CacheInfo(self.trace_count, tuple(programs), tuple(self._trace_log.reasons))

    def _publish(self, key, entry):
        """Cache `entry`, fully built, for `key`; returns the cached entry.
        NOTE: no lock is held while tracing (a traced function may wait on another thread): threads
        missing one key at once each build an entry, the first one cached is kept and used by all."""
        return self._cache.setdefault(key, entry)

    def _stage(self, args, kwargs) -> _Entry:
        """jit's pipeline, once per input signature."""
        self.trace_count += 1
        checks = self.checks_enabled
        with emit_checks(checks):
            staged = run_pass("jit: functionalize", stage_functionalized, self.fun, args, kwargs,  # the pure program
                              self.static_argnums, self.what, show=attrgetter("jaxpr")).release()
        check_same_program(self.what, self.fun, staged.jaxpr, (args, kwargs, staged.implicit))  # many processes
        shardings = program_shardings(staged, self._dynamic(args, kwargs), self.in_shardings, self.out_shardings)
        return run_pass("jit: lower", _Entry, staged, self.donate, checks, shardings,  # jax.jit, donating
                        show=_lowered_program)

    def _dynamic(self, args, kwargs) -> tuple:
        if not self.static_argnums:
            return tuple(args)
        return tuple(split_static(args, self.static_argnums, kwargs, self.what, self.fun)[0])

    def lower(self, *args, **kwargs) -> "Lowered":
        """Trace and lower for these arguments (nothing runs): the functionalized jaxpr, the boundary
        record and the StableHLO text. After a call with arguments like these, the program that call ran (its
        guards still holding): nothing is traced again, as with `jax.jit(f).lower`."""
        entry = self._called_entry(args, kwargs)
        if entry is None:
            entry = self._stage(args, kwargs)
            check_staged_outputs(self.what, self.fun, entry.staged, self.output_constants)
        return Lowered(self, entry, entry.fn.lower(*avals_to_structs(entry.staged.jaxpr.in_avals)), args, kwargs)

    def _called_entry(self, args, kwargs):
        """The cached program an eager call with these arguments would run now, or None."""
        try:
            leaves, in_tree, statics = self._split(args, kwargs)
        except (TypeError, ValueError):  # NOTE: not arguments a call takes: `_stage` says why
            return None
        signature = guards.call_key(leaves)
        if signature is None or guards.under_transform():
            return None
        entry = self._cache.get((in_tree, statics, signature, self.checks_enabled, guards.modes()))
        if entry is None or entry.staged.refresh() is not None or entry.staged.call_leaves(leaves) is None:
            return None
        return entry

    def clear_cache(self) -> None:
        self._cache.clear()
        self._variants.clear()
        self._trace_log = recompiles.TraceLog()
        self._forget_fast_call()

    def __repr__(self) -> str:
        options = f", static_argnums={self.static_argnums}" if self.static_argnums else ""
        options += ", donate=False" if not self.donate else ""
        options += f", checks={self.checks}" if self.checks is not None else ""
        n = len(self._cache)
        return f"{self.what}({fun_name(self.fun)}{options}): {n} program{'' if n == 1 else 's'} cached"


def _constant_outputs(staged: Staged) -> list[tuple[str, Any]]:
    """The outputs of `staged` that are no values of the program (returned as the trace saw them), with their names."""
    meta = staged.meta
    return [(name, spec.value) for spec, name in zip(meta.outputs, meta.output_names, strict=True)
            if spec.kind is OutKind.CONST]


def check_staged_outputs(what: str, fun: Callable, staged: Staged, constants: tuple[type, ...] = ()) -> None:
    """`check_outputs` for a trace of `fun`: its outputs that are no values of the program, once per trace (jit,
    aot and their `lower`, checkpoint regions)."""
    check_outputs(what, fun, _constant_outputs(staged), constants)


def check_outputs(what: str, fun: Callable, outputs: list[tuple[str, Any]], constants: tuple[type, ...] = ()) -> None:
    """Refuse an output (`(name, value)`) that is neither a tensor nor a number (nor one of `constants`), as `jax.jit`
    does: another object would be returned as the first trace saw it at every call (stale, or holding the trace's
    tensors)."""
    for name, value in outputs:
        if not isinstance(value, (Tensor, numbers.Number, np.ndarray, jax.Array, *constants)):
            names = ["tensors", "numbers", *("strings" if t is str else f"{t.__name__} objects" for t in constants)]
            kinds = f"{', '.join(names[:-1])} and {names[-1]}"
            raise TypeError(f"{what}: {fun_name(fun)} returns {reprlib.repr(value)} of type {type(value).__name__} "
                            f"at {name}{where()}; a {'checkpointed' if what == 'checkpoint' else 'compiled'} "
                            f"function returns {kinds} (pytrees of them) only. Return "
                            f"it from outside the function (compute it before or after the call), or make what it "
                            f"depends on a static argument (static_argnums) and build it outside")


def _self_contained(staged: Staged) -> bool:
    """Whether `staged` can be one call under vmap: it reads no traced value from its closure (its program would
    be this call's only) and writes no captured tensor (vmap's boundary decides about those). If not, it is
    inlined."""
    n_explicit = len(staged.meta.groups) - len(staged.implicit)
    return (not any(isinstance(c, Tracer) for c in staged.jaxpr.consts)
            and all(g < n_explicit for g in staged.meta.mutated))


def bind_staged(staged: Staged, leaves: list, bind: Callable) -> Any:
    """A call of `staged` under a transform, as one primitive: `bind(*bases)` binds it on the input groups' bases
    (snapshots at entry) and returns the program's outputs, which are replayed onto the call's arguments `leaves`
    (written inputs, outputs aliasing inputs)."""
    meta = staged.meta
    bases = [_operand(b, g) for b, g in zip(boundary.entry_bases(meta.groups, leaves), meta.groups, strict=True)]
    by_slot = dict(zip(meta.layout, bind(*bases), strict=True))
    return boundary.apply(meta, leaves, [by_slot[(Slot.MUTATED, g)] for g in meta.mutated],
                          [by_slot[(Slot.BASE, k)] for k in range(meta.n_bases)])


def records_call(staged: Staged, leaves: list) -> bool:
    """Whether an eager call of `staged` on `leaves` is recorded for imperative autograd (`recorded_call`): grad is
    enabled and an input requires grad, the function assigns no `.grad` and writes no leaf that requires grad.
    NOTE: a program that updates parameters in place is a training step (a functional one: `value_and_grad` then
    `opt.step(grads)`, or one that calls `backward()` inside; PyTorch allows such writes only under `no_grad()`):
    its outputs are not differentiated again, and it runs as compiled (donating, sharded, fast) rather than as a
    node. A program that writes an input that requires grad and is no leaf (an activation) is recorded, the write
    with it."""
    if staged.grad_effects or not graph.records(leaves):  # NOTE: a function that calls `backward()` is a step
        return False
    written = [boundary.group_base(staged.meta.groups[g], leaves) for g in staged.meta.mutated]
    leaves_written = [x for x in written if graph.requires_grad(x) and graph.leaf_of(x) is not None]
    if not leaves_written:
        return True
    others = [x for x in written if graph.requires_grad(x) and graph.leaf_of(x) is None]
    if others:
        raise UnsupportedError(
            f"jit: the function writes in place both a leaf that requires grad (a parameter: an update, as under "
            f"no_grad()) and a tensor that requires grad and is no leaf (of shape {tuple(others[0].shape)}: a write "
            f"autograd must record){where()}. Compile the update and the computation as two functions, or write "
            f"into a clone of the second.")
    return False


def recorded_call(staged: Staged, leaves: list, bind: Callable) -> Any:
    """An eager call of `staged` on arguments some of which require grad (grad enabled): `bind_staged` on bases that
    carry the autograd graph, so the call is one node of the recording (`bind` records it) and its outputs require
    grad. What the program writes into an input that requires grad is written back as a recorded write (a `copy_` of
    the node's output: the input's graph continues through the call); into any other input, as a value."""
    meta = staged.meta
    bases = [_operand(boundary.graph_snapshot(boundary.group_base(g, leaves)), g) for g in meta.groups]
    by_slot = dict(zip(meta.layout, bind(*bases), strict=True))
    new_bases = []
    for g in meta.mutated:
        value = by_slot[(Slot.MUTATED, g)]
        recorded = graph.requires_grad(boundary.group_base(meta.groups[g], leaves)) and graph.requires_grad(value)
        new_bases.append(value if recorded else read(value))
    return boundary.apply(meta, leaves, new_bases, [by_slot[(Slot.BASE, k)] for k in range(meta.n_bases)])


def _operand(base, group):
    if isinstance(base, (bool, int, float, complex)):
        return np.asarray(base, dtype=group.base_aval().dtype)
    return base


def _signature(closed) -> str:
    """`(f32[3], i32[]) -> (f32[],)`: a program's input and output types."""
    ins = ", ".join(a.str_short() for a in closed.in_avals)
    outs = ", ".join(a.str_short() for a in closed.out_avals)
    return f"({ins}) -> ({outs}{',' if len(closed.out_avals) == 1 else ''})"


class Lowered:
    """A jitted function lowered for one input signature.

    `jaxpr`: the functionalized, pure ClosedJaxpr (inputs: one base per input group; outputs in
    `meta.layout` order); `meta`: the `BoundaryMeta` (what is written, what aliases what);
    `as_written`: the jaxpr of the function as written; `as_text()`: StableHLO; `compile()`."""

    def __init__(self, jitted: Jitted, entry: _Entry, lowered, args, kwargs):
        self._jitted, self._entry, self._lowered = jitted, entry, lowered
        self._args, self._kwargs = args, kwargs

    @property
    def jaxpr(self):
        return self._entry.staged.jaxpr

    @property
    def meta(self) -> boundary.BoundaryMeta:
        return self._entry.staged.meta

    @property
    def as_written(self):
        return make_jaxpr(self._jitted.fun, self._jitted.static_argnums)(*self._args, **self._kwargs)

    def as_text(self, debug_info: bool = False) -> str:
        """The StableHLO text; with `debug_info`, each op's location: the user's line of its equation
        (`mul@train.py:12 (loss)`)."""
        return self._lowered.as_text(debug_info=debug_info)

    def eval(self, *args, **kwargs):
        """Call with the functionalized jaxpr run by the reference interpreter (`eval_jaxpr`, one eager
        op at a time) instead of XLA, boundary included: a check that compilation changed nothing."""
        closed = self.jaxpr

        def interpret(*vals):
            return [read(o) for o in eval_jaxpr(closed, *map(_wrap, vals))]

        leaves, _, _ = self._jitted._split(args, kwargs)
        leaves = self._entry.staged.call_leaves(leaves)
        return self._entry.run(leaves, interpret, checked=False)  # NOTE: eval_jaxpr runs the checks eagerly

    def compile(self) -> "Compiled":
        return Compiled(self._jitted, self._entry, self._lowered.compile())

    def __str__(self) -> str:
        return f"{self.jaxpr.pretty(source_info=True)}\n{self.meta.describe()}"

    def __repr__(self) -> str:
        return f"Lowered({self._jitted.what}({fun_name(self._jitted.fun)}) {_signature(self.jaxpr)})"

    def _repr_pretty_(self, p, cycle):  # IPython / Jupyter: the program and its boundary
        p.text(str(self))


class Compiled:
    """A jitted function compiled for one input signature: call it with arguments of that signature
    (same shapes, dtypes, structure and aliasing pattern). `cost_analysis()` and `memory_analysis()`
    are XLA's."""

    def __init__(self, jitted: Jitted, entry: _Entry, executable):
        self._jitted, self._entry, self._executable = jitted, entry, executable

    def __call__(self, *args, **kwargs):
        leaves, _, _ = self._jitted._split(args, kwargs)
        leaves = self._entry.staged.call_leaves(leaves) if self._entry.staged.implicit else leaves
        if leaves is None or guards.call_key(leaves) != self._entry.staged.key:
            raise TypeError("Compiled: these arguments do not match the signature it was compiled for (shapes, "
                            "dtypes or aliasing pattern); call the jitted function instead, which compiles again")
        return self._entry.run(leaves, self._executable)

    def as_text(self) -> str:
        return self._executable.as_text()

    def cost_analysis(self):
        return self._executable.cost_analysis()

    def memory_analysis(self):
        return self._executable.memory_analysis()

    def __repr__(self) -> str:
        return f"Compiled({self._jitted.what}({fun_name(self._jitted.fun)}) {_signature(self._entry.staged.jaxpr)})"


def jit(fun: Callable, static_argnums: int | Sequence[int] = (), donate: bool = True,
        checks: bool | None = None, *, in_shardings=None, out_shardings=None) -> Jitted:
    """Compile `fun` through XLA, keeping eager semantics at the call.

    `fun` is functionalized and traced for the shapes, dtypes, pytree structure, static arguments
    and aliasing pattern of its arguments, then compiled; later calls with the same signature reuse
    the program. Arguments written in place are updated after the call (with `donate`, in place:
    the program writes the new value into the old buffer); outputs that alias inputs are views of
    the caller's tensors. Under another transform (`grad`, `make_jaxpr`, ...) the body is inlined.

    Out-of-range indices: eagerly they raise as in PyTorch, but a compiled program knows its indices
    only when it runs, and by default does what XLA does: gathers (`x[i]`, `index_select`,
    `embedding`) clamp an index into range, `gather` (`take_along_axis`) gives NaN (floats) for it,
    scatters (`x[i] = v`, `index_put`, `scatter`, `scatter_add`, `index_add`) drop the update; a
    negative index in [-size, 0) counts from the end, even where PyTorch rejects it (`gather`,
    `index_select`, ...). With `checks=True` (default: `aotjax.config.checks`) every index is
    checked as the program runs (`jax.experimental.checkify`): a bad one raises the error eager mode
    raises (same class and message, the op's source line) after the call, and no input is changed,
    donated ones included (their old values are the program's outputs then). Checks cost a
    reduction per index and a sync with the device at each call, so they are off by default.

    `in_shardings` and `out_shardings` are `jax.jit`'s: a `jax.sharding.Sharding`, None (as XLA decides, or as the
    argument is placed), or a pytree prefix of the (non-static) positional arguments / of the outputs holding them.
    An output that is an input or a view of one keeps that input's sharding (give it None).

    >>> @aotjax.jit
    ... def step(w, g):
    ...     w.sub_(0.5 * g)
    ...     return (w * w).sum()
    >>> w = aotjax.ones(3)
    >>> step(w, aotjax.ones(3)), w
    (tensor(0.75), tensor([0.5, 0.5, 0.5]))
    >>> pick = aotjax.jit(lambda x, i: x[i], checks=True)
    >>> pick(aotjax.ones(3), aotjax.tensor([3]))
    Traceback (most recent call last):
    IndexError: getitem: index 3 is out of bounds for dimension 0 with size 3 (at ...)
    """
    return Jitted(fun, static_argnums, donate, checks, in_shardings, out_shardings)
