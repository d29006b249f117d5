"""The call of a function made pure at a transform's boundary: what `grad`, `vjp`, `jvp`, `linearize` and `vmap`
transform. `PureCall(fun, args, ...)` groups the flat arguments by storage (aliased arguments share a base);
`pure(*bases)` runs `fun` functionalized on the bases and returns its outputs' values, the written inputs' new
bases and the intermediate bases (captured tensors the function writes become input groups after the others);
`finish` applies the boundary to the caller (writes, view changes, outputs that alias inputs rebuilt as views)."""
from __future__ import annotations

import functools
from typing import Callable, Sequence

import jax
import numpy as np

from aotjax.core import views
from aotjax.core.avals import PYTHON_SCALARS as _SCALARS
from aotjax.core.avals import get_aval
from aotjax.core.interpreter import below, new_main
from aotjax.core.interpreter import bind as _bind
from aotjax.core.source_info import where
from aotjax.interpreters.ad_util import Zero, add_tangents, instantiate
from aotjax.interpreters.functionalize import FunctionalizeTrace, FunctionalTensor, current_value
from aotjax.ops.creation.factories import zeros
from aotjax.runtime import boundary
from aotjax.transforms.functionalize import as_it_is, capture_live

__all__ = ["PureCall", "zeros_for"]


class PureCall:
    """A call of `fun` on `args`: its flat arguments, input groups and, once `pure` has run, the
    boundary record. `pure(*bases)` is the function of the groups' bases that is differentiated: it
    returns the values of the differentiated outputs, then the written inputs' new bases and the
    intermediate bases (for the boundary)."""

    def __init__(self, fun: Callable, args: Sequence, kwargs: dict, has_aux: bool, what: str):
        self.fun, self.has_aux, self.what = fun, has_aux, what
        self.leaves, self.in_tree = jax.tree_util.tree_flatten((list(args), kwargs))
        self.groups = boundary.group_inputs(self.leaves)
        self.bases = boundary.entry_bases(self.groups, self.leaves, recorded=True)
        self.n_explicit = (len(self.leaves), len(self.groups))  # NOTE: captured tensors are appended by `pure`
        self.meta = None
        self.layouts: dict | None = None  # flat argument index -> (strides, offset) seen inside (`boundary.enter`)
        # NOTE: set by a transform that configures the functionalize trace (vmap: live captured tensors, checks of
        # writes): `on_enter(trace, inner)` runs once the arguments are entered, before the function.
        self.on_enter: Callable | None = None

    def pure(self, *bases) -> list:
        n_leaves, n_groups = self.n_explicit
        self.leaves, self.groups = self.leaves[:n_leaves], self.groups[:n_groups]
        with new_main(FunctionalizeTrace, dynamic=True) as main:
            inner = boundary.enter(main.trace, self.groups, list(bases), self.leaves, self.layouts)
            # NOTE: captured eager tensors are live state: read where they are (a transform below, jit's, makes them
            # its implicit inputs), written back after the call like arguments; never differentiated.
            main.trace.capture_tracers = True
            main.trace.capture = functools.partial(capture_live, main.trace, self.groups, self.leaves, inner,
                                                   as_it_is)
            if self.on_enter is not None:
                self.on_enter(main.trace, inner)
            args, kwargs = jax.tree_util.tree_unflatten(self.in_tree, inner)
            out = self.fun(*args, **kwargs)
            if self.has_aux:
                if not (isinstance(out, tuple) and len(out) == 2):
                    raise TypeError(f"{self.what} with has_aux=True: the function must return a pair "
                                    f"(output, aux), got {type(out).__name__}{where()}")
                out, aux = out
            else:
                aux = None
            main_leaves, self.main_tree = jax.tree_util.tree_flatten(out)
            out_leaves, out_tree = jax.tree_util.tree_flatten((out, aux))
            body = boundary.collect(main.trace, self.groups, inner, out_leaves, out_tree)
            with below(main):
                values = [current_value(o) if isinstance(o, FunctionalTensor) and o._trace is main.trace else o
                          for o in main_leaves]
        self.meta, self.n_main = body.meta, len(main_leaves)
        self.n_new, self.n_bases = len(body.new_bases), len(body.bases)
        return [*values, *body.new_bases, *body.bases]

    def finish(self, flat_out: list):
        """Apply the boundary to the caller (writes, view changes) and return `(out, aux)`."""
        new_bases = flat_out[self.n_main:self.n_main + self.n_new]
        bases = flat_out[self.n_main + self.n_new:]
        return boundary.apply(self.meta, self.leaves, new_bases, bases)

    def groups_of(self, leaf_indices) -> list[bool]:
        """Which groups hold one of `leaf_indices` (those bases get tangents)."""
        wanted = set(leaf_indices)
        return [any(i in wanted for idxs in g.leaves for i in idxs) for g in self.groups[:len(self.bases)]]

    def leaf_cotangent(self, i: int, base_cts: list):
        """The cotangent of flat argument `i`: its group's, read through its view if the group shares
        a storage (the documented rule for aliased arguments)."""
        found = self._group_of_leaf().get(i)
        if found is None:
            return zeros_for(self.leaves[i])
        gi, chain = found
        ct = base_cts[gi]
        if isinstance(ct, Zero) or ct is None:
            return zeros_for(self.leaves[i])
        return views.apply_chain(_bind, ct, chain) if chain else ct

    def _group_of_leaf(self) -> dict:
        """Flat argument index -> (its group, its view chain in the group), made once per call (a scan of the groups
        for every argument was quadratic in their number)."""
        n = len(self.bases)
        if getattr(self, "_leaf_groups", (None, -1))[1] != n:
            table = {}
            for gi, g in enumerate(self.groups[:n]):
                for idxs, chain in zip(g.leaves, g.chains, strict=True):
                    for i in idxs:
                        table.setdefault(i, (gi, chain))
            self._leaf_groups = (table, n)
        return self._leaf_groups[0]

    def base_tangents(self, leaf_tangents: dict) -> list:
        """Tangents of the groups' bases from tangents of flat arguments (aliased ones summed into
        their storage through their views)."""
        out = []
        for g, base in zip(self.groups[:len(self.bases)], self.bases, strict=True):
            t = Zero(get_aval(base))
            for idxs, chain in zip(g.leaves, g.chains, strict=True):
                lt = leaf_tangents.get(idxs[0])
                if lt is None:
                    continue
                if chain:
                    lt = views.write_through(_bind, instantiate(Zero(get_aval(base))), chain, lt)
                t = add_tangents(t, lt)
            out.append(None if isinstance(t, Zero) else t)
        return out


def zeros_for(x):
    aval = get_aval(x) if not isinstance(x, _SCALARS) else get_aval(np.asarray(x))
    return zeros(*aval.shape, dtype=aval.dtype)
