"""Hypothesis-generated programs of views, in-place ops and returns: eager and eval_jaxpr(make_jaxpr)
agree on outputs and on the arguments afterwards."""
import functools
import os
import re

import jax
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import aotjax
import aotjax.nn.functional as F
from aotjax.core.errors import AliasingError, UnsupportedError
from tests.helpers import (
    assert_trees_close,
    check_aot_boundary_agrees,
    check_boundary_agrees,
    check_call_agrees,
    check_grads_agree,
    check_traced_agrees,
    check_traced_matches_eager,
    directional_derivative,
    grad_ways,
)

# Each step acts on live tensor number `i` (mod the number live); views and results join the pool.
VIEW_STEPS = ["t", "row", "col_slice", "unsqueeze", "flatten_view", "diagonal", "detach", "expand_read"]
WRITE_STEPS = ["add_", "mul_", "zero_", "copy_from", "setitem_row", "t_", "unsqueeze_squeeze_"]
VALUE_STEPS = ["mul_add", "clone", "sin"]

step = st.tuples(st.sampled_from(VIEW_STEPS + WRITE_STEPS + VALUE_STEPS), st.integers(0, 7), st.integers(0, 7))


def _apply(pool, name, i, j):
    x = pool[i % len(pool)]
    y = pool[j % len(pool)]
    if name == "t" and x.ndim == 2:
        pool.append(x.t())
    elif name == "row" and x.ndim >= 1 and x.shape[0] > 0:
        pool.append(x[j % x.shape[0]])
    elif name == "col_slice" and x.ndim == 2:
        pool.append(x[:, j % 2::2])
    elif name == "unsqueeze" and x.ndim < 3:
        pool.append(x.unsqueeze(j % (x.ndim + 1)))
    elif name == "flatten_view" and x.is_contiguous():
        pool.append(x.view(-1))
    elif name == "diagonal" and x.ndim == 2:
        pool.append(x.diagonal())
    elif name == "detach":
        pool.append(x.detach())
    elif name == "expand_read" and x.ndim >= 1:
        pool.append(x.unsqueeze(0).expand(2, *x.shape).sum(0))
    elif name == "add_":
        x.add_(j * 0.5)
    elif name == "mul_":
        x.mul_(1.0 + j * 0.25)
    elif name == "zero_":
        x.zero_()
    elif name == "copy_from" and y.shape == x.shape and y is not x:
        x.copy_(y)
    elif name == "setitem_row" and x.ndim >= 1 and x.shape[0] > 0:
        x[j % x.shape[0]] = float(j)
    elif name == "t_" and x.ndim == 2:
        x.t_()
    elif name == "unsqueeze_squeeze_" and x.ndim < 3:
        x.unsqueeze_(0)
        x.squeeze_(0)
    elif name == "mul_add":
        pool.append(x * 2 + y.sum())
    elif name == "clone":
        pool.append(x.clone())
    elif name == "sin":
        pool.append(x.sin())


def make_program(steps, n_out):
    def program(a, b):
        pool = [a, b]
        for s in steps:
            _apply(pool, *s)
        return tuple(pool[-(k + 1) % len(pool)] for k in range(n_out))

    return program


@settings(max_examples=50 if jax.config.jax_enable_x64 else 200, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(step, min_size=1, max_size=10), n_out=st.integers(1, 3))
def test_random_programs_trace_like_eager(steps, n_out):
    rng = np.random.default_rng(0)
    a = aotjax.tensor(rng.normal(size=(3, 4)).astype(np.float32))
    b = aotjax.tensor(rng.normal(size=(4,)).astype(np.float32))
    check_traced_matches_eager(make_program(steps, n_out), a, b, rtol=1e-5, atol=1e-5)


def _make_inputs(aliased: bool):
    """`(a, b)` fresh: independent, or both views of one base (then the base is observed too)."""
    rng = np.random.default_rng(0)
    if aliased:
        base = aotjax.tensor(rng.normal(size=(4, 4)).astype(np.float32))
        return (base[:3], base[3]), [base]
    a = aotjax.tensor(rng.normal(size=(3, 4)).astype(np.float32))
    b = aotjax.tensor(rng.normal(size=(4,)).astype(np.float32))
    return (a, b), []


@settings(max_examples=30 if jax.config.jax_enable_x64 else 120, deadline=None,  # NOTE: x64: as fuzz_settings
          suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(step, min_size=1, max_size=8), n_out=st.integers(1, 3), aliased=st.booleans())
def test_random_programs_agree_through_the_boundary(steps, n_out, aliased):
    """Eager, functionalize, jit (first and cached call) and the functionalized jaxpr interpreted agree
    on outputs, on the inputs afterwards and on aliasing (outputs written after the call)."""
    check_boundary_agrees(make_program(steps, n_out), lambda: _make_inputs(aliased), rtol=1e-5, atol=1e-5)


# == programs of what users bring ====================================================================================
# Arguments: `fl`, a dict of two float tensors related as one of `ALIASINGS`; `aux`, a dict of an int and a bool
# tensor; and four static arguments: `n` (an int: slice lengths, arange sizes), `flag` (a bool: a branch), `scale` (a
# float) and `perm` (a tuple: a permutation). The program also reads tensors it captures (`_CAPTURED`, never
# written), builds constants inside (`tensor`, `arange`, `zeros`, `full`, index tensors, masks) and returns a pytree
# (a tuple or a dict). Each step picks its operands among the live tensors that suit it; views and results join the
# pool, and a view of a captured tensor is read-only like it.
def _float_dtype():
    return aotjax.float64 if jax.config.jax_enable_x64 else aotjax.float32


_SHARED_ARGUMENT = aotjax.tensor(np.full((3, 4), 0.25), dtype=_float_dtype())  # also an argument, in some programs
_SHARED_BASE = aotjax.tensor(np.full((4, 4), -0.5), dtype=_float_dtype())  # the base of arguments, in some programs
_CAPTURED = [aotjax.tensor(np.linspace(-1.0, 1.0, 4), dtype=_float_dtype()),  # reads of a closure
             aotjax.tensor([[2, 0, 1]] * 3), aotjax.tensor([True, False, True, True]), _SHARED_ARGUMENT, _SHARED_BASE]
_CAPTURED_VALUES = [np.array(c) for c in _CAPTURED]
STATIC_ARGNUMS = (2, 3, 4, 5)
statics = st.tuples(st.integers(1, 3), st.booleans(), st.sampled_from([0.5, 2.0, -1.5, 2]), st.sampled_from([(0, 1),
                                                                                                        (1, 0)]))

_FLOAT, _INT, _BOOL = "float", "int", "bool"


def _kind(x) -> str:
    return _BOOL if x.dtype == np.bool_ else _FLOAT if x.is_floating_point() else _INT


def _broadcast(*xs):
    """The broadcast shape of `xs`, or None."""
    try:
        return np.broadcast_shapes(*(tuple(x.shape) for x in xs))
    except ValueError:
        return None


def _broadcasts_to(src, dst) -> bool:
    return _broadcast(src, dst) == tuple(dst.shape)


def _overlaps(x) -> bool:
    """An expanded view: PyTorch refuses to write into it."""
    return any(s == 0 and n > 1 for s, n in zip(x.stride(), x.shape))


def _value_of(x, j):
    """A Python scalar of `x`'s kind, from the step's second number."""
    return {_FLOAT: j * 0.5 - 1.0, _INT: j - 3, _BOOL: j % 2 == 1}[_kind(x)]


class _Program:
    """The live tensors of one run of a generated program, and the static arguments it was called with."""

    def __init__(self, tensors, n, flag, scale, perm, smooth=False):
        self.smooth = smooth  # for finite differences: no jumps (comparisons, casts to int), no float32
        self.pool = list(tensors) + list(_CAPTURED)
        # NOTE: by slot, not by object: an argument may be a captured tensor too, written as the one, read as the other
        self.readonly = [False] * len(tensors) + [True] * len(_CAPTURED)
        self.operand_readonly = False  # the step's operand's
        self.n, self.flag, self.scale, self.perm = n, flag, scale, perm

    def pick(self, i, ok=lambda x: True, writable=False, readonly=False):
        live = [(x, r) for x, r in zip(self.pool, self.readonly)
                if ok(x) and not (writable and (r or _overlaps(x))) and (r or not readonly)]
        return live[i % len(live)] if live else (None, False)

    def operand(self, i, ok, writable=False, readonly=False):
        x, self.operand_readonly = self.pick(i, ok, writable, readonly)
        return x

    def view(self, x, v):  # `x` is the step's operand
        self.pool.append(v)
        self.readonly.append(self.operand_readonly)

    def new(self, v):
        self.pool.append(v)
        self.readonly.append(False)

    def floats(self, x):
        """`x`, made float64 before it meets a Python float in a smooth program (else float32: too coarse for
        finite differences)."""
        return x.to(_float_dtype()) if self.smooth and _kind(x) != _FLOAT else x


# Each step: (what it needs of its operand, what it does); `None` operands skip the step.
def _pick(seq, j):
    return seq[j % len(seq)]


def _view_steps():
    def narrow(p, x, j):
        p.view(x, x[:min(p.n, x.shape[0])])

    rows = lambda x: x.ndim >= 1 and x.shape[0] > 0  # noqa: E731

    return {
        "t": (lambda x: x.ndim == 2, lambda p, x, j: p.view(x, x.t())),
        "row": (lambda x: x.ndim >= 1 and x.shape[0] > 0, lambda p, x, j: p.view(x, x[j % x.shape[0]])),
        "col_slice": (lambda x: x.ndim == 2, lambda p, x, j: p.view(x, x[:, j % 2::2])),
        "unsqueeze": (lambda x: x.ndim < 3, lambda p, x, j: p.view(x, x.unsqueeze(j % (x.ndim + 1)))),
        "flatten_view": (lambda x: x.is_contiguous(), lambda p, x, j: p.view(x, x.view(-1))),
        "diagonal": (lambda x: x.ndim == 2, lambda p, x, j: p.view(x, x.diagonal())),
        "detach": (lambda x: True, lambda p, x, j: p.view(x, x.detach())),
        "narrow_static": (lambda x: x.ndim >= 1 and x.shape[0] > 0, narrow),
        "permute_static": (lambda x: x.ndim == 2, lambda p, x, j: p.view(x, x.permute(*p.perm))),
        "unbind": (rows, lambda p, x, j: p.view(x, x.unbind(0)[j % x.shape[0]])),
        "chunk": (lambda x: x.ndim >= 1 and x.shape[-1] > 0, lambda p, x, j: p.view(x, _pick(x.chunk(2, dim=-1), j))),
        "reshape_flat": (lambda x: True, lambda p, x, j: p.view(x, x.reshape(-1))),  # a view or a copy, as PyTorch
        "expand": (lambda x: x.ndim < 3 and x.numel() <= 16, lambda p, x, j: p.view(x, x.expand(2, *x.shape))),
        "movedim": (lambda x: x.ndim >= 2, lambda p, x, j: p.view(x, x.movedim(0, -1))),
        "squeeze": (lambda x: True, lambda p, x, j: p.view(x, x.squeeze())),
        "new_axis": (lambda x: x.ndim < 3, lambda p, x, j: p.view(x, x[..., None])),
        "select_last": (rows, lambda p, x, j: p.view(x, x.select(0, -1))),
        "alias": (lambda x: True, lambda p, x, j: p.view(x, x[...])),
    }


def _write_steps():
    def add_(p, x, j):
        y = p.pick(j, lambda y: _broadcasts_to(y, x) and (_kind(x) == _FLOAT or _kind(y) != _FLOAT))[0]
        x.add_(y if y is not None and j % 2 else _value_of(x, j))

    def setitem_index(p, x, j):
        x[aotjax.tensor([x.shape[0] - 1, 0])] = _value_of(x, j)  # an index tensor built inside

    def masked_fill_(p, x, j):
        mask = p.pick(j, lambda m: _kind(m) == _BOOL and _broadcasts_to(m, x))[0]
        if mask is None and _kind(x) != _BOOL and not (p.smooth and _kind(x) == _FLOAT):
            mask = x > _value_of(x, 2)
        if mask is not None:
            x.masked_fill_(mask, _value_of(x, j))

    def index_add_(p, x, j):
        src = aotjax.full((1, *x.shape[1:]), _value_of(x, j), dtype=x.dtype)
        x.index_add_(0, aotjax.tensor([j % x.shape[0]]), src)

    def copy_from(p, x, j):
        y = p.pick(j, lambda y: _broadcasts_to(y, x))[0]
        if y is not None:
            x.copy_(y)

    def iadd_index(p, x, j):
        idx = aotjax.tensor([0, x.shape[0] - 1])
        x[idx] += _value_of(x, j)  # an advanced read, a write of it back (`index_put_`)

    def setitem_mask(p, x, j):
        mask = p.pick(j, lambda m: _kind(m) == _BOOL and tuple(m.shape) == tuple(x.shape))[0]
        if mask is None and _kind(x) != _BOOL and not (p.smooth and _kind(x) == _FLOAT):
            mask = x < _value_of(x, 3)
        if mask is not None:
            x[mask] = _value_of(x, j)

    def index_put_accumulate(p, x, j):
        src = aotjax.full((2, *x.shape[1:]), _value_of(x, j), dtype=x.dtype)
        x.index_put_((aotjax.tensor([j % x.shape[0]] * 2),), src, accumulate=True)  # repeated: both add

    def scatter_add_(p, x, j):
        index = aotjax.zeros((1, *x.shape[1:]), dtype=int) + j % x.shape[0]
        x.scatter_add_(0, index, aotjax.ones((1, *x.shape[1:]), dtype=x.dtype))

    def sub_alpha(p, x, j):
        y = p.pick(j, lambda y: _broadcasts_to(y, x) and _kind(y) != _BOOL and (_kind(x) == _FLOAT or _kind(y) == _INT))
        y = y[0]
        if y is not None:
            x.sub_(y, alpha=2)

    numeric = lambda x: _kind(x) != _BOOL  # noqa: E731
    rows = lambda x: x.ndim >= 1 and x.shape[0] > 0  # noqa: E731
    return {
        "jit_helper": (lambda x: _kind(x) == _FLOAT, lambda p, x, j: p.new(_scale_in_place(x, 1 + j % 3))),
        "iadd_index": (lambda x: numeric(x) and x.ndim >= 1 and x.shape[0] >= 2, iadd_index),
        "setitem_mask": (lambda x: True, setitem_mask),
        "index_put_accumulate": (lambda x: numeric(x) and rows(x), index_put_accumulate),
        "scatter_add_": (lambda x: numeric(x) and rows(x), scatter_add_),
        "sub_alpha": (numeric, sub_alpha),
        "div_": (lambda x: _kind(x) == _FLOAT, lambda p, x, j: x.div_(2.0 + j)),
        "clamp_": (lambda x: _kind(x) == _FLOAT, lambda p, x, j: p.smooth or x.clamp_(-0.75, 0.75)),
        "add_": (numeric, add_),
        "mul_": (numeric, lambda p, x, j: x.mul_(1.0 + j * 0.25 if _kind(x) == _FLOAT else 1 + j % 2)),
        "zero_": (lambda x: True, lambda p, x, j: x.zero_()),
        "fill_": (lambda x: True, lambda p, x, j: x.fill_(_value_of(x, j))),
        "copy_from": (lambda x: True, copy_from),
        "setitem_row": (rows, lambda p, x, j: x.__setitem__(j % x.shape[0], _value_of(x, j))),
        "setitem_index": (lambda x: x.ndim >= 1 and x.shape[0] >= 2, setitem_index),
        "masked_fill_": (lambda x: True, masked_fill_),
        "index_add_": (lambda x: numeric(x) and rows(x), index_add_),
        "logical_not_": (lambda x: _kind(x) == _BOOL, lambda p, x, j: x.logical_not_()),
        "t_": (lambda x: x.ndim == 2, lambda p, x, j: x.t_()),
        "unsqueeze_squeeze_": (lambda x: x.ndim < 3, lambda p, x, j: x.unsqueeze_(0).squeeze_(0)),
    }


def _value_steps():
    def mul_add(p, x, j):
        y = p.pick(j)[0]
        p.new(p.floats(x) * p.scale + y.sum())

    def where(p, x, j):
        y = p.pick(j, lambda y: _broadcast(x, y) is not None)[0]
        compatible = lambda m: y is not None and _kind(m) == _BOOL and _broadcast(m, x, y) is not None  # noqa: E731
        mask = p.pick(j + 1, compatible)[0]
        if y is not None and mask is not None:
            p.new(aotjax.where(mask, x, y))

    def compare(p, x, j):
        y = p.pick(j, lambda y: _kind(y) != _BOOL and _broadcast(x, y) is not None)[0]
        if p.smooth and _FLOAT in (_kind(x), _kind(y if y is not None else x)):
            return
        p.new(x > (y if y is not None else _value_of(x, j)))

    def branch(p, x, j):
        p.new(x * 2 if p.flag else (x.cos() if _kind(x) == _FLOAT else x - 1))

    def gather_const(p, x, j):
        p.new(x[aotjax.tensor([x.shape[0] - 1, 0, x.shape[0] - 1])])

    def index_select(p, x, j):
        idx = p.pick(j, lambda i: _kind(i) == _INT and i.ndim == 1)[0]
        if idx is not None:
            p.new(x.index_select(0, idx.remainder(x.shape[0])))

    def written_constant(p, x, j):
        made = [aotjax.zeros(x.shape, dtype=x.dtype), aotjax.full(x.shape, _value_of(x, j), dtype=x.dtype),
                aotjax.tensor(np.arange(x.numel()).reshape(x.shape).tolist(), dtype=x.dtype).clone()][j % 3]
        made.copy_(x) if _kind(x) == _BOOL else made.add_(x)
        p.new(made)

    def arange_static(p, x, j):
        p.new(p.floats(aotjax.arange(p.n, dtype=x.dtype)) * p.scale if _kind(x) != _BOOL else aotjax.arange(p.n) > 1)

    def cast(p, x, j):
        if not (p.smooth and _kind(x) == _FLOAT):
            p.new(x.to(int) if _kind(x) == _FLOAT else x.to(_float_dtype()))

    def stack(p, x, j):
        y = p.pick(j, lambda y: tuple(y.shape) == tuple(x.shape))[0]
        p.new(aotjax.stack([x, y]))

    def matmul(p, x, j):
        y = p.pick(j, lambda y: y.dtype == x.dtype and y.ndim in (1, 2) and y.shape[0] == x.shape[-1])[0]
        p.new(x @ (y if y is not None else x.mT))

    def checkpoint_block(p, x, j):
        p.new(_remat_block(x, _CAPTURED[0][: x.shape[-1]] if x.shape[-1] <= 4 else 1.0))

    def aot_helper(p, x, j):
        p.new(_aot_energy(x))

    rows = lambda x: x.ndim >= 1 and x.shape[0] > 0  # noqa: E731
    small = lambda x: x.numel() <= 32  # noqa: E731
    return {
        "cat": (lambda x: x.ndim >= 1 and small(x), lambda p, x, j: p.new(aotjax.cat([x, x.flip(0)], dim=0))),
        "stack": (small, stack),
        "matmul": (lambda x: _kind(x) == _FLOAT and x.ndim == 2, matmul),
        "cumsum": (lambda x: x.ndim >= 1, lambda p, x, j: p.new(x.cumsum(0))),
        "roll": (lambda x: x.ndim >= 1, lambda p, x, j: p.new(x.roll(1, 0))),
        "mean_keepdim": (lambda x: _kind(x) == _FLOAT and x.ndim >= 1, lambda p, x, j: p.new(x.mean(-1, keepdim=True))),
        "softmax": (lambda x: _kind(x) == _FLOAT and x.ndim >= 1, lambda p, x, j: p.new(F.softmax(x, dim=-1))),
        "checkpoint_block": (lambda x: _kind(x) == _FLOAT and x.ndim >= 1, checkpoint_block),
        "aot_helper": (lambda x: _kind(x) == _FLOAT, aot_helper),
        "mul_add": (lambda x: True, mul_add),
        "clone": (lambda x: True, lambda p, x, j: p.new(x.clone())),
        "sin": (lambda x: _kind(x) == _FLOAT, lambda p, x, j: p.new(x.sin())),
        "where": (lambda x: True, where),
        "compare": (lambda x: _kind(x) != _BOOL, compare),
        "branch_static": (lambda x: _kind(x) != _BOOL, branch),
        "gather_const": (rows, gather_const),
        "index_select": (rows, index_select),
        "arange_mix": (lambda x: x.ndim >= 1, lambda p, x, j: p.new(x + aotjax.arange(x.shape[-1]))),
        "written_constant": (lambda x: True, written_constant),
        "arange_static": (lambda x: True, arange_static),
        "cast": (lambda x: True, cast),
        "sum_dim": (lambda x: x.ndim >= 1, lambda p, x, j: p.new(x.sum(0))),
    }


@functools.partial(aotjax.jit, static_argnums=1)
def _scale_in_place(t, k):
    t.mul_(k)
    return (t * t).sum()


_remat_block = aotjax.checkpoint(lambda t, w: (t.sin() * w).cos() * 2)
_aot_energy = aotjax.aot(lambda t: (t.sin() * t).sum())

RICH_VIEWS, RICH_WRITES, RICH_VALUES = _view_steps(), _write_steps(), _value_steps()
RICH_STEPS = sorted(RICH_VIEWS) + sorted(RICH_WRITES) + sorted(RICH_VALUES)


@st.composite
def rich_steps(draw, min_size: int, max_size: int):
    """Programs of `RICH_STEPS` drawn uniformly from a seed (a few dozen examples then cover every step; a
    failure prints the steps)."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    names = rng.choice(RICH_STEPS, size=rng.integers(min_size, max_size + 1))
    return [(str(name), int(rng.integers(8)), int(rng.integers(8))) for name in names]


CAPTURED_WRITE = "captured:"


def _run_step(p: _Program, name, i, j):
    if name.startswith(CAPTURED_WRITE):  # a write into a captured tensor (data), or into one's view (data or view)
        ok, act = RICH_WRITES[name.removeprefix(CAPTURED_WRITE)]
        itself = name.endswith(("t_", "unsqueeze_squeeze_"))
        x = p.operand(i, lambda x: ok(x) and (not itself or any(x is c for c in _CAPTURED)), readonly=True)
    elif name in RICH_WRITES:
        ok, act = RICH_WRITES[name]
        x = p.operand(i, ok, writable=True)
    else:
        ok, act = RICH_VIEWS[name] if name in RICH_VIEWS else RICH_VALUES[name]
        x = p.operand(i, ok)
    if x is not None:
        act(p, x, j)


def make_rich_program(steps, outs, as_dict, smooth=False, copy_captured=False):
    """`program(fl, aux, n, flag, scale, perm)` running `steps`, returning the live tensors `outs` (counted from the
    last) as a tuple or a dict; with `copy_captured`, a view of a captured tensor is returned as a copy (make_jaxpr
    bakes captured tensors into the program as constants: its outputs cannot view them)."""
    def program(fl, aux, n, flag, scale, perm):
        p = _Program([fl["a"], fl["b"], aux["i"], aux["m"], fl["s"], aux["i_view"]], n, flag, scale, perm, smooth)
        for s in steps:
            _run_step(p, *s)
        picked = [-(k + 1) % len(p.pool) for k in outs]
        picked = [p.pool[k].clone() if copy_captured and p.readonly[k] else p.pool[k] for k in picked]
        return {f"o{k}": x for k, x in enumerate(picked)} | {"n": n} if as_dict else tuple(picked)

    return program


# How `fl["a"]` (3 x 4) and `fl["b"]` (4) relate, and to the captured tensors; `fl["s"]` is a 0-d tensor of its own.
UNCAPTURED_ALIASINGS = ["independent", "views_of_one_base", "same_tensor", "view_of_the_other", "strided"]
ALIASINGS = [*UNCAPTURED_ALIASINGS, "captured_is_argument", "captured_base"]
_BASE_SHAPES = {"independent": [(3, 4), (4,)], "views_of_one_base": [(4, 4)], "same_tensor": [(3, 4)],
                "view_of_the_other": [(3, 4)], "strided": [(4, 3), (8,)], "captured_is_argument": [(3, 4), (4,)],
                "captured_base": [(4, 4)]}


def _float_args(aliasing, bases):
    """`fl` from the values of its storages (`bases`, NumPy arrays; the last is `s`'s), and the storages to
    observe besides."""
    ts = [aotjax.tensor(b, dtype=_float_dtype()) for b in bases]
    fl, extra = _related(aliasing, ts[:-1])
    return fl | {"s": ts[-1]}, extra


def _related(aliasing, ts):
    if aliasing == "independent":
        return {"a": ts[0], "b": ts[1]}, []
    if aliasing == "views_of_one_base":
        return {"a": ts[0][:3], "b": ts[0][3]}, ts
    if aliasing == "same_tensor":
        return {"a": ts[0], "b": ts[0]}, []
    if aliasing == "strided":  # arguments that are views of their own storages, not contiguous
        return {"a": ts[0].t(), "b": ts[1][::2]}, ts
    if aliasing == "captured_is_argument":  # the program reads `a` as a captured tensor too
        return {"a": _SHARED_ARGUMENT.copy_(ts[0]), "b": ts[1]}, []
    if aliasing == "captured_base":  # the program reads the base of `a` and `b` as a captured tensor
        _SHARED_BASE.copy_(ts[0])
        return {"a": _SHARED_BASE[:3], "b": _SHARED_BASE[3]}, []
    return {"a": ts[0], "b": ts[0][1]}, []


def _base_values(aliasing, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=s) for s in [*_BASE_SHAPES[aliasing], ()]]


def _reset(c, value):
    """A captured tensor as it was: its value and its view (a program may `t_` it, where it is an argument too)."""
    c._init_slots(None, storage=aotjax.tensor(value)._storage)


def make_rich_inputs(aliasing, static_values, bases=None):
    """A `make()` for the checks of `tests.helpers`: fresh `(fl, aux, *statics)` and the tensors to observe besides,
    the captured ones among them (their values restored: the checks write into outputs that may view them)."""
    def make():
        for c, value in zip(_CAPTURED, _CAPTURED_VALUES):
            _reset(c, value)
        fl, extra = _float_args(aliasing, bases if bases is not None else _base_values(aliasing))
        i = aotjax.tensor([2, 0, 1, 1])
        aux = {"i": i, "i_view": i[1:], "m": aotjax.tensor(np.arange(12).reshape(3, 4) % 3 == 0)}
        return (fl, aux, *static_values), extra + _CAPTURED

    return make


# -- the checks -------------------------------------------------------------------------------------------------------
# `AOTJAX_FUZZ_SCALE=10` runs ten times the examples (derandomized: CI runs the same ones every time).
_SCALE = int(os.environ.get("AOTJAX_FUZZ_SCALE", "1"))


def fuzz_settings(examples: int):
    """`examples` programs per run; a quarter of them in x64 mode, whose pass checks that the programs compute in 64
    bits (aliasing, write-back and retracing, the same in both widths, get every example in the default 32-bit mode:
    CI runs both, on 2 cores)."""
    if jax.config.jax_enable_x64:
        examples = max(3, examples // 4)
    return settings(max_examples=examples * _SCALE, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def _tolerance():
    return dict(rtol=1e-9, atol=1e-9) if jax.config.jax_enable_x64 else dict(rtol=1e-5, atol=1e-5)


rich_programs = dict(steps=rich_steps(4, 14), outs=st.lists(st.integers(0, 15),
                     min_size=1, max_size=3), as_dict=st.booleans(), aliasing=st.sampled_from(ALIASINGS),
                     static_values=statics)


_AS_WRITTEN_REFUSED = {  # make_jaxpr has an input per argument: it cannot read their base, nor re-view them together
    "captured_base": f"make_jaxpr: the function reads a tensor captured from outside it ({_SHARED_BASE.aval})",
    "same_tensor": "make_jaxpr: permute_ changes the view of a tensor passed as several arguments"}


@fuzz_settings(40)
@given(**rich_programs)
def test_rich_programs_agree_under_every_mode(steps, outs, as_dict, aliasing, static_values):
    """make_jaxpr + eval_jaxpr, functionalize, jit (first and cached call), the functionalized jaxpr interpreted and
    aot (first and cached call) behave as eager: outputs, arguments afterwards, strides and aliasing."""
    f = make_rich_program(steps, outs, as_dict)
    make = make_rich_inputs(aliasing, static_values)
    as_traced = make_rich_program(steps, outs, as_dict, copy_captured=True)
    try:
        check_traced_agrees(as_traced, make, static_argnums=STATIC_ARGNUMS, **_tolerance())
    except UnsupportedError as e:  # what the program as written cannot express, refused as documented
        assert aliasing in _AS_WRITTEN_REFUSED and str(e).startswith(_AS_WRITTEN_REFUSED[aliasing]), e
    check_boundary_agrees(f, make, static_argnums=STATIC_ARGNUMS, **_tolerance())
    check_aot_boundary_agrees(f, make, static_argnums=STATIC_ARGNUMS, **_tolerance())


@fuzz_settings(15)
@given(steps=rich_steps(3, 10), outs=st.lists(st.integers(0, 15), min_size=1, max_size=2),
       aliasing=st.sampled_from(ALIASINGS), first=statics, second=statics)
def test_static_arguments_retrace_only_when_they_change(steps, outs, aliasing, first, second):
    """jit and aot called with statics `first`, `first`, `second`, `first`: each call as eager; a program is traced once
    per distinct static value, and the same statics hit the cache."""
    f = make_rich_program(steps, outs, as_dict=False)
    for transform in (aotjax.jit, aotjax.aot):
        compiled = transform(f, static_argnums=STATIC_ARGNUMS)
        for static_values in (first, first, second, first):
            make = make_rich_inputs(aliasing, static_values)
            args, _ = make()
            expected = f(*args)
            args, _ = make()
            assert_trees_close(expected, compiled(*args), how=f"{transform.__name__} with statics {static_values}",
                               **_tolerance())
        assert compiled.trace_count == len({repr(first), repr(second)}), transform.__name__  # 2 and 2.0 differ


@fuzz_settings(10)
@given(steps=rich_steps(3, 10), outs=st.lists(st.integers(0, 15), min_size=1, max_size=2), static_values=statics,
       order=st.permutations(["independent", "views_of_one_base", "view_of_the_other"]))
def test_aliasing_patterns_of_the_same_shapes_never_share_a_program(steps, outs, static_values, order):
    """Arguments of the same shapes, independent or sharing a storage in two ways: jit and aot trace a program per
    pattern (and reuse it), each call behaves as eager (outputs, arguments afterwards, strides, aliasing)."""
    f = make_rich_program(steps, outs, as_dict=False)
    for transform in (aotjax.jit, aotjax.aot):
        compiled = transform(f, static_argnums=STATIC_ARGNUMS)
        for aliasing in [*order, order[0]]:
            check_call_agrees(f, compiled, make_rich_inputs(aliasing, static_values), f"{transform.__name__}, "
                              f"{aliasing} after {order}", **_tolerance())
        assert compiled.trace_count == 3, transform.__name__


def _loss_of(program):
    """A float scalar from the float outputs of `program` and its float arguments afterwards, nonlinear in them."""
    def loss(fl, aux, n, flag, scale, perm):
        total = aotjax.zeros((), dtype=_float_dtype())
        for o in jax.tree_util.tree_leaves((program(fl, aux, n, flag, scale, perm), fl)):
            if isinstance(o, aotjax.Tensor) and o.is_floating_point():
                total = total + (o * o).sum() * 0.5 + o.sin().sum()
        return total

    return loss


def _storage_gradients(aliasing, g):
    """The gradients of the storages of `fl` from those of its leaves (README: aliased arguments are differentiated
    through their storage, each one's gradient read through its view), checking that rule on the way."""
    ga, gb, gs = np.asarray(g["a"]), np.asarray(g["b"]), np.asarray(g["s"])
    if aliasing in ("independent", "captured_is_argument"):
        return [ga, gb, gs]
    if aliasing in ("views_of_one_base", "captured_base"):
        return [np.concatenate([ga, gb[None]]), gs]
    if aliasing == "strided":
        return [ga.T, np.stack([gb, np.zeros_like(gb)], axis=1).reshape(-1), gs]
    np.testing.assert_allclose(gb, ga if aliasing == "same_tensor" else ga[1], rtol=1e-6, atol=1e-6)
    return [ga, gs]


@fuzz_settings(12)
@given(steps=rich_steps(3, 10), outs=st.lists(st.integers(0, 15), min_size=1, max_size=3),
       aliasing=st.sampled_from(ALIASINGS), static_values=statics)
def test_rich_program_gradients_agree_under_every_mode(steps, outs, aliasing, static_values):
    """grad, value_and_grad, jit(grad), grad(jit), grad(aot) (default and min-cut partitions) and aot(grad) agree with
    eager grad (gradient, value, and the writes into the arguments), which agrees with finite differences."""
    loss = _loss_of(make_rich_program(steps, outs, as_dict=True, smooth=True))
    bases = _base_values(aliasing)
    g = check_grads_agree(loss, make_rich_inputs(aliasing, static_values, bases), argnums=0,
                          static_argnums=STATIC_ARGNUMS, **_tolerance())

    def loss_at(values):
        args, _ = make_rich_inputs(aliasing, static_values, values)()
        return loss(*args)

    storage_grads = _storage_gradients(aliasing, g)
    if any(name == "detach" for name, _, _ in steps):
        return  # a detached read has a derivative that the gradient leaves out, by design
    x64 = jax.config.jax_enable_x64
    rng = np.random.default_rng(1)
    for _ in range(2):
        direction = [rng.normal(size=b.shape) for b in bases]
        numeric = directional_derivative(loss_at, bases, direction, eps=1e-6 if x64 else 1e-2)
        terms = [gs * d for gs, d in zip(storage_grads, direction)]
        analytic = sum(float(t.sum()) for t in terms)
        scale = sum(float(np.abs(t).sum()) for t in terms) + abs(numeric)
        assert abs(numeric - analytic) <= (1e-6 if x64 else 2e-2) * scale + 1e-6, (numeric, analytic)


_VIEW_CHANGES = {"t_", "unsqueeze_squeeze_"}  # the writes that change a tensor's view, not its data
_CAPTURED_WRITE_REFUSED = (r"^\w+: in-place write to a tensor captured from outside the function being transformed "
                           r"\(at \w+\.py:\d+ \([<>\w]+\)\)\. Pass the tensor to the function as an "
                           r"argument \(its mutation is then applied to the caller's tensor\), or write into a copy")


@fuzz_settings(15)
@given(steps=rich_steps(0, 6), write=st.sampled_from(sorted(RICH_WRITES)), i=st.integers(0, 7), j=st.integers(0, 7),
       aliasing=st.sampled_from(UNCAPTURED_ALIASINGS), static_values=statics)
def test_writes_into_captured_tensors_are_live_state_or_refused(steps, write, i, j, aliasing, static_values):
    """A write into a captured tensor, or through a view of one: under functionalize, jit, aot and the derivative
    transforms the captured tensor is live state (an implicit input, written back), so the call behaves as eagerly
    (the derivative transforms agree with eager grad, and write the captured tensor once, as eagerly); under
    make_jaxpr (the program as written has no input for it) it raises the documented error (the README: pass it as
    an argument), as does a change of a captured tensor's own view under any transform, and the call changes
    nothing: not the captured tensors, not the arguments."""
    program = make_rich_program([*steps, (CAPTURED_WRITE + write, i, j)], [0], as_dict=False)
    make = make_rich_inputs(aliasing, static_values)
    ways = {"make_jaxpr": aotjax.make_jaxpr(program, static_argnums=STATIC_ARGNUMS)}
    if write in _VIEW_CHANGES:  # NOTE: a captured tensor cannot change its own view under a transform
        ways |= {how: transform(program, static_argnums=STATIC_ARGNUMS) for how, transform in [
            ("functionalize", aotjax.functionalize), ("jit", aotjax.jit), ("aot", aotjax.aot)]}
        ways |= grad_ways(_loss_of(program), 0, STATIC_ARGNUMS)
    else:
        check_boundary_agrees(program, make, static_argnums=STATIC_ARGNUMS, **_tolerance())
        check_aot_boundary_agrees(program, make, static_argnums=STATIC_ARGNUMS, **_tolerance())
        check_grads_agree(_loss_of(program), make, 0, STATIC_ARGNUMS, **_tolerance())
    for how, run in ways.items():
        args, extra = make()
        before = [np.array(t) for t in jax.tree_util.tree_leaves((args, extra)) if isinstance(t, aotjax.Tensor)]
        with pytest.raises((AliasingError, UnsupportedError)) as refused:
            run(*args)
        if not (how == "make_jaxpr" and "passed as several arguments" in str(refused.value)):
            assert re.match(_CAPTURED_WRITE_REFUSED, str(refused.value)), (how, str(refused.value))
        after = [np.array(t) for t in jax.tree_util.tree_leaves((args, extra)) if isinstance(t, aotjax.Tensor)]
        for b, a in zip(before, after, strict=True):
            np.testing.assert_array_equal(a, b, err_msg=how)


# == regressions: the fuzzer's findings, each as its minimal program ===================================================
def _every_transform_as_eager(f, make, **kwargs):
    check_traced_agrees(f, make, **kwargs)
    check_boundary_agrees(f, make, **kwargs)
    check_aot_boundary_agrees(f, make, **kwargs)


def _write_into_constant(a, copy):
    c = aotjax.tensor([1.0, 2.0, 3.0])  # a constant of the program (concrete) ...
    c = c.clone() if copy else c  # ... and a copy of it, the function's own tensor, like zeros(3)
    c.add_(a)
    return c, c.sum()


def test_a_tensor_made_from_data_inside_a_function_is_a_constant_written_through_a_copy():
    """Refused, a write into `aotjax.tensor(...)` under a transform said the tensor was captured from outside."""
    refused = (r"^add_: in-place write to a tensor made from data inside the function being transformed \(at "
               r"test_random_programs.py:\d+ \(_write_into_constant\)\): `aotjax.tensor\(...\)` is a constant of the "
               r"traced program .* Write into a copy of it \(`aotjax.tensor\(...\).clone\(\)`\)")
    for transform in (aotjax.make_jaxpr, aotjax.functionalize, aotjax.jit, aotjax.aot, aotjax.grad):
        with pytest.raises(AliasingError, match=refused):
            transform(lambda a: _write_into_constant(a, copy=False)[1])(aotjax.ones(3))
    _every_transform_as_eager(_write_into_constant, lambda: ((aotjax.ones(3), True), []), static_argnums=(1,))
    jitted = aotjax.jit(_write_into_constant, static_argnums=1)
    for _ in range(2):  # the program's constant is never written: each call starts from the data
        assert jitted(aotjax.ones(3), True)[0].tolist() == [2.0, 3.0, 4.0]
    loss = lambda a: (_write_into_constant(a, True)[0] ** 2).sum()  # noqa: E731
    assert aotjax.grad(loss)(aotjax.ones(3)).tolist() == [4.0, 6.0, 8.0]
    assert aotjax.grad(aotjax.aot(loss))(aotjax.ones(3)).tolist() == [4.0, 6.0, 8.0]


def test_static_arguments_equal_in_python_but_of_other_types_trace_apart():
    for transform in (aotjax.jit, aotjax.aot):
        scale = transform(lambda x, s: x * s[0], static_argnums=1)
        ints = aotjax.tensor([1, 2])
        assert scale(ints, (2,)).dtype == ints.dtype
        assert scale(ints, (2.0,)).dtype == np.float32  # `int_tensor * 2.0`, as eagerly: not the program for 2
        assert scale(ints, (True,)).tolist() == [1, 2]
        assert scale(ints, (2,)).dtype == ints.dtype and scale.trace_count == 3


def test_a_change_of_view_of_a_tensor_passed_twice_shows_through_both_or_is_refused_as_written():
    def f(a, b):
        a.t_()
        return b[2]  # b is a: 3 x 2 now

    def make():
        x = aotjax.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
        return (x, x), []

    check_boundary_agrees(f, make)
    check_aot_boundary_agrees(f, make)
    refused = r"^make_jaxpr: permute_ changes the view of a tensor passed as several arguments \(at test_\w+.py:\d+ "
    with pytest.raises(UnsupportedError, match=refused + r"\(f\)\); .* Pass the tensor once"):
        aotjax.make_jaxpr(f)(*make()[0])


_C = aotjax.tensor([1.0, 2.0, 3.0, 4.0])


def test_a_write_through_a_view_of_a_captured_tensor_is_live_state_or_refused():
    def write_through_view(a):
        _C[1:].add_(a)
        return a * 2

    with pytest.raises(AliasingError, match=r"^add_: in-place write to a tensor captured from outside the "
                                            r"function being transformed \(at test_random_programs.py"):
        aotjax.make_jaxpr(lambda a: write_through_view(a).sum())(aotjax.ones(3))
    assert _C.tolist() == [1.0, 2.0, 3.0, 4.0]
    for transform in (aotjax.functionalize, aotjax.jit, aotjax.aot, aotjax.grad):
        _C.copy_(aotjax.tensor([1.0, 2.0, 3.0, 4.0]))
        transform(lambda a: write_through_view(a).sum())(aotjax.ones(3))
        assert _C.tolist() == [1.0, 3.0, 4.0, 5.0]


def test_a_view_of_a_captured_tensor_may_change_its_own_view():
    def f(a):
        v = _C.view(2, 2)
        v.t_()  # the view's metadata, not the captured tensor's data
        return a + v[0]

    check_boundary_agrees(f, lambda: ((aotjax.ones(2),), [_C]))


def test_an_output_viewing_a_captured_tensor_is_a_view_of_it_after_jit_and_aot():
    captured = aotjax.tensor([1.0, 2.0, 3.0, 4.0])

    def f(a):
        return a * 2, captured[1:], captured.view(2, 2).t()

    def make():
        captured.copy_(aotjax.tensor([1.0, 2.0, 3.0, 4.0]))
        return (aotjax.ones(2),), [captured]

    check_boundary_agrees(f, make)
    check_aot_boundary_agrees(f, make)
    out = aotjax.jit(f)(*make()[0])[1]
    out.mul_(10)
    assert captured.tolist() == [1.0, 20.0, 30.0, 40.0]


def _increment(t):
    t.add_(1)
    return t.sum()


@pytest.mark.parametrize("inner", [aotjax.jit, aotjax.aot])
def test_a_compiled_function_writing_a_captured_tensor_inside_a_transform(inner):
    """Called inside a transform with eager arguments only (tensors its caller captured), a jit or aot function is
    part of the traced program, not run once at trace time: its write into the captured tensor is the caller's
    write, live state under functionalize, jit, aot and grad (written at every call), refused by make_jaxpr."""
    captured, increment = aotjax.zeros(3), inner(_increment)

    def f(a):
        return a * increment(captured)

    assert f(aotjax.ones(1)).tolist() == [3.0] and captured.tolist() == [1.0, 1.0, 1.0]  # eagerly
    with pytest.raises(AliasingError, match=r"^copy_: in-place write to a tensor captured from outside the "
                                            r"function being transformed \(at test_random_programs.py:\d+ \(f\)"):
        aotjax.make_jaxpr(f)(aotjax.ones(1))
    assert captured.tolist() == [1.0, 1.0, 1.0]
    for k, transform in enumerate((aotjax.functionalize, aotjax.jit, aotjax.aot)):
        for call in range(2):
            assert transform(f)(aotjax.ones(1)).tolist() == [3.0 + 3 * (2 * k + call + 1)]
    assert captured.tolist() == [7.0, 7.0, 7.0]
    assert aotjax.grad(lambda a: f(a).sum())(aotjax.ones(1)).tolist() == [24.0]  # d(a * 8 * 3)/da, written once
    assert captured.tolist() == [8.0, 8.0, 8.0]


def test_an_aot_function_under_grad_never_deletes_its_callers_buffer():
    """Differentiated, an aot function writing into an argument runs its program on values the caller holds: a
    later error in the function leaves the argument as it was (its buffer is not donated)."""
    increment = aotjax.aot(_increment)

    def f(x, y):
        x.sum() * increment(y)
        raise ValueError("an error after the call")

    y = aotjax.ones(3)
    with pytest.raises(ValueError, match="an error after the call"):
        aotjax.grad(f)(aotjax.ones(3), y)
    assert y.tolist() == [1.0, 1.0, 1.0]


_W = aotjax.ones(3)


def _write_argument_read_captured(a):
    a.mul_(2)
    return _W * 1, (_W[1:] ** 2).sum()  # `_W` is `a`: it reads what was written


def test_a_captured_tensor_that_is_also_an_argument_is_read_through_the_argument():
    def make():
        _W.fill_(1.0)
        return (_W,), []

    _every_transform_as_eager(_write_argument_read_captured, make)
    loss = lambda a: _write_argument_read_captured(a)[1]  # noqa: E731
    for grad in (aotjax.grad(loss), aotjax.jit(aotjax.grad(loss)), aotjax.grad(aotjax.jit(loss)),
                 aotjax.grad(aotjax.aot(loss)), aotjax.aot(aotjax.grad(loss))):
        assert grad(make()[0][0]).tolist() == [0.0, 8.0, 8.0]  # d/da sum((2a)[1:]^2), once: not twice, not zero


_B = aotjax.ones(4)


def test_a_captured_base_of_arguments_is_read_through_them_or_refused_as_written():
    def f(a, b):
        a.mul_(2)
        return _B * 1

    def make():
        _B.fill_(1.0)
        return (_B[:2], _B[2:]), []

    check_boundary_agrees(f, make)
    check_aot_boundary_agrees(f, make)
    refused = (r"^make_jaxpr: the function reads a tensor captured from outside it \(f32\[4\]\) that shares memory "
               r"with one of its arguments without being a view of that argument \(at test_random_programs.py:\d+ "
               r"\(f\)\)\. Pass the captured tensor as an argument too")
    with pytest.raises(UnsupportedError, match=refused):
        aotjax.make_jaxpr(f)(*make()[0])
    with pytest.raises(UnsupportedError, match=r"^functionalize: the function reads a tensor captured from outside it"):
        aotjax.jit(lambda a: f(a, a))(_B[2:])  # the base of a lone view: not expressible through it


# -- indices in range or not ---------------------------------------------------------------------------------
def _setitem(x, i):
    x[i] = 9.0
    return x


# Ops taking an index vector of 3 entries, on aotjax tensors and the same in PyTorch; `x` is [3, 4] (some write it).
INDEX_OPS = {
    "getitem": (lambda x, i: x[i], lambda x, i: x[i]),
    "getitem_dim1": (lambda x, i: x[:, i], lambda x, i: x[:, i]),
    "setitem": (_setitem, _setitem),
    "index_put_acc": (lambda x, i: x.index_put_((i,), aotjax.tensor(np.float32(1)), accumulate=True),
                      lambda x, i: x.index_put_((i,), torch.tensor(1.0), accumulate=True)),
    "index_select": (lambda x, i: x.index_select(1, i), lambda x, i: x.index_select(1, i)),
    "index_add_": (lambda x, i: x.index_add_(0, i, aotjax.ones(3, 4)),
                   lambda x, i: x.index_add_(0, i, torch.ones(3, 4))),
    "gather": (lambda x, i: x.gather(1, i.reshape(1, 3)), lambda x, i: x.gather(1, i.reshape(1, 3))),
    "scatter_add": (lambda x, i: x.scatter_add(1, i.reshape(1, 3), aotjax.ones(1, 3)),
                    lambda x, i: x.scatter_add(1, i.reshape(1, 3), torch.ones(1, 3))),
    "embedding": (lambda x, i: aotjax.nn.functional.embedding(i, x), lambda x, i: torch.nn.functional.embedding(i, x)),
    "cross_entropy": (lambda x, i: aotjax.nn.functional.cross_entropy(x, i, reduction="none"),
                      lambda x, i: torch.nn.functional.cross_entropy(x, i, reduction="none")),
}
CHECKED = {name: aotjax.jit(fn, checks=True) for name, (fn, _) in INDEX_OPS.items()}  # one program per op
X_INDEXED = np.arange(12, dtype=np.float32).reshape(3, 4) / 4


def _outcome(fn, x, index):
    """`fn`'s result (after it, `x`), or the IndexError/RuntimeError it raised."""
    try:
        out = fn(x, index)
    except (IndexError, RuntimeError) as e:
        return e
    return out.numpy().copy(), x.numpy().copy()


@settings(max_examples=40 if jax.config.jax_enable_x64 else 150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(op=st.sampled_from(sorted(INDEX_OPS)),
       entries=st.lists(st.integers(0, 2) | st.integers(-9, 9), min_size=3, max_size=3))  # in range everywhere, or any
def test_random_indices_raise_like_torch_eagerly_and_in_a_checked_jit(op, entries):
    fn, torch_fn = INDEX_OPS[op]
    index = np.array(entries, np.int32)
    expected = _outcome(torch_fn, torch.tensor(X_INDEXED), torch.tensor(index, dtype=torch.int64))
    eager = _outcome(fn, aotjax.tensor(X_INDEXED), aotjax.tensor(index))
    checked_x = aotjax.tensor(X_INDEXED)
    checked = _outcome(CHECKED[op], checked_x, aotjax.tensor(index))
    if isinstance(expected, Exception):
        assert type(eager) is type(expected), f"PyTorch raises {expected!r}, eager mode gives {eager!r}"
        assert type(checked) is type(eager) and str(checked) == str(eager)  # the op's message and line
        np.testing.assert_array_equal(checked_x.numpy(), X_INDEXED)  # a failed call writes nothing
        return
    assert not isinstance(eager, Exception) and not isinstance(checked, Exception), (eager, checked)
    for got in (eager, checked):
        for a, b in zip(got, expected, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-6)
