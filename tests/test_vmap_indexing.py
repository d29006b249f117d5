"""vmap of the indexing family (index, gather, index_put, index_add, scatter, scatter_add, masked_fill, fill and the
bounds check) against a Python loop of the same function over the examples: every operand batched at axis 0, at -1
or not at all, in every combination (a batched index into an unbatched tensor, a batched tensor read at one index,
...), NumPy's placement of advanced indices on dims that are not adjacent, boolean masks where the result's shape is
static, 0-d tensors, writes through `x[i]` with a batched 0-d index, and out-of-range batched indices."""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest

import aotjax
from aotjax.core.errors import UnsupportedError
from tests.helpers import FLOAT, INT
from tests.op_records import as_np, flat

pytestmark = pytest.mark.slow  # NOTE: end-to-end sweeps: once, in jax's default mode (CI time)

T = aotjax.tensor
B = 3  # examples


def floats(*shape):
    return lambda rng: rng.normal(size=shape).astype(FLOAT)


def ints(lo, hi, *shape):
    return lambda rng: rng.integers(lo, hi, size=shape).astype(INT)


def distinct(n, *shape):
    """Integer indices into a dim of size `n` with no repeats along the last dim (an overwriting scatter with
    repeated indices writes one of the values, XLA picks which)."""
    return lambda rng: np.stack([rng.permutation(n)[:shape[-1]] for _ in range(int(np.prod(shape[:-1])))]
                                ).reshape(shape).astype(INT)


def masks(*shape):
    return lambda rng: rng.integers(0, 2, size=shape).astype(bool)


def _set(x, index, value):
    x = x.clone()
    x[index] = value
    return x


@dataclass(frozen=True)
class Case:
    name: str
    fn: Callable  # on one example's tensors
    operands: tuple  # one generator per operand: rng -> one example's array

    def __repr__(self) -> str:
        return self.name


CASES = [
    # -- index (x[i] and index_select): NumPy's placement, negative indices, 0-d indices --------------------------
    Case("index", lambda x, i: x[i], (floats(4, 5), ints(-4, 4, 2, 3))),
    Case("index_dim1", lambda x, i: x[:, i], (floats(3, 5, 2), ints(-5, 5, 2))),
    Case("index_nonadjacent", lambda x, i, j: x[i, :, j], (floats(4, 3, 5), ints(-4, 4, 2, 1), ints(0, 5, 3))),
    Case("index_adjacent_middle", lambda x, i, j: x[:, i, j], (floats(2, 4, 5, 3), ints(0, 4, 3), ints(-5, 5, 2, 1))),
    Case("index_0d", lambda x, i: x[i], (floats(4, 3), ints(-4, 4))),
    Case("index_0d_of_1d", lambda x, i: x[i], (floats(4), ints(0, 4))),
    Case("index_0d_nonadjacent", lambda x, j, i: x[j, :, i], (floats(4, 3, 5), ints(0, 4, 2), ints(-5, 5))),
    Case("index_0d_adjacent", lambda x, i, j: x[:, i, j], (floats(3, 4, 5), ints(0, 4), ints(0, 5, 2))),
    Case("index_select", lambda x, i: x.index_select(1, i), (floats(2, 4), ints(0, 4, 3))),
    # -- index_put (and x[...] = v on a tensor made inside) -------------------------------------------------------
    Case("index_put", lambda x, v, i: x.index_put((i,), v), (floats(4, 3), floats(2, 3), distinct(4, 2))),
    Case("index_put_broadcast", lambda x, v, i: x.index_put((i,), v), (floats(4, 3), floats(3), distinct(4, 2))),
    Case("index_put_accumulate", lambda x, v, i: x.index_put((i,), v, accumulate=True),
         (floats(3, 2), floats(4, 2), ints(0, 3, 4))),
    Case("index_put_0d_x", lambda x, v: x.index_put((), v), (floats(), floats())),
    Case("setitem_nonadjacent", lambda x, v, j: _set(x, ([3, 1], slice(None), j), v),
         (floats(4, 2, 3), floats(2, 2), ints(-3, 3, 2))),
    Case("setitem_0d", lambda x, v, i: _set(x, i, v), (floats(4, 3), floats(3), ints(-4, 4))),
    Case("setitem_two_dims", lambda x, v, i: _set(x, (slice(None), i, [2, 0]), v),
         (floats(2, 4, 3), floats(2), distinct(4, 2))),
    # -- gather, scatter, scatter_add, index_add -------------------------------------------------------------------
    Case("gather", lambda x, i: x.gather(1, i), (floats(3, 4), ints(0, 4, 2, 3))),
    Case("gather_dim0", lambda x, i: x.gather(0, i), (floats(4, 3), ints(0, 4, 2, 3))),
    Case("scatter", lambda x, i, s: x.scatter(1, i, s), (floats(2, 4), distinct(4, 2, 3), floats(2, 4))),
    Case("scatter_0d_src", lambda x, i, s: x.scatter(0, i, s), (floats(4, 2), distinct(4, 3, 1), floats())),
    Case("scatter_number_src", lambda x, i: x.scatter(0, i, 2.5), (floats(4, 2), distinct(4, 3, 2))),
    Case("scatter_add", lambda x, i, s: x.scatter_add(0, i, s), (floats(3, 2), ints(0, 3, 4, 2), floats(4, 2))),
    Case("index_add", lambda x, i, s: x.index_add(1, i, s, alpha=2), (floats(2, 4), ints(0, 4, 3), floats(2, 3))),
    Case("index_add_dim0", lambda x, i, s: x.index_add(0, i, s), (floats(3, 2), ints(0, 3, 4), floats(4, 2))),
    Case("index_add_ints", lambda x, i, s: x.index_add(0, i, s, alpha=2.5), (ints(-9, 9, 3), ints(0, 3, 2),
                                                                              ints(-9, 9, 2))),
    # -- masks: masked_fill, where, x[mask] = v --------------------------------------------------------------------
    Case("masked_fill", lambda x, m, v: x.masked_fill(m, v), (floats(3, 4), masks(4), floats())),
    Case("masked_fill_number", lambda x, m: x.masked_fill(m, 1.5), (floats(3, 4), masks(3, 4))),
    Case("masked_fill_0d", lambda x, m, v: x.masked_fill(m, v), (floats(), masks(), floats())),
    Case("where", lambda m, x, y: aotjax.where(m, x, y), (masks(3, 1), floats(4), floats(3, 4))),
    Case("setitem_mask", lambda x, m, v: _set(x, m, v), (floats(3, 4), masks(3, 4), floats())),
    # -- fill -------------------------------------------------------------------------------------------------------
    Case("fill", lambda x, v: x.clone().fill_(v), (floats(2, 3), floats())),
    Case("fill_0d", lambda x, v: x.clone().fill_(v), (floats(), floats())),
    Case("zero", lambda x: x.clone().zero_(), (floats(2, 3),)),
    Case("fill_made_inside", lambda v: aotjax.zeros(2, 3).fill_(v), (floats(),)),
]


def _examples(case: Case) -> list[list[np.ndarray]]:
    return [[gen(np.random.default_rng(100 * k + i)) for i, gen in enumerate(case.operands)] for k in range(B)]


def _per_example(examples, batched: tuple[bool, ...]) -> list[list[np.ndarray]]:
    """Each example's operands: its own where the operand is batched, example 0's where it is not."""
    return [[ex[i] if b else examples[0][i] for i, b in enumerate(batched)] for ex in examples]


def _loop(fn, examples, batched: tuple[bool, ...], cache: dict) -> list:
    """`fn` applied to each example, its flat results stacked (with their dtypes); once per set of batched operands."""
    if batched not in cache:
        outs = [flat(fn(*map(T, ops))) for ops in _per_example(examples, batched)]
        cache[batched] = [(np.stack([as_np(o[j]) for o in outs]), outs[0][j].dtype) for j in range(len(outs[0]))]
    return cache[batched]


def _assert_vmap_equals_loop(fn, examples, axes, run=aotjax.vmap, cache=None):
    """`run(fn, in_axes=axes)` on the examples stacked at `axes` equals the loop of `fn` over them."""
    batched = tuple(a is not None for a in axes)
    per_example = _per_example(examples, batched)
    args = [T(np.stack([ops[i] for ops in per_example], axis=ax)) if ax is not None else T(per_example[0][i])
            for i, ax in enumerate(axes)]
    expected = _loop(fn, examples, batched, {} if cache is None else cache)
    got = flat(run(fn, in_axes=axes)(*args))
    assert len(got) == len(expected)
    for g, (ref, dtype) in zip(got, expected):
        assert g.shape == ref.shape and g.dtype == dtype, (axes, g.aval, ref.shape)
        np.testing.assert_allclose(as_np(g), ref, rtol=1e-6, atol=1e-6, err_msg=str(axes))


def _axis_combinations(n: int) -> list[tuple]:
    """In axes for `n` operands: every combination of 0, -1 and None with up to two operands; with more, every
    combination of batched and unbatched operands, the batched ones at alternating axes (0, -1, 0, ... and
    -1, 0, -1, ...), so that each operand is batched at 0 and at -1 with every batching of the others."""
    if n <= 2:
        return [c for c in itertools.product((0, -1, None), repeat=n) if any(a is not None for a in c)]
    combos = []
    for batched in itertools.product((True, False), repeat=n):
        for first in (0, 1):
            axes, k = [], first
            for b in batched:
                axes.append((0, -1)[k % 2] if b else None)
                k += b
            if any(batched) and tuple(axes) not in combos:
                combos.append(tuple(axes))
    return combos


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_vmap_equals_loop_for_every_batching_of_the_operands(case: Case):
    examples, cache = _examples(case), {}
    for axes in _axis_combinations(len(case.operands)):
        _assert_vmap_equals_loop(case.fn, examples, axes, cache=cache)


def _jit_vmap(fn, in_axes):
    return aotjax.jit(aotjax.vmap(fn, in_axes=in_axes))


JIT_CASES = [c for c in CASES if len(c.operands) > 1]


@pytest.mark.parametrize("case", JIT_CASES, ids=repr)
def test_jit_of_vmap_equals_loop(case: Case):
    """One compile per case: the tensor batched at -1 in every other case, unbatched in the others."""
    axes = [(-1, 0, None), (None, 0, -1)][JIT_CASES.index(case) % 2]
    _assert_vmap_equals_loop(case.fn, _examples(case), axes[:len(case.operands)], _jit_vmap)


def test_a_write_through_x_of_a_batched_0d_index_writes_each_example():
    """`x[i]` with a traced 0-d index is a copy where PyTorch selects a view; a write into it is written back to `x`,
    here an `index_put` of each example's row into each example's tensor (and the caller's `x`, batched, updated)."""
    x = np.arange(24.0, dtype=FLOAT).reshape(B, 4, 2)
    i = np.array([3, 0, -1], dtype=INT)

    def f(a, k):
        row = a[k]
        row.mul_(10.0)
        return row

    loop_x = [T(x[b]) for b in range(B)]
    loop_rows = [as_np(f(loop_x[b], T(i[b]))) for b in range(B)]
    caller = T(x.copy())
    rows = aotjax.vmap(f)(caller, T(i))
    np.testing.assert_array_equal(as_np(rows), np.stack(loop_rows))
    np.testing.assert_array_equal(as_np(caller), np.stack([as_np(t) for t in loop_x]))


def test_boolean_mask_index_with_a_mask_fixed_for_every_example():
    """`x[mask]` has a shape that depends on the mask's values: with a concrete mask (the same for every example,
    captured) it is an integer index, one for the whole batch; a batched mask gives each example its own shape."""
    mask = T(np.array([True, False, True, True]))
    x = np.arange(12.0, dtype=FLOAT).reshape(B, 4)
    got = aotjax.vmap(lambda a: a[mask] * 2)(T(x))
    np.testing.assert_array_equal(as_np(got), x[:, [0, 2, 3]] * 2)
    with pytest.raises(UnsupportedError, match="boolean mask indexing.*masked_fill"):
        aotjax.vmap(lambda a, m: a[m])(T(x), T(np.ones((B, 4), bool)))


OUT_OF_RANGE = [
    ("getitem", lambda x, i: x[i], IndexError, r"getitem: index 7 is out of bounds for dimension 0 with size 4"),
    ("index_select", lambda x, i: x.index_select(0, i), RuntimeError, r"index_select: index 7 is out of bounds"),
    ("gather", lambda x, i: x.gather(0, i), RuntimeError, r"gather: index 7 is out of bounds"),
    ("index_put", lambda x, i: x.index_put((i,), T(1.0)), IndexError, r"index_put: index 7 is out of bounds"),
    ("scatter_add", lambda x, i: x.scatter_add(0, i, aotjax.ones(2)), RuntimeError, r"scatter_add: index 7 is out"),
]


@pytest.mark.parametrize("name,fn,error,message", OUT_OF_RANGE, ids=[c[0] for c in OUT_OF_RANGE])
def test_an_out_of_range_index_of_one_example_raises_as_outside_vmap(name, fn, error, message):
    """Eagerly, and compiled with checks: every example's index is checked, the error names the offending entry."""
    x = T(np.arange(4.0, dtype=FLOAT))
    index = np.array([[0, 1], [2, 7], [3, 3]], dtype=INT)
    with pytest.raises(error, match=message):
        fn(x, T(index[1]))
    for in_axes in [(None, 0), (None, -1)]:
        with pytest.raises(error, match=message + r".*\(at test_vmap_indexing"):
            aotjax.vmap(fn, in_axes=in_axes)(x, T(index if in_axes[1] == 0 else index.T))
    checked = aotjax.jit(aotjax.vmap(fn, in_axes=(None, 0)), checks=True)  # the staged check, run by the program
    with pytest.raises(error, match=message):
        checked(x, T(index))
    checked(x, T(index[[0, 2, 0]]))  # in range: no error


def test_index_add_of_integers_scales_by_alpha_in_their_dtype_as_pytorch():
    """PyTorch casts `alpha` to the tensors' dtype (2.5 scales integers by 2); the batched index's `index_put` does
    the same, so vmap agrees with the loop (the `index_add_ints` case)."""
    import torch

    x, i, s = np.zeros(3, np.int32), np.array([0, 1, 1]), np.array([1, 3, 5], np.int32)
    want = torch.tensor(x).index_add(0, torch.tensor(i), torch.tensor(s), alpha=2.5).numpy()
    np.testing.assert_array_equal(as_np(T(x).index_add(0, T(i.astype(INT)), T(s), alpha=2.5)), want)


def _loss(a, i, j):
    """Reads and writes of the indexing family, differentiable in `a`."""
    y = a[i, j] ** 2 + a.gather(1, j.unsqueeze(0).expand(4, 2)).sum(0)
    z = a.index_add(0, i, a[j] * 3.0).scatter(1, j.unsqueeze(0).expand(4, 2), a[:, :2] * a[:, 2:4])
    return y.sum() + (z.masked_fill(a > 0.5, 0.25) ** 2).sum()


def test_per_example_gradients_through_indexing_equal_a_loop_of_grad():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(B, 4, 5)).astype(FLOAT)
    i, j = rng.integers(0, 4, size=(B, 2)).astype(INT), rng.permutation(4)[:2].astype(INT)
    grad = aotjax.jit(aotjax.grad(_loss))  # NOTE: compiled, each program once (eager would compile every op)
    loop = np.stack([as_np(grad(T(x[b]), T(i[b]), T(j))) for b in range(B)])
    for got in (aotjax.jit(aotjax.vmap(aotjax.grad(_loss), in_axes=(0, 0, None)))(T(x), T(i), T(j)),
                aotjax.jit(aotjax.grad(lambda a, i: aotjax.vmap(_loss, in_axes=(0, 0, None))(a, i, T(j)).sum()))(
                    T(x), T(i))):
        np.testing.assert_allclose(as_np(got), loop, rtol=1e-5, atol=1e-5)
