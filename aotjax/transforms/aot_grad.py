"""`grad`, `value_and_grad` and `vjp` of an `aot` function called on eager arguments: its compiled forward and
backward programs run directly, with no tracing per call.

Differentiating a function traces it (functionalize, jvp, partial_eval) and transposes what it recorded; when
the function is an aot function, what that trace records is one `aot_call` whose jvp runs the compiled forward
and whose transpose runs the compiled backward. The Python around those two calls (the interpreters entered,
the linear program recorded and transposed) cost 20 times the two executables on a tiny function. So when the
differentiated function *is* an aot function (`grad(aot(f))`), its arguments are eager and nothing traces the
caller, the transforms call `Aot._differentiate_eagerly`, which does what that trace would do:

    read        one value per input group (the arguments' storages), as the plain call reads them, donating nothing
    forward     the compiled forward: the outputs, the written inputs' new values, the bases, the residuals
    backward    the compiled backward on the residuals and the cotangents (the seed in the loss's slot, zeros
                in the other differentiated outputs' slots)
    boundary    the plain call's write-back and output replay (`boundary.apply`), after the backward succeeded
    cotangents  per differentiated argument, its group's cotangent read through its view (aliased arguments)

A plan (`_Plan`) per aot entry (the call cache's key: avals, layouts, aliasing, captured state, static values),
differentiated arguments, `has_aux` and kind (grad or vjp) says where everything goes; a call that matches no
entry, or whose plan does not apply (the loss is a view or an input, an argument is not a floating-point tensor,
run-time checks are on, ...), returns None and the transform takes its general path, which handles (and reports)
every case.
"""
from __future__ import annotations

import weakref
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from aotjax.core import call_epoch, views
from aotjax.core.interpreter import _state
from aotjax.core.interpreter import bind as _bind
from aotjax.interpreters.ad_util import is_differentiable
from aotjax.interpreters.eval import read
from aotjax.runtime import boundary, guards
from aotjax.runtime.boundary import GroupKind, OutKind, Slot
from aotjax.tensor import Tensor, is_eager
from aotjax.transforms.jit import _reader

__all__ = ["differentiate_eagerly"]

_CACHED_ZEROS_BYTES = 1 << 16  # NOTE: zero cotangents up to this size are made once per plan, larger ones per call


def differentiate_eagerly(aot, args: Sequence, kwargs: dict, argnums: tuple[int, ...] | None, has_aux: bool):
    """`(finish, cotangents)` for `aot(*args, **kwargs)` differentiated with respect to positional arguments
    `argnums` (None: every floating-point leaf, as `vjp`), run on the cached programs; None when the call must take
    the transform's general path. The forward has run; `finish()` applies the boundary (inputs written, outputs
    replayed) and returns what the function returned; `cotangents()` (grad: the loss seeded with ones) runs the
    backward and returns the cotangents of the leaves of `argnums`, in order; `cotangents(cts)` (vjp: one cotangent
    per leaf of the differentiated output) returns them by flat argument index, differentiated leaves only.

    NOTE: grad runs the backward before it applies the boundary, as its general path does: an exception leaves
    every input as it was."""
    if not kwargs and _state.autocast is None:  # NOTE: under autocast the call takes its key's entry
        record = aot._eager_last.get((argnums, has_aux))
        if record is not None and (full := record.match(args)) is not None:
            return record.plan.run(full)
    if aot.checks_enabled or guards.under_transform():
        return None
    stamp = None if call_epoch.transforms_running() else call_epoch.epoch[0]
    leaves, in_tree, statics = aot._split(args, kwargs)
    statics = guards.hashable_statics(statics) if statics else ()  # NOTE: as `Aot.__call__`, to share its entries
    signature = guards.call_key(leaves)
    if signature is None:
        return None
    key = (in_tree, statics, signature, False, guards.modes())
    entry = aot._cache.get(key)
    full = entry.staged.call_leaves(leaves) if entry is not None and entry.staged.refresh() is None else None
    if full is None:
        if entry is None:
            # NOTE: an entry the general path made (under a transform, keyed by abstract values) serves when it reads
            # no captured tensor (whose guard holds only for tracers); otherwise it is made here, as a plain call would
            entry = aot._cache.get((in_tree, statics, guards.abstract_key(leaves), False, guards.modes()))
            if entry is not None and not entry.staged.implicit:
                aot._cache.setdefault(key, entry)
        entry, full = aot._live_entry(args, kwargs, key, leaves)
    plan_key = (argnums, has_aux)
    plan = entry._eager_plans.get(plan_key, False)
    if plan is False:
        plan = entry._eager_plans.setdefault(plan_key, _make_plan(entry, in_tree, aot.static_argnums, argnums, has_aux))
    if plan is None:
        return None
    if (not kwargs and _state.autocast is None and all(map(is_eager, args))
            and len(full) == len(args) + len(entry.staged.implicit)):
        aot._eager_last[plan_key] = _LastCall(args, full[len(args):], plan, stamp, entry.staged.guards)
    return plan.run(full)


class _LastCall:
    """The last eager call of an aot function differentiated with one plan, with positional tensor arguments only:
    a call passing the very same tensor objects (held weakly), with nothing changed since (`call_epoch`: no tensor
    relaid out, no transform running, the config as it was), runs the plan with no lookup, as `jit`'s fast path
    (`aotjax.runtime.fast_call`) does."""

    __slots__ = ("refs", "implicit", "plan", "stamp", "guards", "grad_enabled")

    def __init__(self, args: Sequence, implicit: list, plan: "_Plan", stamp: int | None, guards):
        self.refs = [weakref.ref(a) for a in args]
        self.implicit, self.plan, self.stamp = implicit, plan, stamp
        self.guards, self.grad_enabled = guards or None, _state.grad_enabled  # NOTE: the entry's (see `Guards`)

    def match(self, args: Sequence) -> list | None:
        """The call's flat inputs (captured tensors after the arguments), or None when it is not the last call's."""
        if call_epoch.epoch[0] != self.stamp or len(args) != len(self.refs) or _state.grad_enabled is not \
                self.grad_enabled or self.guards is not None and not self.guards.holds(self.implicit):
            return None
        for a, ref in zip(args, self.refs):
            if a is not ref():
                return None
        return [*args, *self.implicit]


class _Plan:
    """Where everything goes when one aot entry is differentiated eagerly (see the module docstring): made once per
    entry, differentiated arguments and `has_aux`, so that a call does list indexing and the two executable calls.
    `main_pos`: the forward outputs the differentiated output's leaves are; `seed`: grad's (one scalar leaf, a ones
    cotangent) rather than vjp's (the caller's cotangents)."""

    def __init__(self, entry, vjp, diff_leaves: list[int], main_pos: list[int], seed: bool):
        meta = entry.staged.meta
        self.meta, self.vjp = meta, vjp
        self._forward = self._backward = None  # see `_callable`
        self.readers = [_reader(g, False) for g in meta.groups]
        positions = {slot: i for i, slot in enumerate(meta.layout)}
        self.base_pos = [positions[(Slot.BASE, k)] for k in range(meta.n_bases)]
        self.mutated_pos = [positions[(Slot.MUTATED, g)] for g in meta.mutated]
        simple = not meta.mutated and not meta.metadata and all(
            o.kind is OutKind.BASE and not o.chain for o in meta.outputs) and len(
            {o.index for o in meta.outputs}) == len(meta.outputs)
        self.new_values = [(self.base_pos[o.index], o.layout) for o in meta.outputs] if simple else None
        self.single = meta.out_tree.num_leaves == 1 and meta.out_tree.num_nodes == 1
        n_out = len(vjp.diff_out)
        returned = iter(range(n_out, n_out + sum(i is None for i in vjp.saved_inputs)))
        self.residuals = [(True, i) if i is not None else (False, next(returned)) for i in vjp.saved_inputs]
        # the backward's cotangent inputs: one per differentiated output; zeros but in the main outputs' slots (made
        # once when small: jax arrays are immutable and no program donates them)
        diff_pos = [k for k, d in enumerate(vjp.diff_out) if d]
        self.ct_avals = [vjp.out_avals[k] for k in diff_pos]
        self.cts = [_zeros(a) if a.nbytes <= _CACHED_ZEROS_BYTES else None for a in self.ct_avals]
        self.main_slots = [diff_pos.index(p) for p in main_pos]
        if seed:
            (slot,) = self.main_slots
            self.cts[slot] = jnp.ones((), self.ct_avals[slot].dtype)
        self.cached_cts = all(c is not None for c in self.cts)
        # per differentiated argument leaf: which backward output is its group's cotangent, and its view in the group
        diff_groups = [gi for gi, d in enumerate(vjp.diff_in) if d]
        table = {}
        for gi, g in enumerate(meta.groups):
            for idxs, chain in zip(g.leaves, g.chains, strict=True):
                for i in idxs:
                    table.setdefault(i, (diff_groups.index(gi) if gi in diff_groups else None, chain))
        self.diff_leaves = [(i, *table[i]) for i in diff_leaves]
        self.plain = all(not chain for _, _, chain in self.diff_leaves) and len(
            {j for _, j, _ in self.diff_leaves}) == len(self.diff_leaves)  # NOTE: no views, no object passed twice

    def run(self, full: list):
        """`(finish, cotangents)`: the forward has run; `cotangents(main_cts=None)` runs the backward and returns the
        differentiated leaves' cotangents (a dict by flat argument index for vjp, a list for grad); `finish()`
        applies the boundary and returns the function's output."""
        vals = [read_input(full[i]) for i, read_input in self.readers]
        outs = (self._forward or self._callable("forward"))(*vals)
        residuals = [vals[i] if primal else outs[i] for primal, i in self.residuals]

        def cotangents(main_cts: Sequence | None = None):
            cts = self.cts if self.cached_cts else [c if c is not None else _zeros(a)
                                                    for c, a in zip(self.cts, self.ct_avals, strict=True)]
            if main_cts is not None:
                cts = self._with_main(list(cts), main_cts)
            in_cts = (self._backward or self._callable("backward"))(*residuals, *cts)
            # NOTE: jax's executables never return an input's buffer as an output: these tensors own new buffers
            if self.plain:
                leaf_cts = [Tensor._wrap(in_cts[j]) for _, j, _ in self.diff_leaves]
            else:
                wrapped: dict = {}
                leaf_cts = []
                for _, j, chain in self.diff_leaves:
                    ct = wrapped.get(j)
                    if ct is None:
                        ct = wrapped[j] = Tensor._wrap(in_cts[j])
                    leaf_cts.append(views.apply_chain(_bind, ct, chain).clone() if chain else ct)
            if main_cts is None:
                return leaf_cts
            return {i: ct for (i, _, _), ct in zip(self.diff_leaves, leaf_cts, strict=True)}

        def finish():
            if self.new_values is not None:  # NOTE: outputs that are new values, nothing written: no replay
                out = []
                for i, layout in self.new_values:
                    t = Tensor._wrap(outs[i])
                    t._strides, t._offset = layout
                    out.append(t)
                return out[0] if self.single else jax.tree_util.tree_unflatten(self.meta.out_tree, out)
            return boundary.apply(self.meta, full, [outs[i] for i in self.mutated_pos],
                                  [outs[i] for i in self.base_pos], wrap=Tensor._wrap)

        return finish, cotangents

    def _callable(self, which: str):
        """What runs the `which` program on flat arrays: XLA's executable (compiled now, on first use), or the
        program, which checks what a user compiler's callable returns."""
        program = getattr(self.vjp, which)
        fn = program if program.check_calls else program.executable
        if hasattr(fn, "variants") and _one_device():
            fn = self._settling(which, fn)
        setattr(self, f"_{which}", fn)
        return fn

    def _settling(self, which: str, placed):
        """`placed` (an executable compiled per placement of its inputs, `aot_shardings.PlacedExecutable`) for its
        first call; then, on the one device there is, the one executable that call compiled, called directly.
        NOTE: choosing a variant reads every input's sharding, twice the cost of the executable on small inputs."""
        def first(*vals):
            outs = placed(*vals)
            variants = placed.variants()
            if len(variants) == 1:
                # NOTE: a jax `Compiled` calls a C++ function it made on its first call (`_call`); called directly,
                # without `Compiled.__call__`'s Python frame, where this jax has it
                direct = getattr(variants[0], "_call", None)
                setattr(self, f"_{which}", direct if callable(direct) else variants[0])
            else:
                setattr(self, f"_{which}", placed)
            return outs

        return first

    def _with_main(self, cts: list, main_cts: Sequence) -> list:
        """`cts` with the caller's cotangents of the main outputs in their slots (summed where outputs share one)."""
        filled = set()
        for slot, ct in zip(self.main_slots, main_cts, strict=True):
            value = jnp.asarray(read(ct), self.ct_avals[slot].dtype)
            cts[slot] = cts[slot] + value if slot in filled else value
            filled.add(slot)
        return cts


def _one_device() -> bool:
    """Whether arrays can live on one device only (the CPU backend, one device): then a program's inputs are always
    placed as its first call's were."""
    return jax.default_backend() == "cpu" and jax.device_count() == 1


def _zeros(aval):
    return jnp.zeros(aval.shape, aval.dtype)


def _make_plan(entry, in_tree, static_argnums: Sequence[int], argnums: tuple[int, ...] | None,
               has_aux: bool) -> _Plan | None:
    """The plan for `entry` differentiated at positional arguments `argnums` (None: vjp, every floating-point
    leaf), or None when the eager path does not apply."""
    meta = entry.staged.meta
    group_of = {i: gi for gi, g in enumerate(meta.groups) for idxs in g.leaves for i in idxs}
    if argnums is None:
        if static_argnums:
            return None
        diff_leaves = [i for i, gi in sorted(group_of.items()) if meta.groups[gi].kind is not GroupKind.SCALAR
                       and is_differentiable(meta.groups[gi].aval.dtype) and i < in_tree.num_leaves]
    else:
        diff_leaves = _argnum_leaves(in_tree, static_argnums, argnums)
        if diff_leaves is None:
            return None
        for i in diff_leaves:
            g = meta.groups[group_of[i]] if i in group_of else None
            if g is None or g.kind is not GroupKind.TENSOR or not is_differentiable(g.aval.dtype):
                return None
    diff_groups = {group_of[i] for i in diff_leaves}
    wanted = tuple(gi in diff_groups for gi in range(len(meta.groups)))
    main_leaves = _main_leaves(meta.out_tree, has_aux)
    if main_leaves is None or (argnums is not None and len(main_leaves) != 1):
        return None
    main_pos = []
    for k in main_leaves:
        spec = meta.outputs[k]
        if spec.kind is not OutKind.BASE or spec.chain:
            return None
        main_pos.append(meta.layout.index((Slot.BASE, spec.index)))
    vjp = entry.vjp(wanted)
    for p in main_pos:
        aval = vjp.out_avals[p]
        if not vjp.diff_out[p] or not is_differentiable(aval.dtype) or (argnums is not None and aval.shape != ()):
            return None
    return _Plan(entry, vjp, diff_leaves, main_pos, seed=argnums is not None)


def _argnum_leaves(in_tree, static_argnums: Sequence[int], argnums: tuple[int, ...]) -> list[int] | None:
    """The flat indices (among the non-static arguments' leaves) of the leaves of positional arguments `argnums`;
    None if one is static."""
    if any(a in static_argnums for a in argnums):
        return None
    arg_trees = in_tree.children()[0].children()
    starts = np.cumsum([0] + [t.num_leaves for t in arg_trees])
    dyn = [a - sum(s < a for s in static_argnums) for a in argnums]
    if any(not 0 <= a < len(arg_trees) for a in dyn):
        return None
    return [i for a in dyn for i in range(starts[a], starts[a + 1])]


def _main_leaves(out_tree, has_aux: bool) -> list[int] | None:
    """The flat output indices of the differentiated output (the whole output, or with `has_aux` the first of the
    pair the function returns), or None when the output is not such a pair."""
    tree = jax.tree_util.tree_unflatten(out_tree, list(range(out_tree.num_leaves)))
    if has_aux:
        if not (isinstance(tree, tuple) and len(tree) == 2):
            return None
        tree = tree[0]
    return jax.tree_util.tree_leaves(tree)
