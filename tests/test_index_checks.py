"""Out-of-range indices, one table of ops taking indices, in every mode: eagerly they raise what PyTorch raises
(its exception class, a message naming the op, the user's line); a compiled program by default does what XLA
does (gathers clamp, `gather` fills NaN, scatters drop), documented here by assertion; `jit(checks=True)` and
`aot(checks=True)` raise the eager error as the program runs, and leave every input as it was. Then
cross_entropy's targets and `ignore_index` against PyTorch's values."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

import jax.numpy as jnp
import numpy as np
import pytest
import torch

import aotjax
from aotjax.ops.indexing.subscripts import check_index_p

F = aotjax.nn.functional
T = aotjax.tensor
X = np.arange(12, dtype=np.float32).reshape(3, 4)
W = np.arange(8, dtype=np.float32).reshape(4, 2)  # an embedding table: 4 rows


def _rows(bad):
    return np.array([0, bad], np.int32)


def _column(bad):
    return np.array([[0], [bad], [1]], np.int32)


def _setitem(x, i):
    x[i] = 9.0
    return x


def _setitem_torch(x, i):
    x[i] = 9.0
    return x


def _dropped_rows(x, value=9.0, add=False):
    """`x[[0, 3]] = value` (or `+=`) with row 3 out of range: the write to row 0 lands, the other is dropped."""
    out = x.copy()
    out[0] = out[0] + value if add else value
    return out


def _scattered(x, add=False):
    """`x.scatter(1, [[0], [4], [1]], 9.0)`: rows 0 and 2 written, row 1's update (column 4) dropped."""
    out = x.copy()
    for r, c in ((0, 0), (2, 1)):
        out[r, c] = out[r, c] + 1.0 if add else 9.0
    return out


def _log_softmax(a):
    a = a - a.max(1, keepdims=True)
    return a - np.log(np.exp(a).sum(1, keepdims=True))


@dataclass(frozen=True)
class Case:
    """An op taking indices: `fn(x, index)` on aotjax tensors (it may write `x`), `torch_fn` the same in PyTorch;
    `index(entry)` the index holding one chosen entry; `size` of the indexed dim; `negative`: PyTorch accepts
    entries in [-size, 0); `error` and `message` (with `{}` for the entry): what eager mode raises; `clamped(x)`:
    what a compiled program gives by default with the entry `size` (XLA's semantics); `x` the operand."""

    name: str
    fn: Callable
    torch_fn: Callable
    index: Callable
    size: int
    negative: bool
    error: type
    message: str
    clamped: Callable
    x: np.ndarray = field(default_factory=lambda: X)

    def __repr__(self) -> str:
        return self.name

    def bad_entries(self) -> list[int]:
        return [self.size, -self.size - 1 if self.negative else -1]

    def good_entries(self) -> list[int]:
        return [self.size - 1, -self.size if self.negative else 0]


CASES = [
    Case("getitem", lambda x, i: x[i], lambda x, i: x[i], _rows, 3, True, IndexError,
         "getitem: index {} is out of bounds for dimension 0 with size 3", lambda x: x[[0, 2]]),  # clamped
    Case("getitem_dim1", lambda x, i: x[:, i], lambda x, i: x[:, i], _rows, 4, True, IndexError,
         "getitem: index {} is out of bounds for dimension 1 with size 4", lambda x: x[:, [0, 3]]),
    Case("setitem", _setitem, _setitem_torch, _rows, 3, True, IndexError,
         "setitem: index {} is out of bounds for dimension 0 with size 3", _dropped_rows),
    Case("index_put", lambda x, i: x.index_put((i,), T(np.float32(9))),
         lambda x, i: x.index_put((i,), torch.tensor(9.0)), _rows, 3, True, IndexError,
         "index_put: index {} is out of bounds for dimension 0 with size 3", _dropped_rows),
    Case("index_put_acc", lambda x, i: x.index_put_((i,), T(np.float32(9)), accumulate=True),
         lambda x, i: x.index_put_((i,), torch.tensor(9.0), accumulate=True), _rows, 3, True, IndexError,
         "index_put_: index {} is out of bounds for dimension 0 with size 3", lambda x: _dropped_rows(x, add=True)),
    Case("index_select", lambda x, i: x.index_select(1, i), lambda x, i: x.index_select(1, i), _rows, 4, False,
         RuntimeError, "index_select: index {} is out of bounds for dimension 1 with size 4", lambda x: x[:, [0, 3]]),
    Case("index_add", lambda x, i: x.index_add_(1, i, T(np.ones((3, 2), np.float32))),
         lambda x, i: x.index_add_(1, i, torch.ones(3, 2)), _rows, 4, False, RuntimeError,
         "index_add_: index {} is out of bounds for dimension 1 with size 4",
         lambda x: x + np.eye(4, dtype=np.float32)[0]),  # column 0 gets its 1, column 4's is dropped
    Case("gather", lambda x, i: x.gather(1, i), lambda x, i: x.gather(1, i), _column, 4, False, RuntimeError,
         "gather: index {} is out of bounds for dimension 1 with size 4",
         lambda x: np.array([[x[0, 0]], [np.nan], [x[2, 1]]], np.float32)),  # jax's gather fills NaN
    Case("scatter", lambda x, i: x.scatter_(1, i, 9.0), lambda x, i: x.scatter_(1, i, 9.0), _column, 4, False,
         RuntimeError, "scatter_: index {} is out of bounds for dimension 1 with size 4", _scattered),
    Case("scatter_add", lambda x, i: x.scatter_add(1, i, T(np.ones((3, 1), np.float32))),
         lambda x, i: x.scatter_add(1, i, torch.ones(3, 1)), _column, 4, False, RuntimeError,
         "scatter_add: index {} is out of bounds for dimension 1 with size 4", lambda x: _scattered(x, add=True)),
    Case("embedding", lambda w, i: F.embedding(i, w), lambda w, i: torch.nn.functional.embedding(i, w), _rows, 4,
         False, IndexError, "embedding: index {} is out of range for a weight of 4 rows", lambda w: w[[0, 3]], x=W),
    Case("cross_entropy", lambda x, t: F.cross_entropy(x, t, reduction="none"),
         lambda x, t: torch.nn.functional.cross_entropy(x, t, reduction="none"),
         lambda bad: np.array([0, bad, 1], np.int32), 4, False, IndexError,
         "cross_entropy: target {} is out of bounds: a class index must be in [0, 4) or equal to ignore_index",
         lambda x: -np.array([_log_softmax(x)[0, 0], np.nan, _log_softmax(x)[2, 1]], np.float32)),
]


def _torch(case: Case, index: np.ndarray):
    return case.torch_fn(torch.tensor(case.x), torch.tensor(index.astype(np.int64)))


def _match(case: Case, entry: int) -> str:
    return re.escape(case.message.format(entry)) + r".*\(at test_index_checks\.py:\d+"


# -- eager: PyTorch's errors ------------------------------------------------------------------------------
@pytest.mark.parametrize("case", CASES, ids=repr)
def test_eager_raises_where_torch_raises(case):
    for entry in case.bad_entries():
        index = case.index(entry)
        with pytest.raises(case.error) as torch_error:
            _torch(case, index)
        assert type(torch_error.value) is case.error, f"PyTorch raises {type(torch_error.value).__name__}"
        x = T(case.x)
        with pytest.raises(case.error, match=_match(case, entry)) as info:
            case.fn(x, T(index))
        assert type(info.value) is case.error
        np.testing.assert_array_equal(x.numpy(), case.x)  # nothing written


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_eager_accepts_what_torch_accepts(case):
    for entry in case.good_entries():
        index = case.index(entry)
        np.testing.assert_allclose(case.fn(T(case.x), T(index)).numpy(), _torch(case, index).numpy(), rtol=1e-6)


def test_an_out_of_range_int_raises_eagerly_and_while_tracing():
    for f in (lambda x: x[3], lambda x: x[-4], lambda x: x[:, 4]):
        with pytest.raises(IndexError, match=r"getitem: index -?\d is out of bounds for dimension \d with size"):
            f(T(X))
        with pytest.raises(IndexError, match=r"getitem: index -?\d is out of bounds"):
            aotjax.jit(f)(T(X))  # static: the trace raises
    with pytest.raises(IndexError, match=r"getitem: index 5 is out of bounds for dimension 0 with size 3"):
        T(X)[T(np.int32(5))]  # an eager 0-d index selects, as in PyTorch


def test_eager_transforms_check_traced_indices():
    """Under eager grad/functionalize the index is a tracer of a concrete value: checked all the same."""
    def f(x, i):
        return x[i].sum()

    bad = T(_rows(3))
    for transformed in (aotjax.grad(f), aotjax.functionalize(f), lambda x, i: aotjax.jvp(f, (x, i), (x, i))):
        with pytest.raises(IndexError, match=_match(CASES[0], 3)):
            transformed(T(X), bad)


# -- compiled, by default: XLA's semantics -------------------------------------------------------------------
@pytest.mark.parametrize("case", CASES, ids=repr)
def test_jit_by_default_clamps_gathers_and_drops_scatters(case):
    out = aotjax.jit(case.fn)(T(case.x), T(case.index(case.size)))
    np.testing.assert_allclose(out.numpy(), case.clamped(case.x.copy()), rtol=1e-6)


def test_jit_by_default_counts_a_negative_index_from_the_end_where_torch_rejects_it():
    x, minus_one = T(X), T(_rows(-1))
    with pytest.raises(RuntimeError, match="index_select: index -1 is out of bounds"):
        x.index_select(1, minus_one)
    np.testing.assert_array_equal(aotjax.jit(lambda x, i: x.index_select(1, i))(x, minus_one).numpy(), X[:, [0, 3]])


def test_programs_hold_checks_only_when_asked():
    def f(x, i):
        return x[i]

    args = (T(X), T(_rows(1)))
    names = [e.primitive.name for e in aotjax.jit(f).lower(*args).jaxpr.eqns]
    assert names == ["index"]
    assert [e.primitive.name for e in aotjax.make_jaxpr(f)(*args).eqns] == ["index"]
    checked = aotjax.jit(f, checks=True).lower(*args).jaxpr
    assert [e.primitive.name for e in checked.eqns] == ["check_index", "index"]
    assert "c:i32[2] = check_index[lo=-3 hi=3 error=IndexError] b" in checked.pretty()
    inlined = aotjax.make_jaxpr(aotjax.jit(f, checks=True))(*args)  # a checked jit inlined keeps its checks
    assert [e.primitive.name for e in inlined.eqns] == ["check_index", "index"]


# -- compiled, checked: the eager error, inputs untouched ---------------------------------------------------
def _eager_error(case: Case, entry: int) -> BaseException:
    with pytest.raises(case.error) as info:
        case.fn(T(case.x), T(case.index(entry)))
    return info.value


@pytest.mark.parametrize("case", CASES, ids=repr)
@pytest.mark.parametrize("transform", ["jit", "aot"])
def test_checked_programs_raise_the_eager_error(case, transform):
    compiled = aotjax.jit(case.fn, checks=True) if transform == "jit" else aotjax.aot(case.fn, checks=True)
    for entry in case.good_entries():  # no false alarm: the eager result
        index = case.index(entry)
        np.testing.assert_allclose(compiled(T(case.x), T(index)).numpy(), _torch(case, index).numpy(), rtol=1e-6)
    for entry in case.bad_entries():
        x = T(case.x)
        with pytest.raises(case.error) as info:
            compiled(x, T(case.index(entry)))
        assert type(info.value) is case.error
        assert str(info.value) == str(_eager_error(case, entry))  # class, message and source line
        np.testing.assert_array_equal(x.numpy(), case.x)  # a failed call writes nothing back
    assert compiled.trace_count == 1  # one program served every index


@pytest.mark.parametrize("case", [c for c in CASES if c.name in ("setitem", "index_put_acc", "index_add", "scatter")],
                         ids=repr)
def test_a_failed_check_gives_donated_inputs_back(case):
    f = aotjax.jit(case.fn, checks=True)
    x = T(case.x)
    before = x._storage.base
    with pytest.raises(case.error):
        f(x, T(case.index(case.size)))
    assert before.is_deleted()  # donated: the program wrote into its buffer ...
    np.testing.assert_array_equal(x.numpy(), case.x)  # ... and gave back the value it had
    good = case.index(case.size - 1)
    expected = _torch(case, good).numpy()
    before = x._storage.base
    f(x, T(good))
    assert before.is_deleted()  # still donated when the checks pass
    np.testing.assert_allclose(x.numpy(), expected, rtol=1e-6)


def test_grad_of_checked_aot_raises_in_the_forward():
    f = aotjax.aot(lambda x, i: (x[i] * x[i]).sum(), checks=True)
    x = T(X)
    with pytest.raises(IndexError, match=r"getitem: index 3 is out of bounds .*test_index_checks\.py"):
        aotjax.grad(f)(x, T(_rows(3)))
    np.testing.assert_allclose(aotjax.grad(f)(x, T(_rows(2))).numpy(),
                               np.where(np.arange(3)[:, None] % 2 == 0, 2 * X, 0), rtol=1e-6)


def test_checks_follow_the_global_config_and_key_the_cache(monkeypatch):
    f = aotjax.jit(lambda x, i: x[i])
    args = (T(X), T(_rows(3)))
    np.testing.assert_array_equal(f(*args).numpy(), X[[0, 2]])
    monkeypatch.setattr(aotjax.config, "checks", True)
    with pytest.raises(IndexError, match="getitem: index 3 is out of bounds"):
        f(*args)
    assert f.trace_count == 2
    np.testing.assert_array_equal(aotjax.jit(lambda x, i: x[i], checks=False)(*args).numpy(), X[[0, 2]])


def test_checked_stages_and_eval():
    f = aotjax.jit(lambda x, i: x[i] * 2, checks=True)
    args = (T(X), T(_rows(3)))
    lowered = f.lower(*args)
    assert "check_index" in str(lowered) and "stablehlo" in lowered.as_text()
    with pytest.raises(IndexError, match="getitem: index 3 is out of bounds"):
        lowered.compile()(*args)
    with pytest.raises(IndexError, match="getitem: index 3 is out of bounds"):
        lowered.eval(*args)  # the reference interpreter checks eagerly
    np.testing.assert_array_equal(lowered.compile()(T(X), T(_rows(2))).numpy(), X[[0, 2]] * 2)


def test_check_index_is_an_identity_with_a_zero_tangent():
    assert check_index_p.recompute.value == "cheap"
    i = T(_rows(2))
    out, tangent = aotjax.jvp(lambda x, i: x[i].sum(), (T(X), i), (T(np.ones_like(X)), i))
    assert float(out) == X[[0, 2]].sum() and float(tangent) == 8.0
    index = aotjax.to_jax(aotjax.jit(lambda x, i: x[i], checks=True).lower(T(X), i).jaxpr)
    out = index(jnp.asarray(X), jnp.asarray(_rows(5)))[0]
    np.testing.assert_array_equal(np.asarray(out), X[[0, 2]])  # to_jax: no checks, XLA's clamp


# -- cross_entropy's targets against PyTorch --------------------------------------------------------------
CE_LOGITS = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)


@pytest.mark.parametrize("target,ignore_index", [
    ([0, -100, 3, 1, -100], -100),  # the default: ignored entries add nothing and are not counted by the mean
    ([0, 2, 3, 2, 1], 2),  # a class as ignore_index
    ([0, 7, 3, 7, 1], 7),  # an ignore_index out of range: those entries are ignored, not out of bounds
    ([-1, -1, 3, 0, 1], -1),
    ([-100, -100, -100, -100, -100], -100),  # all ignored: the mean is 0 / 0
])
@pytest.mark.parametrize("kwargs", [{}, {"reduction": "sum"}, {"reduction": "none"}, {"label_smoothing": 0.2},
                                    {"weight": True}, {"weight": True, "label_smoothing": 0.1, "reduction": "sum"}],
                         ids=str)
def test_cross_entropy_ignore_index_matches_torch(target, ignore_index, kwargs):
    kwargs = dict(kwargs)
    weight = np.array([0.5, 1.0, 2.0, 1.5], np.float32) if kwargs.pop("weight", False) else None
    expected = torch.nn.functional.cross_entropy(
        torch.tensor(CE_LOGITS), torch.tensor(target), None if weight is None else torch.tensor(weight),
        ignore_index=ignore_index, **kwargs).numpy()
    out = F.cross_entropy(T(CE_LOGITS), T(np.array(target, np.int32)), None if weight is None else T(weight),
                          ignore_index=ignore_index, **kwargs)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-6)
    jitted = aotjax.jit(lambda x, t: F.cross_entropy(x, t, None if weight is None else T(weight),
                                                     ignore_index=ignore_index, **kwargs), checks=True)
    np.testing.assert_allclose(jitted(T(CE_LOGITS), T(np.array(target, np.int32))).numpy(), expected, rtol=1e-5,
                               atol=1e-6)


@pytest.mark.parametrize("target", [[-1, 0, 1, 2, 3], [0, 4, 1, 2, 3], [0, 1, 2, 3, -5]])
def test_cross_entropy_targets_out_of_range_raise_like_torch(target):
    with pytest.raises(IndexError, match="Target .* is out of bounds"):
        torch.nn.functional.cross_entropy(torch.tensor(CE_LOGITS), torch.tensor(target))
    bad = next(t for t in target if not 0 <= t < 4)
    for reduction in ("mean", "sum", "none"):
        with pytest.raises(IndexError, match=rf"cross_entropy: target {bad} is out of bounds: a class index must be "
                                             rf"in \[0, 4\) or equal to ignore_index \(-100\)"):
            F.cross_entropy(T(CE_LOGITS), T(np.array(target, np.int32)), reduction=reduction, label_smoothing=0.1)
    with pytest.raises(IndexError, match=rf"cross_entropy: target {bad} is out of bounds"):
        F.cross_entropy(T(CE_LOGITS[0]), T(np.int32(bad)))  # unbatched


# -- inside loop bodies --------------------------------------------------------------------------------------
def _scan_rows(x, rows):
    """Add `x[rows[i]]` into row i of `x`'s copy, one row per scan iteration; the carry counts iterations."""
    def body(count, r):
        x[r].add_(1.0)
        return count + 1, x[r].sum()
    return aotjax.scan(body, T(np.int32(0)), rows)


def test_an_index_out_of_range_in_a_scan_body_raises_eagerly():
    x = T(X)
    with pytest.raises(IndexError, match=r"index 5 is out of bounds .*test_index_checks\.py"):
        _scan_rows(x, T(np.array([0, 5, 1], np.int32)))


def test_a_checked_program_raises_for_any_iteration_and_gives_inputs_back():
    f = aotjax.jit(_scan_rows, checks=True)
    x = T(X)
    with pytest.raises(IndexError, match=r"index 3 is out of bounds .*test_index_checks\.py"):
        f(x, T(np.array([0, 1, 3], np.int32)))  # only the last iteration fails
    np.testing.assert_array_equal(x.numpy(), X)  # the writes of the earlier iterations are not kept
    count, sums = f(x, T(np.array([0, 2, 0], np.int32)))
    expected = X.copy()
    expected[[0, 2]] += [[2.0], [1.0]]
    np.testing.assert_array_equal(x.numpy(), expected)
    assert int(count) == 3
    np.testing.assert_allclose(sums.numpy(), [X[0].sum() + 4, X[2].sum() + 4, X[0].sum() + 8])
