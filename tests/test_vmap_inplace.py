"""vmap of every in-place variant in the op table (tests/op_records.py, the records with an `inplace` form) on a
batched `self`, the other operands batched or not: the result and the caller's `self` afterwards equal a Python loop
of the in-place op on a copy of each example, eagerly and under `jit(vmap(...))`; where the op would have to grow
`self` (broadcasting it), vmap raises what the op raises outside vmap and leaves `self` as it was."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import aotjax
from tests.op_records import Family, OpRecord, as_np, records, sample

pytestmark = pytest.mark.slow  # NOTE: an exhaustive sweep of the op table: once, in jax's default mode

T = aotjax.tensor
B = 3  # examples
INPLACE = records(inplace=True)


def _examples(row: OpRecord, shapes: tuple) -> list[list[np.ndarray]]:
    dtype = row.dtypes[0]
    return [[sample(row.domain_of(i), s, dtype, seed=i + 7 * k) for i, s in enumerate(shapes)] for k in range(B)]


def _loop(row: OpRecord, per_example) -> tuple[list, list] | type:
    """The in-place op on a copy of each example: (results, selves afterwards), or the exception class it raises."""
    results, selves = [], []
    for ops in per_example:
        args = [T(a.copy()) for a in ops]
        try:
            out = row.inplace(*args)
        except Exception as e:  # noqa: BLE001 - vmap must raise the same
            return type(e)
        results.append(as_np(out))
        selves.append(as_np(args[0]))
    return results, selves


def _check(row: OpRecord, examples, axes, run) -> None:
    per_example = [[ex[i] if ax is not None else examples[0][i] for i, ax in enumerate(axes)] for ex in examples]
    stacked = [np.stack([ops[i] for ops in per_example], axis=ax) if ax is not None else per_example[0][i]
               for i, ax in enumerate(axes)]
    args = [T(a.copy()) for a in stacked]
    f = run(lambda self, *others: row.inplace(self, *others), in_axes=axes)
    expected = _loop(row, per_example)
    if isinstance(expected, type):
        with pytest.raises(expected):
            f(*args)
        np.testing.assert_array_equal(as_np(args[0]), stacked[0], err_msg=f"{axes}: self written by a failed op")
        return
    results, selves = expected
    out = f(*args)
    assert out.dtype == results[0].dtype and args[0].dtype == selves[0].dtype, axes
    np.testing.assert_allclose(as_np(out), np.stack(results), rtol=1e-6, atol=1e-6, err_msg=f"{axes}: result")
    np.testing.assert_allclose(as_np(args[0]), np.stack(selves, axis=axes[0]), rtol=1e-6, atol=1e-6,
                               err_msg=f"{axes}: the caller's self")


def _jit_vmap(f, in_axes):
    return aotjax.jit(aotjax.vmap(f, in_axes=in_axes))


@pytest.mark.parametrize("row", INPLACE, ids=repr)
def test_inplace_on_a_batched_self_equals_a_loop(row: OpRecord):
    # NOTE: a record whose `self` the others broadcast (`add` of [3, 1] and [4]) raises; then again with a `self` of
    # the broadcast shape, which it fits
    shapes_list = [row.shapes]
    if row.family is Family.BINARY:
        shapes_list.append((np.broadcast_shapes(*row.shapes), *row.shapes[1:]))
    for shapes in dict.fromkeys(shapes_list):
        examples = _examples(row, shapes)
        for self_axis, others in itertools.product((0, -1), itertools.product((0, None), repeat=row.arity - 1)):
            _check(row, examples, (self_axis, *others), aotjax.vmap)
    _check(row, examples, (-1,) + (0,) * (row.arity - 1), _jit_vmap)
